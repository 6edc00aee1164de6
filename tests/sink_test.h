/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Scaffolding shared by the sink tests: create an instance from JSON text,
 * count close completions, run a loop until something holds. Include after
 * <cmocka.h>. */
#ifndef KTEL_TEST_SINK_H
#define KTEL_TEST_SINK_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "ktel_test.h"
#include "sinks.h"

/* Create sink name of ops from opts_json; the test fails on any error. */
static inline void *ktel_test_sink_create(const struct ktel_sink_ops *ops, uv_loop_t *loop,
					  const char *name, const char *opts_json)
{
	json_t *opts = json_loads(opts_json, 0, NULL);
	struct ktel_err err = {0};
	void *priv = NULL;

	assert_non_null(opts);
	if (ops->create(loop, name, opts, &priv, &err))
		fail_msg("create %s: %s", name, err.msg);
	json_decref(opts);
	return priv;
}

/* A close callback counting completions in the int ctx points at. */
/* Append a dimension to a record built by a test. */
static inline void ktel_test_add_dim(struct ktel_record *r, const char *name, int64_t value,
				     const char *label)
{
	r->dims[r->n_dims].name = name;
	r->dims[r->n_dims].value = value;
	r->dims[r->n_dims].label = label;
	r->n_dims++;
}

static inline void ktel_test_count_closed(void *ctx)
{
	(*(int *)ctx)++;
}

/*
 * How long a test waits for what must happen before it calls the test
 * stuck. A bound for a hang, never a measure of speed: a loaded machine of
 * two CPUs stops a process, and the threads a sink works on, for seconds.
 */
#define KTEL_TEST_STUCK_MS 60000

/* Run loop until done(ctx) holds; the test fails once it is stuck. */
static inline void ktel_test_run_until(uv_loop_t *loop, bool (*done)(void *), void *ctx)
{
	uint64_t start = uv_hrtime();

	while (!done(ctx)) {
		if (uv_hrtime() - start > KTEL_TEST_STUCK_MS * 1000000ull)
			fail_msg("stuck: not done after %d ms", KTEL_TEST_STUCK_MS);
		ktel_test_run_for(loop, 1);
	}
}

#endif /* KTEL_TEST_SINK_H */
