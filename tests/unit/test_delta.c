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

/* Apply one key and check the outputs. */
static void apply(struct ktel_delta *d, uint32_t map_id, uint32_t state, const uint64_t *cur,
		  const uint64_t *want, bool want_reset, bool want_emit)
{
	struct key k = { .state = state, .uid = 1000 };
	uint64_t delta[N];
	bool reset = !want_reset, emit = !want_emit;

	assert_int_equal(ktel_delta__apply(d, M, map_id, &k, sizeof(k), cur, N, delta, &reset,
					   &emit), 0);
	assert_int_equal(emit, want_emit);
	assert_int_equal(reset, want_reset);
	if (want)
		assert_memory_equal(delta, want, sizeof(delta));
}

static void begin(struct ktel_delta *d, uint32_t map_id, bool ours, enum ktel_delta_start want)
{
	enum ktel_delta_start policy = 0;

	assert_int_equal(ktel_delta__begin(d, M, map_id, ours, &policy), 0);
	assert_int_equal(policy, want);
}

static void test_created_map_emits_full(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c1[N] = { 1, 2, 0, 3 };

	assert_non_null(d);
	begin(d, 7, true, KTEL_DELTA_START_ZERO);
	apply(d, 7, 1, c1, c1, false, true);
	assert_int_equal(ktel_delta__end(d, M), 0);
	ktel_delta__free(d);
}

static void test_reused_map_without_state_is_baseline(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c1[N] = { 10, 20, 0, 30 }, c2[N] = { 11, 20, 5, 30 };
	uint64_t z[N] = { 0 }, w2[N] = { 1, 0, 5, 0 };

	begin(d, 7, false, KTEL_DELTA_START_BASELINE);
	apply(d, 7, 1, c1, z, false, false);
	ktel_delta__end(d, M);
	/* Next pull continues from the baseline: only the growth counts. */
	begin(d, 7, false, KTEL_DELTA_START_STATE);
	apply(d, 7, 1, c2, w2, false, true);
	/* A key that appears after the baseline is all new. */
	apply(d, 7, 2, c1, c1, false, true);
	ktel_delta__end(d, M);
	ktel_delta__free(d);
}

static void test_steady_state_and_reset_by_decrease(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c1[N] = { 1, 2, 3, 4 }, c2[N] = { 2, 4, 6, 8 }, c3[N] = { 2, 1, 6, 9 };
	uint64_t w2[N] = { 1, 2, 3, 4 };
	struct ktel_delta_stats st;

	begin(d, 3, true, KTEL_DELTA_START_ZERO);
	apply(d, 3, 1, c1, c1, false, true);
	ktel_delta__end(d, M);
	begin(d, 3, true, KTEL_DELTA_START_STATE);
	apply(d, 3, 1, c2, w2, false, true);
	ktel_delta__end(d, M);
	/* Bucket 1 went down: the map was cleared, the delta is the value. */
	begin(d, 3, true, KTEL_DELTA_START_STATE);
	apply(d, 3, 1, c3, c3, true, true);
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
	uint64_t c1[N] = { 1, 2, 3, 4 }, c2[N] = { 1, 2, 3, 5 }, z[N] = { 0 }, w[N] = { 0, 0, 0, 1 };

	assert_false(ktel_delta__dirty(d));
	begin(d, 3, true, KTEL_DELTA_START_ZERO);
	apply(d, 3, 1, c1, c1, false, true);   /* a new key */
	ktel_delta__end(d, M);
	assert_true(ktel_delta__dirty(d));
	ktel_delta__mark_saved(d);
	begin(d, 3, true, KTEL_DELTA_START_STATE);
	apply(d, 3, 1, c1, z, false, false);   /* same values: nothing new */
	ktel_delta__end(d, M);
	assert_false(ktel_delta__dirty(d));
	begin(d, 3, true, KTEL_DELTA_START_STATE);
	apply(d, 3, 1, c2, w, false, true);    /* one bucket moved */
	ktel_delta__end(d, M);
	assert_true(ktel_delta__dirty(d));
	ktel_delta__mark_saved(d);
	begin(d, 4, true, KTEL_DELTA_START_ZERO);
	apply(d, 4, 1, c2, c2, true, true);    /* same values from a new map */
	ktel_delta__end(d, M);
	assert_true(ktel_delta__dirty(d));
	ktel_delta__mark_saved(d);
	begin(d, 4, true, KTEL_DELTA_START_STATE);
	ktel_delta__end(d, M);                 /* the key vanished */
	assert_true(ktel_delta__dirty(d));
	ktel_delta__free(d);
}

