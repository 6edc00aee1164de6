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
#include <bpf/libbpf.h>

#include "kernel_targets.h"
#include "ktel_test.h"
#include "plugin_loader.h"

static char tmp_dir[PATH_MAX];

/* typedef btf_trace_<name>: pointer to void (*)(void *, int x nr_args). */
static void add_tracepoint(struct btf *btf, const char *name, int nr_args, int int_id, int void_ptr)
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
	expect_missing(t, "tp_btf/cma_alloc_start",
		       "tracepoint cma_alloc_start not in this kernel");
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

#define PROG(n, s)                          \
	{                                   \
		.name = (n), .section = (s) \
	}

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

/* Programs in no group are required: one without its target stops them all. */
static void test_ungrouped(void **state)
{
	struct ktel_prog_choice progs[] = {
		PROG("a", "tp_btf/mm_foo_begin"),
		PROG("b", "tp_btf/cma_alloc_start"),
		PROG("c", "fentry/do_bar"),
	};
	struct ktel_targets *t = make_kernel(false, 3);
	char why[512];

	assert_int_equal(ktel_targets__choose_why(t, NULL, 0, progs, 3, why, sizeof(why)), 0);
	assert_false(progs[0].selected);
	assert_string_equal(progs[0].reason, "not loaded: program b cannot run");
	assert_false(progs[1].selected);
	assert_string_equal(progs[1].reason, "tracepoint cma_alloc_start not in this kernel");
	assert_false(progs[2].selected);
	assert_string_equal(progs[2].reason, "function do_bar not in this kernel");
	assert_string_equal(why, "tracepoint cma_alloc_start not in this kernel; "
				 "function do_bar not in this kernel");

	/* All present: all load, and nothing is said. */
	assert_int_equal(ktel_targets__choose_why(t, NULL, 0, progs, 1, why, sizeof(why)), 1);
	assert_true(progs[0].selected);
	assert_string_equal(why, "");
	ktel_targets__free(t);
}

/*
 * A hook in no group shares the metric with a group: when the group has no
 * usable variant, the hook in no group must not run alone (runq_latency's
 * wakeups without its sched_switch would only fill the start map).
 */
static void test_group_unmet_stops_ungrouped(void **state)
{
	static const struct ktel_prog_variant variants[] = {
		{.group = "sw", .prog = "sw_v4", .nr_args = 4},
	};
	struct ktel_prog_choice progs[] = {
		PROG("wake", "tp_btf/mm_foo_begin"),
		PROG("sw_v4", "tp_btf/sched_switch"),
	};
	struct ktel_targets *t = make_kernel(false, 3);
	char why[512];

	assert_int_equal(ktel_targets__choose_why(t, variants, 1, progs, 2, why, sizeof(why)), 0);
	assert_false(progs[0].selected);
	assert_string_equal(progs[0].reason, "not loaded: variant group sw has no usable variant");
	assert_string_equal(why, "variant group sw: no usable variant "
				 "(tp_btf/sched_switch has 3 arguments, variant wants 4)");
	ktel_targets__free(t);
}

/* A program excluded by the caller (refused at load or attach) gives way to the next variant. */
static void test_excluded_variant(void **state)
{
	static const struct ktel_prog_variant variants[] = {
		{.group = "foo", .prog = "foo_fn", .nr_args = -1},
		{.group = "foo", .prog = "foo_tp", .nr_args = -1},
	};
	struct ktel_prog_choice progs[] = {
		PROG("foo_fn", "fentry/do_foo"),
		PROG("foo_tp", "tp_btf/mm_foo_begin"),
	};
	struct ktel_targets *t = make_kernel(false, 3);
	char why[512];

	progs[0].excluded = "attach failed: Permission denied";
	assert_int_equal(ktel_targets__choose_why(t, variants, 2, progs, 2, why, sizeof(why)), 1);
	assert_false(progs[0].selected);
	assert_string_equal(progs[0].reason, "attach failed: Permission denied");
	assert_true(progs[1].selected);

	/* The last variant excluded too: the group, so the object, is out. */
	progs[1].excluded = "attach failed: No such file or directory";
	assert_int_equal(ktel_targets__choose_why(t, variants, 2, progs, 2, why, sizeof(why)), 0);
	assert_string_equal(why, "variant group foo: no usable variant (attach failed: Permission "
				 "denied; attach failed: No such file or directory)");
	ktel_targets__free(t);
}

/* ---- the real cma_allocation_latency plugin ------------------------- */

struct real_plugin {
	struct ktel_plugin *plugin;
	struct bpf_object *obj;
	struct ktel_prog_choice progs[KTEL_PLUGIN_MAX_PROGRAMS];
	size_t n_progs;
};

