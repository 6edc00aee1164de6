// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "stream_reader.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "btf_layout.h"
#include "enum_label.h"
#include "metric_pull.h"

/* Longest decimal of an int array element, plus its comma. */
#define ELEM_TEXT_MAX 21
#define ARRAY_ELLIPSIS ",..."
/* Returned by the sample callback to stop ring_buffer__consume() at the budget. */
#define BUDGET_SPENT (-EINTR)
/* BPF map names the kernel keeps (BPF_OBJ_NAME_LEN - 1). */
#define KERNEL_MAP_NAME_LEN 15

/* ---- decoder ------------------------------------------------------------ */

/* Labels of one label_map dimension, cached by id. */
struct label_cache {
	char names[KTEL_STREAM_LABEL_IDS][KTEL_STREAM_LABEL_LEN];
	bool known[KTEL_STREAM_LABEL_IDS];
	/* Batch in which the map lacked the id: not asked again in that batch. */
	uint64_t absent_gen[KTEL_STREAM_LABEL_IDS];
};

struct dec_field {
	const struct ktel_field *f;
	__s32 enum_id;                         /* label from this BTF enum, or 0 */
	struct ktel_enum_labels *short_labels; /* KTEL_DIM_ENUM_SHORT, or NULL */
	int label_dim;                         /* label from this dimension's label map, or -1 */
	size_t str_off; /* strings: offset of its text in the record's strbuf */
};

struct dec_dim {
	const char *name;
	uint32_t field; /* index in dec->fields */
	struct label_cache *lc;
};

struct ktel_stream_decoder {
	const struct ktel_metric_desc *md;
	const struct btf *btf;
	struct ktel_layout *layout;
	struct dec_field fields[KTEL_MAX_EVENT_FIELDS];
	uint32_t n_fields;
	struct dec_dim dims[KTEL_MAX_DIMS];
	uint32_t n_dims;
	const struct ktel_field *ts; /* u64 ts_ns / timestamp_ns, or NULL */
	size_t strbuf_size;
	ktel_stream_label_fn label_fn;
	void *label_ctx;
	uint64_t gen;
};

static int64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* other - monotonic, with the monotonic reading taken on both sides of the
 * other one so the offset is off by at most half the time between them. */
static int64_t mono_offset(clockid_t other, int64_t *ret_other)
{
	int64_t m1 = clock_ns(CLOCK_MONOTONIC);
	int64_t o = clock_ns(other);
	int64_t m2 = clock_ns(CLOCK_MONOTONIC);

	*ret_other = o;
	return o - (m1 + (m2 - m1) / 2);
}

void ktel_stream_clock__read(struct ktel_stream_clock *ret)
{
	int64_t boot, wall;

	ret->mono_to_boot_ns = mono_offset(CLOCK_BOOTTIME, &boot);
	ret->mono_to_wall_ns = mono_offset(CLOCK_REALTIME, &wall);
	ret->now_boot_ns = (uint64_t)boot;
	ret->now_wall_ns = wall;
}

/* v + off in [0, UINT64_MAX]. The offset is signed: boottime - monotonic,
 * measured, can come out a few ns below zero when nothing was suspended. */
static uint64_t add_offset_saturated(uint64_t v, int64_t off)
{
	uint64_t mag = off < 0 ? (uint64_t)0 - (uint64_t)off : (uint64_t)off;

	if (off >= 0)
		return v > UINT64_MAX - mag ? UINT64_MAX : v + mag;
	return v < mag ? 0 : v - mag;
}

static size_t string_room(const struct ktel_field *f)
{
	if (f->kind == KTEL_FIELD_CHAR_ARRAY)
		return (size_t)f->size + 1;
	if (f->kind == KTEL_FIELD_INT_ARRAY)
		return (size_t)(f->count < KTEL_STREAM_ARRAY_MAX ? f->count
								 : KTEL_STREAM_ARRAY_MAX) *
			       ELEM_TEXT_MAX +
		       sizeof(ARRAY_ELLIPSIS);
	return 0;
}

static bool is_timestamp(const struct ktel_field *f)
{
	return f->kind == KTEL_FIELD_INT && f->size == 8 && !f->is_signed &&
	       (!strcmp(f->name, "ts_ns") || !strcmp(f->name, "timestamp_ns"));
}

