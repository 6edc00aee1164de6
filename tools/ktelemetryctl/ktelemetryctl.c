// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ktelemetryctl - drive a running ktelemetryd through its control socket.
 *
 *   ktelemetryctl [--socket PATH] [--config FILE] [--json] [--timeout DURATION]
 *                 COMMAND [ARGS]
 *
 * The protocol, the commands and the exit codes are in docs/control.md:
 * 0 ok, 1 the daemon answered with an error (or inspect found a problem),
 * 2 bad usage, 3 cannot connect or not allowed to.
 */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "config.h"
#include "control_proto.h"
#include "ctl_render.h"
#include "inspect.h"
#include "kernel_targets.h"
#include "sinks.h"

#define EXIT_OK 0
#define EXIT_DAEMON_ERROR 1
#define EXIT_USAGE 2
#define EXIT_CONNECT 3

#define INSTALL_STATE_DIR "/var/lib/ktelemetry"
#define INSTALL_RUN_DIR "/run/ktelemetry"

struct opts {
	const char *socket;
	const char *config;
	bool json;
	uint64_t timeout_ms;
};

struct command {
	const char *name;
	const char *usage;
	/* Build the request from the command's arguments (argv[0] is the
	 * command); NULL fn: run locally instead of asking the daemon. */
	int (*build)(int argc, char **argv, json_t *req);
	int (*local)(const struct opts *o, int argc, char **argv);
};

static void usage(FILE *out);

/* ---- where the daemon listens --------------------------------------------- */

/* The directory the daemon's default config uses for installed: the build
 * tree's var/ when this binary runs from a build tree, else installed. */
static void default_dir(const char *installed, char *buf, size_t len)
{
	char exe[PATH_MAX], cache[PATH_MAX + 32], *build;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	snprintf(buf, len, "%s", installed);
	if (n <= 0)
		return;
	exe[n] = '\0';
	/* <build>/tools/ktelemetryctl, with <build>/CMakeCache.txt. */
	build = dirname(dirname(exe));
	snprintf(cache, sizeof(cache), "%s/CMakeCache.txt", build);
	if (access(cache, F_OK) == 0)
		snprintf(buf, len, "%s/var", build);
}

/*
 * path into buf[0..len) whole, else the exit code `fail` and why on stderr.
 * A socket path is never cut: the cut names another file and may split a
 * character, and the kernel takes no more than sun_path holds.
 */
static int copy_socket_path(char *buf, size_t len, const char *path, const char *what, int fail)
{
	size_t n = strlen(path), max = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;

	if (n < len && n <= max) {
		memcpy(buf, path, n + 1);
		return 0;
	}
	fprintf(stderr,
		"ktelemetryctl: %s: the socket path is %zu bytes; a unix socket path "
		"has at most %zu\n",
		what, n, max);
	return fail;
}

/* control_socket of a config file; exit code or 0. */
static int socket_from_config(const char *path, char *buf, size_t len)
{
	struct ktel_config_errors errs = {0};
	struct ktel_config_vars vars = {.plugin_dir = ""};
	struct ktel_config *cfg = NULL;
	char state[PATH_MAX], run[PATH_MAX];
	struct ktel_err err;
	int r;

	default_dir(INSTALL_STATE_DIR, state, sizeof(state));
	default_dir(INSTALL_RUN_DIR, run, sizeof(run));
	vars.state_dir = state;
	vars.run_dir = run;
	ktel_sinks_register_schemas();
	r = ktel_config__load_file(path, &vars, &cfg, &errs, &err);
	for (size_t i = 0; i < errs.n; i++)
		fprintf(stderr, "ktelemetryctl: %s: %s\n", path, errs.msgs[i]);
	if (r && !errs.n)
		fprintf(stderr, "ktelemetryctl: %s\n", err.msg);
	ktel_config_errors__clear(&errs);
	if (r)
		return EXIT_USAGE;
	r = copy_socket_path(buf, len, cfg->control_socket, path, EXIT_USAGE);
	ktel_config__free(cfg);
	return r;
}

/* --socket, else $KTELEMETRY_SOCKET, else --config's, else the default's. */
static int resolve_socket(const struct opts *o, char *buf, size_t len)
{
	const char *env = getenv("KTELEMETRY_SOCKET");
	char run[PATH_MAX];

	if (o->socket)
		return copy_socket_path(buf, len, o->socket, "--socket", EXIT_USAGE);
	if (env && *env)
		return copy_socket_path(buf, len, env, "KTELEMETRY_SOCKET", EXIT_USAGE);
	if (o->config)
		return socket_from_config(o->config, buf, len);
	default_dir(INSTALL_RUN_DIR, run, sizeof(run));
	snprintf(buf, len, "%s/control.sock", run);
	return 0;
}

