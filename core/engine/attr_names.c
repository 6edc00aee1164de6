// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Names of attribution ids (attr_names.h): a cgroup id -> path cache filled
 * from the kernel's cgroup events and by walking the cgroup2 mount, a uid ->
 * user name cache, and the fixed rules for Android app ids and processes.
 */
#include "attr_names.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The handle type of a kernfs file (the kernel's include/linux/exportfs.h). */
#ifndef FILEID_KERNFS
#define FILEID_KERNFS 0xfe
#endif

#define DEFAULT_GRACE_NS (600ULL * 1000000000ULL)
#define DEFAULT_MAX_CGROUPS 65536
/* Deeper trees are not walked further: systemd's are a handful deep. */
#define MAX_WALK_DEPTH 32
#define MAX_USERS 4096

/*
 * One cache line each (the table is line-aligned): a pull notes every id
 * it names as used (ktel_attr_names__cgroup_used), once per id and window,
 * and an entry straddling two lines cost two misses where one will do.
 */
struct entry {
	_Alignas(64) uint64_t id;
	/* Last walk or mkdir event that found it (for a removed cgroup: its
	 * rmdir), or lookup, for users. */
	uint64_t seen_ns;
	uint64_t used_ns;     /* cgroups: last pull that named it (it had events) */
	uint64_t released_ns; /* cgroups: when its release event came */
	uint64_t gen;         /* cgroups: the walk generation that last found it */
	char *name;           /* NULL: a uid getpwuid_r did not know (its number is used) */
	bool used;
	bool removed;  /* cgroups: rmdir seen, or a full walk no longer finds it */
	bool released; /* cgroups: its release event came (held until settled) */
};

/* Open addressing, linear probing, tombstone-free: rebuilt when pruned. */
struct cache {
	struct entry *e;
	size_t cap, n;
};

struct ktel_attr_names {
	char root[4096]; /* "" when there is no cgroup2 mount */
	/* The directory of the hierarchy the mount shows ("/" unless the
	 * mount, or a cgroup namespace, shows a subtree): event paths are
	 * relative to the hierarchy, walk paths to the mount. */
	char mount_root[4096];
	uint64_t grace_ns;
	size_t max_cgroups;
	uint64_t now_ns;
	uint64_t pull;      /* begin_pull count */
	uint64_t walk_pull; /* pull of the last walk; 0: never */
	uint64_t walk_ns;   /* time of the last walk */
	uint64_t prune_ns;  /* time of the last pass for released cgroups */
	uint64_t gen;       /* walks made */
	/* Moved on by every change a name of a cgroup may have had, and by
	 * every move of the cache's entries (ktel_attr_names__generation). */
	uint64_t name_gen;
	bool walked;
	bool events;      /* the kernel's cgroup events keep the cache current */
	bool walk_wanted; /* events were lost: walk at the next pull */
	size_t held;      /* entries released by their event, not yet settled */
	void (*refill)(void *ctx);
	void *refill_ctx;
	bool refilling;
	struct cache cgroups, users;
	/* Released cgroups not yet taken (ktel_attr_names__released). */
	struct ktel_attr_released *released;
	size_t n_released, cap_released;
	struct ktel_attr_names_stats st;
};

/* ---- the cache ------------------------------------------------------------ */

static size_t slot_of(uint64_t id, size_t cap)
{
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdULL;
	id ^= id >> 33;
	return (size_t)(id & (cap - 1));
}

static struct entry *cache_find(const struct cache *c, uint64_t id)
{
	if (!c->cap)
		return NULL;
	for (size_t i = slot_of(id, c->cap);; i = (i + 1) & (c->cap - 1)) {
		if (!c->e[i].used)
			return NULL;
		if (c->e[i].id == id)
			return &c->e[i];
	}
}

static int cache_rehash(struct cache *c, size_t cap)
{
	struct entry *e = aligned_alloc(_Alignof(struct entry), cap * sizeof(*e));

	if (!e)
		return -ENOMEM;
	memset(e, 0, cap * sizeof(*e));
	for (size_t i = 0; i < c->cap; i++) {
		size_t j;

		if (!c->e[i].used)
			continue;
		for (j = slot_of(c->e[i].id, cap); e[j].used; j = (j + 1) & (cap - 1))
			;
		e[j] = c->e[i];
	}
	free(c->e);
	c->e = e;
	c->cap = cap;
	return 0;
}

/* Set id's name (taking name), or refresh its time. A new entry counts as
 * used now, so a cgroup is not taken as released before a grace period
 * has passed since it was found. */
static int cache_put(struct cache *c, uint64_t id, char *name, uint64_t now)
{
	struct entry *e = cache_find(c, id);
	size_t i;

	if (e) {
		if (name) {
			free(e->name);
			e->name = name;
		}
		e->seen_ns = now;
		return 0;
	}
	if ((c->n + 1) * 2 > c->cap && cache_rehash(c, c->cap ? c->cap * 2 : 256)) {
		free(name);
		return -ENOMEM;
	}
	for (i = slot_of(id, c->cap); c->e[i].used; i = (i + 1) & (c->cap - 1))
		;
	c->e[i] = (struct entry){.id = id,
				 .seen_ns = now,
				 .used_ns = now,
				 .name = name,
				 .used = true};
	c->n++;
	return 0;
}

