// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ktel-bench-pull-cost: the cost of one pull of one histogram map of 10, 1k,
 * 10k and 100k keys (key: struct {u32 id; u32 cpu}, value: struct
 * accumulator_value, 32 u64 buckets), by four methods in one run:
 *
 *   pull     ktel_metric_pull__run(): what the daemon does - one batch read
 *            (core/map_reader), decode (core/btf_layout), delta (core/delta)
 *            and records (core/base/record.h)
 *   batch    map_reader batch read + layout decode + delta, no records
 *   iterate  the same with force_fallback: get_next_key + lookup_elem per key
 *   bpftool  `bpftool map dump id N -j` (fork/exec, BTF-formatted JSON)
 *            parsed with jansson, the buckets taken from "formatted", delta
 *   save     ktel_delta__save() of the state after a batch pull (the daemon
 *            saves after a pull that changed the state), to /tmp
 *   snapshot ktel_delta__snapshot() alone: the part of the save done on the
 *            daemon's loop (the file is written on libuv's pool)
 *
 * The methods are interleaved: each repetition pulls once with every
 * selected method in turn, so their ratios hold on a shared machine.
 *
 * Before every timed pull all values change (one untimed update_batch), so
 * each pull has a full delta to compute. Reported: median and min wall time
 * over the repetitions (the first pull of each method is a warm-up and not
 * counted), bpf() syscalls per pull (the reader's count; strace -c for
 * bpftool), and heap allocations per steady-state pull made by ktel_core
 * (malloc/calloc/realloc wrapped at link time; libbpf, jansson and libc
 * internals are not counted, so bpftool's column is n/a).
 *
 * With pull and batch both run, a line gives pull / batch as the ratio of the
 * wall medians, the median of the per-repetition ratios and the ratio of the
 * CPU-time medians.
 *
 * Needs root. Prints figures; never passes or fails on them.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <jansson.h>

#include "btf_layout.h"
#include "delta.h"
#include "error.h"
#include "map_reader.h"
#include "metric_pull.h"

#define NBUCKETS 32
#define MAX_REPS 200
#define METRIC "bench_hist"

struct bench_key {
	__u32 id;
	__u32 cpu;
};

struct bench_value {
	__u64 buckets[NBUCKETS];
};

/* Heap allocations made by statically linked code (ktel_core and this file). */
static unsigned long n_allocs;

#ifdef KTEL_BENCH_COUNT_ALLOCS
void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);

void *__wrap_malloc(size_t size)
{
	n_allocs++;
	return __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
	n_allocs++;
	return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size)
{
	n_allocs++;
	return __real_realloc(p, size);
}
#endif

/* Everything one map size needs. */
struct bench {
	size_t n;
	struct bpf_object *obj;
	struct bpf_map *map;
	int fd;
	__u32 map_id;
	struct bench_key *keys;
	struct bench_value *vals;
	unsigned int bumps;
	const struct ktel_layout *klayout, *vlayout;
	struct ktel_layout *kl_own, *vl_own;
};

struct method_result {
	const char *name;
	double ms[MAX_REPS];
	double cpu_ms[MAX_REPS]; /* the thread's CPU time of the same pulls */
	int reps;
	unsigned int syscalls;
	long allocs; /* per steady-state pull; -1: not measured */
	size_t keys;
	bool ok;
};

static const char *obj_path = KTEL_BENCH_PULL_OBJ;
static const char *bpftool_bin = "bpftool";
static int reps_override;
static unsigned int method_mask = ~0U; /* -m selects methods */
static char state_path[64];            /* the save method's state file */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* This thread's CPU time: unlike wall time, it leaves out the time other
 * processes of a shared machine held the CPU (cache and memory contention
 * with them stay in). */
