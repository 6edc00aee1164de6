// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "bpf_lifecycle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#ifndef BPF_FS_MAGIC
#define BPF_FS_MAGIC 0xcafe4a11
#endif

/* ---- libbpf messages ------------------------------------------------- */

static struct {
	ktel_libbpf_log_fn fn;
	void *ctx;
	bool debug;
	bool installed;
} log_state;

/*
 * Per thread: the first warning since ktel_libbpf_log__reset(), which only
 * explains a failure in its error message (a load on one thread must not
 * explain another's). Which program the kernel refused is never read from
 * it: see load_object().
 */
static __thread char last_warning[KTEL_LIFECYCLE_MSG_MAX];

/* Is the line [s, e) one of the verifier's statistics, or blank? */
static bool verifier_noise(const char *s, const char *e)
{
	static const char *const noise[] = {"processed ", "verification time ", "stack depth ",
					    "insns processed "};

	while (s < e && (*s == ' ' || *s == '\t'))
		s++;
	if (s == e)
		return true;
	for (size_t i = 0; i < KTEL_ARRAY_SIZE(noise); i++)
		if ((size_t)(e - s) >= strlen(noise[i]) &&
		    strncmp(s, noise[i], strlen(noise[i])) == 0)
			return true;
	return false;
}

size_t ktel_verifier_tail(const char *log, char *out, size_t len)
{
	const char *lines[3][2], *end = log + strlen(log), *e, *s;
	char buf[3 * (KTEL_VERIFIER_TAIL_MAX + 3) + 1];
	size_t n = 0, used = 0;

	if (!len)
		return 0;
	/* Walk back from the end: the complaint is the last thing said. */
	for (e = end; e > log && n < 3; e = s) {
		for (s = e; s > log && s[-1] != '\n'; s--)
			;
		if (!verifier_noise(s, e)) {
			lines[n][0] = s;
			lines[n][1] = e;
			n++;
		}
		if (s > log)
			s--; /* the newline before this line */
	}
	buf[0] = '\0';
	while (n-- > 0) {
		size_t l = (size_t)(lines[n][1] - lines[n][0]);

		if (l > KTEL_VERIFIER_TAIL_MAX) {
			l = KTEL_VERIFIER_TAIL_MAX;
			while (l && ((unsigned char)lines[n][0][l] & 0xc0) == 0x80)
				l--; /* never end inside a UTF-8 character */
		}
		/* Fits: 3 lines of at most the maximum, 3 bytes before each. */
		used += (size_t)snprintf(buf + used, sizeof(buf) - used, "%s%.*s",
					 used ? " | " : "", (int)l, lines[n][0]);
	}
	s = buf;
	if (used > KTEL_VERIFIER_TAIL_MAX) {
		s = buf + used - (KTEL_VERIFIER_TAIL_MAX - 3);
		while (((unsigned char)*s & 0xc0) == 0x80)
			s++; /* never start inside a UTF-8 character */
		snprintf(out, len, "...%s", s);
		return strlen(out);
	}
	snprintf(out, len, "%s", s);
	return strlen(out);
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	static __thread char msg[16384];
	const char *line = msg;
	size_t len;
	int n;

	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (n < 0)
		return 0;
	len = strlen(msg);
	while (len && msg[len - 1] == '\n')
		msg[--len] = '\0';
	if (level == LIBBPF_WARN && !last_warning[0] && len) {
		if (strncmp(line, "libbpf: ", 8) == 0)
			line += 8;
		snprintf(last_warning, sizeof(last_warning), "%.*s", (int)strcspn(line, "\n"),
			 line);
	}
	if (log_state.fn && (level != LIBBPF_DEBUG || log_state.debug))
		log_state.fn(level, msg, log_state.ctx);
	return 0;
}

static void install_print(void)
{
	if (log_state.installed)
		return;
	libbpf_set_print(libbpf_print);
	log_state.installed = true;
}

void ktel_libbpf_log__set(ktel_libbpf_log_fn fn, void *ctx, bool debug)
{
	log_state.fn = fn;
	log_state.ctx = ctx;
	log_state.debug = debug;
	install_print();
}

void ktel_libbpf_log__reset(void)
{
	install_print();
	last_warning[0] = '\0';
}

const char *ktel_libbpf_log__last(void)
{
	return last_warning;
}

int ktel_libbpf_strerror(int err, char *buf, size_t len)
{
	if (err < 0)
		err = -err;
	if (libbpf_strerror(err, buf, len) != 0)
		snprintf(buf, len, "%s", strerror(err));
	return err >= __LIBBPF_ERRNO__START ? EINVAL : err;
}

/* ": <libbpf's warning>" when there is one, for error messages. */
static const char *libbpf_why(char *buf, size_t len)
{
	if (!last_warning[0])
		return "";
	snprintf(buf, len, " (%s)", last_warning);
	return buf;
}

/* ---- bpffs ----------------------------------------------------------- */

static bool on_bpffs(const char *path)
{
	struct statfs sfs;

	return statfs(path, &sfs) == 0 && (unsigned long)sfs.f_type == BPF_FS_MAGIC;
}

/* Longest existing prefix of path (a directory), written to buf. */
static void existing_ancestor(const char *path, char *buf, size_t len)
{
	struct stat st;
	char *slash;

	snprintf(buf, len, "%s", path);
	while (stat(buf, &st) != 0) {
		slash = strrchr(buf, '/');
		if (!slash || slash == buf) {
			snprintf(buf, len, "/");
			return;
		}
		*slash = '\0';
	}
}

static bool under_bpffs_mount(const char *path)
{
	size_t len = strlen(KTEL_BPFFS_MOUNT);

	return strncmp(path, KTEL_BPFFS_MOUNT, len) == 0 && (path[len] == '/' || path[len] == '\0');
}

static int mount_bpffs(const char *pin_root, struct ktel_err *err)
{
	if (!under_bpffs_mount(pin_root))
		return ktel_err_set(err, ENOTSUP, "pin root %s is not on a bpf filesystem",
				    pin_root);
	if (geteuid() != 0)
		return ktel_err_set(err, EPERM,
				    "pin root %s: bpffs is not mounted at %s and only root can mount it "
				    "(mount -t bpf bpf %s)",
				    pin_root, KTEL_BPFFS_MOUNT, KTEL_BPFFS_MOUNT);
	/*
	 * Not the kernel's default 1777: only root creates entries at the top.
	 * Not systemd's 0700 either: the pin group must be able to reach the
	 * pin root, whose own mode (0750) and the pins' (0640) restrict access.
	 */
	if (mount("bpf", KTEL_BPFFS_MOUNT, "bpf", 0, "mode=0755") != 0)
		return ktel_err_set(err, errno, "pin root %s: cannot mount bpffs at %s: %s",
				    pin_root, KTEL_BPFFS_MOUNT, strerror(errno));
	return 0;
}

/* mkdir -p below the existing ancestor; new directories get mode 0750. */
static int make_dirs(const char *pin_root, size_t from, struct ktel_err *err)
{
	char path[PATH_MAX];
	size_t i, len = strlen(pin_root);

	if (len >= sizeof(path))
		return ktel_err_set(err, ENAMETOOLONG, "pin root %s: path too long", pin_root);
	for (i = from + 1; i <= len; i++) {
		if (pin_root[i] != '/' && pin_root[i] != '\0')
			continue;
		memcpy(path, pin_root, i);
		path[i] = '\0';
		if (mkdir(path, KTEL_PIN_DIR_MODE) != 0 && errno != EEXIST)
			return ktel_err_set(err, errno, "pin root %s: cannot create %s: %s",
					    pin_root, path, strerror(errno));
	}
	return 0;
}

/* Is dir the root of its mount (its parent is on another device)? */
static bool is_mount_root(const char *dir)
{
	char parent[PATH_MAX];
	struct stat st, pst;

	if (snprintf(parent, sizeof(parent), "%s/..", dir) >= (int)sizeof(parent) ||
	    stat(dir, &st) != 0 || stat(parent, &pst) != 0)
		return false;
	return st.st_dev != pst.st_dev || st.st_ino == pst.st_ino;
}

