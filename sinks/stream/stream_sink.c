// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Stream sink ("type": "stream"): an in-process ring of the most recent
 * records, formatted as JSON lines (the JSON sink's line format,
 * json_format.h), fanned out to any number of subscribers that connect to a
 * unix stream socket and read. `ktelemetryctl watch` is one such subscriber.
 *
 * The ring holds ring_records lines, shared by every subscriber: a line is
 * formatted once, never copied per subscriber. Lines are formatted one
 * after the other straight into 64 KiB blocks, which the ring slots and
 * the writes that point into them reference-count (a million lines a
 * second are a million mallocs and frees otherwise, and a block per batch
 * an mmap, page faults and an munmap when batches vary in size); a
 * subscriber's socket gets a block's consecutive lines as one buffer.
 * Each subscriber has a cursor into the ring. A subscriber's backlog (records
 * after its cursor that it has not been sent) is bounded by backlog_records:
 * when a new record would exceed it, the subscriber's oldest unsent records
 * are skipped, counted as dropped, and the subscriber gets a line
 * {"dropped":N} in their place before its next record. A new subscriber
 * first gets the ring's most recent records (at most backlog_records), then
 * the live ones.
 *
 * Writing never blocks the loop and a slow subscriber never delays the
 * others or a pull: each write is tried at once (uv_try_write); what the
 * socket does not take goes into one uv_write per subscriber of at most
 * WRITE_LINES lines, and nothing more is written to that subscriber until
 * it completes. Lines in flight are committed (not dropped); everything
 * after them stays in the ring, under the backlog rule above. So the memory
 * held for one subscriber is bounded by the blocks of WRITE_LINES lines
 * plus its struct.
 *
 * The protocol is one-way: a subscriber that sends anything is
 * disconnected at once (reading and discarding what it sends would let it
 * spend the daemon's CPU for free), its EOF or an error closes it. At most
 * max_subscribers are served at once; one more is accepted and closed at
 * once. Both are counted as refused.
 *
 * Stats: sent counts lines delivered to a subscriber (one record read by
 * two subscribers counts twice), dropped counts records a subscriber lost
 * (backlog, write error, close timeout) and records that could not be
 * formatted, refused counts connections closed for writing or for being
 * over max_subscribers; with no subscriber records only enter the ring.
 *
 * The socket is bound at a temporary name next to its path, given mode 0660
 * (set before bind so it is never wider than that) and the configured group,
 * and only then renamed over the path. So an instance that replaces another
 * of this process at the same path (a reload that changes its options) is
 * complete before it takes the path, and the old one serves until then; one
 * that cannot be made leaves the old one untouched. A socket file at the
 * path is replaced when it is stale or belongs to an instance of this
 * process, refused when another process answers there or the path is not a
 * socket. Close removes the file only while it is still this instance's.
 *
 * Options: socket (path, required), group (name or gid), backlog_records
 * (default 1024), ring_records (default 4096, at least backlog_records),
 * max_subscribers (default 16).
 */
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "stream_sink.h"
#include "json_format.h"
#include "sink_close.h"
#include "textbuf.h"

#define DEFAULT_BACKLOG 1024
#define DEFAULT_RING 4096
#define MAX_RING (1 << 20)
#define DEFAULT_MAX_SUBS 16
#define MAX_SUBS 1024
/* Lines, and buffers (runs of a block's consecutive lines), of one write. */
#define WRITE_LINES 256
#define WRITE_BUFS 32
/* Lines are packed into blocks of this many bytes (a longer line gets a
 * block of its own); under malloc's mmap threshold (core/base/memory.c), so a
 * new one costs no system call once the heap has grown. */
#define BLOCK_BYTES (64u << 10)
/* Released standard blocks kept for the next lines. */
#define SPARE_BLOCKS 4
#define LISTEN_BACKLOG 16

/* Lines one after the other, shared by the ring slots and the writes in
 * flight that point into it; the sink holds the block being filled. */
struct chunk {
	size_t refs;
	size_t cap; /* bytes of data */
	char data[];
};

/* One line of the ring: len bytes of c from off. */
struct slot {
	struct chunk *c;
	uint32_t off, len;
};

struct stream_sink;

struct sub {
	struct sub *next, **pprev;
	struct stream_sink *s;
	uv_pipe_t pipe;
	uv_write_t req;
	uint64_t next_seq;     /* next record of the ring to send */
	uint64_t drop_pending; /* skipped records not yet announced */
	bool writing, closing;
	/* The write being made: the notice and up to WRITE_LINES lines in
	 * up to WRITE_BUFS runs, each holding a reference to its chunk. */
	char notice[48];
	struct chunk *held[WRITE_BUFS];
	unsigned n_held, n_lines;
	uv_buf_t bufs[WRITE_BUFS + 1];
	char rbuf[64];
};

struct stream_sink {
	uv_loop_t *loop;
	char *name, *path;
	gid_t gid;
	bool has_gid;
	uint64_t backlog, ring_cap, max_subs;

	struct slot *ring;   /* slot seq % ring_cap */
	uint64_t head_seq;   /* sequence of the next record */
	uint64_t oldest_seq; /* oldest record still in the ring */

	uv_pipe_t server;
	dev_t sock_dev; /* the socket file this instance bound */
	ino_t sock_ino;
	struct stream_sink *next_live; /* instances of this process with a socket */
	struct sub *subs;
	unsigned n_subs;

	/* The block lines go into (used bytes of it taken), released
	 * standard blocks kept, a batch's repeated strings escaped once. */
	struct chunk *open;
	size_t open_used;
	struct chunk *spare[SPARE_BLOCKS];
	unsigned n_spare;
	struct ktel_json_strs strs;

	struct ktel_sink_stats st;
	struct ktel_sink_close close;
	bool finishing;
	int handles_open;
};

static void chunk_unref(struct stream_sink *s, struct chunk *c)
{
	if (--c->refs)
		return;
	if (c->cap == BLOCK_BYTES && s->n_spare < SPARE_BLOCKS && !s->finishing)
		s->spare[s->n_spare++] = c;
	else
		free(c);
}

/* ---- subscribers ---- */

static void kick(struct sub *u);
static void live_remove(struct stream_sink *s);
static void unlink_own(const struct stream_sink *s);
static void maybe_finish(struct stream_sink *s);
static void maybe_free(struct stream_sink *s);

static void on_handle_closed(uv_handle_t *h)
{
	struct stream_sink *s = h->data;

	s->handles_open--;
	maybe_free(s);
}

static void on_sub_closed(uv_handle_t *h)
{
	struct sub *u = h->data;
	struct stream_sink *s = u->s;

	*u->pprev = u->next;
	if (u->next)
		u->next->pprev = u->pprev;
	s->n_subs--;
	free(u);
	s->handles_open--;
	if (s->finishing)
		maybe_free(s);
	else
		maybe_finish(s);
}

/* Close a subscriber. With lost (an error, the close timeout) the records
 * it has not been sent count as dropped; a subscriber that left on its own
 * lost nothing it wanted. A write in flight is cancelled by uv_close and
 * counted in on_write. */
static void sub_close(struct sub *u, bool lost)
{
	if (u->closing)
		return;
	u->closing = true;
	if (lost)
		u->s->st.dropped += u->s->head_seq - u->next_seq;
	u->next_seq = u->s->head_seq;
	uv_close((uv_handle_t *)&u->pipe, on_sub_closed);
}

/* Skip what is beyond the subscriber's backlog or no longer in the ring. */
static void enforce_backlog(struct sub *u)
{
	struct stream_sink *s = u->s;
	uint64_t min_seq = s->head_seq > s->backlog ? s->head_seq - s->backlog : 0;

	if (min_seq < s->oldest_seq)
		min_seq = s->oldest_seq;
	if (u->next_seq >= min_seq)
		return;
	u->drop_pending += min_seq - u->next_seq;
	s->st.dropped += min_seq - u->next_seq;
	u->next_seq = min_seq;
}

static void batch_release(struct sub *u)
{
	for (unsigned i = 0; i < u->n_held; i++)
		chunk_unref(u->s, u->held[i]);
	u->n_held = 0;
	u->n_lines = 0;
}

/* Fill u->bufs with the drop notice and the next lines, a run of one
 * chunk's consecutive lines per buffer, taking a reference per run and
 * advancing the cursor past them; the number of buffers. */
static unsigned batch_fill(struct sub *u)
{
	struct stream_sink *s = u->s;
	unsigned n = 0;

	if (u->drop_pending) {
		int len = snprintf(u->notice, sizeof(u->notice), "{\"dropped\":%llu}\n",
				   (unsigned long long)u->drop_pending);

		u->bufs[n++] = uv_buf_init(u->notice, len);
		u->drop_pending = 0;
	}
	while (u->n_lines < WRITE_LINES && u->next_seq < s->head_seq) {
		const struct slot *sl = &s->ring[u->next_seq % s->ring_cap];
		char *line = sl->c->data + sl->off;
		uv_buf_t *last = n ? &u->bufs[n - 1] : NULL;

		if (u->n_held && u->held[u->n_held - 1] == sl->c && last &&
		    last->base + last->len == line) {
			last->len += sl->len;
		} else if (u->n_held < WRITE_BUFS) {
			sl->c->refs++;
			u->held[u->n_held++] = sl->c;
			u->bufs[n++] = uv_buf_init(line, sl->len);
		} else {
			break;
		}
		u->next_seq++;
		u->n_lines++;
	}
	return n;
}

static void on_write(uv_write_t *req, int status)
{
	struct sub *u = req->data;
	struct stream_sink *s = u->s;

	u->writing = false;
	if (status < 0) {
		/* The batch may be partly written; count it lost, once. */
		s->st.dropped += u->n_lines;
		if (status != UV_ECANCELED)
			s->st.errors++;
		batch_release(u);
		sub_close(u, true);
		return;
	}
	s->st.sent += u->n_lines;
	batch_release(u);
	kick(u);
}

/* Write what the subscriber may get now: at once while the socket takes
 * it, then one uv_write for the rest of a batch. */
static void kick(struct sub *u)
{
	struct stream_sink *s = u->s;

	while (!u->writing && !u->closing) {
		unsigned n = batch_fill(u), i = 0;
		int w;

		if (n == 0) {
			maybe_finish(s);
			return;
		}
		w = uv_try_write((uv_stream_t *)&u->pipe, u->bufs, n);
		if (w == UV_EAGAIN)
			w = 0;
		if (w < 0) {
			s->st.errors++;
			s->st.dropped += u->n_lines;
			batch_release(u);
			sub_close(u, true);
			return;
		}
		while (i < n && (size_t)w >= u->bufs[i].len)
			w -= u->bufs[i++].len;
		if (i == n) {
			s->st.sent += u->n_lines;
			batch_release(u);
			continue;
		}
		u->bufs[i].base += w;
		u->bufs[i].len -= w;
		u->req.data = u;
		if (uv_write(&u->req, (uv_stream_t *)&u->pipe, u->bufs + i, n - i, on_write)) {
			s->st.errors++;
			s->st.dropped += u->n_lines;
			batch_release(u);
			sub_close(u, true);
			return;
		}
		u->writing = true;
	}
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct sub *u = h->data;

	(void)suggested;
	*buf = uv_buf_init(u->rbuf, sizeof(u->rbuf));
}

/* Subscribers only read: their EOF ends them, and one that sends anything
 * breaks the protocol and is refused (what it had not been sent is lost). */
static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
	struct sub *u = stream->data;

	(void)buf;
	if (nread > 0) {
		u->s->st.refused++;
		uv_read_stop(stream);
		sub_close(u, true);
	} else if (nread < 0) {
		sub_close(u, nread != UV_EOF);
	}
}

