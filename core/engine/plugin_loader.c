// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "plugin_loader.h"
#include "plugin_elf.h"
#include "btf_layout.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "bpf_lifecycle.h"
#include "contain.h"

/* Longest string a descriptor may hold (descriptions included). */
#define DESC_STR_MAX 4096
/* Largest struct_size believed for a metric descriptor of a newer minor. */
#define METRIC_DESC_MAX_SIZE 4096

/* ---- path safety ------------------------------------------------------ */

static const char *owner_rule(uid_t owner, char *buf, size_t len)
{
	if (owner == 0)
		return "root";
	snprintf(buf, len, "root or uid %u", (unsigned)owner);
	return buf;
}

/*
 * Check one node's owner and mode. what is "" for the file itself or
 * "parent directory <dir> " for a directory on its path.
 */
static int check_owner_mode(const char *path, const char *what, const struct stat *st, uid_t owner,
			    struct ktel_err *err)
{
	char buf[32];

	if (st->st_uid != 0 && st->st_uid != owner)
		return ktel_err_set(err, EPERM, "%s: refused: %snot owned by %s (uid %u)", path,
				    what, owner_rule(owner, buf, sizeof(buf)),
				    (unsigned)st->st_uid);
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return ktel_err_set(err, EPERM,
				    "%s: refused: %sgroup- or world-writable (mode %04o)", path,
				    what, (unsigned)(st->st_mode & 07777));
	return 0;
}

