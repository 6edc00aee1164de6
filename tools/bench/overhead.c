// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ktel-bench-overhead: what one BPF program on the syscall tracepoints adds to
 * each event, measured the way ebpf_exporter's benchmark does it: a tight loop
 * of one cheap syscall (getppid) pinned to one CPU, with and without programs
 * attached. Prints figures and the method; it never passes or fails on a
 * number.
 *
 * Configurations (programs in overhead.bpf.c):
 *   a  nothing attached                       the baseline
 *   b  empty program(s)                       the floor (dispatch alone)
 *   c  the Android macros (SAVE_FIRST_START_  enter: start per tid; exit:
 *      TIME, GET_LATENCY_BUCKET, INCREMENT_   log2 bucket, histogram += 1;
 *      ACCUMULATOR), start map a hash         the start kept in place
 *   cdel c with the start inserted and        what the macros did before
 *      deleted per event                      (Android's own header does)
 *   ct c with the start map declared          the same macro calls
 *      TASK_STORAGE
 *      (cdele, cte: with bpf_stats on)
 *   d  bpftrace hist() on the same hooks      classic tracepoints: bpftrace
 *                                             0.17 has no raw tracepoints
 *   e  c with bpf_stats (BPF_ENABLE_STATS) on and off
 *   t  c with the start in task local storage  the KTEL_TASK_* macros of
 *                                             bpf_telemetry.h (runq_latency);
 *                                             te: t with bpf_stats on
 *   ts t keeping the sum of the microseconds  KTEL_TASK_LATENCY_US +
 *                                             INCREMENT_ACCUMULATOR_SUM (what
 *                                             runq_latency does since 1.1);
 *                                             tse: ts with bpf_stats on
 * -C b2,c,t runs only the configs named.
 * Every attached run is paired with a baseline run just before it (bpftrace,
 * which starts in seconds, gets a block of baseline runs before and after);
 * "added" is run minus baseline, in ns per loop iteration. Each iteration is
 * one syscall, i.e. one sys_enter and one sys_exit event. Each run is timed
 * twice: wall clock, and the thread's own CPU time (CLOCK_THREAD_CPUTIME_ID:
 * a program runs in the syscall, so its time is the thread's; time spent
 * preempted by other work or stolen by the hypervisor is not), which is what
 * a loaded machine can still resolve. The CPU figures are the mean of the
 * paired differences with a 95% confidence interval (Student's t).
 *
 * Needs root. bpf_stats_enabled is forced to 0 for the run and restored.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include "bench_stats.h"
#include "bpf_stats_off.h"

#define MAX_RUNS 101
_Static_assert(2 * MAX_RUNS <= BENCH_STATS_MAX, "bench_stats.h takes every run");
#define MAX_PROGS 2

enum kind {
	K_PROGS,
	K_BPFTRACE
};

struct config {
	const char *id;
	const char *what;
	enum kind kind;
	const char *progs[MAX_PROGS];
	bool bpf_stats;
	/* filled by the run */
	double run_ns[MAX_RUNS];
	double added_ns[MAX_RUNS];
	double base_ns[2 * MAX_RUNS];
	double run_cpu[MAX_RUNS]; /* the same, in thread CPU time */
	double added_cpu[MAX_RUNS];
	double base_cpu[2 * MAX_RUNS];
	int n_base;
	uint64_t events;   /* histogram counts recorded (sanity check) */
	int attached_runs; /* loop runs made while attached */
	uint64_t stat_time[MAX_PROGS], stat_cnt[MAX_PROGS];
	bool done;
};

static struct config configs[] = {
	{.id = "b1",
	 .what = "empty tp_btf on sys_enter only",
	 .kind = K_PROGS,
	 .progs = {"empty_btf_enter"}},
	{.id = "b2",
	 .what = "empty tp_btf on sys_enter + sys_exit (floor)",
	 .kind = K_PROGS,
	 .progs = {"empty_btf_enter", "empty_btf_exit"}},
	{.id = "c",
	 .what = "ours, tp_btf enter + exit",
	 .kind = K_PROGS,
	 .progs = {"acc_btf_enter", "acc_btf_exit"}},
	{.id = "cdel",
	 .what = "c, start inserted + deleted per event",
	 .kind = K_PROGS,
	 .progs = {"adel_btf_enter", "adel_btf_exit"}},
	{.id = "ct",
	 .what = "c, start map declared TASK_STORAGE",
	 .kind = K_PROGS,
	 .progs = {"atask_btf_enter", "atask_btf_exit"}},
	{.id = "cdele",
	 .what = "cdel with bpf_stats on",
	 .kind = K_PROGS,
	 .progs = {"adel_btf_enter", "adel_btf_exit"},
	 .bpf_stats = true},
	{.id = "cte",
	 .what = "ct with bpf_stats on",
	 .kind = K_PROGS,
	 .progs = {"atask_btf_enter", "atask_btf_exit"},
	 .bpf_stats = true},
	{.id = "e",
	 .what = "ours, tp_btf enter + exit, bpf_stats on",
	 .kind = K_PROGS,
	 .progs = {"acc_btf_enter", "acc_btf_exit"},
	 .bpf_stats = true},
	{.id = "t",
	 .what = "ours, task storage start (KTEL_TASK_*), tp_btf",
	 .kind = K_PROGS,
	 .progs = {"task_btf_enter", "task_btf_exit"}},
	{.id = "te",
	 .what = "t with bpf_stats on",
	 .kind = K_PROGS,
	 .progs = {"task_btf_enter", "task_btf_exit"},
	 .bpf_stats = true},
	{.id = "ts",
	 .what = "t keeping the sum too (KTEL_TASK_LATENCY_US)",
	 .kind = K_PROGS,
	 .progs = {"tsum_btf_enter", "tsum_btf_exit"}},
	{.id = "tse",
	 .what = "ts with bpf_stats on",
	 .kind = K_PROGS,
	 .progs = {"tsum_btf_enter", "tsum_btf_exit"},
	 .bpf_stats = true},
	{.id = "b2tp",
	 .what = "empty tracepoint enter + exit (floor)",
	 .kind = K_PROGS,
	 .progs = {"empty_tp_enter", "empty_tp_exit"}},
	{.id = "ctp",
	 .what = "ours, tracepoint enter + exit",
	 .kind = K_PROGS,
	 .progs = {"acc_tp_enter", "acc_tp_exit"}},
	{.id = "d", .what = "bpftrace hist(), tracepoint enter + exit", .kind = K_BPFTRACE},
	/* Where c's time goes (tp_btf; see overhead.bpf.c). */
	{.id = "xs",
	 .what = "c without the histogram (start map only)",
	 .kind = K_PROGS,
	 .progs = {"x_start_enter", "x_start_exit"}},
	{.id = "xi",
	 .what = "c's in-place start written out by hand",
	 .kind = K_PROGS,
	 .progs = {"x_inpl_enter", "x_inpl_exit"}},
	{.id = "xt",
	 .what = "ct's task storage start written out by hand",
	 .kind = K_PROGS,
	 .progs = {"x_task_enter", "x_task_exit"}},
	{.id = "xc",
	 .what = "tgid filter + 2 clock reads only",
	 .kind = K_PROGS,
	 .progs = {"x_clock_enter", "x_clock_exit"}},
};

static long iters = 1000000;
static int runs = 11;
static int cpu = -1;
static const char *bpftrace_bin = "bpftrace";
static const char *obj_path = KTEL_BENCH_OVERHEAD_OBJ;
static const char *only; /* -C: comma-separated config ids to run, or all */
static int saved_stats = -1;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* One run of the loop: wall ns per iteration, and the thread's CPU ns per
 * iteration in *ret_cpu. syscall() so that no libc cache can answer without
 * entering the kernel. */
static double loop_once(double *ret_cpu)
{
	uint64_t t0 = now_ns(), c0 = thread_cpu_ns();

	for (long i = 0; i < iters; i++)
		syscall(SYS_getppid);
	*ret_cpu = (double)(thread_cpu_ns() - c0) / (double)iters;
	return (double)(now_ns() - t0) / (double)iters;
}

/* Sum of every bucket of every key of the map named name (a sum after the
 * buckets is not a count). */
static uint64_t map_buckets_total(struct bpf_object *obj, const char *name)
{
	struct bpf_map *map = bpf_object__find_map_by_name(obj, name);
	__u64 val[33];
	__u32 key = 0, next;
	uint64_t sum = 0;
	int fd = bpf_map__fd(map);
	void *prev = NULL;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		if (!bpf_map_lookup_elem(fd, &next, val))
			for (int i = 0; i < 32; i++)
				sum += val[i];
		key = next;
		prev = &key;
	}
	return sum;
}

