// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Generic BTF decoder: validation of untrusted BTF and flat layouts of map
 * keys, values and stream events. See btf_layout.h for what is accepted.
 */
#include "btf_layout.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/btf.h>
#include <gelf.h>
#include <libelf.h>
#include <linux/btf.h>

/* BPF is a 64-bit target whatever the host: pointers in its BTF are 8 bytes. */
#define BPF_PTR_SIZE 8
#define NO_SIZE UINT64_MAX

static const char *const kind_names[] = {
	[BTF_KIND_UNKN] = "void",         [BTF_KIND_INT] = "int",
	[BTF_KIND_PTR] = "pointer",       [BTF_KIND_ARRAY] = "array",
	[BTF_KIND_STRUCT] = "struct",     [BTF_KIND_UNION] = "union",
	[BTF_KIND_ENUM] = "enum",         [BTF_KIND_FWD] = "forward declaration",
	[BTF_KIND_TYPEDEF] = "typedef",   [BTF_KIND_VOLATILE] = "volatile",
	[BTF_KIND_CONST] = "const",       [BTF_KIND_RESTRICT] = "restrict",
	[BTF_KIND_FUNC] = "function",     [BTF_KIND_FUNC_PROTO] = "function prototype",
	[BTF_KIND_VAR] = "variable",      [BTF_KIND_DATASEC] = "data section",
	[BTF_KIND_FLOAT] = "float",       [BTF_KIND_DECL_TAG] = "decl tag",
	[BTF_KIND_TYPE_TAG] = "type tag", [BTF_KIND_ENUM64] = "enum64",
};

static const char *kind_name(__u16 kind)
{
	if (kind < sizeof(kind_names) / sizeof(kind_names[0]) && kind_names[kind])
		return kind_names[kind];
	return "unknown kind";
}

static bool is_mod(__u16 kind)
{
	return kind == BTF_KIND_TYPEDEF || kind == BTF_KIND_CONST || kind == BTF_KIND_VOLATILE ||
	       kind == BTF_KIND_RESTRICT || kind == BTF_KIND_TYPE_TAG;
}

static bool is_pow2_upto8(__u32 n)
{
	return n == 1 || n == 2 || n == 4 || n == 8;
}

/* ---- validation ------------------------------------------------------- */

enum {
	MARK_NEW = 0,
	MARK_BUSY = 1,
	MARK_DONE = 2
};

struct vstate {
	const struct btf *btf;
	__u32 start; /* first id of this BTF (1, or after a split BTF's base) */
	__u32 cnt;   /* one past the last id */
	__u8 *mark;
	__u8 *height; /* longest non-pointer chain below the type */
	__u64 *size;  /* resolved size, NO_SIZE when the type has none */
	struct ktel_err *err;
};

