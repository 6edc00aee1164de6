// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ktel_bench_stream: sustained events per second from a BPF ring buffer to
 * the JSON sink on one core, and the events lost when the kernel produces at
 * twice (and at half) that rate.
 *
 * Method. The fx_stream_flood test plugin emits BURST 11-field events
 * (ints, bool, an enum, a label-map id, a nested struct, a char array, a
 * byte array; ~750 bytes as a JSON line) into a 1 MiB ring buffer per
 * getppid() of one thread: BURST is 4 (KTEL_BENCH_BURST=1..16 sets it), so
 * that one producer outruns the consumer also where a syscall is slow (a
 * paravirtualized guest: one event per getppid() made at most ~700k/s
 * there, and the consumer was never the limit). That producer thread is
 * pinned to CPU 1 and makes getppid() calls, flat out or paced to a target
 * rate. The consumer - everything the daemon does for a stream: uv_poll on
 * the ring's epoll fd, ring_buffer__consume in budgets, BTF decode into
 * event records, the router, the JSON sink formatting every record into its
 * bounded queue and writing it with uv_fs_write - runs on the main thread,
 * pinned to CPU 0 before the loop and libuv's thread pool exist, so the
 * pool's writer threads are on CPU 0 too: one core.
 *
 * Phases, each DURATION seconds (default 3), the ring drained in between:
 *   saturate  producer flat out. If the kernel lost events, the consumer was
 *             the bottleneck and the rate the sink wrote is the sustained
 *             throughput. If nothing was lost, the producer was the limit
 *             and the figure is a lower bound (said so).
 *   2x        producer paced at twice the sustained rate: lost events and
 *             their share.
 *   0.5x      producer paced at half of it: nothing should be lost.
 * Per phase: events produced (the program's own count), delivered by the
 * reader, lost in the kernel (lost map), written by the sink (sent) and
 * dropped by it (queue full), and the consumer thread's CPU time.
 *
 * Usage: ktel_bench_stream [DURATION_S [JSON_PATH | stream:SOCKET [PLUGIN_SO]]]
 * JSON_PATH defaults to /dev/null (formatting and write syscalls are still
 * paid; the disk is not measured). stream:SOCKET measures the stream sink
 * instead: it listens on SOCKET and one subscriber thread (pinned to the
 * producer's CPU: a client, not the daemon) reads and discards its lines;
 * "sink wrote" is then the lines the sink sent to it. Needs root. Prints figures; never passes
 * or fails on them.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <uv.h>

#include "bpf_lifecycle.h"
#include "memory.h"
#include "router.h"
#include "stream_reader.h"

#define METRIC "fx_stream_big"
#define SINK "json"
#define CONSUMER_CPU 0
#define PRODUCER_CPU 1
#define PACE_STEP 64

struct producer {
	pthread_t thread;
	atomic_int tid;
	atomic_bool run; /* produce while set */
	atomic_bool quit;
	bool yield_cpu;            /* nice 10: a subscriber shares its CPU */
	atomic_uint_fast64_t rate; /* events/s, 0: flat out */
	atomic_uint_fast64_t made;
	unsigned burst; /* events per getppid() */
	bool pinned;
};

/* The stream sink's subscriber (a `ktelemetryctl watch`): reads and counts. */
struct subscriber {
	pthread_t thread;
	int fd;
	bool started;
	atomic_bool quit;
	atomic_uint_fast64_t bytes;
};

struct bench {
	uv_loop_t loop;
	const char *sock_path; /* stream sink mode: its socket */
	struct subscriber sub;
	struct ktel_router *router;
	struct ktel_stream_reader *sr;
	struct producer prod;
};

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

static uint64_t clock_cpu_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static bool pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set) == 0;
}

/* getppid() calls, flat out or paced to rate, while run is set. */
static void *produce(void *arg)
{
	struct producer *p = arg;

	p->pinned = pin(PRODUCER_CPU);
	/* Spinning flat out, it would starve the stream subscriber on its CPU
	 * and the sink would measure the subscriber; niced, it takes what the
	 * subscriber leaves. */
	if (p->yield_cpu)
		setpriority(PRIO_PROCESS, (id_t)gettid(), 10);
	atomic_store(&p->tid, (int)gettid());
	while (!atomic_load(&p->quit)) {
		uint64_t rate = atomic_load(&p->rate), t0 = now_ns(), n = 0;

		if (!atomic_load(&p->run)) {
			usleep(1000);
			continue;
		}
		while (atomic_load(&p->run)) {
			for (int i = 0; i < PACE_STEP; i++)
				syscall(SYS_getppid);
			n += PACE_STEP * p->burst;
			atomic_fetch_add(&p->made, PACE_STEP * p->burst);
			if (!rate)
				continue;
			/* Paced: wait (spinning: this CPU is the producer's alone)
			 * until the schedule catches up with what was made. Behind
			 * by more than 10 ms of events (the thread was preempted),
			 * start a new schedule rather than catch up in one burst
			 * that alone could fill the ring. */
			if ((now_ns() - t0) * rate / 1000000000ULL >
			    n + rate / 100 + PACE_STEP * p->burst) {
				t0 = now_ns();
				n = 0;
			}
			while (atomic_load(&p->run) && (now_ns() - t0) * rate / 1000000000ULL < n)
				;
		}
	}
	return NULL;
}

