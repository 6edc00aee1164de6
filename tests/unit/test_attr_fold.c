// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Attribution (core/engine/attr_fold.c, attr_names.c): the fold's invariant
 * on random windows (the sum over attribution values equals the input,
 * bucket by bucket; at most K + 2 values; running totals never fall),
 * stickiness, the churn budget, several ids of one name summed, series
 * ending (eviction, release; a name another id carries goes on); then the
 * names: scope collapsing, hostile characters, the cgroup walk over a test
 * directory, the mountinfo parser, Android app classes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attr_fold.h"
#include "attr_names.h"
#include "ktel_test.h"

#define MAX_OUT 4096
#define N_CPUS 3

/* ---- a fake resolver: id -> "n<id / group>", ids >= 1000000 unknown ------- */

struct names {
	uint64_t group; /* ids per name: several ids with one name */
};

static const char *resolve(void *ctx, uint64_t id, char *buf, size_t len)
{
	const struct names *n = ctx;

	if (id >= 1000000)
		return NULL;
	snprintf(buf, len, "n%llu", (unsigned long long)(id / n->group));
	return buf;
}

/* ---- what the fold emitted ---------------------------------------------- */

struct out_rec {
	int64_t cpu;
	char label[64];
	uint64_t counts[KTEL_HIST_BUCKETS], sum;
	uint64_t total_count;
	bool end; /* series_end */
};

struct sink {
	struct out_rec recs[MAX_OUT];
	size_t n;
};

static void collect(void *ctx, const struct ktel_record *recs, size_t n)
{
	struct sink *s = ctx;

	for (size_t i = 0; i < n; i++) {
		struct out_rec *o = &s->recs[s->n++];
		const struct ktel_record *r = &recs[i];

		assert_true(s->n <= MAX_OUT);
		assert_int_equal(r->type, KTEL_RECORD_HISTOGRAM);
		assert_int_equal(r->n_dims, 2);
		assert_string_equal(r->dims[0].name, "cpu");
		assert_string_equal(r->dims[1].name, "cgroup");
		assert_non_null(r->dims[1].label);
		assert_true(r->dims[1].derived);
		o->cpu = r->dims[0].value;
		snprintf(o->label, sizeof(o->label), "%s", r->dims[1].label);
		memcpy(o->counts, r->hist.delta.counts, sizeof(o->counts));
		o->sum = r->hist.delta.sum;
		o->total_count = ktel_hist_count(&r->hist.total);
		o->end = r->series_end;
		/* An end carries no delta. */
		if (o->end)
			assert_int_equal(ktel_hist_count(&r->hist.delta), 0);
	}
}

static struct ktel_record hist_rec(int64_t cpu, uint64_t id, const uint64_t *counts, uint64_t sum)
{
	struct ktel_record r = {
		.type = KTEL_RECORD_HISTOGRAM,
		.metric = "runq_latency",
		.unit = "us",
		.n_dims = 2,
	};

	r.dims[0] = (struct ktel_dim){.name = "cpu", .value = cpu};
	r.dims[1] = (struct ktel_dim){.name = "cgroup", .value = (int64_t)id};
	r.hist.delta.scheme = KTEL_HIST_LOG2;
	r.hist.delta.n_buckets = KTEL_HIST_BUCKETS;
	r.hist.delta.has_sum = true;
	memcpy(r.hist.delta.counts, counts, sizeof(r.hist.delta.counts));
	r.hist.delta.sum = sum;
	r.hist.total = r.hist.delta;
	return r;
}

static struct ktel_attr_fold *new_fold(uint32_t top, uint32_t sticky, uint32_t churn,
				       struct names *names)
{
	struct ktel_attr_fold_opts o = {
		.dim_name = "cgroup",
		.top = top,
		.sticky_windows = sticky,
		.churn_per_hour = churn,
		.resolve = resolve,
		.resolve_ctx = names,
	};
	struct ktel_attr_fold *f = NULL;
	struct ktel_err err;

	assert_int_equal(ktel_attr_fold__new(&o, &f, &err), 0);
	return f;
}

/* xorshift: a fixed seed, so a failure is reproducible. */
static uint64_t rnd_state = 0x2545f4914f6cdd1dULL;
static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

/* Distinct labels of a window's output. */
static size_t n_labels(const struct sink *s)
{
	size_t n = 0;

	for (size_t i = 0; i < s->n; i++) {
		bool seen = s->recs[i].end; /* an end exports no value */

		for (size_t j = 0; j < i && !seen; j++)
			seen = strcmp(s->recs[j].label, s->recs[i].label) == 0;
		n += !seen;
	}
	return n;
}

struct running {
	int64_t cpu;
	char label[64];
	uint64_t total;
};

/*
 * Random windows: ids of many names (some unknown, some the kernel's
 * overflow), random histograms. Per window and CPU, the output equals the
 * input bucket by bucket; at most K + 2 values; each output series' total
 * never falls while it lives.
 */
static void test_invariant_random(void **state)
{
	enum {
		K = 5,
		WINDOWS = 60
	};
	struct names names = {.group = 3};
	struct ktel_attr_fold *f = new_fold(K, 4, 4 * K, &names);
	static struct sink sink;
	static struct running run[MAX_OUT];
	struct ktel_attr_fold_stats st;
	uint64_t events = 0;
	size_t n_run = 0;
	struct ktel_err err;

	(void)state;
	for (int w = 0; w < WINDOWS; w++) {
		uint64_t in[N_CPUS][KTEL_HIST_BUCKETS] = {{0}}, in_sum[N_CPUS] = {0};
		uint64_t out[N_CPUS][KTEL_HIST_BUCKETS] = {{0}}, out_sum[N_CPUS] = {0};
		size_t n_in = rnd() % 80;

		ktel_attr_fold__begin(f);
		for (size_t i = 0; i < n_in; i++) {
			uint64_t counts[KTEL_HIST_BUCKETS] = {0}, sum = rnd() % 100000, id;
			int64_t cpu = (int64_t)(rnd() % N_CPUS);
			struct ktel_record r;

			switch (rnd() % 10) {
			case 0:
				id = KTEL_ATTR_OVERFLOW_ID;
				break;
			case 1:
				id = 1000000 + rnd() % 5; /* unresolvable */
				break;
			case 2:
				id = KTEL_ATTR_UNKNOWN_ID;
				break;
			default:
				/* Skewed: low ids are busy, so the ranking matters. */
				id = (rnd() % 40) * (rnd() % 3 == 0 ? 1 : 0) + rnd() % 12;
			}
			for (int b = 0; b < 6; b++)
				counts[rnd() % KTEL_HIST_BUCKETS] += rnd() % 50;
			r = hist_rec(cpu, id, counts, sum);
			for (int b = 0; b < KTEL_HIST_BUCKETS; b++) {
				in[cpu][b] += counts[b];
				events += counts[b];
			}
			in_sum[cpu] += sum;
			ktel_attr_fold__add(f, &r, 1);
		}
		sink.n = 0;
		assert_true(ktel_attr_fold__end(f, (uint64_t)w * 60000000000ULL, collect, &sink,
						&err) >= 0);
		assert_true(n_labels(&sink) <= K + 2);
		for (size_t i = 0; i < sink.n; i++) {
			const struct out_rec *o = &sink.recs[i];
			size_t j;

			for (int b = 0; b < KTEL_HIST_BUCKETS; b++)
				out[o->cpu][b] += o->counts[b];
			out_sum[o->cpu] += o->sum;
			for (j = 0; j < n_run; j++)
				if (run[j].cpu == o->cpu && strcmp(run[j].label, o->label) == 0)
					break;
			if (j == n_run) {
				run[n_run].cpu = o->cpu;
				snprintf(run[j].label, sizeof(run[j].label), "%s", o->label);
				run[n_run++].total = 0;
			}
			/* A series restarts only after it ended (its name
			 * evicted), from its first window again; its end
			 * carries the total it had. */
			assert_true(o->total_count >= run[j].total);
			if (o->end) {
				assert_true(strcmp(o->label, KTEL_ATTR_OTHER) != 0 &&
					    strcmp(o->label, KTEL_ATTR_UNKNOWN) != 0);
				run[j].total = 0;
			} else {
				run[j].total = o->total_count;
			}
		}
		for (int c = 0; c < N_CPUS; c++) {
			assert_memory_equal(in[c], out[c], sizeof(in[c]));
			assert_int_equal(in_sum[c], out_sum[c]);
		}
		/* Its own account of the same: every event taken in was
		 * handed on in a record a delta sink writes. */
		ktel_attr_fold__stats(f, &st);
		assert_int_equal(st.events_in, events);
		assert_int_equal(st.events_out, events);
	}
	ktel_attr_fold__free(f);
}

