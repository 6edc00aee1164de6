// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Delta engine: windows, resets, limits and the persisted state file. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "delta.h"
#include "ktel_test.h"

#define BOOT "0b7a1d3e-1111-4c2e-9a55-5c1d2e3f4a5b"
#define OTHER_BOOT "99999999-2222-4c2e-9a55-5c1d2e3f4a5b"
#define M "lat"
#define N 4

struct key {
	uint32_t state;
	uint32_t uid;
};

static char dir[512];

static int setup_dir(void **state)
{
	snprintf(dir, sizeof(dir), "%s/test-delta-%d", KTEL_BINARY_DIR, getpid());
	mkdir(dir, 0700);
	return 0;
}

static int teardown_dir(void **state)
{
	return ktel_test_rm_rf(dir) == 0 ? 0 : -1;
}

/* Apply one key and check the outcome and the delta written. */
static void apply(struct ktel_delta_metric *m, uint32_t state, const uint64_t *cur,
		  const uint64_t *want, enum ktel_delta_outcome want_outcome)
{
	struct key k = {.state = state, .uid = 1000};
	const struct ktel_delta_reading in = {
		.key = &k,
		.key_size = sizeof(k),
		.vals = cur,
		.n = N,
	};
	uint64_t delta[N];

	assert_int_equal(ktel_delta__apply(m, &in, delta), want_outcome);
	if (want)
		assert_memory_equal(delta, want, sizeof(delta));
}

static struct ktel_delta_metric *begin(struct ktel_delta *d, uint32_t map_id, bool ours,
				       enum ktel_delta_start want)
{
	enum ktel_delta_start start = 0;
	struct ktel_delta_metric *m = NULL;

	assert_int_equal(ktel_delta__begin(d, M, map_id, ours, &m, &start), 0);
	assert_non_null(m);
	assert_int_equal(start, want);
	return m;
}

static void test_created_map_emits_full(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c1[N] = {1, 2, 0, 3};
	struct ktel_delta_metric *m;

	assert_non_null(d);
	m = begin(d, 7, true, KTEL_DELTA_START_ZERO);
	apply(m, 1, c1, c1, KTEL_DELTA_EMIT);
	assert_int_equal(ktel_delta__end(d, M), 0);
	ktel_delta__free(d);
}

static void test_reused_map_without_state_is_baseline(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c1[N] = {10, 20, 0, 30}, c2[N] = {11, 20, 5, 30};
	uint64_t z[N] = {0}, w2[N] = {1, 0, 5, 0};
	struct ktel_delta_metric *m;

	m = begin(d, 7, false, KTEL_DELTA_START_BASELINE);
	apply(m, 1, c1, z, KTEL_DELTA_BASELINE);
	ktel_delta__end(d, M);
	/* Next pull continues from the baseline: only the growth counts. */
	m = begin(d, 7, false, KTEL_DELTA_START_STATE);
	apply(m, 1, c2, w2, KTEL_DELTA_EMIT);
	/* A key that appears after the baseline is all new. */
	apply(m, 2, c1, c1, KTEL_DELTA_EMIT);
	ktel_delta__end(d, M);
	ktel_delta__free(d);
}

static void test_steady_state_and_reset_by_decrease(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c1[N] = {1, 2, 3, 4}, c2[N] = {2, 4, 6, 8}, c3[N] = {2, 1, 6, 9};
	uint64_t w2[N] = {1, 2, 3, 4};
	struct ktel_delta_stats st;
	struct ktel_delta_metric *m;

	m = begin(d, 3, true, KTEL_DELTA_START_ZERO);
	apply(m, 1, c1, c1, KTEL_DELTA_EMIT);
	ktel_delta__end(d, M);
	m = begin(d, 3, true, KTEL_DELTA_START_STATE);
	apply(m, 1, c2, w2, KTEL_DELTA_EMIT);
	ktel_delta__end(d, M);
	/* Bucket 1 went down: the map was cleared, the delta is the value. */
	m = begin(d, 3, true, KTEL_DELTA_START_STATE);
	apply(m, 1, c3, c3, KTEL_DELTA_RESET);
	ktel_delta__end(d, M);
	assert_int_equal(ktel_delta__stats(d, M, &st), 0);
	assert_int_equal(st.resets, 1);
	assert_int_equal(st.entries, 1);
	ktel_delta__free(d);
}

/* Only a pull that changed something makes the state worth saving. */
static void test_dirty_only_on_change(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c1[N] = {1, 2, 3, 4}, c2[N] = {1, 2, 3, 5}, z[N] = {0}, w[N] = {0, 0, 0, 1};
	struct ktel_delta_metric *m;

	assert_false(ktel_delta__dirty(d));
	m = begin(d, 3, true, KTEL_DELTA_START_ZERO);
	apply(m, 1, c1, c1, KTEL_DELTA_EMIT); /* a new key */
	ktel_delta__end(d, M);
	assert_true(ktel_delta__dirty(d));
	ktel_delta__mark_saved(d);
	m = begin(d, 3, true, KTEL_DELTA_START_STATE);
	apply(m, 1, c1, z, KTEL_DELTA_ZERO); /* same values: nothing new */
	ktel_delta__end(d, M);
	assert_false(ktel_delta__dirty(d));
	m = begin(d, 3, true, KTEL_DELTA_START_STATE);
	apply(m, 1, c2, w, KTEL_DELTA_EMIT); /* one bucket moved */
	ktel_delta__end(d, M);
	assert_true(ktel_delta__dirty(d));
	ktel_delta__mark_saved(d);
	m = begin(d, 4, true, KTEL_DELTA_START_ZERO);
	apply(m, 1, c2, c2, KTEL_DELTA_RESET); /* same values from a new map */
	ktel_delta__end(d, M);
	assert_true(ktel_delta__dirty(d));
	ktel_delta__mark_saved(d);
	m = begin(d, 4, true, KTEL_DELTA_START_STATE);
	ktel_delta__end(d, M); /* the key vanished */
	assert_true(ktel_delta__dirty(d));
	ktel_delta__free(d);
}

