// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ktelemetryctl - drive a running ktelemetryd through its control socket.
 *
 *   ktelemetryctl [--socket PATH] [--config FILE] [--json] [--timeout DURATION]
 *                 COMMAND [ARGS]
 *
 * with the global options before or after the command. The protocol, the
 * commands and the exit codes are in docs/control.md: 0 ok, 1 the daemon
 * answered with an error (or inspect found a problem, or top was given a
 * metric the daemon does not know), 2 bad usage, 3 cannot connect or not
 * allowed to.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/ioctl.h>
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
#include "report.h"
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
	/* The control socket, found once (a config file's warning is said
	 * once, however many requests `top` makes): sock_rc is the exit code
	 * of finding it. */
	bool sock_found;
	int sock_rc;
	char sock[PATH_MAX];
	/* show --by, top --by: the attribution dimension to group by. */
	const char *by;
};

struct command {
	const char *name;
	const char *usage;
	const char *what; /* one line for --help */
	/* Build the request from the command's arguments (argv[0] is the
	 * command); NULL fn: run locally instead of asking the daemon. */
	int (*build)(int argc, char **argv, json_t *req);
	int (*local)(struct opts *o, int argc, char **argv);
	/* The command's own options that take a value, NULL-ended: a global
	 * option of the same name after the command is the command's. */
	const char *const *own;
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

/*
 * control_socket as the JSON of path writes it, for a file that does not
 * validate: a plain string, a leading ${state_dir} or ${run_dir} expanded as
 * the daemon expands it; a JSON object without the key means the daemon's
 * built-in default. NULL (malloc'd text otherwise) when the file is no JSON
 * object, or the value is no string or holds a variable left unexpanded.
 */
static char *raw_control_socket(const char *path, const struct ktel_config_vars *vars)
{
	static const char *const names[] = {"${state_dir}", "${run_dir}"};
	const char *values[] = {vars->state_dir, vars->run_dir};
	json_t *root = json_load_file(path, 0, NULL);
	const json_t *v = json_object_get(root, "control_socket");
	const char *s = json_string_value(v);
	char *out = NULL;

	if (json_is_object(root) && !v)
		s = "/run/ktelemetry/control.sock";
	for (size_t i = 0; s && i < KTEL_ARRAY_SIZE(names); i++)
		if (strncmp(s, names[i], strlen(names[i])) == 0) {
			if (asprintf(&out, "%s%s", values[i], s + strlen(names[i])) < 0)
				out = NULL;
			s = NULL;
		}
	if (s)
		out = strdup(s);
	if (out && (!out[0] || strstr(out, "${"))) {
		free(out);
		out = NULL;
	}
	json_decref(root);
	return out;
}

/*
 * control_socket of a config file; exit code or 0. A file that does not
 * validate (the edit an operator is fixing) still names the daemon's
 * socket, which runs on the file it started with: the commands go on, after
 * one warning with the cause.
 */
static int socket_from_config(const char *path, char *buf, size_t len)
{
	struct ktel_config_errors errs = {0};
	struct ktel_config_vars vars = {.plugin_dir = ""};
	struct ktel_config *cfg = NULL;
	char state[PATH_MAX], run[PATH_MAX], *raw;
	struct ktel_err err = {0};
	int r;

	default_dir(INSTALL_STATE_DIR, state, sizeof(state));
	default_dir(INSTALL_RUN_DIR, run, sizeof(run));
	vars.state_dir = state;
	vars.run_dir = run;
	ktel_sinks_register_schemas();
	r = ktel_config__load_file(path, &vars, &cfg, &errs, &err);
	if (!r) {
		r = copy_socket_path(buf, len, cfg->control_socket, path, EXIT_USAGE);
		ktel_config__free(cfg);
		return r;
	}
	raw = raw_control_socket(path, &vars);
	fprintf(stderr, "ktelemetryctl: warning: %s does not validate: %s", path,
		errs.n ? errs.msgs[0] : err.msg);
	if (errs.n > 1)
		fprintf(stderr, " (and %zu more: ktelemetryd --check-config %s lists them)",
			errs.n - 1, path);
	if (raw)
		fprintf(stderr, "; using its control_socket %s\n", raw);
	else
		fprintf(stderr,
			"; its control_socket is unreadable, using the default %s/control.sock\n",
			run);
	ktel_config_errors__clear(&errs);
	if (raw) {
		r = copy_socket_path(buf, len, raw, path, EXIT_USAGE);
		free(raw);
		return r;
	}
	snprintf(buf, len, "%s/control.sock", run);
	return 0;
}

/* --socket, else $KTELEMETRY_SOCKET, else --config's, else the default's. */
static int find_socket(struct opts *o, char *buf, size_t len)
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

/* find_socket() once; its path in o->sock. */
static int resolve_socket(struct opts *o)
{
	if (!o->sock_found) {
		o->sock_rc = find_socket(o, o->sock, sizeof(o->sock));
		o->sock_found = true;
	}
	return o->sock_rc;
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
static int request(struct opts *o, const json_t *req, json_t **ret)
{
	const char *path = o->sock;
	char *line, *answer;
	json_error_t jerr;
	FILE *f;
	size_t len;
	int fd, r;

	r = resolve_socket(o);
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

/* ---- grouping by attribution (show --by, top --by) ------------------------------- */

static const char *const by_dims[] = {"cgroup", "user", "app", "app_class", "process", NULL};

static bool valid_by(const char *by)
{
	for (const char *const *p = by_dims; *p; p++)
		if (strcmp(*p, by) == 0)
			return true;
	return false;
}

/* A record's events: its histogram's count, else its value. */
static json_int_t events_of(const json_t *rec)
{
	const json_t *h = json_object_get(rec, "histogram");

	return json_integer_value(h ? json_object_get(h, "count") : json_object_get(rec, "value"));
}

/* obj[key] += v[key] for an integer member. */
static void add_int(json_t *obj, const json_t *v, const char *key)
{
	const json_t *a = json_object_get(obj, key), *b = json_object_get(v, key);

	if (json_is_integer(a) && json_is_integer(b))
		json_object_set_new(obj, key,
				    json_integer(json_integer_value(a) + json_integer_value(b)));
}

/* Add rec's values into g (a record of the same metric). */
static void group_add(json_t *g, const json_t *rec)
{
	json_t *gh = json_object_get(g, "histogram");
	const json_t *h = json_object_get(rec, "histogram");

	if (gh && h) {
		json_t *gc = json_object_get(gh, "counts");
		const json_t *c = json_object_get(h, "counts");

		for (size_t k = 0; k < json_array_size(gc) && k < json_array_size(c); k++)
			json_array_set_new(gc, k,
					   json_integer(json_integer_value(json_array_get(gc, k)) +
							json_integer_value(json_array_get(c, k))));
		add_int(gh, h, "count");
		add_int(gh, h, "sum");
		return;
	}
	add_int(g, rec, "value");
	add_int(g, rec, "total");
}

static int by_events_desc(const void *a, const void *b)
{
	json_int_t x = events_of(*(json_t *const *)a), y = events_of(*(json_t *const *)b);

	return x > y ? -1 : x < y;
}

/*
 * The records of a (show's totals or window) summed per value of the
 * attribution dimension by, the other dimensions folded away, the values
 * with the most events first. *ret_seen: some record carried by.
 */
static json_t *group_records(const json_t *a, const char *by, bool *ret_seen)
{
	json_t *groups = json_object(), *out = json_array(), *rec, *g;
	json_t **sorted;
	const char *key;
	size_t i, n = 0;

	json_array_foreach(a, i, rec) {
		key = json_string_value(json_object_get(json_object_get(rec, "dims"), by));
		if (!key)
			continue;
		*ret_seen = true;
		g = json_object_get(groups, key);
		if (g) {
			group_add(g, rec);
			continue;
		}
		g = json_deep_copy(rec);
		json_object_set_new(g, "dims", json_pack("{s:s}", by, key));
		json_object_del(g, "dims_raw");
		json_object_set_new(groups, key, g);
	}
	sorted = calloc(json_object_size(groups) + 1, sizeof(*sorted));
	json_object_foreach(groups, key, g)
		if (sorted)
			sorted[n++] = g;
	if (sorted)
		qsort(sorted, n, sizeof(*sorted), by_events_desc);
	for (i = 0; i < n; i++)
		json_array_append(out, sorted[i]);
	free(sorted);
	json_decref(groups);
	return out;
}

/*
 * A show answer grouped by the attribution dimension by: its totals and
 * window per value (top's ranking). A metric whose records do not carry it
 * (not attributed, or by another kind) makes the answer an error that says
 * so.
 */
static void group_show(json_t *resp, const char *by)
{
	bool seen = false;
	json_t *totals = group_records(json_object_get(resp, "totals"), by, &seen);
	json_t *window = group_records(json_object_get(resp, "window"), by, &seen);
	const char *metric = json_string_value(json_object_get(resp, "metric")) ?: "?";
	char msg[512];

	if (!seen && (json_array_size(json_object_get(resp, "totals")) ||
		      json_array_size(json_object_get(resp, "window")))) {
		snprintf(msg, sizeof(msg),
			 "metric %s is not attributed by %s: its records have no \"%s\" "
			 "dimension (the daemon's config: metrics.%s.attribution.by)",
			 metric, by, by, metric);
		json_object_set_new(resp, "ok", json_false());
		json_object_set_new(resp, "error", json_string(msg));
		json_decref(totals);
		json_decref(window);
		return;
	}
	json_object_set_new(resp, "totals", totals);
	json_object_set_new(resp, "window", window);
	json_object_set_new(resp, "by", json_string(by));
}

/* "--by DIM" or "--by=DIM" at argv[*i]: o->by set, *i past it. 1 when it is
 * not --by, 0 when taken, else EXIT_USAGE (said). */
static int by_option(struct opts *o, int argc, char **argv, int *i)
{
	const char *v;

	if (strcmp(argv[*i], "--by") == 0 && *i + 1 < argc)
		v = argv[++*i];
	else if (strncmp(argv[*i], "--by=", 5) == 0)
		v = argv[*i] + 5;
	else
		return 1;
	if (!valid_by(v)) {
		fprintf(stderr,
			"ktelemetryctl: %s: --by: expected cgroup, user, app, app_class or "
			"process, got \"%s\"\n",
			argv[0], v);
		return EXIT_USAGE;
	}
	o->by = v;
	return 0;
}

/* show NAME [--by DIM]: the daemon's show answer, grouped with --by. */
static int run_show(struct opts *o, int argc, char **argv)
{
	const char *name = NULL;
	json_t *req, *resp = NULL;
	int r;

	for (int i = 1; i < argc; i++) {
		r = by_option(o, argc, argv, &i);
		if (r == 0)
			continue;
		if (r > 1)
			return r;
		/* Anything else is the name, as the daemon will judge it (after
		 * "--", "--json" is one it does not know). */
		if (name) {
			fprintf(stderr, "ktelemetryctl: show needs exactly one metric NAME\n");
			return EXIT_USAGE;
		}
		name = argv[i];
	}
	if (!name) {
		fprintf(stderr, "ktelemetryctl: show needs exactly one metric NAME\n");
		return EXIT_USAGE;
	}
	req = json_pack("{s:s, s:s}", "cmd", "show", "name", name);
	r = request(o, req, &resp);
	json_decref(req);
	if (r)
		return r;
	if (o->by && answer_exit_code(resp) == EXIT_OK)
		group_show(resp, o->by);
	r = answer_exit_code(resp);
	if (o->json) {
		json_dumpf(resp, stdout, JSON_COMPACT);
		fputc('\n', stdout);
	} else if (r == EXIT_OK) {
		ktel_ctl_render(stdout, "show", resp);
	}
	if (r)
		fprintf(stderr, "ktelemetryctl: %s\n",
			json_string_value(json_object_get(resp, "error")) ?: "failed");
	json_decref(resp);
	return r;
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

/*
 * The running daemon's status answer for inspect's current param values,
 * or NULL with the reason in why. No socket file means no daemon, said
 * nowhere: inspect is an offline command first.
 */
static json_t *inspect_status(struct opts *o, char *why, size_t len)
{
	json_t *req, *resp = NULL;
	struct stat st;

	if (resolve_socket(o) || stat(o->sock, &st) || !S_ISSOCK(st.st_mode)) {
		snprintf(why, len, "no daemon (no control socket %s): current values unknown",
			 o->sock);
		return NULL;
	}
	snprintf(why, len, "no daemon answered at %s: current values unknown", o->sock);
	req = json_pack("{s:s}", "cmd", "status");
	if (!req || request(o, req, &resp)) {
		json_decref(req);
		return NULL;
	}
	json_decref(req);
	if (!json_is_true(json_object_get(resp, "ok"))) {
		snprintf(why, len, "the daemon refused status: %s",
			 json_string_value(json_object_get(resp, "error")) ?: "?");
		json_decref(resp);
		return NULL;
	}
	return resp;
}

static int run_inspect(struct opts *o, int argc, char **argv)
{
	struct ktel_targets *t;
	struct ktel_err err;
	json_t *status = NULL;
	bool asked = false;
	char why[PATH_MAX + 200];
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

		/* The daemon is asked once, and only for a plugin with params. */
		if (report && json_array_size(json_object_get(report, "params")) && !asked) {
			status = inspect_status(o, why, sizeof(why));
			asked = true;
		}
		if (report)
			ktel_inspect_current_params(report, status, why);
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
	json_decref(status);
	ktel_targets__free(t);
	return rc;
}

/* Ask the daemon where its stream sink listens. */
static int watch_socket(struct opts *o, char *buf, size_t len)
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

static int run_watch(struct opts *o, int argc, char **argv)
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
		} else if (o->json) {
			printf("%s\n", line);
		} else {
			ktel_ctl_render_stream_line(stdout, line);
		}
		fflush(stdout);
		free(line);
		if (count > 0 && dropped < 0)
			count--;
	}
	fclose(f);
	return EXIT_OK;
}

/* The `list` answer; an exit code on failure, said on stderr. */
static int list_metrics(struct opts *o, json_t **ret_resp)
{
	json_t *req = json_pack("{s:s}", "cmd", "list"), *resp = NULL;
	int r = request(o, req, &resp);

	json_decref(req);
	if (r)
		return r;
	r = answer_exit_code(resp);
	if (r) {
		fprintf(stderr, "ktelemetryctl: list: %s\n",
			json_string_value(json_object_get(resp, "error")) ?: "failed");
		json_decref(resp);
		return r;
	}
	*ret_resp = resp;
	return 0;
}

/* The metric of that name in a `list` answer, else NULL. */
static const json_t *listed(const json_t *list, const char *name)
{
	size_t i;
	json_t *m;

	json_array_foreach(json_object_get(list, "metrics"), i, m) {
		const char *n = json_string_value(json_object_get(m, "name"));

		if (n && strcmp(n, name) == 0)
			return m;
	}
	return NULL;
}

/*
 * The metrics top shows, from `list`: the names asked for, else every
 * enabled accumulator metric; and the shortest and longest pull interval
 * among them (0 when none has one).
 */
static int top_metrics(struct opts *o, const json_t *asked, json_t **ret_names,
		       long long *ret_min_ms, long long *ret_max_ms)
{
	json_t *resp = NULL, *names, *m;
	long long lo = 0, hi = 0;
	size_t i;
	int r = list_metrics(o, &resp);

	if (r)
		return r;
	names = json_array();
	json_array_foreach(json_object_get(resp, "metrics"), i, m) {
		const char *model = json_string_value(json_object_get(m, "model"));
		const json_t *name = json_object_get(m, "name");
		long long ms = json_integer_value(json_object_get(m, "interval_ms"));
		bool want = false;
		size_t j;
		json_t *a;

		if (json_array_size(asked)) {
			json_array_foreach(asked, j, a)
				want = want || json_equal(a, (json_t *)name);
		} else {
			want = json_is_true(json_object_get(m, "enabled")) && model &&
			       strcmp(model, "accumulator") == 0;
		}
		if (!want || !json_is_string(name))
			continue;
		json_array_append(names, (json_t *)name);
		if (ms > 0 && json_is_true(json_object_get(m, "enabled"))) {
			lo = !lo || ms < lo ? ms : lo;
			hi = ms > hi ? ms : hi;
		}
	}
	json_decref(resp);
	*ret_names = names;
	*ret_min_ms = lo;
	*ret_max_ms = hi;
	return 0;
}

/* The `show` answer of every metric in names, into one array. */
static int top_shows(struct opts *o, const json_t *names, json_t **ret_shows)
{
	json_t *name, *all = json_array();
	size_t i;

	json_array_foreach(names, i, name) {
		json_t *req = json_pack("{s:s, s:O}", "cmd", "show", "name", name), *resp = NULL;
		int r = request(o, req, &resp);

		json_decref(req);
		if (r) {
			json_decref(all);
			return r;
		}
		if (o->by && answer_exit_code(resp) == EXIT_OK)
			group_show(resp, o->by);
		json_array_append_new(all, resp);
	}
	*ret_shows = all;
	return 0;
}

/*
 * Keep the names `list` knows, say each unknown one on stderr; exit 1 when
 * any was unknown (the known ones are still shown), 0 when none.
 */
static int top_known(struct opts *o, json_t *names)
{
	json_t *list = NULL;
	int r = list_metrics(o, &list), rc = EXIT_OK;

	if (r)
		return r;
	for (size_t i = 0; i < json_array_size(names);) {
		const char *name = json_string_value(json_array_get(names, i));

		if (listed(list, name)) {
			i++;
			continue;
		}
		fprintf(stderr,
			"ktelemetryctl: top: no metric named \"%s\" (\"ktelemetryctl list\" "
			"shows them)\n",
			name);
		json_array_remove(names, i);
		rc = EXIT_DAEMON_ERROR;
	}
	json_decref(list);
	return rc;
}

/*
 * The screen top fits: the terminal's size when stdout is one, else $LINES
 * and $COLUMNS, else 80x24.
 */
static void screen_size(bool tty, int *ret_rows, int *ret_cols)
{
	struct winsize ws;
	const char *lines = getenv("LINES"), *columns = getenv("COLUMNS");
	int rows = 24, cols = 80;

	if (tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
		rows = ws.ws_row;
		cols = ws.ws_col;
	} else {
		if (lines && atoi(lines) > 0)
			rows = atoi(lines);
		if (columns && atoi(columns) > 0)
			cols = atoi(columns);
	}
	*ret_rows = rows;
	*ret_cols = cols;
}

/*
 * How long top sleeps before it asks again, in ms. A fixed --interval is
 * that; else until just after the next pull the daemon's timer makes (its
 * newest pull plus the shortest interval, and a second for the pull and the
 * whole seconds of its time stamp), asking again every second while that
 * pull is late, and at least once per longest interval.
 */
static long long top_sleep_ms(long long fixed_ms, long long newest, long long min_ms,
			      long long max_ms, long long now_ms)
{
	long long due;

	if (fixed_ms)
		return fixed_ms;
	if (!min_ms)
		return 1000;
	if (!newest)
		return min_ms;
	due = newest * 1000 + min_ms + 1200 - now_ms;
	if (due < 1000)
		return 1000;
	return due > max_ms ? max_ms : due;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * The live view (like top): one row per key of every enabled accumulator
 * metric (or of the metrics named), fitted to the terminal, redrawn after
 * each pull of the daemon (or every --interval). SIGINT, SIGTERM and SIGHUP
 * end it with exit 0 between two screens; SIGWINCH redraws it at the new
 * size.
 */
static int run_top(struct opts *o, int argc, char **argv)
{
	uint64_t interval_ms = 0;
	long long count = -1, shown_pull = -1;
	json_t *names = json_array();
	bool tty = isatty(STDOUT_FILENO) && !o->json, named, drawn = false;
	sigset_t quit, old;
	int r = 0, unknown, sig = 0;

	for (int i = 1; i < argc; i++) {
		r = by_option(o, argc, argv, &i);
		if (r > 1) {
			json_decref(names);
			return r;
		}
		if (r == 0)
			continue;
		r = 0;
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
	named = json_array_size(names) > 0;
	/* A name the daemon does not know is a mistake to say, not a screen
	 * that silently shows an error forever. */
	unknown = named ? top_known(o, names) : EXIT_OK;
	if (unknown > EXIT_DAEMON_ERROR || (named && !json_array_size(names))) {
		json_decref(names);
		return unknown;
	}
	/* The signals that end the view wait, blocked, for the sleep between
	 * two screens: a request is never cut in half, and Ctrl-C is a clean
	 * exit 0 rather than a death by signal. */
	sigemptyset(&quit);
	sigaddset(&quit, SIGINT);
	sigaddset(&quit, SIGTERM);
	sigaddset(&quit, SIGHUP);
	sigaddset(&quit, SIGWINCH);
	sigprocmask(SIG_BLOCK, &quit, &old);
	/* Pull once first, so the first screen shows data, not "not pulled". */
	{
		json_t *req = json_pack("{s:s}", "cmd", "pull"), *resp = NULL;

		r = request(o, req, &resp);
		json_decref(req);
		json_decref(resp);
	}
	while (count != 0 && !r) {
		json_t *shown = NULL, *shows = NULL;
		long long lo = 0, hi = 0, newest, wait_ms;
		struct timespec ts;

		r = top_metrics(o, names, &shown, &lo, &hi) ?: top_shows(o, shown, &shows);
		json_decref(shown);
		if (r)
			break;
		newest = ktel_ctl_top_newest_pull(shows);
		/* A screen per pull (or per --interval, or a new size): the
		 * same numbers again would claim a freshness they lack. */
		if (!drawn || interval_ms || newest != shown_pull || sig == SIGWINCH) {
			if (o->json) {
				char stamp[32];
				time_t now = time(NULL);
				json_t *screen;

				strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
				screen = json_pack("{s:s, s:I, s:O}", "time", stamp, "interval_ms",
						   (json_int_t)lo, "metrics", shows);
				json_dumpf(screen, stdout, JSON_COMPACT);
				fputc('\n', stdout);
				json_decref(screen);
			} else {
				struct ktel_ctl_top t = {.shows = shows,
							 .interval_min_ms = lo,
							 .interval_max_ms = hi,
							 .redraw_ms = (long long)interval_ms,
							 .now = (long long)time(NULL)};

				screen_size(tty, &t.rows, &t.cols);
				/* A terminal shows each screen in place of the last,
				 * anything else gets them one after the other. */
				if (tty)
					fputs("\033[H\033[2J", stdout);
				ktel_ctl_render_top(stdout, &t);
				if (!tty)
					fputs("\n\n", stdout);
			}
			fflush(stdout);
			drawn = true;
			shown_pull = newest;
			if (count > 0)
				count--;
		}
		json_decref(shows);
		if (!count)
			break;
		wait_ms = top_sleep_ms((long long)interval_ms, newest, lo, hi, now_ms());
		ts.tv_sec = wait_ms / 1000;
		ts.tv_nsec = wait_ms % 1000 * 1000000;
		sig = sigtimedwait(&quit, NULL, &ts);
		if (sig > 0 && sig != SIGWINCH)
			break;
	}
	/* The cursor ends below the last screen, for the shell's prompt. */
	if (tty && drawn)
		fputc('\n', stdout);
	fflush(stdout);
	sigprocmask(SIG_SETMASK, &old, NULL);
	json_decref(names);
	return r ? r : unknown;
}

/*
 * The metrics enabled with a lease (enable --for), from `list`: name,
 * lease and the time left (lease_left_ms of the answer, when the daemon
 * reports it).
 */
static int run_leases(struct opts *o, int argc, char **argv)
{
	json_t *list = NULL, *out, *m;
	size_t i;
	int r;

	if (argc != 1) {
		fprintf(stderr, "ktelemetryctl: leases takes no arguments\n");
		return EXIT_USAGE;
	}
	r = list_metrics(o, &list);
	if (r)
		return r;
	out = json_pack("{s:b, s:[]}", "ok", true, "leases");
	json_array_foreach(json_object_get(list, "metrics"), i, m) {
		json_t *lease = json_object_get(m, "lease_ms");
		json_t *left = json_object_get(m, "lease_left_ms");

		if (!json_is_true(json_object_get(m, "enabled")) || !json_is_integer(lease) ||
		    json_integer_value(lease) <= 0)
			continue;
		json_array_append_new(json_object_get(out, "leases"),
				      json_pack("{s:O, s:O, s:O}", "name",
						json_object_get(m, "name"), "lease_ms", lease,
						"left_ms",
						json_is_integer(left) ? left : json_null()));
	}
	if (o->json) {
		json_dumpf(out, stdout, JSON_COMPACT);
		fputc('\n', stdout);
	} else {
		ktel_ctl_render(stdout, "leases", out);
	}
	json_decref(out);
	json_decref(list);
	return EXIT_OK;
}

/* The JSON log drawn as an HTML page (report.c). */
static int run_report(struct opts *o, int argc, char **argv)
{
	return ktel_report_main(argc, argv, o->json);
}

static const char *const enable_own[] = {"--for", NULL};
static const char *const watch_own[] = {"--socket", "--count", NULL};
static const char *const top_own[] = {"--interval", "--count", "--by", NULL};
static const char *const show_own[] = {"--by", NULL};
static const char *const report_own[] = {"--output", "-o", "--metric", "--since", "--until", NULL};

/* Each command has a "### `name`" section in docs/control.md (a unit test
 * holds the two together through --help). */
static const struct command commands[] = {
	{"status", "status", "daemon, plugins, programs, last pulls, sinks", build_none, NULL,
	 NULL},
	{"list", "list", "metrics as an aligned table", build_none, NULL, NULL},
	{"enable", "enable NAME [--for DURATION]", "attach; --for 2s, --for 10m: a lease",
	 build_enable, NULL, enable_own},
	{"disable", "disable NAME", "pull a last time, detach", build_name, NULL, NULL},
	{"pull", "pull [NAME]", "pull now, print one line per record", build_opt_name, NULL, NULL},
	{"show", "show NAME [--by DIM]", "cumulative histograms and the last window, as bars", NULL,
	 run_show, show_own},
	{"reload", "reload", "re-read the daemon's config file", build_none, NULL, NULL},
	{"reopen", "reopen", "file sinks reopen their path (logrotate)", build_none, NULL, NULL},
	{"help", "help", "the daemon's command list", build_none, NULL, NULL},
	{"leases", "leases", "metrics enabled with a lease, and the time left", NULL, run_leases,
	 NULL},
	{"watch", "watch [--socket PATH] [--count N]", "print the stream sink's records", NULL,
	 run_watch, watch_own},
	{"inspect", "inspect PLUGIN.so...", "offline: how the decoder reads a plugin", NULL,
	 run_inspect, NULL},
	{"top", "top [--interval DURATION] [--count N] [--by DIM] [NAME...]",
	 "live view: a row per key, fitted to the terminal", NULL, run_top, top_own},
	{"report", "report FILE... [-o FILE] [--metric PATTERN] [--since WHEN] [--until WHEN]",
	 "offline: the JSON log as an HTML page of heatmaps", NULL, run_report, report_own},
};

/* The global options, as --help lists them and main() reads them. */
static const struct global {
	const char *name, *short_name;
	const char *value; /* its placeholder, NULL for a flag */
	const char *help;
} globals[] = {
	{"--socket", "-s", "PATH",
	 "control socket (default: $KTELEMETRY_SOCKET, else the\n"
	 "                     config's control_socket, else <run_dir>/control.sock)"},
	{"--config", "-c", "FILE",
	 "read control_socket from this daemon config (one that does\n"
	 "                     not validate: a warning, and its socket all the same)"},
	{"--json", "-j", NULL, "print JSON: one object per answer, screen or record"},
	{"--timeout", "-t", "DURATION", "give up waiting for an answer (default 30s)"},
	{"--help", "-h", NULL, "this text"},
};

static void usage(FILE *out)
{
	fprintf(out, "usage: ktelemetryctl [OPTIONS] COMMAND [ARGS] [OPTIONS]\n\ncommands:\n");
	for (size_t i = 0; i < KTEL_ARRAY_SIZE(commands); i++)
		fprintf(out, "  %-33s%s%s\n", commands[i].usage,
			strlen(commands[i].usage) > 33 ? "\n                                    "
						       : " ",
			commands[i].what);
	fprintf(out, "\noptions (before or after the command):\n");
	for (size_t i = 0; i < KTEL_ARRAY_SIZE(globals); i++) {
		char opt[32];

		snprintf(opt, sizeof(opt), "%s%s%s", globals[i].name, globals[i].value ? " " : "",
			 globals[i].value ?: "");
		fprintf(out, "  %-18s %s\n", opt, globals[i].help);
	}
	fprintf(out, "  After the command, its own option of the same name wins (watch "
		     "--socket is\n  the stream's socket); \"--\" ends the options.\n");
	fprintf(out, "\nexit status: 0 ok, 1 the daemon answered an error (or an unknown "
		     "metric), 2 usage,\n3 cannot connect or permission denied\n");
}

static int run_remote(struct opts *o, const struct command *cmd, int argc, char **argv)
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
		json_array_foreach(errs, i, e)
			fprintf(stderr, "  %s\n", json_string_value(e));
	}
	json_decref(resp);
	return r;
}

/* Does cmd have an option named like arg ("--for" or "--for=2s")? */
static bool owns(const struct command *cmd, const char *arg, bool *ret_inline)
{
	for (const char *const *p = cmd->own; p && *p; p++) {
		size_t n = strlen(*p);

		if (strncmp(arg, *p, n) == 0 && (arg[n] == '\0' || arg[n] == '=')) {
			*ret_inline = arg[n] == '=';
			return true;
		}
	}
	return false;
}

/* Apply global option g with its value (NULL for a flag); exit code or 0. */
static int set_global(struct opts *o, const struct global *g, const char *value)
{
	if (strcmp(g->name, "--socket") == 0) {
		o->socket = value;
	} else if (strcmp(g->name, "--config") == 0) {
		o->config = value;
	} else if (strcmp(g->name, "--json") == 0) {
		o->json = true;
	} else if (strcmp(g->name, "--timeout") == 0) {
		if (ktel_parse_duration(value, &o->timeout_ms)) {
			fprintf(stderr,
				"ktelemetryctl: --timeout: expected a duration like \"30s\", got "
				"\"%s\"\n",
				value);
			return EXIT_USAGE;
		}
	} else {
		usage(stdout);
		return -1;
	}
	return 0;
}

/*
 * argv[*i] as a global option ("--json", "--socket PATH", "--socket=PATH",
 * "-s PATH", "-sPATH"): applied, *i moved past its value. Returns 1 when it
 * is none, 0 when applied, -1 after --help, else an exit code.
 */
static int global_option(struct opts *o, int argc, char **argv, int *i)
{
	const char *arg = argv[*i];

	for (size_t k = 0; k < KTEL_ARRAY_SIZE(globals); k++) {
		const struct global *g = &globals[k];
		size_t n = strlen(g->name);
		const char *value = NULL;

		if (strcmp(arg, g->name) == 0 || strcmp(arg, g->short_name) == 0) {
			if (g->value && *i + 1 >= argc) {
				fprintf(stderr, "ktelemetryctl: %s needs a value\n", g->name);
				return EXIT_USAGE;
			}
			if (g->value)
				value = argv[++*i];
		} else if (g->value && strncmp(arg, g->name, n) == 0 && arg[n] == '=') {
			value = arg + n + 1;
		} else if (g->value && strncmp(arg, g->short_name, 2) == 0 && arg[2]) {
			value = arg + 2;
		} else {
			continue;
		}
		return set_global(o, g, value);
	}
	return 1;
}

int main(int argc, char **argv)
{
	struct opts o = {.timeout_ms = 30000};
	const struct command *cmd = NULL;
	char **args = calloc((size_t)argc + 1, sizeof(*args));
	int n = 0, r = EXIT_USAGE;
	bool rest = false;

	if (!args)
		return EXIT_USAGE;
	/*
	 * Global options may come before or after the command; after it, an
	 * option the command has itself is the command's (watch --socket),
	 * and "--" ends the global options.
	 */
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		bool in = false;

		if (rest || (cmd && arg[0] != '-')) {
			args[n++] = argv[i];
			continue;
		}
		if (cmd && strcmp(arg, "--") == 0) {
			rest = true;
			continue;
		}
		if (cmd && owns(cmd, arg, &in)) {
			args[n++] = argv[i];
			if (!in && i + 1 < argc)
				args[n++] = argv[++i];
			continue;
		}
		r = global_option(&o, argc, argv, &i);
		if (r < 0 || r > 1) {
			r = r < 0 ? EXIT_OK : r;
			goto out;
		}
		if (r == 0)
			continue;
		if (cmd) {
			args[n++] = argv[i]; /* the command's to refuse or take */
			continue;
		}
		if (arg[0] == '-') {
			fprintf(stderr, "ktelemetryctl: unknown option \"%s\"\n", arg);
			usage(stderr);
			r = EXIT_USAGE;
			goto out;
		}
		for (size_t k = 0; k < KTEL_ARRAY_SIZE(commands) && !cmd; k++)
			if (strcmp(commands[k].name, arg) == 0)
				cmd = &commands[k];
		if (!cmd) {
			fprintf(stderr, "ktelemetryctl: unknown command \"%s\"\n", arg);
			usage(stderr);
			r = EXIT_USAGE;
			goto out;
		}
		args[n++] = argv[i];
	}
	if (!cmd) {
		usage(stderr);
		r = EXIT_USAGE;
		goto out;
	}
	if (cmd->local)
		r = cmd->local(&o, n, args);
	else
		r = run_remote(&o, cmd, n, args);
out:
	free(args);
	return r;
}