/* Histogram counts of both accumulator maps (only one is written by a run). */
static uint64_t acc_total(struct bpf_object *obj)
{
	return map_buckets_total(obj, "acc_map") + map_buckets_total(obj, "acc_sum_map");
}

static int prog_stats(struct bpf_program *p, uint64_t *ret_time, uint64_t *ret_cnt)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);
	int err;

	memset(&info, 0, sizeof(info));
	err = bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len);
	if (err)
		return err;
	*ret_time = info.run_time_ns;
	*ret_cnt = info.run_cnt;
	return 0;
}

static int run_progs(struct bpf_object *obj, struct config *c)
{
	struct bpf_program *progs[MAX_PROGS] = {};
	struct bpf_link *links[MAX_PROGS] = {};
	uint64_t t0[MAX_PROGS] = {}, n0[MAX_PROGS] = {}, t1 = 0, n1 = 0;
	uint64_t before = acc_total(obj);
	int stats_fd = -1, err = 0, n = 0;

	for (; n < MAX_PROGS && c->progs[n]; n++) {
		progs[n] = bpf_object__find_program_by_name(obj, c->progs[n]);
		if (!progs[n]) {
			fprintf(stderr, "overhead: no program %s in %s\n", c->progs[n], obj_path);
			return -ENOENT;
		}
	}
	if (c->bpf_stats) {
		stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
		if (stats_fd < 0) {
			fprintf(stderr, "overhead: BPF_ENABLE_STATS: %s\n", strerror(-stats_fd));
			return stats_fd;
		}
		for (int i = 0; i < n; i++)
			prog_stats(progs[i], &t0[i], &n0[i]);
	}
	for (int r = 0; r < runs; r++) {
		c->base_ns[r] = loop_once(&c->base_cpu[r]);
		for (int i = 0; i < n; i++) {
			links[i] = bpf_program__attach(progs[i]);
			if (!links[i]) {
				err = -errno;
				fprintf(stderr, "overhead: attach %s: %s\n", c->progs[i],
					strerror(errno));
				goto detach;
			}
		}
		c->run_ns[r] = loop_once(&c->run_cpu[r]);
		c->added_ns[r] = c->run_ns[r] - c->base_ns[r];
		c->added_cpu[r] = c->run_cpu[r] - c->base_cpu[r];
detach:
		for (int i = 0; i < n; i++) {
			bpf_link__destroy(links[i]);
			links[i] = NULL;
		}
		if (err)
			goto out;
	}
	c->n_base = runs;
	c->attached_runs = runs;
	c->events = acc_total(obj) - before;
	if (c->bpf_stats)
		for (int i = 0; i < n; i++) {
			prog_stats(progs[i], &t1, &n1);
			c->stat_time[i] = t1 - t0[i];
			c->stat_cnt[i] = n1 - n0[i];
		}
	c->done = true;
out:
	if (stats_fd >= 0)
		close(stats_fd);
	return err;
}