int ktel_bpffs_ensure(const char *pin_root, gid_t gid, struct ktel_err *err)
{
	char ancestor[PATH_MAX];
	struct stat st;
	int rc;

	if (!pin_root || pin_root[0] != '/')
		return ktel_err_set(err, EINVAL, "pin root %s: must be an absolute path",
				    pin_root ? pin_root : "(null)");
	existing_ancestor(pin_root, ancestor, sizeof(ancestor));
	if (!on_bpffs(ancestor)) {
		rc = mount_bpffs(pin_root, err);
		if (rc)
			return rc;
		existing_ancestor(pin_root, ancestor, sizeof(ancestor));
	}
	rc = make_dirs(pin_root, strlen(ancestor), err);
	if (rc)
		return rc;
	if (stat(pin_root, &st) != 0 || !S_ISDIR(st.st_mode))
		return ktel_err_set(err, ENOTDIR, "pin root %s: not a directory", pin_root);
	if (!on_bpffs(pin_root))
		return ktel_err_set(err, ENOTSUP, "pin root %s is not on a bpf filesystem",
				    pin_root);
	/* The mount's own root is every BPF user's: its mode and group are
	 * not ours to set. */
	if (is_mount_root(pin_root))
		return ktel_err_set(err, EINVAL,
				    "pin root %s is the root of a bpf filesystem, "
				    "shared with every other BPF user: use a directory below it "
				    "(such as %s/kernelstats)",
				    pin_root, strcmp(pin_root, "/") ? pin_root : "");
	/* An existing pin root is ours too: mkdir's mode is subject to umask. */
	if (chmod(pin_root, KTEL_PIN_DIR_MODE) != 0)
		return ktel_err_set(err, errno, "pin root %s: chmod 0750: %s", pin_root,
				    strerror(errno));
	if (gid != (gid_t)-1 && chown(pin_root, (uid_t)-1, gid) != 0)
		return ktel_err_set(err, errno, "pin root %s: chown to group %u: %s", pin_root,
				    (unsigned)gid, strerror(errno));
	return 0;
}

/* ---- .rodata params -------------------------------------------------- */

int ktel_bpf_rodata_var(const struct bpf_object *obj, const char *name, size_t *ret_offset,
			size_t *ret_size)
{
	const struct btf_var_secinfo *vsi;
	const struct btf_type *sec, *var;
	struct btf *btf = bpf_object__btf(obj);
	const char *vname;
	int id, i;

	if (!btf)
		return -ENOENT;
	id = btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC);
	sec = id < 0 ? NULL : btf__type_by_id(btf, id);
	if (!sec)
		return -ENOENT;
	vsi = btf_var_secinfos(sec);
	for (i = 0; i < btf_vlen(sec); i++) {
		var = btf__type_by_id(btf, vsi[i].type);
		if (!var || !btf_is_var(var))
			continue;
		vname = btf__name_by_offset(btf, var->name_off);
		if (!vname || strcmp(vname, name) != 0)
			continue;
		if (vsi[i].size != 1 && vsi[i].size != 2 && vsi[i].size != 4 && vsi[i].size != 8)
			return -ENOENT;
		*ret_offset = vsi[i].offset;
		*ret_size = vsi[i].size;
		return 0;
	}
	return -ENOENT;
}

static struct bpf_map *rodata_map(struct bpf_object *obj)
{
	struct bpf_map *map;
	const char *name;
	size_t len;

	/* libbpf names internal maps "<obj prefix>.rodata". */
	bpf_object__for_each_map(map, obj) {
		name = bpf_map__name(map);
		len = strlen(name);
		if (len >= 7 && strcmp(name + len - 7, ".rodata") == 0)
			return map;
	}
	return NULL;
}

static bool fits(int64_t value, size_t size)
{
	if (size >= 8)
		return true;
	return value >= -((int64_t)1 << (size * 8 - 1)) && value < ((int64_t)1 << (size * 8));
}

static int set_params(struct ktel_bpf_plugin *p, const int64_t *values, struct ktel_err *err)
{
	const struct ktel_plugin_desc *d = &p->plugin->desc;
	struct bpf_map *map;
	const void *init;
	unsigned char *data;
	size_t size, off, vsize;
	uint32_t i;
	int64_t value;
	int rc = 0;

	if (!d->n_params)
		return 0;
	map = rodata_map(p->obj);
	init = map ? bpf_map__initial_value(map, &size) : NULL;
	if (!init)
		return ktel_err_set(err, ENOENT, "plugin %s: params declared but no .rodata",
				    d->name);
	data = malloc(size);
	if (!data)
		return ktel_err_set(err, ENOMEM, "plugin %s: out of memory", d->name);
	memcpy(data, init, size);
	for (i = 0; i < d->n_params; i++) {
		value = values ? values[i] : d->params[i].default_value;
		if (ktel_bpf_rodata_var(p->obj, d->params[i].name, &off, &vsize) != 0 ||
		    off + vsize > size) {
			rc = ktel_err_set(err, ENOENT, "plugin %s: param %s not in .rodata",
					  d->name, d->params[i].name);
			goto out;
		}
		if (!fits(value, vsize)) {
			rc = ktel_err_set(err, ERANGE,
					  "plugin %s: param %s: %lld does not fit in %zu bytes",
					  d->name, d->params[i].name, (long long)value, vsize);
			goto out;
		}
		/* BPF runs in host byte order: the low bytes of value, as the host stores them. */
		if (vsize == 8) {
			memcpy(data + off, &value, 8);
		} else if (vsize == 4) {
			uint32_t v32 = (uint32_t)value;
			memcpy(data + off, &v32, 4);
		} else if (vsize == 2) {
			uint16_t v16 = (uint16_t)value;
			memcpy(data + off, &v16, 2);
		} else {
			data[off] = (unsigned char)value;
		}
	}
	rc = bpf_map__set_initial_value(map, data, size);
	if (rc)
		rc = ktel_err_set(err, rc, "plugin %s: cannot set .rodata: %s", d->name,
				  strerror(-rc));
out:
	free(data);
	return rc;
}

/* ---- attribution ----------------------------------------------------- */

/* Write the integer global name of .rodata image data (size bytes). */
static int put_rodata(struct ktel_bpf_plugin *p, unsigned char *data, size_t size, const char *name,
		      uint64_t value)
{
	size_t off, vsize;

	if (ktel_bpf_rodata_var(p->obj, name, &off, &vsize) != 0 || off + vsize > size)
		return -ENOENT;
	if (vsize == 8) {
		memcpy(data + off, &value, 8);
	} else if (vsize == 4 && value <= UINT32_MAX) {
		uint32_t v32 = (uint32_t)value;
		memcpy(data + off, &v32, 4);
	} else {
		return -ERANGE;
	}
	return 0;
}

/* Does the running kernel map BPF arrays into user space (5.5 and later)? */
static bool mmapable_arrays(void)
{
	struct utsname u;
	unsigned int major = 0, minor = 0;

	if (uname(&u) || sscanf(u.release, "%u.%u", &major, &minor) != 2)
		return false;
	return major > 5 || (major == 5 && minor >= 5);
}

/* Is map, raised by a->limit entries, within budget (0: no bound)? */
static int attr_budget(const char *plugin, const struct ktel_bpf_attr *a, const struct bpf_map *map,
		       uint64_t budget, uint64_t *ret_entries, struct ktel_err *err)
{
	uint64_t entries = (uint64_t)bpf_map__max_entries(map) + a->limit;
	uint64_t bytes = entries * ((uint64_t)bpf_map__key_size(map) + bpf_map__value_size(map) +
				    KTEL_BPF_HASH_ELEM_OVERHEAD);

	if (budget && bytes > budget)
		return ktel_err_set(err, ENOSPC,
				    "plugin %s: metric %s: attribution max_keys %llu makes map "
				    "%s %llu entries, %llu bytes, above "
				    "attribution_memlock_budget (%llu bytes)",
				    plugin, a->metric, (unsigned long long)a->limit, a->map_name,
				    (unsigned long long)entries, (unsigned long long)bytes,
				    (unsigned long long)budget);
	*ret_entries = entries;
	return 0;
}

int ktel_bpf_attr_check_budget(const struct ktel_plugin *plugin, const struct ktel_bpf_attr *attr,
			       size_t n_attr, uint64_t budget, struct ktel_err *err)
{
	const struct ktel_plugin_desc *d = &plugin->desc;
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = d->name);
	struct bpf_object *obj;
	struct bpf_map *map;
	uint64_t entries;
	int rc = 0;

	obj = bpf_object__open_mem(d->bpf_object, d->bpf_object_size, &opts);
	if (!obj)
		return ktel_err_set(err, errno ? errno : EINVAL,
				    "plugin %s: cannot open BPF object", d->name);
	for (size_t i = 0; i < n_attr && !rc; i++) {
		if (attr[i].by == KTEL_ATTR_BY_NONE)
			continue;
		map = bpf_object__find_map_by_name(obj, attr[i].map_name);
		if (!map)
			rc = ktel_err_set(err, ENOENT, "plugin %s: metric %s: no map %s", d->name,
					  attr[i].metric, attr[i].map_name);
		else
			rc = attr_budget(d->name, &attr[i], map, budget, &entries, err);
	}
	bpf_object__close(obj);
	return rc;
}

