// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Every config under config/examples starts. Each is taken as an operator
 * trying it on this machine would: only what belongs to the machine is
 * changed - every path moves under a sandbox root (/x becomes
 * <sandbox>/root/x, ${state_dir}/x becomes <sandbox>/root/state_dir/x), the
 * pin root is the test's own, a network listener binds loopback on a port
 * the kernel picks, and every remote address is a closed loopback port -
 * and the built plugins are installed into the first plugin directory, as
 * installing them would. Nothing else is created. Then --check-config must
 * pass, and the daemon must start, pull every enabled metric when asked
 * over its control socket (`ktelemetryctl pull`, then `status`), and stop
 * on SIGTERM with exit 0.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/socket.h>
#include <cmocka.h>

#include <jansson.h>

#include "ktel_test.h"
#include "daemon_harness.h"

#define EXAMPLES_DIR KTEL_SOURCE_DIR "/config/examples"
#define CTL_BIN KTEL_BINARY_DIR "/tools/ktelemetryctl"

/* The daemon of the example under test, killed by the teardown when a
 * check failed while it ran. */
static pid_t running;

/* A loopback TCP port nobody listens on: bound by the kernel's choice, then
 * closed. */
static unsigned closed_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

/* The path under root that stands for path on this machine. */
static json_t *rerooted(const char *root, const char *path)
{
	char buf[1200];
	const char *close_brace;

	if (path[0] == '$' && path[1] == '{' && (close_brace = strchr(path, '}')))
		snprintf(buf, sizeof(buf), "%s/%.*s%s", root, (int)(close_brace - path - 2),
			 path + 2, close_brace + 1);
	else if (path[0] == '/')
		snprintf(buf, sizeof(buf), "%s%s", root, path);
	else
		snprintf(buf, sizeof(buf), "%s", path);
	return json_string(buf);
}

static void reroot_key(json_t *obj, const char *key, const char *root)
{
	const char *v = json_string_value(json_object_get(obj, key));

	if (v)
		json_object_set_new(obj, key, rerooted(root, v));
}

/* A sink's machine-specific options: its files and sockets, its listener,
 * its peers. */
static void rewrite_sink(json_t *sink, const char *root)
{
	const char *type = json_string_value(json_object_get(sink, "type"));
	char url[100];

	if (strcmp(type, "json") == 0 &&
	    strcmp(json_string_value(json_object_get(sink, "path")) ?: "-", "-") != 0)
		reroot_key(sink, "path", root);
	reroot_key(sink, "socket", root);
	if (strcmp(type, "prometheus") == 0) {
		json_object_set_new(sink, "listen", json_string("127.0.0.1"));
		json_object_set_new(sink, "port", json_integer(0));
	}
	if (json_object_get(sink, "host")) {
		json_object_set_new(sink, "host", json_string("127.0.0.1"));
		json_object_set_new(sink, "port", json_integer(closed_port()));
	}
	if (json_object_get(sink, "url")) {
		snprintf(url, sizeof(url), "http://127.0.0.1:%u/api/v1/write", closed_port());
		json_object_set_new(sink, "url", json_string(url));
	}
}

/*
 * Write the example as the sandbox's config; returns the first plugin
 * directory (where the plugins go) and the control socket, both rerooted.
 */
static void write_example(struct sandbox *sb, const char *example, const char *root,
			  char *plugin_dir, size_t plugin_dir_len, char *control,
			  size_t control_len)
{
	json_error_t jerr;
	json_t *cfg = json_load_file(example, JSON_PRESERVE_ORDER, &jerr), *dirs, *v, *sink;
	const char *name;
	size_t i;

	if (!cfg)
		fail_msg("%s: %s", example, jerr.text);
	dirs = json_object_get(cfg, "plugin_dirs");
	if (!dirs) {
		dirs = json_pack("[s]", "${plugin_dir}");
		json_object_set_new(cfg, "plugin_dirs", dirs);
	}
	json_array_foreach(dirs, i, v)
		json_array_set_new(dirs, i, rerooted(root, json_string_value(v)));
	snprintf(plugin_dir, plugin_dir_len, "%s", json_string_value(json_array_get(dirs, 0)));
	json_object_set_new(cfg, "pin_root", json_string(sb->pin_root));
	if (!json_object_get(cfg, "state_file"))
		json_object_set_new(cfg, "state_file", json_string("${state_dir}/state.bin"));
	if (!json_object_get(cfg, "control_socket"))
		json_object_set_new(cfg, "control_socket", json_string("${run_dir}/control.sock"));
	reroot_key(cfg, "state_file", root);
	reroot_key(cfg, "control_socket", root);
	snprintf(control, control_len, "%s",
		 json_string_value(json_object_get(cfg, "control_socket")));
	json_object_foreach(json_object_get(cfg, "sinks"), name, sink)
		rewrite_sink(sink, root);
	assert_int_equal(json_dump_file(cfg, sb->config, JSON_INDENT(2) | JSON_PRESERVE_ORDER), 0);
	json_decref(cfg);
}

