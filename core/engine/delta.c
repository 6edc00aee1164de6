// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Delta engine: see delta.h for the contract. */
#include "delta.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STATE_MAGIC "KTELDST1"
#define STATE_VERSION 1u
/* A state file larger than this cannot come from save() with sane limits. */
#define STATE_MAX_FILE_SIZE (1ull << 31)

/* One key: its last cumulative values, then the key bytes. */
struct entry {
	struct entry *next;
	uint64_t hash;
	uint64_t gen; /* pull generation that last touched it */
	uint32_t map_id;
	uint16_t n;
	uint16_t key_size;
	uint64_t vals[]; /* n values, then key_size key bytes */
};

struct ktel_delta_metric {
	/* The engine it belongs to: apply, given only the metric, reads the
	 * entry limit there and marks the engine dirty. */
	struct ktel_delta *owner;
	char *name;
	uint32_t map_id; /* map the state belongs to; 0 = none yet */
	uint64_t seq;
	uint64_t gen;
	bool in_pull;
	bool emit_zeros;
	enum ktel_delta_start policy;
	struct entry **buckets;
	size_t n_buckets; /* power of two, or 0 */
	size_t n_entries;
	/* Bytes its entries take in the state file (entry_file_size()), kept
	 * as entries come and go, so a save knows the file's size up front. */
	uint64_t file_bytes;
	uint64_t limit_dropped, resets, forgotten;
};

struct ktel_delta {
	char boot_id[KTEL_DELTA_MAX_BOOT_ID + 1];
	size_t max_entries;
	/* State changed since the last save (values, map ids, keys, seq). */
	bool dirty;
	struct ktel_delta_metric **metrics;
	size_t n_metrics;
};

static const uint8_t *entry_key(const struct entry *e)
{
	return (const uint8_t *)&e->vals[e->n];
}

/* An entry in the state file: map id, key size, value count, key, values. */
static uint64_t entry_file_size(size_t key_size, size_t n)
{
	return 3 * sizeof(uint32_t) + key_size + n * sizeof(uint64_t);
}