static void test_reset_by_map_id_change(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c1[N] = {5, 5, 5, 5}, c2[N] = {6, 6, 6, 6};
	struct ktel_delta_metric *m;

	m = begin(d, 3, true, KTEL_DELTA_START_ZERO);
	apply(m, 1, c1, c1, KTEL_DELTA_EMIT);
	ktel_delta__end(d, M);
	/* Values grew, but they come from another map (recreated): reset. */
	m = begin(d, 4, true, KTEL_DELTA_START_ZERO);
	apply(m, 1, c2, c2, KTEL_DELTA_RESET);
	ktel_delta__end(d, M);
	ktel_delta__free(d);
}

static void test_zero_skip_and_zero_emit(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c1[N] = {1, 0, 0, 0}, z[N] = {0};
	struct ktel_delta_metric *m;

	m = begin(d, 3, true, KTEL_DELTA_START_ZERO);
	apply(m, 1, c1, c1, KTEL_DELTA_EMIT);
	ktel_delta__end(d, M);
	m = begin(d, 3, true, KTEL_DELTA_START_STATE);
	apply(m, 1, c1, z, KTEL_DELTA_ZERO);
	ktel_delta__end(d, M);
	assert_int_equal(ktel_delta__set_emit_zeros(d, M, true), 0);
	m = begin(d, 3, true, KTEL_DELTA_START_STATE);
	apply(m, 1, c1, z, KTEL_DELTA_EMIT);
	ktel_delta__end(d, M);
	ktel_delta__free(d);
}

/* A key taken out of the map with its last values: counted against the
 * state, which then restarts from zero, so the key made again counts from
 * zero, even above the last values; not read again, it is forgotten. */
static void test_taken_key_restarts(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c1[N] = {5, 1, 0, 2}, c2[N] = {8, 1, 4, 2}, c3[N] = {9, 2, 5, 3};
	uint64_t w2[N] = {3, 0, 4, 0};
	struct key k = {.state = 1, .uid = 1000};
	const struct ktel_delta_reading in = {.key = &k, .key_size = sizeof(k), .vals = c2, .n = N};
	struct ktel_delta_metric *m;
	uint64_t delta[N];

	m = begin(d, 7, true, KTEL_DELTA_START_ZERO);
	apply(m, 1, c1, c1, KTEL_DELTA_EMIT);
	assert_int_equal(ktel_delta__end(d, M), 0);
	m = begin(d, 7, true, KTEL_DELTA_START_STATE);
	assert_int_equal(ktel_delta__apply_taken(m, &in, delta), KTEL_DELTA_EMIT);
	assert_memory_equal(delta, w2, sizeof(delta));
	assert_int_equal(ktel_delta__end(d, M), 0);
	/* Made again: all of it counts, no reset. */
	m = begin(d, 7, true, KTEL_DELTA_START_STATE);
	apply(m, 1, c3, c3, KTEL_DELTA_EMIT);
	assert_int_equal(ktel_delta__end(d, M), 0);
	/* Taken again, then not there. */
	m = begin(d, 7, true, KTEL_DELTA_START_STATE);
	assert_int_equal(ktel_delta__apply_taken(m, &in, delta), KTEL_DELTA_RESET);
	assert_int_equal(ktel_delta__end(d, M), 0);
	m = begin(d, 7, true, KTEL_DELTA_START_STATE);
	assert_int_equal(ktel_delta__end(d, M), 1);
	ktel_delta__free(d);
}

static void test_vanished_key_forgotten(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c1[N] = {1, 1, 1, 1};
	struct ktel_delta_stats st;
	struct ktel_delta_metric *m;

	m = begin(d, 3, true, KTEL_DELTA_START_ZERO);
	apply(m, 1, c1, c1, KTEL_DELTA_EMIT);
	apply(m, 2, c1, c1, KTEL_DELTA_EMIT);
	assert_int_equal(ktel_delta__end(d, M), 0);
	m = begin(d, 3, true, KTEL_DELTA_START_STATE);
	apply(m, 1, c1, NULL, KTEL_DELTA_ZERO);
	assert_int_equal(ktel_delta__end(d, M), 1);
	assert_int_equal(ktel_delta__stats(d, M, &st), 0);
	assert_int_equal(st.entries, 1);
	assert_int_equal(st.forgotten, 1);
	/* Key 2 comes back (deleted and re-created in the map): all new. */
	m = begin(d, 3, true, KTEL_DELTA_START_STATE);
	apply(m, 1, c1, NULL, KTEL_DELTA_ZERO);
	apply(m, 2, c1, c1, KTEL_DELTA_EMIT);
	assert_int_equal(ktel_delta__end(d, M), 0);
	/* end outside a pull is refused. */
	assert_int_equal(ktel_delta__end(d, M), -ENOENT);
	/* A walk that failed half-way is aborted: nothing is forgotten. */
	m = begin(d, 3, true, KTEL_DELTA_START_STATE);
	apply(m, 1, c1, NULL, KTEL_DELTA_ZERO);
	assert_int_equal(ktel_delta__abort(d, M), 0);
	assert_int_equal(ktel_delta__stats(d, M, &st), 0);
	assert_int_equal(st.entries, 2);
	assert_int_equal(ktel_delta__end(d, M), -ENOENT);
	ktel_delta__free(d);
}