/* Check every directory of the canonical directory dir, from / down. */
static int check_dirs(const char *path, const char *dir, uid_t owner, struct ktel_err *err)
{
	char prefix[PATH_MAX], what[PATH_MAX + 32];
	struct stat st;
	size_t i, len = strlen(dir);
	int rc;

	for (i = 1; i <= len; i++) {
		if (i != 1 && dir[i] != '/' && dir[i] != '\0')
			continue;
		memcpy(prefix, dir, i);
		prefix[i] = '\0';
		if (lstat(prefix, &st) != 0)
			return ktel_err_set(err, errno, "%s: refused: cannot examine %s: %s", path,
					    prefix, strerror(errno));
		if (!S_ISDIR(st.st_mode))
			return ktel_err_set(err, EPERM, "%s: refused: %s is not a directory", path,
					    prefix);
		/*
		 * A root-owned sticky directory above the plugin's own (/tmp)
		 * is safe: nobody but root and the entry's owner can rename or
		 * remove the entry below it, and that entry is checked next.
		 */
		if (i < len && st.st_uid == 0 && (st.st_mode & S_ISVTX) &&
		    (st.st_mode & (S_IWGRP | S_IWOTH)))
			continue;
		snprintf(what, sizeof(what), "parent directory %s is ", prefix);
		if (!(st.st_mode & (S_IWGRP | S_IWOTH)))
			snprintf(what, sizeof(what), "parent directory %s ", prefix);
		rc = check_owner_mode(path, what, &st, owner, err);
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * Check the directories of path's canonical parent and store the canonical
 * path "<realpath(dirname)>/<basename>" in *ret_real (if not NULL). The
 * canonical path is what gets opened, so a symlinked directory cannot be
 * swapped between this check and the open.
 */
static int check_parents(const char *path, uid_t owner, char **ret_real, struct ktel_err *err)
{
	char *copy_dir = NULL, *copy_base = NULL, *dir = NULL, *real = NULL;
	int rc;

	copy_dir = strdup(path);
	copy_base = strdup(path);
	if (!copy_dir || !copy_base) {
		rc = ktel_err_set(err, ENOMEM, "%s: out of memory", path);
		goto out;
	}
	dir = realpath(dirname(copy_dir), NULL);
	if (!dir) {
		rc = ktel_err_set(err, errno, "%s: refused: cannot resolve its directory: %s", path,
				  strerror(errno));
		goto out;
	}
	rc = check_dirs(path, dir, owner, err);
	if (rc || !ret_real)
		goto out;
	if (asprintf(&real, "%s/%s", strcmp(dir, "/") ? dir : "", basename(copy_base)) < 0) {
		rc = ktel_err_set(err, ENOMEM, "%s: out of memory", path);
		goto out;
	}
	*ret_real = real;
out:
	free(dir);
	free(copy_base);
	free(copy_dir);
	return rc;
}

/*
 * Open the file path names, never through a symlink, and judge what was
 * opened: a regular file, owner and mode (fstat of the descriptor, so the
 * file cannot be swapped between the check and the load), every parent
 * directory. lstat first, so a FIFO or device is refused without opening
 * it. Stores the descriptor, its stat and the canonical path.
 */
static int open_safe(const char *path, uid_t owner, int *ret_fd, struct stat *ret_st,
		     char **ret_real, struct ktel_err *err)
{
	char *real = NULL;
	struct stat st;
	int fd, rc;

	if (lstat(path, &st) != 0)
		return ktel_err_set(err, errno, "%s: refused: cannot examine it: %s", path,
				    strerror(errno));
	if (S_ISLNK(st.st_mode))
		return ktel_err_set(err, EPERM, "%s: refused: is a symbolic link", path);
	if (!S_ISREG(st.st_mode))
		return ktel_err_set(err, EPERM, "%s: refused: not a regular file", path);
	rc = check_owner_mode(path, "", &st, owner, err);
	rc = rc ?: check_parents(path, owner, &real, err);
	if (rc)
		return rc;
	fd = open(real, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		rc = errno == ELOOP
			     ? ktel_err_set(err, EPERM, "%s: refused: is a symbolic link", path)
			     : ktel_err_set(err, errno, "%s: refused: cannot open: %s", path,
					    strerror(errno));
		goto fail;
	}
	if (fstat(fd, &st) != 0) {
		rc = ktel_err_set(err, errno, "%s: refused: cannot examine it: %s", path,
				  strerror(errno));
		goto fail;
	}
	/* What the lstat saw may have been replaced since: judge the open file. */
	if (!S_ISREG(st.st_mode)) {
		rc = ktel_err_set(err, EPERM, "%s: refused: not a regular file", path);
		goto fail;
	}
	rc = check_owner_mode(path, "", &st, owner, err);
	if (rc)
		goto fail;
	*ret_fd = fd;
	*ret_st = st;
	*ret_real = real;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	free(real);
	return rc;
}

int ktel_path_check_safe_owner(const char *path, uid_t owner, struct ktel_err *err)
{
	char *real = NULL;
	struct stat st;
	int fd = -1, rc;

	rc = open_safe(path, owner, &fd, &st, &real, err);
	if (!rc)
		close(fd);
	free(real);
	return rc;
}

int ktel_path_check_safe(const char *path, struct ktel_err *err)
{
	return ktel_path_check_safe_owner(path, 0, err);
}

/* ---- descriptor validation ------------------------------------------- */

struct validator {
	const char *path;
	const struct ktel_elf_view *view; /* the plugin's data, relocated, never run */
	struct ktel_err *err;
	/* Why the last range refused was refused, when a relocation was the cause. */
	const char *bad_reloc;
	/* The last range refused was refused for its alignment. */
	bool misaligned;
	/* The plugin's ABI minor: flags of a later minor mean nothing before. */
	uint16_t abi_minor;
};

/*
 * Whether [ptr, ptr + size) lies in the plugin's data and holds no
 * relocation the view left unapplied (remembered for the message).
 */
static bool in_plugin(const struct validator *v, const void *ptr, size_t size)
{
	const char *why = ktel_elf_view__check(v->view, ptr, size ? size : 1);

	if (why && strcmp(why, "outside") != 0)
		((struct validator *)v)->bad_reloc = why;
	return !why;
}

/*
 * in_plugin() for data read through a typed pointer: also aligned as the
 * compiler aligns it (a crafted plugin can point a descriptor anywhere, and
 * a misaligned struct read is undefined behaviour). The view's buffer is
 * malloc'd, so alignment in it is alignment of the file's addresses.
 */
static bool in_plugin_aligned(const struct validator *v, const void *ptr, size_t size, size_t align)
{
	if (align > 1 && (uintptr_t)ptr % align) {
		((struct validator *)v)->misaligned = true;
		return false;
	}
	return in_plugin(v, ptr, size);
}

static bool name_char(char c, bool ident)
{
	if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')
		return true;
	return ident && ((c >= 'A' && c <= 'Z') || c == '.');
}

/*
 * Check a string field: present unless optional, inside the plugin, bounded,
 * and when charset is set made of [a-z0-9_] (or C identifier characters and
 * dots for BPF names). field is for the message.
 */
enum charset {
	ANY,
	METRIC_NAME,
	BPF_NAME
};

static int check_str(const struct validator *v, const char *field, const char *s, bool optional,
		     enum charset cs)
{
	size_t i, len, room, max = cs == ANY ? DESC_STR_MAX : KTEL_PLUGIN_NAME_MAX;

	if (!s) {
		if (optional)
			return 0;
		return ktel_err_set(v->err, EINVAL, "%s: refused: %s is NULL", v->path, field);
	}
	if (!in_plugin(v, s, 1))
		return ktel_err_set(v->err, EINVAL, "%s: refused: %s points outside the plugin",
				    v->path, field);
	room = ktel_elf_view__room(v->view, s);
	len = strnlen(s, room < max + 1 ? room : max + 1);
	if (len == room)
		return ktel_err_set(v->err, EINVAL,
				    "%s: refused: %s is not NUL-terminated inside "
				    "the plugin",
				    v->path, field);
	if (!in_plugin(v, s, len + 1))
		return ktel_err_set(v->err, EINVAL, "%s: refused: %s points outside the plugin",
				    v->path, field);
	if (len > max)
		return ktel_err_set(v->err, EINVAL, "%s: refused: %s longer than %zu characters",
				    v->path, field, max);
	if (cs == ANY)
		return 0;
	for (i = 0; i < len; i++)
		if (!name_char(s[i], cs == BPF_NAME))
			break;
	if (len == 0 || i < len)
		return ktel_err_set(v->err, EINVAL, "%s: refused: %s \"%.*s\" must match %s",
				    v->path, field, (int)len, s,
				    cs == METRIC_NAME ? "[a-z0-9_]+" : "[A-Za-z0-9_.]+");
	return 0;
}

static int check_array(const struct validator *v, const char *field, const void *arr, uint32_t n,
		       uint32_t max, size_t elem)
{
	if (n > max)
		return ktel_err_set(v->err, EINVAL, "%s: refused: %s: %u entries, at most %u",
				    v->path, field, n, max);
	if (n && !in_plugin_aligned(v, arr, (size_t)n * elem, elem % 8 ? (elem % 4 ? 1 : 4) : 8))
		return ktel_err_set(v->err, EINVAL, "%s: refused: %s points %s", v->path, field,
				    v->misaligned ? "to a misaligned address"
						  : "outside the plugin");
	return 0;
}

/* Flags of dimension i this daemon knows (newer bits are ignored). */
static uint32_t dim_flags_of(const struct ktel_metric_desc *m, uint32_t i)
{
	return m->dim_flags ? m->dim_flags[i] & KTEL_DIM_FLAGS_ALL : 0;
}

/*
 * Block-device dimensions (KTEL_DIM_DEV_*): one major and one minor, or one
 * dev_t, plain integers (no other label), on an accumulator, and no
 * declared dimension already named "device", the one they add.
 */
static int check_dev_dims(const struct validator *v, const struct ktel_metric_desc *m)
{
	uint32_t n_major = 0, n_minor = 0, n_devt = 0, i;

	for (i = 0; i < m->n_dims; i++) {
		uint32_t f = dim_flags_of(m, i);
		uint32_t dev = f & (KTEL_DIM_DEV_MAJOR | KTEL_DIM_DEV_MINOR | KTEL_DIM_DEV_T);

		n_major += !!(f & KTEL_DIM_DEV_MAJOR);
		n_minor += !!(f & KTEL_DIM_DEV_MINOR);
		n_devt += !!(f & KTEL_DIM_DEV_T);
		if (dev && (dev & (dev - 1)))
			return ktel_err_set(v->err, EINVAL,
					    "%s: refused: metric %s dimension %s: "
					    "more than one of KTEL_DIM_DEV_MAJOR, _MINOR, _T",
					    v->path, m->name, m->dims[i].name);
		if (dev &&
		    (m->dims[i].label_enum || m->dims[i].label_map || (f & KTEL_DIM_ENUM_SHORT)))
			return ktel_err_set(v->err, EINVAL,
					    "%s: refused: metric %s dimension %s: "
					    "a block-device number has no enum or map label",
					    v->path, m->name, m->dims[i].name);
	}
	if (!n_major && !n_minor && !n_devt)
		return 0;
	if (n_major > 1 || n_minor > 1 || n_devt > 1 || n_major != n_minor || (n_devt && n_major))
		return ktel_err_set(v->err, EINVAL,
				    "%s: refused: metric %s: block-device "
				    "dimensions need one KTEL_DIM_DEV_MAJOR and one "
				    "KTEL_DIM_DEV_MINOR, or one KTEL_DIM_DEV_T",
				    v->path, m->name);
	if (m->model != KTEL_MODEL_ACCUMULATOR)
		return ktel_err_set(v->err, EINVAL,
				    "%s: refused: metric %s: block-device "
				    "dimensions are for accumulator metrics only",
				    v->path, m->name);
	for (i = 0; i < m->n_dims; i++)
		if (strcmp(m->dims[i].name, KTEL_DEVICE_DIM) == 0)
			return ktel_err_set(v->err, EINVAL,
					    "%s: refused: metric %s: dimension "
					    "\"%s\" is the one block-device dimensions add",
					    v->path, m->name, KTEL_DEVICE_DIM);
	return 0;
}

/*
 * The attribution dimension (KTEL_DIM_ATTRIBUTION): at most one per metric,
 * an accumulator's, a plain integer (no label of its own: the daemon names
 * the values) with no other flag, and not named like the dimension it
 * becomes in records, which the config's `by` names. That the member is a
 * u64 is checked against the object's BTF when the pull resolves it
 * (metric_pull.c).
 */
static int check_attr_dims(const struct validator *v, const struct ktel_metric_desc *m)
{
	static const char *const by_names[] = {"cgroup",    "user",  "app",    "process",
					       "app_class", "other", "unknown"};
	uint32_t n = 0, i;

	for (i = 0; i < m->n_dims; i++) {
		/* Before ABI 1.2 the bit meant nothing: copy_metric clears it. */
		uint32_t f = v->abi_minor < 2 ? 0 : dim_flags_of(m, i);

		for (size_t k = 0; k < KTEL_ARRAY_SIZE(by_names); k++)
			if (strcmp(m->dims[i].name, by_names[k]) == 0)
				return ktel_err_set(v->err, EINVAL,
						    "%s: refused: metric %s: dimension \"%s\" "
						    "is a name attribution gives its dimension",
						    v->path, m->name, m->dims[i].name);
		if (!(f & KTEL_DIM_ATTRIBUTION))
			continue;
		if (++n > 1)
			return ktel_err_set(v->err, EINVAL,
					    "%s: refused: metric %s dimension %s: more than "
					    "one KTEL_DIM_ATTRIBUTION dimension",
					    v->path, m->name, m->dims[i].name);
		if (m->model != KTEL_MODEL_ACCUMULATOR)
			return ktel_err_set(v->err, EINVAL,
					    "%s: refused: metric %s dimension %s: "
					    "KTEL_DIM_ATTRIBUTION is for accumulator metrics only",
					    v->path, m->name, m->dims[i].name);
		if (f != KTEL_DIM_ATTRIBUTION || m->dims[i].label_enum || m->dims[i].label_map)
			return ktel_err_set(v->err, EINVAL,
					    "%s: refused: metric %s dimension %s: an attribution "
					    "dimension has no label and no other flag",
					    v->path, m->name, m->dims[i].name);
	}
	return 0;
}

static int check_dims(const struct validator *v, const struct ktel_metric_desc *m)
{
	char field[160];
	uint32_t i;
	int rc;

	rc = check_array(v, "metric dims", m->dims, m->n_dims, KTEL_PLUGIN_MAX_DIMS,
			 sizeof(*m->dims));
	rc = rc
		     ?: check_array(v, "metric dim_flags", m->dim_flags,
				    m->dim_flags ? m->n_dims : 0, KTEL_PLUGIN_MAX_DIMS,
				    sizeof(*m->dim_flags));
	for (i = 0; !rc && i < m->n_dims; i++) {
		const struct ktel_dimension_desc *d = &m->dims[i];

		snprintf(field, sizeof(field), "metric %s dimension %u name", m->name, i);
		rc = check_str(v, field, d->name, false, METRIC_NAME);
		snprintf(field, sizeof(field), "metric %s dimension %u key_member", m->name, i);
		rc = rc ?: check_str(v, field, d->key_member, true, BPF_NAME);
		snprintf(field, sizeof(field), "metric %s dimension %u label_enum", m->name, i);
		rc = rc ?: check_str(v, field, d->label_enum, true, BPF_NAME);
		snprintf(field, sizeof(field), "metric %s dimension %u label_map", m->name, i);
		rc = rc ?: check_str(v, field, d->label_map, true, BPF_NAME);
	}
	rc = rc ?: check_dev_dims(v, m);
	return rc ?: check_attr_dims(v, m);
}

static int check_metric(const struct validator *v, const struct ktel_metric_desc *m, uint32_t index)
{
	char field[160];
	uint32_t i;
	int rc;

	snprintf(field, sizeof(field), "metric %u name", index);
	rc = check_str(v, field, m->name, false, METRIC_NAME);
	if (rc)
		return rc;
	snprintf(field, sizeof(field), "metric %s map_name", m->name);
	rc = check_str(v, field, m->map_name, false, BPF_NAME);
	rc = rc ?: check_str(v, "metric atom_name", m->atom_name, true, ANY);
	rc = rc ?: check_str(v, "metric unit", m->unit, true, ANY);
	rc = rc ?: check_str(v, "metric description", m->description, true, ANY);
	rc = rc ?: check_str(v, "metric event_type", m->event_type, true, BPF_NAME);
	rc = rc ?: check_str(v, "metric lost_map", m->lost_map, true, BPF_NAME);
	if (rc)
		return rc;
	if (m->model != KTEL_MODEL_ACCUMULATOR && m->model != KTEL_MODEL_STREAM)
		return ktel_err_set(v->err, EINVAL, "%s: refused: metric %s: unknown model %d",
				    v->path, m->name, (int)m->model);
	if ((unsigned)m->scheme > KTEL_HIST_LINEAR)
		return ktel_err_set(v->err, EINVAL, "%s: refused: metric %s: unknown scheme %d",
				    v->path, m->name, (int)m->scheme);
	if ((unsigned)m->value_kind > KTEL_VALUE_GAUGE)
		return ktel_err_set(v->err, EINVAL, "%s: refused: metric %s: unknown value_kind %d",
				    v->path, m->name, (int)m->value_kind);
	if (m->scheme == KTEL_HIST_LINEAR && m->linear_step <= 0)
		return ktel_err_set(v->err, EINVAL,
				    "%s: refused: metric %s: linear scheme needs linear_step > 0",
				    v->path, m->name);
	rc = check_dims(v, m);
	rc = rc
		     ?: check_array(v, "metric programs", m->programs, m->n_programs,
				    KTEL_PLUGIN_MAX_PROGRAMS, sizeof(*m->programs));
	for (i = 0; !rc && i < m->n_programs; i++)
		rc = check_str(v, "metric program", m->programs[i], false, BPF_NAME);
	return rc;
}

/*
 * A ring buffer has one consumer: two stream metrics reading the same ring
 * would each get part of its events. Refuse metric i when an earlier stream
 * metric names its ring.
 */
static int check_ring_shared(const struct validator *v, const struct ktel_metric_desc *m,
			     uint32_t i)
{
	if (m[i].model != KTEL_MODEL_STREAM)
		return 0;
	for (uint32_t j = 0; j < i; j++)
		if (m[j].model == KTEL_MODEL_STREAM && strcmp(m[j].map_name, m[i].map_name) == 0)
			return ktel_err_set(v->err, EINVAL,
					    "%s: refused: stream metrics %s and %s both read ring "
					    "buffer %s (a ring has one reader: each would get part "
					    "of its events)",
					    v->path, m[j].name, m[i].name, m[i].map_name);
	return 0;
}

/* Copy the metrics into this daemon's layout, validating each. */
static int copy_metrics(const struct validator *v, struct ktel_plugin *p, const void *metrics)
{
	const struct ktel_plugin_desc *d = &p->desc;
	const unsigned char *raw = metrics;
	uint32_t stride, i, j;
	int rc;

	if (d->n_metrics == 0)
		return ktel_err_set(v->err, EINVAL, "%s: refused: declares no metrics", v->path);
	if (d->n_metrics > KTEL_PLUGIN_MAX_METRICS)
		return ktel_err_set(v->err, EINVAL, "%s: refused: %u metrics, at most %u", v->path,
				    d->n_metrics, KTEL_PLUGIN_MAX_METRICS);
	if (!in_plugin_aligned(v, raw, sizeof(uint32_t), 8))
		return ktel_err_set(v->err, EINVAL, "%s: refused: metrics points %s", v->path,
				    v->misaligned ? "to a misaligned address"
						  : "outside the plugin");
	/* Metrics of a newer minor are larger: the array's stride is their size. */
	stride = *(const uint32_t *)raw;
	if (stride < KTEL_METRIC_DESC_MIN_SIZE || stride > METRIC_DESC_MAX_SIZE)
		return ktel_err_set(v->err, EINVAL,
				    "%s: refused: metric struct_size %u (ABI 1.0 needs at least %zu)",
				    v->path, stride, (size_t)KTEL_METRIC_DESC_MIN_SIZE);
	if (!in_plugin(v, raw, (size_t)stride * d->n_metrics))
		return ktel_err_set(v->err, EINVAL,
				    "%s: refused: metrics points outside the plugin", v->path);
	p->metrics = calloc(d->n_metrics, sizeof(*p->metrics));
	if (!p->metrics)
		return ktel_err_set(v->err, ENOMEM, "%s: out of memory", v->path);
	for (i = 0; i < d->n_metrics; i++) {
		const unsigned char *m = raw + (size_t)i * stride;

		if (*(const uint32_t *)m != stride)
			return ktel_err_set(
				v->err, EINVAL,
				"%s: refused: metric %u struct_size %u differs from metric 0's %u",
				v->path, i, *(const uint32_t *)m, stride);
		/* An older minor's metric is shorter: the rest stays zero. */
		memcpy(&p->metrics[i], m,
		       stride < sizeof(p->metrics[i]) ? stride : sizeof(p->metrics[i]));
		/* ABI 1.0 had no dim_flags: whatever lies there is not one. */
		if (d->abi_minor < 1)
			p->metrics[i].dim_flags = NULL;
		rc = check_metric(v, &p->metrics[i], i);
		if (rc)
			return rc;
		for (j = 0; j < i; j++)
			if (strcmp(p->metrics[j].name, p->metrics[i].name) == 0)
				return ktel_err_set(
					v->err, EINVAL,
					"%s: refused: duplicate metric name %s within the plugin",
					v->path, p->metrics[i].name);
		rc = check_ring_shared(v, p->metrics, i);
		if (rc)
			return rc;
	}
	p->desc.metrics = p->metrics;
	return 0;
}

static int check_variants_params(const struct validator *v, const struct ktel_plugin_desc *d)
{
	uint32_t i, j;
	int rc;

	rc = check_array(v, "variants", d->variants, d->n_variants, KTEL_PLUGIN_MAX_VARIANTS,
			 sizeof(*d->variants));
	for (i = 0; !rc && i < d->n_variants; i++) {
		rc = check_str(v, "variant group", d->variants[i].group, false, BPF_NAME);
		rc = rc ?: check_str(v, "variant prog", d->variants[i].prog, false, BPF_NAME);
	}
	rc = rc
		     ?: check_array(v, "attr_progs", d->attr_progs, d->n_attr_progs,
				    KTEL_PLUGIN_MAX_VARIANTS, sizeof(*d->attr_progs));
	for (i = 0; !rc && i < d->n_attr_progs; i++) {
		rc = check_str(v, "attr_progs prog", d->attr_progs[i].prog, false, BPF_NAME);
		rc = rc
			     ?: check_str(v, "attr_progs metric", d->attr_progs[i].metric, false,
					  METRIC_NAME);
		for (j = 0; !rc && j < d->n_metrics; j++)
			if (strcmp(d->metrics[j].name, d->attr_progs[i].metric) == 0)
				break;
		if (!rc && j == d->n_metrics)
			rc = ktel_err_set(v->err, EINVAL,
					  "%s: refused: attr_progs names metric %s, which the "
					  "plugin has not",
					  v->path, d->attr_progs[i].metric);
	}
	rc = rc
		     ?: check_array(v, "attr_prog_flags", d->attr_prog_flags,
				    d->attr_prog_flags ? d->n_attr_progs : 0,
				    KTEL_PLUGIN_MAX_VARIANTS, sizeof(*d->attr_prog_flags));
	rc = rc
		     ?: check_array(v, "params", d->params, d->n_params, KTEL_PLUGIN_MAX_PARAMS,
				    sizeof(*d->params));
	for (i = 0; !rc && i < d->n_params; i++) {
		rc = check_str(v, "param name", d->params[i].name, false, BPF_NAME);
		rc = rc ?: check_str(v, "param description", d->params[i].description, true, ANY);
	}
	return rc;
}

/* The embedded bytes must be a 64-bit ELF for EM_BPF before libbpf parses them. */
static int check_elf_header(const struct validator *v, const struct ktel_plugin_desc *d)
{
	Elf64_Ehdr ehdr, *eh = &ehdr; /* a copy: the object may sit at any address */
	uint16_t machine;

	if (!d->bpf_object || d->bpf_object_size < sizeof(Elf64_Ehdr))
		return ktel_err_set(v->err, EINVAL,
				    "%s: refused: embedded BPF object missing or too small (%zu bytes)",
				    v->path, d->bpf_object_size);
	if (d->bpf_object_size > KTEL_PLUGIN_BPF_MAX)
		return ktel_err_set(v->err, EINVAL,
				    "%s: refused: embedded BPF object of %zu bytes, at most %u",
				    v->path, d->bpf_object_size, KTEL_PLUGIN_BPF_MAX);
	if (!in_plugin(v, d->bpf_object, d->bpf_object_size))
		return ktel_err_set(v->err, EINVAL,
				    "%s: refused: bpf_object points outside the plugin", v->path);
	memcpy(&ehdr, d->bpf_object, sizeof(ehdr));
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0)
		return ktel_err_set(v->err, EINVAL,
				    "%s: refused: embedded BPF object is not an ELF file (bad magic)",
				    v->path);
	if (eh->e_ident[EI_CLASS] != ELFCLASS64)
		return ktel_err_set(v->err, EINVAL,
				    "%s: refused: embedded BPF object is not a 64-bit ELF",
				    v->path);
	machine = eh->e_machine;
	if (eh->e_ident[EI_DATA] !=
	    (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB))
		return ktel_err_set(v->err, EINVAL,
				    "%s: refused: embedded BPF object has the wrong byte order",
				    v->path);
	if (machine != EM_BPF)
		return ktel_err_set(
			v->err, EINVAL,
			"%s: refused: embedded object is an ELF for machine %u, not BPF (%u)",
			v->path, machine, EM_BPF);
	return 0;
}

static int check_map(const struct validator *v, struct bpf_object *obj, const char *metric,
		     const char *field, const char *map)
{
	if (!map || bpf_object__find_map_by_name(obj, map))
		return 0;
	return ktel_err_set(v->err, ENOENT,
			    "%s: refused: metric %s names %s %s, absent from the BPF object",
			    v->path, metric, field, map);
}

static int check_prog(const struct validator *v, struct bpf_object *obj, const char *who,
		      const char *prog)
{
	if (bpf_object__find_program_by_name(obj, prog))
		return 0;
	return ktel_err_set(v->err, ENOENT,
			    "%s: refused: %s names program %s, absent from the BPF object", v->path,
			    who, prog);
}

/* Everything the descriptor names must exist in the object. */
static int check_object_names(const struct validator *v, const struct ktel_plugin *p,
			      struct bpf_object *obj)
{
	const struct ktel_plugin_desc *d = &p->desc;
	uint32_t i, j;
	size_t off, size;
	int rc = 0;

	for (i = 0; !rc && i < d->n_metrics; i++) {
		const struct ktel_metric_desc *m = &d->metrics[i];

		rc = check_map(v, obj, m->name, "map", m->map_name);
		rc = rc ?: check_map(v, obj, m->name, "lost_map", m->lost_map);
		for (j = 0; !rc && j < m->n_dims; j++)
			rc = check_map(v, obj, m->name, "label_map", m->dims[j].label_map);
		for (j = 0; !rc && j < m->n_programs; j++)
			rc = check_prog(v, obj, "metric", m->programs[j]);
	}
	for (i = 0; !rc && i < d->n_variants; i++)
		rc = check_prog(v, obj, "variant", d->variants[i].prog);
	for (i = 0; !rc && i < d->n_attr_progs; i++)
		rc = check_prog(v, obj, "attr_progs", d->attr_progs[i].prog);
	for (i = 0; !rc && i < d->n_params; i++) {
		if (ktel_bpf_rodata_var(obj, d->params[i].name, &off, &size) != 0)
			rc = ktel_err_set(
				v->err, ENOENT,
				"%s: refused: param %s is not a 1/2/4/8-byte .rodata variable of the BPF object",
				v->path, d->params[i].name);
	}
	return rc;
}

struct bpf_check {
	const struct validator *v;
	const struct ktel_plugin *p;
};

/* In the contained child: libbpf opens the object, every name is looked up. */
static int open_and_check_names(void *ctx, struct ktel_err *err)
{
	const struct bpf_check *c = ctx;
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = c->p->desc.name);
	struct validator v = *c->v;
	struct bpf_object *obj;
	char msg[128];
	int rc;

	v.err = err;
	ktel_libbpf_log__set(NULL, NULL, false); /* the daemon's log may be locked */
	ktel_libbpf_log__reset();
	obj = bpf_object__open_mem(c->p->desc.bpf_object, c->p->desc.bpf_object_size, &opts);
	if (!obj) {
		rc = ktel_libbpf_strerror(errno ? errno : EINVAL, msg, sizeof(msg));
		return ktel_err_set(err, rc,
				    "%s: refused: embedded BPF object does not open: %s%s%s",
				    v.path, msg, ktel_libbpf_log__last()[0] ? ": " : "",
				    ktel_libbpf_log__last());
	}
	rc = check_object_names(&v, c->p, obj);
	bpf_object__close(obj);
	return rc;
}