static uint64_t hash_key(const void *key, size_t size)
{
	const uint8_t *p = key;
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	for (size_t i = 0; i < size; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static void metric_clear(struct ktel_delta_metric *m)
{
	for (size_t b = 0; b < m->n_buckets; b++) {
		struct entry *e = m->buckets[b], *next;

		for (; e; e = next) {
			next = e->next;
			free(e);
		}
	}
	free(m->buckets);
	m->buckets = NULL;
	m->n_buckets = 0;
	m->n_entries = 0;
	m->file_bytes = 0;
}

static void metric_free(struct ktel_delta_metric *m)
{
	if (!m)
		return;
	metric_clear(m);
	free(m->name);
	free(m);
}

struct ktel_delta *ktel_delta__new(const char *boot_id)
{
	struct ktel_delta *d;

	if (!boot_id || !*boot_id || strlen(boot_id) > KTEL_DELTA_MAX_BOOT_ID) {
		errno = EINVAL;
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	strcpy(d->boot_id, boot_id);
	d->max_entries = KTEL_DELTA_DEFAULT_MAX_ENTRIES;
	return d;
}

void ktel_delta__free(struct ktel_delta *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n_metrics; i++)
		metric_free(d->metrics[i]);
	free(d->metrics);
	free(d);
}

int ktel_delta__set_max_entries(struct ktel_delta *d, size_t max_entries)
{
	if (max_entries == 0)
		return -EINVAL;
	d->max_entries = max_entries;
	return 0;
}

static struct ktel_delta_metric *metric_find(const struct ktel_delta *d, const char *name)
{
	for (size_t i = 0; i < d->n_metrics; i++)
		if (strcmp(d->metrics[i]->name, name) == 0)
			return d->metrics[i];
	return NULL;
}

bool ktel_delta__knows_map(const struct ktel_delta *d, const char *metric, uint32_t map_id)
{
	const struct ktel_delta_metric *m = metric_find(d, metric);

	return m && map_id && m->map_id == map_id;
}

/*
 * Find metric name in d or create it (no state, no map yet). 0, or -E2BIG
 * when d holds KTEL_DELTA_MAX_METRICS metrics already, or -ENOMEM.
 */
static int metric_get(struct ktel_delta *d, const char *name, struct ktel_delta_metric **ret_m)
{
	struct ktel_delta_metric *m = metric_find(d, name), **arr;

	if (m)
		goto found;
	if (d->n_metrics >= KTEL_DELTA_MAX_METRICS)
		return -E2BIG;
	arr = realloc(d->metrics, (d->n_metrics + 1) * sizeof(*arr));
	if (!arr)
		return -ENOMEM;
	d->metrics = arr;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->name = strdup(name);
	if (!m->name) {
		free(m);
		return -ENOMEM;
	}
	m->owner = d;
	d->metrics[d->n_metrics++] = m;
found:
	*ret_m = m;
	return 0;
}

int ktel_delta__set_emit_zeros(struct ktel_delta *d, const char *metric, bool emit_zeros)
{
	struct ktel_delta_metric *m;
	int err = metric_get(d, metric, &m);

	if (err)
		return err;
	m->emit_zeros = emit_zeros;
	return 0;
}

int ktel_delta__begin(struct ktel_delta *d, const char *metric, uint32_t map_id,
		      bool map_created_by_us, struct ktel_delta_metric **ret_m,
		      enum ktel_delta_start *ret_start)
{
	enum ktel_delta_start start;
	struct ktel_delta_metric *m;
	int err;

	if (map_id == 0)
		return -EINVAL;
	err = metric_get(d, metric, &m);
	if (err)
		return err;
	if (m->map_id == map_id)
		start = KTEL_DELTA_START_STATE;
	else if (map_created_by_us)
		start = KTEL_DELTA_START_ZERO;
	else
		start = KTEL_DELTA_START_BASELINE;
	m->map_id = map_id;
	m->policy = start;
	m->gen++;
	m->in_pull = true;
	*ret_m = m;
	if (ret_start)
		*ret_start = start;
	return 0;
}

static int rehash(struct ktel_delta_metric *m)
{
	size_t nb = m->n_buckets ? m->n_buckets * 2 : 64;
	struct entry **b = calloc(nb, sizeof(*b));

	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_buckets; i++) {
		struct entry *e = m->buckets[i], *next;

		for (; e; e = next) {
			next = e->next;
			e->next = b[e->hash & (nb - 1)];
			b[e->hash & (nb - 1)] = e;
		}
	}
	free(m->buckets);
	m->buckets = b;
	m->n_buckets = nb;
	return 0;
}

/* Where key's entry hangs in m (so that it can be replaced), or NULL. */
static struct entry **entry_slot(struct ktel_delta_metric *m, uint64_t h, const void *key,
				 size_t key_size)
{
	struct entry **pe;

	if (!m->n_buckets)
		return NULL;
	for (pe = &m->buckets[h & (m->n_buckets - 1)]; *pe; pe = &(*pe)->next) {
		struct entry *e = *pe;

		if (e->hash == h && e->key_size == key_size &&
		    memcmp(entry_key(e), key, key_size) == 0)
			return pe;
	}
	return NULL;
}

static struct entry *entry_alloc(uint64_t h, const void *key, size_t key_size, size_t n)
{
	struct entry *e = calloc(1, sizeof(*e) + n * sizeof(uint64_t) + key_size);

	if (!e)
		return NULL;
	e->hash = h;
	e->n = n;
	e->key_size = key_size;
	memcpy((uint8_t *)&e->vals[n], key, key_size);
	return e;
}

/* Is m full (max_entries keys)? A key it refuses is counted here, so that
 * both who add keys (a pull, a load) count it the same way. */
static bool limit_refuses(struct ktel_delta_metric *m)
{
	if (m->n_entries < m->owner->max_entries)
		return false;
	m->limit_dropped++;
	return true;
}

/* Add key (not in m, room checked) with n zero values: a key first seen now
 * appeared after the start of the known history (zero, or the state), so
 * all of it is new. 0 with *ret_e, or -ENOMEM with m unchanged. */
static int entry_insert(struct ktel_delta_metric *m, uint64_t h, const void *key, size_t key_size,
			size_t n, struct entry **ret_e)
{
	struct entry *e;

	if (m->n_entries >= m->n_buckets && rehash(m))
		return -ENOMEM;
	e = entry_alloc(h, key, key_size, n);
	if (!e)
		return -ENOMEM;
	e->next = m->buckets[h & (m->n_buckets - 1)];
	m->buckets[h & (m->n_buckets - 1)] = e;
	m->n_entries++;
	m->file_bytes += entry_file_size(key_size, n);
	*ret_e = e;
	return 0;
}

/* The key's value count changed (a new layout): start it over. */
static struct entry *entry_resize(struct ktel_delta_metric *m, struct entry **pe, size_t n)
{
	struct entry *old = *pe, *e;

	e = entry_alloc(old->hash, entry_key(old), old->key_size, n);
	if (!e)
		return NULL;
	m->file_bytes += entry_file_size(old->key_size, n);
	m->file_bytes -= entry_file_size(old->key_size, old->n);
	e->next = old->next;
	e->map_id = old->map_id;
	*pe = e;
	free(old);
	return e;
}

static bool went_down(const struct entry *e, const uint64_t *cur)
{
	for (size_t i = 0; i < e->n; i++)
		if (cur[i] < e->vals[i])
			return true;
	return false;
}

/*
 * Move e on to cur, writing the delta (cur itself after a reset) to
 * ret_delta, and stamp it as seen by this pull of m. ret_delta may be cur:
 * each element is read before it is written. Returns whether any element of
 * the delta is nonzero.
 */
static bool entry_advance(struct ktel_delta_metric *m, struct entry *e, const uint64_t *cur,
			  bool reset, uint64_t *ret_delta)
{
	bool changed = e->map_id != m->map_id, nonzero = false;

	for (size_t i = 0; i < e->n; i++) {
		uint64_t c = cur[i], dv = reset ? c : c - e->vals[i];

		changed |= c != e->vals[i];
		e->vals[i] = c;
		ret_delta[i] = dv;
		nonzero |= dv != 0;
	}
	/* Only a pull that changed something makes the state worth a save. */
	if (changed)
		m->owner->dirty = true;
	e->map_id = m->map_id;
	e->gen = m->gen;
	return nonzero;
}

/*
 * Hot path: every key of every pull. The metric came from begin, so no name
 * is looked up here.
 */
static int apply(struct ktel_delta_metric *m, const struct ktel_delta_reading *in, bool taken,
		 uint64_t *ret_delta)
{
	struct entry **pe, *e;
	bool reset, nonzero;
	uint64_t h;
	int err;

	if (!m->in_pull)
		return -ENOENT;
	if (!in->key_size || in->key_size > KTEL_DELTA_MAX_KEY_SIZE || !in->n ||
	    in->n > KTEL_DELTA_MAX_VALUES)
		return -EINVAL;
	h = hash_key(in->key, in->key_size);
	pe = entry_slot(m, h, in->key, in->key_size);
	if (!pe && limit_refuses(m)) {
		memset(ret_delta, 0, in->n * sizeof(*ret_delta));
		return KTEL_DELTA_REFUSED;
	}
	if (!pe) {
		err = entry_insert(m, h, in->key, in->key_size, in->n, &e);
		if (err)
			return err;
		e->map_id = m->map_id; /* zero in this map is where it started */
		m->owner->dirty = true;
		reset = false;
	} else if ((*pe)->n != in->n) {
		e = entry_resize(m, pe, in->n);
		if (!e)
			return -ENOMEM;
		m->owner->dirty = true;
		reset = true;
	} else {
		e = *pe;
		reset = e->map_id != m->map_id || went_down(e, in->vals);
	}
	nonzero = entry_advance(m, e, in->vals, reset, ret_delta);
	if (taken) {
		/* The key left the map with these values: one made again
		 * under it starts from zero. */
		memset(e->vals, 0, e->n * sizeof(*e->vals));
		m->owner->dirty = true;
	}
	if (m->policy == KTEL_DELTA_START_BASELINE) {
		memset(ret_delta, 0, in->n * sizeof(*ret_delta));
		return KTEL_DELTA_BASELINE;
	}
	if (reset)
		m->resets++;
	if (!nonzero && !m->emit_zeros)
		return KTEL_DELTA_ZERO;
	return reset ? KTEL_DELTA_RESET : KTEL_DELTA_EMIT;
}

int ktel_delta__apply(struct ktel_delta_metric *m, const struct ktel_delta_reading *in,
		      uint64_t *ret_delta)
{
	return apply(m, in, false, ret_delta);
}

int ktel_delta__apply_taken(struct ktel_delta_metric *m, const struct ktel_delta_reading *in,
			    uint64_t *ret_delta)
{
	return apply(m, in, true, ret_delta);
}

int ktel_delta__end(struct ktel_delta *d, const char *metric)
{
	struct ktel_delta_metric *m = metric_find(d, metric);
	int forgotten = 0;

	if (!m || !m->in_pull)
		return -ENOENT;
	for (size_t b = 0; b < m->n_buckets; b++) {
		struct entry **pe = &m->buckets[b];

		while (*pe) {
			struct entry *e = *pe;

			if (e->gen == m->gen) {
				pe = &e->next;
				continue;
			}
			*pe = e->next;
			m->file_bytes -= entry_file_size(e->key_size, e->n);
			free(e);
			m->n_entries--;
			forgotten++;
		}
	}
	m->forgotten += forgotten;
	m->in_pull = false;
	d->dirty |= forgotten > 0;
	return forgotten;
}

int ktel_delta__abort(struct ktel_delta *d, const char *metric)
{
	struct ktel_delta_metric *m = metric_find(d, metric);

	if (!m || !m->in_pull)
		return -ENOENT;
	m->in_pull = false;
	return 0;
}

uint64_t ktel_delta__next_seq(struct ktel_delta *d, const char *metric)
{
	struct ktel_delta_metric *m = metric_find(d, metric);

	if (!m)
		return 0;
	d->dirty = true;
	return ++m->seq;
}

uint64_t ktel_delta__peek_seq(const struct ktel_delta *d, const char *metric)
{
	const struct ktel_delta_metric *m = metric_find(d, metric);

	return m ? m->seq + 1 : 0;
}

int ktel_delta__stats(const struct ktel_delta *d, const char *metric, struct ktel_delta_stats *ret)
{
	const struct ktel_delta_metric *m = metric_find(d, metric);

	if (!m)
		return -ENOENT;
	ret->entries = m->n_entries;
	ret->limit_dropped = m->limit_dropped;
	ret->resets = m->resets;
	ret->forgotten = m->forgotten;
	ret->seq = m->seq;
	ret->map_id = m->map_id;
	return 0;
}

/* ---- state file ---- */

struct file_header {
	char magic[8];
	uint32_t version;
	uint32_t boot_id_len;
	char boot_id[64];
	uint64_t payload_len;
};

/*
 * CRC-32 (IEEE 802.3, as zlib's crc32()), eight bytes per step ("slicing by
 * 8"): a state of 100k keys is ~27 MB, and a byte at a time took longer than
 * the pull that changed it (docs/benchmarks.md, "Pull cost").
 */
static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
		crc_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^
					  crc_table[0][crc_table[t - 1][i] & 0xff];
}