/*
 * Is the cgroup of e taken as released by the grace rule: gone (no walk
 * finds it, or its rmdir came) and without events for the grace period?
 * With the kernel's events a named cgroup that was not removed is alive,
 * however long ago a walk saw it.
 */
static bool grace_over(const struct ktel_attr_names *n, const struct entry *e)
{
	uint64_t since;

	if (n->now_ns <= n->grace_ns)
		return false;
	since = n->now_ns - n->grace_ns;
	if (e->used_ns >= since || e->seen_ns >= since)
		return false;
	return !n->events || e->removed || !e->name;
}

/* Leaves the cache for the released list at the next prune or settle. */
static bool leaving(const struct ktel_attr_names *n, const struct entry *e, uint64_t settled_ns)
{
	if (e->released)
		return e->released_ns <= settled_ns;
	return grace_over(n, e);
}

/* Does an entry of c other than those leaving carry name? */
static bool name_carried(const struct ktel_attr_names *n, const char *name, uint64_t settled_ns)
{
	const struct cache *c = &n->cgroups;

	for (size_t i = 0; i < c->cap; i++)
		if (c->e[i].used && c->e[i].name && !c->e[i].released &&
		    !leaving(n, &c->e[i], settled_ns) && strcmp(c->e[i].name, name) == 0)
			return true;
	return false;
}

/*
 * Move the cgroups that leave (leaving(): released by the grace rule, or
 * by a release event at or before settled_ns) onto n's released list, each
 * with whether another entry carries its name. A name is compared with
 * every entry: O(entries) per release, which a walk (O(entries) stat calls)
 * outweighs.
 */
static void prune_cgroups(struct ktel_attr_names *n, uint64_t settled_ns)
{
	struct cache *c = &n->cgroups;
	bool any = false;

	n->prune_ns = n->now_ns;
	for (size_t i = 0; i < c->cap; i++) {
		struct entry *e = &c->e[i];
		struct ktel_attr_released *r;

		if (!e->used || !leaving(n, e, settled_ns))
			continue;
		if (n->n_released == n->cap_released) {
			size_t cap = n->cap_released ? n->cap_released * 2 : 64;
			void *p = realloc(n->released, cap * sizeof(*n->released));

			/* Out of memory: kept in the cache, released later. */
			if (!p)
				break;
			n->released = p;
			n->cap_released = cap;
		}
		r = &n->released[n->n_released++];
		if (e->released) {
			n->held--;
			n->st.released_event++;
		}
		r->id = e->id;
		r->name = e->name;
		r->carried = e->name && name_carried(n, e->name, settled_ns);
		e->name = NULL;
		e->used = false;
		c->n--;
		any = true;
		n->st.released++;
	}
	/* Linear probing without tombstones: rebuild so probes still find
	 * the entries past the holes. */
	if (any) {
		cache_rehash(c, c->cap);
		n->name_gen++;
	}
}

static void cache_free(struct cache *c)
{
	for (size_t i = 0; i < c->cap; i++)
		free(c->e[i].name);
	free(c->e);
	c->e = NULL;
	c->cap = c->n = 0;
}

/* ---- names ------------------------------------------------------------------- */

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '+' || c == '-' || c == '@' || c == ':' || c == '=';
}

static bool has_prefix_suffix(const char *s, size_t len, const char *pre, const char *suf)
{
	size_t p = strlen(pre), q = strlen(suf);

	return len >= p + q && memcmp(s, pre, p) == 0 && memcmp(s + len - q, suf, q) == 0;
}

/* The name of a path as it is written out, byte by byte: the first max
 * bytes kept in buf, every byte counted and hashed (64-bit FNV-1a). */
struct name_out {
	char *buf;
	size_t max, n;
	uint64_t hash;
};

static void name_put(struct name_out *o, char c)
{
	if (o->n < o->max)
		o->buf[o->n] = c;
	o->n++;
	o->hash = (o->hash ^ (unsigned char)c) * 0x100000001b3ULL;
}

