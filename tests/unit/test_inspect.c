// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ktelemetryctl inspect as a pre-flight check, offline and unprivileged:
 * it refuses what the daemon's pull path refuses (a char array as a
 * dimension, a label map laid out the wrong way round, a per-CPU value with
 * 4-byte members) naming the member and the rule; it prints the enumerators
 * of label_enum dimensions and the layout of label maps; and per program,
 * against a synthetic kernel, why a variant lost and that a fentry/fexit
 * load is not verified.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/btf.h>

#include "bpf_lifecycle.h"
#include "ctl_render.h"
#include "inspect.h"
#include "kernel_targets.h"
#include "ktel_test.h"

#define FX_STRING_KEY KTEL_TEST_PLUGIN_DIR "/fx_string_key.so"
#define FX_PERCPU_U32 KTEL_TEST_PLUGIN_DIR "/fx_percpu_u32.so"
#define BLOCK_IO KTEL_PLUGIN_DIR "/block_io_latency.so"
#define CMA KTEL_PLUGIN_DIR "/cma_allocation_latency.so"
#define DMABUF KTEL_PLUGIN_DIR "/dmabuf_request_sizes.so"

/* The human rendering of report, as ktelemetryctl prints it; free() it. */
static char *render(const json_t *report)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	ktel_ctl_render_inspect(f, report);
	assert_int_equal(fclose(f), 0);
	return buf;
}

static void assert_contains(const char *haystack, const char *needle)
{
	if (!strstr(haystack, needle))
		fail_msg("\"%s\" not in:\n%s", needle, haystack);
}

/* The line of text that starts (after spaces) with prefix. */
static const char *line_of(const char *text, const char *prefix)
{
	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *s = l + strspn(l, " ");

		if (strncmp(s, prefix, strlen(prefix)) == 0)
			return s;
	}
	fail_msg("no line starting with \"%s\" in:\n%s", prefix, text);
	return NULL;
}

/* That line alone, without its newline; free() it. */
static char *line_text(const char *text, const char *prefix)
{
	const char *l = line_of(text, prefix);
	char *line = strndup(l, strcspn(l, "\n"));

	assert_non_null(line);
	return line;
}

static void assert_line_contains(const char *text, const char *prefix, const char *needle)
{
	char *line = line_text(text, prefix);

	if (!strstr(line, needle))
		fail_msg("\"%s\" not in line \"%s\"", needle, line);
	free(line);
}

static json_t *metric_named(const json_t *report, const char *name)
{
	size_t i;
	json_t *m;

	json_array_foreach(json_object_get(report, "metrics"), i, m)
		if (strcmp(json_string_value(json_object_get(m, "name")), name) == 0)
			return m;
	fail_msg("no metric %s in the report", name);
	return NULL;
}

static json_t *dim_of(const json_t *metric, size_t i)
{
	json_t *d = json_array_get(json_object_get(metric, "dims"), i);

	assert_non_null(d);
	return d;
}

/* ---- dimension rules ---------------------------------------------------------- */

static void test_string_dimension_refused(void **state)
{
	struct ktel_err err = {0};
	json_t *report = NULL, *m;
	char *text;

	assert_int_equal(ktel_inspect_plugin(FX_STRING_KEY, getuid(), NULL, &report, &err),
			 -EINVAL);
	assert_non_null(report);
	assert_true(json_is_false(json_object_get(report, "readable")));
	/* The first failing metric's error is the command's error. */
	assert_contains(err.msg, "metric fx_string_key: map fx_string_key_map dimension heap: "
				 "key struct fx_string_key member heap is a char_array; a "
				 "dimension must be an integer or enum member");
	m = metric_named(report, "fx_string_key");
	assert_contains(json_string_value(json_object_get(m, "error")), "member heap");
	text = render(report);
	assert_line_contains(text,
			     "UNREADABLE: metric fx_string_key:", "member heap is a char_array");
	free(text);
	json_decref(report);
}

static void test_inverted_label_map_refused(void **state)
{
	struct ktel_err err = {0};
	json_t *report = NULL, *m, *lm;
	char *text;

	assert_int_equal(ktel_inspect_plugin(FX_STRING_KEY, getuid(), NULL, &report, &err),
			 -EINVAL);
	m = metric_named(report, "fx_inverted_label_map");
	assert_contains(json_string_value(json_object_get(m, "error")),
			"dimension heap: label map fx_inverted_names: expected an integer key "
			"and a char array in the value, but key struct fx_inverted_name has no "
			"integer member and value int unsigned int has no char array member");
	/* The layout that broke the rule is shown. */
	lm = json_object_get(dim_of(m, 0), "label_map_layout");
	assert_string_equal(json_string_value(json_object_get(json_object_get(lm, "key"), "type")),
			    "struct fx_inverted_name");
	text = render(report);
	assert_contains(text, "label map fx_inverted_names: hash, max_entries 16\n");
	assert_line_contains(text, "key: struct fx_inverted_name", "(16 bytes)");
	free(text);
	json_decref(report);
}

