// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "metric_pull.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "blockdev.h"
#include "btf_layout.h"
#include "enum_label.h"
#include "log.h"
#include "map_reader.h"

#define LABEL_MAP_MAX_IDS 256
#define LABEL_MAX_LEN 64

/* An id -> name map filled by the kernel side (strings travel as ids). */
struct label_map {
	struct ktel_map_reader *reader;
	struct ktel_layout *key_layout, *value_layout;
	const struct ktel_field *id_field, *name_field;
	char names[LABEL_MAP_MAX_IDS][LABEL_MAX_LEN];
	bool known[LABEL_MAP_MAX_IDS];
	bool fallback_logged;
};

struct dim {
	const char *name;
	const struct ktel_field *field;
	__s32 enum_id;                         /* label from this BTF enum, or 0 */
	struct ktel_enum_labels *short_labels; /* KTEL_DIM_ENUM_SHORT, or NULL */
	struct label_map *lm;                  /* label from this id -> name map, or NULL */
};

/* The "device" dimension (KTEL_DIM_DEV_*): which dims hold the numbers. */
struct dev_dim {
	int major, minor; /* dims indexes, -1 when none */
	int devt;         /* a dev_t dim, or -1 */
	struct ktel_blockdev_cache *cache;
};

/* What every record of one pull (or one totals call) carries alike. */
struct window {
	const char *boot_id;
	uint64_t start_boot, end_boot;
	int64_t start_wall, end_wall;
	uint64_t seq; /* 0 for totals, which are no window */
	/*
	 * Made from the above once per window (window_head): a record's header
	 * (the members before dims) and a histogram's (those before counts).
	 * Each record copies them whole instead of gathering a dozen members
	 * from mp, md and the reader again.
	 */
	struct ktel_record head;
};

/*
 * The last pull, for show and the control socket's pull
 * (ktel_metric_pull__last_records), kept as what its records were made
 * from rather than as the records: per emitted key, its index in the
 * snapshot (mp->last, whose keys and totals the reader keeps until its
 * next read) and its delta, which the delta engine writes straight into
 * deltas (no copy). The records are rebuilt on demand, identical (same
 * window, labels from the same tables). A new read overwrites the snapshot,
 * so a pull drops them before it reads: a failed read or an incomplete walk
 * leaves none.
 *
 * Only the first KTEL_PULL_KEEP_VALUES delta values are kept (2 MiB; 7943
 * histogram keys with a sum): writing every key's delta cost a 100k-key
 * pull a few % more (docs/benchmarks.md, "Pull cost") and
 * kept 26 MB resident, for an answer the control socket
 * could not send anyway (KTEL_CONTROL_MAX_PENDING is 16 MiB; a histogram
 * record is ~0.8 KB of JSON, and show sends every key's totals too). What
 * was not kept is counted (n_emitted) and reported. A gauge has no delta:
 * all its keys are kept, 4 bytes each.
 */
struct last_pull {
	uint32_t *keys;
	uint64_t *deltas; /* NULL for gauges, which have none */
	size_t n;         /* keys kept */
	size_t n_emitted; /* keys emitted, kept or not */
	struct window w;
};
struct ktel_metric_pull {
	const struct ktel_metric_desc *md;
	const struct btf *btf;
	struct ktel_map_reader *reader;
	struct ktel_layout *key_layout, *value_layout;
	bool map_created;
	struct dim dims[KTEL_MAX_DIMS];
	uint32_t n_dims;
	struct dev_dim dev;
	/* The KTEL_DIM_ATTRIBUTION dimension (-1: none) and the name it has in
	 * records while attribution is on (NULL: off, and records leave it
	 * out, as they were before the plugin declared it). */
	int attr_dim;
	const char *attr_name;
	/* <map>_attr_used, the kernel's count of admitted keys, mapped into
	 * this process (ktel_attr.h; BPF_F_MMAPABLE, set before load), or
	 * NULL when it could not be: deleted keys then keep their slots. */
	uint64_t *attr_used;
	/* Ageing (ktel_metric_pull__attr_release): the released ids of the
	 * next run, and what it took out of the map (taken: a bit per entry
	 * of the snapshot, max_entries bits, made at the first use). */
	bool (*released)(void *ctx, uint64_t id);
	void *released_ctx;
	uint64_t *taken;
	size_t n_taken, n_deleted;
	int take_err;
	/* Values per key: histogram buckets (+ sum), or the integer members. */
	const struct ktel_field **scalars;
	char **scalar_names;
	size_t n_scalars;
	size_t n_values;
	uint64_t *cur, *delta;
	/*
	 * A pull's records are made into win, a few hundred at a time, and
	 * handed on each time it is full (struct emit): a 100k-key pull
	 * writing all of its ~1 KB records into one buffer before routing
	 * them was most of its cost over the read itself (docs/benchmarks.md,
	 * "Pull cost"). show's totals are made in
	 * it too.
	 */
	struct ktel_record *win;
	size_t win_cap, keys_cap;
	struct ktel_map_snapshot last;
	bool have_last;
	struct last_pull lp;
	bool fallback_logged;
	uint64_t window_start_boot;
	int64_t window_start_wall;
	/* A batch of keys for run_keys' key_fn (struct ktel_pull_keys): win_cap
	 * keys, each with its delta (or level) kept in kvals when the delta
	 * engine wrote it where the next key's goes; the window and snapshot
	 * their records are made from. */
	struct ktel_pull_key *kbatch;
	uint64_t *kvals;
	const struct window *kw;
	const struct ktel_map_snapshot *ks;
};

/* ---- clocks and boot id ------------------------------------------------ */

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t ktel_now_boottime_ns(void)
{
	return clock_ns(CLOCK_BOOTTIME);
}

int64_t ktel_now_wall_ns(void)
{
	return (int64_t)clock_ns(CLOCK_REALTIME);
}

const char *ktel_boot_id(void)
{
	static char id[64];
	ssize_t n;
	int fd;

	if (id[0])
		return id;
	fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, id, sizeof(id) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0) {
		snprintf(id, sizeof(id), "unknown");
		return id;
	}
	id[n] = '\0';
	id[strcspn(id, "\n")] = '\0';
	return id;
}

/* ---- resolution ---------------------------------------------------------- */

static int map_layouts(const struct btf *btf, const struct bpf_map *map,
		       struct ktel_layout **ret_key, struct ktel_layout **ret_value,
		       struct ktel_err *err)
{
	__u32 kid = bpf_map__btf_key_type_id(map), vid = bpf_map__btf_value_type_id(map);
	int r;

