// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Block completions as BPF programs see them, with and without other
 * programs' attach and detach on the same tracepoint (docs/architecture.md,
 * Attribution, "Known loss of block completions"). Reads of a loop device
 * the test sets up, O_DIRECT, 4 KiB, four processes at a time, counted by two
 * programs of tests/bpf/tp_attach_loss.bpf.c: one on block_rq_complete,
 * one on block_io_done (where the device's own statistics count a request,
 * on the same completion path). Two phases of the same reads:
 *
 *  - quiet: nothing else of the test's attaches meanwhile;
 *  - churned: a process attaches a program that does nothing to
 *    block_rq_complete and detaches it again, in a tight loop, so that the
 *    tracepoint's probe array is replaced thousands of times, and its
 *    static call switches between a direct call and the iterator (one
 *    probe and two).
 *
 * Checked in both: the device counts every read the test issued; neither
 * program counts more; and the two programs count the same, so a read
 * either program misses is one both miss. Churn on block_rq_complete alone
 * that lost its probes' runs would break the last check (block_io_done is
 * never churned). How many reads the programs miss is printed, not
 * checked: on 6.18 the kernel now and then does not run either program for
 * a completion the device counts, with or without the churn, at a rate
 * that varies from run to run (docs/architecture.md gives the figures).
 *
 * Then the same reads once more, counted by each kind of BPF program on
 * block_rq_complete (tests/bpf/tp_loss_kinds.bpf.c): tp_btf reading the
 * request with bpf_probe_read_kernel and with direct loads, raw_tp, and a
 * classic tracepoint program (the perf path), attached last so that it can
 * name the reads the tp_btf program missed (sector, CPU, context, task).
 * Beside them perf's own counters of the tracepoint on every CPU (one
 * filtered to the device, one not), and the counts once more a second later.
 * Checked: each kind counts no more than the device. Printed: what each kind
 * missed, which blocks' reads, the runs the kernel counted and skipped per
 * program, and what perf counted in the same calls of the tracepoint.
 *
 * And a check of the instrument itself: a program that fires its own
 * tracepoint again while it runs must show the skipped run in its
 * recursion_misses, read the way the phases read it.
 *
 * Needs root and losetup. KTEL_ATTACH_LOSS_READS sets the reads of each
 * phase (100,000 by default; the figures in the docs are of 1,000,000).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ktel_test.h"
#include "loop_device.h"
#include "loop_observer.h"

#define BLOCK 4096
#define PARALLEL 4

static struct sandbox_dir {
	char path[256];
} sb;
static struct ktel_test_loop loop;
static struct bpf_object *obj;
static pid_t churner = -1;
static pid_t readers[PARALLEL];

static int teardown(void **state)
{
	(void)state;
	if (churner > 0) {
		kill(churner, SIGKILL);
		waitpid(churner, NULL, 0);
		churner = -1;
	}
	bpf_object__close(obj);
	obj = NULL;
	ktel_test_loop_detach(&loop);
	if (sb.path[0])
		(void)ktel_test_run("rm -rf %s", sb.path);
	sb.path[0] = '\0';
	return 0;
}

