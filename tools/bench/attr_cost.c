// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ktel-bench-attr-cost: what attribution adds to each event of the real
 * runq_latency and block_io_latency programs (the plugins' own BPF objects
 * from the build tree), under the same generated events:
 *
 *   before  the program as it was before attribution existed (an object
 *           built from git history, given with --old-runq / --old-block;
 *           tools/bench/attr_cost.sh builds them)
 *   off     today's object, attribution off (by none: the key's attr stays 0)
 *   cgroup  by cgroup, depth 0 (the subject's own cgroup)
 *   bio     block only: by cgroup from the cgroup the kernel put in the
 *           bio (<map>_attr_blkcg = 1, no submit program), as the daemon
 *           loads it where the io controller is on cgroup v2; forced here
 *           whatever the host's hierarchy (on a hybrid one the ids are v1
 *           ids, which costs the same loads)
 *   user    by user
 *   empty   block only: off, with an empty program on the submit tracepoint
 *           beside it (attr_empty.bpf.c): what one more program per request
 *           costs when it does nothing, the least that recording the
 *           submitter can cost
 *
 * Each object is set up as the daemon sets it (the .rodata settings, the map
 * grown by max_keys = 1024, block_insert left out where block_io_start
 * exists, both submit programs left out with attribution off and in bio)
 * and loaded once. A repetition attaches each
 * configuration in turn (the order rotates every repetition), generates the
 * same events, and detaches it:
 *
 *   runq   two threads pinned to one CPU pass a byte back and forth over
 *          two pipes: every pass is a wakeup and a switch to a task that
 *          waited on the run queue
 *   block  4 KiB O_DIRECT reads at pseudo-random offsets of a block device
 *          (-d; attr_cost.sh makes a loop device over a cached file)
 *
 * Two measures (-m):
 *
 *   body   (the default) with BPF_ENABLE_STATS held for the whole run: each
 *          program's run time and run count (bpf_stats: the body only,
 *          without the tracepoint's dispatch), and the histogram counts the
 *          run added (the events recorded). The figure is the programs'
 *          summed body time per recorded event. Every program in every
 *          attached run is counted, including events of other tasks of the
 *          machine. bpf_stats' own clock reads are inside every body, so a
 *          configuration with one more program per event reads that much
 *          more than it costs.
 *   wall   with bpf_stats off (kernel.bpf_stats_enabled set to 0 for the
 *          run and restored): the time the workload itself takes per unit
 *          of work, which holds every program run of the event, dispatch
 *          included, and no measurement's own cost. block: each read is
 *          timed and a repetition's figure is the median of its reads, so a
 *          read that the hypervisor or an interrupt stretched does not move
 *          it; runq: the mean per pass. A sixth configuration, `none`, runs
 *          the same work with nothing attached.
 *
 * "added" is a configuration's figure minus the same repetition's `off`
 * figure, given as median and mean with 95% confidence intervals over the
 * repetitions. Noise-free companions: each program's instruction count
 * after verification (xlated) and its JIT size.
 *
 * Needs root. Prints figures and the method; never passes or fails on them.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <linux/fs.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "bench_stats.h"
#include "bpf_stats_off.h"
#include "bpf_lifecycle.h"

#define MAX_REPS 400
#define MAX_PROGS 4
#define MAX_CFGS 7
#define NBUCKETS 32
#define ATTR_LIMIT 1024
#define BY_NONE 0
#define BY_CGROUP 1
#define BY_USER 2

enum workload {
	W_RUNQ,
	W_BLOCK
};

struct cfg {
	const char *id;
	int by;      /* -1: an old object, no settings; -2: nothing attached */
	bool blkcg;  /* by cgroup from the bio's cgroup (block only) */
	bool empty;  /* off with an empty program at submit (block only) */
	bool exists; /* an object to measure */
	struct bpf_object *obj;
	struct bpf_object *empty_obj; /* the empty submit program's */
	struct bpf_program *progs[MAX_PROGS];
	int n_progs;
	/* per repetition */
	double body_ns[MAX_REPS][MAX_PROGS];
	uint64_t runs[MAX_REPS][MAX_PROGS];
	uint64_t events[MAX_REPS];
	double wall_ns[MAX_REPS]; /* generator's wall time per unit of work */
	double per_event[MAX_REPS];
};