size_t ktel_attr_cgroup_name(const char *path, char *buf, size_t len)
{
	struct name_out o = {.buf = buf,
			     .max = len - 1 < KTEL_ATTR_NAME_MAX ? len - 1 : KTEL_ATTR_NAME_MAX,
			     .hash = 0xcbf29ce484222325ULL};
	const char *s = path;

	while (*s == '/')
		s++;
	if (!*s) {
		snprintf(buf, len, "/");
		return strlen(buf);
	}
	while (*s) {
		const char *end = strchr(s, '/');
		size_t clen = end ? (size_t)(end - s) : strlen(s);
		const char *comp = s;
		size_t ccopy = clen;

		/* One name for the scopes systemd makes per command and login:
		 * thousands of them are one workload, not thousands. */
		if (has_prefix_suffix(s, clen, "run-", ".scope")) {
			comp = "run-*.scope";
			ccopy = strlen(comp);
		} else if (has_prefix_suffix(s, clen, "session-", ".scope")) {
			comp = "session-*.scope";
			ccopy = strlen(comp);
		}
		if (o.n)
			name_put(&o, '/');
		for (size_t i = 0; i < ccopy; i++) {
			char c = comp[i];

			name_put(&o, (comp != s || name_char(c)) ? c : '_');
		}
		s += clen;
		while (*s == '/')
			s++;
	}
	/*
	 * Too long: cut, the cut name would be any other cgroup's whose name
	 * starts the same (or is that start). The long form is its start,
	 * '~' and the hash of the whole name in 16 hex digits: one path gives
	 * one name, and no other name has a '~' (it is not a name character).
	 */
	if (o.n > o.max && o.max >= KTEL_ATTR_LONG_SUFFIX + 1) {
		o.n = o.max - KTEL_ATTR_LONG_SUFFIX;
		snprintf(buf + o.n, len - o.n, "~%016" PRIx64, o.hash);
		o.n += KTEL_ATTR_LONG_SUFFIX;
	} else if (o.n > o.max) {
		o.n = o.max;
	}
	buf[o.n] = '\0';
	return o.n;
}

/* ---- mountinfo ---------------------------------------------------------------- */

/* Undo mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*w++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*w++ = *s;
		}
	}
	*w = '\0';
}

/* The cgroup2 mount of a mountinfo file: its mount point into buf and the
 * directory of the hierarchy it shows into root (may be NULL). */
static int cgroup2_mount(const char *mountinfo, char *buf, size_t len, char *root, size_t rlen)
{
	FILE *f = fopen(mountinfo ? mountinfo : "/proc/self/mountinfo", "re");
	char line[8192];
	int rc = -ENOENT;

	if (!f)
		return -errno;
	while (rc && fgets(line, sizeof(line), f)) {
		char *fields[6], *save = NULL, *dash = strstr(line, " - ");
		char *tok = strtok_r(line, " ", &save);
		int n = 0;

		for (; tok && n < 6; tok = strtok_r(NULL, " ", &save))
			fields[n++] = tok;
		if (n < 5 || !dash || strncmp(dash + 3, "cgroup2 ", 8) != 0)
			continue;
		unescape(fields[3]);
		unescape(fields[4]);
		if (strlen(fields[4]) < len && (!root || strlen(fields[3]) < rlen)) {
			snprintf(buf, len, "%s", fields[4]);
			if (root)
				snprintf(root, rlen, "%s", fields[3]);
			rc = 0;
		}
	}
	fclose(f);
	return rc;
}

int ktel_attr_cgroup2_mount(const char *mountinfo, char *buf, size_t len)
{
	return cgroup2_mount(mountinfo, buf, len, NULL, 0);
}

/*
 * Does the file name (cgroup.subtree_control or cgroup.controllers) of the
 * cgroup at dir list "io" itself? The kernel lists a few short names on one
 * line; a file longer than the buffer is not that file, and what fits is
 * read all the same. 0 and *ret_on, or -errno with err naming the file.
 */
static int lists_io(const char *dir, const char *name, bool *ret_on, struct ktel_err *err)
{
	char path[4096 + 32], buf[1024], *tok, *save = NULL;
	bool on = false;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ktel_err_set(err, errno, "%s: %s", path, strerror(errno));
	n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0) {
		int e = errno;

		close(fd);
		return ktel_err_set(err, e, "%s: %s", path, strerror(e));
	}
	close(fd);
	buf[n] = '\0';
	for (tok = strtok_r(buf, " \t\n", &save); tok && !on; tok = strtok_r(NULL, " \t\n", &save))
		on = strcmp(tok, "io") == 0;
	*ret_on = on;
	return 0;
}

/* lists_io of the cgroup2 mount's root; false without a cgroup2 mount. */
static int root_lists_io(const char *mountinfo, const char *name, bool *ret_on,
			 struct ktel_err *err)
{
	char dir[4096];
	bool on;
	int rc;

	if (cgroup2_mount(mountinfo, dir, sizeof(dir), NULL, 0) != 0) {
		*ret_on = false;
		return 0;
	}
	rc = lists_io(dir, name, &on, err);
	if (rc)
		return rc;
	*ret_on = on;
	return 0;
}

int ktel_attr_io_on_v2(const char *mountinfo, bool *ret_on, struct ktel_err *err)
{
	return root_lists_io(mountinfo, "cgroup.subtree_control", ret_on, err);
}

int ktel_attr_io_v2_available(const char *mountinfo, bool *ret_on, struct ktel_err *err)
{
	return root_lists_io(mountinfo, "cgroup.controllers", ret_on, err);
}