static void on_connection(uv_stream_t *server, int status)
{
	struct stream_sink *s = server->data;
	struct sub *u;

	if (status < 0) {
		s->st.errors++;
		return;
	}
	u = calloc(1, sizeof(*u));
	if (!u) {
		s->st.errors++;
		return;
	}
	u->s = s;
	uv_pipe_init(s->loop, &u->pipe, 0);
	u->pipe.data = u;
	s->handles_open++;
	u->next = s->subs;
	u->pprev = &s->subs;
	if (s->subs)
		s->subs->pprev = &u->next;
	s->subs = u;
	s->n_subs++;
	/* Start with the most recent records the backlog allows. */
	u->next_seq = s->head_seq > s->backlog ? s->head_seq - s->backlog : 0;
	if (u->next_seq < s->oldest_seq)
		u->next_seq = s->oldest_seq;
	if (uv_accept(server, (uv_stream_t *)&u->pipe) || s->close.closing ||
	    s->n_subs > s->max_subs || uv_read_start((uv_stream_t *)&u->pipe, on_alloc, on_read)) {
		if (s->n_subs > s->max_subs)
			s->st.refused++;
		sub_close(u, false); /* never a subscriber: nothing lost */
		return;
	}
	kick(u);
}

/* ---- ring, submit ---- */