/* Continue a CRC: crc is the value returned for the bytes before (0 to start). */
static uint32_t crc32_update(uint32_t crc, const void *data, size_t len)
{
	const uint8_t *p = data;

	pthread_once(&crc_once, crc_table_init);
	crc = ~crc;
	for (; len >= 8; p += 8, len -= 8) {
		uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
				     (uint32_t)p[3] << 24);
		uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
			      (uint32_t)p[7] << 24;

		crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
		      crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^
		      crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
		      crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
	}
	for (; len; p++, len--)
		crc = crc_table[0][(crc ^ *p) & 0xff] ^ (crc >> 8);
	return ~crc;
}

static uint32_t crc32_ieee(const void *data, size_t len)
{
	return crc32_update(0, data, len);
}

static int write_all(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		len -= w;
	}
	return 0;
}

/*
 * A snapshot is serialized into one buffer of exactly the file's size (known
 * up front from the byte count each metric keeps), its CRC computed 8 bytes
 * a step as it goes: no reallocations, nothing copied twice (the image was
 * grown with realloc and its CRC taken byte by byte before: 132-158 ms of a
 * save at 100k keys). The snapshot must be a copy: the durable sinks may ack
 * a pull after later pulls changed the state (core/daemon/daemon_state.c).
 */