/*
 * Does metric a read the cgroup of the bio instead of running the programs
 * its descriptor flags KTEL_ATTR_PROG_BLKCG? Only when it is attributed by
 * cgroup, asks for the charged cgroup (a->blkcg, which the daemon sets
 * where the io controller is on the v2 hierarchy), and has such programs.
 * Each metric on its own: of two metrics of one plugin, one may read the
 * bio while the other keeps the submit programs, which then load.
 */
static bool reads_blkcg(const struct ktel_plugin_desc *d, const struct ktel_bpf_attr *a)
{
	if (!a->blkcg || a->by != KTEL_ATTR_BY_CGROUP || !a->metric || !d->attr_prog_flags)
		return false;
	for (uint32_t i = 0; i < d->n_attr_progs; i++)
		if ((d->attr_prog_flags[i] & KTEL_ATTR_PROG_BLKCG) &&
		    strcmp(d->attr_progs[i].metric, a->metric) == 0)
			return true;
	return false;
}

/*
 * The metrics' attribution settings (struct ktel_bpf_attr): the three
 * globals of each (and <map>_attr_blkcg where the metric reads the bio's
 * cgroup), then its map's size, checked against the budget, and
 * the admitted-key count made mappable, so the daemon can give deleted
 * keys' slots back with an atomic of its own (metric_pull.h).
 */
static int set_attr(struct ktel_bpf_plugin *p, const struct ktel_bpf_opts *opts,
		    struct ktel_err *err)
{
	const char *plugin = p->plugin->desc.name;
	static const char *const suffix[] = {"_attr_by", "_attr_depth", "_attr_limit",
					     "_attr_blkcg"};
	struct bpf_map *rodata, *map, *used;
	unsigned char *data = NULL;
	const void *init;
	char name[256];
	size_t size, n_set;
	uint64_t entries = 0, values[4];
	int rc = 0;

	for (size_t i = 0; i < opts->n_attr; i++) {
		const struct ktel_bpf_attr *a = &opts->attr[i];

		if (a->by == KTEL_ATTR_BY_NONE)
			continue;
		map = bpf_object__find_map_by_name(p->obj, a->map_name);
		rodata = rodata_map(p->obj);
		init = rodata ? bpf_map__initial_value(rodata, &size) : NULL;
		if (!map || !init) {
			rc = ktel_err_set(err, ENOENT,
					  "plugin %s: metric %s: attribution: no map %s or "
					  "no .rodata (KTEL_ATTR_SETTINGS)",
					  plugin, a->metric, a->map_name);
			goto out;
		}
		data = malloc(size);
		if (!data) {
			rc = ktel_err_set(err, ENOMEM, "plugin %s: out of memory", plugin);
			goto out;
		}
		memcpy(data, init, size);
		values[0] = a->by;
		values[1] = a->depth;
		values[2] = a->limit;
		values[3] = 1;
		/* The switch exists only in objects built since it came: it is
		 * written only where the descriptor says the object reads it. */
		n_set = reads_blkcg(&p->plugin->desc, a) ? 4 : 3;
		for (size_t k = 0; k < n_set; k++) {
			snprintf(name, sizeof(name), "%s%s", a->map_name, suffix[k]);
			rc = put_rodata(p, data, size, name, values[k]);
			if (rc) {
				rc = ktel_err_set(err, -rc,
						  "plugin %s: metric %s: attribution: %s %s "
						  "(declare KTEL_ATTR_SETTINGS(%s))",
						  plugin, a->metric, name,
						  rc == -ERANGE ? "cannot hold the value"
								: "is not in .rodata",
						  a->map_name);
				goto out;
			}
		}
		rc = bpf_map__set_initial_value(rodata, data, size);
		free(data);
		data = NULL;
		if (!rc && attr_budget(plugin, a, map, opts->attr_memlock_budget, &entries, err)) {
			rc = -ENOSPC;
			goto out;
		}
		snprintf(name, sizeof(name), "%s_attr_used", a->map_name);
		used = bpf_object__find_map_by_name(p->obj, name);
		/* Not pinned, so always made here: the flag cannot clash with
		 * a pin's. Kernels before 5.5 refuse the flag: there the count
		 * is not given back (the kernel admits no new ids once
		 * max_keys were, their events counted under the overflow). */
		if (!rc && used && mmapable_arrays())
			rc = bpf_map__set_map_flags(used,
						    bpf_map__map_flags(used) | BPF_F_MMAPABLE);
		rc = rc
			     ?: (entries > UINT32_MAX
					 ? -ERANGE
					 : bpf_map__set_max_entries(map, (uint32_t)entries));
		if (rc) {
			rc = ktel_err_set(err, -rc,
					  "plugin %s: metric %s: attribution: cannot size map %s: %s",
					  plugin, a->metric, a->map_name, strerror(-rc));
			goto out;
		}
	}
out:
	free(data);
	return rc;
}

/*
 * Start each attributed map's count of admitted keys at the number of
 * entries its map holds: 0 for a new map; for a reused pin, every key it
 * kept (the count itself is not pinned). That counts the keys without
 * attribution too, so after a restart the kernel admits fewer new keys than
 * the limit, never more than the map has room for.
 */
static int init_attr_used(struct ktel_bpf_plugin *p, const struct ktel_bpf_opts *opts,
			  struct ktel_err *err)
{
	char name[256];
	unsigned char key[512], next[512];
	struct bpf_map *map, *used;
	uint64_t n;
	uint32_t zero = 0;
	int fd, rc;

	for (size_t i = 0; i < opts->n_attr; i++) {
		const struct ktel_bpf_attr *a = &opts->attr[i];

		if (a->by == KTEL_ATTR_BY_NONE)
			continue;
		snprintf(name, sizeof(name), "%s_attr_used", a->map_name);
		map = bpf_object__find_map_by_name(p->obj, a->map_name);
		used = bpf_object__find_map_by_name(p->obj, name);
		if (!map || !used)
			return ktel_err_set(err, ENOENT, "plugin %s: metric %s: no map %s",
					    p->plugin->desc.name, a->metric,
					    map ? name : a->map_name);
		if (bpf_map__key_size(map) > sizeof(key))
			return ktel_err_set(err, EINVAL, "plugin %s: metric %s: key of %u bytes",
					    p->plugin->desc.name, a->metric,
					    bpf_map__key_size(map));
		fd = bpf_map__fd(map);
		n = 0;
		for (rc = bpf_map_get_next_key(fd, NULL, next); !rc && n <= UINT32_MAX;
		     rc = bpf_map_get_next_key(fd, key, next)) {
			memcpy(key, next, bpf_map__key_size(map));
			n++;
		}
		rc = bpf_map_update_elem(bpf_map__fd(used), &zero, &n, BPF_ANY);
		if (rc)
			return ktel_err_set(err, errno, "plugin %s: metric %s: cannot set %s: %s",
					    p->plugin->desc.name, a->metric, name, strerror(errno));
	}
	return 0;
}

/* ---- programs -------------------------------------------------------- */

/* A program the kernel would not load or attach, and why. */
struct refusal {
	char prog[128];
	char reason[KTEL_TARGET_REASON_MAX];       /* becomes its skip_reason */
	char verifier[KTEL_VERIFIER_TAIL_MAX + 8]; /* its verifier log's tail, or "" */
};

/* The programs refused in earlier attempts: never selected again. */
struct exclusions {
	struct refusal list[KTEL_PLUGIN_MAX_PROGRAMS];
	size_t n;
};

static const char *excluded_reason(const struct exclusions *ex, const char *name)
{
	for (size_t i = 0; ex && i < ex->n; i++)
		if (strcmp(ex->list[i].prog, name) == 0)
			return ex->list[i].reason;
	return NULL;
}

/* The selected program among group's variants, or NULL. */
static struct ktel_bpf_prog *group_winner(struct ktel_bpf_plugin *p, const char *group)
{
	const struct ktel_plugin_desc *d = &p->plugin->desc;
	struct ktel_bpf_prog *bp;

	for (uint32_t v = 0; v < d->n_variants; v++) {
		if (!d->variants[v].group || strcmp(d->variants[v].group, group) != 0 ||
		    !d->variants[v].prog)
			continue;
		bp = ktel_bpf_plugin__prog(p, d->variants[v].prog);
		if (bp && bp->selected)
			return bp;
	}
	return NULL;
}

static bool group_listed(const struct ktel_bpf_plugin *p, const char *group)
{
	for (size_t i = 0; i < p->n_groups; i++)
		if (strcmp(p->groups[i].name, group) == 0)
			return true;
	return false;
}

