/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The kernel's own count of a tracepoint, as an oracle for the daemon's:
 * a private tracefs instance with one event enabled, its buffer's lines of
 * that event counted when tracing stops. Also the sysctl switch tests use to
 * keep other sources of the event quiet.
 */
#ifndef KTEL_TEST_TRACEFS_ORACLE_H
#define KTEL_TEST_TRACEFS_ORACLE_H

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

struct tracefs_counter {
	char dir[256];
};

static inline int tracefs_write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_TRUNC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	close(fd);
	return n < 0 ? -errno : 0;
}

/* Start counting event ("compaction/mm_compaction_end"); 0 or -errno. */
static inline int tracefs_start(struct tracefs_counter *tc, const char *event)
{
	char path[512];

	if (access("/sys/kernel/tracing/instances", F_OK) != 0)
		(void)!system("mount -t tracefs tracefs /sys/kernel/tracing");
	snprintf(tc->dir, sizeof(tc->dir), "/sys/kernel/tracing/instances/ktel-test-%d", getpid());
	rmdir(tc->dir);
	if (mkdir(tc->dir, 0755) != 0)
		return -errno;
	snprintf(path, sizeof(path), "%s/buffer_size_kb", tc->dir);
	tracefs_write_file(path, "4096");
	snprintf(path, sizeof(path), "%s/events/%s/enable", tc->dir, event);
	return tracefs_write_file(path, "1");
}

/* Pause or resume counting (tracing_on of the instance), e.g. while no
 * program is attached to the event: events then count on neither side. */
static inline void tracefs_set_on(struct tracefs_counter *tc, bool on)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/tracing_on", tc->dir);
	tracefs_write_file(path, on ? "1" : "0");
}

/* Stop tracing and count the lines of event_name ("mm_compaction_end:"). */
static inline uint64_t tracefs_stop(struct tracefs_counter *tc, const char *event_name)
{
	char path[512], *line = NULL;
	size_t cap = 0;
	uint64_t n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/tracing_on", tc->dir);
	tracefs_write_file(path, "0");
	snprintf(path, sizeof(path), "%s/trace", tc->dir);
	f = fopen(path, "r");
	while (f && getline(&line, &cap, f) > 0)
		if (line[0] != '#' && strstr(line, event_name))
			n++;
	free(line);
	if (f)
		fclose(f);
	rmdir(tc->dir);
	return f ? n : UINT64_MAX;
}

/*
 * Stop tracing and count the lines of event_name, split by who ran into it:
 * the task "<comm>-<pid>" field equal to pid (a test's own triggers: a write
 * to compact_memory compacts in the writer's context) or another task (a
 * kernel thread, another test). 0, or -errno when the trace cannot be read.
 */
static inline int tracefs_stop_by_pid(struct tracefs_counter *tc, const char *event_name, pid_t pid,
				      uint64_t *ret_own, uint64_t *ret_other)
{
	char path[512], suffix[32], *line = NULL;
	size_t cap = 0, n_suffix;
	FILE *f;

	snprintf(path, sizeof(path), "%s/tracing_on", tc->dir);
	tracefs_write_file(path, "0");
	snprintf(path, sizeof(path), "%s/trace", tc->dir);
	snprintf(suffix, sizeof(suffix), "-%d", (int)pid);
	n_suffix = strlen(suffix);
	*ret_own = *ret_other = 0;
	f = fopen(path, "r");
	while (f && getline(&line, &cap, f) > 0) {
		char *task = line + strspn(line, " ");
		size_t len = strcspn(task, " ");

		if (line[0] == '#' || !strstr(line, event_name))
			continue;
		if (len > n_suffix && strncmp(task + len - n_suffix, suffix, n_suffix) == 0)
			(*ret_own)++;
		else
			(*ret_other)++;
	}
	free(line);
	if (f)
		fclose(f);
	rmdir(tc->dir);
	return f ? 0 : -EIO;
}

/*
 * Stop tracing and count the lines of event_name per task: counts[i] gets
 * those of pids[i] (the "<comm>-<pid>" field), *ret_other (if non-NULL)
 * every other task's. 0, or -errno when the trace cannot be read.
 */
static inline int tracefs_stop_by_pids(struct tracefs_counter *tc, const char *event_name,
				       const pid_t *pids, size_t n, uint64_t *counts,
				       uint64_t *ret_other)
{
	char path[512], *line = NULL;
	size_t cap = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/tracing_on", tc->dir);
	tracefs_write_file(path, "0");
	snprintf(path, sizeof(path), "%s/trace", tc->dir);
	memset(counts, 0, n * sizeof(*counts));
	if (ret_other)
		*ret_other = 0;
	f = fopen(path, "r");
	while (f && getline(&line, &cap, f) > 0) {
		char *task = line + strspn(line, " "), *dash;
		size_t len = strcspn(task, " "), i;
		long pid = -1;

		if (line[0] == '#' || !strstr(line, event_name))
			continue;
		task[len] = '\0';
		dash = strrchr(task, '-');
		if (dash)
			pid = strtol(dash + 1, NULL, 10);
		for (i = 0; i < n && pids[i] != (pid_t)pid; i++)
			;
		if (i < n)
			counts[i]++;
		else if (ret_other)
			(*ret_other)++;
	}
	free(line);
	if (f)
		fclose(f);
	rmdir(tc->dir);
	return f ? 0 : -EIO;
}

/* Set a sysctl, returning its previous value in old (if non-NULL). */
static inline void sysctl_set(const char *path, const char *value, char *old, size_t len)
{
	FILE *f = fopen(path, "r");

	if (old && f && fgets(old, (int)len, f))
		old[strcspn(old, "\n")] = '\0';
	if (f)
		fclose(f);
	tracefs_write_file(path, value);
}

#endif /* KTEL_TEST_TRACEFS_ORACLE_H */
