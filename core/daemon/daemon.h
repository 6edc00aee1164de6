/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The daemon's state machine on one libuv loop: plugins discovered and
 * loaded, one pull timer per enabled metric, the router and its sinks, the
 * delta engine and its state file. ktelemetryd.c is a thin main() around it;
 * the control socket drives it through ktel_daemon_control_ops.
 */
#ifndef KTEL_DAEMON_H
#define KTEL_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include <uv.h>

#include "attr_fold.h"
#include "bpf_lifecycle.h"
#include "config.h"
#include "error.h"
#include "log.h"
#include "metric_pull.h"
#include "stream_reader.h"

struct ktel_daemon;
struct ktel_router;
struct ktel_control_ops;

/* One metric as the daemon sees it. */
/* A released attribution id: its name then (NULL: it had none), the pulls
 * that may still take a key of it, and whether the pull under way found
 * one. */
struct daemon_attr_gone {
	uint64_t id;
	char *name;
	uint32_t pulls;
	bool found;
};

struct ktel_metric {
	struct ktel_daemon *daemon;
	struct ktel_loaded_plugin *lp;
	const struct ktel_metric_desc *md;
	struct ktel_metric_pull *mp; /* NULL when unsupported or broken */
	/* Stream metrics: the ring buffer reader instead of mp; NULL when
	 * unsupported or broken. A metric has at most one of mp and sr. */
	struct ktel_stream_reader *sr;
	bool enabled;
	bool attached;
	uint64_t interval_ms;
	uint64_t lease_ms; /* >0: disable when the lease ends */
	uv_timer_t timer;  /* pull timer */
	uv_timer_t lease_timer;
	bool timers_init;
	bool started_once;              /* start-up decision taken */
	char problem[KTEL_ERR_MSG_MAX]; /* why it cannot be pulled, or "" */
	/* Last pull. */
	uint64_t pulls, pull_errors, records;
	uint64_t self_pull_errors; /* pull_errors at the last self-telemetry */
	uint64_t last_pull_wall_ns;
	struct ktel_pull_info last;
	struct ktel_complaint complaint;
	/* Attribution as loaded (the BPF settings are fixed at load: a reload
	 * of the config changes it with the plugin's reload), and its fold;
	 * fold is NULL with attribution off. attr_asked is the config's, which
	 * attr is but where the load refused it (block_subject charged without
	 * the io controller on cgroup v2). block_subject: whose block I/O the
	 * metric counts as loaded, submitter or charged; auto where it has no
	 * such choice (not attributed, or no KTEL_ATTR_PROG_BLKCG programs). */
	struct ktel_attr_cfg attr;
	struct ktel_attr_cfg attr_asked;
	enum ktel_attr_subject block_subject;
	struct ktel_attr_fold *fold;
	/* Released ids (cgroups by attr_names.h, users, apps and processes by
	 * their ageing) whose keys the metric's pulls take out of its map
	 * (daemon_plugins.c, attr_arm), with the names they had; the first
	 * n_attr_armed, sorted by id, are those of the pull under way. And
	 * the keys deleted so far. */
	struct daemon_attr_gone *attr_gone;
	size_t n_attr_gone, cap_attr_gone, n_attr_armed;
	uint64_t attr_keys_deleted;
	/* When its last pull began (after the cgroup events were drained): a
	 * cgroup released before every metric's is handed on (attr_names.h,
	 * settle). */
	uint64_t attr_pull_ns;
	/* By user, app or process: the ids seen and when each last had
	 * events, and the time of their last ageing sweep (NULL otherwise). */
	struct ktel_attr_ids *attr_ids;
	uint64_t attr_sweep_ns, attr_ids_released;
	/* Self-telemetry's previous fold counts (daemon_self.c). */
	uint64_t self_folded_kernel, self_folded_user, self_keys_deleted;
	uint64_t self_events_in, self_events_out;
};

/* One plugin file, loaded into the kernel (or found unsupported). */
struct ktel_loaded_plugin {
	struct ktel_plugin *plugin;
	struct ktel_bpf_plugin *bpf;
	struct ktel_metric *metrics;
	size_t n_metrics;
	char path[4096];
	/* The file as loaded: a rescan reloads the plugin when it changes. */
	dev_t dev;
	ino_t ino;
	struct timespec mtime;
	size_t pending_closes; /* timers still closing after an unload */
	/* Self-telemetry's previous running totals (daemon_self.c). */
	uint64_t *self_prev;
	size_t n_self_prev;
	/* Where status's cost window starts (daemon_self.c): the programs'
	 * summed run time then, and when (CLOCK_BOOTTIME; 0: at their load). */
	uint64_t cost_run_time_ns, cost_since_ns;
};

/*
 * A plugin file the daemon refused (the loader's rules, a taken plugin name
 * or pin, a failed load): shown by status and list, logged once per version
 * of the file (device, inode, size, mtime) and reason.
 */