/*
 * The embedded object: its header, its .BTF (ktel_btf_validate_elf), then
 * libbpf's parse in a contained child (libbpf 1.1 trusts much of the ELF:
 * a crash there refuses the plugin instead of ending the daemon). The
 * daemon opens the object in process only after this answered.
 */
static int check_bpf(const struct validator *v, const struct ktel_plugin *p)
{
	struct bpf_check c = {.v = v, .p = p};
	struct ktel_err btf_err;
	char what[PATH_MAX + 64];
	int rc;

	rc = check_elf_header(v, &p->desc);
	if (rc)
		return rc;
	rc = ktel_btf_validate_elf(p->desc.bpf_object, p->desc.bpf_object_size, &btf_err);
	if (rc && rc != -ENOENT)
		return ktel_err_set(v->err, -rc,
				    "%s: refused: embedded BPF object has invalid "
				    "BTF: %s",
				    v->path, btf_err.msg);
	snprintf(what, sizeof(what), "%s: refused: libbpf's parse of the embedded BPF object",
		 v->path);
	return ktel_contain__run(what, open_and_check_names, &c, KTEL_CONTAIN_TIMEOUT_MS, v->err);
}

/* Copy and validate the descriptor the plugin exports at sym. */
static int validate(struct validator *v, const void *sym, struct ktel_plugin *p)
{
	const struct ktel_plugin_desc *raw = sym;
	size_t len;
	int rc;

	if (!in_plugin_aligned(v, raw, 8, 8) || v->view->sym_size < 8)
		return ktel_err_set(v->err, EINVAL, "%s: refused: %s is %s", v->path,
				    KTEL_PLUGIN_SYMBOL,
				    v->misaligned ? "misaligned" : "not in the plugin");
	if (raw->abi_major != KTEL_PLUGIN_ABI_MAJOR)
		return ktel_err_set(v->err, EPROTO,
				    "%s: refused: plugin ABI major %u, this daemon supports %u",
				    v->path, raw->abi_major, KTEL_PLUGIN_ABI_MAJOR);
	if (raw->struct_size < KTEL_PLUGIN_DESC_MIN_SIZE)
		return ktel_err_set(v->err, EINVAL,
				    "%s: refused: descriptor struct_size %u, ABI 1.0 needs at least %zu",
				    v->path, raw->struct_size, (size_t)KTEL_PLUGIN_DESC_MIN_SIZE);
	len = raw->struct_size < sizeof(p->desc) ? raw->struct_size : sizeof(p->desc);
	if (!in_plugin(v, raw, len))
		return ktel_err_set(v->err, EINVAL,
				    "%s: refused: descriptor extends outside the plugin", v->path);
	memcpy(&p->desc, raw, len);
	v->abi_minor = p->desc.abi_minor;
	/* ABI 1.3 and before had no attr_prog_flags: whatever lies there is
	 * not one. */
	if (v->abi_minor < 4)
		p->desc.attr_prog_flags = NULL;
	rc = check_str(v, "plugin name", p->desc.name, false, METRIC_NAME);
	rc = rc ?: check_str(v, "plugin version", p->desc.version, false, ANY);
	rc = rc ?: check_str(v, "plugin description", p->desc.description, true, ANY);
	if (rc)
		return rc;
	/* Until copied, never the plugin's own array: its stride may differ. */
	p->desc.metrics = NULL;
	rc = copy_metrics(v, p, raw->metrics);
	rc = rc ?: check_variants_params(v, &p->desc);
	return rc ?: check_bpf(v, p);
}