	if (!kid || !vid)
		return ktel_err_set(err, EINVAL,
				    "map %s: no BTF key/value types "
				    "(declare it with __type(key, ...) and __type(value, ...))",
				    bpf_map__name(map));
	r = ktel_layout__new(btf, kid, bpf_map__key_size(map), ret_key, err);
	if (r)
		return ktel_err_prefix(err, "map %s key: ", bpf_map__name(map));
	r = ktel_layout__new(btf, vid, bpf_map__value_size(map), ret_value, err);
	if (r) {
		ktel_layout__free(*ret_key);
		*ret_key = NULL;
		return ktel_err_prefix(err, "map %s value: ", bpf_map__name(map));
	}
	return 0;
}

static void label_map_free(struct label_map *lm)
{
	if (!lm)
		return;
	ktel_map_reader__free(lm->reader);
	ktel_layout__free(lm->key_layout);
	ktel_layout__free(lm->value_layout);
	free(lm);
}

static int label_map_new(struct bpf_object *obj, const char *name, struct label_map **ret,
			 struct ktel_err *err)
{
	struct bpf_map *map = bpf_object__find_map_by_name(obj, name);
	struct label_map *lm;
	int r;

	if (!map)
		return ktel_err_set(err, ENOENT, "label map %s not in the object", name);
	lm = calloc(1, sizeof(*lm));
	if (!lm)
		return ktel_err_set(err, ENOMEM, "out of memory");
	r = map_layouts(bpf_object__btf(obj), map, &lm->key_layout, &lm->value_layout, err);
	if (r)
		goto err_free;
	for (__u32 i = 0; i < lm->key_layout->n_fields && !lm->id_field; i++)
		if (lm->key_layout->fields[i].kind == KTEL_FIELD_INT)
			lm->id_field = &lm->key_layout->fields[i];
	for (__u32 i = 0; i < lm->value_layout->n_fields && !lm->name_field; i++)
		if (lm->value_layout->fields[i].kind == KTEL_FIELD_CHAR_ARRAY)
			lm->name_field = &lm->value_layout->fields[i];
	if (!lm->id_field || !lm->name_field) {
		r = ktel_err_set(err, EINVAL,
				 "label map %s: expected an integer key and a "
				 "char array in the value",
				 name);
		goto err_free;
	}
	r = ktel_map_reader__new(bpf_map__fd(map), NULL, &lm->reader, err);
	if (r)
		goto err_free;
	if (ktel_map_reader__is_percpu(lm->reader)) {
		/* Its names would be summed across CPUs word by word. */
		r = ktel_err_set(err, EINVAL, "label map %s: a per-CPU map cannot hold names",
				 name);
		goto err_free;
	}
	*ret = lm;
	return 0;

err_free:
	label_map_free(lm);
	return r;
}

/*
 * Say once, at INFO, that a reader works by iteration and why: such a pull
 * costs two syscalls per key instead of one per map, which someone looking
 * at pull durations needs to know.
 */
static void log_fallback_once(const struct ktel_map_reader *reader, const char *metric,
			      bool *logged)
{
	const char *why = ktel_map_reader__fallback_reason(reader);

	if (!why || *logged)
		return;
	*logged = true;
	ktel_log(KTEL_LOG_INFO, "metric %s: map %s (id %u) is read by iteration: %s", metric,
		 ktel_map_reader__map_name(reader), ktel_map_reader__map_id(reader), why);
}

/* Refresh the id -> name table from the kernel map. */
static int label_map_refresh(struct label_map *lm, const char *metric, struct ktel_err *err)
{
	struct ktel_map_snapshot s;
	int r = ktel_map_reader__read(lm->reader, &s, err);

	if (r)
		return r;
	log_fallback_once(lm->reader, metric, &lm->fallback_logged);
	for (size_t i = 0; i < s.count; i++) {
		const char *key = (const char *)s.keys + i * s.key_size;
		const char *val = (const char *)s.values + i * s.value_size;
		uint64_t id = ktel_field_read_u64(lm->id_field, key);
		size_t len = lm->name_field->size;

		if (id >= LABEL_MAP_MAX_IDS)
			continue;
		if (len >= LABEL_MAX_LEN)
			len = LABEL_MAX_LEN - 1;
		memcpy(lm->names[id], val + lm->name_field->offset, len);
		lm->names[id][len] = '\0';
		lm->known[id] = lm->names[id][0] != '\0';
	}
	return 0;
}

static uint32_t dim_flags(const struct ktel_metric_desc *md, uint32_t i)
{
	return md->dim_flags ? md->dim_flags[i] : 0;
}

/* KTEL_DIM_ENUM_SHORT: the enum's short labels (enum_label.h). */
static int resolve_short(struct ktel_metric_pull *mp, uint32_t i, struct ktel_err *err)
{
	struct dim *d = &mp->dims[i];
	int r;

	if (!(dim_flags(mp->md, i) & KTEL_DIM_ENUM_SHORT))
		return 0;
	if (d->enum_id <= 0)
		return ktel_err_set(err, EINVAL,
				    "metric %s: dimension %s: KTEL_DIM_ENUM_SHORT "
				    "but no enum labels it (set label_enum)",
				    mp->md->name, d->name);
	r = ktel_enum_labels__new(mp->btf, (__u32)d->enum_id, &d->short_labels, err);
	return r ? ktel_err_prefix(err, "metric %s: dimension %s: ", mp->md->name, d->name) : 0;
}

/* KTEL_DIM_DEV_*: where the device numbers are, and the name cache. The
 * loader checked the flags are consistent (plugin_loader.c). */
static int resolve_device(struct ktel_metric_pull *mp, const char *sysfs_root, struct ktel_err *err)
{
	struct dev_dim *dv = &mp->dev;

	dv->major = dv->minor = dv->devt = -1;
	for (uint32_t i = 0; i < mp->n_dims; i++) {
		uint32_t f = dim_flags(mp->md, i);

		if (f & KTEL_DIM_DEV_MAJOR)
			dv->major = (int)i;
		if (f & KTEL_DIM_DEV_MINOR)
			dv->minor = (int)i;
		if (f & KTEL_DIM_DEV_T)
			dv->devt = (int)i;
	}
	if (dv->devt < 0 && (dv->major < 0 || dv->minor < 0))
		return 0;
	/* Indexes into a record's dims: one less past a left-out
	 * attribution dimension. */
	if (mp->attr_dim >= 0 && !mp->attr_name) {
		dv->major -= dv->major > mp->attr_dim;
		dv->minor -= dv->minor > mp->attr_dim;
		dv->devt -= dv->devt > mp->attr_dim;
	}
	if (mp->n_dims >= KTEL_MAX_DIMS)
		return ktel_err_set(err, EINVAL, "metric %s: %u dimensions and \"%s\": at most %d",
				    mp->md->name, mp->n_dims, KTEL_DEVICE_DIM, KTEL_MAX_DIMS);
	dv->cache = ktel_blockdev_cache__new(sysfs_root ? sysfs_root : "/sys",
					     KTEL_BLOCKDEV_CACHE_DEFAULT);
	if (!dv->cache)
		return ktel_err_set(err, ENOMEM, "out of memory");
	return 0;
}