static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(const double *v, int n, double *ret_min)
{
	double s[MAX_REPS];

	memcpy(s, v, sizeof(*v) * (size_t)n);
	qsort(s, (size_t)n, sizeof(*s), cmp_double);
	*ret_min = s[0];
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* Change every value (one bucket of each key + 1) with one untimed syscall. */
static int bump(struct bench *b)
{
	__u32 count = (__u32)b->n;
	unsigned int k = b->bumps++ % NBUCKETS;

	for (size_t i = 0; i < b->n; i++)
		b->vals[i].buckets[k]++;
	return bpf_map_update_batch(b->fd, b->keys, b->vals, &count, NULL);
}

static int bench_open(struct bench *b, size_t n)
{
	struct bpf_map_info info;
	__u32 len = sizeof(info), count = (__u32)n;
	struct ktel_err err = {0};
	struct btf *btf;
	int r;

	memset(b, 0, sizeof(*b));
	b->n = n;
	b->obj = bpf_object__open_file(obj_path, NULL);
	if (!b->obj)
		return -errno;
	b->map = bpf_object__find_map_by_name(b->obj, "bench_hist_map");
	if (!b->map)
		return -ENOENT;
	bpf_map__set_max_entries(b->map, (__u32)n);
	r = bpf_object__load(b->obj);
	if (r)
		return r;
	b->fd = bpf_map__fd(b->map);
	memset(&info, 0, sizeof(info));
	r = bpf_obj_get_info_by_fd(b->fd, &info, &len);
	if (r)
		return r;
	b->map_id = info.id;
	b->keys = calloc(n, sizeof(*b->keys));
	b->vals = calloc(n, sizeof(*b->vals));
	if (!b->keys || !b->vals)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		b->keys[i].id = (__u32)i;
		b->keys[i].cpu = (__u32)(i % 4);
		for (int k = 0; k < NBUCKETS; k++)
			b->vals[i].buckets[k] = (i * 7 + (size_t)k) % 1000;
	}
	r = bpf_map_update_batch(b->fd, b->keys, b->vals, &count, NULL);
	if (r)
		return r;
	btf = bpf_object__btf(b->obj);
	r = ktel_layout__new(btf, bpf_map__btf_key_type_id(b->map), sizeof(struct bench_key),
			     &b->kl_own, &err);
	if (!r)
		r = ktel_layout__new(btf, bpf_map__btf_value_type_id(b->map),
				     sizeof(struct bench_value), &b->vl_own, &err);
	if (r) {
		fprintf(stderr, "pull_cost: layout: %s\n", err.msg);
		return r;
	}
	b->klayout = b->kl_own;
	b->vlayout = b->vl_own;
	return 0;
}

static void bench_close(struct bench *b)
{
	ktel_layout__free(b->kl_own);
	ktel_layout__free(b->vl_own);
	free(b->keys);
	free(b->vals);
	bpf_object__close(b->obj);
}

static struct ktel_delta *delta_new(size_t n)
{
	struct ktel_delta *d = ktel_delta__new(ktel_boot_id());

	/* The default entry limit (65536) would refuse part of 100k keys. */
	if (d && ktel_delta__set_max_entries(d, n))
		ktel_delta__free(d), d = NULL;
	return d;
}

/*
 * Decode one entry with the layouts and feed it to the delta engine: what a
 * pull does per key, minus building the record.
 */
static int decode_apply(const struct bench *b, struct ktel_delta_metric *dm, const void *key,
			const void *val)
{
	const struct ktel_field *hist = &b->vlayout->fields[b->vlayout->hist_field];
	uint64_t cur[NBUCKETS], delta[NBUCKETS], dims = 0;
	const struct ktel_delta_reading in = {
		.key = key,
		.key_size = sizeof(struct bench_key),
		.vals = cur,
		.n = b->vlayout->n_buckets,
	};
	int r;

	for (__u32 i = 0; i < b->klayout->n_fields; i++)
		dims += ktel_field_read_u64(&b->klayout->fields[i], key);
	for (__u32 k = 0; k < b->vlayout->n_buckets; k++)
		cur[k] = ktel_field_read_elem_u64(hist, val, k);
	(void)dims;
	r = ktel_delta__apply(dm, &in, delta);
	return r < 0 ? r : 0;
}

/* One pull with a map reader (batch or iterate) + decode + delta. */
static int reader_pull(struct bench *b, struct ktel_map_reader *rd, struct ktel_delta *d,
		       struct method_result *res)
{
	struct ktel_map_snapshot snap;
	struct ktel_delta_metric *dm;
	struct ktel_err err = {0};
	int r;

	r = ktel_map_reader__read(rd, &snap, &err);
	if (r) {
		fprintf(stderr, "pull_cost: read: %s\n", err.msg);
		return r;
	}
	r = ktel_delta__begin(d, METRIC, b->map_id, true, &dm, NULL);
	for (size_t i = 0; !r && i < snap.count; i++)
		r = decode_apply(b, dm, (const char *)snap.keys + i * snap.key_size,
				 (const char *)snap.values + i * snap.value_size);
	if (r)
		return r;
	r = ktel_delta__end(d, METRIC);
	res->syscalls = snap.stats.syscalls;
	res->keys = snap.count;
	return r < 0 ? r : 0;
}