/* ---- keys (ktel_attr_fold__add_key) against records --------------------- */

/* A key as a pull hands it on: its bytes, its record made on demand. */
struct test_key {
	int64_t cpu;
	uint64_t id;
};

struct key_ctx {
	struct test_key k;
	uint64_t derived;
	uint64_t vals[KTEL_HIST_BUCKETS + 1];
	struct ktel_record rec;
};

/* The record the key makes: cpu, the id, and a derived "device" when the
 * pull would add one (as metric_pull's fill_device does). */
static struct ktel_record key_rec(const struct key_ctx *c)
{
	struct ktel_record r = hist_rec(c->k.cpu, c->k.id, c->vals, c->vals[KTEL_HIST_BUCKETS]);

	if (c->derived != KTEL_PULL_NO_DERIVED)
		r.dims[r.n_dims++] = (struct ktel_dim){
			.name = "device",
			.value = (int64_t)c->derived,
			.label = c->derived == 7 ? "sda" : "sdb",
			.derived = true,
		};
	return r;
}

/* Records of a batch of keys: place i's (the batch's priv). */
struct batch_ctx {
	struct key_ctx **c;
	int made; /* records asked for */
};

static const struct ktel_record *key_record(const struct ktel_pull_keys *b, size_t i)
{
	struct batch_ctx *bc = b->priv;
	struct key_ctx *c = bc->c[i];

	c->rec = key_rec(c);
	bc->made++;
	return &c->rec;
}

/* Output records as sorted text lines: two folds' outputs compared whatever
 * the order of their series. */
struct lines {
	char v[MAX_OUT][400];
	size_t n;
};

static int cmp_line(const void *a, const void *b)
{
	return strcmp(a, b);
}

static void collect_lines(void *ctx, const struct ktel_record *recs, size_t n)
{
	struct lines *l = ctx;

	for (size_t i = 0; i < n; i++) {
		const struct ktel_record *r = &recs[i];
		char *p = l->v[l->n++];
		int o;

		assert_true(l->n <= MAX_OUT);
		o = snprintf(p, 400, "%s end=%d sum=%llu/%llu", r->metric, r->series_end,
			     (unsigned long long)r->hist.delta.sum,
			     (unsigned long long)r->hist.total.sum);
		for (uint32_t d = 0; d < r->n_dims; d++)
			o += snprintf(p + o, 400 - (size_t)o, " %s=%lld/%s", r->dims[d].name,
				      (long long)r->dims[d].value,
				      r->dims[d].label ? r->dims[d].label : "-");
		for (int b = 0; b < KTEL_HIST_BUCKETS; b++)
			o += snprintf(p + o, 400 - (size_t)o, " %llu/%llu",
				      (unsigned long long)r->hist.delta.counts[b],
				      (unsigned long long)r->hist.total.counts[b]);
		assert_true(o < 400);
	}
}

/*
 * The same windows folded from records (_add) and from keys (_add_key):
 * the same records out and the same stats. The keys keep their places
 * from window to window, as a map's keys do, except that some move (two
 * places swap), some places get another key, keys come and go, and a
 * key's derived device comes and goes: a place's key is trusted only as
 * far as its bytes and derived value say it is the same.
 */