/* Read everything the stream sink sends until told to quit. Pinned to the
 * producer's CPU: the subscriber is a client, not the daemon's core. */
static void *subscribe(void *arg)
{
	struct subscriber *u = arg;
	static char buf[1 << 20];

	pin(PRODUCER_CPU);
	while (!atomic_load(&u->quit)) {
		ssize_t n = read(u->fd, buf, sizeof(buf));

		if (n <= 0)
			break;
		atomic_fetch_add(&u->bytes, (uint64_t)n);
	}
	return NULL;
}

static int subscriber_start(struct bench *b, struct ktel_err *err)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct subscriber *u = &b->sub;

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", b->sock_path);
	u->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (u->fd < 0 || connect(u->fd, (struct sockaddr *)&sun, sizeof(sun)))
		return ktel_err_set(err, errno, "connect %s: %s", b->sock_path, strerror(errno));
	/* The sink accepts on the loop: give it 100 ms to. */
	for (int i = 0; i < 100; i++) {
		uv_run(&b->loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	if (pthread_create(&u->thread, NULL, subscribe, u))
		return ktel_err_set(err, EAGAIN, "subscriber thread");
	u->started = true;
	return 0;
}

static void subscriber_stop(struct subscriber *u)
{
	if (!u->started)
		return;
	atomic_store(&u->quit, true);
	shutdown(u->fd, SHUT_RDWR);
	pthread_join(u->thread, NULL);
	close(u->fd);
}

static void on_records(void *ctx, const struct ktel_record *recs, size_t n)
{
	struct bench *b = ctx;

	ktel_router__route(b->router, recs, n, NULL, 0);
}

static void on_stop(uv_timer_t *t)
{
	uv_stop(t->loop);
}

static void run_for(struct bench *b, uint64_t ms)
{
	uv_timer_t t;

	uv_timer_init(&b->loop, &t);
	uv_timer_start(&t, on_stop, ms, 0);
	uv_run(&b->loop, UV_RUN_DEFAULT);
	uv_close((uv_handle_t *)&t, NULL);
	uv_run(&b->loop, UV_RUN_NOWAIT);
}

struct snap {
	struct ktel_stream_stats rs;
	struct ktel_sink_stats ss;
	uint64_t made, wall, cpu_thread, cpu_others;
};

static void snap(struct bench *b, struct snap *s)
{
	ktel_stream_reader__stats(b->sr, &s->rs);
	ktel_router__sink_stats(b->router, SINK, &s->ss);
	s->made = atomic_load(&b->prod.made);
	s->wall = now_ns();
	clockid_t prod_clock;

	s->cpu_thread = thread_cpu_ns();
	/* The consumer side: the whole process but the producer thread. */
	s->cpu_others = clock_cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
	if (pthread_getcpuclockid(b->prod.thread, &prod_clock) == 0)
		s->cpu_others -= clock_cpu_ns(prod_clock);
	/* ... and but the stream subscriber, a client. */
	if (b->sub.started && pthread_getcpuclockid(b->sub.thread, &prod_clock) == 0)
		s->cpu_others -= clock_cpu_ns(prod_clock);
}

/* Run the loop until the ring is empty and the sink's queue written. */
static void drain(struct bench *b)
{
	struct snap a, z;

	do {
		snap(b, &a);
		run_for(b, 200);
		snap(b, &z);
	} while (z.rs.delivered != a.rs.delivered || z.ss.queued);
}

struct result {
	double secs, produced, delivered, lost, sent, dropped, cpu_thread, cpu_others;
	double sent_rate; /* written by the sink per second while producing */
};

static struct result phase(struct bench *b, const char *name, uint64_t rate, unsigned secs)
{
	struct snap a, m, z;
	struct result r;

	atomic_store(&b->prod.rate, rate);
	snap(b, &a);
	atomic_store(&b->prod.run, true);
	run_for(b, secs * 1000ULL);
	atomic_store(&b->prod.run, false);
	snap(b, &m);
	/* What the producer made is in the ring or lost: count it all. */
	drain(b);
	snap(b, &z);
	/* Rates over the producing window; totals include the drain. */
	r.secs = (double)(m.wall - a.wall) / 1e9;
	r.sent_rate = (double)(m.ss.sent - a.ss.sent) / r.secs;
	r.produced = (double)(z.made - a.made);
	r.delivered = (double)(z.rs.delivered - a.rs.delivered);
	r.lost = (double)(z.rs.lost_kernel - a.rs.lost_kernel);
	r.sent = (double)(z.ss.sent - a.ss.sent);
	r.dropped = (double)(z.ss.dropped - a.ss.dropped);
	r.cpu_thread = (double)(m.cpu_thread - a.cpu_thread) / 1e9;
	r.cpu_others = (double)(m.cpu_others - a.cpu_others) / 1e9;
	printf("%-9s target %9s  produced %10.0f (%9.0f/s)  delivered %10.0f  lost in kernel "
	       "%10.0f (%5.1f%%)  sink wrote %10.0f (%9.0f/s), dropped %.0f  CPU: loop thread %.2f s, "
	       "consumer side %.2f s\n",
	       name, rate ? "" : "max", r.produced, r.produced / r.secs, r.delivered, r.lost,
	       r.produced ? 100.0 * r.lost / r.produced : 0.0, r.sent, r.sent_rate, r.dropped,
	       r.cpu_thread, r.cpu_others);
	/* The rate per CPU second of the consumer side: what one core would
	 * sustain had it been the bench's alone (the figure a shared machine
	 * still gives; the rate above is wall-clock). */
	printf("%-9s %.0f events per consumer-side CPU second\n", "",
	       r.cpu_others > 0 ? (double)(m.ss.sent - a.ss.sent) / r.cpu_others : 0.0);
	if (rate)
		printf("%-9s (paced at %" PRIu64 " events/s)\n", "", rate);
	if (r.delivered + r.lost != r.produced)
		printf("%-9s note: delivered + lost = %.0f, produced %.0f\n", "",
		       r.delivered + r.lost, r.produced);
	return r;
}

static int setup(struct bench *b, const char *so, const char *json_path, const char *pin_root,
		 struct ktel_plugin **ret_p, struct ktel_bpf_plugin **ret_bp,
		 struct ktel_targets **ret_t)
{
	struct ktel_err err = {0};
	struct ktel_bpf_opts opts = {.pin_root = pin_root, .pin_gid = (gid_t)-1};
	int64_t params[4];
	json_t *jopts;
	int r;

	r = ktel_bpffs_ensure(pin_root, (gid_t)-1, &err);
	if (!r && !(*ret_t = ktel_targets__new(NULL, &err)))
		r = -err.code;
	r = r ?: ktel_plugin__open(so, ret_p, &err);
	if (r)
		goto fail;
	while (!atomic_load(&b->prod.tid))
		usleep(1000);
	params[0] = atomic_load(&b->prod.tid);
	params[1] = SYS_getppid;
	params[2] = 1; /* the 1 MiB ring */
	params[3] = b->prod.burst;
	opts.targets = *ret_t;
	opts.param_values = params;
	r = ktel_bpf_plugin__load(*ret_p, &opts, ret_bp, &err);
	if (r)
		goto fail;
	b->router = ktel_router__new(&b->loop);
	if (!b->router)
		return -ENOMEM;
	if (b->sock_path) {
		jopts = json_pack("{s:s}", "socket", b->sock_path);
		r = ktel_router__add_sink(b->router, SINK, "stream", jopts, &err);
	} else {
		jopts = json_pack("{s:s}", "path", json_path);
		r = ktel_router__add_sink(b->router, SINK, "json", jopts, &err);
	}
	json_decref(jopts);
	if (r)
		goto fail;
	if (b->sock_path && subscriber_start(b, &err))
		goto fail;
	for (uint32_t i = 0; i < (*ret_p)->desc.n_metrics; i++)
		if (!strcmp((*ret_p)->desc.metrics[i].name, METRIC))
			r = ktel_stream_reader__new(&b->loop, &(*ret_p)->desc.metrics[i],
						    (*ret_bp)->obj, on_records, b, &b->sr, &err);
	if (!r && !b->sr)
		r = ktel_err_set(&err, ENOENT, "%s: no metric %s", so, METRIC);
	r = r ?: ktel_stream_reader__start(b->sr, &err);
	if (r)
		goto fail;
	return 0;
fail:
	fprintf(stderr, "ktel_bench_stream: %s\n", err.msg);
	return r;
}

static void on_closed(void *ctx)
{
	*(bool *)ctx = true;
}

int main(int argc, char **argv)
{
	unsigned secs = argc > 1 ? (unsigned)atoi(argv[1]) : 3;
	const char *json_path = argc > 2 ? argv[2] : "/dev/null";
	const char *so = argc > 3 ? argv[3] : KTEL_BENCH_FX_PLUGIN;
	struct ktel_plugin *p = NULL;
	struct ktel_bpf_plugin *bp = NULL;
	struct ktel_targets *t = NULL;
	struct bench b = {0};
	char pin_root[PATH_MAX];
	struct result sat, twice, half;
	uint64_t sustained;
	bool closed = false, consumer_pinned;
	int r;

	char sock_path[PATH_MAX];

	if (!strncmp(json_path, "stream:", 7)) {
		snprintf(sock_path, sizeof(sock_path), "%s", json_path + 7);
		b.sock_path = sock_path;
		b.prod.yield_cpu = true;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "ktel_bench_stream: needs root (loads BPF programs)\n");
		return 2;
	}
	if (!secs)
		secs = 3;
	b.prod.burst = getenv("KTEL_BENCH_BURST") ? (unsigned)atoi(getenv("KTEL_BENCH_BURST")) : 4;
	if (b.prod.burst < 1 || b.prod.burst > 16) {
		fprintf(stderr, "ktel_bench_stream: KTEL_BENCH_BURST must be 1 to 16\n");
		return 2;
	}
	/* The daemon's malloc settings (fixed mmap threshold): a sink chunk
	 * over it is mmap'd, as in ktelemetryd. */
	ktel_memory__init();
	/* Pin before the loop and its thread pool exist: the pool inherits it. */
	consumer_pinned = pin(CONSUMER_CPU);
	uv_loop_init(&b.loop);
	if (pthread_create(&b.prod.thread, NULL, produce, &b.prod) != 0)
		return 1;
	snprintf(pin_root, sizeof(pin_root), "/sys/fs/bpf/ktel-bench-stream-%d", (int)getpid());
	r = setup(&b, so, json_path, pin_root, &p, &bp, &t);
	if (r)
		goto out;
	printf("ktel_bench_stream: %s (1 MiB ring, 11-field events, %u per getppid()) -> stream "
	       "reader -> router -> %s (%s)\n",
	       so, b.prod.burst, b.sock_path ? "stream sink, one subscriber on CPU 1" : "JSON sink",
	       b.sock_path ? b.sock_path : json_path);
	printf("consumer (loop + sink writer threads) on CPU %d%s, producer on CPU %d%s, %u s per "
	       "phase, %ld CPUs online\n",
	       CONSUMER_CPU, consumer_pinned ? "" : " (pin FAILED)", PRODUCER_CPU,
	       b.prod.pinned ? "" : " (pin FAILED: shares a CPU)", secs,
	       sysconf(_SC_NPROCESSORS_ONLN));
	sat = phase(&b, "saturate", 0, secs);
	sustained = (uint64_t)sat.sent_rate;
	if (sat.lost > 0)
		printf("sustained: %" PRIu64 " events/s from ring buffer to the sink on one core "
		       "(the producer outran it: %.0f lost)\n",
		       sustained, sat.lost);
	else
		printf("sustained: >= %" PRIu64 " events/s (nothing lost: the producer was the "
		       "limit, so this is a lower bound)\n",
		       sustained);
	if (!sustained)
		goto out;
	twice = phase(&b, "2x", 2 * sustained, secs);
	half = phase(&b, "0.5x", sustained / 2, secs);
	/* The producer may fall short of its target on a busy machine: say
	 * what rate it reached, as a multiple of the sustained one. */
	printf("lost at 2x the sustained rate (reached %.2fx): %.0f of %.0f (%.1f%%); at 0.5x "
	       "(reached %.2fx): %.0f of %.0f\n",
	       twice.produced / twice.secs / (double)sustained, twice.lost, twice.produced,
	       twice.produced ? 100.0 * twice.lost / twice.produced : 0,
	       half.produced / half.secs / (double)sustained, half.lost, half.produced);
out:
	atomic_store(&b.prod.run, false);
	atomic_store(&b.prod.quit, true);
	pthread_join(b.prod.thread, NULL);
	subscriber_stop(&b.sub);
	ktel_stream_reader__free(b.sr);
	if (b.router) {
		ktel_router__close(b.router, 2000, on_closed, &closed);
		while (!closed)
			uv_run(&b.loop, UV_RUN_ONCE);
		ktel_router__free(b.router);
	}
	uv_run(&b.loop, UV_RUN_DEFAULT);
	uv_loop_close(&b.loop);
	if (bp)
		ktel_bpf_plugin__unpin(bp, NULL);
	ktel_bpf_plugin__free(bp);
	ktel_plugin__free(p);
	ktel_targets__free(t);
	rmdir(pin_root);
	return r ? 1 : 0;
}
