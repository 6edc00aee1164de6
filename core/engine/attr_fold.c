// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Attribution fold (attr_fold.h). Three tables, all chained hashes:
 *   - rests: the records' other dimensions (metric name included: a value
 *     with several counters makes one record per member), interned and
 *     kept for the fold's life; the plugin's own max_entries bounds them;
 *   - names: the names seen in the last W windows and the admitted ones;
 *     a name neither admitted nor seen for W windows is dropped;
 *   - series: one per output series (rest, name), with its running total;
 *     an admitted name's series end when the name is evicted or released:
 *     the fold emits one record with series_end (record.h) for each and
 *     forgets it.
 * A window's input is summed into cells (rest, name or other/unknown),
 * which at its end are merged into the series they fold into. A series
 * keeps the last window's delta until the next window ends (show's window).
 *
 * This runs once per key of every attributed pull, so the per-record path
 * avoids what scales with the key count and not with the names: an id is
 * named (resolve, whose side effects the names' ageing relies on) once per
 * window, its later records in the window take the name from a cache of
 * ids, which also keeps the id's name entry across windows (checked
 * against the resolved text, not hashed again); with a resolver that says
 * when names may have changed (opts.generation), an id named before is not
 * resolved again while none has, only noted as used (opts.used: its side
 * effects without the lookup by id and the copy of the name); dimension names are
 * compared by pointer first and their hashes cached by pointer; and the
 * window's end selects only the newcomers it can admit instead of sorting
 * every name. When a window can admit no name at all (every place taken,
 * no admitted name it could evict, no release: the steady state), a name
 * not admitted cannot become one by its end, so its records go straight
 * into its rest's other cell: cells stay a few per rest instead of one per
 * key, which is what a pull of many keys spent its time on (in cache
 * misses more than in instructions).
 *
 * A pull hands its keys here in batches (ktel_attr_fold__add_keys) rather
 * than records: the fold keeps, per place in the pull's snapshot, the
 * key's bytes, its rest and a hint to its id's slot, so a key found at its
 * place again costs a compare of its bytes, an id slot checked at the
 * hint, and its delta vector summed into a cell; no record is made, hashed
 * or taken apart. A key the place does not know (the first pull, a key
 * that moved, a device named or no longer) is folded from its record,
 * which the pull makes only then, and the place remembers it.
 */
#include "attr_fold.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 256

/* Where a cell's events go before ranking: a name, or one of these. */
enum target_kind {
	TARGET_NAME = 0,
	TARGET_KERNEL_OTHER = 1, /* the kernel's overflow id */
	TARGET_UNKNOWN = 2,
};

struct rest {
	struct rest *next;
	uint64_t hash;
	/* Its other cell of the window, while other_gen is the fold's
	 * cells_gen: found without hashing, for every key folded into it. */
	struct cell *other_cell;
	uint64_t other_gen;
	enum ktel_record_type type;
	const char *metric; /* the record's, stable for the pull's life */
	uint32_t n_dims;
	struct ktel_dim dims[KTEL_MAX_DIMS - 1]; /* labels owned */
	/* The histogram's scheme and bucket count, from its first record. */
	struct ktel_histogram head;
	/* Its other and unknown series once made: those are never forgotten
	 * before the fold, so the pointers stay valid. */
	struct series *other, *unknown;
};

struct name {
	_Alignas(64) struct name *next; /* one cache line (name_alloc) */
	uint64_t hash;
	char *text;
	bool admitted;
	uint64_t last_active; /* window it last had events in; 0: never */
	uint64_t win_events;
	uint64_t hist_events; /* history (add_history) of the first window */
	bool emitted;         /* a series of it was emitted this window */
	bool released;        /* no live id carries it (ktel_attr_fold__release) */
	bool gone;            /* released and ended: freed at the window's end */
};

struct value {
	struct ktel_histogram hist; /* histograms */
	uint64_t counter;           /* counters (and gauges, summed) */
};

struct cell {
	struct cell *next;
	uint64_t hash;
	struct cell *live_next; /* the window's cells (the fold's live list) */
	struct rest *rest;
	enum target_kind kind;
	struct name *name; /* TARGET_NAME */
	uint64_t events;   /* a histogram delta's events, summed as it is added */
	bool has_delta, has_history;
	struct value delta;
	/* Last: only the first window (add_history) uses it, so a cell reused
	 * in a later one clears only what is above. */
	struct value history;
};

struct series {
	struct series *next;
	uint64_t hash;
	const struct rest *rest;
	const char *label; /* the name's text, or KTEL_ATTR_OTHER / _UNKNOWN */
	struct name *name; /* the admitted name, NULL for other and unknown */
	struct value delta, total;
	bool touched; /* had events in the last window */
	bool ending;  /* its name was evicted or released: emit its end, forget it */
};

struct table {
	void **slots;
	size_t n_slots, n;
};

/*
 * Raw id -> how the window named it (struct idcache). An entry named in the current window is used as is; an older one
 * keeps its name entry as a guess that the next resolve of the id confirms
 * by comparing texts. name is valid only while epoch is the fold's
 * name_epoch, which every freed name entry moves on.
 */
struct idslot {
	_Alignas(64) uint64_t id; /* one cache line each, the array line-aligned */
	uint64_t win;             /* window it was named in */
	uint64_t epoch;           /* the fold's name_epoch when name was taken */
	enum target_kind kind;
	struct name *name; /* TARGET_NAME */
	uint64_t gen;      /* opts.generation right after the resolve; 0: none */
	uint64_t hint;     /* opts.used's */
	bool used;
};

/*
 * The slots are dense, in the order their ids were first seen (the map's
 * order, in which the next pulls come too), and found by id through an
 * index (open addressing, linear probing, at most half full) of slot
 * numbers + 1, 0 being empty: 5,000 ids take 320 KiB of slots and a
 * 64 KiB index, not a 1 MiB table of slots half empty, and a key's hint
 * is its id's slot number.
 */
struct idcache {
	struct idslot *s; /* n of them, room for s_cap */
	uint32_t *index;  /* cap entries */
	size_t cap, n, s_cap;
	size_t named_win, named_last; /* ids named this window, the last one */
};

/* Dimension name -> its string hash, by pointer (names are the
 * descriptor's, stable for the fold's life, as the metric name is). */
struct dimhash {
	const char *name;
	uint64_t hash;
};

/*
 * What the fold knows of the key at one place of the pull's snapshot (a
 * key keeps its place from pull to pull while the map's keys do not
 * change): its bytes, to check that the key there is the same, and its
 * rest, so that its other dimensions are neither made into a record nor
 * hashed again, and a hint to its id's slot in the id cache.
 */
#define KEYSLOT_KEY_MAX 32

struct keyslot {
	struct rest *rest; /* NULL: nothing known */
	uint32_t idx;      /* the id's slot (idcache_find) */
	uint32_t key_size;
	uint64_t derived; /* the key's ktel_pull_key derived */
	unsigned char key[KEYSLOT_KEY_MAX];
};

