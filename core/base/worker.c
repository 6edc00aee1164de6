// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * worker - the daemon's own writer threads with lazy completions (worker.h).
 *
 * Loop side: jobs in flight keep the loop alive through the async handle
 * (referenced only then). A check handle collects finished jobs after every
 * poll, whatever woke it; a prepare handle, the last to run before the poll
 * (started first, and libuv runs the newest first), tells the thread whether
 * the loop is about to sleep with no timer, in which case a completion must
 * wake it. Thread side: one mutex guards the lists and the flags; the
 * thread sleeps on a condition variable while there is nothing to do.
 */
#include "worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

/* The jobs are writes, fsyncs, renames and a state file's write: no deep
 * stacks. Address space only; RSS is what is touched. */
#define WORKER_STACK (512u << 10)

struct job_list {
	struct ktel_job *head, *tail;
};

struct ktel_worker {
	struct ktel_worker *next_worker; /* the registry */
	uv_loop_t *loop;
	enum ktel_lane lane;
	unsigned refs, in_flight; /* loop thread only */
	bool closing, collecting;
	int handles_open;
	uv_async_t async;
	uv_prepare_t prepare;
	uv_check_t check;

	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* Under lock. */
	struct job_list todo, done;
	bool stop, wake_on_done;
};

/* One worker per loop and lane; loops may live on different threads (tests). */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ktel_worker *registry;

static void list_push(struct job_list *l, struct ktel_job *job)
{
	job->next = NULL;
	if (l->tail)
		l->tail->next = job;
	else
		l->head = job;
	l->tail = job;
}

static struct ktel_job *list_take_all(struct job_list *l)
{
	struct ktel_job *all = l->head;

	l->head = l->tail = NULL;
	return all;
}

static bool list_has(const struct job_list *l, const struct ktel_job *job)
{
	for (const struct ktel_job *j = l->head; j; j = j->next)
		if (j == job)
			return true;
	return false;
}

/* ---- the thread ---- */

static void *worker_main(void *arg)
{
	struct ktel_worker *w = arg;
	struct ktel_job *job;
	bool wake, failed;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->todo.head && !w->stop)
			pthread_cond_wait(&w->cond, &w->lock);
		if (!w->todo.head)
			break;
		job = w->todo.head;
		w->todo.head = job->next;
		if (!w->todo.head)
			w->todo.tail = NULL;
		pthread_mutex_unlock(&w->lock);

		failed = job->work(job);

		pthread_mutex_lock(&w->lock);
		list_push(&w->done, job);
		wake = failed || job->urgent || w->wake_on_done;
		if (wake) {
			pthread_mutex_unlock(&w->lock);
			uv_async_send(&w->async);
			pthread_mutex_lock(&w->lock);
		}
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static const char *const thread_names[KTEL_LANES] = {
	[KTEL_LANE_STATE] = "ktel-state",
	[KTEL_LANE_FILES] = "ktel-files",
};

/* The thread keeps the loop's signal mask: drop_privileges reaches every
 * thread with a signal (core/daemon/privileges.c), and libuv's handlers (SA_RESTART)
 * may run on any thread. */
static int start_thread(struct ktel_worker *w)
{
	pthread_attr_t attr;
	int r;

	if ((r = pthread_attr_init(&attr)))
		return r;
	pthread_attr_setstacksize(&attr, WORKER_STACK);
	r = pthread_create(&w->thread, &attr, worker_main, w);
	pthread_attr_destroy(&attr);
	if (!r)
		pthread_setname_np(w->thread, thread_names[w->lane]);
	return r;
}

/* ---- the loop side ---- */

static void maybe_teardown(struct ktel_worker *w);

static void free_worker(struct ktel_worker *w)
{
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	free(w);
}

static void on_closed(uv_handle_t *h)
{
	struct ktel_worker *w = h->data;

	if (!--w->handles_open)
		free_worker(w);
}

static void close_handle(struct ktel_worker *w, uv_handle_t *h)
{
	if (uv_is_closing(h))
		return;
	w->handles_open++;
	uv_close(h, on_closed);
}

/* Run the done callbacks of every finished job. One of them may drop the
 * last reference: the worker is torn down, and freed only after this. */
static void collect(struct ktel_worker *w)
{
	struct ktel_job *job, *next;

	pthread_mutex_lock(&w->lock);
	job = list_take_all(&w->done);
	pthread_mutex_unlock(&w->lock);
	w->collecting = true;
	for (; job; job = next) {
		next = job->next;
		w->in_flight--;
		job->done(job);
	}
	w->collecting = false;
	if (w->closing) {
		if (!w->handles_open)
			free_worker(w);
		return;
	}
	if (!w->in_flight)
		uv_unref((uv_handle_t *)&w->async);
	maybe_teardown(w);
}

