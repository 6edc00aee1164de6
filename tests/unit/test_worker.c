// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * worker: jobs run on the lane's thread; their completions wait for the
 * loop's next wakeup unless someone waits for them (urgent, hurry, a
 * failure, a loop with no timer); lanes do not hold each other back; the
 * thread exists only while referenced. Loop wakeups are counted as poll
 * returns (a check handle runs once after each).
 */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "worker.h"

struct probe {
	uv_loop_t loop;
	uv_check_t check;
	uv_timer_t timer;
	unsigned polls;     /* poll returns so far */
	unsigned done_poll; /* the poll return after which done ran (0: not yet) */
	unsigned timer_poll;
	bool fail, timer_fired;
	atomic_bool worked;
	/* A job that blocks until released (lane independence). */
	pthread_mutex_t gate_lock;
	pthread_cond_t gate;
	bool open;
	struct ktel_job job;
	struct ktel_job *order[4];
	int n_order;
};

static void on_check(uv_check_t *h)
{
	struct probe *p = h->data;

	p->polls++;
}

static void probe_init(struct probe *p)
{
	memset(p, 0, sizeof(*p));
	uv_loop_init(&p->loop);
	uv_check_init(&p->loop, &p->check);
	p->check.data = p;
	/* Started before any worker: libuv runs the newest check first, so
	 * the worker's collection runs before this count. */
	uv_check_start(&p->check, on_check);
	uv_unref((uv_handle_t *)&p->check);
	uv_timer_init(&p->loop, &p->timer);
	p->timer.data = p;
	pthread_mutex_init(&p->gate_lock, NULL);
	pthread_cond_init(&p->gate, NULL);
}

static void probe_close(struct probe *p)
{
	uv_close((uv_handle_t *)&p->check, NULL);
	uv_close((uv_handle_t *)&p->timer, NULL);
	uv_run(&p->loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&p->loop), 0);
	pthread_mutex_destroy(&p->gate_lock);
	pthread_cond_destroy(&p->gate);
}

static void on_timer(uv_timer_t *t);

/* The lane's worker, its handles registered with epoll by one loop turn
 * (until then libuv cannot say how long the loop will sleep, and a
 * completion wakes it, as on a daemon's first round). */
static struct ktel_worker *warm_worker(struct probe *p, enum ktel_lane lane)
{
	struct ktel_worker *w = ktel_worker__get(&p->loop, lane);

	assert_non_null(w);
	uv_timer_start(&p->timer, on_timer, 1, 0);
	uv_run(&p->loop, UV_RUN_DEFAULT);
	p->timer_fired = false;
	p->polls = p->timer_poll = 0;
	return w;
}

static void on_timer(uv_timer_t *t)
{
	struct probe *p = t->data;

	p->timer_fired = true;
	p->timer_poll = p->polls;
	uv_stop(&p->loop);
}

static bool quick_work(struct ktel_job *job)
{
	struct probe *p = job->data;

	atomic_store(&p->worked, true);
	return p->fail;
}

static void record_done(struct ktel_job *job)
{
	struct probe *p = job->data;

	p->done_poll = p->polls + 1; /* this poll's check counts it next */
}

static int threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/*
 * pthread_join returns when the kernel clears the thread's tid, a moment
 * before the task leaves /proc/self/task (and under qemu-user the emulator
 * clears it itself, earlier still): a count read right after a join can
 * still see the dying thread. Wait, bounded, for the count to reach what
 * is expected; a thread that never goes still fails the test.
 */
static int threads_become(int expected)
{
	struct timespec tick = {0, 10 * 1000 * 1000};
	int n = threads();

	for (int i = 0; i < 500 && n != expected; i++) {
		nanosleep(&tick, NULL);
		n = threads();
	}
	return n;
}

/* The count once the previous test's joined threads have left /proc. */
static int threads_settled(void)
{
	struct timespec tick = {0, 10 * 1000 * 1000};
	int n = threads(), stable = 0;

	for (int i = 0; i < 500 && stable < 20; i++) {
		int now;

		nanosleep(&tick, NULL);
		now = threads();
		stable = now == n ? stable + 1 : 0;
		n = now;
	}
	return n;
}

/* A probe and a warm files worker running one quick job (failing or not). */
static struct ktel_worker *start_one(struct probe *p, ktel_job_fn done, bool urgent, bool fail)
{
	struct ktel_worker *w;

	probe_init(p);
	w = warm_worker(p, KTEL_LANE_FILES);
	p->job.data = p;
	p->fail = fail;
	ktel_worker__queue(w, &p->job, quick_work, done, urgent);
	return w;
}

/* Finished long before the timer, collected at the timer's wakeup: one
 * poll return for both, none of its own. */
static void test_completion_waits_for_next_wakeup(void **state)
{
	struct probe p;
	struct ktel_worker *w;

	w = start_one(&p, record_done, false, false);
	uv_timer_start(&p.timer, on_timer, 500, 0);
	uv_run(&p.loop, UV_RUN_DEFAULT);
	assert_true(p.timer_fired);
	assert_true(atomic_load(&p.worked));
	assert_int_equal(p.timer_poll, 1);
	assert_int_equal(p.done_poll, 1);
	assert_int_equal(ktel_worker__in_flight(w), 0);
	ktel_worker__put(w);
	probe_close(&p);
}

static void run_expect_prompt_done(struct probe *p)
{
	uv_timer_start(&p->timer, on_timer, 10000, 0);
	uv_run(&p->loop, UV_RUN_DEFAULT);
	assert_false(p->timer_fired);
	assert_int_not_equal(p->done_poll, 0);
}