static void keys_fold_as_records(size_t batch)
{
	enum {
		K = 4,
		PLACES = 48,
		WINDOWS = 80
	};
	struct names names = {.group = 2};
	struct ktel_attr_fold *fr = new_fold(K, 3, 6, &names), *fk = new_fold(K, 3, 6, &names);
	static struct lines lr, lk;
	static struct key_ctx place[PLACES];
	struct ktel_attr_fold_stats sr, sk;
	struct ktel_err err;
	struct key_ctx *batch_c[PLACES];
	struct ktel_pull_key batch_k[PLACES];
	struct batch_ctx bc = {.c = batch_c};
	size_t n_batch = 0;

	for (int i = 0; i < PLACES; i++) {
		place[i].k = (struct test_key){.cpu = i % N_CPUS, .id = (uint64_t)i / N_CPUS};
		place[i].derived = KTEL_PULL_NO_DERIVED;
	}
	for (int w = 0; w < WINDOWS; w++) {
		struct ktel_record head = hist_rec(0, 0, (uint64_t[KTEL_HIST_BUCKETS]){0}, 0);

		/* The map changes between pulls. */
		for (int c = 0; c < 3; c++) {
			size_t a = rnd() % PLACES, b = rnd() % PLACES;
			struct key_ctx t = place[a];

			switch (rnd() % 4) {
			case 0: /* two keys swap places */
				place[a] = place[b];
				place[b] = t;
				break;
			case 1: /* another key at a place */
				place[a].k.id = rnd() % 3 == 0   ? KTEL_ATTR_OVERFLOW_ID
						: rnd() % 5 == 0 ? 1000000 + rnd() % 3
								 : rnd() % 40;
				break;
			case 2: /* a device named or no longer */
				place[a].derived = place[a].derived == KTEL_PULL_NO_DERIVED
							   ? 7 + rnd() % 2
							   : KTEL_PULL_NO_DERIVED;
				break;
			default:
				place[a].k.cpu = (int64_t)(rnd() % N_CPUS);
			}
		}
		ktel_attr_fold__begin(fr);
		ktel_attr_fold__begin(fk);
		n_batch = 0;
		for (size_t i = 0; i < PLACES; i++) {
			struct key_ctx *c = &place[i];
			struct ktel_record r;

			/* Busy low ids keep the K places taken: the windows
			 * fold the others into other at once. */
			if (c->k.id > 6 && rnd() % 3 == 0)
				continue; /* no events: not emitted */
			memset(c->vals, 0, sizeof(c->vals));
			for (int b = 0; b < 4; b++)
				c->vals[rnd() % KTEL_HIST_BUCKETS] += 1 + rnd() % 20;
			c->vals[KTEL_HIST_BUCKETS] = rnd() % 1000;
			r = key_rec(c);
			ktel_attr_fold__add(fr, &r, 1);
			batch_c[n_batch] = c;
			batch_k[n_batch++] = (struct ktel_pull_key){
				.pos = i,
				.key = &c->k,
				.id = c->k.id,
				.derived = c->derived,
				.vals = c->vals,
			};
		}
		/* In batches, as a pull's windows. */
		for (size_t i = 0; i < n_batch; i += batch) {
			struct ktel_pull_keys b = {
				.k = &batch_k[i],
				.n = n_batch - i < batch ? n_batch - i : batch,
				.key_size = sizeof(struct test_key),
				.n_vals = KTEL_HIST_BUCKETS + 1,
				.head = &head,
				.record = key_record,
				.priv = &bc,
			};

			bc.c = &batch_c[i];
			ktel_attr_fold__add_keys(fk, &b);
		}
		lr.n = lk.n = 0;
		assert_true(ktel_attr_fold__end(fr, (uint64_t)w * 60000000000ULL, collect_lines,
						&lr, &err) >= 0);
		assert_true(ktel_attr_fold__end(fk, (uint64_t)w * 60000000000ULL, collect_lines,
						&lk, &err) >= 0);
		assert_int_equal(lr.n, lk.n);
		qsort(lr.v, lr.n, sizeof(lr.v[0]), cmp_line);
		qsort(lk.v, lk.n, sizeof(lk.v[0]), cmp_line);
		for (size_t i = 0; i < lr.n; i++)
			assert_string_equal(lr.v[i], lk.v[i]);
		ktel_attr_fold__stats(fr, &sr);
		ktel_attr_fold__stats(fk, &sk);
		assert_memory_equal(&sr, &sk, sizeof(sr));
	}
	/* Most keys were folded from their deltas alone. */
	assert_true(bc.made > 0 && bc.made < PLACES * WINDOWS / 4);
	ktel_attr_fold__free(fr);
	ktel_attr_fold__free(fk);
}

/* In batches of a few keys, fewer than the fold fetches ahead. */
static void test_keys_fold_as_records(void **state)
{
	(void)state;
	keys_fold_as_records(5);
}

/* In batches longer than the fold fetches ahead (its id slots 16 keys
 * ahead, names 8): the fetching runs into the batch's end. */
static void test_keys_fold_as_records_long_batches(void **state)
{
	(void)state;
	keys_fold_as_records(40);
}

static uint64_t label_count(const struct sink *s, const char *label)
{
	uint64_t n = 0;

	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->recs[i].label, label) == 0)
			for (int b = 0; b < KTEL_HIST_BUCKETS; b++)
				n += s->recs[i].counts[b];
	return n;
}

static void window(struct ktel_attr_fold *f, struct sink *s, uint64_t now_ns, const uint64_t *ids,
		   const uint64_t *events, size_t n)
{
	struct ktel_err err;

	ktel_attr_fold__begin(f);
	for (size_t i = 0; i < n; i++) {
		uint64_t counts[KTEL_HIST_BUCKETS] = {0};
		struct ktel_record r;

		counts[3] = events[i];
		r = hist_rec(0, ids[i], counts, 0);
		ktel_attr_fold__add(f, &r, 1);
	}
	s->n = 0;
	assert_true(ktel_attr_fold__end(f, now_ns, collect, s, &err) >= 0);
}

/* Several ids with one name are one series; the top K by events win. */
static void test_ids_summed_and_ranked(void **state)
{
	struct names names = {.group = 10}; /* ids 10..19 are all "n1" */
	struct ktel_attr_fold *f = new_fold(2, 3, 100, &names);
	static struct sink s;
	uint64_t ids[] = {10, 11, 12, 20, 30, KTEL_ATTR_OVERFLOW_ID, 1000001};
	uint64_t ev[] = {5, 5, 5, 9, 1, 7, 2};

	(void)state;
	window(f, &s, 0, ids, ev, 7);
	assert_int_equal(label_count(&s, "n1"), 15);
	assert_int_equal(label_count(&s, "n2"), 9);
	/* n3 did not make the top 2: other = n3 + the kernel's overflow. */
	assert_int_equal(label_count(&s, KTEL_ATTR_OTHER), 1 + 7);
	assert_int_equal(label_count(&s, KTEL_ATTR_UNKNOWN), 2);
	{
		struct ktel_attr_fold_stats st;

		ktel_attr_fold__stats(f, &st);
		assert_int_equal(st.folded_kernel, 7);
		assert_int_equal(st.folded_user, 1);
		assert_int_equal(st.admitted, 2);
		assert_int_equal(st.values_last, 4);
	}
	ktel_attr_fold__free(f);
}

/* ---- a resolver that says when names change ------------------------------ */

struct gen_names {
	uint64_t gen;
	const char *name1; /* id 1's name; id 2 is "b", others unknown */
	bool used_ok;      /* what used answers */
	int resolves, useds;
	uint64_t hint_seen; /* the hint used last got */
};

static const char *gen_resolve(void *ctx, uint64_t id, char *buf, size_t len)
{
	struct gen_names *g = ctx;

	g->resolves++;
	if (id > 2)
		return NULL;
	snprintf(buf, len, "%s", id == 1 ? g->name1 : "b");
	return buf;
}

static uint64_t gen_generation(void *ctx)
{
	return ((struct gen_names *)ctx)->gen;
}

static bool gen_used(void *ctx, uint64_t id, uint64_t *hint)
{
	struct gen_names *g = ctx;

	g->useds++;
	g->hint_seen = *hint;
	if (!g->used_ok)
		return false;
	*hint = id + 100;
	return true;
}

/*
 * With a generation, an id named in an earlier window is not resolved
 * again while the generation stays (used is called instead, once per id
 * and window, with the hint it left); a new generation, a used that says
 * no, or an id that did not resolve, is resolved as before: a rename is
 * seen at once.
 */