/* The read alone, to split a pull's time into read and decode + delta. */
static int reader_read(struct ktel_map_reader *rd, struct method_result *res)
{
	struct ktel_map_snapshot snap;
	struct ktel_err err = {0};
	int r = ktel_map_reader__read(rd, &snap, &err);

	if (r) {
		fprintf(stderr, "pull_cost: read: %s\n", err.msg);
		return r;
	}
	res->syscalls = snap.stats.syscalls;
	res->keys = snap.count;
	return 0;
}

/* Parse bpftool's JSON and feed each entry to the delta engine. */
static int bpftool_apply(const struct bench *b, struct ktel_delta *d, json_t *root,
			 size_t *ret_keys)
{
	struct ktel_delta_metric *dm;
	size_t i;
	json_t *el;
	int r = ktel_delta__begin(d, METRIC, b->map_id, true, &dm, NULL);

	json_array_foreach(root, i, el) {
		json_t *fk = json_object_get(json_object_get(el, "formatted"), "key");
		json_t *fv = json_object_get(json_object_get(el, "formatted"), "value");
		json_t *bk = json_object_get(fv, "buckets");
		struct bench_key key = {
			.id = (__u32)json_integer_value(json_object_get(fk, "id")),
			.cpu = (__u32)json_integer_value(json_object_get(fk, "cpu")),
		};
		uint64_t cur[NBUCKETS], delta[NBUCKETS];
		const struct ktel_delta_reading in = {
			.key = &key,
			.key_size = sizeof(key),
			.vals = cur,
			.n = NBUCKETS,
		};

		if (r)
			break;
		if (json_array_size(bk) != NBUCKETS)
			return -EBADMSG;
		for (size_t k = 0; k < NBUCKETS; k++)
			cur[k] = (uint64_t)json_integer_value(json_array_get(bk, k));
		r = ktel_delta__apply(dm, &in, delta);
		r = r < 0 ? r : 0;
	}
	if (r)
		return r;
	*ret_keys = i;
	r = ktel_delta__end(d, METRIC);
	return r < 0 ? r : 0;
}

static int bpftool_pull(struct bench *b, struct ktel_delta *d, struct method_result *res)
{
	char id[16];
	int pipefd[2], status, r;
	json_error_t jerr;
	json_t *root;
	FILE *f;
	pid_t pid;

	snprintf(id, sizeof(id), "%u", b->map_id);
	if (pipe(pipefd))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		dup2(pipefd[1], 1);
		close(pipefd[0]);
		close(pipefd[1]);
		execlp(bpftool_bin, bpftool_bin, "map", "dump", "id", id, "-j", (char *)NULL);
		_exit(127);
	}
	close(pipefd[1]);
	f = fdopen(pipefd[0], "r");
	root = json_loadf(f, 0, &jerr);
	fclose(f);
	waitpid(pid, &status, 0);
	if (!root) {
		fprintf(stderr, "pull_cost: bpftool output: %s\n", jerr.text);
		return -EBADMSG;
	}
	r = bpftool_apply(b, d, root, &res->keys);
	json_decref(root);
	return r;
}

/* bpf() calls one `bpftool map dump` makes, counted by strace -c. */
static unsigned int bpftool_syscalls(const struct bench *b)
{
	char cmd[512], line[256], path[] = "/tmp/ktel-bench-strace-XXXXXX";
	unsigned int calls = 0;
	int fd = mkstemp(path);
	FILE *f;

	if (fd < 0)
		return 0;
	close(fd);
	snprintf(cmd, sizeof(cmd),
		 "strace -f -qq -c -e trace=bpf -o %s %s map dump id %u -j >/dev/null 2>&1", path,
		 bpftool_bin, b->map_id);
	if (system(cmd) == 0 && (f = fopen(path, "r"))) {
		while (fgets(line, sizeof(line), f)) {
			char name[32] = "";
			unsigned int c;
			double pct, secs;
			unsigned long us;

			if (sscanf(line, "%lf %lf %lu %u %*s %31s", &pct, &secs, &us, &c, name) >=
				    4 &&
			    (strstr(line, " bpf\n")))
				calls = c;
		}
		fclose(f);
	}
	unlink(path);
	return calls;
}

static const struct ktel_dimension_desc bench_dims[] = {
	{.name = "id"},
	{.name = "cpu"},
};