static int resolve_dims(struct ktel_metric_pull *mp, struct bpf_object *obj, struct ktel_err *err)
{
	const struct ktel_metric_desc *md = mp->md;

	if (md->n_dims > KTEL_MAX_DIMS)
		return ktel_err_set(err, EINVAL, "metric %s: %u dimensions, at most %d", md->name,
				    md->n_dims, KTEL_MAX_DIMS);
	for (uint32_t i = 0; i < md->n_dims; i++) {
		const struct ktel_dimension_desc *dd = &md->dims[i];
		const char *member = dd->key_member ? dd->key_member : dd->name;
		struct dim *d = &mp->dims[i];
		int r;

		d->name = dd->name;
		d->field = ktel_layout__find(mp->key_layout, member);
		if (!d->field ||
		    (d->field->kind != KTEL_FIELD_INT && d->field->kind != KTEL_FIELD_ENUM))
			return ktel_err_set(err, EINVAL,
					    "metric %s: dimension %s: key %s has no "
					    "integer or enum member %s",
					    md->name, dd->name, mp->key_layout->type_name, member);
		if (dd->label_enum) {
			d->enum_id = ktel_btf_find_enum(mp->btf, dd->label_enum);
			if (d->enum_id <= 0)
				return ktel_err_set(err, ENOENT,
						    "metric %s: dimension %s: enum %s "
						    "not in the object's BTF (export it with "
						    "KTEL_EXPORT_TYPE)",
						    md->name, dd->name, dd->label_enum);
		} else if (d->field->kind == KTEL_FIELD_ENUM) {
			d->enum_id = (__s32)d->field->enum_type_id;
		}
		if (dim_flags(md, i) & KTEL_DIM_ATTRIBUTION) {
			if (d->field->kind != KTEL_FIELD_INT || d->field->size != 8 ||
			    d->field->count != 1)
				return ktel_err_set(err, EINVAL,
						    "metric %s: dimension %s: KTEL_DIM_ATTRIBUTION "
						    "needs a u64 key member, %s is not",
						    md->name, dd->name, member);
			mp->attr_dim = (int)i;
		}
		r = resolve_short(mp, i, err);
		if (r)
			return r;
		if (dd->label_map) {
			r = label_map_new(obj, dd->label_map, &d->lm, err);
			if (r)
				return ktel_err_prefix(err, "metric %s: dimension %s: ", md->name,
						       dd->name);
		}
		mp->n_dims = i + 1;
	}
	return 0;
}

static int resolve_values(struct ktel_metric_pull *mp, struct ktel_err *err)
{
	const struct ktel_layout *vl = mp->value_layout;

	if (vl->hist_field >= 0) {
		if (vl->n_buckets > KTEL_HIST_BUCKETS)
			return ktel_err_set(err, EINVAL, "metric %s: %u buckets, at most %d",
					    mp->md->name, vl->n_buckets, KTEL_HIST_BUCKETS);
		mp->n_values = vl->n_buckets + (vl->sum_field >= 0);
		return 0;
	}
	mp->scalars = calloc(vl->n_fields, sizeof(*mp->scalars));
	mp->scalar_names = calloc(vl->n_fields, sizeof(*mp->scalar_names));
	if (!mp->scalars || !mp->scalar_names)
		return ktel_err_set(err, ENOMEM, "out of memory");
	for (__u32 i = 0; i < vl->n_fields; i++) {
		const struct ktel_field *f = &vl->fields[i];

		if (!ktel_field__is_number(f))
			continue;
		mp->scalars[mp->n_scalars++] = f;
	}
	if (!mp->n_scalars)
		return ktel_err_set(err, EINVAL,
				    "metric %s: value %s has neither a u64 buckets "
				    "array nor integer members",
				    mp->md->name, vl->type_name);
	for (size_t i = 0; i < mp->n_scalars; i++) {
		int n = mp->n_scalars == 1 || !mp->scalars[i]->name[0]
				? asprintf(&mp->scalar_names[i], "%s", mp->md->name)
				: asprintf(&mp->scalar_names[i], "%s_%s", mp->md->name,
					   mp->scalars[i]->name);

		if (n < 0) {
			mp->scalar_names[i] = NULL;
			return ktel_err_set(err, ENOMEM, "out of memory");
		}
		/* Dotted member paths become underscores in metric names. */
		for (char *c = mp->scalar_names[i]; *c; c++)
			if (*c == '.')
				*c = '_';
	}
	mp->n_values = mp->n_scalars;
	return 0;
}

/* A per-CPU map's copies are summed per u64 word (map_reader.h): the value
 * must suit that (ktel_layout__check_percpu_sum). */
static int check_percpu_values(const struct ktel_metric_pull *mp, struct ktel_err *err)
{
	int r;

	if (!ktel_map_reader__is_percpu(mp->reader))
		return 0;
	r = ktel_layout__check_percpu_sum(mp->value_layout, err);
	if (r)
		ktel_err_prefix(err, "metric %s: map %s is per-CPU and its ", mp->md->name,
				mp->md->map_name);
	return r;
}

/* Gauges are levels: the delta engine would drop an unchanged one as a
 * zero delta and take a falling one for a reset (delta.h). */
static bool is_gauge(const struct ktel_metric_pull *mp)
{
	return mp->value_layout->hist_field < 0 && mp->md->value_kind == KTEL_VALUE_GAUGE;
}

/*
 * The pull's buffers, all sized here so that a steady-state pull allocates
 * nothing: the record window (window records, at least one key's) and the
 * last pull's keys and deltas (struct last_pull).
 */
static int alloc_buffers(struct ktel_metric_pull *mp, size_t max_entries,
			 const struct ktel_metric_pull_opts *opts, struct ktel_err *err)
{
	size_t per_key = mp->n_scalars ? mp->n_scalars : 1;
	size_t window = opts ? opts->window : 0;
	size_t keep = opts && opts->keep_values ? opts->keep_values : KTEL_PULL_KEEP_VALUES;

	mp->win_cap = window ? window : KTEL_PULL_WINDOW;
	if (mp->win_cap < per_key)
		mp->win_cap = per_key;
	mp->win = calloc(mp->win_cap, sizeof(*mp->win));
	mp->keys_cap = max_entries;
	if (!is_gauge(mp) && mp->keys_cap > keep / mp->n_values)
		mp->keys_cap = keep / mp->n_values ?: 1;
	mp->lp.keys = calloc(mp->keys_cap, sizeof(*mp->lp.keys));
	if (!is_gauge(mp))
		mp->lp.deltas = calloc(mp->keys_cap * mp->n_values, sizeof(*mp->lp.deltas));
	mp->cur = calloc(mp->n_values, sizeof(*mp->cur));
	mp->delta = calloc(mp->n_values, sizeof(*mp->delta));
	if (mp->attr_name) {
		mp->kbatch = calloc(mp->win_cap, sizeof(*mp->kbatch));
		mp->kvals = calloc(mp->win_cap * mp->n_values, sizeof(*mp->kvals));
		if (!mp->kbatch || !mp->kvals)
			return ktel_err_set(err, ENOMEM, "metric %s: out of memory for %zu keys",
					    mp->md->name, max_entries);
	}
	if (!mp->win || !mp->lp.keys || (!is_gauge(mp) && !mp->lp.deltas) || !mp->cur || !mp->delta)
		return ktel_err_set(err, ENOMEM, "metric %s: out of memory for %zu keys",
				    mp->md->name, max_entries);
	return 0;
}

