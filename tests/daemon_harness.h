/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Running the real ktelemetryd from integration tests: a hermetic sandbox
 * (own pin root under /sys/fs/bpf, own state and output files under the build
 * tree), the daemon started as a child process, its JSON lines read back.
 */
#ifndef KTEL_DAEMON_HARNESS_H
#define KTEL_DAEMON_HARNESS_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "ktel_test.h"

#define KTEL_DAEMON_BIN KTEL_BINARY_DIR "/core/ktelemetryd"

struct sandbox {
	char dir[512];      /* under the build tree */
	char pin_root[256]; /* under /sys/fs/bpf */
	char config[600];
	char out[600]; /* JSON sink output */
	char state[600];
	char log[600]; /* daemon stderr */
};

static inline void sandbox_init(struct sandbox *sb, const char *name)
{
	snprintf(sb->dir, sizeof(sb->dir), "%s/test-tmp/%s-%d", KTEL_BINARY_DIR, name, getpid());
	snprintf(sb->pin_root, sizeof(sb->pin_root), "/sys/fs/bpf/ktel-test-%s-%d", name, getpid());
	snprintf(sb->config, sizeof(sb->config), "%s/config.json", sb->dir);
	snprintf(sb->out, sizeof(sb->out), "%s/out.jsonl", sb->dir);
	snprintf(sb->state, sizeof(sb->state), "%s/state.bin", sb->dir);
	snprintf(sb->log, sizeof(sb->log), "%s/daemon.log", sb->dir);
	ktel_test_rm_rf(sb->dir);
	mkdir(KTEL_BINARY_DIR "/test-tmp", 0755);
	mkdir(sb->dir, 0755);
	if (access("/sys/fs/bpf", F_OK) == 0 && system("mountpoint -q /sys/fs/bpf") != 0)
		(void)system("mount -t bpf bpf /sys/fs/bpf");
}

static inline void sandbox_cleanup(struct sandbox *sb)
{
	ktel_test_rm_rf(sb->pin_root);
	ktel_test_rm_rf(sb->dir);
}

/*
 * Group teardown: remove every sandbox of this process (pin roots under
 * /sys/fs/bpf and directories under the build tree), so a test that failed
 * halfway leaves nothing behind either.
 */
static inline int sandbox_remove_all(void **state)
{
	static const char *const roots[] = {"/sys/fs/bpf", KTEL_BINARY_DIR "/test-tmp"};
	char suffix[32], path[1024];

	(void)state;
	snprintf(suffix, sizeof(suffix), "-%d", getpid());
	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		DIR *d = opendir(roots[i]);
		struct dirent *e;
		size_t n = strlen(suffix);

		while (d && (e = readdir(d))) {
			size_t len = strlen(e->d_name);

			if (len <= n || strcmp(e->d_name + len - n, suffix) != 0)
				continue;
			if (i == 0 && strncmp(e->d_name, "ktel-test-", 10) != 0)
				continue;
			snprintf(path, sizeof(path), "%s/%s", roots[i], e->d_name);
			ktel_test_rm_rf(path);
		}
		if (d)
			closedir(d);
	}
	return 0;
}

/* Write the config: extra is spliced into the top-level object (may be ""). */
static inline void sandbox_write_config(struct sandbox *sb, const char *plugin_dir,
					const char *interval, const char *extra)
{
	FILE *f = fopen(sb->config, "w");

	if (!f)
		abort();
	fprintf(f,
		"{\"plugin_dirs\": [\"%s\"], \"pin_root\": \"%s\", \"state_file\": \"%s\",\n"
		" \"control_socket\": \"%s/control.sock\", \"interval\": \"%s\",\n"
		" \"sinks\": {\"file\": {\"type\": \"json\", \"path\": \"%s\"}}%s%s}\n",
		plugin_dir, sb->pin_root, sb->state, sb->dir, interval, sb->out,
		extra && *extra ? ", " : "", extra ? extra : "");
	fclose(f);
}

