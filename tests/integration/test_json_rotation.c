// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * JSON sink on a full disk: a 64 KiB tmpfs mounted under the build dir,
 * mostly taken by a filler file. Writing until the disk is full must count
 * errors, keep every unwritten line queued, leave no file ending in part of
 * a line (the tmpfs page limit cuts a write mid-line: the sink cuts that
 * part off again), and, once the filler is removed, deliver every line in
 * order with no torn line in any file; with rotation, the set of files
 * stays at keep + 1. Closed while the disk is still full, the sink counts
 * what it could not write and the file still ends in a whole line. Needs
 * root (mount).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "sink_test.h"
#include <jansson.h>

#include "sinks.h"
#include "ktel_test.h"

static char top[512], mnt[600];

static int setup(void **state)
{
	snprintf(top, sizeof(top), "%s/test-json-rotation-%d", KTEL_BINARY_DIR, getpid());
	snprintf(mnt, sizeof(mnt), "%s/mnt", top);
	if (mkdir(top, 0700) || mkdir(mnt, 0700))
		return -1;
	if (mount("tmpfs", mnt, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0700")) {
		fprintf(stderr, "mount tmpfs on %s: %s\n", mnt, strerror(errno));
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	umount2(mnt, MNT_DETACH);
	rmdir(mnt);
	rmdir(top);
	return 0;
}

static const struct ktel_sink_ops *ops(void)
{
	return ktel_sink_type_find("json");
}

static void make_rec(struct ktel_record *r, uint64_t seq)
{
	memset(r, 0, sizeof(*r));
	r->type = KTEL_RECORD_HISTOGRAM;
	r->metric = "disk_full_test";
	r->unit = "us";
	r->boot_id = "boot";
	r->map_id = 1;
	r->seq = seq;
	r->n_dims = 1;
	r->dims[0] = (struct ktel_dim){.name = "state", .value = 4, .label = "STATE_X"};
	r->hist.delta.scheme = KTEL_HIST_LOG2;
	r->hist.delta.n_buckets = KTEL_HIST_BUCKETS;
	for (int k = 0; k < KTEL_HIST_BUCKETS; k++)
		r->hist.delta.counts[k] = seq * 1000 + k;
}

/* Fill the tmpfs with a filler file up to all but `leave` bytes. */
static void fill(const char *filler, size_t leave)
{
	static char block[4096];
	int fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	size_t total = 64 * 1024 - leave, done = 0;

	assert_true(fd >= 0);
	memset(block, 'x', sizeof(block));
	while (done < total) {
		ssize_t n = write(fd, block, sizeof(block));

		if (n <= 0)
			break;
		done += n;
	}
	close(fd);
}

/* The last byte of a file, 0 when it is empty. */
static int last_byte(const char *path)
{
	struct stat sb;
	char c = 0;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &sb), 0);
	if (sb.st_size)
		assert_int_equal(pread(fd, &c, 1, sb.st_size - 1), 1);
	close(fd);
	return c;
}

/* Lines of one file: each must parse and end with '\n'; appends seqs. */
static size_t check_file(const char *path, uint64_t *seqs, size_t n, size_t max_bytes)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0, bytes = 0;
	ssize_t len;

	if (!f)
		return n;
	while ((len = getline(&line, &cap, f)) > 0) {
		json_error_t jerr;
		json_t *j;

		bytes += len;
		if (line[len - 1] != '\n')
			fail_msg("%s: torn last line: %s", path, line);
		j = json_loadb(line, len - 1, 0, &jerr);
		if (!j)
			fail_msg("%s: bad line (%s): %s", path, jerr.text, line);
		seqs[n++] = json_integer_value(json_object_get(j, "seq"));
		json_decref(j);
	}
	free(line);
	fclose(f);
	if (max_bytes)
		assert_true(bytes <= max_bytes);
	return n;
}

/* The final stats, read from inside the close callback (sink.h). */
struct close_full_ctx {
	void *sink;
	int closed;
	struct ktel_sink_stats st;
};

static void closed_full(void *ctx)
{
	struct close_full_ctx *c = ctx;

	c->closed++;
	ops()->stats(c->sink, &c->st);
}