/* n reads of the loop device, PARALLEL processes at a time. */
static void read_device(unsigned n)
{
	pid_t pids[PARALLEL];

	for (int w = 0; w < PARALLEL; w++) {
		pids[w] = fork();
		assert_true(pids[w] >= 0);
		readers[w] = pids[w];
		if (pids[w] == 0) {
			void *buf;
			int fd = open(loop.dev, O_RDONLY | O_DIRECT);

			if (fd < 0 || posix_memalign(&buf, BLOCK, BLOCK))
				_exit(10);
			for (unsigned i = w; i < n; i += PARALLEL)
				if (pread(fd, buf, BLOCK, (off_t)(i % 1024) * BLOCK) != BLOCK)
					_exit(11);
			_exit(0);
		}
	}
	for (int w = 0; w < PARALLEL; w++) {
		int status;

		assert_int_equal(waitpid(pids[w], &status, 0), pids[w]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
}

/* What the kernel says of program name of o. */
static struct bpf_prog_info prog_info_of(struct bpf_object *o, const char *name)
{
	struct bpf_prog_info info = {0};
	uint32_t len = sizeof(info);

	assert_int_equal(bpf_obj_get_info_by_fd(bpf_program__fd(
							bpf_object__find_program_by_name(o, name)),
						&info, &len),
			 0);
	return info;
}

/* The runs the kernel skipped of program name (it was already running on
 * that CPU): such a run counts nothing. */
static uint64_t skipped_in(struct bpf_object *o, const char *name)
{
	return prog_info_of(o, name).recursion_misses;
}

static uint64_t skipped(const char *name)
{
	return skipped_in(obj, name);
}

/* The runs the kernel counted of program name (with BPF_STATS_RUN_TIME on). */
static uint64_t runs_in(struct bpf_object *o, const char *name)
{
	return prog_info_of(o, name).run_cnt;
}

static void counts_now(int fd, uint64_t v[2])
{
	for (uint32_t k = 0; k < 2; k++)
		assert_int_equal(bpf_map_lookup_elem(fd, &k, &v[k]), 0);
}

/* One phase: n reads; the device's count and each program's, from zero. */
static void phase(int counts_fd, unsigned n, uint64_t *device, uint64_t seen[2])
{
	uint64_t d0 = ktel_test_loop_reads(&loop), c0[2], c1[2];

	counts_now(counts_fd, c0);
	read_device(n);
	*device = ktel_test_loop_reads(&loop) - d0;
	counts_now(counts_fd, c1);
	seen[0] = c1[0] - c0[0];
	seen[1] = c1[1] - c0[1];
}

/* What a phase saw, and the runs the kernel skipped so far (zero here so
 * far: a missed read is not a skipped run). */
static void report(const char *what, unsigned n, uint64_t device, const uint64_t seen[2])
{
	printf("  %s: %u reads issued, %llu counted by the device; block_rq_complete's program "
	       "saw %llu (%llu fewer), block_io_done's %llu (%llu fewer); runs the kernel skipped "
	       "%llu and %llu\n",
	       what, n, (unsigned long long)device, (unsigned long long)seen[0],
	       (unsigned long long)(device - seen[0]), (unsigned long long)seen[1],
	       (unsigned long long)(device - seen[1]),
	       (unsigned long long)skipped("count_complete"),
	       (unsigned long long)skipped("count_done"));
}

/* The reads of each phase: KTEL_ATTACH_LOSS_READS, or 100,000. */
static unsigned reads_per_phase(void)
{
	const char *e = getenv("KTEL_ATTACH_LOSS_READS");

	if (e && atoi(e) >= 1000)
		return (unsigned)atoi(e);
	return 100000;
}

/* The test's sandbox and its loop device of 8 MiB. */
static void setup_loop(void)
{
	snprintf(sb.path, sizeof(sb.path), "%s/test-tmp/tp-attach-loss-%d", KTEL_BINARY_DIR,
		 getpid());
	assert_int_equal(ktel_test_run("mkdir -p %s", sb.path), 0);
	ktel_test_loop_attach(&loop, sb.path, 8);
}

static void test_attach_loss(void **state)
{
	unsigned n;
	uint64_t device, seen[2], *cycles;
	struct bpf_link *l_complete, *l_done;
	struct bpf_program *churn;
	int counts_fd;

	(void)state;
	n = reads_per_phase();
	setup_loop();
	obj = ktel_test_loop_observer_open(&loop, &counts_fd);
	l_complete = ktel_test_loop_observer_attach(obj, "count_complete");
	l_done = ktel_test_loop_observer_attach(obj, "count_done");
	churn = bpf_object__find_program_by_name(obj, "churn");
	assert_non_null(churn);

	/* Quiet. */
	phase(counts_fd, n, &device, seen);
	report("quiet", n, device, seen);
	assert_int_equal(device, n);
	assert_true(seen[0] <= device);
	assert_int_equal(seen[1], seen[0]);

	/* Churned: another program attached and detached meanwhile. */
	cycles = mmap(NULL, sizeof(*cycles), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
		      0);
	assert_true(cycles != MAP_FAILED);
	*cycles = 0;
	churner = fork();
	assert_true(churner >= 0);
	if (churner == 0) {
		for (;;) {
			struct bpf_link *l = bpf_program__attach(churn);

			if (!l)
				_exit(30);
			bpf_link__destroy(l);
			__atomic_add_fetch(cycles, 1, __ATOMIC_RELAXED);
		}
	}
	while (__atomic_load_n(cycles, __ATOMIC_RELAXED) == 0)
		usleep(1000);
	phase(counts_fd, n, &device, seen);
	kill(churner, SIGKILL);
	waitpid(churner, NULL, 0);
	churner = -1;
	printf("  %llu attach and detach cycles of another program on block_rq_complete\n",
	       (unsigned long long)*cycles);
	report("churned", n, device, seen);
	assert_true(*cycles > 0);
	assert_int_equal(device, n);
	assert_true(seen[0] <= device);
	assert_int_equal(seen[1], seen[0]);
	bpf_link__destroy(l_complete);
	bpf_link__destroy(l_done);
	munmap(cycles, sizeof(*cycles));
}


/* The slots of tp_loss_kinds.bpf.c's map counts (its enum slot). */
enum {
	S_BTF,
	S_BTF_DIRECT,
	S_RAW,
	S_CLASSIC,
	S_DONE,
	S_BTF_ALL,
	S_RAW_ALL,
	S_CLASSIC_ALL,
	S_BTF_READ_FAIL,
	S_MISSED_BY_BTF,
	S_CLASSIC_AHEAD,
	S_RECURSE_RUNS,
	S_MISSED_BTF_RAN,
	S_OTHER_OP,
	S_NSLOTS = 16,
};

#define LOSS_CPUS 64
#define LOSS_BLOCKS 1024
#define LOSS_LOG 64

/* tp_loss_kinds.bpf.c's struct missed. */
struct missed {
	uint64_t sector;
	uint32_t cpu;
	uint32_t context;
	int32_t pid;
	uint32_t btf_ran;
	uint64_t ns;
	uint64_t seen_sector;
	uint32_t seen_dev;
	uint32_t seen_flags;
	int32_t seen_ret;
	uint32_t pad;
};

/* tp_loss_kinds.bpf.c's map contexts, 0..1 (and 8..9 for the missed). */
static const char *const context_names[] = {"on the task's stack", "on the irq stack"};

static struct bpf_object *kinds;

static int kinds_teardown(void **state)
{
	bpf_object__close(kinds);
	kinds = NULL;
	return teardown(state);
}

/* The kinds object, loaded; told the loop device when there is one. */
static struct bpf_object *kinds_open(void)
{
	struct bpf_object *o = bpf_object__open_file(KTEL_TP_LOSS_KINDS_OBJ, NULL);
	int fd;
	uint32_t k;

	assert_non_null(o);
	assert_int_equal(bpf_object__load(o), 0);
	fd = bpf_object__find_map_fd_by_name(o, "device");
	assert_true(fd >= 0);
	k = 0;
	assert_int_equal(bpf_map_update_elem(fd, &k, &loop.major, BPF_ANY), 0);
	k = 1;
	assert_int_equal(bpf_map_update_elem(fd, &k, &loop.minor, BPF_ANY), 0);
	return o;
}

static int map_fd(struct bpf_object *o, const char *name)
{
	int fd = bpf_object__find_map_fd_by_name(o, name);

	assert_true(fd >= 0);
	return fd;
}

static void read_map(int fd, uint32_t n, uint64_t *v)
{
	for (uint32_t k = 0; k < n; k++)
		assert_int_equal(bpf_map_lookup_elem(fd, &k, &v[k]), 0);
}

/* Whether the running kernel's record of block_rq_complete has the layout
 * classic_complete reads (dev at 8, sector at 16, rwbs at 34). */
static int classic_layout_ok(void)
{
	static const char *const paths[] = {
		"/sys/kernel/tracing/events/block/block_rq_complete/format",
		"/sys/kernel/debug/tracing/events/block/block_rq_complete/format",
	};
	int ok = 0;

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]) && !ok; i++) {
		char *text = ktel_test_slurp(paths[i]);

		if (!text)
			continue;
		ok = strstr(text, "field:dev_t dev;\toffset:8;\tsize:4;") &&
		     strstr(text, "field:sector_t sector;\toffset:16;\tsize:8;") &&
		     strstr(text, "field:char rwbs[10];\toffset:34;");
		free(text);
	}
	return ok;
}