static int resolve_fields(struct ktel_stream_decoder *dec, struct ktel_err *err)
{
	const struct ktel_layout *l = dec->layout;

	if (l->n_fields > KTEL_MAX_EVENT_FIELDS)
		return ktel_err_set(err, E2BIG,
				    "metric %s: event type %s has %u fields, a record "
				    "holds at most %d",
				    dec->md->name, l->type_name, l->n_fields,
				    KTEL_MAX_EVENT_FIELDS);
	if (!l->n_fields)
		return ktel_err_set(err, EINVAL, "metric %s: event type %s has no members",
				    dec->md->name, l->type_name);
	for (uint32_t i = 0; i < l->n_fields; i++) {
		struct dec_field *df = &dec->fields[i];

		df->f = &l->fields[i];
		df->label_dim = -1;
		df->enum_id = df->f->kind == KTEL_FIELD_ENUM ? (__s32)df->f->enum_type_id : 0;
		df->str_off = dec->strbuf_size;
		dec->strbuf_size += string_room(df->f);
		if (!dec->ts && is_timestamp(df->f))
			dec->ts = df->f;
	}
	dec->n_fields = l->n_fields;
	return 0;
}

/* KTEL_DIM_ENUM_SHORT on an event member: the field and the dimension
 * both carry the short label (enum_label.h). */
static int short_labels(struct ktel_stream_decoder *dec, const struct ktel_dimension_desc *dd,
			struct dec_field *df, struct ktel_err *err)
{
	__s32 id = df->enum_id > 0
			   ? df->enum_id
			   : (df->f->kind == KTEL_FIELD_ENUM ? (__s32)df->f->enum_type_id : 0);
	int r;

	if (id <= 0)
		return ktel_err_set(err, EINVAL,
				    "metric %s: dimension %s: KTEL_DIM_ENUM_SHORT "
				    "but no enum labels it (set label_enum)",
				    dec->md->name, dd->name);
	ktel_enum_labels__free(df->short_labels);
	df->short_labels = NULL;
	r = ktel_enum_labels__new(dec->btf, (__u32)id, &df->short_labels, err);
	return r ? ktel_err_prefix(err, "metric %s: dimension %s: ", dec->md->name, dd->name) : 0;
}

static int resolve_dim(struct ktel_stream_decoder *dec, uint32_t i, struct ktel_err *err)
{
	const struct ktel_dimension_desc *dd = &dec->md->dims[i];
	const char *member = dd->key_member ? dd->key_member : dd->name;
	const struct ktel_field *f = ktel_layout__find(dec->layout, member);
	struct dec_dim *dim = &dec->dims[i];
	struct dec_field *df;
	int r;

	if (!f || !ktel_field__is_number(f))
		return ktel_err_set(err, EINVAL,
				    "metric %s: dimension %s: event type %s has no "
				    "integer or enum member %s",
				    dec->md->name, dd->name, dec->layout->type_name, member);
	dim->name = dd->name;
	dim->field = (uint32_t)(f - dec->layout->fields);
	df = &dec->fields[dim->field];
	if (dd->label_enum) {
		df->enum_id = ktel_btf_find_enum(dec->btf, dd->label_enum);
		if (df->enum_id <= 0)
			return ktel_err_set(err, ENOENT,
					    "metric %s: dimension %s: enum %s not in "
					    "the object's BTF (export it with KTEL_EXPORT_TYPE)",
					    dec->md->name, dd->name, dd->label_enum);
	}
	if (dec->md->dim_flags && (dec->md->dim_flags[i] & KTEL_DIM_ENUM_SHORT)) {
		r = short_labels(dec, dd, df, err);
		if (r)
			return r;
	}
	if (dd->label_map) {
		if (!dec->label_fn)
			return ktel_err_set(err, EINVAL,
					    "metric %s: dimension %s: label map %s "
					    "but no way to read it",
					    dec->md->name, dd->name, dd->label_map);
		dim->lc = calloc(1, sizeof(*dim->lc));
		if (!dim->lc)
			return ktel_err_set(err, ENOMEM, "out of memory");
		df->label_dim = (int)i;
	}
	dec->n_dims = i + 1;
	return 0;
}

int ktel_stream_decoder__new(const struct ktel_metric_desc *md, const struct btf *btf,
			     ktel_stream_label_fn label_fn, void *label_ctx,
			     struct ktel_stream_decoder **ret, struct ktel_err *err)
{
	struct ktel_stream_decoder *dec;
	__s32 id;
	int r;

