// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Stream metrics on the running kernel, with the stream reader driven
 * directly on a uv loop (plugins loaded with ktel_plugin__open and
 * ktel_bpf_plugin__load, as the daemon does):
 *  - a burst larger than a 4 KiB ring, produced while nothing consumes,
 *    comes out as delivered + counted lost == produced, the delivered ones
 *    being the first, in order; the ring works again afterwards;
 *  - every field kind decodes from a live event, and the record reaches a
 *    JSON Lines file through the router and the JSON sink;
 *  - 10000 queued events are consumed in budgets of KTEL_STREAM_BUDGET with
 *    the loop's other handles running in between, in batches of at most
 *    KTEL_STREAM_BATCH, nothing lost;
 *  - an OOM victim in a tiny memory cgroup yields exactly one oom_events
 *    event, with its pid, comm, oom_score_adj and memory cgroup;
 *  - runq_stall_events' threshold_us .rodata param reaches the kernel: with
 *    1 ms, CPU-bound threads sharing a CPU produce stalls of >= 1 ms and no
 *    shorter ones; with 60 s, none; alike with the scheduler's stamp and
 *    with the hash fallback variant;
 *  - a known stall (a victim woken behind a SCHED_FIFO hog on its CPU),
 *    waited whole on one CPU or moved to another while it waits, is one
 *    event whose wait_us is the victim's schedstat run_delay delta.
 * Hermetic: own pin root and cgroup, removed at the end.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <jansson.h>
#include <uv.h>

#include "bpf_lifecycle.h"
#include "ktel_test.h"
#include "pin_root.h"
#include "router.h"
#include "stream_reader.h"

#define MAX_KEPT 512
#define KEPT_STR 1024
#define FLOOD_EVENTS 10000
#define TEST_COMM "ktel-fx-test"
#define OOM_COMM "ktel-oom-victim"
#define OOM_ADJ 500
#define SPIN_THREADS 3

static struct test_pin_root pins;

/* ---- what the callback received ---------------------------------------- */

/* Records kept with their strings copied (they are borrowed in the call). */
struct kept {
	size_t n; /* records received */
	size_t batches;
	size_t max_batch;
	struct ktel_record recs[MAX_KEPT];
	struct ktel_event_field fields[MAX_KEPT][KTEL_MAX_EVENT_FIELDS];
	char strs[MAX_KEPT][KEPT_STR];
	uint64_t last_seq;
	bool seq_in_order;
	/* Budget checks: events per loop iteration (reset by a check handle). */
	size_t this_iteration, max_per_iteration, iterations_with_events;
	/* A timer started on the first batch must run before the last one. */
	bool probe_started, probe_fired;
	size_t delivered_when_probe_fired;
};

static const char *keep_str(char **arena, char *end, const char *s)
{
	size_t len;
	char *out = *arena;

	if (!s)
		return NULL;
	len = strlen(s) + 1;
	assert_true(*arena + len <= end);
	memcpy(out, s, len);
	*arena += len;
	return out;
}

static void keep_record(struct kept *k, const struct ktel_record *r)
{
	struct ktel_record *out = &k->recs[k->n];
	char *arena = k->strs[k->n], *end = arena + KEPT_STR;

	struct ktel_event_field *fields = k->fields[k->n];

	*out = *r;
	out->boot_id = NULL;
	out->event.fields = fields;
	for (uint32_t i = 0; i < r->event.n_fields; i++) {
		fields[i] = r->event.fields[i];
		fields[i].name = keep_str(&arena, end, r->event.fields[i].name);
		fields[i].s = keep_str(&arena, end, r->event.fields[i].s);
		fields[i].label = keep_str(&arena, end, r->event.fields[i].label);
	}
	for (uint32_t i = 0; i < r->n_dims; i++) {
		out->dims[i].name = keep_str(&arena, end, r->dims[i].name);
		out->dims[i].label = keep_str(&arena, end, r->dims[i].label);
	}
	out->metric = keep_str(&arena, end, r->metric);
}

static void on_records(void *ctx, const struct ktel_record *recs, size_t n)
{
	struct kept *k = ctx;

	assert_true(n > 0 && n <= KTEL_STREAM_BATCH);
	k->batches++;
	if (n > k->max_batch)
		k->max_batch = n;
	if (!k->this_iteration)
		k->iterations_with_events++;
	k->this_iteration += n;
	if (k->this_iteration > k->max_per_iteration)
		k->max_per_iteration = k->this_iteration;
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(recs[i].type, KTEL_RECORD_EVENT);
		if (recs[i].seq <= k->last_seq)
			k->seq_in_order = false;
		k->last_seq = recs[i].seq;
		if (k->n < MAX_KEPT)
			keep_record(k, &recs[i]);
		k->n++;
	}
}

static const struct ktel_event_field *field(const struct ktel_record *r, const char *name)
{
	for (uint32_t i = 0; i < r->event.n_fields; i++)
		if (!strcmp(r->event.fields[i].name, name))
			return &r->event.fields[i];
	fail_msg("record has no field %s", name);
	return NULL;
}

static uint64_t field_u(const struct ktel_record *r, const char *name)
{
	const struct ktel_event_field *f = field(r, name);

	assert_int_equal(f->type, KTEL_FIELD_VALUE_UINT);
	return f->u;
}

static int64_t field_i(const struct ktel_record *r, const char *name)
{
	const struct ktel_event_field *f = field(r, name);

	assert_int_equal(f->type, KTEL_FIELD_VALUE_INT);
	return f->i;
}

static const char *field_s(const struct ktel_record *r, const char *name)
{
	const struct ktel_event_field *f = field(r, name);

	assert_int_equal(f->type, KTEL_FIELD_VALUE_STRING);
	return f->s;
}

/* ---- loading ------------------------------------------------------------ */

static struct ktel_plugin *open_plugin(const char *dir, const char *name)
{
	struct ktel_plugin *p = NULL;
	struct ktel_err err = {0};
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s.so", dir, name);
	if (ktel_plugin__open(path, &p, &err) != 0)
		fail_msg("%s", err.msg);
	return p;
}

