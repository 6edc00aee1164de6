// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ktel-bench-attr-pull: what attribution adds to a pull, per key. Two maps
 * of runq_latency's shape (CPU, attribution id, histogram with its sum),
 * KEYS keys each, pulled through the daemon's real path:
 *
 *   plain  attribution off: the keys differ by CPU, attr is 0;
 *          ktel_metric_pull__run (map_reader batch read, BTF decode, delta,
 *          records) handing its records on (to nothing, as to a router)
 *   attr   attribution by cgroup: CPUS CPUs x KEYS/CPUS real cgroups made
 *          for the run under the cgroup2 mount; the same pull with the
 *          attribution dimension, its keys to the fold
 *          (ktel_metric_pull__run_keys, ktel_attr_fold__add_keys), the ids
 *          named by attr_names (the cgroup
 *          walk's cache), then ktel_attr_fold__end (rank, top K = 20,
 *          other) handing on what it folded: what run_attributed() in the
 *          daemon does, with attr_names' begin_pull
 *
 * Every value changes before every pull (an untimed update_batch), so every
 * key makes a record. The two pulls alternate, repetition after repetition
 * (the first of each is a warm-up: delta state, the names' walk); per pull
 * the wall time and the thread's CPU time. Reported: ns per key, and attr /
 * plain as the ratio of the medians and the median of the per-repetition
 * ratios with a distribution-free 95% interval. -m attr or -m plain runs one
 * alone (for valgrind --tool=callgrind, which counts instructions).
 *
 * Needs root (BPF maps, cgroups). Prints figures; never passes or fails.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "attr_fold.h"
#include "attr_names.h"
#include "delta.h"
#include "error.h"
#include "metric_pull.h"

#define NBUCKETS 32
#define MAX_REPS 1000

struct attr_key {
	uint32_t cpu;
	uint32_t pad;
	uint64_t attr;
};

struct attr_value {
	uint64_t buckets[NBUCKETS];
	uint64_t sum;
};

static const struct ktel_dimension_desc dims[] = {
	{.name = "cpu"},
	{.name = "attr"},
};

static const uint32_t dim_flags[] = {0, KTEL_DIM_ATTRIBUTION};

static const struct ktel_metric_desc md_plain = {
	.struct_size = sizeof(struct ktel_metric_desc),
	.name = "bench_plain",
	.map_name = "plain_map",
	.model = KTEL_MODEL_ACCUMULATOR,
	.unit = "us",
	.scheme = KTEL_HIST_LOG2,
	.dims = dims,
	.n_dims = 2,
	.dim_flags = dim_flags,
};

static const struct ktel_metric_desc md_attr = {
	.struct_size = sizeof(struct ktel_metric_desc),
	.name = "bench_attr",
	.map_name = "attr_map",
	.model = KTEL_MODEL_ACCUMULATOR,
	.unit = "us",
	.scheme = KTEL_HIST_LOG2,
	.dims = dims,
	.n_dims = 2,
	.dim_flags = dim_flags,
};

struct side {
	const char *name;
	bool on;
	struct bpf_map *map;
	struct ktel_metric_pull *mp;
	struct ktel_delta *d;
	struct attr_key *keys;
	struct attr_value *vals;
	double wall_ns[MAX_REPS], cpu_ns[MAX_REPS];
	size_t records;
};

static size_t n_keys = 10000;
static size_t n_cpus = 2;
static int reps = 60;
static const char *only;
static const char *obj_path = KTEL_BENCH_ATTR_PULL_OBJ;
static char cg_dir[512];
static size_t n_cgroups_made;
static unsigned int bumps;

static struct ktel_attr_names *names;
static struct ktel_attr_fold *fold;

static uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Median with a distribution-free 95% interval (ranks n/2 -+ 0.98 sqrt(n)). */
static double median_ci(const double *v, int n, double *ret_lo, double *ret_hi)
{
	double s[MAX_REPS];
	int k = (int)floor(0.98 * sqrt((double)n));

	memcpy(s, v, sizeof(*v) * (size_t)n);
	qsort(s, (size_t)n, sizeof(*s), cmp_double);
	if (ret_lo)
		*ret_lo = s[n / 2 - k < 0 ? 0 : n / 2 - k];
	if (ret_hi)
		*ret_hi = s[(n - 1) / 2 + k >= n ? n - 1 : (n - 1) / 2 + k];
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static void remove_cgroups(void)
{
	char path[600];

	for (size_t i = 0; i < n_cgroups_made; i++) {
		snprintf(path, sizeof(path), "%s/g%05zu", cg_dir, i);
		rmdir(path);
	}
	if (cg_dir[0])
		rmdir(cg_dir);
}

/* n cgroups under the cgroup2 mount: their ids (inode numbers) in ids. */
static int make_cgroups(size_t n, uint64_t *ids)
{
	char mount[400], path[600];
	struct stat st;

	if (ktel_attr_cgroup2_mount("/proc/self/mountinfo", mount, sizeof(mount))) {
		fprintf(stderr, "attr-pull: no cgroup2 mount\n");
		return -ENOENT;
	}
	snprintf(cg_dir, sizeof(cg_dir), "%s/ktel-bench-attr-%d", mount, (int)getpid());
	if (mkdir(cg_dir, 0755))
		return -errno;
	atexit(remove_cgroups);
	for (size_t i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/g%05zu", cg_dir, i);
		if (mkdir(path, 0755) || stat(path, &st))
			return -errno;
		n_cgroups_made++;
		ids[i] = st.st_ino;
	}
	return 0;
}

/* Change every value, as events would, with one untimed syscall. */
static int bump(struct side *s)
{
	__u32 count = (__u32)n_keys;
	unsigned int k = bumps % NBUCKETS;

	for (size_t i = 0; i < n_keys; i++) {
		s->vals[i].buckets[k]++;
		s->vals[i].sum += (uint64_t)1 << k;
	}
	return bpf_map_update_batch(bpf_map__fd(s->map), s->keys, s->vals, &count, NULL);
}

static void count_records(void *ctx, const struct ktel_record *recs, size_t n)
{
	struct side *s = ctx;

	(void)recs;
	s->records += n;
}

static const char *resolve(void *ctx, uint64_t id, char *buf, size_t len)
{
	(void)ctx;
	return ktel_attr_names__cgroup(names, id, buf, len);
}

static uint64_t generation(void *ctx)
{
	(void)ctx;
	return ktel_attr_names__generation(names);
}

static bool used(void *ctx, uint64_t id, uint64_t *hint)
{
	(void)ctx;
	return ktel_attr_names__cgroup_used(names, id, hint);
}

static void prefetch(void *ctx, uint64_t hint)
{
	(void)ctx;
	ktel_attr_names__cgroup_prefetch(names, hint);
}

/* One pull of s: what the daemon's pull_accumulator() does for it. */
static int pull(struct side *s, bool attributed, int r)
{
	uint64_t w0 = clock_ns(CLOCK_MONOTONIC), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	struct ktel_err err = {0};
	long folded = 0;
	int rc;

	s->records = 0;
	if (!attributed) {
		rc = ktel_metric_pull__run(s->mp, s->d, ktel_boot_id(), count_records, s, NULL,
					   &err);
	} else {
		ktel_attr_names__begin_pull(names, ktel_now_boottime_ns());
		ktel_attr_fold__begin(fold);
		rc = ktel_metric_pull__run_keys(s->mp, s->d, ktel_boot_id(),
						ktel_attr_fold__add_keys, ktel_attr_fold__add, fold,
						NULL, &err);
		if (ktel_attr_fold__first_window(fold))
			ktel_metric_pull__totals(s->mp, ktel_attr_fold__add_history, fold);
		folded = ktel_attr_fold__end(fold, ktel_now_boottime_ns(), count_records, s, &err);
		if (!rc && folded < 0)
			rc = (int)folded;
	}
	s->wall_ns[r] = (double)(clock_ns(CLOCK_MONOTONIC) - w0);
	s->cpu_ns[r] = (double)(clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0);
	if (rc)
		fprintf(stderr, "attr-pull: %s: %s\n", s->name,
			err.msg[0] ? err.msg : strerror(-rc));
	return rc;
}

static int side_open(struct side *s, struct bpf_object *obj, const struct ktel_metric_desc *md,
		     const char *attr_name)
{
	struct ktel_metric_pull_opts opts = {.attr_name = attr_name};
	struct ktel_err err = {0};
	__u32 count = (__u32)n_keys;
	int rc;

	s->d = ktel_delta__new(ktel_boot_id());
	if (!s->d || ktel_delta__set_max_entries(s->d, n_keys))
		return -ENOMEM;
	rc = bpf_map_update_batch(bpf_map__fd(s->map), s->keys, s->vals, &count, NULL);
	if (rc) {
		fprintf(stderr, "attr-pull: fill %s: %s\n", s->name, strerror(errno));
		return -errno;
	}
	rc = ktel_metric_pull__new_opts(md, obj, true, &opts, &s->mp, &err);
	if (rc)
		fprintf(stderr, "attr-pull: %s: %s\n", s->name, err.msg);
	return rc;
}

static void print_side(const struct side *s, int n)
{
	double lo, hi, w = median_ci(s->wall_ns, n, &lo, &hi);
	double c = median_ci(s->cpu_ns, n, NULL, NULL);

	printf("  %-6s wall %8.1f ns/key [%6.1f, %6.1f]  cpu %8.1f ns/key  %6zu records out\n",
	       s->name, w / (double)n_keys, lo / (double)n_keys, hi / (double)n_keys,
	       c / (double)n_keys, s->records);
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return level == LIBBPF_WARN && !strstr(fmt, "unrecognized data section")
		       ? vfprintf(stderr, fmt, ap)
		       : 0;
}

int main(int argc, char **argv)
{
	struct side plain = {.name = "plain"}, attr = {.name = "attr"};
	struct ktel_attr_fold_opts fo = {
		.dim_name = "cgroup",
		.top = 20,
		.sticky_windows = 10,
		.churn_per_hour = 80,
		.resolve = resolve,
		.generation = generation,
		.used = used,
		.prefetch = prefetch,
	};
	struct ktel_attr_names_opts no = {0};
	struct ktel_err err = {0};
	struct bpf_object *obj = NULL;
	uint64_t *ids = NULL;
	size_t n_cg;
	int o, rc = 1;

	while ((o = getopt(argc, argv, "k:c:r:m:o:h")) != -1) {
		switch (o) {
		case 'k':
			n_keys = strtoul(optarg, NULL, 10);
			break;
		case 'c':
			n_cpus = strtoul(optarg, NULL, 10);
			break;
		case 'r':
			reps = atoi(optarg);
			break;
		case 'm':
			only = optarg;
			break;
		case 'o':
			obj_path = optarg;
			break;
		default:
			fprintf(o == 'h' ? stdout : stderr,
				"usage: ktel-bench-attr-pull [-k KEYS] [-c CPUS] [-r REPS] "
				"[-m plain|attr] [-o OBJ]\n");
			return o == 'h' ? 0 : 2;
		}
	}
	if (n_keys < 1 || n_cpus < 1 || n_cpus > n_keys || reps < 2 || reps >= MAX_REPS) {
		fprintf(stderr, "attr-pull: need 1 <= CPUS <= KEYS and 2 <= REPS < %d\n", MAX_REPS);
		return 2;
	}
	if (geteuid()) {
		fprintf(stderr, "attr-pull: needs root\n");
		return 77;
	}
	libbpf_set_print(libbpf_print);
	plain.on = !only || !strcmp(only, "plain");
	attr.on = !only || !strcmp(only, "attr");
	n_cg = (n_keys + n_cpus - 1) / n_cpus;
	ids = calloc(n_cg, sizeof(*ids));
	plain.keys = calloc(n_keys, sizeof(*plain.keys));
	attr.keys = calloc(n_keys, sizeof(*attr.keys));
	plain.vals = calloc(n_keys, sizeof(*plain.vals));
	attr.vals = calloc(n_keys, sizeof(*attr.vals));
	if (!ids || !plain.keys || !attr.keys || !plain.vals || !attr.vals)
		goto out;
	if (attr.on && make_cgroups(n_cg, ids)) {
		fprintf(stderr, "attr-pull: cannot make %zu cgroups: %s\n", n_cg, strerror(errno));
		goto out;
	}
	for (size_t i = 0; i < n_keys; i++) {
		plain.keys[i] = (struct attr_key){.cpu = (uint32_t)i};
		attr.keys[i] = (struct attr_key){.cpu = (uint32_t)(i % n_cpus),
						 .attr = ids[i / n_cpus]};
		for (int k = 0; k < NBUCKETS; k++)
			plain.vals[i].buckets[k] = attr.vals[i].buckets[k] = (i * 7 + (size_t)k) %
									     1000;
	}
	obj = bpf_object__open_file(obj_path, NULL);
	if (!obj) {
		fprintf(stderr, "attr-pull: open %s: %s\n", obj_path, strerror(errno));
		goto out;
	}
	plain.map = bpf_object__find_map_by_name(obj, "plain_map");
	attr.map = bpf_object__find_map_by_name(obj, "attr_map");
	if (!plain.map || !attr.map || bpf_map__set_max_entries(plain.map, (__u32)n_keys) ||
	    bpf_map__set_max_entries(attr.map, (__u32)n_keys) || bpf_object__load(obj)) {
		fprintf(stderr, "attr-pull: load %s: %s\n", obj_path, strerror(errno));
		goto out;
	}
	if ((plain.on && side_open(&plain, obj, &md_plain, NULL)) ||
	    (attr.on && side_open(&attr, obj, &md_attr, "cgroup")))
		goto out;
	if (attr.on &&
	    (ktel_attr_names__new(&no, &names, &err) || ktel_attr_fold__new(&fo, &fold, &err))) {
		fprintf(stderr, "attr-pull: %s\n", err.msg);
		goto out;
	}
	printf("method: %zu keys per map; attr: %zu CPUs x %zu cgroups made for the run, top "
	       "K = 20;\nevery value changed before each pull; pulls alternate, %d repetitions "
	       "after a warm-up;\nwall and thread CPU time per pull, per key. Load average at "
	       "start: ",
	       n_keys, n_cpus, n_cg, reps);
	{
		double load[3] = {0};

		getloadavg(load, 3);
		printf("%.2f\n", load[0]);
	}
	for (int r = 0; r <= reps; r++) {
		int i = r ? r - 1 : 0; /* the warm-up's figures are overwritten */

		bumps++;
		if ((plain.on && (bump(&plain) || pull(&plain, false, i))) ||
		    (attr.on && (bump(&attr) || pull(&attr, true, i))))
			goto out;
	}
	printf("%zu keys, median over %d pulls [95%% CI]:\n", n_keys, reps);
	if (plain.on)
		print_side(&plain, reps);
	if (attr.on)
		print_side(&attr, reps);
	if (plain.on && attr.on) {
		double ratio[MAX_REPS], cratio[MAX_REPS], lo, hi, m;

		for (int r = 0; r < reps; r++) {
			ratio[r] = attr.wall_ns[r] / plain.wall_ns[r];
			cratio[r] = attr.cpu_ns[r] / plain.cpu_ns[r];
		}
		m = median_ci(ratio, reps, &lo, &hi);
		printf("attr / plain per key: %.3f (wall medians), %.3f [%.3f, %.3f] (median of "
		       "per-rep wall ratios), %.3f (median of per-rep CPU ratios)\n",
		       median_ci(attr.wall_ns, reps, NULL, NULL) /
			       median_ci(plain.wall_ns, reps, NULL, NULL),
		       m, lo, hi, median_ci(cratio, reps, NULL, NULL));
	}
	rc = 0;
out:
	ktel_attr_fold__free(fold);
	ktel_attr_names__free(names);
	ktel_metric_pull__free(plain.mp);
	ktel_metric_pull__free(attr.mp);
	ktel_delta__free(plain.d);
	ktel_delta__free(attr.d);
	bpf_object__close(obj);
	free(ids);
	free(plain.keys);
	free(attr.keys);
	free(plain.vals);
	free(attr.vals);
	return rc;
}