static void ring_push(struct stream_sink *s, struct chunk *c, size_t off, size_t len)
{
	struct slot *slot = &s->ring[s->head_seq % s->ring_cap];

	if (s->head_seq - s->oldest_seq == s->ring_cap) {
		chunk_unref(s, slot->c);
		s->oldest_seq++;
	}
	c->refs++;
	*slot = (struct slot){c, (uint32_t)off, (uint32_t)len};
	s->head_seq++;
}

/* A new standard block (a spare if there is one), held by the sink as the
 * open block. */
static bool open_block(struct stream_sink *s)
{
	struct chunk *c;

	if (s->n_spare)
		c = s->spare[--s->n_spare];
	else if (!(c = malloc(sizeof(*c) + BLOCK_BYTES)))
		return false;
	c->refs = 1;
	c->cap = BLOCK_BYTES;
	if (s->open)
		chunk_unref(s, s->open);
	s->open = c;
	s->open_used = 0;
	return true;
}

/* Format r into the open block's free room; the line's length, 0 when it
 * did not fit (or cannot be formatted: *bad). */
static size_t format_into_open(struct stream_sink *s, const struct ktel_record *r, bool *bad)
{
	struct ktel_textbuf b = {
		.p = s->open->data + s->open_used,
		.cap = s->open->cap - s->open_used,
		.fixed = true,
	};

	if (!ktel_json__append(&b, &s->strs, r)) {
		*bad = true;
		return 0;
	}
	return b.fail ? 0 : b.len;
}

