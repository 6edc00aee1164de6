// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "kernel_targets.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "vmlinux_btf.h"

/*
 * What the choice needs of the kernel's BTF: every FUNC and every
 * btf_trace_<tracepoint> typedef, by name, with its argument count. While
 * the daemon's scan lends its parse to libbpf's loads (vmlinux_btf.h), the
 * index only points into that parse (8 bytes an entry, 0.4 MiB on a 6.x
 * kernel). Otherwise the names are copied out (1.7 MiB) and the parse freed
 * at once, so that it never sits beside the parses libbpf makes itself.
 */
struct target_entry {
	uint32_t key;  /* type id in t->btf, or offset in names once detached */
	int32_t nargs; /* -1: not a function prototype */
};

struct target_index {
	struct target_entry *v; /* sorted by name, the first in the BTF first */
	size_t n;
	size_t skip; /* prefix the name is looked up without */
	char *names; /* NULL: keys are type ids of t->btf */
};

struct ktel_targets {
	const struct btf *btf;     /* NULL once the index is detached from it */
	struct btf *own;           /* btf when it is not the shared parse */
	struct target_index funcs; /* FUNC <name> */
	struct target_index tps;   /* typedef btf_trace_<name>, by <name> */
	char *kprobe_pmu;          /* NULL: KTEL_KPROBE_PMU_PATH */
	char *tracefs;             /* NULL: probe the usual mount points; "": none */
};

enum target_kind {
	TARGET_BTF_TP,  /* typedef btf_trace_<X> */
	TARGET_FUNC,    /* FUNC <X> */
	TARGET_KPROBE,  /* FUNC <X> and kprobe support */
	TARGET_TRACEFS, /* events/<cat>/<name> or btf_trace_<name> */
};

static const struct {
	const char *prefix;
	enum target_kind kind;
} section_kinds[] = {
	{"tp_btf/", TARGET_BTF_TP},
	{"raw_tp/", TARGET_BTF_TP},
	{"raw_tracepoint/", TARGET_BTF_TP},
	{"fentry/", TARGET_FUNC},
	{"fexit/", TARGET_FUNC},
	{"fmod_ret/", TARGET_FUNC},
	{"fentry.s/", TARGET_FUNC},
	{"fexit.s/", TARGET_FUNC},
	{"fmod_ret.s/", TARGET_FUNC},
	{"kprobe/", TARGET_KPROBE},
	{"kretprobe/", TARGET_KPROBE},
	{"tracepoint/", TARGET_TRACEFS},
	{"tp/", TARGET_TRACEFS},
};

static const char *const default_tracefs[] = {
	"/sys/kernel/tracing",
	"/sys/kernel/debug/tracing",
};

/* Parameter count of the FUNC_PROTO that type id (after PTR/TYPEDEF) is, or -1. */
static int proto_params(const struct btf *btf, __u32 id)
{
	const struct btf_type *type;
	int depth;

	/* A bounded walk: a BTF loop must not hang the daemon. */
	for (depth = 0; depth < 8; depth++) {
		type = btf__type_by_id(btf, id);
		if (!type)
			return -1;
		if (btf_is_func_proto(type))
			return btf_vlen(type);
		if (!btf_is_ptr(type) && !btf_is_typedef(type) && !btf_is_func(type))
			return -1;
		id = type->type;
	}
	return -1;
}

static const char tp_prefix[] = "btf_trace_";

/* The name type id is indexed under in x, or NULL when it has none. */
static const char *index_name(const struct btf *btf, const struct target_index *x, __u32 id)
{
	const struct btf_type *type = btf__type_by_id(btf, id);
	const char *name = type ? btf__name_by_offset(btf, type->name_off) : NULL;

	return name && name[0] ? name + x->skip : NULL;
}

static const char *entry_name(const struct ktel_targets *t, const struct target_index *x,
			      const struct target_entry *e)
{
	return x->names ? x->names + e->key : index_name(t->btf, x, e->key);
}