struct wbuf {
	int err;
	uint32_t crc;
	uint64_t written;
	size_t len, cap; /* bytes in p not yet counted; room left at p */
	uint8_t *p;
};

static void wbuf_flush(struct wbuf *b)
{
	if (b->err || !b->len)
		return;
	b->crc = crc32_update(b->crc, b->p, b->len);
	b->written += b->len;
	b->p += b->len;
	b->cap -= b->len;
	b->len = 0;
}

static void put(struct wbuf *b, const void *src, size_t len)
{
	if (b->err)
		return;
	/* More than the counted size: the per-metric counts are wrong. */
	if (len > b->cap - b->len) {
		b->err = -EIO;
		return;
	}
	memcpy(b->p + b->len, src, len);
	b->len += len;
}

#define PUT(b, v) put((b), &(v), sizeof(v))

static uint64_t metric_file_size(const struct ktel_delta_metric *m)
{
	return sizeof(uint32_t) + strlen(m->name) + sizeof(m->map_id) + sizeof(m->seq) +
	       sizeof(uint64_t) + m->file_bytes;
}

static void serialize_metric(struct wbuf *b, const struct ktel_delta_metric *m)
{
	uint32_t name_len = strlen(m->name);
	uint64_t n_entries = m->n_entries;

	PUT(b, name_len);
	put(b, m->name, name_len);
	PUT(b, m->map_id);
	PUT(b, m->seq);
	PUT(b, n_entries);
	for (size_t i = 0; i < m->n_buckets; i++) {
		for (const struct entry *e = m->buckets[i]; e; e = e->next) {
			uint32_t head[3] = {e->map_id, e->key_size, e->n};

			PUT(b, head);
			put(b, entry_key(e), e->key_size);
			put(b, e->vals, e->n * sizeof(uint64_t));
		}
		/* CRC in cache-warm pieces of about 64 KiB. */
		if (b->len >= 64 * 1024)
			wbuf_flush(b);
	}
}