/* A line that may not fit a block (its worst case, every byte escaped, is
 * over one): formatted on its own, that buffer, cut to its size, becomes
 * its block. Cut, because the ring may hold thousands of such lines and
 * the buffer grew by doubling. */
static bool format_alone(struct stream_sink *s, const struct ktel_record *r)
{
	struct ktel_textbuf b = {.len = sizeof(struct chunk)};
	struct chunk *c;
	size_t len;

	if (!ktel_json__append(&b, &s->strs, r) || b.fail) {
		free(b.p);
		return false;
	}
	c = realloc(b.p, b.len);
	if (!c)
		c = (struct chunk *)b.p;
	len = b.len - sizeof(*c);
	c->refs = 1;
	c->cap = len;
	if (s->open)
		chunk_unref(s, s->open);
	s->open = c;
	s->open_used = len;
	return true;
}

/* r's line at the end of the open block (a new block when it does not fit
 * in what is left); its offset in *ret_off and length, 0 when it could not
 * be made (counted as dropped). */
static size_t add_line(struct stream_sink *s, const struct ktel_record *r, size_t *ret_off)
{
	bool bad = false;
	size_t len = 0;

	if (s->open)
		len = format_into_open(s, r, &bad);
	/* Not in what is left: a new block, unless this one was new. */
	if (!len && !bad && (!s->open || s->open_used) && open_block(s))
		len = format_into_open(s, r, &bad);
	if (!len && !bad && format_alone(s, r)) {
		*ret_off = 0;
		return s->open_used;
	}
	if (!len || s->open_used + len > UINT32_MAX) {
		s->st.dropped++;
		return 0;
	}
	*ret_off = s->open_used;
	s->open_used += len;
	return len;
}

