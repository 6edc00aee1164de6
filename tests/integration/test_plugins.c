// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The metric plugins on the running kernel, through the real daemon:
 *
 *  - every built-in plugin loads and attaches, or reports unsupported with a
 *    reason, exactly as a table written for this kind of host says. Each
 *    entry also lists the kernel facts its outcome rests on (a tracepoint, a
 *    function, fentry permission, kprobe support), checked independently of
 *    the daemon, so a kernel that differs makes the test say what changed;
 *  - real events from tools/trigger reach the JSON sink for every metric this
 *    machine can trigger (compaction, memcg reclaim, run-queue latency, block
 *    I/O, OOM kill), each in a plausible bucket or under the right label,
 *    every latency record with a sum the bucket counts bound (hist_bounds.h);
 *  - the out-of-tree example plugin of docs/plugin-authoring.md builds against
 *    an install of this build tree and produces records;
 *  - a variant group falls back from an fentry program the kernel refuses to
 *    its tp_btf alternative (or keeps the fentry where it is allowed).
 *
 * Hermetic: own pin roots, files under the build tree, all removed at the end.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/param.h>
#include <sys/syscall.h>
#include <cmocka.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/filter.h>

#include "bpf_globals.h"
#include "bpf_lifecycle.h"
#include "ktel_test.h"
#include "daemon_harness.h"
#include "hist_bounds.h"
#include "loop_device.h"
#include "map_total.h"
#include "tracefs_oracle.h"

#define TRIGGER KTEL_SOURCE_DIR "/tools/trigger"
#define CTL_BIN KTEL_BINARY_DIR "/tools/ktelemetryctl"
#define COMPACTION_PIN "map_compaction_duration_compaction_duration_map"
#define EXAMPLE "signal_delivery_latency"
#define EXAMPLE_SRC KTEL_SOURCE_DIR "/docs/examples/" EXAMPLE
#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_FACTS 4
#define MAX_STRS 4

/* -------------------------------------------------------------------------
 * Facts about the kernel, checked without the daemon.
 */

enum fact_kind {
	FACT_TARGET, /* an attach target (an ELF section name) exists */
	FACT_FENTRY, /* the kernel lets root load an fentry program */
};

struct fact {
	enum fact_kind kind;
	const char *section; /* FACT_TARGET: e.g. "tp_btf/cma_alloc_start" */
	bool present;        /* on the host the table was written for */
	int nr_args;         /* FACT_TARGET and present: its argument count, -1 any */
};

static struct ktel_targets *targets;
/* The daemon a test of section (d) runs: killed by teardown if a check failed. */
static pid_t section_daemon = -1;
static int fentry_allowed = -1; /* -1 not probed yet */

/*
 * Can root load an fentry program here? Loads "return 0" as fentry on
 * vfs_read, a function every kernel has in BTF. Some kernels refuse every
 * fentry/fexit with EPERM (function tracing locked down); anything else
 * than success or EPERM is a failure of the test machine.
 */
