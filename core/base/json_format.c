// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The JSON line of a record (json_format.h; the format is documented at the
 * top of json_sink.c). The stream path formats a million lines a second
 * through here, so strings are escaped with a word-at-a-time scan, numbers
 * without printf, and the strings that repeat within a batch are escaped
 * once (struct ktel_json_strs).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "json_format.h"
#include "sink.h"
#include "textbuf.h"

/* Length of a valid UTF-8 sequence at s (2..4), or 0: no overlong form, no
 * surrogate, nothing over U+10FFFF (what a strict parser such as jansson
 * refuses), no sequence the NUL cuts short. */
static int utf8_len(const unsigned char *s)
{
	int n = s[0] >= 0xf0 && s[0] <= 0xf4   ? 4
		: s[0] >= 0xe0 && s[0] <= 0xef ? 3
		: s[0] >= 0xc2 && s[0] <= 0xdf ? 2
					       : 0;

	for (int i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) ||
	    (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f))
		return 0;
	return n;
}

/* Bytes copied as they are inside a JSON string: printable ASCII but '"'
 * and '\\'. */
static bool plain_byte(unsigned char c)
{
	return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
}

#define BYTES8(c) (0x0101010101010101ULL * (c))

/* Some byte of w is 0. */
static uint64_t has_zero8(uint64_t w)
{
	return (w - BYTES8(0x01)) & ~w & BYTES8(0x80);
}

/* Some byte of w is not plain_byte(): < 0x20, >= 0x7f, '"' or '\\'. */
static bool word_needs_escape(uint64_t w)
{
	return ((w - BYTES8(0x20)) & ~w & BYTES8(0x80)) || (w & BYTES8(0x80)) ||
	       has_zero8(w ^ BYTES8(0x7f)) || has_zero8(w ^ BYTES8('"')) ||
	       has_zero8(w ^ BYTES8('\\'));
}

/* The end of the run of plain bytes from s (at most end), 8 at a time. */
static const unsigned char *plain_run(const unsigned char *s, const unsigned char *end)
{
	uint64_t w;

	while (end - s >= 8) {
		memcpy(&w, s, sizeof(w));
		if (word_needs_escape(w))
			break;
		s += 8;
	}
	while (s < end && plain_byte(*s))
		s++;
	return s;
}

/* Worst case of fb_str_at for len bytes: every byte becomes a 6-byte
 * escape, plus the quotes. */
#define STR_MOST(len) (6 * (len) + 2)

/*
 * The JSON string of the len bytes at str (NUL-terminated there), quotes
 * included, at p; returns the end. Invalid UTF-8 bytes become U+FFFD so the
 * line always parses; control characters and DEL are \u00XX.
 */
static char *fb_str_at(char *p, const char *str, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)str, *end = s + len;

	*p++ = '"';
	while (s < end) {
		const unsigned char *run = s;
		int n;

		/* Runs that need no escape: one copy each. */
		s = plain_run(s, end);
		memcpy(p, run, (size_t)(s - run));
		p += s - run;
		if (s == end)
			break;
		if (*s == '"' || *s == '\\') {
			*p++ = '\\';
			*p++ = (char)*s++;
		} else if (*s < 0x20 || *s == 0x7f) {
			memcpy(p, "\\u00", 4);
			p[4] = hex[*s >> 4];
			p[5] = hex[*s & 15];
			p += 6;
			s++;
		} else if ((n = utf8_len(s)) > 0) {
			memcpy(p, s, (size_t)n);
			p += n;
			s += n;
		} else {
			memcpy(p, "\\ufffd", 6);
			p += 6;
			s++;
		}
	}
	*p++ = '"';
	return p;
}

/* The slot a string's pointer is kept in (a multiplicative hash). */
static unsigned strs_slot(const char *str)
{
	return (unsigned)(((uintptr_t)str * 0x9e3779b97f4a7c15ULL) >> 32) &
	       (KTEL_JSON_STRS_SLOTS - 1);
}