static void test_label_map_layout_printed(void **state)
{
	struct ktel_err err = {0};
	json_t *report = NULL, *lm;
	char *text;

	assert_int_equal(ktel_inspect_plugin(DMABUF, getuid(), NULL, &report, &err), 0);
	lm = json_object_get(dim_of(metric_named(report, "dmabuf_request_sizes"), 0),
			     "label_map_layout");
	assert_string_equal(json_string_value(json_object_get(lm, "name")),
			    "dmabuf_exporter_names");
	assert_string_equal(json_string_value(json_object_get(lm, "name_member")), "name");
	text = render(report);
	assert_contains(text, "label map dmabuf_exporter_names: hash, max_entries 64, id "
			      "key.(scalar), name value.name\n");
	assert_line_contains(text, "value: struct ktel_label", "(32 bytes)");
	free(text);
	json_decref(report);
}

/* Per-CPU copies are summed per 8-byte word: a __u32 counter would carry
 * into its neighbour, so the daemon refuses it and so must inspect. */
static void test_percpu_u32_refused(void **state)
{
	struct ktel_err err = {0};
	json_t *report = NULL;

	assert_int_equal(ktel_inspect_plugin(FX_PERCPU_U32, getuid(), NULL, &report, &err),
			 -EINVAL);
	assert_true(json_is_false(json_object_get(report, "readable")));
	assert_contains(err.msg, "metric fx_percpu_u32: map fx_percpu_u32_map value struct "
				 "fx_percpu_u32_value has member events of 4 bytes at offset 0: "
				 "per-CPU values are summed per 8-byte word");
	json_decref(report);
}

/* ---- enumerators ---------------------------------------------------------------- */

static void test_label_enum_enumerators(void **state)
{
	struct ktel_err err = {0};
	json_t *report = NULL, *labels;
	char *text;

	assert_int_equal(ktel_inspect_plugin(BLOCK_IO, getuid(), NULL, &report, &err), 0);
	/* op is a __u32 in the key: only the descriptor's label_enum names
	 * the enum its values come from. */
	labels = json_object_get(dim_of(metric_named(report, "block_io_latency"), 2), "labels");
	assert_string_equal(json_string_value(json_object_get(labels, "0")), "BLOCK_OP_READ");
	assert_string_equal(json_string_value(json_object_get(labels, "1")), "BLOCK_OP_WRITE");
	/* KTEL_DIM_ENUM_SHORT: the labels records carry, by the same values. */
	labels = json_object_get(dim_of(metric_named(report, "block_io_latency"), 2),
				 "short_labels");
	assert_string_equal(json_string_value(json_object_get(labels, "0")), "read");
	assert_string_equal(json_string_value(json_object_get(labels, "4")), "other");
	assert_string_equal(json_string_value(
				    json_object_get(dim_of(metric_named(report, "block_io_latency"),
							   0),
						    "device")),
			    "major");
	text = render(report);
	assert_contains(text, "dimension operation = key.op, labels from enum block_op, "
			      "shortened\n"
			      "        BLOCK_OP_READ = 0 -> read\n"
			      "        BLOCK_OP_WRITE = 1 -> write\n");
	assert_contains(text, "dimension major = key.major, block device major (adds "
			      "dimension \"device\")\n");
	free(text);
	json_decref(report);
}

/* ---- programs against a synthetic kernel ------------------------------------- */

/* typedef btf_trace_<name>: pointer to void (*)(void *, int x nr_args). */
static void add_tracepoint(struct btf *btf, const char *name, int nr_args)
{
	int int_id = btf__find_by_name_kind(btf, "int", BTF_KIND_INT);
	int void_ptr = btf__add_ptr(btf, 0);
	int proto = btf__add_func_proto(btf, 0);
	char tname[128];

	assert_true(int_id > 0 && void_ptr > 0 && proto > 0);
	assert_int_equal(btf__add_func_param(btf, NULL, void_ptr), 0);
	for (int i = 0; i < nr_args; i++)
		assert_int_equal(btf__add_func_param(btf, NULL, int_id), 0);
	snprintf(tname, sizeof(tname), "btf_trace_%s", name);
	assert_true(btf__add_typedef(btf, tname, btf__add_ptr(btf, proto)) > 0);
}