static void test_entry_limit_counted(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c1[N] = {1, 2, 3, 4}, c2[N] = {2, 3, 4, 5}, z[N] = {0};
	struct ktel_delta_stats st;
	struct ktel_delta_metric *m;

	assert_int_equal(ktel_delta__set_max_entries(d, 2), 0);
	m = begin(d, 3, true, KTEL_DELTA_START_ZERO);
	apply(m, 1, c1, c1, KTEL_DELTA_EMIT);
	apply(m, 2, c1, c1, KTEL_DELTA_EMIT);
	apply(m, 3, c1, z, KTEL_DELTA_REFUSED);
	ktel_delta__end(d, M);
	assert_int_equal(ktel_delta__stats(d, M, &st), 0);
	assert_int_equal(st.entries, 2);
	assert_int_equal(st.limit_dropped, 1);
	/* Key 2 vanishes: room again. Key 3 was never emitted, so its full
	 * value is due. */
	m = begin(d, 3, true, KTEL_DELTA_START_STATE);
	apply(m, 1, c2, NULL, KTEL_DELTA_EMIT);
	apply(m, 3, c2, z, KTEL_DELTA_REFUSED);
	assert_int_equal(ktel_delta__end(d, M), 1);
	m = begin(d, 3, true, KTEL_DELTA_START_STATE);
	apply(m, 3, c2, c2, KTEL_DELTA_EMIT);
	ktel_delta__end(d, M);
	assert_int_equal(ktel_delta__stats(d, M, &st), 0);
	assert_int_equal(st.limit_dropped, 2);
	ktel_delta__free(d);
}

static void test_many_keys_rehash(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c[N], delta[N];
	struct ktel_delta_metric *m;

	for (int pull = 1; pull <= 2; pull++) {
		m = begin(d, 9, true, pull == 1 ? KTEL_DELTA_START_ZERO : KTEL_DELTA_START_STATE);
		for (uint32_t i = 0; i < 5000; i++) {
			struct key k = {.state = i, .uid = i * 7};
			const struct ktel_delta_reading in = {
				.key = &k,
				.key_size = sizeof(k),
				.vals = c,
				.n = N,
			};

			for (int j = 0; j < N; j++)
				c[j] = (uint64_t)pull * (i + j);
			assert_int_equal(ktel_delta__apply(m, &in, delta), KTEL_DELTA_EMIT);
			for (int j = 0; j < N; j++)
				assert_int_equal(delta[j], i + j);
		}
		assert_int_equal(ktel_delta__end(d, M), 0);
	}
	ktel_delta__free(d);
}

static void test_seq(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);

	assert_int_equal(ktel_delta__next_seq(d, M), 0);
	begin(d, 3, true, KTEL_DELTA_START_ZERO);
	assert_int_equal(ktel_delta__next_seq(d, M), 1);
	assert_int_equal(ktel_delta__next_seq(d, M), 2);
	ktel_delta__free(d);
}

/* peek_seq says what next_seq will hand out and takes nothing: a pull stamps
 * its records with it and takes it only when it emitted some. */
static void test_peek_seq_takes_nothing(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);

	assert_int_equal(ktel_delta__peek_seq(d, M), 0);
	begin(d, 3, true, KTEL_DELTA_START_ZERO);
	ktel_delta__end(d, M);
	ktel_delta__mark_saved(d);
	assert_int_equal(ktel_delta__peek_seq(d, M), 1);
	assert_int_equal(ktel_delta__peek_seq(d, M), 1);
	assert_false(ktel_delta__dirty(d));
	assert_int_equal(ktel_delta__next_seq(d, M), 1);
	assert_int_equal(ktel_delta__peek_seq(d, M), 2);
	ktel_delta__free(d);
}

static void path_in_dir(char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "%s/%s", dir, name);
}

static void test_state_round_trip(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT), *d2;
	uint64_t c1[N] = {1, 2, 3, 4}, c2[N] = {3, 2, 3, 10}, w2[N] = {2, 0, 0, 6};
	struct ktel_err err = {0};
	struct ktel_delta_stats st;
	char path[600];
	struct ktel_delta_metric *m;

	path_in_dir(path, sizeof(path), "rt.state");
	m = begin(d, 11, true, KTEL_DELTA_START_ZERO);
	apply(m, 1, c1, c1, KTEL_DELTA_EMIT);
	apply(m, 2, c2, c2, KTEL_DELTA_EMIT);
	ktel_delta__end(d, M);
	assert_int_equal(ktel_delta__next_seq(d, M), 1);
	assert_int_equal(ktel_delta__save(d, path, &err), 0);
	ktel_delta__free(d);

	/* A restarted daemon reuses the pinned map (not created by it). */
	d2 = ktel_delta__new(BOOT);
	assert_int_equal(ktel_delta__load(d2, path, &err), 0);
	assert_int_equal(ktel_delta__stats(d2, M, &st), 0);
	assert_int_equal(st.entries, 2);
	assert_int_equal(st.map_id, 11);
	assert_int_equal(st.seq, 1);
	m = begin(d2, 11, false, KTEL_DELTA_START_STATE);
	apply(m, 1, c2, w2, KTEL_DELTA_EMIT);   /* not counted twice */
	apply(m, 2, c2, NULL, KTEL_DELTA_ZERO); /* unchanged: skipped */
	ktel_delta__end(d2, M);
	assert_int_equal(ktel_delta__next_seq(d2, M), 2);
	ktel_delta__free(d2);
}

/* A snapshot taken after seq 1 and written after seq 2 was handed out
 * holds seq 1: what the restarted daemon judges file lines against. */