static void test_generation_skips_resolve(void **state)
{
	struct gen_names g = {.gen = 5, .name1 = "a", .used_ok = true};
	struct ktel_attr_fold_opts o = {
		.dim_name = "cgroup",
		.top = 10,
		.sticky_windows = 3,
		.churn_per_hour = 100,
		.resolve = gen_resolve,
		.resolve_ctx = &g,
		.generation = gen_generation,
		.used = gen_used,
	};
	struct ktel_attr_fold *f = NULL;
	struct ktel_err err;
	static struct sink s;
	/* Two CPUs' records per id: one resolve or used per id and window. */
	uint64_t ids[] = {1, 2, 3, 1, 2, 3};
	uint64_t ev[] = {1, 2, 4, 1, 2, 4};

	(void)state;
	assert_int_equal(ktel_attr_fold__new(&o, &f, &err), 0);
	window(f, &s, 0, ids, ev, 6);
	assert_int_equal(g.resolves, 3);
	assert_int_equal(g.useds, 0);
	assert_int_equal(label_count(&s, "a"), 2);

	/* Nothing changed: ids 1 and 2 are only noted as used; 3 is unknown
	 * and resolved again (a walk may find it). */
	window(f, &s, 1, ids, ev, 6);
	assert_int_equal(g.resolves, 4);
	assert_int_equal(g.useds, 2);
	assert_int_equal(g.hint_seen, 0);
	assert_int_equal(label_count(&s, "a"), 2);
	assert_int_equal(label_count(&s, "b"), 4);
	assert_int_equal(label_count(&s, KTEL_ATTR_UNKNOWN), 8);
	window(f, &s, 2, ids, ev, 6);
	assert_int_equal(g.resolves, 5);
	assert_int_equal(g.useds, 4);
	assert_true(g.hint_seen == 101 || g.hint_seen == 102);

	/* Renamed under a new generation: resolved, the new name counted. */
	g.gen++;
	g.name1 = "c";
	window(f, &s, 3, ids, ev, 6);
	assert_int_equal(g.resolves, 8);
	assert_int_equal(g.useds, 4);
	assert_int_equal(label_count(&s, "c"), 2);
	assert_int_equal(label_count(&s, "a"), 0);

	/* used says no: resolved. */
	g.used_ok = false;
	window(f, &s, 4, ids, ev, 6);
	assert_int_equal(g.resolves, 11);
	assert_int_equal(g.useds, 6);
	assert_int_equal(label_count(&s, "c"), 2);

	/* Generation 0: every window resolves, used is not asked. */
	g.used_ok = true;
	g.gen = 0;
	window(f, &s, 5, ids, ev, 6);
	window(f, &s, 6, ids, ev, 6);
	assert_int_equal(g.resolves, 17);
	assert_int_equal(g.useds, 6);
	ktel_attr_fold__free(f);

	/* One of the two alone is refused. */
	o.used = NULL;
	assert_int_equal(ktel_attr_fold__new(&o, &f, &err), -EINVAL);
}

/* A resolver that never changes a name: the fold takes an id's name from
 * its cache for as long as the fold's name entry lives. */
static uint64_t const_generation(void *ctx)
{
	(void)ctx;
	return 1;
}

static bool const_used(void *ctx, uint64_t id, uint64_t *hint)
{
	(void)ctx;
	(void)id;
	(void)hint;
	return true;
}

/* Window of ids first..first+n-1 (id i with i + 1 - first events), and
 * extra_id with extra_events when extra_events is not 0. */
static void id_range_window(struct ktel_attr_fold *f, struct sink *s, int w, uint64_t first,
			    uint64_t n, uint64_t extra_id, uint64_t extra_events)
{
	static uint64_t ids[400], ev[400];
	size_t k = 0;

	for (uint64_t i = 0; i < n; i++, k++) {
		ids[k] = first + i;
		ev[k] = i + 1;
	}
	if (extra_events) {
		ids[k] = extra_id;
		ev[k++] = extra_events;
	}
	window(f, s, (uint64_t)w * 60000000000ULL, ids, ev, k);
}

/*
 * The fold's name entries come in chunks and go back to a free list when
 * a name is forgotten: more names than a chunk holds, forgotten, then as
 * many new ones in the entries they freed. An id whose name entry was
 * freed and taken by another name is named again, not by the entry's new
 * name, though the resolver says nothing changed.
 */
static void test_name_entries_reused(void **state)
{
	struct names names = {.group = 1};
	struct ktel_attr_fold_opts o = {
		.dim_name = "cgroup",
		.top = 1000,
		.sticky_windows = 2,
		.churn_per_hour = 1000000,
		.resolve = resolve,
		.resolve_ctx = &names,
		.generation = const_generation,
		.used = const_used,
	};
	struct ktel_attr_fold *f = NULL;
	struct ktel_attr_fold_stats st;
	struct ktel_err err;
	static struct sink s;
	int w = 0;

	(void)state;
	assert_int_equal(ktel_attr_fold__new(&o, &f, &err), 0);
	id_range_window(f, &s, w++, 0, 300, 0, 0);
	ktel_attr_fold__stats(f, &st);
	assert_int_equal(st.tracked, 300);
	assert_int_equal(label_count(&s, "n299"), 300);
	assert_int_equal(label_count(&s, "n298"), 299);
	assert_int_equal(label_count(&s, KTEL_ATTR_OTHER), 0);
	/* New names; the first 300 go quiet and are forgotten. */
	for (int i = 0; i < 3; i++) {
		id_range_window(f, &s, w++, 1000, 300, 0, 0);
		assert_int_equal(label_count(&s, "n299"), 0);
	}
	ktel_attr_fold__stats(f, &st);
	assert_int_equal(st.tracked, 300);
	/* As many newer ones, in the freed entries; id 5 again, its entry
	 * long since taken by another name. */
	for (int i = 0; i < 3; i++) {
		id_range_window(f, &s, w++, 2000, 300, 5, 100000);
		ktel_attr_fold__stats(f, &st);
		assert_int_equal(label_count(&s, "n5"), 100000);
		assert_int_equal(label_count(&s, KTEL_ATTR_UNKNOWN), 0);
		assert_int_equal(st.events_in, st.events_out);
	}
	assert_int_equal(st.tracked, 301);
	/* And back: the first ids, every one named as before. */
	id_range_window(f, &s, w++, 0, 300, 5, 100000);
	assert_int_equal(label_count(&s, "n5"), 100000 + 6);
	assert_int_equal(label_count(&s, "n2299"), 0);
	assert_int_equal(label_count(&s, "n299"), 300);
	ktel_attr_fold__stats(f, &st);
	assert_int_equal(st.tracked, 600);
	ktel_attr_fold__free(f);
}

/* An admitted name stays while it had events in the last W windows, even
 * when a busier newcomer shows up; then it leaves and the newcomer enters. */
static void test_sticky(void **state)
{
	struct names names = {.group = 1};
	struct ktel_attr_fold *f = new_fold(1, 3, 100, &names);
	static struct sink s;
	uint64_t a[] = {1}, ab[] = {1, 2}, b[] = {2};
	uint64_t ev1[] = {5}, ev2[] = {1, 50}, evb[] = {50};

	(void)state;
	window(f, &s, 0, a, ev1, 1);
	assert_int_equal(label_count(&s, "n1"), 5);
	/* n2 is busier but n1 is admitted and active: n2 waits in other. */
	window(f, &s, 1, ab, ev2, 2);
	assert_int_equal(label_count(&s, "n1"), 1);
	assert_int_equal(label_count(&s, KTEL_ATTR_OTHER), 50);
	/* n1 quiet for 1 and 2 windows: still admitted (W = 3). */
	window(f, &s, 2, b, evb, 1);
	assert_int_equal(label_count(&s, KTEL_ATTR_OTHER), 50);
	window(f, &s, 3, b, evb, 1);
	assert_int_equal(label_count(&s, KTEL_ATTR_OTHER), 50);
	/* Third quiet window: n1 evicted, n2 admitted. */
	window(f, &s, 4, b, evb, 1);
	assert_int_equal(label_count(&s, "n2"), 50);
	assert_int_equal(label_count(&s, KTEL_ATTR_OTHER), 0);
	ktel_attr_fold__free(f);
}