static void on_async(uv_async_t *h)
{
	collect(h->data);
}

static void on_check(uv_check_t *h)
{
	struct ktel_worker *w = h->data;

	if (w->in_flight)
		collect(w);
}

/* Just before the poll: will the loop wake by itself? uv_backend_timeout()
 * says -1 for no timer, and 0 for "will not sleep" but also while an fd
 * watcher waits to be registered with epoll (libuv >= 1.44), after which
 * the poll may sleep for ever: both count as "no timer". */
static void on_prepare(uv_prepare_t *h)
{
	struct ktel_worker *w = h->data;
	bool no_timer, finished;

	if (!w->in_flight)
		return;
	no_timer = uv_backend_timeout(w->loop) <= 0;
	pthread_mutex_lock(&w->lock);
	w->wake_on_done = no_timer;
	finished = no_timer && w->done.head;
	pthread_mutex_unlock(&w->lock);
	/* Finished before the flag was set: poll without sleeping. */
	if (finished)
		uv_async_send(&w->async);
}

static void registry_remove(struct ktel_worker *w)
{
	pthread_mutex_lock(&registry_lock);
	for (struct ktel_worker **p = &registry; *p; p = &(*p)->next_worker)
		if (*p == w) {
			*p = w->next_worker;
			break;
		}
	pthread_mutex_unlock(&registry_lock);
}

/* No reference and nothing in flight: the thread is idle; stop it. */
static void maybe_teardown(struct ktel_worker *w)
{
	if (w->refs || w->in_flight || w->closing)
		return;
	w->closing = true;
	registry_remove(w);
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	close_handle(w, (uv_handle_t *)&w->async);
	close_handle(w, (uv_handle_t *)&w->prepare);
	close_handle(w, (uv_handle_t *)&w->check);
	if (!w->handles_open && !w->collecting) {
		/* All closed from outside (a uv_walk closing every handle, and
		 * the loop run since): nothing will call back. */
		free_worker(w);
	}
}

static struct ktel_worker *worker_new(uv_loop_t *loop, enum ktel_lane lane)
{
	struct ktel_worker *w = calloc(1, sizeof(*w));
	int r;

	if (!w)
		return NULL;
	w->loop = loop;
	w->lane = lane;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	if ((r = start_thread(w))) {
		pthread_mutex_destroy(&w->lock);
		pthread_cond_destroy(&w->cond);
		free(w);
		errno = r;
		return NULL;
	}
	uv_async_init(loop, &w->async, on_async);
	uv_prepare_init(loop, &w->prepare);
	uv_check_init(loop, &w->check);
	w->async.data = w->prepare.data = w->check.data = w;
	uv_unref((uv_handle_t *)&w->async);
	/* Started now, before any per-turn prepare handle: runs after them. */
	uv_prepare_start(&w->prepare, on_prepare);
	uv_unref((uv_handle_t *)&w->prepare);
	uv_check_start(&w->check, on_check);
	uv_unref((uv_handle_t *)&w->check);
	return w;
}

struct ktel_worker *ktel_worker__get(uv_loop_t *loop, enum ktel_lane lane)
{
	struct ktel_worker *w;

	pthread_mutex_lock(&registry_lock);
	for (w = registry; w && (w->loop != loop || w->lane != lane); w = w->next_worker)
		;
	if (!w && (w = worker_new(loop, lane))) {
		w->next_worker = registry;
		registry = w;
	}
	if (w)
		w->refs++;
	pthread_mutex_unlock(&registry_lock);
	return w;
}

void ktel_worker__put(struct ktel_worker *w)
{
	if (!w)
		return;
	w->refs--;
	maybe_teardown(w);
}

void ktel_worker__queue(struct ktel_worker *w, struct ktel_job *job, ktel_work_fn work,
			ktel_job_fn done, bool urgent)
{
	job->work = work;
	job->done = done;
	job->urgent = urgent;
	if (!w->in_flight++)
		uv_ref((uv_handle_t *)&w->async);
	pthread_mutex_lock(&w->lock);
	list_push(&w->todo, job);
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

void ktel_worker__hurry(struct ktel_worker *w, struct ktel_job *job)
{
	bool finished;

	pthread_mutex_lock(&w->lock);
	job->urgent = true;
	finished = list_has(&w->done, job);
	pthread_mutex_unlock(&w->lock);
	if (finished)
		uv_async_send(&w->async);
}

unsigned ktel_worker__in_flight(const struct ktel_worker *w)
{
	return w->in_flight;
}