static struct file_header file_header(const struct ktel_delta *d)
{
	struct file_header h = {.version = STATE_VERSION};

	memcpy(h.magic, STATE_MAGIC, sizeof(h.magic));
	h.boot_id_len = strlen(d->boot_id);
	memcpy(h.boot_id, d->boot_id, h.boot_id_len);
	h.payload_len = sizeof(uint32_t);
	for (size_t i = 0; i < d->n_metrics; i++)
		h.payload_len += metric_file_size(d->metrics[i]);
	return h;
}

/* The whole file into b: header, metrics, CRC of everything before it. */
static int serialize(const struct ktel_delta *d, const struct file_header *h, struct wbuf *b)
{
	uint32_t n_metrics = d->n_metrics, crc;

	PUT(b, *h);
	PUT(b, n_metrics);
	for (size_t i = 0; i < d->n_metrics; i++)
		serialize_metric(b, d->metrics[i]);
	wbuf_flush(b);
	if (b->err)
		return b->err;
	/* The sizes kept per metric are what makes the header right. */
	if (b->written != sizeof(*h) + h->payload_len)
		return -EIO;
	crc = b->crc;
	PUT(b, crc);
	wbuf_flush(b);
	return b->err;
}

static int fsync_dir_of(const char *path)
{
	char *copy = strdup(path);
	int fd, ret = 0;

	if (!copy)
		return -ENOMEM;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd))
		ret = -errno;
	if (fd >= 0)
		close(fd);
	free(copy);
	return ret;
}

bool ktel_delta__dirty(const struct ktel_delta *d)
{
	return d->dirty;
}

void ktel_delta__mark_saved(struct ktel_delta *d)
{
	d->dirty = false;
}

int ktel_delta__snapshot(const struct ktel_delta *d, struct ktel_delta_snapshot *ret,
			 struct ktel_err *err)
{
	struct file_header h = file_header(d);
	size_t size = sizeof(h) + h.payload_len + sizeof(uint32_t);
	struct wbuf b = {.cap = size};
	int r;

	b.p = malloc(size);
	ret->data = b.p;
	ret->len = size;
	if (!b.p)
		return ktel_err_set(err, ENOMEM,
				    "cannot build delta state: out of memory "
				    "(%zu bytes)",
				    size);
	r = serialize(d, &h, &b);
	if (r) {
		ktel_delta_snapshot__clear(ret);
		return ktel_err_set(err, -r, "cannot build delta state: %s",
				    r == -EIO ? "its size is not what the engine counted (a bug)"
					      : strerror(-r));
	}
	return 0;
}

void ktel_delta_snapshot__clear(struct ktel_delta_snapshot *s)
{
	free(s->data);
	s->data = NULL;
	s->len = 0;
}

int ktel_delta_snapshot__write(const struct ktel_delta_snapshot *s, const char *path,
			       struct ktel_err *err)
{
	char *tmp = NULL;
	int fd = -1, ret;

	if (asprintf(&tmp, "%s.tmp.XXXXXX", path) < 0)
		return ktel_err_set(err, ENOMEM, "%s: out of memory", path);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		ret = ktel_err_set(err, errno, "%s: cannot create temp file %s: %s", path, tmp,
				   strerror(errno));
		goto out;
	}
	ret = write_all(fd, s->data, s->len);
	if (!ret && fsync(fd))
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	fd = -1;
	if (!ret && rename(tmp, path))
		ret = -errno;
	if (ret) {
		ktel_err_set(err, -ret, "%s: cannot write delta state: %s", path, strerror(-ret));
		unlink(tmp);
		goto out;
	}
	ret = fsync_dir_of(path);
	if (ret)
		ktel_err_set(err, -ret, "%s: cannot fsync its directory: %s", path, strerror(-ret));
out:
	free(tmp);
	return ret;
}

int ktel_delta__save(const struct ktel_delta *d, const char *path, struct ktel_err *err)
{
	struct ktel_delta_snapshot s;
	int ret = ktel_delta__snapshot(d, &s, err);

	if (ret) {
		ktel_err_set(err, err->code, "%s: %s", path, err->msg);
		return ret;
	}
	ret = ktel_delta_snapshot__write(&s, path, err);
	ktel_delta_snapshot__clear(&s);
	return ret;
}

enum ktel_window_standing ktel_delta__window(const struct ktel_delta *d, const char *boot_id,
					     const char *metric, uint32_t map_id, uint64_t seq)
{
	const struct ktel_delta_metric *m;

	if (!boot_id || !metric || strcmp(boot_id, d->boot_id) != 0)
		return KTEL_WINDOW_UNKNOWN;
	m = metric_find(d, metric);
	if (!m || !m->map_id || m->map_id != map_id)
		return KTEL_WINDOW_UNKNOWN;
	return seq > m->seq ? KTEL_WINDOW_AFTER : KTEL_WINDOW_SAVED;
}