/* mp->attr_used, when the object has the counter and the kernel let it be
 * mapped (BPF_F_MMAPABLE arrays: 5.5 and later). */
static void map_attr_used(struct ktel_metric_pull *mp, struct bpf_object *obj)
{
	char name[256];
	struct bpf_map *used;
	void *p;

	snprintf(name, sizeof(name), "%s_attr_used", mp->md->map_name);
	used = bpf_object__find_map_by_name(obj, name);
	if (!used || !(bpf_map__map_flags(used) & BPF_F_MMAPABLE) || bpf_map__fd(used) < 0 ||
	    bpf_map__value_size(used) != sizeof(uint64_t))
		return;
	p = mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE, MAP_SHARED,
		 bpf_map__fd(used), 0);
	if (p != MAP_FAILED)
		mp->attr_used = p;
}

int ktel_metric_pull__new(const struct ktel_metric_desc *md, struct bpf_object *obj,
			  bool map_created, struct ktel_metric_pull **ret, struct ktel_err *err)
{
	return ktel_metric_pull__new_opts(md, obj, map_created, NULL, ret, err);
}

int ktel_metric_pull__new_opts(const struct ktel_metric_desc *md, struct bpf_object *obj,
			       bool map_created, const struct ktel_metric_pull_opts *opts,
			       struct ktel_metric_pull **ret, struct ktel_err *err)
{
	struct bpf_map *map = bpf_object__find_map_by_name(obj, md->map_name);
	struct ktel_metric_pull *mp;
	int r;

	if (!map)
		return ktel_err_set(err, ENOENT, "metric %s: map %s not in the object", md->name,
				    md->map_name);
	if (!bpf_object__btf(obj))
		return ktel_err_set(err, EINVAL,
				    "metric %s: the BPF object has no BTF "
				    "(compile with clang -g)",
				    md->name);
	mp = calloc(1, sizeof(*mp));
	if (!mp)
		return ktel_err_set(err, ENOMEM, "out of memory");
	mp->md = md;
	mp->btf = bpf_object__btf(obj);
	mp->map_created = map_created;
	mp->attr_dim = -1;
	mp->attr_name = opts ? opts->attr_name : NULL;
	r = ktel_btf_validate(mp->btf, err);
	if (r)
		goto err_free;
	r = map_layouts(mp->btf, map, &mp->key_layout, &mp->value_layout, err);
	if (r)
		goto err_prefix;
	r = resolve_values(mp, err);
	if (r)
		goto err_free;
	r = resolve_dims(mp, obj, err);
	if (!r && mp->attr_name && mp->attr_dim < 0)
		r = ktel_err_set(err, EINVAL,
				 "metric %s: attribution by %s: the plugin declares no "
				 "attribution dimension (KTEL_DIM_ATTRIBUTION)",
				 md->name, mp->attr_name);
	r = r ?: resolve_device(mp, opts ? opts->sysfs_root : NULL, err);
	if (r)
		goto err_free;
	r = ktel_map_reader__new(bpf_map__fd(map), opts ? opts->reader : NULL, &mp->reader, err);
	if (r)
		goto err_prefix;
	if (mp->attr_name)
		map_attr_used(mp, obj);
	r = check_percpu_values(mp, err);
	if (r)
		goto err_free;
	r = alloc_buffers(mp, bpf_map__max_entries(map), opts, err);
	if (r)
		goto err_free;
	mp->window_start_boot = ktel_now_boottime_ns();
	mp->window_start_wall = ktel_now_wall_ns();
	*ret = mp;
	return 0;

err_prefix:
	ktel_err_prefix(err, "metric %s: ", md->name);
err_free:
	ktel_metric_pull__free(mp);
	return r;
}

void ktel_metric_pull__free(struct ktel_metric_pull *mp)
{
	if (!mp)
		return;
	for (uint32_t i = 0; i < KTEL_MAX_DIMS; i++) {
		label_map_free(mp->dims[i].lm);
		ktel_enum_labels__free(mp->dims[i].short_labels);
	}
	ktel_blockdev_cache__free(mp->dev.cache);
	for (size_t i = 0; mp->scalar_names && i < mp->n_scalars; i++)
		free(mp->scalar_names[i]);
	free(mp->scalar_names);
	free(mp->scalars);
	ktel_map_reader__free(mp->reader);
	if (mp->attr_used)
		munmap(mp->attr_used, (size_t)sysconf(_SC_PAGESIZE));
	ktel_layout__free(mp->key_layout);
	ktel_layout__free(mp->value_layout);
	free(mp->win);
	free(mp->lp.keys);
	free(mp->lp.deltas);
	free(mp->cur);
	free(mp->delta);
	free(mp->kbatch);
	free(mp->kvals);
	free(mp->taken);
	free(mp);
}

/* ---- pulling ------------------------------------------------------------- */

/*
 * The "device" dimension after the declared ones, when the numbers name a
 * device sysfs knows; none otherwise (docs/sinks.md "Label conventions").
 * Its value is the dev_t (major << 20 | minor); derived: no raw value of
 * its own in dims_raw or an atom.
 */
static void fill_device(struct ktel_metric_pull *mp, struct ktel_record *rec, uint64_t now)
{
	const struct dev_dim *dv = &mp->dev;
	uint64_t major, minor;
	const char *name;

	if (!dv->cache)
		return;
	if (dv->devt >= 0) {
		uint64_t dev = (uint64_t)rec->dims[dv->devt].value;

		major = (dev >> 20) & 0xfff;
		minor = dev & 0xfffff;
	} else {
		major = (uint64_t)rec->dims[dv->major].value;
		minor = (uint64_t)rec->dims[dv->minor].value;
	}
	/* Out of the kernel's range (12-bit major, 20-bit minor): no device. */
	if (major > 0xfff || minor > 0xfffff)
		return;
	name = ktel_blockdev_cache__name(dv->cache, (uint32_t)major, (uint32_t)minor, now);
	if (!name)
		return;
	rec->dims[rec->n_dims++] = (struct ktel_dim){
		.name = KTEL_DEVICE_DIM,
		.value = (int64_t)(major << 20 | minor),
		.label = name,
		.derived = true,
	};
}

