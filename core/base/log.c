// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "log.h"
#include "utf8.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static enum ktel_log_level log_level = KTEL_LOG_INFO;
static const char *const level_names[] = {"error", "warn", "info", "debug"};

void ktel_log_set_level(enum ktel_log_level level)
{
	log_level = level;
}

enum ktel_log_level ktel_log_get_level(void)
{
	return log_level;
}

int ktel_log_parse_level(const char *name)
{
	for (int i = 0; i <= KTEL_LOG_DEBUG; i++)
		if (strcmp(name, level_names[i]) == 0)
			return i;
	return -EINVAL;
}

static void vlog(enum ktel_log_level level, const char *suffix, const char *fmt, va_list ap)
{
	char line[2048], shown[4 * sizeof(line)], stamp[32];
	struct timespec ts;
	struct tm tm;
	int n;

	if (level > log_level)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line))
		ktel_utf8_trim_str(line); /* cut, but not inside a character */
	/* libbpf's messages end in a newline of their own. */
	n = (int)strlen(line);
	if (n && line[n - 1] == '\n')
		line[n - 1] = '\0';
	/* Messages carry outside bytes (file names are any bytes but '/' and
	 * NUL): escaped, so every line is one line of valid UTF-8. */
	ktel_utf8_escape(line, shown, sizeof(shown));
	/* One fprintf per line so concurrent writers never interleave inside it. */
	fprintf(stderr, "%s.%03ldZ ktelemetryd %s: %s%s\n", stamp, ts.tv_nsec / 1000000,
		level_names[level], shown, suffix ? suffix : "");
}

void ktel_log(enum ktel_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(level, NULL, fmt, ap);
	va_end(ap);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void ktel_complain(struct ktel_complaint *c, enum ktel_log_level level, const char *fmt, ...)
{
	uint64_t now = mono_ns(), interval = c->interval_ns ? c->interval_ns : 60000000000ULL;
	char suffix[64] = "";
	va_list ap;

	if (c->last_ns && now - c->last_ns < interval) {
		c->suppressed++;
		return;
	}
	if (c->suppressed)
		snprintf(suffix, sizeof(suffix), " (%llu similar suppressed)",
			 (unsigned long long)c->suppressed);
	c->last_ns = now;
	c->suppressed = 0;
	va_start(ap, fmt);
	vlog(level, suffix, fmt, ap);
	va_end(ap);
}

void ktel_complain_clear(struct ktel_complaint *c, const char *fmt, ...)
{
	va_list ap;

	if (!c->last_ns)
		return;
	c->last_ns = 0;
	c->suppressed = 0;
	va_start(ap, fmt);
	vlog(KTEL_LOG_INFO, NULL, fmt, ap);
	va_end(ap);
}
