// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Control socket protocol without a socket or privileges: line framing and
 * its bound, request checking (every refusal with its message), answers as
 * single lines, records in the JSON sink's format, the peer credential rule,
 * offline inspect of a real plugin and of an unreadable one, and the human
 * rendering (bucket bounds, bars, the aligned list table). The command
 * table is checked against docs/control.md so the two cannot drift.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "control.h"
#include "ctl_render.h"
#include "inspect.h"
#include "ktel_test.h"

/* ---- framing -------------------------------------------------------------- */

struct lines {
	char got[8][64];
	int n;
	int stop_after; /* return -1 after this many (0: never) */
};

static int collect(char *line, void *ctx)
{
	struct lines *l = ctx;

	snprintf(l->got[l->n++], sizeof(l->got[0]), "%s", line);
	return l->stop_after && l->n >= l->stop_after ? -ECANCELED : 0;
}

static void test_split_lines(void **state)
{
	char buf[64];
	struct lines l = {0};
	size_t len;

	strcpy(buf, "{\"a\":1}\r\n\n{\"b\"");
	len = strlen(buf);
	assert_int_equal(ktel_control_split_lines(buf, &len, sizeof(buf), collect, &l), 0);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.got[0], "{\"a\":1}");
	assert_string_equal(l.got[1], "");
	/* The incomplete tail waits at the front for the rest. */
	assert_int_equal(len, 4);
	assert_memory_equal(buf, "{\"b\"", 4);
	memcpy(buf + len, ":2}\n", 4);
	len += 4;
	assert_int_equal(ktel_control_split_lines(buf, &len, sizeof(buf), collect, &l), 0);
	assert_int_equal(l.n, 3);
	assert_string_equal(l.got[2], "{\"b\":2}");
	assert_int_equal(len, 0);
}

static int take_one(char *line, void *ctx)
{
	int *n = ctx;

	return (*n)++ ? -EAGAIN : 0;
}

/* -EAGAIN leaves the line in the buffer, '\r' and '\n' restored. */
static void test_split_lines_again(void **state)
{
	char buf[64];
	size_t len = 0;
	int n = 0;

	len = (size_t)snprintf(buf, sizeof(buf), "a\r\nbc\r\nd\n");
	assert_int_equal(ktel_control_split_lines(buf, &len, sizeof(buf), take_one, &n), -EAGAIN);
	assert_int_equal(n, 2);
	assert_int_equal(len, 6);
	assert_memory_equal(buf, "bc\r\nd\n", 6);
}

static void test_split_lines_limit(void **state)
{
	char buf[16];
	struct lines l = {0};
	size_t len = sizeof(buf);

	/* A full buffer without a newline: the line is over the limit. */
	memset(buf, 'x', sizeof(buf));
	assert_int_equal(ktel_control_split_lines(buf, &len, sizeof(buf), collect, &l), -E2BIG);
	assert_int_equal(l.n, 0);
	/* One byte less still fits: wait for more. */
	len = sizeof(buf) - 1;
	assert_int_equal(ktel_control_split_lines(buf, &len, sizeof(buf), collect, &l), 0);
	/* A complete line followed by a full-size tail is still refused. */
	memcpy(buf, "ab\n", 3);
	len = sizeof(buf);
	assert_int_equal(ktel_control_split_lines(buf, &len, 8, collect, &l), -E2BIG);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.got[0], "ab");
}

static void test_split_lines_stop(void **state)
{
	char buf[32] = "a\nb\nc\n";
	struct lines l = {.stop_after = 2};
	size_t len = strlen(buf);

	assert_int_equal(ktel_control_split_lines(buf, &len, sizeof(buf), collect, &l),
			 -ECANCELED);
	assert_int_equal(l.n, 2);
	assert_int_equal(len, 2); /* "c\n" left */
}

/* ---- requests --------------------------------------------------------------- */

static void expect_refusal(const char *line, const char *msg)
{
	const struct ktel_control_cmd *cmd = NULL;
	struct ktel_err err = {0};
	json_t *req = NULL;

	assert_int_equal(ktel_control_parse_request(line, &req, &cmd, &err), -EINVAL);
	assert_null(req);
	if (strcmp(err.msg, msg) != 0)
		fail_msg("%s: got \"%s\", expected \"%s\"", line, err.msg, msg);
}