static int vfail(struct vstate *v, __u32 id, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int vfail(struct vstate *v, __u32 id, const char *fmt, ...)
{
	char msg[KTEL_ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return ktel_err_set(v->err, EINVAL, "BTF type [%u]: %s", id, msg);
}

static int check_name(struct vstate *v, __u32 id, __u32 off, const char *what)
{
	if (btf__str_by_offset(v->btf, off))
		return 0;
	return vfail(v, id, "%s name offset %u is outside the string section", what, off);
}

static int check_ref(struct vstate *v, __u32 id, __u32 ref, const char *what)
{
	if (ref < v->cnt)
		return 0;
	return vfail(v, id, "%s refers to type id %u, out of range (%u types)", what, ref, v->cnt);
}

static int check_int(struct vstate *v, __u32 id, const struct btf_type *t)
{
	__u8 enc = btf_int_encoding(t);

	if (t->size != 16 && !is_pow2_upto8(t->size))
		return vfail(v, id, "int of %u bytes", t->size);
	if (!btf_int_bits(t) || btf_int_offset(t) + btf_int_bits(t) > t->size * 8)
		return vfail(v, id, "int of %u bits at bit %u does not fit %u bytes",
			     btf_int_bits(t), btf_int_offset(t), t->size);
	if (enc && enc != BTF_INT_SIGNED && enc != BTF_INT_CHAR && enc != BTF_INT_BOOL)
		return vfail(v, id, "int with invalid encoding 0x%x", enc);
	return 0;
}

static int check_enum(struct vstate *v, __u32 id, const struct btf_type *t)
{
	bool is64 = btf_is_enum64(t);
	__u32 i, off;
	int err;

	if (!is_pow2_upto8(t->size))
		return vfail(v, id, "enum of %u bytes", t->size);
	for (i = 0; i < btf_vlen(t); i++) {
		off = is64 ? btf_enum64(t)[i].name_off : btf_enum(t)[i].name_off;
		err = check_name(v, id, off, "enumerator");
		if (err)
			return err;
	}
	return 0;
}

/*
 * btf_member and btf_param both start with name_off and type, so the
 * entries of a struct, union or function prototype are checked by one loop
 * over those two words, stride bytes apart.
 */
_Static_assert(offsetof(struct btf_member, name_off) == 0 &&
		       offsetof(struct btf_member, type) == sizeof(__u32) &&
		       offsetof(struct btf_param, name_off) == 0 &&
		       offsetof(struct btf_param, type) == sizeof(__u32),
	       "btf_member and btf_param start with name_off and type");

static int check_entries(struct vstate *v, __u32 id, const struct btf_type *t, const void *first,
			 size_t stride, const char *what)
{
	const char *e = first;
	__u32 i;
	int err;

	for (i = 0; i < btf_vlen(t); i++, e += stride) {
		const __u32 *name_type = (const __u32 *)e;

		err = check_name(v, id, name_type[0], what);
		if (!err)
			err = check_ref(v, id, name_type[1], what);
		if (err)
			return err;
	}
	return 0;
}

static int check_datasec(struct vstate *v, __u32 id, const struct btf_type *t)
{
	const struct btf_var_secinfo *s = btf_var_secinfos(t);
	__u32 i;
	int err;

	for (i = 0; i < btf_vlen(t); i++) {
		err = check_ref(v, id, s[i].type, "section entry");
		if (err)
			return err;
	}
	return 0;
}

/* Checks of one type that need no other type: names, ids, sizes. */
static int check_type(struct vstate *v, __u32 id, const struct btf_type *t)
{
	__u16 kind = btf_kind(t);
	int err;

	err = check_name(v, id, t->name_off, "type");
	if (err)
		return err;
	switch (kind) {
	case BTF_KIND_INT:
		return check_int(v, id, t);
	case BTF_KIND_PTR:
	case BTF_KIND_TYPEDEF:
	case BTF_KIND_VOLATILE:
	case BTF_KIND_CONST:
	case BTF_KIND_RESTRICT:
	case BTF_KIND_TYPE_TAG:
	case BTF_KIND_FUNC:
	case BTF_KIND_VAR:
	case BTF_KIND_DECL_TAG:
		return check_ref(v, id, t->type, kind_name(kind));
	case BTF_KIND_ARRAY:
		err = check_ref(v, id, btf_array(t)->type, "array element");
		if (!err)
			err = check_ref(v, id, btf_array(t)->index_type, "array index");
		return err;
	case BTF_KIND_STRUCT:
	case BTF_KIND_UNION:
		return check_entries(v, id, t, btf_members(t), sizeof(struct btf_member), "member");
	case BTF_KIND_ENUM:
	case BTF_KIND_ENUM64:
		return check_enum(v, id, t);
	case BTF_KIND_FUNC_PROTO:
		err = check_entries(v, id, t, btf_params(t), sizeof(struct btf_param), "parameter");
		return err ? err : check_ref(v, id, t->type, "return type");
	case BTF_KIND_DATASEC:
		return check_datasec(v, id, t);
	case BTF_KIND_FLOAT:
		if (t->size == 2 || t->size == 4 || t->size == 8 || t->size == 12 || t->size == 16)
			return 0;
		return vfail(v, id, "float of %u bytes", t->size);
	case BTF_KIND_FWD:
		return 0;
	default:
		return vfail(v, id, "unknown kind %u", kind);
	}
}

/*
 * Number of non-pointer edges of t: the types t contains or wraps. A pointer
 * is the only legal way for a type to reach itself, so cycles and depth are
 * measured along these edges.
 */
static __u32 nr_edges(const struct btf_type *t)
{
	switch (btf_kind(t)) {
	case BTF_KIND_TYPEDEF:
	case BTF_KIND_VOLATILE:
	case BTF_KIND_CONST:
	case BTF_KIND_RESTRICT:
	case BTF_KIND_TYPE_TAG:
	case BTF_KIND_FUNC:
	case BTF_KIND_VAR:
	case BTF_KIND_DECL_TAG:
	case BTF_KIND_ARRAY:
		return 1;
	case BTF_KIND_STRUCT:
	case BTF_KIND_UNION:
	case BTF_KIND_DATASEC:
		return btf_vlen(t);
	case BTF_KIND_FUNC_PROTO:
		return btf_vlen(t) + 1;
	default:
		return 0;
	}
}

static __u32 edge(const struct btf_type *t, __u32 i)
{
	switch (btf_kind(t)) {
	case BTF_KIND_ARRAY:
		return btf_array(t)->type;
	case BTF_KIND_STRUCT:
	case BTF_KIND_UNION:
		return btf_members(t)[i].type;
	case BTF_KIND_DATASEC:
		return btf_var_secinfos(t)[i].type;
	case BTF_KIND_FUNC_PROTO:
		return i ? btf_params(t)[i - 1].type : t->type;
	default:
		return t->type;
	}
}

static __u64 vsize(const struct vstate *v, __u32 id)
{
	__s64 sz;

	if (id == 0)
		return NO_SIZE;
	if (id >= v->start)
		return v->size[id - v->start];
	/* A split BTF's base is the kernel's, already checked by the kernel. */
	sz = btf__resolve_size(v->btf, id);
	return sz < 0 ? NO_SIZE : (__u64)sz;
}

static __u32 vheight(const struct vstate *v, __u32 id)
{
	return id >= v->start ? v->height[id - v->start] : 0;
}

/*
 * Bits member i of struct/union t occupies: its bitfield size, or for the old
 * encoding (no kflag) the bits of the int it points at, else its full size.
 */
static __u64 member_bits(const struct vstate *v, const struct btf_type *t, __u32 i, __u64 msize)
{
	const struct btf_type *mt = NULL;
	__u32 id = btf_members(t)[i].type, depth;

	if (btf_kflag(t) && btf_member_bitfield_size(t, i))
		return btf_member_bitfield_size(t, i);
	for (depth = 0; depth <= KTEL_BTF_MAX_DEPTH; depth++) {
		mt = btf__type_by_id(v->btf, id);
		if (!mt || !is_mod(btf_kind(mt)))
			break;
		id = mt->type;
	}
	if (mt && btf_is_int(mt) && btf_int_bits(mt) < mt->size * 8)
		return (__u64)btf_int_offset(mt) + btf_int_bits(mt);
	return msize * 8;
}

static int check_composite(struct vstate *v, __u32 id, const struct btf_type *t)
{
	const struct btf_member *m = btf_members(t);
	__u64 msize, bit_off;
	__u32 i;

	for (i = 0; i < btf_vlen(t); i++) {
		msize = vsize(v, m[i].type);
		if (msize == NO_SIZE)
			return vfail(v, id, "member #%u (type id %u) has no size", i, m[i].type);
		bit_off = btf_member_bit_offset(t, i);
		if (bit_off + member_bits(v, t, i, msize) > (__u64)t->size * 8)
			return vfail(v, id,
				     "member #%u at bit %llu (%llu bytes) lies outside %u bytes", i,
				     (unsigned long long)bit_off, (unsigned long long)msize,
				     t->size);
	}
	return 0;
}

/* Resolved size of id, once its edges are done; checks sizes fit 32 bits. */
static int size_type(struct vstate *v, __u32 id, const struct btf_type *t, __u64 *ret)
{
	__u64 elem;
	int err;

	switch (btf_kind(t)) {
	case BTF_KIND_INT:
	case BTF_KIND_ENUM:
	case BTF_KIND_ENUM64:
	case BTF_KIND_FLOAT:
		*ret = t->size;
		return 0;
	case BTF_KIND_STRUCT:
	case BTF_KIND_UNION:
		err = check_composite(v, id, t);
		*ret = t->size;
		return err;
	case BTF_KIND_PTR:
		*ret = BPF_PTR_SIZE;
		return 0;
	case BTF_KIND_ARRAY:
		elem = vsize(v, btf_array(t)->type);
		if (elem == NO_SIZE)
			return vfail(v, id, "array of a type with no size (id %u)",
				     btf_array(t)->type);
		*ret = elem * btf_array(t)->nelems; /* both < 2^32: no u64 overflow */
		if (*ret > UINT32_MAX)
			return vfail(v, id, "array of %u x %llu bytes overflows 32 bits",
				     btf_array(t)->nelems, (unsigned long long)elem);
		return 0;
	case BTF_KIND_TYPEDEF:
	case BTF_KIND_VOLATILE:
	case BTF_KIND_CONST:
	case BTF_KIND_RESTRICT:
	case BTF_KIND_TYPE_TAG:
	case BTF_KIND_VAR:
		*ret = vsize(v, t->type);
		return 0;
	default: /* fwd, func, func proto, datasec, decl tag: no size */
		*ret = NO_SIZE;
		return 0;
	}
}

/*
 * Depth-first walk along non-pointer edges. Recursion is bounded: a walk
 * deeper than KTEL_BTF_MAX_DEPTH fails before recursing further, and every
 * type is expanded once (memoised height and size), so the whole check is
 * linear in the size of the BTF.
 */
static int visit(struct vstate *v, __u32 id, __u32 depth)
{
	const struct btf_type *t;
	__u32 i, n, h = 0, idx;
	int err;

	if (id < v->start)
		return 0; /* void, or a type of the base BTF */
	idx = id - v->start;
	if (v->mark[idx] == MARK_BUSY)
		return vfail(v, id, "contains itself without a pointer in between");
	if (v->mark[idx] == MARK_DONE) {
		if (depth + v->height[idx] > KTEL_BTF_MAX_DEPTH)
			goto too_deep;
		return 0;
	}
	if (depth > KTEL_BTF_MAX_DEPTH)
		goto too_deep;
	t = btf__type_by_id(v->btf, id);
	if (!t)
		return vfail(v, id, "missing");
	v->mark[idx] = MARK_BUSY;
	n = nr_edges(t);
	for (i = 0; i < n; i++) {
		err = visit(v, edge(t, i), depth + 1);
		if (err)
			return err;
		if (vheight(v, edge(t, i)) + 1 > h)
			h = vheight(v, edge(t, i)) + 1;
	}
	err = size_type(v, id, t, &v->size[idx]);
	if (err)
		return err;
	v->height[idx] = h;
	v->mark[idx] = MARK_DONE;
	return 0;

too_deep:
	return vfail(v, id, "types nest more than %d levels deep", KTEL_BTF_MAX_DEPTH);
}

int ktel_btf_validate(const struct btf *btf, struct ktel_err *err)
{
	const struct btf *base;
	struct vstate v = {.btf = btf, .err = err};
	__u32 id;
	int ret = 0;

	if (!btf)
		return ktel_err_set(err, EINVAL, "BTF: none given");
	base = btf__base_btf(btf);
	v.start = base ? btf__type_cnt(base) : 1;
	v.cnt = btf__type_cnt(btf);
	if (v.cnt <= v.start)
		return 0;
	v.mark = calloc(v.cnt - v.start, sizeof(*v.mark));
	v.height = calloc(v.cnt - v.start, sizeof(*v.height));
	v.size = calloc(v.cnt - v.start, sizeof(*v.size));
	if (!v.mark || !v.height || !v.size) {
		ret = ktel_err_set(err, ENOMEM, "BTF: out of memory validating %u types",
				   v.cnt - v.start);
		goto out_free;
	}
	/* All local checks first: the walk below follows ids, so they must be
	 * in range before it starts. */
	for (id = v.start; id < v.cnt && !ret; id++) {
		const struct btf_type *t = btf__type_by_id(btf, id);

		ret = t ? check_type(&v, id, t) : vfail(&v, id, "missing");
	}
	for (id = v.start; id < v.cnt && !ret; id++)
		ret = visit(&v, id, 0);

out_free:
	free(v.size);
	free(v.height);
	free(v.mark);
	return ret;
}

/*
 * The .BTF section of an opened ELF, or NULL; *count says how many sections
 * bear the name. libbpf 1.1 parses the last one: the object must have one,
 * so that the BTF judged here is the BTF libbpf reads.
 */
static Elf_Data *find_btf_section(Elf *elf, unsigned int *count)
{
	Elf_Data *found = NULL;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	size_t shstrndx;
	const char *name;

	*count = 0;
	if (elf_getshdrstrndx(elf, &shstrndx))
		return NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".BTF") != 0)
			continue;
		if (++*count == 1 && sh.sh_type != SHT_NOBITS)
			found = elf_getdata(scn, NULL);
	}
	return found;
}