	if (!md->event_type)
		return ktel_err_set(err, EINVAL, "metric %s: stream metric without event_type",
				    md->name);
	if (md->n_dims > KTEL_MAX_DIMS)
		return ktel_err_set(err, EINVAL, "metric %s: %u dimensions, at most %d", md->name,
				    md->n_dims, KTEL_MAX_DIMS);
	r = ktel_btf_validate(btf, err);
	if (r)
		return ktel_err_prefix(err, "metric %s: ", md->name);
	id = ktel_btf_find_struct(btf, md->event_type);
	if (id <= 0)
		return ktel_err_set(err, ENOENT,
				    "metric %s: event type struct %s not in the "
				    "object's BTF (export it with KTEL_EXPORT_TYPE)",
				    md->name, md->event_type);
	dec = calloc(1, sizeof(*dec));
	if (!dec)
		return ktel_err_set(err, ENOMEM, "out of memory");
	dec->md = md;
	dec->btf = btf;
	dec->label_fn = label_fn;
	dec->label_ctx = label_ctx;
	dec->gen = 1;
	r = ktel_layout__new(btf, (__u32)id, 0, &dec->layout, err);
	if (r) {
		ktel_err_prefix(err, "metric %s: event type: ", md->name);
		goto err_free;
	}
	r = resolve_fields(dec, err);
	for (uint32_t i = 0; !r && i < md->n_dims; i++)
		r = resolve_dim(dec, i, err);
	if (r)
		goto err_free;
	*ret = dec;
	return 0;

err_free:
	ktel_stream_decoder__free(dec);
	return r;
}

void ktel_stream_decoder__free(struct ktel_stream_decoder *dec)
{
	if (!dec)
		return;
	for (uint32_t i = 0; i < KTEL_MAX_DIMS; i++)
		free(dec->dims[i].lc);
	for (uint32_t i = 0; i < KTEL_MAX_EVENT_FIELDS; i++)
		ktel_enum_labels__free(dec->fields[i].short_labels);
	ktel_layout__free(dec->layout);
	free(dec);
}

size_t ktel_stream_decoder__event_size(const struct ktel_stream_decoder *dec)
{
	return dec->layout->size;
}

size_t ktel_stream_decoder__strbuf_size(const struct ktel_stream_decoder *dec)
{
	return dec->strbuf_size ? dec->strbuf_size : 1;
}

void ktel_stream_decoder__new_batch(struct ktel_stream_decoder *dec)
{
	dec->gen++;
}

/* Label of id in dimension dim's label map; NULL when it has none (yet). */
static const char *map_label(struct ktel_stream_decoder *dec, uint32_t dim, int64_t id)
{
	struct label_cache *lc = dec->dims[dim].lc;

	if (id < 0 || id >= KTEL_STREAM_LABEL_IDS)
		return NULL;
	if (lc->known[id])
		return lc->names[id];
	if (lc->absent_gen[id] == dec->gen)
		return NULL;
	if (dec->label_fn(dec->label_ctx, dim, (uint64_t)id, lc->names[id],
			  KTEL_STREAM_LABEL_LEN) == 0 &&
	    lc->names[id][0]) {
		lc->known[id] = true;
		return lc->names[id];
	}
	lc->absent_gen[id] = dec->gen;
	return NULL;
}

/* Decimal digits of v at p (no NUL); returns the end. sprintf costs more
 * than the rest of an event's decode. */