/* ---- talking to a socket ----------------------------------------------------- */

static int connect_unix(const char *path, uint64_t timeout_ms)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = (time_t)(timeout_ms / 1000),
			     .tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000};
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (timeout_ms) {
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Read one line (without '\n') into a malloc'd string; NULL at EOF/error. */
static char *read_line(FILE *f)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n = getline(&line, &cap, f);

	if (n <= 0 || line[n - 1] != '\n') {
		free(line);
		return NULL;
	}
	line[n - 1] = '\0';
	return line;
}

/* Exit code for an answer: denied/busy are "cannot use the daemon". */
static int answer_exit_code(const json_t *resp)
{
	const char *code = json_string_value(json_object_get(resp, "code"));

	if (json_is_true(json_object_get(resp, "ok")))
		return EXIT_OK;
	if (code && (strcmp(code, KTEL_CTL_E_DENIED) == 0 || strcmp(code, KTEL_CTL_E_BUSY) == 0))
		return EXIT_CONNECT;
	return EXIT_DAEMON_ERROR;
}

/* Send req, receive the answer into *ret; an exit code on failure. */
static int request(const struct opts *o, const json_t *req, json_t **ret)
{
	char path[PATH_MAX], *line, *answer;
	json_error_t jerr;
	FILE *f;
	size_t len;
	int fd, r;

	r = resolve_socket(o, path, sizeof(path));
	if (r)
		return r;
	fd = connect_unix(path, o->timeout_ms);
	if (fd < 0) {
		fprintf(stderr,
			"ktelemetryctl: cannot connect to %s: %s (is ktelemetryd running? "
			"see --socket, --config, KTELEMETRY_SOCKET)\n",
			path, strerror(errno));
		return EXIT_CONNECT;
	}
	line = ktel_control_dump_line(req, &len);
	if (!line || write_all(fd, line, len)) {
		/* A refused client may be closed before it writes: its
		 * answer is already waiting, so read before giving up. */
	}
	free(line);
	f = fdopen(fd, "r");
	answer = f ? read_line(f) : NULL;
	if (f)
		fclose(f);
	else
		close(fd);
	if (!answer) {
		fprintf(stderr, "ktelemetryctl: %s: no answer from the daemon\n", path);
		return EXIT_CONNECT;
	}
	*ret = json_loads(answer, 0, &jerr);
	free(answer);
	if (!*ret || !json_is_object(*ret)) {
		fprintf(stderr, "ktelemetryctl: %s: answer is not a JSON object\n", path);
		json_decref(*ret);
		return EXIT_DAEMON_ERROR;
	}
	return 0;
}

/* ---- request builders ----------------------------------------------------------- */

static int build_none(int argc, char **argv, json_t *req)
{
	if (argc != 1) {
		fprintf(stderr, "ktelemetryctl: %s takes no arguments\n", argv[0]);
		return EXIT_USAGE;
	}
	return 0;
}

static int build_name(int argc, char **argv, json_t *req)
{
	if (argc != 2) {
		fprintf(stderr, "ktelemetryctl: %s needs exactly one metric NAME\n", argv[0]);
		return EXIT_USAGE;
	}
	json_object_set_new(req, "name", json_string(argv[1]));
	return 0;
}

static int build_opt_name(int argc, char **argv, json_t *req)
{
	if (argc > 2) {
		fprintf(stderr, "ktelemetryctl: %s takes at most one metric NAME\n", argv[0]);
		return EXIT_USAGE;
	}
	if (argc == 2)
		json_object_set_new(req, "name", json_string(argv[1]));
	return 0;
}