/*
 * The bpftrace equivalent of the acc_* programs: start time per thread of
 * this process on enter, on exit the log2 histogram of the elapsed
 * microseconds and the start deleted.
 */
static void bpftrace_script(char *buf, size_t size)
{
	snprintf(buf, size,
		 "tracepoint:raw_syscalls:sys_enter /pid == %d/ { @start[tid] = nsecs; }\n"
		 "tracepoint:raw_syscalls:sys_exit /pid == %d/ { $s = @start[tid];"
		 " if ($s) { @h = hist((nsecs - $s) / 1000); delete(@start[tid]); } }\n",
		 (int)getpid(), (int)getpid());
}

/* Sum of the counts of the @h histogram bpftrace printed at exit. Lines are
 * "[lo, hi)   count |@@@|" after a line starting "@h:". */
static uint64_t bpftrace_hist_total(FILE *out)
{
	char line[512];
	bool in_h = false;
	uint64_t sum = 0;

	while (fgets(line, sizeof(line), out)) {
		char *end;

		if (!strncmp(line, "@h:", 3)) {
			in_h = true;
			continue;
		}
		if (!in_h || line[0] != '[') {
			in_h = in_h && line[0] == '[';
			continue;
		}
		end = strpbrk(line, ")]");
		if (end)
			sum += strtoull(end + 1, NULL, 10);
	}
	return sum;
}