struct ktel_attr_fold {
	struct ktel_attr_fold_opts o;
	struct keyslot *keys;
	size_t n_keys;
	uint64_t cells_gen; /* moved on by every cells_clear */
	char *dim_name;
	struct table rests, names, cells, series;
	uint64_t win;
	bool have_head, oom;
	struct ktel_record head; /* the window's header, from its first record */
	double tokens;
	uint64_t last_ns;
	bool have_last_ns;
	struct ktel_attr_fold_stats st;
	struct ktel_record *out;
	struct cell *spare; /* cells of past windows, for reuse */
	/* The window's cells: a window of few cells is cleared and walked in
	 * as many steps, not in one per slot of a table that a window of one
	 * cell per key grew. */
	struct cell *live;
	struct idcache ids;
	struct name **name_chunks; /* n_name_chunks of NAME_CHUNK entries */
	size_t n_name_chunks;
	struct name *name_spare; /* free entries, through next */
	uint64_t name_epoch;     /* moved on by every name entry freed */
	struct dimhash dimhash[KTEL_MAX_DIMS];
	unsigned int dimhash_next;
	const char *attr_dim_ptr; /* the records' attribution dimension name */
	int attr_dim_idx;         /* and its index there */
	bool win_history;         /* the window has a history (add_history) */
	/* The window can admit no name (every place taken, none evictable,
	 * no release): a name not admitted is summed into other at once. */
	bool direct;
	uint32_t evictable;   /* admitted names the next window's end may evict */
	bool release_pending; /* a release since the last window began */
	/* A name is marked released that end_released has not ended or
	 * taken back yet: without one, the window's end does not look. */
	bool released_marked;
};

/* ---- hashing and tables --------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdULL;
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

/* Every entry starts with {next, hash}: one layout for the four tables. */
struct entry {
	struct entry *next;
	uint64_t hash;
};

static int table_grow(struct table *t)
{
	size_t n = t->n_slots ? t->n_slots * 2 : 64;
	void **slots = calloc(n, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < t->n_slots; i++) {
		struct entry *e = t->slots[i], *next;

		for (; e; e = next) {
			next = e->next;
			e->next = slots[e->hash & (n - 1)];
			slots[e->hash & (n - 1)] = e;
		}
	}
	free(t->slots);
	t->slots = slots;
	t->n_slots = n;
	return 0;
}

static struct entry **table_head(struct table *t, uint64_t hash)
{
	return (struct entry **)&t->slots[hash & (t->n_slots - 1)];
}

static int table_add(struct table *t, struct entry *e)
{
	struct entry **head;

	if ((t->n + 1) * 2 > t->n_slots && table_grow(t))
		return -ENOMEM;
	head = table_head(t, e->hash);
	e->next = *head;
	*head = e;
	t->n++;
	return 0;
}

static void table_unlink(struct table *t, struct entry *e)
{
	struct entry **p = table_head(t, e->hash);

	while (*p && *p != e)
		p = &(*p)->next;
	if (*p) {
		*p = e->next;
		t->n--;
	}
}

/* Free every entry (free_fn on each) and keep the slots for reuse. */
static void table_clear(struct table *t, void (*free_fn)(void *))
{
	for (size_t i = 0; i < t->n_slots; i++) {
		struct entry *e = t->slots[i], *next;

		for (; e; e = next) {
			next = e->next;
			free_fn(e);
		}
		t->slots[i] = NULL;
	}
	t->n = 0;
}