static int build_enable(int argc, char **argv, json_t *req)
{
	const char *name = NULL, *dur = NULL;
	uint64_t ms;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--for") == 0 && i + 1 < argc)
			dur = argv[++i];
		else if (strncmp(argv[i], "--for=", 6) == 0)
			dur = argv[i] + 6;
		else if (argv[i][0] != '-' && !name)
			name = argv[i];
		else {
			fprintf(stderr, "ktelemetryctl: enable: unexpected \"%s\"\n", argv[i]);
			return EXIT_USAGE;
		}
	}
	if (!name) {
		fprintf(stderr, "ktelemetryctl: enable needs a metric NAME\n");
		return EXIT_USAGE;
	}
	json_object_set_new(req, "name", json_string(name));
	if (!dur)
		return 0;
	if (ktel_parse_duration(dur, &ms) || !ms) {
		fprintf(stderr,
			"ktelemetryctl: enable --for: expected a duration like \"10s\", "
			"\"250ms\", \"2m\", got \"%s\"\n",
			dur);
		return EXIT_USAGE;
	}
	json_object_set_new(req, "for_ms", json_integer((json_int_t)ms));
	return 0;
}

/* ---- local commands -------------------------------------------------------------- */

static int run_inspect(const struct opts *o, int argc, char **argv)
{
	struct ktel_targets *t;
	struct ktel_err err;
	int rc = EXIT_OK;

	if (argc < 2) {
		fprintf(stderr, "ktelemetryctl: inspect needs PLUGIN.so paths\n");
		return EXIT_USAGE;
	}
	t = ktel_targets__new(NULL, &err);
	if (!t)
		fprintf(stderr,
			"ktelemetryctl: kernel BTF unreadable, attach targets not checked: "
			"%s\n",
			err.msg);
	for (int i = 1; i < argc; i++) {
		json_t *report = NULL;
		int r = ktel_inspect_plugin_verify(argv[i], getuid(), t, &report, &err);

		if (report && o->json) {
			json_dumpf(report, stdout, JSON_COMPACT);
			fputc('\n', stdout);
		} else if (report) {
			ktel_ctl_render_inspect(stdout, report);
		}
		if (r) {
			fprintf(stderr, "ktelemetryctl: inspect: %s\n", err.msg);
			rc = EXIT_DAEMON_ERROR;
		}
		json_decref(report);
	}
	ktel_targets__free(t);
	return rc;
}

/* Ask the daemon where its stream sink listens. */
static int watch_socket(const struct opts *o, char *buf, size_t len)
{
	json_t *req = json_pack("{s:s}", "cmd", "watch"), *resp = NULL;
	int r = request(o, req, &resp);
	const char *path;

	json_decref(req);
	if (r)
		return r;
	r = answer_exit_code(resp);
	path = json_string_value(
		json_object_get(json_array_get(json_object_get(resp, "sockets"), 0), "socket"));
	if (r || !path) {
		fprintf(stderr, "ktelemetryctl: watch: %s\n",
			json_string_value(json_object_get(resp, "error")) ?: "no stream socket");
		json_decref(resp);
		return r ? r : EXIT_DAEMON_ERROR;
	}
	r = copy_socket_path(buf, len, path, "watch", EXIT_DAEMON_ERROR);
	json_decref(resp);
	return r;
}

/* N for the stream sink's {"dropped":N} notice line, else -1. */
static long long drop_notice(const char *line)
{
	json_t *j = json_loads(line, 0, NULL);
	json_t *n = json_object_get(j, "dropped");
	long long v = -1;

	if (json_is_integer(n) && json_object_size(j) == 1)
		v = (long long)json_integer_value(n);
	json_decref(j);
	return v;
}

static int run_watch(const struct opts *o, int argc, char **argv)
{
	char path[PATH_MAX] = "", *line;
	long long count = -1;
	FILE *f;
	int fd, r;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc) {
			r = copy_socket_path(path, sizeof(path), argv[++i], "watch --socket",
					     EXIT_USAGE);
			if (r)
				return r;
		} else if (strcmp(argv[i], "--count") == 0 && i + 1 < argc) {
			count = atoll(argv[++i]);
		} else {
			fprintf(stderr, "ktelemetryctl: watch: unexpected \"%s\"\n", argv[i]);
			return EXIT_USAGE;
		}
	}
	if (!path[0]) {
		r = watch_socket(o, path, sizeof(path));
		if (r)
			return r;
	}
	/* A stream is open-ended: no read timeout. */
	fd = connect_unix(path, 0);
	if (fd < 0) {
		fprintf(stderr, "ktelemetryctl: watch: cannot connect to %s: %s\n", path,
			strerror(errno));
		return EXIT_CONNECT;
	}
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return EXIT_CONNECT;
	}
	while (count != 0 && (line = read_line(f))) {
		long long dropped = drop_notice(line);

		/* A notice is not a record: it neither counts nor mixes with
		 * the records on stdout (unless --json asks for raw lines). */
		if (dropped >= 0 && !o->json) {
			fprintf(stderr,
				"ktelemetryctl: watch: %lld record%s dropped: this "
				"subscriber fell behind\n",
				dropped, dropped == 1 ? "" : "s");
		} else {
			printf("%s\n", line);
			fflush(stdout);
		}
		free(line);
		if (count > 0 && dropped < 0)
			count--;
	}
	fclose(f);
	return EXIT_OK;
}