static void add_function(struct btf *btf, const char *name)
{
	int int_id = btf__find_by_name_kind(btf, "int", BTF_KIND_INT);
	int proto = btf__add_func_proto(btf, int_id);

	assert_true(proto > 0);
	assert_int_equal(btf__add_func_param(btf, "a", int_id), 0);
	assert_true(btf__add_func(btf, name, BTF_FUNC_GLOBAL, proto) > 0);
}

static struct btf *new_kernel_btf(void)
{
	struct btf *btf = btf__new_empty();

	assert_non_null(btf);
	assert_true(btf__add_int(btf, "int", 4, BTF_INT_SIGNED) > 0);
	return btf;
}

static struct ktel_targets *targets_of(struct btf *btf)
{
	struct ktel_targets *t = ktel_targets__new_from_btf(btf);

	assert_non_null(t);
	assert_int_equal(ktel_targets__set_probe_paths(t, "/nonexistent/kprobe", ""), 0);
	return t;
}

static json_t *inspect_against(const char *path, struct ktel_targets *t)
{
	struct ktel_err err = {0};
	json_t *report = NULL;

	if (ktel_inspect_plugin(path, getuid(), t, &report, &err))
		fail_msg("inspect %s: %s", path, err.msg);
	return report;
}

/* cma_alloc_finish grew a 7th argument: both upstream variants lose and say
 * so, the vendor hook wins. */
static void test_skip_reason_printed(void **state)
{
	struct btf *btf = new_kernel_btf();
	struct ktel_targets *t;
	json_t *report;
	char *text;

	add_tracepoint(btf, "cma_alloc_start", 5);
	add_tracepoint(btf, "cma_alloc_finish", 7);
	add_tracepoint(btf, "android_vh_cma_alloc_finish", 6);
	t = targets_of(btf);
	report = inspect_against(CMA, t);
	text = render(report);
	assert_line_contains(text, "cma_alloc_finish_v6 ",
			     "target present, would not load: variant group cma_alloc_finish: "
			     "tp_btf/cma_alloc_finish has 7 arguments, variant wants 6");
	assert_line_contains(text, "cma_alloc_finish_v5 ", "has 7 arguments, variant wants 5");
	assert_line_contains(text, "cma_alloc_finish_vh ", "target present, would load");
	assert_line_contains(text, "cma_alloc_start_v3 ",
			     "would not load: variant group cma_alloc_start: "
			     "cma_alloc_start_v5 selected");
	assert_null(strstr(text, "unsupported on this kernel"));
	free(text);
	json_decref(report);
	ktel_targets__free(t);
}

/* No variant of a group usable: every program says why, and so does the
 * plugin as a whole, as the daemon would mark it unsupported. */
static void test_unsupported_printed(void **state)
{
	struct btf *btf = new_kernel_btf();
	struct ktel_targets *t;
	json_t *report;
	char *text;

	add_tracepoint(btf, "cma_alloc_start", 5);
	t = targets_of(btf);
	report = inspect_against(CMA, t);
	text = render(report);
	assert_line_contains(text, "cma_alloc_start_v5 ",
			     "target present, would not load: not loaded: variant group "
			     "cma_alloc_finish has no usable variant");
	assert_line_contains(text, "cma_alloc_finish_v6 ",
			     "target MISSING: tracepoint cma_alloc_finish not in this kernel, "
			     "would not load");
	assert_line_contains(text, "unsupported on this kernel: ",
			     "variant group cma_alloc_finish: no usable variant");
	free(text);
	json_decref(report);
	ktel_targets__free(t);
}

/* The tracepoint is missing, the fexit fallback's function exists: inspect
 * cannot know whether the kernel lets a trampoline load, and says so. */
static void test_fexit_load_not_verified(void **state)
{
	struct btf *btf = new_kernel_btf();
	struct ktel_targets *t;
	json_t *report;
	char *text, *line;

	add_function(btf, "dma_buf_export");
	t = targets_of(btf);
	report = inspect_against(DMABUF, t);
	text = render(report);
	assert_line_contains(text, "dmabuf_export_fexit ", "target present; load not verified");
	line = line_text(text, "dmabuf_export_fexit ");
	assert_null(strstr(line, "would load"));
	free(line);
	free(text);
	json_decref(report);
	ktel_targets__free(t);
}

/*
 * The load step without privileges: inspect must not claim "would load",
 * only that it could not verify the load. Run as nobody when the tests run
 * as root (the load itself is checked in test_plugins).
 */