/* no_task: act as on a kernel without task storage. */
static struct ktel_bpf_plugin *load_form(const struct ktel_plugin *plugin, const int64_t *params,
					 bool no_task)
{
	struct ktel_bpf_opts opts = {
		.pin_root = pins.path,
		.pin_gid = (gid_t)-1,
		.targets = pins.targets,
		.param_values = params,
		.no_task_storage = no_task,
	};
	struct ktel_bpf_plugin *bp = NULL;
	struct ktel_err err = {0};

	if (ktel_bpf_plugin__load(plugin, &opts, &bp, &err) != 0)
		fail_msg("%s", err.msg);
	assert_false(bp->unsupported);
	for (size_t i = 0; i < bp->n_progs; i++)
		if (bp->progs[i].selected && !bp->progs[i].attached)
			fail_msg("%s: %s", bp->progs[i].name, bp->progs[i].attach_error);
	return bp;
}

static struct ktel_bpf_plugin *load(const struct ktel_plugin *plugin, const int64_t *params)
{
	return load_form(plugin, params, false);
}

static const struct ktel_metric_desc *metric(const struct ktel_plugin *p, const char *name)
{
	for (uint32_t i = 0; i < p->desc.n_metrics; i++)
		if (!strcmp(p->desc.metrics[i].name, name))
			return &p->desc.metrics[i];
	fail_msg("no metric %s", name);
	return NULL;
}

static struct ktel_stream_reader *reader(uv_loop_t *loop, const struct ktel_plugin *p,
					 struct ktel_bpf_plugin *bp, const char *name,
					 ktel_stream_records_fn fn, void *ctx)
{
	struct ktel_stream_reader *sr = NULL;
	struct ktel_err err = {0};

	if (ktel_stream_reader__new(loop, metric(p, name), bp->obj, fn, ctx, &sr, &err) != 0)
		fail_msg("%s", err.msg);
	return sr;
}

static void start(struct ktel_stream_reader *sr)
{
	struct ktel_err err = {0};

	if (ktel_stream_reader__start(sr, &err) != 0)
		fail_msg("%s", err.msg);
}

/* Free the reader and let the loop run its close callback. */
static void free_reader(uv_loop_t *loop, struct ktel_stream_reader *sr)
{
	ktel_stream_reader__free(sr);
	uv_run(loop, UV_RUN_NOWAIT);
}

/* A u64 global of the object's .bss, read from the kernel. */
static uint64_t bss_u64(struct bpf_object *obj, const char *name)
{
	const struct btf *btf = bpf_object__btf(obj);
	int id = btf__find_by_name_kind(btf, ".bss", BTF_KIND_DATASEC);
	const struct btf_type *sec = btf__type_by_id(btf, id);
	const struct btf_var_secinfo *vsi = btf_var_secinfos(sec);
	struct bpf_map *map, *bss = NULL;
	uint32_t zero = 0;
	uint64_t v = 0;
	char *buf;

	bpf_object__for_each_map(map, obj) {
		const char *n = bpf_map__name(map);

		if (strlen(n) >= 4 && !strcmp(n + strlen(n) - 4, ".bss"))
			bss = map;
	}
	assert_non_null(bss);
	buf = calloc(1, bpf_map__value_size(bss));
	assert_non_null(buf);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(bss), &zero, buf), 0);
	for (int i = 0; i < btf_vlen(sec); i++) {
		const struct btf_type *var = btf__type_by_id(btf, vsi[i].type);

		if (!strcmp(btf__name_by_offset(btf, var->name_off), name)) {
			assert_int_equal(vsi[i].size, 8);
			memcpy(&v, buf + vsi[i].offset, 8);
			free(buf);
			return v;
		}
	}
	free(buf);
	fail_msg(".bss has no %s", name);
	return 0;
}

/* ---- loop helpers ----------------------------------------------------- */

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Run until the reader delivered want events (or 10 s passed). */
static void run_until(uv_loop_t *loop, const struct ktel_stream_reader *sr, uint64_t want,
		      bool count_lost)
{
	uint64_t deadline = mono_ns() + 10000000000ULL;
	struct ktel_stream_stats s;

	do {
		uv_run(loop, UV_RUN_NOWAIT);
		ktel_stream_reader__stats(sr, &s);
	} while (s.delivered + (count_lost ? s.lost_kernel : 0) < want && mono_ns() < deadline);
}

/* n getppid() calls: each one is an event of fx_stream_flood. */
static void produce(int n)
{
	for (int i = 0; i < n; i++)
		syscall(SYS_getppid);
}

/* burst events per syscall (fx_burst; the stream bench makes 4). */
static struct ktel_bpf_plugin *load_flood_burst(const struct ktel_plugin *p, bool big,
						int64_t burst)
{
	int64_t params[] = {(int64_t)gettid(), SYS_getppid, big, burst};

	assert_int_equal(p->desc.n_params, 4);
	return load(p, params);
}

static struct ktel_bpf_plugin *load_flood(const struct ktel_plugin *p, bool big)
{
	return load_flood_burst(p, big, 1);
}

/* ---- flood: produced == delivered + lost ------------------------------- */

/* fx_stream_flood loaded, a reader started on one of its metrics, the
 * records it delivers kept in k. */
struct flood {
	struct ktel_plugin *p;
	struct ktel_bpf_plugin *bp;
	struct kept *k;
	struct ktel_stream_reader *sr;
	uv_loop_t loop;
};

static void flood_start(struct flood *f, bool big, int64_t burst)
{
	f->p = open_plugin(KTEL_TEST_PLUGIN_DIR, "fx_stream_flood");
	f->bp = load_flood_burst(f->p, big, burst);
	f->k = calloc(1, sizeof(*f->k));
	assert_non_null(f->k);
	f->k->seq_in_order = true;
	uv_loop_init(&f->loop);
	f->sr = reader(&f->loop, f->p, f->bp, big ? "fx_stream_big" : "fx_stream_small", on_records,
		       f->k);
	start(f->sr);
}

