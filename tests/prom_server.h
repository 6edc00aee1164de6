/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The real Prometheus server (Debian's prometheus) for integration tests:
 * started in a sandbox directory with its own config, storage and log, on a
 * free loopback port, optionally scraping a target and/or receiving remote
 * writes; PromQL instant queries through curl. Include after <cmocka.h>,
 * daemon_harness.h and ktel_test.h.
 */
#ifndef KTEL_TEST_PROM_SERVER_H
#define KTEL_TEST_PROM_SERVER_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

/* A free TCP port on 127.0.0.1 (bound to 0, then released). */
static inline unsigned prom_free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	unsigned port;

	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/*
 * Start Prometheus on web_port with storage sb->dir/tsdb (kept across
 * restarts), scraping 127.0.0.1:<each of the n_targets ports> every second
 * as job "ktel" (none when n_targets is 0), with one extra flag (NULL:
 * none; "--web.enable-remote-write-receiver"). *ret_pid is set as soon as
 * it runs (for a teardown to kill); returns when /-/ready answers, fails
 * the test after 30 s. The log (appended) is sb->dir/prometheus.log.
 */
static inline void prom_server_start_targets(const struct sandbox *sb, unsigned web_port,
					     const unsigned *targets, size_t n_targets,
					     const char *extra_flag, pid_t *ret_pid)
{
	char cfg[700], tsdb[700], flag_cfg[800], flag_tsdb[800], flag_web[64], log[700];
	FILE *f;

	snprintf(cfg, sizeof(cfg), "%s/prometheus.yml", sb->dir);
	snprintf(tsdb, sizeof(tsdb), "%s/tsdb", sb->dir);
	snprintf(log, sizeof(log), "%s/prometheus.log", sb->dir);
	f = fopen(cfg, "w");
	assert_non_null(f);
	fprintf(f, "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n");
	if (n_targets) {
		fprintf(f, "scrape_configs:\n  - job_name: ktel\n    static_configs:\n"
			   "      - targets: [");
		for (size_t i = 0; i < n_targets; i++)
			fprintf(f, "%s'127.0.0.1:%u'", i ? ", " : "", targets[i]);
		fprintf(f, "]\n");
	}
	fclose(f);
	snprintf(flag_cfg, sizeof(flag_cfg), "--config.file=%s", cfg);
	snprintf(flag_tsdb, sizeof(flag_tsdb), "--storage.tsdb.path=%s", tsdb);
	snprintf(flag_web, sizeof(flag_web), "--web.listen-address=127.0.0.1:%u", web_port);
	*ret_pid = fork();
	assert_true(*ret_pid >= 0);
	if (*ret_pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		dup2(fd, 1);
		dup2(fd, 2);
		execlp("prometheus", "prometheus", flag_cfg, flag_tsdb, flag_web, extra_flag,
		       (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 300; i++) {
		if (ktel_test_run("curl -sf -o /dev/null http://127.0.0.1:%u/-/ready", web_port) ==
		    0)
			return;
		usleep(100000);
	}
	fail_msg("prometheus did not become ready; see %s", log);
}

/* prom_server_start_targets() with one target port, or none when target is 0. */
static inline void prom_server_start(const struct sandbox *sb, unsigned web_port, unsigned target,
				     const char *extra_flag, pid_t *ret_pid)
{
	prom_server_start_targets(sb, web_port, &target, target ? 1 : 0, extra_flag, ret_pid);
}

/* A PromQL instant query's JSON reply ("data.result"), parsed. */
static inline json_t *prom_query(const struct sandbox *sb, unsigned web_port, const char *query)
{
	char path[700];
	json_t *reply, *result;

	snprintf(path, sizeof(path), "%s/query.json", sb->dir);
	assert_int_equal(ktel_test_run("curl -sf -o '%s' --data-urlencode 'query=%s' "
				       "http://127.0.0.1:%u/api/v1/query",
				       path, query, web_port),
			 0);
	reply = json_load_file(path, 0, NULL);
	assert_non_null(reply);
	assert_string_equal(json_string_value(json_object_get(reply, "status")), "success");
	result = json_incref(json_object_get(json_object_get(reply, "data"), "result"));
	json_decref(reply);
	assert_non_null(result);
	return result;
}

/* The value of a query that yields one sample (a scalar sum); -1 when none. */
static inline double prom_query_value(const struct sandbox *sb, unsigned web_port,
				      const char *query)
{
	json_t *res = prom_query(sb, web_port, query);
	double v = -1;

	if (json_array_size(res) == 1)
		v = strtod(json_string_value(
				   json_array_get(json_object_get(json_array_get(res, 0), "value"),
						  1))
				   ?: "-1",
			   NULL);
	json_decref(res);
	return v;
}

#endif /* KTEL_TEST_PROM_SERVER_H */