static void test_snapshot_and_window(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT), *d2;
	uint64_t c1[N] = {1, 2, 3, 4};
	struct ktel_delta_snapshot snap;
	struct ktel_err err = {0};
	char path[600];
	struct ktel_delta_metric *m;

	path_in_dir(path, sizeof(path), "snap.state");
	m = begin(d, 11, true, KTEL_DELTA_START_ZERO);
	apply(m, 1, c1, c1, KTEL_DELTA_EMIT);
	ktel_delta__end(d, M);
	assert_int_equal(ktel_delta__next_seq(d, M), 1);
	assert_int_equal(ktel_delta__snapshot(d, &snap, &err), 0);
	assert_int_equal(ktel_delta__next_seq(d, M), 2);
	assert_int_equal(ktel_delta_snapshot__write(&snap, path, &err), 0);
	ktel_delta_snapshot__clear(&snap);
	assert_null(snap.data);
	ktel_delta__free(d);

	d2 = ktel_delta__new(BOOT);
	assert_int_equal(ktel_delta__load(d2, path, &err), 0);
	assert_int_equal(ktel_delta__window(d2, BOOT, M, 11, 1), KTEL_WINDOW_SAVED);
	assert_int_equal(ktel_delta__window(d2, BOOT, M, 11, 2), KTEL_WINDOW_AFTER);
	assert_int_equal(ktel_delta__window(d2, OTHER_BOOT, M, 11, 2), KTEL_WINDOW_UNKNOWN);
	assert_int_equal(ktel_delta__window(d2, BOOT, M, 12, 2), KTEL_WINDOW_UNKNOWN);
	assert_int_equal(ktel_delta__window(d2, BOOT, "other", 11, 2), KTEL_WINDOW_UNKNOWN);
	assert_int_equal(ktel_delta__window(d2, NULL, M, 11, 2), KTEL_WINDOW_UNKNOWN);
	ktel_delta__free(d2);
}

static void test_missing_state_is_empty(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	struct ktel_err err = {0};
	char path[600];

	path_in_dir(path, sizeof(path), "none.state");
	assert_int_equal(ktel_delta__load(d, path, &err), 0);
	assert_int_equal(ktel_delta__next_seq(d, M), 0);
	ktel_delta__free(d);
}

static size_t count_files(const char *prefix)
{
	DIR *dh = opendir(dir);
	struct dirent *de;
	size_t n = 0;

	assert_non_null(dh);
	while ((de = readdir(dh)))
		if (strncmp(de->d_name, prefix, strlen(prefix)) == 0)
			n++;
	closedir(dh);
	return n;
}

static void write_file(const char *path, const void *p, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, p, len), (ssize_t)len);
	close(fd);
}

/* Save a valid state under boot, then mangle it with fn and load it. */
static void check_corrupt(const char *name, const char *save_boot, void (*mangle)(const char *path),
			  int want)
{
	struct ktel_delta *d = ktel_delta__new(save_boot), *d2;
	uint64_t c1[N] = {1, 2, 3, 4};
	struct ktel_err err = {0};
	char path[600], prefix[64];
	struct ktel_delta_metric *m;

	path_in_dir(path, sizeof(path), name);
	m = begin(d, 5, true, KTEL_DELTA_START_ZERO);
	apply(m, 1, c1, c1, KTEL_DELTA_EMIT);
	ktel_delta__end(d, M);
	assert_int_equal(ktel_delta__save(d, path, &err), 0);
	ktel_delta__free(d);
	if (mangle)
		mangle(path);

	d2 = ktel_delta__new(BOOT);
	assert_int_equal(ktel_delta__load(d2, path, &err), want);
	assert_int_equal(err.code, -want);
	assert_non_null(strstr(err.msg, path));
	assert_non_null(strstr(err.msg, ".corrupt-"));
	/* Not trusted: nothing loaded, the file moved aside. */
	assert_int_equal(ktel_delta__next_seq(d2, M), 0);
	assert_int_equal(access(path, F_OK), -1);
	snprintf(prefix, sizeof(prefix), "%s.corrupt-", name);
	assert_int_equal(count_files(prefix), 1);
	/* And the engine works from a baseline on the reused map. */
	m = begin(d2, 5, false, KTEL_DELTA_START_BASELINE);
	apply(m, 1, c1, NULL, KTEL_DELTA_BASELINE);
	ktel_delta__end(d2, M);
	ktel_delta__free(d2);
}

static void truncate_half(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(truncate(path, st.st_size / 2), 0);
}

static void flip_payload_byte(const char *path)
{
	int fd = open(path, O_RDWR);
	uint8_t b;

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &b, 1, 100), 1);
	b ^= 0x40;
	assert_int_equal(pwrite(fd, &b, 1, 100), 1);
	close(fd);
}

static void bump_version(const char *path)
{
	int fd = open(path, O_RDWR);
	uint32_t v = 99;

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, &v, sizeof(v), 8), sizeof(v));
	close(fd);
}

/* A damaged state file: the magic survives, the rest is garbage. */
static void garbage_after_magic(const char *path)
{
	int fd = open(path, O_WRONLY);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "garbage garbage garbage", 23, 8), 23);
	close(fd);
}

static void test_corrupt_garbage(void **state)
{
	check_corrupt("garbage.state", BOOT, garbage_after_magic, -EBADMSG);
}

/* Something that is not a state file at all (the JSON sink's output, an
 * empty file, a directory): refused, left where and as it is. */
static void check_not_state(const char *name, const char *content, bool is_dir)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	struct ktel_err err = {0}, cerr = {0};
	char path[600], prefix[64];
	struct stat st;

	path_in_dir(path, sizeof(path), name);
	if (is_dir)
		assert_int_equal(mkdir(path, 0700), 0);
	else
		write_file(path, content, strlen(content));
	assert_int_equal(ktel_delta__load(d, path, &err), -EEXIST);
	assert_int_equal(err.code, EEXIST);
	assert_non_null(strstr(err.msg, path));
	assert_non_null(strstr(err.msg, "not a delta state file"));
	/* --check-config's check refuses it the same way. */
	assert_int_equal(ktel_delta_state_check(path, &cerr), -EEXIST);
	assert_string_equal(cerr.msg, err.msg);
	assert_int_equal(stat(path, &st), 0);
	if (!is_dir)
		assert_int_equal(st.st_size, strlen(content));
	snprintf(prefix, sizeof(prefix), "%s.corrupt-", name);
	assert_int_equal(count_files(prefix), 0);
	ktel_delta__free(d);
}

