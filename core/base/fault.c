// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Test-only fault injection points; see fault.h. */
#include "fault.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

static const char *const points[] = {"routed", "written", "synced", "saved"};

#define FORM "expected <routed|written|synced|saved>:<n>:kill or :<n>:delay=<ms>"

static struct {
	bool parsed;
	enum ktel_fault_state state;
	struct ktel_fault_spec spec;
	uint64_t hits;
	char value[64]; /* the variable's text, cut short for the log */
	char why[200];  /* a malformed value's reason */
} fault;

bool ktel_fault_compiled(void)
{
#ifdef KTEL_FAULT_INJECTION
	return true;
#else
	return false;
#endif
}

static bool known_point(const char *p, size_t len)
{
	for (size_t i = 0; i < sizeof(points) / sizeof(points[0]); i++)
		if (strlen(points[i]) == len && strncmp(points[i], p, len) == 0)
			return true;
	return false;
}

/* Plain decimal digits up to the end of s or the first stop character, in
 * 1..max: no sign, no spaces, no overflow. *end is left after the digits. */
static bool parse_count(const char *s, uint64_t max, uint64_t *ret, const char **end)
{
	uint64_t v = 0;
	const char *p = s;

	while (*p >= '0' && *p <= '9') {
		if (v > max)
			return false; /* already out of range: stop before it can wrap */
		v = v * 10 + (uint64_t)(*p - '0');
		p++;
	}
	if (p == s || v < 1 || v > max)
		return false;
	*ret = v;
	*end = p;
	return true;
}

int ktel_fault_parse(const char *text, struct ktel_fault_spec *ret_spec, struct ktel_err *err)
{
	struct ktel_fault_spec spec = {0};
	const char *colon = strchr(text, ':'), *p;

	if (!colon || !known_point(text, (size_t)(colon - text)))
		return ktel_err_set(err, EINVAL, "%s=\"%.40s\": unknown point; " FORM,
				    KTEL_FAULT_ENV, text);
	snprintf(spec.point, sizeof(spec.point), "%.*s", (int)(colon - text), text);
	if (!parse_count(colon + 1, KTEL_FAULT_MAX_HITS, &spec.n, &p) || *p != ':')
		return ktel_err_set(err, EINVAL,
				    "%s=\"%.40s\": the hit count must be a plain number "
				    "1..%d followed by ':'; " FORM,
				    KTEL_FAULT_ENV, text, KTEL_FAULT_MAX_HITS);
	p++;
	if (strcmp(p, "kill") == 0) {
		spec.kill = true;
	} else if (strncmp(p, "delay=", 6) == 0) {
		if (!parse_count(p + 6, KTEL_FAULT_MAX_DELAY_MS, &spec.delay_ms, &p) || *p)
			return ktel_err_set(err, EINVAL,
					    "%s=\"%.40s\": the delay must be a plain number of "
					    "milliseconds 1..%d and nothing after it",
					    KTEL_FAULT_ENV, text, KTEL_FAULT_MAX_DELAY_MS);
	} else {
		return ktel_err_set(err, EINVAL, "%s=\"%.40s\": unknown action; " FORM,
				    KTEL_FAULT_ENV, text);
	}
	*ret_spec = spec;
	return 0;
}

enum ktel_fault_state ktel_fault__init(struct ktel_err *err)
{
	struct ktel_err perr;
	const char *v;

	if (!fault.parsed) {
		fault.parsed = true;
		v = getenv(KTEL_FAULT_ENV);
		if (!v) {
			fault.state = KTEL_FAULT_NONE;
		} else {
			snprintf(fault.value, sizeof(fault.value), "%s", v);
			if (!ktel_fault_compiled()) {
				fault.state = KTEL_FAULT_IGNORED;
			} else if (ktel_fault_parse(v, &fault.spec, &perr)) {
				snprintf(fault.why, sizeof(fault.why), "%s", perr.msg);
				fault.state = KTEL_FAULT_MALFORMED;
			} else {
				fault.state = KTEL_FAULT_ARMED;
			}
		}
	}
	if (fault.state == KTEL_FAULT_MALFORMED)
		ktel_err_set(err, EINVAL, "%s", fault.why);
	return fault.state;
}

enum ktel_fault_state ktel_fault__describe(char *buf, size_t size)
{
	enum ktel_fault_state st = ktel_fault__init(NULL);
	uint64_t hits = __atomic_load_n(&fault.hits, __ATOMIC_RELAXED);

	if (!buf || !size)
		return st;
	switch (st) {
	case KTEL_FAULT_ARMED:
		snprintf(buf, size, "%s=%s armed (test build): %s at point %s, hit %llu of %llu",
			 KTEL_FAULT_ENV, fault.value, fault.spec.kill ? "SIGKILL" : "delay",
			 fault.spec.point, (unsigned long long)hits,
			 (unsigned long long)fault.spec.n);
		break;
	case KTEL_FAULT_IGNORED:
		snprintf(buf, size,
			 "%s=%s ignored: this build has no fault injection "
			 "(KTEL_FAULT_INJECTION=OFF)",
			 KTEL_FAULT_ENV, fault.value);
		break;
	case KTEL_FAULT_MALFORMED:
		snprintf(buf, size, "%s", fault.why);
		break;
	default:
		buf[0] = '\0';
	}
	return st;
}

void ktel_fault__point(const char *name)
{
	struct timespec ts;
	uint64_t hit;

	if (!fault.parsed)
		ktel_fault__init(NULL);
	if (fault.state != KTEL_FAULT_ARMED || strcmp(name, fault.spec.point) != 0)
		return;
	/* Points are reached on the loop and on the writer threads. */
	hit = __atomic_add_fetch(&fault.hits, 1, __ATOMIC_RELAXED);
	if (hit != fault.spec.n)
		return;
	ktel_log(KTEL_LOG_WARN, "%s: point %s reached (hit %llu): %s", KTEL_FAULT_ENV, name,
		 (unsigned long long)hit, fault.spec.kill ? "SIGKILL" : "delaying");
	if (fault.spec.kill)
		raise(SIGKILL);
	ts.tv_sec = (time_t)(fault.spec.delay_ms / 1000);
	ts.tv_nsec = (long)(fault.spec.delay_ms % 1000) * 1000000L;
	nanosleep(&ts, NULL);
}