static void stream_submit(void *priv, const struct ktel_record *recs, size_t n)
{
	struct stream_sink *s = priv;
	struct sub *u, *next;

	if (s->close.closing) {
		s->st.dropped += n;
		return;
	}
	ktel_json_strs__reset(&s->strs);
	for (size_t i = 0; i < n; i++) {
		size_t off, len;

		/* A series' end (record.h) has no delta: no line. */
		if (ktel_record_ends_only(&recs[i]))
			continue;
		len = add_line(s, &recs[i], &off);

		if (!len)
			continue;
		/* A batch may be larger than a backlog: before a subscriber
		 * would lose a record, offer its backlog to its socket, so
		 * only one that really does not read loses anything. */
		for (u = s->subs; u; u = next) {
			next = u->next;
			if (s->head_seq - u->next_seq >= s->backlog)
				kick(u);
		}
		ring_push(s, s->open, off, len);
		for (u = s->subs; u; u = u->next)
			enforce_backlog(u);
	}
	for (u = s->subs; u; u = next) {
		next = u->next;
		kick(u);
	}
}

static void stream_stats(void *priv, struct ktel_sink_stats *ret)
{
	struct stream_sink *s = priv;
	uint64_t waiting = 0;

	for (const struct sub *u = s->subs; u; u = u->next)
		waiting += s->head_seq - u->next_seq + u->n_lines;
	*ret = s->st;
	ret->queued = waiting;
}

/* ---- close ---- */

static void free_sink(struct stream_sink *s)
{
	live_remove(s);
	s->finishing = true; /* no spare kept from here on */
	for (uint64_t q = s->oldest_seq; s->ring && q < s->head_seq; q++)
		chunk_unref(s, s->ring[q % s->ring_cap].c);
	if (s->open)
		chunk_unref(s, s->open);
	while (s->n_spare)
		free(s->spare[--s->n_spare]);
	free(s->ring);
	free(s->name);
	free(s->path);
	free(s);
}

static void maybe_free(struct stream_sink *s)
{
	if (!s->finishing || s->handles_open)
		return;
	/* done first: its stats are final and still readable (sink.h). */
	ktel_sink_close__report(&s->close);
	free_sink(s);
}

/* Once every subscriber has been sent everything, or the timeout passed,
 * close them all and release. */
static void maybe_finish(struct stream_sink *s)
{
	struct sub *u, *next;

	if (!s->close.closing || s->finishing)
		return;
	for (u = s->subs; u && !s->close.timed_out; u = u->next)
		if (!u->closing && (u->writing || u->next_seq < s->head_seq || u->drop_pending))
			return;
	s->finishing = true;
	for (u = s->subs; u; u = next) {
		next = u->next;
		sub_close(u, true);
	}
	/* The timer's close callback releases s when it is the last handle. */
	uv_close((uv_handle_t *)&s->close.timer, on_handle_closed);
}

static void on_close_deadline(void *owner)
{
	maybe_finish(owner);
}

static void stream_close(void *priv, uint64_t timeout_ms, ktel_sink_closed_cb done, void *ctx)
{
	struct stream_sink *s = priv;

	if (ktel_sink_close__begin(&s->close, timeout_ms, done, ctx))
		return;
	/* No new subscribers; those connected get what is queued for them. */
	uv_close((uv_handle_t *)&s->server, on_handle_closed);
	unlink_own(s);
	live_remove(s);
	maybe_finish(s);
}

/* ---- socket ---- */

/* The instances of this process that hold a socket file (loop thread only):
 * one of them at a path may be replaced by a new instance. */
static struct stream_sink *live_sinks;

