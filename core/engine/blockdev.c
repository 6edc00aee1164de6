// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "blockdev.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct entry {
	uint32_t major, minor;
	bool used;        /* holds a device */
	bool named;       /* name is valid */
	uint64_t read_ns; /* when sysfs was read */
	uint64_t last_ns; /* last lookup */
	char name[KTEL_BLOCKDEV_NAME_MAX];
};

struct ktel_blockdev_cache {
	char *root;
	uint32_t cap;
	struct ktel_blockdev_stats stats;
	struct entry entries[];
};

/* ---- uevent ------------------------------------------------------------ */

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '+' || c == '-' || c == '/';
}

/* "NAME=..." value of line (len bytes) when it starts with key, else NULL. */
static const char *value_of(const char *line, size_t len, const char *key, size_t *ret_len)
{
	size_t k = strlen(key);

	if (len < k || memcmp(line, key, k) != 0)
		return NULL;
	*ret_len = len - k;
	return line + k;
}

/* A decimal number of at most 10 digits equal to want. */
static bool number_is(const char *v, size_t len, uint32_t want)
{
	uint64_t n = 0;

	if (len == 0 || len > 10)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return false;
		n = n * 10 + (uint64_t)(v[i] - '0');
	}
	return n == want;
}

static int copy_name(const char *v, size_t len, char *out)
{
	if (len == 0 || len >= KTEL_BLOCKDEV_NAME_MAX)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (!name_char(v[i]))
			return -EINVAL;
		out[i] = v[i] == '/' ? '!' : v[i];
	}
	out[len] = '\0';
	return 0;
}

/* One line: 0 (nothing to say), 1 (the name), -EINVAL. */
static int parse_line(const char *line, size_t len, uint32_t major, uint32_t minor, char *name)
{
	const char *v;
	size_t vlen;

	if ((v = value_of(line, len, "DEVNAME=", &vlen)))
		return copy_name(v, vlen, name) ?: 1;
	if ((v = value_of(line, len, "MAJOR=", &vlen)))
		return number_is(v, vlen, major) ? 0 : -EINVAL;
	if ((v = value_of(line, len, "MINOR=", &vlen)))
		return number_is(v, vlen, minor) ? 0 : -EINVAL;
	return 0;
}

int ktel_blockdev_parse_uevent(const char *text, size_t len, uint32_t major, uint32_t minor,
			       char *ret_name)
{
	char name[KTEL_BLOCKDEV_NAME_MAX];
	int found = 0;

	if (len > KTEL_BLOCKDEV_UEVENT_MAX || memchr(text, '\0', len))
		return -EINVAL;
	while (len > 0) {
		const char *nl = memchr(text, '\n', len);
		size_t line = nl ? (size_t)(nl - text) : len;
		int r = parse_line(text, line, major, minor, name);

		if (r < 0 || (r == 1 && found++))
			return -EINVAL;
		text += line + (nl != NULL);
		len -= line + (nl != NULL);
	}
	if (!found)
		return -EINVAL;
	memcpy(ret_name, name, sizeof(name));
	return 0;
}

/* Up to cap bytes of fd into buf; -EFBIG when there is more. */
static ssize_t read_bounded(int fd, char *buf, size_t cap)
{
	size_t n = 0;

	while (n <= cap) {
		ssize_t r = read(fd, buf + n, cap + 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return (ssize_t)n;
		n += (size_t)r;
	}
	return -EFBIG;
}

int ktel_blockdev_read(const char *sysfs_root, uint32_t major, uint32_t minor, char *ret_name)
{
	char path[4096], buf[KTEL_BLOCKDEV_UEVENT_MAX + 1];
	struct stat st;
	ssize_t n;
	int fd, r;

	if (snprintf(path, sizeof(path), "%s/dev/block/%u:%u/uevent", sysfs_root, major, minor) >=
	    (int)sizeof(path))
		return -ENAMETOOLONG;
	/* No blocking open (a FIFO), no final symlink, no tty. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	n = read_bounded(fd, buf, KTEL_BLOCKDEV_UEVENT_MAX);
	close(fd);
	if (n < 0)
		return (int)n;
	r = ktel_blockdev_parse_uevent(buf, (size_t)n, major, minor, ret_name);
	return r;
}

/* ---- cache --------------------------------------------------------------- */

struct ktel_blockdev_cache *ktel_blockdev_cache__new(const char *sysfs_root, uint32_t cap)
{
	struct ktel_blockdev_cache *c;

	if (!sysfs_root || !cap || cap > 65536) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c) + (size_t)cap * sizeof(c->entries[0]));
	if (!c)
		return NULL;
	c->root = strdup(sysfs_root);
	if (!c->root) {
		free(c);
		errno = ENOMEM;
		return NULL;
	}
	c->cap = cap;
	return c;
}

void ktel_blockdev_cache__free(struct ktel_blockdev_cache *c)
{
	if (!c)
		return;
	free(c->root);
	free(c);
}

/* The entry of major:minor, or where to put it (NULL: all in use at now). */
static struct entry *find_slot(struct ktel_blockdev_cache *c, uint32_t major, uint32_t minor,
			       uint64_t now_ns, bool *ret_hit)
{
	struct entry *victim = NULL;

	for (uint32_t i = 0; i < c->cap; i++) {
		struct entry *e = &c->entries[i];

		if (e->used && e->major == major && e->minor == minor) {
			*ret_hit = true;
			return e;
		}
		if (!e->used) {
			if (!victim || victim->used)
				victim = e;
		} else if (e->last_ns != now_ns &&
			   (!victim || (victim->used && e->last_ns < victim->last_ns))) {
			victim = e;
		}
	}
	*ret_hit = false;
	return victim;
}

static void refresh(struct ktel_blockdev_cache *c, struct entry *e, uint64_t now_ns)
{
	c->stats.reads++;
	e->named = ktel_blockdev_read(c->root, e->major, e->minor, e->name) == 0;
	if (!e->named) {
		e->name[0] = '\0';
		c->stats.unresolved++;
	}
	e->read_ns = now_ns;
}

const char *ktel_blockdev_cache__name(struct ktel_blockdev_cache *c, uint32_t major, uint32_t minor,
				      uint64_t now_ns)
{
	bool hit;
	struct entry *e = c ? find_slot(c, major, minor, now_ns, &hit) : NULL;

	if (!e) {
		if (c)
			c->stats.full++;
		return NULL;
	}
	if (!hit) {
		*e = (struct entry){.major = major, .minor = minor, .used = true};
		refresh(c, e, now_ns);
	} else if (e->last_ns != now_ns &&
		   (!e->named || now_ns - e->read_ns >= KTEL_BLOCKDEV_TTL_NS)) {
		/* A miss is asked again at every new time, a name once it is
		 * old; never within one time, the one its names were handed
		 * out at. */
		refresh(c, e, now_ns);
	}
	e->last_ns = now_ns;
	return e->named ? e->name : NULL;
}

const struct ktel_blockdev_stats *ktel_blockdev_cache__stats(const struct ktel_blockdev_cache *c)
{
	return &c->stats;
}