#define table_for_each(t, type, var)                                                 \
	for (size_t var##_i = 0; var##_i < (t)->n_slots; var##_i++)                  \
		for (type *var = (t)->slots[var##_i], *var##_next = NULL;            \
		     var && ((var##_next = (type *)((struct entry *)var)->next), 1); \
		     var = var##_next)

/* ---- values --------------------------------------------------------------- */

static uint64_t events_of(const struct ktel_record *r)
{
	if (r->type == KTEL_RECORD_HISTOGRAM)
		return ktel_hist_count(&r->hist.delta);
	if (r->type == KTEL_RECORD_COUNTER)
		return r->counter.delta;
	return r->gauge > 0 ? (uint64_t)r->gauge : 0;
}

/*
 * dst[k] += src[k] for the usual KTEL_HIST_BUCKETS buckets, returning their
 * sum: a loop of constant length over pointers that do not alias, which
 * the compiler vectorizes (it would not at -O2 with a check of the
 * pointers against each other to make at run time).
 */
static uint64_t add_buckets(uint64_t *restrict dst, const uint64_t *restrict src)
{
	uint64_t n = 0;

	/* Unrolled: it runs once per key, and the loop's own counting and
	 * branching were a third of its instructions. */
#pragma GCC unroll 16
	for (uint32_t k = 0; k < KTEL_HIST_BUCKETS; k++) {
		dst[k] += src[k];
		n += src[k];
	}
	return n;
}

/* Add r's delta to v; returns a histogram's events (its bucket sum), which
 * the same pass counts. */
static uint64_t value_add_record(struct value *v, const struct ktel_record *r)
{
	uint64_t n = 0;

	if (r->type == KTEL_RECORD_HISTOGRAM) {
		const struct ktel_histogram *h = &r->hist.delta;

		if (h->n_buckets == KTEL_HIST_BUCKETS) {
			n = add_buckets(v->hist.counts, h->counts);
		} else {
			for (uint32_t k = 0; k < h->n_buckets && k < KTEL_HIST_BUCKETS; k++) {
				v->hist.counts[k] += h->counts[k];
				n += h->counts[k];
			}
		}
		v->hist.sum += h->sum;
	} else if (r->type == KTEL_RECORD_COUNTER) {
		v->counter += r->counter.delta;
	} else {
		v->counter += (uint64_t)r->gauge;
	}
	return n;
}

static void value_add(struct value *v, const struct value *d)
{
	for (uint32_t k = 0; k < KTEL_HIST_BUCKETS; k++)
		v->hist.counts[k] += d->hist.counts[k];
	v->hist.sum += d->hist.sum;
	v->counter += d->counter;
}

/* A cell's events: its histogram's bucket sum (counted as it was added),
 * else its counter. */
static uint64_t cell_events(const struct cell *c)
{
	return c->rest->type == KTEL_RECORD_HISTOGRAM ? c->events : c->delta.counter;
}

/* A record's totals (add_history); gauges have none. */
static void value_add_total(struct value *v, const struct ktel_record *r)
{
	if (r->type == KTEL_RECORD_HISTOGRAM) {
		const struct ktel_histogram *h = &r->hist.total;

		for (uint32_t k = 0; k < h->n_buckets && k < KTEL_HIST_BUCKETS; k++)
			v->hist.counts[k] += h->counts[k];
		v->hist.sum += h->sum;
	} else if (r->type == KTEL_RECORD_COUNTER) {
		v->counter += r->counter.total;
	}
}

static uint64_t total_events_of(const struct ktel_record *r)
{
	if (r->type == KTEL_RECORD_HISTOGRAM)
		return ktel_hist_count(&r->hist.total);
	return r->type == KTEL_RECORD_COUNTER ? r->counter.total : 0;
}

/* ---- rests ---------------------------------------------------------------- */

static uint64_t dim_name_hash(struct ktel_attr_fold *f, const char *name)
{
	struct dimhash *d;

	for (unsigned int i = 0; i < KTEL_MAX_DIMS; i++)
		if (f->dimhash[i].name == name)
			return f->dimhash[i].hash;
	d = &f->dimhash[f->dimhash_next++ % KTEL_MAX_DIMS];
	d->name = name;
	d->hash = hash_str(name);
	return d->hash;
}

static uint64_t rest_hash(struct ktel_attr_fold *f, const struct ktel_record *r, int skip)
{
	uint64_t h = mix((uintptr_t)r->metric, r->type);

	for (uint32_t i = 0; i < r->n_dims; i++)
		if ((int)i != skip)
			h = mix(mix(h, dim_name_hash(f, r->dims[i].name)),
				(uint64_t)r->dims[i].value);
	return h;
}

static bool rest_equal(const struct rest *a, const struct ktel_record *r, int skip)
{
	uint32_t j = 0;

	if (a->metric != r->metric || a->type != r->type)
		return false;
	for (uint32_t i = 0; i < r->n_dims; i++) {
		if ((int)i == skip)
			continue;
		if (j >= a->n_dims || a->dims[j].value != r->dims[i].value ||
		    (a->dims[j].name != r->dims[i].name &&
		     strcmp(a->dims[j].name, r->dims[i].name) != 0))
			return false;
		j++;
	}
	return j == a->n_dims;
}

static void rest_free(void *p)
{
	struct rest *r = p;

	for (uint32_t i = 0; i < r->n_dims; i++)
		free((char *)r->dims[i].label);
	free(r);
}

static struct rest *rest_get(struct ktel_attr_fold *f, const struct ktel_record *r, int skip)
{
	uint64_t h = rest_hash(f, r, skip);
	struct rest *e;

	if (f->rests.n_slots)
		for (e = (struct rest *)*table_head(&f->rests, h); e; e = e->next)
			if (e->hash == h && rest_equal(e, r, skip))
				return e;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->hash = h;
	e->type = r->type;
	e->metric = r->metric;
	if (r->type == KTEL_RECORD_HISTOGRAM) {
		e->head = r->hist.delta;
		memset(e->head.counts, 0, sizeof(e->head.counts));
		e->head.sum = 0;
	}
	for (uint32_t i = 0; i < r->n_dims; i++) {
		struct ktel_dim *d;

		if ((int)i == skip)
			continue;
		d = &e->dims[e->n_dims++];
		*d = r->dims[i];
		/* Dimension names are the descriptor's and live as long as the
		 * pull; labels may come from caches that change: copied. */
		d->label = r->dims[i].label ? strdup(r->dims[i].label) : NULL;
		if (r->dims[i].label && !d->label) {
			rest_free(e);
			return NULL;
		}
	}
	if (table_add(&f->rests, (struct entry *)e)) {
		rest_free(e);
		return NULL;
	}
	return e;
}

/* ---- names ---------------------------------------------------------------- */

/*
 * Name entries live in line-aligned chunks and go back to a free list, not
 * to the heap: a window's end (age_names) walks them chunk by chunk, in the
 * order of their addresses, not along the table's chains in hash order,
 * a cache miss per name and window. An entry is in use while it has its
 * text.
 */
#define NAME_CHUNK 128

/* Every name entry in use, n a struct name *. */
#define names_for_each(f, n)                                        \
	for (size_t n##_c = 0; n##_c < (f)->n_name_chunks; n##_c++) \
		for (struct name *n = (f)->name_chunks[n##_c];      \
		     n < (f)->name_chunks[n##_c] + NAME_CHUNK; n++) \
			if (n->text)

/* A zeroed name entry; NULL out of memory. */
static struct name *name_alloc(struct ktel_attr_fold *f)
{
	struct name *n;

	if (!f->name_spare) {
		struct name **chunks, *c;

		chunks = realloc(f->name_chunks, (f->n_name_chunks + 1) * sizeof(*chunks));
		if (!chunks)
			return NULL;
		f->name_chunks = chunks;
		c = aligned_alloc(_Alignof(struct name), NAME_CHUNK * sizeof(*c));
		if (!c)
			return NULL;
		memset(c, 0, NAME_CHUNK * sizeof(*c));
		f->name_chunks[f->n_name_chunks++] = c;
		for (size_t i = NAME_CHUNK; i-- > 0;) {
			c[i].next = f->name_spare;
			f->name_spare = &c[i];
		}
	}
	n = f->name_spare;
	f->name_spare = n->next;
	memset(n, 0, sizeof(*n));
	return n;
}

/* Back to the free list (out of the table already, or never in it). */
static void name_free(struct ktel_attr_fold *f, struct name *n)
{
	free(n->text);
	memset(n, 0, sizeof(*n));
	n->next = f->name_spare;
	f->name_spare = n;
}

/* Free a name entry the fold goes on without: the id cache's pointers to
 * it become stale. */
static void name_forget(struct ktel_attr_fold *f, struct name *n)
{
	table_unlink(&f->names, (struct entry *)n);
	name_free(f, n);
	f->name_epoch++;
}

static struct name *name_get(struct ktel_attr_fold *f, const char *text)
{
	uint64_t h = hash_str(text);
	struct name *e;

	if (f->names.n_slots)
		for (e = (struct name *)*table_head(&f->names, h); e; e = e->next)
			if (e->hash == h && strcmp(e->text, text) == 0)
				return e;
	e = name_alloc(f);
	if (!e)
		return NULL;
	e->hash = h;
	e->text = strdup(text);
	if (!e->text || table_add(&f->names, (struct entry *)e)) {
		name_free(f, e);
		return NULL;
	}
	return e;
}

/* ---- the id cache ----------------------------------------------------------- */

static size_t id_slot_of(uint64_t id, size_t cap)
{
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdULL;
	id ^= id >> 33;
	return (size_t)(id & (cap - 1));
}

static void idcache_free(struct idcache *c)
{
	free(c->s);
	free(c->index);
	c->s = NULL;
	c->index = NULL;
	c->cap = c->n = c->s_cap = 0;
}

/* A twice larger index, made again from the slots. */
static int idcache_grow(struct idcache *c)
{
	size_t cap = c->cap ? c->cap * 2 : 256;
	uint32_t *index = calloc(cap, sizeof(*index));

	if (!index)
		return -ENOMEM;
	for (size_t k = 0; k < c->n; k++) {
		size_t j;

		for (j = id_slot_of(c->s[k].id, cap); index[j]; j = (j + 1) & (cap - 1))
			;
		index[j] = (uint32_t)k + 1;
	}
	free(c->index);
	c->index = index;
	c->cap = cap;
	return 0;
}

/* id's slot, a new (unnamed) one when it has none; NULL out of memory.
 * A new slot may move the others (a pointer to one is good until then;
 * a slot number for good). */
static struct idslot *idcache_get(struct idcache *c, uint64_t id)
{
	size_t i;

	if (c->cap)
		for (i = id_slot_of(id, c->cap); c->index[i]; i = (i + 1) & (c->cap - 1))
			if (c->s[c->index[i] - 1].id == id)
				return &c->s[c->index[i] - 1];
	if (c->n >= UINT32_MAX - 1 || ((c->n + 1) * 2 > c->cap && idcache_grow(c)))
		return NULL;
	if (c->n == c->s_cap) {
		size_t s_cap = c->s_cap ? c->s_cap * 2 : 128;
		struct idslot *sl = aligned_alloc(_Alignof(struct idslot), s_cap * sizeof(*sl));

		if (!sl)
			return NULL;
		if (c->n)
			memcpy(sl, c->s, c->n * sizeof(*sl));
		free(c->s);
		c->s = sl;
		c->s_cap = s_cap;
	}
	for (i = id_slot_of(id, c->cap); c->index[i]; i = (i + 1) & (c->cap - 1))
		;
	c->index[i] = (uint32_t)c->n + 1;
	c->s[c->n] = (struct idslot){.id = id, .used = true};
	return &c->s[c->n++];
}

/*
 * id's slot as idcache_get finds it, tried first at *hint (a slot index the
 * caller keeps for the id, checked: the cache moves its slots as it grows
 * and drops them all when it is cleared), which is then set to the slot.
 */
static inline __attribute__((always_inline)) struct idslot *idcache_find(struct idcache *c,
									 uint64_t id,
									 uint32_t *hint)
{
	struct idslot *slot;

	if (*hint < c->n && c->s[*hint].id == id)
		return &c->s[*hint];
	slot = idcache_get(c, id);
	if (slot)
		*hint = (uint32_t)(slot - c->s);
	return slot;
}

static int name_id_resolve(struct ktel_attr_fold *f, uint64_t id, struct idslot *slot,
			   enum target_kind *ret_kind, struct name **ret_name);

/*
 * How id is named this window: resolved at its first record of the window
 * (so the resolver sees every id that had events, as it would per record),
 * from the cache at the others. Within a window an id keeps the name of its
 * first record. 0, or -ENOMEM. Inlined (into the per-key paths) down to
 * the resolve, which is not.
 */
static inline __attribute__((always_inline)) int name_id(struct ktel_attr_fold *f, uint64_t id,
							 uint32_t *hint, enum target_kind *ret_kind,
							 struct name **ret_name)
{
	struct idslot *slot = idcache_find(&f->ids, id, hint);

	if (slot && slot->win == f->win) {
		*ret_kind = slot->kind;
		*ret_name = slot->name;
		return 0;
	}
	/* Named in an earlier window and no name has changed since: the
	 * resolver only notes that the id had events. */
	if (slot && slot->gen && slot->kind == TARGET_NAME && slot->epoch == f->name_epoch &&
	    slot->gen == f->o.generation(f->o.resolve_ctx) &&
	    f->o.used(f->o.resolve_ctx, id, &slot->hint)) {
		f->ids.named_win++;
		slot->win = f->win;
		*ret_kind = slot->kind;
		*ret_name = slot->name;
		return 0;
	}
	return name_id_resolve(f, id, slot, ret_kind, ret_name);
}

/* name_id's resolve, for slot (NULL out of memory). */
static int name_id_resolve(struct ktel_attr_fold *f, uint64_t id, struct idslot *slot,
			   enum target_kind *ret_kind, struct name **ret_name)
{
	enum target_kind kind = TARGET_UNKNOWN;
	struct name *name = NULL;
	char buf[NAME_MAX_LEN];
	const char *text;

	text = f->o.resolve(f->o.resolve_ctx, id, buf, sizeof(buf));
	if (text && strcmp(text, KTEL_ATTR_OTHER) == 0) {
		kind = TARGET_KERNEL_OTHER;
	} else if (text && strcmp(text, KTEL_ATTR_UNKNOWN) != 0 && text[0]) {
		kind = TARGET_NAME;
		/* The name entry of the id's last window, when the text is
		 * still its name (a renamed cgroup's is not). */
		if (slot && slot->name && slot->epoch == f->name_epoch &&
		    strcmp(slot->name->text, text) == 0)
			name = slot->name;
		else
			name = name_get(f, text);
		if (!name)
			return -ENOMEM;
	}
	if (slot) {
		if (slot->win != f->win)
			f->ids.named_win++;
		slot->win = f->win;
		slot->kind = kind;
		slot->name = name;
		slot->epoch = f->name_epoch;
		slot->gen = f->o.generation ? f->o.generation(f->o.resolve_ctx) : 0;
	}
	*ret_kind = kind;
	*ret_name = name;
	return 0;
}

/* ---- cells and series ----------------------------------------------------- */

static uint64_t cell_hash(const struct rest *r, enum target_kind kind, const struct name *n)
{
	return mix(mix((uintptr_t)r, kind), (uintptr_t)n);
}

static struct cell *cell_get(struct ktel_attr_fold *f, struct rest *r, enum target_kind kind,
			     struct name *n)
{
	uint64_t h = cell_hash(r, kind, n);
	struct cell *e;

	if (f->cells.n_slots)
		for (e = (struct cell *)*table_head(&f->cells, h); e; e = e->next)
			if (e->rest == r && e->kind == kind && e->name == n)
				return e;
	if (f->spare) {
		e = f->spare;
		f->spare = e->next;
		memset(e, 0, f->win == 1 ? sizeof(*e) : offsetof(struct cell, history));
	} else {
		e = calloc(1, sizeof(*e));
	}
	if (!e)
		return NULL;
	e->hash = h;
	e->rest = r;
	e->kind = kind;
	e->name = n;
	if (table_add(&f->cells, (struct entry *)e)) {
		free(e);
		return NULL;
	}
	e->live_next = f->live;
	f->live = e;
	return e;
}

/*
 * A window's cells go to the spare list, not back to the heap: the next
 * window needs about as many (one per key read, at most), and a pull of
 * many keys would otherwise allocate and free one per key.
 */
static void cells_clear(struct ktel_attr_fold *f)
{
	struct cell *next;

	f->cells_gen++;
	for (struct cell *c = f->live; c; c = next) {
		next = c->live_next;
		f->cells.slots[c->hash & (f->cells.n_slots - 1)] = NULL;
		c->next = f->spare;
		f->spare = c;
	}
	f->live = NULL;
	f->cells.n = 0;
}

static struct series *series_get(struct ktel_attr_fold *f, const struct rest *r, const char *label,
				 struct name *n)
{
	uint64_t h = mix((uintptr_t)r, hash_str(label));
	struct series *e;

	if (f->series.n_slots)
		for (e = (struct series *)*table_head(&f->series, h); e; e = e->next)
			if (e->rest == r && strcmp(e->label, label) == 0)
				return e;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->hash = h;
	e->rest = r;
	e->label = label;
	e->name = n;
	if (table_add(&f->series, (struct entry *)e)) {
		free(e);
		return NULL;
	}
	return e;
}

/* ---- life ------------------------------------------------------------------ */

int ktel_attr_fold__new(const struct ktel_attr_fold_opts *opts, struct ktel_attr_fold **ret,
			struct ktel_err *err)
{
	struct ktel_attr_fold *f;

	if (!opts->dim_name || !opts->resolve || !opts->top || !opts->sticky_windows ||
	    !opts->generation != !opts->used)
		return ktel_err_set(err, EINVAL,
				    "attribution fold: needs a dimension name, a resolver, "
				    "top >= 1, sticky_windows >= 1, and a generation with used "
				    "or neither");
	f = calloc(1, sizeof(*f));
	if (!f)
		return ktel_err_set(err, ENOMEM, "out of memory");
	f->o = *opts;
	f->dim_name = strdup(opts->dim_name);
	f->out = calloc(KTEL_PULL_WINDOW, sizeof(*f->out));
	if (!f->dim_name || !f->out) {
		ktel_attr_fold__free(f);
		return ktel_err_set(err, ENOMEM, "out of memory");
	}
	f->o.dim_name = f->dim_name;
	f->attr_dim_idx = -1;
	/* Full at start: the first windows fill the K places at once. */
	f->tokens = opts->churn_per_hour;
	*ret = f;
	return 0;
}

void ktel_attr_fold__free(struct ktel_attr_fold *f)
{
	if (!f)
		return;
	cells_clear(f);
	while (f->spare) {
		struct cell *c = f->spare;

		f->spare = c->next;
		free(c);
	}
	idcache_free(&f->ids);
	free(f->keys);
	table_clear(&f->series, free);
	names_for_each(f, nm) free(nm->text);
	for (size_t i = 0; i < f->n_name_chunks; i++)
		free(f->name_chunks[i]);
	free(f->name_chunks);
	table_clear(&f->rests, rest_free);
	free(f->cells.slots);
	free(f->series.slots);
	free(f->names.slots);
	free(f->rests.slots);
	free(f->dim_name);
	free(f->out);
	free(f);
}

/* ---- a window ---------------------------------------------------------------- */

void ktel_attr_fold__begin(struct ktel_attr_fold *f)
{
	cells_clear(f);
	/* Ids of long-gone keys would stay in the id cache forever: it is
	 * dropped when it holds many more than a window names. */
	f->ids.named_last = f->ids.named_win;
	f->ids.named_win = 0;
	if (f->ids.n > 4 * f->ids.named_last + 4096)
		idcache_free(&f->ids);
	f->win++;
	f->have_head = false;
	f->oom = false;
	f->win_history = false;
	f->direct = f->win > 1 && f->st.admitted >= f->o.top && !f->evictable &&
		    !f->release_pending;
	f->release_pending = false;
}

static int attr_dim_of(struct ktel_attr_fold *f, const struct ktel_record *r)
{
	int i = f->attr_dim_idx;

	/* Every record of a metric has it at one place, under one pointer. */
	if (i >= 0 && (uint32_t)i < r->n_dims && r->dims[i].name == f->attr_dim_ptr)
		return i;
	for (uint32_t k = 0; k < r->n_dims; k++)
		if (strcmp(r->dims[k].name, f->dim_name) == 0) {
			f->attr_dim_idx = (int)k;
			f->attr_dim_ptr = r->dims[k].name;
			return (int)k;
		}
	return -1;
}

/* The window's other cell of rest. */
static struct cell *other_cell(struct ktel_attr_fold *f, struct rest *rest)
{
	if (rest->other_gen != f->cells_gen || !rest->other_cell) {
		rest->other_cell = cell_get(f, rest, TARGET_KERNEL_OTHER, NULL);
		rest->other_gen = f->cells_gen;
	}
	return rest->other_cell;
}

/*
 * How a delta of id (has_id: the record carries the attribution dimension)
 * is named this window, and the cell it goes into: *ret_direct when it
 * goes into other at once (a name not admitted that cannot be by the
 * window's end). NULL out of memory (f->oom set).
 */
static inline __attribute__((always_inline)) struct cell *target_cell(
	struct ktel_attr_fold *f, struct rest *rest, bool has_id, uint64_t id, uint32_t *hint,
	bool history, enum target_kind *ret_kind, struct name **ret_name, bool *ret_direct)
{
	enum target_kind kind = TARGET_UNKNOWN;
	struct name *name = NULL;
	struct cell *cell;
	bool direct;

	if (has_id) {
		if (id == KTEL_ATTR_OVERFLOW_ID) {
			kind = TARGET_KERNEL_OTHER;
		} else if (id != KTEL_ATTR_UNKNOWN_ID && name_id(f, id, hint, &kind, &name)) {
			f->oom = true;
			return NULL;
		}
	}
	if (!rest) {
		f->oom = true;
		return NULL;
	}
	/* Not admitted, and it cannot be by this window's end: other now. */
	direct = f->direct && !history && kind == TARGET_NAME && !name->admitted;
	cell = direct || kind == TARGET_KERNEL_OTHER ? other_cell(f, rest)
						     : cell_get(f, rest, kind, name);
	if (!cell) {
		f->oom = true;
		return NULL;
	}
	*ret_kind = kind;
	*ret_name = name;
	*ret_direct = direct;
	return cell;
}

/*
 * Count a window's delta of ev events (what the window's end and the
 * ranking count) into cell and its name; in and folded are what it adds
 * to events_in and, folded at once, folded_user (they differ from ev for
 * gauges, whose levels are not events).
 */
static inline __attribute__((always_inline)) void account(struct ktel_attr_fold *f,
							  struct cell *cell, enum target_kind kind,
							  struct name *name, bool overflow,
							  bool direct, uint64_t ev, uint64_t in,
							  uint64_t folded)
{
	f->st.events_in += in;
	if (direct)
		f->st.folded_user += folded;
	cell->events += ev;
	cell->has_delta = true;
	if (name) {
		name->win_events += ev;
		if (ev)
			name->last_active = f->win;
	}
	if (kind == TARGET_KERNEL_OTHER && overflow)
		f->st.folded_kernel += ev;
	if (kind == TARGET_UNKNOWN)
		f->st.unknown += ev;
}

/* The window's header, from its first record or key. */
static void take_head(struct ktel_attr_fold *f, const struct ktel_record *r)
{
	if (!f->have_head) {
		f->head = *r;
		f->have_head = true;
	}
}

/* Fold r: its delta, or (history) its total. *hint: id's slot hint
 * (idcache_find); *ret_rest: r's rest, or NULL. */
static void add_one(struct ktel_attr_fold *f, const struct ktel_record *r, bool history,
		    uint32_t *hint, struct rest **ret_rest)
{
	int ai = attr_dim_of(f, r);
	enum target_kind kind;
	struct name *name;
	struct rest *rest;
	struct cell *cell;
	uint64_t id = 0, ev;
	bool direct;

	*ret_rest = NULL;
	if (r->type == KTEL_RECORD_EVENT || (history && r->type == KTEL_RECORD_GAUGE))
		return;
	if (ai >= 0)
		id = (uint64_t)r->dims[ai].value;
	rest = rest_get(f, r, ai);
	cell = target_cell(f, rest, ai >= 0, id, hint, history, &kind, &name, &direct);
	if (!cell)
		return;
	*ret_rest = rest;
	if (history) {
		ev = total_events_of(r);
		value_add_total(&cell->history, r);
		cell->has_history = true;
		f->win_history = true;
		if (name)
			name->hist_events += ev;
		if (name && ev)
			name->last_active = f->win;
	} else {
		ev = value_add_record(&cell->delta, r);
		if (r->type == KTEL_RECORD_HISTOGRAM)
			account(f, cell, kind, name, ai >= 0 && id == KTEL_ATTR_OVERFLOW_ID, direct,
				ev, ev, ev);
		else if (r->type == KTEL_RECORD_COUNTER)
			account(f, cell, kind, name, ai >= 0 && id == KTEL_ATTR_OVERFLOW_ID, direct,
				r->counter.delta, r->counter.delta, r->counter.delta);
		else
			account(f, cell, kind, name, ai >= 0 && id == KTEL_ATTR_OVERFLOW_ID, direct,
				events_of(r), 0, (uint64_t)r->gauge);
	}
	/* A window's own records come first: a history gives the header only
	 * of a window without any. */
	take_head(f, r);
}

/*
 * Fold a key's delta in the pull's layout (ktel_pull_key vals) into rest,
 * the rest its records had: as add_one does with its record. false when
 * the values do not fit rest (the record path then takes the key).
 */
static bool add_vals(struct ktel_attr_fold *f, struct rest *rest, uint64_t id, uint32_t *hint,
		     const uint64_t *vals, size_t n)
{
	bool overflow = id == KTEL_ATTR_OVERFLOW_ID, direct;
	uint32_t nb = rest->head.n_buckets;
	enum target_kind kind;
	struct name *name;
	struct cell *cell;
	uint64_t ev = 0;

	if (rest->type == KTEL_RECORD_HISTOGRAM
		    ? n < nb + rest->head.has_sum || nb > KTEL_HIST_BUCKETS
		    : n < 1 || rest->type == KTEL_RECORD_EVENT)
		return false;
	cell = target_cell(f, rest, true, id, hint, false, &kind, &name, &direct);
	if (!cell)
		return true;
	if (rest->type == KTEL_RECORD_HISTOGRAM) {
		struct ktel_histogram *h = &cell->delta.hist;

		if (nb == KTEL_HIST_BUCKETS) {
			ev = add_buckets(h->counts, vals);
		} else {
			for (uint32_t k = 0; k < nb; k++) {
				h->counts[k] += vals[k];
				ev += vals[k];
			}
		}
		if (rest->head.has_sum)
			h->sum += vals[nb];
		account(f, cell, kind, name, overflow, direct, ev, ev, ev);
	} else if (rest->type == KTEL_RECORD_COUNTER) {
		cell->delta.counter += vals[0];
		account(f, cell, kind, name, overflow, direct, vals[0], vals[0], vals[0]);
	} else {
		int64_t g = (int64_t)vals[0];

		cell->delta.counter += vals[0];
		account(f, cell, kind, name, overflow, direct, g > 0 ? (uint64_t)g : 0, 0, vals[0]);
	}
	return true;
}

/* The key slot of place pos, made (zero) when the fold has none yet; NULL
 * out of memory. */
static struct keyslot *keyslot_at(struct ktel_attr_fold *f, size_t pos)
{
	struct keyslot *ks;
	size_t n;

	if (pos < f->n_keys)
		return &f->keys[pos];
	n = f->n_keys ? f->n_keys * 2 : 1024;
	if (n <= pos)
		n = pos + 1;
	ks = realloc(f->keys, n * sizeof(*ks));
	if (!ks)
		return NULL;
	memset(&ks[f->n_keys], 0, (n - f->n_keys) * sizeof(*ks));
	f->keys = ks;
	f->n_keys = n;
	return &f->keys[pos];
}

/* Is the key at a place the one it holds? Two words compared in place
 * for the usual 16-byte key, not a call per key. */
static bool key_same(const struct keyslot *ks, const void *key, size_t size)
{
	uint64_t a[2], b[2];

	if (ks->key_size != size)
		return false;
	if (size != sizeof(a))
		return memcmp(ks->key, key, size) == 0;
	memcpy(a, ks->key, sizeof(a));
	memcpy(b, key, sizeof(b));
	return ((a[0] ^ b[0]) | (a[1] ^ b[1])) == 0;
}

/* Fold key i of batch b, its place's slot ks (NULL out of memory). */
static void add_key(struct ktel_attr_fold *f, const struct ktel_pull_keys *b, size_t i,
		    struct keyslot *ks)
{
	const struct ktel_pull_key *k = &b->k[i];
	struct rest *rest;
	uint32_t hint = 0;

	if (ks && ks->rest && ks->derived == k->derived && key_same(ks, k->key, b->key_size) &&
	    add_vals(f, ks->rest, k->id, &ks->idx, k->vals, b->n_vals)) {
		take_head(f, b->head);
		return;
	}
	/* A key not seen at this place: its record, once. */
	add_one(f, b->record(b, i), false, &hint, &rest);
	if (!ks)
		return;
	ks->rest = NULL;
	if (!rest || b->key_size > KEYSLOT_KEY_MAX)
		return;
	ks->rest = rest;
	ks->idx = hint;
	ks->key_size = (uint32_t)b->key_size;
	ks->derived = k->derived;
	memcpy(ks->key, k->key, b->key_size);
}

/*
 * How far ahead of the key being folded add_keys fetches: a key's id slot
 * SLOT_AHEAD keys before it is folded, then (the slot in by then) the name
 * entry and the resolver's entry the slot points at NAME_AHEAD keys before.
 * A few keys ahead rather than a whole batch ahead: what is fetched comes
 * in shortly before its key, not long before and at the risk of being
 * evicted again, and few lines are on their way at once.
 */
#define SLOT_AHEAD 16
#define NAME_AHEAD 8

/*
 * Fetch key i's id slot. Inlined by force: a function whose only effect is
 * a prefetch is one GCC takes for pure, and a call to it, which returns
 * nothing, it drops.
 */
static inline __attribute__((always_inline)) void fetch_slot(const struct ktel_attr_fold *f,
							     const struct ktel_pull_keys *b,
							     size_t i)
{
	const struct keyslot *ks = &f->keys[b->k[i].pos];

	if (ks->rest && ks->idx < f->ids.n)
		__builtin_prefetch(&f->ids.s[ks->idx]);
}

/* Fetch what key i's id slot points at: its name entry and, for an id
 * named in an earlier window that its first key of this one notes as
 * used, the resolver's memory of it. */
static void fetch_names(const struct ktel_attr_fold *f, const struct ktel_pull_keys *b, size_t i)
{
	const struct keyslot *ks = &f->keys[b->k[i].pos];
	const struct idslot *slot;

	if (!ks->rest || ks->idx >= f->ids.n)
		return;
	slot = &f->ids.s[ks->idx];
	if (!slot->used || slot->id != b->k[i].id)
		return;
	if (slot->name && slot->epoch == f->name_epoch)
		__builtin_prefetch(slot->name, 1);
	if (f->o.prefetch && slot->win != f->win && slot->hint)
		f->o.prefetch(f->o.resolve_ctx, slot->hint);
}

void ktel_attr_fold__add_keys(void *ctx, const struct ktel_pull_keys *b)
{
	struct ktel_attr_fold *f = ctx;
	size_t last = 0;
	bool slots;

	if (f->oom || !b->n)
		return;
	for (size_t i = 0; i < b->n; i++)
		if (b->k[i].pos > last)
			last = b->k[i].pos;
	slots = keyslot_at(f, last) != NULL;
	if (!slots) {
		for (size_t i = 0; i < b->n && !f->oom; i++)
			add_key(f, b, i, NULL);
		return;
	}
	/*
	 * Ids are spread over the id slots, names and the resolver's entries
	 * at random, so without fetching ahead nearly every key waits for
	 * memory two or three times; fetched a few keys ahead, the waits
	 * overlap with the folding of the keys in between.
	 */
	for (size_t i = 0; i < b->n && i < SLOT_AHEAD; i++)
		fetch_slot(f, b, i);
	for (size_t i = 0; i < b->n && i < NAME_AHEAD; i++)
		fetch_names(f, b, i);
	for (size_t i = 0; i < b->n && !f->oom; i++) {
		if (i + SLOT_AHEAD < b->n)
			fetch_slot(f, b, i + SLOT_AHEAD);
		if (i + NAME_AHEAD < b->n)
			fetch_names(f, b, i + NAME_AHEAD);
		add_key(f, b, i, &f->keys[b->k[i].pos]);
	}
}

/*
 * Fetch ahead what the records' ids will touch: their id cache index
 * entries, then (once those are in) their slots, then the name entries
 * the slots point at. Ids are spread over all three at random, so without this nearly every record waits
 * for memory twice; with it the waits of a batch overlap.
 */
static void prefetch_ids(struct ktel_attr_fold *f, const struct ktel_record *recs, size_t n)
{
	const struct idcache *c = &f->ids;
	int ai;

	if (!c->cap || !n || (ai = attr_dim_of(f, &recs[0])) < 0)
		return;
	for (size_t i = 0; i < n; i++)
		if ((uint32_t)ai < recs[i].n_dims)
			__builtin_prefetch(
				&c->index[id_slot_of((uint64_t)recs[i].dims[ai].value, c->cap)]);
	for (size_t i = 0; i < n; i++) {
		uint32_t k;

		if ((uint32_t)ai >= recs[i].n_dims)
			continue;
		k = c->index[id_slot_of((uint64_t)recs[i].dims[ai].value, c->cap)];
		if (k)
			__builtin_prefetch(&c->s[k - 1]);
	}
	for (size_t i = 0; i < n; i++) {
		const struct idslot *slot;
		uint32_t k;

		if ((uint32_t)ai >= recs[i].n_dims)
			continue;
		k = c->index[id_slot_of((uint64_t)recs[i].dims[ai].value, c->cap)];
		slot = k ? &c->s[k - 1] : NULL;
		if (slot && slot->name && slot->epoch == f->name_epoch)
			__builtin_prefetch(slot->name);
	}
}

void ktel_attr_fold__add(void *ctx, const struct ktel_record *recs, size_t n)
{
	struct ktel_attr_fold *f = ctx;

	prefetch_ids(f, recs, n);
	for (size_t i = 0; i < n && !f->oom; i++) {
		uint32_t hint = 0;
		struct rest *rest;

		add_one(f, &recs[i], false, &hint, &rest);
	}
}

bool ktel_attr_fold__first_window(const struct ktel_attr_fold *f)
{
	return f->win == 1;
}

void ktel_attr_fold__add_history(void *ctx, const struct ktel_record *recs, size_t n)
{
	struct ktel_attr_fold *f = ctx;

	if (f->win != 1)
		return;
	for (size_t i = 0; i < n && !f->oom; i++) {
		uint32_t hint = 0;
		struct rest *rest;

		add_one(f, &recs[i], true, &hint, &rest);
	}
}

/* Drop the admission of n: its series end (emitted and freed at the
 * window's end, before a new admission of the name could make them again). */
static void evict(struct ktel_attr_fold *f, struct name *n)
{
	table_for_each(&f->series, struct series, s)
	{
		if (s->name == n) {
			s->ending = true;
		}
	}
	n->admitted = false;
	f->st.admitted--;
	f->st.evictions++;
}

/* A name's weight in the ranking: the window's events, or its history
 * where the first window has one (which includes that window's events). */
static uint64_t rank_events(const struct name *n)
{
	return n->hist_events > n->win_events ? n->hist_events : n->win_events;
}

void ktel_attr_fold__release(struct ktel_attr_fold *f, const char *text)
{
	uint64_t h = hash_str(text);

	f->release_pending = true;
	if (!f->names.n_slots)
		return;
	for (struct name *e = (struct name *)*table_head(&f->names, h); e; e = e->next)
		if (e->hash == h && strcmp(e->text, text) == 0) {
			e->released = true;
			f->released_marked = true;
		}
}

/*
 * Released names without events this window end now: their series end and
 * the name is forgotten. One with events is no longer taken as released:
 * they may be a late event of the released id or a new id of that name
 * (made again since the daemon looked); it goes on, and its series end by
 * the sticky eviction once it is quiet, as any name's.
 */
static void end_released(struct ktel_attr_fold *f)
{
	/* Every name marked is ended or taken back below. */
	if (!f->released_marked)
		return;
	f->released_marked = false;
	table_for_each(&f->names, struct name, nm)
	{
		if (!nm->released)
			continue;
		if (nm->win_events) {
			nm->released = false;
			continue;
		}
		if (nm->admitted)
			evict(f, nm);
		nm->gone = true;
		f->st.released++;
	}
}

static int by_events_desc(const void *a, const void *b)
{
	const struct name *x = *(const struct name *const *)a, *y = *(const struct name *const *)b;

	if (rank_events(x) != rank_events(y))
		return rank_events(x) > rank_events(y) ? -1 : 1;
	return strcmp(x->text, y->text);
}

/* Refill the churn budget for the time since the last window. */
static void refill(struct ktel_attr_fold *f, uint64_t now_ns)
{
	double cap = f->o.churn_per_hour;

	if (f->have_last_ns && now_ns > f->last_ns)
		f->tokens += (double)(now_ns - f->last_ns) * f->o.churn_per_hour / 3600e9;
	if (f->tokens > cap)
		f->tokens = cap;
	f->last_ns = now_ns;
	f->have_last_ns = true;
}

/* Places this window can fill: free ones, as far as the budget goes. */
static size_t places(const struct ktel_attr_fold *f)
{
	double tokens = f->tokens;
	size_t m = 0;

	while (f->st.admitted + m < f->o.top && tokens >= 1.0) {
		tokens -= 1.0;
		m++;
	}
	return m;
}

/*
 * The m best of the n candidates (by_events_desc) into cand[0..m): a sorted
 * run of m that a candidate enters only when it beats its last, so a
 * window of many names and few places costs one comparison per name
 * instead of a sort.
 */
static size_t select_best(struct name **cand, size_t n, size_t m)
{
	size_t k = 0;

	if (m >= n || m > 64) {
		if (n)
			qsort(cand, n, sizeof(*cand), by_events_desc);
		return m < n ? m : n;
	}
	for (size_t i = 0; i < n; i++) {
		struct name *c = cand[i];
		size_t j;

		if (k == m && by_events_desc(&c, &cand[k - 1]) >= 0)
			continue;
		j = k < m ? k++ : k - 1;
		for (; j > 0 && by_events_desc(&c, &cand[j - 1]) < 0; j--)
			cand[j] = cand[j - 1];
		cand[j] = c;
	}
	return k;
}

/* Sticky eviction, then the newcomers with the most events into the free
 * places, within the churn budget. */
static int admit(struct ktel_attr_fold *f, uint64_t now_ns)
{
	struct name **cand;
	size_t n = 0, m;

	/* The last window's end counted the admitted names this one may evict
	 * (age_names): names only become active, so none when it found none. */
	if (f->evictable)
		table_for_each(&f->names, struct name, nm)
		{
			if (nm->admitted && f->win - nm->last_active >= f->o.sticky_windows)
				evict(f, nm);
		}
	refill(f, now_ns);
	/* A window folded directly has no cells of names not admitted: it
	 * admits none (it could not, unless a release came within it; then
	 * the next window does). */
	m = f->direct ? 0 : places(f);
	/* Every place taken (the steady state) or no budget: no candidates. */
	if (!m)
		return 0;
	cand = f->names.n ? malloc(f->names.n * sizeof(*cand)) : NULL;
	if (f->names.n && !cand)
		return -ENOMEM;
	table_for_each(&f->names, struct name, nm)
	{
		if (!nm->admitted && rank_events(nm))
			cand[n++] = nm;
	}
	m = select_best(cand, n, m);
	for (size_t i = 0; i < m; i++) {
		cand[i]->admitted = true;
		f->tokens -= 1.0;
		f->st.admitted++;
		f->st.admissions++;
	}
	free(cand);
	return 0;
}

/* The output series cell c folds into. */
static struct series *target_series(struct ktel_attr_fold *f, const struct cell *c)
{
	struct rest *r = c->rest;

	if (c->kind == TARGET_NAME && c->name->admitted)
		return series_get(f, r, c->name->text, c->name);
	if (c->kind == TARGET_UNKNOWN) {
		if (!r->unknown)
			r->unknown = series_get(f, r, KTEL_ATTR_UNKNOWN, NULL);
		return r->unknown;
	}
	if (!r->other)
		r->other = series_get(f, r, KTEL_ATTR_OTHER, NULL);
	return r->other;
}

static void make_record(const struct ktel_attr_fold *f, const struct series *s,
			struct ktel_record *out)
{
	const struct rest *r = s->rest;

	memcpy(out, &f->head, offsetof(struct ktel_record, dims));
	out->series_end = s->ending;
	out->type = r->type;
	out->metric = r->metric;
	out->n_dims = r->n_dims + 1;
	memcpy(out->dims, r->dims, r->n_dims * sizeof(r->dims[0]));
	/* The name stands for several ids or none: no raw value of its own. */
	out->dims[r->n_dims] = (struct ktel_dim){
		.name = f->dim_name,
		.label = s->label,
		.derived = true,
	};
	if (r->type == KTEL_RECORD_HISTOGRAM) {
		out->hist.delta = r->head;
		out->hist.total = r->head;
		memcpy(out->hist.delta.counts, s->delta.hist.counts, sizeof(s->delta.hist.counts));
		memcpy(out->hist.total.counts, s->total.hist.counts, sizeof(s->total.hist.counts));
		out->hist.delta.sum = s->delta.hist.sum;
		out->hist.total.sum = s->total.hist.sum;
	} else if (r->type == KTEL_RECORD_COUNTER) {
		out->counter.delta = s->delta.counter;
		out->counter.total = s->total.counter;
	} else {
		out->gauge = (int64_t)s->delta.counter;
	}
}

/* Events of a series' delta in the window (events_out): bucket counts of
 * a histogram, a counter's delta; none for gauges. */
static uint64_t series_events(const struct series *s)
{
	uint64_t n = 0;

	if (s->rest->type == KTEL_RECORD_HISTOGRAM)
		for (uint32_t k = 0; k < KTEL_HIST_BUCKETS; k++)
			n += s->delta.hist.counts[k];
	else if (s->rest->type == KTEL_RECORD_COUNTER)
		n = s->delta.counter;
	return n;
}

/* Forget names neither admitted nor seen in the last W windows. */
static void age_names(struct ktel_attr_fold *f)
{
	f->evictable = 0;
	names_for_each(f, nm)
	{
		/* Evicted at the next window's end if it has no events. */
		if (nm->admitted && !nm->gone &&
		    f->win + 1 - nm->last_active >= f->o.sticky_windows)
			f->evictable++;
		nm->win_events = 0;
		nm->hist_events = 0;
		nm->emitted = false;
		if (nm->gone || (!nm->admitted && !nm->released &&
				 f->win - nm->last_active >= f->o.sticky_windows))
			name_forget(f, nm);
	}
	f->st.tracked = (uint32_t)f->names.n;
}

/* A window that could not be folded: the ending series go without their
 * end records (a sink keeping them shows their last total until it
 * restarts), as their names go in age_names. */
static void fail_window(struct ktel_attr_fold *f)
{
	cells_clear(f);
	table_for_each(&f->series, struct series, s)
	{
		if (s->ending) {
			table_unlink(&f->series, (struct entry *)s);
			free(s);
		}
	}
	age_names(f);
}

long ktel_attr_fold__end(struct ktel_attr_fold *f, uint64_t now_ns, ktel_pull_records_fn fn,
			 void *ctx, struct ktel_err *err)
{
	size_t n_out = 0, values = 0;
	long emitted = 0;
	bool seen_other = false, seen_unknown = false;

	if (!f->oom)
		end_released(f);
	if (f->oom || admit(f, now_ns)) {
		fail_window(f);
		return ktel_err_set(err, ENOMEM, "attribution %s: out of memory folding a window",
				    f->dim_name);
	}
	table_for_each(&f->series, struct series, s)
	{
		memset(&s->delta, 0, sizeof(s->delta));
		s->touched = false;
	}
	for (struct cell *c = f->live; c; c = c->live_next) {
		struct series *s = target_series(f, c);

		if (!s) {
			fail_window(f);
			return ktel_err_set(err, ENOMEM, "attribution %s: out of memory",
					    f->dim_name);
		}
		if (c->kind == TARGET_NAME && !c->name->admitted)
			f->st.folded_user += cell_events(c);
		value_add(&s->delta, &c->delta);
		/* The history includes this window's delta. Without one, the
		 * totals take the series' summed delta below, once each. */
		if (f->win_history)
			value_add(&s->total, c->has_history ? &c->history : &c->delta);
		s->touched |= c->has_delta;
	}
	if (!f->win_history)
		table_for_each(&f->series, struct series, s)
		{
			if (s->touched)
				value_add(&s->total, &s->delta);
		}
	cells_clear(f);
	table_for_each(&f->series, struct series, s)
	{
		if (s->ending) {
			/* Untouched: an evicted or released name had no events. */
			make_record(f, s, &f->out[n_out++]);
			table_unlink(&f->series, (struct entry *)s);
			/* The record's label is the name's text, which
			 * lives until age_names, after fn had the records. */
			free(s);
			f->st.ended++;
		} else if (!s->touched) {
			continue;
		} else {
			make_record(f, s, &f->out[n_out++]);
			f->st.events_out += series_events(s);
			if (s->name)
				values += !s->name->emitted;
			if (s->name)
				s->name->emitted = true;
			else if (strcmp(s->label, KTEL_ATTR_OTHER) == 0)
				seen_other = true;
			else
				seen_unknown = true;
		}
		emitted++;
		if (n_out == KTEL_PULL_WINDOW) {
			if (fn)
				fn(ctx, f->out, n_out);
			n_out = 0;
		}
	}
	if (n_out && fn)
		fn(ctx, f->out, n_out);
	f->st.values_last = (uint32_t)(values + seen_other + seen_unknown);
	age_names(f);
	return emitted;
}

/* Hand the series (those of the last window, or all) to fn as records,
 * totals-only ones with their total as the delta. */
static void emit_series(struct ktel_attr_fold *f, bool totals, ktel_pull_records_fn fn, void *ctx)
{
	size_t n_out = 0;

	if (!f->have_head)
		return;
	table_for_each(&f->series, struct series, s)
	{
		struct ktel_record *out = &f->out[n_out];

		if (!totals && !s->touched)
			continue;
		make_record(f, s, out);
		if (totals && out->type == KTEL_RECORD_HISTOGRAM)
			out->hist.delta = out->hist.total;
		else if (totals && out->type == KTEL_RECORD_COUNTER)
			out->counter.delta = out->counter.total;
		if (++n_out == KTEL_PULL_WINDOW) {
			fn(ctx, f->out, n_out);
			n_out = 0;
		}
	}
	if (n_out)
		fn(ctx, f->out, n_out);
}

void ktel_attr_fold__last(struct ktel_attr_fold *f, ktel_pull_records_fn fn, void *ctx)
{
	emit_series(f, false, fn, ctx);
}

void ktel_attr_fold__totals(struct ktel_attr_fold *f, ktel_pull_records_fn fn, void *ctx)
{
	emit_series(f, true, fn, ctx);
}

void ktel_attr_fold__stats(const struct ktel_attr_fold *f, struct ktel_attr_fold_stats *ret)
{
	*ret = f->st;
}