/* The records of label in s: ends and others, and the last one's total. */
static void count_recs(const struct sink *s, const char *label, size_t *ret_ends,
		       size_t *ret_others, uint64_t *ret_end_total)
{
	*ret_ends = *ret_others = 0;
	for (size_t i = 0; i < s->n; i++) {
		if (strcmp(s->recs[i].label, label) != 0)
			continue;
		if (s->recs[i].end)
			(*ret_ends)++;
		else
			(*ret_others)++;
		*ret_end_total = s->recs[i].total_count;
	}
}

/*
 * Every place taken and every admitted name busy: the windows in between
 * fold the others into other as they come, counted as folded. When an
 * admitted name goes quiet, the window whose end evicts it keeps the
 * newcomer's own events: it is admitted with that window's delta, not
 * with an empty one and not from other. A release lets a newcomer in the
 * same way.
 */
static void test_full_then_handover(void **state)
{
	struct names names = {.group = 1};
	struct ktel_attr_fold *f = new_fold(2, 2, 100, &names);
	static struct sink s;
	uint64_t abc[] = {1, 2, 3}, bc[] = {2, 3}, ac[] = {1, 3};
	uint64_t ev3[] = {50, 40, 7}, ev2[] = {40, 7}, ev2b[] = {50, 9};
	struct ktel_attr_fold_stats st;

	(void)state;
	window(f, &s, 0, abc, ev3, 3); /* n1 and n2 admitted */
	assert_int_equal(label_count(&s, "n1"), 50);
	assert_int_equal(label_count(&s, "other"), 7);
	for (uint64_t w = 1; w <= 3; w++) {
		window(f, &s, w, abc, ev3, 3);
		assert_int_equal(label_count(&s, "n1"), 50);
		assert_int_equal(label_count(&s, "n2"), 40);
		assert_int_equal(label_count(&s, "other"), 7);
		assert_int_equal(label_count(&s, "n3"), 0);
	}
	ktel_attr_fold__stats(f, &st);
	assert_int_equal(st.folded_user, 4 * 7);
	/* n1 quiet: kept a window (sticky 2), evicted at the next's end,
	 * where n3 takes its place with that window's own 7. */
	window(f, &s, 4, bc, ev2, 2);
	assert_int_equal(label_count(&s, "n3"), 0);
	assert_int_equal(label_count(&s, "other"), 7);
	window(f, &s, 5, bc, ev2, 2);
	assert_int_equal(label_count(&s, "n3"), 7);
	assert_int_equal(label_count(&s, "other"), 0);
	ktel_attr_fold__stats(f, &st);
	assert_int_equal(st.folded_user, 5 * 7);
	assert_int_equal(st.admitted, 2);
	/* Full again (n2, n3), n1 back but folded. A release of n2, quiet
	 * from now: the next window ends it and admits n1 with that window's
	 * 50. */
	window(f, &s, 6, abc, ev3, 3);
	assert_int_equal(label_count(&s, "n1"), 0);
	assert_int_equal(label_count(&s, "other"), 50);
	ktel_attr_fold__release(f, "n2");
	window(f, &s, 7, ac, ev2b, 2);
	assert_int_equal(label_count(&s, "n1"), 50);
	assert_int_equal(label_count(&s, "n3"), 9);
	assert_int_equal(label_count(&s, "other"), 0);
	ktel_attr_fold__free(f);
}

/* An evicted name's series end with one record each (series_end, no delta,
 * the last total): a sink that keeps totals forgets them, so the name's
 * next admission starts a new series from zero without a fall. */
static void test_eviction_ends_series(void **state)
{
	struct names names = {.group = 1};
	struct ktel_attr_fold *f = new_fold(1, 2, 100, &names);
	static struct sink s;
	uint64_t a[] = {1}, b[] = {2}, ev[] = {5};
	size_t ends, others;
	uint64_t total = 0;

	(void)state;
	window(f, &s, 0, a, ev, 1);
	window(f, &s, 1, a, ev, 1);
	count_recs(&s, "n1", &ends, &others, &total);
	assert_int_equal(ends, 0);
	window(f, &s, 2, b, ev, 1);
	count_recs(&s, "n1", &ends, &others, &total);
	assert_int_equal(ends, 0);
	/* Second quiet window (W = 2): evicted, its series end. */
	window(f, &s, 3, b, ev, 1);
	count_recs(&s, "n1", &ends, &others, &total);
	assert_int_equal(ends, 1);
	assert_int_equal(others, 0);
	assert_int_equal(total, 10);
	/* Never again, until it is admitted anew, from zero. */
	window(f, &s, 4, b, ev, 1);
	count_recs(&s, "n1", &ends, &others, &total);
	assert_int_equal(ends + others, 0);
	{
		struct ktel_attr_fold_stats st;

		ktel_attr_fold__stats(f, &st);
		assert_int_equal(st.ended, 1);
		assert_int_equal(st.evictions, 1);
	}
	ktel_attr_fold__free(f);
}

/*
 * A released name (its cgroup released, no other id has its name) ends at
 * the first window without events: one end record per series with the
 * last total, and the fold forgets it (no more records, nothing tracked).
 * A release followed by events (a new id of the name) is not taken; a name
 * the fold never saw is ignored.
 */
static void test_release_ends_series(void **state)
{
	struct names names = {.group = 1};
	struct ktel_attr_fold *f = new_fold(3, 100, 100, &names);
	static struct sink s;
	uint64_t ab[] = {1, 2}, b[] = {2}, ev2[] = {5, 7}, ev1[] = {7};
	struct ktel_attr_fold_stats st;
	size_t ends, others;
	uint64_t total = 0;

	(void)state;
	window(f, &s, 0, ab, ev2, 2);
	ktel_attr_fold__release(f, "n1");
	ktel_attr_fold__release(f, "never-seen");
	window(f, &s, 1, b, ev1, 1);
	count_recs(&s, "n1", &ends, &others, &total);
	assert_int_equal(ends, 1);
	assert_int_equal(others, 0);
	assert_int_equal(total, 5);
	count_recs(&s, "n2", &ends, &others, &total);
	assert_int_equal(ends, 0);
	assert_int_equal(others, 1);
	ktel_attr_fold__stats(f, &st);
	assert_int_equal(st.released, 1);
	assert_int_equal(st.ended, 1);
	assert_int_equal(st.admitted, 1);
	assert_int_equal(st.tracked, 1);
	window(f, &s, 2, b, ev1, 1);
	count_recs(&s, "n1", &ends, &others, &total);
	assert_int_equal(ends + others, 0);
	/* Released, then events under it in the same window: it goes on. */
	ktel_attr_fold__release(f, "n2");
	window(f, &s, 3, b, ev1, 1);
	window(f, &s, 4, b, ev1, 1);
	count_recs(&s, "n2", &ends, &others, &total);
	assert_int_equal(ends, 0);
	assert_int_equal(others, 1);
	assert_int_equal(total, 5 * 7);
	ktel_attr_fold__free(f);
}

