// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* ktelemetryctl inspect: a plugin's maps as the generic decoder sees them. */
#include "inspect.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "bpf_lifecycle.h"
#include "btf_layout.h"
#include "enum_label.h"
#include "jsonutil.h"
#include "record.h"
#include "kernel_targets.h"
#include "plugin_loader.h"

#define MAX_ENUM_LABELS 256
/* Bounds on what the current-value step reads from the kernel: the maps of
 * one program, and the size of a .rodata value it copies. */
#define MAX_PROG_MAPS 64
#define MAX_RODATA_BYTES (1u << 20)

/* ---- inspect ---------------------------------------------------------------- */

static const char *field_kind_name(enum ktel_field_kind k)
{
	static const char *const names[] = {
		[KTEL_FIELD_INT] = "int",
		[KTEL_FIELD_ENUM] = "enum",
		[KTEL_FIELD_CHAR_ARRAY] = "char_array",
		[KTEL_FIELD_INT_ARRAY] = "int_array",
	};

	return (unsigned)k < KTEL_ARRAY_SIZE(names) && names[k] ? names[k] : "?";
}

/* {"value": "label", ...} of an ENUM or ENUM64 type, bounded. */
static json_t *enum_labels_json(const struct btf *btf, __u32 id)
{
	const struct btf_type *t = btf__type_by_id(btf, id);
	json_t *o = json_object();
	char key[32];

	if (!t || !o)
		return o;
	for (__u16 i = 0; i < btf_vlen(t) && i < MAX_ENUM_LABELS; i++) {
		const char *name;
		long long v;

		if (btf_is_enum(t)) {
			const struct btf_enum *e = btf_enum(t) + i;

			name = btf__name_by_offset(btf, e->name_off);
			v = btf_kflag(t) ? (long long)e->val : (long long)(__u32)e->val;
		} else if (btf_kind(t) == BTF_KIND_ENUM64) {
			const struct btf_enum64 *e = (const struct btf_enum64 *)(t + 1) + i;

			name = btf__name_by_offset(btf, e->name_off);
			v = (long long)(((__u64)e->val_hi32 << 32) | e->val_lo32);
		} else {
			break;
		}
		snprintf(key, sizeof(key), "%lld", v);
		json_object_set_new(o, key, json_string(name ?: ""));
	}
	return o;
}

static json_t *layout_json(const struct btf *btf, const struct ktel_layout *l)
{
	json_t *fields = json_array();

	for (__u32 i = 0; i < l->n_fields; i++) {
		const struct ktel_field *f = &l->fields[i];
		json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:b}", "name", f->name,
				      "kind", field_kind_name(f->kind), "offset",
				      (json_int_t)f->offset, "size", (json_int_t)f->size,
				      "elem_size", (json_int_t)f->elem_size, "count",
				      (json_int_t)f->count, "signed", f->is_signed);

		if (o && f->kind == KTEL_FIELD_ENUM)
			json_object_set_new(o, "labels", enum_labels_json(btf, f->enum_type_id));
		json_array_append_new(fields, o);
	}
	return json_pack("{s:s, s:I, s:o}", "type", l->type_name, "size", (json_int_t)l->size,
			 "fields", fields);
}

/* The key or value layout of map as JSON into o[what]; -errno with err. */
static int inspect_layout(const struct btf *btf, __u32 type_id, __u32 size, json_t *o,
			  const char *what, struct ktel_layout **ret, struct ktel_err *err)
{
	struct ktel_layout *l = NULL;
	int r;

	if (!type_id)
		return ktel_err_set(err, EINVAL,
				    "%s has no BTF type (declare the map with "
				    "__type(key, ...) and __type(value, ...))",
				    what);
	r = ktel_layout__new(btf, type_id, size, &l, err);
	if (r)
		return ktel_err_prefix(err, "%s: ", what);
	json_object_set_new(o, what, layout_json(btf, l));
	*ret = l;
	return 0;
}