static void test_not_a_state_file_refused(void **state)
{
	check_not_state("sink-output.jsonl",
			"{\"metric\":\"runq_latency\",\"seq\":1}\n"
			"{\"metric\":\"runq_latency\",\"seq\":2}\n",
			false);
	check_not_state("empty.state", "", false);
	check_not_state("short.state", "KTEL", false);
	check_not_state("dir.state", "", true);
	check_not_state("text.state",
			"this is not a state file, but it is long enough to "
			"have a header and a checksum and everything else",
			false);
}

/* A symlink is never followed, even to a good state file, and a FIFO does
 * not hang the load: both are refused and left alone. */
static void test_symlink_and_fifo_refused(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	struct ktel_err err = {0};
	char target[600], link[600], fifo[600];

	path_in_dir(target, sizeof(target), "target.state");
	path_in_dir(link, sizeof(link), "link.state");
	path_in_dir(fifo, sizeof(fifo), "fifo.state");
	assert_int_equal(ktel_delta__save(d, target, &err), 0);
	assert_int_equal(symlink(target, link), 0);
	assert_int_equal(ktel_delta__load(d, link, &err), -EEXIST);
	assert_non_null(strstr(err.msg, "not a delta state file"));
	assert_int_equal(ktel_delta_state_check(link, &err), -EEXIST);
	assert_non_null(strstr(err.msg, "not a delta state file"));
	assert_int_equal(access(link, F_OK), 0);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(ktel_delta__load(d, fifo, &err), -EEXIST);
	assert_int_equal(ktel_delta_state_check(fifo, &err), -EEXIST);
	assert_int_equal(access(fifo, F_OK), 0);
	assert_int_equal(count_files("link.state.corrupt-"), 0);
	assert_int_equal(count_files("fifo.state.corrupt-"), 0);
	ktel_delta__free(d);
}

/* What the load takes or moves aside and goes on with (nothing there, a
 * state file, a damaged one with the magic) the check passes, moving
 * nothing. */
static void test_state_check_passes_what_load_takes(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	struct ktel_err err = {0};
	char good[600], bad[600];

	path_in_dir(good, sizeof(good), "check-good.state");
	path_in_dir(bad, sizeof(bad), "check-bad.state");
	assert_int_equal(ktel_delta_state_check(good, &err), 0);
	assert_int_equal(ktel_delta__save(d, good, &err), 0);
	assert_int_equal(ktel_delta_state_check(good, &err), 0);
	write_file(bad, "KTELDST1 and then garbage", 25);
	assert_int_equal(ktel_delta_state_check(bad, &err), 0);
	assert_int_equal(access(bad, F_OK), 0);
	assert_int_equal(count_files("check-bad.state.corrupt-"), 0);
	ktel_delta__free(d);
}

/* A file with the state magic but larger than any save writes (2 GiB): set
 * aside as corrupt without being read whole. Sparse, so it costs nothing. */
static void test_oversized_state_set_aside(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	struct ktel_err err = {0};
	char path[600];

	path_in_dir(path, sizeof(path), "huge.state");
	write_file(path, "KTELDST1", 8);
	assert_int_equal(truncate(path, (1ll << 31) + 1), 0);
	assert_int_equal(ktel_delta__load(d, path, &err), -EBADMSG);
	assert_int_equal(err.code, EBADMSG);
	assert_non_null(strstr(err.msg, "larger than any state file"));
	assert_non_null(strstr(err.msg, ".corrupt-"));
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(count_files("huge.state.corrupt-"), 1);
	ktel_delta__free(d);
}

static void test_corrupt_truncated(void **state)
{
	check_corrupt("trunc.state", BOOT, truncate_half, -EBADMSG);
}

static void test_corrupt_bit_flip(void **state)
{
	check_corrupt("flip.state", BOOT, flip_payload_byte, -EBADMSG);
}

static void test_wrong_version(void **state)
{
	check_corrupt("version.state", BOOT, bump_version, -EBADMSG);
}

static void test_foreign_boot(void **state)
{
	check_corrupt("boot.state", OTHER_BOOT, NULL, -ESTALE);
}

static void test_atomic_save_leaves_no_temp(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c1[N] = {1, 2, 3, 4};
	struct ktel_err err = {0};
	char path[600], bad[700];
	struct ktel_delta_metric *m;

	path_in_dir(path, sizeof(path), "atomic.state");
	m = begin(d, 5, true, KTEL_DELTA_START_ZERO);
	apply(m, 1, c1, c1, KTEL_DELTA_EMIT);
	ktel_delta__end(d, M);
	for (int i = 0; i < 3; i++)
		assert_int_equal(ktel_delta__save(d, path, &err), 0);
	assert_int_equal(count_files("atomic.state"), 1);
	assert_int_equal(count_files("atomic.state.tmp"), 0);
	/* A directory that does not exist: an error naming the path. */
	snprintf(bad, sizeof(bad), "%s/no-such-dir/x.state", dir);
	assert_int_equal(ktel_delta__save(d, bad, &err), -ENOENT);
	assert_non_null(strstr(err.msg, bad));
	ktel_delta__free(d);
}