static void fill_dims(struct ktel_metric_pull *mp, const void *key, uint64_t now,
		      struct ktel_record *rec)
{
	rec->n_dims = 0;
	for (uint32_t i = 0; i < mp->n_dims; i++) {
		const struct dim *d = &mp->dims[i];
		struct ktel_dim *out;

		if ((int)i == mp->attr_dim) {
			/* The raw id, named by the fold (attr_fold.h); none
			 * at all with attribution off. */
			if (!mp->attr_name)
				continue;
			out = &rec->dims[rec->n_dims++];
			*out = (struct ktel_dim){
				.name = mp->attr_name,
				.value = (int64_t)ktel_field_read_u64(d->field, key),
			};
			continue;
		}
		out = &rec->dims[rec->n_dims++];
		out->name = d->name;
		out->derived = false;
		out->value = d->field->is_signed ? ktel_field_read_s64(d->field, key)
						 : (int64_t)ktel_field_read_u64(d->field, key);
		out->label = NULL;
		out->id_label = d->lm != NULL;
		if (d->lm && out->value >= 0 && out->value < LABEL_MAP_MAX_IDS &&
		    d->lm->known[out->value])
			out->label = d->lm->names[out->value];
		else if (d->short_labels)
			out->label = ktel_enum_labels__find(d->short_labels, out->value);
		else if (d->enum_id > 0)
			out->label = ktel_layout_enum_label(mp->btf, (__u32)d->enum_id, out->value);
	}
	fill_device(mp, rec, now);
}

static enum ktel_record_type record_type(const struct ktel_metric_pull *mp)
{
	if (mp->value_layout->hist_field >= 0)
		return KTEL_RECORD_HISTOGRAM;
	return is_gauge(mp) ? KTEL_RECORD_GAUGE : KTEL_RECORD_COUNTER;
}

static void fill_header(const struct ktel_metric_pull *mp, const struct window *w,
			struct ktel_record *rec)
{
	const struct ktel_metric_desc *md = mp->md;

	rec->type = record_type(mp);
	rec->n_dims = mp->n_dims;
	rec->metric = md->name;
	rec->atom = md->atom_name;
	rec->atom_id = md->atom_id;
	rec->unit = md->unit;
	rec->description = md->description;
	rec->start_boottime_ns = w->start_boot;
	rec->end_boottime_ns = w->end_boot;
	rec->start_wall_ns = w->start_wall;
	rec->end_wall_ns = w->end_wall;
	rec->boot_id = w->boot_id;
	rec->map_id = ktel_map_reader__map_id(mp->reader);
	rec->seq = w->seq;
}

/* Current cumulative values of one entry into mp->cur. */
static void read_values(struct ktel_metric_pull *mp, const void *value)
{
	const struct ktel_layout *vl = mp->value_layout;

	if (vl->hist_field >= 0) {
		const struct ktel_field *h = &vl->fields[vl->hist_field];

		for (__u32 k = 0; k < vl->n_buckets; k++)
			mp->cur[k] = ktel_field_read_elem_u64(h, value, k);
		if (vl->sum_field >= 0)
			mp->cur[vl->n_buckets] = ktel_field_read_u64(&vl->fields[vl->sum_field],
								     value);
		return;
	}
	for (size_t i = 0; i < mp->n_scalars; i++)
		mp->cur[i] = mp->scalars[i]->is_signed
				     ? (uint64_t)ktel_field_read_s64(mp->scalars[i], value)
				     : ktel_field_read_u64(mp->scalars[i], value);
}

static void hist_head(const struct ktel_metric_pull *mp, struct ktel_histogram *h)
{
	const struct ktel_layout *vl = mp->value_layout;

	h->scheme = mp->md->scheme ? mp->md->scheme : KTEL_HIST_LOG2;
	h->linear_min = mp->md->linear_min;
	h->linear_step = mp->md->linear_step;
	h->n_buckets = vl->n_buckets;
	h->has_sum = vl->sum_field >= 0;
}

/* The header of every record of window w (struct window). */
static void window_head(const struct ktel_metric_pull *mp, struct window *w)
{
	memset(&w->head, 0, sizeof(w->head));
	fill_header(mp, w, &w->head);
	if (mp->value_layout->hist_field >= 0) {
		hist_head(mp, &w->head.hist.delta);
		hist_head(mp, &w->head.hist.total);
	}
}

/* Histogram h from values v (buckets, then the sum if any) and header hd. */
static void set_hist(const struct ktel_histogram *hd, const uint64_t *v, struct ktel_histogram *h)
{
	memcpy(h, hd, offsetof(struct ktel_histogram, counts));
	/* The usual 32 buckets as a copy of constant size, which the compiler
	 * inlines: no call and no size dispatch per record. */
	if (hd->n_buckets == KTEL_HIST_BUCKETS)
		memcpy(h->counts, v, sizeof(h->counts));
	else
		memcpy(h->counts, v, hd->n_buckets * sizeof(uint64_t));
	h->has_sum = hd->has_sum;
	h->sum = hd->has_sum ? v[hd->n_buckets] : 0;
}

/*
 * Turn one entry's values (and delta, when non-NULL) into records at out.
 * A record is written member by member, never cleared whole: dims past
 * n_dims, buckets past n_buckets and the union members of other types are
 * left as they are (record.h: sinks read only what those counts and the type
 * say). A record is ~1 KB and a 100k-key pull writes 100k of them, so the
 * bytes not written are the pull's cost (docs/benchmarks.md, "Pull
 * cost").
 */
static size_t make_records(struct ktel_metric_pull *mp, const void *key, const uint64_t *total,
			   const uint64_t *delta, const struct window *w, struct ktel_record *out)
{
	if (mp->value_layout->hist_field >= 0) {
		memcpy(out, &w->head, offsetof(struct ktel_record, dims));
		fill_dims(mp, key, w->end_boot, out);
		set_hist(&w->head.hist.total, total, &out->hist.total);
		set_hist(&w->head.hist.delta, delta ? delta : total, &out->hist.delta);
		return 1;
	}
	for (size_t i = 0; i < mp->n_scalars; i++) {
		struct ktel_record *rec = &out[i];

		memcpy(rec, &w->head, offsetof(struct ktel_record, dims));
		fill_dims(mp, key, w->end_boot, rec);
		rec->metric = mp->scalar_names[i];
		if (rec->type == KTEL_RECORD_GAUGE) {
			rec->gauge = (int64_t)total[i];
		} else {
			rec->counter.total = total[i];
			rec->counter.delta = delta ? delta[i] : total[i];
		}
	}
	return mp->n_scalars;
}