/* Open a built-in plugin and list its object's programs, as the lifecycle does. */
static void open_real(struct real_plugin *rp, const char *name)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = name);
	struct ktel_err err = {0};
	struct bpf_program *prog;
	char path[PATH_MAX];

	memset(rp, 0, sizeof(*rp));
	snprintf(path, sizeof(path), "%s/%s.so", KTEL_PLUGIN_DIR, name);
	if (ktel_plugin__open_owner(path, getuid(), &rp->plugin, &err) != 0)
		fail_msg("%s", err.msg);
	rp->obj = bpf_object__open_mem(rp->plugin->desc.bpf_object,
				       rp->plugin->desc.bpf_object_size, &opts);
	assert_non_null(rp->obj);
	bpf_object__for_each_program(prog, rp->obj) {
		assert_true(rp->n_progs < KTEL_PLUGIN_MAX_PROGRAMS);
		rp->progs[rp->n_progs].name = bpf_program__name(prog);
		rp->progs[rp->n_progs].section = bpf_program__section_name(prog);
		rp->n_progs++;
	}
}

static void close_real(struct real_plugin *rp)
{
	bpf_object__close(rp->obj);
	ktel_plugin__free(rp->plugin);
}

static size_t choose_real(struct real_plugin *rp, struct ktel_targets *t, char *why, size_t len)
{
	return ktel_targets__choose_why(t, rp->plugin->desc.variants, rp->plugin->desc.n_variants,
					rp->progs, rp->n_progs, why, len);
}

static const struct ktel_prog_choice *real_prog(const struct real_plugin *rp, const char *name)
{
	for (size_t i = 0; i < rp->n_progs; i++)
		if (strcmp(rp->progs[i].name, name) == 0)
			return &rp->progs[i];
	fail_msg("no program %s", name);
	return NULL;
}

/* Exactly the named programs are selected. */
static void expect_selected(const struct real_plugin *rp, const char *const *names, size_t n)
{
	size_t i, j;
	bool want;

	for (i = 0; i < rp->n_progs; i++) {
		for (want = false, j = 0; j < n; j++)
			want |= strcmp(rp->progs[i].name, names[j]) == 0;
		if (rp->progs[i].selected != want)
			fail_msg("%s: selected %d, expected %d (%s)", rp->progs[i].name,
				 rp->progs[i].selected, want, rp->progs[i].reason);
	}
}

/* A kernel with cma_alloc_start/finish of start_args/finish_args arguments
 * (0: absent) and, when vendor, the Android vendor hooks. */
static struct ktel_targets *make_cma_kernel(int start_args, int finish_args, bool vendor)
{
	struct ktel_targets *t;
	struct btf *btf;
	int int_id, void_ptr;

	btf = btf__new_empty();
	assert_non_null(btf);
	int_id = btf__add_int(btf, "long", 8, BTF_INT_SIGNED);
	void_ptr = btf__add_ptr(btf, 0);
	assert_true(int_id > 0 && void_ptr > 0);
	if (start_args)
		add_tracepoint(btf, "cma_alloc_start", start_args, int_id, void_ptr);
	if (finish_args)
		add_tracepoint(btf, "cma_alloc_finish", finish_args, int_id, void_ptr);
	if (vendor) {
		add_tracepoint(btf, "android_vh_cma_alloc_start", 1, int_id, void_ptr);
		add_tracepoint(btf, "android_vh_cma_alloc_finish", 6, int_id, void_ptr);
	}
	t = ktel_targets__new_from_btf(btf);
	assert_non_null(t);
	assert_int_equal(ktel_targets__set_probe_paths(t, "/nonexistent/kprobe", ""), 0);
	return t;
}

/* An Android kernel without the upstream tracepoints: the vendor hooks pair. */
static void test_cma_vendor_hooks(void **state)
{
	static const char *const want[] = {"cma_alloc_start_vh", "cma_alloc_finish_vh"};
	struct real_plugin rp;
	struct ktel_targets *t = make_cma_kernel(0, 0, true);
	char why[512];

	open_real(&rp, "cma_allocation_latency");
	/* Each hook's task start form and its hash start twin. */
	assert_int_equal(rp.n_progs, 12);
	assert_int_equal(choose_real(&rp, t, why, sizeof(why)), 2);
	assert_string_equal(why, "");
	expect_selected(&rp, want, 2);
	assert_string_equal(real_prog(&rp, "cma_alloc_finish_v6")->reason,
			    "tracepoint cma_alloc_finish not in this kernel");
	/* The hash twin is the fallback when the kernel refuses the task form. */
	assert_string_equal(real_prog(&rp, "cma_alloc_finish_vh_hash")->reason,
			    "variant group cma_alloc_finish: cma_alloc_finish_vh selected");
	ktel_targets__free(t);

	/* Upstream tracepoints present too: they come first in the table. */
	t = make_cma_kernel(5, 6, true);
	assert_int_equal(choose_real(&rp, t, why, sizeof(why)), 2);
	expect_selected(&rp, (const char *const[]){"cma_alloc_start_v5", "cma_alloc_finish_v6"}, 2);
	assert_string_equal(real_prog(&rp, "cma_alloc_finish_vh")->reason,
			    "variant group cma_alloc_finish: cma_alloc_finish_v6 selected");
	ktel_targets__free(t);
	close_real(&rp);
}