/* The comm of pid, or "?" once it is gone. */
static void comm_of(int32_t pid, char *buf, size_t len)
{
	char path[64], *text;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	text = ktel_test_slurp(path);
	snprintf(buf, len, "%s", text ? text : "?");
	buf[strcspn(buf, "\n")] = '\0';
	free(text);
}

static int is_reader(int32_t pid)
{
	for (int w = 0; w < PARALLEL; w++)
		if (readers[w] == pid)
			return 1;
	return 0;
}

/* The blocks whose reads the tp_btf program counted fewer of than the
 * classic program, from the per-block counts (whatever order the two ran
 * in). */
static void report_blocks(int fd, const uint64_t *before, unsigned n)
{
	static uint64_t now[2 * LOSS_BLOCKS];
	uint64_t fewer = 0, more = 0, short_of_issued = 0;
	int shown = 0, shown_issued = 0;

	read_map(fd, 2 * LOSS_BLOCKS, now);
	for (int b = 0; b < LOSS_BLOCKS; b++) {
		uint64_t btf = now[b] - before[b],
			 cl = now[LOSS_BLOCKS + b] - before[LOSS_BLOCKS + b],
			 issued = n / LOSS_BLOCKS + ((unsigned)b < n % LOSS_BLOCKS);

		/* The test reads block i % 1024 for i below n: these many. */
		if (cl < issued) {
			short_of_issued += issued - cl;
			if (shown_issued++ < 40)
				printf("    block %d: the programs counted %llu of its %llu reads\n",
				       b, (unsigned long long)cl, (unsigned long long)issued);
		}

		if (btf < cl) {
			fewer += cl - btf;
			if (shown++ < 12)
				printf("    block %d (sector %d): tp_btf counted %llu of the classic "
				       "program's %llu reads\n",
				       b, b * 8, (unsigned long long)btf, (unsigned long long)cl);
		} else if (btf > cl) {
			more += btf - cl;
		}
	}
	printf("    per block: tp_btf counted %llu fewer reads than the classic program over "
	       "%d blocks, and %llu more; the classic program %llu fewer than issued over %d "
	       "blocks\n",
	       (unsigned long long)fewer, shown, (unsigned long long)more,
	       (unsigned long long)short_of_issued, shown_issued);
}