/* The kept escaped text of str in c, or NULL (c may be NULL). */
static const char *strs_get(const struct ktel_json_strs *c, const char *str, size_t *ret_len)
{
	unsigned h;

	if (!c)
		return NULL;
	h = strs_slot(str);
	if (c->slot[h].str != str || c->slot[h].gen != c->gen)
		return NULL;
	*ret_len = c->slot[h].len;
	return c->text + c->slot[h].off;
}

/* Keep the escaped text of str (quotes included) when there is room. */
static void strs_put(struct ktel_json_strs *c, const char *str, const char *text, size_t len)
{
	unsigned h;

	if (!c || len > KTEL_JSON_STRS_MAX || c->used + len > sizeof(c->text))
		return;
	h = strs_slot(str);
	memcpy(c->text + c->used, text, len);
	c->slot[h].str = str;
	c->slot[h].gen = c->gen;
	c->slot[h].off = (uint16_t)c->used;
	c->slot[h].len = (uint16_t)len;
	c->used += (uint32_t)len;
}

void ktel_json_strs__reset(struct ktel_json_strs *c)
{
	c->used = 0;
	/* A wrapped generation would revive slots 2^32 batches old. */
	if (++c->gen == 0) {
		memset(c->slot, 0, sizeof(c->slot));
		c->gen = 1;
	}
}

/* The JSON string of str (fb_str_at) at p, with at most `most` bytes of
 * room checked by the caller; kept in c. Returns the end. */
static char *str_at(char *p, struct ktel_json_strs *c, const char *str, size_t len)
{
	char *end = fb_str_at(p, str, len);

	strs_put(c, str, p, (size_t)(end - p));
	return end;
}

/* A JSON string (fb_str_at), from c when kept there; NULL is null. */
static void fb_str(struct ktel_textbuf *b, struct ktel_json_strs *c, const char *str)
{
	const char *kept;
	size_t len;
	char *p;

	if (!str) {
		ktel_textbuf_put(b, "null", 4);
		return;
	}
	if ((kept = strs_get(c, str, &len))) {
		ktel_textbuf_put(b, kept, len);
		return;
	}
	len = strlen(str);
	if ((p = ktel_textbuf_room(b, STR_MOST(len))))
		ktel_textbuf_commit(b, str_at(p, c, str, len));
}

/* ,"key": (no comma when first) with one capacity check; a NULL key is
 * null, as fb_str writes it. */
static void fb_key(struct ktel_textbuf *b, struct ktel_json_strs *c, bool first, const char *key)
{
	const char *kept;
	size_t len;
	char *p;

	if (!key) {
		ktel_textbuf_puts(b, first ? "null:" : ",null:");
		return;
	}
	kept = strs_get(c, key, &len);
	if (!kept)
		len = strlen(key);
	if (!(p = ktel_textbuf_room(b, (kept ? len : STR_MOST(len)) + 2)))
		return;
	if (!first)
		*p++ = ',';
	if (kept) {
		memcpy(p, kept, len);
		p += len;
	} else {
		p = str_at(p, c, key, len);
	}
	*p++ = ':';
	ktel_textbuf_commit(b, p);
}

/*
 * RFC 3339 UTC with nanoseconds. Consecutive records share their second:
 * the date part is formatted once per second (per thread), and a record's
 * end is mostly its start (events): the last text is kept whole.
 */