static pid_t start_bpftrace(FILE **ret_out)
{
	static char script[512];
	int pipefd[2];
	char line[512];
	pid_t pid;
	FILE *out;

	bpftrace_script(script, sizeof(script));
	if (pipe(pipefd))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		cpu_set_t set;

		/* Keep bpftrace's own threads off the measured CPU. */
		CPU_ZERO(&set);
		for (int i = 0; i < CPU_SETSIZE; i++)
			if (i != cpu)
				CPU_SET(i, &set);
		sched_setaffinity(0, sizeof(set), &set);
		dup2(pipefd[1], 1);
		close(pipefd[0]);
		close(pipefd[1]);
		execlp(bpftrace_bin, bpftrace_bin, "-e", script, (char *)NULL);
		_exit(127);
	}
	close(pipefd[1]);
	out = fdopen(pipefd[0], "r");
	while (fgets(line, sizeof(line), out))
		if (!strncmp(line, "Attaching", 9))
			break;
	if (feof(out)) {
		fclose(out);
		waitpid(pid, NULL, 0);
		return -ENOENT;
	}
	/* bpftrace prints "Attaching" before it attaches. */
	sleep(2);
	*ret_out = out;
	return pid;
}

static int run_bpftrace(struct config *c)
{
	FILE *out = NULL;
	pid_t pid;
	double base, base_cpu, half, warm;
	int r;

	for (r = 0; r < runs; r++)
		c->base_ns[r] = loop_once(&c->base_cpu[r]);
	pid = start_bpftrace(&out);
	if (pid < 0) {
		fprintf(stderr, "overhead: could not start %s (skipped): %s\n", bpftrace_bin,
			strerror((int)-pid));
		return 0;
	}
	loop_once(&warm); /* warm bpftrace's maps */
	for (r = 0; r < runs; r++)
		c->run_ns[r] = loop_once(&c->run_cpu[r]);
	kill(pid, SIGINT);
	c->events = bpftrace_hist_total(out);
	fclose(out);
	waitpid(pid, NULL, 0);
	for (r = 0; r < runs; r++)
		c->base_ns[runs + r] = loop_once(&c->base_cpu[runs + r]);
	c->n_base = 2 * runs;
	c->attached_runs = runs + 1;
	median_range(c->base_ns, c->n_base, &base, &(double){0}, &(double){0});
	mean_ci(c->base_cpu, c->n_base, &base_cpu, &half);
	for (r = 0; r < runs; r++) {
		c->added_ns[r] = c->run_ns[r] - base;
		c->added_cpu[r] = c->run_cpu[r] - base_cpu;
	}
	c->done = true;
	return 0;
}

static struct config *find_config(const char *id)
{
	for (size_t i = 0; i < sizeof(configs) / sizeof(configs[0]); i++)
		if (!strcmp(configs[i].id, id) && configs[i].done)
			return &configs[i];
	return NULL;
}

/* Whether -C names c (all configs run without -C). */
static bool selected(const struct config *c)
{
	size_t len = strlen(c->id);
	const char *p = only;

	if (!only)
		return true;
	while (*p) {
		size_t n = strcspn(p, ",");

		if (n == len && !strncmp(p, c->id, len))
			return true;
		p += n;
		if (*p == ',')
			p++;
	}
	return false;
}

static double added_median(const struct config *c)
{
	double med, lo, hi;

	median_range(c->added_ns, runs, &med, &lo, &hi);
	return med;
}

/*
 * The ratio of num's added ns to den's: of the wall-clock medians, and of
 * the CPU-time means with the range the two 95% intervals allow (num's low
 * end over den's high end to num's high end over den's low end; "-" when
 * den's interval reaches 0).
 */