/* ---- load: read the file once, parse it aside, then adopt it ---- */

/* A reader over a byte image; every step checks what is left. */
struct rd {
	const uint8_t *p;
	size_t left;
};

/* The next len bytes of r, or NULL when fewer are left. */
static const uint8_t *take(struct rd *r, size_t len)
{
	const uint8_t *p = r->p;

	if (r->left < len)
		return NULL;
	r->p += len;
	r->left -= len;
	return p;
}

static int get(struct rd *r, void *dst, size_t len)
{
	const uint8_t *p = take(r, len);

	if (!p)
		return -EBADMSG;
	memcpy(dst, p, len);
	return 0;
}

#define GET(r, v) get((r), &(v), sizeof(v))

/*
 * One entry into m: map id, key size, value count, key, values. A key over
 * the entry limit is skipped and counted, as a pull would refuse it. 0,
 * -EBADMSG (malformed, or a key twice: not something save writes), -ENOMEM.
 */
static int parse_entry(struct ktel_delta_metric *m, struct rd *r)
{
	const uint8_t *key, *vals;
	uint32_t map_id, ks, n;
	struct entry *e;
	uint64_t h;
	int err;

	if (GET(r, map_id) || GET(r, ks) || GET(r, n))
		return -EBADMSG;
	if (!ks || ks > KTEL_DELTA_MAX_KEY_SIZE || !n || n > KTEL_DELTA_MAX_VALUES)
		return -EBADMSG;
	key = take(r, ks);
	vals = take(r, (size_t)n * sizeof(uint64_t));
	if (!key || !vals)
		return -EBADMSG;
	h = hash_key(key, ks);
	if (entry_slot(m, h, key, ks))
		return -EBADMSG;
	if (limit_refuses(m))
		return 0;
	err = entry_insert(m, h, key, ks, n, &e);
	if (err)
		return err;
	e->map_id = map_id;
	memcpy(e->vals, vals, (size_t)n * sizeof(uint64_t));
	return 0;
}

/* One metric into parsed: name, map id, seq, its entries. 0, -EBADMSG, -ENOMEM. */
static int parse_metric(struct ktel_delta *parsed, struct rd *r)
{
	struct ktel_delta_metric *m;
	uint64_t n_entries;
	uint32_t name_len;
	char name[256];
	int err;

	if (GET(r, name_len) || !name_len || name_len >= sizeof(name) || get(r, name, name_len))
		return -EBADMSG;
	name[name_len] = '\0';
	if (strlen(name) != name_len || metric_find(parsed, name))
		return -EBADMSG;
	err = metric_get(parsed, name, &m);
	if (err)
		return err == -E2BIG ? -EBADMSG : err;
	if (GET(r, m->map_id) || GET(r, m->seq) || GET(r, n_entries))
		return -EBADMSG;
	/* Each entry takes more than a byte: a larger count is a lie. */
	if (n_entries > r->left)
		return -EBADMSG;
	for (uint64_t i = 0; i < n_entries; i++) {
		err = parse_entry(m, r);
		if (err)
			return err;
	}
	return 0;
}

/* The payload (metric count, metrics), which must be used up exactly.
 * 0, -EBADMSG, -ENOMEM. */
static int parse_payload(struct ktel_delta *parsed, const uint8_t *p, size_t len)
{
	struct rd r = {.p = p, .left = len};
	uint32_t n_metrics;
	int err;

	if (GET(&r, n_metrics) || n_metrics > KTEL_DELTA_MAX_METRICS)
		return -EBADMSG;
	for (uint32_t i = 0; i < n_metrics; i++) {
		err = parse_metric(parsed, &r);
		if (err)
			return err;
	}
	return r.left ? -EBADMSG : 0;
}

/* The file as read_image found it. */
struct image {
	uint8_t *p;
	size_t size;
};

/*
 * Is img a whole state file of this boot? Checks the header and the CRC
 * before anything in the payload is believed. 0, or -EBADMSG (truncated,
 * corrupt, another version) or -ESTALE (another boot: its map ids mean
 * nothing now) with why[] saying which.
 */