static void stop_after_done(struct ktel_job *job)
{
	struct probe *p = job->data;

	record_done(job);
	uv_stop(&p->loop);
}

enum prompt_case {
	URGENT,
	FAILED,
	HURRIED
};

/* One job on a warm worker, a 10 s timer: its done must come first. */
static void expect_prompt(enum prompt_case how)
{
	struct probe p;
	struct ktel_worker *w;

	w = start_one(&p, stop_after_done, how == URGENT, how == FAILED);
	if (how == HURRIED) {
		while (!atomic_load(&p.worked))
			usleep(1000);
		usleep(20000); /* on the done list by now */
		ktel_worker__hurry(w, &p.job);
	}
	run_expect_prompt_done(&p);
	ktel_worker__put(w);
	probe_close(&p);
}

/* Urgent: the completion wakes the loop long before its 10 s timer. */
static void test_urgent_wakes_loop(void **state)
{
	expect_prompt(URGENT);
}

/* A failed job (its owner retries on a short timer) wakes the loop. */
static void test_failure_wakes_loop(void **state)
{
	expect_prompt(FAILED);
}

/* Hurried after it finished: the loop wakes for it at once. */
static void test_hurry_after_finish(void **state)
{
	expect_prompt(HURRIED);
}

/* No timer at all: nothing else would collect it, so it wakes the loop,
 * and uv_run returns once it is done (no handle left referenced). */
static void test_no_timer_wakes_loop(void **state)
{
	struct probe p;
	struct ktel_worker *w;

	w = start_one(&p, record_done, false, false);
	alarm(20); /* a lost completion would hang here */
	uv_run(&p.loop, UV_RUN_DEFAULT);
	alarm(0);
	assert_int_not_equal(p.done_poll, 0);
	ktel_worker__put(w);
	probe_close(&p);
}

static bool ordered_work(struct ktel_job *job)
{
	struct probe *p = job->data;

	/* Only this thread writes order while the jobs run. */
	p->order[p->n_order++] = job;
	return false;
}

static void count_done(struct ktel_job *job)
{
	struct probe *p = job->data;

	if (++p->done_poll == 4)
		uv_stop(&p->loop);
}

/* Jobs of a lane run one at a time, in the order queued. */
static void test_jobs_run_in_order(void **state)
{
	struct probe p;
	struct ktel_job jobs[4];
	struct ktel_worker *w;

	probe_init(&p);
	w = warm_worker(&p, KTEL_LANE_STATE);
	for (int i = 0; i < 4; i++) {
		jobs[i].data = &p;
		ktel_worker__queue(w, &jobs[i], ordered_work, count_done, true);
	}
	run_expect_prompt_done(&p);
	assert_int_equal(p.done_poll, 4);
	assert_int_equal(p.n_order, 4);
	for (int i = 0; i < 4; i++)
		assert_ptr_equal(p.order[i], &jobs[i]);
	ktel_worker__put(w);
	probe_close(&p);
}

static bool gated_work(struct ktel_job *job)
{
	struct probe *p = job->data;

	pthread_mutex_lock(&p->gate_lock);
	while (!p->open)
		pthread_cond_wait(&p->gate, &p->gate_lock);
	pthread_mutex_unlock(&p->gate_lock);
	return false;
}

static void nothing_done(struct ktel_job *job)
{
	(void)job;
}

/* A state save stuck on a slow disk does not hold the files' lane back. */
static void test_lanes_independent(void **state)
{
	struct probe p;
	struct ktel_job stuck;
	struct ktel_worker *ws, *wf;

	probe_init(&p);
	ws = ktel_worker__get(&p.loop, KTEL_LANE_STATE);
	wf = ktel_worker__get(&p.loop, KTEL_LANE_FILES);
	assert_ptr_not_equal(ws, wf);
	stuck.data = &p;
	ktel_worker__queue(ws, &stuck, gated_work, nothing_done, true);
	p.job.data = &p;
	ktel_worker__queue(wf, &p.job, quick_work, stop_after_done, true);
	run_expect_prompt_done(&p);
	assert_int_equal(ktel_worker__in_flight(ws), 1);
	pthread_mutex_lock(&p.gate_lock);
	p.open = true;
	pthread_cond_signal(&p.gate);
	pthread_mutex_unlock(&p.gate_lock);
	ktel_worker__put(ws);
	ktel_worker__put(wf);
	/* The last put waits for the stuck job; uv_run returns after it. */
	uv_run(&p.loop, UV_RUN_DEFAULT);
	probe_close(&p);
}

/* A thread only while referenced; one per lane however many references. */
static void test_thread_lives_with_references(void **state)
{
	struct probe p;
	struct ktel_worker *a, *b;
	int base = threads_settled();

	probe_init(&p);
	a = ktel_worker__get(&p.loop, KTEL_LANE_FILES);
	b = ktel_worker__get(&p.loop, KTEL_LANE_FILES);
	assert_ptr_equal(a, b);
	assert_int_equal(threads(), base + 1);
	ktel_worker__put(a);
	assert_int_equal(threads(), base + 1);
	ktel_worker__put(b);
	assert_int_equal(threads_become(base), base);
	probe_close(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_completion_waits_for_next_wakeup),
		cmocka_unit_test(test_urgent_wakes_loop),
		cmocka_unit_test(test_failure_wakes_loop),
		cmocka_unit_test(test_hurry_after_finish),
		cmocka_unit_test(test_no_timer_wakes_loop),
		cmocka_unit_test(test_jobs_run_in_order),
		cmocka_unit_test(test_lanes_independent),
		cmocka_unit_test(test_thread_lives_with_references),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
