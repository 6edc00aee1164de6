// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Records as Prometheus series, shared by the Prometheus sinks; see prom_series.h. */
#include "prom_series.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "units.h"
#include "utf8.h"

#define INITIAL_TABLE 256

/* ---- text ---- */

/* Label values escape backslash, double quote and newline; HELP text only
 * backslash and newline (exposition format 0.0.4). */
void ktel_prom_put_escaped(struct ktel_textbuf *b, const char *s, bool quote)
{
	for (; *s; s++) {
		if (*s == '\\')
			ktel_textbuf_puts(b, "\\\\");
		else if (*s == '\n')
			ktel_textbuf_puts(b, "\\n");
		else if (*s == '"' && quote)
			ktel_textbuf_puts(b, "\\\"");
		else
			ktel_textbuf_put(b, s, 1);
	}
}

void ktel_prom_put_double(struct ktel_textbuf *b, double v)
{
	char tmp[40];

	ktel_format_shortest(v, tmp, sizeof(tmp));
	ktel_textbuf_puts(b, tmp);
}

/* ---- names ---- */

bool ktel_prom_name_char(char c, bool first, bool colon)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
	       (colon && c == ':') || (!first && c >= '0' && c <= '9');
}

bool ktel_prom_label_name_ok(const char *s)
{
	if (!*s || strcmp(s, "le") == 0 || strncmp(s, "__", 2) == 0)
		return false;
	for (const char *p = s; *p; p++)
		if (!ktel_prom_name_char(*p, p == s, false))
			return false;
	return true;
}

/* s with every character outside the allowed set replaced by '_'. */
static void put_sanitized(struct ktel_textbuf *b, const char *s, bool first, bool colon)
{
	for (; *s; s++, first = false)
		ktel_textbuf_put(b, ktel_prom_name_char(*s, first, colon) ? s : "_", 1);
}

/* The exposed name of a metric; NULL on ENOMEM. */
static char *family_name(const struct ktel_prom_set *set, const struct ktel_record *r,
			 double *ret_scale)
{
	const struct ktel_unit_rule *rule = ktel_unit_rule(r->unit);
	struct ktel_textbuf b = {0};

	if (strncmp(r->metric, set->prefix, strlen(set->prefix)) != 0)
		ktel_textbuf_puts(&b, set->prefix);
	put_sanitized(&b, r->metric, b.len == 0, true);
	if (rule && !ktel_str_ends_with(b.p ? b.p : "", rule->suffix))
		ktel_textbuf_puts(&b, rule->suffix);
	if (r->type == KTEL_RECORD_COUNTER && !ktel_str_ends_with(b.p ? b.p : "", "_total"))
		ktel_textbuf_puts(&b, "_total");
	if (b.fail || !b.p) {
		free(b.p);
		return NULL;
	}
	*ret_scale = rule ? rule->scale : 1.0;
	return b.p;
}

/* One dim's label name (reserved names prefixed "dim_") into b. */
static void put_label_name(struct ktel_textbuf *b, const char *name)
{
	const char *dn = name ? name : "dim";
	bool reserved = strcmp(dn, "le") == 0 || strncmp(dn, "__", 2) == 0;

	if (reserved)
		ktel_textbuf_puts(b, "dim_");
	put_sanitized(b, dn, !reserved, false);
}

static bool in_list(const char *s, const char *const *list, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(s, list[i]) == 0)
			return true;
	return false;
}

/* Is s the name of a configured label or of one of the n dims whose names
 * are at off[] in b? */
static bool name_taken(const char *s, const char *const *taken, uint32_t n_taken,
		       const struct ktel_textbuf *b, const uint32_t *off, uint32_t n)
{
	for (uint32_t j = 0; j < n; j++)
		if (strcmp(s, b->p + off[j]) == 0)
			return true;
	return in_list(s, taken, n_taken);
}

/*
 * The first pass writes every dim's sanitized name; the second renames
 * those a configured label has. A candidate is checked against the
 * configured labels, every dim's sanitized name and the names already
 * given, so the loop ends after at most n_taken + 2n + 1 rounds.
 */