struct bench {
	const char *name;
	enum workload w;
	const char *map;
	const char *obj_path;
	const char *old_path;
	struct cfg cfgs[MAX_CFGS];
	bool done;
};

static struct bench benches[] = {
	{.name = "runq", .w = W_RUNQ, .map = "runq_latency_map", .obj_path = KTEL_BENCH_RUNQ_OBJ},
	{.name = "block",
	 .w = W_BLOCK,
	 .map = "block_io_latency_map",
	 .obj_path = KTEL_BENCH_BLOCK_OBJ},
};

enum measure {
	M_BODY, /* bpf_stats' run time of the programs' bodies */
	M_WALL, /* the workload's own time per unit, bpf_stats off */
};

static enum measure measure = M_BODY;
static int reps = 100;
static long passes = 4000; /* runq: byte passes per attached run */
static long ios = 400;     /* block: reads per attached run */
static int cpu = -1;
static const char *device;
static const char *only;

/* libbpf's warnings, but not the one for the plugins' own .ktel.types
 * section (the daemon reads it, libbpf skips it). */
static int print_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG || strstr(fmt, "unrecognized data section"))
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* The statistics are bench_stats.h's. */
_Static_assert(MAX_REPS <= BENCH_STATS_MAX, "bench_stats.h takes every repetition");

/* ---- objects --------------------------------------------------------- */

static int set_rodata(struct bpf_object *obj, const char *map, int by, bool blkcg)
{
	static const char *const suffix[] = {"_attr_by", "_attr_depth", "_attr_limit",
					     "_attr_blkcg"};
	uint64_t values[] = {(uint64_t)by, 0, ATTR_LIMIT, 1};
	struct bpf_map *rodata = NULL, *m;
	unsigned char *data;
	const void *init;
	size_t size, off, vsize;
	char name[256];
	int rc = 0;

	bpf_object__for_each_map(m, obj)
		if (strstr(bpf_map__name(m), ".rodata"))
			rodata = m;
	init = rodata ? bpf_map__initial_value(rodata, &size) : NULL;
	if (!init)
		return -ENOENT;
	data = malloc(size);
	if (!data)
		return -ENOMEM;
	memcpy(data, init, size);
	for (int k = 0; k < (blkcg ? 4 : 3) && !rc; k++) {
		snprintf(name, sizeof(name), "%s%s", map, suffix[k]);
		rc = ktel_bpf_rodata_var(obj, name, &off, &vsize);
		if (!rc && off + vsize <= size) {
			if (vsize == 8) {
				memcpy(data + off, &values[k], 8);
			} else {
				uint32_t v = (uint32_t)values[k];

				memcpy(data + off, &v, 4);
			}
		}
	}
	rc = rc ?: bpf_map__set_initial_value(rodata, data, size);
	free(data);
	m = bpf_object__find_map_by_name(obj, map);
	if (!rc && by > 0 && m)
		rc = bpf_map__set_max_entries(m, bpf_map__max_entries(m) + ATTR_LIMIT);
	return rc;
}

/* Does the kernel have tracepoint tp (block_io_start came in 6.5)? */
static bool have_tracepoint(const char *tp)
{
	char path[256];

	snprintf(path, sizeof(path), "/sys/kernel/tracing/events/block/%s", tp);
	return access(path, F_OK) == 0;
}

/* The empty program on the submit tracepoint the block plugin would use. */
static int open_empty(struct cfg *c)
{
	const char *want = have_tracepoint("block_io_start") ? "empty_submit" : "empty_insert";
	struct bpf_program *p;
	int rc;

	c->empty_obj = bpf_object__open_file(KTEL_BENCH_EMPTY_OBJ, NULL);
	if (!c->empty_obj) {
		fprintf(stderr, "attr-cost: open %s: %s\n", KTEL_BENCH_EMPTY_OBJ, strerror(errno));
		return -errno;
	}
	bpf_object__for_each_program(p, c->empty_obj)
		bpf_program__set_autoload(p, !strcmp(bpf_program__name(p), want));
	rc = bpf_object__load(c->empty_obj);
	if (rc) {
		fprintf(stderr, "attr-cost: load %s: %s\n", KTEL_BENCH_EMPTY_OBJ, strerror(-rc));
		return rc;
	}
	p = bpf_object__find_program_by_name(c->empty_obj, want);
	if (!p || c->n_progs >= MAX_PROGS)
		return -ENOENT;
	c->progs[c->n_progs++] = p;
	return 0;
}