/* The 6.1 prototypes (3-argument start, 5-argument finish) and the newer ones. */
static void test_cma_prototypes(void **state)
{
	struct real_plugin rp;
	struct ktel_targets *t;
	char why[512];

	open_real(&rp, "cma_allocation_latency");
	t = make_cma_kernel(3, 5, false);
	assert_int_equal(choose_real(&rp, t, why, sizeof(why)), 2);
	expect_selected(&rp, (const char *const[]){"cma_alloc_start_v3", "cma_alloc_finish_v5"}, 2);
	assert_string_equal(real_prog(&rp, "cma_alloc_start_v5")->reason,
			    "variant group cma_alloc_start: tp_btf/cma_alloc_start has 3 arguments, "
			    "variant wants 5");
	ktel_targets__free(t);

	t = make_cma_kernel(5, 6, false);
	assert_int_equal(choose_real(&rp, t, why, sizeof(why)), 2);
	expect_selected(&rp, (const char *const[]){"cma_alloc_start_v5", "cma_alloc_finish_v6"}, 2);
	ktel_targets__free(t);

	/* A newer start with the older finish: any mix pairs. */
	t = make_cma_kernel(5, 5, false);
	assert_int_equal(choose_real(&rp, t, why, sizeof(why)), 2);
	expect_selected(&rp, (const char *const[]){"cma_alloc_start_v5", "cma_alloc_finish_v5"}, 2);
	ktel_targets__free(t);
	close_real(&rp);
}

/*
 * A start hook but no usable finish hook (a 7-argument cma_alloc_finish no
 * variant was written for): the start alone would fill cma_start_map and
 * never measure anything, so nothing loads and the finish group is named.
 */
static void test_cma_no_finish(void **state)
{
	struct real_plugin rp;
	struct ktel_targets *t = make_cma_kernel(5, 7, false);
	char why[512];

	open_real(&rp, "cma_allocation_latency");
	assert_int_equal(choose_real(&rp, t, why, sizeof(why)), 0);
	expect_selected(&rp, NULL, 0);
	assert_string_equal(why, "variant group cma_alloc_finish: no usable variant "
				 "(tp_btf/cma_alloc_finish has 7 arguments, variant wants 6; "
				 "tp_btf/cma_alloc_finish has 7 arguments, variant wants 5; "
				 "tracepoint android_vh_cma_alloc_finish not in this kernel)");
	assert_string_equal(real_prog(&rp, "cma_alloc_start_v5")->reason,
			    "not loaded: variant group cma_alloc_finish has no usable variant");
	ktel_targets__free(t);

	/* No finish hook at all, the vendor start hook alone: the same. */
	t = make_cma_kernel(0, 0, false);
	assert_int_equal(choose_real(&rp, t, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "variant group cma_alloc_start: no usable variant"));
	assert_non_null(strstr(why, "variant group cma_alloc_finish: no usable variant"));
	ktel_targets__free(t);
	close_real(&rp);
}

/* A kernel with runq_latency's hooks, sched_switch of switch_args arguments. */
static struct ktel_targets *make_runq_kernel(int switch_args)
{
	struct ktel_targets *t;
	struct btf *btf;
	int int_id, void_ptr;

	btf = btf__new_empty();
	assert_non_null(btf);
	int_id = btf__add_int(btf, "long", 8, BTF_INT_SIGNED);
	void_ptr = btf__add_ptr(btf, 0);
	add_tracepoint(btf, "sched_wakeup", 1, int_id, void_ptr);
	add_tracepoint(btf, "sched_wakeup_new", 1, int_id, void_ptr);
	add_tracepoint(btf, "sched_switch", switch_args, int_id, void_ptr);
	t = ktel_targets__new_from_btf(btf);
	assert_non_null(t);
	return t;
}