static void flood_end(struct flood *f)
{
	free_reader(&f->loop, f->sr);
	assert_int_equal(uv_loop_close(&f->loop), 0);
	assert_int_equal(ktel_bpf_plugin__unpin(f->bp, NULL), 0);
	ktel_bpf_plugin__free(f->bp);
	ktel_plugin__free(f->p);
	free(f->k);
}

static void test_flood_lost_matches(void **state)
{
	struct ktel_stream_stats s;
	struct flood f;
	struct kept *k;

	flood_start(&f, false, 1);
	k = f.k;
	/* The burst comes while the loop does not run: nothing consumes. */
	produce(FLOOD_EVENTS);
	assert_int_equal(bss_u64(f.bp->obj, "fx_produced"), FLOOD_EVENTS);
	run_until(&f.loop, f.sr, FLOOD_EVENTS, true);
	ktel_test_run_for(&f.loop, 50);
	ktel_stream_reader__stats(f.sr, &s);
	printf("flood of %d into a 4 KiB ring: delivered %llu, lost %llu, batches %llu\n",
	       FLOOD_EVENTS, (unsigned long long)s.delivered, (unsigned long long)s.lost_kernel,
	       (unsigned long long)s.batches);
	assert_int_equal(s.delivered + s.lost_kernel, FLOOD_EVENTS);
	assert_true(s.delivered > 0 && s.lost_kernel > 0);
	/* 4096 bytes hold at most 4096 / (8-byte header + event) events. */
	assert_true(s.delivered <= 4096 / (8 + 48));
	assert_int_equal(s.dropped_daemon, 0);
	assert_int_equal(k->n, s.delivered);
	/* The ring keeps the oldest: what got through is events 1..delivered. */
	for (size_t i = 0; i < k->n; i++)
		assert_int_equal(field_u(&k->recs[i], "seq"), i + 1);
	assert_true(k->seq_in_order);

	/* Consumed again, the ring takes events again; nothing more is lost. */
	produce(10);
	run_until(&f.loop, f.sr, s.delivered + 10, false);
	ktel_stream_reader__stats(f.sr, &s);
	assert_int_equal(s.delivered + s.lost_kernel, FLOOD_EVENTS + 10);
	assert_int_equal(field_u(&k->recs[k->n - 1], "seq"), FLOOD_EVENTS + 10);

	flood_end(&f);
}

/* fx_burst events per syscall, as ktel_bench_stream counts them: runs of
 * consecutive seq, and produced = burst x syscalls = delivered + lost. */
static void test_flood_burst_counted(void **state)
{
	struct ktel_stream_stats s;
	struct flood f;

	flood_start(&f, true, 4);
	produce(100);
	assert_int_equal(bss_u64(f.bp->obj, "fx_produced"), 400);
	run_until(&f.loop, f.sr, 400, true);
	ktel_stream_reader__stats(f.sr, &s);
	assert_int_equal(s.delivered, 400);
	assert_int_equal(s.lost_kernel, 0);
	for (size_t i = 0; i < f.k->n; i++)
		assert_int_equal(field_u(&f.k->recs[i], "seq"), i + 1);
	assert_true(f.k->seq_in_order);
	flood_end(&f);
}

/* ---- every field kind, live, and through the JSON sink ----------------- */

struct route_ctx {
	struct kept *k;
	struct ktel_router *router;
};

static void on_records_route(void *ctx, const struct ktel_record *recs, size_t n)
{
	struct route_ctx *rc = ctx;

	on_records(rc->k, recs, n);
	ktel_router__route(rc->router, recs, n, NULL, 0);
}

static void on_closed(void *ctx)
{
	*(bool *)ctx = true;
}

static const char *const colors[] = {"FX_RED", "FX_GREEN", "FX_BLUE"};

static void check_record(const struct ktel_record *r, uint64_t t0_mono, uint64_t t1_mono,
			 int64_t t0_wall, int64_t t1_wall)
{
	uint64_t seq = field_u(r, "seq"), ts = field_u(r, "ts_ns");
	const struct ktel_event_field *f;
	char bytes[32];

	assert_string_equal(r->metric, "fx_stream_big");
	assert_true(ts >= t0_mono && ts <= t1_mono);
	/* Wall time from the monotonic stamp: inside the test's window give or
	 * take the offset's error (well under a millisecond). */
	assert_true(r->start_wall_ns >= t0_wall - 1000000 && r->start_wall_ns <= t1_wall + 1000000);
	assert_int_equal(r->start_wall_ns, r->end_wall_ns);
	assert_int_equal(field_i(r, "tid"), gettid());
	f = field(r, "color");
	assert_int_equal(f->type, KTEL_FIELD_VALUE_UINT);
	assert_int_equal(f->u, seq % 3);
	assert_string_equal(f->label, colors[seq % 3]);
	f = field(r, "label_id");
	assert_true(f->u >= 1);
	assert_non_null(f->label);
	assert_string_equal(f->label, TEST_COMM);
	assert_int_equal(field_u(r, "odd"), seq & 1);
	assert_int_equal(field_i(r, "neg"), -(int64_t)(seq % 100));
	assert_int_equal(field_u(r, "inner.a"), seq & 0xffff);
	assert_int_equal(field_i(r, "inner.b"), -1);
	assert_string_equal(field_s(r, "comm"), TEST_COMM);
	snprintf(bytes, sizeof(bytes), "1,2,3,%llu", (unsigned long long)(seq & 0xff));
	assert_string_equal(field_s(r, "bytes"), bytes);
	/* Dimensions: the label map id and the enum, as declared. */
	assert_int_equal(r->n_dims, 2);
	assert_string_equal(r->dims[0].name, "label_id");
	assert_string_equal(r->dims[0].label, TEST_COMM);
	assert_true(r->dims[0].id_label);
	assert_string_equal(r->dims[1].name, "color");
	assert_string_equal(r->dims[1].label, colors[seq % 3]);
	assert_false(r->dims[1].id_label);
}

