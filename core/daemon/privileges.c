// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Capability drop for the running daemon. Raw capget/capset rather than
 * libcap: the daemon needs three calls, and Android builds do not always
 * ship libcap's headers.
 *
 * capset() changes the calling thread only. Other threads are reached with a
 * real-time signal whose handler makes the same calls on its own thread
 * (what libcap's psx does for every pthread_create); the result is then
 * checked thread by thread in /proc/self/task.
 */
#include "privileges.h"
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <linux/capability.h>

#define ACK_WAIT_MS 2000
#define SCAN_ROUNDS 8

#define CAP_NAME(c) [c] = #c
static const char *const cap_names[] = {
	CAP_NAME(CAP_CHOWN),
	CAP_NAME(CAP_DAC_OVERRIDE),
	CAP_NAME(CAP_DAC_READ_SEARCH),
	CAP_NAME(CAP_FOWNER),
	CAP_NAME(CAP_FSETID),
	CAP_NAME(CAP_KILL),
	CAP_NAME(CAP_SETGID),
	CAP_NAME(CAP_SETUID),
	CAP_NAME(CAP_SETPCAP),
	CAP_NAME(CAP_LINUX_IMMUTABLE),
	CAP_NAME(CAP_NET_BIND_SERVICE),
	CAP_NAME(CAP_NET_BROADCAST),
	CAP_NAME(CAP_NET_ADMIN),
	CAP_NAME(CAP_NET_RAW),
	CAP_NAME(CAP_IPC_LOCK),
	CAP_NAME(CAP_IPC_OWNER),
	CAP_NAME(CAP_SYS_MODULE),
	CAP_NAME(CAP_SYS_RAWIO),
	CAP_NAME(CAP_SYS_CHROOT),
	CAP_NAME(CAP_SYS_PTRACE),
	CAP_NAME(CAP_SYS_PACCT),
	CAP_NAME(CAP_SYS_ADMIN),
	CAP_NAME(CAP_SYS_BOOT),
	CAP_NAME(CAP_SYS_NICE),
	CAP_NAME(CAP_SYS_RESOURCE),
	CAP_NAME(CAP_SYS_TIME),
	CAP_NAME(CAP_SYS_TTY_CONFIG),
	CAP_NAME(CAP_MKNOD),
	CAP_NAME(CAP_LEASE),
	CAP_NAME(CAP_AUDIT_WRITE),
	CAP_NAME(CAP_AUDIT_CONTROL),
	CAP_NAME(CAP_SETFCAP),
	CAP_NAME(CAP_MAC_OVERRIDE),
	CAP_NAME(CAP_MAC_ADMIN),
	CAP_NAME(CAP_SYSLOG),
	CAP_NAME(CAP_WAKE_ALARM),
	CAP_NAME(CAP_BLOCK_SUSPEND),
	CAP_NAME(CAP_AUDIT_READ),
	CAP_NAME(CAP_PERFMON),
	CAP_NAME(CAP_BPF),
	CAP_NAME(CAP_CHECKPOINT_RESTORE),
};

/* What every thread applies: written before the signal handler is installed
 * and only read while it may run. */
static struct {
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	uint64_t bset_drop;
	uint64_t kept; /* what the process holds after the drop */
	int last_cap;
	atomic_int acks;
	atomic_int error; /* first errno seen by a thread, 0 if none */
} plan;

void ktel_privileges_format(uint64_t set, char *buf, size_t len)
{
	size_t off = 0;

	if (!len)
		return;
	buf[0] = '\0';
	for (int c = 0; c < 64 && off < len; c++) {
		char num[16];
		const char *name = num;

		if (!(set & KTEL_CAP_BIT(c)))
			continue;
		if ((size_t)c < sizeof(cap_names) / sizeof(cap_names[0]) && cap_names[c])
			name = cap_names[c];
		else
			snprintf(num, sizeof(num), "cap_%d", c);
		off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? "," : "", name);
	}
	if (!set)
		snprintf(buf, len, "none");
}

