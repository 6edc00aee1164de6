/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The daemon's private state, split into parts that each own theirs.
 *
 * daemon.c is the core: it holds what every part reads (loop, config, opts,
 * router, delta, shutting_down), pulls, routes, enables and disables
 * metrics, and starts, shuts down and frees the parts in order. Below it,
 * each part owns one struct, embedded in struct ktel_daemon, with its init
 * and close, and a free when it holds memory (self-telemetry's only memory
 * hangs on the plugins and goes with them, through plugin_freed):
 *
 *   daemon_plugins.c  struct daemon_plugins: loaded plugins, refusals,
 *                     directory watchers, rescan timer, the kernel's BTF
 *                     while a scan runs, the scan under way and its intake
 *                     threads; for_each_metric() walks its metrics.
 *   daemon_state.c    struct daemon_saver: the delta state's save after the
 *                     durable sinks (waits, save job, writer thread, path).
 *   daemon_self.c     struct daemon_self: self-telemetry's timer, seq and
 *                     window start.
 *
 * A part writes only its own struct; it reads the core's fields through its
 * back pointer and the other parts only through their functions. Calls go
 * one way, down: a part never calls daemon.c, it calls the ops daemon.c gave
 * it at init (the plugins part enables, disables and routes stream records
 * that way). daemon_reload.c and daemon_control.c sit on top and may call
 * daemon.c and the parts; daemon.c reaches daemon_control.c only through
 * the control ops table handed to daemon__start(). tools/check-calls (the
 * test calls_one_way) holds the daemon to that.
 *
 * Nothing here is part of any public interface.
 */
#ifndef KTEL_DAEMON_INTERNAL_H
#define KTEL_DAEMON_INTERNAL_H

#include <dirent.h>
#include <limits.h>

#include "attr_names.h"
#include "daemon.h"
#include "delta.h"
#include "router.h"
#include "worker.h"

#define MAX_PLUGINS 256
#define MAX_REFUSALS 256

struct plugin_intake;

struct ktel_control_ops;

/* ---- plugins (daemon_plugins.c) ------------------------------------------- */

/* What the plugins part asks of the core, given at init. */
struct daemon_plugins_ops {
	/* A stream metric's decoded records; ctx is the metric. */
	ktel_stream_records_fn on_stream_records;
	int (*enable)(struct ktel_daemon *d, struct ktel_metric *m, uint64_t lease_ms,
		      struct ktel_err *err);
	int (*disable)(struct ktel_daemon *d, struct ktel_metric *m, struct ktel_err *err);
	/* lp is about to be freed: drop what other parts hung on it. */
	void (*plugin_freed)(struct ktel_loaded_plugin *lp);
};

struct daemon_plugins {
	struct ktel_daemon *d;
	const struct daemon_plugins_ops *ops;
	/* The kernel's BTF, from init or the first load of a scan until the
	 * scan ends. */
	struct ktel_targets *targets;
	struct ktel_loaded_plugin *items[MAX_PLUGINS];
	size_t n;
	/* Refused plugin files, MAX_REFUSALS, allocated at the first
	 * refusal; refusals beyond are logged and counted in
	 * n_refused_unlisted (as of the last scan), not kept. */
	struct ktel_refusal *refused;
	size_t n_refused, n_refused_unlisted;
	/* The scan under way (daemon_plugins.c, "intake"): files are opened
	 * and checked on the thread pool, never on the loop. */
	struct plugin_intake *intake;
	/* Plugin directories watched for drop-ins; a change arms the debounce
	 * timer and the rescan runs when the directory has been quiet. */
	uv_fs_event_t *watchers, *retired_watchers;
	size_t n_watchers;
	uv_timer_t rescan_timer;
	bool rescan_timer_init;
	/* Names of attribution ids, made when a metric first attributes. */
	struct ktel_attr_names *attr_names;
	/* The kernel's cgroup events that keep those names current (NULL:
	 * walks alone, cgroup_events_problem says why), drained before each
	 * pull names ids and whenever the loop's poll finds them waiting. */
	struct ktel_cgroup_events *cgroup_events;
	uv_poll_t cgroup_events_poll;
	bool cgroup_events_poll_init;
	char cgroup_events_problem[KTEL_ERR_MSG_MAX];
	/* Whether the io controller is on cgroup v2 as last logged: 0 not yet,
	 * 1 no, 2 yes (daemon_plugins.c, io_on_v2). */
	uint8_t io_on_v2_said;
};