static void check_json(const char *path, int n)
{
	char line[8192];
	FILE *f = fopen(path, "r");
	int lines = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		json_error_t jerr;
		json_t *j = json_loads(line, 0, &jerr), *fields, *raw;
		uint64_t seq;

		if (!j)
			fail_msg("%s: line %d: %s", path, lines + 1, jerr.text);
		assert_string_equal(json_string_value(json_object_get(j, "type")), "event");
		assert_string_equal(json_string_value(json_object_get(j, "metric")),
				    "fx_stream_big");
		fields = json_object_get(j, "fields");
		raw = json_object_get(j, "fields_raw");
		seq = (uint64_t)json_integer_value(json_object_get(fields, "seq"));
		assert_int_equal(seq, lines + 1);
		assert_string_equal(json_string_value(json_object_get(fields, "comm")), TEST_COMM);
		assert_string_equal(json_string_value(json_object_get(fields, "color")),
				    colors[seq % 3]);
		assert_int_equal(json_integer_value(json_object_get(raw, "color")), seq % 3);
		assert_string_equal(json_string_value(json_object_get(fields, "label_id")),
				    TEST_COMM);
		assert_int_equal(json_integer_value(json_object_get(fields, "inner.b")), -1);
		assert_true(json_is_string(json_object_get(fields, "bytes")));
		assert_null(json_object_get(raw, "comm"));
		json_decref(j);
		lines++;
	}
	fclose(f);
	assert_int_equal(lines, n);
}

static void test_decode_live_to_json(void **state)
{
	struct ktel_plugin *p = open_plugin(KTEL_TEST_PLUGIN_DIR, "fx_stream_flood");
	struct ktel_bpf_plugin *bp;
	struct kept *k = calloc(1, sizeof(*k));
	struct route_ctx rc = {.k = k};
	struct ktel_stream_reader *sr;
	struct ktel_stream_stats s;
	struct ktel_err err = {0};
	char path[PATH_MAX], old_comm[16] = "";
	uint64_t t0_mono, t1_mono;
	int64_t t0_wall, t1_wall;
	json_t *opts;
	bool closed = false;
	uv_loop_t loop;
	const int n = 50;

	assert_non_null(k);
	k->seq_in_order = true;
	prctl(PR_GET_NAME, old_comm);
	prctl(PR_SET_NAME, TEST_COMM);
	bp = load_flood(p, true);
	uv_loop_init(&loop);
	snprintf(path, sizeof(path), "%s/test-stream-%d.jsonl", KTEL_BINARY_DIR, (int)getpid());
	unlink(path);
	rc.router = ktel_router__new(&loop);
	assert_non_null(rc.router);
	opts = json_pack("{s:s}", "path", path);
	if (ktel_router__add_sink(rc.router, "file", "json", opts, &err) != 0)
		fail_msg("%s", err.msg);
	json_decref(opts);
	sr = reader(&loop, p, bp, "fx_stream_big", on_records_route, &rc);
	start(sr);
	t0_mono = mono_ns();
	t0_wall = wall_ns();
	produce(n);
	t1_mono = mono_ns();
	t1_wall = wall_ns();
	run_until(&loop, sr, n, false);
	ktel_stream_reader__stats(sr, &s);
	assert_int_equal(s.delivered, n);
	assert_int_equal(s.lost_kernel, 0);
	assert_int_equal(k->n, n);
	for (int i = 0; i < n; i++) {
		assert_int_equal(field_u(&k->recs[i], "seq"), i + 1);
		assert_int_equal(k->recs[i].seq, i + 1); /* the reader's own sequence */
		assert_int_equal(k->recs[i].map_id, ktel_stream_reader__map_id(sr));
		check_record(&k->recs[i], t0_mono, t1_mono, t0_wall, t1_wall);
	}
	ktel_stream_reader__stop(sr);
	free_reader(&loop, sr);
	ktel_router__close(rc.router, 2000, on_closed, &closed);
	while (!closed)
		uv_run(&loop, UV_RUN_ONCE);
	ktel_router__free(rc.router);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
	check_json(path, n);
	unlink(path);
	prctl(PR_SET_NAME, old_comm);
	assert_int_equal(ktel_bpf_plugin__unpin(bp, NULL), 0);
	ktel_bpf_plugin__free(bp);
	ktel_plugin__free(p);
	free(k);
}

/* ---- stop: what the ring holds is delivered, beyond one budget -------- */

static void test_stop_drains_ring(void **state)
{
	struct ktel_plugin *p = open_plugin(KTEL_TEST_PLUGIN_DIR, "fx_stream_flood");
	struct ktel_bpf_plugin *bp = load_flood(p, true);
	struct kept *k = calloc(1, sizeof(*k));
	struct ktel_stream_reader *sr;
	struct ktel_stream_stats s;
	uv_loop_t loop;
	/* Eight budgets' worth, far below what the 1 MiB ring holds. */
	const int n = 8 * KTEL_STREAM_BUDGET;

	assert_non_null(k);
	uv_loop_init(&loop);
	sr = reader(&loop, p, bp, "fx_stream_big", on_records, k);
	start(sr);
	produce(n);
	/* The loop never ran: only the stop delivers them (disable, shutdown). */
	ktel_stream_reader__stop(sr);
	ktel_stream_reader__stats(sr, &s);
	printf("stop delivered %zu of %d events in %zu batches\n", k->n, n, k->batches);
	assert_int_equal(k->n, n);
	assert_int_equal(s.delivered, n);
	assert_int_equal(s.lost_kernel, 0);
	free_reader(&loop, sr);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
	assert_int_equal(ktel_bpf_plugin__unpin(bp, NULL), 0);
	ktel_bpf_plugin__free(bp);
	ktel_plugin__free(p);
	free(k);
}