/* Is every program of group unneeded by this load (desc.attr_progs)? */
static bool group_unneeded(struct ktel_bpf_plugin *p, const char *group)
{
	const struct ktel_plugin_desc *d = &p->plugin->desc;
	struct ktel_bpf_prog *bp;

	for (uint32_t v = 0; v < d->n_variants; v++) {
		if (!d->variants[v].group || strcmp(d->variants[v].group, group) != 0 ||
		    !d->variants[v].prog)
			continue;
		bp = ktel_bpf_plugin__prog(p, d->variants[v].prog);
		if (bp && !bp->unneeded)
			return false;
	}
	return true;
}

/*
 * Why prog is not needed by this load: it is listed in desc.attr_progs and
 * none of the metrics it is listed for is attributed (opts->attr), or each
 * that is reads the bio's cgroup instead where the entry is flagged
 * KTEL_ATTR_PROG_BLKCG (reads_blkcg). NULL when it is needed. The reason is
 * written to buf.
 */
static const char *unneeded_reason(const struct ktel_bpf_plugin *p,
				   const struct ktel_bpf_opts *opts, const char *prog, char *buf,
				   size_t len)
{
	const struct ktel_plugin_desc *d = &p->plugin->desc;
	const char *metric = NULL, *blkcg = NULL;
	const struct ktel_bpf_attr *a;

	for (uint32_t i = 0; i < d->n_attr_progs; i++) {
		if (strcmp(d->attr_progs[i].prog, prog) != 0)
			continue;
		metric = d->attr_progs[i].metric;
		for (size_t k = 0; opts && k < opts->n_attr; k++) {
			a = &opts->attr[k];
			if (a->by == KTEL_ATTR_BY_NONE || !a->metric ||
			    strcmp(a->metric, metric) != 0)
				continue;
			if (!d->attr_prog_flags ||
			    !(d->attr_prog_flags[i] & KTEL_ATTR_PROG_BLKCG) || !reads_blkcg(d, a))
				return NULL;
			blkcg = metric;
		}
	}
	if (!metric)
		return NULL;
	if (blkcg)
		snprintf(buf, len,
			 "not needed: metric %s reads the bio's cgroup "
			 "(the charged cgroup, io controller on cgroup v2)",
			 blkcg);
	else
		snprintf(buf, len, "not needed: only while metric %s is attributed", metric);
	return buf;
}

/* One entry per variant group of the descriptor, in table order; a group
 * whose programs are all unneeded by this load has none. */
static int init_groups(struct ktel_bpf_plugin *p, struct ktel_err *err)
{
	const struct ktel_plugin_desc *d = &p->plugin->desc;

	p->groups = calloc(d->n_variants ? d->n_variants : 1, sizeof(*p->groups));
	if (!p->groups)
		return ktel_err_set(err, ENOMEM, "plugin %s: out of memory", d->name);
	for (uint32_t v = 0; v < d->n_variants; v++) {
		const char *group = d->variants[v].group;

		if (!group || group_listed(p, group) || group_unneeded(p, group))
			continue;
		p->groups[p->n_groups].name = group;
		p->groups[p->n_groups].winner = group_winner(p, group);
		p->n_groups++;
	}
	return 0;
}

static int init_progs(struct ktel_bpf_plugin *p, const struct ktel_bpf_opts *opts,
		      const struct exclusions *ex, struct ktel_err *err)
{
	const struct ktel_targets *t = opts->targets;
	char(*why)[KTEL_TARGET_REASON_MAX] = NULL;
	const struct ktel_plugin_desc *d = &p->plugin->desc;
	struct ktel_prog_choice *choices = NULL;
	struct bpf_program *prog;
	size_t n = 0, i;
	int rc = 0;

	bpf_object__for_each_program(prog, p->obj)
		n++;
	p->progs = calloc(n ? n : 1, sizeof(*p->progs));
	choices = calloc(n ? n : 1, sizeof(*choices));
	why = calloc(n ? n : 1, sizeof(*why));
	if (!p->progs || !choices || !why) {
		rc = ktel_err_set(err, ENOMEM, "plugin %s: out of memory", d->name);
		goto out;
	}
	bpf_object__for_each_program(prog, p->obj) {
		p->progs[p->n_progs].prog = prog;
		/* Own copies: an unsupported plugin closes its object but keeps
		 * the list (status and inspect show why each was skipped). */
		p->progs[p->n_progs].name = strdup(bpf_program__name(prog));
		p->progs[p->n_progs].section = strdup(bpf_program__section_name(prog));
		if (!p->progs[p->n_progs].name || !p->progs[p->n_progs].section) {
			p->n_progs++;
			rc = ktel_err_set(err, ENOMEM, "plugin %s: out of memory", d->name);
			goto out;
		}
		choices[p->n_progs].name = p->progs[p->n_progs].name;
		choices[p->n_progs].section = p->progs[p->n_progs].section;
		choices[p->n_progs].excluded = excluded_reason(ex, p->progs[p->n_progs].name);
		choices[p->n_progs].unneeded = unneeded_reason(p, opts, p->progs[p->n_progs].name,
							       why[p->n_progs],
							       sizeof(why[p->n_progs]));
		p->progs[p->n_progs].unneeded = choices[p->n_progs].unneeded != NULL;
		p->n_progs++;
	}
	ktel_targets__choose_why(t, d->variants, d->n_variants, choices, n, p->unsupported_reason,
				 sizeof(p->unsupported_reason));
	for (i = 0; i < n; i++) {
		struct ktel_bpf_prog *bp = &p->progs[i];

		bp->selected = choices[i].selected;
		bp->nr_args = choices[i].nr_args;
		snprintf(bp->skip_reason, sizeof(bp->skip_reason), "%s", choices[i].reason);
		bpf_program__set_autoload(bp->prog, bp->selected);
	}
	rc = init_groups(p, err);
out:
	free(choices);
	free(why);
	return rc;
}

/* ---- maps ------------------------------------------------------------ */

static int add_map(struct ktel_bpf_plugin *p, const char *name, uint32_t metric,
		   enum ktel_bpf_map_role role, struct ktel_err *err)
{
	const struct ktel_plugin_desc *d = &p->plugin->desc;
	struct ktel_bpf_map *m;

	if (!name || ktel_bpf_plugin__map(p, name))
		return 0;
	m = &p->maps[p->n_maps];
	m->map = bpf_object__find_map_by_name(p->obj, name);
	if (!m->map)
		return ktel_err_set(err, ENOENT,
				    "plugin %s: metric %s names map %s, absent from the object",
				    d->name, d->metrics[metric].name, name);
	/*
	 * The descriptor's string, not bpf_map__name(): libbpf 1.1's
	 * bpf_map__reuse_fd() replaces the map's name with the kernel's
	 * 15-character copy and frees the old one.
	 */
	m->name = name;
	m->metric = d->metrics[metric].name;
	m->metric_index = metric;
	m->role = role;
	m->fd = -1;
	/* Accumulators and their labels outlive the daemon; streams are live only. */
	m->pinned = role == KTEL_MAP_LABEL ||
		    (role == KTEL_MAP_METRIC && d->metrics[metric].model == KTEL_MODEL_ACCUMULATOR);
	p->n_maps++;
	return 0;
}

static int init_maps(struct ktel_bpf_plugin *p, struct ktel_err *err)
{
	const struct ktel_plugin_desc *d = &p->plugin->desc;
	size_t cap = 0;
	uint32_t i, j;
	int rc = 0;

	for (i = 0; i < d->n_metrics; i++)
		cap += 2 + d->metrics[i].n_dims;
	p->maps = calloc(cap, sizeof(*p->maps));
	if (!p->maps)
		return ktel_err_set(err, ENOMEM, "plugin %s: out of memory", d->name);
	for (i = 0; !rc && i < d->n_metrics; i++) {
		const struct ktel_metric_desc *md = &d->metrics[i];

		rc = add_map(p, md->map_name, i, KTEL_MAP_METRIC, err);
		rc = rc ?: add_map(p, md->lost_map, i, KTEL_MAP_LOST, err);
		for (j = 0; !rc && j < md->n_dims; j++)
			rc = add_map(p, md->dims[j].label_map, i, KTEL_MAP_LABEL, err);
	}
	return rc;
}

/*
 * The names of desc's maps that add_map() pins, into names (room for
 * KTEL_PLUGIN_MAX_METRICS * (1 + KTEL_PLUGIN_MAX_DIMS), the loader's limits);
 * returns how many.
 */
