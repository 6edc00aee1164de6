// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The shared kernel BTF (core/engine/vmlinux_btf.c) and the daemon's interposer of
 * libbpf's btf__load_vmlinux_btf()/btf__free() (core/daemon/vmlinux_btf_interpose.c,
 * linked into this test as into ktelemetryd). The "kernel" is a synthetic
 * BTF written to a file, with a tracepoint no real kernel has: when libbpf
 * finds it, libbpf used the shared parse, not a parse of its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "kernel_targets.h"
#include "ktel_test.h"
#include "vmlinux_btf.h"
#include "vmlinux_btf_interpose.h"

#define TEST_TP "ktel_test_only_tp"

static char tmp_dir[PATH_MAX];
static char btf_file[PATH_MAX + 16];
static void *btf_raw;
static __u32 btf_raw_size;

/* typedef btf_trace_<TEST_TP>: pointer to void (*)(void *, int), and a FUNC. */
static struct btf *make_btf(void)
{
	struct btf *btf = btf__new_empty();
	int int_id, void_ptr, proto;

	assert_non_null(btf);
	int_id = btf__add_int(btf, "int", 4, BTF_INT_SIGNED);
	void_ptr = btf__add_ptr(btf, 0);
	proto = btf__add_func_proto(btf, 0);
	assert_true(int_id > 0 && void_ptr > 0 && proto > 0);
	assert_int_equal(btf__add_func_param(btf, NULL, void_ptr), 0);
	assert_int_equal(btf__add_func_param(btf, NULL, int_id), 0);
	assert_true(btf__add_typedef(btf, "btf_trace_" TEST_TP, btf__add_ptr(btf, proto)) > 0);
	proto = btf__add_func_proto(btf, int_id);
	assert_int_equal(btf__add_func_param(btf, "a", int_id), 0);
	assert_true(btf__add_func(btf, "ktel_test_only_func", BTF_FUNC_GLOBAL, proto) > 0);
	return btf;
}

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static void expect_refused(const char *path, int code)
{
	struct ktel_err err = {0};
	char prefix[PATH_MAX + 64];

	errno = 0;
	assert_null(ktel_vmlinux_btf__parse(path, NULL, &err));
	assert_true(errno > 0);
	if (code)
		assert_int_equal(err.code, code);
	snprintf(prefix, sizeof(prefix), "%s: cannot read kernel BTF: ", path);
	assert_memory_equal(err.msg, prefix, strlen(prefix));
}

static void test_parse_file(void **state)
{
	struct ktel_err err = {0};
	bool mapped = true;
	struct btf *btf;

	btf = ktel_vmlinux_btf__parse(btf_file, &mapped, &err);
	assert_non_null(btf);
	assert_false(mapped); /* not sysfs: read, never mapped */
	assert_true(btf__find_by_name_kind(btf, "btf_trace_" TEST_TP, BTF_KIND_TYPEDEF) > 0);
	btf__free(btf);
}

/* Every cut of a valid BTF is refused with the path named, none crashes. */
static void test_parse_truncated(void **state)
{
	char path[PATH_MAX + 16];

	snprintf(path, sizeof(path), "%s/cut", tmp_dir);
	for (__u32 len = 0; len < btf_raw_size; len++) {
		write_file(path, btf_raw, len);
		expect_refused(path, len ? 0 : ENODATA);
	}
}

/* Each byte set to 0xff in turn: parsed or refused, never a crash (ASan). */
static void test_parse_corrupt(void **state)
{
	char path[PATH_MAX + 16];
	unsigned char *bytes = malloc(btf_raw_size);
	struct btf *btf;

	assert_non_null(bytes);
	snprintf(path, sizeof(path), "%s/corrupt", tmp_dir);
	for (__u32 i = 0; i < btf_raw_size; i++) {
		memcpy(bytes, btf_raw, btf_raw_size);
		bytes[i] = 0xff;
		write_file(path, bytes, btf_raw_size);
		btf = ktel_vmlinux_btf__parse(path, NULL, NULL);
		if (btf)
			assert_true(btf__type_cnt(btf) > 0);
		btf__free(btf);
	}
	free(bytes);
}

/* Size is checked before anything is read: a sparse 300 MiB file is refused. */
static void test_parse_oversized(void **state)
{
	char path[PATH_MAX + 16];
	int fd;

	snprintf(path, sizeof(path), "%s/huge", tmp_dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 300 << 20), 0);
	close(fd);
	expect_refused(path, EFBIG);
	unlink(path);
	expect_refused(tmp_dir, EINVAL); /* a directory */
	expect_refused(path, ENOENT);
}

