// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The ktelemetryctl binary against the fake daemon of tests/control_fake.h
 * behind the real control server, on an unprivileged unix socket (the
 * peer's group is the socket's): no kernel, no root, no plugins.
 *
 * - a --config file that does not validate still finds the socket (its
 *   control_socket, else the default), says so once on stderr, and the
 *   command runs;
 * - every command prints text by default and JSON with --json (reopen,
 *   leases, help, top one object per screen, watch raw lines);
 * - top refuses a metric the daemon does not know (exit 1), shows the
 *   known ones of a mix;
 * - global options after the command, except a command's own option of the
 *   same name (watch --socket);
 * - leases: the metrics enabled with a lease, as a table and as JSON;
 * - docs/control.md has a section for every command of --help's table, and
 *   names every global option, and nothing else.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

#include "control.h"
#include "control_fake.h"
#include "ktel_test.h"

#define CTL_BIN KTEL_BINARY_DIR "/tools/ktelemetryctl"

struct rig {
	char dir[256];
	char sock[300];
	struct ctl_fake fake;
	uv_loop_t loop;
	uv_async_t stop;
	struct ktel_control *ctl;
	pthread_t thread;
	int runs;
	char *out, *err; /* of the last run */
};

static void on_stop(uv_async_t *h)
{
	struct rig *r = h->data;

	ktel_control__close(r->ctl);
	uv_close((uv_handle_t *)h, NULL);
}

static void *loop_thread(void *arg)
{
	struct rig *r = arg;

	uv_run(&r->loop, UV_RUN_DEFAULT);
	return NULL;
}

/* The fake daemon's control server on a loop thread. */
static void rig_start(struct rig *r, const char *name)
{
	struct ktel_err err = {0};

	memset(r, 0, sizeof(*r));
	mkdir(KTEL_BINARY_DIR "/test-tmp", 0755);
	snprintf(r->dir, sizeof(r->dir), "%s/test-tmp/%s-%d", KTEL_BINARY_DIR, name, getpid());
	ktel_test_rm_rf(r->dir);
	assert_int_equal(mkdir(r->dir, 0755), 0);
	snprintf(r->sock, sizeof(r->sock), "%s/c.sock", r->dir);
	ctl_fake_init(&r->fake);
	uv_loop_init(&r->loop);
	if (ktel_control__new(&r->loop, &ctl_fake_ops, &r->fake, r->sock, getgid(), &r->ctl, &err))
		fail_msg("%s", err.msg);
	uv_async_init(&r->loop, &r->stop, on_stop);
	r->stop.data = r;
	assert_int_equal(pthread_create(&r->thread, NULL, loop_thread, r), 0);
	/* A socket named by the environment would win over --config. */
	unsetenv("KTELEMETRY_SOCKET");
}

static void rig_stop(struct rig *r)
{
	uv_async_send(&r->stop);
	pthread_join(r->thread, NULL);
	assert_int_equal(uv_loop_close(&r->loop), 0);
	free(r->out);
	free(r->err);
	ktel_test_rm_rf(r->dir);
}

/* Run ktelemetryctl with args (NULL-ended): its exit status, -1 when it hung;
 * stdout and stderr in r->out and r->err. */
static int ctl(struct rig *r, ...)
{
	const char *argv[32] = {CTL_BIN};
	char out[400], errp[400];
	size_t n = 1;
	va_list ap;

	va_start(ap, r);
	for (const char *a; n < 31 && (a = va_arg(ap, const char *));)
		argv[n++] = a;
	va_end(ap);
	snprintf(out, sizeof(out), "%s/ctl-%d.out", r->dir, r->runs);
	snprintf(errp, sizeof(errp), "%s/ctl-%d.err", r->dir, r->runs++);
	free(r->out);
	free(r->err);
	return ktel_test_run_captured(argv, out, errp, -1, 30, &r->out, &r->err);
}