static size_t pinned_maps(const struct ktel_plugin_desc *d, const char **names)
{
	size_t n = 0;

	for (uint32_t j = 0; j < d->n_metrics && j < KTEL_PLUGIN_MAX_METRICS; j++) {
		const struct ktel_metric_desc *md = &d->metrics[j];

		if (md->model == KTEL_MODEL_ACCUMULATOR && md->map_name)
			names[n++] = md->map_name;
		for (uint32_t k = 0; k < md->n_dims && k < KTEL_PLUGIN_MAX_DIMS; k++)
			if (md->dims[k].label_map)
				names[n++] = md->dims[k].label_map;
	}
	return n;
}

bool ktel_bpf_pins_collide(const struct ktel_plugin *a, const struct ktel_plugin *b, char *buf,
			   size_t len)
{
	enum {
		MAX = KTEL_PLUGIN_MAX_METRICS * (1 + KTEL_PLUGIN_MAX_DIMS)
	};
	char pa[2 * KTEL_PLUGIN_NAME_MAX + 8], pb[sizeof(pa)];
	const char *na[MAX], *nb[MAX];
	size_t n_a, n_b;
	bool hit = false;

	n_a = pinned_maps(&a->desc, na);
	n_b = pinned_maps(&b->desc, nb);
	for (size_t i = 0; i < n_a && !hit; i++) {
		snprintf(pa, sizeof(pa), "map_%s_%s", a->desc.name, na[i]);
		for (size_t j = 0; j < n_b && !hit; j++) {
			snprintf(pb, sizeof(pb), "map_%s_%s", b->desc.name, nb[j]);
			hit = strcmp(pa, pb) == 0;
		}
	}
	if (hit)
		snprintf(buf, len, "%s", pa);
	return hit;
}

/* Whether fd is a BPF map (bpffs may also hold programs and links). */
static bool fd_is_map(int fd)
{
	char path[64], line[128];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strncmp(line, "map_type:", 9) == 0;
	fclose(f);
	return found;
}

/* Why the pinned map info differs from map, or NULL when compatible. */
static const char *incompatible(const struct bpf_map_info *info, const struct bpf_map *map,
				char *buf, size_t len)
{
	if (info->type != bpf_map__type(map))
		snprintf(buf, len, "map type %u, object wants %u", info->type, bpf_map__type(map));
	else if (info->key_size != bpf_map__key_size(map))
		snprintf(buf, len, "key_size %u, object wants %u", info->key_size,
			 bpf_map__key_size(map));
	else if (info->value_size != bpf_map__value_size(map))
		snprintf(buf, len, "value_size %u, object wants %u", info->value_size,
			 bpf_map__value_size(map));
	else if (info->max_entries != bpf_map__max_entries(map))
		snprintf(buf, len, "max_entries %u, object wants %u", info->max_entries,
			 bpf_map__max_entries(map));
	else if (info->map_flags != bpf_map__map_flags(map))
		snprintf(buf, len, "map_flags 0x%x, object wants 0x%x", info->map_flags,
			 bpf_map__map_flags(map));
	else
		return NULL;
	return buf;
}

/* Reuse a compatible pin at m->pin_path, or mark an incompatible one for replacement. */
static int reuse_or_replace(struct ktel_bpf_plugin *p, struct ktel_bpf_map *m, struct ktel_err *err)
{
	const char *name = p->plugin->desc.name;
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);
	char why[128];
	const char *bad = NULL;
	int fd, rc = 0;

	fd = bpf_obj_get(m->pin_path);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0) {
		/* Not a BPF object we can open: recreate it. */
		snprintf(why, sizeof(why), "cannot open it: %s", strerror(errno));
		bad = why;
	} else if (!fd_is_map(fd)) {
		bad = "not a map";
	} else if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0) {
		snprintf(why, sizeof(why), "no map info: %s", strerror(errno));
		bad = why;
	} else {
		bad = incompatible(&info, m->map, why, sizeof(why));
	}
	if (!bad) {
		rc = bpf_map__reuse_fd(m->map, fd);
		if (rc)
			rc = ktel_err_set(err, rc, "plugin %s: map %s: cannot reuse pin %s: %s",
					  name, m->name, m->pin_path,
					  strerror(-rc < 4000 ? -rc : EINVAL));
		else
			m->reused = true;
		goto out;
	}
	/* Removed by pin_new_maps(), after the load: a load that fails must
	 * leave the old map (and what it counted) where it was. */
	m->replace_pin = true;
	snprintf(m->note, sizeof(m->note), "replaced incompatible pin: %s", bad);
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

static int prepare_pins(struct ktel_bpf_plugin *p, const char *pin_root, struct ktel_err *err)
{
	const char *name = p->plugin->desc.name;
	size_t i;
	int rc, n;

	for (i = 0; i < p->n_maps; i++) {
		struct ktel_bpf_map *m = &p->maps[i];

		if (!m->pinned)
			continue;
		n = snprintf(m->pin_path, sizeof(m->pin_path), "%s/map_%s_%s", pin_root, name,
			     m->name);
		if (n < 0 || (size_t)n >= sizeof(m->pin_path))
			return ktel_err_set(err, ENAMETOOLONG,
					    "plugin %s: map %s: pin path too long", name, m->name);
		rc = reuse_or_replace(p, m, err);
		if (rc)
			return rc;
	}
	return 0;
}

/* Pin one new map, replacing the incompatible pin prepare_pins() found. */
static int pin_map(struct ktel_bpf_plugin *p, struct ktel_bpf_map *m, gid_t gid,
		   struct ktel_err *err)
{
	const char *name = p->plugin->desc.name;
	int rc;

	if (m->replace_pin && unlink(m->pin_path) != 0 && errno != ENOENT)
		return ktel_err_set(err, errno,
				    "plugin %s: map %s: cannot remove incompatible pin %s: %s",
				    name, m->name, m->pin_path, strerror(errno));
	m->replace_pin = false;
	if (bpf_obj_pin(m->fd, m->pin_path) != 0)
		return ktel_err_set(err, errno, "plugin %s: map %s: cannot pin at %s: %s", name,
				    m->name, m->pin_path, strerror(errno));
	if (chmod(m->pin_path, KTEL_PIN_MAP_MODE) != 0 ||
	    (gid != (gid_t)-1 && chown(m->pin_path, (uid_t)-1, gid) != 0)) {
		rc = ktel_err_set(err, errno, "plugin %s: map %s: cannot set mode/group of %s: %s",
				  name, m->name, m->pin_path, strerror(errno));
		unlink(m->pin_path);
		return rc;
	}
	return 0;
}

/* Pin the maps no pin was reused for; on failure remove the ones pinned here. */
static int pin_new_maps(struct ktel_bpf_plugin *p, gid_t gid, struct ktel_err *err)
{
	size_t i;
	int rc;

	for (i = 0; i < p->n_maps; i++) {
		if (!p->maps[i].pinned || p->maps[i].reused)
			continue;
		rc = pin_map(p, &p->maps[i], gid, err);
		if (rc)
			goto undo;
	}
	return 0;
undo:
	/* A half-pinned plugin would pair a restarted daemon's new maps with
	 * these: leave the pin root as it was (but for replaced pins). */
	while (i-- > 0)
		if (p->maps[i].pinned && !p->maps[i].reused)
			unlink(p->maps[i].pin_path);
	return rc;
}

static void fill_ids(struct ktel_bpf_plugin *p)
{
	struct bpf_prog_info pinfo;
	struct bpf_map_info minfo;
	__u32 len;
	size_t i;
	int fd;

	for (i = 0; i < p->n_maps; i++) {
		memset(&minfo, 0, sizeof(minfo));
		len = sizeof(minfo);
		p->maps[i].fd = bpf_map__fd(p->maps[i].map);
		if (p->maps[i].fd >= 0 && bpf_obj_get_info_by_fd(p->maps[i].fd, &minfo, &len) == 0)
			p->maps[i].map_id = minfo.id;
	}
	for (i = 0; i < p->n_progs; i++) {
		memset(&pinfo, 0, sizeof(pinfo));
		len = sizeof(pinfo);
		fd = p->progs[i].selected ? bpf_program__fd(p->progs[i].prog) : -1;
		if (fd >= 0 && bpf_obj_get_info_by_fd(fd, &pinfo, &len) == 0)
			p->progs[i].prog_id = pinfo.id;
	}
}

/* ---- load ------------------------------------------------------------ */

/* Whether the running kernel creates task storage maps (Linux 5.11+);
 * probed once per process. */
static bool kernel_has_task_storage(void)
{
	static int has = -1; /* -1: not probed yet */
	int v = __atomic_load_n(&has, __ATOMIC_RELAXED);

	if (v < 0) {
		v = libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, NULL) == 1;
		__atomic_store_n(&has, v, __ATOMIC_RELAXED);
	}
	return v;
}