int ktel_prom_label_names(const char *const *dims, uint32_t n, const char *const *taken,
			  uint32_t n_taken, struct ktel_textbuf *b, uint32_t *ret_off,
			  bool *ret_renamed)
{
	uint32_t san[KTEL_PROM_MAX_DIM_NAMES], off[KTEL_PROM_MAX_DIM_NAMES];
	bool renamed[KTEL_PROM_MAX_DIM_NAMES];
	struct ktel_textbuf cand = {0};

	if (n > KTEL_PROM_MAX_DIM_NAMES)
		return -E2BIG;
	b->len = 0;
	b->fail = false;
	for (uint32_t i = 0; i < n; i++) {
		san[i] = (uint32_t)b->len;
		put_label_name(b, dims[i]);
		ktel_textbuf_put(b, "", 1);
	}
	for (uint32_t i = 0; i < n && !b->fail; i++) {
		off[i] = san[i];
		renamed[i] = !b->fail && in_list(b->p + san[i], taken, n_taken);
		if (!renamed[i])
			continue;
		for (uint32_t k = 1; !cand.fail; k++) {
			cand.len = 0;
			for (uint32_t j = 0; j < k; j++)
				ktel_textbuf_put(&cand, "exported_", 9);
			ktel_textbuf_puts(&cand, b->p + san[i]);
			if (!cand.fail && !name_taken(cand.p, taken, n_taken, b, san, n) &&
			    !name_taken(cand.p, NULL, 0, b, off, i))
				break;
		}
		if (cand.fail)
			break;
		off[i] = (uint32_t)b->len;
		ktel_textbuf_put(b, cand.p, cand.len + 1);
	}
	free(cand.p);
	if (b->fail || cand.fail)
		return -ENOMEM;
	memcpy(ret_off, off, n * sizeof(*off));
	if (ret_renamed)
		memcpy(ret_renamed, renamed, n * sizeof(*renamed));
	return 0;
}

/* One label `name="value"` (escaped) into the exposition form b and
 * name\0value\0 into the pairs p. */
static void put_label(struct ktel_textbuf *b, struct ktel_textbuf *p, const char *name,
		      const char *value)
{
	if (b->len)
		ktel_textbuf_put(b, ",", 1);
	ktel_textbuf_puts(b, name);
	ktel_textbuf_puts(b, "=\"");
	ktel_prom_put_escaped(b, value, true);
	ktel_textbuf_put(b, "\"", 1);
	ktel_textbuf_put(p, name, strlen(name) + 1);
	ktel_textbuf_put(p, value, strlen(value) + 1);
}

/*
 * The labels of r's dims and the configured labels, the only place they
 * are rendered: the exposition form `name="value",...` into set->scratch
 * and name\0value\0... into set->scratch_pairs (for a protocol that
 * carries them as fields).
 */
static void render_labels(struct ktel_prom_set *set, const struct ktel_record *r)
{
	struct ktel_textbuf *b = &set->scratch, *p = &set->scratch_pairs, *nb = &set->scratch_names;
	uint32_t n = r->n_dims <= KTEL_MAX_DIMS ? r->n_dims : KTEL_MAX_DIMS;
	const char *names[KTEL_MAX_DIMS] = {0};
	uint32_t off[KTEL_MAX_DIMS];
	char num[24];

	b->len = p->len = 0;
	b->fail = p->fail = false;
	ktel_textbuf_put(b, "", 0); /* a valid empty string even without dims */
	ktel_textbuf_put(p, "", 0);
	for (uint32_t i = 0; i < n; i++)
		names[i] = r->dims[i].name;
	if (ktel_prom_label_names(names, n, (const char *const *)set->label_names, set->n_labels,
				  nb, off, NULL)) {
		b->fail = true;
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		const struct ktel_dim *d = &r->dims[i];
		const char *value = d->label;

		if (!value) {
			snprintf(num, sizeof(num), "%" PRId64, d->value);
			value = num;
		}
		put_label(b, p, nb->p + off[i], value);
	}
	for (uint32_t i = 0; i < set->n_labels; i++)
		put_label(b, p, set->label_names[i], set->label_values[i]);
	set->scratch_n_pairs = n + set->n_labels;
}