/* Can the daemon turn this value into records? Same rules as metric_pull. */
static int check_value(const struct ktel_metric_desc *md, const struct ktel_layout *vl, json_t *o,
		       struct ktel_err *err)
{
	if (vl->hist_field >= 0) {
		if (vl->n_buckets > KTEL_HIST_BUCKETS)
			return ktel_err_set(err, EINVAL, "value %s: %u buckets, at most %d",
					    vl->type_name, vl->n_buckets, KTEL_HIST_BUCKETS);
		json_object_set_new(o, "histogram",
				    json_pack("{s:s, s:I, s:b}", "scheme",
					      ktel_hist_scheme_name(md->scheme ? md->scheme
									       : KTEL_HIST_LOG2),
					      "buckets", (json_int_t)vl->n_buckets, "sum",
					      vl->sum_field >= 0));
		return 0;
	}
	for (__u32 i = 0; i < vl->n_fields; i++)
		if (ktel_field__is_number(&vl->fields[i])) {
			ktel_json_set_str(o, "values",
					  md->value_kind == KTEL_VALUE_GAUGE ? "gauge" : "counter");
			return 0;
		}
	return ktel_err_set(err, EINVAL,
			    "value %s has neither a u64 buckets array nor integer "
			    "members",
			    vl->type_name);
}

static bool map_is_percpu(const struct bpf_map *map)
{
	enum bpf_map_type t = bpf_map__type(map);

	return t == BPF_MAP_TYPE_PERCPU_HASH || t == BPF_MAP_TYPE_PERCPU_ARRAY ||
	       t == BPF_MAP_TYPE_LRU_PERCPU_HASH || t == BPF_MAP_TYPE_PERCPU_CGROUP_STORAGE;
}

/* The daemon's rule for per-CPU values (ktel_layout__check_percpu_sum). */
static int check_percpu_value(const struct bpf_map *map, const struct ktel_layout *vl,
			      struct ktel_err *err)
{
	return map_is_percpu(map) ? ktel_layout__check_percpu_sum(vl, err) : 0;
}

static const struct ktel_field *first_field_of_kind(const struct ktel_layout *l,
						    enum ktel_field_kind kind)
{
	for (__u32 i = 0; i < l->n_fields; i++)
		if (l->fields[i].kind == kind)
			return &l->fields[i];
	return NULL;
}

/*
 * The daemon's rules for an id -> name label map (metric_pull.c
 * label_map_new): the first integer member of the key is the id, the first
 * char array of the value the name, and the map is not per-CPU (names would
 * be summed across CPUs). Describes the map into o["label_map_layout"].
 */
static int check_label_map(const char *name, struct bpf_object *obj, json_t *o,
			   struct ktel_err *err)
{
	const struct btf *btf = bpf_object__btf(obj);
	const struct bpf_map *map = bpf_object__find_map_by_name(obj, name);
	struct ktel_layout *kl = NULL, *vl = NULL;
	const struct ktel_field *id, *label;
	json_t *lm;
	int r;

	if (!map)
		return ktel_err_set(err, ENOENT, "label map %s not in the object", name);
	lm = json_pack("{s:s, s:s, s:I}", "name", name, "type",
		       libbpf_bpf_map_type_str(bpf_map__type(map)) ?: "?", "max_entries",
		       (json_int_t)bpf_map__max_entries(map));
	json_object_set_new(o, "label_map_layout", lm);
	r = inspect_layout(btf, bpf_map__btf_key_type_id(map), bpf_map__key_size(map), lm, "key",
			   &kl, err);
	if (!r)
		r = inspect_layout(btf, bpf_map__btf_value_type_id(map), bpf_map__value_size(map),
				   lm, "value", &vl, err);
	if (r) {
		ktel_err_prefix(err, "label map %s ", name);
		goto out;
	}
	id = first_field_of_kind(kl, KTEL_FIELD_INT);
	label = first_field_of_kind(vl, KTEL_FIELD_CHAR_ARRAY);
	if (!id || !label) {
		r = ktel_err_set(err, EINVAL,
				 "label map %s: expected an integer key and a char "
				 "array in the value, but key %s has %s integer member and value %s "
				 "has %s char array member",
				 name, kl->type_name, id ? "an" : "no", vl->type_name,
				 label ? "a" : "no");
		goto out;
	}
	if (map_is_percpu(map)) {
		r = ktel_err_set(err, EINVAL,
				 "label map %s: a per-CPU map cannot hold names "
				 "(copies are summed across CPUs)",
				 name);
		goto out;
	}
	ktel_json_set_str(lm, "id_member", id->name[0] ? id->name : "(scalar)");
	ktel_json_set_str(lm, "name_member", label->name[0] ? label->name : "(scalar)");
out:
	ktel_layout__free(kl);
	ktel_layout__free(vl);
	return r;
}

