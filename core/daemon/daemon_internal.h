/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The daemon's private state and the functions its parts share. The daemon
 * is split by job: daemon.c (start, pulls, enable/disable, shutdown),
 * daemon_plugins.c (plugin directories: scan, load, unload, watch),
 * daemon_reload.c (applying a new config), daemon_self.c (self-telemetry).
 * Nothing here is part of any public interface.
 */
#ifndef KTEL_DAEMON_INTERNAL_H
#define KTEL_DAEMON_INTERNAL_H

#include <dirent.h>
#include <limits.h>

#include "daemon.h"
#include "delta.h"
#include "router.h"
#include "worker.h"

#define MAX_PLUGINS 256
#define MAX_REFUSALS 256

struct ktel_daemon {
	uv_loop_t *loop;
	bool started;       /* ktel_daemon__start succeeded: a shutdown pulls */
	struct ktel_config *cfg;
	struct ktel_daemon_opts opts;
	struct ktel_targets *targets;
	struct ktel_router *router;
	struct ktel_delta *delta;
	struct ktel_loaded_plugin *plugins[MAX_PLUGINS];
	size_t n_plugins;
	/* Refused plugin files (daemon_plugins.c), MAX_REFUSALS, allocated
	 * at the first refusal; refusals beyond are logged, not kept. */
	struct ktel_refusal *refused;
	size_t n_refused;
	/* Plugin directories watched for drop-ins; a change arms the debounce
	 * timer and the rescan runs when the directory has been quiet. */
	uv_fs_event_t *watchers, *retired_watchers;
	size_t n_watchers;
	uv_timer_t rescan_timer;
	bool rescan_timer_init;
	uv_timer_t once_timer;
	bool once_timer_init;
	bool shutting_down;
	int exit_code;
	struct ktel_complaint state_complaint;
	struct ktel_control *control;
	uv_timer_t self_timer;
	bool self_timer_init;
	uint64_t self_seq, self_start_boot;
	int64_t self_start_wall;
	bool start_totals_routed; /* daemon_self.c: once, right after start */
	/* daemon_state.c: delta state snapshots waiting until the durable
	 * sinks have made the records of their pulls durable (at most two:
	 * the oldest, and the newest replacing any in between, so a save
	 * always comes); state_retry: the last write failed, write again at
	 * the next pull even when it changed nothing. */
	struct daemon_state_wait {
		struct ktel_delta_snapshot snap;
		uint64_t mark;
	} state_wait[2];
	size_t n_state_wait;
	bool state_retry;
	/* A pull asks for the save; it runs once per loop turn, just before
	 * the loop sleeps, so one round of pulls (a timer per metric, all
	 * expiring in one turn) takes one snapshot and writes one file. */
	uv_prepare_t save_prepare;
	bool save_prepare_init, save_pending;
	/* The snapshot being written on the writer thread (the loop never
	 * waits on the disk); one write at a time, the newest covered wait
	 * next. Its completion waits for the loop's next wakeup (worker.h):
	 * the file is written at once, only the next save can start later. */
	struct ktel_worker *worker;
	struct ktel_job save_job;
	struct ktel_delta_snapshot save_snap;
	/* state_file, copied at start: a reload replaces (and frees) d->cfg
	 * while the writer thread may be writing. */
	char save_path[PATH_MAX];
	bool save_in_flight;
	/* The sinks are closed: the worker goes once no save is in flight. */
	bool state_released;
	int save_rc;
	struct ktel_err save_err;
};

/* daemon.c */
void daemon_route(struct ktel_daemon *d, const struct ktel_metric *m,
		  const struct ktel_record *recs, size_t n);
void daemon_log_sink_opened(struct ktel_daemon *d, const char *name, const char *type);
void daemon_on_pull_timer(uv_timer_t *t);
void daemon_on_stream_records(void *ctx, const struct ktel_record *recs, size_t n);

/* daemon_state.c: the delta state saved once what it covers is durable */
void daemon_save_state(struct ktel_daemon *d);
void daemon_save_state_later(struct ktel_daemon *d);
int daemon_state_init(struct ktel_daemon *d, struct ktel_err *err);
void daemon_state_close(struct ktel_daemon *d);
void daemon_state_release(struct ktel_daemon *d);
void daemon_on_durable(void *ctx, uint64_t level);
void daemon_recover_sinks(struct ktel_daemon *d);
void daemon_free_state_waits(struct ktel_daemon *d);

/* daemon_plugins.c */
void daemon_on_refusal(const char *path, const struct ktel_err *err, void *ctx);
void daemon_start_metric(struct ktel_daemon *d, struct ktel_metric *m);
void daemon_watch_dirs(struct ktel_daemon *d);
void daemon_close_watchers(struct ktel_daemon *d);
void daemon_free_plugin(struct ktel_loaded_plugin *lp);
/* Start-up scan: -errno with err when a plugin directory cannot be read. */
int daemon_load_plugins(struct ktel_daemon *d, struct ktel_err *err);

/* daemon_self.c */
void daemon_start_self(struct ktel_daemon *d);
void daemon_emit_self(struct ktel_daemon *d);
void daemon_on_self_timer(uv_timer_t *t);

#endif /* KTEL_DAEMON_INTERNAL_H */