char *ktel_prom_set__labels_text(struct ktel_prom_set *set, const struct ktel_record *r)
{
	render_labels(set, r);
	if (set->scratch.fail || set->scratch_pairs.fail)
		return NULL;
	return strdup(set->scratch.p);
}

/* ---- series table ---- */

static uint64_t fnv1a(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return (h ^ 0xff) * 0x100000001b3ull; /* separates "ab"+"c" from "a"+"bc" */
}

static struct ktel_prom_series *series_find(const struct ktel_prom_set *set, uint64_t hash,
					    const char *metric, const char *labels)
{
	struct ktel_prom_series *se;

	for (se = set->table[hash & (set->table_size - 1)]; se; se = se->hnext)
		if (se->hash == hash && strcmp(se->fam->metric, metric) == 0 &&
		    strcmp(se->labels, labels) == 0)
			return se;
	return NULL;
}

static int table_grow(struct ktel_prom_set *set)
{
	size_t size = set->table_size * 2;
	struct ktel_prom_series **t = calloc(size, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < set->table_size; i++) {
		struct ktel_prom_series *se, *next;

		for (se = set->table[i]; se; se = next) {
			next = se->hnext;
			se->hnext = t[se->hash & (size - 1)];
			t[se->hash & (size - 1)] = se;
		}
	}
	free(set->table);
	set->table = t;
	set->table_size = size;
	return 0;
}

static void family_free(struct ktel_prom_family *f)
{
	free(f->metric);
	free(f->unit);
	free(f->name);
	free(f->help);
	free(f->le_text);
	free(f);
}

/* The `le` label of every bucket of f's shape, and the bound alone, into
 * f->le_text. */
static int family_set_le(struct ktel_prom_family *f)
{
	struct ktel_textbuf b = {0};
	char bound_text[40];

	for (uint32_t k = 0; k < f->shape.n_buckets; k++) {
		bool inf;
		double bound = ktel_hist_upper_bound(&f->shape, k, &inf);

		if (inf)
			snprintf(bound_text, sizeof(bound_text), "+Inf");
		else
			ktel_format_shortest(bound / f->scale, bound_text, sizeof(bound_text));
		f->le_off[k] = (uint32_t)b.len;
		ktel_textbuf_puts(&b, "le=\"");
		ktel_textbuf_puts(&b, bound_text);
		ktel_textbuf_put(&b, "\"", 2); /* with the NUL that ends it */
		f->le_voff[k] = (uint32_t)b.len;
		ktel_textbuf_put(&b, bound_text, strlen(bound_text) + 1);
	}
	if (b.fail || !b.p) {
		free(b.p);
		return -ENOMEM;
	}
	f->le_text = b.p;
	return 0;
}

/* A metric keeps the type and histogram shape it first came with. */
static bool fits(const struct ktel_prom_family *f, const struct ktel_record *r)
{
	const struct ktel_histogram *h = &r->hist.delta;

	if (f->type != r->type)
		return false;
	return r->type != KTEL_RECORD_HISTOGRAM ||
	       (f->shape.n_buckets == h->n_buckets && f->shape.scheme == h->scheme &&
		f->shape.linear_min == h->linear_min && f->shape.linear_step == h->linear_step);
}

/* A plugin's description is any bytes: HELP gets valid UTF-8 (invalid
 * bytes '?') without control characters but the newline, which the
 * exposition escapes (a carriage return would end the line for some
 * parsers). */
static void help_sanitize(char *s)
{
	ktel_utf8_sanitize(s);
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 && *s != '\n')
			*s = ' ';
}

static struct ktel_prom_family *family_new(const struct ktel_record *r, char *name, double scale)
{
	struct ktel_prom_family *f = calloc(1, sizeof(*f));

