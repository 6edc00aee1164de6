// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * JSON sink ("type": "json"): JSON Lines to a file, or to stdout with path
 * "-". One record per line.
 *
 * Line format (field names are stable; the statsd and prometheus sinks
 * mirror them):
 *
 *   {"metric":"direct_reclaim_latency","atom":"DirectReclaimLatency",
 *    "atom_id":100001,"unit":"us","type":"histogram",
 *    "start_ns":1714557600000000000,"end_ns":...,  (wall, epoch ns)
 *    "start":"2024-05-01T10:00:00.000000000Z","end":"...",   (wall, UTC)
 *    "start_s":1714557600,"end_s":...,      (wall, whole epoch seconds)
 *    "start_boot_ns":<CLOCK_BOOTTIME ns>,"end_boot_ns":<...>,
 *    "boot_id":"...","map_id":12,"seq":7,
 *    "dims":{"process_state":"STATE_FOREGROUND","uid":1000},
 *    "dims_raw":{"process_state":4,"uid":1000},
 *    "histogram":{"scheme":"log2","counts":[32 ints],
 *                 "le":[1,2,4,...,1073741824,"+Inf"],"count":N,"sum":S}}
 *
 * - atom is null when the metric has none.
 * - dims: the label when one names the value, else the integer; dims_raw:
 *   always the integer. So a dimension carries both forms, and a reader that
 *   wants one shape reads dims_raw.
 * - histogram: counts are the window's deltas; le[k] is the upper bound of
 *   bucket k under the declared scheme ("+Inf" for the last), so a reader
 *   needs no knowledge of the convention. "sum" only when the map has one;
 *   "linear_min"/"linear_step" only for scheme "linear". Schemes: "log2",
 *   "log2_floor", "linear".
 * - type "counter": "value" (the window's delta) and "total" (cumulative).
 * - type "gauge": "value".
 * - type "event": "fields" (label, string or integer per field, as dims)
 *   and "fields_raw" (the integer of every integer field).
 *
 * I/O: submit() formats every record completely into the instance's bounded
 * queue (one chunk per submitted batch) before any byte is written; lines
 * are appended (O_APPEND) with writev on the daemon's writer thread
 * (core/base/worker.h), so the loop never blocks on the disk. The fsync (fsync
 * on) follows in the same job, and the completion waits for the loop's next
 * wakeup unless something waits behind it (more queued lines, a close): an
 * idle round costs no wakeup of its own. One write at a time is in flight, and it takes every
 * queued chunk (up to MAX_IOV) as one vectored write: a write cycle drains
 * what piled up while the previous write ran, instead of one batch per cycle
 * (which, at saturation, let the queue fill and drop lines). When the
 * queue would exceed max_queue_bytes the NEWEST records are dropped and
 * counted; queued lines are never dropped, except on close after the
 * timeout (counted too). A failed or short write (disk full) counts an
 * error and retries on a timer with capped, jittered exponential backoff.
 * A short write to a regular file leaves the file ending in part of a
 * line: that part is cut off again (ftruncate) before anything else, and
 * the whole line stays queued, so the file never ends in a torn line, not
 * even while the disk stays full or after close. (stdout and other files
 * that cannot be truncated get the rest of the line written first
 * instead.) A file opened at start that ends in a partial line (a previous
 * writer killed mid-line) is cut back to its last whole line.
 *
 * Close is bounded: at the close timeout the sink reports closed with
 * everything not yet written counted as dropped, even while a write,
 * rotation or compression is in flight; that work then finishes on the
 * writer thread (keeping the loop alive) and the last of it frees the sink.
 *
 * Rotation (rotate_bytes): before a write that would take the file past
 * rotate_bytes, on a line boundary only, the writer thread renames
 * file.(keep-1) -> file.keep, ..., file -> file.1 (each rename atomic) and
 * opens a new file; with compress, file.1 then becomes file.1.gz (written
 * to a temp name, fsynced, renamed; on libuv's pool, so a long compression
 * does not hold up the writes) and file.1 is removed only after that
 * succeeded. Lines never span two files.
 *
 * Options: path (required, "-" = stdout), fsync (bool: fsync after each
 * write that completed a batch), max_queue_bytes (size, default 4 MiB), rotate_bytes (size),
 * keep (1..100, default 5), compress (bool). Sizes are integers (bytes) or
 * strings with a K/M/G suffix ("64K", "10MiB").
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <zlib.h>

#include "sink.h"
#include "fault.h"
#include "fsutil.h"
#include "json_format.h"
#include "json_recover.h"
#include "log.h"
#include "batchbuf.h"
#include "sink_close.h"
#include "textbuf.h"
#include "worker.h"

#define DEFAULT_QUEUE_BYTES (4u << 20)
#define DEFAULT_KEEP 5
#define MAX_KEEP 100
#define MAX_LINE (64u << 10)
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 5000
/* Queued batches written by one writev; more wait for the next write
 * cycle. */
#define MAX_IOV 256

/* One submitted batch: whole lines, written from off on. */
struct chunk {
	struct chunk *next;
	size_t len, off;
	size_t cap; /* bytes allocated, header included (spare reuse) */
	uint32_t n_lines, lines_done;
	uint64_t mark; /* durability mark of the records up to here (0: none) */
	char data[];
};
#define CHUNK_HDR offsetof(struct chunk, data)

enum io_state {
	IO_IDLE,
	IO_WRITING, /* and its fsync, in the same job */
	IO_ROTATING,
	IO_TRIMMING,
	IO_BACKOFF,
};

struct json_sink {
	uv_loop_t *loop;
	char *name, *path;
	bool to_stdout, fsync_batches, compress;
	uint64_t max_queue_bytes, rotate_bytes;
	unsigned keep;

	uv_file fd;
	uint64_t file_size;
	/* A regular file: a torn tail can be cut off with ftruncate. */
	bool can_trim;
	/* Bytes of a torn line at the end of the file still to cut off. */
	uint64_t trim_bytes;
	/* The file fd writes to, to notice it was renamed or deleted at path
	 * (logrotate); reopen_wanted: SIGUSR1 / ktelemetryctl reopen.
	 * open_err: why path cannot be opened now (0: it can). */
	dev_t dev;
	ino_t ino;
	bool reopen_wanted;
	int open_err;

	struct chunk *head, *tail;
	uint64_t queued_bytes;

	enum io_state state;
	/* The write, cut or rotation on the writer thread (one at a time). */
	struct ktel_worker *worker;
	struct ktel_job io_job;
	struct iovec iov[MAX_IOV];
	unsigned n_iov;
	size_t write_bytes;    /* what the write in flight asked for */
	unsigned plan_batches; /* batches it completes when whole */
	bool plan_acks;        /* and makes a mark durable that is not yet acked */
	ssize_t write_res;     /* bytes, or -errno */
	int sync_res;          /* fsync: 0, -errno, or 1 when not tried */
	uv_timer_t retry_timer;
	/* Submits start no write: the queue is written once per loop turn,
	 * just before the loop sleeps, so the batches one round of pulls
	 * submits (one per metric) share one write and one completion. */
	uv_prepare_t kick_prepare;
	bool kick_pending;
	uint64_t backoff_ms;
	uint64_t rng; /* xorshift state for the backoff jitter */

	/* Compression on libuv's pool. */
	uv_work_t gz_work;
	int rot_err, gz_err, trim_err;
	uint64_t trimmed_size;
	uv_file new_fd;
	bool compressing;

	/* The batch being formatted (bb.text), a chunk once done, and
	 * written chunks kept for the next batches (batchbuf.h). */
	struct ktel_batchbuf bb;
	struct ktel_json_strs strs; /* its repeated strings, escaped once */
	struct ktel_sink_stats st;

	/* Durability (sink.h ops durable/mark): the highest mark of the
	 * chunks written so far, the highest reported durable. */
	ktel_sink_durable_cb durable_cb;
	void *durable_ctx;
	uint64_t written_mark, acked_mark;

	/* finishing: reported closed (or about to); no new work starts.
	 * reported: done() was called; the sink is freed once nothing is in
	 * flight. */
	struct ktel_sink_close close;
	bool finishing, reported;
	int handles_open;
};

/* ---- I/O state machine ---- */

static void kick(struct json_sink *s);
static void maybe_finish(struct json_sink *s);
static void maybe_free(struct json_sink *s);
static void start_trim(struct json_sink *s);

/* A job of this sink is on the writer thread or libuv's pool: the sink's
 * memory (job, queued chunks) must outlive it. */
static bool busy(const struct json_sink *s)
{
	return (s->state != IO_IDLE && s->state != IO_BACKOFF) || s->compressing;
}

static bool at_line_start(const struct chunk *c)
{
	return c->off == 0 || c->data[c->off - 1] == '\n';
}

/* A written chunk: kept as a spare for the next batch, or freed. */
static void chunk_release(struct json_sink *s, struct chunk *c)
{
	ktel_batchbuf__release(&s->bb, c, c->cap, c->cap <= s->max_queue_bytes);
}

/* Mark n bytes from the head of the queue written, across as many chunks
 * as they cover; count the lines they complete and free finished chunks.
 * Returns how many chunks (whole batches) that finished. */
static unsigned advance(struct json_sink *s, size_t n)
{
	unsigned finished = 0;

	s->file_size += n;
	while (n && s->head) {
		struct chunk *c = s->head;
		size_t take = c->len - c->off < n ? c->len - c->off : n;
		const char *p = c->data + c->off, *end = p + take;

		if (take == c->len - c->off) {
			/* The rest of the chunk: its lines are known. */
			s->st.sent += c->n_lines - c->lines_done;
			c->lines_done = c->n_lines;
		} else {
			while ((p = memchr(p, '\n', end - p))) {
				p++;
				c->lines_done++;
				s->st.sent++;
			}
		}
		c->off += take;
		n -= take;
		if (c->off < c->len)
			break;
		s->head = c->next;
		if (!s->head)
			s->tail = NULL;
		s->queued_bytes -= c->len;
		if (c->mark > s->written_mark)
			s->written_mark = c->mark;
		chunk_release(s, c);
		finished++;
	}
	return finished;
}

static void on_retry(uv_timer_t *t)
{
	struct json_sink *s = t->data;

	s->state = IO_IDLE;
	kick(s);
}

/* Between half the backoff and all of it, at random ("equal jitter", as
 * the statsd sink does), so daemons that met one full disk or one NFS
 * outage do not retry in step. */
static uint64_t jittered(struct json_sink *s)
{
	uint64_t half = s->backoff_ms / 2;

	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 7;
	s->rng ^= s->rng << 17;
	return half + (half ? s->rng % (half + 1) : 0) + (s->backoff_ms & 1);
}

/* The backoff doubles from BACKOFF_MIN_MS up to BACKOFF_MAX_MS; each delay
 * is a jittered share of it, so never longer than the cap. */
static void retry_later(struct json_sink *s)
{
	s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : BACKOFF_MIN_MS;
	if (s->backoff_ms > BACKOFF_MAX_MS)
		s->backoff_ms = BACKOFF_MAX_MS;
	s->state = IO_BACKOFF;
	uv_timer_start(&s->retry_timer, on_retry, jittered(s), 0);
}

/* What is written (and fsynced, with fsync on) is durable: say so. */
static void ack_durable(struct json_sink *s)
{
	if (!s->durable_cb || s->written_mark <= s->acked_mark || s->reported)
		return;
	s->acked_mark = s->written_mark;
	s->durable_cb(s->durable_ctx, s->acked_mark);
}

/* Of the first n bytes of the queue (what a write took), the bytes up to
 * and including the last '\n': the whole lines among them. */
static size_t whole_prefix(const struct json_sink *s, size_t n)
{
	const struct chunk *c;
	size_t seen = 0, whole = 0;

	for (c = s->head; c && seen < n; c = c->next) {
		size_t take = c->len - c->off < n - seen ? c->len - c->off : n - seen;
		const char *p = c->data + c->off, *nl = memrchr(p, '\n', take);

		if (nl)
			whole = seen + (nl - p) + 1;
		seen += take;
	}
	return whole;
}

/*
 * A short write to a regular file (disk full, RLIMIT_FSIZE): the lines it
 * completed are written; the part of a line after them is cut off the
 * file again, and that line stays queued whole, to be written again after
 * the backoff. The error is counted once the file is whole again, so a
 * reader of the stats sees it with the file cut back. Once the sink
 * reported closed only the cut is left to do.
 */
static void short_write(struct json_sink *s, size_t res)
{
	size_t whole = whole_prefix(s, res);

	s->trim_bytes = res - whole;
	if (!s->finishing)
		advance(s, whole);
	if (s->trim_bytes) {
		start_trim(s);
		return;
	}
	if (s->finishing) {
		maybe_free(s);
		return;
	}
	s->st.errors++;
	retry_later(s);
}

/* On the writer thread: the planned writev and, when it completed a batch
 * and fsync is on, the fsync that makes it durable. A failed or short
 * write is retried after a backoff: the loop hears of it at once. */
static bool write_work(struct ktel_job *job)
{
	struct json_sink *s = job->data;
	ssize_t n;

	do
		n = writev(s->fd, s->iov, s->n_iov);
	while (n < 0 && errno == EINTR);
	s->write_res = n < 0 ? -errno : n;
	s->sync_res = 1;
	if (n <= 0 || (size_t)n < s->write_bytes)
		return true;
	if (!s->plan_batches)
		return false;
	ktel_fault__point("written");
	if (!s->fsync_batches || s->to_stdout)
		return false;
	s->sync_res = fsync(s->fd) ? -errno : 0;
	if (s->sync_res)
		return true;
	ktel_fault__point("synced");
	return false;
}

static void on_write(struct ktel_job *job)
{
	struct json_sink *s = job->data;
	ssize_t res = s->write_res;

	s->state = IO_IDLE;
	if (s->can_trim && res > 0 && (size_t)res < s->write_bytes) {
		short_write(s, res);
		return;
	}
	if (s->finishing) {
		/* Reported closed: the lines were counted dropped already. */
		maybe_free(s);
		return;
	}
	/* Zero bytes for a non-empty write would spin: treat as an error. */
	if (res <= 0) {
		s->st.errors++;
		retry_later(s);
		return;
	}
	s->backoff_ms = 0;
	advance(s, res);
	/* Without fsync a write survives the daemon's death (not the
	 * machine's): durable in that sense. With it, the fsync says. */
	if (s->sync_res < 0)
		s->st.errors++;
	else if (s->sync_res == 0 || !s->fsync_batches)
		ack_durable(s);
	kick(s);
}

/* Bytes at the start of p[0..left) that are whole lines within budget. */
static size_t whole_lines(const char *p, size_t left, size_t budget)
{
	const char *nl;
	size_t n = 0;

	while (n < left && (nl = memchr(p + n, '\n', left - n)) && (size_t)(nl - p) + 1 <= budget)
		n = nl - p + 1;
	return n;
}

static size_t line_len(const char *p, size_t left)
{
	return (const char *)memchr(p, '\n', left) - p + 1;
}

/* iov[i]: take bytes of c from its offset on; counts the batch when that
 * is the rest of it. */
static void put_iov(struct json_sink *s, unsigned i, const struct chunk *c, size_t take)
{
	s->iov[i] = (struct iovec){.iov_base = (char *)c->data + c->off, .iov_len = take};
	if (take != c->len - c->off)
		return;
	s->plan_batches++;
	if (s->durable_cb && c->mark > s->acked_mark)
		s->plan_acks = true;
}

/*
 * Fill s->iov with what to write now, from the head of the queue on: every
 * queued batch (up to MAX_IOV) in one vectored write, so a write cycle
 * drains the queue instead of one batch. With rotation, only whole lines
 * that fit the file's budget. Sets *ret_n to the buffers used and returns
 * the bytes; 0 means rotate first.
 */
static size_t plan_write(struct json_sink *s, unsigned *ret_n)
{
	s->plan_batches = 0;
	s->plan_acks = false;
	const struct chunk *c = s->head;
	size_t total = 0, budget, left, take;
	unsigned n = 0;

	if (s->rotate_bytes && !at_line_start(c)) {
		/* Finish the line begun before a short write to a file that
		 * cannot be truncated, alone. */
		take = line_len(c->data + c->off, c->len - c->off);
		put_iov(s, n++, c, take);
		*ret_n = n;
		return take;
	}
	budget = s->file_size < s->rotate_bytes ? s->rotate_bytes - s->file_size : 0;
	for (; c && n < MAX_IOV; c = c->next) {
		left = c->len - c->off;
		take = s->rotate_bytes ? whole_lines(c->data + c->off, left, budget - total) : left;
		if (!take)
			break;
		put_iov(s, n++, c, take);
		total += take;
		if (take < left) /* the next line belongs to the next file */
			break;
	}
	if (!total && s->file_size == 0) {
		/* One line larger than a whole file: alone in a new file. */
		c = s->head;
		take = line_len(c->data + c->off, c->len - c->off);
		put_iov(s, n++, c, take);
		total = take;
	}
	*ret_n = n;
	return total;
}

static void start_rotate(struct json_sink *s);

static void remember_file(struct json_sink *s, const struct stat *st)
{
	s->dev = st->st_dev;
	s->ino = st->st_ino;
	s->can_trim = S_ISREG(st->st_mode);
	s->file_size = st->st_size;
}

/*
 * Before a write: is path still the file fd writes to? When it was renamed
 * away (logrotate), deleted, or a reopen was asked for, open path again (a
 * new file when there is none). One stat per write cycle, on the loop: a
 * write cycle takes every queued batch. False when path cannot be opened
 * (its directory is gone): counted, said once, retried after the backoff;
 * lines stay queued up to max_queue_bytes, newer ones are dropped and
 * counted, as for a full disk.
 */
static bool ensure_path(struct json_sink *s)
{
	struct stat st;
	int fd, e;

	if (s->to_stdout)
		return true;
	if (!s->reopen_wanted && !s->open_err && stat(s->path, &st) == 0 && st.st_dev == s->dev &&
	    st.st_ino == s->ino)
		return true;
	fd = open(s->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	if (fd < 0 || fstat(fd, &st)) {
		e = errno;
		if (fd >= 0)
			close(fd);
		s->st.errors++;
		if (s->open_err != e)
			ktel_log(KTEL_LOG_ERROR,
				 "sink %s: cannot open %s: %s; lines are kept "
				 "up to max_queue_bytes, then dropped and counted, until it can",
				 s->name, s->path, strerror(e));
		s->open_err = e;
		return false;
	}
	if (s->open_err)
		ktel_log(KTEL_LOG_INFO, "sink %s: %s open again", s->name, s->path);
	else if (s->reopen_wanted)
		ktel_log(KTEL_LOG_INFO, "sink %s: reopened %s", s->name, s->path);
	else
		ktel_log(KTEL_LOG_INFO,
			 "sink %s: %s was moved or deleted: writing to a new "
			 "file at that path",
			 s->name, s->path);
	close(s->fd);
	s->fd = fd;
	remember_file(s, &st);
	s->reopen_wanted = false;
	s->open_err = 0;
	s->st.reconnects++;
	return true;
}

/* Hand a write, cut or rotation to the writer thread. Urgent: someone
 * waits for its completion (a close, lines behind it). */
static void queue_io(struct json_sink *s, ktel_work_fn work, ktel_job_fn done, bool urgent)
{
	s->io_job.data = s;
	ktel_worker__queue(s->worker, &s->io_job, work, done, urgent || s->close.closing);
}

static void kick(struct json_sink *s)
{
	unsigned nbufs;

	if (s->state != IO_IDLE || s->finishing)
		return;
	/* A torn tail goes before anything else is appended after it. */
	if (s->trim_bytes) {
		start_trim(s);
		return;
	}
	if (!s->head) {
		maybe_finish(s);
		return;
	}
	if (!ensure_path(s)) {
		retry_later(s);
		return;
	}
	s->write_bytes = plan_write(s, &nbufs);
	if (s->write_bytes == 0) {
		if (!s->compressing)
			start_rotate(s);
		return; /* gz_done kicks again */
	}
	s->n_iov = nbufs;
	s->state = IO_WRITING;
	/* The chunks stay queued until on_write. Its completion is waited for
	 * when more is queued than it takes, or when it acks a mark: the
	 * state's save waits for that ack (core/daemon/daemon_state.c), and a state
	 * saved a round late would widen what a crash cuts out of the file. */
	queue_io(s, write_work, on_write,
		 s->plan_acks || s->write_bytes < s->queued_bytes - s->head->off);
}

/* ---- cutting a torn tail off (worker thread) ---- */

/* Cut trim_bytes off the end of the file. From the file's size, not from
 * file_size: the bytes to cut are the last ones whatever else changed the
 * file, and a file shortened behind our back is never extended. */
static bool trim_work(struct ktel_job *job)
{
	struct json_sink *s = job->data;
	struct stat st;
	off_t size;

	if (fstat(s->fd, &st)) {
		s->trim_err = -errno;
		return true;
	}
	size = (uint64_t)st.st_size > s->trim_bytes ? st.st_size - (off_t)s->trim_bytes : 0;
	s->trim_err = ftruncate(s->fd, size) ? -errno : 0;
	s->trimmed_size = size;
	return s->trim_err != 0;
}

static void trim_done(struct ktel_job *job)
{
	struct json_sink *s = job->data;
	bool ok = s->trim_err == 0;

	s->state = IO_IDLE;
	if (ok) {
		s->trim_bytes = 0;
		s->file_size = s->trimmed_size;
	}
	if (s->finishing) {
		maybe_free(s);
		return;
	}
	/* A failed cut counts an error; the short write is counted when its
	 * cut succeeds. */
	s->st.errors++;
	/* A short write means the disk is full: wait before the next one
	 * (or before trying the cut again). */
	retry_later(s);
}

/* Lines wait behind the cut: urgent. */
static void start_trim(struct json_sink *s)
{
	s->state = IO_TRIMMING;
	queue_io(s, trim_work, trim_done, true);
}

/* ---- rotation (writer thread; compression on libuv's pool) ---- */

/* The names are the config's (config.h), which keeps other paths off them. */
static int rotated_name(char *buf, size_t size, const char *path, unsigned k, const char *ext)
{
	return ktel_rotated_name(buf, size, path, k, ext);
}

static int rename_if_exists(const char *from, const char *to)
{
	if (rename(from, to) && errno != ENOENT)
		return -errno;
	return 0;
}

static void fsync_dir(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int fd;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path + (slash == path)), path);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

/* file.(keep-1) -> file.keep ... file -> file.1, then a new file. Both the
 * plain and the .gz form move, so a compression that failed earlier never
 * leaves a file behind. */
static bool rotate_work(struct ktel_job *job)
{
	struct json_sink *s = job->data;
	char from[PATH_MAX], to[PATH_MAX];
	static const char *const exts[] = {"", ".gz"};
	int ret = 0;

	s->new_fd = -1;
	for (size_t e = 0; e < 2; e++) {
		if (rotated_name(to, sizeof(to), s->path, s->keep, exts[e]))
			goto name;
		unlink(to);
	}
	for (unsigned k = s->keep - 1; k >= 1; k--) {
		for (size_t e = 0; e < 2; e++) {
			if (rotated_name(from, sizeof(from), s->path, k, exts[e]) ||
			    rotated_name(to, sizeof(to), s->path, k + 1, exts[e]))
				goto name;
			ret = rename_if_exists(from, to);
			if (ret)
				goto out;
		}
	}
	if (rotated_name(to, sizeof(to), s->path, 1, ""))
		goto name;
	/* ENOENT: moved by an earlier attempt whose open failed. */
	ret = rename_if_exists(s->path, to);
	if (ret)
		goto out;
	s->new_fd = open(s->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	if (s->new_fd < 0)
		ret = -errno;
	fsync_dir(s->path);
	goto out;
name:
	ret = -ENAMETOOLONG;
out:
	s->rot_err = ret;
	return ret != 0 || s->new_fd < 0;
}

static int gzip_file(const char *src, const char *dst)
{
	char buf[65536];
	int in, out = -1, gfd, ret = 0;
	gzFile gz = NULL;
	ssize_t n;

	in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return -errno;
	out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	gfd = out >= 0 ? dup(out) : -1;
	if (gfd < 0 || !(gz = gzdopen(gfd, "wb6"))) {
		ret = errno ? -errno : -ENOMEM;
		if (gfd >= 0)
			close(gfd);
		goto out;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (gzwrite(gz, buf, n) != n) {
			ret = -EIO;
			break;
		}
	if (n < 0 && !ret)
		ret = -errno;
	/* gzclose flushes: its failure (disk full) fails the copy. */
	if (gzclose(gz) != Z_OK && !ret)
		ret = errno ? -errno : -EIO;
	if (!ret && fsync(out))
		ret = -errno;
out:
	if (out >= 0)
		close(out);
	close(in);
	return ret;
}

static void gz_work(uv_work_t *w)
{
	struct json_sink *s = w->data;
	char plain[PATH_MAX], gz[PATH_MAX], tmp[PATH_MAX];
	int ret;

	if (rotated_name(plain, sizeof(plain), s->path, 1, "") ||
	    rotated_name(gz, sizeof(gz), s->path, 1, ".gz") ||
	    rotated_name(tmp, sizeof(tmp), s->path, 1, ".gz.tmp")) {
		s->gz_err = -ENAMETOOLONG;
		return;
	}
	errno = 0;
	ret = gzip_file(plain, tmp);
	if (!ret && rename(tmp, gz))
		ret = -errno;
	if (ret) {
		/* Keep the plain file: an uncompressed file beats none. */
		unlink(tmp);
	} else {
		unlink(plain);
		fsync_dir(s->path);
	}
	s->gz_err = ret;
}

static void gz_done(uv_work_t *w, int status)
{
	struct json_sink *s = w->data;

	s->compressing = false;
	if (s->finishing) {
		maybe_free(s);
		return;
	}
	if (status || s->gz_err)
		s->st.errors++;
	kick(s);
	maybe_finish(s);
}

static void rotate_done(struct ktel_job *job)
{
	struct json_sink *s = job->data;
	bool ok = s->rot_err == 0 && s->new_fd >= 0;

	s->state = IO_IDLE;
	if (ok) {
		struct stat st;

		close(s->fd);
		s->fd = s->new_fd;
		s->file_size = 0;
		if (fstat(s->fd, &st) == 0)
			remember_file(s, &st);
	}
	if (s->finishing) {
		/* Reported closed: the new file stays empty, path.1 stays
		 * uncompressed (the next rotation moves it on as it is). */
		maybe_free(s);
		return;
	}
	if (!ok) {
		s->st.errors++;
		retry_later(s);
		return;
	}
	s->backoff_ms = 0;
	if (s->compress && uv_queue_work(s->loop, &s->gz_work, gz_work, gz_done) == 0)
		s->compressing = true;
	kick(s);
}

static void start_rotate(struct json_sink *s)
{
	s->state = IO_ROTATING;
	s->new_fd = -1;
	/* Lines wait behind the rotation: urgent. */
	queue_io(s, rotate_work, rotate_done, true);
}

/* ---- close ---- */

static void free_sink(struct json_sink *s)
{
	struct chunk *c, *next;

	for (c = s->head; c; c = next) {
		next = c->next;
		free(c);
	}
	if (s->fd >= 0 && !s->to_stdout)
		close(s->fd);
	ktel_batchbuf__free(&s->bb);
	ktel_worker__put(s->worker);
	free(s->name);
	free(s->path);
	free(s);
}

/* The last in-flight request of a sink that reported closed frees it. */
static void maybe_free(struct json_sink *s)
{
	if (s->reported && !busy(s))
		free_sink(s);
}

static void on_handle_closed(uv_handle_t *h)
{
	struct json_sink *s = h->data;

	if (--s->handles_open)
		return;
	s->reported = true;
	/* done() may still read the final stats (sink.h); free afterwards,
	 * or later when the last request in flight completes. */
	ktel_sink_close__report(&s->close);
	maybe_free(s);
}

/*
 * Report closed once the queue is written and nothing is in flight, or at
 * the close timeout whatever is in flight: what is still queued then
 * (including lines a write in flight may yet complete) is counted dropped,
 * and the requests in flight finish afterwards without starting more work,
 * except cutting a torn tail off the file.
 */
static void maybe_finish(struct json_sink *s)
{
	struct chunk *c;

	if (!s->close.closing || s->finishing)
		return;
	if (!s->close.timed_out && (s->head || s->trim_bytes || busy(s)))
		return;
	s->finishing = true;
	for (c = s->head; c; c = c->next)
		s->st.dropped += c->n_lines - c->lines_done;
	/* A cut that failed before: one last try, so the file ends whole. */
	if (s->trim_bytes && !busy(s))
		start_trim(s);
	s->handles_open = 3;
	uv_close((uv_handle_t *)&s->retry_timer, on_handle_closed);
	uv_close((uv_handle_t *)&s->close.timer, on_handle_closed);
	uv_close((uv_handle_t *)&s->kick_prepare, on_handle_closed);
}

static void on_close_deadline(void *owner)
{
	maybe_finish(owner);
}

static void json_close(void *priv, uint64_t timeout_ms, ktel_sink_closed_cb done, void *ctx)
{
	struct json_sink *s = priv;

	if (ktel_sink_close__begin(&s->close, timeout_ms, done, ctx))
		return;
	if (!s->close.timed_out)
		kick(s);
	/* Its completion is waited for now. */
	if (s->state == IO_WRITING || s->state == IO_TRIMMING || s->state == IO_ROTATING)
		ktel_worker__hurry(s->worker, &s->io_job);
	maybe_finish(s);
}

/* ---- submit, stats ---- */

/* The formatted batch as the queued chunk (batchbuf.h: no copy). */
static struct chunk *batch_take(struct json_sink *s, uint32_t lines)
{
	size_t len = s->bb.text.len - CHUNK_HDR, cap;
	struct chunk *c = ktel_batchbuf__take(&s->bb, lines, &cap);

	c->cap = cap;
	c->len = len;
	return c;
}

static void on_kick_prepare(uv_prepare_t *h)
{
	struct json_sink *s = h->data;

	uv_prepare_stop(h);
	s->kick_pending = false;
	kick(s);
}

/* Write what is queued at the end of this loop turn (kick_prepare); with
 * a job in flight, its completion kicks, as soon as it comes. */
static void kick_later(struct json_sink *s)
{
	if (s->state == IO_WRITING || s->state == IO_TRIMMING || s->state == IO_ROTATING) {
		ktel_worker__hurry(s->worker, &s->io_job);
		return;
	}
	if (s->kick_pending || s->state != IO_IDLE)
		return;
	s->kick_pending = true;
	uv_prepare_start(&s->kick_prepare, on_kick_prepare);
}

static void json_submit(void *priv, const struct ktel_record *recs, size_t n)
{
	struct json_sink *s = priv;
	uint32_t lines = 0;
	struct chunk *c;

	if (s->close.closing) {
		s->st.dropped += n;
		return;
	}
	ktel_batchbuf__begin(&s->bb, n);
	ktel_json_strs__reset(&s->strs);
	for (size_t i = 0; i < n; i++) {
		size_t start = s->bb.text.len;

		/* A series' end (record.h) has no delta: no line. */
		if (ktel_record_ends_only(&recs[i]))
			continue;
		/* A line that does not fit is the newest: drop it, keep the
		 * queue. A smaller record after it may still fit. */
		if (!ktel_json__append(&s->bb.text, &s->strs, &recs[i]) || s->bb.text.fail ||
		    s->bb.text.len - start > MAX_LINE ||
		    s->queued_bytes + (s->bb.text.len - CHUNK_HDR) > s->max_queue_bytes) {
			s->bb.text.len = start;
			s->bb.text.fail = false;
			s->st.dropped++;
			continue;
		}
		lines++;
	}
	if (!lines)
		return;
	c = batch_take(s, lines);
	c->off = 0;
	c->n_lines = lines;
	c->lines_done = 0;
	c->mark = 0;
	c->next = NULL;
	if (s->tail)
		s->tail->next = c;
	else
		s->head = c;
	s->tail = c;
	s->queued_bytes += c->len;
	kick_later(s);
}

static void json_stats(void *priv, struct ktel_sink_stats *ret)
{
	struct json_sink *s = priv;

	*ret = s->st;
	ret->queued = s->queued_bytes;
}

/* ---- options, create ---- */

static const struct ktel_cfg_key json_options[];

static int parse_opts(struct json_sink *s, const json_t *opts, struct ktel_err *err)
{
	char path[128];
	int ret;

	snprintf(path, sizeof(path), "sinks.%s", s->name);
	ret = ktel_config_check_options(opts, json_options, path, err);
	if (ret)
		return ret;
	if (!json_object_get(opts, "path"))
		return ktel_err_set(err, EINVAL, "sinks.%s.path: required", s->name);
	s->path = strdup(ktel_cfg_string(opts, "path", ""));
	if (!s->path)
		return ktel_err_set(err, ENOMEM, "sinks.%s: out of memory", s->name);
	s->fsync_batches = ktel_cfg_bool(opts, "fsync", false);
	s->compress = ktel_cfg_bool(opts, "compress", false);
	s->max_queue_bytes = ktel_cfg_size(opts, "max_queue_bytes", s->max_queue_bytes);
	s->rotate_bytes = ktel_cfg_size(opts, "rotate_bytes", 0);
	s->keep = (unsigned)ktel_cfg_int(opts, "keep", 0);
	s->to_stdout = strcmp(s->path, "-") == 0;
	if (s->to_stdout && (s->rotate_bytes || s->compress || s->keep))
		return ktel_err_set(err, EINVAL,
				    "sinks.%s: rotate_bytes, keep and compress need a file path, "
				    "not \"-\"",
				    s->name);
	if (!s->rotate_bytes && (s->compress || s->keep))
		return ktel_err_set(err, EINVAL,
				    "sinks.%s: keep and compress apply to rotation: set rotate_bytes",
				    s->name);
	if (strlen(s->path) + 16 >= PATH_MAX)
		return ktel_err_set(err, ENAMETOOLONG, "sinks.%s.path: too long", s->name);
	return 0;
}

/* Offset just past the last '\n' among the first size bytes of fd, or 0
 * when there is none; -errno when the file cannot be read. */
static int last_line_end(int fd, off_t size, off_t *ret_end)
{
	char buf[16384];
	off_t pos = size;

	while (pos > 0) {
		size_t n = pos < (off_t)sizeof(buf) ? (size_t)pos : sizeof(buf);
		ssize_t got = pread(fd, buf, n, pos - n);
		const char *nl;

		if (got != (ssize_t)n)
			return got < 0 ? -errno : -EIO;
		pos -= n;
		nl = memrchr(buf, '\n', n);
		if (nl) {
			*ret_end = pos + (nl - buf) + 1;
			return 0;
		}
	}
	*ret_end = 0;
	return 0;
}

/*
 * An existing file ending in part of a line (its writer was killed
 * mid-write) would glue that fragment to our first line, making one
 * unparseable line of two: cut the file back to its last whole line.
 * *size is the file's size, updated.
 */
static int drop_torn_tail(struct json_sink *s, off_t *size, struct ktel_err *err)
{
	off_t end;
	int fd, ret;

	if (*size == 0)
		return 0;
	fd = open(s->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ktel_err_set(err, errno,
				    "sinks.%s.path: cannot read %s to check that "
				    "it ends in a whole line: %s",
				    s->name, s->path, strerror(errno));
	ret = last_line_end(fd, *size, &end);
	close(fd);
	if (ret)
		return ktel_err_set(err, -ret,
				    "sinks.%s.path: cannot read %s to check that "
				    "it ends in a whole line: %s",
				    s->name, s->path, strerror(-ret));
	if (end == *size)
		return 0;
	if (ftruncate(s->fd, end))
		return ktel_err_set(err, errno,
				    "sinks.%s.path: %s ends in a partial line that "
				    "cannot be cut off: %s",
				    s->name, s->path, strerror(errno));
	ktel_log(KTEL_LOG_WARN,
		 "sink %s: %s ended in a partial line (a previous writer "
		 "stopped mid-line): removed its last %lld bytes",
		 s->name, s->path, (long long)(*size - end));
	*size = end;
	return 0;
}

static int json_create(uv_loop_t *loop, const char *name, const json_t *opts, void **ret_priv,
		       struct ktel_err *err)
{
	struct json_sink *s = calloc(1, sizeof(*s));
	struct stat st;
	int ret;

	if (!s || !(s->name = strdup(name))) {
		free(s);
		return ktel_err_set(err, ENOMEM, "sinks.%s: out of memory", name);
	}
	s->loop = loop;
	s->fd = -1;
	s->max_queue_bytes = DEFAULT_QUEUE_BYTES;
	ktel_batchbuf__init(&s->bb, CHUNK_HDR);
	ret = parse_opts(s, opts, err);
	if (ret)
		goto fail;
	if (s->rotate_bytes && !s->keep)
		s->keep = DEFAULT_KEEP;
	if (s->to_stdout) {
		s->fd = STDOUT_FILENO;
	} else {
		/* Its directory is made at the first open, as the state file's
		 * and the control socket's are: run by hand, the daemon finds
		 * no /var/log/ktelemetry that a unit's LogsDirectory= made.
		 * A directory removed later is not made again (ensure_path). */
		ret = ktel_mkdir_parents(s->path, 0750);
		if (ret) {
			ktel_err_set(err, -ret,
				     "sinks.%s.path: cannot create the directory of %s: %s", name,
				     s->path, strerror(-ret));
			goto fail;
		}
		s->fd = open(s->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
		if (s->fd < 0 || fstat(s->fd, &st)) {
			ret = ktel_err_set(err, errno, "sinks.%s.path: cannot open %s: %s", name,
					   s->path, strerror(errno));
			goto fail;
		}
		s->can_trim = S_ISREG(st.st_mode);
		if (s->can_trim) {
			ret = drop_torn_tail(s, &st.st_size, err);
			if (ret)
				goto fail;
		}
		remember_file(s, &st);
	}
	s->worker = ktel_worker__get(loop, KTEL_LANE_FILES);
	if (!s->worker) {
		ret = ktel_err_set(err, errno, "sinks.%s: cannot start the writer thread: %s", name,
				   strerror(errno));
		goto fail;
	}
	uv_timer_init(loop, &s->retry_timer);
	ktel_sink_close__init(&s->close, loop, s, on_close_deadline);
	uv_prepare_init(loop, &s->kick_prepare);
	s->retry_timer.data = s->kick_prepare.data = s;
	s->gz_work.data = s;
	s->rng = uv_hrtime() ^ (uintptr_t)s ^ 0x9e3779b97f4a7c15ULL;
	*ret_priv = s;
	return 0;
fail:
	free_sink(s);
	return ret;
}

/* Options for the config validator and docs/config.md (parse_opts applies them). */
static const struct ktel_cfg_key json_options[] = {
	{"path", KTEL_CFG_STRING, .default_text = "(required)",
	 .doc = "File to append JSON lines to, or \"-\" for stdout. Missing directories above it are created (mode 0750) when the sink opens."},
	{"fsync", KTEL_CFG_BOOL, .default_text = "false",
	 .doc = "fsync the file after each write cycle; the delta state is then saved only after the fsync (exactly once across power loss too)."},
	{"max_queue_bytes", KTEL_CFG_SIZE, 1, 1LL << 32, .default_text = "4MiB",
	 .doc = "Bound on formatted lines waiting to be written; beyond it the newest "
		"records are dropped and counted."},
	{"rotate_bytes", KTEL_CFG_SIZE, 1, 1LL << 40, .default_text = "no rotation",
	 .doc = "Rotate the file when it would grow past this size."},
	{"keep", KTEL_CFG_INT, 1, MAX_KEEP, .default_text = "5",
	 .doc = "Rotated files kept (path.1 newest .. path.N oldest)."},
	{"compress", KTEL_CFG_BOOL, .default_text = "false",
	 .doc = "gzip rotated files (path.N.gz)."},
	{NULL},
};

/* See ktel_sink_ops.where. */
static void json_where(void *priv, char *buf, size_t len)
{
	const struct json_sink *s = priv;

	if (s->to_stdout)
		snprintf(buf, len, "stdout");
	else if (s->open_err)
		snprintf(buf, len, "file %s (cannot open: %s)", s->path, strerror(s->open_err));
	else
		snprintf(buf, len, "file %s", s->path);
}

/* See ktel_sink_ops.reopen: at the next write, or now when idle. */
static void json_reopen(void *priv)
{
	struct json_sink *s = priv;

	if (s->to_stdout || s->close.closing)
		return;
	/* Now when no job is in flight, else before the next write (both
	 * say "reopened"). */
	s->reopen_wanted = true;
	if (s->state == IO_IDLE && !s->trim_bytes)
		ensure_path(s);
	kick(s);
}

/* ---- durability (sink.h) ---- */

/* A file the sink can read back and cut (not stdout, a pipe, a tty). */
static bool json_durable(void *priv, ktel_sink_durable_cb cb, void *ctx)
{
	struct json_sink *s = priv;

	if (s->to_stdout || !s->can_trim)
		return false;
	s->durable_cb = cb;
	s->durable_ctx = ctx;
	return true;
}

/* The newest chunk carries the mark; with nothing queued, what the mark
 * covers is written already (a write keeps its chunks queued until its
 * fsync is done too): durable now, or at the next fsync after a failed
 * one. */
static void json_mark(void *priv, uint64_t mark)
{
	struct json_sink *s = priv;

	if (s->tail) {
		s->tail->mark = mark;
		/* The write in flight may hold it: its ack is waited for. */
		if (s->state == IO_WRITING)
			ktel_worker__hurry(s->worker, &s->io_job);
		return;
	}
	if (s->written_mark > s->acked_mark) {
		s->written_mark = mark;
		return;
	}
	s->written_mark = mark;
	ack_durable(s);
}

static int json_recover(void *priv, ktel_sink_window_fn fn, void *ctx, struct ktel_err *err)
{
	struct json_sink *s = priv;

	if (s->to_stdout || !s->can_trim)
		return 0;
	return ktel_json__recover(s->name, s->path, s->fd, fn, ctx, &s->file_size, err);
}

const struct ktel_sink_ops ktel_json_sink_ops = {
	.type = "json",
	.durable = json_durable,
	.mark = json_mark,
	.recover = json_recover,
	.where = json_where,
	.reopen = json_reopen,
	.options = json_options,
	.create = json_create,
	.submit = json_submit,
	.close = json_close,
	.stats = json_stats,
};