/* ---- open / free ----------------------------------------------------- */

/* Milliseconds since st's mtime (0 for a time in the future). */
static long long age_ms(const struct stat *st)
{
	struct timespec now;
	long long ms;

	clock_gettime(CLOCK_REALTIME, &now);
	ms = (long long)(now.tv_sec - st->st_mtim.tv_sec) * 1000 +
	     (now.tv_nsec - st->st_mtim.tv_nsec) / 1000000;
	return ms > 0 ? ms : 0;
}

/* Turn the refusal in err into "<path>: not yet quiet (...): <rule>". */
static int not_quiet(const char *path, long long age, struct ktel_err *err)
{
	char rule[KTEL_ERR_MSG_MAX];
	size_t len = strlen(path);
	const char *r;

	if (!err)
		return -EAGAIN;
	r = err->msg;
	if (strncmp(r, path, len) == 0 && strncmp(r + len, ": refused: ", 11) == 0)
		r += len + 11;
	snprintf(rule, sizeof(rule), "%s", r);
	return ktel_err_set(err, EAGAIN,
			    "%s: not yet quiet (modified %lld ms ago, retried "
			    "later): %s",
			    path, age, rule);
}

/*
 * Read the open file into a sealed private copy and validate it as an ELF
 * shared object of this architecture. A file that changed while it was read,
 * or that is shorter than its ELF headers say and was modified within
 * KTEL_PLUGIN_QUIET_MS, is -EAGAIN "not yet quiet": a writer may still be at
 * work (a slow copy in place), so a later scan tries again. A recent file
 * that already validates is complete and is taken at once.
 */
