// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * attrload - the workloads of the lab guest's attribution checks, each with
 * the numbers its oracle needs.
 *
 *   attrload io DEV CGROUP_DIR|- UID READS WRITES
 *   attrload runq SECONDS CGROUP_DIR...
 *
 * io: joins the cgroup (CGROUP_DIR/cgroup.procs; "-" stays), opens DEV with
 * O_DIRECT, drops to UID (0 stays root) and issues READS reads, then WRITES
 * writes, of 4 KiB each, each waited for before the next: every one is one
 * bio and one request, none can merge. Reads come from the first MiB,
 * writes go to the second. Exits 0 when every one transferred 4 KiB.
 *
 * runq: one child per CGROUP_DIR, all on CPU 0, spins for SECONDS (the
 * last one, the victim, at nice 19; its cgroup's cpu.weight is the
 * caller's), then sleeps until killed. Each child is born in its cgroup
 * (clone3 with CLONE_INTO_CGROUP), so every wait of its life, the first one
 * after the fork included, is a wait in that cgroup; its run_delay
 * (/proc/<pid>/schedstat, the kernel's own sum of the time it waited on a
 * run queue, zero at fork) is read after the kill from the zombie, before it
 * is reaped, so it covers the wait after the kill too. A child that joined
 * its cgroup itself would have waits on both sides of the move, and with a
 * cpu.weight of 1 one such wait is most of a second. Prints one line per
 * child:
 *
 *   runq cgroup=<CGROUP_DIR> pid=<pid> run_delay_ns=<run_delay>
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BLOCK 4096
#define MAX_TASKS 8

static int join_cgroup(const char *dir)
{
	char path[512];
	FILE *f;

	if (strcmp(dir, "-") == 0)
		return 0;
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	f = fopen(path, "we");
	if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0) {
		fprintf(stderr, "attrload: %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

static int io(char **argv)
{
	unsigned long uid = strtoul(argv[3], NULL, 0);
	long reads = strtol(argv[4], NULL, 0), writes = strtol(argv[5], NULL, 0);
	void *buf;
	int fd;

	if (join_cgroup(argv[2]))
		return 1;
	/* Open as root: the device node is root's; the I/O is the uid's. */
	fd = open(argv[1], O_RDWR | O_DIRECT | O_CLOEXEC);
	if (fd < 0 || posix_memalign(&buf, BLOCK, BLOCK)) {
		fprintf(stderr, "attrload: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	memset(buf, 0x5a, BLOCK);
	if (uid && setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid)) {
		perror("attrload: setresuid");
		return 1;
	}
	for (long i = 0; i < reads; i++)
		if (pread(fd, buf, BLOCK, (off_t)(i % 256) * BLOCK) != BLOCK) {
			perror("attrload: pread");
			return 1;
		}
	for (long i = 0; i < writes; i++)
		if (pwrite(fd, buf, BLOCK, (off_t)(256 + i % 256) * BLOCK) != BLOCK) {
			perror("attrload: pwrite");
			return 1;
		}
	return 0;
}

struct runq_shared {
	uint64_t end_ns;
	int ready[MAX_TASKS];
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The second field of /proc/<pid>/schedstat; UINT64_MAX when unreadable. */
static uint64_t run_delay_of(pid_t pid)
{
	unsigned long long run, delay;
	char path[64];
	FILE *f;
	int n;

	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return UINT64_MAX;
	n = fscanf(f, "%llu %llu", &run, &delay);
	fclose(f);
	return n == 2 ? delay : UINT64_MAX;
}

static void runq_child(struct runq_shared *sh, int i, int victim)
{
	if (victim && setpriority(PRIO_PROCESS, 0, 19))
		_exit(12);
	__atomic_store_n(&sh->ready[i], 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&sh->end_ns, __ATOMIC_SEQ_CST) ||
	       mono_ns() < __atomic_load_n(&sh->end_ns, __ATOMIC_SEQ_CST))
		;
	for (;;)
		pause();
}

static int runq(int argc, char **argv)
{
	int n = argc - 2, rc = 0;
	unsigned seconds = (unsigned)strtoul(argv[1], NULL, 0);
	pid_t pids[MAX_TASKS];
	struct runq_shared *sh;
	cpu_set_t set;

	if (n < 1 || n > MAX_TASKS) {
		fprintf(stderr, "attrload: runq takes 1 to %d cgroups\n", MAX_TASKS);
		return 2;
	}
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("attrload: mmap");
		return 1;
	}
	/* The children inherit CPU 0. */
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		perror("attrload: sched_setaffinity");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		struct clone_args ca = {.flags = CLONE_INTO_CGROUP, .exit_signal = SIGCHLD};
		int cg = open(argv[2 + i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (cg < 0) {
			fprintf(stderr, "attrload: %s: %s\n", argv[2 + i], strerror(errno));
			return 1;
		}
		ca.cgroup = (uint64_t)cg;
		/* Like fork(): the child runs on a copy of this stack. */
		pids[i] = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
		if (pids[i] < 0) {
			perror("attrload: clone3(CLONE_INTO_CGROUP)");
			return 1;
		}
		if (pids[i] == 0)
			runq_child(sh, i, i == n - 1);
		close(cg);
	}
	for (int i = 0; i < n; i++)
		while (!__atomic_load_n(&sh->ready[i], __ATOMIC_SEQ_CST)) {
			int status;

			if (waitpid(pids[i], &status, WNOHANG) == pids[i]) {
				fprintf(stderr, "attrload: child %d exited (status 0x%x)\n", i,
					status);
				return 1;
			}
			usleep(1000);
		}
	__atomic_store_n(&sh->end_ns, mono_ns() + seconds * 1000000000ULL, __ATOMIC_SEQ_CST);
	sleep(seconds + 1);
	for (int i = 0; i < n; i++) {
		siginfo_t si;
		uint64_t d;

		kill(pids[i], SIGKILL);
		/* The zombie still has its schedstat: read it before reaping. */
		if (waitid(P_PID, (id_t)pids[i], &si, WEXITED | WNOWAIT)) {
			perror("attrload: waitid");
			return 1;
		}
		d = run_delay_of(pids[i]);
		if (d == UINT64_MAX) {
			fprintf(stderr, "attrload: no run_delay for child %d\n", i);
			rc = 1;
		} else {
			printf("runq cgroup=%s pid=%d run_delay_ns=%llu\n", argv[2 + i],
			       (int)pids[i], (unsigned long long)d);
		}
		waitpid(pids[i], NULL, 0);
	}
	return rc;
}

int main(int argc, char **argv)
{
	if (argc == 7 && strcmp(argv[1], "io") == 0)
		return io(argv + 1);
	if (argc >= 4 && strcmp(argv[1], "runq") == 0)
		return runq(argc - 1, argv + 1);
	fprintf(stderr, "usage: attrload io DEV CGROUP_DIR|- UID READS WRITES\n"
			"       attrload runq SECONDS CGROUP_DIR...\n");
	return 2;
}