static void live_remove(struct stream_sink *s)
{
	for (struct stream_sink **pp = &live_sinks; *pp; pp = &(*pp)->next_live)
		if (*pp == s) {
			*pp = s->next_live;
			return;
		}
}

/* The live instance, other than self, whose socket file st is. */
static struct stream_sink *live_owner(const struct stat *st, const struct stream_sink *self)
{
	for (struct stream_sink *l = live_sinks; l; l = l->next_live)
		if (l != self && l->sock_dev == st->st_dev && l->sock_ino == st->st_ino)
			return l;
	return NULL;
}

static bool is_file_of(const char *path, const struct stream_sink *s)
{
	struct stat st;

	return lstat(path, &st) == 0 && st.st_dev == s->sock_dev && st.st_ino == s->sock_ino;
}

/* "<path>.<pid>.old": where an instance that takes the path from another of
 * this process keeps that one's socket file, until the one or the other
 * closes. */
static void backup_name(const struct stream_sink *s, char *buf, size_t len)
{
	snprintf(buf, len, "%s.%d.old", s->path, (int)getpid());
}

/*
 * Remove this instance's socket file. When it had taken the path from an
 * instance that still serves (a replacement discarded by a reload that
 * failed elsewhere), that one's file goes back to the path; when this is
 * the instance whose file was kept aside, that name goes.
 */
static void unlink_own(const struct stream_sink *s)
{
	char backup[PATH_MAX];
	struct stat st;

	backup_name(s, backup, sizeof(backup));
	if (is_file_of(s->path, s)) {
		if (lstat(backup, &st) == 0 && live_owner(&st, s))
			rename(backup, s->path);
		else
			unlink(s->path);
	}
	if (is_file_of(backup, s))
		unlink(backup);
}

/* May the socket go to the path? Yes when nothing is there, a stale socket
 * or one of this process's instances (then *ret_live is set); no when it is
 * not a socket or another process answers there. */
static int check_path(const struct stream_sink *s, const struct sockaddr_un *sun, bool *ret_live,
		      struct ktel_err *err)
{
	struct stat st;
	int fd, r;