static void fb_wall(struct ktel_textbuf *b, int64_t ns)
{
	static __thread struct {
		int64_t sec;
		bool valid;
		char text[32];
		size_t len;
		int64_t last_ns;
		bool last_valid;
		char last[48];
		size_t last_len;
	} cache;
	int64_t sec = ns / 1000000000, frac = ns % 1000000000;
	time_t t;
	struct tm tm;
	char *p, *q;

	if (cache.last_valid && cache.last_ns == ns) {
		ktel_textbuf_put(b, cache.last, cache.last_len);
		return;
	}
	if (frac < 0) {
		frac += 1000000000;
		sec--;
	}
	if (!cache.valid || cache.sec != sec) {
		t = (time_t)sec;
		cache.valid = false;
		if (!gmtime_r(&t, &tm) || !(cache.len = strftime(cache.text, sizeof(cache.text),
								 "%Y-%m-%dT%H:%M:%S", &tm))) {
			ktel_textbuf_puts(b, "null");
			return;
		}
		cache.sec = sec;
		cache.valid = true;
	}
	/* "text.fffffffffZ" */
	if (!(p = ktel_textbuf_room(b, cache.len + 13)))
		return;
	q = p;
	*q++ = '"';
	memcpy(q, cache.text, cache.len);
	q += cache.len;
	*q++ = '.';
	q = ktel_fmt_u64_width(q, (uint64_t)frac, 9);
	*q++ = 'Z';
	*q++ = '"';
	if ((size_t)(q - p) <= sizeof(cache.last)) {
		memcpy(cache.last, p, (size_t)(q - p));
		cache.last_len = (size_t)(q - p);
		cache.last_ns = ns;
		cache.last_valid = true;
	}
	ktel_textbuf_commit(b, q);
}

/* Whole seconds since the epoch (floor), a number jq's todate and any
 * epoch-based tool take as is; the string keeps the nanoseconds. */
static void fb_wall_s(struct ktel_textbuf *b, int64_t ns)
{
	int64_t sec = ns / 1000000000;

	if (ns % 1000000000 < 0)
		sec--;
	ktel_textbuf_put_i64(b, sec);
}

static const char *const type_names[] = {
	[KTEL_RECORD_HISTOGRAM] = "histogram",
	[KTEL_RECORD_COUNTER] = "counter",
	[KTEL_RECORD_GAUGE] = "gauge",
	[KTEL_RECORD_EVENT] = "event",
};

static const char *const scheme_names[] = {
	[KTEL_HIST_NONE] = "log2", /* a histogram without a declared scheme */
	[KTEL_HIST_LOG2] = "log2",
	[KTEL_HIST_LOG2_FLOOR] = "log2_floor",
	[KTEL_HIST_LINEAR] = "linear",
};

static void fb_histogram(struct ktel_textbuf *b, const struct ktel_histogram *h)
{
	uint32_t n = h->n_buckets <= KTEL_HIST_BUCKETS ? h->n_buckets : KTEL_HIST_BUCKETS;
	unsigned scheme = h->scheme < KTEL_ARRAY_SIZE(scheme_names) ? h->scheme : KTEL_HIST_LOG2;
	struct ktel_histogram bounded = *h;

	bounded.n_buckets = n;
	ktel_textbuf_printf(b, ",\"histogram\":{\"scheme\":\"%s\"", scheme_names[scheme]);
	if (h->scheme == KTEL_HIST_LINEAR)
		ktel_textbuf_printf(b, ",\"linear_min\":%" PRId64 ",\"linear_step\":%" PRId64,
				    h->linear_min, h->linear_step);
	ktel_textbuf_puts(b, ",\"counts\":[");
	for (uint32_t k = 0; k < n; k++)
		ktel_textbuf_printf(b, "%s%" PRIu64, k ? "," : "", h->counts[k]);
	ktel_textbuf_puts(b, "],\"le\":[");
	for (uint32_t k = 0; k < n; k++) {
		bool inf;
		double le = ktel_hist_upper_bound(&bounded, k, &inf);

		if (k)
			ktel_textbuf_put(b, ",", 1);
		if (inf)
			ktel_textbuf_puts(b, "\"+Inf\"");
		else
			ktel_textbuf_printf(b, "%.17g", le);
	}
	ktel_textbuf_printf(b, "],\"count\":%" PRIu64, ktel_hist_count(&bounded));
	if (h->has_sum)
		ktel_textbuf_printf(b, ",\"sum\":%" PRIu64, h->sum);
	ktel_textbuf_put(b, "}", 1);
}

/* Bytes [off, end) of b written before, again (a ',' first with comma):
 * the raw sections repeat "key":value pairs, and end_ns / end_s mostly
 * repeat start's number. */