/* A perf counter of block_rq_complete on every CPU, filtered to the loop
 * device (as `perf stat -a -e block:block_rq_complete --filter`); fds[cpu],
 * -1 where it cannot be opened. */
static int perf_count_open(int *fds, int ncpu, int filtered)
{
	char *text = ktel_test_slurp("/sys/kernel/tracing/events/block/block_rq_complete/id");
	struct perf_event_attr attr = {0};
	char filter[64];
	int opened = 0;

	if (!text)
		return 0;
	attr.type = PERF_TYPE_TRACEPOINT;
	attr.size = sizeof(attr);
	attr.config = strtoull(text, NULL, 10);
	free(text);
	snprintf(filter, sizeof(filter), "dev == %u", (loop.major << 20) | loop.minor);
	for (int cpu = 0; cpu < ncpu; cpu++) {
		fds[cpu] = (int)syscall(SYS_perf_event_open, &attr, -1, cpu, -1, 0);
		if (fds[cpu] >= 0 && filtered &&
		    ioctl(fds[cpu], PERF_EVENT_IOC_SET_FILTER, filter) != 0) {
			close(fds[cpu]);
			fds[cpu] = -1;
		}
		opened += fds[cpu] >= 0;
	}
	return opened;
}

static uint64_t perf_count_read(const int *fds, int ncpu)
{
	uint64_t sum = 0, v;

	for (int cpu = 0; cpu < ncpu; cpu++)
		if (fds[cpu] >= 0 && read(fds[cpu], &v, sizeof(v)) == sizeof(v))
			sum += v;
	return sum;
}

/* Each CPU's count, as "cpuN count ...". */
static void perf_count_print(const int *fds, int ncpu)
{
	uint64_t v;

	for (int cpu = 0; cpu < ncpu; cpu++)
		if (fds[cpu] >= 0 && read(fds[cpu], &v, sizeof(v)) == sizeof(v))
			printf(" cpu%d %llu", cpu, (unsigned long long)v);
	printf("\n");
}