/* ---- budget: the loop's other handles run during a long drain --------- */

static void on_check(uv_check_t *c)
{
	struct kept *k = c->data;

	k->this_iteration = 0;
}

static void on_probe(uv_timer_t *t)
{
	struct kept *k = t->data;

	k->probe_fired = true;
	k->delivered_when_probe_fired = k->n;
}

static uv_timer_t probe_timer;

static void on_records_budget(void *ctx, const struct ktel_record *recs, size_t n)
{
	struct kept *k = ctx;

	on_records(k, recs, n);
	if (!k->probe_started) {
		/* Due at once: it runs as soon as the reader yields to the loop. */
		uv_timer_start(&probe_timer, on_probe, 0, 0);
		k->probe_started = true;
	}
}

static void test_budget_yields(void **state)
{
	struct ktel_plugin *p = open_plugin(KTEL_TEST_PLUGIN_DIR, "fx_stream_flood");
	struct ktel_bpf_plugin *bp = load_flood(p, true);
	struct kept *k = calloc(1, sizeof(*k));
	struct ktel_stream_reader *sr;
	struct ktel_stream_stats s;
	uv_check_t check;
	uv_loop_t loop;

	assert_non_null(k);
	k->seq_in_order = true;
	uv_loop_init(&loop);
	uv_check_init(&loop, &check);
	check.data = k;
	uv_check_start(&check, on_check);
	uv_timer_init(&loop, &probe_timer);
	probe_timer.data = k;
	sr = reader(&loop, p, bp, "fx_stream_big", on_records_budget, k);
	produce(FLOOD_EVENTS); /* fits the 1 MiB ring: nothing lost */
	start(sr);
	run_until(&loop, sr, FLOOD_EVENTS, false);
	ktel_stream_reader__stats(sr, &s);
	printf("%d queued events: %zu loop iterations with events, at most %zu per iteration, "
	       "%zu batches of at most %zu; probe timer ran after %zu events\n",
	       FLOOD_EVENTS, k->iterations_with_events, k->max_per_iteration, k->batches,
	       k->max_batch, k->delivered_when_probe_fired);
	assert_int_equal(s.delivered, FLOOD_EVENTS);
	assert_int_equal(s.lost_kernel, 0);
	assert_int_equal(k->n, FLOOD_EVENTS);
	assert_true(k->seq_in_order);
	assert_true(k->max_per_iteration <= KTEL_STREAM_BUDGET);
	assert_true(k->iterations_with_events >=
		    (FLOOD_EVENTS + KTEL_STREAM_BUDGET - 1) / KTEL_STREAM_BUDGET);
	assert_true(k->max_batch <= KTEL_STREAM_BATCH);
	assert_int_equal(s.batches, k->batches);
	assert_true(k->probe_fired);
	assert_true(k->delivered_when_probe_fired < FLOOD_EVENTS);

	free_reader(&loop, sr);
	uv_close((uv_handle_t *)&check, NULL);
	uv_close((uv_handle_t *)&probe_timer, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&loop), 0);
	assert_int_equal(ktel_bpf_plugin__unpin(bp, NULL), 0);
	ktel_bpf_plugin__free(bp);
	ktel_plugin__free(p);
	free(k);
}

/* ---- OOM victim in a tiny memory cgroup --------------------------------- */

struct memcg {
	char dir[PATH_MAX];
	int version;
};

static void write_file(const char *dir, const char *file, const char *value, bool must)
{
	char path[PATH_MAX];
	int fd, r;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY);
	r = fd >= 0 ? (int)write(fd, value, strlen(value)) : -1;
	if (must && r != (int)strlen(value))
		fail_msg("%s: cannot write %s: %s", path, value, strerror(errno));
	if (fd >= 0)
		close(fd);
}

/* Mount point of a cgroup v2 with the memory controller, or of the v1
 * memory hierarchy. */
static void memcg_create(struct memcg *cg)
{
	char line[1024], dev[256], mnt[PATH_MAX], type[64], opts[512], ctl[512] = "";
	FILE *f = fopen("/proc/mounts", "r");
	char v1[PATH_MAX] = "", v2[PATH_MAX] = "";

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%255s %4095s %63s %511s", dev, mnt, type, opts) != 4)
			continue;
		if (!strcmp(type, "cgroup2") && !v2[0])
			snprintf(v2, sizeof(v2), "%s", mnt);
		if (!strcmp(type, "cgroup") && strstr(opts, "memory") && !v1[0])
			snprintf(v1, sizeof(v1), "%s", mnt);
	}
	fclose(f);
	if (v2[0]) {
		char path[PATH_MAX];
		FILE *c;

		snprintf(path, sizeof(path), "%s/cgroup.controllers", v2);
		c = fopen(path, "r");
		if (c) {
			if (!fgets(ctl, sizeof(ctl), c))
				ctl[0] = '\0';
			fclose(c);
		}
	}
	if (strstr(ctl, "memory")) {
		write_file(v2, "cgroup.subtree_control", "+memory", false);
		cg->version = 2;
		snprintf(cg->dir, sizeof(cg->dir), "%s/ktel-test-%d", v2, (int)getpid());
	} else if (v1[0]) {
		cg->version = 1;
		snprintf(cg->dir, sizeof(cg->dir), "%s/ktel-test-%d", v1, (int)getpid());
	} else {
		fail_msg("no memory cgroup controller (cgroup v2 with memory, or v1 memory)");
	}
	if (mkdir(cg->dir, 0755) != 0)
		fail_msg("%s: %s", cg->dir, strerror(errno));
	if (cg->version == 2) {
		write_file(cg->dir, "memory.max", "16M", true);
		write_file(cg->dir, "memory.swap.max", "0", false);
	} else {
		write_file(cg->dir, "memory.limit_in_bytes", "16M", true);
		write_file(cg->dir, "memory.memsw.limit_in_bytes", "16M", false);
	}
}