static void test_request_refusals(void **state)
{
	expect_refusal("[1, 2]", "request is not a JSON object");
	expect_refusal("{}", "request has no \"cmd\" string");
	expect_refusal("{\"cmd\": 5}", "request has no \"cmd\" string");
	expect_refusal("{\"cmd\": \"frobnicate\"}",
		       "unknown command \"frobnicate\" (\"help\" lists them)");
	expect_refusal("{\"cmd\": \"list\", \"name\": \"x\"}", "list: unknown argument \"name\"");
	expect_refusal("{\"cmd\": \"enable\"}", "enable: missing argument \"name\"");
	expect_refusal("{\"cmd\": \"enable\", \"name\": 3}", "enable: \"name\": expected a string");
	expect_refusal("{\"cmd\": \"enable\", \"name\": \"x\", \"for_ms\": \"2s\"}",
		       "enable: \"for_ms\": expected an integer >= 0");
	expect_refusal("{\"cmd\": \"enable\", \"name\": \"x\", \"for_ms\": -1}",
		       "enable: \"for_ms\": expected an integer >= 0");
	expect_refusal("{\"cmd\": \"show\", \"name\": \"a\", \"name\": \"b\"}",
		       "request is not JSON: duplicate object key near '\"name\"' (column 35)");
}

static void test_request_not_json(void **state)
{
	const struct ktel_control_cmd *cmd;
	struct ktel_err err = {0};
	json_t *req = NULL;

	assert_int_equal(ktel_control_parse_request("{\"cmd\": ", &req, &cmd, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "request is not JSON: "));
	assert_non_null(strstr(err.msg, "(column "));
}

static void test_request_accepted(void **state)
{
	const struct ktel_control_cmd *cmd = NULL;
	struct ktel_err err = {0};
	json_t *req = NULL;

	assert_int_equal(ktel_control_parse_request("{\"cmd\":\"enable\",\"name\":\"runq_latency\","
						    "\"for_ms\":2000}", &req, &cmd, &err), 0);
	assert_string_equal(cmd->name, "enable");
	assert_int_equal(json_integer_value(json_object_get(req, "for_ms")), 2000);
	json_decref(req);
	assert_int_equal(ktel_control_parse_request("{\"cmd\":\"pull\"}", &req, &cmd, &err), 0);
	assert_string_equal(cmd->name, "pull");
	json_decref(req);
}

static void test_command_table(void **state)
{
	size_t n = 0;

	for (const struct ktel_control_cmd *c = ktel_control_cmds; c->name; c++, n++) {
		assert_non_null(c->fn);
		assert_true(c->help && c->help[0]);
		assert_ptr_equal(ktel_control_cmd_find(c->name), c);
	}
	assert_true(n >= 9);
	assert_null(ktel_control_cmd_find("nope"));
	assert_null(ktel_control_cmd_find(NULL));
}

/* Every command has a "### `name`" section in docs/control.md and back. */
static void test_docs_match_table(void **state)
{
	FILE *f = fopen(KTEL_SOURCE_DIR "/docs/control.md", "r");
	char line[512];
	size_t documented = 0, n = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		char name[64];

		if (sscanf(line, "### `%63[a-z_]`", name) != 1)
			continue;
		if (!ktel_control_cmd_find(name))
			fail_msg("docs/control.md documents \"%s\", which is no command", name);
		documented++;
	}
	fclose(f);
	for (const struct ktel_control_cmd *c = ktel_control_cmds; c->name; c++)
		n++;
	assert_int_equal(documented, n);
}

/* ---- answers ------------------------------------------------------------------ */

static void test_answer_one_line(void **state)
{
	json_t *e = ktel_control_error(KTEL_CTL_E_FAILED, "two\nlines");
	size_t len;
	char *line = ktel_control_dump_line(e, &len);
	json_t *back;

	assert_non_null(line);
	assert_int_equal(strlen(line), len);
	assert_int_equal(line[len - 1], '\n');
	assert_null(memchr(line, '\n', len - 1));
	back = json_loads(line, 0, NULL);
	assert_non_null(back);
	assert_true(json_is_false(json_object_get(back, "ok")));
	assert_string_equal(json_string_value(json_object_get(back, "error")), "two\nlines");
	assert_string_equal(json_string_value(json_object_get(back, "code")), "failed");
	/* "ok" comes first: a reader can tell success from the first bytes. */
	assert_memory_equal(line, "{\"ok\":false", 11);
	json_decref(back);
	json_decref(e);
	free(line);
}