/* Where the kernel lets its BTF be mapped (6.16+), the parse maps it. */
static void test_parse_sysfs_mapped(void **state)
{
	bool can_map, mapped = false;
	struct stat st;
	struct btf *btf;
	void *p;
	int fd;

	fd = open(KTEL_VMLINUX_BTF_PATH, O_RDONLY);
	if (fd < 0 || fstat(fd, &st)) {
		if (fd >= 0)
			close(fd);
		skip();
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	can_map = p != MAP_FAILED;
	if (can_map)
		munmap(p, (size_t)st.st_size);
	close(fd);
	btf = ktel_vmlinux_btf__parse(NULL, &mapped, NULL);
	assert_non_null(btf);
	assert_int_equal(mapped, can_map);
	printf("%s: %lld bytes, %s\n", KTEL_VMLINUX_BTF_PATH, (long long)st.st_size,
	       mapped ? "mapped (one copy)" : "read (two copies at once)");
	btf__free(btf);
}

static void test_hold_parses_once(void **state)
{
	struct ktel_vmlinux_btf_stats s0, s1;
	const struct btf *a, *b;

	ktel_vmlinux_btf__stats(&s0);
	a = ktel_vmlinux_btf__hold(NULL);
	b = ktel_vmlinux_btf__hold(NULL);
	assert_non_null(a);
	assert_ptr_equal(a, b);
	ktel_vmlinux_btf__stats(&s1);
	assert_int_equal(s1.parses, s0.parses + 1);
	ktel_vmlinux_btf__release();
	assert_ptr_equal(ktel_vmlinux_btf__get(), a);
	ktel_vmlinux_btf__release();
	assert_null(ktel_vmlinux_btf__get());
	ktel_vmlinux_btf__release(); /* one too many: harmless */
}

static void test_hold_missing_file(void **state)
{
	struct ktel_err err = {0};
	char path[PATH_MAX + 16];

	snprintf(path, sizeof(path), "%s/none", tmp_dir);
	assert_int_equal(ktel_vmlinux_btf__set_path(path), 0);
	assert_null(ktel_vmlinux_btf__hold(&err));
	assert_int_equal(err.code, ENOENT);
	assert_null(ktel_vmlinux_btf__get());
	assert_int_equal(ktel_vmlinux_btf__set_path(btf_file), 0);
}

/*
 * A hold of a file that is no BTF: libbpf frees its half-built BTF with
 * btf__free(), which is the interposer's here, which asks the lending code
 * whether it is the shared parse. The hold must not be holding the lock
 * then (a plain mutex: that would hang).
 */
static void test_hold_invalid_file(void **state)
{
	static const unsigned char not_btf[64] = {0x9f, 0xeb, 1, 0, 24};
	struct ktel_err err = {0};
	char path[PATH_MAX + 16];

	snprintf(path, sizeof(path), "%s/not-btf", tmp_dir);
	write_file(path, not_btf, sizeof(not_btf));
	assert_int_equal(ktel_vmlinux_btf__set_path(path), 0);
	assert_null(ktel_vmlinux_btf__hold(&err));
	assert_true(err.code > 0);
	assert_null(ktel_vmlinux_btf__get());
	assert_int_equal(ktel_vmlinux_btf__set_path(btf_file), 0);
}

/*
 * libbpf's own lookup of a tracepoint (btf__load_vmlinux_btf(), then
 * btf__free()) finds the synthetic tracepoint while a hold is out: it used
 * the shared parse and did not free it. Without a hold it parses the real
 * kernel's BTF, which has no such tracepoint.
 */
static void test_libbpf_borrows_held_parse(void **state)
{
	struct ktel_vmlinux_btf_stats s0, s1;
	const struct btf *btf;
	int id;

	ktel_vmlinux_btf__stats(&s0);
	btf = ktel_vmlinux_btf__hold(NULL);
	assert_non_null(btf);
	id = libbpf_find_vmlinux_btf_id(TEST_TP, BPF_TRACE_RAW_TP);
	assert_int_equal(id, btf__find_by_name_kind(btf, "btf_trace_" TEST_TP, BTF_KIND_TYPEDEF));
	id = libbpf_find_vmlinux_btf_id("ktel_test_only_func", BPF_TRACE_FENTRY);
	assert_true(id > 0);
	ktel_vmlinux_btf__stats(&s1);
	assert_int_equal(s1.lends, s0.lends + 2);
	assert_int_equal(s1.parses, s0.parses + 1);
	assert_ptr_equal(ktel_vmlinux_btf__get(), btf); /* libbpf's free kept it */
	ktel_vmlinux_btf__release();
	assert_null(ktel_vmlinux_btf__get());
	assert_true(libbpf_find_vmlinux_btf_id(TEST_TP, BPF_TRACE_RAW_TP) < 0);
	ktel_vmlinux_btf__stats(&s0);
	assert_int_equal(s0.lends, s1.lends);
}

/* A loan outlives the hold; the last of them frees the parse. */
static void test_loan_outlives_hold(void **state)
{
	const struct btf *btf = ktel_vmlinux_btf__hold(NULL);
	struct btf *lent = ktel_vmlinux_btf__lend();

	assert_ptr_equal(lent, btf);
	ktel_vmlinux_btf__release();
	assert_ptr_equal(ktel_vmlinux_btf__get(), btf);
	assert_null(ktel_vmlinux_btf__lend()); /* no hold: no new loan */
	btf__free(lent);                       /* what libbpf does at the end of a load */
	assert_null(ktel_vmlinux_btf__get());
}

/* A stray btf__free() of the shared parse is ignored: no use after free. */
static void test_stray_free_ignored(void **state)
{
	const struct btf *btf = ktel_vmlinux_btf__hold(NULL);

	btf__free((struct btf *)btf);
	assert_ptr_equal(ktel_vmlinux_btf__get(), btf);
	assert_true(btf__type_cnt(btf) > 1);
	ktel_vmlinux_btf__release();
	assert_null(ktel_vmlinux_btf__get());
}

/* Lending off (what a libbpf that binds internally gets): libbpf parses its own. */
static void test_lending_off(void **state)
{
	ktel_vmlinux_btf__set_lending(NULL);
	assert_false(ktel_vmlinux_btf__lending());
	assert_non_null(ktel_vmlinux_btf__hold(NULL));
	assert_null(ktel_vmlinux_btf__lend());
	assert_true(libbpf_find_vmlinux_btf_id(TEST_TP, BPF_TRACE_RAW_TP) < 0);
	ktel_vmlinux_btf__release();
	assert_null(ktel_vmlinux_btf__get());
	assert_int_equal(ktel_vmlinux_btf__interpose(), 0);
	assert_true(ktel_vmlinux_btf__lending());
}

/* The test BTF's tracepoint and function are found, one argument each. */
static void expect_test_targets(struct ktel_targets *t)
{
	int n = -100;

	assert_int_equal(ktel_targets__check(t, "tp_btf/" TEST_TP, &n, NULL, 0), 0);
	assert_int_equal(n, 1);
	n = -100;
	assert_int_equal(ktel_targets__check(t, "fentry/ktel_test_only_func", &n, NULL, 0), 0);
	assert_int_equal(n, 1);
}

/* The daemon's targets hold the shared parse: the scan's loads borrow it. */
static void test_targets_hold_shared_parse(void **state)
{
	struct ktel_targets *t = ktel_targets__new(NULL, NULL);

	assert_non_null(t);
	assert_non_null(ktel_vmlinux_btf__get());
	expect_test_targets(t);
	assert_true(libbpf_find_vmlinux_btf_id(TEST_TP, BPF_TRACE_RAW_TP) > 0);
	ktel_targets__free(t);
	assert_null(ktel_vmlinux_btf__get());
}

/*
 * With lending off (no interposer) libbpf parses its own copy per load: the
 * targets then copy the names out and free the parse at once, so it never
 * sits beside libbpf's.
 */
static void test_targets_without_lending_free_parse(void **state)
{
	struct ktel_targets *t;
	int n = -100;

	ktel_vmlinux_btf__set_lending(NULL);
	t = ktel_targets__new(NULL, NULL);
	assert_non_null(t);
	assert_null(ktel_vmlinux_btf__get());
	expect_test_targets(t);
	assert_int_equal(ktel_targets__check(t, "fentry/absent", &n, NULL, 0), -ENOENT);
	ktel_targets__free(t);
	assert_int_equal(ktel_vmlinux_btf__interpose(), 0);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static int setup(void **state)
{
	struct btf *btf;
	const void *raw;

	snprintf(tmp_dir, sizeof(tmp_dir), "%s/tests/unit/vmlinux-btf-%d", KTEL_BINARY_DIR,
		 (int)getpid());
	snprintf(btf_file, sizeof(btf_file), "%s/btf", tmp_dir);
	if (mkdir(tmp_dir, 0755))
		return -1;
	btf = make_btf();
	raw = btf__raw_data(btf, &btf_raw_size);
	btf_raw = malloc(btf_raw_size);
	if (!raw || !btf_raw)
		return -1;
	memcpy(btf_raw, raw, btf_raw_size);
	btf__free(btf);
	write_file(btf_file, btf_raw, btf_raw_size);
	if (ktel_vmlinux_btf__set_path(btf_file))
		return -1;
	/* Debian's libbpf.so.1 calls both through its PLT: this must work. */
	return ktel_vmlinux_btf__interpose();
}

static int teardown(void **state)
{
	free(btf_raw);
	ktel_vmlinux_btf__set_path(NULL);
	return nftw(tmp_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_file),
		cmocka_unit_test(test_parse_truncated),
		cmocka_unit_test(test_parse_corrupt),
		cmocka_unit_test(test_parse_oversized),
		cmocka_unit_test(test_parse_sysfs_mapped),
		cmocka_unit_test(test_hold_parses_once),
		cmocka_unit_test(test_hold_missing_file),
		cmocka_unit_test(test_hold_invalid_file),
		cmocka_unit_test(test_libbpf_borrows_held_parse),
		cmocka_unit_test(test_loan_outlives_hold),
		cmocka_unit_test(test_stray_free_ignored),
		cmocka_unit_test(test_lending_off),
		cmocka_unit_test(test_targets_hold_shared_parse),
		cmocka_unit_test(test_targets_without_lending_free_parse),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
