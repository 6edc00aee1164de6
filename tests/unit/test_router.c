// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Router: routing to all sinks and subsets, config-time name checks, stats,
 * self-telemetry records, removal and bounded close, with fake sinks. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "router.h"
#include "ktel_test.h"

/* A fake sink: counts what it gets; closes on a loop timer when opts say
 * "async", else at once; refuses to be created when opts say "fail". */
struct fake {
	uv_loop_t *loop;
	uv_timer_t timer;
	char name[32];
	uint64_t records, batches;
	/* Batch ops (fake_batch_ops): begins, ends, submits in between. */
	uint64_t begins, ends, in_batch;
	bool open;
	char last_metric[64];
	ktel_sink_closed_cb done;
	void *ctx;
	/* Durable fakes: the callback and the last mark given. */
	ktel_sink_durable_cb durable_cb;
	void *durable_ctx;
	uint64_t marked;
};

static int fakes_alive;
static struct fake *fakes[8];
static size_t n_fakes;

static int fake_create(uv_loop_t *loop, const char *name, const json_t *opts, void **ret_priv,
		       struct ktel_err *err)
{
	struct fake *f;

	if (json_is_true(json_object_get(opts, "fail")))
		return ktel_err_set(err, EINVAL, "sinks.%s.fail: told to fail", name);
	f = calloc(1, sizeof(*f));
	assert_non_null(f);
	f->loop = loop;
	snprintf(f->name, sizeof(f->name), "%s", name);
	uv_timer_init(loop, &f->timer);
	fakes_alive++;
	fakes[n_fakes++ % 8] = f;
	*ret_priv = f;
	return 0;
}

static void fake_submit(void *priv, const struct ktel_record *recs, size_t n)
{
	struct fake *f = priv;

	f->records += n;
	f->batches++;
	f->in_batch += f->open;
	snprintf(f->last_metric, sizeof(f->last_metric), "%s", recs[n - 1].metric);
}

static void fake_handle_closed(uv_handle_t *h)
{
	struct fake *f = h->data;
	ktel_sink_closed_cb done = f->done;
	void *ctx = f->ctx;

	for (size_t i = 0; i < 8; i++)
		if (fakes[i] == f)
			fakes[i] = NULL;
	free(f);
	fakes_alive--;
	done(ctx);
}

static void fake_close_now(uv_timer_t *t)
{
	uv_close((uv_handle_t *)t, fake_handle_closed);
}

static void fake_close(void *priv, uint64_t timeout_ms, ktel_sink_closed_cb done, void *ctx)
{
	struct fake *f = priv;

	f->done = done;
	f->ctx = ctx;
	/* Flushing takes a loop turn, bounded by the timeout. */
	f->timer.data = f;
	uv_timer_start(&f->timer, fake_close_now, timeout_ms < 5 ? timeout_ms : 5, 0);
}

static void fake_stats(void *priv, struct ktel_sink_stats *ret)
{
	struct fake *f = priv;

	ret->sent = f->records;
	ret->dropped = f->batches; /* something distinct to check */
	ret->skipped = 4;
	ret->queued = 7;
}

static const struct ktel_sink_ops fake_ops = {
	.type = "fake",
	.create = fake_create,
	.submit = fake_submit,
	.close = fake_close,
	.stats = fake_stats,
};

static void fake_begin(void *priv)
{
	struct fake *f = priv;

	assert_false(f->open);
	f->open = true;
	f->begins++;
}

static void fake_end(void *priv)
{
	struct fake *f = priv;

	assert_true(f->open);
	f->open = false;
	f->ends++;
}

static const struct ktel_sink_ops fake_batch_ops = {
	.type = "fake",
	.create = fake_create,
	.submit = fake_submit,
	.begin = fake_begin,
	.end = fake_end,
	.close = fake_close,
	.stats = fake_stats,
};

static const struct ktel_sink_ops fake_cumulative_ops = {
	.type = "fake",
	.create = fake_create,
	.submit = fake_submit,
	.begin = fake_begin,
	.end = fake_end,
	.close = fake_close,
	.stats = fake_stats,
	.cumulative = true,
};

static struct fake *fake_named(const char *name)
{
	for (size_t i = 0; i < 8; i++)
		if (fakes[i] && strcmp(fakes[i]->name, name) == 0)
			return fakes[i];
	return NULL;
}