/*
 * {"value": "short label", ...}: the labels records carry for a
 * KTEL_DIM_ENUM_SHORT dimension (enum_label.h), by the same keys as
 * "labels"; an enumerator the rule cannot shorten is absent.
 */
static json_t *short_labels_json(const struct btf *btf, __u32 id, const json_t *labels,
				 struct ktel_err *err)
{
	struct ktel_enum_labels *el;
	json_t *o = json_object();
	const char *k;
	json_t *v;

	if (ktel_enum_labels__new(btf, id, &el, err)) {
		json_decref(o);
		return NULL;
	}
	json_object_foreach((json_t *)labels, k, v) {
		const char *label = ktel_enum_labels__find(el, strtoll(k, NULL, 10));

		if (label)
			json_object_set_new(o, k, json_string(label));
	}
	ktel_enum_labels__free(el);
	return o;
}

/* "major", "minor" or "dev_t" of a block-device dimension, else NULL. */
static const char *device_role(uint32_t flags)
{
	if (flags & KTEL_DIM_DEV_MAJOR)
		return "major";
	if (flags & KTEL_DIM_DEV_MINOR)
		return "minor";
	return flags & KTEL_DIM_DEV_T ? "dev_t" : NULL;
}

/* The label flags of a dimension into o: "short_labels", "device". */
static int check_dim_flags(const struct btf *btf, uint32_t flags, __s32 enum_id, json_t *o,
			   struct ktel_err *err)
{
	json_t *sl;

	if (device_role(flags))
		ktel_json_set_str(o, "device", device_role(flags));
	if (!(flags & KTEL_DIM_ENUM_SHORT))
		return 0;
	if (enum_id <= 0)
		return ktel_err_set(err, EINVAL,
				    "KTEL_DIM_ENUM_SHORT but no enum labels it "
				    "(set label_enum)");
	sl = short_labels_json(btf, (__u32)enum_id, json_object_get(o, "labels"), err);
	if (!sl)
		return -EINVAL;
	json_object_set_new(o, "short_labels", sl);
	return 0;
}

/* One dimension as metric_pull resolves it: member, labels, label map. */
static int check_dim(const struct ktel_dimension_desc *dd, uint32_t flags, struct bpf_object *obj,
		     const struct ktel_layout *kl, json_t *o, struct ktel_err *err)
{
	const struct btf *btf = bpf_object__btf(obj);
	const char *member = dd->key_member ? dd->key_member : dd->name;
	const struct ktel_field *f = ktel_layout__find(kl, member);
	__s32 enum_id = 0;
	int r;

	if (!f)
		return ktel_err_set(err, EINVAL, "dimension %s: key %s has no member %s", dd->name,
				    kl->type_name, member);
	/* The daemon's rule (metric_pull.c resolve_dims): a dimension becomes
	 * an integer; strings travel as ids through a label map. */
	if (!ktel_field__is_number(f))
		return ktel_err_set(err, EINVAL,
				    "dimension %s: key %s member %s is a %s; a "
				    "dimension must be an integer or enum member (carry strings "
				    "as ids with a label map)",
				    dd->name, kl->type_name, member, field_kind_name(f->kind));
	if (dd->label_enum) {
		enum_id = ktel_btf_find_enum(btf, dd->label_enum);
		if (enum_id <= 0)
			return ktel_err_set(err, ENOENT,
					    "dimension %s: enum %s not in the "
					    "object's BTF (export it with KTEL_EXPORT_TYPE)",
					    dd->name, dd->label_enum);
	} else if (f->kind == KTEL_FIELD_ENUM) {
		enum_id = (__s32)f->enum_type_id;
	}
	/* The values a record's label can take, whichever enum they come from. */
	if (enum_id > 0)
		json_object_set_new(o, "labels", enum_labels_json(btf, (__u32)enum_id));
	r = check_dim_flags(btf, flags, enum_id, o, err);
	if (r)
		return ktel_err_prefix(err, "dimension %s: ", dd->name);
	if (dd->label_map) {
		r = check_label_map(dd->label_map, obj, o, err);
		if (r)
			return ktel_err_prefix(err, "dimension %s: ", dd->name);
	}
	return 0;
}