static void disk_full(unsigned keep, size_t rotate_bytes, size_t leave, bool close_full)
{
	char path[700], filler[700], name[800];
	struct ktel_sink_stats st = {0};
	struct ktel_err err = {0};
	uint64_t seqs[4096], next = 1;
	uv_loop_t loop;
	json_t *o;
	size_t n = 0;
	int closed = 0;
	void *s;

	snprintf(path, sizeof(path), "%s/out.jsonl", mnt);
	snprintf(filler, sizeof(filler), "%s/filler", mnt);
	fill(filler, leave);
	o = json_pack("{s:s}", "path", path);
	if (rotate_bytes) {
		json_t *rot = json_pack("{s:I,s:i,s:b}", "rotate_bytes", (json_int_t)rotate_bytes,
					"keep", keep, "fsync", 1);

		json_object_update(o, rot);
		json_decref(rot);
	}
	uv_loop_init(&loop);
	if (ops()->create(&loop, "full", o, &s, &err))
		fail_msg("create: %s", err.msg);
	json_decref(o);

	/* Write until the disk refuses, then a little more. A short write's
	 * error is counted once its torn part is cut off, and the retry waits
	 * at least 25 ms after that: stopping within 5 ms of the count, the
	 * file is at rest. */
	for (int i = 0; i < 400 && st.errors < 2; i++) {
		struct ktel_record recs[4];

		for (int j = 0; j < 4; j++)
			make_rec(&recs[j], next++);
		ops()->submit(s, recs, 4);
		ktel_test_run_for(&loop, 5);
		ops()->stats(s, &st);
	}
	assert_true(st.errors >= 2);
	assert_true(st.queued > 0);
	assert_int_equal(st.dropped, 0);
	assert_true(st.sent < next - 1);
	/* The disk filled mid-line (the tmpfs page limit is on no line
	 * boundary), yet the file ends in a whole line: the torn part was cut
	 * off and its line is still queued. (Just rotated, it may be empty.) */
	assert_true(last_byte(path) == '\n' || (keep && last_byte(path) == 0));

	if (close_full) {
		struct close_full_ctx c = {.sink = s};

		ops()->close(s, 300, closed_full, &c);
		uv_run(&loop, UV_RUN_DEFAULT);
		assert_int_equal(c.closed, 1);
		assert_int_equal(uv_loop_close(&loop), 0);
		assert_int_equal(last_byte(path), '\n');
		assert_true(c.st.dropped > 0);
		assert_int_equal(c.st.sent + c.st.dropped, next - 1);
		n = check_file(path, seqs, 0, 0);
		assert_int_equal(n, c.st.sent);
		for (size_t i = 0; i < n; i++)
			assert_int_equal(seqs[i], i + 1);
		unlink(path);
		unlink(filler);
		return;
	}

	/* Space again: every queued line arrives, whole and once. */
	assert_int_equal(unlink(filler), 0);
	for (int i = 0; i < 150 && st.queued; i++) {
		ktel_test_run_for(&loop, 100);
		ops()->stats(s, &st);
	}
	assert_int_equal(st.queued, 0);
	assert_int_equal(st.sent, next - 1);
	assert_int_equal(st.dropped, 0);
	ops()->close(s, 1000, ktel_test_count_closed, &closed);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(closed, 1);
	assert_int_equal(uv_loop_close(&loop), 0);

	/* Oldest file first; no torn line anywhere; seqs contiguous up to
	 * the last one written. */
	for (unsigned k = keep + 1; k-- > 1;) {
		snprintf(name, sizeof(name), "%s.%u", path, k);
		n = check_file(name, seqs, n, rotate_bytes);
	}
	n = check_file(path, seqs, n, rotate_bytes);
	assert_true(n > 0);
	for (size_t i = 1; i < n; i++)
		assert_int_equal(seqs[i], seqs[i - 1] + 1);
	assert_int_equal(seqs[n - 1], next - 1);
	if (!keep)
		assert_int_equal(n, next - 1);
	snprintf(name, sizeof(name), "%s.%u", path, keep + 1);
	assert_int_equal(access(name, F_OK), -1);
	for (unsigned k = 0; k <= keep; k++) {
		if (k)
			snprintf(name, sizeof(name), "%s.%u", path, k);
		unlink(k ? name : path);
	}
}

static void test_disk_full_plain(void **state)
{
	disk_full(0, 0, 24 * 1024, false);
}

static void test_disk_full_rotating(void **state)
{
	disk_full(2, 6000, 12 * 1024, false);
}

static void test_disk_full_close(void **state)
{
	disk_full(0, 0, 24 * 1024, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_disk_full_plain, setup, teardown),
		cmocka_unit_test_setup_teardown(test_disk_full_rotating, setup, teardown),
		cmocka_unit_test_setup_teardown(test_disk_full_close, setup, teardown),
	};

	ktel_test_require_root("test_json_rotation");
	/* KTEL_TEST_FILTER=name runs one test while working on it. */
	if (getenv("KTEL_TEST_FILTER"))
		cmocka_set_test_filter(getenv("KTEL_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
