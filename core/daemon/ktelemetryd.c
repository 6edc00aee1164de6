// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ktelemetryd - the ktelemetry daemon.
 *
 *   ktelemetryd [--config FILE] [--once SECONDS] [--log-level LEVEL]
 *   ktelemetryd --check-config FILE
 *   ktelemetryd --config-doc
 *
 * Exit status: 0 success; 1 a runtime failure after start; 2 bad usage or bad
 * input (config, plugin directory, state or output path), with one line on
 * stderr per problem naming the path and the rule.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "bpf_lifecycle.h"
#include "config.h"
#include "daemon.h"
#include "fault.h"
#include "host_check.h"
#include "label_check.h"
#include "log.h"
#include "memory.h"
#include "plugin_loader.h"
#include "sinks.h"
#include "vmlinux_btf_interpose.h"
#include "default_config.h"

#define EXIT_BAD_INPUT 2

struct main_state {
	struct ktel_daemon *daemon;
	uv_signal_t sigint, sigterm, sighup, sigusr1;
	bool stopping;
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: ktelemetryd [--config FILE] [--once SECONDS] [--log-level LEVEL]\n"
		"       ktelemetryd --check-config FILE\n"
		"       ktelemetryd --config-doc\n"
		"\n"
		"  -c, --config FILE        per-device JSON config (default: the embedded\n"
		"                           config/default.json)\n"
		"      --check-config FILE  validate FILE, print every error, exit 0 or 2\n"
		"      --once SECONDS       load, wait SECONDS, pull every metric once, exit\n"
		"  -f, --foreground         stay in the foreground (the default; for systemd)\n"
		"  -l, --log-level LEVEL    error, warn, info (default), debug\n"
		"      --config-doc         print the reference of every config key (Markdown)\n");
}

/* ${plugin_dir}, ${state_dir} and ${run_dir}: the build tree when run from it. */
static void config_vars(struct ktel_config_vars *vars)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	size_t len = strlen(KTEL_BUILD_BIN_DIR);

	vars->plugin_dir = KTEL_INSTALL_PLUGIN_DIR;
	vars->state_dir = KTEL_INSTALL_STATE_DIR;
	vars->run_dir = KTEL_INSTALL_RUN_DIR;
	if (n > 0) {
		exe[n] = '\0';
		if (strncmp(exe, KTEL_BUILD_BIN_DIR, len) == 0 && exe[len] == '/') {
			vars->plugin_dir = KTEL_BUILD_PLUGIN_DIR;
			vars->state_dir = KTEL_BUILD_STATE_DIR;
			vars->run_dir = KTEL_BUILD_STATE_DIR;
		}
	}
}

static int load_config(const char *path, struct ktel_config **ret)
{
	struct ktel_config_errors errs = {.want_warnings = true};
	struct ktel_config_vars vars;
	struct ktel_err err;
	int r;

	config_vars(&vars);
	if (path)
		r = ktel_config__load_file(path, &vars, ret, &errs, &err);
	else
		r = ktel_config__load_string((const char *)ktel_default_config,
					     "<embedded config/default.json>", &vars, ret, &errs,
					     &err);
	for (size_t i = 0; i < errs.n; i++)
		fprintf(stderr, "%s: %s\n", path ? path : "<embedded>", errs.msgs[i]);
	for (size_t i = 0; !r && i < errs.n_warnings; i++)
		fprintf(stderr, "%s: warning: %s\n", path ? path : "<embedded>", errs.warnings[i]);
	if (r && !errs.n)
		fprintf(stderr, "ktelemetryd: %s\n", err.msg);
	ktel_config_errors__clear(&errs);
	return r;
}

/*
 * Print every problem of cfg's paths on this machine that would stop a
 * start (host_check.h), each once, after the file's name: --check-config
 * and the start run this same check. -EINVAL when there is one.
 */
static int check_host(const char *path, const struct ktel_config *cfg)
{
	struct ktel_config_errors errs = {0};
	int r = 0;

	ktel_host_check(cfg, &errs);
	for (size_t i = 0; i < errs.n; i++)
		fprintf(stderr, "%s: %s\n", path, errs.msgs[i]);
	if (errs.n)
		r = -EINVAL;
	ktel_config_errors__clear(&errs);
	return r;
}