static bool probe_fentry(void)
{
	struct bpf_insn insns[] = {
		{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
		{.code = BPF_JMP | BPF_EXIT},
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = BPF_TRACE_FENTRY);
	struct btf *vmlinux;
	int id, fd;

	if (fentry_allowed >= 0)
		return fentry_allowed;
	vmlinux = btf__load_vmlinux_btf();
	assert_non_null(vmlinux);
	id = btf__find_by_name_kind(vmlinux, "vfs_read", BTF_KIND_FUNC);
	btf__free(vmlinux);
	assert_true(id > 0);
	opts.attach_btf_id = id;
	fd = bpf_prog_load(BPF_PROG_TYPE_TRACING, "ktel_probe", "GPL", insns, 2, &opts);
	if (fd < 0 && fd != -EPERM)
		fail_msg("probing fentry on vfs_read failed with %s, neither loaded nor EPERM",
			 strerror(-fd));
	if (fd >= 0)
		close(fd);
	fentry_allowed = fd >= 0;
	return fentry_allowed;
}

/* Is the fact true on this kernel? Describes what was seen in buf. */
static bool fact_holds(const struct fact *f, char *buf, size_t len)
{
	int nr = -1, r;
	bool now;

	if (f->kind == FACT_FENTRY) {
		now = probe_fentry();
		snprintf(buf, len, "fentry programs are %s (host: %s)",
			 now ? "allowed" : "refused (EPERM)", f->present ? "allowed" : "refused");
		return now == f->present;
	}
	r = ktel_targets__check(targets, f->section, &nr, NULL, 0);
	now = r == 0;
	snprintf(buf, len, "%s: %s here", f->section, now ? "present" : "absent");
	if (now)
		snprintf(buf + strlen(buf), len - strlen(buf), " with %d args", nr);
	snprintf(buf + strlen(buf), len - strlen(buf), " (host: %s",
		 f->present ? "present" : "absent");
	if (f->present && f->nr_args >= 0)
		snprintf(buf + strlen(buf), len - strlen(buf), " with %d args", f->nr_args);
	snprintf(buf + strlen(buf), len - strlen(buf), ")");
	if (now != f->present)
		return false;
	return !now || f->nr_args < 0 || nr == f->nr_args;
}

/* -------------------------------------------------------------------------
 * (a) Every built-in plugin's outcome on this host.
 */

enum outcome {
	UNSUPPORTED, /* "metric X: not collected: unsupported: <reason>" */
	COLLECTING,  /* "metric X: collecting every N ms" (accumulators) */
	LOADED,      /* any other "metric X: " line: its programs loaded, what the
		      * daemon does with it (streams) is tested elsewhere */
};

static const char *const outcome_names[] = {"unsupported", "collecting", "loaded"};

struct expect {
	const char *metric;
	enum outcome outcome;
	/* supported: each must appear in the log (e.g. "program X skipped:
	 * ..." lines); unsupported: each must appear in the reason. */
	const char *strs[MAX_STRS];
	struct fact facts[MAX_FACTS];
};

#define TP(name, n)                                                                           \
	{                                                                                     \
		.kind = FACT_TARGET, .section = "tp_btf/" name, .present = true, .nr_args = n \
	}
#define NO_TP(name)                                                              \
	{                                                                        \
		.kind = FACT_TARGET, .section = "tp_btf/" name, .present = false \
	}
#define FN(name)                                                                               \
	{                                                                                      \
		.kind = FACT_TARGET, .section = "fentry/" name, .present = true, .nr_args = -1 \
	}
#define NO_KPROBE(name)                                                          \
	{                                                                        \
		.kind = FACT_TARGET, .section = "kprobe/" name, .present = false \
	}
#define NO_FENTRY                                     \
	{                                             \
		.kind = FACT_FENTRY, .present = false \
	}

/*
 * What this host (kernel 6.18, x86_64, no kprobes, no CMA, fentry refused)
 * gives. A new built-in plugin must get an entry here.
 */
static const struct expect builtins[] = {
	{"block_io_latency",
	 COLLECTING,
	 {NULL},
	 {TP("block_rq_issue", 1), TP("block_rq_complete", 3)}},
	{"cma_allocation_latency",
	 UNSUPPORTED,
	 {"tracepoint cma_alloc_start not in this kernel",
	  "tracepoint cma_alloc_finish not in this kernel",
	  "android_vh_cma_alloc_start not in this kernel"},
	 {NO_TP("cma_alloc_start"), NO_TP("cma_alloc_finish"), NO_TP("android_vh_cma_alloc_start"),
	  NO_TP("android_vh_cma_alloc_finish")}},
	{"compaction_duration",
	 COLLECTING,
	 {NULL},
	 {TP("mm_compaction_begin", -1), TP("mm_compaction_end", -1)}},
	{"direct_reclaim_latency",
	 COLLECTING,
	 {NULL},
	 {TP("mm_vmscan_direct_reclaim_begin", -1), TP("mm_vmscan_direct_reclaim_end", -1)}},
	{"dmabuf_request_sizes",
	 UNSUPPORTED,
	 {"tracepoint dma_buf_export not in this kernel",
	  "load refused by this kernel: prog 'dmabuf_export_fexit'",
	  "kprobes not supported by this kernel"},
	 {NO_TP("dma_buf_export"), FN("dma_buf_export"), NO_FENTRY, NO_KPROBE("dma_buf_export")}},
	{"kswapd_latency",
	 COLLECTING,
	 {"program kswapd_balance_enter skipped: kprobes not supported",
	  "program kswapd_balance_exit skipped: kprobes not supported"},
	 {TP("mm_vmscan_kswapd_wake", 3), TP("mm_vmscan_kswapd_sleep", 1),
	  NO_KPROBE("balance_pgdat")}},
	{"memcg_reclaim_latency",
	 COLLECTING,
	 {NULL},
	 {TP("mm_vmscan_memcg_reclaim_begin", -1), TP("mm_vmscan_memcg_reclaim_end", -1)}},
	{"oom_kills",
	 COLLECTING,
	 {"program oom_mark_victim_pid skipped: variant group oom_victim: oom_mark_victim_task",
	  "program oom_mark_victim_fentry skipped: variant group oom_victim: oom_mark_victim_task",
	  "program oom_mark_victim_kprobe skipped: kprobes not supported"},
	 {TP("mark_victim", 2), NO_KPROBE("mark_oom_victim")}},
	{"oom_events",
	 LOADED,
	 {"program oom_event_pid skipped: variant group oom_victim: oom_event_task",
	  "program oom_event_fentry skipped: variant group oom_victim: oom_event_task",
	  "program oom_event_kprobe skipped: kprobes not supported"},
	 {TP("mark_victim", 2), NO_KPROBE("mark_oom_victim")}},
	{"runq_latency",
	 COLLECTING,
	 {NULL},
	 {TP("sched_wakeup", -1), TP("sched_wakeup_new", -1), TP("sched_switch", 4)}},
	{"runq_stall_events",
	 LOADED,
	 {NULL},
	 {TP("sched_wakeup", -1), TP("sched_wakeup_new", -1), TP("sched_switch", 4)}},
	/* The tracepoint exists without suspend support: loads, never fires. */
	{"suspend_resume_latency", COLLECTING, {NULL}, {TP("suspend_resume", 3)}},
};

/* The daemon log, whole. */
static char *read_log(const struct sandbox *sb)
{
	FILE *f = fopen(sb->log, "r");
	char *buf = calloc(1, 1 << 20);
	size_t n;

	assert_non_null(f);
	assert_non_null(buf);
	n = fread(buf, 1, (1 << 20) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* The rest of the line after "ktelemetryd <level>: <prefix>", or NULL. */
static const char *log_line(const char *log, const char *prefix, char *buf, size_t len)
{
	const char *p = strstr(log, prefix), *end;

	if (!p)
		return NULL;
	p += strlen(prefix);
	end = strchr(p, '\n');
	snprintf(buf, len, "%.*s", (int)(end ? end - p : (long)strlen(p)), p);
	return buf;
}

static const struct expect *find_expect(const char *metric)
{
	for (size_t i = 0; i < N_ELEMS(builtins); i++)
		if (strcmp(builtins[i].metric, metric) == 0)
			return &builtins[i];
	return NULL;
}

/* Append to the report what differs between this kernel and the host. */
static void facts_report(const struct expect *e, char *out, size_t len)
{
	for (size_t i = 0; i < MAX_FACTS && (e->facts[i].section || e->facts[i].kind); i++) {
		char what[300];

		if (!fact_holds(&e->facts[i], what, sizeof(what)))
			snprintf(out + strlen(out), len - strlen(out), "\n    changed: %s", what);
	}
}

/*
 * Check one metric's outcome in the log against its entry. Returns false and
 * fills msg with what differs (and which kernel facts changed) otherwise.
 */
static bool check_outcome(const char *log, const struct expect *e, char *msg, size_t len)
{
	char prefix[160], line[2048], said[2048];
	enum outcome got;

	msg[0] = '\0';
	snprintf(prefix, sizeof(prefix), "info: metric %s: ", e->metric);
	if (!log_line(log, prefix, said, sizeof(said))) {
		snprintf(msg, len, "%s: the daemon says nothing about it", e->metric);
		return false;
	}
	if (strncmp(said, "collecting every", 16) == 0)
		got = COLLECTING;
	else if (strncmp(said, "not collected: unsupported: ", 28) == 0)
		got = UNSUPPORTED;
	else
		got = LOADED;
	/* A plugin whose every program is off also says so as a plugin. */
	snprintf(prefix, sizeof(prefix), "info: plugin %s: unsupported: ", e->metric);
	if (got == LOADED && log_line(log, prefix, line, sizeof(line)))
		got = UNSUPPORTED;
	if (got != e->outcome && !(e->outcome == LOADED && got == COLLECTING)) {
		snprintf(msg, len, "%s: expected %s on this kind of host, the daemon says \"%s\"",
			 e->metric, outcome_names[e->outcome], said);
		facts_report(e, msg, len);
		if (!strstr(msg, "changed:"))
			snprintf(msg + strlen(msg), len - strlen(msg),
				 "\n    (no listed kernel fact changed: the plugin or the loader did)");
		return false;
	}
	for (size_t i = 0; i < MAX_STRS && e->strs[i]; i++) {
		if (got != UNSUPPORTED ? strstr(log, e->strs[i]) != NULL
				       : strstr(said, e->strs[i]) != NULL)
			continue;
		snprintf(msg, len, "%s: %s lacks \"%s\"", e->metric,
			 got != UNSUPPORTED ? "the log" : "the unsupported reason", e->strs[i]);
		facts_report(e, msg, len);
		return false;
	}
	/* Attach failures are warnings naming the metric. */
	snprintf(prefix, sizeof(prefix), "warn: metric %s: ", e->metric);
	if (log_line(log, prefix, line, sizeof(line))) {
		snprintf(msg, len, "%s: a program failed to attach: %s", e->metric, line);
		return false;
	}
	return true;
}

static void test_builtin_outcomes(void **state)
{
	char msg[4096], all[16384] = "";
	struct sandbox sb;
	size_t bad = 0;
	const char *p;
	char *log;
	pid_t pid;
	int rc;

	sandbox_init(&sb, "plugins-outcomes");
	sandbox_write_config(&sb, KTEL_PLUGIN_DIR, "60s", "");
	pid = daemon_start(&sb, "--once", "0", NULL);
	rc = daemon_wait(pid, 60);
	if (rc != 0)
		dump_log(&sb);
	assert_int_equal(rc, 0);
	log = read_log(&sb);

	/* Every metric the daemon talks about has an entry ... */
	for (p = log; (p = strstr(p, "info: metric ")); p++) {
		char name[128];

		if (sscanf(p, "info: metric %127[a-z0-9_]:", name) != 1)
			continue;
		if (!find_expect(name)) {
			snprintf(all + strlen(all), sizeof(all) - strlen(all),
				 "\n  %s: no entry in the table of expected outcomes", name);
			bad++;
		}
	}
	/* ... and every entry's outcome is as the host says. */
	for (size_t i = 0; i < N_ELEMS(builtins); i++) {
		if (check_outcome(log, &builtins[i], msg, sizeof(msg))) {
			printf("ok %s: %s\n", builtins[i].metric,
			       outcome_names[builtins[i].outcome]);
			continue;
		}
		snprintf(all + strlen(all), sizeof(all) - strlen(all), "\n  %s", msg);
		bad++;
	}
	free(log);
	if (bad) {
		dump_log(&sb);
		fail_msg("%zu plugin outcome(s) differ from this host's table:%s", bad, all);
	}
	sandbox_cleanup(&sb);
}

/* The facts themselves: a wrong table entry shows here even when the daemon
 * agrees with it by accident. */
static void test_host_facts(void **state)
{
	char what[300], all[8192] = "";
	size_t bad = 0;

	for (size_t i = 0; i < N_ELEMS(builtins); i++)
		for (size_t j = 0; j < MAX_FACTS; j++) {
			const struct fact *f = &builtins[i].facts[j];

			if (!f->section && f->kind != FACT_FENTRY)
				break;
			if (fact_holds(f, what, sizeof(what)))
				continue;
			snprintf(all + strlen(all), sizeof(all) - strlen(all), "\n  %s: %s",
				 builtins[i].metric, what);
			bad++;
		}
	if (bad)
		fail_msg("this kernel differs from the host the outcome table was written for "
			 "(update the table if the new outcomes are right):%s",
			 all);
}

/* -------------------------------------------------------------------------
 * (b) Real events through the daemon.
 */

/* A JSON record of metric whose dims match every "name=value" in want. */
typedef bool (*record_fn)(json_t *rec, void *ctx);

/* Call fn on every record of metric in the sink output; returns how many. */
static size_t each_record(const struct sandbox *sb, const char *metric, record_fn fn, void *ctx)
{
	FILE *f = fopen(sb->out, "r");
	char *line = NULL;
	size_t cap = 0, n = 0;

	if (!f)
		return 0;
	while (getline(&line, &cap, f) > 0) {
		json_t *rec = json_loads(line, 0, NULL);

		assert_non_null(rec); /* every line parses */
		if (strcmp(json_string_value(json_object_get(rec, "metric")) ?: "", metric) == 0) {
			n++;
			if (fn)
				fn(rec, ctx);
		}
		json_decref(rec);
	}
	free(line);
	fclose(f);
	return n;
}

/* Histogram counts of a record, summed from bucket `from` on. */
static uint64_t counts_from(json_t *rec, size_t from)
{
	json_t *counts = json_object_get(json_object_get(rec, "histogram"), "counts"), *c;
	uint64_t sum = 0;
	size_t i;

	json_array_foreach(counts, i, c)
		if (i >= from)
			sum += (uint64_t)json_integer_value(c);
	return sum;
}

static const char *dim_label(json_t *rec, const char *dim)
{
	return json_string_value(json_object_get(json_object_get(rec, "dims"), dim));
}

static json_int_t dim_int(json_t *rec, const char *dim)
{
	return json_integer_value(json_object_get(json_object_get(rec, "dims"), dim));
}

/*
 * Start a daemon on the plugins of plugin_dir in the (initialised) sandbox,
 * pulling only at exit; wait until it collects metric.
 */
static pid_t start_collecting(struct sandbox *sb, const char *plugin_dir, const char *metric)
{
	char line[200];
	pid_t pid;

	sandbox_write_config(sb, plugin_dir, "60s", "");
	pid = daemon_start(sb, NULL);
	snprintf(line, sizeof(line), "metric %s: collecting", metric);
	if (!log_wait_for(sb, line, 30)) {
		dump_log(sb);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		fail_msg("daemon did not start collecting %s", metric);
	}
	return pid;
}

/* SIGTERM: the daemon pulls a last time and flushes its sinks. */
static void stop_collecting(struct sandbox *sb, pid_t pid)
{
	int rc;

	kill(pid, SIGTERM);
	rc = daemon_wait(pid, 30);
	if (pid == section_daemon)
		section_daemon = -1; /* reaped */
	if (rc != 0)
		dump_log(sb);
	assert_int_equal(rc, 0);
}

/*
 * Run tools/trigger with args, oom_score_adj adj, scratch files in the
 * sandbox; return its stdout's first line in out. Fails the test when the
 * trigger fails: every trigger here works on this kind of machine.
 */
static void run_trigger(const struct sandbox *sb, const char *args, int adj, char *out, size_t len)
{
	char cmd[1024], buf[256] = "";
	FILE *p;
	int rc;

	snprintf(cmd, sizeof(cmd),
		 "echo %d >/proc/self/oom_score_adj && KTEL_TRIGGER_DIR='%s' exec %s %s", adj,
		 sb->dir, TRIGGER, args);
	p = popen(cmd, "r");
	assert_non_null(p);
	if (!fgets(buf, sizeof(buf), p))
		buf[0] = '\0';
	while (fgetc(p) != EOF)
		;
	rc = pclose(p);
	buf[strcspn(buf, "\n")] = '\0';
	if (rc != 0)
		fail_msg("tools/trigger %s failed (status %d)", args, rc);
	if (out)
		snprintf(out, len, "%s", buf);
}

static bool print_record(json_t *rec, void *ctx)
{
	char *text = json_dumps(rec, JSON_COMPACT);

	(void)ctx;
	printf("  %s\n", text ? text : "(unprintable)");
	free(text);
	return true;
}

/*
 * The record's sum (in its unit, like the buckets), which every built-in
 * latency histogram carries; fails the test when it is missing or the
 * counts rule it out.
 */
static uint64_t record_sum(json_t *rec)
{
	json_t *h = json_object_get(rec, "histogram"), *c;
	json_t *sum = json_object_get(h, "sum");
	uint64_t counts[HIST_BOUNDS_BUCKETS] = {0};
	char why[200];
	size_t k;

	if (!json_is_integer(sum) || json_integer_value(sum) < 0) {
		print_record(rec, NULL);
		fail_msg("%s: a histogram record without a sum",
			 json_string_value(json_object_get(rec, "metric")));
	}
	json_array_foreach(json_object_get(h, "counts"), k, c)
		if (k < HIST_BOUNDS_BUCKETS)
			counts[k] = (uint64_t)json_integer_value(c);
	if (!hist_sum_consistent(counts, HIST_BOUNDS_BUCKETS, (uint64_t)json_integer_value(sum),
				 why, sizeof(why))) {
		print_record(rec, NULL);
		fail_msg("%s: %s", json_string_value(json_object_get(rec, "metric")), why);
	}
	return (uint64_t)json_integer_value(sum);
}

struct hist_sum {
	const char *label_dim;        /* only records whose dim has this label ... */
	const char *label;            /* ... (NULL: all records) */
	size_t from;                  /* high: buckets summed from here */
	uint64_t total, above0, high; /* all counts, in buckets >= 1, >= from */
	uint64_t sum;                 /* the records' sums */
};

static bool add_hist(json_t *rec, void *ctx)
{
	struct hist_sum *h = ctx;

	if (h->label && strcmp(dim_label(rec, h->label_dim) ?: "", h->label) != 0)
		return false;
	h->sum += record_sum(rec);
	h->total += counts_from(rec, 0);
	h->above0 += counts_from(rec, 1);
	h->high += counts_from(rec, h->from);
	return true;
}

static void test_compaction_events(void **state)
{
	struct hist_sum h = {0};
	struct sandbox sb;
	pid_t pid;

	sandbox_init(&sb, "plugins-compaction");
	pid = start_collecting(&sb, KTEL_PLUGIN_DIR, "compaction_duration");

	run_trigger(&sb, "compaction", 0, NULL, 0);
	stop_collecting(&sb, pid);
	each_record(&sb, "compaction_duration", add_hist, &h);
	printf("compaction_duration: %llu compactions, %llu us in all\n",
	       (unsigned long long)h.total, (unsigned long long)h.sum);
	assert_true(h.total >= 1);
	sandbox_cleanup(&sb);
}

static void test_memcg_reclaim_events(void **state)
{
	struct hist_sum fg = {.label_dim = "process_state", .label = "STATE_FOREGROUND"};
	struct sandbox sb;
	pid_t pid;

	sandbox_init(&sb, "plugins-memcg");
	pid = start_collecting(&sb, KTEL_PLUGIN_DIR, "memcg_reclaim_latency");

	/* oom_score_adj 0 is STATE_FOREGROUND: dd reclaims as a foreground task. */
	run_trigger(&sb, "memcg-reclaim 64", 0, NULL, 0);
	stop_collecting(&sb, pid);
	each_record(&sb, "memcg_reclaim_latency", add_hist, &fg);
	printf("memcg_reclaim_latency: %llu foreground reclaims, %llu us in all\n",
	       (unsigned long long)fg.total, (unsigned long long)fg.sum);
	assert_true(fg.total >= 1);
	sandbox_cleanup(&sb);
}

static void test_runq_events(void **state)
{
	/* Bucket 9 is (256, 512] us. With 2n+1 CPU-bound threads on n CPUs a
	 * runnable thread waits for others' slices (0.7 ms or more on
	 * EEVDF/CFS defaults), so waits above 256 us must show. */
	struct hist_sum h = {.from = 9};
	struct sandbox sb;
	pid_t pid;

	sandbox_init(&sb, "plugins-runq");
	pid = start_collecting(&sb, KTEL_PLUGIN_DIR, "runq_latency");

	run_trigger(&sb, "runq 2", 0, NULL, 0);
	stop_collecting(&sb, pid);
	each_record(&sb, "runq_latency", add_hist, &h);
	printf("runq_latency: %llu waits, %llu above 1 us, %llu above 256 us, %llu us in all\n",
	       (unsigned long long)h.total, (unsigned long long)h.above0,
	       (unsigned long long)h.high, (unsigned long long)h.sum);
	assert_true(h.above0 >= 1);
	assert_true(h.high >= 1);
	sandbox_cleanup(&sb);
}

struct blockio {
	long major, minor;
	uint64_t reads, writes; /* counts in buckets >= 3 (> 4 us) */
	uint64_t low;           /* counts in buckets 0..2 */
};

static bool add_blockio(json_t *rec, void *ctx)
{
	struct blockio *b = ctx;
	const char *op = dim_label(rec, "operation") ?: "";
	uint64_t high = counts_from(rec, 3);

	if (dim_int(rec, "major") != b->major || dim_int(rec, "minor") != b->minor)
		return false;
	record_sum(rec);
	if (strcmp(op, "read") == 0)
		b->reads += high;
	else if (strcmp(op, "write") == 0)
		b->writes += high;
	b->low += counts_from(rec, 0) - high;
	return true;
}

/* Requests of 512 that may go unseen before the test fails (see below). */
#define BLOCKIO_TOLERATED_LOSS 4

static void test_blockio_events(void **state)
{
	struct blockio b = {0};
	struct sandbox sb;
	char majmin[64];
	pid_t pid;

	sandbox_init(&sb, "plugins-blockio");
	pid = start_collecting(&sb, KTEL_PLUGIN_DIR, "block_io_latency");

	/* 32 MiB of O_DIRECT 64 KiB writes, then reads: 512 requests each way
	 * on the loop device, issued one at a time, so none merge. */
	run_trigger(&sb, "blockio 32", 0, majmin, sizeof(majmin));
	stop_collecting(&sb, pid);
	assert_int_equal(sscanf(majmin, "%ld:%ld", &b.major, &b.minor), 2);
	each_record(&sb, "block_io_latency", add_blockio, &b);
	printf("block_io_latency %s: %llu reads and %llu writes above 4 us, %llu below\n", majmin,
	       (unsigned long long)b.reads, (unsigned long long)b.writes,
	       (unsigned long long)b.low);
	/*
	 * Tracing gives no delivery guarantee: the kernel skips a program that
	 * would nest in itself on one CPU, and a map update can fail under
	 * lock contention. One CI run under ASan saw 511 of 512 reads. A few
	 * such losses are tolerated and shown; a wrong device, operation or
	 * start/completion pairing loses far more than that.
	 */
	if (b.reads < 512 || b.writes < 512) {
		printf("block_io_latency: %llu reads and %llu writes missing; every record:\n",
		       (unsigned long long)(512 - MIN(b.reads, 512)),
		       (unsigned long long)(512 - MIN(b.writes, 512)));
		each_record(&sb, "block_io_latency", print_record, NULL);
		each_record(&sb, "ktel_prog_recursion_misses", print_record, NULL);
	}
	assert_true(b.reads >= 512 - BLOCKIO_TOLERATED_LOSS);
	assert_true(b.writes >= 512 - BLOCKIO_TOLERATED_LOSS);
	sandbox_cleanup(&sb);
}

struct oom_count {
	const char *label;
	uint64_t victims, others;
};

static bool add_oom(json_t *rec, void *ctx)
{
	struct oom_count *o = ctx;
	uint64_t v = (uint64_t)json_integer_value(json_object_get(rec, "value"));

	if (strcmp(dim_label(rec, "process_state") ?: "", o->label) == 0)
		o->victims += v;
	else
		o->others += v;
	return true;
}

/* oom_events stream: events about one victim pid, and the reader's counters. */
struct oom_stream {
	long victim;
	unsigned events;          /* event records for the victim */
	char comm[32], state[32]; /* of the last such event */
	uint64_t delivered;       /* ktel_stream_delivered totals, summed */
};

static bool add_oom_event(json_t *rec, void *ctx)
{
	struct oom_stream *o = ctx;
	json_t *fields = json_object_get(rec, "fields");

	if (json_integer_value(json_object_get(fields, "pid")) != o->victim)
		return false;
	o->events++;
	snprintf(o->comm, sizeof(o->comm), "%s",
		 json_string_value(json_object_get(fields, "comm")) ?: "");
	snprintf(o->state, sizeof(o->state), "%s",
		 json_string_value(json_object_get(fields, "process_state")) ?: "");
	return true;
}

static bool add_stream_delivered(json_t *rec, void *ctx)
{
	struct oom_stream *o = ctx;

	if (strcmp(dim_label(rec, "metric") ?: "", "oom_events") != 0)
		return false;
	o->delivered += (uint64_t)json_integer_value(json_object_get(rec, "value"));
	return true;
}

static void test_oom_events(void **state)
{
	/* oom_score_adj 250 is STATE_PERCEPTIBLE (200 <= adj < 300): no
	 * ordinary process has it, so the count is the trigger's victim. */
	struct oom_count o = {.label = "STATE_PERCEPTIBLE"};
	struct oom_stream ev = {0};
	struct sandbox sb;
	char victim[32];
	pid_t pid;

	/* One daemon runs both models on the same kill: the oom_kills
	 * accumulator and the oom_events ring-buffer stream. */
	sandbox_init(&sb, "plugins-oom");
	pid = start_collecting(&sb, KTEL_PLUGIN_DIR, "oom_kills");
	if (!log_wait_for(&sb, "metric oom_events: collecting", 30)) {
		dump_log(&sb);
		fail_msg("daemon did not start collecting oom_events");
	}

	run_trigger(&sb, "oom 250", 0, victim, sizeof(victim));
	stop_collecting(&sb, pid);
	each_record(&sb, "oom_kills", add_oom, &o);
	printf("oom_kills: victim %s counted %llu time(s) as %s, %llu other kill(s)\n", victim,
	       (unsigned long long)o.victims, o.label, (unsigned long long)o.others);
	assert_int_equal(o.victims, 1);

	/* The trigger's victim is a shell that execs tail: pid and comm. */
	ev.victim = strtol(victim, NULL, 10);
	each_record(&sb, "oom_events", add_oom_event, &ev);
	each_record(&sb, "ktel_stream_delivered", add_stream_delivered, &ev);
	printf("oom_events: %u event(s) for pid %ld, comm \"%s\", %s; %llu delivered in all\n",
	       ev.events, ev.victim, ev.comm, ev.state, (unsigned long long)ev.delivered);
	assert_int_equal(ev.events, 1);
	assert_string_equal(ev.comm, "tail");
	assert_string_equal(ev.state, "STATE_PERCEPTIBLE");
	assert_true(ev.delivered >= 1);
	sandbox_cleanup(&sb);
}

/* -------------------------------------------------------------------------
 * (c) The out-of-tree example plugin of docs/plugin-authoring.md.
 */

/* Does file contain text? */
static bool file_contains(const char *path, const char *text)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = fopen(path, "r");
	bool found;

	if (!f)
		return false;
	found = getdelim(&buf, &len, '\0', f) > 0 && strstr(buf, text);
	free(buf);
	fclose(f);
	return found;
}

static void sigusr2_handler(int sig)
{
	(void)sig;
}

#define SIGNAL_ROUNDS 5
#define SIGNAL_HOLD_US 20000

/*
 * A child holds SIGUSR2 blocked for SIGNAL_HOLD_US after each one the parent
 * sends, then takes it: each delivery waits at least 20 ms.
 */
static void send_held_signals(void)
{
	int go[2], ack[2];
	pid_t child;
	char c = 0;

	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(ack), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		sigset_t set;

		signal(SIGUSR2, sigusr2_handler);
		sigemptyset(&set);
		sigaddset(&set, SIGUSR2);
		sigprocmask(SIG_BLOCK, &set, NULL);
		if (write(ack[1], &c, 1) != 1)
			_exit(1);
		for (int i = 0; i < SIGNAL_ROUNDS; i++) {
			if (read(go[0], &c, 1) != 1)
				_exit(1);
			usleep(SIGNAL_HOLD_US);
			sigprocmask(SIG_UNBLOCK, &set, NULL); /* the handler runs here */
			sigprocmask(SIG_BLOCK, &set, NULL);
			if (write(ack[1], &c, 1) != 1)
				_exit(1);
		}
		_exit(0);
	}
	assert_int_equal(read(ack[0], &c, 1), 1);
	for (int i = 0; i < SIGNAL_ROUNDS; i++) {
		assert_int_equal(kill(child, SIGUSR2), 0);
		assert_int_equal(write(go[1], &c, 1), 1);
		assert_int_equal(read(ack[0], &c, 1), 1);
	}
	assert_int_equal(daemon_wait(child, 10), 0);
	close(go[0]);
	close(go[1]);
	close(ack[0]);
	close(ack[1]);
}

struct signal_sum {
	uint64_t usr2, held; /* SIGUSR2 deliveries, those in buckets >= 15 */
};

static bool add_signal(json_t *rec, void *ctx)
{
	struct signal_sum *s = ctx;

	if (dim_int(rec, "signal") != SIGUSR2)
		return false;
	record_sum(rec); /* the guide's program keeps the sum */
	s->usr2 += counts_from(rec, 0);
	s->held += counts_from(rec, 15); /* bucket 15 is (16384, 32768] us */
	return true;
}

static void test_example_plugin(void **state)
{
	char prefix[700], ex[700], plugins[700], path[800];
	struct signal_sum s = {0};
	struct sandbox sb;
	pid_t pid;

	sandbox_init(&sb, "plugins-example");
	snprintf(prefix, sizeof(prefix), "%s/prefix", sb.dir);
	snprintf(ex, sizeof(ex), "%s/ex", sb.dir);
	snprintf(plugins, sizeof(plugins), "%s/plugins", sb.dir);

	/* The SDK alone, into a fresh prefix. */
	assert_int_equal(ktel_test_run("cmake --install '%s' --prefix '%s' --component dev >/dev/null",
				       KTEL_BINARY_DIR, prefix),
			 0);
	assert_int_equal(
		ktel_test_run("cmake -S '%s' -B '%s' -DCMAKE_PREFIX_PATH='%s' >'%s/configure.log'",
			      EXAMPLE_SRC, ex, prefix, sb.dir),
		0);
	assert_int_equal(ktel_test_run("cmake --build '%s' >'%s/build.log'", ex, sb.dir), 0);

	/* It was built from the installed files, not from this source tree. */
	snprintf(path, sizeof(path), "%s/CMakeCache.txt", ex);
	assert_true(file_contains(path, "ktelemetry_DIR:PATH="));
	assert_true(file_contains(path, prefix));
	snprintf(path, sizeof(path), "%s/CMakeFiles/" EXAMPLE ".dir/build.make", ex);
	assert_true(file_contains(path, "/include/ktelemetry/bpf"));
	assert_false(file_contains(path, KTEL_SOURCE_DIR "/bpf/include"));
	snprintf(path, sizeof(path), "%s/CMakeFiles/" EXAMPLE ".dir/flags.make", ex);
	assert_true(file_contains(path, prefix));
	assert_false(file_contains(path, KTEL_SOURCE_DIR "/core/include"));

	/* Dropped into a root-owned plugin directory, as the guide says. */
	assert_int_equal(mkdir(plugins, 0755), 0);
	assert_int_equal(chmod(plugins, 0755), 0);
	assert_int_equal(ktel_test_run("install -m 0644 '%s/" EXAMPLE ".so' '%s/'", ex, plugins),
			 0);

	pid = start_collecting(&sb, plugins, EXAMPLE);
	send_held_signals();
	stop_collecting(&sb, pid);
	each_record(&sb, EXAMPLE, add_signal, &s);
	printf(EXAMPLE ": %llu SIGUSR2 deliveries, %llu after more than 16 ms\n",
	       (unsigned long long)s.usr2, (unsigned long long)s.held);
	assert_true(s.held >= SIGNAL_ROUNDS);
	sandbox_cleanup(&sb);
}

/*
 * Plugin code never runs in the daemon or in inspect (a plugin is data): the
 * fixture's ELF constructor would create the marker its environment names.
 * Both read the plugin, it still loads and collects, and no marker appears.
 */
static bool add_counts(json_t *rec, void *ctx)
{
	*(uint64_t *)ctx += counts_from(rec, 0);
	return true;
}

static void test_constructor_never_runs(void **state)
{
	char plugins[700], marker[700], so[800];
	struct sandbox sb;
	uint64_t events = 0;
	pid_t pid;

	sandbox_init(&sb, "plugins-constructor");
	snprintf(plugins, sizeof(plugins), "%s/plugins", sb.dir);
	snprintf(marker, sizeof(marker), "%s/constructor-ran", sb.dir);
	snprintf(so, sizeof(so), "%s/fx_constructor.so", plugins);
	assert_int_equal(mkdir(plugins, 0755), 0);
	assert_int_equal(chmod(plugins, 0755), 0);
	assert_int_equal(ktel_test_run("install -m 0644 '%s/fx_constructor.so' '%s/'",
				       KTEL_TEST_PLUGIN_DIR, plugins),
			 0);
	assert_int_equal(setenv("KTEL_FX_CONSTRUCTOR_MARKER", marker, 1), 0);

	assert_int_equal(ktel_test_run("'%s/tools/ktelemetryctl' inspect '%s' >'%s/inspect.json'",
				       KTEL_BINARY_DIR, so, sb.dir),
			 0);
	assert_int_equal(access(marker, F_OK), -1);

	pid = start_collecting(&sb, plugins, "fx_constructor");
	usleep(100 * 1000);
	stop_collecting(&sb, pid);
	unsetenv("KTEL_FX_CONSTRUCTOR_MARKER");
	assert_true(each_record(&sb, "fx_constructor", add_counts, &events) > 0);
	printf("fx_constructor: %llu syscalls counted, constructor never ran\n",
	       (unsigned long long)events);
	assert_true(events > 0);
	assert_int_equal(access(marker, F_OK), -1);
	sandbox_cleanup(&sb);
}

/* -------------------------------------------------------------------------
 * (2) An fentry variant the kernel refuses falls back to tp_btf.
 */

/*
 * ktel_bpf_global_u64 reads the live ktel_invalid_durations of a loaded
 * object: the fixture's .bss holds only the header's u64 counters, so a
 * value written to the kernel's map in every one of its u64 slots must come
 * back, wherever the compiler placed that counter.
 */
static void check_invalid_durations_global(const struct bpf_object *obj)
{
	uint64_t want = 0x5eed0000ULL, got = 0, slots[16];
	struct bpf_map *map, *bss = NULL;
	uint32_t zero = 0;
	size_t size;

	bpf_object__for_each_map(map, obj) {
		const char *name = bpf_map__name(map);

		if (bpf_map__is_internal(map) && strstr(name, ".bss"))
			bss = map;
	}
	assert_non_null(bss);
	size = bpf_map__value_size(bss);
	assert_true(size >= sizeof(uint64_t) && size <= sizeof(slots) &&
		    size % sizeof(uint64_t) == 0);
	assert_int_equal(ktel_bpf_global_u64(obj, "ktel_invalid_durations", &got), 0);
	assert_true(got == 0);
	for (size_t i = 0; i < size / sizeof(uint64_t); i++)
		slots[i] = want;
	assert_int_equal(bpf_map_update_elem(bpf_map__fd(bss), &zero, slots, BPF_ANY), 0);
	assert_int_equal(ktel_bpf_global_u64(obj, "ktel_invalid_durations", &got), 0);
	assert_true(got == want);
	assert_int_equal(ktel_bpf_global_u64(obj, "no_such_global", &got), -ENOENT);
}

static void test_refused_variant(void **state)
{
	struct ktel_bpf_opts opts = {.pin_gid = (gid_t)-1};
	struct ktel_bpf_prog *fentry, *tp, *chosen, *other;
	int64_t params[2] = {getpid(), SYS_read};
	struct ktel_bpf_plugin *bp = NULL;
	struct ktel_plugin *plugin = NULL;
	struct accumulator_value {
		uint64_t buckets[32];
	} v;
	struct ktel_err err = {0};
	char pin_root[256], buf[16];
	bool allowed = probe_fentry();
	uint32_t key = 0;
	int fd;

	if (access("/sys/fs/bpf", F_OK) == 0 && system("mountpoint -q /sys/fs/bpf") != 0)
		(void)system("mount -t bpf bpf /sys/fs/bpf");
	snprintf(pin_root, sizeof(pin_root), "/sys/fs/bpf/ktel-test-refused-%d", getpid());
	ktel_test_rm_rf(pin_root);
	assert_int_equal(mkdir(pin_root, 0750), 0);
	if (ktel_plugin__open(KTEL_TEST_PLUGIN_DIR "/fx_refused_variant.so", &plugin, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(plugin->desc.n_params, 2);
	opts.pin_root = pin_root;
	opts.targets = targets;
	opts.param_values = params;
	if (ktel_bpf_plugin__load(plugin, &opts, &bp, &err))
		fail_msg("%s", err.msg);
	fentry = ktel_bpf_plugin__prog(bp, "fx_refused_fentry");
	tp = ktel_bpf_plugin__prog(bp, "fx_refused_tp");
	assert_non_null(fentry);
	assert_non_null(tp);
	assert_false(bp->unsupported);
	printf("fentry %s here: fx_refused_fentry %s (%s), fx_refused_tp %s (%s)\n",
	       allowed ? "allowed" : "refused", fentry->selected ? "selected" : "skipped",
	       fentry->skip_reason, tp->selected ? "selected" : "skipped", tp->skip_reason);
	chosen = allowed ? fentry : tp;
	other = allowed ? tp : fentry;
	assert_true(chosen->selected);
	assert_true(chosen->attached);
	assert_false(other->selected);
	if (allowed)
		assert_non_null(strstr(other->skip_reason, "variant group read"));
	else
		assert_non_null(strstr(other->skip_reason, "load refused"));

	/* The selected variant runs: it counts this process's reads. */
	fd = open("/dev/zero", O_RDONLY);
	assert_true(fd >= 0);
	for (int i = 0; i < 10; i++)
		assert_int_equal(syscall(SYS_read, fd, buf, sizeof(buf)), (long)sizeof(buf));
	close(fd);
	assert_non_null(ktel_bpf_plugin__map(bp, "fx_refused_map"));
	assert_int_equal(bpf_map_lookup_elem(ktel_bpf_plugin__map(bp, "fx_refused_map")->fd, &key,
					     &v),
			 0);
	printf("fx_refused_map: %llu reads counted\n", (unsigned long long)v.buckets[0]);
	assert_true(v.buckets[0] >= 10);
	check_invalid_durations_global(bp->obj);

	ktel_bpf_plugin__unpin(bp, &err);
	ktel_bpf_plugin__free(bp);
	ktel_plugin__free(plugin);
	ktel_test_rm_rf(pin_root);
}

/* How block_io_latency is loaded: attribution off, by cgroup with the
 * submit programs (the io controller not on cgroup v2, as on a hybrid
 * host), by cgroup from the bio's cgroup (ktel_bpf_attr.blkcg forced). */
enum block_mode {
	BLOCK_OFF,
	BLOCK_SUBMIT,
	BLOCK_BIO,
};

/*
 * In a child moved into a new cgroup at level 2 of the v1 blkio hierarchy,
 * read dev with O_DIRECT n times; return the id (its directory's inode) of
 * that cgroup, or of its parent at level 1 for depth 1, or 0 when the host
 * has no v1 blkio hierarchy (nothing read then).
 */
static uint64_t reads_in_v1_blkcg(const char *dev, int n, uint32_t depth)
{
	char dir[128], sub[160], procs[192];
	struct stat st, st_sub;
	pid_t pid;
	int status;

	if (access("/sys/fs/cgroup/blkio/cgroup.procs", W_OK) != 0)
		return 0;
	snprintf(dir, sizeof(dir), "/sys/fs/cgroup/blkio/ktel-test-blkcg-%d", getpid());
	snprintf(sub, sizeof(sub), "%s/sub", dir);
	assert_int_equal(mkdir(dir, 0755), 0);
	assert_int_equal(mkdir(sub, 0755), 0);
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(stat(sub, &st_sub), 0);
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", sub);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		void *buf = NULL;
		FILE *f = fopen(procs, "w");
		int fd, bad = 0;

		if (!f || fprintf(f, "%d\n", getpid()) < 0 || fclose(f) != 0)
			_exit(2);
		fd = open(dev, O_RDONLY | O_DIRECT);
		if (fd < 0 || posix_memalign(&buf, 4096, 4096))
			_exit(3);
		for (int i = 0; i < n; i++)
			bad |= pread(fd, buf, 4096, (off_t)i * 4096) != 4096;
		_exit(bad ? 4 : 0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(rmdir(sub), 0);
	assert_int_equal(rmdir(dir), 0);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	return (uint64_t)(depth == 1 ? st.st_ino : st_sub.st_ino);
}

/*
 * With the bio's cgroup read (BLOCK_BIO forced on this host, where the io
 * controller is on v1): the reads of a child in a v1 blkio cgroup must be
 * counted, all of them, under that cgroup's id (its parent's at depth 1),
 * which only bio->bi_blkg holds (the child's v2 cgroup is another). Proves
 * block_issue reads the bio, not the task, and rolls it up. Other keys of
 * the device are udev's probe of it.
 */
static void check_bio_attr(struct ktel_bpf_plugin *bp, const char *dir, uint32_t depth)
{
	struct ktel_test_loop loop = {0};
	struct ktel_bpf_map *m = ktel_bpf_plugin__map(bp, "block_io_latency_map");
	struct {
		uint32_t major, minor, op, pad;
		uint64_t attr;
	} key, next;
	uint64_t id, seen = 0, others = 0, count = 0, value[HIST_BOUNDS_BUCKETS + 1];
	int rc;

	assert_non_null(m);
	ktel_test_loop_attach(&loop, dir, 8);
	id = reads_in_v1_blkcg(loop.dev, 16, depth);
	ktel_test_loop_detach(&loop);
	if (!id) {
		printf("no v1 blkio hierarchy here: the bio's cgroup id is not checked\n");
		return;
	}
	for (rc = bpf_map_get_next_key(m->fd, NULL, &next); !rc;
	     rc = bpf_map_get_next_key(m->fd, &key, &next)) {
		key = next;
		if (key.major != loop.major || key.minor != loop.minor || key.op != 0)
			continue;
		if (key.attr != id) {
			others++;
			continue;
		}
		seen++;
		assert_int_equal(bpf_map_lookup_elem(m->fd, &key, value), 0);
		for (int b = 0; b < HIST_BOUNDS_BUCKETS; b++)
			count += value[b];
	}
	printf("bio mode: loop reads keyed by the v1 blkcg %llu: %llu keys, %llu reads; "
	       "other keys %llu\n",
	       (unsigned long long)id, (unsigned long long)seen, (unsigned long long)count,
	       (unsigned long long)others);
	assert_int_equal(seen, 1);
	assert_int_equal(count, 16);
}

/*
 * Load block_io_latency in each mode (by cgroup rolled up to depth): the submit programs (desc.attr_progs)
 * are loaded and attached only by cgroup without the bio's cgroup; with
 * attribution off or the bio's cgroup read they are not loaded, the metric
 * is complete without them, and the plugin is not reported unsupported.
 */
static void load_block(enum block_mode mode, uint32_t depth)
{
	static const char *const names[] = {"off", "submit", "bio"};
	struct ktel_bpf_attr attr = {.metric = "block_io_latency",
				     .map_name = "block_io_latency_map",
				     .by = KTEL_ATTR_BY_CGROUP,
				     .depth = depth,
				     .limit = 64};
	struct ktel_bpf_opts opts = {.pin_gid = (gid_t)-1, .no_attach = false};
	const struct ktel_metric_desc *md = NULL;
	struct ktel_bpf_plugin *bp = NULL;
	struct ktel_plugin *plugin = NULL;
	struct ktel_bpf_prog *submit, *insert, *issue, *complete;
	struct ktel_err err = {0};
	char pin_root[256], dir[128];

	if (access("/sys/fs/bpf", F_OK) == 0 && system("mountpoint -q /sys/fs/bpf") != 0)
		(void)system("mount -t bpf bpf /sys/fs/bpf");
	snprintf(pin_root, sizeof(pin_root), "/sys/fs/bpf/ktel-test-attrprogs-%d", getpid());
	ktel_test_rm_rf(pin_root);
	assert_int_equal(mkdir(pin_root, 0750), 0);
	if (ktel_plugin__open(KTEL_PLUGIN_DIR "/block_io_latency.so", &plugin, &err))
		fail_msg("%s", err.msg);
	assert_int_equal(plugin->desc.n_attr_progs, 2);
	assert_non_null(plugin->desc.attr_prog_flags);
	assert_int_equal(plugin->desc.attr_prog_flags[0], KTEL_ATTR_PROG_BLKCG);
	opts.pin_root = pin_root;
	opts.targets = targets;
	if (mode != BLOCK_OFF) {
		opts.attr = &attr;
		opts.n_attr = 1;
	}
	attr.blkcg = mode == BLOCK_BIO;
	if (ktel_bpf_plugin__load(plugin, &opts, &bp, &err))
		fail_msg("%s", err.msg);
	assert_false(bp->unsupported);
	submit = ktel_bpf_plugin__prog(bp, "block_submit");
	insert = ktel_bpf_plugin__prog(bp, "block_insert");
	issue = ktel_bpf_plugin__prog(bp, "block_issue");
	complete = ktel_bpf_plugin__prog(bp, "block_complete");
	assert_non_null(submit);
	assert_non_null(insert);
	assert_non_null(issue);
	assert_non_null(complete);
	printf("attribution %s, depth %u: block_submit %s (%s), block_insert %s (%s)\n",
	       names[mode], depth, submit->attached ? "attached" : "not attached",
	       submit->skip_reason, insert->attached ? "attached" : "not attached",
	       insert->skip_reason);
	assert_true(issue->attached);
	assert_true(complete->attached);
	if (mode == BLOCK_SUBMIT) {
		/* This kernel has block_io_start: the group's first variant. */
		assert_false(submit->unneeded);
		assert_true(submit->selected);
		assert_true(submit->attached);
		assert_false(insert->selected);
	} else {
		assert_true(submit->unneeded);
		assert_true(insert->unneeded);
		assert_false(submit->selected);
		assert_false(submit->attached);
		assert_false(insert->selected);
		assert_false(insert->attached);
		assert_non_null(strstr(submit->skip_reason, mode == BLOCK_BIO
								    ? "reads the bio's cgroup"
								    : "only while metric"));
	}
	for (uint32_t i = 0; i < plugin->desc.n_metrics; i++)
		if (strcmp(plugin->desc.metrics[i].name, "block_io_latency") == 0)
			md = &plugin->desc.metrics[i];
	assert_non_null(md);
	if (ktel_bpf_plugin__metric_complete(bp, md, &err))
		fail_msg("%s", err.msg);
	if (mode == BLOCK_BIO) {
		snprintf(dir, sizeof(dir), "/tmp/ktel-test-blkcg-%d", getpid());
		ktel_test_rm_rf(dir);
		assert_int_equal(mkdir(dir, 0700), 0);
		check_bio_attr(bp, dir, depth);
		ktel_test_rm_rf(dir);
	}
	ktel_bpf_plugin__unpin(bp, &err);
	ktel_bpf_plugin__free(bp);
	ktel_plugin__free(plugin);
	ktel_test_rm_rf(pin_root);
}

static void test_attr_only_programs(void **state)
{
	(void)state;
	load_block(BLOCK_OFF, 0);
	load_block(BLOCK_SUBMIT, 0);
	/* Plain loads at depth 0; the roll-up's helper reads past it. */
	load_block(BLOCK_BIO, 0);
	load_block(BLOCK_BIO, 1);
}

/* -------------------------------------------------------------------------
 * (d) The plugin directory as the front door: what the daemon refuses.
 */

/* Put a copy of src at dst as a drop-in does: written aside, renamed in. */
static void drop_in(const char *src, const char *dst)
{
	char cmd[2048];

	snprintf(cmd, sizeof(cmd), "cp '%s' '%s.part' && chmod 0644 '%s.part' && mv '%s.part' '%s'",
		 src, dst, dst, dst, dst);
	assert_int_equal(system(cmd), 0);
}

/* ktelemetryctl --socket <sandbox's> args: its stdout (malloc'd). */
static char *ctl_out(const struct sandbox *sb, const char *args)
{
	char cmd[1024], *buf = calloc(1, 1 << 20);
	size_t n = 0;
	FILE *p;

	assert_non_null(buf);
	snprintf(cmd, sizeof(cmd), "%s --socket %s/control.sock %s", CTL_BIN, sb->dir, args);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (n < (1 << 20) - 1 && !feof(p) && !ferror(p))
		n += fread(buf + n, 1, (1 << 20) - 1 - n, p);
	pclose(p);
	return buf;
}

/* How often text occurs in the daemon log. */
static size_t log_count(const struct sandbox *sb, const char *text)
{
	char *log = read_log(sb);
	size_t n = 0;

	for (const char *p = log; (p = strstr(p, text)); p += strlen(text))
		n++;
	free(log);
	return n;
}

/* The refusal of path in a status or list answer, or NULL. */
static const char *refusal_of(json_t *resp, const char *path)
{
	json_t *r;
	size_t i;

	json_array_foreach(json_object_get(resp, "refused"), i, r)
		if (strcmp(json_string_value(json_object_get(r, "path")) ?: "", path) == 0)
			return json_string_value(json_object_get(r, "reason"));
	return NULL;
}

/* The path of the loaded plugin called name in a status answer; fails on two. */
static const char *loaded_path(json_t *status, const char *name)
{
	const char *path = NULL;
	json_t *p;
	size_t i;

	json_array_foreach(json_object_get(status, "plugins"), i, p) {
		if (strcmp(json_string_value(json_object_get(p, "name")) ?: "", name) != 0)
			continue;
		if (path)
			fail_msg("two loaded plugins are called %s: %s and %s", name, path,
				 json_string_value(json_object_get(p, "path")));
		path = json_string_value(json_object_get(p, "path"));
	}
	return path;
}

/*
 * A copy of the built-in compaction_duration with only its metric renamed
 * (fx_name_copy: same plugin name, same object, so the same pins), dropped
 * in next to the running built-in. Before plugin names were a namespace it
 * loaded, attached a second program to the built-in's pinned map, and every
 * compaction counted twice. Now it is refused naming both files, the
 * built-in's counts equal the kernel's own (a tracefs instance), and when
 * the built-in's file is replaced the rescan reloads the built-in although
 * the copy's file name sorts first.
 */
static void test_name_copy_refused(void **state)
{
	static const char *proactive = "/proc/sys/vm/compaction_proactiveness";
	char dir[600], builtin[700], copy[700], taken[800], old[32] = "";
	const char *reason, *path;
	struct tracefs_counter tc;
	struct sandbox sb;
	uint64_t sum, oracle, pinned, before, window;
	size_t records, copy_records;
	char *status, *list;
	bool refused;
	json_t *st;
	pid_t pid;

	sandbox_init(&sb, "plugins-namecopy");
	snprintf(dir, sizeof(dir), "%s/plugins", sb.dir);
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(builtin, sizeof(builtin), "%s/compaction_duration.so", dir);
	snprintf(copy, sizeof(copy), "%s/a_compaction_copy.so", dir);
	drop_in(KTEL_PLUGIN_DIR "/compaction_duration.so", builtin);
	sysctl_set(proactive, "0", old, sizeof(old));
	pid = start_collecting(&sb, dir, "compaction_duration");
	section_daemon = pid;

	drop_in(KTEL_TEST_PLUGIN_DIR "/fx_name_copy.so", copy);
	snprintf(taken, sizeof(taken),
		 "%s: refused: plugin name compaction_duration is taken by %s", copy, builtin);
	/* Checked after the counts, which show what a loaded copy does. */
	refused = log_wait_for(&sb, taken, 10);
	/* A new version of the built-in: the rescan sees both files. */
	drop_in(KTEL_PLUGIN_DIR "/compaction_duration.so", builtin);
	if (!log_wait_for(&sb, "unloading: file replaced", 10) ||
	    !log_wait_for(&sb, "plugin directories:", 10)) {
		dump_log(&sb);
		kill(pid, SIGKILL);
		fail_msg("the replaced built-in was not rescanned");
	}

	/* The kernel's count and the pinned map's over one window: other
	 * compactions of the machine (other tests) fall into both or neither. */
	before = ktel_test_pinned_total(sb.pin_root, COMPACTION_PIN);
	assert_int_equal(tracefs_start(&tc, "compaction/mm_compaction_end"), 0);
	for (int i = 0; i < 3; i++) {
		trigger_compaction();
		usleep(100000);
	}
	oracle = tracefs_stop(&tc, "mm_compaction_end:");
	window = ktel_test_pinned_total(sb.pin_root, COMPACTION_PIN) - before;

	status = ctl_out(&sb, "--json status");
	list = ctl_out(&sb, "list");
	stop_collecting(&sb, pid);
	if (old[0])
		sysctl_set(proactive, old, NULL, 0);
	assert_int_equal(sum_metric(&sb, "compaction_duration", &sum, &records), 0);
	assert_int_equal(sum_metric(&sb, "compaction_copy", &pinned, &copy_records), 0);
	pinned = ktel_test_pinned_total(sb.pin_root, COMPACTION_PIN);
	printf("compaction: in the window the pin counted %llu, tracefs %llu; the daemon emitted "
	       "%llu in %zu record(s), the pin holds %llu; %zu compaction_copy records\n",
	       (unsigned long long)window, (unsigned long long)oracle, (unsigned long long)sum,
	       records, (unsigned long long)pinned, copy_records);
	assert_int_equal(copy_records, 0);
	assert_true(oracle >= 1);
	assert_int_equal(window, oracle);
	assert_int_equal(sum, pinned);

	st = json_loads(status, 0, NULL);
	if (!st)
		fail_msg("status answer does not parse: %s", status);
	path = loaded_path(st, "compaction_duration");
	reason = refusal_of(st, copy);
	printf("status: compaction_duration loaded from %s; %s refused: %s\n", path ?: "(none)",
	       copy, reason ?: "(not listed)");
	assert_true(refused);
	assert_non_null(path);
	assert_string_equal(path, builtin);
	assert_non_null(reason);
	assert_non_null(strstr(reason, taken));
	assert_non_null(strstr(list, taken));
	/* The refusal is logged once per version of the copy, not per rescan. */
	assert_int_equal(log_count(&sb, taken), 1);
	json_decref(st);
	free(status);
	free(list);
	sandbox_cleanup(&sb);
}

/*
 * A program the verifier refuses (fx_verifier_reject reads word 40 of a
 * 32-word map value). The refusal used to say only "Permission denied";
 * now the reason the log, status and list show carries the verifier's own
 * complaint, and `ktelemetryctl inspect` loads the programs before it says
 * whether they would load.
 */
static void test_verifier_refusal_reason(void **state)
{
	static const char *complaint = "invalid access to map value, value_size=256 off=320";
	char dir[600], plugin[700], cmd[1200], line[200];
	const char *reason = NULL;
	struct sandbox sb;
	char *status, *list, *log, *out;
	json_t *st, *p;
	size_t i;
	pid_t pid;
	FILE *f;

	sandbox_init(&sb, "plugins-verifier");
	snprintf(dir, sizeof(dir), "%s/plugins", sb.dir);
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(plugin, sizeof(plugin), "%s/fx_verifier_reject.so", dir);
	drop_in(KTEL_TEST_PLUGIN_DIR "/fx_verifier_reject.so", plugin);
	sandbox_write_config(&sb, dir, "60s", "");
	pid = daemon_start(&sb, NULL);
	section_daemon = pid;
	if (!log_wait_for(&sb, "metric fx_verifier_reject: not collected", 20)) {
		dump_log(&sb);
		kill(pid, SIGKILL);
		fail_msg("the daemon did not report fx_verifier_reject");
	}
	status = ctl_out(&sb, "--json status");
	list = ctl_out(&sb, "list");
	stop_collecting(&sb, pid);

	log = read_log(&sb);
	snprintf(line, sizeof(line), "plugin fx_verifier_reject: unsupported: ");
	assert_non_null(strstr(log, line));
	assert_non_null(strstr(strstr(log, line), complaint));
	free(log);
	st = json_loads(status, 0, NULL);
	assert_non_null(st);
	json_array_foreach(json_object_get(st, "plugins"), i, p)
		if (strcmp(json_string_value(json_object_get(p, "name")) ?: "",
			   "fx_verifier_reject") == 0)
			reason = json_string_value(json_object_get(p, "reason"));
	printf("status reason: %s\n", reason ?: "(none)");
	assert_non_null(reason);
	assert_non_null(strstr(reason, complaint));
	/* Bounded: the verifier's last lines, not its whole log. */
	assert_true(strlen(reason) < KTEL_ERR_MSG_MAX);
	assert_non_null(strstr(list, complaint));
	json_decref(st);
	free(status);
	free(list);

	/* inspect loads (as root) before it says whether the programs load. */
	snprintf(cmd, sizeof(cmd), "%s inspect %s " KTEL_PLUGIN_DIR "/compaction_duration.so",
		 CTL_BIN, plugin);
	f = popen(cmd, "r");
	assert_non_null(f);
	out = calloc(1, 1 << 16);
	assert_non_null(out);
	assert_true(fread(out, 1, (1 << 16) - 1, f) > 0);
	pclose(f);
	printf("%s", out);
	assert_non_null(strstr(out, "fx_verifier_prog"));
	assert_non_null(strstr(strstr(out, "fx_verifier_prog "), "would not load"));
	assert_non_null(strstr(strstr(out, "fx_verifier_prog "), complaint));
	assert_non_null(strstr(out, "load checked: this kernel refused the programs"));
	assert_non_null(
		strstr(strstr(out, "compaction_end "), "would load (loaded by this kernel)"));
	free(out);
	sandbox_cleanup(&sb);
}

/* Wait until text occurs n times in the log (up to timeout_s). */
static bool log_wait_count(const struct sandbox *sb, const char *text, size_t n, int timeout_s)
{
	for (int i = 0; i <= timeout_s * 20; i++) {
		if (log_count(sb, text) >= n)
			return true;
		usleep(50000);
	}
	return false;
}

/*
 * Refused files (ABI mismatch, group-writable, not an ELF) are shown by
 * status with their reasons and logged once per version of the file: six
 * rescans (a plugin dropped in and removed again, three times) log nothing
 * new; a touched file is a new version, tried and logged again; a removed
 * file leaves the list.
 */
static void test_refusals_logged_once(void **state)
{
	char dir[600], abi[700], mode[700], notelf[700], valid[700], rule[3][800];
	const char *reason;
	struct sandbox sb;
	char *status;
	json_t *st;
	pid_t pid;
	FILE *f;

	sandbox_init(&sb, "plugins-refusals");
	snprintf(dir, sizeof(dir), "%s/plugins", sb.dir);
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(abi, sizeof(abi), "%s/abi_major.so", dir);
	snprintf(mode, sizeof(mode), "%s/writable.so", dir);
	snprintf(notelf, sizeof(notelf), "%s/not_elf.so", dir);
	snprintf(valid, sizeof(valid), "%s/compaction_duration.so", dir);
	drop_in(KTEL_TEST_PLUGIN_DIR "/fx_abi_major.so", abi);
	drop_in(KTEL_TEST_PLUGIN_DIR "/fx_name_copy.so", mode);
	assert_int_equal(chmod(mode, 0664), 0);
	f = fopen(notelf, "w");
	assert_non_null(f);
	fputs("not a shared object\n", f);
	fclose(f);
	snprintf(rule[0], sizeof(rule[0]), "%s: refused: plugin ABI major 2", abi);
	snprintf(rule[1], sizeof(rule[1]), "%s: refused: ", mode);
	snprintf(rule[2], sizeof(rule[2]), "%s: refused: ", notelf);

	sandbox_write_config(&sb, dir, "60s", "");
	pid = daemon_start(&sb, NULL);
	section_daemon = pid;
	if (!log_wait_for(&sb, "running with", 20)) {
		dump_log(&sb);
		kill(pid, SIGKILL);
		fail_msg("the daemon did not start");
	}
	for (int i = 0; i < 3; i++) {
		drop_in(KTEL_PLUGIN_DIR "/compaction_duration.so", valid);
		assert_true(
			log_wait_count(&sb, "plugin directories: 1 change applied", 2 * i + 1, 10));
		unlink(valid);
		assert_true(
			log_wait_count(&sb, "plugin directories: 1 change applied", 2 * i + 2, 10));
	}
	status = ctl_out(&sb, "--json status");
	for (int i = 0; i < 3; i++)
		assert_int_equal(log_count(&sb, rule[i]), 1);
	st = json_loads(status, 0, NULL);
	assert_non_null(st);
	reason = refusal_of(st, abi);
	assert_non_null(reason);
	assert_non_null(strstr(reason, rule[0]));
	assert_non_null(refusal_of(st, mode));
	assert_non_null(strstr(refusal_of(st, mode), "writable"));
	assert_non_null(refusal_of(st, notelf));
	printf("refused: %s\n         %s\n         %s\n", reason, refusal_of(st, mode),
	       refusal_of(st, notelf));
	json_decref(st);
	free(status);

	/* A new version of the file (mtime): tried, and logged, again. */
	assert_int_equal(utimensat(AT_FDCWD, abi, NULL, 0), 0);
	if (!log_wait_count(&sb, rule[0], 2, 10)) {
		dump_log(&sb);
		kill(pid, SIGKILL);
		fail_msg("a touched refused file was not logged again");
	}
	/* Gone: no longer listed. */
	unlink(notelf);
	drop_in(KTEL_PLUGIN_DIR "/compaction_duration.so", valid);
	assert_true(log_wait_count(&sb, "plugin directories: 1 change applied", 7, 10));
	status = ctl_out(&sb, "--json status");
	st = json_loads(status, 0, NULL);
	assert_non_null(st);
	assert_null(refusal_of(st, notelf));
	assert_non_null(refusal_of(st, abi));
	json_decref(st);
	free(status);
	stop_collecting(&sb, pid);
	assert_int_equal(log_count(&sb, rule[0]), 2);
	assert_int_equal(log_count(&sb, rule[1]), 1);
	sandbox_cleanup(&sb);
}

static int setup(void **state)
{
	struct ktel_err err = {0};

	targets = ktel_targets__new(NULL, &err);
	if (!targets) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	if (section_daemon > 0 && kill(section_daemon, SIGKILL) == 0)
		waitpid(section_daemon, NULL, 0);
	ktel_targets__free(targets);
	return sandbox_remove_all(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_builtin_outcomes),
		cmocka_unit_test(test_host_facts),
		cmocka_unit_test(test_compaction_events),
		cmocka_unit_test(test_memcg_reclaim_events),
		cmocka_unit_test(test_runq_events),
		cmocka_unit_test(test_blockio_events),
		cmocka_unit_test(test_oom_events),
		cmocka_unit_test(test_example_plugin),
		cmocka_unit_test(test_constructor_never_runs),
		cmocka_unit_test(test_refused_variant),
		cmocka_unit_test(test_attr_only_programs),
		cmocka_unit_test(test_name_copy_refused),
		cmocka_unit_test(test_verifier_refusal_reason),
		cmocka_unit_test(test_refusals_logged_once),
	};

	ktel_test_require_root("test_plugins");
	/* CMOCKA_TEST_FILTER=test_name_* runs a few tests by name. */
	if (getenv("CMOCKA_TEST_FILTER"))
		cmocka_set_test_filter(getenv("CMOCKA_TEST_FILTER"));
	return cmocka_run_group_tests(tests, setup, teardown);
}