/*
 * On a kernel without task storage (or when p->no_task_storage says to act
 * as if), leave p's task storage maps out of the load instead of failing
 * the whole object on them. A program that uses one then refers to no map,
 * the verifier refuses it, and its variant group falls back to the next
 * variant: a latency plugin's task start form falls back to its hash form.
 */
static void leave_out_task_maps(struct ktel_bpf_plugin *p)
{
	struct bpf_map *map;

	if (!p->no_task_storage && kernel_has_task_storage())
		return;
	bpf_object__for_each_map(map, p->obj)
		if (bpf_map__type(map) == BPF_MAP_TYPE_TASK_STORAGE)
			bpf_map__set_autocreate(map, false);
}

static int open_object(struct ktel_bpf_plugin *p, struct ktel_err *err)
{
	const struct ktel_plugin_desc *d = &p->plugin->desc;
	LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = d->name);
	char why[KTEL_LIFECYCLE_MSG_MAX + 4], msg[128];
	int rc;

	ktel_libbpf_log__reset();
	p->obj = bpf_object__open_mem(d->bpf_object, d->bpf_object_size, &opts);
	if (p->obj) {
		leave_out_task_maps(p);
		return 0;
	}
	rc = ktel_libbpf_strerror(errno ? errno : EINVAL, msg, sizeof(msg));
	return ktel_err_set(err, rc, "plugin %s: cannot open BPF object: %s%s", d->name, msg,
			    libbpf_why(why, sizeof(why)));
}

/* What one load attempt came to. */
enum attempt_outcome {
	ATTEMPT_DONE = 0, /* p is the result: loaded, or unsupported with nothing loaded */
	ATTEMPT_REFUSED,  /* the kernel refused refusal.prog: exclude it, try again */
	ATTEMPT_FAILED,   /* rc is -errno, err says why */
};

struct attempt {
	enum attempt_outcome outcome;
	int rc;                 /* ATTEMPT_FAILED */
	struct refusal refusal; /* ATTEMPT_REFUSED */
};

static struct attempt attempt_failed(int rc)
{
	return (struct attempt){.outcome = ATTEMPT_FAILED, .rc = rc};
}

/*
 * Describe the kernel's refusal (-rc) of program name into r. log is its
 * verifier log, a KTEL_VERIFIER_LOG_SIZE buffer: a log that filled it made
 * the kernel fail the load with ENOSPC instead of the verifier's own error,
 * which is said instead; its tail is kept either way.
 */
static void refusal_init(struct refusal *r, const char *name, int rc, char *log)
{
	char msg[128];

	log[KTEL_VERIFIER_LOG_SIZE - 1] = '\0';
	snprintf(r->prog, sizeof(r->prog), "%s", name);
	if (strlen(log) == KTEL_VERIFIER_LOG_SIZE - 1) {
		snprintf(r->reason, sizeof(r->reason),
			 "load refused by this kernel: prog '%s': "
			 "refused by the verifier (log over %d KiB: ENOSPC)",
			 name, KTEL_VERIFIER_LOG_SIZE / 1024);
	} else {
		ktel_libbpf_strerror(rc, msg, sizeof(msg));
		snprintf(r->reason, sizeof(r->reason), "load refused by this kernel: prog '%s': %s",
			 name, msg);
	}
	ktel_verifier_tail(log, r->verifier, sizeof(r->verifier));
}

/*
 * After bpf_object__load() of p failed with rc: was it the verifier that
 * refused a program? libbpf loads each program without a log first and
 * retries a refused one with its log buffer (logs + i *
 * KTEL_VERIFIER_LOG_SIZE for p->progs[i]), then stops; so a written buffer
 * is the refused program's. Returns true and that program's refusal in
 * *ret_refusal, false when no log was written.
 */
static bool verifier_refusal(const struct ktel_bpf_plugin *p, char *logs, int rc,
			     struct refusal *ret_refusal)
{
	char *log;

	for (size_t i = 0; i < p->n_progs; i++) {
		log = logs + i * KTEL_VERIFIER_LOG_SIZE;
		if (p->progs[i].selected && log[0]) {
			refusal_init(ret_refusal, p->progs[i].name, rc, log);
			return true;
		}
	}
	return false;
}

/*
 * Load a fresh copy of p's object, its params set as for p, with only
 * program name (NULL: none) and nothing pinned, then close it. Returns 0
 * when it loads, else -errno with name's verifier log in log (a
 * KTEL_VERIFIER_LOG_SIZE buffer, left alone when the kernel wrote none).
 */
static int load_alone(const struct ktel_bpf_plugin *p, const int64_t *param_values,
		      const char *name, char *log)
{
	struct ktel_bpf_plugin alone = {.plugin = p->plugin, .no_task_storage = p->no_task_storage};
	struct bpf_program *prog;
	bool it;
	int rc;

	rc = open_object(&alone, NULL);
	rc = rc ?: set_params(&alone, param_values, NULL);
	if (rc)
		goto out;
	bpf_object__for_each_program(prog, alone.obj) {
		it = name && strcmp(bpf_program__name(prog), name) == 0;
		bpf_program__set_autoload(prog, it);
		if (it)
			bpf_program__set_log_buf(prog, log, KTEL_VERIFIER_LOG_SIZE);
	}
	rc = bpf_object__load(alone.obj);
out:
	bpf_object__close(alone.obj);
	return rc;
}

/*
 * After bpf_object__load() of p failed and no verifier log says why: which
 * program, if any, does the kernel refuse before verifying it (fentry where
 * function tracing is locked down: EPERM, no log)? libbpf 1.1 cannot say:
 * a failed load closes every program's fd, so bpf_program__fd() is -1 for
 * the refused program and the loaded ones alike. So the object is loaded
 * again program by program: first with none (when that fails too, the
 * failure is the object's: a map, its BTF), then each selected program
 * alone, in libbpf's load order. Returns true and the first program that
 * fails alone in *ret_refusal, false when none does.
 */
static bool lone_refusal(const struct ktel_bpf_plugin *p, const int64_t *param_values,
			 struct refusal *ret_refusal)
{
	char *log = malloc(KTEL_VERIFIER_LOG_SIZE);
	bool found = false;
	int rc;

	if (!log || load_alone(p, param_values, NULL, log) != 0)
		goto out;
	for (size_t i = 0; i < p->n_progs && !found; i++) {
		if (!p->progs[i].selected)
			continue;
		log[0] = '\0';
		rc = load_alone(p, param_values, p->progs[i].name, log);
		if (rc) {
			refusal_init(ret_refusal, p->progs[i].name, rc, log);
			found = true;
		}
	}
out:
	free(log);
	return found;
}

/*
 * Load p's object. The verifier's log of a refused program goes to a buffer
 * of our own, KTEL_VERIFIER_LOG_SIZE bytes, instead of the 16 MiB one
 * libbpf 1.1 allocates for its retry with log_level 1 (which the verifier
 * can fill: that buffer set the daemon's peak memory, docs/benchmarks.md);
 * the kernel keeps the end of a longer log (a rotating log, since 6.4), and
 * the end is the complaint. Each selected program has a buffer of its own,
 * which names the program a log was written for; the buffers are allocated
 * zeroed and untouched, so only a written log takes memory.
 *
 * Returns ATTEMPT_DONE with the ids filled in; ATTEMPT_REFUSED naming the
 * program the kernel refused, with its verifier log's tail; or
 * ATTEMPT_FAILED with err naming the plugin, when the failure is no one
 * program's.
 */
static struct attempt load_object(struct ktel_bpf_plugin *p, const int64_t *param_values,
				  struct ktel_err *err)
{
	struct attempt res = {.outcome = ATTEMPT_DONE};
	char why[KTEL_LIFECYCLE_MSG_MAX + 4], msg[128];
	char *logs = calloc(p->n_progs ? p->n_progs : 1, KTEL_VERIFIER_LOG_SIZE);
	int rc;