	if (lstat(s->path, &st)) {
		if (errno == ENOENT)
			return 0;
		return ktel_err_set(err, errno, "sinks.%s.socket: %s: %s", s->name, s->path,
				    strerror(errno));
	}
	if (!S_ISSOCK(st.st_mode))
		return ktel_err_set(err, EEXIST, "sinks.%s.socket: %s exists and is not a socket",
				    s->name, s->path);
	if (live_owner(&st, s)) {
		*ret_live = true;
		return 0;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return ktel_err_set(err, errno, "sinks.%s: socket: %s", s->name, strerror(errno));
	r = connect(fd, (const struct sockaddr *)sun, sizeof(*sun));
	close(fd);
	if (r == 0)
		return ktel_err_set(err, EADDRINUSE,
				    "sinks.%s.socket: %s is served by another "
				    "process",
				    s->name, s->path);
	return 0;
}

/* A listening socket bound at tmp (mode 0660, the configured group) and
 * renamed to the path, the live instance's file there first linked to the
 * backup name (live); the fd in *ret_fd. */
static int bind_at(struct stream_sink *s, const struct sockaddr_un *tmp, bool live, int *ret_fd,
		   struct ktel_err *err)
{
	char backup[PATH_MAX];
	struct stat st;
	int fd, ret;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return ktel_err_set(err, errno, "sinks.%s: socket: %s", s->name, strerror(errno));
	/* Linux creates the file with the socket's mode less the umask: never
	 * wider than 0660, even before the chmod below. */
	fchmod(fd, 0660);
	if (bind(fd, (const struct sockaddr *)tmp, sizeof(*tmp))) {
		ret = ktel_err_set(err, errno, "sinks.%s.socket: cannot bind %s: %s", s->name,
				   tmp->sun_path, strerror(errno));
		goto close_fd;
	}
	if (chmod(tmp->sun_path, 0660) ||
	    (s->has_gid && lchown(tmp->sun_path, (uid_t)-1, s->gid))) {
		ret = ktel_err_set(err, errno,
				   "sinks.%s.socket: cannot set mode 0660 and group "
				   "of %s: %s",
				   s->name, s->path, strerror(errno));
		goto unlink;
	}
	if (listen(fd, LISTEN_BACKLOG) || lstat(tmp->sun_path, &st)) {
		ret = ktel_err_set(err, errno, "sinks.%s.socket: cannot listen on %s: %s", s->name,
				   s->path, strerror(errno));
		goto unlink;
	}
	backup_name(s, backup, sizeof(backup));
	unlink(backup);
	if (live && link(s->path, backup)) {
		ret = ktel_err_set(err, errno,
				   "sinks.%s.socket: cannot keep the serving socket as %s "
				   "while its replacement takes %s: %s",
				   s->name, backup, s->path, strerror(errno));
		goto unlink;
	}
	if (rename(tmp->sun_path, s->path)) {
		if (live)
			unlink(backup);
		ret = ktel_err_set(err, errno, "sinks.%s.socket: cannot move %s to %s: %s", s->name,
				   tmp->sun_path, s->path, strerror(errno));
		goto unlink;
	}
	s->sock_dev = st.st_dev;
	s->sock_ino = st.st_ino;
	*ret_fd = fd;
	return 0;
unlink:
	unlink(tmp->sun_path);
close_fd:
	close(fd);
	return ret;
}

/* A listening socket at the path, mode 0660 and the configured group; the
 * fd in *ret_fd, and the instance among the live ones. */
static int bind_socket(struct stream_sink *s, int *ret_fd, struct ktel_err *err)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX}, tmp = {.sun_family = AF_UNIX};
	bool live = false;
	int n, ret;

	if (strlen(s->path) >= sizeof(sun.sun_path))
		return ktel_err_set(err, ENAMETOOLONG, "sinks.%s.socket: longer than %zu bytes",
				    s->name, sizeof(sun.sun_path) - 1);
	memcpy(sun.sun_path, s->path, strlen(s->path));
	/* The temporary name is bound, so it must fit the same field. */
	n = snprintf(tmp.sun_path, sizeof(tmp.sun_path), "%s.%d.new", s->path, (int)getpid());
	if (n < 0 || (size_t)n >= sizeof(tmp.sun_path))
		return ktel_err_set(err, ENAMETOOLONG,
				    "sinks.%s.socket: %s: the socket is made as "
				    "\"<socket>.%d.new\" first, and that is longer than %zu bytes",
				    s->name, s->path, (int)getpid(), sizeof(sun.sun_path) - 1);
	ret = check_path(s, &sun, &live, err);
	if (ret)
		return ret;
	/* A leftover of this pid's earlier life (pids are reused after a crash). */
	unlink(tmp.sun_path);
	ret = bind_at(s, &tmp, live, ret_fd, err);
	if (ret)
		return ret;
	s->next_live = live_sinks;
	live_sinks = s;
	return 0;
}

/* ---- options, create ---- */

static const struct ktel_cfg_key stream_options[] = {
	{"socket", KTEL_CFG_STRING, .default_text = "(required)",
	 .doc = "Unix stream socket subscribers connect to; created 0660."},
	{"group", KTEL_CFG_GROUP, .default_text = "the daemon's",
	 .doc = "Group of the socket file: who may subscribe."},
	{"backlog_records", KTEL_CFG_INT, 1, MAX_RING, .default_text = "1024",
	 .doc = "Records a subscriber may lag behind; beyond it its oldest are dropped, "
		"counted, and announced to it as {\"dropped\":N}."},
	{"ring_records", KTEL_CFG_INT, 1, MAX_RING, .default_text = "4096",
	 .doc = "Recent records kept (at least backlog_records); a new subscriber first "
		"gets the most recent backlog_records of them."},
	{"max_subscribers", KTEL_CFG_INT, 1, MAX_SUBS, .default_text = "16",
	 .doc = "Subscribers served at once; more are disconnected at once."},
	{NULL},
};