/* Names of the enabled accumulator metrics, from `list`. */
static int enabled_metrics(const struct opts *o, json_t **ret_names)
{
	json_t *req = json_pack("{s:s}", "cmd", "list"), *resp = NULL, *names, *m;
	size_t i;
	int r = request(o, req, &resp);

	json_decref(req);
	if (r)
		return r;
	r = answer_exit_code(resp);
	names = json_array();
	json_array_foreach(json_object_get(resp, "metrics"), i,
			   m) if (json_is_true(json_object_get(m, "enabled")) &&
				  strcmp(json_string_value(json_object_get(m, "model")) ?: "",
					 "accumulator") == 0)
		json_array_append(names, json_object_get(m, "name"));
	json_decref(resp);
	*ret_names = names;
	return r;
}

/* One screen: the `show` view of every metric in names. */
static int top_screen(const struct opts *o, const json_t *names, FILE *out)
{
	size_t i;
	json_t *name;

	json_array_foreach(names, i, name)
	{
		json_t *req = json_pack("{s:s, s:O}", "cmd", "show", "name", name), *resp = NULL;
		int r = request(o, req, &resp);

		json_decref(req);
		if (r)
			return r;
		fprintf(out, "== %s\n", json_string_value(name));
		if (answer_exit_code(resp) == EXIT_OK)
			ktel_ctl_render(out, "show", resp);
		else
			fprintf(out, "  %s\n",
				json_string_value(json_object_get(resp, "error")) ?: "?");
		fputc('\n', out);
		json_decref(resp);
	}
	return 0;
}

/*
 * The live view: every enabled metric's histograms, redrawn every interval
 * (like top). Names on the command line restrict it to those metrics.
 */
static int run_top(const struct opts *o, int argc, char **argv)
{
	uint64_t interval_ms = 2000;
	long long count = -1;
	json_t *names = json_array();
	bool tty = isatty(STDOUT_FILENO);
	int r = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--interval") == 0 && i + 1 < argc) {
			if (ktel_parse_duration(argv[++i], &interval_ms) || !interval_ms) {
				fprintf(stderr,
					"ktelemetryctl: top: --interval: expected a duration "
					"like \"2s\", got \"%s\"\n",
					argv[i]);
				json_decref(names);
				return EXIT_USAGE;
			}
		} else if (strcmp(argv[i], "--count") == 0 && i + 1 < argc) {
			count = atoll(argv[++i]);
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "ktelemetryctl: top: unexpected \"%s\"\n", argv[i]);
			json_decref(names);
			return EXIT_USAGE;
		} else {
			json_array_append_new(names, json_string(argv[i]));
		}
	}
	/* Pull once first, so the first screen shows data, not "not pulled". */
	{
		json_t *req = json_pack("{s:s}", "cmd", "pull"), *resp = NULL;

		r = request(o, req, &resp);
		json_decref(req);
		json_decref(resp);
	}
	for (; count != 0 && !r; count > 0 ? count-- : 0) {
		json_t *shown = names;
		char *buf = NULL, stamp[32];
		size_t len = 0;
		time_t now = time(NULL);
		FILE *mem = open_memstream(&buf, &len);

		if (!mem)
			break;
		if (!json_array_size(names))
			r = enabled_metrics(o, &shown);
		strftime(stamp, sizeof(stamp), "%H:%M:%S", localtime(&now));
		fprintf(mem,
			"ktelemetry  %s  cumulative since each map was created; "
			"refreshed every %.1fs (Ctrl-C quits)\n\n",
			stamp, interval_ms / 1000.0);
		if (!r)
			r = top_screen(o, shown, mem);
		if (shown != names)
			json_decref(shown);
		fclose(mem);
		/* Draw the whole screen at once: no flicker. */
		if (!r) {
			if (tty)
				fputs("\033[H\033[2J", stdout);
			fwrite(buf, 1, len, stdout);
			fflush(stdout);
		}
		free(buf);
		if (!r && count != 1)
			usleep((useconds_t)(interval_ms * 1000));
	}
	json_decref(names);
	return r;
}