static void test_reset_by_map_id_change(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c1[N] = { 5, 5, 5, 5 }, c2[N] = { 6, 6, 6, 6 };

	begin(d, 3, true, KTEL_DELTA_START_ZERO);
	apply(d, 3, 1, c1, c1, false, true);
	ktel_delta__end(d, M);
	/* Values grew, but they come from another map (recreated): reset. */
	begin(d, 4, true, KTEL_DELTA_START_ZERO);
	apply(d, 4, 1, c2, c2, true, true);
	ktel_delta__end(d, M);
	ktel_delta__free(d);
}

static void test_zero_skip_and_zero_emit(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c1[N] = { 1, 0, 0, 0 }, z[N] = { 0 };

	begin(d, 3, true, KTEL_DELTA_START_ZERO);
	apply(d, 3, 1, c1, c1, false, true);
	ktel_delta__end(d, M);
	begin(d, 3, true, KTEL_DELTA_START_STATE);
	apply(d, 3, 1, c1, z, false, false);
	ktel_delta__end(d, M);
	assert_int_equal(ktel_delta__set_emit_zeros(d, M, true), 0);
	begin(d, 3, true, KTEL_DELTA_START_STATE);
	apply(d, 3, 1, c1, z, false, true);
	ktel_delta__end(d, M);
	ktel_delta__free(d);
}

static void test_vanished_key_forgotten(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c1[N] = { 1, 1, 1, 1 };
	struct ktel_delta_stats st;

	begin(d, 3, true, KTEL_DELTA_START_ZERO);
	apply(d, 3, 1, c1, c1, false, true);
	apply(d, 3, 2, c1, c1, false, true);
	assert_int_equal(ktel_delta__end(d, M), 0);
	begin(d, 3, true, KTEL_DELTA_START_STATE);
	apply(d, 3, 1, c1, NULL, false, false);
	assert_int_equal(ktel_delta__end(d, M), 1);
	assert_int_equal(ktel_delta__stats(d, M, &st), 0);
	assert_int_equal(st.entries, 1);
	assert_int_equal(st.forgotten, 1);
	/* Key 2 comes back (deleted and re-created in the map): all new. */
	begin(d, 3, true, KTEL_DELTA_START_STATE);
	apply(d, 3, 1, c1, NULL, false, false);
	apply(d, 3, 2, c1, c1, false, true);
	assert_int_equal(ktel_delta__end(d, M), 0);
	/* end outside a pull is refused. */
	assert_int_equal(ktel_delta__end(d, M), -ENOENT);
	/* A walk that failed half-way is aborted: nothing is forgotten. */
	begin(d, 3, true, KTEL_DELTA_START_STATE);
	apply(d, 3, 1, c1, NULL, false, false);
	assert_int_equal(ktel_delta__abort(d, M), 0);
	assert_int_equal(ktel_delta__stats(d, M, &st), 0);
	assert_int_equal(st.entries, 2);
	assert_int_equal(ktel_delta__end(d, M), -ENOENT);
	ktel_delta__free(d);
}

static void test_entry_limit_counted(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c1[N] = { 1, 2, 3, 4 }, c2[N] = { 2, 3, 4, 5 }, z[N] = { 0 };
	struct ktel_delta_stats st;

	assert_int_equal(ktel_delta__set_max_entries(d, 2), 0);
	begin(d, 3, true, KTEL_DELTA_START_ZERO);
	apply(d, 3, 1, c1, c1, false, true);
	apply(d, 3, 2, c1, c1, false, true);
	apply(d, 3, 3, c1, z, false, false);
	ktel_delta__end(d, M);
	assert_int_equal(ktel_delta__stats(d, M, &st), 0);
	assert_int_equal(st.entries, 2);
	assert_int_equal(st.limit_dropped, 1);
	/* Key 2 vanishes: room again. Key 3 was never emitted, so its full
	 * value is due. */
	begin(d, 3, true, KTEL_DELTA_START_STATE);
	apply(d, 3, 1, c2, NULL, false, true);
	apply(d, 3, 3, c2, z, false, false);
	assert_int_equal(ktel_delta__end(d, M), 1);
	begin(d, 3, true, KTEL_DELTA_START_STATE);
	apply(d, 3, 3, c2, c2, false, true);
	ktel_delta__end(d, M);
	assert_int_equal(ktel_delta__stats(d, M, &st), 0);
	assert_int_equal(st.limit_dropped, 2);
	ktel_delta__free(d);
}