static int verify_unprivileged(void)
{
	struct ktel_err err = {0};
	struct ktel_targets *t;
	json_t *report = NULL;
	char *text;
	bool ok;

	t = ktel_targets__new(NULL, &err);
	if (!t)
		return 3; /* no kernel BTF here: nothing to verify against */
	if (ktel_inspect_plugin_verify(BLOCK_IO, getuid(), t, &report, &err) || !report)
		return 2;
	text = render(report);
	ok = json_is_false(json_object_get(json_object_get(report, "load"), "verified")) &&
	     strstr(text, "load NOT VERIFIED: not root: could not verify") &&
	     !strstr(text, "would load") && strstr(text, "; load not verified");
	if (!ok)
		fprintf(stderr, "%s\n", text);
	free(text);
	json_decref(report);
	ktel_targets__free(t);
	return ok ? 0 : 1;
}

static void test_load_not_verified_unprivileged(void **state)
{
	int status, rc;
	pid_t pid;

	if (geteuid() != 0) {
		rc = verify_unprivileged();
	} else {
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0)
			_exit(setgid(65534) || setuid(65534) ? 4 : verify_unprivileged());
		assert_int_equal(waitpid(pid, &status, 0), pid);
		rc = WIFEXITED(status) ? WEXITSTATUS(status) : 5;
	}
	if (rc == 3)
		skip();
	assert_int_equal(rc, 0);
}

/* Is s whole UTF-8 characters only? */
static bool valid_utf8(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		int more = *p < 0x80             ? 0
			   : (*p & 0xe0) == 0xc0 ? 1
			   : (*p & 0xf0) == 0xe0 ? 2
			   : (*p & 0xf8) == 0xf0 ? 3
						 : -1;

		if (more < 0)
			return false;
		for (p++; more-- > 0; p++)
			if ((*p & 0xc0) != 0x80)
				return false;
	}
	return true;
}

/*
 * The verifier's words in a refusal: its last 3 lines that say something
 * (statistics and blank lines dropped), bounded, never starting inside a
 * UTF-8 character.
 */
static void test_verifier_tail(void **state)
{
	char log[4096], out[KTEL_VERIFIER_TAIL_MAX + 8];
	size_t n, used = 0;

	n = ktel_verifier_tail("0: R1=ctx() R10=fp0\n1: (b7) r1 = 0\n"
			       "8: (79) r6 = *(u64 *)(r0 +320)\n"
			       "invalid access to map value, value_size=256 off=320 size=8\n\n"
			       "processed 9 insns (limit 1000000) max_states_per_insn 0\n"
			       "verification time 12 usec\n",
			       out, sizeof(out));
	assert_int_equal(n, strlen(out));
	assert_string_equal(out, "1: (b7) r1 = 0 | 8: (79) r6 = *(u64 *)(r0 +320) | "
				 "invalid access to map value, value_size=256 off=320 size=8");

	/* Long lines of 3-byte characters: cut at the front, on a boundary. */
	for (int l = 0; l < 3; l++) {
		for (int i = 0; i < 200; i++)
			used += (size_t)snprintf(log + used, sizeof(log) - used, "\xe2\x82\xac");
		used += (size_t)snprintf(log + used, sizeof(log) - used, "\n");
	}
	n = ktel_verifier_tail(log, out, sizeof(out));
	assert_true(n <= KTEL_VERIFIER_TAIL_MAX);
	assert_memory_equal(out, "...", 3);
	assert_true(((unsigned char)out[3] & 0xc0) != 0x80);
	assert_true(valid_utf8(out));
	/* One long line: cut at its end, also on a boundary. */
	used = 0;
	for (int i = 0; i < 200; i++)
		used += (size_t)snprintf(log + used, sizeof(log) - used, "\xe2\x82\xac");
	snprintf(log + used, sizeof(log) - used, "\n");
	n = ktel_verifier_tail(log, out, sizeof(out));
	assert_true(n <= KTEL_VERIFIER_TAIL_MAX);
	assert_true(n > KTEL_VERIFIER_TAIL_MAX - 3);
	assert_true(valid_utf8(out));
	assert_int_equal(ktel_verifier_tail("", out, sizeof(out)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_string_dimension_refused),
		cmocka_unit_test(test_inverted_label_map_refused),
		cmocka_unit_test(test_label_map_layout_printed),
		cmocka_unit_test(test_percpu_u32_refused),
		cmocka_unit_test(test_label_enum_enumerators),
		cmocka_unit_test(test_skip_reason_printed),
		cmocka_unit_test(test_unsupported_printed),
		cmocka_unit_test(test_fexit_load_not_verified),
		cmocka_unit_test(test_load_not_verified_unprivileged),
		cmocka_unit_test(test_verifier_tail),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