static int open_cfg(struct bench *b, struct cfg *c)
{
	const char *path = c->by == -1 ? b->old_path : b->obj_path;
	struct bpf_program *p, *stamp;
	int rc;

	if (c->by == -2) {
		c->exists = true;
		return 0;
	}
	c->obj = bpf_object__open_file(path, NULL);
	if (!c->obj) {
		fprintf(stderr, "attr-cost: open %s: %s\n", path, strerror(errno));
		return -errno;
	}
	if (c->by >= 0) {
		rc = set_rodata(c->obj, b->map, c->by, c->blkcg);
		if (rc) {
			fprintf(stderr, "attr-cost: %s: attribution settings: %s\n", path,
				strerror(-rc));
			return rc;
		}
	}
	/* The daemon's choice in the block_submit group: block_io_start where
	 * the kernel has it, block_rq_insert before; with attribution off
	 * neither (the descriptor's attr_progs), nor from the bio's cgroup
	 * (its attr_prog_flags). */
	/* runq_latency's forms: the daemon's first choice in every variant
	 * group is the scheduler's stamp (runq_switch_si), one program that
	 * stands for all three groups; the other forms are its fallbacks and
	 * never run beside it. An object without it (before) runs all of its
	 * programs. */
	stamp = bpf_object__find_program_by_name(c->obj, "runq_switch_si");
	bpf_object__for_each_program(p, c->obj) {
		const char *n = bpf_program__name(p);
		bool submit = !strcmp(n, "block_insert") || !strcmp(n, "block_submit");

		if (stamp && p != stamp)
			bpf_program__set_autoload(p, false);

		if (!strcmp(n, "block_insert") && have_tracepoint("block_io_start"))
			bpf_program__set_autoload(p, false);
		if (!strcmp(n, "block_submit") && !have_tracepoint("block_io_start"))
			bpf_program__set_autoload(p, false);
		if (submit && (c->by == BY_NONE || c->blkcg))
			bpf_program__set_autoload(p, false);
	}
	rc = bpf_object__load(c->obj);
	if (rc) {
		fprintf(stderr, "attr-cost: load %s (%s): %s\n", path, c->id, strerror(-rc));
		return rc;
	}
	bpf_object__for_each_program(p, c->obj)
		if (bpf_program__autoload(p) && c->n_progs < MAX_PROGS)
			c->progs[c->n_progs++] = p;
	if (c->empty) {
		rc = open_empty(c);
		if (rc)
			return rc;
	}
	c->exists = true;
	return 0;
}

static int prog_info(struct bpf_program *p, struct bpf_prog_info *info)
{
	__u32 len = sizeof(*info);

	memset(info, 0, sizeof(*info));
	return bpf_obj_get_info_by_fd(bpf_program__fd(p), info, &len);
}

/* Sum of every bucket of every key of the histogram map. */
static uint64_t hist_total(struct bpf_object *obj, const char *name)
{
	struct bpf_map *map = bpf_object__find_map_by_name(obj, name);
	unsigned char key[64], next[64];
	__u64 val[NBUCKETS + 1];
	uint64_t sum = 0;
	int fd = bpf_map__fd(map);
	void *prev = NULL;

	if (bpf_map__key_size(map) > sizeof(key) || bpf_map__value_size(map) > sizeof(val))
		return 0;
	while (!bpf_map_get_next_key(fd, prev, next)) {
		if (!bpf_map_lookup_elem(fd, next, val))
			for (int i = 0; i < NBUCKETS; i++)
				sum += val[i];
		memcpy(key, next, bpf_map__key_size(map));
		prev = key;
	}
	return sum;
}

/* ---- workloads ------------------------------------------------------- */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int pin(int c)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(c, &set);
	return sched_setaffinity(0, sizeof(set), &set) ? -errno : 0;
}

struct pingpong {
	int in, out;
	long n;
};

static void *pong(void *arg)
{
	struct pingpong *pp = arg;
	char c;

	pin(cpu);
	for (long i = 0; i < pp->n; i++)
		if (read(pp->in, &c, 1) != 1 || write(pp->out, &c, 1) != 1)
			break;
	return NULL;
}