struct env {
	uv_loop_t loop;
	struct ktel_router *r;
	struct ktel_record recs[3];
};

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	struct ktel_err err = {0};

	memset(fakes, 0, sizeof(fakes));
	n_fakes = 0;
	uv_loop_init(&e->loop);
	e->r = ktel_router__new(&e->loop);
	assert_non_null(e->r);
	assert_int_equal(ktel_router__add_sink_ops(e->r, "a", &fake_ops, NULL, &err), 0);
	assert_int_equal(ktel_router__add_sink_ops(e->r, "b", &fake_ops, NULL, &err), 0);
	for (int i = 0; i < 3; i++) {
		e->recs[i].type = KTEL_RECORD_COUNTER;
		e->recs[i].metric = i == 2 ? "last" : "m";
	}
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;

	ktel_router__free(e->r);
	/* Sinks still open release themselves on the loop. */
	uv_run(&e->loop, UV_RUN_DEFAULT);
	assert_int_equal(fakes_alive, 0);
	assert_int_equal(uv_loop_close(&e->loop), 0);
	free(e);
	return 0;
}

static void test_route_all_and_subset(void **state)
{
	struct env *e = *state;
	const char *only_b[] = {"b"}, *twice[] = {"b", "b", "a"}, *bad[] = {"zz"};
	struct ktel_router_stats rs;

	ktel_router__route(e->r, e->recs, 3, NULL, 0);
	assert_int_equal(fake_named("a")->records, 3);
	assert_int_equal(fake_named("b")->records, 3);
	assert_string_equal(fake_named("a")->last_metric, "last");

	ktel_router__route(e->r, e->recs, 2, only_b, 1);
	assert_int_equal(fake_named("a")->records, 3);
	assert_int_equal(fake_named("b")->records, 5);

	/* Named twice: delivered once. */
	ktel_router__route(e->r, e->recs, 1, twice, 3);
	assert_int_equal(fake_named("a")->records, 4);
	assert_int_equal(fake_named("b")->records, 6);

	ktel_router__route(e->r, e->recs, 1, bad, 1);
	ktel_router__stats(e->r, &rs);
	assert_int_equal(rs.unrouted, 1);
	assert_int_equal(rs.batches, 4);
	assert_int_equal(fake_named("a")->records + fake_named("b")->records, 10);
}

/*
 * A batch in parts (a pull routed window by window): every part reaches the
 * named sinks in order, a sink with begin/end gets them once around all the
 * parts, the batch counts once, and a batch without records reaches no sink
 * and is not counted, as a route of nothing.
 */
static void test_batch_in_parts(void **state)
{
	struct env *e = *state;
	const char *names[] = {"c", "a", "zz"};
	struct ktel_router_stats rs;
	struct ktel_err err = {0};
	struct fake *a, *b, *c;

	assert_int_equal(ktel_router__add_sink_ops(e->r, "c", &fake_batch_ops, NULL, &err), 0);
	a = fake_named("a");
	b = fake_named("b");
	c = fake_named("c");
	ktel_router__batch_begin(e->r, names, 3);
	ktel_router__batch_add(e->r, e->recs, 0);
	ktel_router__batch_end(e->r);
	ktel_router__stats(e->r, &rs);
	assert_int_equal(rs.batches + rs.unrouted + c->begins + c->ends + a->batches, 0);

	ktel_router__batch_begin(e->r, names, 3);
	ktel_router__batch_add(e->r, e->recs, 2);
	assert_int_equal(c->begins, 1);
	assert_true(c->open);
	ktel_router__batch_add(e->r, e->recs + 2, 1);
	ktel_router__batch_end(e->r);
	assert_int_equal(c->ends, 1);
	assert_false(c->open);
	assert_int_equal(c->records, 3);
	assert_int_equal(c->in_batch, 2);
	assert_string_equal(c->last_metric, "last");
	assert_int_equal(a->records, 3);
	assert_int_equal(a->batches, 2);
	assert_int_equal(b->records, 0);
	ktel_router__stats(e->r, &rs);
	assert_int_equal(rs.batches, 1);
	assert_int_equal(rs.unrouted, 1);

	/* route is not part of any batch. */
	ktel_router__route(e->r, e->recs, 1, NULL, 0);
	assert_int_equal(c->begins, 1);
	assert_int_equal(c->in_batch, 2);
	assert_int_equal(b->records, 1);

	/* Totals go to the cumulative sinks only. */
	assert_int_equal(ktel_router__add_sink_ops(e->r, "t", &fake_cumulative_ops, NULL, &err), 0);
	ktel_router__batch_begin_totals(e->r, NULL, 0);
	ktel_router__batch_add(e->r, e->recs, 3);
	ktel_router__batch_add(e->r, e->recs, 1);
	ktel_router__batch_end(e->r);
	assert_int_equal(fake_named("t")->records, 4);
	assert_int_equal(fake_named("t")->begins, 1);
	assert_int_equal(fake_named("t")->ends, 1);
	assert_int_equal(c->records + a->records + b->records, 4 + 4 + 1);
}