	if (!f || !(f->metric = strdup(r->metric)) || (r->unit && !(f->unit = strdup(r->unit))) ||
	    (r->description && *r->description && !(f->help = strdup(r->description))))
		goto fail;
	if (f->help)
		help_sanitize(f->help);
	f->name = name;
	f->type = r->type;
	f->scale = scale;
	if (r->type == KTEL_RECORD_HISTOGRAM) {
		f->shape = r->hist.delta;
		memset(f->shape.counts, 0, sizeof(f->shape.counts));
		if (family_set_le(f)) {
			f->name = NULL;
			goto fail;
		}
	}
	return f;
fail:
	if (f)
		family_free(f);
	return NULL;
}

/* The family of r's metric, created when new; NULL when r does not fit it
 * (type or histogram shape changed, name taken) or on ENOMEM. */
static struct ktel_prom_family *family_get(struct ktel_prom_set *set, const struct ktel_record *r)
{
	struct ktel_prom_family *f;
	double scale = 1.0;
	char *name;

	for (f = set->families; f; f = f->next)
		if (strcmp(f->metric, r->metric) == 0)
			return fits(f, r) ? f : NULL;
	name = family_name(set, r, &scale);
	if (!name)
		return NULL;
	for (f = set->families; f; f = f->next)
		if (strcmp(f->name, name) == 0)
			break;
	if (f) { /* another metric sanitizes to the same name */
		free(name);
		return NULL;
	}
	f = family_new(r, name, scale);
	if (!f) {
		free(name);
		return NULL;
	}
	set->n_families++;
	if (set->families_tail)
		set->families_tail->next = f;
	else
		set->families = f;
	set->families_tail = f;
	return f;
}

static struct ktel_prom_series *series_new(struct ktel_prom_set *set, struct ktel_prom_family *f,
					   uint64_t hash)
{
	struct ktel_prom_series *se = calloc(1, sizeof(*se));

	if (!se || !(se->labels = strdup(set->scratch.p)) ||
	    !(se->pairs = malloc(set->scratch_pairs.len + 1))) {
		if (se)
			free(se->labels);
		free(se);
		return NULL;
	}
	memcpy(se->pairs, set->scratch_pairs.p, set->scratch_pairs.len + 1);
	se->n_pairs = set->scratch_n_pairs;
	se->fam = f;
	se->hash = hash;
	return se;
}

/* An ended series with r's labels is superseded by the one made now. */
static void supersede(struct ktel_prom_set *set, uint64_t hash, const char *metric,
		      const char *labels)
{
	for (struct ktel_prom_series *se = set->ended; se; se = se->fnext)
		if (se->hash == hash && strcmp(se->fam->metric, metric) == 0 &&
		    strcmp(se->labels, labels) == 0)
			se->superseded = true;
}

/* The series of r, created when new; NULL (counted) when it cannot be. */
static struct ktel_prom_series *series_get(struct ktel_prom_set *set, const struct ktel_record *r)
{
	struct ktel_prom_family *f;
	struct ktel_prom_series *se;
	uint64_t hash;

	render_labels(set, r);
	if (set->scratch.fail || set->scratch_pairs.fail)
		return NULL;
	hash = fnv1a(fnv1a(0xcbf29ce484222325ull, r->metric), set->scratch.p);
	se = series_find(set, hash, r->metric, set->scratch.p);
	if (se)
		return fits(se->fam, r) ? se : NULL;
	if (set->n_series >= set->max_series) {
		set->series_dropped++;
		return NULL;
	}
	if (set->n_series >= set->table_size && table_grow(set))
		return NULL;
	f = family_get(set, r);
	if (!f)
		return NULL;
	se = series_new(set, f, hash);
	if (!se)
		return NULL;
	if (set->ended)
		supersede(set, hash, r->metric, set->scratch.p);
	se->hnext = set->table[hash & (set->table_size - 1)];
	set->table[hash & (set->table_size - 1)] = se;
	if (f->last)
		f->last->fnext = se;
	else
		f->first = se;
	f->last = se;
	f->n_series++;
	set->n_series++;
	return se;
}