int ktel_privileges_cap_last_cap(void)
{
	FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
	int last = CAP_LAST_CAP;

	if (f) {
		if (fscanf(f, "%d", &last) != 1 || last < 0 || last > 63)
			last = CAP_LAST_CAP;
		fclose(f);
	}
	return last;
}

bool ktel_privileges_memlock_charged(const char *release)
{
	unsigned int major, minor;

	if (!release || sscanf(release, "%u.%u", &major, &minor) != 2)
		return true;
	/* 5.11 moved BPF memory from RLIMIT_MEMLOCK to the memory cgroup. */
	return major < 5 || (major == 5 && minor < 11);
}

uint64_t ktel_privileges_keep_set(const struct ktel_privileges_opts *o, int cap_last_cap)
{
	uint64_t set;

	if (o->exact)
		return o->keep;
	/*
	 * Loading a tracing program needs CAP_BPF and CAP_PERFMON (kernel
	 * bpf_prog_load: bpf_capable() and perfmon_capable()); creating maps and
	 * loading BTF need CAP_BPF. Before 5.8 both checks were CAP_SYS_ADMIN.
	 */
	if (cap_last_cap >= CAP_BPF)
		set = KTEL_CAP_BIT(CAP_BPF) | KTEL_CAP_BIT(CAP_PERFMON);
	else
		set = KTEL_CAP_BIT(CAP_SYS_ADMIN);
	/*
	 * A root-owned process may only give its files a group it is in; a
	 * reload may add or change a stream sink's `group`, and a plugin
	 * dropped in later gets pins of pin_group. Kept whatever the config
	 * at start says, so that a reload may ask what a start may.
	 */
	set |= KTEL_CAP_BIT(CAP_CHOWN);
	/* A reload may open a Prometheus sink on a port below 1024, as a
	 * start may (only where the process holds it: not under the unit). */
	set |= KTEL_CAP_BIT(CAP_NET_BIND_SERVICE);
	return set | o->keep;
}

static int capget_self(struct __user_cap_data_struct *data)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};

	return syscall(SYS_capget, &hdr, data) ? -errno : 0;
}

int ktel_privileges_current(uint64_t *ret_effective, uint64_t *ret_permitted)
{
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {{0}};
	int r = capget_self(data);

	if (r)
		return r;
	*ret_effective = data[0].effective | (uint64_t)data[1].effective << 32;
	*ret_permitted = data[0].permitted | (uint64_t)data[1].permitted << 32;
	return 0;
}

/* The plan on the calling thread; async-signal-safe (only system calls). */
static int apply_here(void)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};

	for (int c = 0; c <= plan.last_cap; c++)
		if ((plan.bset_drop & KTEL_CAP_BIT(c)) && prctl(PR_CAPBSET_DROP, c, 0, 0, 0))
			return errno;
	/* EINVAL: a kernel without ambient capabilities (< 4.3) has none to clear. */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) && errno != EINVAL)
		return errno;
	if (syscall(SYS_capset, &hdr, plan.data))
		return errno;
	return 0;
}

static void on_drop_signal(int sig)
{
	int saved = errno, e = apply_here(), none = 0;

	if (e)
		atomic_compare_exchange_strong(&plan.error, &none, e);
	atomic_fetch_add(&plan.acks, 1);
	errno = saved;
}

/* One "Key:\t<hex>" line of /proc/self/task/<tid>/status, and the name. */
static int task_status(pid_t tid, const char *key, uint64_t *ret, char *name, size_t name_len)
{
	char path[64], line[256];
	size_t klen = strlen(key);
	int r = -ENOENT;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "Name:\t", 6) == 0 && name) {
			snprintf(name, name_len, "%s", line + 6);
			name[strcspn(name, "\n")] = '\0';
		}
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			*ret = strtoull(line + klen + 1, NULL, 16);
			r = 0;
		}
	}
	fclose(f);
	return r;
}

/* Every thread of the process, or -E2BIG beyond max. */
static int list_threads(pid_t *tids, size_t max, size_t *ret_n)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	size_t n = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		long tid = strtol(e->d_name, NULL, 10);

		if (tid <= 0)
			continue;
		if (n == max) {
			closedir(d);
			return -E2BIG;
		}
		tids[n++] = (pid_t)tid;
	}
	closedir(d);
	*ret_n = n;
	return 0;
}