static void put_again(struct ktel_textbuf *b, bool comma, size_t off, size_t end)
{
	size_t len = end - off;
	char *p = ktel_textbuf_room(b, len + 1);

	if (!p)
		return;
	if (comma)
		*p++ = ',';
	/* After room(): b->p may have moved. */
	memcpy(p, b->p + off, len);
	ktel_textbuf_commit(b, p + len);
}

/* Where a "key":integer pair was written (end 0: none to repeat). */
struct pair_at {
	size_t off, end;
};

static void fb_dims(struct ktel_textbuf *b, struct ktel_json_strs *c, const struct ktel_record *r)
{
	uint32_t n = r->n_dims <= KTEL_MAX_DIMS ? r->n_dims : KTEL_MAX_DIMS;
	struct pair_at at[KTEL_MAX_DIMS];

	ktel_textbuf_puts(b, ",\"dims\":{");
	for (uint32_t i = 0; i < n; i++) {
		at[i].off = b->len + (i != 0);
		at[i].end = 0;
		fb_key(b, c, i == 0, r->dims[i].name);
		if (r->dims[i].label) {
			fb_str(b, c, r->dims[i].label);
		} else {
			ktel_textbuf_put_i64(b, r->dims[i].value);
			at[i].end = b->len;
		}
	}
	/* Raw numbers only: a derived dim ("device") has none of its own, and
	 * consumers de-duplicate on dims_raw (docs/sinks.md). */
	ktel_textbuf_puts(b, "},\"dims_raw\":{");
	for (uint32_t i = 0, k = 0; i < n; i++) {
		if (r->dims[i].derived)
			continue;
		if (at[i].end) {
			put_again(b, k++ != 0, at[i].off, at[i].end);
			continue;
		}
		fb_key(b, c, k++ == 0, r->dims[i].name);
		ktel_textbuf_put_i64(b, r->dims[i].value);
	}
	ktel_textbuf_put(b, "}", 1);
}

static void fb_field_int(struct ktel_textbuf *b, const struct ktel_event_field *f)
{
	if (f->type == KTEL_FIELD_VALUE_INT)
		ktel_textbuf_put_i64(b, f->i);
	else
		ktel_textbuf_put_u64(b, f->u);
}

static void fb_event(struct ktel_textbuf *b, struct ktel_json_strs *c, const struct ktel_record *r)
{
	uint32_t n = r->event.n_fields <= KTEL_MAX_EVENT_FIELDS ? r->event.n_fields
								: KTEL_MAX_EVENT_FIELDS;
	struct pair_at at[KTEL_MAX_EVENT_FIELDS];
	bool first = true;

	ktel_textbuf_puts(b, ",\"fields\":{");
	for (uint32_t i = 0; i < n; i++) {
		const struct ktel_event_field *f = &r->event.fields[i];

		at[i].off = b->len + (i != 0);
		at[i].end = 0;
		fb_key(b, c, i == 0, f->name);
		if (f->type == KTEL_FIELD_VALUE_STRING) {
			fb_str(b, NULL, f->s);
		} else if (f->label) {
			fb_str(b, c, f->label);
		} else {
			fb_field_int(b, f);
			at[i].end = b->len;
		}
	}
	ktel_textbuf_puts(b, "},\"fields_raw\":{");
	for (uint32_t i = 0; i < n; i++) {
		const struct ktel_event_field *f = &r->event.fields[i];

		if (f->type == KTEL_FIELD_VALUE_STRING)
			continue;
		if (at[i].end) {
			put_again(b, !first, at[i].off, at[i].end);
		} else {
			fb_key(b, c, first, f->name);
			fb_field_int(b, f);
		}
		first = false;
	}
	ktel_textbuf_put(b, "}", 1);
}

/* Nanoseconds since the epoch of a wall-clock time given as its bits
 * (fb_window): signed, as the clock is. */
static void put_wall_ns(struct ktel_textbuf *b, uint64_t ns)
{
	ktel_textbuf_put_i64(b, (int64_t)ns);
}

/* Whole seconds of a wall-clock time given as its bits (fb_window). */
static void put_wall_s(struct ktel_textbuf *b, uint64_t ns)
{
	fb_wall_s(b, (int64_t)ns);
}