static void print_collision(void *ctx, const char *sink, const char *metric, const char *dim,
			    const char *exported)
{
	fprintf(stderr,
		"%s: warning: sinks.%s.labels: metric %s has a dimension \"%s\" too: the "
		"configured label keeps the name, the dimension is sent as \"%s\"\n",
		(const char *)ctx, sink, metric, dim, exported);
}

/*
 * The dimensions a sink's configured labels would rename (label_check.h),
 * as warnings: the plugins of the configured directories are read as start
 * reads them (no plugin code runs, nothing is loaded into the kernel). A
 * directory or plugin that cannot be read is left for start to report.
 */
static void check_labels(const char *path, const struct ktel_config *cfg)
{
	ktel_label_check__self(cfg, print_collision, (void *)path);
	for (size_t d = 0; d < cfg->n_plugin_dirs; d++) {
		struct ktel_plugin_list *list = NULL;

		if (ktel_plugin_dir__scan(cfg->plugin_dirs[d], NULL, &list, NULL))
			continue;
		for (size_t i = 0; i < list->n; i++)
			for (uint32_t m = 0; m < list->items[i]->desc.n_metrics; m++)
				ktel_label_check__metric(cfg, &list->items[i]->desc.metrics[m],
							 print_collision, (void *)path);
		ktel_plugin_list__free(list);
	}
}

/*
 * The attribution memlock budget, as a load checks it (bpf_lifecycle.h),
 * from the plugins of the configured directories read as check_labels
 * reads them: each attributed metric's map with its max_keys, its sizes
 * from the BPF object opened but not loaded. One line per metric above
 * the budget; -ENOSPC when there is one.
 */
static int check_attr_budget(const char *path, const struct ktel_config *cfg)
{
	int rc = 0;

	for (size_t d = 0; d < cfg->n_plugin_dirs; d++) {
		struct ktel_plugin_list *list = NULL;

		if (ktel_plugin_dir__scan(cfg->plugin_dirs[d], NULL, &list, NULL))
			continue;
		for (size_t i = 0; i < list->n; i++) {
			const struct ktel_plugin *pl = list->items[i];

			for (uint32_t m = 0; m < pl->desc.n_metrics; m++) {
				const struct ktel_metric_desc *md = &pl->desc.metrics[m];
				const struct ktel_metric_cfg *mc = ktel_config__metric(cfg,
										       md->name);
				struct ktel_bpf_attr a;
				struct ktel_err err;

				if (!mc || mc->attr.by == KTEL_ATTR_BY_NONE || !md->map_name)
					continue;
				a = (struct ktel_bpf_attr){
					.metric = md->name,
					.map_name = md->map_name,
					.by = mc->attr.by,
					.depth = mc->attr.depth,
					.limit = mc->attr.max_keys,
				};
				if (ktel_bpf_attr_check_budget(pl, &a, 1, cfg->attr_memlock_budget,
							       &err) == -ENOSPC) {
					fprintf(stderr, "%s: metrics.%s.attribution.max_keys: %s\n",
						path, md->name, err.msg);
					rc = -ENOSPC;
				}
			}
		}
		ktel_plugin_list__free(list);
	}
	return rc;
}

/*
 * KTEL_TEST_FAULT, the same for --check-config and start (prefix names the
 * file checked, NULL at start): a malformed value in a build with fault
 * injection is refused (-EINVAL: exit 2); an armed fault, or a value a build
 * without fault injection ignores, is said once (on stderr for the check,
 * in the log at start).
 */
static int check_fault(const char *prefix)
{
	char line[300];
	struct ktel_err err;

	switch (ktel_fault__init(&err)) {
	case KTEL_FAULT_MALFORMED:
		fprintf(stderr, "%s: %s\n", prefix ? prefix : "ktelemetryd", err.msg);
		return -EINVAL;
	case KTEL_FAULT_ARMED:
		ktel_fault__describe(line, sizeof(line));
		if (prefix)
			fprintf(stderr, "%s: warning: %s: TEST FAULT INJECTION ARMED\n", prefix,
				line);
		else
			ktel_log(KTEL_LOG_WARN,
				 "%s: TEST FAULT INJECTION ARMED: never set this in production",
				 line);
		return 0;
	case KTEL_FAULT_IGNORED:
		ktel_fault__describe(line, sizeof(line));
		if (prefix)
			fprintf(stderr, "%s: warning: %s\n", prefix, line);
		else
			ktel_log(KTEL_LOG_WARN, "%s", line);
		return 0;
	default:
		return 0;
	}
}