/* CRC-32 (IEEE) a byte at a time: the checksum files have always carried. */
static uint32_t reference_crc32(const uint8_t *p, size_t len)
{
	uint32_t crc = 0xffffffffu;

	for (size_t i = 0; i < len; i++) {
		crc ^= p[i];
		for (int k = 0; k < 8; k++)
			crc = crc & 1 ? 0xedb88320u ^ (crc >> 1) : crc >> 1;
	}
	return ~crc;
}

/* Apply keys [from, to) to m with values i * mul + j, n_vals each. */
static void apply_range(struct ktel_delta_metric *m, uint32_t from, uint32_t to, uint64_t mul,
			size_t n_vals)
{
	uint64_t c[8], delta[8];

	for (uint32_t i = from; i < to; i++) {
		struct key k = {.state = i, .uid = i ^ 0x5a5a};
		const struct ktel_delta_reading in = {
			.key = &k,
			.key_size = sizeof(k),
			.vals = c,
			.n = n_vals,
		};

		for (size_t j = 0; j < n_vals; j++)
			c[j] = (uint64_t)i * mul + j;
		assert_true(ktel_delta__apply(m, &in, delta) > 0);
	}
}

/*
 * A state larger than the save's write buffer (64 KiB), after keys were
 * added, forgotten and re-laid out (their value count changed), is written
 * with the size its header says and the standard CRC-32, and loads back
 * with every key's values.
 */
static void test_large_state_round_trip(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT), *d2;
	struct ktel_err err = {0};
	struct ktel_delta_stats st;
	struct ktel_delta_metric *m;
	uint8_t *img;
	uint32_t crc;
	char path[600];
	struct stat sb;
	int fd;

	path_in_dir(path, sizeof(path), "large.state");
	assert_int_equal(ktel_delta__set_max_entries(d, 100000), 0);
	assert_int_equal(ktel_delta__begin(d, "a", 7, true, &m, NULL), 0);
	apply_range(m, 0, 6000, 3, 4);
	assert_int_equal(ktel_delta__end(d, "a"), 0);
	/* Keys 4000.. vanish, keys 0..999 get 8 values instead of 4. */
	assert_int_equal(ktel_delta__begin(d, "a", 7, true, &m, NULL), 0);
	apply_range(m, 0, 1000, 5, 8);
	apply_range(m, 1000, 4000, 5, 4);
	assert_int_equal(ktel_delta__end(d, "a"), 2000);
	assert_int_equal(ktel_delta__begin(d, "b", 9, true, &m, NULL), 0);
	apply_range(m, 0, 2500, 11, 2);
	assert_int_equal(ktel_delta__end(d, "b"), 0);
	assert_int_equal(ktel_delta__save(d, path, &err), 0);
	ktel_delta__free(d);

	/* header 88 + n_metrics 4 + per metric (name_len 4 + name 1 + map id 4
	 * + seq 8 + n_entries 8) + per entry (12 + key 8 + values) + crc 4 */
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_size, 88 + 4 + 2 * 25 + 1000 * (20 + 64) + 3000 * (20 + 32) +
					     2500 * (20 + 16) + 4);
	img = malloc(sb.st_size);
	assert_non_null(img);
	fd = open(path, O_RDONLY);
	assert_int_equal(read(fd, img, sb.st_size), sb.st_size);
	close(fd);
	memcpy(&crc, img + sb.st_size - 4, sizeof(crc));
	assert_int_equal(crc, reference_crc32(img, sb.st_size - 4));
	free(img);

	d2 = ktel_delta__new(BOOT);
	assert_int_equal(ktel_delta__set_max_entries(d2, 100000), 0);
	assert_int_equal(ktel_delta__load(d2, path, &err), 0);
	assert_int_equal(ktel_delta__stats(d2, "a", &st), 0);
	assert_int_equal(st.entries, 4000);
	assert_int_equal(ktel_delta__stats(d2, "b", &st), 0);
	assert_int_equal(st.entries, 2500);
	/* The same values again: nothing changed, so no key emits. */
	assert_int_equal(ktel_delta__begin(d2, "a", 7, false, &m, NULL), 0);
	for (uint32_t i = 0; i < 4000; i++) {
		struct key k = {.state = i, .uid = i ^ 0x5a5a};
		uint64_t c[8], delta[8];
		const struct ktel_delta_reading in = {
			.key = &k,
			.key_size = sizeof(k),
			.vals = c,
			.n = i < 1000 ? 8 : 4,
		};

		for (size_t j = 0; j < in.n; j++)
			c[j] = (uint64_t)i * 5 + j;
		/* Neither a reset nor anything to emit. */
		assert_int_equal(ktel_delta__apply(m, &in, delta), KTEL_DELTA_ZERO);
	}
	assert_int_equal(ktel_delta__end(d2, "a"), 0);
	ktel_delta__free(d2);
}

/* ---- one test per outcome of apply ---- */

/* Apply key state with n values into delta (prefilled with a marker, so
 * that what apply wrote shows); returns the outcome. */
static int apply_into(struct ktel_delta_metric *m, uint32_t state, const uint64_t *cur, size_t n,
		      uint64_t *delta)
{
	struct key k = {.state = state, .uid = 1000};
	const struct ktel_delta_reading in = {
		.key = &k,
		.key_size = sizeof(k),
		.vals = cur,
		.n = n,
	};

	if (delta != cur)
		memset(delta, 0xa5, n * sizeof(*delta));
	return ktel_delta__apply(m, &in, delta);
}

/* EMIT: the delta against the key's last values; the first values of a map
 * we created whole; a zero delta too when the metric emits zeros. The delta
 * may be written over the current values. */