/* ---- where io is not enabled ----------------------------------------------------- */

/* A bound on the cgroups io_gaps visits: it runs at a plugin's load, on the
 * daemon's loop, for a log line that needs the first gap and a count
 * ("+" past the bound), not every cgroup of a host with many. */
#define MAX_GAP_CGROUPS 4096

struct gaps {
	char path[4096];
	size_t root_len;
	uint32_t levels; /* visit the cgroups at levels below this */
	size_t visited;
	struct ktel_attr_io_gaps *ret;
};

/* Visit the cgroup at g->path (len bytes), at level: a gap when it has a
 * child cgroup and its cgroup.subtree_control lacks io. */
static void gap_walk(struct gaps *g, size_t len, uint32_t level)
{
	struct dirent *de;
	struct stat st;
	bool io = true, counted = false;
	DIR *dir;

	if (level >= g->levels || g->visited >= MAX_GAP_CGROUPS) {
		g->ret->truncated |= level < g->levels;
		return;
	}
	g->visited++;
	if (lists_io(g->path, "cgroup.subtree_control", &io, NULL))
		return; /* gone since it was listed, or not a cgroup */
	dir = opendir(g->path);
	if (!dir)
		return;
	while ((de = readdir(dir)) != NULL) {
		size_t l = strlen(de->d_name);

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
			continue;
		if (len + 1 + l >= sizeof(g->path))
			continue;
		g->path[len] = '/';
		memcpy(g->path + len + 1, de->d_name, l + 1);
		if (stat(g->path, &st) == 0 && S_ISDIR(st.st_mode)) {
			if (!io && !counted) {
				counted = true;
				if (!g->ret->n++)
					snprintf(g->ret->first, sizeof(g->ret->first), "%.*s",
						 (int)(len > g->root_len ? len - g->root_len : 1),
						 len > g->root_len ? g->path + g->root_len : "/");
			}
			gap_walk(g, len + 1 + l, level + 1);
		}
		g->path[len] = '\0';
	}
	closedir(dir);
}

int ktel_attr_io_gaps(const char *mountinfo, uint32_t depth, struct ktel_attr_io_gaps *ret,
		      struct ktel_err *err)
{
	struct gaps *g;

	g = calloc(1, sizeof(*g));
	if (!g)
		return ktel_err_set(err, ENOMEM, "out of memory");
	if (cgroup2_mount(mountinfo, g->path, sizeof(g->path), NULL, 0) != 0) {
		free(g);
		return ktel_err_set(err, ENOENT, "no cgroup2 mount");
	}
	g->root_len = strlen(g->path);
	g->levels = depth ? depth : MAX_WALK_DEPTH;
	g->ret = ret;
	memset(ret, 0, sizeof(*ret));
	gap_walk(g, g->root_len, 0);
	free(g);
	return 0;
}

/* ---- the walk ------------------------------------------------------------------ */

struct walk {
	struct ktel_attr_names *n;
	char path[4096];
	size_t root_len;
	size_t found;
	bool oom;
};

static void walk_dir(struct walk *w, size_t len, int depth)
{
	struct stat st;
	struct dirent *de;
	DIR *dir;
	char name[KTEL_ATTR_NAME_MAX + 1], *copy;

	if (stat(w->path, &st) || !S_ISDIR(st.st_mode))
		return;
	if (w->found >= w->n->max_cgroups) {
		w->n->st.truncated++;
		return;
	}
	w->found++;
	ktel_attr_cgroup_name(w->path + w->root_len, name, sizeof(name));
	copy = strdup(name);
	if (!copy || cache_put(&w->n->cgroups, (uint64_t)st.st_ino, copy, w->n->now_ns)) {
		w->oom = true;
		return;
	}
	cache_find(&w->n->cgroups, (uint64_t)st.st_ino)->gen = w->n->gen;
	if (depth >= MAX_WALK_DEPTH)
		return;
	dir = opendir(w->path);
	if (!dir)
		return;
	while (!w->oom && (de = readdir(dir)) != NULL) {
		size_t l = strlen(de->d_name);

		if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
			continue;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (len + 1 + l >= sizeof(w->path))
			continue;
		w->path[len] = '/';
		memcpy(w->path + len + 1, de->d_name, l + 1);
		walk_dir(w, len + 1 + l, depth + 1);
		w->path[len] = '\0';
	}
	closedir(dir);
}

static void walk(struct ktel_attr_names *n)
{
	struct walk w = {.n = n};
	uint64_t truncated = n->st.truncated;
	struct cache *c = &n->cgroups;

	n->st.walks++;
	n->gen++;
	n->name_gen++;
	n->walk_pull = n->pull;
	n->walk_wanted = false;
	snprintf(w.path, sizeof(w.path), "%s", n->root);
	w.root_len = strlen(w.path);
	walk_dir(&w, w.root_len, 0);
	n->walk_ns = n->now_ns;
	n->walked = true;
	/* A whole walk that did not find a named cgroup: it was removed (its
	 * rmdir event, if any, is lost or still to come). */
	for (size_t i = 0; !w.oom && n->st.truncated == truncated && i < c->cap; i++)
		if (c->e[i].used && c->e[i].name && c->e[i].gen != n->gen)
			c->e[i].removed = true;
	prune_cgroups(n, 0);
}