static int parse_opts(struct stream_sink *s, const json_t *opts, struct ktel_err *err)
{
	char path[128];
	int ret;

	snprintf(path, sizeof(path), "sinks.%s", s->name);
	ret = ktel_config_check_options(opts, stream_options, path, err);
	if (ret)
		return ret;
	if (!json_object_get(opts, "socket"))
		return ktel_err_set(err, EINVAL, "sinks.%s.socket: required", s->name);
	s->path = strdup(ktel_cfg_string(opts, "socket", ""));
	if (!s->path)
		return ktel_err_set(err, ENOMEM, "sinks.%s: out of memory", s->name);
	s->has_gid = json_object_get(opts, "group") != NULL;
	s->gid = ktel_cfg_group(opts, "group", 0);
	s->backlog = (uint64_t)ktel_cfg_int(opts, "backlog_records", DEFAULT_BACKLOG);
	s->ring_cap = (uint64_t)ktel_cfg_int(opts, "ring_records", DEFAULT_RING);
	s->max_subs = (uint64_t)ktel_cfg_int(opts, "max_subscribers", DEFAULT_MAX_SUBS);
	if (s->ring_cap < s->backlog)
		return ktel_err_set(err, EINVAL,
				    "sinks.%s: ring_records (%llu) must be at least "
				    "backlog_records (%llu)",
				    s->name, (unsigned long long)s->ring_cap,
				    (unsigned long long)s->backlog);
	return 0;
}

static int stream_create(uv_loop_t *loop, const char *name, const json_t *opts, void **ret_priv,
			 struct ktel_err *err)
{
	struct stream_sink *s = calloc(1, sizeof(*s));
	int fd = -1, ret;

	if (!s || !(s->name = strdup(name))) {
		free(s);
		return ktel_err_set(err, ENOMEM, "sinks.%s: out of memory", name);
	}
	s->loop = loop;
	s->backlog = DEFAULT_BACKLOG;
	s->ring_cap = DEFAULT_RING;
	s->max_subs = DEFAULT_MAX_SUBS;
	ret = parse_opts(s, opts, err);
	if (ret)
		goto fail;
	s->ring = calloc(s->ring_cap, sizeof(*s->ring));
	if (!s->ring) {
		ret = ktel_err_set(err, ENOMEM, "sinks.%s: out of memory", name);
		goto fail;
	}
	ret = bind_socket(s, &fd, err);
	if (ret)
		goto fail;
	ktel_sink_close__init(&s->close, loop, s, on_close_deadline);
	uv_pipe_init(loop, &s->server, 0);
	s->server.data = s;
	s->handles_open = 2;
	ret = uv_pipe_open(&s->server, fd);
	if (ret)
		close(fd);
	ret = ret ?: uv_listen((uv_stream_t *)&s->server, LISTEN_BACKLOG, on_connection);
	if (ret)
		goto fail_handles;
	*ret_priv = s;
	return 0;
fail_handles:
	/* Handles go on the loop: the last close callback frees s. */
	ktel_err_set(err, -ret, "sinks.%s.socket: cannot serve %s: %s", name, s->path,
		     uv_strerror(ret));
	unlink_own(s);
	live_remove(s);
	s->close.closing = s->finishing = true;
	uv_close((uv_handle_t *)&s->close.timer, on_handle_closed);
	uv_close((uv_handle_t *)&s->server, on_handle_closed);
	return ret;
fail:
	free_sink(s);
	return ret;
}

unsigned ktel_stream_sink__subscribers(void *priv)
{
	return ((struct stream_sink *)priv)->n_subs;
}

/* Options for the config validator and docs/config.md (parse_opts applies them). */

/* See ktel_sink_ops.where. */
static void stream_where(void *priv, char *buf, size_t len)
{
	const struct stream_sink *s = priv;

	snprintf(buf, len, "subscribers on %s", s->path);
}

const struct ktel_sink_ops ktel_stream_sink_ops = {
	.type = "stream",
	.where = stream_where,
	.options = stream_options,
	.create = stream_create,
	.submit = stream_submit,
	.close = stream_close,
	.stats = stream_stats,
};