static int count_of(const char *s, const char *what)
{
	int n = 0;

	for (; s && (s = strstr(s, what)); s += strlen(what))
		n++;
	return n;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* The whole of s is one JSON object per line: how many. */
static int json_lines(const char *s)
{
	int n = 0;

	for (const char *p = s; *p;) {
		const char *nl = strchr(p, '\n');
		json_t *j;

		assert_non_null(nl);
		j = json_loadb(p, (size_t)(nl - p), 0, NULL);
		if (!json_is_object(j))
			fail_msg("not a JSON object: %.*s", (int)(nl - p), p);
		json_decref(j);
		n++;
		p = nl + 1;
	}
	return n;
}

/* ---- a config file that does not validate ---------------------------------- */

/* cmd with --config cfg went to the default socket: not the fake's. */
static void assert_default_socket_used(struct rig *r, const char *cfg, const char *cmd)
{
	int rc = ctl(r, "--config", cfg, cmd, NULL);

	if (rc != 3 && rc != 0)
		fail_msg("%s with a broken --config: exit %d, err %s", cmd, rc, r->err);
	if (rc == 3 && !strstr(r->err, "control.sock"))
		fail_msg("%s: the refusal does not name the default socket: %s", cmd, r->err);
	assert_null(strstr(r->err, r->sock));
}

static void test_bad_config_still_finds_socket(void **state)
{
	struct rig r;
	char cfg[400], text[800];

	rig_start(&r, "ctl-badcfg");
	snprintf(cfg, sizeof(cfg), "%s/bad.json", r.dir);
	/* Valid JSON, one unknown key: the daemon would refuse the file. */
	snprintf(text, sizeof(text),
		 "{\"control_socket\": \"%s\", \"no_such_key\": 1, \"sinks\": 5}\n", r.sock);
	write_file(cfg, text);
	if (ctl(&r, "--config", cfg, "status", NULL) != 0)
		fail_msg("status: out %s err %s", r.out, r.err);
	assert_non_null(strstr(r.out, "daemon"));
	assert_int_equal(count_of(r.err, "does not validate"), 1);
	assert_non_null(strstr(r.err, "more: ktelemetryd --check-config"));
	assert_non_null(strstr(r.err, r.sock));
	/* Many requests (top pulls, lists, shows), one warning. */
	assert_int_equal(ctl(&r, "--config", cfg, "top", "--count", "2", "--interval", "10ms",
			     NULL),
			 0);
	assert_int_equal(count_of(r.err, "does not validate"), 1);
	assert_int_equal(count_of(r.out, "\ncompaction_duration "), 2);
	/* ${state_dir} the client cannot know as the daemon does: the default,
	 * said so. The default is not the fake's socket: the command runs
	 * against whatever listens there (usually nothing: exit 3; a daemon
	 * of tools/run: 0), never refused as a usage error. */
	write_file(cfg, "{\"control_socket\": \"/x/${nope}/c.sock\", \"bad\": 1}\n");
	assert_default_socket_used(&r, cfg, "status");
	assert_non_null(strstr(r.err, "its control_socket is unreadable, using the default"));
	/* Not JSON at all: the same. */
	write_file(cfg, "{\"control_socket\": \n");
	assert_default_socket_used(&r, cfg, "list");
	assert_int_equal(count_of(r.err, "does not validate"), 1);
	assert_non_null(strstr(r.err, "using the default"));
	rig_stop(&r);
}

/* ---- text by default, JSON with --json -------------------------------------- */

static void test_reopen_text_and_json(void **state)
{
	struct rig r;
	json_t *j;

	rig_start(&r, "ctl-reopen");
	assert_int_equal(ctl(&r, "--socket", r.sock, "reopen", NULL), 0);
	assert_string_equal(r.out, "reopen: 1 sink asked to reopen its file\n");
	assert_int_equal(ctl(&r, "--socket", r.sock, "reopen", "--json", NULL), 0);
	j = json_loads(r.out, 0, NULL);
	assert_true(json_is_true(json_object_get(j, "ok")));
	assert_int_equal(json_integer_value(json_object_get(j, "sinks")), 2);
	json_decref(j);
	rig_stop(&r);
}

/* status's attribution, which --json carries, in the text form too; none
 * before a metric attributes. */
static void test_status_attribution_text(void **state)
{
	struct rig r;
	json_t *j;

	rig_start(&r, "ctl-attr");
	assert_int_equal(ctl(&r, "--socket", r.sock, "status", NULL), 0);
	assert_null(strstr(r.out, "attribution"));
	r.fake.attributes = true;
	assert_int_equal(ctl(&r, "--socket", r.sock, "status", NULL), 0);
	assert_non_null(strstr(r.out, "\nattribution\n  naming walk (walks of cgroupfs alone): "
				      "cgroup events: no BTF for cgroup_mkdir\n"));
	assert_non_null(strstr(r.out, "  412 cgroup names cached, 7 walks, 3 misses, 0 truncated; "
				      "10007 cgroups released (0 at their release event)\n"));
	assert_non_null(
		strstr(r.out,
		       "  cgroup events: 0 taken, 0 lost, 0 malformed, 2 with a cut path\n"));
	assert_int_equal(ctl(&r, "--socket", r.sock, "status", "--json", NULL), 0);
	j = json_loads(r.out, 0, NULL);
	assert_string_equal(json_string_value(
				    json_object_get(json_object_get(j, "attribution"), "naming")),
			    "walk");
	json_decref(j);
	rig_stop(&r);
}

static void test_json_on_every_command(void **state)
{
	struct rig r;

	rig_start(&r, "ctl-json");
	assert_int_equal(ctl(&r, "--socket", r.sock, "help", NULL), 0);
	assert_true(r.out[0] != '{');
	assert_non_null(strstr(r.out, "status"));
	assert_int_equal(ctl(&r, "--socket", r.sock, "help", "--json", NULL), 0);
	assert_int_equal(json_lines(r.out), 1);
	/* top: one object per screen. */
	assert_int_equal(ctl(&r, "--json", "--socket", r.sock, "top", "--count", "3", "--interval",
			     "10ms", NULL),
			 0);
	assert_int_equal(json_lines(r.out), 3);
	assert_int_equal(count_of(r.out, "\"metrics\":[{\"ok\":true"), 3);
	assert_null(strstr(r.out, "\033["));
	rig_stop(&r);
}

/* A stream sink's socket serving two lines then closing. */
struct line_server {
	int fd;
};

static void *serve_lines(void *arg)
{
	static const char lines[] =
		"{\"metric\":\"m\",\"type\":\"counter\",\"value\":3,\"total\":7}\nnot json\n";
	struct line_server *s = arg;
	int c = accept(s->fd, NULL, NULL);

	if (c >= 0) {
		if (write(c, lines, sizeof(lines) - 1) < 0)
			perror("write");
		close(c);
	}
	return NULL;
}

static void test_watch_text_and_json(void **state)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct line_server s;
	struct rig r;
	pthread_t t;

	rig_start(&r, "ctl-watch");
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/stream.sock", r.dir);
	s.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(s.fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(s.fd, 2), 0);
	pthread_create(&t, NULL, serve_lines, &s);
	/* watch --socket is the stream's socket, even after the command. */
	assert_int_equal(ctl(&r, "watch", "--socket", sa.sun_path, NULL), 0);
	pthread_join(t, NULL);
	assert_string_equal(r.out, "m[(all)]: 3 (total 7)\nnot json\n");
	pthread_create(&t, NULL, serve_lines, &s);
	assert_int_equal(ctl(&r, "watch", "--json", "--socket", sa.sun_path, NULL), 0);
	pthread_join(t, NULL);
	assert_string_equal(r.out, "{\"metric\":\"m\",\"type\":\"counter\",\"value\":3,"
				   "\"total\":7}\nnot json\n");
	close(s.fd);
	/* --socket before the command is the control socket, which watch
	 * asks where the stream is: the fake has none. */
	assert_int_equal(ctl(&r, "--socket", r.sock, "watch", "--count", "1", NULL), 1);
	assert_non_null(strstr(r.err, "no sink of type \"stream\""));
	rig_stop(&r);
}