static void test_config_errors(void **state)
{
	struct env *e = *state;
	const char *names[] = {"a", "nope"};
	struct ktel_err err = {0};
	json_t *fail = json_pack("{s:b}", "fail", 1);

	assert_int_equal(ktel_router__check_names(e->r, names, 1, &err), 0);
	assert_int_equal(ktel_router__check_names(e->r, names, 2, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "\"nope\""));
	assert_int_equal(ktel_router__add_sink_ops(e->r, "a", &fake_ops, NULL, &err), -EEXIST);
	assert_non_null(strstr(err.msg, "sinks.a"));
	assert_int_equal(ktel_router__add_sink(e->r, "c", "no-such-type", NULL, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "no-such-type"));
	assert_int_equal(ktel_router__add_sink_ops(e->r, "c", &fake_ops, fail, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "sinks.c.fail"));
	assert_int_equal(ktel_router__n_sinks(e->r), 2);
	json_decref(fail);
}

static void test_stats_and_self_records(void **state)
{
	struct env *e = *state;
	struct ktel_record tmpl = {.boot_id = "boot", .seq = 9, .end_boottime_ns = 123};
	struct ktel_record out[2 * KTEL_ROUTER_SELF_PER_SINK];
	struct ktel_sink_stats st;
	size_t n = 0;

	ktel_router__route(e->r, e->recs, 3, NULL, 0);
	assert_int_equal(ktel_router__sink_stats(e->r, "b", &st), 0);
	assert_int_equal(st.sent, 3);
	assert_int_equal(ktel_router__sink_stats(e->r, "zz", &st), -ENOENT);

	assert_int_equal(ktel_router__self_records(e->r, &tmpl, out, 3, &n), -ENOSPC);
	assert_int_equal(ktel_router__self_records(e->r, &tmpl, out, 14, &n), 0);
	assert_int_equal(n, 14);
	assert_string_equal(out[0].metric, "ktel_sink_sent");
	assert_int_equal(out[0].type, KTEL_RECORD_COUNTER);
	assert_int_equal(out[0].counter.total, 3);
	assert_int_equal(out[0].counter.delta, 3);
	assert_string_equal(out[0].boot_id, "boot");
	assert_int_equal(out[0].seq, 9);
	assert_int_equal(out[0].end_boottime_ns, 123);
	assert_int_equal(out[0].n_dims, 1);
	assert_string_equal(out[0].dims[0].name, "sink");
	assert_string_equal(out[0].dims[0].label, "a");
	assert_string_equal(out[7].dims[0].label, "b");
	assert_int_equal(out[7].dims[0].value, 1);
	assert_string_equal(out[1].metric, "ktel_sink_dropped");
	assert_int_equal(out[1].counter.total, 1);
	assert_string_equal(out[4].metric, "ktel_sink_skipped");
	assert_int_equal(out[4].type, KTEL_RECORD_COUNTER);
	assert_int_equal(out[4].counter.total, 4);
	assert_string_equal(out[5].metric, "ktel_sink_refused");
	assert_int_equal(out[5].type, KTEL_RECORD_COUNTER);
	assert_string_equal(out[6].metric, "ktel_sink_queued");
	assert_int_equal(out[6].type, KTEL_RECORD_GAUGE);
	assert_int_equal(out[6].gauge, 7);

	/* The second time, deltas are the growth since the first. */
	ktel_router__route(e->r, e->recs, 2, NULL, 0);
	assert_int_equal(ktel_router__self_records(e->r, &tmpl, out, 14, &n), 0);
	assert_int_equal(out[0].counter.total, 5);
	assert_int_equal(out[0].counter.delta, 2);

	/* Self records route like any others (here back to the fakes). */
	ktel_router__route(e->r, out, n, NULL, 0);
	assert_int_equal(fake_named("a")->records, 19);
	assert_string_equal(fake_named("a")->last_metric, "ktel_sink_queued");
}

static int closed_calls;

static void on_closed(void *ctx)
{
	closed_calls++;
	assert_ptr_equal(ctx, &closed_calls);
}

static void test_remove_sink(void **state)
{
	struct env *e = *state;
	const char *only_a[] = {"a"};
	struct ktel_router_stats rs;

	closed_calls = 0;
	assert_int_equal(ktel_router__remove_sink(e->r, "a", 100, on_closed, &closed_calls), 0);
	assert_int_equal(ktel_router__remove_sink(e->r, "a", 100, NULL, NULL), -ENOENT);
	assert_int_equal(ktel_router__n_sinks(e->r), 1);
	assert_string_equal(ktel_router__sink_name(e->r, 0), "b");
	assert_null(ktel_router__sink_name(e->r, 1));
	ktel_router__route(e->r, e->recs, 3, only_a, 1);
	ktel_router__stats(e->r, &rs);
	assert_int_equal(rs.unrouted, 1);
	/* The close completes on the loop, once. */
	assert_int_equal(closed_calls, 0);
	uv_run(&e->loop, UV_RUN_DEFAULT);
	assert_int_equal(closed_calls, 1);
	assert_int_equal(fakes_alive, 1);
}