static const struct ktel_metric_desc bench_md = {
	.struct_size = sizeof(struct ktel_metric_desc),
	.name = METRIC,
	.atom_name = "BenchHist",
	.map_name = "bench_hist_map",
	.model = KTEL_MODEL_ACCUMULATOR,
	.unit = "us",
	.scheme = KTEL_HIST_LOG2,
	.dims = bench_dims,
	.n_dims = 2,
};

enum method {
	M_PULL,
	M_BATCH,
	M_ITERATE,
	M_BPFTOOL,
	M_READ_BATCH,
	M_READ_ITER,
	M_SAVE,
	M_SNAPSHOT,
	M_COUNT
};
static const char *const method_names[M_COUNT] = {"pull",       "batch",     "iterate", "bpftool",
						  "read-batch", "read-iter", "save",    "snapshot"};

static int reps_for(size_t n, enum method m)
{
	if (reps_override)
		return reps_override;
	if (m == M_BPFTOOL)
		return n <= 1000 ? 11 : n <= 10000 ? 5 : 3;
	if (m == M_READ_BATCH || m == M_READ_ITER || m == M_SAVE || m == M_SNAPSHOT)
		return n <= 10000 ? 51 : 11;
	return n <= 1000 ? 51 : n <= 10000 ? 21 : 7;
}

/* One pull of method m; the heap allocations it made go to *ret_allocs. */
static int pull_once(struct bench *b, enum method m, struct ktel_metric_pull *mp,
		     struct ktel_map_reader *rd, struct ktel_delta *d, struct method_result *res,
		     double *ret_ms, double *ret_cpu_ms, unsigned long *ret_allocs)
{
	struct ktel_pull_info info;
	struct ktel_err err = {0};
	unsigned long a0;
	uint64_t t0, c0;
	int r;

	r = bump(b);
	if (r)
		return r;
	a0 = n_allocs;
	c0 = cpu_ns();
	t0 = now_ns();
	switch (m) {
	case M_PULL:
		r = ktel_metric_pull__run(mp, d, ktel_boot_id(), NULL, NULL, &info, &err);
		res->syscalls = info.syscalls;
		res->keys = info.keys;
		break;
	case M_BATCH:
	case M_ITERATE:
		r = reader_pull(b, rd, d, res);
		break;
	case M_READ_BATCH:
	case M_READ_ITER:
		r = reader_read(rd, res);
		break;
	case M_SAVE:
		/* The state save the daemon does after a pull that changed it:
		 * the batch pull is not timed, the save of its state is. */
		r = reader_pull(b, rd, d, res);
		c0 = cpu_ns();
		t0 = now_ns();
		if (!r)
			r = ktel_delta__save(d, state_path, &err);
		res->syscalls = 0;
		break;
	case M_SNAPSHOT: {
		/* The part of the save left on the daemon's loop: the snapshot
		 * (the file is written on libuv's pool). */
		struct ktel_delta_snapshot snap;

		r = reader_pull(b, rd, d, res);
		c0 = cpu_ns();
		t0 = now_ns();
		if (!r)
			r = ktel_delta__snapshot(d, &snap, &err);
		if (!r)
			ktel_delta_snapshot__clear(&snap);
		res->syscalls = 0;
		break;
	}
	default:
		r = bpftool_pull(b, d, res);
		break;
	}
	*ret_ms = (double)(now_ns() - t0) / 1e6;
	*ret_cpu_ms = (double)(cpu_ns() - c0) / 1e6;
	*ret_allocs = n_allocs - a0;
	if (r && err.msg[0])
		fprintf(stderr, "pull_cost: %s: %s\n", method_names[m], err.msg);
	return r;
}

/* One method's reader, pull and delta engine, kept across its pulls. */
struct method_state {
	struct ktel_metric_pull *mp;
	struct ktel_map_reader *rd;
	struct ktel_delta *d;
	unsigned long max_allocs;
	int reps;
};

static int method_open(struct bench *b, enum method m, struct method_state *ms,
		       struct method_result *res)
{
	struct ktel_map_reader_opts opts = {.force_fallback = m == M_ITERATE || m == M_READ_ITER};
	struct ktel_err err = {0};
	int r;