/* At most churn_per_hour admissions per hour; the budget refills with time. */
static void test_churn_budget(void **state)
{
	struct names names = {.group = 1};
	struct ktel_attr_fold *f = new_fold(10, 1, 2, &names);
	static struct sink s;
	uint64_t ids[] = {1, 2, 3, 4}, ev[] = {4, 3, 2, 1};
	const uint64_t min = 60ULL * 1000000000ULL;

	(void)state;
	window(f, &s, 0, ids, ev, 4);
	/* Budget 2: the two busiest, the rest in other. */
	assert_int_equal(label_count(&s, "n1"), 4);
	assert_int_equal(label_count(&s, "n2"), 3);
	assert_int_equal(label_count(&s, KTEL_ATTR_OTHER), 3);
	/* Ten minutes later: a third of a token, nobody new. */
	window(f, &s, 10 * min, ids, ev, 4);
	assert_int_equal(label_count(&s, KTEL_ATTR_OTHER), 3);
	/* Forty minutes after the start: one more token (and a third). */
	window(f, &s, 40 * min, ids, ev, 4);
	assert_int_equal(label_count(&s, "n3"), 2);
	assert_int_equal(label_count(&s, KTEL_ATTR_OTHER), 1);
	ktel_attr_fold__free(f);
}

/* An admitted series' running total is the fold's own: it grows by each
 * window's delta however many ids made it. */
static void test_totals_monotonic(void **state)
{
	struct names names = {.group = 100};
	struct ktel_attr_fold *f = new_fold(3, 5, 100, &names);
	static struct sink s;
	uint64_t prev = 0;

	(void)state;
	for (int w = 0; w < 10; w++) {
		/* A new id each window (a restarted service), one name. */
		uint64_t ids[] = {(uint64_t)w}, ev[] = {(uint64_t)w + 1};

		window(f, &s, (uint64_t)w, ids, ev, 1);
		assert_int_equal(s.n, 1);
		assert_string_equal(s.recs[0].label, "n0");
		assert_int_equal(s.recs[0].total_count, prev + (uint64_t)w + 1);
		prev = s.recs[0].total_count;
	}
	ktel_attr_fold__free(f);
}

/* Total of label's record in s (0 when none). */
static uint64_t label_total(const struct sink *s, const char *label)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->recs[i].label, label) == 0)
			return s->recs[i].total_count;
	return 0;
}

/*
 * The map's history (a reused pinned map): the first window's running
 * totals start from the raw ids' totals, folded by name; the names are
 * ranked by that history; later windows add their deltas; a later history
 * is ignored. _totals gives every series with its total (the names' of the
 * windows), _last the last window again.
 */
static void test_history_last_totals(void **state)
{
	struct names names = {.group = 10};
	struct ktel_attr_fold *f = new_fold(1, 3, 100, &names);
	static struct sink s, t;
	uint64_t counts[KTEL_HIST_BUCKETS] = {0};
	struct ktel_record delta, hist[3];
	struct ktel_err err;

	(void)state;
	ktel_attr_fold__begin(f);
	assert_true(ktel_attr_fold__first_window(f));
	/* This window: 2 events of id 20 ("n2"). */
	counts[3] = 2;
	delta = hist_rec(0, 20, counts, 0);
	counts[3] = 12; /* its total, this window included */
	delta.hist.total = hist_rec(0, 20, counts, 0).hist.delta;
	ktel_attr_fold__add(f, &delta, 1);
	/* The history: ids 10 and 11 ("n1", 100 + 50, no events now), 20
	 * (12), and the kernel's overflow (7). */
	counts[3] = 100;
	hist[0] = hist_rec(0, 10, counts, 0);
	counts[3] = 50;
	hist[1] = hist_rec(0, 11, counts, 0);
	counts[3] = 7;
	hist[2] = hist_rec(0, KTEL_ATTR_OVERFLOW_ID, counts, 0);
	ktel_attr_fold__add_history(f, hist, 3);
	ktel_attr_fold__add_history(f, &delta, 1);
	s.n = 0;
	assert_true(ktel_attr_fold__end(f, 0, collect, &s, &err) >= 0);
	/* K = 1 goes to n1, the larger history; n2's events are other's. */
	assert_int_equal(s.n, 1);
	assert_string_equal(s.recs[0].label, KTEL_ATTR_OTHER);
	assert_int_equal(label_count(&s, KTEL_ATTR_OTHER), 2);
	assert_int_equal(label_total(&s, KTEL_ATTR_OTHER), 12 + 7);
	t.n = 0;
	ktel_attr_fold__totals(f, collect, &t);
	assert_int_equal(t.n, 2);
	assert_int_equal(label_total(&t, "n1"), 150);
	assert_int_equal(label_count(&t, "n1"), 150); /* a total's delta is its total */
	assert_int_equal(label_total(&t, KTEL_ATTR_OTHER), 19);
	t.n = 0;
	ktel_attr_fold__last(f, collect, &t);
	assert_int_equal(t.n, 1);
	assert_int_equal(label_count(&t, KTEL_ATTR_OTHER), 2);

	/* Second window: n1 has 3 events; a history now changes nothing. */
	ktel_attr_fold__begin(f);
	assert_false(ktel_attr_fold__first_window(f));
	counts[3] = 3;
	delta = hist_rec(0, 10, counts, 0);
	ktel_attr_fold__add(f, &delta, 1);
	ktel_attr_fold__add_history(f, hist, 3);
	s.n = 0;
	assert_true(ktel_attr_fold__end(f, 1, collect, &s, &err) >= 0);
	assert_int_equal(s.n, 1);
	assert_int_equal(label_count(&s, "n1"), 3);
	assert_int_equal(label_total(&s, "n1"), 153);
	t.n = 0;
	ktel_attr_fold__last(f, collect, &t);
	assert_int_equal(t.n, 1);
	assert_int_equal(label_count(&t, "n1"), 3);
	t.n = 0;
	ktel_attr_fold__totals(f, collect, &t);
	assert_int_equal(t.n, 2);
	assert_int_equal(label_total(&t, "n1"), 153);
	assert_int_equal(label_total(&t, KTEL_ATTR_OTHER), 19);
	ktel_attr_fold__free(f);

	/* A first window with a history and no events of its own (a restart
	 * with nothing new): nothing emitted, the totals all there. */
	f = new_fold(2, 3, 100, &names);
	ktel_attr_fold__begin(f);
	ktel_attr_fold__add_history(f, hist, 3);
	s.n = 0;
	assert_int_equal(ktel_attr_fold__end(f, 0, collect, &s, &err), 0);
	t.n = 0;
	ktel_attr_fold__totals(f, collect, &t);
	assert_int_equal(t.n, 2);
	assert_int_equal(label_total(&t, "n1"), 150);
	assert_int_equal(label_total(&t, KTEL_ATTR_OTHER), 7);
	ktel_attr_fold__free(f);
}