static void on_signal(uv_signal_t *h, int signum)
{
	struct main_state *st = h->data;

	if (signum == SIGUSR1) {
		ktel_log(KTEL_LOG_INFO, "SIGUSR1: reopening sink files");
		ktel_daemon__reopen_sinks(st->daemon);
		return;
	}
	if (signum == SIGHUP) {
		struct ktel_config_errors errs = {0};
		struct ktel_err err;

		ktel_log(KTEL_LOG_INFO, "SIGHUP: reloading the configuration");
		if (ktel_daemon__reload(st->daemon, NULL, &errs, &err)) {
			for (size_t i = 0; i < errs.n; i++)
				ktel_log(KTEL_LOG_ERROR, "reload: %s", errs.msgs[i]);
			ktel_log(KTEL_LOG_ERROR, "reload: %s", err.msg);
		}
		ktel_config_errors__clear(&errs);
		return;
	}
	/* A second SIGTERM/SIGINT during the flush must not kill the daemon
	 * with the default action, throwing the queued lines away: the flush
	 * is bounded by the sinks' close timeout, so finish it, and say so. */
	if (st->stopping) {
		ktel_log(KTEL_LOG_WARN,
			 "%s again: still flushing the sinks (bounded by their "
			 "close timeout; what is not written by then is counted dropped and "
			 "logged); SIGKILL abandons the flush and loses it",
			 strsignal(signum));
		return;
	}
	st->stopping = true;
	ktel_log(KTEL_LOG_INFO, "%s: final pull, flushing sinks", strsignal(signum));
	uv_signal_stop(&st->sighup);
	uv_signal_stop(&st->sigusr1);
	ktel_daemon__shutdown(st->daemon, 0);
}