static void print_ratio(const char *label, const char *num, const char *den)
{
	struct config *a = find_config(num), *b = find_config(den);
	double am, ah, bm, bh;

	if (!a || !b)
		return;
	mean_ci(a->added_cpu, runs, &am, &ah);
	mean_ci(b->added_cpu, runs, &bm, &bh);
	printf("  %-34s wall %6.2f   cpu %6.2f ", label, added_median(a) / added_median(b),
	       am / bm);
	if (bm - bh > 0)
		printf("[%5.2f, %5.2f]", (am - ah) / (bm + bh), (am + ah) / (bm - bh));
	else
		printf("[    -,     -]");
	printf("  (%s %.1f / %s %.1f cpu ns)\n", num, am, den, bm);
}

static void print_machine(void)
{
	char model[256] = "?", line[512];
	struct utsname u;
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
	printf("machine: %ld CPUs online, %s, kernel %s\n", sysconf(_SC_NPROCESSORS_ONLN), model,
	       u.release);
}

static void print_results(void)
{
	double bmed, blo, bhi, med, lo, hi, amed, alo, ahi, cm, ch;

	printf("\n%-5s %-46s %9s %9s %22s %18s %12s\n", "cfg", "what", "base ns", "run ns",
	       "added ns med [min,max]", "added cpu ns +-95%", "events/iter");
	for (size_t i = 0; i < sizeof(configs) / sizeof(configs[0]); i++) {
		struct config *c = &configs[i];

		if (!c->done)
			continue;
		median_range(c->base_ns, c->n_base, &bmed, &blo, &bhi);
		median_range(c->run_ns, runs, &med, &lo, &hi);
		median_range(c->added_ns, runs, &amed, &alo, &ahi);
		mean_ci(c->added_cpu, runs, &cm, &ch);
		printf("%-5s %-46s %9.1f %9.1f %8.1f [%5.1f,%5.1f] %9.1f +- %5.1f", c->id, c->what,
		       bmed, med, amed, alo, ahi, cm, ch);
		if (c->events)
			printf(" %12.3f", (double)c->events / ((double)iters * c->attached_runs));
		printf("\n");
	}
	printf("\nratios of added ns (wall: medians; cpu: means [95%% range]):\n");
	print_ratio("Android macros / floor (tp_btf)", "c", "b2");
	print_ratio("macros, insert+delete / floor", "cdel", "b2");
	print_ratio("macros, task map / floor", "ct", "b2");
	print_ratio("macros in place / insert+delete", "c", "cdel");
	print_ratio("task storage / floor (tp_btf)", "t", "b2");
	print_ratio("task storage / hash start (ours)", "t", "c");
	print_ratio("with sum / without (task storage)", "ts", "t");
	print_ratio("ours / floor (tracepoint)", "ctp", "b2tp");
	print_ratio("ours / bpftrace (same hooks)", "ctp", "d");
	print_ratio("ours tp_btf / bpftrace", "c", "d");
	print_ratio("insert+delete tp_btf / bpftrace", "cdel", "d");
	print_ratio("bpf_stats on / off (ours tp_btf)", "e", "c");
	print_ratio("start map only / ours", "xs", "c");
	print_ratio("by hand / macros (in place)", "xi", "c");
	print_ratio("by hand / macros (task map)", "xt", "ct");

	printf("\nbpf_stats run_time_ns / run_cnt, configs with bpf_stats on (BODY ONLY: "
	       "excludes the dispatch, i.e. the floor):\n");
	for (size_t i = 0; i < sizeof(configs) / sizeof(configs[0]); i++) {
		struct config *c = &configs[i];

		if (!c->done || !c->bpf_stats)
			continue;
		for (int p = 0; p < MAX_PROGS && c->progs[p]; p++)
			printf("  %-4s %-16s %10" PRIu64 " runs  %7.1f ns/run\n", c->id,
			       c->progs[p], c->stat_cnt[p],
			       c->stat_cnt[p] ? (double)c->stat_time[p] / (double)c->stat_cnt[p]
					      : 0);
	}
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ktel-bench-overhead [-n ITERATIONS] [-r RUNS] [-c CPU] [-o OBJ]\n"
		"                           [-C CFG[,CFG...]] [--bpftrace PATH | --no-bpftrace]\n");
}