static void test_record_json(void **state)
{
	struct ktel_record r = {
		.type = KTEL_RECORD_HISTOGRAM,
		.metric = "m",
		.unit = "us",
		.boot_id = "b",
		.map_id = 7,
		.seq = 3,
		.n_dims = 1,
		.dims = {{.name = "cpu", .value = 2}},
	};
	json_t *j, *h;

	r.hist.delta.scheme = KTEL_HIST_LOG2;
	r.hist.delta.n_buckets = 32;
	r.hist.delta.counts[9] = 12;
	r.hist.total = r.hist.delta;
	j = ktel_control_record_json(&r);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "metric")), "m");
	assert_int_equal(json_integer_value(json_object_get(j, "map_id")), 7);
	h = json_object_get(j, "histogram");
	assert_int_equal(json_integer_value(json_array_get(json_object_get(h, "counts"), 9)), 12);
	assert_int_equal(json_integer_value(json_array_get(json_object_get(h, "le"), 9)), 512);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "dims"), "cpu")), 2);
	json_decref(j);
}

/* ---- peers ------------------------------------------------------------------- */

static void test_peer_check(void **state)
{
	const gid_t held[] = {777, 65534};
	const gid_t other[] = {4321};
	struct ktel_err err = {0};

	assert_int_equal(ktel_control_peer_check(0, 1234, NULL, 0, 0, &err), 0);
	/* nobody: uid 65534, primary group nogroup (65534). */
	assert_int_equal(ktel_control_peer_check(65534, 65534, NULL, 0, 0, &err), -EACCES);
	assert_string_equal(err.msg, "permission denied: uid 65534 is neither root nor in group "
				     "root");
	/* Its process gid is the group. */
	assert_int_equal(ktel_control_peer_check(65534, 65534, NULL, 0, 65534, &err), 0);
	/* The process holds the group among its supplementary groups, whatever
	 * the user database says (uid 4242 has no passwd entry). */
	assert_int_equal(ktel_control_peer_check(4242, 4242, held, 2, 65534, &err), 0);
	/* The process does not hold it, though its passwd primary group is it:
	 * what the process holds decides. */
	assert_int_equal(ktel_control_peer_check(65534, 4321, other, 1, 65534, &err), -EACCES);
	/* The kernel could not say (n < 0): the user database decides. */
	assert_int_equal(ktel_control_peer_check(65534, 4321, NULL, -1, 65534, &err), 0);
	/* A group without a name is shown by number; an unknown uid is no member. */
	assert_int_equal(ktel_control_peer_check(4242, 4242, NULL, -1, 54321, &err), -EACCES);
	assert_string_equal(err.msg, "permission denied: uid 4242 is neither root nor in group "
				     "54321");
}

/* Without the process's groups, a supplementary member (from /etc/group) is
 * admitted through the user database. */
static void test_peer_check_supplementary(void **state)
{
	struct group *g;
	bool tested = false;

	setgrent();
	while (!tested && (g = getgrent())) {
		for (char **mem = g->gr_mem; *mem && !tested; mem++) {
			struct passwd *pw = getpwnam(*mem);
			struct ktel_err err;

			if (!pw || pw->pw_uid == 0 || pw->pw_gid == g->gr_gid)
				continue;
			assert_int_equal(ktel_control_peer_check(pw->pw_uid, pw->pw_gid, NULL, -1,
								 g->gr_gid, &err), 0);
			tested = true;
		}
	}
	endgrent();
	if (!tested)
		skip();
}

/* ---- inspect ------------------------------------------------------------------ */