static bool contains(const pid_t *tids, size_t n, pid_t tid)
{
	for (size_t i = 0; i < n; i++)
		if (tids[i] == tid)
			return true;
	return false;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* Signal one other thread and wait until its handler ran. */
static int apply_to_thread(pid_t tid, int sig, struct ktel_err *err)
{
	char name[64] = "?";
	uint64_t blocked = 0;
	int before = atomic_load(&plan.acks), e;

	if (task_status(tid, "SigBlk", &blocked, name, sizeof(name)) == -ENOENT)
		return 0; /* it exited */
	if (blocked & (1ULL << (sig - 1)))
		return ktel_err_set(err, EBUSY,
				    "drop_privileges: thread %d (%s) blocks signal %d, "
				    "its capabilities cannot be changed",
				    (int)tid, name, sig);
	if (syscall(SYS_tgkill, getpid(), tid, sig)) {
		if (errno == ESRCH)
			return 0;
		return ktel_err_set(err, errno, "drop_privileges: signal thread %d (%s): %s",
				    (int)tid, name, strerror(errno));
	}
	for (int waited = 0; atomic_load(&plan.acks) == before; waited++) {
		if (waited == ACK_WAIT_MS)
			return ktel_err_set(err, ETIMEDOUT,
					    "drop_privileges: thread %d (%s) did "
					    "not take the change within %d ms",
					    (int)tid, name, ACK_WAIT_MS);
		sleep_ms(1);
	}
	e = atomic_load(&plan.error);
	if (e)
		return ktel_err_set(err, e, "drop_privileges: thread %d (%s): %s", (int)tid, name,
				    strerror(e));
	return 0;
}

/*
 * Apply the plan to every other thread. Threads that appear meanwhile were
 * created by an already-dropped thread (they inherit its sets) or are found
 * by the next scan; a scan that finds nothing new ends it.
 */
static int apply_to_others(int sig, struct ktel_err *err)
{
	static pid_t done[KTEL_PRIVILEGES_MAX_THREADS], now[KTEL_PRIVILEGES_MAX_THREADS];
	size_t n_done = 0, n_now;
	pid_t self = (pid_t)syscall(SYS_gettid);
	bool fresh = true;
	int r;

	done[n_done++] = self;
	for (int round = 0; fresh && round < SCAN_ROUNDS; round++) {
		r = list_threads(now, KTEL_PRIVILEGES_MAX_THREADS, &n_now);
		if (r)
			return ktel_err_set(err, -r, "drop_privileges: list /proc/self/task: %s",
					    r == -E2BIG ? "more than 256 threads" : strerror(-r));
		fresh = false;
		for (size_t i = 0; i < n_now; i++) {
			if (contains(done, n_done, now[i]))
				continue;
			if (n_done == KTEL_PRIVILEGES_MAX_THREADS)
				return ktel_err_set(err, E2BIG,
						    "drop_privileges: more than %d threads",
						    KTEL_PRIVILEGES_MAX_THREADS);
			r = apply_to_thread(now[i], sig, err);
			if (r)
				return r;
			done[n_done++] = now[i];
			fresh = true;
		}
	}
	return 0;
}

/* Every thread now holds at most keep, in both effective and permitted. */
static int verify_threads(uint64_t keep, struct ktel_err *err)
{
	static pid_t tids[KTEL_PRIVILEGES_MAX_THREADS];
	char name[64], have[512];
	uint64_t eff, prm;
	size_t n;
	int r = list_threads(tids, KTEL_PRIVILEGES_MAX_THREADS, &n);

	if (r)
		return ktel_err_set(err, -r, "drop_privileges: list /proc/self/task: %s",
				    strerror(-r));
	for (size_t i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "?");
		if (task_status(tids[i], "CapEff", &eff, name, sizeof(name)) ||
		    task_status(tids[i], "CapPrm", &prm, NULL, 0))
			continue; /* it exited */
		if (((eff | prm) & ~keep) == 0)
			continue;
		ktel_privileges_format((eff | prm) & ~keep, have, sizeof(have));
		return ktel_err_set(err, EPERM, "drop_privileges: thread %d (%s) still holds %s",
				    (int)tids[i], name, have);
	}
	return 0;
}