static const struct command commands[] = {
	{"status", "status", build_none, NULL},
	{"list", "list", build_none, NULL},
	{"enable", "enable NAME [--for DURATION]", build_enable, NULL},
	{"disable", "disable NAME", build_name, NULL},
	{"pull", "pull [NAME]", build_opt_name, NULL},
	{"show", "show NAME", build_name, NULL},
	{"reload", "reload", build_none, NULL},
	{"reopen", "reopen", build_none, NULL},
	{"help", "help", build_none, NULL},
	{"watch", "watch [--socket PATH] [--count N]", NULL, run_watch},
	{"inspect", "inspect PLUGIN.so...", NULL, run_inspect},
	{"top", "top [--interval DURATION] [--count N] [NAME...]", NULL, run_top},
};

static void usage(FILE *out)
{
	fprintf(out, "usage: ktelemetryctl [--socket PATH] [--config FILE] [--json] "
		     "[--timeout DURATION] COMMAND [ARGS]\n\ncommands:\n");
	for (size_t i = 0; i < KTEL_ARRAY_SIZE(commands); i++)
		fprintf(out, "  %s\n", commands[i].usage);
	fprintf(out,
		"\n  --socket PATH      control socket (default: $KTELEMETRY_SOCKET, else the\n"
		"                     config's control_socket, else <run_dir>/control.sock)\n"
		"  --config FILE      read control_socket from this daemon config\n"
		"  --json             print the daemon's answer as JSON (for scripts)\n"
		"  --timeout DURATION give up waiting for an answer (default 30s)\n"
		"\nexit status: 0 ok, 1 the daemon answered an error, 2 usage, "
		"3 cannot connect or permission denied\n");
}

static int run_remote(const struct opts *o, const struct command *cmd, int argc, char **argv)
{
	json_t *req = json_pack("{s:s}", "cmd", cmd->name), *resp = NULL;
	int r = cmd->build(argc, argv, req);

	if (!r)
		r = request(o, req, &resp);
	json_decref(req);
	if (r)
		return r;
	r = answer_exit_code(resp);
	if (o->json) {
		json_dumpf(resp, stdout, JSON_COMPACT);
		fputc('\n', stdout);
	} else if (r == EXIT_OK) {
		ktel_ctl_render(stdout, cmd->name, resp);
	}
	if (r) {
		const json_t *errs = json_object_get(resp, "errors");
		size_t i;
		json_t *e;

		fprintf(stderr, "ktelemetryctl: %s\n",
			json_string_value(json_object_get(resp, "error")) ?: "failed");
		json_array_foreach(errs, i, e) fprintf(stderr, "  %s\n", json_string_value(e));
	}
	json_decref(resp);
	return r;
}

int main(int argc, char **argv)
{
	static const struct option long_opts[] = {
		{"socket", required_argument, NULL, 's'}, {"config", required_argument, NULL, 'c'},
		{"json", no_argument, NULL, 'j'},         {"timeout", required_argument, NULL, 't'},
		{"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
	};
	struct opts o = {.timeout_ms = 30000};
	int c;

	/* Options after the command belong to it (enable --for, watch --socket). */
	while ((c = getopt_long(argc, argv, "+s:c:jt:h", long_opts, NULL)) != -1) {
		switch (c) {
		case 's':
			o.socket = optarg;
			break;
		case 'c':
			o.config = optarg;
			break;
		case 'j':
			o.json = true;
			break;
		case 't':
			if (ktel_parse_duration(optarg, &o.timeout_ms)) {
				fprintf(stderr,
					"ktelemetryctl: --timeout: expected a duration like "
					"\"30s\", got \"%s\"\n",
					optarg);
				return EXIT_USAGE;
			}
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	for (size_t i = 0; i < KTEL_ARRAY_SIZE(commands); i++) {
		const struct command *cmd = &commands[i];

		if (strcmp(cmd->name, argv[optind]) != 0)
			continue;
		if (cmd->local)
			return cmd->local(&o, argc - optind, argv + optind);
		return run_remote(&o, cmd, argc - optind, argv + optind);
	}
	fprintf(stderr, "ktelemetryctl: unknown command \"%s\"\n", argv[optind]);
	usage(stderr);
	return EXIT_USAGE;
}