/* ---- life ----------------------------------------------------------------------- */

int ktel_attr_names__new(const struct ktel_attr_names_opts *opts, struct ktel_attr_names **ret,
			 struct ktel_err *err)
{
	struct ktel_attr_names *n = calloc(1, sizeof(*n));
	int rc;

	if (!n)
		return ktel_err_set(err, ENOMEM, "out of memory");
	n->grace_ns = opts && opts->grace_ns ? opts->grace_ns : DEFAULT_GRACE_NS;
	n->max_cgroups = opts && opts->max_cgroups ? opts->max_cgroups : DEFAULT_MAX_CGROUPS;
	n->name_gen = 1; /* never 0, which would say that names may change at any time */
	snprintf(n->mount_root, sizeof(n->mount_root), "/");
	if (opts && opts->cgroup_root) {
		snprintf(n->root, sizeof(n->root), "%s", opts->cgroup_root);
	} else {
		rc = cgroup2_mount(opts ? opts->mountinfo : NULL, n->root, sizeof(n->root),
				   n->mount_root, sizeof(n->mount_root));
		if (rc) {
			free(n);
			return ktel_err_set(err, -rc,
					    "attribution: no cgroup2 mount in %s: cgroup ids "
					    "cannot be named",
					    opts && opts->mountinfo ? opts->mountinfo
								    : "/proc/self/mountinfo");
		}
	}
	*ret = n;
	return 0;
}

void ktel_attr_names__free(struct ktel_attr_names *n)
{
	if (!n)
		return;
	cache_free(&n->cgroups);
	cache_free(&n->users);
	ktel_attr_names__clear_released(n);
	free(n->released);
	free(n);
}

void ktel_attr_names__begin_pull(struct ktel_attr_names *n, uint64_t now_ns)
{
	uint64_t walk_pull = n->walk_pull;

	n->pull++;
	if (now_ns > n->now_ns)
		n->now_ns = now_ns;
	if (!n->root[0])
		return;
	/*
	 * A walk here, before the pull reads the map, leaves the pull its own
	 * walk on a miss, for the cgroups made since. Events were lost: walk
	 * for what they would have said. Without events, removals are seen by
	 * walks: walk four times per grace period so a released cgroup is
	 * found within 1.25 of it. With events, only the grace rule's
	 * releases (removed cgroups whose release is slow to come) are looked
	 * for as often.
	 */
	if (n->walk_wanted ||
	    (!n->events && n->walked && n->now_ns - n->walk_ns >= n->grace_ns / 4)) {
		walk(n);
		n->walk_pull = walk_pull;
	} else if (n->events && n->now_ns - n->prune_ns >= n->grace_ns / 4) {
		prune_cgroups(n, 0);
	}
}

void ktel_attr_names__use_events(struct ktel_attr_names *n, bool on)
{
	n->events = on && n->root[0];
	/* The cgroups made before the events started are found by a walk,
	 * at once rather than at the first miss, so that one removed before
	 * that miss has a name too. */
	if (n->events)
		n->walk_wanted = true;
}

bool ktel_attr_names__events(const struct ktel_attr_names *n)
{
	return n->events;
}

void ktel_attr_names__events_lost(struct ktel_attr_names *n)
{
	if (n->root[0])
		n->walk_wanted = true;
	n->st.event_losses++;
}

/* The name of an event's path (relative to the hierarchy's root) below the
 * mount, into buf; false when the mount does not show it. */
static bool event_name(const struct ktel_attr_names *n, const char *path, char *buf, size_t len)
{
	size_t l = strlen(n->mount_root);

	while (l > 1 && n->mount_root[l - 1] == '/')
		l--;
	if (l > 1) {
		if (strncmp(path, n->mount_root, l) != 0 || (path[l] != '/' && path[l] != '\0'))
			return false;
		path += l;
	}
	ktel_attr_cgroup_name(path, buf, len);
	return true;
}

/*
 * The path of cgroup id below the mount, read from the kernel: the
 * directory opened by its handle (a kernfs handle is the id) and its path
 * read back from /proc/self/fd. Needs CAP_DAC_READ_SEARCH; false when that
 * or anything else fails, when the cgroup is gone, or when the path is not
 * below the mount.
 */