static int read_image(const char *path, int fd, const struct stat *st,
		      struct ktel_elf_image **ret_image, struct ktel_err *err)
{
	struct ktel_elf_image *img = NULL;
	long long age;
	int rc;

	rc = ktel_elf_image__read(path, fd, st, &img, err);
	rc = rc ?: ktel_elf_validate(img->data, img->size, path, err);
	if (rc == 0) {
		*ret_image = img;
		return 0;
	}
	ktel_elf_image__free(img);
	age = age_ms(st);
	if (rc != -ENODATA || age >= KTEL_PLUGIN_QUIET_MS)
		return rc;
	return not_quiet(path, age, err);
}

/* ---- copying the descriptor out of the plugin data ------------------- */

/* Take ownership of mem (freed with p); NULL when mem is NULL or on no memory. */
static void *own(struct ktel_plugin *p, void *mem)
{
	void **grown;

	if (!mem)
		return NULL;
	if (p->n_owned == p->cap_owned) {
		p->cap_owned = p->cap_owned ? p->cap_owned * 2 : 32;
		grown = realloc(p->owned, p->cap_owned * sizeof(*grown));
		if (!grown) {
			free(mem);
			return NULL;
		}
		p->owned = grown;
	}
	p->owned[p->n_owned++] = mem;
	return mem;
}