	if (!logs)
		return attempt_failed(ktel_err_set(err, ENOMEM, "plugin %s: out of memory",
						   p->plugin->desc.name));
	for (size_t i = 0; i < p->n_progs; i++)
		if (p->progs[i].selected)
			bpf_program__set_log_buf(p->progs[i].prog,
						 logs + i * KTEL_VERIFIER_LOG_SIZE,
						 KTEL_VERIFIER_LOG_SIZE);
	ktel_libbpf_log__reset();
	rc = bpf_object__load(p->obj);
	for (size_t i = 0; i < p->n_progs; i++)
		if (p->progs[i].selected)
			bpf_program__set_log_buf(p->progs[i].prog, NULL, 0);
	if (!rc) {
		fill_ids(p);
		goto out;
	}
	/* The kernel refused one program (fentry not permitted, a verifier
	 * limit on this kernel): the caller excludes it and its group falls
	 * back to the next variant, as for a missing target. */
	if (verifier_refusal(p, logs, rc, &res.refusal)) {
		res.outcome = ATTEMPT_REFUSED;
		goto out;
	}
	/* Said before lone_refusal()'s loads replace libbpf's warning. */
	rc = ktel_libbpf_strerror(rc, msg, sizeof(msg));
	rc = ktel_err_set(err, rc, "plugin %s: load failed: %s%s", p->plugin->desc.name, msg,
			  libbpf_why(why, sizeof(why)));
	if (lone_refusal(p, param_values, &res.refusal))
		res.outcome = ATTEMPT_REFUSED;
	else
		res = attempt_failed(rc);
out:
	free(logs);
	return res;
}

static void free_progs(struct ktel_bpf_plugin *p)
{
	for (size_t i = 0; p->progs && i < p->n_progs; i++) {
		free((char *)p->progs[i].name);
		free((char *)p->progs[i].section);
	}
	free(p->progs);
	p->progs = NULL;
}

static void reset_attempt(struct ktel_bpf_plugin *p)
{
	bpf_object__close(p->obj);
	p->obj = NULL;
	free_progs(p);
	free(p->groups);
	p->groups = NULL;
	free(p->maps);
	p->maps = NULL;
	p->n_progs = p->n_groups = p->n_maps = 0;
	p->unsupported_reason[0] = '\0';
}

/*
 * Never select r->prog again. Returns 0, or -E2BIG (err naming the plugin
 * and the refusal) when every program is excluded already, which only a
 * bug can do: an excluded program is never selected, so never refused.
 */
static int exclude(struct exclusions *ex, const struct ktel_bpf_plugin *p, const struct refusal *r,
		   struct ktel_err *err)
{
	if (ex->n >= KTEL_PLUGIN_MAX_PROGRAMS)
		return ktel_err_set(err, E2BIG, "plugin %s: program %s: %s", p->plugin->desc.name,
				    r->prog, r->reason);
	ex->list[ex->n++] = *r;
	return 0;
}

/*
 * After the last attempt: each program the kernel refused gets the
 * verifier's words, and so does the reason of a plugin left unsupported -
 * first, since "Permission denied" alone says nothing about the bug.
 */
static void add_verifier_logs(struct ktel_bpf_plugin *p, const struct exclusions *ex)
{
	char why[sizeof(p->unsupported_reason)];
	struct ktel_bpf_prog *bp;
	const char *first = NULL;

	for (size_t i = 0; i < ex->n; i++) {
		if (!ex->list[i].verifier[0] || !(bp = ktel_bpf_plugin__prog(p, ex->list[i].prog)))
			continue;
		snprintf(bp->verifier_log, sizeof(bp->verifier_log), "%s", ex->list[i].verifier);
		if (!first)
			first = ex->list[i].prog;
	}
	if (!first || !p->unsupported)
		return;
	bp = ktel_bpf_plugin__prog(p, first);
	snprintf(why, sizeof(why), "program %s refused by the verifier: %s; %s", first,
		 bp->verifier_log, p->unsupported_reason);
	memcpy(p->unsupported_reason, why, sizeof(why));
}

static int attach_one(struct ktel_bpf_plugin *p, struct ktel_bpf_prog *bp, struct ktel_err *err);

/*
 * Attach every selected program; with keep false detach each right after.
 * A variant that loads but does not attach (a tracepoint without a perf
 * event, a function kprobes may not probe) is refused like one the kernel
 * would not load: everything is detached and ATTEMPT_REFUSED names it, so
 * that the next attempt falls back to the next variant of its group or
 * reports the plugin unsupported. Done before any pin so that an attempt
 * given up leaves nothing behind. Returns ATTEMPT_DONE or ATTEMPT_REFUSED.
 */
static struct attempt attach_or_refuse(struct ktel_bpf_plugin *p, bool keep)
{
	struct attempt res = {.outcome = ATTEMPT_DONE};
	struct ktel_bpf_prog *bp;

	for (size_t i = 0; i < p->n_progs; i++) {
		bp = &p->progs[i];
		if (!bp->selected)
			continue;
		if (attach_one(p, bp, NULL) != 0) {
			ktel_bpf_plugin__detach_all(p);
			res.outcome = ATTEMPT_REFUSED;
			snprintf(res.refusal.prog, sizeof(res.refusal.prog), "%s", bp->name);
			snprintf(res.refusal.reason, sizeof(res.refusal.reason), "%s",
				 bp->attach_error);
			return res;
		}
		if (!keep)
			ktel_bpf_plugin__detach_prog(p, bp->name);
	}
	return res;
}

/*
 * One open/select/load/attach attempt into p, leaving out the programs in
 * ex. Returns what it came to (see enum attempt_outcome); after
 * ATTEMPT_REFUSED the caller resets p before the next attempt.
 */
static struct attempt load_attempt(struct ktel_bpf_plugin *p, const struct ktel_bpf_opts *opts,
				   const struct exclusions *ex, struct ktel_err *err)
{
	const char *pin_root = opts->pin_root ? opts->pin_root : KTEL_PIN_ROOT_DEFAULT;
	struct attempt res;
	size_t i, n_selected = 0;
	int rc;

	rc = open_object(p, err);
	rc = rc ?: set_params(p, opts->param_values, err);
	rc = rc ?: set_attr(p, opts, err);
	rc = rc ?: init_progs(p, opts, ex, err);
	if (rc)
		return attempt_failed(rc);
	for (i = 0; i < p->n_progs; i++)
		n_selected += p->progs[i].selected;
	if (!n_selected) {
		/* Nothing can run here: report, keep the program list, load nothing. */
		p->unsupported = true;
		if (!p->unsupported_reason[0])
			snprintf(p->unsupported_reason, sizeof(p->unsupported_reason),
				 "the BPF object has no programs");
		bpf_object__close(p->obj);
		p->obj = NULL;
		for (i = 0; i < p->n_progs; i++)
			p->progs[i].prog = NULL;
		return (struct attempt){.outcome = ATTEMPT_DONE};
	}
	p->unsupported_reason[0] = '\0';
	rc = init_maps(p, err);
	rc = rc ?: (opts->load_only ? 0 : prepare_pins(p, pin_root, err));
	if (rc)
		return attempt_failed(rc);
	res = load_object(p, opts->param_values, err);
	if (res.outcome != ATTEMPT_DONE || opts->load_only)
		return res;
	/* Before any program runs: the count starts from what the map holds. */
	rc = init_attr_used(p, opts, err);
	if (rc)
		return attempt_failed(rc);
	res = attach_or_refuse(p, !opts->no_attach);
	if (res.outcome != ATTEMPT_DONE)
		return res;
	rc = pin_new_maps(p, opts->pin_gid, err);
	return rc ? attempt_failed(rc) : res;
}

int ktel_bpf_plugin__load(const struct ktel_plugin *plugin, const struct ktel_bpf_opts *opts,
			  struct ktel_bpf_plugin **ret, struct ktel_err *err)
{
	struct exclusions *ex;
	struct ktel_bpf_plugin *p;
	struct attempt res;
	int rc;

	if (!opts->targets)
		return ktel_err_set(err, EINVAL, "plugin %s: no kernel targets given",
				    plugin->desc.name);
	p = calloc(1, sizeof(*p));
	ex = calloc(1, sizeof(*ex));
	if (!p || !ex) {
		free(p);
		free(ex);
		return ktel_err_set(err, ENOMEM, "plugin %s: out of memory", plugin->desc.name);
	}
	p->plugin = plugin;
	p->no_task_storage = opts->no_task_storage;
	/* Bounded: each refusal excludes one more program. */
	for (;;) {
		res = load_attempt(p, opts, ex, err);
		if (res.outcome != ATTEMPT_REFUSED)
			break;
		rc = exclude(ex, p, &res.refusal, err);
		if (rc) {
			res = attempt_failed(rc);
			break;
		}
		reset_attempt(p);
	}
	if (res.outcome == ATTEMPT_DONE)
		add_verifier_logs(p, ex);
	free(ex);
	if (res.outcome != ATTEMPT_DONE) {
		ktel_bpf_plugin__free(p);
		return res.rc;
	}
	*ret = p;
	return 0;
}

/* ---- lookup, attach, detach ----------------------------------------- */

struct ktel_bpf_prog *ktel_bpf_plugin__prog(struct ktel_bpf_plugin *p, const char *name)
{
	size_t i;

	for (i = 0; i < p->n_progs; i++)
		if (strcmp(p->progs[i].name, name) == 0)
			return &p->progs[i];
	return NULL;
}