/* The same reads as each kind of program on block_rq_complete sees them. */
static void test_program_kinds(void **state)
{
	static const char *const attach_order[] = {"btf_complete", "btf_direct_complete",
						   "raw_complete", "btf_done"};
	unsigned n = reads_per_phase();
	uint64_t c0[S_NSLOTS], c1[S_NSLOTS], c[S_NSLOTS], ctx0[16], ctx1[16], cpu0[2 * LOSS_CPUS],
		cpu1[2 * LOSS_CPUS], device, d0, runs0[5], runs1[5];
	static const char *const run_names[] = {"btf_complete", "btf_direct_complete",
						"raw_complete", "btf_done", "classic_complete"};
	struct bpf_link *links[5] = {0};
	int counts_fd, contexts_fd, cpus_fd, log_fd, stats_fd, classic, nlinks = 0;
	struct missed head, m;
	uint32_t k;
	static uint64_t blocks0[2 * LOSS_BLOCKS];
	int ncpu = libbpf_num_possible_cpus(), perf_fds[LOSS_CPUS], nperf;
	int perf_all_fds[LOSS_CPUS];
	uint64_t perf_all0, perf_all1;
	uint64_t perf0, perf1, late[S_NSLOTS], late_device, late_perf;

	(void)state;
	setup_loop();
	kinds = kinds_open();
	counts_fd = map_fd(kinds, "counts");
	contexts_fd = map_fd(kinds, "contexts");
	cpus_fd = map_fd(kinds, "cpus");
	log_fd = map_fd(kinds, "missed_log");
	/* The kernel counts runs only with statistics on; -1 where it refuses. */
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	for (size_t i = 0; i < sizeof(attach_order) / sizeof(attach_order[0]); i++)
		links[nlinks++] = ktel_test_loop_observer_attach(kinds, attach_order[i]);
	/* Last, so that on each completion it runs after the tp_btf programs. */
	classic = classic_layout_ok();
	if (classic)
		links[nlinks++] = ktel_test_loop_observer_attach(kinds, "classic_complete");
	else
		printf("  the kernel's record of block_rq_complete is not the layout "
		       "classic_complete reads: the classic tracepoint is not measured\n");

	nperf = perf_count_open(perf_fds, ncpu, 1);
	(void)perf_count_open(perf_all_fds, ncpu, 0);
	perf0 = perf_count_read(perf_fds, ncpu);
	perf_all0 = perf_count_read(perf_all_fds, ncpu);
	read_map(counts_fd, S_NSLOTS, c0);
	read_map(map_fd(kinds, "blocks"), 2 * LOSS_BLOCKS, blocks0);
	read_map(contexts_fd, 16, ctx0);
	read_map(cpus_fd, 2 * LOSS_CPUS, cpu0);
	for (int i = 0; i < 5; i++)
		runs0[i] = runs_in(kinds, run_names[i]);
	d0 = ktel_test_loop_reads(&loop);
	read_device(n);
	device = ktel_test_loop_reads(&loop) - d0;
	read_map(counts_fd, S_NSLOTS, c1);
	perf1 = perf_count_read(perf_fds, ncpu);
	perf_all1 = perf_count_read(perf_all_fds, ncpu);
	printf("    perf's count for the device per CPU, since it was opened:");
	perf_count_print(perf_fds, ncpu);
	/* The same counts a second later: a completion the programs run for
	 * after the test has read them is late, not lost. */
	sleep(1);
	read_map(counts_fd, S_NSLOTS, late);
	late_device = ktel_test_loop_reads(&loop) - d0;
	late_perf = perf_count_read(perf_fds, ncpu);
	for (int cpu = 0; cpu < ncpu; cpu++) {
		if (perf_fds[cpu] >= 0)
			close(perf_fds[cpu]);
		if (perf_all_fds[cpu] >= 0)
			close(perf_all_fds[cpu]);
	}
	read_map(contexts_fd, 16, ctx1);
	read_map(cpus_fd, 2 * LOSS_CPUS, cpu1);
	for (int i = 0; i < 5; i++)
		runs1[i] = runs_in(kinds, run_names[i]);
	for (int i = nlinks - 1; i >= 0; i--)
		bpf_link__destroy(links[i]);
	if (stats_fd >= 0)
		close(stats_fd);
	for (int i = 0; i < S_NSLOTS; i++)
		c[i] = c1[i] - c0[i];

	if (classic)
		report_blocks(map_fd(kinds, "blocks"), blocks0, n);
	printf("  %u reads issued, %llu counted by the device; missed of them:\n", n,
	       (unsigned long long)device);
	printf("    tp_btf (bpf_probe_read_kernel) %llu, tp_btf (direct loads) %llu, raw_tp %llu, "
	       "classic tracepoint %s%llu, tp_btf on block_io_done %llu\n",
	       (unsigned long long)(device - c[S_BTF]),
	       (unsigned long long)(device - c[S_BTF_DIRECT]),
	       (unsigned long long)(device - c[S_RAW]), classic ? "" : "(not attached) ",
	       (unsigned long long)(classic ? device - c[S_CLASSIC] : 0),
	       (unsigned long long)(device - c[S_DONE]));
	printf("    a second later: the device %llu, perf %llu, tp_btf %llu, raw_tp %llu, classic "
	       "%llu, block_io_done %llu\n",
	       (unsigned long long)late_device, (unsigned long long)(late_perf - perf0),
	       (unsigned long long)(late[S_BTF] - c0[S_BTF]),
	       (unsigned long long)(late[S_RAW] - c0[S_RAW]),
	       (unsigned long long)(late[S_CLASSIC] - c0[S_CLASSIC]),
	       (unsigned long long)(late[S_DONE] - c0[S_DONE]));
	printf("    completions of the device whose record is not a read: %llu\n",
	       (unsigned long long)c[S_OTHER_OP]);
	{
		struct missed h, e;
		uint32_t key = 0;

		assert_int_equal(bpf_map_lookup_elem(log_fd, &key, &h), 0);
		for (key = 1; key <= h.sector && key <= 12; key++) {
			char rwbs[9] = {0}, comm[32];

			assert_int_equal(bpf_map_lookup_elem(log_fd, &key, &e), 0);
			memcpy(rwbs, &e.seen_dev, 8);
			comm_of(e.pid, comm, sizeof(comm));
			printf("    not a read: rwbs %s sector %llu + %llu error %d cpu %u pid %d (%s%s)\n",
			       rwbs, (unsigned long long)e.sector,
			       (unsigned long long)e.seen_sector, (int)e.seen_ret, e.cpu,
			       (int)e.pid, is_reader(e.pid) ? "a reader, " : "", comm);
		}
	}
	printf("    perf's own count of block_rq_complete for the device (%d CPUs): %llu\n", nperf,
	       (unsigned long long)(perf1 - perf0));
	printf("    perf's count of block_rq_complete for any device: %llu\n",
	       (unsigned long long)(perf_all1 - perf_all0));
	printf("    runs for any device: tp_btf %llu, raw_tp %llu, classic %llu; tp_btf runs "
	       "whose read of the request failed: %llu\n",
	       (unsigned long long)c[S_BTF_ALL], (unsigned long long)c[S_RAW_ALL],
	       (unsigned long long)c[S_CLASSIC_ALL], (unsigned long long)c[S_BTF_READ_FAIL]);
	for (int i = 0; i < 5; i++)
		printf("    %s: runs the kernel counted %s%llu, skipped (recursion_misses) %llu\n",
		       run_names[i], stats_fd >= 0 ? "" : "(statistics off) ",
		       (unsigned long long)(runs1[i] - runs0[i]),
		       (unsigned long long)skipped_in(kinds, run_names[i]));
	if (classic) {
		printf("    the classic program found %llu of the device's reads the tp_btf program "
		       "had not counted, and %llu runs where tp_btf was ahead\n",
		       (unsigned long long)c[S_MISSED_BY_BTF],
		       (unsigned long long)c[S_CLASSIC_AHEAD]);
		printf("    of those, tp_btf ran for the completion (its runs on the CPU kept up "
		       "with the classic program's) %llu, did not run %llu\n",
		       (unsigned long long)c[S_MISSED_BTF_RAN],
		       (unsigned long long)(c[S_MISSED_BY_BTF] - c[S_MISSED_BTF_RAN]));
		if (c[S_MISSED_BY_BTF] > device / 2)
			printf("    (the classic program ran before the tp_btf one: another perf "
			       "user of block_rq_complete had registered its probe first, so the "
			       "reads named below are not the missed ones)\n");
		printf("    all reads / those missed, by context:");
		for (int i = 0; i < 2; i++)
			printf(" %s %llu/%llu", context_names[i],
			       (unsigned long long)(ctx1[i] - ctx0[i]),
			       (unsigned long long)(ctx1[8 + i] - ctx0[8 + i]));
		printf("\n    per CPU, all reads / those missed:");
		for (int i = 0; i < LOSS_CPUS; i++)
			if (cpu1[i] - cpu0[i] || cpu1[LOSS_CPUS + i] - cpu0[LOSS_CPUS + i])
				printf(" cpu%d %llu/%llu", i,
				       (unsigned long long)(cpu1[i] - cpu0[i]),
				       (unsigned long long)(cpu1[LOSS_CPUS + i] -
							    cpu0[LOSS_CPUS + i]));
		printf("\n");
		k = 0;
		assert_int_equal(bpf_map_lookup_elem(log_fd, &k, &head), 0);
		for (k = 1; k <= head.sector && k <= LOSS_LOG; k++) {
			char comm[32];

			assert_int_equal(bpf_map_lookup_elem(log_fd, &k, &m), 0);
			comm_of(m.pid, comm, sizeof(comm));
			if (k <= 12)
				printf("    missed: sector %llu cpu %u %s, pid %d (%s%s); tp_btf %s "
				       "(its last run here read %u:%u flags 0x%x sector %llu, "
				       "result %d)\n",
				       (unsigned long long)m.sector, m.cpu,
				       context_names[m.context < 2 ? m.context : 0], (int)m.pid,
				       is_reader(m.pid) ? "a reader, " : "", comm,
				       m.btf_ran ? "ran for it" : "did not run for it",
				       m.seen_dev >> 20, m.seen_dev & 0xfffff, m.seen_flags,
				       (unsigned long long)m.seen_sector, (int)m.seen_ret);
		}
	}
	assert_int_equal(device, n);
	assert_true(c[S_BTF] <= device && c[S_BTF_DIRECT] <= device && c[S_RAW] <= device &&
		    c[S_DONE] <= device && c[S_CLASSIC] <= device);
}