static char *put_decimal(char *p, uint64_t v)
{
	char tmp[20], *t = tmp + sizeof(tmp);
	size_t n;

	do {
		*--t = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	n = (size_t)(tmp + sizeof(tmp) - t);
	memcpy(p, t, n);
	return p + n;
}

static void format_array(const struct ktel_field *f, const void *data, char *out)
{
	uint32_t n = f->count < KTEL_STREAM_ARRAY_MAX ? f->count : KTEL_STREAM_ARRAY_MAX;
	char *p = out;

	for (uint32_t k = 0; k < n; k++) {
		if (k)
			*p++ = ',';
		if (f->is_signed) {
			int64_t v = ktel_field_read_elem_s64(f, data, k);

			if (v < 0)
				*p++ = '-';
			p = put_decimal(p, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v);
		} else {
			p = put_decimal(p, ktel_field_read_elem_u64(f, data, k));
		}
	}
	if (n < f->count)
		p = stpcpy(p, ARRAY_ELLIPSIS);
	*p = '\0';
}

static void decode_field(struct ktel_stream_decoder *dec, const struct dec_field *df,
			 const void *data, char *strbuf, struct ktel_event_field *out)
{
	const struct ktel_field *f = df->f;
	char *s = strbuf + df->str_off;

	out->name = f->name;
	out->label = NULL;
	out->s = NULL;
	out->size = 0;
	out->id_label = false;
	switch (f->kind) {
	case KTEL_FIELD_CHAR_ARRAY:
		out->type = KTEL_FIELD_VALUE_STRING;
		memcpy(s, (const char *)data + f->offset, f->size);
		s[f->size] = '\0';
		out->s = s;
		out->i = 0;
		out->u = 0;
		return;
	case KTEL_FIELD_INT_ARRAY:
		out->type = KTEL_FIELD_VALUE_STRING;
		format_array(f, data, s);
		out->s = s;
		out->i = 0;
		out->u = 0;
		return;
	default:
		break;
	}
	/* The width travels for sinks with typed fields (Android atoms). */
	out->size = (uint8_t)f->size;
	out->id_label = df->label_dim >= 0;
	/* Both views of one value: i and u hold the same 64 bits. */
	if (f->is_signed) {
		out->type = KTEL_FIELD_VALUE_INT;
		out->i = ktel_field_read_s64(f, data);
		out->u = (uint64_t)out->i;
	} else {
		out->type = KTEL_FIELD_VALUE_UINT;
		out->u = ktel_field_read_u64(f, data);
		out->i = (int64_t)out->u;
	}
	if (df->label_dim >= 0)
		out->label = map_label(dec, (uint32_t)df->label_dim, out->i);
	if (!out->label && df->short_labels)
		out->label = ktel_enum_labels__find(df->short_labels, out->i);
	else if (!out->label && df->enum_id > 0)
		out->label = ktel_layout_enum_label(dec->btf, (__u32)df->enum_id, out->i);
}

int ktel_stream_decoder__decode(struct ktel_stream_decoder *dec, const void *data, size_t size,
				const struct ktel_stream_clock *clk, struct ktel_record *rec,
				struct ktel_event_field *fields, char *strbuf)
{
	const struct ktel_metric_desc *md = dec->md;

	if (size < dec->layout->size)
		return -EMSGSIZE;
	rec->type = KTEL_RECORD_EVENT;
	rec->metric = md->name;
	rec->atom = md->atom_name;
	rec->atom_id = md->atom_id;
	rec->unit = md->unit;
	rec->description = md->description;
	if (dec->ts) {
		/* The program writes the stamp: any 64 bits. A sum that does not
		 * fit saturates (no wrap to a time long past, no overflow). */
		uint64_t mono = ktel_field_read_u64(dec->ts, data);

		rec->start_boottime_ns = add_offset_saturated(mono, clk->mono_to_boot_ns);
		if (mono > INT64_MAX || __builtin_add_overflow((int64_t)mono, clk->mono_to_wall_ns,
							       &rec->start_wall_ns))
			rec->start_wall_ns = INT64_MAX;
	} else {
		rec->start_boottime_ns = clk->now_boot_ns;
		rec->start_wall_ns = clk->now_wall_ns;
	}
	rec->end_boottime_ns = rec->start_boottime_ns;
	rec->end_wall_ns = rec->start_wall_ns;
	rec->event.n_fields = dec->n_fields;
	rec->event.fields = fields;
	for (uint32_t i = 0; i < dec->n_fields; i++)
		decode_field(dec, &dec->fields[i], data, strbuf, &fields[i]);
	rec->n_dims = dec->n_dims;
	for (uint32_t i = 0; i < dec->n_dims; i++) {
		const struct ktel_event_field *ef = &rec->event.fields[dec->dims[i].field];
		struct ktel_dim *d = &rec->dims[i];

		d->name = dec->dims[i].name;
		d->value = ef->type == KTEL_FIELD_VALUE_INT ? ef->i : (int64_t)ef->u;
		d->label = ef->label;
		d->id_label = dec->dims[i].lc != NULL;
	}
	return 0;
}

/* ---- reader -------------------------------------------------------------- */

/* A label_map dimension's id -> name map in the kernel. */
struct label_src {
	int fd;
	struct ktel_layout *key_layout, *value_layout;
	const struct ktel_field *id_field, *name_field;
	unsigned char *key, *value;
};

struct ktel_stream_reader {
	uv_loop_t *loop;
	uv_poll_t poll;
	bool poll_init, polling, consuming;
	const struct ktel_metric_desc *md;
	struct ring_buffer *rb;
	uint32_t map_id;
	uint32_t ring_bytes; /* the ring's size: bounds a drain */
	struct ktel_stream_decoder *dec;
	struct label_src labels[KTEL_MAX_DIMS];
	int lost_fd;
	uint64_t *lost_values; /* one per possible CPU */
	int n_cpus;
	ktel_stream_records_fn fn;
	void *ctx;
	struct ktel_record *recs;        /* KTEL_STREAM_BATCH */
	struct ktel_event_field *fields; /* KTEL_MAX_EVENT_FIELDS per record */
	char *strbuf;                    /* KTEL_STREAM_BATCH * str_per_rec */
	size_t str_per_rec;
	size_t n;
	unsigned int budget;
	struct ktel_stream_clock clk;
	uint64_t seq;
	int last_error;
	struct ktel_stream_stats stats;
	struct ktel_stream_stats self_prev;
};

/*
 * The map named name: libbpf 1.1 renames a map whose pin was reused to the
 * kernel's 15-character copy of its name (label maps are pinned), so fall
 * back to that spelling.
 */
static struct bpf_map *find_map(struct bpf_object *obj, const char *name)
{
	struct bpf_map *map = bpf_object__find_map_by_name(obj, name);

	if (map || strlen(name) <= KERNEL_MAP_NAME_LEN)
		return map;
	bpf_object__for_each_map(map, obj) {
		const char *n = bpf_map__name(map);

		if (strlen(n) == KERNEL_MAP_NAME_LEN && !strncmp(n, name, KERNEL_MAP_NAME_LEN))
			return map;
	}
	return NULL;
}

static int map_fd(const struct ktel_metric_desc *md, const struct bpf_map *map, const char *name,
		  struct ktel_err *err)
{
	int fd = bpf_map__fd(map);

	if (fd < 0)
		return ktel_err_set(err, EBADF, "metric %s: map %s is not loaded", md->name, name);
	return fd;
}

static int label_lookup(void *ctx, uint32_t dim, uint64_t id, char *buf, size_t len)
{
	struct ktel_stream_reader *sr = ctx;
	struct label_src *ls = &sr->labels[dim];
	size_t n;

	memset(ls->key, 0, ls->key_layout->size);
	/* The id at the key member's width, in host byte order as BPF wrote it. */
	switch (ls->id_field->size) {
	case 1: {
		uint8_t v = (uint8_t)id;
		memcpy(ls->key + ls->id_field->offset, &v, 1);
		break;
	}
	case 2: {
		uint16_t v = (uint16_t)id;
		memcpy(ls->key + ls->id_field->offset, &v, 2);
		break;
	}
	case 4: {
		uint32_t v = (uint32_t)id;
		memcpy(ls->key + ls->id_field->offset, &v, 4);
		break;
	}
	default:
		memcpy(ls->key + ls->id_field->offset, &id, 8);
		break;
	}
	if (bpf_map_lookup_elem(ls->fd, ls->key, ls->value) != 0)
		return -errno;
	n = ls->name_field->size < len - 1 ? ls->name_field->size : len - 1;
	memcpy(buf, ls->value + ls->name_field->offset, n);
	buf[n] = '\0';
	return 0;
}

static void label_src_clear(struct label_src *ls)
{
	ktel_layout__free(ls->key_layout);
	ktel_layout__free(ls->value_layout);
	free(ls->key);
	free(ls->value);
	memset(ls, 0, sizeof(*ls));
}

static int label_src_init(struct ktel_stream_reader *sr, struct bpf_object *obj, uint32_t dim,
			  struct ktel_err *err)
{
	const char *name = sr->md->dims[dim].label_map;
	struct label_src *ls = &sr->labels[dim];
	const struct btf *btf = bpf_object__btf(obj);
	struct bpf_map *map = find_map(obj, name);
	int r;

	if (!map)
		return ktel_err_set(err, ENOENT, "label map %s not in the object", name);
	r = map_fd(sr->md, map, name, err);
	if (r < 0)
		return r;
	ls->fd = r;
	if (!bpf_map__btf_key_type_id(map) || !bpf_map__btf_value_type_id(map))
		return ktel_err_set(err, EINVAL, "label map %s: no BTF key/value types", name);
	r = ktel_layout__new(btf, bpf_map__btf_key_type_id(map), bpf_map__key_size(map),
			     &ls->key_layout, err);
	r = r
		    ?: ktel_layout__new(btf, bpf_map__btf_value_type_id(map),
					bpf_map__value_size(map), &ls->value_layout, err);
	if (r)
		return ktel_err_prefix(err, "label map %s: ", name);
	if (ls->key_layout->n_fields == 1 && ls->key_layout->fields[0].kind == KTEL_FIELD_INT)
		ls->id_field = &ls->key_layout->fields[0];
	for (__u32 i = 0; i < ls->value_layout->n_fields && !ls->name_field; i++)
		if (ls->value_layout->fields[i].kind == KTEL_FIELD_CHAR_ARRAY)
			ls->name_field = &ls->value_layout->fields[i];
	if (!ls->id_field || !ls->name_field)
		return ktel_err_set(err, EINVAL,
				    "label map %s: expected an integer key and a "
				    "char array in the value",
				    name);
	ls->key = calloc(1, ls->key_layout->size);
	ls->value = calloc(1, ls->value_layout->size);
	if (!ls->key || !ls->value)
		return ktel_err_set(err, ENOMEM, "out of memory");
	return 0;
}

static int lost_init(struct ktel_stream_reader *sr, struct bpf_object *obj, struct ktel_err *err)
{
	const char *name = sr->md->lost_map;
	struct bpf_map *map;
	int r;

	sr->lost_fd = -1;
	if (!name)
		return 0;
	map = find_map(obj, name);
	if (!map)
		return ktel_err_set(err, ENOENT, "metric %s: lost map %s not in the object",
				    sr->md->name, name);
	if (bpf_map__type(map) != BPF_MAP_TYPE_PERCPU_ARRAY || bpf_map__key_size(map) != 4 ||
	    bpf_map__value_size(map) != 8)
		return ktel_err_set(err, EINVAL,
				    "metric %s: lost map %s must be a per-CPU array "
				    "of u32 -> u64",
				    sr->md->name, name);
	r = map_fd(sr->md, map, name, err);
	if (r < 0)
		return r;
	sr->n_cpus = libbpf_num_possible_cpus();
	if (sr->n_cpus <= 0)
		return ktel_err_set(err, -sr->n_cpus, "metric %s: cannot count possible CPUs",
				    sr->md->name);
	sr->lost_values = calloc((size_t)sr->n_cpus, sizeof(*sr->lost_values));
	if (!sr->lost_values)
		return ktel_err_set(err, ENOMEM, "out of memory");
	sr->lost_fd = r;
	return 0;
}

static void flush(struct ktel_stream_reader *sr)
{
	if (!sr->n)
		return;
	sr->fn(sr->ctx, sr->recs, sr->n);
	sr->stats.delivered += sr->n;
	sr->stats.batches++;
	sr->n = 0;
}

static int on_sample(void *ctx, void *data, size_t size)
{
	struct ktel_stream_reader *sr = ctx;
	struct ktel_record *rec = &sr->recs[sr->n];

	if (ktel_stream_decoder__decode(sr->dec, data, size, &sr->clk, rec,
					sr->fields + sr->n * KTEL_MAX_EVENT_FIELDS,
					sr->strbuf + sr->n * sr->str_per_rec)) {
		sr->stats.dropped_daemon++;
	} else {
		rec->boot_id = ktel_boot_id();
		rec->map_id = sr->map_id;
		rec->seq = ++sr->seq;
		if (++sr->n == KTEL_STREAM_BATCH)
			flush(sr);
	}
	/* The sample is consumed either way; stopping here leaves the rest in
	 * the ring for the next loop iteration. */
	return --sr->budget ? 0 : BUDGET_SPENT;
}

/* Consume at most one budget of events and deliver them. */
/* Deliver up to KTEL_STREAM_BUDGET events; true when the budget ran out
 * (more may be waiting). */
static bool consume(struct ktel_stream_reader *sr)
{
	int r;

	sr->consuming = true;
	ktel_stream_clock__read(&sr->clk);
	ktel_stream_decoder__new_batch(sr->dec);
	sr->budget = KTEL_STREAM_BUDGET;
	r = ring_buffer__consume(sr->rb);
	if (r < 0 && r != BUDGET_SPENT)
		sr->last_error = r;
	flush(sr);
	sr->consuming = false;
	return r == BUDGET_SPENT;
}

/*
 * Deliver everything the ring holds now. A ring of N bytes holds fewer than
 * N / 8 events (each has an 8-byte header), so that many budgets bound the
 * drain even while producers keep writing.
 */
static void drain(struct ktel_stream_reader *sr)
{
	uint64_t rounds = (uint64_t)sr->ring_bytes / 8 / KTEL_STREAM_BUDGET + 1;

	while (consume(sr) && --rounds)
		;
}

static void on_poll(uv_poll_t *handle, int status, int events)
{
	struct ktel_stream_reader *sr = handle->data;

	if (status < 0) {
		/* The epoll fd broke (it never should): stop rather than spin. */
		sr->last_error = status;
		uv_poll_stop(&sr->poll);
		sr->polling = false;
		return;
	}
	consume(sr);
}

int ktel_stream_reader__new(uv_loop_t *loop, const struct ktel_metric_desc *md,
			    struct bpf_object *obj, ktel_stream_records_fn fn, void *ctx,
			    struct ktel_stream_reader **ret, struct ktel_err *err)
{
	struct bpf_map_info info = {};
	__u32 info_len = sizeof(info);
	struct ktel_stream_reader *sr;
	struct bpf_map *map;
	bool labels = false;
	int r, fd;

	if (md->model != KTEL_MODEL_STREAM)
		return ktel_err_set(err, EINVAL, "metric %s: not a stream metric", md->name);
	if (!bpf_object__btf(obj))
		return ktel_err_set(err, EINVAL,
				    "metric %s: the BPF object has no BTF (compile "
				    "with clang -g)",
				    md->name);
	map = find_map(obj, md->map_name);
	if (!map)
		return ktel_err_set(err, ENOENT, "metric %s: map %s not in the object", md->name,
				    md->map_name);
	if (bpf_map__type(map) != BPF_MAP_TYPE_RINGBUF)
		return ktel_err_set(err, EINVAL,
				    "metric %s: map %s is not a ring buffer "
				    "(BPF_MAP_TYPE_RINGBUF)",
				    md->name, md->map_name);
	fd = map_fd(md, map, md->map_name, err);
	if (fd < 0)
		return fd;
	sr = calloc(1, sizeof(*sr));
	if (!sr)
		return ktel_err_set(err, ENOMEM, "out of memory");
	sr->loop = loop;
	sr->md = md;
	sr->fn = fn;
	sr->ctx = ctx;
	sr->lost_fd = -1;
	if (bpf_obj_get_info_by_fd(fd, &info, &info_len) == 0) {
		sr->map_id = info.id;
		sr->ring_bytes = info.max_entries;
	}
	for (uint32_t i = 0; i < md->n_dims && i < KTEL_MAX_DIMS; i++) {
		if (!md->dims[i].label_map)
			continue;
		labels = true;
		r = label_src_init(sr, obj, i, err);
		if (r) {
			ktel_err_prefix(err, "metric %s: dimension %s: ", md->name,
					md->dims[i].name);
			goto err_free;
		}
	}
	r = ktel_stream_decoder__new(md, bpf_object__btf(obj), labels ? label_lookup : NULL, sr,
				     &sr->dec, err);
	if (r)
		goto err_free;
	r = lost_init(sr, obj, err);
	if (r)
		goto err_free;
	sr->str_per_rec = ktel_stream_decoder__strbuf_size(sr->dec);
	sr->recs = calloc(KTEL_STREAM_BATCH, sizeof(*sr->recs));
	sr->fields = calloc((size_t)KTEL_STREAM_BATCH * KTEL_MAX_EVENT_FIELDS, sizeof(*sr->fields));
	sr->strbuf = calloc(KTEL_STREAM_BATCH, sr->str_per_rec);
	if (!sr->recs || !sr->fields || !sr->strbuf) {
		r = ktel_err_set(err, ENOMEM, "metric %s: out of memory for %d records", md->name,
				 KTEL_STREAM_BATCH);
		goto err_free;
	}
	sr->rb = ring_buffer__new(fd, on_sample, sr, NULL);
	if (!sr->rb) {
		r = ktel_err_set(err, errno, "metric %s: ring buffer %s: %s", md->name,
				 md->map_name, strerror(errno));
		goto err_free;
	}
	*ret = sr;
	return 0;

err_free:
	ktel_stream_reader__free(sr);
	return r;
}

int ktel_stream_reader__start(struct ktel_stream_reader *sr, struct ktel_err *err)
{
	int r;

	if (sr->polling)
		return 0;
	if (!sr->poll_init) {
		r = uv_poll_init(sr->loop, &sr->poll, ring_buffer__epoll_fd(sr->rb));
		if (r)
			return ktel_err_set(err, -r, "metric %s: cannot poll ring buffer %s: %s",
					    sr->md->name, sr->md->map_name, uv_strerror(r));
		sr->poll.data = sr;
		sr->poll_init = true;
	}
	r = uv_poll_start(&sr->poll, UV_READABLE, on_poll);
	if (r)
		return ktel_err_set(err, -r, "metric %s: cannot poll ring buffer %s: %s",
				    sr->md->name, sr->md->map_name, uv_strerror(r));
	sr->polling = true;
	return 0;
}

void ktel_stream_reader__stop(struct ktel_stream_reader *sr)
{
	if (!sr || !sr->polling)
		return;
	/* From inside the callback the consume in progress delivers them. */
	if (!sr->consuming)
		drain(sr);
	uv_poll_stop(&sr->poll);
	sr->polling = false;
}

void ktel_stream_reader__stats(const struct ktel_stream_reader *sr, struct ktel_stream_stats *ret)
{
	uint32_t key = 0;

	*ret = sr->stats;
	ret->lost_kernel = 0;
	if (sr->lost_fd < 0 || bpf_map_lookup_elem(sr->lost_fd, &key, sr->lost_values) != 0)
		return;
	for (int i = 0; i < sr->n_cpus; i++)
		ret->lost_kernel += sr->lost_values[i];
}

uint32_t ktel_stream_reader__map_id(const struct ktel_stream_reader *sr)
{
	return sr->map_id;
}

int ktel_stream_reader__self_records(struct ktel_stream_reader *sr, const struct ktel_record *tmpl,
				     struct ktel_record *recs, size_t max, size_t *ret_n)
{
	static const char *const names[KTEL_STREAM_SELF_RECORDS] = {
		"ktel_stream_delivered",
		"ktel_stream_lost_kernel",
		"ktel_stream_dropped_daemon",
	};
	struct ktel_stream_stats s;
	uint64_t now[KTEL_STREAM_SELF_RECORDS], prev[KTEL_STREAM_SELF_RECORDS];

	if (max < KTEL_STREAM_SELF_RECORDS)
		return -ENOSPC;
	ktel_stream_reader__stats(sr, &s);
	now[0] = s.delivered, now[1] = s.lost_kernel, now[2] = s.dropped_daemon;
	prev[0] = sr->self_prev.delivered, prev[1] = sr->self_prev.lost_kernel;
	prev[2] = sr->self_prev.dropped_daemon;
	for (size_t i = 0; i < KTEL_STREAM_SELF_RECORDS; i++) {
		struct ktel_record *r = &recs[i];

		*r = *tmpl;
		r->type = KTEL_RECORD_COUNTER;
		r->metric = names[i];
		r->unit = "events";
		r->atom = NULL;
		r->atom_id = 0;
		r->map_id = sr->map_id;
		r->n_dims = 1;
		r->dims[0] = (struct ktel_dim){.name = "metric", .value = 0, .label = sr->md->name};
		r->counter.total = now[i];
		/* A counter that went down (the lost map was recreated) restarts. */
		r->counter.delta = now[i] >= prev[i] ? now[i] - prev[i] : now[i];
	}
	sr->self_prev = s;
	*ret_n = KTEL_STREAM_SELF_RECORDS;
	return 0;
}

static void release(struct ktel_stream_reader *sr)
{
	ring_buffer__free(sr->rb);
	ktel_stream_decoder__free(sr->dec);
	for (uint32_t i = 0; i < KTEL_MAX_DIMS; i++)
		label_src_clear(&sr->labels[i]);
	free(sr->lost_values);
	free(sr->recs);
	free(sr->fields);
	free(sr->strbuf);
	free(sr);
}

static void on_close(uv_handle_t *handle)
{
	release(handle->data);
}

void ktel_stream_reader__free(struct ktel_stream_reader *sr)
{
	if (!sr)
		return;
	if (!sr->poll_init) {
		release(sr);
		return;
	}
	/* The ring buffer's epoll fd must outlive the handle watching it. */
	sr->polling = false;
	uv_close((uv_handle_t *)&sr->poll, on_close);
}