static void test_close_all(void **state)
{
	struct env *e = *state;

	closed_calls = 0;
	ktel_router__close(e->r, 1000, on_closed, &closed_calls);
	assert_int_equal(ktel_router__n_sinks(e->r), 0);
	assert_int_equal(closed_calls, 0);
	uv_run(&e->loop, UV_RUN_DEFAULT);
	assert_int_equal(closed_calls, 1);
	assert_int_equal(fakes_alive, 0);
	/* Closing an empty router reports at once. */
	ktel_router__close(e->r, 1000, on_closed, &closed_calls);
	assert_int_equal(closed_calls, 2);
}


/* ---- durability ---- */

static bool fake_durable(void *priv, ktel_sink_durable_cb cb, void *ctx)
{
	struct fake *f = priv;

	f->durable_cb = cb;
	f->durable_ctx = ctx;
	return true;
}

static void fake_mark(void *priv, uint64_t mark)
{
	((struct fake *)priv)->marked = mark;
}

static const struct ktel_sink_ops durable_ops = {
	.type = "fake_durable",
	.create = fake_create,
	.submit = fake_submit,
	.close = fake_close,
	.stats = fake_stats,
	.durable = fake_durable,
	.mark = fake_mark,
};

static uint64_t levels[8];
static size_t n_levels;

static void on_level(void *ctx, uint64_t level)
{
	levels[n_levels++ % 8] = level;
}

static void ack(const char *name, uint64_t mark)
{
	struct fake *f = fake_named(name);

	f->durable_cb(f->durable_ctx, mark);
}

/* Without a durable sink every mark is durable at once. */
static void test_durable_none(void **state)
{
	struct env *e = *state;

	assert_false(ktel_router__any_durable(e->r));
	assert_int_equal(ktel_router__mark(e->r), 1);
	assert_int_equal(ktel_router__durable_level(e->r), 1);
}

/*
 * The level is the lowest mark every durable sink acked; a removed durable
 * sink holds it back until its close completes; after a full close one
 * that did not ack everything keeps it back for good.
 */
static void test_durable_level(void **state)
{
	struct env *e = *state;
	struct ktel_err err = {0};

	n_levels = 0;
	ktel_router__on_durable(e->r, on_level, NULL);
	assert_int_equal(ktel_router__add_sink_ops(e->r, "d1", &durable_ops, NULL, &err), 0);
	assert_int_equal(ktel_router__add_sink_ops(e->r, "d2", &durable_ops, NULL, &err), 0);
	assert_true(ktel_router__any_durable(e->r));
	assert_int_equal(ktel_router__mark(e->r), 1);
	assert_int_equal(fake_named("d1")->marked, 1);
	assert_int_equal(fake_named("a")->records, 0);
	assert_int_equal(ktel_router__durable_level(e->r), 0);
	ack("d1", 1);
	assert_int_equal(n_levels, 0);
	ack("d2", 1);
	assert_int_equal(n_levels, 1);
	assert_int_equal(levels[0], 1);
	/* d1 removed with mark 2 not acked: it holds the level until closed. */
	assert_int_equal(ktel_router__mark(e->r), 2);
	ack("d2", 2);
	assert_int_equal(ktel_router__remove_sink(e->r, "d1", 100, NULL, NULL), 0);
	assert_int_equal(ktel_router__durable_level(e->r), 1);
	uv_run(&e->loop, UV_RUN_DEFAULT);
	assert_int_equal(ktel_router__durable_level(e->r), 2);
	assert_int_equal(n_levels, 2);
	assert_int_equal(levels[1], 2);
	/* A full close: d2 closes without acking 3, the level stays at 2. */
	assert_int_equal(ktel_router__mark(e->r), 3);
	ktel_router__close(e->r, 100, NULL, NULL);
	uv_run(&e->loop, UV_RUN_DEFAULT);
	assert_int_equal(ktel_router__durable_level(e->r), 2);
	assert_int_equal(n_levels, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_durable_none, setup, teardown),
		cmocka_unit_test_setup_teardown(test_durable_level, setup, teardown),
		cmocka_unit_test_setup_teardown(test_route_all_and_subset, setup, teardown),
		cmocka_unit_test_setup_teardown(test_batch_in_parts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stats_and_self_records, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove_sink, setup, teardown),
		cmocka_unit_test_setup_teardown(test_close_all, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
