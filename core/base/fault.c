// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Test-only fault injection points; see fault.h. */
#include "fault.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

static const char *const points[] = {"routed", "written", "synced", "saved"};

static struct {
	bool parsed, armed, kill;
	char point[16];
	unsigned long n, hits, delay_ms;
} fault;

static bool known_point(const char *p)
{
	for (size_t i = 0; i < sizeof(points) / sizeof(points[0]); i++)
		if (strcmp(points[i], p) == 0)
			return true;
	return false;
}

/* "<point>:<n>:kill" or "<point>:<n>:delay=<ms>"; false when malformed. */
static bool parse(const char *v)
{
	char action[32];
	int used = 0;

	if (sscanf(v, "%15[a-z]:%lu:%31s%n", fault.point, &fault.n, action, &used) != 3 ||
	    v[used] || !known_point(fault.point) || !fault.n)
		return false;
	if (strcmp(action, "kill") == 0) {
		fault.kill = true;
		return true;
	}
	return sscanf(action, "delay=%lu%n", &fault.delay_ms, &used) == 1 && !action[used];
}

bool ktel_fault__init(void)
{
	const char *v;

	if (fault.parsed)
		return fault.armed;
	fault.parsed = true;
	v = getenv(KTEL_FAULT_ENV);
	if (!v)
		return false;
	fault.armed = parse(v);
	if (!fault.armed)
		ktel_log(KTEL_LOG_ERROR,
			 "%s=\"%s\" ignored: expected <routed|written|synced|saved>"
			 ":<n>:kill or :<n>:delay=<ms>",
			 KTEL_FAULT_ENV, v);
	else
		ktel_log(KTEL_LOG_WARN,
			 "%s=\"%s\": TEST FAULT INJECTION ARMED: this daemon will "
			 "%s at point %s, hit %lu; never set this in production",
			 KTEL_FAULT_ENV, v, fault.kill ? "kill itself (SIGKILL)" : "stall",
			 fault.point, fault.n);
	return fault.armed;
}

void ktel_fault__point(const char *name)
{
	struct timespec ts;

	if (!fault.parsed)
		ktel_fault__init();
	if (!fault.armed || strcmp(name, fault.point) != 0 || ++fault.hits != fault.n)
		return;
	ktel_log(KTEL_LOG_WARN, "%s: point %s reached (hit %lu): %s", KTEL_FAULT_ENV, name,
		 fault.hits, fault.kill ? "SIGKILL" : "delaying");
	if (fault.kill)
		raise(SIGKILL);
	ts.tv_sec = fault.delay_ms / 1000;
	ts.tv_nsec = (long)(fault.delay_ms % 1000) * 1000000L;
	nanosleep(&ts, NULL);
}