static int refresh_labels(struct ktel_metric_pull *mp, struct ktel_err *err)
{
	for (uint32_t i = 0; i < mp->n_dims; i++) {
		int r = mp->dims[i].lm ? label_map_refresh(mp->dims[i].lm, mp->md->name, err) : 0;

		if (r)
			return ktel_err_prefix(err, "metric %s: label map %s: ", mp->md->name,
					       mp->md->dims[i].label_map);
	}
	return 0;
}

/*
 * Where the records being made go: mp->win, handed to fn (which may be
 * NULL: baseline pulls emit nothing) whenever the next key's records might
 * not fit, and at the end. The window is reused, so the records stay in the
 * cache from being made to being formatted by the sinks.
 */
struct emit {
	ktel_pull_records_fn fn;
	ktel_pull_keys_fn key_fn; /* keys instead of records (run_keys) */
	void *ctx;
	size_t n;     /* records in the window now */
	size_t total; /* records handed on so far */
};

static const struct ktel_record *key_record(const struct ktel_pull_keys *b, size_t i);

static void emit_flush(struct ktel_metric_pull *mp, struct emit *e)
{
	if (!e->n)
		return;
	if (e->key_fn) {
		struct ktel_pull_keys b = {
			.k = mp->kbatch,
			.n = e->n,
			.key_size = mp->ks->key_size,
			.n_vals = mp->n_values,
			.head = &mp->kw->head,
			.record = key_record,
			.priv = mp,
		};

		e->key_fn(e->ctx, &b);
	} else if (e->fn) {
		e->fn(e->ctx, mp->win, e->n);
	}
	e->total += e->n;
	e->n = 0;
}

static void emit_key(struct ktel_metric_pull *mp, struct emit *e, const void *key,
		     const uint64_t *total, const uint64_t *delta, const struct window *w)
{
	if (e->n + (mp->n_scalars ? mp->n_scalars : 1) > mp->win_cap)
		emit_flush(mp, e);
	e->n += make_records(mp, key, total, delta, w, &mp->win[e->n]);
}

/* The device dimension fill_device would add for key: its value, or
 * KTEL_PULL_NO_DERIVED. Attribution is on, so dims index mp->dims. */
static uint64_t device_of(struct ktel_metric_pull *mp, const void *key, uint64_t now)
{
	const struct dev_dim *dv = &mp->dev;
	uint64_t major, minor;

	if (!dv->cache)
		return KTEL_PULL_NO_DERIVED;
	if (dv->devt >= 0) {
		uint64_t dev = ktel_field_read_u64(mp->dims[dv->devt].field, key);

		major = (dev >> 20) & 0xfff;
		minor = dev & 0xfffff;
	} else {
		major = ktel_field_read_u64(mp->dims[dv->major].field, key);
		minor = ktel_field_read_u64(mp->dims[dv->minor].field, key);
	}
	if (major > 0xfff || minor > 0xfffff ||
	    !ktel_blockdev_cache__name(dv->cache, (uint32_t)major, (uint32_t)minor, now))
		return KTEL_PULL_NO_DERIVED;
	return major << 20 | minor;
}

/* Key i's record of a batch: the one the key would have made, into win,
 * its totals read from the snapshot again. */
static const struct ktel_record *key_record(const struct ktel_pull_keys *b, size_t i)
{
	struct ktel_metric_pull *mp = b->priv;
	const struct ktel_pull_key *k = &b->k[i];
	const struct ktel_map_snapshot *s = mp->ks;

	read_values(mp, (const char *)s->values + k->pos * s->value_size);
	make_records(mp, k->key, mp->cur, is_gauge(mp) ? NULL : k->vals, mp->kw, mp->win);
	return mp->win;
}

/*
 * Keys per batch for run_keys (at most the window): few enough that the
 * deltas the delta engine just wrote for them (264 bytes for a histogram
 * of 32 buckets with its sum) are still in the first-level cache when the
 * consumer reads them, which a window's worth (256 keys) are not.
 */
#define KEY_BATCH 32

/* Add key i of snapshot s to the batch for e->key_fn (run_keys); no record
 * is made unless the consumer asks for it. */
static void emit_key_fn(struct ktel_metric_pull *mp, struct emit *e,
			const struct ktel_map_snapshot *s, size_t i, const uint64_t *delta,
			const struct window *w)
{
	const void *key = (const char *)s->keys + i * s->key_size;
	const uint64_t *vals = delta ? delta : mp->cur;
	struct ktel_pull_key *k;

	if (e->n == mp->win_cap || e->n == KEY_BATCH)
		emit_flush(mp, e);
	mp->kw = w;
	mp->ks = s;
	k = &mp->kbatch[e->n];
	/* The delta engine's scratch (or the level) is the next key's too. */
	if (vals == mp->delta || vals == mp->cur) {
		uint64_t *keep = &mp->kvals[e->n * mp->n_values];

		memcpy(keep, vals, mp->n_values * sizeof(*keep));
		vals = keep;
	}
	*k = (struct ktel_pull_key){
		.pos = i,
		.key = key,
		.id = ktel_field_read_u64(mp->dims[mp->attr_dim].field, key),
		.derived = device_of(mp, key, w->end_boot),
		.vals = vals,
	};
	e->n++;
}

/* Where the delta engine writes the next key's delta: its place in the last
 * pull (struct last_pull), kept if the key emits, overwritten by the next if
 * not; the scratch once that is full. */
static uint64_t *delta_slot(struct ktel_metric_pull *mp)
{
	if (mp->lp.n >= mp->keys_cap)
		return mp->delta;
	return &mp->lp.deltas[mp->lp.n * mp->n_values];
}

/* Was entry i of this run's snapshot taken out of the map (take_released)? */
static bool was_taken(const struct ktel_metric_pull *mp, size_t i)
{
	return mp->n_taken && (mp->taken[i / 64] >> (i % 64) & 1);
}

/*
 * Records for every entry of s, to e: the current level of a gauge, the
 * delta against dm (this pull's round of the metric in the delta engine) of
 * anything else; the emitted keys into mp->lp. Between ktel_delta__begin and
 * _end. When the delta engine fails at a key (out of memory), the keys
 * before it are already applied: their records are handed on all the same
 * (the window is flushed), so what the state counts is what the sinks got;
 * that key and the ones after it are untouched and the caller aborts the
 * round, which keeps them for the next pull. Nothing is lost and nothing is
 * counted twice.
 */
static int make_windows(struct ktel_metric_pull *mp, struct ktel_delta_metric *dm,
			const struct ktel_map_snapshot *s, const struct window *w, struct emit *e,
			struct ktel_err *err)
{
	struct ktel_delta_reading in = {
		.key_size = s->key_size,
		.vals = mp->cur,
		.n = mp->n_values,
	};
	bool gauge = is_gauge(mp);