struct ktel_refusal {
	char path[4096];
	char reason[KTEL_ERR_MSG_MAX];
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	bool seen; /* refused again by the scan under way */
};

struct ktel_daemon_opts {
	bool once; /* pull once after once_wait_ms, then exit */
	uint64_t once_wait_ms;
	/* Where the config came from, for reload: a file, else this text. */
	const char *config_path;
	const char *config_text;
	struct ktel_config_vars vars;
};

/* The daemon takes ownership of cfg (a reload replaces it). */
int ktel_daemon__new(uv_loop_t *loop, struct ktel_config *cfg, const struct ktel_daemon_opts *opts,
		     struct ktel_daemon **ret, struct ktel_err *err);

/*
 * Open sinks, load state, discover and load plugins, attach enabled metrics
 * and start their timers, open the control socket (ktel_daemon_control_ops). Errors that make running pointless (no sink can be
 * opened, state or pin root unusable) fail; a plugin that cannot load is
 * logged and skipped.
 */
int ktel_daemon__start(struct ktel_daemon *d, struct ktel_err *err);

/* Pull one metric now (a timer, `ktelemetryctl pull`, shutdown). */
int ktel_daemon__pull(struct ktel_daemon *d, struct ktel_metric *m, struct ktel_err *err);

/* Pull every enabled metric now. Returns the number of failed pulls. */
int ktel_daemon__pull_all(struct ktel_daemon *d);

/* Enable or disable a metric at run time (attach/detach its programs). */
int ktel_daemon__enable(struct ktel_daemon *d, struct ktel_metric *m, uint64_t lease_ms,
			struct ktel_err *err);
int ktel_daemon__disable(struct ktel_daemon *d, struct ktel_metric *m, struct ktel_err *err);

struct ktel_metric *ktel_daemon__metric(struct ktel_daemon *d, const char *name);

/* Does metric m use program prog? (All of its plugin's when it lists none.) */
bool ktel_metric__uses_prog(const struct ktel_metric *m, const char *prog);

/* Iterate loaded plugins and metrics. */
size_t ktel_daemon__n_plugins(const struct ktel_daemon *d);
struct ktel_loaded_plugin *ktel_daemon__plugin(struct ktel_daemon *d, size_t i);

/*
 * Every metric of every loaded plugin, in load order:
 *	struct ktel_metric_iter it = {0};
 *	while ((m = ktel_daemon__next_metric(d, &it)))
 * The iterator holds indexes: it stays valid while metrics are enabled,
 * disabled or pulled, not across a plugin scan.
 */
struct ktel_metric_iter {
	size_t plugin, metric;
};
struct ktel_metric *ktel_daemon__next_metric(struct ktel_daemon *d, struct ktel_metric_iter *it);

/* The plugin files the last scan refused, and why. */
size_t ktel_daemon__n_refused(const struct ktel_daemon *d);
const struct ktel_refusal *ktel_daemon__refused(const struct ktel_daemon *d, size_t i);
/* Refusals beyond those kept (logged, not listed). */
size_t ktel_daemon__n_refused_unlisted(const struct ktel_daemon *d);

/* Final pull, state save, sinks flushed within the configured timeout; then
 * the loop has nothing left and uv_run returns. exit_code is what main
 * should return. */
void ktel_daemon__shutdown(struct ktel_daemon *d, int exit_code);
int ktel_daemon__exit_code(const struct ktel_daemon *d);

const struct ktel_config *ktel_daemon__config(const struct ktel_daemon *d);
struct ktel_router *ktel_daemon__router(struct ktel_daemon *d);
/* SIGUSR1 and `ktelemetryctl reopen` (logrotate's postrotate): the file
 * sinks reopen their path. Returns how many sinks were asked. */
size_t ktel_daemon__reopen_sinks(struct ktel_daemon *d);

/*
 * Reload the configuration from path (NULL: the file the daemon started with):
 * parse and validate the whole new config and open the new sinks first; apply
 * the difference only if all of that succeeded; otherwise keep running on the
 * old config. Every error is in errs (the caller clears it).
 */
int ktel_daemon__reload(struct ktel_daemon *d, const char *path, struct ktel_config_errors *errs,
			struct ktel_err *err);

/* Start a rescan of the plugin directories: load new plugins, drop removed
 * ones, reload replaced ones. The files are opened off the loop; this returns
 * 0 at once and the changes are logged when the scan ends. */
int ktel_daemon__rescan_plugins(struct ktel_daemon *d);

/*
 * What the control socket asks of a daemon (daemon_control.c), with the
 * daemon as ctx: ktel_control__new(loop, &ktel_daemon_control_ops, d, ...).
 * The daemon opens its own control_socket with it at start.
 */
extern const struct ktel_control_ops ktel_daemon_control_ops;

/* Release everything; the loop must have stopped. Detaches programs; pins stay. */
void ktel_daemon__free(struct ktel_daemon *d);

#endif /* KTEL_DAEMON_H */