static int check_dims(const struct ktel_metric_desc *md, struct bpf_object *obj,
		      const struct ktel_layout *kl, json_t *o, struct ktel_err *err)
{
	json_t *dims = json_array();

	json_object_set_new(o, "dims", dims);
	if (md->n_dims > KTEL_MAX_DIMS)
		return ktel_err_set(err, EINVAL, "%u dimensions, at most %d", md->n_dims,
				    KTEL_MAX_DIMS);
	for (uint32_t i = 0; i < md->n_dims; i++) {
		const struct ktel_dimension_desc *dd = &md->dims[i];
		json_t *d = json_pack("{s:s, s:s, s:s?, s:s?}", "name", dd->name, "key_member",
				      dd->key_member ? dd->key_member : dd->name, "label_enum",
				      dd->label_enum, "label_map", dd->label_map);
		int r;

		json_array_append_new(dims, d);
		r = check_dim(dd, md->dim_flags ? md->dim_flags[i] : 0, obj, kl, d, err);
		if (r)
			return r;
	}
	return 0;
}

static int inspect_accumulator(const struct ktel_metric_desc *md, struct bpf_object *obj, json_t *o,
			       struct ktel_err *err)
{
	const struct btf *btf = bpf_object__btf(obj);
	struct bpf_map *map = bpf_object__find_map_by_name(obj, md->map_name);
	struct ktel_layout *kl = NULL, *vl = NULL;
	int r;

	if (!map)
		return ktel_err_set(err, ENOENT, "map %s not in the object", md->map_name);
	json_object_set_new(o, "map",
			    json_pack("{s:s, s:s, s:I}", "name", md->map_name, "type",
				      libbpf_bpf_map_type_str(bpf_map__type(map)) ?: "?",
				      "max_entries", (json_int_t)bpf_map__max_entries(map)));
	r = inspect_layout(btf, bpf_map__btf_key_type_id(map), bpf_map__key_size(map), o, "key",
			   &kl, err);
	if (!r)
		r = inspect_layout(btf, bpf_map__btf_value_type_id(map), bpf_map__value_size(map),
				   o, "value", &vl, err);
	if (!r)
		r = check_value(md, vl, o, err);
	if (!r)
		r = check_percpu_value(map, vl, err);
	if (!r)
		r = check_dims(md, obj, kl, o, err);
	if (r && !strstr(err->msg, md->map_name))
		ktel_err_prefix(err, "map %s ", md->map_name);
	ktel_layout__free(kl);
	ktel_layout__free(vl);
	return r;
}

static int inspect_stream(const struct ktel_metric_desc *md, struct bpf_object *obj, json_t *o,
			  struct ktel_err *err)
{
	const struct btf *btf = bpf_object__btf(obj);
	struct ktel_layout *l = NULL;
	__s32 id;
	int r;

	ktel_json_set_str(o, "map", md->map_name);
	id = md->event_type ? ktel_btf_find_struct(btf, md->event_type) : -ENOENT;
	if (id < 0)
		return ktel_err_set(err, EINVAL, "event type struct %s not in the object's BTF",
				    md->event_type ? md->event_type : "(none declared)");
	r = inspect_layout(btf, (__u32)id, 0, o, "event", &l, err);
	ktel_layout__free(l);
	return r;
}

static json_t *inspect_metric(const struct ktel_metric_desc *md, struct bpf_object *obj,
			      struct ktel_err *err, int *ret)
{
	json_t *o = json_pack("{s:s, s:s, s:s?, s:I, s:s, s:s}", "name", md->name, "model",
			      md->model == KTEL_MODEL_STREAM ? "stream" : "accumulator", "atom",
			      md->atom_name, "atom_id", (json_int_t)md->atom_id, "unit",
			      md->unit ?: "", "scheme", ktel_hist_scheme_name(md->scheme));

	*ret = md->model == KTEL_MODEL_STREAM ? inspect_stream(md, obj, o, err)
					      : inspect_accumulator(md, obj, o, err);
	if (*ret) {
		ktel_err_prefix(err, "metric %s: ", md->name);
		ktel_json_set_str(o, "error", err->msg);
	}
	return o;
}

/*
 * fentry/fexit/fmod_ret programs attach through a BPF trampoline, which a
 * kernel can refuse at load time even when the function exists (EPERM when
 * function tracing is locked down). Inspect loads nothing, so for these a
 * present target does not mean the program would load.
 */