/* Which index, if any, type id of t->btf belongs in. */
static struct target_index *index_of(struct ktel_targets *t, __u32 id)
{
	const struct btf_type *type = btf__type_by_id(t->btf, id);
	const char *name = type ? btf__name_by_offset(t->btf, type->name_off) : NULL;

	if (!name || !name[0])
		return NULL;
	if (btf_is_func(type))
		return &t->funcs;
	if (btf_is_typedef(type) && !strncmp(name, tp_prefix, sizeof(tp_prefix) - 1))
		return &t->tps;
	return NULL;
}

static int32_t entry_nargs(const struct ktel_targets *t, const struct target_index *x, __u32 id)
{
	int args = proto_params(t->btf, id);

	/* A tracepoint's first parameter is its void *data. */
	if (x == &t->tps)
		return args > 0 ? args - 1 : -1;
	return args;
}

struct sort_ctx {
	const struct ktel_targets *t;
	const struct target_index *x;
};

static int entry_cmp(const void *a, const void *b, void *arg)
{
	const struct sort_ctx *ctx = arg;
	const struct target_entry *e = a, *f = b;
	int c = strcmp(entry_name(ctx->t, ctx->x, e), entry_name(ctx->t, ctx->x, f));

	/* Equal names: the first in the BTF wins, as btf__find_by_name_kind(). */
	return c ? c : (e->key > f->key) - (e->key < f->key);
}

/* Sort by name and drop later duplicates. */
static void index_seal(const struct ktel_targets *t, struct target_index *x)
{
	struct sort_ctx ctx = {t, x};
	size_t out = 0;

	qsort_r(x->v, x->n, sizeof(*x->v), entry_cmp, &ctx);
	for (size_t i = 0; i < x->n; i++)
		if (!out || strcmp(entry_name(t, x, &x->v[out - 1]), entry_name(t, x, &x->v[i])))
			x->v[out++] = x->v[i];
	x->n = out;
}