static void test_inspect_builtin(void **state)
{
	struct ktel_err err = {0};
	json_t *report = NULL, *m, *value, *f;

	assert_int_equal(ktel_inspect_plugin(KTEL_PLUGIN_DIR "/compaction_duration.so", getuid(),
					     NULL, &report, &err), 0);
	assert_true(json_is_true(json_object_get(report, "readable")));
	m = json_array_get(json_object_get(report, "metrics"), 0);
	assert_string_equal(json_string_value(json_object_get(m, "name")), "compaction_duration");
	value = json_object_get(m, "value");
	/* struct accumulator_value_sum: 32 u64 buckets, then the u64 sum. */
	assert_int_equal(json_integer_value(json_object_get(value, "size")), 264);
	f = json_array_get(json_object_get(value, "fields"), 0);
	assert_string_equal(json_string_value(json_object_get(f, "name")), "buckets");
	assert_int_equal(json_integer_value(json_object_get(f, "count")), 32);
	f = json_array_get(json_object_get(value, "fields"), 1);
	assert_string_equal(json_string_value(json_object_get(f, "name")), "sum");
	assert_int_equal(json_integer_value(json_object_get(f, "offset")), 256);
	assert_string_equal(json_string_value(json_object_get(json_object_get(m, "histogram"),
							      "scheme")), "log2");
	assert_int_equal(json_array_size(json_object_get(report, "programs")), 2);
	json_decref(report);
}

static void test_inspect_unreadable(void **state)
{
	struct ktel_err err = {0};
	json_t *report = NULL, *m;

	assert_int_equal(ktel_inspect_plugin(KTEL_TEST_PLUGIN_DIR "/fx_unreadable.so", getuid(),
					     NULL, &report, &err), -EINVAL);
	assert_non_null(report);
	assert_non_null(strstr(err.msg, "metric fx_unreadable: map fx_unreadable_map value: "
					"struct fx_unreadable_value: member flags is a bitfield"));
	assert_true(json_is_false(json_object_get(report, "readable")));
	m = json_array_get(json_object_get(report, "metrics"), 0);
	assert_non_null(strstr(json_string_value(json_object_get(m, "error")), "flags"));
	json_decref(report);
}

static void test_inspect_refused(void **state)
{
	struct ktel_err err = {0};
	json_t *report = NULL;

	assert_true(ktel_inspect_plugin(KTEL_TEST_PLUGIN_DIR "/fx_abi_major.so", getuid(), NULL,
					&report, &err) < 0);
	assert_null(report);
	assert_non_null(strstr(err.msg, "refused"));
}

/* ---- rendering ------------------------------------------------------------------- */

static json_t *log2_hist(void)
{
	json_t *counts = json_array(), *le = json_array();

	for (int k = 0; k < 32; k++) {
		json_array_append_new(counts, json_integer(k == 9 ? 12 : k == 10 ? 24 : 0));
		json_array_append_new(le, k == 31 ? json_string("+Inf")
						  : json_integer((json_int_t)1 << k));
	}
	return json_pack("{s:s, s:o, s:o}", "scheme", "log2", "counts", counts, "le", le);
}

