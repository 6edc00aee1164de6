/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A real Etsy StatsD server (npm statsd 0.9.0) for integration tests, bound
 * to 127.0.0.1 on a free port. A small backend in the server appends each
 * flush's counters and gauges as one JSON line to a file per generation
 * (one generation = one server process); the test sums them.
 *
 * Node and the npm package are installed when missing (npm into the build
 * tree, once per build directory); the test is skipped, saying why, only when
 * that is impossible.
 *
 * Include after <cmocka.h>: the helpers fail the running test with CMocka's
 * assertions.
 */
#ifndef KTEL_STATSD_SERVER_H
#define KTEL_STATSD_SERVER_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "ktel_test.h"

#define STATSD_NPM_DIR KTEL_BINARY_DIR "/statsd-server"
#define STATSD_JS STATSD_NPM_DIR "/node_modules/statsd/stats.js"

struct statsd_server {
	char dir[512]; /* config, logs and flush files of every generation */
	pid_t pid;     /* the running generation, -1 when none */
	uint16_t udp_port, mgmt_port;
	bool tcp; /* listen with servers/tcp (on udp_port's number) */
};

static inline int statsd_run(const char *cmd)
{
	int st = system(cmd);

	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static inline void statsd_skip(const char *test, const char *why)
{
	printf("SKIP %s: %s\n", test, why);
	fflush(stdout);
	exit(KTEL_TEST_SKIP);
}

/* Node, npm and the package, or exit 77 naming what is missing. Call from
 * main() before the tests run. */
static inline void statsd_ensure_installed(const char *test)
{
	if (statsd_run("command -v node >/dev/null && command -v npm >/dev/null") != 0) {
		if (geteuid() != 0)
			statsd_skip(test, "node/npm are missing and installing them needs root "
					  "(apt-get install nodejs npm)");
		if (statsd_run("DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
			       "--no-install-recommends nodejs npm >/dev/null 2>&1") != 0)
			statsd_skip(test,
				    "node/npm are missing and apt-get install nodejs npm failed");
	}
	if (access(STATSD_JS, R_OK) == 0)
		return;
	if (statsd_run("npm install --prefix '" STATSD_NPM_DIR "' --no-audit --no-fund "
		       "--ignore-scripts statsd@0.9.0 >'" STATSD_NPM_DIR ".log' 2>&1") != 0 ||
	    access(STATSD_JS, R_OK) != 0)
		statsd_skip(test,
			    "npm install statsd@0.9.0 failed (no registry?), see " STATSD_NPM_DIR
			    ".log");
}

/* A port on 127.0.0.1 that was free a moment ago (type SOCK_DGRAM/STREAM). */
static inline uint16_t statsd_free_port(int type)
{
	struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(in);
	int fd = socket(AF_INET, type, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&in, sizeof(in)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&in, &len), 0);
	close(fd);
	return ntohs(in.sin_port);
}

static inline void statsd_write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

/* The backend: one JSON line per flush with its counters and gauges. */
static const char statsd_backend_js[] =
	"const fs = require('fs');\n"
	"exports.init = function (startup, config, events, logger) {\n"
	"  events.on('flush', function (ts, metrics) {\n"
	"    fs.appendFileSync(config.ktelOut, JSON.stringify({counters: metrics.counters,\n"
	"                      gauges: metrics.gauges}) + '\\n');\n"
	"  });\n"
	"  return true;\n"
	"};\n";

/* Prepare dir (created empty, 0700) and pick the ports; no server runs yet. */
static inline void statsd_server_init(struct statsd_server *sv, const char *dir)
{
	char cmd[700];

	snprintf(sv->dir, sizeof(sv->dir), "%s", dir);
	sv->pid = -1;
	assert_int_equal(ktel_test_rm_rf(sv->dir), 0);
	assert_int_equal(mkdir(sv->dir, 0700), 0);
	snprintf(cmd, sizeof(cmd), "%s/backend.js", sv->dir);
	statsd_write_file(cmd, statsd_backend_js);
	sv->udp_port = statsd_free_port(SOCK_DGRAM);
	sv->mgmt_port = statsd_free_port(SOCK_STREAM);
}

static inline void statsd_flush_path(const struct statsd_server *sv, char *buf, size_t len, int gen)
{
	snprintf(buf, len, "%s/flushes-%d.jsonl", sv->dir, gen);
}

static inline size_t statsd_file_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	size_t n = 0;
	int c;

	if (!f)
		return 0;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

static inline void statsd_dump_log(const struct statsd_server *sv, int gen)
{
	char cmd[700];

	snprintf(cmd, sizeof(cmd), "tail -20 '%s/server-%d.log' >&2", sv->dir, gen);
	statsd_run(cmd);
}