static bool read_path(const struct ktel_attr_names *n, uint64_t id, char *buf, size_t len)
{
	union {
		struct file_handle fh;
		char raw[sizeof(struct file_handle) + sizeof(uint64_t)];
	} h = {.fh = {.handle_bytes = sizeof(uint64_t), .handle_type = FILEID_KERNFS}};
	char link[64];
	size_t root_len = strlen(n->root);
	struct stat st;
	ssize_t got;
	int mfd, fd;
	bool ok = false;

	memcpy(h.fh.f_handle, &id, sizeof(id));
	mfd = open(n->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mfd < 0)
		return false;
	fd = open_by_handle_at(mfd, &h.fh, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(mfd);
	if (fd < 0)
		return false;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	got = readlink(link, buf, len);
	/* The directory the handle opened is the cgroup's (its inode number
	 * is the id), and it still exists: one removed since reads back with
	 * " (deleted)" appended, which is not its path (nor is the path of a
	 * cgroup named so, which the walk names instead). */
	if (got > 0 && (size_t)got < len && fstat(fd, &st) == 0 && (uint64_t)st.st_ino == id) {
		buf[got] = '\0';
		if (has_prefix_suffix(buf, (size_t)got, "", " (deleted)"))
			goto out;
		while (root_len > 1 && n->root[root_len - 1] == '/')
			root_len--;
		ok = strncmp(buf, n->root, root_len) == 0 &&
		     (buf[root_len] == '/' || buf[root_len] == '\0');
		if (ok)
			memmove(buf, buf + root_len, (size_t)got - root_len + 1);
	}
out:
	close(fd);
	return ok;
}

/* Cache name as cgroup id's name, made now (its events name it). */
static void cgroup_named(struct ktel_attr_names *n, uint64_t id, const char *name)
{
	char *copy = strdup(name);
	struct entry *e;

	n->name_gen++;
	if (!copy || cache_put(&n->cgroups, id, copy, n->now_ns))
		return;
	e = cache_find(&n->cgroups, id);
	e->gen = n->gen;
	e->removed = false;
}

/* Name cgroup id, whose mkdir event's path may be cut: by its path read
 * from the kernel, else by the next pull's walk (which finds it unless it
 * is removed by then). An entry a walk made has the whole name already. */
static void name_cut(struct ktel_attr_names *n, uint64_t id)
{
	char path[4096], name[KTEL_ATTR_NAME_MAX + 1];
	struct entry *e = cache_find(&n->cgroups, id);

	n->st.event_paths_cut++;
	if (e && e->name)
		return;
	if (!read_path(n, id, path, sizeof(path))) {
		n->walk_wanted = true;
		return;
	}
	ktel_attr_cgroup_name(path, name, sizeof(name));
	cgroup_named(n, id, name);
}

void ktel_attr_names__cgroup_event(struct ktel_attr_names *n, const struct ktel_cgroup_ev *ev,
				   uint64_t now_ns)
{
	char name[KTEL_ATTR_NAME_MAX + 1];
	struct entry *e;

	if (!n->root[0])
		return;
	if (now_ns > n->now_ns)
		n->now_ns = now_ns;
	n->st.events++;
	e = cache_find(&n->cgroups, ev->id);
	switch (ev->kind) {
	case KTEL_CGROUP_MKDIR:
		if (!ev->path || !event_name(n, ev->path, name, sizeof(name)))
			return;
		/* Bounded like the walk: past the bound a miss walks (and
		 * stops there too), and the id stays unnamed. */
		if (!e && n->cgroups.n >= n->max_cgroups) {
			n->st.truncated++;
			return;
		}
		/* A cut path is only the start of the cgroup's: as a name it
		 * would be another cgroup's, or one no cgroup has. */
		if (ev->path_cut) {
			name_cut(n, ev->id);
			return;
		}
		cgroup_named(n, ev->id, name);
		return;
	case KTEL_CGROUP_RMDIR:
		if (e && !e->removed) {
			e->removed = true;
			e->seen_ns = n->now_ns;
		}
		return;
	case KTEL_CGROUP_RELEASE:
		if (e && !e->released) {
			e->removed = true;
			e->released = true;
			e->released_ns = n->now_ns;
			n->held++;
			n->name_gen++;
		}
		return;
	}
}

void ktel_attr_names__settle(struct ktel_attr_names *n, uint64_t settled_ns)
{
	if (n->held)
		prune_cgroups(n, settled_ns);
}

size_t ktel_attr_names__released(const struct ktel_attr_names *n,
				 const struct ktel_attr_released **ret)
{
	*ret = n->released;
	return n->n_released;
}

void ktel_attr_names__clear_released(struct ktel_attr_names *n)
{
	for (size_t i = 0; i < n->n_released; i++)
		free(n->released[i].name);
	n->n_released = 0;
}

void ktel_attr_names__set_refill(struct ktel_attr_names *n, void (*refill)(void *ctx), void *ctx)
{
	n->refill = refill;
	n->refill_ctx = ctx;
}

const char *ktel_attr_names__cgroup(struct ktel_attr_names *n, uint64_t id, char *buf, size_t len)
{
	struct entry *e = cache_find(&n->cgroups, id);
	size_t n_copy;

	/* Made since the pull's drain: its mkdir waits in the ring. */
	if ((!e || !e->name) && n->events && n->refill && !n->refilling) {
		n->refilling = true;
		n->refill(n->refill_ctx);
		n->refilling = false;
		e = cache_find(&n->cgroups, id);
	}

	if ((!e || !e->name) && n->root[0] && n->walk_pull != n->pull) {
		walk(n);
		e = cache_find(&n->cgroups, id);
	}
	/*
	 * Not found: kept without a name, so that it ages like any id. A
	 * cgroup made and removed between two walks is never found, but its
	 * keys are in the kernel's maps all the same and must be released
	 * (deleted) once it is quiet. A later walk that finds it names it.
	 */
	if (!e && n->root[0])
		n->name_gen++;
	if (!e && n->root[0] && cache_put(&n->cgroups, id, NULL, n->now_ns) == 0) {
		e = cache_find(&n->cgroups, id);
		e->seen_ns = 0; /* no walk found it */
	}
	if (e)
		e->used_ns = n->now_ns;
	if (!e || !e->name) {
		n->st.misses++;
		return NULL;
	}
	if (!len)
		return NULL;
	/* A copy, not snprintf: this runs once per key of every pull. */
	n_copy = strnlen(e->name, len - 1);
	memcpy(buf, e->name, n_copy);
	buf[n_copy] = '\0';
	return buf;
}

uint64_t ktel_attr_names__generation(const struct ktel_attr_names *n)
{
	return n->name_gen;
}

bool ktel_attr_names__cgroup_used(struct ktel_attr_names *n, uint64_t id, uint64_t *hint)
{
	struct cache *c = &n->cgroups;
	struct entry *e = NULL;

	/* The slot of the last call for id, if the entries have not moved
	 * since: no hashing, no probing. */
	if (*hint && *hint <= c->cap && c->e[*hint - 1].used && c->e[*hint - 1].id == id)
		e = &c->e[*hint - 1];
	else if ((e = cache_find(c, id)) != NULL)
		*hint = (uint64_t)(e - c->e) + 1;
	if (!e || !e->name)
		return false;
	e->used_ns = n->now_ns;
	return true;
}

void ktel_attr_names__cgroup_prefetch(const struct ktel_attr_names *n, uint64_t hint)
{
	if (hint && hint <= n->cgroups.cap)
		__builtin_prefetch(&n->cgroups.e[hint - 1], 1);
}

/* The user name of uid, checked like a cgroup name; NULL when none. */
static char *user_name(uint64_t uid)
{
	struct passwd pw, *res = NULL;
	char pwbuf[4096], name[KTEL_ATTR_NAME_MAX + 1];
	size_t i, max;

	if (getpwuid_r((uid_t)uid, &pw, pwbuf, sizeof(pwbuf), &res) != 0 || !res || !res->pw_name ||
	    !res->pw_name[0])
		return NULL;
	max = strlen(res->pw_name);
	if (max > KTEL_ATTR_NAME_MAX)
		max = KTEL_ATTR_NAME_MAX;
	for (i = 0; i < max; i++)
		name[i] = name_char(res->pw_name[i]) ? res->pw_name[i] : '_';
	name[i] = '\0';
	return strdup(name);
}

const char *ktel_attr_names__user(struct ktel_attr_names *n, uint64_t uid, char *buf, size_t len)
{
	struct entry *e;
	char *name;

	if (uid > UINT32_MAX)
		return NULL;
	e = cache_find(&n->users, uid);
	/* A user renamed or added shows up after the grace period. */
	if (!e || n->now_ns - e->seen_ns > n->grace_ns) {
		name = user_name(uid);
		if (e || n->users.n < MAX_USERS) {
			cache_put(&n->users, uid, name, n->now_ns);
		} else {
			/* The cache is full: named, not kept. */
			snprintf(buf, len, "%s", name ? name : "");
			free(name);
			if (!buf[0])
				snprintf(buf, len, "%" PRIu64, uid);
			return buf;
		}
		e = cache_find(&n->users, uid);
	}
	if (e && e->name)
		snprintf(buf, len, "%s", e->name);
	else
		snprintf(buf, len, "%" PRIu64, uid);
	return buf;
}

/*
 * Android's uid ranges (libcutils android_filesystem_config.h): per user
 * 100000 uids; below 10000 system services, 10000-19999 apps, 20000-29999
 * SDK sandboxes, 30000-39999 and 40000-49999 external storage gids,
 * 50000-59999 shared gids, 90000-99999 isolated processes.
 */
const char *ktel_attr_app_name(uint64_t uid, char *buf, size_t len)
{
	uint64_t app = uid % 100000;
	const char *cls;

	if (app < 10000)
		cls = "system";
	else if (app < 20000)
		cls = NULL;
	else if (app < 30000)
		cls = "sdk_sandbox";
	else if (app < 50000)
		cls = "ext_gid";
	else if (app < 60000)
		cls = "shared_gid";
	else if (app >= 90000)
		cls = "isolated";
	else
		cls = "reserved";
	if (cls)
		snprintf(buf, len, "%s", cls);
	else
		snprintf(buf, len, "%" PRIu64, app);
	return buf;
}

const char *ktel_attr_app_class_name(uint64_t uid, char *buf, size_t len)
{
	uint64_t app = uid % 100000;

	if (app >= 10000 && app < 20000) {
		snprintf(buf, len, "app");
		return buf;
	}
	return ktel_attr_app_name(uid, buf, len);
}

const char *ktel_attr_process_name(uint64_t id, char *buf, size_t len)
{
	snprintf(buf, len, "%" PRIu64, id >> 32);
	return buf;
}

/* ---- ids of users, apps and processes ------------------------------------------ */

struct ktel_attr_ids {
	struct cache c;
	uint64_t *gone;
	size_t n_gone, cap_gone;
};

int ktel_attr_ids__new(struct ktel_attr_ids **ret)
{
	struct ktel_attr_ids *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	*ret = t;
	return 0;
}

void ktel_attr_ids__free(struct ktel_attr_ids *t)
{
	if (!t)
		return;
	cache_free(&t->c);
	free(t->gone);
	free(t);
}

int ktel_attr_ids__used(struct ktel_attr_ids *t, uint64_t id, uint64_t now_ns)
{
	struct entry *e = cache_find(&t->c, id);

	if (e) {
		e->used_ns = now_ns;
		return 0;
	}
	return cache_put(&t->c, id, NULL, now_ns);
}

size_t ktel_attr_ids__count(const struct ktel_attr_ids *t)
{
	return t->c.n;
}

size_t ktel_attr_ids__sweep(struct ktel_attr_ids *t,
			    bool (*gone)(void *ctx, uint64_t id, uint64_t used_ns), void *ctx,
			    const uint64_t **ret)
{
	struct cache *c = &t->c;

	t->n_gone = 0;
	for (size_t i = 0; i < c->cap; i++) {
		struct entry *e = &c->e[i];

		if (!e->used || !gone(ctx, e->id, e->used_ns))
			continue;
		if (t->n_gone == t->cap_gone) {
			size_t cap = t->cap_gone ? t->cap_gone * 2 : 64;
			uint64_t *p = realloc(t->gone, cap * sizeof(*p));

			/* Out of memory: kept, swept again later. */
			if (!p)
				break;
			t->gone = p;
			t->cap_gone = cap;
		}
		t->gone[t->n_gone++] = e->id;
		e->used = false;
		c->n--;
	}
	if (t->n_gone)
		cache_rehash(c, c->cap);
	*ret = t->gone;
	return t->n_gone;
}

bool ktel_attr_ids__any(const struct ktel_attr_ids *t, bool (*fn)(void *ctx, uint64_t id),
			void *ctx)
{
	for (size_t i = 0; i < t->c.cap; i++)
		if (t->c.e[i].used && fn(ctx, t->c.e[i].id))
			return true;
	return false;
}

bool ktel_attr_process_alive(const char *proc, uint64_t id)
{
	char path[128], buf[1024], *p;
	unsigned long long start_ticks = 0;
	struct timespec boot, mono;
	uint64_t tgid = id >> 32, thread_s = id & 0xffffffffULL, leader_s, slept_s;
	long hz = sysconf(_SC_CLK_TCK);
	ssize_t len;
	int fd, field;

	if (!tgid || tgid > INT32_MAX)
		return false;
	snprintf(path, sizeof(path), "%s/%" PRIu64 "/stat", proc ? proc : "/proc", tgid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		/* Gone (ENOENT, ESRCH); any other failure keeps it. */
		return errno != ENOENT && errno != ESRCH;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return len < 0 && errno != ESRCH;
	buf[len] = '\0';
	/* The command may hold anything, ')' too: the fields follow the last. */
	p = strrchr(buf, ')');
	if (!p || hz <= 0)
		return true;
	/* starttime is field 22; the state (field 3) follows ") ". */
	for (field = 2; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	if (field != 22 || sscanf(p, "%llu", &start_ticks) != 1)
		return true;
	leader_s = (uint64_t)(start_ticks / (unsigned long long)hz);
	clock_gettime(CLOCK_BOOTTIME, &boot);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	slept_s = boot.tv_sec > mono.tv_sec ? (uint64_t)(boot.tv_sec - mono.tv_sec) : 0;
	/* The thread's start is of the monotonic clock, the leader's of the
	 * boot-time one: at most the time slept so far later; a second for
	 * the rounding down of both. A tgid used again started after the
	 * process of the id ended. */
	return leader_s <= thread_s + slept_s + 1;
}

void ktel_attr_names__stats(const struct ktel_attr_names *n, struct ktel_attr_names_stats *ret)
{
	*ret = n->st;
	ret->cgroups = n->cgroups.n;
}