/*
 * runq_latency's forms: the scheduler's stamp (its switch alone, no
 * wakeup hook) where it loads; the task storage trio when the
 * kernel refused the stamp's switch; the hash trio when it refused the task
 * storage switch too.
 */
static void test_runq_forms(void **state)
{
	static const char *const stamp[] = {"runq_switch_si"};
	static const char *const task[] = {"runq_switch", "runq_wakeup", "runq_wakeup_new"};
	static const char *const hash[] = {"runq_switch_hash", "runq_wakeup_hash",
					   "runq_wakeup_new_hash"};
	struct real_plugin rp;
	struct ktel_targets *t = make_runq_kernel(4);
	char why[512];

	open_real(&rp, "runq_latency");
	assert_int_equal(choose_real(&rp, t, why, sizeof(why)), 1);
	expect_selected(&rp, stamp, 1);
	assert_string_equal(real_prog(&rp, "runq_wakeup")->reason,
			    "variant group runq_wakeup: runq_switch_si selected");

	for (size_t i = 0; i < rp.n_progs; i++)
		if (strcmp(rp.progs[i].name, "runq_switch_si") == 0)
			rp.progs[i].excluded = "load refused by this kernel";
	assert_int_equal(choose_real(&rp, t, why, sizeof(why)), 3);
	expect_selected(&rp, task, 3);

	/* No task storage: the kernel refuses each task program. */
	for (size_t i = 0; i < rp.n_progs; i++)
		for (size_t k = 0; k < 3; k++)
			if (strcmp(rp.progs[i].name, task[k]) == 0)
				rp.progs[i].excluded = "load refused by this kernel";
	assert_int_equal(choose_real(&rp, t, why, sizeof(why)), 3);
	expect_selected(&rp, hash, 3);
	ktel_targets__free(t);
	close_real(&rp);
}

/* Before 5.18 sched_switch has no prev_state: the start forms cannot run
 * there, the stamp can. */
static void test_runq_old_switch(void **state)
{
	static const char *const stamp[] = {"runq_switch_si"};
	struct real_plugin rp;
	struct ktel_targets *t = make_runq_kernel(3);
	char why[512];

	open_real(&rp, "runq_latency");
	assert_int_equal(choose_real(&rp, t, why, sizeof(why)), 1);
	expect_selected(&rp, stamp, 1);

	/* Refused there (no sched_info): nothing else can run. */
	for (size_t i = 0; i < rp.n_progs; i++)
		if (strcmp(rp.progs[i].name, "runq_switch_si") == 0)
			rp.progs[i].excluded = "load refused by this kernel";
	assert_int_equal(choose_real(&rp, t, why, sizeof(why)), 0);
	expect_selected(&rp, NULL, 0);
	assert_string_equal(real_prog(&rp, "runq_wakeup")->reason,
			    "not loaded: variant group runq_switch has no usable variant");
	ktel_targets__free(t);
	close_real(&rp);
}

/* A program listed in a second group stands for it when selected, and is
 * passed over there when not. */
static void test_listed_in_two_groups(void **state)
{
	static const struct ktel_prog_variant variants[] = {
		{.group = "sw", .prog = "both", .nr_args = -1},
		{.group = "sw", .prog = "sw_only", .nr_args = -1},
		{.group = "foo", .prog = "both", .nr_args = -1},
		{.group = "foo", .prog = "foo_only", .nr_args = -1},
	};
	struct ktel_prog_choice progs[] = {
		PROG("both", "tp_btf/sched_switch"),
		PROG("sw_only", "tp_btf/sched_switch"),
		PROG("foo_only", "tp_btf/mm_foo_begin"),
	};
	struct ktel_targets *t = make_kernel(false, 3);
	char why[512];

	assert_int_equal(ktel_targets__choose_why(t, variants, 4, progs, 3, why, sizeof(why)), 1);
	assert_true(progs[0].selected);
	assert_string_equal(progs[2].reason, "variant group foo: both selected");

	progs[0].excluded = "load refused by this kernel";
	assert_int_equal(ktel_targets__choose_why(t, variants, 4, progs, 3, why, sizeof(why)), 2);
	assert_false(progs[0].selected);
	assert_true(progs[1].selected);
	assert_true(progs[2].selected);
	assert_string_equal(why, "");
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
		cmocka_unit_test(test_group_unmet_stops_ungrouped),
		cmocka_unit_test(test_excluded_variant),
		cmocka_unit_test(test_cma_vendor_hooks),
		cmocka_unit_test(test_cma_prototypes),
		cmocka_unit_test(test_cma_no_finish),
		cmocka_unit_test(test_runq_forms),
		cmocka_unit_test(test_runq_old_switch),
		cmocka_unit_test(test_listed_in_two_groups),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