	res->name = method_names[m];
	ms->reps = reps_for(b->n, m);
	ms->d = delta_new(b->n);
	r = ms->d ? 0 : -ENOMEM;
	if (!r && m == M_PULL)
		r = ktel_metric_pull__new(&bench_md, b->obj, true, &ms->mp, &err);
	else if (!r && m != M_BPFTOOL)
		r = ktel_map_reader__new(b->fd, &opts, &ms->rd, &err);
	if (r)
		fprintf(stderr, "pull_cost: %s: %s\n", res->name,
			err.msg[0] ? err.msg : strerror(-r));
	return r;
}

static void method_close(struct method_state *ms)
{
	ktel_metric_pull__free(ms->mp);
	ktel_map_reader__free(ms->rd);
	ktel_delta__free(ms->d);
}

/*
 * Every selected method for one map size, interleaved: repetition i pulls
 * once with each method in turn, so that load from outside (a shared
 * machine) falls on all of them alike and their ratios hold within a run.
 * The first pull of each method is a warm-up (it builds the delta state).
 */
static int run_methods(struct bench *b, struct method_result *res)
{
	struct method_state ms[M_COUNT] = {0};
	unsigned long allocs;
	bool on[M_COUNT] = {0};
	int r = 0, max_reps = 0;
	double ms_warm, cpu_warm;

	for (int m = 0; !r && m < M_COUNT; m++) {
		if (!(method_mask & (1U << m)))
			continue;
		r = method_open(b, (enum method)m, &ms[m], &res[m]);
		on[m] = !r;
		if (!r && ms[m].reps > max_reps)
			max_reps = ms[m].reps;
	}
	for (int m = 0; !r && m < M_COUNT; m++)
		if (on[m])
			r = pull_once(b, (enum method)m, ms[m].mp, ms[m].rd, ms[m].d, &res[m],
				      &ms_warm, &cpu_warm, &allocs);
	for (int i = 0; !r && i < max_reps; i++)
		for (int m = 0; !r && m < M_COUNT; m++) {
			if (!on[m] || i >= ms[m].reps)
				continue;
			r = pull_once(b, (enum method)m, ms[m].mp, ms[m].rd, ms[m].d, &res[m],
				      &res[m].ms[i], &res[m].cpu_ms[i], &allocs);
			if (allocs > ms[m].max_allocs)
				ms[m].max_allocs = allocs;
		}
	for (int m = 0; !r && m < M_COUNT; m++) {
		if (!on[m])
			continue;
		res[m].reps = ms[m].reps;
#ifdef KTEL_BENCH_COUNT_ALLOCS
		res[m].allocs = m == M_BPFTOOL || m == M_SAVE || m == M_SNAPSHOT
					? -1
					: (long)ms[m].max_allocs;
#else
		res[m].allocs = -1;
#endif
		if (m == M_BPFTOOL)
			res[m].syscalls = bpftool_syscalls(b);
		res[m].ok = true;
	}
	for (int m = 0; m < M_COUNT; m++)
		method_close(&ms[m]);
	unlink(state_path);
	return r;
}

/*
 * pull / batch three ways: the ratio of the wall medians (the table's), the
 * median of the per-repetition ratios (pull i and batch i ran at the same
 * moment, so a burst of outside load falls on both), and the ratio of the
 * CPU-time medians (time other processes held the CPU left out).
 */
static void print_pull_batch(const struct method_result *p, const struct method_result *b)
{
	double ratio[MAX_REPS], mn, pw, bw, pc, bc;
	int n = p->reps < b->reps ? p->reps : b->reps;

	if (!p->ok || !b->ok || !n)
		return;
	for (int i = 0; i < n; i++)
		ratio[i] = b->ms[i] > 0 ? p->ms[i] / b->ms[i] : 0;
	pw = median(p->ms, p->reps, &mn);
	bw = median(b->ms, b->reps, &mn);
	pc = median(p->cpu_ms, p->reps, &mn);
	bc = median(b->cpu_ms, b->reps, &mn);
	printf("  pull / batch: %.3f (wall medians), %.3f (median of per-rep ratios), "
	       "%.3f (CPU-time medians)\n",
	       bw > 0 ? pw / bw : 0, median(ratio, n, &mn), bc > 0 ? pc / bc : 0);
}