static void *copy_mem(struct ktel_plugin *p, const void *src, size_t size, bool *oom)
{
	void *m;

	if (!src)
		return NULL;
	m = own(p, malloc(size ? size : 1));
	if (!m) {
		*oom = true;
		return NULL;
	}
	return memcpy(m, src, size);
}

/* Validated strings are bounded (check_str): strlen is safe. */
static const char *copy_str(struct ktel_plugin *p, const char *s, bool *oom)
{
	return copy_mem(p, s, s ? strlen(s) + 1 : 0, oom);
}

static const char *const *copy_strs(struct ktel_plugin *p, const char *const *v, uint32_t n,
				    bool *oom)
{
	const char **c = copy_mem(p, v, (size_t)n * sizeof(*v), oom);

	for (uint32_t i = 0; c && i < n; i++)
		c[i] = copy_str(p, v[i], oom);
	return c;
}

static void copy_metric(struct ktel_plugin *p, struct ktel_metric_desc *m, bool *oom)
{
	struct ktel_dimension_desc *dims;

	m->name = copy_str(p, m->name, oom);
	m->atom_name = copy_str(p, m->atom_name, oom);
	m->map_name = copy_str(p, m->map_name, oom);
	m->unit = copy_str(p, m->unit, oom);
	m->description = copy_str(p, m->description, oom);
	m->event_type = copy_str(p, m->event_type, oom);
	m->lost_map = copy_str(p, m->lost_map, oom);
	m->programs = m->n_programs ? copy_strs(p, m->programs, m->n_programs, oom) : NULL;
	dims = m->n_dims ? copy_mem(p, m->dims, m->n_dims * sizeof(*dims), oom) : NULL;
	for (uint32_t i = 0; dims && i < m->n_dims; i++) {
		dims[i].name = copy_str(p, dims[i].name, oom);
		dims[i].key_member = copy_str(p, dims[i].key_member, oom);
		dims[i].label_enum = copy_str(p, dims[i].label_enum, oom);
		dims[i].label_map = copy_str(p, dims[i].label_map, oom);
	}
	m->dims = dims;
	m->dim_flags = m->dim_flags && m->n_dims
			       ? copy_mem(p, m->dim_flags, m->n_dims * sizeof(*m->dim_flags), oom)
			       : NULL;
	/* Bits of a newer minor are ignored: nothing here knows them. */
	for (uint32_t i = 0; m->dim_flags && i < m->n_dims; i++)
		((uint32_t *)m->dim_flags)[i] &= KTEL_DIM_FLAGS_ALL;
}

