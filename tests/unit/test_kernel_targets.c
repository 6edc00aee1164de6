// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Attach-target checks and variant choice against a synthetic kernel BTF,
 * built here with btf__add_*, so the cases do not depend on the kernel the
 * tests run on: vendor hooks present or absent, argument counts that differ.
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
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include <bpf/btf.h>

#include "kernel_targets.h"
#include "ktel_test.h"

static char tmp_dir[PATH_MAX];

/* typedef btf_trace_<name>: pointer to void (*)(void *, int x nr_args). */
static void add_tracepoint(struct btf *btf, const char *name, int nr_args, int int_id,
			   int void_ptr)
{
	char tname[128];
	int proto, ptr, i;

	proto = btf__add_func_proto(btf, 0);
	assert_true(proto > 0);
	assert_int_equal(btf__add_func_param(btf, NULL, void_ptr), 0);
	for (i = 0; i < nr_args; i++)
		assert_int_equal(btf__add_func_param(btf, NULL, int_id), 0);
	ptr = btf__add_ptr(btf, proto);
	assert_true(ptr > 0);
	snprintf(tname, sizeof(tname), "btf_trace_%s", name);
	assert_true(btf__add_typedef(btf, tname, ptr) > 0);
}

static void add_function(struct btf *btf, const char *name, int nr_args, int int_id)
{
	static const char *const pnames[] = {"a", "b", "c", "d", "e", "f"};
	int proto, i;

	proto = btf__add_func_proto(btf, int_id);
	assert_true(proto > 0);
	for (i = 0; i < nr_args; i++)
		assert_int_equal(btf__add_func_param(btf, pnames[i], int_id), 0);
	assert_true(btf__add_func(btf, name, BTF_FUNC_GLOBAL, proto) > 0);
}

/*
 * A small "kernel": tracepoints mm_foo_begin (2 args), sched_switch
 * (sched_switch_args args), optionally the vendor hook android_vh_foo
 * (1 arg); function do_foo (2 args). tracefs is off unless a test sets it.
 */
static struct ktel_targets *make_kernel(bool vendor_hook, int sched_switch_args)
{
	struct ktel_targets *t;
	struct btf *btf;
	int int_id, void_ptr;

	btf = btf__new_empty();
	assert_non_null(btf);
	int_id = btf__add_int(btf, "int", 4, BTF_INT_SIGNED);
	void_ptr = btf__add_ptr(btf, 0);
	assert_true(int_id > 0 && void_ptr > 0);
	add_tracepoint(btf, "mm_foo_begin", 2, int_id, void_ptr);
	add_tracepoint(btf, "sched_switch", sched_switch_args, int_id, void_ptr);
	if (vendor_hook)
		add_tracepoint(btf, "android_vh_foo", 1, int_id, void_ptr);
	add_function(btf, "do_foo", 2, int_id);
	t = ktel_targets__new_from_btf(btf);
	assert_non_null(t);
	assert_int_equal(ktel_targets__set_probe_paths(t, "/nonexistent/kprobe", ""), 0);
	return t;
}

static void expect_present(struct ktel_targets *t, const char *sec, int nr_args)
{
	char reason[KTEL_TARGET_REASON_MAX] = "unchanged";
	int n = -100;

	if (ktel_targets__check(t, sec, &n, reason, sizeof(reason)) != 0)
		fail_msg("%s: %s", sec, reason);
	assert_int_equal(n, nr_args);
	assert_string_equal(reason, "");
}

static void expect_missing(struct ktel_targets *t, const char *sec, const char *why)
{
	char reason[KTEL_TARGET_REASON_MAX];
	int n = -100;

	assert_int_equal(ktel_targets__check(t, sec, &n, reason, sizeof(reason)), -ENOENT);
	assert_int_equal(n, -100); /* written only on success */
	assert_string_equal(reason, why);
}

static void test_tp_btf(void **state)
{
	struct ktel_targets *t = make_kernel(false, 3);

	expect_present(t, "tp_btf/mm_foo_begin", 2);
	expect_present(t, "tp_btf/sched_switch", 3);
	expect_present(t, "raw_tp/mm_foo_begin", 2);
	expect_present(t, "raw_tracepoint/sched_switch", 3);
	expect_missing(t, "tp_btf/cma_alloc_start", "tracepoint cma_alloc_start not in this kernel");
	expect_missing(t, "raw_tp/mm_foo_end", "tracepoint mm_foo_end not in this kernel");
	/* A FUNC of the same name is not a tracepoint. */
	expect_missing(t, "tp_btf/do_foo", "tracepoint do_foo not in this kernel");
	expect_missing(t, "tp_btf/", "section tp_btf/ names no target");
	ktel_targets__free(t);
}

