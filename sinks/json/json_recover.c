// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * JSON sink recovery at start (json_recover.h): the file's tail read back,
 * each line's window identity (boot_id, metric, map_id, seq) judged by the
 * daemon against its saved state, the windows past it cut off. The file is
 * the daemon's own output but is read as untrusted: a line that does not
 * parse or lacks the fields is "unknown" and kept.
 */
#include "json_recover.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "log.h"

struct tail {
	char *p;
	size_t len; /* bytes read: the file's last len bytes */
	off_t base; /* file offset of p[0] */
};

/* Read the last KTEL_JSON_RECOVER_MAX_BYTES (or all) of the file. */
static int tail_read(const char *path, struct tail *t)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), ret = 0;
	size_t got = 0;

	if (fd < 0 || fstat(fd, &st))
		goto fail;
	t->len = st.st_size > KTEL_JSON_RECOVER_MAX_BYTES ? KTEL_JSON_RECOVER_MAX_BYTES
							  : (size_t)st.st_size;
	t->base = st.st_size - (off_t)t->len;
	t->p = malloc(t->len + 1);
	if (!t->p) {
		close(fd);
		return -ENOMEM;
	}
	while (got < t->len) {
		ssize_t n = pread(fd, t->p + got, t->len - got, t->base + (off_t)got);

		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO;
			break;
		}
		got += n;
	}
	close(fd);
	return ret;
fail:
	ret = -errno;
	if (fd >= 0)
		close(fd);
	return ret;
}

/* Judge one line (len bytes, no '\n'). */
static int judge(const char *line, size_t len, ktel_sink_window_fn fn, void *ctx)
{
	json_t *j = json_loadb(line, len, 0, NULL);
	json_t *map_id, *seq;
	int w = KTEL_WINDOW_UNKNOWN;

	if (!j)
		return w;
	map_id = json_object_get(j, "map_id");
	seq = json_object_get(j, "seq");
	if (json_is_integer(map_id) && json_is_integer(seq) && json_integer_value(map_id) > 0 &&
	    json_integer_value(map_id) <= UINT32_MAX && json_integer_value(seq) > 0)
		w = fn(ctx, json_string_value(json_object_get(j, "boot_id")),
		       json_string_value(json_object_get(j, "metric")),
		       (uint32_t)json_integer_value(map_id), (uint64_t)json_integer_value(seq));
	json_decref(j);
	return w;
}

/* Start of the line that ends just before end (p[end-1] is its '\n' or
 * end is the end of the text), or 0. */
static size_t line_start(const char *p, size_t end)
{
	const char *nl = end > 1 ? memrchr(p, '\n', end - 1) : NULL;

	return nl ? (size_t)(nl - p) + 1 : 0;
}

/*
 * Walk back from the end: the offset (in t) of the earliest line past the
 * state, or t->len when there is none. *ret_complete: the walk met a saved
 * window or the start of the file (not the read limit).
 */
static size_t find_cut(const struct tail *t, ktel_sink_window_fn fn, void *ctx, bool *ret_complete)
{
	size_t end = t->len, cut = t->len;

	*ret_complete = true;
	while (end > 0) {
		size_t start = line_start(t->p, end);
		int w;

		if (start == 0 && t->base > 0) {
			*ret_complete = false; /* a line cut by the read limit */
			break;
		}
		w = judge(t->p + start, end - start - (t->p[end - 1] == '\n'), fn, ctx);
		if (w == KTEL_WINDOW_SAVED)
			break;
		if (w == KTEL_WINDOW_AFTER)
			cut = start;
		end = start;
	}
	return cut;
}

/* Cut the file at t->base + cut and append back the lines of t->p[cut..)
 * that are not past the state; count the removed ones. */
static int rewrite(const struct tail *t, size_t cut, int wfd, ktel_sink_window_fn fn, void *ctx,
		   size_t *ret_removed, size_t *ret_kept_bytes)
{
	size_t pos = cut, keep = cut, removed = 0;

	/* Keep the lines in place, compacted towards cut, in memory first. */
	while (pos < t->len) {
		const char *nl = memchr(t->p + pos, '\n', t->len - pos);
		size_t len = (nl ? (size_t)(nl - t->p) + 1 : t->len) - pos;

		if (judge(t->p + pos, len - (nl != NULL), fn, ctx) == KTEL_WINDOW_AFTER) {
			removed++;
		} else {
			memmove(t->p + keep, t->p + pos, len);
			keep += len;
		}
		pos += len;
	}
	if (ftruncate(wfd, t->base + (off_t)cut))
		return -errno;
	for (pos = cut; pos < keep;) {
		ssize_t n = write(wfd, t->p + pos, keep - pos);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		pos += n;
	}
	if (fsync(wfd))
		return -errno;
	*ret_removed = removed;
	*ret_kept_bytes = keep - cut;
	return 0;
}

int ktel_json__recover(const char *sink, const char *path, int wfd, ktel_sink_window_fn fn,
		       void *ctx, uint64_t *size, struct ktel_err *err)
{
	struct tail t = {0};
	size_t cut, removed = 0, kept = 0;
	bool complete;
	int ret = tail_read(path, &t);

	if (ret) {
		ktel_err_set(err, -ret, "sinks.%s.path: cannot read %s back to recover: %s", sink,
			     path, strerror(-ret));
		goto out;
	}
	cut = find_cut(&t, fn, ctx, &complete);
	if (!complete)
		ktel_log(KTEL_LOG_WARN,
			 "sink %s: %s: no saved window in its last %zu bytes: "
			 "windows before them are not checked and may appear twice",
			 sink, path, t.len);
	if (cut == t.len)
		goto out;
	ret = rewrite(&t, cut, wfd, fn, ctx, &removed, &kept);
	if (ret) {
		ktel_err_set(err, -ret,
			     "sinks.%s.path: cannot cut the windows past the saved "
			     "state off %s: %s",
			     sink, path, strerror(-ret));
		goto out;
	}
	*size = (uint64_t)(t.base + (off_t)(cut + kept));
	ktel_log(KTEL_LOG_WARN,
		 "sink %s: %s: removed %zu line%s of windows written after the "
		 "last saved state (the daemon stopped before saving it): the next pull reports "
		 "them again",
		 sink, path, removed, removed == 1 ? "" : "s");
out:
	free(t.p);
	return ret;
}