/*
 * Replace every pointer into the plugin data by a copy, so the data can be
 * freed: the daemon never runs plugin code, and from here on it never
 * reads plugin memory either.
 */
static int copy_descriptor(struct ktel_plugin *p, struct ktel_err *err)
{
	struct ktel_plugin_desc *d = &p->desc;
	struct ktel_prog_variant *variants;
	struct ktel_param_desc *params;
	struct ktel_attr_prog *attr_progs;
	bool oom = false;

	d->name = copy_str(p, d->name, &oom);
	d->version = copy_str(p, d->version, &oom);
	d->description = copy_str(p, d->description, &oom);
	d->bpf_object = copy_mem(p, d->bpf_object, d->bpf_object_size, &oom);
	for (uint32_t i = 0; i < d->n_metrics; i++) {
		copy_metric(p, &p->metrics[i], &oom);
		/* KTEL_DIM_ATTRIBUTION came with ABI 1.2: before, that bit
		 * was no request (the validator ignored it too). */
		for (uint32_t k = 0;
		     d->abi_minor < 2 && p->metrics[i].dim_flags && k < p->metrics[i].n_dims; k++)
			((uint32_t *)p->metrics[i].dim_flags)[k] &= ~(uint32_t)KTEL_DIM_ATTRIBUTION;
	}
	variants = d->n_variants ? copy_mem(p, d->variants, d->n_variants * sizeof(*variants), &oom)
				 : NULL;
	for (uint32_t i = 0; variants && i < d->n_variants; i++) {
		variants[i].group = copy_str(p, variants[i].group, &oom);
		variants[i].prog = copy_str(p, variants[i].prog, &oom);
	}
	d->variants = variants;
	params = d->n_params ? copy_mem(p, d->params, d->n_params * sizeof(*params), &oom) : NULL;
	for (uint32_t i = 0; params && i < d->n_params; i++) {
		params[i].name = copy_str(p, params[i].name, &oom);
		params[i].description = copy_str(p, params[i].description, &oom);
	}
	d->params = params;
	attr_progs = d->n_attr_progs ? copy_mem(p, d->attr_progs,
						d->n_attr_progs * sizeof(*attr_progs), &oom)
				     : NULL;
	for (uint32_t i = 0; attr_progs && i < d->n_attr_progs; i++) {
		attr_progs[i].prog = copy_str(p, attr_progs[i].prog, &oom);
		attr_progs[i].metric = copy_str(p, attr_progs[i].metric, &oom);
	}
	d->attr_progs = attr_progs;
	d->attr_prog_flags = d->attr_prog_flags && d->n_attr_progs
				     ? copy_mem(p, d->attr_prog_flags,
						d->n_attr_progs * sizeof(*d->attr_prog_flags), &oom)
				     : NULL;
	/* Bits of a newer minor are ignored: nothing here knows them. */
	for (uint32_t i = 0; d->attr_prog_flags && i < d->n_attr_progs; i++)
		((uint32_t *)d->attr_prog_flags)[i] &= KTEL_ATTR_PROG_FLAGS_ALL;
	if (oom)
		return ktel_err_set(err, ENOMEM, "%s: out of memory", p->path);
	return 0;
}

/*
 * Read the descriptor from the sealed copy without running anything of the
 * plugin (no dlopen, so no constructor): lay its data out and relocate it
 * (ktel_elf_view), find the descriptor in .dynsym, validate it there and
 * copy it out.
 */
static int load_descriptor(struct ktel_plugin *p, const struct ktel_elf_image *img,
			   struct ktel_err *err)
{
	struct validator v = {.path = p->path, .err = err};
	struct ktel_elf_view *view = NULL;
	int rc;

	rc = ktel_elf_view__new(img, KTEL_PLUGIN_SYMBOL, p->path, &view, err);
	if (rc)
		return rc;
	v.view = view;
	rc = validate(&v, view->sym, p);
	if (rc && v.bad_reloc)
		rc = ktel_err_set(err, ENOEXEC,
				  "%s: refused: the descriptor reaches data the "
				  "daemon cannot relocate without running the plugin: %s",
				  p->path, v.bad_reloc);
	rc = rc ?: copy_descriptor(p, err);
	ktel_elf_view__free(view);
	return rc;
}

int ktel_plugin__open_owner(const char *path, uid_t owner, struct ktel_plugin **ret_plugin,
			    struct ktel_err *err)
{
	struct ktel_elf_image *img = NULL;
	struct ktel_plugin *p;
	int fd = -1, rc;