int ktel_btf_validate_elf(const void *elf_bytes, size_t size, struct ktel_err *err)
{
	struct btf *btf = NULL;
	Elf_Data *data;
	Elf *elf = NULL;
	unsigned int count;
	char *copy;
	int ret;

	if (!elf_bytes || !size)
		return ktel_err_set(err, EINVAL, "BPF object: empty");
	/* libelf wants writable memory; embedded objects live in .rodata. */
	copy = malloc(size);
	if (!copy)
		return ktel_err_set(err, ENOMEM, "BPF object: out of memory (%zu bytes)", size);
	memcpy(copy, elf_bytes, size);
	if (elf_version(EV_CURRENT) == EV_NONE || !(elf = elf_memory(copy, size)) ||
	    elf_kind(elf) != ELF_K_ELF) {
		ret = ktel_err_set(err, EINVAL, "BPF object: not an ELF file (%s)", elf_errmsg(-1));
		goto out;
	}
	data = find_btf_section(elf, &count);
	if (count > 1) {
		ret = ktel_err_set(err, EINVAL, "BPF object: %u sections named .BTF, at most one",
				   count);
		goto out;
	}
	if (!data || !data->d_buf || !data->d_size) {
		ret = ktel_err_set(err, ENOENT, "BPF object: no .BTF section");
		goto out;
	}
	btf = btf__new(data->d_buf, data->d_size);
	if (!btf) {
		ret = ktel_err_set(err, EINVAL, "BPF object: .BTF does not parse (%s)",
				   strerror(errno));
		goto out;
	}
	ret = ktel_btf_validate(btf, err);
	if (ret)
		ktel_err_prefix(err, "BPF object .BTF: ");
out:
	btf__free(btf);
	if (elf)
		elf_end(elf);
	free(copy);
	return ret;
}