/* On kernels charging BPF memory to RLIMIT_MEMLOCK, later loads need room
 * that only CAP_SYS_RESOURCE could grant after the drop. */
static int raise_memlock(struct ktel_err *err)
{
	struct rlimit inf = {RLIM_INFINITY, RLIM_INFINITY};
	struct utsname u;

	if (uname(&u) == 0 && !ktel_privileges_memlock_charged(u.release))
		return 0;
	if (setrlimit(RLIMIT_MEMLOCK, &inf))
		return ktel_err_set(err, errno,
				    "drop_privileges: kernel %s charges BPF memory to "
				    "RLIMIT_MEMLOCK and raising it failed: %s",
				    u.release, strerror(errno));
	return 0;
}

/* The plan for keep: the sets, and the bounding set when we may change it. */
static int make_plan(uint64_t keep, struct ktel_err *err)
{
	struct __user_cap_data_struct now[_LINUX_CAPABILITY_U32S_3] = {{0}};
	uint64_t permitted, kept;
	int r = capget_self(now);

	if (r)
		return ktel_err_set(err, -r, "drop_privileges: capget: %s", strerror(-r));
	permitted = now[0].permitted | (uint64_t)now[1].permitted << 32;
	kept = keep & permitted;
	plan.kept = kept;
	memset(plan.data, 0, sizeof(plan.data));
	for (int i = 0; i < 2; i++) {
		plan.data[i].effective = (uint32_t)(kept >> (32 * i));
		plan.data[i].permitted = (uint32_t)(kept >> (32 * i));
	}
	plan.last_cap = ktel_privileges_cap_last_cap();
	plan.bset_drop = 0;
	if (now[0].effective & KTEL_CAP_BIT(CAP_SETPCAP))
		for (int c = 0; c <= plan.last_cap; c++)
			if (!(keep & KTEL_CAP_BIT(c)) && prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1)
				plan.bset_drop |= KTEL_CAP_BIT(c);
	atomic_store(&plan.acks, 0);
	atomic_store(&plan.error, 0);
	return 0;
}

/* One line saying what every thread kept, and what the config's
 * wish list named that the process did not hold to begin with. */
static void log_dropped(uint64_t keep)
{
	char kept[512], absent[512];

	ktel_privileges_format(plan.kept, kept, sizeof(kept));
	ktel_privileges_format(keep & ~plan.kept, absent, sizeof(absent));
	ktel_log(KTEL_LOG_INFO,
		 "drop_privileges: every thread now holds only %s (not held at start, so not "
		 "kept: %s); bounding set %s",
		 kept, absent, plan.bset_drop ? "reduced to match" : "unchanged (no CAP_SETPCAP)");
}

int ktel_privileges_drop(const struct ktel_privileges_opts *o, struct ktel_err *err)
{
	struct sigaction sa = {.sa_handler = on_drop_signal, .sa_flags = SA_RESTART}, old;
	uint64_t keep;
	int sig, r;

	if (!o || !o->drop)
		return 0;
	keep = ktel_privileges_keep_set(o, ktel_privileges_cap_last_cap());
	r = raise_memlock(err);
	if (r)
		return r;
	r = make_plan(keep, err);
	if (r)
		return r;
	/* Not SIGRTMIN itself: glibc and some libraries take the first ones. */
	sig = SIGRTMIN + 6;
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, &old))
		return ktel_err_set(err, errno, "drop_privileges: sigaction: %s", strerror(errno));
	r = apply_to_others(sig, err);
	if (r)
		return r; /* the handler stays: a late thread may still run it */
	sigaction(sig, &old, NULL);
	r = apply_here();
	if (r)
		return ktel_err_set(err, r, "drop_privileges: capset on the main thread: %s",
				    strerror(r));
	r = verify_threads(keep, err);
	if (r)
		return r;
	log_dropped(keep);
	return 0;
}