	p = calloc(1, sizeof(*p));
	if (!p)
		return ktel_err_set(err, ENOMEM, "%s: out of memory", path);
	p->path = strdup(path);
	if (!p->path) {
		rc = ktel_err_set(err, ENOMEM, "%s: out of memory", path);
		goto fail;
	}
	rc = open_safe(path, owner, &fd, &p->st, &p->real_path, err);
	rc = rc ?: read_image(path, fd, &p->st, &img, err);
	/* From here on only the sealed copy is read or loaded, never the file. */
	rc = rc ?: load_descriptor(p, img, err);
	if (fd >= 0)
		close(fd);
	ktel_elf_image__free(img);
	if (rc)
		goto fail;
	*ret_plugin = p;
	return 0;
fail:
	ktel_plugin__free(p);
	return rc;
}

int ktel_plugin__open(const char *path, struct ktel_plugin **ret_plugin, struct ktel_err *err)
{
	return ktel_plugin__open_owner(path, 0, ret_plugin, err);
}

void ktel_plugin__free(struct ktel_plugin *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_owned; i++)
		free(p->owned[i]);
	free(p->owned);
	free(p->metrics);
	free(p->real_path);
	free(p->path);
	free(p);
}

/* ---- directory scan -------------------------------------------------- */

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_plugin_name(const char *name)
{
	size_t len = strlen(name);

	return len > 3 && name[0] != '.' && strcmp(name + len - 3, ".so") == 0;
}

int ktel_plugin_dir__names(const char *dir, char ***ret_names, size_t *ret_n, struct ktel_err *err)
{
	char **names = NULL, **grown;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;
	int rc = 0;

	d = opendir(dir);
	if (!d)
		return ktel_err_set(err, errno, "%s: cannot read plugin directory: %s", dir,
				    strerror(errno));
	while ((de = readdir(d))) {
		if (!is_plugin_name(de->d_name))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			grown = realloc(names, cap * sizeof(*names));
			if (!grown)
				goto oom;
			names = grown;
		}
		names[n] = strdup(de->d_name);
		if (!names[n])
			goto oom;
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_names);
	*ret_names = names;
	*ret_n = n;
	return 0;
oom:
	rc = ktel_err_set(err, ENOMEM, "%s: out of memory", dir);
	closedir(d);
	ktel_plugin_dir__names_free(names, n);
	return rc;
}

void ktel_plugin_dir__names_free(char **names, size_t n)
{
	for (size_t i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
}

/*
 * Where one of p's metric names is already provided: by an earlier plugin of
 * the list, or by one the caller holds (o->metric_owner). Returns that
 * plugin's path and the metric in *ret_metric, or NULL.
 */
static const char *duplicate_of(const struct ktel_plugin_list *list,
				const struct ktel_plugin_scan_opts *o, const struct ktel_plugin *p,
				const char **ret_metric)
{
	uint32_t i, j, k;
	const char *owner;

	for (k = 0; k < p->desc.n_metrics; k++) {
		*ret_metric = p->desc.metrics[k].name;
		for (i = 0; i < list->n; i++)
			for (j = 0; j < list->items[i]->desc.n_metrics; j++)
				if (strcmp(list->items[i]->desc.metrics[j].name, *ret_metric) == 0)
					return list->items[i]->path;
		owner = o->metric_owner ? o->metric_owner(*ret_metric, o->ctx) : NULL;
		if (owner)
			return owner;
	}
	return NULL;
}

static void refuse(struct ktel_plugin_list *list, const struct ktel_plugin_scan_opts *o,
		   const char *path, const struct ktel_err *e)
{
	list->n_refused++;
	if (o->on_refusal)
		o->on_refusal(path, e, o->ctx);
}

static void scan_one(struct ktel_plugin_list *list, const struct ktel_plugin_scan_opts *o,
		     const char *path)
{
	struct ktel_plugin *p = NULL;
	struct ktel_err e = {0};
	const char *metric = NULL, *dup;

	int rc = ktel_plugin__open_owner(path, o->owner, &p, &e);

	if (rc == -EAGAIN) {
		/* Not refused: a writer may still be at work; the caller rescans. */
		list->n_not_quiet++;
		return;
	}
	if (rc) {
		refuse(list, o, path, &e);
		return;
	}
	dup = duplicate_of(list, o, p, &metric);
	if (dup) {
		ktel_err_set(&e, EEXIST,
			     "%s: refused: duplicate metric name %s (already provided by %s)", path,
			     metric, dup);
		ktel_plugin__free(p);
		refuse(list, o, path, &e);
		return;
	}
	list->items[list->n++] = p;
}

int ktel_plugin_dir__scan(const char *dir, const struct ktel_plugin_scan_opts *opts,
			  struct ktel_plugin_list **ret_list, struct ktel_err *err)
{
	struct ktel_plugin_scan_opts o = {0};
	struct ktel_plugin_list *list;
	struct ktel_err e = {0};
	char **names = NULL, *path;
	size_t n = 0, i, max;
	int rc;

	if (opts)
		o = *opts;
	max = o.max_plugins ? o.max_plugins : KTEL_PLUGIN_SCAN_MAX;
	rc = ktel_plugin_dir__names(dir, &names, &n, err);
	if (rc)
		return rc;
	list = calloc(1, sizeof(*list));
	if (list)
		list->items = calloc(n < max ? (n ? n : 1) : max, sizeof(*list->items));
	if (!list || !list->items) {
		rc = ktel_err_set(err, ENOMEM, "%s: out of memory", dir);
		goto out;
	}
	for (i = 0; i < n; i++) {
		if (asprintf(&path, "%s/%s", dir, names[i]) < 0) {
			rc = ktel_err_set(err, ENOMEM, "%s: out of memory", dir);
			goto out;
		}
		if (o.skip && o.skip(path, o.ctx)) {
			free(path);
			continue;
		}
		/* The limit counts plugins taken, not files: junk sorting
		 * first cannot crowd out a valid plugin. */
		if (list->n >= max) {
			ktel_err_set(&e, E2BIG, "%s: refused: more than %zu plugins in %s", path,
				     max, dir);
			list->n_dropped++;
			refuse(list, &o, path, &e);
		} else {
			scan_one(list, &o, path);
		}
		free(path);
	}
	*ret_list = list;
	list = NULL;
out:
	ktel_plugin_list__free(list);
	ktel_plugin_dir__names_free(names, n);
	return rc;
}

void ktel_plugin_list__free(struct ktel_plugin_list *list)
{
	size_t i;

	if (!list)
		return;
	for (i = 0; list->items && i < list->n; i++)
		ktel_plugin__free(list->items[i]);
	free(list->items);
	free(list);
}