	for (size_t i = 0; i < s->count; i++) {
		const void *key = (const char *)s->keys + i * s->key_size;
		uint64_t *delta = gauge ? NULL : delta_slot(mp);
		int r;

		read_values(mp, (const char *)s->values + i * s->value_size);
		if (!gauge) {
			in.key = key;
			r = was_taken(mp, i) ? ktel_delta__apply_taken(dm, &in, delta)
					     : ktel_delta__apply(dm, &in, delta);
			if (r < 0) {
				emit_flush(mp, e);
				return ktel_err_set(err, -r,
						    "metric %s: delta engine: %s (the "
						    "%zu records of the keys before it were "
						    "emitted; the rest keep their state)",
						    mp->md->name, strerror(-r), e->total);
			}
			/* Baseline, all-zero and refused keys make no record. */
			if (r != KTEL_DELTA_EMIT && r != KTEL_DELTA_RESET)
				continue;
		}
		if (mp->lp.n < mp->keys_cap)
			mp->lp.keys[mp->lp.n++] = (uint32_t)i;
		mp->lp.n_emitted++;
		if (e->key_fn)
			emit_key_fn(mp, e, s, i, delta, w);
		else
			emit_key(mp, e, key, mp->cur, delta, w);
	}
	emit_flush(mp, e);
	return 0;
}

/*
 * The walk stayed truncated after the reader walked the map a second time.
 * Ending a delta round on it would forget every key it missed, and their
 * whole cumulative values would come back as deltas on the next pull: so no
 * round is started, nothing is emitted, and the pull fails to be counted and
 * logged. show keeps what was read (mp->last follows the reader's buffers).
 */
static int incomplete_pull(struct ktel_metric_pull *mp, const struct ktel_map_snapshot *s,
			   struct ktel_err *err)
{
	mp->last = *s;
	mp->have_last = true;
	return ktel_err_set(err, EAGAIN,
			    "metric %s: map %s (id %u): incomplete pull: the %s walk "
			    "stopped at a bound twice (%zu of at most %u entries read); nothing "
			    "emitted, every key keeps its state for the next pull",
			    mp->md->name, ktel_map_reader__map_name(mp->reader),
			    ktel_map_reader__map_id(mp->reader), s->stats.method, s->count,
			    ktel_map_reader__max_entries(mp->reader));
}

/* Read the map and the label maps; the last pull's records go, since
 * the read overwrites the snapshot they are rebuilt from. */
static int read_all(struct ktel_metric_pull *mp, struct ktel_map_snapshot *s, struct ktel_err *err)
{
	const char *name = mp->md->name;
	int r;

	mp->lp.n = mp->lp.n_emitted = 0;
	r = ktel_map_reader__read(mp->reader, s, err);
	if (r)
		return ktel_err_prefix(err, "metric %s: ", name);
	log_fallback_once(mp->reader, name, &mp->fallback_logged);
	if (s->stats.truncated)
		return incomplete_pull(mp, s, err);
	return refresh_labels(mp, err);
}

/*
 * The delta round around make_windows. The records carry the sequence
 * number from the start, taken at the end only if any were emitted (by a
 * failed round too: they went out with it): stamping it afterwards was a
 * second pass over every record (docs/benchmarks.md, "Pull cost").
 */
static int delta_round(struct ktel_metric_pull *mp, struct ktel_delta *d,
		       const struct ktel_map_snapshot *s, struct window *w, struct emit *e,
		       enum ktel_delta_start *ret_start, struct ktel_err *err)
{
	const char *name = mp->md->name;
	struct ktel_delta_metric *dm;
	int r;

	r = ktel_delta__begin(d, name, ktel_map_reader__map_id(mp->reader), mp->map_created, &dm,
			      ret_start);
	if (r)
		return ktel_err_set(err, -r, "metric %s: delta engine: %s", name, strerror(-r));
	w->seq = ktel_delta__peek_seq(d, name);
	window_head(mp, w);
	r = make_windows(mp, dm, s, w, e, err);
	if (r)
		ktel_delta__abort(d, name); /* keys not reached keep their state */
	else
		ktel_delta__end(d, name);
	if (e->total)
		ktel_delta__next_seq(d, name); /* w->seq: nothing took one since */
	mp->lp.w = *w;
	return r;
}

static void give_back(uint64_t *used, uint64_t n);

/*
 * Ageing, right after the read: every key of a released id leaves the map
 * with the value it held as it left (ktel_map_reader__take), which replaces
 * the one read, so the window counts the key's events up to its delete and
 * none is lost between the read and the delete. Where the kernel cannot
 * take a key (before 5.14) it is deleted after the read as it was read:
 * the events counted in between are lost. A key that is gone already
 * counts as taken with the value read (nothing else deletes keys). The
 * taken keys' slots go back to the admitted-key count, once each: the
 * kernel admits an id whose key is made again like any new one.
 */
static void take_released(struct ktel_metric_pull *mp, const struct ktel_map_snapshot *s)
{
	const struct ktel_field *field = mp->dims[mp->attr_dim].field;
	size_t words = (ktel_map_reader__max_entries(mp->reader) + 63) / 64;
	size_t deleted = 0;

	for (size_t i = 0; i < s->count; i++) {
		const void *key = (const unsigned char *)s->keys + i * s->key_size;
		uint64_t id = ktel_field_read_u64(field, key);
		int r;

		if (id == KTEL_ATTR_OVERFLOW_ID || id == KTEL_ATTR_UNKNOWN_ID ||
		    !mp->released(mp->released_ctx, id))
			continue;
		if (!mp->taken) {
			mp->taken = calloc(words, sizeof(*mp->taken));
			if (!mp->taken) {
				mp->take_err = -ENOMEM;
				break;
			}
		}
		if (!mp->n_taken)
			memset(mp->taken, 0, words * sizeof(*mp->taken));
		r = ktel_map_reader__take(mp->reader, i);
		if (r == -EOPNOTSUPP)
			r = ktel_map_reader__delete(mp->reader, key);
		if (r && r != -ENOENT) {
			if (!mp->take_err)
				mp->take_err = r;
			continue;
		}
		if (!r)
			deleted++;
		mp->taken[i / 64] |= 1ULL << (i % 64);
		mp->n_taken++;
	}
	if (deleted && mp->attr_used)
		give_back(mp->attr_used, deleted);
	mp->n_deleted = deleted;
}