static void test_outcome_emit(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c1[N] = {1, 2, 0, 3}, c2[N] = {4, 2, 1, 3}, w2[N] = {3, 0, 1, 0};
	uint64_t z[N] = {0}, delta[N], inplace[N];
	struct ktel_delta_metric *m;
	struct ktel_delta_stats st;

	m = begin(d, 7, true, KTEL_DELTA_START_ZERO);
	assert_int_equal(apply_into(m, 1, c1, N, delta), KTEL_DELTA_EMIT);
	assert_memory_equal(delta, c1, sizeof(delta));
	assert_int_equal(ktel_delta__end(d, M), 0);
	m = begin(d, 7, true, KTEL_DELTA_START_STATE);
	memcpy(inplace, c2, sizeof(inplace));
	assert_int_equal(apply_into(m, 1, inplace, N, inplace), KTEL_DELTA_EMIT);
	assert_memory_equal(inplace, w2, sizeof(inplace));
	assert_int_equal(ktel_delta__end(d, M), 0);
	assert_int_equal(ktel_delta__set_emit_zeros(d, M, true), 0);
	m = begin(d, 7, true, KTEL_DELTA_START_STATE);
	assert_int_equal(apply_into(m, 1, c2, N, delta), KTEL_DELTA_EMIT);
	assert_memory_equal(delta, z, sizeof(delta));
	assert_int_equal(ktel_delta__end(d, M), 0);
	assert_int_equal(ktel_delta__stats(d, M, &st), 0);
	assert_int_equal(st.resets, 0);
	ktel_delta__free(d);
}

/* RESET: values that went down, another map id, another value count; the
 * delta is the current values and each reset is counted. A reset to all
 * zero values has nothing to emit: ZERO, but still counted. */
static void test_outcome_reset(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c1[N] = {5, 5, 5, 5}, c2[N] = {5, 4, 5, 5}, c3[N] = {6, 6, 6, 6};
	uint64_t c4[N - 1] = {7, 7, 7}, z[N] = {0}, delta[N];
	struct ktel_delta_metric *m;
	struct ktel_delta_stats st;

	m = begin(d, 3, true, KTEL_DELTA_START_ZERO);
	assert_int_equal(apply_into(m, 1, c1, N, delta), KTEL_DELTA_EMIT);
	ktel_delta__end(d, M);
	m = begin(d, 3, true, KTEL_DELTA_START_STATE);
	assert_int_equal(apply_into(m, 1, c2, N, delta), KTEL_DELTA_RESET); /* went down */
	assert_memory_equal(delta, c2, sizeof(delta));
	ktel_delta__end(d, M);
	m = begin(d, 4, true, KTEL_DELTA_START_ZERO);
	assert_int_equal(apply_into(m, 1, c3, N, delta), KTEL_DELTA_RESET); /* new map id */
	assert_memory_equal(delta, c3, sizeof(delta));
	ktel_delta__end(d, M);
	m = begin(d, 4, true, KTEL_DELTA_START_STATE);
	assert_int_equal(apply_into(m, 1, c4, N - 1, delta), KTEL_DELTA_RESET); /* new layout */
	assert_memory_equal(delta, c4, sizeof(c4));
	ktel_delta__end(d, M);
	m = begin(d, 4, true, KTEL_DELTA_START_STATE);
	assert_int_equal(apply_into(m, 1, z, N, delta), KTEL_DELTA_ZERO); /* map cleared */
	assert_memory_equal(delta, z, sizeof(delta));
	ktel_delta__end(d, M);
	assert_int_equal(ktel_delta__stats(d, M, &st), 0);
	assert_int_equal(st.resets, 4);
	assert_int_equal(st.entries, 1);
	ktel_delta__free(d);
}

/* ZERO: nothing moved since the last pull: nothing to emit, a zero delta
 * written, and nothing worth a save. */
static void test_outcome_zero(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c1[N] = {1, 2, 3, 4}, z[N] = {0}, delta[N];
	struct ktel_delta_metric *m;

	m = begin(d, 3, true, KTEL_DELTA_START_ZERO);
	assert_int_equal(apply_into(m, 1, c1, N, delta), KTEL_DELTA_EMIT);
	ktel_delta__end(d, M);
	ktel_delta__mark_saved(d);
	m = begin(d, 3, true, KTEL_DELTA_START_STATE);
	assert_int_equal(apply_into(m, 1, c1, N, delta), KTEL_DELTA_ZERO);
	assert_memory_equal(delta, z, sizeof(delta));
	assert_int_equal(ktel_delta__end(d, M), 0);
	assert_false(ktel_delta__dirty(d));
	ktel_delta__free(d);
}

/* BASELINE: a reused map nobody remembers. Every key's values are kept as
 * where its next window starts, the delta written is zero, nothing is
 * emitted and nothing counted as a reset. */
static void test_outcome_baseline(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c1[N] = {10, 20, 0, 30}, c2[N] = {12, 20, 1, 30};
	uint64_t w2[N] = {2, 0, 1, 0}, z[N] = {0}, delta[N];
	struct ktel_delta_metric *m;
	struct ktel_delta_stats st;

	m = begin(d, 8, false, KTEL_DELTA_START_BASELINE);
	assert_int_equal(apply_into(m, 1, c1, N, delta), KTEL_DELTA_BASELINE);
	assert_memory_equal(delta, z, sizeof(delta));
	assert_int_equal(apply_into(m, 2, z, N, delta), KTEL_DELTA_BASELINE);
	assert_memory_equal(delta, z, sizeof(delta));
	assert_int_equal(ktel_delta__end(d, M), 0);
	assert_true(ktel_delta__dirty(d));
	assert_int_equal(ktel_delta__stats(d, M, &st), 0);
	assert_int_equal(st.entries, 2);
	assert_int_equal(st.resets, 0);
	m = begin(d, 8, false, KTEL_DELTA_START_STATE);
	assert_int_equal(apply_into(m, 1, c2, N, delta), KTEL_DELTA_EMIT);
	assert_memory_equal(delta, w2, sizeof(delta));
	ktel_delta__end(d, M);
	ktel_delta__free(d);
}