static void memcg_remove(const struct memcg *cg)
{
	for (int i = 0; i < 100; i++) {
		if (rmdir(cg->dir) == 0 || errno == ENOENT)
			return;
		usleep(20000);
	}
	fail_msg("cannot remove %s: %s", cg->dir, strerror(errno));
}

/* The victim: waits to be moved into the cgroup, then takes 64 MiB. */
static void victim(int go_fd)
{
	size_t size = 64u << 20;
	char c, adj[16];
	char *mem;
	int fd;

	if (read(go_fd, &c, 1) != 1)
		_exit(2);
	prctl(PR_SET_NAME, OOM_COMM);
	snprintf(adj, sizeof(adj), "%d", OOM_ADJ);
	fd = open("/proc/self/oom_score_adj", O_WRONLY);
	if (fd < 0 || write(fd, adj, strlen(adj)) < 0)
		_exit(3);
	close(fd);
	mem = malloc(size);
	if (!mem)
		_exit(4);
	for (size_t i = 0; i < size; i += 4096)
		mem[i] = 1;
	_exit(0); /* not reached when the OOM killer works */
}

static void test_oom_event(void **state)
{
	struct ktel_plugin *p = open_plugin(KTEL_PLUGIN_DIR, "oom_events");
	struct ktel_bpf_plugin *bp = load(p, NULL);
	struct kept *k = calloc(1, sizeof(*k));
	struct ktel_stream_reader *sr;
	struct ktel_stream_stats s;
	const struct ktel_record *r = NULL;
	struct memcg cg = {0};
	char pidtext[32];
	int go[2], status, found = 0;
	int64_t t0_wall, t1_wall;
	struct stat st;
	uv_loop_t loop;
	pid_t pid;

	assert_non_null(k);
	k->seq_in_order = true;
	uv_loop_init(&loop);
	sr = reader(&loop, p, bp, "oom_events", on_records, k);
	start(sr);
	memcg_create(&cg);
	assert_int_equal(stat(cg.dir, &st), 0);
	assert_int_equal(pipe(go), 0);
	t0_wall = wall_ns();
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(go[1]);
		victim(go[0]);
	}
	close(go[0]);
	snprintf(pidtext, sizeof(pidtext), "%d", (int)pid);
	write_file(cg.dir, "cgroup.procs", pidtext, true);
	assert_int_equal(write(go[1], "g", 1), 1);
	close(go[1]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	t1_wall = wall_ns();
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
		fail_msg("victim %d was not killed by SIGKILL (status 0x%x)", (int)pid, status);
	/* Enough time for the event, and for a second one, which must not come. */
	ktel_test_run_for(&loop, 300);
	memcg_remove(&cg);
	ktel_stream_reader__stats(sr, &s);
	for (size_t i = 0; i < k->n && i < MAX_KEPT; i++) {
		if (field_i(&k->recs[i], "pid") != pid) {
			printf("other OOM victim meanwhile: pid %lld (%s)\n",
			       (long long)field_i(&k->recs[i], "pid"),
			       field_s(&k->recs[i], "comm"));
			continue;
		}
		found++;
		r = &k->recs[i];
	}
	assert_int_equal(found, 1);
	printf("OOM event: pid %lld tid %lld comm %s uid %llu adj %lld state %s memcg_ino %llu "
	       "total_vm %llu rss %llu pages\n",
	       (long long)field_i(r, "pid"), (long long)field_i(r, "tid"), field_s(r, "comm"),
	       (unsigned long long)field_u(r, "uid"), (long long)field_i(r, "oom_score_adj"),
	       field(r, "process_state")->label, (unsigned long long)field_u(r, "memcg_ino"),
	       (unsigned long long)field_u(r, "total_vm_pages"),
	       (unsigned long long)field_u(r, "rss_pages"));
	assert_string_equal(r->metric, "oom_events");
	assert_int_equal(field_i(r, "tid"), pid);
	assert_string_equal(field_s(r, "comm"), OOM_COMM);
	assert_int_equal(field_i(r, "oom_score_adj"), OOM_ADJ);
	assert_string_equal(field(r, "process_state")->label, "STATE_SERVICE_BACKGROUND");
	assert_string_equal(r->dims[0].label, "STATE_SERVICE_BACKGROUND");
	assert_int_equal(field_u(r, "memcg_ino"), st.st_ino);
	/* It had mapped 64 MiB and touched what the 16 MiB limit let it (RSS
	 * also counts file and COW pages charged elsewhere, so no upper bound
	 * but its size). */
	assert_true(field_u(r, "total_vm_pages") >= (64u << 20) / 4096);
	assert_true(field_u(r, "rss_pages") >= (8u << 20) / 4096);
	assert_true(field_u(r, "rss_pages") <= field_u(r, "total_vm_pages"));
	assert_true(field_u(r, "uid") == 0 || field_u(r, "uid") == 0xffffffffu);
	assert_true(r->start_wall_ns >= t0_wall - 1000000 && r->start_wall_ns <= t1_wall + 1000000);
	assert_int_equal(s.lost_kernel, 0);
	assert_int_equal(s.dropped_daemon, 0);

	free_reader(&loop, sr);
	assert_int_equal(uv_loop_close(&loop), 0);
	ktel_bpf_plugin__free(bp);
	ktel_plugin__free(p);
	free(k);
}

/* ---- runq_stall_events: the threshold param ------------------------------ */

struct spin_arg {
	int cpu;
	uint64_t until_ns;
	pid_t tid;
};