/* run and run_keys: key_fn NULL makes records. */
static int run(struct ktel_metric_pull *mp, struct ktel_delta *d, const char *boot_id,
	       ktel_pull_keys_fn key_fn, ktel_pull_records_fn fn, void *ctx,
	       struct ktel_pull_info *ret_info, struct ktel_err *err)
{
	uint64_t t0 = ktel_now_boottime_ns();
	int64_t wall = ktel_now_wall_ns();
	struct ktel_pull_info info = {0};
	struct window w = {.boot_id = boot_id,
			   .end_boot = t0,
			   .end_wall = wall,
			   .start_boot = mp->window_start_boot,
			   .start_wall = mp->window_start_wall};
	struct emit e = {.fn = fn, .key_fn = key_fn, .ctx = ctx};
	struct ktel_map_snapshot s;
	int r;

	mp->n_taken = mp->n_deleted = 0;
	mp->take_err = 0;
	r = read_all(mp, &s, err);
	if (!r && mp->released)
		take_released(mp, &s);
	mp->released = NULL;
	if (r)
		return r;
	r = delta_round(mp, d, &s, &w, &e, &info.start, err);
	mp->last = s;
	mp->have_last = true;
	if (r)
		return r;
	if (is_gauge(mp))
		info.start = 0;
	mp->window_start_boot = t0;
	mp->window_start_wall = wall;
	info.method = s.stats.method;
	info.syscalls = s.stats.syscalls;
	info.keys = s.count;
	info.records = e.total;
	info.duration_ns = ktel_now_boottime_ns() - t0;
	if (ret_info)
		*ret_info = info;
	return 0;
}

int ktel_metric_pull__run(struct ktel_metric_pull *mp, struct ktel_delta *d, const char *boot_id,
			  ktel_pull_records_fn fn, void *ctx, struct ktel_pull_info *ret_info,
			  struct ktel_err *err)
{
	return run(mp, d, boot_id, NULL, fn, ctx, ret_info, err);
}

int ktel_metric_pull__run_keys(struct ktel_metric_pull *mp, struct ktel_delta *d,
			       const char *boot_id, ktel_pull_keys_fn key_fn,
			       ktel_pull_records_fn fn, void *ctx, struct ktel_pull_info *ret_info,
			       struct ktel_err *err)
{
	/* One record per key, with the attribution id in it. */
	bool keys = mp->attr_dim >= 0 && mp->attr_name && mp->n_scalars <= 1;

	return run(mp, d, boot_id, keys ? key_fn : NULL, fn, ctx, ret_info, err);
}

int ktel_metric_pull__baseline(struct ktel_metric_pull *mp, struct ktel_delta *d, bool *ret_taken,
			       struct ktel_err *err)
{
	struct ktel_pull_info info;
	int r;

	*ret_taken = false;
	if (mp->map_created || is_gauge(mp) ||
	    ktel_delta__knows_map(d, mp->md->name, ktel_map_reader__map_id(mp->reader)))
		return 0;
	/* A pull under the baseline policy: it emits nothing. */
	r = run(mp, d, ktel_boot_id(), NULL, NULL, NULL, &info, err);
	if (r)
		return r;
	mp->lp.n = mp->lp.n_emitted = 0;
	*ret_taken = info.start == KTEL_DELTA_START_BASELINE;
	return 0;
}

size_t ktel_metric_pull__last_records(struct ktel_metric_pull *mp, ktel_pull_records_fn fn,
				      void *ctx)
{
	const struct ktel_map_snapshot *s = &mp->last;
	struct emit e = {.fn = fn, .ctx = ctx};

	for (size_t j = 0; j < mp->lp.n; j++) {
		size_t i = mp->lp.keys[j];

		read_values(mp, (const char *)s->values + i * s->value_size);
		emit_key(mp, &e, (const char *)s->keys + i * s->key_size, mp->cur,
			 mp->lp.deltas ? &mp->lp.deltas[j * mp->n_values] : NULL, &mp->lp.w);
	}
	emit_flush(mp, &e);
	return (mp->lp.n_emitted - mp->lp.n) * (mp->n_scalars ? mp->n_scalars : 1);
}

void ktel_metric_pull__totals(struct ktel_metric_pull *mp, ktel_pull_records_fn fn, void *ctx)
{
	struct window w = {
		.boot_id = ktel_boot_id(),
		.start_boot = mp->window_start_boot,
		.end_boot = mp->window_start_boot,
		.start_wall = mp->window_start_wall,
		.end_wall = mp->window_start_wall,
	};
	const struct ktel_map_snapshot *s = &mp->last;
	struct emit e = {.fn = fn, .ctx = ctx};

	window_head(mp, &w);
	for (size_t i = 0; mp->have_last && i < s->count; i++) {
		read_values(mp, (const char *)s->values + i * s->value_size);
		emit_key(mp, &e, (const char *)s->keys + i * s->key_size, mp->cur, NULL, &w);
	}
	emit_flush(mp, &e);
}

uint32_t ktel_metric_pull__map_id(const struct ktel_metric_pull *mp)
{
	return ktel_map_reader__map_id(mp->reader);
}

const char *ktel_metric_pull__fallback_reason(const struct ktel_metric_pull *mp)
{
	return ktel_map_reader__fallback_reason(mp->reader);
}

const struct ktel_metric_desc *ktel_metric_pull__desc(const struct ktel_metric_pull *mp)
{
	return mp->md;
}

/*
 * Give n slots back to the kernel's count of admitted keys. The programs
 * change the count with atomic adds (ktel_attr.h, KTEL_ATTR_ADMIT: add 1,
 * undo with an add of -1) on this very word, which is mapped here; a
 * compare-and-swap on it is atomic with them (a locked instruction on
 * x86-64, an exclusive or LSE one on arm64, as the BPF JIT emits for
 * theirs), so no admission or undo racing with it is lost, as a read and a
 * write through bpf_map_update_elem would lose it. The keys are deleted
 * before the slots are given back: in between, the count says more than
 * the map holds and the kernel admits fewer keys, never more than fit.
 * The count never goes below zero: a wrap would stop every admission.
 */
static void give_back(uint64_t *used, uint64_t n)
{
	uint64_t cur = __atomic_load_n(used, __ATOMIC_RELAXED), next;

	do {
		next = cur > n ? cur - n : 0;
	} while (!__atomic_compare_exchange_n(used, &cur, next, false, __ATOMIC_SEQ_CST,
					      __ATOMIC_RELAXED));
}

void ktel_metric_pull__attr_release(struct ktel_metric_pull *mp,
				    bool (*released)(void *ctx, uint64_t id), void *ctx)
{
	if (mp->attr_dim < 0 || !mp->attr_name || is_gauge(mp))
		return;
	mp->released = released;
	mp->released_ctx = ctx;
}

size_t ktel_metric_pull__attr_taken(const struct ktel_metric_pull *mp, int *ret_err)
{
	*ret_err = mp->take_err;
	return mp->n_deleted;
}

bool ktel_metric_pull__attr_counted(const struct ktel_metric_pull *mp)
{
	return mp->attr_used != NULL;
}