/* passes byte passes between two threads on one CPU: ns per pass. */
static double run_runq(void)
{
	int a[2], b[2];
	struct pingpong pp;
	pthread_t t;
	uint64_t t0;
	char c = 'x';

	if (pipe(a) || pipe(b))
		return NAN;
	pp = (struct pingpong){.in = a[0], .out = b[1], .n = passes / 2};
	pthread_create(&t, NULL, pong, &pp);
	t0 = now_ns();
	for (long i = 0; i < passes / 2; i++)
		if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1)
			break;
	t0 = now_ns() - t0;
	pthread_join(t, NULL);
	close(a[0]);
	close(a[1]);
	close(b[0]);
	close(b[1]);
	return (double)t0 / (double)(passes / 2 * 2);
}

static int dev_fd = -1;
static uint64_t dev_blocks;
static uint64_t rng = 88172645463325252ULL;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/*
 * ios 4 KiB O_DIRECT reads: ns per read, the mean (body) or the median of
 * the reads each timed (wall: a read an interrupt or the hypervisor
 * stretched does not move it).
 */
static double run_block(void)
{
	static void *buf;
	static double *each;
	uint64_t t0, t1, first;

	if (!buf && posix_memalign(&buf, 4096, 4096))
		return NAN;
	if (!each && !(each = calloc((size_t)ios, sizeof(*each))))
		return NAN;
	first = t0 = now_ns();
	for (long i = 0; i < ios; i++) {
		if (pread(dev_fd, buf, 4096, (off_t)(next_rand() % dev_blocks) * 4096) != 4096)
			return NAN;
		t1 = now_ns();
		each[i] = (double)(t1 - t0);
		t0 = t1;
	}
	if (measure == M_BODY)
		return (double)(t0 - first) / (double)ios;
	qsort(each, (size_t)ios, sizeof(*each), cmp_double);
	return median_of_sorted(each, (int)ios);
}

static int open_device(void)
{
	uint64_t bytes = 0;

	dev_fd = open(device, O_RDONLY | O_DIRECT);
	if (dev_fd < 0 || ioctl(dev_fd, BLKGETSIZE64, &bytes) || bytes < 4096) {
		fprintf(stderr, "attr-cost: block device %s: %s\n", device,
			dev_fd < 0 ? strerror(errno) : "no size");
		return -EINVAL;
	}
	dev_blocks = bytes / 4096;
	return 0;
}

/* ---- the run --------------------------------------------------------- */

static int run_cfg(struct bench *b, struct cfg *c, int r)
{
	struct bpf_link *links[MAX_PROGS] = {};
	struct bpf_prog_info info;
	uint64_t t0[MAX_PROGS], n0[MAX_PROGS], e0 = c->obj ? hist_total(c->obj, b->map) : 0;
	double body = 0;
	int err = 0;

	for (int i = 0; i < c->n_progs; i++) {
		prog_info(c->progs[i], &info);
		t0[i] = info.run_time_ns;
		n0[i] = info.run_cnt;
	}
	for (int i = 0; i < c->n_progs; i++) {
		links[i] = bpf_program__attach(c->progs[i]);
		if (!links[i]) {
			err = -errno;
			fprintf(stderr, "attr-cost: attach %s: %s\n",
				bpf_program__name(c->progs[i]), strerror(errno));
			goto out;
		}
	}
	c->wall_ns[r] = b->w == W_RUNQ ? run_runq() : run_block();
out:
	for (int i = 0; i < c->n_progs; i++)
		bpf_link__destroy(links[i]);
	if (err)
		return err;
	for (int i = 0; i < c->n_progs; i++) {
		prog_info(c->progs[i], &info);
		c->runs[r][i] = info.run_cnt - n0[i];
		c->body_ns[r][i] = (double)(info.run_time_ns - t0[i]);
		body += c->body_ns[r][i];
		c->body_ns[r][i] /= c->runs[r][i] ? (double)c->runs[r][i] : 1;
	}
	c->events[r] = c->obj ? hist_total(c->obj, b->map) - e0 : 0;
	if (measure == M_WALL)
		c->per_event[r] = c->wall_ns[r];
	else
		c->per_event[r] = c->events[r] ? body / (double)c->events[r] : NAN;
	return 0;
}