/* ---- top and unknown metrics ------------------------------------------------ */

static void test_top_unknown_metric(void **state)
{
	struct rig r;

	rig_start(&r, "ctl-top");
	assert_int_equal(ctl(&r, "--socket", r.sock, "top", "--count", "1", "no_such_metric", NULL),
			 1);
	assert_non_null(strstr(r.err, "no metric named \"no_such_metric\""));
	assert_string_equal(r.out, "");
	/* A mix: the known one is shown, the exit says one was not. */
	assert_int_equal(ctl(&r, "--socket", r.sock, "top", "--count", "1", "runq_latency",
			     "no_such_metric", NULL),
			 1);
	assert_non_null(strstr(r.out, "\nrunq_latency "));
	assert_null(strstr(r.out, "no_such_metric"));
	assert_non_null(strstr(r.err, "no metric named \"no_such_metric\""));
	assert_int_equal(ctl(&r, "--socket", r.sock, "top", "--count", "1", "runq_latency", NULL),
			 0);
	rig_stop(&r);
}

/* ---- options in any position ------------------------------------------------ */

static void test_global_options_anywhere(void **state)
{
	char arg[400];
	struct rig r;
	json_t *j;

	rig_start(&r, "ctl-opts");
	assert_int_equal(ctl(&r, "status", "--json", "--socket", r.sock, NULL), 0);
	j = json_loads(r.out, 0, NULL);
	assert_true(json_is_true(json_object_get(j, "ok")));
	json_decref(j);
	snprintf(arg, sizeof(arg), "--socket=%s", r.sock);
	assert_int_equal(ctl(&r, "list", "--timeout", "5s", arg, NULL), 0);
	assert_non_null(strstr(r.out, "runq_latency"));
	assert_int_equal(ctl(&r, "enable", "runq_latency", "--socket", r.sock, "--for", "2m",
			     "--json", NULL),
			 0);
	assert_int_equal(r.fake.last_lease_ms, 120000);
	assert_non_null(strstr(r.out, "\"lease_ms\":120000"));
	assert_int_equal(ctl(&r, "-s", r.sock, "show", "runq_latency", "-j", NULL), 0);
	assert_true(r.out[0] == '{');
	/* --by groups in the client: an answer with no records stays empty;
	 * a kind of attribution that does not exist is a usage error. */
	assert_int_equal(ctl(&r, "-s", r.sock, "show", "runq_latency", "--by", "cgroup", "-j",
			     NULL),
			 0);
	assert_non_null(strstr(r.out, "\"by\":\"cgroup\""));
	assert_int_equal(ctl(&r, "-s", r.sock, "show", "--by=pod", "runq_latency", NULL), 2);
	assert_non_null(strstr(r.err, "--by: expected cgroup, user, app, app_class or process"));
	assert_int_equal(ctl(&r, "-s", r.sock, "top", "--count", "1", "--by", "pod", NULL), 2);
	/* "--" ends the global options: --json is then show's, refused. */
	assert_int_equal(ctl(&r, "--socket", r.sock, "show", "--", "--json", NULL), 1);
	assert_int_equal(ctl(&r, "--socket", r.sock, "status", "--timeout", "abc", NULL), 2);
	assert_non_null(strstr(r.err, "--timeout: expected a duration"));
	assert_int_equal(ctl(&r, "status", "--help", NULL), 0);
	assert_non_null(strstr(r.out, "usage: ktelemetryctl"));
	assert_int_equal(ctl(&r, "--socket", r.sock, "status", "--bogus", NULL), 2);
	rig_stop(&r);
}

