/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Daemon logging. Only the daemon and tools log; library modules return
 * errors. Each message is one line on stderr: time, level, text. Repeats of
 * the same key are rate-limited (collectd's c_complain idea): the first is
 * logged, then at most one per interval with the number suppressed.
 */
#ifndef KTEL_LOG_H
#define KTEL_LOG_H

#include <stdint.h>

enum ktel_log_level {
	KTEL_LOG_ERROR = 0,
	KTEL_LOG_WARN = 1,
	KTEL_LOG_INFO = 2,
	KTEL_LOG_DEBUG = 3,
};

void ktel_log_set_level(enum ktel_log_level level);
enum ktel_log_level ktel_log_get_level(void);
/* "error", "warn", "info", "debug" -> level; -EINVAL otherwise. */
int ktel_log_parse_level(const char *name);

void ktel_log(enum ktel_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* A rate-limit slot for one kind of repeated complaint. */
struct ktel_complaint {
	uint64_t last_ns;
	uint64_t suppressed;
	uint64_t interval_ns; /* 0: 60 s */
};

/* Log unless the same complaint was logged less than interval ago. */
void ktel_complain(struct ktel_complaint *c, enum ktel_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The condition is over: say so once if it had been complained about. */
void ktel_complain_clear(struct ktel_complaint *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif /* KTEL_LOG_H */