/* Take se out of its family and the table, onto the ended list. */
static void series_end(struct ktel_prom_set *set, struct ktel_prom_series *se)
{
	struct ktel_prom_family *f = se->fam;
	struct ktel_prom_series **p = &set->table[se->hash & (set->table_size - 1)], *prev = NULL;

	while (*p && *p != se)
		p = &(*p)->hnext;
	if (*p)
		*p = se->hnext;
	for (p = &f->first; *p && *p != se; p = &(*p)->fnext)
		prev = *p;
	if (*p)
		*p = se->fnext;
	if (f->last == se)
		f->last = prev;
	f->n_series--;
	set->n_series--;
	se->hnext = NULL;
	se->fnext = set->ended;
	set->ended = se;
	set->n_ended++;
}

/* The series r ends, when the set has it. */
static enum ktel_prom_applied apply_end(struct ktel_prom_set *set, const struct ktel_record *r)
{
	struct ktel_prom_series *se;

	render_labels(set, r);
	if (set->scratch.fail || set->scratch_pairs.fail)
		return KTEL_PROM_DROPPED;
	se = series_find(set, fnv1a(fnv1a(0xcbf29ce484222325ull, r->metric), set->scratch.p),
			 r->metric, set->scratch.p);
	if (se)
		series_end(set, se);
	return KTEL_PROM_APPLIED;
}

void ktel_prom_set__free_ended(struct ktel_prom_set *set)
{
	struct ktel_prom_series *se, *next;

	for (se = set->ended; se; se = next) {
		next = se->fnext;
		free(se->labels);
		free(se->pairs);
		free(se);
	}
	set->ended = NULL;
	set->n_ended = 0;
}

enum ktel_prom_applied ktel_prom_set__apply(struct ktel_prom_set *set, const struct ktel_record *r)
{
	struct ktel_prom_series *se;

	if (r->type == KTEL_RECORD_EVENT)
		return KTEL_PROM_SKIPPED;
	if (!r->metric || !*r->metric || r->type < KTEL_RECORD_HISTOGRAM ||
	    r->type > KTEL_RECORD_GAUGE ||
	    (r->type == KTEL_RECORD_HISTOGRAM &&
	     (r->hist.delta.n_buckets == 0 || r->hist.delta.n_buckets > KTEL_HIST_BUCKETS ||
	      r->hist.total.n_buckets != r->hist.delta.n_buckets)))
		return KTEL_PROM_DROPPED;
	if (r->series_end)
		return apply_end(set, r);
	se = series_get(set, r);
	if (!se)
		return KTEL_PROM_DROPPED;
	switch (r->type) {
	case KTEL_RECORD_HISTOGRAM:
		memcpy(se->h.counts, r->hist.total.counts,
		       r->hist.total.n_buckets * sizeof(se->h.counts[0]));
		se->has_sum = r->hist.total.has_sum;
		se->h.sum = r->hist.total.sum;
		break;
	case KTEL_RECORD_COUNTER:
		se->total = r->counter.total;
		break;
	default:
		se->gauge = r->gauge;
		break;
	}
	return KTEL_PROM_APPLIED;
}

/* ---- values ---- */

static void emit_u64(ktel_prom_sample_cb cb, void *ctx, struct ktel_prom_sample *sm, uint64_t v,
		     double scale)
{
	sm->kind = scale == 1.0 ? KTEL_PROM_U64 : KTEL_PROM_DOUBLE;
	sm->u = v;
	sm->value = (double)v / scale;
	cb(ctx, sm);
}