/* REFUSED: a new key over the entry limit is neither tracked nor emitted,
 * its delta written as zero, the refusal counted; keys already tracked go on
 * as before. Once there is room its full value is due. */
static void test_outcome_refused(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c1[N] = {1, 2, 3, 4}, c2[N] = {2, 3, 4, 5}, w2[N] = {1, 1, 1, 1};
	uint64_t z[N] = {0}, delta[N];
	struct ktel_delta_metric *m;
	struct ktel_delta_stats st;

	assert_int_equal(ktel_delta__set_max_entries(d, 1), 0);
	m = begin(d, 3, true, KTEL_DELTA_START_ZERO);
	assert_int_equal(apply_into(m, 1, c1, N, delta), KTEL_DELTA_EMIT);
	assert_int_equal(apply_into(m, 2, c1, N, delta), KTEL_DELTA_REFUSED);
	assert_memory_equal(delta, z, sizeof(delta));
	assert_int_equal(ktel_delta__end(d, M), 0);
	assert_int_equal(ktel_delta__stats(d, M, &st), 0);
	assert_int_equal(st.entries, 1);
	assert_int_equal(st.limit_dropped, 1);
	m = begin(d, 3, true, KTEL_DELTA_START_STATE);
	assert_int_equal(apply_into(m, 1, c2, N, delta), KTEL_DELTA_EMIT);
	assert_memory_equal(delta, w2, sizeof(delta));
	assert_int_equal(apply_into(m, 2, c2, N, delta), KTEL_DELTA_REFUSED);
	assert_int_equal(ktel_delta__end(d, M), 0);
	/* Key 1 vanishes: key 2 gets its room, whole. */
	m = begin(d, 3, true, KTEL_DELTA_START_STATE);
	assert_int_equal(ktel_delta__end(d, M), 1);
	m = begin(d, 3, true, KTEL_DELTA_START_STATE);
	assert_int_equal(apply_into(m, 2, c2, N, delta), KTEL_DELTA_EMIT);
	assert_memory_equal(delta, c2, sizeof(delta));
	ktel_delta__end(d, M);
	assert_int_equal(ktel_delta__stats(d, M, &st), 0);
	assert_int_equal(st.limit_dropped, 2);
	ktel_delta__free(d);
}

static void test_bad_args(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	struct ktel_delta_metric *m = NULL;
	uint64_t c[N] = {0}, delta[N];
	struct key k = {0};
	struct ktel_delta_reading in = {.key = &k, .key_size = sizeof(k), .vals = c, .n = N};

	assert_null(ktel_delta__new(NULL));
	assert_int_equal(ktel_delta__begin(d, M, 0, true, &m, NULL), -EINVAL);
	assert_null(m); /* outputs are written only on success */
	/* A handle outside a pull (after end) is refused. */
	m = begin(d, 1, true, KTEL_DELTA_START_ZERO);
	assert_int_equal(ktel_delta__end(d, M), 0);
	assert_int_equal(ktel_delta__apply(m, &in, delta), -ENOENT);
	m = begin(d, 1, true, KTEL_DELTA_START_STATE);
	in.key_size = 0;
	assert_int_equal(ktel_delta__apply(m, &in, delta), -EINVAL);
	in.key_size = KTEL_DELTA_MAX_KEY_SIZE + 1;
	assert_int_equal(ktel_delta__apply(m, &in, delta), -EINVAL);
	in.key_size = sizeof(k);
	in.n = 0;
	assert_int_equal(ktel_delta__apply(m, &in, delta), -EINVAL);
	in.n = KTEL_DELTA_MAX_VALUES + 1;
	assert_int_equal(ktel_delta__apply(m, &in, delta), -EINVAL);
	assert_int_equal(ktel_delta__set_max_entries(d, 0), -EINVAL);
	ktel_delta__free(d);
	ktel_delta__free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_created_map_emits_full),
		cmocka_unit_test(test_peek_seq_takes_nothing),
		cmocka_unit_test(test_reused_map_without_state_is_baseline),
		cmocka_unit_test(test_steady_state_and_reset_by_decrease),
		cmocka_unit_test(test_reset_by_map_id_change),
		cmocka_unit_test(test_dirty_only_on_change),
		cmocka_unit_test(test_zero_skip_and_zero_emit),
		cmocka_unit_test(test_taken_key_restarts),
		cmocka_unit_test(test_vanished_key_forgotten),
		cmocka_unit_test(test_entry_limit_counted),
		cmocka_unit_test(test_many_keys_rehash),
		cmocka_unit_test(test_seq),
		cmocka_unit_test(test_state_round_trip),
		cmocka_unit_test(test_snapshot_and_window),
		cmocka_unit_test(test_missing_state_is_empty),
		cmocka_unit_test(test_corrupt_garbage),
		cmocka_unit_test(test_not_a_state_file_refused),
		cmocka_unit_test(test_symlink_and_fifo_refused),
		cmocka_unit_test(test_state_check_passes_what_load_takes),
		cmocka_unit_test(test_oversized_state_set_aside),
		cmocka_unit_test(test_corrupt_truncated),
		cmocka_unit_test(test_corrupt_bit_flip),
		cmocka_unit_test(test_wrong_version),
		cmocka_unit_test(test_foreign_boot),
		cmocka_unit_test(test_atomic_save_leaves_no_temp),
		cmocka_unit_test(test_large_state_round_trip),
		cmocka_unit_test(test_outcome_emit),
		cmocka_unit_test(test_outcome_reset),
		cmocka_unit_test(test_outcome_zero),
		cmocka_unit_test(test_outcome_baseline),
		cmocka_unit_test(test_outcome_refused),
		cmocka_unit_test(test_bad_args),
	};

	return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