/* How cgroup ids are named (status, self-telemetry). */
struct daemon_attr_naming {
	bool active;         /* a metric attributes: the names exist */
	const char *source;  /* "events" or "walk" */
	const char *problem; /* why not "events", or NULL */
	struct ktel_attr_names_stats names;
	struct ktel_cgroup_events_stats events;
};

/* Fails when the kernel has no readable BTF (-errno, err set). */
int daemon_plugins__init(struct daemon_plugins *p, struct ktel_daemon *d,
			 const struct daemon_plugins_ops *ops, struct ktel_err *err);
/* The start-up scan, its metrics started as the config says; -errno with
 * err when a plugin directory cannot be read. Then the directories are
 * watched. It runs to its end before returning (the control socket is not
 * open yet). */
int daemon_plugins__load(struct daemon_plugins *p, struct ktel_err *err);
/* Start a rescan and return at once (0): the files are opened on the thread
 * pool and loaded in slices of loop time; the changes are logged when it
 * ends. A rescan asked for while one runs follows it. */
int daemon_plugins__rescan(struct daemon_plugins *p);
/* Watch the configured directories (again, after a reload changed them). */
void daemon_plugins__watch(struct daemon_plugins *p);
/* At shutdown, before the final pull: detach every program, then let the
 * enabled streams deliver what their rings hold. */
void daemon_plugins__stop_counting(struct daemon_plugins *p);
/* Close the handles; flush_streams: the readers deliver their last events. */
void daemon_plugins__close(struct daemon_plugins *p, bool flush_streams);
void daemon_plugins__free(struct daemon_plugins *p);

/* A pull of attributed metric m starts: the kernel's cgroup events are
 * drained, then a name miss may walk cgroupfs once. */
void daemon_plugins__attr_begin_pull(struct daemon_plugins *p, struct ktel_metric *m);
void daemon_plugins__attr_naming(const struct daemon_plugins *p, struct daemon_attr_naming *ret);
/*
 * Ageing (docs/architecture.md, "Attribution"), around an attributed
 * metric's pull: take_released, after the pull's records were folded and
 * before the fold's window ends, hands the cgroups the names found released
 * to every metric attributed by cgroup, and the user, app or process ids
 * gone to their metric: their folds end the series of names no other id
 * carries, and each metric's next pull takes the ids' keys out of its map.
 * attr_arm, right before m's pull reads, gives it those ids; attr_taken,
 * after its window (pulled: the pull succeeded), counts the keys deleted
 * and keeps an id for the pulls after while its key is made again.
 */
void daemon_plugins__attr_take_released(struct daemon_plugins *p);
void daemon_plugins__attr_arm(struct ktel_metric *m);
void daemon_plugins__attr_taken(struct ktel_metric *m, bool pulled);

size_t daemon_plugins__n(const struct daemon_plugins *p);
struct ktel_loaded_plugin *daemon_plugins__at(const struct daemon_plugins *p, size_t i);
struct ktel_metric *daemon_plugins__metric(const struct daemon_plugins *p, const char *name);
/* The metric at *it, it moved past it; NULL after the last. */
struct ktel_metric *daemon_plugins__next_metric(const struct daemon_plugins *p,
						struct ktel_metric_iter *it);