static const struct target_entry *index_find(const struct ktel_targets *t,
					     const struct target_index *x, const char *name)
{
	size_t lo = 0, hi = x->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, entry_name(t, x, &x->v[mid]));

		if (!c)
			return &x->v[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* Two passes over the types: count, then fill arrays of the exact size. */
static int build_index(struct ktel_targets *t)
{
	__u32 n = btf__type_cnt(t->btf);
	struct target_index *x;

	for (__u32 id = 1; id < n; id++)
		if ((x = index_of(t, id)))
			x->n++;
	t->funcs.v = calloc(t->funcs.n + 1, sizeof(*t->funcs.v));
	t->tps.v = calloc(t->tps.n + 1, sizeof(*t->tps.v));
	if (!t->funcs.v || !t->tps.v)
		return -ENOMEM;
	t->funcs.n = t->tps.n = 0;
	for (__u32 id = 1; id < n; id++)
		if ((x = index_of(t, id)))
			x->v[x->n++] = (struct target_entry){id, entry_nargs(t, x, id)};
	index_seal(t, &t->funcs);
	index_seal(t, &t->tps);
	return 0;
}

/* Copy x's names out of the BTF; keys become offsets in the copy. */
static int index_detach(const struct ktel_targets *t, struct target_index *x)
{
	size_t len = 0, used = 0;

	for (size_t i = 0; i < x->n; i++)
		len += strlen(entry_name(t, x, &x->v[i])) + 1;
	if (len > UINT32_MAX)
		return -E2BIG;
	x->names = malloc(len ? len : 1);
	if (!x->names)
		return -ENOMEM;
	for (size_t i = 0; i < x->n; i++) {
		const char *name = index_name(t->btf, x, x->v[i].key);
		size_t n = strlen(name) + 1;

		memcpy(x->names + used, name, n);
		x->v[i].key = (uint32_t)used;
		used += n;
	}
	return 0;
}

/* End t's use of its BTF: freed, or the shared parse's hold ended. */
static void drop_btf(struct ktel_targets *t)
{
	if (t->own)
		btf__free(t->own);
	else if (t->btf)
		ktel_vmlinux_btf__release();
	t->btf = t->own = NULL;
}

/* Index t->btf, and unless keep_btf detach from it; frees t on failure. */
static struct ktel_targets *targets_index(struct ktel_targets *t, bool keep_btf)
{
	int rc;

	t->tps.skip = sizeof(tp_prefix) - 1;
	rc = build_index(t);
	if (!rc && !keep_btf) {
		rc = index_detach(t, &t->funcs);
		rc = rc ?: index_detach(t, &t->tps);
		drop_btf(t);
	}
	if (rc) {
		ktel_targets__free(t);
		errno = -rc;
		return NULL;
	}
	return t;
}

struct ktel_targets *ktel_targets__new_from_btf(struct btf *btf)
{
	struct ktel_targets *t;

	t = calloc(1, sizeof(*t));
	if (!t) {
		btf__free(btf);
		errno = ENOMEM;
		return NULL;
	}
	t->btf = t->own = btf;
	return targets_index(t, false);
}

struct ktel_targets *ktel_targets__new(const char *btf_path, struct ktel_err *err)
{
	struct ktel_targets *t;
	struct btf *btf;

	if (btf_path) {
		btf = ktel_vmlinux_btf__parse(btf_path, NULL, err);
		return btf ? ktel_targets__new_from_btf(btf) : NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		ktel_err_set(err, ENOMEM, "kernel targets: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	t->btf = ktel_vmlinux_btf__hold(err);
	if (!t->btf) {
		free(t);
		return NULL;
	}
	/* Kept only if libbpf's loads borrow it: else it would sit beside theirs. */
	t = targets_index(t, ktel_vmlinux_btf__lending());
	if (!t)
		ktel_err_set(err, errno, "kernel BTF: cannot index it: %s", strerror(errno));
	return t;
}

void ktel_targets__free(struct ktel_targets *t)
{
	if (!t)
		return;
	free(t->funcs.v);
	free(t->funcs.names);
	free(t->tps.v);
	free(t->tps.names);
	drop_btf(t);
	free(t->kprobe_pmu);
	free(t->tracefs);
	free(t);
}

static int replace_str(char **slot, const char *value)
{
	char *copy;

	if (!value)
		return 0;
	copy = strdup(value);
	if (!copy)
		return -ENOMEM;
	free(*slot);
	*slot = copy;
	return 0;
}

int ktel_targets__set_probe_paths(struct ktel_targets *t, const char *kprobe_pmu,
				  const char *tracefs)
{
	int rc;

	rc = replace_str(&t->kprobe_pmu, kprobe_pmu);
	if (rc)
		return rc;
	return replace_str(&t->tracefs, tracefs);
}

static bool is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Argument count of tracepoint name from its btf_trace_ typedef; -ENOENT if absent. */
static int btf_tp_args(const struct ktel_targets *t, const char *name)
{
	const struct target_entry *e = index_find(t, &t->tps, name);

	return e ? e->nargs : -ENOENT;
}

/* Argument count of function name; -ENOENT if it is not a FUNC in the BTF. */
static int btf_func_args(const struct ktel_targets *t, const char *name)
{
	const struct target_entry *e;
	char fname[256];
	size_t len;

	/* kprobe sections may carry an offset: kprobe/func+0x10. */
	len = strcspn(name, "+");
	if (len >= sizeof(fname))
		return -ENOENT;
	memcpy(fname, name, len);
	fname[len] = '\0';
	e = index_find(t, &t->funcs, fname);
	return e ? e->nargs : -ENOENT;
}

static const char *tracefs_root(const struct ktel_targets *t)
{
	char events[512];
	size_t i;

	if (t->tracefs) {
		if (!t->tracefs[0])
			return NULL;
		snprintf(events, sizeof(events), "%s/events", t->tracefs);
		return is_dir(events) ? t->tracefs : NULL;
	}
	for (i = 0; i < KTEL_ARRAY_SIZE(default_tracefs); i++) {
		snprintf(events, sizeof(events), "%s/events", default_tracefs[i]);
		if (is_dir(events))
			return default_tracefs[i];
	}
	return NULL;
}

static int check_tracefs(const struct ktel_targets *t, const char *target, int *nr_args,
			 char *reason, size_t reason_len)
{
	const char *root = tracefs_root(t), *name = strchr(target, '/');
	char path[1024];
	int n;

	if (!name || !name[1] || name == target) {
		snprintf(reason, reason_len, "tracepoint %s: expected category/name", target);
		return -ENOENT;
	}
	name++;
	n = btf_tp_args(t, name);
	if (root) {
		snprintf(path, sizeof(path), "%s/events/%s", root, target);
		if (!is_dir(path)) {
			snprintf(reason, reason_len, "tracepoint %s not in this kernel", target);
			return -ENOENT;
		}
	} else if (n == -ENOENT) {
		snprintf(reason, reason_len, "tracepoint %s not in this kernel", target);
		return -ENOENT;
	}
	*nr_args = n < 0 ? -1 : n;
	return 0;
}

static int check_kind(const struct ktel_targets *t, enum target_kind kind, const char *target,
		      int *nr_args, char *reason, size_t reason_len)
{
	const char *pmu = t->kprobe_pmu ? t->kprobe_pmu : KTEL_KPROBE_PMU_PATH;
	struct stat st;
	int n;

	switch (kind) {
	case TARGET_BTF_TP:
		n = btf_tp_args(t, target);
		if (n == -ENOENT) {
			snprintf(reason, reason_len, "tracepoint %s not in this kernel", target);
			return -ENOENT;
		}
		*nr_args = n;
		return 0;
	case TARGET_FUNC:
	case TARGET_KPROBE:
		n = btf_func_args(t, target);
		if (n == -ENOENT) {
			snprintf(reason, reason_len, "function %s not in this kernel", target);
			return -ENOENT;
		}
		if (kind == TARGET_KPROBE && stat(pmu, &st) != 0) {
			snprintf(reason, reason_len, "kprobes not supported by this kernel (no %s)",
				 pmu);
			return -ENOENT;
		}
		*nr_args = n;
		return 0;
	case TARGET_TRACEFS:
		return check_tracefs(t, target, nr_args, reason, reason_len);
	}
	return 0;
}

int ktel_targets__check(const struct ktel_targets *t, const char *section_name, int *ret_nr_args,
			char *reason, size_t reason_len)
{
	char scratch[KTEL_TARGET_REASON_MAX];
	const char *target;
	size_t i, len;
	int nr_args = -1, rc;

	if (!reason || !reason_len) {
		reason = scratch;
		reason_len = sizeof(scratch);
	}
	reason[0] = '\0';
	for (i = 0; i < KTEL_ARRAY_SIZE(section_kinds); i++) {
		len = strlen(section_kinds[i].prefix);
		if (strncmp(section_name, section_kinds[i].prefix, len) != 0)
			continue;
		target = section_name + len;
		if (!target[0]) {
			snprintf(reason, reason_len, "section %s names no target", section_name);
			return -ENOENT;
		}
		rc = check_kind(t, section_kinds[i].kind, target, &nr_args, reason, reason_len);
		if (rc)
			return rc;
		break;
	}
	if (ret_nr_args)
		*ret_nr_args = nr_args;
	return 0;
}

static int find_prog(const struct ktel_prog_choice *progs, size_t n_progs, const char *name)
{
	size_t i;

	for (i = 0; i < n_progs; i++)
		if (name && strcmp(progs[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* Index of the first variant naming prog i, or -1 when it is in no group. */
static int variant_of(const struct ktel_prog_variant *variants, uint32_t n_variants,
		      const struct ktel_prog_choice *prog)
{
	uint32_t v;

	for (v = 0; v < n_variants; v++)
		if (variants[v].prog && strcmp(variants[v].prog, prog->name) == 0)
			return (int)v;
	return -1;
}

/*
 * The program of variant v when v is an entry of group, else -1. A program
 * listed in several groups gets its verdict at its first entry; *ret_later
 * says v is a later one, which stands for that verdict (the program is the
 * group's choice there when it was selected, and is passed over when not).
 */
static int group_entry(const struct ktel_prog_variant *variants, uint32_t n_variants, uint32_t v,
		       const char *group, const struct ktel_prog_choice *progs, size_t n_progs,
		       bool *ret_later)
{
	int i;

	if (!variants[v].group || strcmp(variants[v].group, group) != 0)
		return -1;
	i = find_prog(progs, n_progs, variants[v].prog);
	if (i < 0)
		return -1;
	*ret_later = variant_of(variants, n_variants, &progs[i]) != (int)v;
	return i;
}

/*
 * Pick the winner of group; mark the losers. A program whose target is
 * missing already carries the reason; an empty reason means it is present.
 */
static void choose_group(const struct ktel_prog_variant *variants, uint32_t n_variants,
			 const char *group, struct ktel_prog_choice *progs, size_t n_progs)
{
	const char *winner = NULL;
	struct ktel_prog_choice *p;
	bool later;
	uint32_t v;
	int i;

	for (v = 0; v < n_variants; v++) {
		i = group_entry(variants, n_variants, v, group, progs, n_progs, &later);
		if (i < 0)
			continue;
		p = &progs[i];
		if (later) {
			if (p->selected && !winner)
				winner = p->name;
			continue;
		}
		if (p->reason[0])
			continue; /* says which target is missing */
		if (winner) {
			snprintf(p->reason, sizeof(p->reason), "variant group %s: %s selected",
				 group, winner);
		} else if (variants[v].nr_args >= 0 && p->nr_args != variants[v].nr_args) {
			snprintf(p->reason, sizeof(p->reason),
				 "variant group %s: %s has %d arguments, variant wants %d", group,
				 p->section, p->nr_args, variants[v].nr_args);
		} else {
			p->selected = true;
			winner = p->name;
		}
	}
}

/* Whether variants[g] is the first entry of its group in table order. */
static bool first_of_group(const struct ktel_prog_variant *variants, uint32_t g)
{
	uint32_t e;

	if (!variants[g].group)
		return false;
	for (e = 0; e < g; e++)
		if (variants[e].group && strcmp(variants[e].group, variants[g].group) == 0)
			return false;
	return true;
}

/* Append clause to out, "; "-separated, unless it is already there. */
static void append_clause(char *out, size_t len, const char *clause)
{
	size_t used = strlen(out);

	if (!len || !clause[0] || strstr(out, clause) || used + 1 >= len)
		return;
	snprintf(out + used, len - used, "%s%s", used ? "; " : "", clause);
}

/* prog's reason without the "variant group <group>: " its group already names. */
static const char *reason_in_group(const struct ktel_prog_choice *prog, const char *group)
{
	static const char prefix[] = "variant group ";
	size_t glen = strlen(group);
	const char *r = prog->reason;

	if (strncmp(r, prefix, sizeof(prefix) - 1) == 0 &&
	    strncmp(r + sizeof(prefix) - 1, group, glen) == 0 &&
	    strncmp(r + sizeof(prefix) - 1 + glen, ": ", 2) == 0)
		return r + sizeof(prefix) - 1 + glen + 2;
	return r;
}

/*
 * Whether group has a selected member; when not, describe it as
 * "variant group G: no usable variant (<its members' reasons>)". A group none
 * of whose programs is in the object has nothing to run and is ignored.
 */
static bool group_met(const struct ktel_prog_variant *variants, uint32_t n_variants,
		      const char *group, const struct ktel_prog_choice *progs, size_t n_progs,
		      char *clause, size_t len)
{
	bool any = false, later;
	size_t used;
	uint32_t v;
	int i;

	used = (size_t)snprintf(clause, len, "variant group %s: no usable variant (", group);
	for (v = 0; v < n_variants; v++) {
		i = group_entry(variants, n_variants, v, group, progs, n_progs, &later);
		if (i < 0)
			continue;
		if (progs[i].selected)
			return true;
		if (progs[i].unneeded || later)
			continue;
		any = true;
		if (used < len && !strstr(clause, reason_in_group(&progs[i], group)))
			used += (size_t)snprintf(clause + used, len - used, "%s%s",
						 clause[used - 1] == '(' ? "" : "; ",
						 reason_in_group(&progs[i], group));
	}
	if (used < len)
		snprintf(clause + used, len - used, ")");
	return !any;
}

/*
 * The whole-object rule: each hook of a plugin is needed (a start without
 * its end only fills its start map, an end without its start never finds
 * one), so every variant group needs a selected variant and every program
 * in no group must be usable. Writes one clause per unmet requirement to
 * why and the first one's short form to first; returns how many are unmet.
 */
static size_t describe_unmet(const struct ktel_prog_variant *variants, uint32_t n_variants,
			     const struct ktel_prog_choice *progs, size_t n_progs, char *why,
			     size_t why_len, char *first, size_t first_len)
{
	char clause[KTEL_TARGET_REASON_MAX * 4];
	size_t i, n_unmet = 0;
	uint32_t g;

	for (g = 0; g < n_variants; g++) {
		if (!first_of_group(variants, g) ||
		    group_met(variants, n_variants, variants[g].group, progs, n_progs, clause,
			      sizeof(clause)))
			continue;
		if (!n_unmet++)
			snprintf(first, first_len, "variant group %s has no usable variant",
				 variants[g].group);
		append_clause(why, why_len, clause);
	}
	for (i = 0; i < n_progs; i++) {
		if (progs[i].selected || progs[i].unneeded ||
		    variant_of(variants, n_variants, &progs[i]) >= 0)
			continue;
		if (!n_unmet++)
			snprintf(first, first_len, "program %s cannot run", progs[i].name);
		append_clause(why, why_len, progs[i].reason);
	}
	return n_unmet;
}

size_t ktel_targets__choose_why(const struct ktel_targets *t,
				const struct ktel_prog_variant *variants, uint32_t n_variants,
				struct ktel_prog_choice *progs, size_t n_progs, char *why,
				size_t why_len)
{
	char first[KTEL_TARGET_REASON_MAX] = "", scratch[KTEL_TARGET_REASON_MAX];
	size_t i, n_selected = 0;
	uint32_t g;

	if (!why || !why_len) {
		why = scratch;
		why_len = sizeof(scratch);
	}
	why[0] = '\0';
	for (i = 0; i < n_progs; i++) {
		progs[i].nr_args = -1;
		ktel_targets__check(t, progs[i].section, &progs[i].nr_args, progs[i].reason,
				    sizeof(progs[i].reason));
		if (progs[i].excluded && !progs[i].reason[0])
			snprintf(progs[i].reason, sizeof(progs[i].reason), "%s", progs[i].excluded);
		if (progs[i].unneeded)
			snprintf(progs[i].reason, sizeof(progs[i].reason), "%s", progs[i].unneeded);
		progs[i].selected = !progs[i].reason[0] &&
				    variant_of(variants, n_variants, &progs[i]) < 0;
	}
	for (g = 0; g < n_variants; g++)
		if (first_of_group(variants, g))
			choose_group(variants, n_variants, variants[g].group, progs, n_progs);
	if (describe_unmet(variants, n_variants, progs, n_progs, why, why_len, first,
			   sizeof(first))) {
		/* All or nothing: the usable rest would run and measure nothing. */
		for (i = 0; i < n_progs; i++) {
			if (!progs[i].selected)
				continue;
			progs[i].selected = false;
			snprintf(progs[i].reason, sizeof(progs[i].reason), "not loaded: %s", first);
		}
	}
	for (i = 0; i < n_progs; i++)
		n_selected += progs[i].selected;
	return n_selected;
}

size_t ktel_targets__choose(const struct ktel_targets *t, const struct ktel_prog_variant *variants,
			    uint32_t n_variants, struct ktel_prog_choice *progs, size_t n_progs)
{
	return ktel_targets__choose_why(t, variants, n_variants, progs, n_progs, NULL, 0);
}