static int run_bench(struct bench *b)
{
	static const struct {
		const char *id;
		int by;
		bool blkcg;
		bool empty;
	} kinds[MAX_CFGS] = {
		{"before", -1, false, false},        {"off", BY_NONE, false, false},
		{"cgroup", BY_CGROUP, false, false}, {"bio", BY_CGROUP, true, false},
		{"user", BY_USER, false, false},     {"empty", BY_NONE, false, true},
		{"none", -2, false, false},
	};
	int err, n = 0;

	for (int k = 0; k < MAX_CFGS; k++) {
		b->cfgs[k].id = kinds[k].id;
		b->cfgs[k].by = kinds[k].by;
		b->cfgs[k].blkcg = kinds[k].blkcg;
		b->cfgs[k].empty = kinds[k].empty;
		if ((kinds[k].by == -1 && !b->old_path) ||
		    ((kinds[k].blkcg || kinds[k].empty) && b->w != W_BLOCK) ||
		    (kinds[k].by == -2 && measure != M_WALL))
			continue;
		err = open_cfg(b, &b->cfgs[k]);
		if (err)
			return err;
		n++;
	}
	for (int r = 0; r < reps; r++)
		for (int k = 0; k < MAX_CFGS; k++) {
			struct cfg *c = &b->cfgs[(k + r) % MAX_CFGS];

			if (!c->exists)
				continue;
			err = run_cfg(b, c, r);
			if (err)
				return err;
		}
	b->done = true;
	return 0;
}

/* Program i of c's counterpart in off (same name), or -1. */
static int same_prog(const struct cfg *off, const struct cfg *c, int i)
{
	for (int j = 0; j < off->n_progs; j++)
		if (!strcmp(bpf_program__name(off->progs[j]), bpf_program__name(c->progs[i])))
			return j;
	return -1;
}

static void print_bench(struct bench *b)
{
	struct cfg *off = &b->cfgs[1], *none = &b->cfgs[MAX_CFGS - 1];
	double diff[MAX_REPS], v[MAX_REPS], m, h, lo, hi;
	struct bpf_prog_info info;

	printf("\n%s: %s, %d repetitions of %ld %s per configuration\n", b->name, b->obj_path, reps,
	       b->w == W_RUNQ ? passes : ios,
	       b->w == W_RUNQ ? "passes (wakeup + switch each)" : "4 KiB O_DIRECT reads");
	if (b->old_path)
		printf("  before: %s\n", b->old_path);
	if (measure == M_WALL)
		printf("wall ns per %s, bpf_stats off: median [95%% CI], mean ± CI95;\n"
		       "added = paired difference with off in the same repetition;\n"
		       "programs = paired difference with none (nothing attached)\n",
		       b->w == W_RUNQ ? "pass (the mean of the run's)"
				      : "read (the median of the run's)");
	else
		printf("body ns per recorded event (all programs): median [95%% CI], mean ± CI95;\n"
		       "added = paired difference with off in the same repetition\n");
	printf("%-7s %10s %24s %16s %26s %16s %9s", "cfg", "events/rep", "median [CI]", "mean±CI",
	       "added median [CI]", "added mean±CI", "wall/unit");
	printf(measure == M_WALL ? " %26s\n" : "\n", "programs median [CI]");
	for (int k = 0; k < MAX_CFGS; k++) {
		struct cfg *c = &b->cfgs[k];
		uint64_t ev = 0;

		if (!c->exists)
			continue;
		for (int r = 0; r < reps; r++) {
			ev += c->events[r];
			diff[r] = c->per_event[r] - off->per_event[r];
		}
		median_ci(c->per_event, reps, &m, &lo, &hi);
		printf("%-7s %10.0f %8.1f [%6.1f,%6.1f]", c->id, (double)ev / reps, m, lo, hi);
		mean_ci(c->per_event, reps, &m, &h);
		printf(" %7.1f ± %5.1f", m, h);
		if (c != off) {
			median_ci(diff, reps, &m, &lo, &hi);
			printf(" %10.1f [%6.1f,%6.1f]", m, lo, hi);
			mean_ci(diff, reps, &m, &h);
			printf(" %7.1f ± %5.1f", m, h);
		} else {
			printf(" %26s %16s", "-", "-");
		}
		printf(" %8.0fns", median(c->wall_ns, reps));
		if (measure == M_WALL && none->exists && c != none) {
			for (int r = 0; r < reps; r++)
				diff[r] = c->per_event[r] - none->per_event[r];
			median_ci(diff, reps, &m, &lo, &hi);
			printf(" %10.1f [%6.1f,%6.1f]", m, lo, hi);
		}
		printf("\n");
	}
	if (measure == M_WALL)
		printf("per program: instructions after verification (xlated), JIT bytes (no run\n"
		       "times or counts: bpf_stats is off)\n");
	else
		printf("per program: body ns/run median, added vs off's same program median "
		       "[95%% CI],\n"
		       "runs per recorded event, instructions after verification (xlated), JIT "
		       "bytes\n");
	for (int k = 0; k < MAX_CFGS; k++) {
		struct cfg *c = &b->cfgs[k];

		if (!c->exists || !c->obj)
			continue;
		for (int i = 0; i < c->n_progs; i++) {
			uint64_t runs = 0, ev = 0;
			int j = same_prog(off, c, i);

			for (int r = 0; r < reps; r++) {
				v[r] = c->body_ns[r][i];
				diff[r] = j >= 0 ? c->body_ns[r][i] - off->body_ns[r][j] : 0;
				runs += c->runs[r][i];
				ev += c->events[r];
			}
			prog_info(c->progs[i], &info);
			printf("  %-7s %-16s", c->id, bpf_program__name(c->progs[i]));
			if (measure == M_BODY)
				printf(" %8.1f", median(v, reps));
			if (measure == M_WALL) {
				/* No run times to compare. */
			} else if (c != off && j >= 0) {
				median_ci(diff, reps, &m, &lo, &hi);
				printf(" %+7.1f [%+6.1f,%+6.1f]", m, lo, hi);
			} else {
				printf(" %24s", "-");
			}
			if (measure == M_BODY)
				printf(" %6.2f runs/event", ev ? (double)runs / (double)ev : 0);
			printf(" %4u insns %5u bytes\n", info.xlated_prog_len / 8,
			       info.jited_prog_len);
		}
	}
}