/* A program whose run fires its own tracepoint again: the kernel skips the
 * nested run and counts it in recursion_misses, which is read as the phases
 * above read it. So a zero there means no run was skipped. */
static void test_recursion_counted(void **state)
{
	LIBBPF_OPTS(bpf_test_run_opts, opts);
	struct bpf_link *l;
	uint64_t before, runs, v;
	uint32_t k = S_RECURSE_RUNS;
	int counts_fd;

	(void)state;
	kinds = kinds_open();
	counts_fd = map_fd(kinds, "counts");
	l = ktel_test_loop_observer_attach(kinds, "recurse");
	before = skipped_in(kinds, "recurse");
	assert_int_equal(bpf_prog_test_run_opts(bpf_program__fd(
							bpf_object__find_program_by_name(kinds,
											 "kick")),
						&opts),
			 0);
	bpf_link__destroy(l);
	assert_int_equal(bpf_map_lookup_elem(counts_fd, &k, &v), 0);
	runs = v;
	printf("  recurse ran %llu times, the kernel skipped %llu of its runs\n",
	       (unsigned long long)runs,
	       (unsigned long long)(skipped_in(kinds, "recurse") - before));
	assert_true(runs >= 1);
	assert_true(skipped_in(kinds, "recurse") - before >= 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_recursion_counted, kinds_teardown),
		cmocka_unit_test_teardown(test_attach_loss, teardown),
		cmocka_unit_test_teardown(test_program_kinds, kinds_teardown),
	};

	if (geteuid() != 0) {
		fprintf(stderr, "SKIP: needs root (BPF, loop devices)\n");
		return 77;
	}
	if (ktel_test_run("losetup --version > /dev/null 2>&1") != 0) {
		fprintf(stderr, "FAIL: losetup must run\n");
		return 1;
	}
	/* KTEL_TEST_FILTER=name runs one test while working on it. */
	if (getenv("KTEL_TEST_FILTER"))
		cmocka_set_test_filter(getenv("KTEL_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