static void close_walk(uv_handle_t *h, void *arg)
{
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

/* Runs the daemon, which takes ownership of cfg. */
static int run(struct ktel_config *cfg, const struct ktel_daemon_opts *opts)
{
	struct main_state st = {0};
	struct ktel_err err;
	uv_loop_t loop;
	int r;

	uv_loop_init(&loop);
	r = ktel_daemon__new(&loop, cfg, opts, &st.daemon, &err);
	if (r) {
		ktel_config__free(cfg);
		fprintf(stderr, "ktelemetryd: %s\n", err.msg);
		uv_loop_close(&loop);
		return EXIT_BAD_INPUT;
	}
	/*
	 * Handle signals before the (slow) start: a SIGHUP or SIGTERM that
	 * arrives while plugins load waits for the loop instead of killing
	 * the daemon with the default action.
	 */
	uv_signal_init(&loop, &st.sigint);
	uv_signal_init(&loop, &st.sigterm);
	uv_signal_init(&loop, &st.sighup);
	uv_signal_init(&loop, &st.sigusr1);
	st.sigint.data = st.sigterm.data = st.sighup.data = st.sigusr1.data = &st;
	uv_signal_start(&st.sigint, on_signal, SIGINT);
	uv_signal_start(&st.sigterm, on_signal, SIGTERM);
	uv_signal_start(&st.sighup, on_signal, SIGHUP);
	uv_signal_start(&st.sigusr1, on_signal, SIGUSR1);
	/* Signal handles must not keep the loop alive once the daemon is done. */
	uv_unref((uv_handle_t *)&st.sigint);
	uv_unref((uv_handle_t *)&st.sigterm);
	uv_unref((uv_handle_t *)&st.sighup);
	uv_unref((uv_handle_t *)&st.sigusr1);
	r = ktel_daemon__start(st.daemon, &err);
	if (r) {
		fprintf(stderr, "ktelemetryd: %s\n", err.msg);
		ktel_daemon__shutdown(st.daemon, EXIT_BAD_INPUT);
		/* Let the sinks opened so far close themselves (a write may be
		 * in flight) before the rest is closed from outside. */
		uv_run(&loop, UV_RUN_DEFAULT);
		uv_walk(&loop, close_walk, NULL);
		uv_run(&loop, UV_RUN_DEFAULT);
		ktel_daemon__free(st.daemon);
		uv_loop_close(&loop);
		return EXIT_BAD_INPUT;
	}
	ktel_log(KTEL_LOG_INFO, "running with %s", ktel_daemon__config(st.daemon)->source);
	uv_run(&loop, UV_RUN_DEFAULT);
	r = ktel_daemon__exit_code(st.daemon);
	uv_walk(&loop, close_walk, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	ktel_daemon__free(st.daemon);
	uv_loop_close(&loop);
	return r;
}

int main(int argc, char **argv)
{
	enum {
		OPT_CHECK = 256,
		OPT_ONCE,
		OPT_DOC
	};
	static const struct option long_opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"check-config", required_argument, NULL, OPT_CHECK},
		{"once", required_argument, NULL, OPT_ONCE},
		{"foreground", no_argument, NULL, 'f'},
		{"log-level", required_argument, NULL, 'l'},
		{"config-doc", no_argument, NULL, OPT_DOC},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct ktel_daemon_opts opts = {0};
	const char *config_path = NULL, *check = NULL;
	struct ktel_config *cfg = NULL;
	bool doc = false;
	char *end;
	int c, r;

	ktel_memory__init();
	/*
	 * libuv's pool runs only what is rare: a rotated file's compression
	 * and statsd's name lookups (the files' writes and the state's save
	 * have threads of their own, core/base/worker.h). Its default 4 threads
	 * would start together at the first job; one is enough, and none
	 * starts for a config that needs neither. An operator's own
	 * UV_THREADPOOL_SIZE wins.
	 */
	setenv("UV_THREADPOOL_SIZE", "1", 0);

	ktel_sinks_register_schemas();
	while ((c = getopt_long(argc, argv, "c:fl:h", long_opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config_path = optarg;
			break;
		case OPT_CHECK:
			check = optarg;
			break;
		case OPT_ONCE: {
			double s = strtod(optarg, &end);

			if (*end || s < 0 || s > 86400) {
				fprintf(stderr,
					"ktelemetryd: --once: expected seconds 0..86400, "
					"got \"%s\"\n",
					optarg);
				return EXIT_BAD_INPUT;
			}
			opts.once = true;
			opts.once_wait_ms = (uint64_t)(s * 1000);
			break;
		}
		case 'f':
			break;
		case 'l':
			r = ktel_log_parse_level(optarg);
			if (r < 0) {
				fprintf(stderr,
					"ktelemetryd: --log-level: expected error, warn, info "
					"or debug, got \"%s\"\n",
					optarg);
				return EXIT_BAD_INPUT;
			}
			ktel_log_set_level(r);
			break;
		case OPT_DOC:
			doc = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EXIT_BAD_INPUT;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "ktelemetryd: unexpected argument \"%s\"\n", argv[optind]);
		return EXIT_BAD_INPUT;
	}
	if (doc)
		return ktel_config__write_doc(stdout) ? 1 : 0;
	if (check) {
		r = check_fault(check);
		if (!r)
			r = load_config(check, &cfg);
		if (!r)
			r = check_host(check, cfg);
		if (!r)
			check_labels(check, cfg);
		if (!r)
			r = check_attr_budget(check, cfg);
		ktel_config__free(cfg);
		if (!r)
			printf("%s: OK\n", check);
		return r ? EXIT_BAD_INPUT : 0;
	}
	if (check_fault(NULL) || load_config(config_path, &cfg))
		return EXIT_BAD_INPUT;
	if (check_host(config_path ? config_path : "<embedded>", cfg)) {
		ktel_config__free(cfg);
		return EXIT_BAD_INPUT;
	}
	/* Sinks writing to a closed pipe get EPIPE, not a fatal signal. */
	signal(SIGPIPE, SIG_IGN);
	/* One kernel BTF parse per plugin scan, lent to each load. */
	if (ktel_vmlinux_btf__interpose())
		ktel_log(KTEL_LOG_DEBUG, "libbpf's btf__free() does not reach the daemon: "
					 "each plugin load parses the kernel BTF itself");
	opts.config_path = config_path;
	opts.config_text = (const char *)ktel_default_config;
	config_vars(&opts.vars);
	return run(cfg, &opts);
}