static bool load_needs_trampoline(const char *section)
{
	static const char *const prefixes[] = {"fentry/",   "fexit/",   "fmod_ret/",
					       "fentry.s/", "fexit.s/", "fmod_ret.s/"};

	for (size_t i = 0; i < KTEL_ARRAY_SIZE(prefixes); i++)
		if (strncmp(section, prefixes[i], strlen(prefixes[i])) == 0)
			return true;
	return false;
}

/*
 * Per program: its target on this kernel, whether the variant choice keeps
 * it and why not. When the choice leaves the plugin unable to run here,
 * report["unsupported"] says why, as the daemon would.
 */
static json_t *inspect_programs(const struct ktel_plugin_desc *desc, struct bpf_object *obj,
				const struct ktel_targets *t, json_t *report)
{
	char why[512] = "";
	struct ktel_prog_choice choices[KTEL_PLUGIN_MAX_PROGRAMS];
	struct bpf_program *prog;
	json_t *a = json_array();
	size_t n = 0;

	memset(choices, 0, sizeof(choices));
	bpf_object__for_each_program(prog, obj) {
		if (n == KTEL_PLUGIN_MAX_PROGRAMS)
			break;
		choices[n].name = bpf_program__name(prog);
		choices[n].section = bpf_program__section_name(prog);
		n++;
	}
	if (t)
		ktel_targets__choose_why(t, desc->variants, desc->n_variants, choices, n, why,
					 sizeof(why));
	if (why[0])
		ktel_json_set_str(report, "unsupported", why);
	for (size_t i = 0; i < n; i++) {
		char reason[KTEL_TARGET_REASON_MAX] = "";
		json_t *o = json_pack("{s:s, s:s}", "name", choices[i].name, "section",
				      choices[i].section);

		if (t) {
			int nr = -1, r = ktel_targets__check(t, choices[i].section, &nr, reason,
							     sizeof(reason));

			ktel_json_set_bool(o, "target_present", r == 0);
			if (r)
				ktel_json_set_str(o, "target_reason", reason);
			ktel_json_set_int(o, "nr_args", nr);
			ktel_json_set_bool(o, "selected", choices[i].selected);
			if (!choices[i].selected)
				ktel_json_set_str(o, "skip_reason", choices[i].reason);
			ktel_json_set_bool(o, "trampoline",
					   load_needs_trampoline(choices[i].section));
		}
		/* Its first group: the one that decides it (a program listed in
		 * several stands for the later ones). */
		for (uint32_t v = 0; v < desc->n_variants; v++)
			if (strcmp(desc->variants[v].prog, choices[i].name) == 0) {
				ktel_json_set_str(o, "variant_group", desc->variants[v].group);
				break;
			}
		json_array_append_new(a, o);
	}
	return a;
}

/*
 * The unit a param's name ends in, by the convention the built-in plugins
 * follow (threshold_us): "" when the name says none; the description says
 * more.
 */
static const char *param_unit(const char *name)
{
	static const struct {
		const char *suffix, *unit;
	} units[] = {
		{"_ns", "ns"},       {"_us", "us"},   {"_ms", "ms"}, {"_s", "s"},
		{"_bytes", "bytes"}, {"_kib", "KiB"}, {"_pct", "%"},
	};
	size_t len = strlen(name);

	for (size_t i = 0; i < KTEL_ARRAY_SIZE(units); i++) {
		size_t n = strlen(units[i].suffix);

		if (len > n && strcmp(name + len - n, units[i].suffix) == 0)
			return units[i].unit;
	}
	return "";
}

/*
 * Per declared param: name, default, unit, description and the size of its
 * .rodata variable (the loader checked it is there). "value" is filled by
 * ktel_inspect_current_params().
 */
static json_t *inspect_params(const struct ktel_plugin_desc *desc, const struct bpf_object *obj)
{
	json_t *a = json_array();

	for (uint32_t i = 0; a && i < desc->n_params; i++) {
		const struct ktel_param_desc *pd = &desc->params[i];
		size_t off, size;
		json_t *o = json_pack("{s:s, s:I, s:s, s:s}", "name", pd->name, "default",
				      (json_int_t)pd->default_value, "unit", param_unit(pd->name),
				      "description", pd->description ?: "");

		if (o && ktel_bpf_rodata_var(obj, pd->name, &off, &size) == 0)
			ktel_json_set_int(o, "size", (json_int_t)size);
		json_array_append_new(a, o);
	}
	return a;
}