/* A window without records (a quiet metric, a daemon's first pull): nothing
 * emitted, nothing ranked, no name known (no sort of an empty list). */
static void test_empty_window(void **state)
{
	struct names names = {.group = 1};
	struct ktel_attr_fold *f = new_fold(2, 3, 100, &names);
	static struct sink s;
	struct ktel_err err;

	(void)state;
	for (int w = 0; w < 3; w++) {
		ktel_attr_fold__begin(f);
		s.n = 0;
		assert_int_equal(ktel_attr_fold__end(f, (uint64_t)w, collect, &s, &err), 0);
		assert_int_equal(s.n, 0);
	}
	ktel_attr_fold__totals(f, collect, &s);
	assert_int_equal(s.n, 0);
	ktel_attr_fold__free(f);
}

/* ---- names ------------------------------------------------------------------- */

static void test_cgroup_names(void **state)
{
	char buf[KTEL_ATTR_NAME_MAX + 1];
	char long_path[1000];

	(void)state;
	ktel_attr_cgroup_name("", buf, sizeof(buf));
	assert_string_equal(buf, "/");
	ktel_attr_cgroup_name("/system.slice/nginx.service", buf, sizeof(buf));
	assert_string_equal(buf, "system.slice/nginx.service");
	ktel_attr_cgroup_name("/user.slice/user-1000.slice/session-42.scope", buf, sizeof(buf));
	assert_string_equal(buf, "user.slice/user-1000.slice/session-*.scope");
	ktel_attr_cgroup_name("/system.slice/run-r3a8f.scope", buf, sizeof(buf));
	assert_string_equal(buf, "system.slice/run-*.scope");
	/* Not a scope: kept. */
	ktel_attr_cgroup_name("/system.slice/run-x.service", buf, sizeof(buf));
	assert_string_equal(buf, "system.slice/run-x.service");
	/* Hostile bytes: quotes, newlines, braces, UTF-8, escapes. */
	ktel_attr_cgroup_name("/a\"b\n{c}\xc3\xa9\\x2d", buf, sizeof(buf));
	assert_string_equal(buf, "a_b__c____x2d");
	/* Bounded. */
	memset(long_path, 'x', sizeof(long_path) - 1);
	long_path[sizeof(long_path) - 1] = '\0';
	assert_int_equal(ktel_attr_cgroup_name(long_path, buf, sizeof(buf)), KTEL_ATTR_NAME_MAX);
	assert_int_equal(strlen(buf), KTEL_ATTR_NAME_MAX);
	/* A small buffer bounds it too. */
	assert_int_equal(ktel_attr_cgroup_name("/abcdef", buf, 4), 3);
	assert_string_equal(buf, "abc");
}

static void test_app_names(void **state)
{
	char buf[64];

	(void)state;
	assert_string_equal(ktel_attr_app_name(0, buf, sizeof(buf)), "system");
	assert_string_equal(ktel_attr_app_name(1000, buf, sizeof(buf)), "system");
	assert_string_equal(ktel_attr_app_name(10057, buf, sizeof(buf)), "10057");
	/* Another Android user's app: the same app id. */
	assert_string_equal(ktel_attr_app_name(1010057, buf, sizeof(buf)), "10057");
	assert_string_equal(ktel_attr_app_name(20012, buf, sizeof(buf)), "sdk_sandbox");
	assert_string_equal(ktel_attr_app_name(99001, buf, sizeof(buf)), "isolated");
	assert_string_equal(ktel_attr_app_name(1090000, buf, sizeof(buf)), "isolated");
	assert_string_equal(ktel_attr_app_name(50001, buf, sizeof(buf)), "shared_gid");
	assert_string_equal(ktel_attr_app_name(70000, buf, sizeof(buf)), "reserved");
	assert_string_equal(ktel_attr_process_name((uint64_t)4242 << 32 | 77, buf, sizeof(buf)),
			    "4242");
	/* app_class: no app's own id, ever. */
	assert_string_equal(ktel_attr_app_class_name(10057, buf, sizeof(buf)), "app");
	assert_string_equal(ktel_attr_app_class_name(1019999, buf, sizeof(buf)), "app");
	assert_string_equal(ktel_attr_app_class_name(1000, buf, sizeof(buf)), "system");
	assert_string_equal(ktel_attr_app_class_name(20012, buf, sizeof(buf)), "sdk_sandbox");
	assert_string_equal(ktel_attr_app_class_name(99001, buf, sizeof(buf)), "isolated");
}

static void test_mountinfo(void **state)
{
	char dir[] = "/tmp/ktel_attr_mi_XXXXXX", path[256], buf[256];
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/mountinfo", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "30 1 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n"
		   "31 30 0:27 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n"
		   "40 30 0:37 / /sys/fs/cgroup/uni\\040fied rw,relatime - cgroup2 cgroup2 rw\n");
	fclose(f);
	assert_int_equal(ktel_attr_cgroup2_mount(path, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "/sys/fs/cgroup/uni fied");
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "31 30 0:27 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n");
	fclose(f);
	assert_int_equal(ktel_attr_cgroup2_mount(path, buf, sizeof(buf)), -ENOENT);
	unlink(path);
	rmdir(dir);
}

/*
 * Release needs both: gone from the walks and no events for the grace
 * period. A cgroup still named by pulls (late events) is kept; a walk
 * happens without a miss once grace / 4 passed; the name of a released
 * cgroup that another id has too (the run-*.scope of another command, a
 * restarted service's new cgroup) is carried.
 */
static void test_release_walk(void **state)
{
	char root[] = "/tmp/ktel_attr_rel_XXXXXX", a[512], b[512], c[512],
	     buf[KTEL_ATTR_NAME_MAX + 1];
	struct ktel_attr_names_opts o = {.grace_ns = 1000};
	const struct ktel_attr_released *rel;
	struct ktel_attr_names *n = NULL;
	struct ktel_attr_names_stats st;
	struct ktel_err err;
	struct stat sa, sb, sc;

	(void)state;
	assert_non_null(mkdtemp(root));
	snprintf(a, sizeof(a), "%s/run-a.scope", root);
	snprintf(b, sizeof(b), "%s/run-b.scope", root);
	snprintf(c, sizeof(c), "%s/busy.service", root);
	assert_int_equal(mkdir(a, 0755), 0);
	assert_int_equal(mkdir(b, 0755), 0);
	assert_int_equal(mkdir(c, 0755), 0);
	assert_int_equal(stat(a, &sa), 0);
	assert_int_equal(stat(b, &sb), 0);
	assert_int_equal(stat(c, &sc), 0);
	o.cgroup_root = root;
	assert_int_equal(ktel_attr_names__new(&o, &n, &err), 0);
	ktel_attr_names__begin_pull(n, 100);
	assert_non_null(ktel_attr_names__cgroup(n, sa.st_ino, buf, sizeof(buf)));
	assert_string_equal(buf, "run-*.scope");
	/* A cgroup made and removed before any walk could find it: its keys
	 * exist all the same, so its id ages too. */
	assert_null(ktel_attr_names__cgroup(n, 424242424242ULL, buf, sizeof(buf)));
	assert_int_equal(rmdir(a), 0);
	assert_int_equal(rmdir(c), 0);
	/* c keeps having events (late ones, after its rmdir): not released. */
	for (uint64_t t = 400; t <= 2000; t += 400) {
		ktel_attr_names__begin_pull(n, t);
		assert_non_null(ktel_attr_names__cgroup(n, sc.st_ino, buf, sizeof(buf)));
	}
	assert_int_equal(ktel_attr_names__released(n, &rel), 2);
	for (int i = 0; i < 2; i++) {
		if (rel[i].id == 424242424242ULL) {
			assert_null(rel[i].name);
			continue;
		}
		assert_int_equal(rel[i].id, sa.st_ino);
		assert_string_equal(rel[i].name, "run-*.scope");
		assert_true(rel[i].carried); /* run-b.scope has the name */
	}
	ktel_attr_names__clear_released(n);
	/* Quiet from now on: released one grace period after its last event,
	 * found by the walks begin_pull makes without any miss. */
	ktel_attr_names__begin_pull(n, 2800);
	ktel_attr_names__begin_pull(n, 3200);
	assert_int_equal(ktel_attr_names__released(n, &rel), 1);
	assert_int_equal(rel[0].id, sc.st_ino);
	assert_false(rel[0].carried);
	ktel_attr_names__clear_released(n);
	ktel_attr_names__stats(n, &st);
	assert_int_equal(st.released, 3);
	ktel_attr_names__free(n);
	rmdir(b);
	rmdir(root);
}