/* start_key start end_key end, each number written by put; end repeats
 * start's text when they are equal (an event's window). */
static void fb_window(struct ktel_textbuf *b, const char *start_key, const char *end_key,
		      uint64_t start, uint64_t end, void (*put)(struct ktel_textbuf *, uint64_t))
{
	size_t at, digits_end;

	ktel_textbuf_puts(b, start_key);
	at = b->len;
	put(b, start);
	digits_end = b->len;
	ktel_textbuf_puts(b, end_key);
	if (end == start)
		put_again(b, false, at, digits_end);
	else
		put(b, end);
}

bool ktel_json__append(struct ktel_textbuf *b, struct ktel_json_strs *c,
		       const struct ktel_record *r)
{
	if (r->type < KTEL_RECORD_HISTOGRAM || r->type > KTEL_RECORD_EVENT)
		return false;
	ktel_textbuf_puts(b, "{\"metric\":");
	fb_str(b, c, r->metric);
	ktel_textbuf_puts(b, ",\"atom\":");
	fb_str(b, c, r->atom);
	ktel_textbuf_puts(b, ",\"atom_id\":");
	ktel_textbuf_put_u64(b, r->atom_id);
	ktel_textbuf_puts(b, ",\"unit\":");
	fb_str(b, c, r->unit);
	ktel_textbuf_puts(b, ",\"type\":\"");
	ktel_textbuf_puts(b, type_names[r->type]);
	ktel_textbuf_puts(b, "\"");
	/* Wall clock first, in every form: the bare "_ns" names are what
	 * tools (pandas, jq's todate after a division) read as epoch time. The
	 * CLOCK_BOOTTIME stamps follow under names that say so. */
	fb_window(b, ",\"start_ns\":", ",\"end_ns\":", (uint64_t)r->start_wall_ns,
		  (uint64_t)r->end_wall_ns, put_wall_ns);
	ktel_textbuf_puts(b, ",\"start\":");
	fb_wall(b, r->start_wall_ns);
	ktel_textbuf_puts(b, ",\"end\":");
	fb_wall(b, r->end_wall_ns);
	fb_window(b, ",\"start_s\":", ",\"end_s\":", (uint64_t)r->start_wall_ns,
		  (uint64_t)r->end_wall_ns, put_wall_s);
	fb_window(b, ",\"start_boot_ns\":", ",\"end_boot_ns\":", r->start_boottime_ns,
		  r->end_boottime_ns, ktel_textbuf_put_u64);
	ktel_textbuf_puts(b, ",\"boot_id\":");
	fb_str(b, c, r->boot_id);
	ktel_textbuf_puts(b, ",\"map_id\":");
	ktel_textbuf_put_u64(b, r->map_id);
	ktel_textbuf_puts(b, ",\"seq\":");
	ktel_textbuf_put_u64(b, r->seq);
	fb_dims(b, c, r);
	switch (r->type) {
	case KTEL_RECORD_HISTOGRAM:
		fb_histogram(b, &r->hist.delta);
		break;
	case KTEL_RECORD_COUNTER:
		ktel_textbuf_printf(b, ",\"value\":%" PRIu64 ",\"total\":%" PRIu64,
				    r->counter.delta, r->counter.total);
		break;
	case KTEL_RECORD_GAUGE:
		ktel_textbuf_printf(b, ",\"value\":%" PRId64, r->gauge);
		break;
	case KTEL_RECORD_EVENT:
		fb_event(b, c, r);
		break;
	}
	ktel_textbuf_puts(b, "}\n");
	return true;
}

/* The same line, no batch: every string escaped. */
int ktel_json__format_line(const struct ktel_record *r, char **buf, size_t *len, size_t *cap)
{
	struct ktel_textbuf b = {.p = *buf, .len = *len, .cap = *cap};
	int ret = 0;

	if (!ktel_json__append(&b, NULL, r))
		ret = -EINVAL;
	else if (b.fail)
		ret = -ENOMEM;
	*buf = b.p;
	*cap = b.cap;
	if (!ret)
		*len = b.len;
	return ret;
}