static int check_image(const struct ktel_delta *d, const struct image *img, char *why,
		       size_t why_size)
{
	struct file_header h;
	uint32_t crc;

	if (img->size < sizeof(h) + sizeof(crc)) {
		snprintf(why, why_size, "truncated (%zu bytes)", img->size);
		return -EBADMSG;
	}
	memcpy(&h, img->p, sizeof(h));
	if (memcmp(h.magic, STATE_MAGIC, sizeof(h.magic)) != 0) {
		snprintf(why, why_size, "not a delta state file (bad magic)");
		return -EBADMSG;
	}
	if (h.version != STATE_VERSION) {
		snprintf(why, why_size, "version %u, expected %u", h.version, STATE_VERSION);
		return -EBADMSG;
	}
	if (h.payload_len != img->size - sizeof(h) - sizeof(crc)) {
		snprintf(why, why_size, "truncated or padded (payload %llu of %zu bytes)",
			 (unsigned long long)h.payload_len, img->size - sizeof(h) - sizeof(crc));
		return -EBADMSG;
	}
	memcpy(&crc, img->p + img->size - sizeof(crc), sizeof(crc));
	if (crc != crc32_ieee(img->p, img->size - sizeof(crc))) {
		snprintf(why, why_size, "checksum mismatch");
		return -EBADMSG;
	}
	if (h.boot_id_len >= sizeof(h.boot_id) || h.boot_id_len != strlen(d->boot_id) ||
	    memcmp(h.boot_id, d->boot_id, h.boot_id_len) != 0) {
		snprintf(why, why_size, "written in another boot (%.*s), map ids are stale",
			 (int)(h.boot_id_len < sizeof(h.boot_id) ? h.boot_id_len : 0), h.boot_id);
		return -ESTALE;
	}
	return 0;
}

/*
 * Parse img into a new engine of d's boot and entry limit. d itself is not
 * touched: a file found bad half-way must leave it as it was. 0 with
 * *ret_parsed (the caller frees it), -EBADMSG or -ESTALE with why[] filled,
 * or -ENOMEM.
 */
static int parse_image(const struct ktel_delta *d, const struct image *img,
		       struct ktel_delta **ret_parsed, char *why, size_t why_size)
{
	struct ktel_delta *parsed;
	int err;

	err = check_image(d, img, why, why_size);
	if (err)
		return err;
	parsed = ktel_delta__new(d->boot_id);
	if (!parsed)
		return -ENOMEM;
	parsed->max_entries = d->max_entries;
	err = parse_payload(parsed, img->p + sizeof(struct file_header),
			    img->size - sizeof(struct file_header) - sizeof(uint32_t));
	if (err) {
		if (err == -EBADMSG)
			snprintf(why, why_size, "malformed payload");
		goto out;
	}
	*ret_parsed = parsed;
	parsed = NULL;
out:
	ktel_delta__free(parsed);
	return err;
}

/*
 * Move every metric's state from src into d (replacing d's for that name).
 * 0, or -E2BIG / -ENOMEM with d unchanged: every target metric is created
 * before any is replaced, so nothing is half-adopted.
 */
static int adopt(struct ktel_delta *d, struct ktel_delta *src)
{
	struct ktel_delta_metric *m;
	int err;

	for (size_t i = 0; i < src->n_metrics; i++) {
		err = metric_get(d, src->metrics[i]->name, &m);
		if (err)
			return err;
	}
	for (size_t i = 0; i < src->n_metrics; i++) {
		struct ktel_delta_metric *s = src->metrics[i];

		m = metric_find(d, s->name);
		metric_clear(m);
		m->buckets = s->buckets;
		m->n_buckets = s->n_buckets;
		m->n_entries = s->n_entries;
		m->file_bytes = s->file_bytes;
		m->map_id = s->map_id;
		m->seq = s->seq;
		m->limit_dropped += s->limit_dropped;
		m->gen = 0;
		m->in_pull = false;
		s->buckets = NULL;
		s->n_buckets = s->n_entries = 0;
		s->file_bytes = 0;
	}
	return 0;
}

/* Read up to len bytes at offset 0 of fd; fewer only at end of file.
 * 0 with *ret_got, or -errno. */
static int pread_full(int fd, void *buf, size_t len, size_t *ret_got)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = pread(fd, (uint8_t *)buf + got, len - got, got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += n;
	}
	*ret_got = got;
	return 0;
}

/*
 * Does the regular file fd start with the state magic? 0 when it does,
 * -EEXIST when not (another program's file, a sink's output, an empty
 * file), -errno when it cannot be read.
 */
static int check_magic(int fd)
{
	char magic[sizeof(STATE_MAGIC) - 1];
	size_t got;
	int err;

	err = pread_full(fd, magic, sizeof(magic), &got);
	if (err)
		return err;
	if (got != sizeof(magic) || memcmp(magic, STATE_MAGIC, sizeof(magic)) != 0)
		return -EEXIST;
	return 0;
}