/* Does something accept TCP connections on 127.0.0.1:port? */
static inline bool statsd_tcp_accepts(uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* Start generation gen of the server (flushing every 100 ms) and wait for
 * its first flush, so it listens when this returns. */
static inline void statsd_server_start(struct statsd_server *sv, int gen)
{
	char config[600], log[600], out[600], text[2048];

	snprintf(config, sizeof(config), "%s/config-%d.js", sv->dir, gen);
	snprintf(log, sizeof(log), "%s/server-%d.log", sv->dir, gen);
	statsd_flush_path(sv, out, sizeof(out), gen);
	snprintf(text, sizeof(text),
		 "{\n  port: %u, address: \"127.0.0.1\",\n"
		 "  mgmt_port: %u, mgmt_address: \"127.0.0.1\",\n"
		 "  flushInterval: 100, automaticConfigReload: false,%s\n"
		 "  backends: [\"%s/backend.js\"],\n  ktelOut: \"%s\"\n}\n",
		 sv->udp_port, sv->mgmt_port, sv->tcp ? " server: \"./servers/tcp\"," : "", sv->dir,
		 out);
	statsd_write_file(config, text);
	sv->pid = fork();
	assert_true(sv->pid >= 0);
	if (sv->pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(fd, 1);
		dup2(fd, 2);
		execlp("node", "node", STATSD_JS, config, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 200 && statsd_file_lines(out) == 0; i++)
		usleep(50000);
	if (statsd_file_lines(out) == 0) {
		statsd_dump_log(sv, gen);
		fail_msg("statsd generation %d did not flush within 10s", gen);
	}
	/* servers/tcp may listen only after the first flush (seen on a
	 * loaded machine): a window sent before would be dropped, correctly,
	 * as sent to a server that is down. (The probe connection carries no
	 * line.) */
	for (int i = 0; sv->tcp && i < 200 && !statsd_tcp_accepts(sv->udp_port); i++)
		usleep(50000);
	if (sv->tcp && !statsd_tcp_accepts(sv->udp_port)) {
		statsd_dump_log(sv, gen);
		fail_msg("statsd generation %d does not accept TCP on %u within 10s", gen,
			 sv->udp_port);
	}
}

/* Kill the running generation (SIGKILL: no final flush). */
static inline void statsd_server_stop(struct statsd_server *sv)
{
	if (sv->pid <= 0)
		return;
	kill(sv->pid, SIGKILL);
	waitpid(sv->pid, NULL, 0);
	sv->pid = -1;
}

/* Stop the server and remove its directory. */
static inline void statsd_server_cleanup(struct statsd_server *sv)
{
	statsd_server_stop(sv);
	if (sv->dir[0])
		ktel_test_rm_rf(sv->dir);
}

/*
 * What generation gen counted: the sum of every flush's counters, by key,
 * and under "gauges" the last value of each gauge. Every flush line must
 * parse.
 */
static inline json_t *statsd_server_totals(const struct statsd_server *sv, int gen)
{
	char path[600];
	json_t *sum = json_object(), *gauges = json_object();
	char *line = NULL;
	size_t cap = 0;
	FILE *f;

	statsd_flush_path(sv, path, sizeof(path), gen);
	f = fopen(path, "r");
	assert_non_null(f);
	while (getline(&line, &cap, f) > 0) {
		json_t *flush = json_loads(line, 0, NULL), *v;
		const char *key;

		assert_non_null(flush);
		json_object_foreach(json_object_get(flush, "counters"), key, v) {
			json_t *old = json_object_get(sum, key);
			double prev = old ? json_number_value(old) : 0;

			json_object_set_new(sum, key, json_real(prev + json_number_value(v)));
		}
		json_object_update(gauges, json_object_get(flush, "gauges"));
		json_decref(flush);
	}
	free(line);
	fclose(f);
	json_object_set_new(sum, "gauges", gauges);
	return sum;
}

/* A counter of totals (0 when the server never saw it). */
static inline double statsd_counter(const json_t *totals, const char *key)
{
	const json_t *v = json_object_get(totals, key);

	return v ? json_number_value(v) : 0;
}

/* The non-zero counters whose key starts with one of the prefixes
 * (NULL-terminated), as a new object. */
static inline json_t *statsd_counters_under(const json_t *totals, const char *const *prefixes)
{
	json_t *out = json_object(), *v;
	const char *key;

	json_object_foreach((json_t *)totals, key, v) {
		for (size_t i = 0; prefixes[i]; i++)
			if (strncmp(key, prefixes[i], strlen(prefixes[i])) == 0 &&
			    json_number_value(v) != 0) {
				json_object_set_new(out, key, json_real(json_number_value(v)));
				break;
			}
	}
	return out;
}

#endif /* KTEL_STATSD_SERVER_H */