/* ---- leases --------------------------------------------------------------------- */

static void test_leases(void **state)
{
	struct rig r;
	json_t *j, *l;

	rig_start(&r, "ctl-leases");
	assert_int_equal(ctl(&r, "--socket", r.sock, "leases", NULL), 0);
	assert_non_null(strstr(r.out, "no metric is enabled with a lease"));
	assert_int_equal(ctl(&r, "--socket", r.sock, "enable", "runq_latency", "--for", "1h", NULL),
			 0);
	assert_int_equal(ctl(&r, "--socket", r.sock, "leases", NULL), 0);
	assert_non_null(strstr(r.out, "NAME"));
	assert_non_null(strstr(r.out, "LEFT"));
	assert_non_null(strstr(r.out, "runq_latency"));
	assert_non_null(strstr(r.out, "1h00m00s"));
	/* compaction_duration is enabled without a lease: not listed. */
	assert_null(strstr(r.out, "compaction_duration"));
	assert_int_equal(ctl(&r, "leases", "--json", "--socket", r.sock, NULL), 0);
	j = json_loads(r.out, 0, NULL);
	assert_int_equal(json_array_size(json_object_get(j, "leases")), 1);
	l = json_array_get(json_object_get(j, "leases"), 0);
	assert_string_equal(json_string_value(json_object_get(l, "name")), "runq_latency");
	assert_int_equal(json_integer_value(json_object_get(l, "lease_ms")), 3600000);
	json_decref(j);
	assert_int_equal(ctl(&r, "--socket", r.sock, "leases", "extra", NULL), 2);
	rig_stop(&r);
}