int ktel_inspect_plugin(const char *path, uid_t owner, const struct ktel_targets *targets,
			json_t **ret_report, struct ktel_err *err)
{
	struct ktel_plugin *p = NULL;
	struct bpf_object *obj = NULL;
	json_t *report = NULL, *metrics;
	struct ktel_err first = {0};
	int r;

	r = ktel_plugin__open_owner(path, owner, &p, err);
	if (r)
		return r;
	{
		LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = p->desc.name);

		/* The loader validated the ELF and its BTF before it opened it:
		 * opening the same bytes again is safe. Nothing is loaded. */
		obj = bpf_object__open_mem(p->desc.bpf_object, p->desc.bpf_object_size, &opts);
	}
	if (!obj) {
		r = ktel_err_set(err, errno ? errno : EINVAL, "%s: BPF object does not open: %s",
				 path, strerror(errno ? errno : EINVAL));
		goto out;
	}
	metrics = json_array();
	report = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:o}", "path", path, "plugin",
			   p->desc.name, "version", p->desc.version ?: "", "description",
			   p->desc.description ?: "", "abi", "1", "bpf_bytes",
			   (json_int_t)p->desc.bpf_object_size, "metrics", metrics);
	for (uint32_t i = 0; report && i < p->desc.n_metrics; i++) {
		struct ktel_err e;
		int mr;

		json_array_append_new(metrics, inspect_metric(&p->desc.metrics[i], obj, &e, &mr));
		if (mr && !r) {
			r = mr;
			first = e;
		}
	}
	if (!report) {
		r = ktel_err_set(err, ENOMEM, "out of memory");
		goto out;
	}
	json_object_set_new(report, "programs", inspect_programs(&p->desc, obj, targets, report));
	json_object_set_new(report, "params", inspect_params(&p->desc, obj));
	ktel_json_set_bool(report, "readable", r == 0);
	if (r)
		ktel_err_set(err, first.code ? first.code : EINVAL, "%s: %s", path, first.msg);
	*ret_report = report;
	report = NULL;
out:
	json_decref(report);
	bpf_object__close(obj);
	ktel_plugin__free(p);
	return r;
}


/* ---- the load step ----------------------------------------------------------- */

static json_t *program_json(json_t *report, const char *name)
{
	json_t *p;
	size_t i;

	json_array_foreach(json_object_get(report, "programs"), i, p)
		if (strcmp(json_string_value(json_object_get(p, "name")) ?: "", name) == 0)
			return p;
	return NULL;
}

/* Per program of the loaded (or refused) object: did the kernel take it? */
static void report_loaded(const struct ktel_bpf_plugin *bp, json_t *report)
{
	char why[KTEL_TARGET_REASON_MAX + KTEL_VERIFIER_TAIL_MAX + 16];

	for (size_t i = 0; i < bp->n_progs; i++) {
		const struct ktel_bpf_prog *prog = &bp->progs[i];
		json_t *o = program_json(report, prog->name);

		if (!o)
			continue;
		ktel_json_set_bool(o, "loaded", prog->selected && !bp->unsupported);
		if (prog->selected && !bp->unsupported)
			continue;
		snprintf(why, sizeof(why), "%s%s%s", prog->skip_reason,
			 prog->verifier_log[0] ? "; verifier: " : "", prog->verifier_log);
		ktel_json_set_str(o, "load_reason", prog->selected ? bp->unsupported_reason : why);
	}
	if (bp->unsupported)
		ktel_json_set_str(report, "unsupported", bp->unsupported_reason);
}

static void set_load(json_t *report, bool verified, const char *note)
{
	json_object_set_new(report, "load",
			    json_pack("{s:b, s:s}", "verified", verified, "note", note));
}