/* Every metric of every loaded plugin, in load order; m is the caller's. */
#define for_each_metric(p, m)                       \
	for (struct ktel_metric_iter m##_it_ = {0}; \
	     ((m) = daemon_plugins__next_metric((p), &m##_it_)) != NULL;)

/* ---- the state saver (daemon_state.c) ------------------------------------- */

struct daemon_saver {
	struct ktel_daemon *d;
	struct ktel_complaint complaint;
	/* Delta state snapshots waiting until the durable sinks have made the
	 * records of their pulls durable (at most two: the oldest, and the
	 * newest replacing any in between, so a save always comes); retry:
	 * the last write failed, write again at the next pull even when it
	 * changed nothing. */
	struct daemon_state_wait {
		struct ktel_delta_snapshot snap;
		uint64_t mark;
	} wait[2];
	size_t n_wait;
	bool retry;
	/* A pull asks for the save; it runs once per loop turn, just before
	 * the loop sleeps, so one round of pulls (a timer per metric, all
	 * expiring in one turn) takes one snapshot and writes one file. */
	uv_prepare_t prepare;
	bool prepare_init, pending;
	/* The snapshot being written on the writer thread (the loop never
	 * waits on the disk); one write at a time, the newest covered wait
	 * next. Its completion waits for the loop's next wakeup (worker.h):
	 * the file is written at once, only the next save can start later. */
	struct ktel_worker *worker;
	struct ktel_job job;
	struct ktel_delta_snapshot snap;
	/* state_file, copied at init: a reload replaces (and frees) the
	 * config while the writer thread may be writing. */
	char path[PATH_MAX];
	bool in_flight;
	/* The sinks are closed: the worker goes once no save is in flight. */
	bool released;
	int rc;
	struct ktel_err err;
};

int daemon_saver__init(struct daemon_saver *s, struct ktel_daemon *d, struct ktel_err *err);
/* Save now (snapshot, then written once the durable sinks have it). */
void daemon_saver__save(struct daemon_saver *s);
/* Save once this loop turn's pulls are done. */
void daemon_saver__save_later(struct daemon_saver *s);
/* The router's durable level moved (ktel_router__on_durable, ctx the saver). */
void daemon_saver__on_durable(void *ctx, uint64_t level);
void daemon_saver__close(struct daemon_saver *s);
/* The sinks are closed: the writer thread goes after the saves in flight. */
void daemon_saver__release(struct daemon_saver *s);
void daemon_saver__free(struct daemon_saver *s);

/* ---- self-telemetry (daemon_self.c) --------------------------------------- */

struct daemon_self {
	struct ktel_daemon *d;
	uv_timer_t timer;
	bool timer_init;
	uint64_t seq, start_boot;
	int64_t start_wall;
	/* BPF_ENABLE_STATS's descriptor while self_telemetry.bpf_stats holds
	 * the kernel's statistics on. */
	int stats_fd;
	bool stats_held;
	/* Attribution's naming counters at the previous round: released by
	 * event and by the grace rule, cgroup events taken and lost. */
	uint64_t prev_attr[5];
};

/*
 * What one plugin's programs cost in one window (status's: from the previous
 * status answer, or from their load for the first), from bpf_stats.
 */
struct daemon_plugin_cost {
	uint64_t run_cnt, run_time_ns; /* now, every program summed */
	uint64_t window_run_time_ns;   /* of them, in the window */
	uint64_t window_ns;            /* the window's length */
	double cpu_share;              /* window_run_time_ns / window_ns */
};

/* Starts the interval when the config enables self-telemetry; turns the
 * kernel's statistics on when the config asks (logs when it cannot). */
void daemon_self__init(struct daemon_self *s, struct ktel_daemon *d);
/* Who keeps the kernel's run-time statistics on: "daemon" (this one holds
 * them), "sysctl" (kernel.bpf_stats_enabled), or NULL when they are off. */
const char *daemon_self__stats_source(const struct daemon_self *s);
/* lp's cost in the window ending now; the next window starts now. Returns
 * -ENOENT when lp has no loaded program. */
int daemon_self__plugin_cost(struct ktel_loaded_plugin *lp, struct daemon_plugin_cost *ret);
/* Follow the installed config's self_telemetry (after a reload). */
void daemon_self__configure(struct daemon_self *s);
void daemon_self__emit(struct daemon_self *s);
void daemon_self__close(struct daemon_self *s);
/* Frees what self-telemetry keeps on lp (daemon_plugins_ops.plugin_freed). */
void daemon_self__plugin_freed(struct ktel_loaded_plugin *lp);

/* ---- the core (daemon.c) ---------------------------------------------------- */

struct ktel_daemon {
	uv_loop_t *loop;
	bool started; /* daemon__start succeeded: a shutdown pulls */
	bool shutting_down;
	int exit_code;
	struct ktel_config *cfg;
	struct ktel_daemon_opts opts;
	struct ktel_router *router;
	struct ktel_delta *delta;
	struct ktel_control *control;
	uv_timer_t once_timer;
	bool once_timer_init;
	/* Right after start: the totals for the cumulative sinks. */
	uv_timer_t totals_timer;
	bool totals_timer_init;
	struct daemon_plugins plugins;
	struct daemon_saver saver;
	struct daemon_self self;
};

/* ktel_daemon__start with the operations of the control socket it opens. */
int daemon__start(struct ktel_daemon *d, const struct ktel_control_ops *control_ops,
		  struct ktel_err *err);
void daemon__log_sink_opened(struct ktel_daemon *d, const char *name, const char *type);
/* m pulls every interval_ms from now on (when enabled). */
void daemon__set_interval(struct ktel_daemon *d, struct ktel_metric *m, uint64_t interval_ms);
/* Install cfg; returns the config it replaces (the caller frees it). */
struct ktel_config *daemon__swap_config(struct ktel_daemon *d, struct ktel_config *cfg);

#endif /* KTEL_DAEMON_INTERNAL_H */