/* ---- layouts ---------------------------------------------------------- */

struct walk {
	const struct btf *btf;
	struct ktel_layout *l;
	__u32 cap; /* allocated fields */
	struct ktel_err *err;
};

static int refuse(struct walk *w, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* "struct foo: member a.b is a pointer, not supported" */
static int refuse(struct walk *w, const char *path, const char *fmt, ...)
{
	char msg[KTEL_ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (path[0])
		return ktel_err_set(w->err, EINVAL, "%s: member %s %s", w->l->type_name, path, msg);
	return ktel_err_set(w->err, EINVAL, "%s: the type itself %s", w->l->type_name, msg);
}

/*
 * Follow typedef/const/volatile/restrict/type tag from id to the type they
 * name. Sets *ret_typedef when a typedef was crossed (arrays of a typedef'd
 * byte are bytes, not strings). Bounded, and safe on out-of-range ids.
 */
static int skip_mods(struct walk *w, const char *path, __u32 id, const struct btf_type **ret_t,
		     __u32 *ret_id, bool *ret_typedef)
{
	const struct btf_type *t;
	bool td = false;
	int depth;

	for (depth = 0; depth <= KTEL_BTF_MAX_DEPTH; depth++) {
		t = btf__type_by_id(w->btf, id);
		if (!t)
			return refuse(w, path, "refers to type id %u, out of range", id);
		if (!is_mod(btf_kind(t))) {
			*ret_t = t;
			*ret_id = id;
			if (ret_typedef)
				*ret_typedef = td;
			return 0;
		}
		td |= btf_is_typedef(t);
		id = t->type;
	}
	return refuse(w, path, "has a typedef/qualifier chain longer than %d (a cycle?)",
		      KTEL_BTF_MAX_DEPTH);
}

static int add_field(struct walk *w, const char *path, struct ktel_field **ret)
{
	struct ktel_layout *l = w->l;
	struct ktel_field *grown;
	__u32 cap;

	if (l->n_fields >= KTEL_LAYOUT_MAX_FIELDS)
		return refuse(w, path, "is past the limit of %d fields per type",
			      KTEL_LAYOUT_MAX_FIELDS);
	if (l->n_fields == w->cap) {
		cap = w->cap ? w->cap * 2 : 8;
		grown = realloc(l->fields, cap * sizeof(*grown));
		if (!grown)
			return ktel_err_set(w->err, ENOMEM, "%s: out of memory", l->type_name);
		l->fields = grown;
		w->cap = cap;
	}
	*ret = &l->fields[l->n_fields++];
	memset(*ret, 0, sizeof(**ret));
	snprintf((*ret)->name, sizeof((*ret)->name), "%s", path);
	return 0;
}

/* Ints the decoder reads: whole bytes of 1/2/4/8, no bit offsets. */
static int check_plain_int(struct walk *w, const char *path, const struct btf_type *t)
{
	if (btf_int_bits(t) != t->size * 8 || btf_int_offset(t))
		return refuse(w, path, "is a bitfield, not supported");
	if (!is_pow2_upto8(t->size))
		return refuse(w, path, "is a %u-byte integer, not supported", t->size);
	return 0;
}

static bool is_char_name(const char *name)
{
	return name && (!strcmp(name, "char") || !strcmp(name, "signed char") ||
			!strcmp(name, "unsigned char"));
}

static int walk_type(struct walk *w, __u32 id, __u64 off, const char *path, int depth,
		     __u64 *ret_size);

static int walk_array(struct walk *w, const struct btf_type *t, __u64 off, const char *path,
		      __u64 *ret_size)
{
	const struct btf_array *a = btf_array(t);
	const struct btf_type *et;
	struct ktel_field *f;
	bool td;
	__u32 eid;
	int err;

	err = skip_mods(w, path, a->type, &et, &eid, &td);
	if (err)
		return err;
	if (!btf_is_int(et))
		return refuse(w, path, "is an array of %s, not supported",
			      btf_is_composite(et) ? "structs" : kind_name(btf_kind(et)));
	err = check_plain_int(w, path, et);
	if (err)
		return err;
	if (!a->nelems)
		return refuse(w, path, "is a zero-length array, not supported");
	if ((__u64)a->nelems * et->size > UINT32_MAX)
		return refuse(w, path, "is an array of %u x %u bytes, too large", a->nelems,
			      et->size);
	err = add_field(w, path, &f);
	if (err)
		return err;
	f->kind = KTEL_FIELD_INT_ARRAY;
	if (et->size == 1 && !td &&
	    ((btf_int_encoding(et) & BTF_INT_CHAR) ||
	     is_char_name(btf__str_by_offset(w->btf, et->name_off))))
		f->kind = KTEL_FIELD_CHAR_ARRAY;
	f->offset = off;
	f->elem_size = et->size;
	f->count = a->nelems;
	f->size = et->size * a->nelems;
	f->is_signed = btf_int_encoding(et) & BTF_INT_SIGNED;
	f->is_bool = btf_int_encoding(et) & BTF_INT_BOOL;
	*ret_size = f->size;
	return 0;
}

static int walk_scalar(struct walk *w, __u32 id, const struct btf_type *t, __u64 off,
		       const char *path, __u64 *ret_size)
{
	struct ktel_field *f;
	int err;

	if (btf_is_int(t))
		err = check_plain_int(w, path, t);
	else if (!is_pow2_upto8(t->size))
		err = refuse(w, path, "is an enum of %u bytes, not supported", t->size);
	else
		err = 0;
	if (!err)
		err = add_field(w, path, &f);
	if (err)
		return err;
	f->offset = off;
	f->size = f->elem_size = t->size;
	f->count = 1;
	if (btf_is_int(t)) {
		f->kind = KTEL_FIELD_INT;
		f->is_signed = btf_int_encoding(t) & BTF_INT_SIGNED;
		f->is_bool = btf_int_encoding(t) & BTF_INT_BOOL;
	} else {
		/* The kind flag of an enum says its values are signed. */
		f->kind = KTEL_FIELD_ENUM;
		f->is_signed = btf_kflag(t);
		f->enum_type_id = id;
	}
	*ret_size = t->size;
	return 0;
}

/* Path of member name under path; anonymous members add no component. */
static int member_path(struct walk *w, const char *path, const char *name, char *buf)
{
	int n;

	if (!name[0])
		n = snprintf(buf, KTEL_FIELD_NAME_MAX, "%s", path);
	else if (path[0])
		n = snprintf(buf, KTEL_FIELD_NAME_MAX, "%s.%s", path, name);
	else
		n = snprintf(buf, KTEL_FIELD_NAME_MAX, "%s", name);
	if (n >= KTEL_FIELD_NAME_MAX)
		return refuse(w, path, "has a member whose dotted name is longer than %d",
			      KTEL_FIELD_NAME_MAX - 1);
	return 0;
}

static int walk_member(struct walk *w, const struct btf_type *t, __u32 i, __u64 off,
		       const char *path, int depth)
{
	const struct btf_member *m = &btf_members(t)[i];
	const struct btf_type *mt;
	char sub[KTEL_FIELD_NAME_MAX];
	const char *name;
	__u32 bit_off = btf_member_bit_offset(t, i), mid;
	__u64 msize;
	int err;

	name = btf__str_by_offset(w->btf, m->name_off);
	if (!name)
		return refuse(w, path, "has member #%u with a name offset outside the strings", i);
	err = member_path(w, path, name, sub);
	if (err)
		return err;
	if (btf_member_bitfield_size(t, i) || bit_off % 8)
		return refuse(w, sub, "is a bitfield, not supported");
	if (!name[0]) {
		err = skip_mods(w, sub, m->type, &mt, &mid, NULL);
		if (err)
			return err;
		if (!btf_is_composite(mt))
			return refuse(w, path, "has unnamed member #%u that is no struct or union",
				      i);
	}
	err = walk_type(w, m->type, off + bit_off / 8, sub, depth + 1, &msize);
	if (err)
		return err;
	if (bit_off / 8 + msize > t->size)
		return refuse(w, sub, "at offset %u (%llu bytes) lies outside its %u-byte parent",
			      bit_off / 8, (unsigned long long)msize, t->size);
	return 0;
}

static int walk_composite(struct walk *w, const struct btf_type *t, __u64 off, const char *path,
			  int depth, __u64 *ret_size)
{
	__u32 i;
	int err;

	/* Several members of one union overlap: which one to decode is a
	 * question only the plugin could answer, so such unions are refused. */
	if (btf_is_union(t) && btf_vlen(t) != 1)
		return refuse(w, path, "is a union of %u members, not supported", btf_vlen(t));
	for (i = 0; i < btf_vlen(t); i++) {
		err = walk_member(w, t, i, off, path, depth);
		if (err)
			return err;
	}
	*ret_size = t->size;
	return 0;
}

/* Append the fields of type id, placed at byte off, named under path. */
static int walk_type(struct walk *w, __u32 id, __u64 off, const char *path, int depth,
		     __u64 *ret_size)
{
	const struct btf_type *t;
	int err;

	if (depth > KTEL_BTF_MAX_DEPTH)
		return refuse(w, path, "nests more than %d levels deep", KTEL_BTF_MAX_DEPTH);
	err = skip_mods(w, path, id, &t, &id, NULL);
	if (err)
		return err;
	switch (btf_kind(t)) {
	case BTF_KIND_INT:
	case BTF_KIND_ENUM:
	case BTF_KIND_ENUM64:
		return walk_scalar(w, id, t, off, path, ret_size);
	case BTF_KIND_ARRAY:
		return walk_array(w, t, off, path, ret_size);
	case BTF_KIND_STRUCT:
	case BTF_KIND_UNION:
		return walk_composite(w, t, off, path, depth, ret_size);
	default:
		return refuse(w, path, "is a %s, not supported", kind_name(btf_kind(t)));
	}
}

/*
 * Name a type for messages after what it resolves to ("struct foo"); for an
 * anonymous struct behind a typedef, the typedef's name ("typedef foo_t").
 */
static void describe_type(const struct btf *btf, __u32 id, char *buf)
{
	const struct btf_type *t = btf__type_by_id(btf, id);
	const char *name, *td_name = NULL;
	int depth;

	for (depth = 0; t && depth <= KTEL_BTF_MAX_DEPTH; depth++) {
		name = btf__str_by_offset(btf, t->name_off);
		if (!is_mod(btf_kind(t)))
			break;
		if (btf_is_typedef(t) && !td_name && name && name[0])
			td_name = name;
		t = btf__type_by_id(btf, t->type);
	}
	if (t && !is_mod(btf_kind(t)) && name && name[0])
		snprintf(buf, KTEL_FIELD_NAME_MAX, "%s %s", kind_name(btf_kind(t)), name);
	else if (td_name)
		snprintf(buf, KTEL_FIELD_NAME_MAX, "typedef %s", td_name);
	else if (t && !is_mod(btf_kind(t)))
		snprintf(buf, KTEL_FIELD_NAME_MAX, "%s (anon)", kind_name(btf_kind(t)));
	else
		snprintf(buf, KTEL_FIELD_NAME_MAX, "type [%u]", id);
}

static int find_index(const struct ktel_layout *l, const char *name)
{
	const struct ktel_field *f = ktel_layout__find(l, name);

	return f ? (int)(f - l->fields) : -1;
}

/* A u64 "buckets" array makes a histogram; a u64 "sum" then goes with it. */
static void recognise_histogram(struct ktel_layout *l)
{
	const struct ktel_field *f;
	int i;

	i = find_index(l, "buckets");
	f = i >= 0 ? &l->fields[i] : NULL;
	if (!f || f->kind != KTEL_FIELD_INT_ARRAY || f->elem_size != 8 || f->is_signed)
		return;
	l->hist_field = i;
	l->n_buckets = f->count;
	i = find_index(l, "sum");
	f = i >= 0 ? &l->fields[i] : NULL;
	if (f && f->kind == KTEL_FIELD_INT && f->size == 8 && !f->is_signed)
		l->sum_field = i;
}

int ktel_layout__new(const struct btf *btf, __u32 type_id, __u32 expect_size,
		     struct ktel_layout **ret, struct ktel_err *err)
{
	const struct btf_type *t;
	struct walk w = {.btf = btf, .err = err};
	__u64 size = 0;
	int rc;

	if (!btf || !ret)
		return ktel_err_set(err, EINVAL, "BTF layout: no BTF or no result given");
	t = btf__type_by_id(btf, type_id);
	if (!t || type_id == 0)
		return ktel_err_set(err, EINVAL, "BTF type id %u: out of range or void", type_id);
	w.l = calloc(1, sizeof(*w.l));
	if (!w.l)
		return ktel_err_set(err, ENOMEM, "BTF type id %u: out of memory", type_id);
	w.l->type_id = type_id;
	w.l->hist_field = w.l->sum_field = -1;
	describe_type(btf, type_id, w.l->type_name);

	rc = walk_type(&w, type_id, 0, "", 0, &size);
	if (rc)
		goto err_free;
	if (!w.l->n_fields) {
		rc = ktel_err_set(err, EINVAL, "%s: has no members to decode", w.l->type_name);
		goto err_free;
	}
	if (expect_size && size != expect_size) {
		rc = ktel_err_set(err, EINVAL, "%s: size %llu does not match the map's size %u",
				  w.l->type_name, (unsigned long long)size, expect_size);
		goto err_free;
	}
	w.l->size = size;
	recognise_histogram(w.l);
	*ret = w.l;
	return 0;

err_free:
	ktel_layout__free(w.l);
	return rc;
}

void ktel_layout__free(struct ktel_layout *layout)
{
	if (!layout)
		return;
	free(layout->fields);
	free(layout);
}

const struct ktel_field *ktel_layout__find(const struct ktel_layout *layout,
					   const char *dotted_name)
{
	__u32 i;

	if (!layout)
		return NULL;
	if (!dotted_name)
		dotted_name = "";
	for (i = 0; i < layout->n_fields; i++)
		if (!strcmp(layout->fields[i].name, dotted_name))
			return &layout->fields[i];
	return NULL;
}

/* ---- readers and lookups ---------------------------------------------- */

static const unsigned char *elem_ptr(const struct ktel_field *f, const void *data, __u32 idx)
{
	if (!f || !data || idx >= f->count)
		return NULL;
	return (const unsigned char *)data + f->offset + (size_t)idx * f->elem_size;
}

uint64_t ktel_field_read_elem_u64(const struct ktel_field *f, const void *data, __u32 idx)
{
	const unsigned char *p = elem_ptr(f, data, idx);
	uint8_t u8;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;

	if (!p)
		return 0;
	/* memcpy: packed structs put members at any alignment. */
	switch (f->elem_size) {
	case 1:
		memcpy(&u8, p, 1);
		return u8;
	case 2:
		memcpy(&u16, p, 2);
		return u16;
	case 4:
		memcpy(&u32, p, 4);
		return u32;
	case 8:
		memcpy(&u64, p, 8);
		return u64;
	default:
		return 0;
	}
}

int64_t ktel_field_read_elem_s64(const struct ktel_field *f, const void *data, __u32 idx)
{
	uint64_t u = ktel_field_read_elem_u64(f, data, idx);

	if (!f || !f->is_signed)
		return (int64_t)u;
	switch (f->elem_size) {
	case 1:
		return (int8_t)u;
	case 2:
		return (int16_t)u;
	case 4:
		return (int32_t)u;
	default:
		return (int64_t)u;
	}
}

/*
 * Whether an enumerator of a size-byte enum equals value, also when value was
 * read with another width or signedness: equal modulo 2^(8*size), provided
 * value fits that width either as signed or as unsigned.
 */
static bool enum_value_matches(int64_t ev, int64_t value, __u32 size)
{
	uint64_t mask;

	if (ev == value)
		return true;
	if (size == 0 || size >= 8)
		return false;
	mask = (1ULL << (size * 8)) - 1;
	if (value >= 0 ? (uint64_t)value > mask : value < -(int64_t)(mask / 2 + 1))
		return false;
	return ((uint64_t)ev & mask) == ((uint64_t)value & mask);
}

/* Value and name of enumerator i of the enum t. */
static int64_t enumerator(const struct btf_type *t, __u32 i, __u32 *ret_name_off)
{
	if (btf_is_enum(t)) {
		*ret_name_off = btf_enum(t)[i].name_off;
		return btf_kflag(t) ? (int64_t)btf_enum(t)[i].val
				    : (int64_t)(uint32_t)btf_enum(t)[i].val;
	}
	*ret_name_off = btf_enum64(t)[i].name_off;
	return (int64_t)btf_enum64_value(&btf_enum64(t)[i]);
}

int ktel_layout_enum_index(const struct btf *btf, __u32 enum_type_id, int64_t value)
{
	const struct btf_type *t;
	__u32 name_off;

	t = btf ? btf__type_by_id(btf, enum_type_id) : NULL;
	if (!t || !btf_is_any_enum(t))
		return -1;
	for (__u32 i = 0; i < btf_vlen(t); i++)
		if (enum_value_matches(enumerator(t, i, &name_off), value, t->size))
			return (int)i;
	return -1;
}

const char *ktel_layout_enum_name(const struct btf *btf, __u32 enum_type_id, __u32 i)
{
	const struct btf_type *t;
	__u32 name_off;

	t = btf ? btf__type_by_id(btf, enum_type_id) : NULL;
	if (!t || !btf_is_any_enum(t) || i >= btf_vlen(t))
		return NULL;
	enumerator(t, i, &name_off);
	return btf__str_by_offset(btf, name_off);
}

__u32 ktel_layout_enum_count(const struct btf *btf, __u32 enum_type_id)
{
	const struct btf_type *t = btf ? btf__type_by_id(btf, enum_type_id) : NULL;

	return t && btf_is_any_enum(t) ? btf_vlen(t) : 0;
}

const char *ktel_layout_enum_label(const struct btf *btf, __u32 enum_type_id, int64_t value)
{
	int i = ktel_layout_enum_index(btf, enum_type_id, value);

	return i < 0 ? NULL : ktel_layout_enum_name(btf, enum_type_id, (__u32)i);
}

__s32 ktel_btf_find_type(const struct btf *btf, const char *name, int kind)
{
	const struct btf_type *t;
	const char *s;
	__u32 id, n;

	if (!btf || !name || !name[0])
		return -EINVAL;
	n = btf__type_cnt(btf);
	for (id = 1; id < n; id++) {
		t = btf__type_by_id(btf, id);
		if (!t)
			continue;
		if (btf_kind(t) != kind &&
		    !(kind == BTF_KIND_ENUM && btf_kind(t) == BTF_KIND_ENUM64))
			continue;
		s = btf__str_by_offset(btf, t->name_off);
		if (s && !strcmp(s, name))
			return id;
	}
	return -ENOENT;
}

__s32 ktel_btf_find_enum(const struct btf *btf, const char *name)
{
	return ktel_btf_find_type(btf, name, BTF_KIND_ENUM);
}

__s32 ktel_btf_find_struct(const struct btf *btf, const char *name)
{
	return ktel_btf_find_type(btf, name, BTF_KIND_STRUCT);
}

bool ktel_field__is_number(const struct ktel_field *f)
{
	return f->kind == KTEL_FIELD_INT || f->kind == KTEL_FIELD_ENUM;
}

static int check_percpu_member(const struct ktel_layout *vl, const struct ktel_field *f,
			       struct ktel_err *err)
{
	if (f->elem_size == 8 && f->offset % 8 == 0)
		return 0;
	return ktel_err_set(err, EINVAL,
			    "value %s has member %s of %u bytes at offset %u: "
			    "per-CPU values are summed per 8-byte word, so it would carry into "
			    "its neighbours; declare every value member __u64 or __s64 at an "
			    "8-byte offset",
			    vl->type_name, f->name[0] ? f->name : "(the whole value)", f->elem_size,
			    f->offset);
}

int ktel_layout__check_percpu_sum(const struct ktel_layout *vl, struct ktel_err *err)
{
	int r = 0;

	if (vl->hist_field >= 0) {
		r = check_percpu_member(vl, &vl->fields[vl->hist_field], err);
		if (!r && vl->sum_field >= 0)
			r = check_percpu_member(vl, &vl->fields[vl->sum_field], err);
		return r;
	}
	for (__u32 i = 0; i < vl->n_fields && !r; i++)
		if (ktel_field__is_number(&vl->fields[i]))
			r = check_percpu_member(vl, &vl->fields[i], err);
	return r;
}