static void test_fentry(void **state)
{
	struct ktel_targets *t = make_kernel(false, 3);

	expect_present(t, "fentry/do_foo", 2);
	expect_present(t, "fexit/do_foo", 2);
	expect_present(t, "fmod_ret/do_foo", 2);
	expect_present(t, "fentry.s/do_foo", 2);
	expect_missing(t, "fentry/do_bar", "function do_bar not in this kernel");
	expect_missing(t, "fexit/mm_foo_begin", "function mm_foo_begin not in this kernel");
	ktel_targets__free(t);
}

static void test_kprobe(void **state)
{
	struct ktel_targets *t = make_kernel(false, 3);
	char pmu[PATH_MAX];
	int fd;

	expect_missing(t, "kprobe/do_foo",
		       "kprobes not supported by this kernel (no /nonexistent/kprobe)");
	snprintf(pmu, sizeof(pmu), "%s/kprobe", tmp_dir);
	fd = open(pmu, O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(ktel_targets__set_probe_paths(t, pmu, NULL), 0);
	expect_present(t, "kprobe/do_foo", 2);
	expect_present(t, "kretprobe/do_foo", 2);
	expect_present(t, "kprobe/do_foo+0x10", 2);
	expect_missing(t, "kprobe/do_bar", "function do_bar not in this kernel");
	ktel_targets__free(t);
}

static void test_tracepoint(void **state)
{
	struct ktel_targets *t = make_kernel(false, 3);
	char path[PATH_MAX];

	/* No tracefs: the BTF typedef decides, and gives the argument count. */
	expect_present(t, "tracepoint/mm/mm_foo_begin", 2);
	expect_present(t, "tp/sched/sched_switch", 3);
	expect_missing(t, "tracepoint/mm/mm_nope", "tracepoint mm/mm_nope not in this kernel");
	expect_missing(t, "tracepoint/mm_foo_begin",
		       "tracepoint mm_foo_begin: expected category/name");

	/* With tracefs mounted, its events directory decides. */
	snprintf(path, sizeof(path), "%s/tracefs", tmp_dir);
	assert_int_equal(mkdir(path, 0755), 0);
	strcat(path, "/events");
	assert_int_equal(mkdir(path, 0755), 0);
	strcat(path, "/mm");
	assert_int_equal(mkdir(path, 0755), 0);
	strcat(path, "/mm_only_in_tracefs");
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/tracefs", tmp_dir);
	assert_int_equal(ktel_targets__set_probe_paths(t, NULL, path), 0);
	expect_present(t, "tracepoint/mm/mm_only_in_tracefs", -1);
	expect_missing(t, "tracepoint/mm/mm_foo_begin",
		       "tracepoint mm/mm_foo_begin not in this kernel");
	ktel_targets__free(t);
}

static void test_unchecked_sections(void **state)
{
	struct ktel_targets *t = make_kernel(false, 3);
	int n = -100;

	/* Sections naming no kernel hook are not this module's business. */
	assert_int_equal(ktel_targets__check(t, "socket", &n, NULL, 0), 0);
	assert_int_equal(n, -1);
	assert_int_equal(ktel_targets__check(t, "perf_event", NULL, NULL, 0), 0);
	ktel_targets__free(t);
}

static void test_new_missing_file(void **state)
{
	struct ktel_err err = {0};
	char path[PATH_MAX], msg[PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/no_btf", tmp_dir);
	assert_null(ktel_targets__new(path, &err));
	assert_int_equal(err.code, ENOENT);
	snprintf(msg, sizeof(msg), "%s: cannot read kernel BTF: %s", path, strerror(ENOENT));
	assert_string_equal(err.msg, msg);
	ktel_targets__free(NULL);
}

#define PROG(n, s) {.name = (n), .section = (s)}

/* A vendor hook listed first is used where it exists, skipped elsewhere. */
static void test_vendor_hook_variant(void **state)
{
	static const struct ktel_prog_variant variants[] = {
		{.group = "foo", .prog = "foo_vh", .nr_args = -1},
		{.group = "foo", .prog = "foo_tp", .nr_args = -1},
	};
	struct ktel_prog_choice progs[] = {
		PROG("foo_tp", "tp_btf/mm_foo_begin"),
		PROG("foo_vh", "tp_btf/android_vh_foo"),
		PROG("other", "fentry/do_foo"),
	};
	struct ktel_targets *t;

	t = make_kernel(true, 3);
	assert_int_equal(ktel_targets__choose(t, variants, 2, progs, 3), 2);
	assert_false(progs[0].selected);
	assert_string_equal(progs[0].reason, "variant group foo: foo_vh selected");
	assert_true(progs[1].selected);
	assert_int_equal(progs[1].nr_args, 1);
	assert_string_equal(progs[1].reason, "");
	assert_true(progs[2].selected);
	ktel_targets__free(t);

	t = make_kernel(false, 3);
	assert_int_equal(ktel_targets__choose(t, variants, 2, progs, 3), 2);
	assert_true(progs[0].selected);
	assert_int_equal(progs[0].nr_args, 2);
	assert_string_equal(progs[0].reason, "");
	assert_false(progs[1].selected);
	assert_int_equal(progs[1].nr_args, -1);
	assert_string_equal(progs[1].reason, "tracepoint android_vh_foo not in this kernel");
	assert_true(progs[2].selected);
	ktel_targets__free(t);
}

/* Variants of one tracepoint with different prototypes, picked by nr_args. */
static void test_nr_args_variant(void **state)
{
	static const struct ktel_prog_variant variants[] = {
		{.group = "sw", .prog = "sw_v3", .nr_args = 3},
		{.group = "sw", .prog = "sw_v2", .nr_args = 2},
	};
	struct ktel_prog_choice progs[] = {
		PROG("sw_v3", "tp_btf/sched_switch"),
		PROG("sw_v2", "tp_btf/sched_switch"),
	};
	struct ktel_targets *t;

	t = make_kernel(false, 3);
	assert_int_equal(ktel_targets__choose(t, variants, 2, progs, 2), 1);
	assert_true(progs[0].selected);
	assert_false(progs[1].selected);
	assert_string_equal(progs[1].reason, "variant group sw: sw_v3 selected");
	ktel_targets__free(t);

	t = make_kernel(false, 2);
	assert_int_equal(ktel_targets__choose(t, variants, 2, progs, 2), 1);
	assert_false(progs[0].selected);
	assert_string_equal(progs[0].reason,
			    "variant group sw: tp_btf/sched_switch has 2 arguments, variant wants 3");
	assert_true(progs[1].selected);
	ktel_targets__free(t);

	/* A prototype no variant expects: nothing of the group loads. */
	t = make_kernel(false, 4);
	assert_int_equal(ktel_targets__choose(t, variants, 2, progs, 2), 0);
	assert_false(progs[0].selected);
	assert_false(progs[1].selected);
	assert_string_equal(progs[1].reason,
			    "variant group sw: tp_btf/sched_switch has 4 arguments, variant wants 2");
	ktel_targets__free(t);
}

/* Programs in no group load exactly when their target exists. */
static void test_ungrouped(void **state)
{
	struct ktel_prog_choice progs[] = {
		PROG("a", "tp_btf/mm_foo_begin"),
		PROG("b", "tp_btf/cma_alloc_start"),
		PROG("c", "fentry/do_bar"),
	};
	struct ktel_targets *t = make_kernel(false, 3);

	assert_int_equal(ktel_targets__choose(t, NULL, 0, progs, 3), 1);
	assert_true(progs[0].selected);
	assert_false(progs[1].selected);
	assert_string_equal(progs[1].reason, "tracepoint cma_alloc_start not in this kernel");
	assert_false(progs[2].selected);
	assert_string_equal(progs[2].reason, "function do_bar not in this kernel");
	ktel_targets__free(t);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static int setup(void **state)
{
	snprintf(tmp_dir, sizeof(tmp_dir), "%s/tests/unit/targets-%d", KTEL_BINARY_DIR,
		 (int)getpid());
	return mkdir(tmp_dir, 0755);
}

static int teardown(void **state)
{
	return nftw(tmp_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tp_btf),
		cmocka_unit_test(test_fentry),
		cmocka_unit_test(test_kprobe),
		cmocka_unit_test(test_tracepoint),
		cmocka_unit_test(test_unchecked_sections),
		cmocka_unit_test(test_new_missing_file),
		cmocka_unit_test(test_vendor_hook_variant),
		cmocka_unit_test(test_nr_args_variant),
		cmocka_unit_test(test_ungrouped),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