int ktel_inspect_plugin_verify(const char *path, uid_t owner, const struct ktel_targets *targets,
			       json_t **ret_report, struct ktel_err *err)
{
	struct ktel_bpf_opts opts = {.pin_gid = (gid_t)-1, .targets = targets, .load_only = true};
	struct ktel_bpf_plugin *bp = NULL;
	struct ktel_plugin *p = NULL;
	struct ktel_err e;
	json_t *report = NULL;
	int r = ktel_inspect_plugin(path, owner, targets, &report, err);

	if (!report)
		return r;
	*ret_report = report;
	if (!targets) {
		set_load(report, false, "kernel BTF unreadable: the load was not tried");
		return r;
	}
	if (geteuid() != 0) {
		set_load(report, false,
			 "not root: could not verify that this kernel loads the "
			 "programs");
		return r;
	}
	if (ktel_plugin__open_owner(path, owner, &p, &e)) {
		set_load(report, false, e.msg);
		return r;
	}
	if (ktel_bpf_plugin__load(p, &opts, &bp, &e)) {
		set_load(report, true, e.msg);
		ktel_json_set_str(report, "load_error", e.msg);
	} else {
		report_loaded(bp, report);
		set_load(report, true,
			 bp->unsupported ? "this kernel refused the programs"
					 : "loaded by this kernel (not attached)");
	}
	ktel_bpf_plugin__free(bp);
	ktel_plugin__free(p);
	return r;
}


/* ---- current param values ------------------------------------------------------ */

/* The integer of size bytes at p, sign-extended when is_signed. */
static int64_t read_int(const unsigned char *p, size_t size, bool is_signed)
{
	uint64_t u = 0;
	unsigned shift = (unsigned)(64 - 8 * size);

	/* BPF runs in host byte order: the value is the low size bytes of a
	 * host integer, as set_params() wrote it. */
	if (size == 8) {
		memcpy(&u, p, 8);
		return (int64_t)u;
	}
	if (size == 4) {
		uint32_t v;

		memcpy(&v, p, 4);
		u = v;
	} else if (size == 2) {
		uint16_t v;

		memcpy(&v, p, 2);
		u = v;
	} else {
		u = *p;
	}
	return is_signed ? (int64_t)(u << shift) >> shift : (int64_t)u;
}

/* Is the type of var a signed integer (typedefs and qualifiers seen through)? */
static bool var_signed(const struct btf *btf, const struct btf_type *var)
{
	int id = btf__resolve_type(btf, var->type);
	const struct btf_type *t = id < 0 ? NULL : btf__type_by_id(btf, (__u32)id);

	return t && btf_is_int(t) && (btf_int_encoding(t) & BTF_INT_SIGNED);
}

/*
 * The variable name of a loaded object's .rodata map (map_fd, described by
 * mi) into *ret: -ENOENT when the map is no .rodata or has no such
 * variable, another -errno when the kernel does not answer.
 */
static int rodata_map_var(int map_fd, const struct bpf_map_info *mi, const char *name, int64_t *ret)
{
	const struct btf_var_secinfo *vsi;
	const struct btf_type *sec;
	unsigned char *val = NULL;
	struct btf *btf;
	__u32 zero = 0;
	int r = -ENOENT;

	if (mi->type != BPF_MAP_TYPE_ARRAY || mi->max_entries != 1 || !mi->btf_id ||
	    !(mi->map_flags & BPF_F_RDONLY_PROG) || mi->value_size > MAX_RODATA_BYTES)
		return -ENOENT;
	btf = btf__load_from_kernel_by_id(mi->btf_id);
	if (!btf)
		return -errno;
	sec = btf__type_by_id(btf, mi->btf_value_type_id);
	if (!sec || !btf_is_datasec(sec) ||
	    strcmp(btf__name_by_offset(btf, sec->name_off) ?: "", ".rodata") != 0)
		goto out;
	vsi = btf_var_secinfos(sec);
	for (__u16 i = 0; i < btf_vlen(sec); i++, vsi++) {
		const struct btf_type *var = btf__type_by_id(btf, vsi->type);

		if (!var || !btf_is_var(var) ||
		    strcmp(btf__name_by_offset(btf, var->name_off) ?: "", name) != 0)
			continue;
		if ((vsi->size != 1 && vsi->size != 2 && vsi->size != 4 && vsi->size != 8) ||
		    (size_t)vsi->offset + vsi->size > mi->value_size)
			goto out;
		val = malloc(mi->value_size);
		if (!val) {
			r = -ENOMEM;
			goto out;
		}
		if (bpf_map_lookup_elem(map_fd, &zero, val)) {
			r = -errno;
			goto out;
		}
		*ret = read_int(val + vsi->offset, vsi->size, var_signed(btf, var));
		r = 0;
		goto out;
	}
out:
	free(val);
	btf__free(btf);
	return r;
}

/*
 * The .rodata variable name as the kernel holds it for program prog_id: the
 * value the verifier saw. -ENOENT when none of the program's maps has it;
 * -EPERM and others from the kernel (reading another program needs
 * CAP_SYS_ADMIN).
 */