static void test_bucket_labels(void **state)
{
	json_t *h = log2_hist(), *lin;
	char buf[64];

	assert_int_equal(ktel_ctl_bucket_label(h, 0, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "[0, 1]");
	ktel_ctl_bucket_label(h, 1, buf, sizeof(buf));
	assert_string_equal(buf, "(1, 2]");
	ktel_ctl_bucket_label(h, 9, buf, sizeof(buf));
	assert_string_equal(buf, "(256, 512]");
	ktel_ctl_bucket_label(h, 11, buf, sizeof(buf));
	assert_string_equal(buf, "(1K, 2K]");
	ktel_ctl_bucket_label(h, 21, buf, sizeof(buf));
	assert_string_equal(buf, "(1M, 2M]");
	ktel_ctl_bucket_label(h, 31, buf, sizeof(buf));
	assert_string_equal(buf, "(1G, +Inf)");
	assert_int_equal(ktel_ctl_bucket_label(h, 32, buf, sizeof(buf)), -EINVAL);
	lin = json_pack("{s:s, s:i, s:[i, i, s]}", "scheme", "linear", "linear_min", 100, "le", 150,
			200, "+Inf");
	ktel_ctl_bucket_label(lin, 0, buf, sizeof(buf));
	assert_string_equal(buf, "[100, 150)");
	ktel_ctl_bucket_label(lin, 1, buf, sizeof(buf));
	assert_string_equal(buf, "[150, 200)");
	ktel_ctl_bucket_label(lin, 2, buf, sizeof(buf));
	assert_string_equal(buf, "[200, +Inf)");
	json_decref(lin);
	json_decref(h);
}

static char *render(void (*fn)(FILE *, const json_t *), const json_t *j)
{
	FILE *f = tmpfile();
	long len;
	char *out;

	assert_non_null(f);
	fn(f, j);
	len = ftell(f);
	rewind(f);
	out = calloc(1, (size_t)len + 1);
	assert_int_equal(fread(out, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	return out;
}

static void draw52(FILE *f, const json_t *h)
{
	ktel_ctl_draw_hist(f, h, 52);
}

static void test_draw_hist(void **state)
{
	json_t *h = log2_hist();
	char *out = render(draw52, h);
	char bar26[80], bar52[80];

	/* Only the non-empty range, bars scaled to the largest count. */
	snprintf(bar26, sizeof(bar26), "|%.*s%26s|", 26,
		 "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@", "");
	snprintf(bar52, sizeof(bar52), "|%.*s|", 52,
		 "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@");
	assert_non_null(strstr(out, "(256, 512]             12 "));
	assert_non_null(strstr(out, bar26));
	assert_non_null(strstr(out, "(512, 1K]              24 "));
	assert_non_null(strstr(out, bar52));
	assert_null(strstr(out, "(128, 256]"));
	assert_null(strstr(out, "(1K, 2K]"));
	free(out);
	json_decref(h);
}

static void render_list(FILE *f, const json_t *j)
{
	ktel_ctl_render(f, "list", j);
}

static void test_render_list(void **state)
{
	json_t *resp = json_pack("{s:b, s:[{s:s, s:s, s:b, s:s, s:i, s:s, s:i, s:n},"
				 " {s:s, s:s, s:b, s:s, s:i, s:n, s:i, s:s}]}",
				 "ok", 1, "metrics",
				 "name", "compaction_duration", "plugin", "compaction_duration",
				 "enabled", 1, "unit", "us", "interval_ms", 10000, "atom",
				 "CompactionDuration", "lease_ms", 0, "problem",
				 "name", "x", "plugin", "long_plugin_name", "enabled", 0, "unit",
				 "bytes", "interval_ms", 250, "atom", "lease_ms", 0, "problem",
				 "unsupported: tracepoint foo not in this kernel");
	char *out = render(render_list, resp), *l1, *l2, *l3;

	l1 = out;
	l2 = strchr(l1, '\n') + 1;
	l3 = strchr(l2, '\n') + 1;
	/* Columns line up: each header starts where its cells do. */
	assert_int_equal(strstr(l1, "STATE") - l1, strstr(l2, "enabled") - l2);
	assert_int_equal(strstr(l1, "STATE") - l1, strstr(l3, "unavailable") - l3);
	assert_int_equal(strstr(l1, "INTERVAL") - l1, strstr(l2, "10s") - l2);
	assert_int_equal(strstr(l1, "INTERVAL") - l1, strstr(l3, "250ms") - l3);
	assert_int_equal(strstr(l1, "NOTE") - l1, strstr(l3, "unsupported: tracepoint") - l3);
	assert_non_null(strstr(l3, " - "));
	free(out);
	json_decref(resp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_lines),
		cmocka_unit_test(test_split_lines_limit),
		cmocka_unit_test(test_split_lines_again),
		cmocka_unit_test(test_split_lines_stop),
		cmocka_unit_test(test_request_refusals),
		cmocka_unit_test(test_request_not_json),
		cmocka_unit_test(test_request_accepted),
		cmocka_unit_test(test_command_table),
		cmocka_unit_test(test_docs_match_table),
		cmocka_unit_test(test_answer_one_line),
		cmocka_unit_test(test_record_json),
		cmocka_unit_test(test_peer_check),
		cmocka_unit_test(test_peer_check_supplementary),
		cmocka_unit_test(test_inspect_builtin),
		cmocka_unit_test(test_inspect_unreadable),
		cmocka_unit_test(test_inspect_refused),
		cmocka_unit_test(test_bucket_labels),
		cmocka_unit_test(test_draw_hist),
		cmocka_unit_test(test_render_list),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