static void print_machine(void)
{
	char model[256] = "?", line[512];
	struct utsname u;
	double load[3] = {0};
	FILE *f = fopen("/proc/cpuinfo", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "model name", 10)) {
			snprintf(model, sizeof(model), "%s", strchr(line, ':') + 2);
			model[strcspn(model, "\n")] = 0;
			break;
		}
	if (f)
		fclose(f);
	uname(&u);
	getloadavg(load, 3);
	printf("machine: %ld CPUs online, %s, kernel %s, load average %.2f\n",
	       sysconf(_SC_NPROCESSORS_ONLN), model, u.release, load[0]);
}

/* bpf_stats off for the wall measure (bpf_stats_off.h), said in the output. */
static void stats_off(void)
{
	int was, rc = bench_stats_off(&was);

	if (rc)
		printf("warning: bpf_stats is still on (%s; another process may hold "
		       "BPF_ENABLE_STATS): every program run pays its clock reads\n",
		       rc == -EBUSY ? "the sysctl still reads 1" : strerror(-rc));
	else
		printf("bpf_stats: off for the run (%s was %d)\n", BENCH_STATS_SYSCTL, was);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: ktel-bench-attr-cost [-m body|wall] [-r REPS] [-n PASSES] [-i IOS]\n"
		   "                            [-c CPU] [-d BLOCKDEV] [-C runq|block]\n"
		   "                            [--old-runq OBJ] [--old-block OBJ]\n"
		   "                            [--runq OBJ] [--block OBJ]\n");
}