struct ktel_bpf_map *ktel_bpf_plugin__map(struct ktel_bpf_plugin *p, const char *name)
{
	size_t i;

	for (i = 0; i < p->n_maps; i++)
		if (strcmp(p->maps[i].name, name) == 0)
			return &p->maps[i];
	return NULL;
}

static int attach_one(struct ktel_bpf_plugin *p, struct ktel_bpf_prog *bp, struct ktel_err *err)
{
	char why[KTEL_LIFECYCLE_MSG_MAX + 4], msg[128];
	int rc;

	if (bp->link)
		return 0;
	if (!bp->selected || !p->obj)
		return ktel_err_set(err, EINVAL, "plugin %s: program %s is not loaded: %s",
				    p->plugin->desc.name, bp->name,
				    bp->skip_reason[0] ? bp->skip_reason : "plugin unsupported");
	ktel_libbpf_log__reset();
	bp->link = bpf_program__attach(bp->prog);
	if (!bp->link) {
		rc = ktel_libbpf_strerror(errno ? errno : EINVAL, msg, sizeof(msg));
		snprintf(bp->attach_error, sizeof(bp->attach_error), "attach failed: %s%s", msg,
			 libbpf_why(why, sizeof(why)));
		bp->attached = false;
		return ktel_err_set(err, rc, "plugin %s: program %s: %s", p->plugin->desc.name,
				    bp->name, bp->attach_error);
	}
	bp->attached = true;
	bp->attach_error[0] = '\0';
	return 0;
}

int ktel_bpf_plugin__attach_prog(struct ktel_bpf_plugin *p, const char *name, struct ktel_err *err)
{
	struct ktel_bpf_prog *bp = ktel_bpf_plugin__prog(p, name);

	if (!bp)
		return ktel_err_set(err, ENOENT, "plugin %s: no program %s", p->plugin->desc.name,
				    name);
	return attach_one(p, bp, err);
}

enum ktel_bpf_group_state ktel_bpf_plugin__group_state(const struct ktel_bpf_group *g)
{
	if (!g->winner)
		return KTEL_GROUP_UNUSABLE;
	if (g->winner->attached)
		return KTEL_GROUP_ATTACHED;
	return g->winner->attach_error[0] ? KTEL_GROUP_ATTACH_FAILED : KTEL_GROUP_LOADED;
}

static bool metric_uses(const struct ktel_metric_desc *md, const char *prog)
{
	if (!md->programs || !md->n_programs)
		return true;
	for (uint32_t i = 0; i < md->n_programs; i++)
		if (md->programs[i] && strcmp(md->programs[i], prog) == 0)
			return true;
	return false;
}

/* The descriptor's group of prog, or NULL when it is in none. */
static const char *group_of(const struct ktel_plugin_desc *d, const char *prog)
{
	for (uint32_t v = 0; v < d->n_variants; v++)
		if (d->variants[v].prog && strcmp(d->variants[v].prog, prog) == 0)
			return d->variants[v].group;
	return NULL;
}

/* Does md use a variant of group g? */
static bool metric_uses_group(const struct ktel_plugin_desc *d, const struct ktel_metric_desc *md,
			      const char *group)
{
	for (uint32_t v = 0; v < d->n_variants; v++)
		if (d->variants[v].group && strcmp(d->variants[v].group, group) == 0 &&
		    d->variants[v].prog && metric_uses(md, d->variants[v].prog))
			return true;
	return false;
}

static int group_incomplete(const struct ktel_bpf_plugin *p, const struct ktel_metric_desc *md,
			    const struct ktel_bpf_group *g, struct ktel_err *err)
{
	switch (ktel_bpf_plugin__group_state(g)) {
	case KTEL_GROUP_ATTACHED:
		return 0;
	case KTEL_GROUP_UNUSABLE:
		return ktel_err_set(err, ENODEV,
				    "metric %s: variant group %s: no usable variant: %s", md->name,
				    g->name, p->unsupported_reason);
	case KTEL_GROUP_ATTACH_FAILED:
		return ktel_err_set(err, ENODEV, "metric %s: variant group %s: %s: %s", md->name,
				    g->name, g->winner->name, g->winner->attach_error);
	case KTEL_GROUP_LOADED:
		break;
	}
	return ktel_err_set(err, ENODEV, "metric %s: variant group %s: %s is not attached",
			    md->name, g->name, g->winner->name);
}

int ktel_bpf_plugin__metric_complete(const struct ktel_bpf_plugin *p,
				     const struct ktel_metric_desc *md, struct ktel_err *err)
{
	const struct ktel_plugin_desc *d = &p->plugin->desc;
	const struct ktel_bpf_prog *bp;
	int rc;

	if (p->unsupported)
		return ktel_err_set(err, ENODEV, "metric %s: unsupported: %s", md->name,
				    p->unsupported_reason);
	for (size_t i = 0; i < p->n_groups; i++) {
		if (!metric_uses_group(d, md, p->groups[i].name))
			continue;
		rc = group_incomplete(p, md, &p->groups[i], err);
		if (rc)
			return rc;
	}
	for (size_t i = 0; i < p->n_progs; i++) {
		bp = &p->progs[i];
		if (group_of(d, bp->name) || !metric_uses(md, bp->name) || bp->attached ||
		    bp->unneeded)
			continue;
		return ktel_err_set(err, ENODEV, "metric %s: program %s is not attached%s%s",
				    md->name, bp->name, bp->attach_error[0] ? ": " : "",
				    bp->attach_error[0]  ? bp->attach_error
				    : bp->skip_reason[0] ? bp->skip_reason
							 : "");
	}
	return 0;
}

int ktel_bpf_plugin__detach_prog(struct ktel_bpf_plugin *p, const char *name)
{
	struct ktel_bpf_prog *bp = ktel_bpf_plugin__prog(p, name);

	if (!bp)
		return -ENOENT;
	bpf_link__destroy(bp->link);
	bp->link = NULL;
	bp->attached = false;
	return 0;
}

size_t ktel_bpf_plugin__attach_all(struct ktel_bpf_plugin *p)
{
	size_t i, n = 0;

	for (i = 0; i < p->n_progs; i++) {
		if (p->progs[i].selected)
			attach_one(p, &p->progs[i], NULL);
		n += p->progs[i].attached;
	}
	return n;
}

void ktel_bpf_plugin__detach_all(struct ktel_bpf_plugin *p)
{
	size_t i;

	for (i = 0; i < p->n_progs; i++) {
		bpf_link__destroy(p->progs[i].link);
		p->progs[i].link = NULL;
		p->progs[i].attached = false;
	}
}

int ktel_bpf_plugin__unpin(struct ktel_bpf_plugin *p, struct ktel_err *err)
{
	size_t i;
	int rc = 0;

	for (i = 0; i < p->n_maps; i++) {
		struct ktel_bpf_map *m = &p->maps[i];

		if (!m->pin_path[0])
			continue;
		if (unlink(m->pin_path) != 0 && errno != ENOENT && !rc)
			rc = ktel_err_set(err, errno, "plugin %s: cannot unpin %s: %s",
					  p->plugin->desc.name, m->pin_path, strerror(errno));
		m->pin_path[0] = '\0';
		m->pinned = false;
	}
	return rc;
}

void ktel_bpf_plugin__free(struct ktel_bpf_plugin *p)
{
	if (!p)
		return;
	if (p->progs)
		ktel_bpf_plugin__detach_all(p);
	bpf_object__close(p->obj);
	free_progs(p);
	free(p->groups);
	free(p->maps);
	free(p);
}

bool ktel_bpf_stats_enabled(void)
{
	char c = '0';
	int fd = open("/proc/sys/kernel/bpf_stats_enabled", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	if (read(fd, &c, 1) != 1)
		c = '0';
	close(fd);
	return c == '1';
}

int ktel_bpf_stats_hold(struct ktel_err *err)
{
	int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);

	if (fd < 0)
		return ktel_err_set(err, -fd, "cannot turn bpf_stats on (BPF_ENABLE_STATS): %s",
				    strerror(-fd));
	return fd;
}

int ktel_bpf_prog__stats(const struct ktel_bpf_prog *p, struct ktel_bpf_prog_stats *ret)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);
	int fd = p->prog_id && p->prog ? bpf_program__fd(p->prog) : -1;

	if (fd < 0)
		return -EINVAL;
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return -errno;
	*ret = (struct ktel_bpf_prog_stats){.run_cnt = info.run_cnt,
					    .run_time_ns = info.run_time_ns,
					    .recursion_misses = info.recursion_misses,
					    .load_time_ns = info.load_time};
	return 0;
}