static void test_many_keys_rehash(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c[N], delta[N];
	bool reset, emit;

	for (int pull = 1; pull <= 2; pull++) {
		begin(d, 9, true, pull == 1 ? KTEL_DELTA_START_ZERO : KTEL_DELTA_START_STATE);
		for (uint32_t i = 0; i < 5000; i++) {
			struct key k = { .state = i, .uid = i * 7 };

			for (int j = 0; j < N; j++)
				c[j] = (uint64_t)pull * (i + j);
			assert_int_equal(ktel_delta__apply(d, M, 9, &k, sizeof(k), c, N, delta,
							   &reset, &emit), 0);
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
	uint64_t c1[N] = { 1, 2, 3, 4 }, c2[N] = { 3, 2, 3, 10 }, w2[N] = { 2, 0, 0, 6 };
	struct ktel_err err = { 0 };
	struct ktel_delta_stats st;
	char path[600];

	path_in_dir(path, sizeof(path), "rt.state");
	begin(d, 11, true, KTEL_DELTA_START_ZERO);
	apply(d, 11, 1, c1, c1, false, true);
	apply(d, 11, 2, c2, c2, false, true);
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
	begin(d2, 11, false, KTEL_DELTA_START_STATE);
	apply(d2, 11, 1, c2, w2, false, true);   /* not counted twice */
	apply(d2, 11, 2, c2, NULL, false, false); /* unchanged: skipped */
	ktel_delta__end(d2, M);
	assert_int_equal(ktel_delta__next_seq(d2, M), 2);
	ktel_delta__free(d2);
}

/* A snapshot taken after seq 1 and written after seq 2 was handed out
 * holds seq 1: what the restarted daemon judges file lines against. */
static void test_snapshot_and_window(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT), *d2;
	uint64_t c1[N] = { 1, 2, 3, 4 };
	struct ktel_delta_snapshot snap;
	struct ktel_err err = { 0 };
	char path[600];

	path_in_dir(path, sizeof(path), "snap.state");
	begin(d, 11, true, KTEL_DELTA_START_ZERO);
	apply(d, 11, 1, c1, c1, false, true);
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
	struct ktel_err err = { 0 };
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
static void check_corrupt(const char *name, const char *save_boot,
			  void (*mangle)(const char *path), int want)
{
	struct ktel_delta *d = ktel_delta__new(save_boot), *d2;
	uint64_t c1[N] = { 1, 2, 3, 4 };
	struct ktel_err err = { 0 };
	char path[600], prefix[64];

	path_in_dir(path, sizeof(path), name);
	begin(d, 5, true, KTEL_DELTA_START_ZERO);
	apply(d, 5, 1, c1, c1, false, true);
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
	begin(d2, 5, false, KTEL_DELTA_START_BASELINE);
	apply(d2, 5, 1, c1, NULL, false, false);
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
	struct ktel_err err = { 0 };
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
	assert_int_equal(stat(path, &st), 0);
	if (!is_dir)
		assert_int_equal(st.st_size, strlen(content));
	snprintf(prefix, sizeof(prefix), "%s.corrupt-", name);
	assert_int_equal(count_files(prefix), 0);
	ktel_delta__free(d);
}

static void test_not_a_state_file_refused(void **state)
{
	check_not_state("sink-output.jsonl", "{\"metric\":\"runq_latency\",\"seq\":1}\n"
			"{\"metric\":\"runq_latency\",\"seq\":2}\n", false);
	check_not_state("empty.state", "", false);
	check_not_state("short.state", "KTEL", false);
	check_not_state("dir.state", "", true);
	check_not_state("text.state", "this is not a state file, but it is long enough to "
			"have a header and a checksum and everything else", false);
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
	uint64_t c1[N] = { 1, 2, 3, 4 };
	struct ktel_err err = { 0 };
	char path[600], bad[700];

	path_in_dir(path, sizeof(path), "atomic.state");
	begin(d, 5, true, KTEL_DELTA_START_ZERO);
	apply(d, 5, 1, c1, c1, false, true);
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

/* Apply keys [0, n) of metric name with values i * mul + j, n_vals each. */
static void apply_range(struct ktel_delta *d, const char *name, uint32_t map_id, uint32_t from,
			uint32_t to, uint64_t mul, size_t n_vals)
{
	uint64_t c[8], delta[8];
	bool reset, emit;

	for (uint32_t i = from; i < to; i++) {
		struct key k = { .state = i, .uid = i ^ 0x5a5a };

		for (size_t j = 0; j < n_vals; j++)
			c[j] = (uint64_t)i * mul + j;
		assert_int_equal(ktel_delta__apply(d, name, map_id, &k, sizeof(k), c, n_vals,
						   delta, &reset, &emit), 0);
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
	struct ktel_err err = { 0 };
	struct ktel_delta_stats st;
	uint8_t *img;
	uint32_t crc;
	char path[600];
	struct stat sb;
	int fd;

	path_in_dir(path, sizeof(path), "large.state");
	assert_int_equal(ktel_delta__set_max_entries(d, 100000), 0);
	assert_int_equal(ktel_delta__begin(d, "a", 7, true, NULL), 0);
	apply_range(d, "a", 7, 0, 6000, 3, 4);
	assert_int_equal(ktel_delta__end(d, "a"), 0);
	/* Keys 4000.. vanish, keys 0..999 get 8 values instead of 4. */
	assert_int_equal(ktel_delta__begin(d, "a", 7, true, NULL), 0);
	apply_range(d, "a", 7, 0, 1000, 5, 8);
	apply_range(d, "a", 7, 1000, 4000, 5, 4);
	assert_int_equal(ktel_delta__end(d, "a"), 2000);
	assert_int_equal(ktel_delta__begin(d, "b", 9, true, NULL), 0);
	apply_range(d, "b", 9, 0, 2500, 11, 2);
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
	assert_int_equal(ktel_delta__begin(d2, "a", 7, false, NULL), 0);
	for (uint32_t i = 0; i < 4000; i++) {
		struct key k = { .state = i, .uid = i ^ 0x5a5a };
		size_t n = i < 1000 ? 8 : 4;
		uint64_t c[8], delta[8];
		bool reset = true, emit = true;

		for (size_t j = 0; j < n; j++)
			c[j] = (uint64_t)i * 5 + j;
		assert_int_equal(ktel_delta__apply(d2, "a", 7, &k, sizeof(k), c, n, delta, &reset,
						   &emit), 0);
		assert_false(reset);
		assert_false(emit);
	}
	assert_int_equal(ktel_delta__end(d2, "a"), 0);
	ktel_delta__free(d2);
}

static void test_bad_args(void **state)
{
	struct ktel_delta *d = ktel_delta__new(BOOT);
	uint64_t c[N] = { 0 }, delta[N];
	bool reset, emit;
	struct key k = { 0 };

	assert_null(ktel_delta__new(NULL));
	assert_int_equal(ktel_delta__begin(d, M, 0, true, NULL), -EINVAL);
	assert_int_equal(ktel_delta__apply(d, M, 1, &k, sizeof(k), c, N, delta, &reset, &emit),
			 -ENOENT);
	begin(d, 1, true, KTEL_DELTA_START_ZERO);
	assert_int_equal(ktel_delta__apply(d, M, 1, &k, 0, c, N, delta, &reset, &emit), -EINVAL);
	assert_int_equal(ktel_delta__apply(d, M, 1, &k, sizeof(k), c, 0, delta, &reset, &emit),
			 -EINVAL);
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
		cmocka_unit_test(test_vanished_key_forgotten),
		cmocka_unit_test(test_entry_limit_counted),
		cmocka_unit_test(test_many_keys_rehash),
		cmocka_unit_test(test_seq),
		cmocka_unit_test(test_state_round_trip),
		cmocka_unit_test(test_snapshot_and_window),
		cmocka_unit_test(test_missing_state_is_empty),
		cmocka_unit_test(test_corrupt_garbage),
		cmocka_unit_test(test_not_a_state_file_refused),
		cmocka_unit_test(test_corrupt_truncated),
		cmocka_unit_test(test_corrupt_bit_flip),
		cmocka_unit_test(test_wrong_version),
		cmocka_unit_test(test_foreign_boot),
		cmocka_unit_test(test_atomic_save_leaves_no_temp),
		cmocka_unit_test(test_large_state_round_trip),
		cmocka_unit_test(test_bad_args),
	};

	return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
