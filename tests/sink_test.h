/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Scaffolding shared by the sink tests: create an instance from JSON text,
 * count close completions. Include after <cmocka.h>. */
#ifndef KTEL_TEST_SINK_H
#define KTEL_TEST_SINK_H

#include <jansson.h>
#include <uv.h>

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

#endif /* KTEL_TEST_SINK_H */