/* The walk over a directory laid out like cgroupfs: ids are inode numbers;
 * a new directory is found at the next pull's miss, not before; a removed
 * one keeps its name for the grace period. */
static void test_cgroup_walk(void **state)
{
	char root[] = "/tmp/ktel_attr_cg_XXXXXX", path[512], buf[KTEL_ATTR_NAME_MAX + 1];
	struct ktel_attr_names_opts o = {.grace_ns = 1000};
	struct ktel_attr_names *n = NULL;
	struct ktel_err err;
	struct stat st;
	uint64_t id_svc, id_new;

	(void)state;
	assert_non_null(mkdtemp(root));
	snprintf(path, sizeof(path), "%s/system.slice", root);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/system.slice/nginx.service", root);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(stat(path, &st), 0);
	id_svc = st.st_ino;
	o.cgroup_root = root;
	assert_int_equal(ktel_attr_names__new(&o, &n, &err), 0);
	ktel_attr_names__begin_pull(n, 100);
	assert_non_null(ktel_attr_names__cgroup(n, id_svc, buf, sizeof(buf)));
	assert_string_equal(buf, "system.slice/nginx.service");
	assert_int_equal(stat(root, &st), 0);
	assert_non_null(ktel_attr_names__cgroup(n, st.st_ino, buf, sizeof(buf)));
	assert_string_equal(buf, "/");
	/* Made after the walk: unknown for the rest of this pull. */
	snprintf(path, sizeof(path), "%s/system.slice/new.service", root);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(stat(path, &st), 0);
	id_new = st.st_ino;
	assert_null(ktel_attr_names__cgroup(n, id_new, buf, sizeof(buf)));
	ktel_attr_names__begin_pull(n, 200);
	assert_non_null(ktel_attr_names__cgroup(n, id_new, buf, sizeof(buf)));
	assert_string_equal(buf, "system.slice/new.service");
	/* Removed: still named within the grace period (1000 ns here). */
	assert_int_equal(rmdir(path), 0);
	ktel_attr_names__begin_pull(n, 500);
	assert_null(ktel_attr_names__cgroup(n, 999999999, buf, sizeof(buf))); /* walks */
	assert_non_null(ktel_attr_names__cgroup(n, id_new, buf, sizeof(buf)));
	/* Past it, the next walk forgets it. */
	ktel_attr_names__begin_pull(n, 5000);
	assert_null(ktel_attr_names__cgroup(n, 999999999, buf, sizeof(buf)));
	assert_null(ktel_attr_names__cgroup(n, id_new, buf, sizeof(buf)));
	assert_non_null(ktel_attr_names__cgroup(n, id_svc, buf, sizeof(buf)));
	/* ... and hands it over as released, its name carried by no one;
	 * with it the id no walk ever found, quiet as long. */
	{
		const struct ktel_attr_released *rel;
		size_t k = 0;

		assert_int_equal(ktel_attr_names__released(n, &rel), 2);
		k = rel[0].id == id_new ? 0 : 1;
		assert_int_equal(rel[k].id, id_new);
		assert_string_equal(rel[k].name, "system.slice/new.service");
		assert_false(rel[k].carried);
		assert_int_equal(rel[1 - k].id, 999999999);
		assert_null(rel[1 - k].name);
		ktel_attr_names__clear_released(n);
		assert_int_equal(ktel_attr_names__released(n, &rel), 0);
	}
	ktel_attr_names__free(n);
	snprintf(path, sizeof(path), "%s/system.slice/nginx.service", root);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/system.slice", root);
	rmdir(path);
	rmdir(root);
}

static void test_user_names(void **state)
{
	struct ktel_attr_names_opts o = {.cgroup_root = ""};
	struct ktel_attr_names *n = NULL;
	char buf[KTEL_ATTR_NAME_MAX + 1];
	struct ktel_err err;

	(void)state;
	assert_int_equal(ktel_attr_names__new(&o, &n, &err), 0);
	ktel_attr_names__begin_pull(n, 1);
	assert_string_equal(ktel_attr_names__user(n, 0, buf, sizeof(buf)), "root");
	/* A uid no one has: its number. */
	assert_string_equal(ktel_attr_names__user(n, 3999999, buf, sizeof(buf)), "3999999");
	assert_null(ktel_attr_names__user(n, (uint64_t)1 << 40, buf, sizeof(buf)));
	/* No cgroup mount given: cgroups stay unnamed. */
	assert_null(ktel_attr_names__cgroup(n, 1, buf, sizeof(buf)));
	ktel_attr_names__free(n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_invariant_random),
		cmocka_unit_test(test_keys_fold_as_records),
		cmocka_unit_test(test_keys_fold_as_records_long_batches),
		cmocka_unit_test(test_name_entries_reused),
		cmocka_unit_test(test_ids_summed_and_ranked),
		cmocka_unit_test(test_generation_skips_resolve),
		cmocka_unit_test(test_sticky),
		cmocka_unit_test(test_churn_budget),
		cmocka_unit_test(test_full_then_handover),
		cmocka_unit_test(test_eviction_ends_series),
		cmocka_unit_test(test_release_ends_series),
		cmocka_unit_test(test_release_walk),
		cmocka_unit_test(test_totals_monotonic),
		cmocka_unit_test(test_history_last_totals),
		cmocka_unit_test(test_empty_window),
		cmocka_unit_test(test_cgroup_names),
		cmocka_unit_test(test_app_names),
		cmocka_unit_test(test_mountinfo),
		cmocka_unit_test(test_cgroup_walk),
		cmocka_unit_test(test_user_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