static int parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{"measure", required_argument, NULL, 'm'},
		{"reps", required_argument, NULL, 'r'},
		{"passes", required_argument, NULL, 'n'},
		{"ios", required_argument, NULL, 'i'},
		{"cpu", required_argument, NULL, 'c'},
		{"device", required_argument, NULL, 'd'},
		{"only", required_argument, NULL, 'C'},
		{"old-runq", required_argument, NULL, 'R'},
		{"old-block", required_argument, NULL, 'B'},
		{"runq", required_argument, NULL, 'q'},
		{"block", required_argument, NULL, 'b'},
		{"help", no_argument, NULL, 'h'},
		{},
	};
	int o;

	while ((o = getopt_long(argc, argv, "m:r:n:i:c:d:C:h", opts, NULL)) != -1) {
		switch (o) {
		case 'm':
			if (!strcmp(optarg, "body")) {
				measure = M_BODY;
			} else if (!strcmp(optarg, "wall")) {
				measure = M_WALL;
			} else {
				fprintf(stderr, "attr-cost: -m %s: body or wall\n", optarg);
				return -EINVAL;
			}
			break;
		case 'r':
			reps = atoi(optarg);
			break;
		case 'n':
			passes = atol(optarg);
			break;
		case 'i':
			ios = atol(optarg);
			break;
		case 'c':
			cpu = atoi(optarg);
			break;
		case 'd':
			device = optarg;
			break;
		case 'C':
			only = optarg;
			break;
		case 'R':
			benches[W_RUNQ].old_path = optarg;
			break;
		case 'B':
			benches[W_BLOCK].old_path = optarg;
			break;
		case 'q':
			benches[W_RUNQ].obj_path = optarg;
			break;
		case 'b':
			benches[W_BLOCK].obj_path = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (reps < 2 || reps > MAX_REPS || passes < 2 || ios < 1) {
		fprintf(stderr, "attr-cost: need 2 <= REPS <= %d, PASSES >= 2, IOS >= 1\n",
			MAX_REPS);
		return -EINVAL;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int stats_fd, err = 0;

	if (parse_args(argc, argv))
		return 2;
	if (geteuid()) {
		fprintf(stderr, "attr-cost: needs root\n");
		return 77;
	}
	if (cpu < 0)
		cpu = (int)sysconf(_SC_NPROCESSORS_ONLN) - 1;
	if (pin(cpu)) {
		fprintf(stderr, "attr-cost: pin to CPU %d: %s\n", cpu, strerror(errno));
		return 1;
	}
	libbpf_set_print(print_libbpf);
	print_machine();
	if (measure == M_WALL) {
		stats_fd = -1;
		stats_off();
		printf("method: each repetition attaches every configuration in turn (rotating "
		       "order),\n"
		       "generates the same events, detaches; bpf_stats off. wall = the workload's "
		       "own time\n"
		       "per unit (block: each read timed, the run's median; runq: the mean per "
		       "pass),\n"
		       "which holds every program run of the event with its dispatch; none = "
		       "nothing\n"
		       "attached; added = configuration - off of the same repetition; CI95 of "
		       "medians by\n"
		       "order statistics, of means by Student t.\n");
	} else {
		stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
		if (stats_fd < 0) {
			fprintf(stderr, "attr-cost: BPF_ENABLE_STATS: %s\n", strerror(-stats_fd));
			return 1;
		}
		printf("method: each repetition attaches every configuration in turn (rotating "
		       "order),\n"
		       "generates the same events, detaches; bpf_stats (BPF_ENABLE_STATS) on "
		       "throughout.\n"
		       "body ns/event = sum of the programs' run_time_ns / histogram counts "
		       "added;\n"
		       "added = configuration - off of the same repetition; CI95 = Student t over "
		       "the\n"
		       "repetitions. bpf_stats measures the body only: each program run also pays "
		       "the\n"
		       "tracepoint dispatch (~18 ns per tp_btf program) and bpf_stats' own clock "
		       "reads,\n"
		       "the same in every configuration with the same programs.\n");
	}
	for (size_t i = 0; i < sizeof(benches) / sizeof(benches[0]) && !err; i++) {
		struct bench *b = &benches[i];

		if (only && !strstr(only, b->name))
			continue;
		if (b->w == W_BLOCK) {
			if (!device) {
				printf("\nblock: skipped (no -d BLOCKDEV)\n");
				continue;
			}
			err = open_device();
			if (err)
				break;
		}
		err = run_bench(b);
		if (!err)
			print_bench(b);
		fflush(stdout);
	}
	if (stats_fd >= 0)
		close(stats_fd);
	for (size_t i = 0; i < sizeof(benches) / sizeof(benches[0]); i++)
		for (int k = 0; k < MAX_CFGS; k++) {
			bpf_object__close(benches[i].cfgs[k].obj);
			bpf_object__close(benches[i].cfgs[k].empty_obj);
		}
	if (dev_fd >= 0)
		close(dev_fd);
	return err ? 1 : 0;
}