void ktel_prom_series__samples(const struct ktel_prom_family *f, const struct ktel_prom_series *se,
			       ktel_prom_sample_cb cb, void *ctx)
{
	struct ktel_prom_sample sm = {.suffix = ""};
	uint64_t cum = 0;

	switch (f->type) {
	case KTEL_RECORD_HISTOGRAM:
		sm.suffix = "_bucket";
		for (uint32_t k = 0; k < f->shape.n_buckets; k++) {
			cum += se->h.counts[k];
			sm.le_label = f->le_text + f->le_off[k];
			sm.le_value = f->le_text + f->le_voff[k];
			emit_u64(cb, ctx, &sm, cum, 1.0);
		}
		sm.le_label = sm.le_value = NULL;
		if (se->has_sum) {
			sm.suffix = "_sum";
			emit_u64(cb, ctx, &sm, se->h.sum, f->scale);
		}
		sm.suffix = "_count";
		emit_u64(cb, ctx, &sm, cum, 1.0);
		break;
	case KTEL_RECORD_COUNTER:
		emit_u64(cb, ctx, &sm, se->total, f->scale);
		break;
	default:
		sm.kind = f->scale == 1.0 ? KTEL_PROM_I64 : KTEL_PROM_DOUBLE;
		sm.i = se->gauge;
		sm.value = (double)se->gauge / f->scale;
		cb(ctx, &sm);
		break;
	}
}

/* ---- set ---- */

int ktel_prom_set__init(struct ktel_prom_set *set, const char *prefix, uint64_t max_series)
{
	memset(set, 0, sizeof(*set));
	set->prefix = strdup(prefix);
	set->table = calloc(INITIAL_TABLE, sizeof(*set->table));
	if (!set->prefix || !set->table) {
		ktel_prom_set__fini(set);
		return -ENOMEM;
	}
	set->table_size = INITIAL_TABLE;
	set->max_series = max_series;
	return 0;
}

int ktel_prom_set__add_label(struct ktel_prom_set *set, const char *name, const char *value)
{
	uint32_t n = set->n_labels;
	char **names, **values;

	if (!ktel_prom_label_name_ok(name))
		return -EINVAL;
	if (in_list(name, (const char *const *)set->label_names, n))
		return -EEXIST;
	names = realloc(set->label_names, (n + 1) * sizeof(*names));
	if (!names)
		return -ENOMEM;
	set->label_names = names;
	values = realloc(set->label_values, (n + 1) * sizeof(*values));
	if (!values)
		return -ENOMEM;
	set->label_values = values;
	names[n] = strdup(name);
	values[n] = strdup(value);
	if (!names[n] || !values[n]) {
		free(names[n]);
		free(values[n]);
		return -ENOMEM;
	}
	set->n_labels++;
	return 0;
}

int ktel_prom_set__add_labels(struct ktel_prom_set *set, const json_t *labels,
			      const char *sink_name, struct ktel_err *err)
{
	const char *key;
	json_t *v;
	int ret;

	json_object_foreach((json_t *)labels, key, v) {
		ret = json_is_string(v) ? ktel_prom_set__add_label(set, key, json_string_value(v))
					: -EINVAL;
		if (ret == -ENOMEM)
			return ktel_err_set(err, ENOMEM, "sinks.%s: out of memory", sink_name);
		if (ret)
			return ktel_err_set(err, -ret,
					    "sinks.%s.labels: \"%.60s\" is not a label name a "
					    "user may set, or not a string",
					    sink_name, key);
	}
	return 0;
}

void ktel_prom_set__fini(struct ktel_prom_set *set)
{
	struct ktel_prom_family *f, *fnext;

	for (f = set->families; f; f = fnext) {
		struct ktel_prom_series *se, *snext;

		fnext = f->next;
		for (se = f->first; se; se = snext) {
			snext = se->fnext;
			free(se->labels);
			free(se->pairs);
			free(se);
		}
		family_free(f);
	}
	ktel_prom_set__free_ended(set);
	for (uint32_t i = 0; i < set->n_labels; i++) {
		free(set->label_names[i]);
		free(set->label_values[i]);
	}
	free(set->label_names);
	free(set->label_values);
	free(set->table);
	free(set->scratch.p);
	free(set->scratch_pairs.p);
	free(set->scratch_names.p);
	free(set->prefix);
	memset(set, 0, sizeof(*set));
}