/* Start the daemon with the sandbox config and extra arguments (NULL-ended). */
static inline pid_t daemon_start(struct sandbox *sb, ...)
{
	const char *argv[16] = {KTEL_DAEMON_BIN, "--config", sb->config};
	size_t n = 3;
	va_list ap;
	pid_t pid;

	va_start(ap, sb);
	for (const char *a; n < 15 && (a = va_arg(ap, const char *));)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	pid = fork();
	if (pid == 0) {
		int fd = open(sb->log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		dup2(fd, 2);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

/* Wait for the child; returns its exit status or -1 after timeout_s. */
static inline int daemon_wait(pid_t pid, int timeout_s)
{
	for (int i = 0; i < timeout_s * 20; i++) {
		int status;

		if (waitpid(pid, &status, WNOHANG) == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		usleep(50000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

/* Does the daemon log contain text (checked at once, then polled up to timeout_s)? */
static inline bool log_wait_for(const struct sandbox *sb, const char *text, int timeout_s)
{
	for (int i = 0; i <= timeout_s * 20; i++) {
		FILE *f = fopen(sb->log, "r");
		char *buf = NULL;
		size_t cap = 0;
		bool found;

		/* The whole log: debug runs grow it well past any fixed buffer. */
		found = f && getdelim(&buf, &cap, '\0', f) > 0 && strstr(buf, text);
		free(buf);
		if (f)
			fclose(f);
		if (found)
			return true;
		usleep(50000);
	}
	return false;
}

static inline void dump_log(const struct sandbox *sb)
{
	char cmd[700];

	snprintf(cmd, sizeof(cmd), "tail -n 40 %s >&2", sb->log);
	(void)system(cmd);
}

/* The port the daemon's Prometheus sink named "prom" says it serves on, 0
 * when its log does not say so (yet). */
static inline unsigned daemon_prom_port_now(const struct sandbox *sb)
{
	static const char want[] = "sink prom (prometheus): http://127.0.0.1:";
	char *log = ktel_test_slurp(sb->log);
	const char *at = strstr(log, want);
	unsigned long port = at ? strtoul(at + sizeof(want) - 1, NULL, 10) : 0;

	free(log);
	return port <= 65535 ? (unsigned)port : 0;
}

/* The same, waited for up to 10 s; the test fails when it never comes. */
static inline unsigned daemon_prom_port(const struct sandbox *sb)
{
	unsigned port = 0;

	for (int i = 0; i < 200 && !port; i++) {
		port = daemon_prom_port_now(sb);
		if (!port)
			usleep(50000);
	}
	if (!port) {
		dump_log(sb);
		fail_msg("the daemon did not say where its Prometheus sink listens");
	}
	return port;
}

/*
 * Sum of the histogram delta counts of every record of metric in the JSON
 * output, and the number of records. Every line must parse.
 */
static inline int sum_metric(const struct sandbox *sb, const char *metric, uint64_t *ret_sum,
			     size_t *ret_records)
{
	FILE *f = fopen(sb->out, "r");
	char *line = NULL;
	size_t cap = 0;
	int bad = 0;

	*ret_sum = 0;
	*ret_records = 0;
	if (!f)
		return 0;
	while (getline(&line, &cap, f) > 0) {
		json_t *rec = json_loads(line, 0, NULL), *counts, *c;
		size_t i;

		if (!rec) {
			bad++;
			continue;
		}
		if (strcmp(json_string_value(json_object_get(rec, "metric")) ?: "", metric) == 0) {
			counts = json_object_get(json_object_get(rec, "histogram"), "counts");
			json_array_foreach(counts, i, c)
				*ret_sum += (uint64_t)json_integer_value(c);
			(*ret_records)++;
		}
		json_decref(rec);
	}
	free(line);
	fclose(f);
	return bad ? -EBADMSG : 0;
}

static inline void trigger_compaction(void)
{
	int fd = open("/proc/sys/vm/compact_memory", O_WRONLY);

	if (fd >= 0) {
		(void)!write(fd, "1", 1);
		close(fd);
	}
}

/* The daemon's `status` answer, through ktelemetryctl --json on the
 * sandbox's control socket; the caller decrefs it. */
static inline json_t *sandbox_status(const struct sandbox *sb)
{
	char cmd[2000], out[700];
	json_t *st;

	snprintf(out, sizeof(out), "%s/status.json", sb->dir);
	snprintf(cmd, sizeof(cmd),
		 "%s/tools/ktelemetryctl --socket %s/control.sock --json status > %s",
		 KTEL_BINARY_DIR, sb->dir, out);
	assert_int_equal(system(cmd), 0);
	st = json_load_file(out, 0, NULL);
	assert_non_null(st);
	return st;
}

#endif /* KTEL_DAEMON_HARNESS_H */