/* ---- docs/control.md against --help ---------------------------------------------- */

/* Is name in the NULL-ended list? */
static bool in_list(char *const *list, const char *name)
{
	for (; *list; list++)
		if (strcmp(*list, name) == 0)
			return true;
	return false;
}

static void test_docs_match_help(void **state)
{
	char *cmds[64] = {0}, *opts[16] = {0}, *doc_opts[16] = {0}, line[512], *save = NULL;
	size_t n_cmds = 0, n_opts = 0, n_doc_opts = 0, documented = 0;
	enum {
		NONE,
		COMMANDS,
		OPTIONS
	} section = NONE;
	bool in_globals = false;
	struct rig r;
	FILE *f;

	rig_start(&r, "ctl-docs");
	assert_int_equal(ctl(&r, "--help", NULL), 0);
	for (char *l = strtok_r(r.out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char word[64];

		if (strcmp(l, "commands:") == 0)
			section = COMMANDS;
		else if (strncmp(l, "options", 7) == 0)
			section = OPTIONS;
		else if (l[0] != ' ')
			section = NONE;
		else if (section == COMMANDS && l[2] != ' ' && sscanf(l, " %63s", word) == 1)
			cmds[n_cmds++] = strdup(word);
		else if (section == OPTIONS && strncmp(l, "  --", 4) == 0 &&
			 sscanf(l, " %63s", word) == 1)
			opts[n_opts++] = strdup(word);
		assert_true(n_cmds < 63 && n_opts < 15);
	}
	assert_true(n_cmds >= 13);
	assert_true(in_list(cmds, "leases") && in_list(cmds, "top") && in_list(cmds, "reopen"));
	assert_true(in_list(opts, "--json") && in_list(opts, "--config"));

	/* Every "### `name`" section is a command of the table; the list under
	 * "### Global options" ("- `--name ...`") names exactly --help's. */
	f = fopen(KTEL_SOURCE_DIR "/docs/control.md", "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		char name[64];

		if (strncmp(line, "#", 1) == 0)
			in_globals = strcmp(line, "### Global options\n") == 0;
		if (sscanf(line, "### `%63[a-z_]`", name) == 1) {
			if (!in_list(cmds, name))
				fail_msg("docs/control.md documents \"%s\", which ktelemetryctl "
					 "--help does not list",
					 name);
			documented++;
		}
		if (in_globals && sscanf(line, "- `%63[a-z-]", name) == 1) {
			if (!in_list(opts, name))
				fail_msg("docs/control.md documents global option %s, which "
					 "ktelemetryctl --help does not list",
					 name);
			doc_opts[n_doc_opts++] = strdup(name);
			assert_true(n_doc_opts < 15);
		}
	}
	fclose(f);
	for (size_t i = 0; i < n_cmds; i++) {
		char want[100];
		bool found = false;

		snprintf(want, sizeof(want), "### `%s`\n", cmds[i]);
		f = fopen(KTEL_SOURCE_DIR "/docs/control.md", "r");
		while (!found && fgets(line, sizeof(line), f))
			found = strcmp(line, want) == 0;
		fclose(f);
		if (!found)
			fail_msg("command \"%s\" has no \"### `%s`\" section in docs/control.md",
				 cmds[i], cmds[i]);
	}
	assert_int_equal(documented, n_cmds);
	for (size_t i = 0; i < n_opts; i++)
		if (!in_list(doc_opts, opts[i]))
			fail_msg("global option %s is not under \"### Global options\" in "
				 "docs/control.md",
				 opts[i]);
	for (size_t i = 0; i < n_cmds; i++)
		free(cmds[i]);
	for (size_t i = 0; i < n_opts; i++)
		free(opts[i]);
	for (size_t i = 0; i < n_doc_opts; i++)
		free(doc_opts[i]);
	rig_stop(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_config_still_finds_socket),
		cmocka_unit_test(test_reopen_text_and_json),
		cmocka_unit_test(test_status_attribution_text),
		cmocka_unit_test(test_json_on_every_command),
		cmocka_unit_test(test_watch_text_and_json),
		cmocka_unit_test(test_top_unknown_metric),
		cmocka_unit_test(test_global_options_anywhere),
		cmocka_unit_test(test_leases),
		cmocka_unit_test(test_docs_match_help),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