static void print_size(size_t n, struct method_result *res)
{
	double base_min,
		base = res[M_PULL].ok ? median(res[M_PULL].ms, res[M_PULL].reps, &base_min) : 0;

	printf("\n%zu keys (value 256 bytes, key 8 bytes)\n", n);
	printf("  %-8s %10s %10s %9s %10s %8s %7s %8s %8s\n", "method", "median ms", "min ms",
	       "ns/key", "syscalls", "allocs", "reps", "x pull", "cpu ms");
	for (int m = 0; m < M_COUNT; m++) {
		struct method_result *r = &res[m];
		double mn, med, cpu;
		char allocs[16] = "n/a";

		if (!r->ok) {
			if (method_mask & (1U << m))
				printf("  %-8s (failed)\n", method_names[m]);
			continue;
		}
		cpu = median(r->cpu_ms, r->reps, &mn);
		med = median(r->ms, r->reps, &mn);
		if (r->allocs >= 0)
			snprintf(allocs, sizeof(allocs), "%ld", r->allocs);
		printf("  %-8s %10.3f %10.3f %9.1f %10u %8s %7d %8.2f %8.3f\n", r->name, med, mn,
		       med * 1e6 / (double)(r->keys ? r->keys : 1), r->syscalls, allocs, r->reps,
		       base > 0 ? med / base : 0, cpu);
		if (r->keys != n)
			printf("  %-8s WARNING: read %zu keys, expected %zu\n", "", r->keys, n);
	}
	print_pull_batch(&res[M_PULL], &res[M_BATCH]);
}

/* libbpf's info lines (".ktel.types skipped") are noise here. */
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return level == LIBBPF_WARN ? vfprintf(stderr, fmt, ap) : 0;
}

int main(int argc, char **argv)
{
	static const size_t default_sizes[] = {10, 1000, 10000, 100000};
	size_t sizes[8];
	int n_sizes = 0, o, rc = 0;

	while ((o = getopt(argc, argv, "s:r:o:b:m:h")) != -1) {
		switch (o) {
		case 'm':
			if (method_mask == ~0U)
				method_mask = 0;
			for (int m = 0; m < M_COUNT; m++)
				if (!strcmp(optarg, method_names[m]))
					method_mask |= 1U << m;
			break;
		case 's':
			if (n_sizes < 8)
				sizes[n_sizes++] = strtoul(optarg, NULL, 10);
			break;
		case 'r':
			reps_override = atoi(optarg);
			break;
		case 'o':
			obj_path = optarg;
			break;
		case 'b':
			bpftool_bin = optarg;
			break;
		default:
			fprintf(o == 'h' ? stdout : stderr,
				"usage: ktel-bench-pull-cost [-s KEYS]... [-m METHOD]... [-r REPS] [-o OBJ]\n"
				"                            [-b BPFTOOL]\n");
			return o == 'h' ? 0 : 2;
		}
	}
	if (reps_override < 0 || reps_override > MAX_REPS) {
		fprintf(stderr, "pull_cost: 1 <= REPS <= %d\n", MAX_REPS);
		return 2;
	}
	libbpf_set_print(libbpf_print);
	snprintf(state_path, sizeof(state_path), "/tmp/ktel-bench-state-%d", (int)getpid());
	if (!n_sizes) {
		memcpy(sizes, default_sizes, sizeof(default_sizes));
		n_sizes = 4;
	}
	if (geteuid()) {
		fprintf(stderr, "pull_cost: needs root\n");
		return 77;
	}
	printf("method: one pull of one BPF hash map; every value changes before each pull\n"
	       "(untimed update_batch); wall time of the pull; first pull of each method not\n"
	       "counted; allocs = heap allocations by ktel_core in the worst steady-state pull.\n"
	       "x pull = median / median of 'pull' (the daemon's path); cpu ms = median of\n"
	       "the thread's CPU time of the same pulls (outside load's CPU time left out).\n"
	       "pull: ktel_metric_pull__run (read + decode + delta + records); batch/iterate:\n"
	       "map_reader (batch / get_next_key) + decode + delta; bpftool: map dump -j +\n"
	       "jansson + delta; read-*: the map_reader read alone; save: ktel_delta__save of\n"
	       "the state after a batch pull; snapshot: ktel_delta__snapshot alone (what of the\n"
	       "save stays on the daemon's loop). Methods interleaved, one pull of each per rep.\n");
	for (int s = 0; s < n_sizes; s++) {
		struct method_result res[M_COUNT] = {};
		struct bench b;
		int r = bench_open(&b, sizes[s]);

		if (r) {
			fprintf(stderr, "pull_cost: map of %zu keys: %s\n", sizes[s], strerror(-r));
			bench_close(&b);
			rc = 1;
			continue;
		}
		if (run_methods(&b, res))
			rc = 1;
		print_size(sizes[s], res);
		bench_close(&b);
	}
	return rc;
}