static int kernel_param(uint32_t prog_id, const char *name, int64_t *ret, uint32_t *ret_map_id)
{
	__u32 ids[MAX_PROG_MAPS], len, n;
	struct bpf_prog_info info;
	int fd = bpf_prog_get_fd_by_id(prog_id), r = -ENOENT;

	if (fd < 0)
		return -errno;
	memset(&info, 0, sizeof(info));
	info.nr_map_ids = MAX_PROG_MAPS;
	info.map_ids = (__u64)(uintptr_t)ids;
	len = sizeof(info);
	if (bpf_obj_get_info_by_fd(fd, &info, &len)) {
		r = -errno;
		goto out;
	}
	n = info.nr_map_ids < MAX_PROG_MAPS ? info.nr_map_ids : MAX_PROG_MAPS;
	for (__u32 i = 0; i < n && r == -ENOENT; i++) {
		struct bpf_map_info mi;
		int mfd = bpf_map_get_fd_by_id(ids[i]);

		if (mfd < 0)
			continue;
		memset(&mi, 0, sizeof(mi));
		len = sizeof(mi);
		if (bpf_obj_get_info_by_fd(mfd, &mi, &len) == 0)
			r = rodata_map_var(mfd, &mi, name, ret);
		close(mfd);
		if (!r)
			*ret_map_id = ids[i];
	}
out:
	close(fd);
	return r;
}

/* The daemon's plugin named name in its status answer, or NULL. */
static const json_t *status_plugin(const json_t *status, const char *name)
{
	const json_t *p;
	size_t i;

	json_array_foreach(json_object_get(status, "plugins"), i, p)
		if (json_is_string(json_object_get(p, "name")) &&
		    strcmp(json_string_value(json_object_get(p, "name")), name) == 0)
			return p;
	return NULL;
}

/* The id of a program of the daemon's plugin p that is in the kernel, or 0. */
static uint32_t loaded_prog_id(const json_t *p)
{
	const json_t *prog;
	size_t i;

	json_array_foreach(json_object_get(p, "programs"), i, prog) {
		json_int_t id = json_integer_value(json_object_get(prog, "prog_id"));

		if (id > 0 && id <= UINT32_MAX)
			return (uint32_t)id;
	}
	return 0;
}

/* Every param gets "value": null, and the report the reason as "params_note". */
static void params_unknown(json_t *report, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void params_unknown(json_t *report, const char *fmt, ...)
{
	char note[512];
	json_t *p;
	size_t i;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(note, sizeof(note), fmt, ap);
	va_end(ap);
	json_array_foreach(json_object_get(report, "params"), i, p)
		json_object_set_new(p, "value", json_null());
	ktel_json_set_str(report, "params_note", note);
}

void ktel_inspect_current_params(json_t *report, const json_t *status, const char *no_status)
{
	const char *name = json_string_value(json_object_get(report, "plugin"));
	const json_t *sp;
	uint32_t prog_id, map_id = 0;
	json_t *p;
	size_t i;

	if (!json_array_size(json_object_get(report, "params")) || !name)
		return;
	if (!status) {
		params_unknown(report, "%s",
			       no_status ?: "no daemon answered: current values unknown");
		return;
	}
	sp = status_plugin(status, name);
	if (!sp) {
		params_unknown(report, "the daemon has not loaded plugin %s", name);
		return;
	}
	ktel_json_set_str(report, "params_from",
			  json_string_value(json_object_get(sp, "path")) ?: "");
	prog_id = loaded_prog_id(sp);
	if (!prog_id) {
		params_unknown(report, "the daemon holds no loaded program of plugin %s", name);
		return;
	}
	json_array_foreach(json_object_get(report, "params"), i, p) {
		const char *pname = json_string_value(json_object_get(p, "name")) ?: "";
		int64_t v;
		int r = kernel_param(prog_id, pname, &v, &map_id);

		if (r) {
			params_unknown(report, "program %u of plugin %s: %s%s", prog_id, name,
				       r == -ENOENT ? "no .rodata variable named " : strerror(-r),
				       r == -ENOENT  ? pname
				       : r == -EPERM ? " (reading a loaded program needs root)"
						     : "");
			return;
		}
		json_object_set_new(p, "value", json_integer((json_int_t)v));
	}
	json_object_set_new(report, "params_map_id", json_integer(map_id));
}