/*
 * Open path for reading as a state file: fd in *ret_fd and its size in
 * *ret_size. The open neither follows a symlink nor blocks on a FIFO, and
 * only a regular file that starts with the magic passes, so only a
 * recognisable state file is ever read whole or moved aside. 0, or -ENOENT
 * (nothing there), -EEXIST (something that is not a state file: a symlink,
 * not a regular file, an empty file, no magic), other -errno (cannot be
 * read).
 */
static int open_image(const char *path, int *ret_fd, off_t *ret_size)
{
	struct stat st;
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return errno == ELOOP ? -EEXIST : -errno;
	if (fstat(fd, &st)) {
		err = -errno;
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		err = -EEXIST;
		goto fail;
	}
	err = check_magic(fd);
	if (err)
		goto fail;
	*ret_fd = fd;
	*ret_size = st.st_size;
	return 0;
fail:
	close(fd);
	return err;
}

/*
 * Open path (open_image) and read what is there into *ret (the caller
 * frees ret->p). 0, or open_image's errors, -EFBIG (a state file larger
 * than save ever writes), other -errno (cannot be read).
 */
static int read_image(const char *path, struct image *ret)
{
	uint8_t *p = NULL;
	off_t size;
	size_t got;
	int fd, err;

	err = open_image(path, &fd, &size);
	if (err)
		return err;
	if ((unsigned long long)size > STATE_MAX_FILE_SIZE) {
		err = -EFBIG;
		goto out;
	}
	p = malloc(size ? size : 1);
	if (!p) {
		err = -ENOMEM;
		goto out;
	}
	/* The whole file, magic included: the header is parsed from it. */
	err = pread_full(fd, p, size, &got);
	if (err)
		goto out;
	ret->p = p;
	ret->size = got;
	p = NULL;
out:
	free(p);
	close(fd);
	return err;
}

/*
 * A damaged or foreign state file is never trusted. It is moved to
 * "<path>.corrupt-<unix time>" rather than left for the next save to
 * overwrite: someone may want to see what went wrong. Returns code
 * (-EBADMSG or -ESTALE) whether or not the move worked, err saying why the
 * file is not trusted and where it went.
 */
static int set_aside(const char *path, const char *why, int code, struct ktel_err *err)
{
	char *aside;

	if (asprintf(&aside, "%s.corrupt-%lld", path, (long long)time(NULL)) < 0)
		return ktel_err_set(err, -code,
				    "%s: %s; not trusted (out of memory to move it "
				    "aside)",
				    path, why);
	if (rename(path, aside))
		ktel_err_set(err, -code, "%s: %s; not trusted, cannot move it to %s: %s", path, why,
			     aside, strerror(errno));
	else
		ktel_err_set(err, -code, "%s: %s; not trusted, moved to %s, starting empty", path,
			     why, aside);
	free(aside);
	return code;
}

/* What load returns and says when read_image(path) failed with code. */
static int no_image(const char *path, int code, struct ktel_err *err)
{
	switch (code) {
	case -ENOENT:
		return 0; /* no state yet: start empty */
	case -EEXIST:
		return ktel_err_set(err, EEXIST,
				    "%s: exists and is not a delta state file (it "
				    "does not start with the %s header): refusing to use, move or "
				    "overwrite it; point state_file at a path of its own",
				    path, STATE_MAGIC);
	case -EFBIG:
		return set_aside(path, "larger than any state file", -EBADMSG, err);
	default:
		return ktel_err_set(err, -code, "%s: cannot read delta state: %s", path,
				    strerror(-code));
	}
}

/*
 * Three steps: read the file (once), parse it into an engine of its own,
 * and only when all of it is good adopt that into d, so that a bad file
 * leaves d as it was.
 */
int ktel_delta_state_check(const char *path, struct ktel_err *err)
{
	off_t size;
	int fd, ret;

	ret = open_image(path, &fd, &size);
	if (!ret) {
		close(fd);
		return 0;
	}
	/* open_image never says -EFBIG, the one code no_image acts on. */
	return no_image(path, ret, err);
}

int ktel_delta__load(struct ktel_delta *d, const char *path, struct ktel_err *err)
{
	struct ktel_delta *parsed = NULL;
	struct image img = {0};
	char why[160];
	int ret;

	ret = read_image(path, &img);
	if (ret)
		return no_image(path, ret, err);
	ret = parse_image(d, &img, &parsed, why, sizeof(why));
	if (ret == -EBADMSG || ret == -ESTALE) {
		ret = set_aside(path, why, ret, err);
		goto out;
	}
	if (ret) {
		ktel_err_set(err, -ret, "%s: out of memory", path);
		goto out;
	}
	ret = adopt(d, parsed);
	if (ret)
		ktel_err_set(err, -ret, "%s: cannot adopt delta state: %s", path, strerror(-ret));
out:
	ktel_delta__free(parsed);
	free(img.p);
	return ret;
}