static void *spin(void *arg)
{
	struct spin_arg *a = arg;
	cpu_set_t set;

	a->tid = gettid();
	prctl(PR_SET_NAME, "ktel-rq-spin");
	CPU_ZERO(&set);
	CPU_SET(a->cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
	while (mono_ns() < a->until_ns)
		;
	return NULL;
}

/* Spin SPIN_THREADS threads on one CPU for ms while the loop runs; return
 * how many stall events named one of them once it had its name (a thread
 * can wait before its prctl). */
static size_t stalls_of_spinners(uv_loop_t *loop, struct kept *k, uint64_t ms)
{
	struct spin_arg args[SPIN_THREADS];
	pthread_t th[SPIN_THREADS];
	int cpu = (int)(sysconf(_SC_NPROCESSORS_ONLN) > 1);
	size_t ours = 0;

	for (int i = 0; i < SPIN_THREADS; i++) {
		args[i] = (struct spin_arg){.cpu = cpu, .until_ns = mono_ns() + ms * 1000000};
		assert_int_equal(pthread_create(&th[i], NULL, spin, &args[i]), 0);
	}
	ktel_test_run_for(loop, ms + 100);
	for (int i = 0; i < SPIN_THREADS; i++)
		pthread_join(th[i], NULL);
	for (size_t i = 0; i < k->n && i < MAX_KEPT; i++)
		for (int j = 0; j < SPIN_THREADS; j++)
			if (field_i(&k->recs[i], "tid") == args[j].tid &&
			    !strcmp(field_s(&k->recs[i], "comm"), "ktel-rq-spin")) {
				assert_int_equal(field_i(&k->recs[i], "pid"), getpid());
				ours += field_u(&k->recs[i], "cpu") == (uint64_t)cpu;
			}
	return ours;
}

/* The programs selected in bp: the switch on the scheduler's stamp alone,
 * or with no_task the hash fallback trio; the task storage trio never. */
static void expect_stall_form(struct ktel_bpf_plugin *bp, bool no_task)
{
	static const char *const hooks[] = {"runq_stall_wakeup", "runq_stall_wakeup_new",
					    "runq_stall_switch"};
	struct ktel_bpf_prog *stamp = ktel_bpf_plugin__prog(bp, "runq_stall_switch_si");
	char hash[64];

	assert_non_null(stamp);
	assert_int_equal(stamp->selected, !no_task);
	for (size_t i = 0; i < KTEL_ARRAY_SIZE(hooks); i++) {
		struct ktel_bpf_prog *task_prog = ktel_bpf_plugin__prog(bp, hooks[i]), *hash_prog;

		snprintf(hash, sizeof(hash), "%s_hash", hooks[i]);
		hash_prog = ktel_bpf_plugin__prog(bp, hash);
		assert_non_null(task_prog);
		assert_non_null(hash_prog);
		assert_false(task_prog->selected);
		assert_int_equal(hash_prog->selected, no_task);
	}
}

/*
 * The threshold reaches the kernel, and the events are alike whichever form
 * the kernel offers: the scheduler's stamp, or (no_task_storage: acted out
 * as on a kernel without it) the start in a hash.
 */
static void test_runq_threshold_param(void **state)
{
	static const int64_t thresholds[] = {1000, 60000000};
	struct ktel_plugin *p = open_plugin(KTEL_PLUGIN_DIR, "runq_stall_events");

	for (size_t run = 0; run < 2 * KTEL_ARRAY_SIZE(thresholds); run++) {
		size_t t = run % KTEL_ARRAY_SIZE(thresholds);
		bool no_task = run >= KTEL_ARRAY_SIZE(thresholds);
		struct ktel_bpf_plugin *bp = load_form(p, &thresholds[t], no_task);
		struct kept *k = calloc(1, sizeof(*k));
		struct ktel_stream_reader *sr;
		uint64_t min_wait = UINT64_MAX;
		size_t ours;
		uv_loop_t loop;

		assert_non_null(k);
		expect_stall_form(bp, no_task);
		uv_loop_init(&loop);
		sr = reader(&loop, p, bp, "runq_stall_events", on_records, k);
		start(sr);
		ours = stalls_of_spinners(&loop, k, 300);
		for (size_t i = 0; i < k->n && i < MAX_KEPT; i++)
			if (field_u(&k->recs[i], "wait_us") < min_wait)
				min_wait = field_u(&k->recs[i], "wait_us");
		printf("%s start, threshold_us %lld: %zu stall events, %zu of the spinning threads, "
		       "shortest %llu us\n",
		       no_task ? "hash" : "stamp", (long long)thresholds[t], k->n, ours,
		       (unsigned long long)(k->n ? min_wait : 0));
		if (t == 0) {
			assert_true(ours > 0);
			assert_true(min_wait >= (uint64_t)thresholds[t]);
		} else {
			assert_int_equal(k->n, 0);
		}
		free_reader(&loop, sr);
		assert_int_equal(uv_loop_close(&loop), 0);
		ktel_bpf_plugin__free(bp);
		free(k);
	}
	ktel_plugin__free(p);
}

/* ---- runq_stall_events: a stall of known length ------------------------ */

struct stall_victim {
	int cpu;
	int pipe_r;
	pid_t tid;
	int ready;         /* atomic: blocked on the pipe from now on */
	uint64_t delay_ns; /* run_delay added from its block to its run */
};

struct stall_hog {
	int cpu;
	uint64_t spin_ms;
	int spinning; /* atomic */
};

/* /proc/self/task/<tid>/schedstat's run_delay (ns), the second field. */
static uint64_t run_delay_of(pid_t tid)
{
	unsigned long long on_cpu, delay;
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", (int)tid);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%llu %llu", &on_cpu, &delay), 2);
	fclose(f);
	return delay;
}

static void pin_to(pid_t tid, int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	assert_int_equal(sched_setaffinity(tid, sizeof(set), &set), 0);
}

static void *stall_victim(void *arg)
{
	struct stall_victim *v = arg;
	uint64_t before;
	char c;

	v->tid = gettid();
	prctl(PR_SET_NAME, "ktel-rq-victim");
	pin_to(0, v->cpu);
	for (int i = 0; i < 5; i++) /* switch-ins the plugin sees before the stall */
		usleep(1000);
	before = run_delay_of(v->tid);
	__atomic_store_n(&v->ready, 1, __ATOMIC_RELEASE);
	if (read(v->pipe_r, &c, 1) != 1)
		return NULL;
	v->delay_ns = run_delay_of(v->tid) - before;
	return NULL;
}