static int parse_args(int argc, char **argv, bool *with_bpftrace)
{
	static const struct option opts[] = {
		{"iterations", required_argument, NULL, 'n'},
		{"runs", required_argument, NULL, 'r'},
		{"cpu", required_argument, NULL, 'c'},
		{"object", required_argument, NULL, 'o'},
		{"bpftrace", required_argument, NULL, 'b'},
		{"no-bpftrace", no_argument, NULL, 'B'},
		{"configs", required_argument, NULL, 'C'},
		{"help", no_argument, NULL, 'h'},
		{},
	};
	int o;

	while ((o = getopt_long(argc, argv, "n:r:c:o:C:h", opts, NULL)) != -1) {
		switch (o) {
		case 'n':
			iters = atol(optarg);
			break;
		case 'r':
			runs = atoi(optarg);
			break;
		case 'c':
			cpu = atoi(optarg);
			break;
		case 'o':
			obj_path = optarg;
			break;
		case 'b':
			bpftrace_bin = optarg;
			break;
		case 'B':
			*with_bpftrace = false;
			break;
		case 'C':
			only = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (iters < 1000 || runs < 1 || runs > MAX_RUNS) {
		fprintf(stderr, "overhead: need ITERATIONS >= 1000 and 1 <= RUNS <= %d\n",
			MAX_RUNS);
		return -EINVAL;
	}
	return 0;
}

static int pin_cpu(void)
{
	cpu_set_t set;

	if (cpu < 0)
		cpu = (int)sysconf(_SC_NPROCESSORS_ONLN) - 1;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		return -errno;
	return 0;
}

static struct bpf_object *open_object(void)
{
	struct bpf_object *obj = bpf_object__open_file(obj_path, NULL);
	struct bpf_map *rodata;
	__u32 tgid = (__u32)getpid();

	if (!obj) {
		fprintf(stderr, "overhead: open %s: %s\n", obj_path, strerror(errno));
		return NULL;
	}
	/* .rodata holds only target_tgid. */
	rodata = bpf_object__find_map_by_name(obj, ".rodata");
	if (!rodata || bpf_map__set_initial_value(rodata, &tgid, sizeof(tgid)) ||
	    bpf_object__load(obj)) {
		fprintf(stderr, "overhead: load %s: %s\n", obj_path, strerror(errno));
		bpf_object__close(obj);
		return NULL;
	}
	return obj;
}

int main(int argc, char **argv)
{
	bool with_bpftrace = true;
	struct bpf_object *obj;
	int err;

	if (parse_args(argc, argv, &with_bpftrace))
		return 2;
	if (geteuid()) {
		fprintf(stderr, "overhead: needs root\n");
		return 77;
	}
	err = pin_cpu();
	if (err) {
		fprintf(stderr, "overhead: pin to CPU %d: %s\n", cpu, strerror(-err));
		return 1;
	}
	if (bench_stats_off(&saved_stats))
		fprintf(stderr, "overhead: could not turn bpf_stats off; 'off' figures are 'on'\n");
	obj = open_object();
	if (!obj)
		return 1;

	print_machine();
	printf("method: %ld x syscall(SYS_getppid) per run on CPU %d, %d runs per config;\n"
	       "each attached run is paired with a baseline run right before it (bpftrace:\n"
	       "%d baseline runs before start and %d after exit); added = run - baseline,\n"
	       "ns per iteration = per syscall = one sys_enter + one sys_exit event;\n"
	       "timed as wall clock and as the thread's CPU time (cpu: mean of the paired\n"
	       "differences +- its 95%% confidence interval, Student's t).\n"
	       "bpf_stats_enabled was %d, held at 0 except in config e (BPF_ENABLE_STATS).\n",
	       iters, cpu, runs, runs, runs, saved_stats);
	loop_once(&(double){0}); /* warm up */
	for (size_t i = 0; i < sizeof(configs) / sizeof(configs[0]); i++) {
		struct config *c = &configs[i];

		if (!selected(c))
			continue;
		if (c->kind == K_BPFTRACE)
			err = with_bpftrace ? run_bpftrace(c) : 0;
		else
			err = run_progs(obj, c);
		if (err)
			break;
		fprintf(stderr, "overhead: %s done\n", c->id);
	}
	print_results();
	printf("\nevents/iter: histogram counts recorded per loop iteration over the "
	       "config's runs\n(about 1.0 shows the program saw every syscall; bpftrace: "
	       "counts printed at exit).\n");
	bpf_object__close(obj);
	return err ? 1 : 0;
}