/* ktelemetryctl on the example's socket; its --json answer (decref it). */
static json_t *ctl(const struct sandbox *sb, const char *control, const char *cmd)
{
	char out[700], err[700];
	const char *argv[] = {CTL_BIN, "--socket", control, "--json", cmd, NULL};
	char *o, *e;
	json_t *ans;
	int rc;

	snprintf(out, sizeof(out), "%s/ctl.out", sb->dir);
	snprintf(err, sizeof(err), "%s/ctl.err", sb->dir);
	rc = ktel_test_run_captured(argv, out, err, -1, 60, &o, &e);
	if (rc != 0) {
		dump_log(sb);
		fail_msg("ktelemetryctl %s: exit %d: %s", cmd, rc, e);
	}
	ans = json_loads(o, JSON_DISABLE_EOF_CHECK, NULL);
	free(o);
	free(e);
	return ans;
}

/* Wait until the control socket answers (the daemon is started). */
static void wait_control(const struct sandbox *sb, const char *control, pid_t pid)
{
	for (int i = 0; i < 600; i++) {
		if (access(control, F_OK) == 0)
			return;
		if (waitpid(pid, NULL, WNOHANG) == pid) {
			dump_log(sb);
			fail_msg("the daemon exited before its control socket %s appeared",
				 control);
		}
		usleep(50000);
	}
	dump_log(sb);
	fail_msg("no control socket %s after 30 s", control);
}

/*
 * How many metrics a pull reached; an enabled metric with a pull error or
 * a problem fails the test. (An event metric streams its records and is
 * never pulled: its pulls stay 0.)
 */
static size_t pulled_metrics(json_t *status)
{
	json_t *m;
	size_t i, n = 0;

	json_array_foreach(json_object_get(status, "metrics"), i, m) {
		const char *name = json_string_value(json_object_get(m, "name"));

		if (!json_is_true(json_object_get(m, "enabled")))
			continue;
		if (json_integer_value(json_object_get(m, "pull_errors")) ||
		    json_object_get(m, "problem"))
			fail_msg("metric %s: %s", name, json_dumps(m, 0));
		if (json_integer_value(json_object_get(m, "pulls")) >= 1)
			n++;
	}
	return n;
}

static void run_example(const char *file)
{
	char example[600], root[700], plugin_dir[1200], control[1200], name[64];
	struct sandbox sb;
	json_t *st;
	pid_t pid;
	size_t n;

	snprintf(example, sizeof(example), "%s/%s", EXAMPLES_DIR, file);
	snprintf(name, sizeof(name), "ex-%.*s", (int)(strlen(file) - 5), file);
	sandbox_init(&sb, name);
	snprintf(root, sizeof(root), "%s/root", sb.dir);
	write_example(&sb, example, root, plugin_dir, sizeof(plugin_dir), control, sizeof(control));
	/* The operator installs the plugins; the daemon makes the rest. */
	assert_int_equal(ktel_test_run("install -d -m 0755 %s && install -m 0644 %s/*.so %s/",
				       plugin_dir, KTEL_PLUGIN_DIR, plugin_dir),
			 0);
	{
		const char *argv[] = {KTEL_DAEMON_BIN, "--check-config", sb.config, NULL};
		char out[700], *o, *e;

		snprintf(out, sizeof(out), "%s/check.out", sb.dir);
		if (ktel_test_run_captured(argv, out, sb.log, -1, 60, &o, &e) != 0)
			fail_msg("%s: --check-config refused the example:\n%s", file, e);
		free(o);
		free(e);
	}
	pid = running = daemon_start(&sb, NULL);
	wait_control(&sb, control, pid);
	json_decref(ctl(&sb, control, "pull"));
	st = ctl(&sb, control, "status");
	assert_non_null(st);
	n = pulled_metrics(st);
	json_decref(st);
	printf("%s: started, %zu metric(s) pulled, stopping\n", file, n);
	if (n == 0) {
		dump_log(&sb);
		fail_msg("%s: no metric pulled", file);
	}
	kill(pid, SIGTERM);
	running = 0;
	if (daemon_wait(pid, 30) != 0) {
		dump_log(&sb);
		fail_msg("%s: the daemon did not stop cleanly", file);
	}
	sandbox_cleanup(&sb);
}

static int is_json(const struct dirent *e)
{
	size_t len = strlen(e->d_name);

	return len > 5 && strcmp(e->d_name + len - 5, ".json") == 0;
}

static void test_every_example_starts(void **state)
{
	struct dirent **list;
	int n = scandir(EXAMPLES_DIR, &list, is_json, alphasort);

	assert_true(n > 0);
	for (int i = 0; i < n; i++) {
		run_example(list[i]->d_name);
		free(list[i]);
	}
	free(list);
}

static int teardown(void **state)
{
	if (running > 0) {
		kill(running, SIGKILL);
		waitpid(running, NULL, 0);
	}
	return sandbox_remove_all(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_example_starts),
	};

	ktel_test_require_root("test_examples");
	return cmocka_run_group_tests(tests, NULL, teardown);
}