static void *stall_hog(void *arg)
{
	struct stall_hog *h = arg;
	struct sched_param sp = {.sched_priority = 1};
	uint64_t until;

	pin_to(0, h->cpu);
	if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) != 0)
		return NULL;
	until = mono_ns() + h->spin_ms * 1000000;
	__atomic_store_n(&h->spinning, 1, __ATOMIC_RELEASE);
	while (mono_ns() < until)
		;
	return NULL;
}

/*
 * A stall of known length. A SCHED_OTHER victim on CPU 1 blocks on a pipe;
 * a SCHED_FIFO hog takes CPU 1 for 150 ms, and the test (on CPU 0) wakes
 * the victim, which waits behind the hog. Once it waits the whole of it on
 * CPU 1; once the test moves it to CPU 0 after about 50 ms of waiting, the part
 * waited on CPU 1 going to run_delay at the move. Each time the victim's
 * one event has the wait its /proc schedstat run_delay grew by from its
 * block to its run: the scheduler's own measure, kept whole across the
 * move (without the carry the moved wait would be only the part on CPU 0,
 * far under the threshold). The victim's reads bracket only that wait, but
 * on a busy machine it can be preempted again before its second read: up
 * to 1 ms more run_delay than the event is allowed for.
 */
static void test_runq_stall_is_run_delay(void **state)
{
	static const int64_t threshold[] = {10000};
	struct ktel_plugin *p;
	struct ktel_bpf_plugin *bp;
	cpu_set_t was;
	int moved;

	(void)state;
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		skip();
	assert_int_equal(sched_getaffinity(0, sizeof(was), &was), 0);
	p = open_plugin(KTEL_PLUGIN_DIR, "runq_stall_events");
	bp = load_form(p, threshold, false);
	expect_stall_form(bp, false);
	pin_to(0, 0);
	for (moved = 0; moved <= 1; moved++) {
		struct stall_victim v = {.cpu = 1};
		struct stall_hog h = {.cpu = 1, .spin_ms = 150};
		struct kept *k = calloc(1, sizeof(*k));
		struct ktel_stream_reader *sr;
		pthread_t vt, ht;
		size_t found = 0;
		uint64_t wait_us = 0, woken;
		int fds[2];
		uv_loop_t loop;

		assert_non_null(k);
		assert_int_equal(pipe(fds), 0);
		v.pipe_r = fds[0];
		uv_loop_init(&loop);
		sr = reader(&loop, p, bp, "runq_stall_events", on_records, k);
		start(sr);
		assert_int_equal(pthread_create(&vt, NULL, stall_victim, &v), 0);
		while (!__atomic_load_n(&v.ready, __ATOMIC_ACQUIRE))
			usleep(1000);
		usleep(10000); /* blocked on the pipe by now */
		assert_int_equal(pthread_create(&ht, NULL, stall_hog, &h), 0);
		while (!__atomic_load_n(&h.spinning, __ATOMIC_ACQUIRE))
			usleep(1000);
		woken = mono_ns();
		assert_int_equal(write(fds[1], "x", 1), 1);
		if (moved) {
			ktel_test_run_for(&loop, 50);
			pin_to(v.tid, 0);
		}
		ktel_test_run_for(&loop, 300);
		pthread_join(ht, NULL);
		pthread_join(vt, NULL);
		ktel_test_run_for(&loop, 100);
		for (size_t i = 0; i < k->n && i < MAX_KEPT; i++)
			if (field_i(&k->recs[i], "tid") == v.tid) {
				printf("  victim event at %+lld us of the wakeup: wait_us %llu "
				       "cpu %llu\n",
				       ((long long)field_u(&k->recs[i], "ts_ns") -
					(long long)woken) /
					       1000,
				       (unsigned long long)field_u(&k->recs[i], "wait_us"),
				       (unsigned long long)field_u(&k->recs[i], "cpu"));
				if (field_u(&k->recs[i], "ts_ns") < woken)
					continue; /* a wait before its block */
				found++;
				wait_us = field_u(&k->recs[i], "wait_us");
				assert_string_equal(field_s(&k->recs[i], "comm"), "ktel-rq-victim");
				assert_int_equal(field_i(&k->recs[i], "pid"), getpid());
				assert_int_equal(field_u(&k->recs[i], "cpu"), moved ? 0 : 1);
			}
		printf("%s: run_delay grew %llu ns; %zu event(s), wait_us %llu\n",
		       moved ? "moved to CPU 0" : "on CPU 1", (unsigned long long)v.delay_ns, found,
		       (unsigned long long)wait_us);
		assert_int_equal(found, 1);
		assert_true(v.delay_ns >= (moved ? 20 : 140) * 1000000ULL);
		assert_true(wait_us <= v.delay_ns / 1000);
		assert_true(v.delay_ns / 1000 - wait_us <= 1000);
		free_reader(&loop, sr);
		assert_int_equal(uv_loop_close(&loop), 0);
		close(fds[0]);
		close(fds[1]);
		free(k);
	}
	sched_setaffinity(0, sizeof(was), &was);
	ktel_bpf_plugin__free(bp);
	ktel_plugin__free(p);
}

/* ---- setup ------------------------------------------------------------- */

static int setup(void **state)
{
	return test_pin_root_setup(&pins, "stream", (gid_t)-1);
}

static int teardown(void **state)
{
	return test_pin_root_teardown(&pins);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flood_lost_matches),
		cmocka_unit_test(test_flood_burst_counted),
		cmocka_unit_test(test_decode_live_to_json),
		cmocka_unit_test(test_budget_yields),
		cmocka_unit_test(test_stop_drains_ring),
		cmocka_unit_test(test_oom_event),
		cmocka_unit_test(test_runq_threshold_param),
		cmocka_unit_test(test_runq_stall_is_run_delay),
	};

	ktel_test_require_root("test_stream");
	return cmocka_run_group_tests(tests, setup, teardown);
}
