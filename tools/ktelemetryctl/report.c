// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `ktelemetryctl report` (report.h, docs/report.md): read the JSON sink's
 * histogram windows, keep them per metric and key, and draw each key as a
 * heatmap and quantile lines in one HTML page of inline SVG.
 *
 * Reading: lines are split by hand (a NUL or an over-long line is a
 * skipped line, not a cut one), parsed by jansson and checked field by
 * field; the first record of a metric fixes its buckets, and a later one
 * with other bounds is skipped (it cannot share the picture's rows).
 * Windows are de-duplicated by their identity (boot, map, sequence,
 * metric, raw dims), so overlapping files do not count a window twice.
 *
 * Drawing: every key of a metric shares the metric's time axis, rows and
 * colour scale, so keys compare at a glance. A column is a window, drawn
 * from its start to its end, while the windows' columns (at least
 * MIN_COL_W pixels each) do not overlap; otherwise the plot is cut into
 * columns of equal time, each the sum of the windows whose middle falls in
 * it, and the page says so.
 */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <zlib.h>

#include "config.h"
#include "report.h"
#include "utf8.h"

#define EXIT_OK 0
#define EXIT_FAIL 1
#define EXIT_USAGE 2

/* Page geometry, in CSS pixels. */
#define PLOT_W 720
#define ROW_H 12
#define MIN_PLOT_H 60
/* Quantile lines get a dot per column up to this many columns. */
#define MAX_DOTS 120
#define QUANT_H 120
#define MARGIN_L 96
#define MARGIN_R 24
#define MARGIN_T 8
#define MARGIN_B 36
#define MIN_COL_W 2
/* Cells of the whole page, at most: more keys make the columns wider
 * (fewer) instead of the page larger. */
#define CELL_BUDGET 500000
#define LEVELS 8

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_UNIT 32
#define MAX_FILES 256
#define MAX_ROTATED 100
#define MAX_PATTERNS 32
#define READ_CHUNK 65536
/* 9999-12-31T23:59:59Z: later times are no wall clock. */
#define MAX_EPOCH_S 253402300799LL

/* The count colours, lowest first (viridis reversed: light is few, dark
 * many; readable for the common colour blindnesses). */
static const char *const level_colour[LEVELS] = {"#fde725", "#a0da39", "#4ac16d", "#1fa187",
						 "#277f8e", "#365c8d", "#46327e", "#440154"};
#define EMPTY_COLOUR "#e8e8e8" /* a window without a count in the bucket */
#define NONE_COLOUR "#ffffff"  /* no window */

static const struct {
	const char *id, *text;
} skips[KTEL_REPORT_SKIP_N] = {
	[KTEL_REPORT_SKIP_TOO_LONG] = {"too_long", "longer than 1 MiB"},
	[KTEL_REPORT_SKIP_NOT_JSON] = {"not_json", "not a JSON object"},
	[KTEL_REPORT_SKIP_NO_METRIC] = {"no_metric", "no metric name, or one over 256 bytes"},
	[KTEL_REPORT_SKIP_BAD_TIME] = {"bad_time", "no valid start and end time"},
	[KTEL_REPORT_SKIP_BAD_HISTOGRAM] = {"bad_histogram",
					    "histogram malformed (counts, le or count)"},
	[KTEL_REPORT_SKIP_BAD_DIMS] = {"bad_dims", "dims malformed, too many or too long"},
	[KTEL_REPORT_SKIP_BUCKETS_CHANGED] = {"buckets_changed",
					      "buckets or unit differ from the metric's first "
					      "record"},
	[KTEL_REPORT_SKIP_OVER_LIMIT] = {"over_limit",
					 "over the report's limits (64 metrics, 64 keys a metric, "
					 "524288 windows) or out of memory"},
};

/* ---- the model ---------------------------------------------------------------- */

struct win {
	int64_t start_ms, end_ms;
	size_t off; /* its counts: the series' counts + off */
};

struct series {
	char *key;
	struct win *w;
	size_t n, cap;
	uint64_t *counts;
	size_t counts_cap;
	uint64_t total;
};

struct metric {
	char *name, *unit, *scheme;
	size_t nb;
	double le[KTEL_REPORT_MAX_BUCKETS];
	struct series *keys[KTEL_REPORT_MAX_KEYS];
	size_t n_keys;
};

struct file_id {
	dev_t dev;
	ino_t ino;
};

struct ktel_report {
	struct ktel_report_filter f;
	struct metric *m[KTEL_REPORT_MAX_METRICS];
	size_t n_m;
	size_t n_windows;
	/* Window identities seen (hashes; 0 marks a free slot). */
	uint64_t *seen;
	size_t seen_cap, seen_n;
	struct ktel_report_stats st;
	char *files[MAX_FILES];
	struct file_id ids[MAX_FILES];
	size_t n_files;
};

/* One histogram as a record carries it. */
struct hist {
	size_t n;
	uint64_t c[KTEL_REPORT_MAX_BUCKETS];
	double le[KTEL_REPORT_MAX_BUCKETS];
	const char *scheme;
};

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

const char *ktel_report_skip_text(enum ktel_report_skip s)
{
	return (unsigned)s < KTEL_REPORT_SKIP_N ? skips[s].text : "?";
}

const char *ktel_report_skip_id(enum ktel_report_skip s)
{
	return (unsigned)s < KTEL_REPORT_SKIP_N ? skips[s].id : "?";
}

struct ktel_report *ktel_report__new(const struct ktel_report_filter *f)
{
	struct ktel_report *r = calloc(1, sizeof(*r));

	if (r && f)
		r->f = *f;
	return r;
}

static void series_free(struct series *s)
{
	if (!s)
		return;
	free(s->key);
	free(s->w);
	free(s->counts);
	free(s);
}

static void metric_free(struct metric *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n_keys; i++)
		series_free(m->keys[i]);
	free(m->name);
	free(m->unit);
	free(m->scheme);
	free(m);
}

void ktel_report__free(struct ktel_report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_m; i++)
		metric_free(r->m[i]);
	for (size_t i = 0; i < r->n_files; i++)
		free(r->files[i]);
	free(r->seen);
	free(r);
}

const struct ktel_report_stats *ktel_report__stats(const struct ktel_report *r)
{
	return &r->st;
}

void ktel_report__shape(const struct ktel_report *r, size_t *ret_metrics, size_t *ret_keys)
{
	size_t keys = 0;

	for (size_t i = 0; i < r->n_m; i++)
		keys += r->m[i]->n_keys;
	*ret_metrics = r->n_m;
	*ret_keys = keys;
}

/* ---- times ---------------------------------------------------------------------- */

/* n decimal digits at *p into *ret (moving *p); -1 when they are not. */
static int digits(const char **p, int n, int *ret)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if ((*p)[i] < '0' || (*p)[i] > '9')
			return -1;
		v = v * 10 + ((*p)[i] - '0');
	}
	*p += n;
	*ret = v;
	return 0;
}

/*
 * "YYYY-MM-DD" with, optionally, "THH:MM" (or a space for the T), ":SS",
 * ".fraction" (up to 9 digits) and "Z", read as UTC, into epoch ms. Refuses
 * a field out of its range (a day the month does not have included) and
 * years outside 1970..9999.
 */
static int parse_iso(const char *s, int64_t *ret_ms)
{
	struct tm tm = {0}, back;
	int y, mo, d, h = 0, mi = 0, sec = 0, ms = 0;
	time_t t;

	if (digits(&s, 4, &y) || *s++ != '-' || digits(&s, 2, &mo) || *s++ != '-' ||
	    digits(&s, 2, &d))
		return -1;
	if ((*s == 'T' || *s == ' ') && s[1]) {
		s++;
		if (digits(&s, 2, &h) || *s++ != ':' || digits(&s, 2, &mi))
			return -1;
		if (*s == ':' && (s++, digits(&s, 2, &sec)))
			return -1;
		if (*s == '.') {
			int n = 0;

			for (s++; *s >= '0' && *s <= '9'; s++, n++)
				if (n < 3)
					ms = ms * 10 + (*s - '0');
			if (n == 0 || n > 9)
				return -1;
			for (; n < 3; n++)
				ms *= 10;
		}
	}
	if (*s == 'Z')
		s++;
	if (*s || y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 59)
		return -1;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = timegm(&tm);
	if (t == (time_t)-1 || !gmtime_r(&t, &back) || back.tm_mday != d)
		return -1;
	*ret_ms = (int64_t)t * 1000 + ms;
	return 0;
}

int ktel_report_parse_when(const char *text, int64_t *ret_ms, bool *ret_rel)
{
	uint64_t dur;
	int64_t ms;
	char *end;

	if (!text || !*text)
		return -EINVAL;
	if (strspn(text, "0123456789") == strlen(text)) {
		long long s;

		errno = 0;
		s = strtoll(text, &end, 10);
		if (errno || s > MAX_EPOCH_S)
			return -EINVAL;
		*ret_ms = s * 1000;
		*ret_rel = false;
		return 0;
	}
	if (parse_iso(text, &ms) == 0) {
		*ret_ms = ms;
		*ret_rel = false;
		return 0;
	}
	if (ktel_parse_duration(text, &dur) == 0 && dur <= (uint64_t)MAX_EPOCH_S * 1000) {
		*ret_ms = (int64_t)dur;
		*ret_rel = true;
		return 0;
	}
	return -EINVAL;
}

/* A record's start or end in epoch ms: the string (nanoseconds kept) when
 * it reads, else the whole seconds. */
static int record_time(const json_t *j, const char *iso_key, const char *s_key, int64_t *ret_ms)
{
	const char *iso = json_string_value(json_object_get(j, iso_key));
	const json_t *s = json_object_get(j, s_key);

	if (iso && parse_iso(iso, ret_ms) == 0)
		return 0;
	if (json_is_integer(s) && json_integer_value(s) >= 0 &&
	    json_integer_value(s) <= MAX_EPOCH_S) {
		*ret_ms = (int64_t)json_integer_value(s) * 1000;
		return 0;
	}
	return -1;
}

/* ---- one record ------------------------------------------------------------------- */

/* A bucket bound of "le": a finite number, or "+Inf" (last only). */
static int bound(const json_t *v, bool last, double *ret)
{
	const char *s = json_string_value(v);

	if (s && last && strcmp(s, "+Inf") == 0) {
		*ret = INFINITY;
		return 0;
	}
	if (!json_is_number(v) || !isfinite(json_number_value(v)))
		return -1;
	*ret = json_number_value(v);
	return 0;
}

/* The histogram object of a record into h; -1 when malformed: counts and
 * le of one length (1..64), counts non-negative integers, bounds
 * ascending, "count" (when there) their sum. */
static int parse_hist(const json_t *o, struct hist *h)
{
	const json_t *counts = json_object_get(o, "counts"), *le = json_object_get(o, "le");
	const json_t *count = json_object_get(o, "count");
	uint64_t sum = 0;

	h->n = json_array_size(counts);
	h->scheme = json_string_value(json_object_get(o, "scheme"));
	if (!json_is_object(o) || !json_is_array(counts) || h->n < 1 ||
	    h->n > KTEL_REPORT_MAX_BUCKETS || json_array_size(le) != h->n)
		return -1;
	if (h->scheme && strlen(h->scheme) > 16)
		return -1;
	for (size_t k = 0; k < h->n; k++) {
		const json_t *c = json_array_get(counts, k);

		if (!json_is_integer(c) || json_integer_value(c) < 0 ||
		    bound(json_array_get(le, k), k + 1 == h->n, &h->le[k]) ||
		    (k && !(h->le[k] > h->le[k - 1])))
			return -1;
		h->c[k] = (uint64_t)json_integer_value(c);
		sum = sat_add(sum, h->c[k]);
	}
	if (count && (!json_is_integer(count) || (uint64_t)json_integer_value(count) != sum))
		return -1;
	return 0;
}

/* A dims value as text: a string as it is, a number in decimal, a
 * boolean or null by name; -1 for an object or array. */
static int dim_text(const json_t *v, char *buf, size_t len)
{
	if (json_is_string(v))
		return snprintf(buf, len, "%s", json_string_value(v)) < (int)len ? 0 : -1;
	if (json_is_integer(v))
		snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else if (json_is_real(v))
		snprintf(buf, len, "%.17g", json_real_value(v));
	else if (json_is_boolean(v) || json_is_null(v))
		snprintf(buf, len, "%s",
			 json_is_null(v)   ? "null"
			 : json_is_true(v) ? "true"
					   : "false");
	else
		return -1;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The key of a record's dims: "name=value, ..." sorted by name, "(all)"
 * without dims; -1 when dims is no object, has too many entries, or the
 * text would be over KTEL_REPORT_MAX_KEY. */
static int key_text(const json_t *dims, char *buf, size_t len)
{
	const char *names[KTEL_REPORT_MAX_DIMS];
	size_t n = 0, used = 0;
	const char *name;
	json_t *v;

	if (!dims || json_object_size(dims) == 0) {
		snprintf(buf, len, "(all)");
		return json_is_object(dims) || !dims ? 0 : -1;
	}
	if (!json_is_object(dims) || json_object_size(dims) > KTEL_REPORT_MAX_DIMS)
		return -1;
	json_object_foreach((json_t *)dims, name, v)
		names[n++] = name;
	qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n; i++) {
		char val[KTEL_REPORT_MAX_KEY];
		int w;

		if (dim_text(json_object_get(dims, names[i]), val, sizeof(val)))
			return -1;
		w = snprintf(buf + used, len - used, "%s%s=%s", i ? ", " : "", names[i], val);
		if (w < 0 || (size_t)w >= len - used)
			return -1;
		used += (size_t)w;
	}
	return 0;
}

/* FNV-1a of s and its NUL, continuing from h. */
static uint64_t fnv(uint64_t h, const char *s)
{
	do {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ULL;
	} while (*s++);
	return h;
}

/* The identity of a window (boot_id, map_id, seq, metric, raw dims) as a
 * hash; 0 when the record lacks one (then it is never a duplicate). */
static uint64_t window_id(const json_t *j, const char *metric)
{
	const char *boot = json_string_value(json_object_get(j, "boot_id"));
	const json_t *map = json_object_get(j, "map_id"), *seq = json_object_get(j, "seq");
	const json_t *raw = json_object_get(j, "dims_raw");
	char nums[64], *dump;
	uint64_t h = 0xcbf29ce484222325ULL;

	if (!boot || !json_is_integer(map) || !json_is_integer(seq))
		return 0;
	snprintf(nums, sizeof(nums), "%" JSON_INTEGER_FORMAT " %" JSON_INTEGER_FORMAT,
		 json_integer_value(map), json_integer_value(seq));
	dump = json_dumps(raw ? raw : json_object_get(j, "dims"),
			  JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	h = fnv(fnv(fnv(fnv(h, boot), nums), metric), dump ? dump : "");
	free(dump);
	return h ? h : 1;
}

/* Is id in the seen set? */
static bool seen_has(const struct ktel_report *r, uint64_t id)
{
	if (!id || !r->seen_cap)
		return false;
	for (size_t i = id & (r->seen_cap - 1);; i = (i + 1) & (r->seen_cap - 1)) {
		if (r->seen[i] == id)
			return true;
		if (!r->seen[i])
			return false;
	}
}

/* Add id to the seen set (kept at most half full). */
static void seen_add(struct ktel_report *r, uint64_t id)
{
	size_t i;

	if (!id)
		return;
	if ((r->seen_n + 1) * 2 > r->seen_cap) {
		size_t cap = r->seen_cap ? r->seen_cap * 2 : 1024;
		uint64_t *s = calloc(cap, sizeof(*s));

		/* Without room a later copy is counted twice: no worse. */
		if (!s)
			return;
		for (size_t k = 0; k < r->seen_cap; k++) {
			if (!r->seen[k])
				continue;
			for (i = r->seen[k] & (cap - 1); s[i]; i = (i + 1) & (cap - 1))
				;
			s[i] = r->seen[k];
		}
		free(r->seen);
		r->seen = s;
		r->seen_cap = cap;
	}
	for (i = id & (r->seen_cap - 1); r->seen[i]; i = (i + 1) & (r->seen_cap - 1))
		;
	r->seen[i] = id;
	r->seen_n++;
}

static bool metric_wanted(const struct ktel_report *r, const char *name)
{
	if (!r->f.n_metrics)
		return true;
	for (size_t i = 0; i < r->f.n_metrics; i++)
		if (fnmatch(r->f.metrics[i], name, 0) == 0)
			return true;
	return false;
}

/* The metric named name, made with h's buckets when new; NULL with *ret_skip. */
static struct metric *metric_for(struct ktel_report *r, const char *name, const char *unit,
				 const struct hist *h, enum ktel_report_skip *ret_skip)
{
	struct metric *m;

	for (size_t i = 0; i < r->n_m; i++) {
		m = r->m[i];
		if (strcmp(m->name, name))
			continue;
		if (m->nb != h->n || memcmp(m->le, h->le, h->n * sizeof(double)) ||
		    strcmp(m->unit, unit)) {
			*ret_skip = KTEL_REPORT_SKIP_BUCKETS_CHANGED;
			return NULL;
		}
		return m;
	}
	*ret_skip = KTEL_REPORT_SKIP_OVER_LIMIT;
	if (r->n_m == KTEL_REPORT_MAX_METRICS || !(m = calloc(1, sizeof(*m))))
		return NULL;
	m->name = strdup(name);
	m->unit = strdup(unit);
	m->scheme = strdup(h->scheme ? h->scheme : "log2");
	if (!m->name || !m->unit || !m->scheme) {
		metric_free(m);
		return NULL;
	}
	m->nb = h->n;
	memcpy(m->le, h->le, h->n * sizeof(double));
	r->m[r->n_m++] = m;
	return m;
}

static struct series *series_for(struct metric *m, const char *key)
{
	struct series *s;

	for (size_t i = 0; i < m->n_keys; i++)
		if (strcmp(m->keys[i]->key, key) == 0)
			return m->keys[i];
	if (m->n_keys == KTEL_REPORT_MAX_KEYS || !(s = calloc(1, sizeof(*s))))
		return NULL;
	if (!(s->key = strdup(key))) {
		free(s);
		return NULL;
	}
	m->keys[m->n_keys++] = s;
	return s;
}

/* Append a window to s; -1 when out of memory. */
static int series_add(struct series *s, size_t nb, const struct hist *h, int64_t start, int64_t end)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		struct win *w = realloc(s->w, cap * sizeof(*w));

		if (!w)
			return -1;
		s->w = w;
		s->cap = cap;
	}
	if ((s->n + 1) * nb > s->counts_cap) {
		size_t cap = s->counts_cap ? s->counts_cap * 2 : 16 * nb;
		uint64_t *c = realloc(s->counts, cap * sizeof(*c));

		if (!c)
			return -1;
		s->counts = c;
		s->counts_cap = cap;
	}
	s->w[s->n] = (struct win){.start_ms = start, .end_ms = end, .off = s->n * nb};
	memcpy(s->counts + s->n * nb, h->c, nb * sizeof(*h->c));
	s->n++;
	return 0;
}

/* The record j, a JSON object: kept or counted; returns the skip reason,
 * or -1 when the line is not skipped. */
static int take_record(struct ktel_report *r, const json_t *j)
{
	const char *name = json_string_value(json_object_get(j, "metric"));
	const char *type = json_string_value(json_object_get(j, "type"));
	const char *unit = json_string_value(json_object_get(j, "unit"));
	const json_t *histogram = json_object_get(j, "histogram");
	enum ktel_report_skip skip;
	char key[KTEL_REPORT_MAX_KEY + 1];
	int64_t start, end;
	struct metric *m;
	struct series *s;
	struct hist h;
	uint64_t id;

	if (!name || !*name || strlen(name) > KTEL_REPORT_MAX_NAME)
		return KTEL_REPORT_SKIP_NO_METRIC;
	if (type ? strcmp(type, "histogram") != 0 : !histogram) {
		r->st.other++;
		return -1;
	}
	if (!metric_wanted(r, name)) {
		r->st.filtered++;
		return -1;
	}
	if (record_time(j, "start", "start_s", &start) || record_time(j, "end", "end_s", &end) ||
	    end < start)
		return KTEL_REPORT_SKIP_BAD_TIME;
	if ((r->f.since_set && !r->f.since_rel && end <= r->f.since_ms) ||
	    (r->f.until_set && !r->f.until_rel && start >= r->f.until_ms)) {
		r->st.filtered++;
		return -1;
	}
	if (parse_hist(histogram, &h))
		return KTEL_REPORT_SKIP_BAD_HISTOGRAM;
	if (key_text(json_object_get(j, "dims"), key, sizeof(key)))
		return KTEL_REPORT_SKIP_BAD_DIMS;
	if (!unit || strlen(unit) > MAX_UNIT)
		unit = "";
	id = window_id(j, name);
	if (seen_has(r, id)) {
		r->st.duplicates++;
		return -1;
	}
	m = metric_for(r, name, unit, &h, &skip);
	if (!m)
		return skip;
	if (r->n_windows == KTEL_REPORT_MAX_WINDOWS || !(s = series_for(m, key)) ||
	    series_add(s, m->nb, &h, start, end))
		return KTEL_REPORT_SKIP_OVER_LIMIT;
	r->n_windows++;
	seen_add(r, id);
	return -1;
}

static void skipped(struct ktel_report *r, enum ktel_report_skip why, const char *file,
		    uint64_t lineno)
{
	if (!r->st.skip[why]++)
		snprintf(r->st.first[why], sizeof(r->st.first[why]), "%s:%" PRIu64,
			 file ? file : "input", lineno);
	r->st.skipped++;
}

void ktel_report__add_line(struct ktel_report *r, const char *line, size_t len, const char *file,
			   uint64_t lineno)
{
	json_t *j;
	int why;

	/* Blank lines (a trailing "\r\n" too) are no records. */
	while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
		len--;
	if (!len)
		return;
	r->st.lines++;
	if (len > KTEL_REPORT_MAX_LINE) {
		skipped(r, KTEL_REPORT_SKIP_TOO_LONG, file, lineno);
		return;
	}
	j = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	why = json_is_object(j) ? take_record(r, j) : KTEL_REPORT_SKIP_NOT_JSON;
	if (why >= 0)
		skipped(r, (enum ktel_report_skip)why, file, lineno);
	json_decref(j);
}

/* ---- files --------------------------------------------------------------------------- */

/* Has the file of st been read? Remember it (with its name) when not. */
static bool read_before(struct ktel_report *r, const struct stat *st, const char *path)
{
	for (size_t i = 0; i < r->n_files; i++)
		if (r->ids[i].dev == st->st_dev && r->ids[i].ino == st->st_ino)
			return true;
	if (r->n_files < MAX_FILES && (r->files[r->n_files] = strdup(path))) {
		r->ids[r->n_files].dev = st->st_dev;
		r->ids[r->n_files].ino = st->st_ino;
		r->n_files++;
	}
	return false;
}

/* The lines of gz, split by hand: a line over the bound is skipped whole. */
static int read_lines(struct ktel_report *r, gzFile gz, const char *path, struct ktel_err *err)
{
	char *line = malloc(KTEL_REPORT_MAX_LINE), *chunk = malloc(READ_CHUNK);
	size_t len = 0;
	uint64_t lineno = 0;
	bool too_long = false;
	int n, ret = 0;

	if (!line || !chunk) {
		ret = ktel_err_set(err, ENOMEM, "%s: out of memory", path);
		goto out;
	}
	while ((n = gzread(gz, chunk, READ_CHUNK)) > 0) {
		for (const char *p = chunk, *end = chunk + n; p < end;) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			size_t take = (size_t)((nl ? nl : end) - p);

			if (!too_long && take <= KTEL_REPORT_MAX_LINE - len) {
				memcpy(line + len, p, take);
				len += take;
			} else {
				too_long = true;
			}
			if (!nl)
				break;
			p = nl + 1;
			lineno++;
			if (too_long) {
				r->st.lines++;
				skipped(r, KTEL_REPORT_SKIP_TOO_LONG, path, lineno);
			} else {
				ktel_report__add_line(r, line, len, path, lineno);
			}
			len = 0;
			too_long = false;
		}
	}
	/* A last line without its newline (a file being written) is read
	 * too: a torn one is then skipped as not JSON, and counted. */
	if (len || too_long) {
		lineno++;
		if (too_long) {
			r->st.lines++;
			skipped(r, KTEL_REPORT_SKIP_TOO_LONG, path, lineno);
		} else {
			ktel_report__add_line(r, line, len, path, lineno);
		}
	}
	if (n < 0) {
		int e;
		const char *msg = gzerror(gz, &e);

		ret = ktel_err_set(err, EIO, "%s: read failed after line %" PRIu64 ": %s", path,
				   lineno, e == Z_ERRNO ? strerror(errno) : msg);
	}
out:
	free(line);
	free(chunk);
	return ret;
}

int ktel_report__read_file(struct ktel_report *r, const char *path, struct ktel_err *err)
{
	bool std_in = strcmp(path, "-") == 0;
	int fd = std_in ? dup(STDIN_FILENO) : open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	gzFile gz;
	int ret;

	if (fd < 0)
		return ktel_err_set(err, errno, "%s: cannot open: %s", path, strerror(errno));
	if (fstat(fd, &st)) {
		ret = ktel_err_set(err, errno, "%s: %s", path, strerror(errno));
		close(fd);
		return ret;
	}
	if (S_ISDIR(st.st_mode)) {
		close(fd);
		return ktel_err_set(err, EISDIR, "%s: is a directory", path);
	}
	if (!std_in && read_before(r, &st, path)) {
		close(fd);
		return 0;
	}
	if (std_in && r->n_files < MAX_FILES && (r->files[r->n_files] = strdup("(stdin)")))
		r->n_files++;
	gz = gzdopen(fd, "rb");
	if (!gz) {
		close(fd);
		return ktel_err_set(err, ENOMEM, "%s: cannot open: out of memory", path);
	}
	ret = read_lines(r, gz, path, err);
	gzclose(gz);
	return ret;
}

/* ---- preparing the picture ---------------------------------------------------- */

static int cmp_win(const void *a, const void *b)
{
	const struct win *x = a, *y = b;

	if (x->start_ms != y->start_ms)
		return x->start_ms < y->start_ms ? -1 : 1;
	return (x->end_ms > y->end_ms) - (x->end_ms < y->end_ms);
}

static int cmp_series(const void *a, const void *b)
{
	const struct series *x = *(const struct series *const *)a;
	const struct series *y = *(const struct series *const *)b;

	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	return strcmp(x->key, y->key);
}

static int cmp_metric(const void *a, const void *b)
{
	return strcmp((*(const struct metric *const *)a)->name,
		      (*(const struct metric *const *)b)->name);
}

/* Resolve the relative bounds against the newest window, drop what falls
 * outside, drop keys and metrics left empty, sort windows by time, keys by
 * their count (most first), metrics by name. */
static void prepare(struct ktel_report *r)
{
	int64_t newest = INT64_MIN, since = INT64_MIN, until = INT64_MAX;
	size_t n_m = 0;

	for (size_t i = 0; i < r->n_m; i++)
		for (size_t k = 0; k < r->m[i]->n_keys; k++)
			for (size_t w = 0; w < r->m[i]->keys[k]->n; w++)
				if (r->m[i]->keys[k]->w[w].end_ms > newest)
					newest = r->m[i]->keys[k]->w[w].end_ms;
	/* A relative bound needs a newest window; with none nothing is kept
	 * anyway. */
	if (r->f.since_set && (!r->f.since_rel || newest != INT64_MIN))
		since = r->f.since_rel ? newest - r->f.since_ms : r->f.since_ms;
	if (r->f.until_set && (!r->f.until_rel || newest != INT64_MIN))
		until = r->f.until_rel ? newest - r->f.until_ms : r->f.until_ms;
	r->st.windows = 0;
	for (size_t i = 0; i < r->n_m; i++) {
		struct metric *m = r->m[i];
		size_t n_keys = 0;

		for (size_t k = 0; k < m->n_keys; k++) {
			struct series *s = m->keys[k];
			size_t n = 0;

			s->total = 0;
			for (size_t w = 0; w < s->n; w++) {
				if (s->w[w].end_ms <= since || s->w[w].start_ms >= until) {
					r->st.filtered++;
					continue;
				}
				for (size_t b = 0; b < m->nb; b++)
					s->total = sat_add(s->total, s->counts[s->w[w].off + b]);
				s->w[n++] = s->w[w];
			}
			s->n = n;
			r->st.windows += n;
			if (!n) {
				series_free(s);
				continue;
			}
			qsort(s->w, s->n, sizeof(*s->w), cmp_win);
			m->keys[n_keys++] = s;
		}
		m->n_keys = n_keys;
		if (!n_keys) {
			metric_free(m);
			continue;
		}
		qsort(m->keys, m->n_keys, sizeof(*m->keys), cmp_series);
		r->m[n_m++] = m;
	}
	r->n_m = n_m;
	qsort(r->m, r->n_m, sizeof(*r->m), cmp_metric);
}

/* One column of a heatmap: a window, or the windows of an equal stretch. */
struct col {
	int px0, px1;
	int64_t start_ms, end_ms;
	uint64_t windows;
};

struct cols {
	struct col *c;
	uint64_t *counts; /* nb per column */
	size_t n;
	bool binned;
	int64_t bin_ms;
};

/* The metric's shared axes. */
struct axes {
	int64_t t0, t1;
	size_t lo, hi; /* bucket rows drawn, lowest and highest */
	int col_w, row_h;
	uint64_t thr[LEVELS]; /* lowest count of each colour level */
	unsigned levels;
};

static int xpos(const struct axes *a, int64_t t)
{
	return (int)floor((double)(t - a->t0) * PLOT_W / (double)(a->t1 - a->t0));
}

/* The pixels [*ret_px0, *ret_px1) of a window's column: at least col_w
 * wide, inside the plot. Both ends are rounded down alike, so windows that
 * follow each other get columns that do too. */
static void win_px(const struct axes *a, const struct win *w, int *ret_px0, int *ret_px1)
{
	int px0 = xpos(a, w->start_ms), px1 = xpos(a, w->end_ms);

	px0 = px0 > PLOT_W - a->col_w ? PLOT_W - a->col_w : px0;
	px1 = px1 < px0 + a->col_w ? px0 + a->col_w : px1 > PLOT_W ? PLOT_W : px1;
	*ret_px0 = px0;
	*ret_px1 = px1;
}

/* The columns of s: one per window while the windows' columns (col_w
 * pixels at least) do not overlap, else equal stretches of time. -1 when
 * out of memory. */
static int make_cols(const struct series *s, size_t nb, const struct axes *a, struct cols *ret)
{
	size_t nbins = (size_t)(PLOT_W / a->col_w), n = 0;
	int prev = -1;
	bool overlap = false;
	struct cols c = {0};

	for (size_t w = 0; w < s->n && !overlap; w++) {
		int px0, px1;

		win_px(a, &s->w[w], &px0, &px1);
		overlap = px0 < prev;
		prev = px1;
	}
	c.binned = overlap;
	c.n = overlap ? nbins : s->n;
	c.bin_ms = (a->t1 - a->t0 + (int64_t)nbins - 1) / (int64_t)nbins;
	c.c = calloc(c.n, sizeof(*c.c));
	c.counts = calloc(c.n * nb, sizeof(*c.counts));
	if (!c.c || !c.counts) {
		free(c.c);
		free(c.counts);
		return -1;
	}
	for (size_t w = 0; w < s->n; w++) {
		const struct win *win = &s->w[w];
		size_t i = w;
		struct col *col;

		if (overlap) {
			int64_t mid = win->start_ms + (win->end_ms - win->start_ms) / 2;

			i = (size_t)((mid - a->t0) / (c.bin_ms ? c.bin_ms : 1));
			i = i >= nbins ? nbins - 1 : i;
		}
		col = &c.c[i];
		if (!col->windows || win->start_ms < col->start_ms)
			col->start_ms = win->start_ms;
		if (!col->windows || win->end_ms > col->end_ms)
			col->end_ms = win->end_ms;
		col->windows++;
		for (size_t b = 0; b < nb; b++)
			c.counts[i * nb + b] = sat_add(c.counts[i * nb + b],
						       s->counts[win->off + b]);
	}
	/* Pixels; binned columns that got no window are dropped. */
	for (size_t i = 0; i < c.n; i++) {
		struct col *col = &c.c[i];

		if (!col->windows)
			continue;
		if (overlap) {
			col->px0 = (int)i * a->col_w;
			col->px1 = col->px0 + a->col_w;
		} else {
			win_px(a, &(struct win){.start_ms = col->start_ms, .end_ms = col->end_ms},
			       &col->px0, &col->px1);
		}
		if (n != i) {
			c.c[n] = *col;
			memcpy(c.counts + n * nb, c.counts + i * nb, nb * sizeof(*c.counts));
		}
		n++;
	}
	c.n = n;
	*ret = c;
	return 0;
}

/* The colour thresholds for counts up to max: LEVELS steps (fewer when
 * max is smaller) of a log scale, each at least one count wide. */
static void levels_for(struct axes *a, uint64_t max)
{
	a->levels = max < LEVELS ? (unsigned)max : LEVELS;
	for (unsigned k = 0; k < a->levels; k++) {
		double t = ceil(pow((double)max, (double)k / a->levels));
		uint64_t v = t >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)t;

		a->thr[k] = k == 0 ? 1 : v > a->thr[k - 1] ? v : a->thr[k - 1] + 1;
	}
}

/* The colour level (0-based) of a count > 0. */
static unsigned level_of(const struct axes *a, uint64_t count)
{
	unsigned k = 0;

	while (k + 1 < a->levels && count >= a->thr[k + 1])
		k++;
	return k;
}

/* ---- text --------------------------------------------------------------------------- */

void ktel_report_escape(FILE *out, const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str, *end = s + len;

	while (s < end) {
		size_t n;

		switch (*s) {
		case '&':
			fputs("&amp;", out);
			break;
		case '<':
			fputs("&lt;", out);
			break;
		case '>':
			fputs("&gt;", out);
			break;
		case '"':
			fputs("&quot;", out);
			break;
		case '\'':
			fputs("&#39;", out);
			break;
		default:
			if (*s >= 0x20 && *s < 0x7f) {
				fputc(*s, out);
			} else if (*s >= 0x80 && (n = ktel_utf8_char_len((const char *)s,
									 (size_t)(end - s))) > 0) {
				fwrite(s, 1, n, out);
				s += n;
				continue;
			} else {
				fputs("&#xfffd;", out);
			}
		}
		s++;
	}
}

static void esc(FILE *out, const char *s)
{
	ktel_report_escape(out, s, strlen(s));
}

/* A value of unit as text: times in the unit that reads best, bytes in
 * binary multiples, other units with k, M, G. */
static void fmt_value(char *buf, size_t len, double v, const char *unit)
{
	static const struct {
		const char *unit;
		double ns;
	} times[] = {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}};
	static const char *const time_units[] = {"ns", "us", "ms", "s"};
	static const char *const byte_units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	static const char *const si[] = {"", "k", "M", "G", "T", "P"};
	size_t u = 0;

	if (isinf(v)) {
		snprintf(buf, len, "+Inf");
		return;
	}
	for (size_t i = 0; i < ARRAY_SIZE(times); i++) {
		if (strcmp(unit, times[i].unit))
			continue;
		v *= times[i].ns;
		while (u < 3 && fabs(v) >= 1000) {
			v /= 1000;
			u++;
		}
		snprintf(buf, len, "%.4g %s", v, time_units[u]);
		return;
	}
	if (strcmp(unit, "bytes") == 0) {
		while (u < 4 && fabs(v) >= 1024) {
			v /= 1024;
			u++;
		}
		snprintf(buf, len, "%.4g %s", v, byte_units[u]);
		return;
	}
	while (u < 5 && fabs(v) >= 1000) {
		v /= 1000;
		u++;
	}
	snprintf(buf, len, "%.4g%s%s%s", v, si[u], *unit ? " " : "", unit);
}

/* The ways a time is written (fmt_time). */
enum time_style {
	T_DATE,       /* 2026-12-02 */
	T_DATE_TIME,  /* 2026-12-02 10:44:45 */
	T_DAY_MINUTE, /* 12-02 10:44 */
	T_TIME,       /* 10:44:45 */
	T_MINUTE,     /* 10:44 */
};

/* Epoch ms as UTC text. */
static void fmt_time(char *buf, size_t len, int64_t ms, enum time_style style)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	size_t n = 0;

	if (gmtime_r(&t, &tm)) {
		switch (style) {
		case T_DATE:
			n = strftime(buf, len, "%Y-%m-%d", &tm);
			break;
		case T_DATE_TIME:
			n = strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
			break;
		case T_DAY_MINUTE:
			n = strftime(buf, len, "%m-%d %H:%M", &tm);
			break;
		case T_TIME:
			n = strftime(buf, len, "%H:%M:%S", &tm);
			break;
		case T_MINUTE:
			n = strftime(buf, len, "%H:%M", &tm);
			break;
		}
	}
	if (!n)
		snprintf(buf, len, "?");
}

/* A duration as "10 s", "4 min", "2.5 h", "3 d". */
static void fmt_span(char *buf, size_t len, int64_t ms)
{
	if (ms < 1000)
		snprintf(buf, len, "%" PRId64 " ms", ms);
	else if (ms < 120000)
		snprintf(buf, len, "%.3g s", ms / 1e3);
	else if (ms < 2 * 3600000)
		snprintf(buf, len, "%.3g min", ms / 6e4);
	else if (ms < 2 * 86400000LL)
		snprintf(buf, len, "%.3g h", ms / 3.6e6);
	else
		snprintf(buf, len, "%.3g d", ms / 8.64e7);
}

/* A window's span as "2026-12-02 10:44:45 to 10:44:47 UTC" (the date
 * again only when it changes). */
static void fmt_range(char *buf, size_t len, int64_t start, int64_t end)
{
	char a[32], b[32], da[16], db[16];

	fmt_time(da, sizeof(da), start, T_DATE);
	fmt_time(db, sizeof(db), end, T_DATE);
	fmt_time(a, sizeof(a), start, T_DATE_TIME);
	fmt_time(b, sizeof(b), end, strcmp(da, db) ? T_DATE_TIME : T_TIME);
	snprintf(buf, len, "%s to %s UTC", a, b);
}

static double lower_bound(const struct metric *m, size_t k)
{
	if (k)
		return m->le[k - 1];
	if (m->le[0] > 0)
		return 0;
	return m->le[0] - (m->nb > 1 && isfinite(m->le[1]) ? m->le[1] - m->le[0] : 1);
}

double ktel_report_quantile(const double *le, const uint64_t *counts, size_t n, double q,
			    bool *ret_above)
{
	double total = 0, cum = 0, rank, lo, hi;
	size_t b;

	if (ret_above)
		*ret_above = false;
	for (size_t k = 0; k < n; k++)
		total += (double)counts[k];
	if (!n || total <= 0 || !(q >= 0 && q <= 1))
		return NAN;
	rank = q * total;
	for (b = 0; b < n; b++) {
		if (counts[b] && cum + (double)counts[b] >= rank)
			break;
		cum += (double)counts[b];
	}
	if (b == n) /* rounding: the last bucket with a count */
		for (b = n; b-- > 0 && !counts[b];)
			;
	lo = b ? le[b - 1] : le[0] > 0 ? 0 : le[0] - (n > 1 && isfinite(le[1]) ? le[1] - le[0] : 1);
	hi = le[b];
	if (isinf(hi)) {
		if (ret_above)
			*ret_above = true;
		return lo;
	}
	return lo + (hi - lo) * ((rank - cum) / (double)counts[b]);
}

/* ---- the page ------------------------------------------------------------------------ */

static const char page_style[] =
	"body{font:14px/1.4 sans-serif;margin:16px 24px;color:#222;max-width:1000px}"
	"h1{font-size:22px}h2{font-size:18px;margin-top:36px;border-top:1px solid #ccc;"
	"padding-top:12px}h3{font-size:14px;margin:18px 0 4px}"
	".note{color:#555}.warn{color:#a40}code{background:#f4f4f4;padding:0 3px}"
	"svg{display:block}svg text{font:10px sans-serif;fill:#333}"
	"svg .title{font-size:11px}table{border-collapse:collapse}"
	"td,th{padding:1px 8px;text-align:left}td.n{text-align:right}";

static void page_head(FILE *out)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n", out);
	/* Nothing leaves the page and nothing runs, whatever a name holds. */
	fputs("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
	      "style-src 'unsafe-inline'\">\n",
	      out);
	fprintf(out,
		"<title>ktelemetry latency report</title>\n<style>%s</style>\n</head>\n<body>\n",
		page_style);
}

static void page_summary(FILE *out, const struct ktel_report *r)
{
	const struct ktel_report_stats *st = &r->st;
	size_t keys = 0;
	char now[40];

	for (size_t i = 0; i < r->n_m; i++)
		keys += r->m[i]->n_keys;
	fmt_time(now, sizeof(now), (int64_t)time(NULL) * 1000, T_DATE_TIME);
	fprintf(out,
		"<h1>ktelemetry latency report</h1>\n<p class=\"summary\" data-windows=\"%" PRIu64
		"\" data-skipped=\"%" PRIu64 "\">%zu histogram metrics, %zu keys, %" PRIu64
		" windows from ",
		st->windows, st->skipped, r->n_m, keys, st->windows);
	for (size_t i = 0; i < r->n_files; i++) {
		char name[PATH_MAX * 4];

		/* A path is bytes: shown as valid UTF-8, \xNN where not. */
		ktel_utf8_escape(r->files[i], name, sizeof(name));
		fputs(i ? ", <code>" : "<code>", out);
		esc(out, name);
		fputs("</code>", out);
	}
	fprintf(out, "%s. Made %s UTC by <code>ktelemetryctl report</code>.</p>\n",
		r->n_files ? "" : "no file", now);
	fprintf(out, "<p class=\"skipped%s\">%" PRIu64 " lines read; %" PRIu64 " skipped",
		st->skipped ? " warn" : "", st->lines, st->skipped);
	for (int k = 0, first = 1; k < KTEL_REPORT_SKIP_N; k++) {
		if (!st->skip[k])
			continue;
		fprintf(out, "%s%" PRIu64 " %s (first at <code>", first ? ": " : "; ", st->skip[k],
			skips[k].text);
		esc(out, st->first[k]);
		fputs("</code>)", out);
		first = 0;
	}
	fprintf(out,
		". %" PRIu64 " counter, gauge and event records are not drawn; %" PRIu64
		" windows were left out by --metric, --since or --until; %" PRIu64
		" duplicate windows (read twice) were ignored.</p>\n",
		st->other, st->filtered, st->duplicates);
}

static void page_method(FILE *out)
{
	fputs("<details open><summary>How to read this page</summary>\n"
	      "<p><b>Heatmaps.</b> One per metric and key (a combination of the metric's dims). "
	      "x is time (UTC). A column is one window of the log (a pull: from its start to "
	      "its end), or, where there are more windows than the plot's width holds at 2 "
	      "pixels a column, a stretch of equal time holding the sum of the windows whose "
	      "middle falls in it; each metric says which. y is the histogram's buckets, one row "
	      "each, labelled with the bucket's upper bound (<code>le</code>: a row holds the "
	      "values above the row below it, up to its label); rows no window of the metric "
	      "uses are left out. A cell's colour is its count, from the metric's legend: "
	      "steps of a log scale up to the metric's largest cell. Grey is a window "
	      "without a count in that bucket, white no window at all (the daemon not running, "
	      "the metric disabled, or a gap between windows). Hover a cell for its numbers.</p>\n"
	      "<p><b>Quantiles.</b> Under each heatmap, p50, p90 and p99 of each column, "
	      "estimated from the bucket counts as Prometheus' <code>histogram_quantile()</code> "
	      "does: the rank q &times; count is found in the bucket where the cumulative count "
	      "reaches it, and the value is interpolated linearly between that bucket's lower "
	      "and upper bound (the first bucket starts at 0). A rank in the last, unbounded "
	      "bucket is drawn at that bucket's lower bound and marked &ge;. The estimate is "
	      "only as exact as the buckets: a log2 bucket spans a factor of two.</p>\n"
	      "</details>\n",
	      out);
}

static void page_toc(FILE *out, const struct ktel_report *r)
{
	if (!r->n_m) {
		fputs("<p class=\"warn\">No histogram window to draw.</p>\n", out);
		return;
	}
	fputs("<table class=\"toc\"><tr><th>metric</th><th>keys</th><th>windows</th></tr>\n", out);
	for (size_t i = 0; i < r->n_m; i++) {
		uint64_t windows = 0;

		for (size_t k = 0; k < r->m[i]->n_keys; k++)
			windows += r->m[i]->keys[k]->n;
		fprintf(out, "<tr><td><a href=\"#m%zu\">", i);
		esc(out, r->m[i]->name);
		fprintf(out,
			"</a></td><td class=\"n\">%zu</td><td class=\"n\">%" PRIu64 "</td></tr>\n",
			r->m[i]->n_keys, windows);
	}
	fputs("</table>\n", out);
}

/* The time ticks under a plot at y (the plot's bottom). */
static void time_axis(FILE *out, const struct axes *a, int y)
{
	static const int64_t steps[] = {1000,         2000,         5000,         10000,
					15000,        30000,        60000,        120000,
					300000,       600000,       900000,       1800000,
					3600000,      7200000,      10800000,     21600000,
					43200000,     86400000,     172800000,    604800000,
					1209600000LL, 2592000000LL, 7776000000LL, 31536000000LL};
	int64_t span = a->t1 - a->t0, step = steps[ARRAY_SIZE(steps) - 1];
	enum time_style style;

	for (size_t i = 0; i < ARRAY_SIZE(steps); i++)
		if (span / steps[i] <= 7) {
			step = steps[i];
			break;
		}
	while (span / step > 7)
		step *= 2;
	style = step >= 86400000   ? T_DATE
		: span >= 86400000 ? T_DAY_MINUTE
		: step < 60000     ? T_TIME
				   : T_MINUTE;
	for (int64_t t = (a->t0 / step + (a->t0 % step != 0)) * step; t <= a->t1; t += step) {
		int x = MARGIN_L + xpos(a, t);
		char label[32];

		fmt_time(label, sizeof(label), t, style);
		fprintf(out,
			"<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#666\"/>"
			"<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
			x, y, x, y + 4, x, y + 15, label);
	}
	fprintf(out,
		"<text class=\"title\" x=\"%d\" y=\"%d\" text-anchor=\"middle\">time (UTC)</text>\n",
		MARGIN_L + PLOT_W / 2, y + 30);
}

/* The y axis title, vertical, left of a plot from y0 of height h. */
static void y_title(FILE *out, int y0, int h, const char *title)
{
	fprintf(out,
		"<text class=\"title\" transform=\"translate(12,%d) rotate(-90)\" "
		"text-anchor=\"middle\">",
		y0 + h / 2);
	esc(out, title);
	fputs("</text>\n", out);
}

static void bucket_text(char *buf, size_t len, const struct metric *m, size_t k)
{
	char lo[32], hi[32];

	fmt_value(lo, sizeof(lo), lower_bound(m, k), m->unit);
	fmt_value(hi, sizeof(hi), m->le[k], m->unit);
	snprintf(buf, len, "(%s, %s]", lo, hi);
}

/* The heatmap of one key. */
static void heatmap(FILE *out, const struct metric *m, const struct series *s, const struct cols *c,
		    const struct axes *a)
{
	int rows = (int)(a->hi - a->lo + 1), ph = rows * a->row_h;
	int w = MARGIN_L + PLOT_W + MARGIN_R, h = MARGIN_T + ph + MARGIN_B;
	int label_every = rows > 16 ? 2 : 1;
	char title[64];

	fprintf(out,
		"<svg class=\"heatmap\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"role=\"img\" data-metric=\"",
		w, h, w, h);
	esc(out, m->name);
	fputs("\" data-key=\"", out);
	esc(out, s->key);
	fprintf(out, "\" data-columns=\"%zu\" data-lo=\"%zu\" data-hi=\"%zu\">\n", c->n, a->lo,
		a->hi);
	fprintf(out,
		"<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"" NONE_COLOUR "\"/>\n",
		MARGIN_L, MARGIN_T, PLOT_W, ph);
	for (size_t i = 0; i < c->n; i++) {
		const struct col *col = &c->c[i];
		char range[96];

		fmt_range(range, sizeof(range), col->start_ms, col->end_ms);
		fprintf(out,
			"<rect class=\"win\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
			"fill=\"" EMPTY_COLOUR "\" data-col=\"%zu\" data-start-ms=\"%" PRId64
			"\" data-end-ms=\"%" PRId64 "\" data-windows=\"%" PRIu64
			"\"><title>%s, %" PRIu64 " window%s</title></rect>\n",
			MARGIN_L + col->px0, MARGIN_T, col->px1 - col->px0, ph, i, col->start_ms,
			col->end_ms, col->windows, range, col->windows,
			col->windows == 1 ? "" : "s");
	}
	for (size_t i = 0; i < c->n; i++) {
		const struct col *col = &c->c[i];
		char range[96];

		fmt_range(range, sizeof(range), col->start_ms, col->end_ms);
		for (size_t k = a->lo; k <= a->hi; k++) {
			uint64_t n = c->counts[i * m->nb + k];
			unsigned lvl;
			char b[80];

			if (!n)
				continue;
			lvl = level_of(a, n);
			bucket_text(b, sizeof(b), m, k);
			fprintf(out,
				"<rect class=\"cell\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
				"fill=\"%s\" data-col=\"%zu\" data-bucket=\"%zu\" data-count=\"%" PRIu64
				"\" data-level=\"%u\"><title>%" PRIu64
				" in %s, %s</title></rect>\n",
				MARGIN_L + col->px0, MARGIN_T + (int)(a->hi - k) * a->row_h,
				col->px1 - col->px0, a->row_h, level_colour[lvl], i, k, n, lvl, n,
				b, range);
		}
	}
	fprintf(out,
		"<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
		"stroke=\"#888\"/>\n",
		MARGIN_L, MARGIN_T, PLOT_W, ph);
	for (size_t k = a->lo; k <= a->hi; k++) {
		char v[32];

		if ((a->hi - k) % (size_t)label_every)
			continue;
		fmt_value(v, sizeof(v), m->le[k], m->unit);
		fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", MARGIN_L - 4,
			MARGIN_T + (int)(a->hi - k) * a->row_h + a->row_h / 2 + 4);
		esc(out, v);
		fputs("</text>\n", out);
	}
	snprintf(title, sizeof(title), "bucket (le)");
	y_title(out, MARGIN_T, ph, title);
	time_axis(out, a, MARGIN_T + ph);
	fputs("</svg>\n", out);
}

/* y of value v in the quantile plot: log2 between vlo and vhi (linear
 * for a linear scheme or bounds <= 0). */
static int qy(double v, double vlo, double vhi, bool log_scale)
{
	double f;

	if (log_scale)
		f = (log2(v) - log2(vlo)) / (log2(vhi) - log2(vlo));
	else
		f = (v - vlo) / (vhi - vlo);
	f = f < 0 ? 0 : f > 1 ? 1 : f;
	return MARGIN_T + QUANT_H - (int)lround(f * QUANT_H);
}

static const struct {
	const char *name, *colour, *dash;
	double q;
} quants[] = {
	{"p50", "#1f77b4", "", 0.5},
	{"p90", "#e6720e", "6 3", 0.9},
	{"p99", "#c9252b", "2 2", 0.99},
};

/* The quantile lines of one key, under its heatmap, on the same x. */
static void quantile_plot(FILE *out, const struct metric *m, const struct series *s,
			  const struct cols *c, const struct axes *a)
{
	int w = MARGIN_L + PLOT_W + MARGIN_R, h = MARGIN_T + QUANT_H + MARGIN_B;
	bool log_scale = strncmp(m->scheme, "log2", 4) == 0 && lower_bound(m, a->lo) >= 0;
	double vhi = isinf(m->le[a->hi]) ? (a->hi ? m->le[a->hi - 1] * 2 : 1) : m->le[a->hi];
	double vlo = lower_bound(m, a->lo);
	char unit_title[80];

	if (log_scale && vlo <= 0)
		vlo = m->le[a->lo] / 2 > 0 ? m->le[a->lo] / 2 : 0.5;
	if (!(vhi > vlo))
		vhi = vlo + 1;
	fprintf(out,
		"<svg class=\"quantiles\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"role=\"img\" data-metric=\"",
		w, h, w, h);
	esc(out, m->name);
	fputs("\" data-key=\"", out);
	esc(out, s->key);
	fprintf(out,
		"\">\n<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fff\" "
		"stroke=\"#888\"/>\n",
		MARGIN_L, MARGIN_T, PLOT_W, QUANT_H);
	/* Grid lines and labels at bucket bounds, at most 6. */
	for (size_t k = a->lo, step = (a->hi - a->lo) / 6 + 1; k <= a->hi; k += step) {
		char v[32];
		double b = isinf(m->le[k]) ? vhi : m->le[k];
		int y = qy(b, vlo, vhi, log_scale);

		fmt_value(v, sizeof(v), b, m->unit);
		fprintf(out,
			"<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#eee\"/>"
			"<text x=\"%d\" y=\"%d\" text-anchor=\"end\">",
			MARGIN_L, y, MARGIN_L + PLOT_W, y, MARGIN_L - 4, y + 3);
		esc(out, v);
		fputs("</text>\n", out);
	}
	for (size_t i = 0; i < c->n; i++) {
		const struct col *col = &c->c[i];
		double v[ARRAY_SIZE(quants)];
		bool above[ARRAY_SIZE(quants)];
		char t[ARRAY_SIZE(quants)][40], range[96];

		for (size_t q = 0; q < ARRAY_SIZE(quants); q++) {
			v[q] = ktel_report_quantile(m->le, c->counts + i * m->nb, m->nb,
						    quants[q].q, &above[q]);
			fmt_value(t[q], sizeof(t[q]), v[q], m->unit);
		}
		if (isnan(v[0]))
			continue;
		fmt_range(range, sizeof(range), col->start_ms, col->end_ms);
		fprintf(out,
			"<rect class=\"qcol\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" "
			"fill=\"#000\" fill-opacity=\"0\" data-col=\"%zu\" data-p50=\"%.6g\" "
			"data-p90=\"%.6g\" data-p99=\"%.6g\"><title>%s%s, %s%s, %s%s: p50, p90, p99 "
			"of %s</title></rect>\n",
			MARGIN_L + col->px0, MARGIN_T, col->px1 - col->px0, QUANT_H, i, v[0], v[1],
			v[2], above[0] ? "&#8805;" : "", t[0], above[1] ? "&#8805;" : "", t[1],
			above[2] ? "&#8805;" : "", t[2], range);
	}
	for (size_t q = 0; q < ARRAY_SIZE(quants); q++) {
		fprintf(out,
			"<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
			"stroke-dasharray=\"%s\" points=\"",
			quants[q].name, quants[q].colour, quants[q].dash);
		for (size_t i = 0; i < c->n; i++) {
			double v = ktel_report_quantile(m->le, c->counts + i * m->nb, m->nb,
							quants[q].q, NULL);

			if (!isnan(v))
				fprintf(out, "%s%d,%d", i ? " " : "",
					MARGIN_L + (c->c[i].px0 + c->c[i].px1) / 2,
					qy(v, vlo, vhi, log_scale));
		}
		fputs("\"/>\n", out);
		for (size_t i = 0; c->n <= MAX_DOTS && i < c->n; i++) {
			double v = ktel_report_quantile(m->le, c->counts + i * m->nb, m->nb,
							quants[q].q, NULL);

			if (!isnan(v))
				fprintf(out,
					"<circle cx=\"%d\" cy=\"%d\" r=\"2.5\" fill=\"%s\"/>\n",
					MARGIN_L + (c->c[i].px0 + c->c[i].px1) / 2,
					qy(v, vlo, vhi, log_scale), quants[q].colour);
		}
	}
	snprintf(unit_title, sizeof(unit_title), "%s%s%s", log_scale ? "log scale" : "value",
		 *m->unit ? ", " : "", m->unit);
	y_title(out, MARGIN_T, QUANT_H, unit_title);
	time_axis(out, a, MARGIN_T + QUANT_H);
	fputs("</svg>\n", out);
}

/* The metric's colour legend and line key. */
static void legend(FILE *out, const struct axes *a, uint64_t max)
{
	int x = 0, w = 14 + 90 * (int)(a->levels + 2);

	fprintf(out, "<svg class=\"legend\" width=\"%d\" height=\"54\" viewBox=\"0 0 %d 54\">\n",
		w < 460 ? 460 : w, w < 460 ? 460 : w);
	fprintf(out,
		"<rect class=\"swatch\" data-level=\"none\" x=\"%d\" y=\"2\" width=\"14\" "
		"height=\"14\" fill=\"" NONE_COLOUR "\" stroke=\"#888\"/><text x=\"%d\" "
		"y=\"13\">no window</text>\n",
		x, x + 18);
	x += 90;
	fprintf(out,
		"<rect class=\"swatch\" data-level=\"empty\" data-min=\"0\" data-max=\"0\" "
		"x=\"%d\" y=\"2\" width=\"14\" height=\"14\" fill=\"" EMPTY_COLOUR "\"/>"
		"<text x=\"%d\" y=\"13\">0</text>\n",
		x, x + 18);
	for (unsigned k = 0; k < a->levels; k++) {
		uint64_t hi = k + 1 < a->levels ? a->thr[k + 1] - 1 : max;
		char range[48];

		x += 90;
		if (hi == a->thr[k])
			snprintf(range, sizeof(range), "%" PRIu64, hi);
		else
			snprintf(range, sizeof(range), "%" PRIu64 "&#8211;%" PRIu64, a->thr[k], hi);
		fprintf(out,
			"<rect class=\"swatch\" data-level=\"%u\" data-min=\"%" PRIu64
			"\" data-max=\"%" PRIu64 "\" x=\"%d\" y=\"2\" width=\"14\" height=\"14\" "
			"fill=\"%s\"/><text x=\"%d\" y=\"13\">%s</text>\n",
			k, a->thr[k], hi, x, level_colour[k], x + 18, range);
	}
	x = 0;
	for (size_t q = 0; q < ARRAY_SIZE(quants); q++, x += 90)
		fprintf(out,
			"<line x1=\"%d\" y1=\"38\" x2=\"%d\" y2=\"38\" stroke=\"%s\" "
			"stroke-width=\"2\" stroke-dasharray=\"%s\"/><text x=\"%d\" "
			"y=\"42\">%s</text>\n",
			x, x + 24, quants[q].colour, quants[q].dash, x + 30, quants[q].name);
	fputs("</svg>\n", out);
}

/* The metric's axes from its keys' columns; returns the largest cell. */
static uint64_t shared_axes(const struct metric *m, const struct cols *c, struct axes *a)
{
	uint64_t max = 0;
	bool any = false;

	a->lo = m->nb - 1;
	a->hi = 0;
	for (size_t s = 0; s < m->n_keys; s++)
		for (size_t i = 0; i < c[s].n; i++)
			for (size_t k = 0; k < m->nb; k++) {
				uint64_t n = c[s].counts[i * m->nb + k];

				if (!n)
					continue;
				any = true;
				max = n > max ? n : max;
				a->lo = k < a->lo ? k : a->lo;
				a->hi = k > a->hi ? k : a->hi;
			}
	if (!any) {
		a->lo = 0;
		a->hi = m->nb > 8 ? 7 : m->nb - 1;
	}
	/* A plot of few rows stays tall enough to read (and to point at). */
	a->row_h = (int)(a->hi - a->lo + 1) * ROW_H < MIN_PLOT_H
			   ? MIN_PLOT_H / (int)(a->hi - a->lo + 1)
			   : ROW_H;
	levels_for(a, max);
	return max;
}

/* How the columns of a key were made, in a sentence. */
static void cols_note(FILE *out, const struct series *s, const struct cols *c, const struct axes *a)
{
	char span[32];

	if (!c->binned) {
		fprintf(out,
			"<p class=\"cols note\" data-binned=\"0\">%zu window%s, one column each "
			"(from the window's start to its end).</p>\n",
			s->n, s->n == 1 ? "" : "s");
		return;
	}
	fmt_span(span, sizeof(span), c->bin_ms);
	fprintf(out,
		"<p class=\"cols note\" data-binned=\"1\">%zu windows drawn in %zu columns of %s "
		"each: more windows than the %d-pixel plot holds at %d pixels a column (or "
		"windows that overlap), so each column sums the windows whose middle falls in "
		"it.</p>\n",
		s->n, c->n, span, PLOT_W, a->col_w);
}

/* One key: its heading with the whole range's quantiles, heatmap and lines. */
static void key_section(FILE *out, const struct metric *m, const struct series *s,
			const struct cols *c, const struct axes *a)
{
	uint64_t all[KTEL_REPORT_MAX_BUCKETS] = {0};

	for (size_t w = 0; w < s->n; w++)
		for (size_t k = 0; k < m->nb; k++)
			all[k] = sat_add(all[k], s->counts[s->w[w].off + k]);
	fputs("<h3>", out);
	esc(out, s->key);
	fprintf(out, "</h3>\n<p class=\"note\">count %" PRIu64, s->total);
	for (size_t q = 0; q < ARRAY_SIZE(quants); q++) {
		bool above;
		double v = ktel_report_quantile(m->le, all, m->nb, quants[q].q, &above);
		char t[40];

		if (isnan(v))
			continue;
		fmt_value(t, sizeof(t), v, m->unit);
		fprintf(out, ", %s %s", quants[q].name, above ? "&#8805; " : "");
		esc(out, t);
	}
	fputs(" over the whole range.</p>\n", out);
	cols_note(out, s, c, a);
	heatmap(out, m, s, c, a);
	quantile_plot(out, m, s, c, a);
}

/* A metric's section; -1 when out of memory (the section then says so). */
static int metric_section(FILE *out, const struct metric *m, size_t idx, int col_w)
{
	struct cols *c = calloc(m->n_keys, sizeof(*c));
	struct axes a = {.t0 = INT64_MAX, .t1 = INT64_MIN, .col_w = col_w};
	char from[40], to[40], span[32];
	uint64_t max;
	int ret = 0;

	fprintf(out, "<section class=\"metric\" id=\"m%zu\" data-metric=\"", idx);
	esc(out, m->name);
	fputs("\">\n<h2>", out);
	esc(out, m->name);
	if (*m->unit) {
		fputs(" <span class=\"note\">(", out);
		esc(out, m->unit);
		fputs(")</span>", out);
	}
	fputs("</h2>\n", out);
	for (size_t s = 0; s < m->n_keys; s++)
		for (size_t w = 0; w < m->keys[s]->n; w++) {
			a.t0 = m->keys[s]->w[w].start_ms < a.t0 ? m->keys[s]->w[w].start_ms : a.t0;
			a.t1 = m->keys[s]->w[w].end_ms > a.t1 ? m->keys[s]->w[w].end_ms : a.t1;
		}
	/* A single instant still gets a second of axis. */
	if (a.t1 - a.t0 < 1000)
		a.t1 = a.t0 + 1000;
	for (size_t s = 0; c && s < m->n_keys; s++)
		if (make_cols(m->keys[s], m->nb, &a, &c[s])) {
			ret = -1;
			break;
		}
	if (!c || ret) {
		fputs("<p class=\"warn\">Out of memory drawing this metric.</p>\n</section>\n",
		      out);
		ret = -1;
		goto out;
	}
	max = shared_axes(m, c, &a);
	fmt_time(from, sizeof(from), a.t0, T_DATE_TIME);
	fmt_time(to, sizeof(to), a.t1, T_DATE_TIME);
	fmt_span(span, sizeof(span), a.t1 - a.t0);
	fprintf(out, "<p>%zu key%s from %s to %s UTC (%s); histogram scheme <code>", m->n_keys,
		m->n_keys == 1 ? "" : "s", from, to, span);
	esc(out, m->scheme);
	fprintf(out,
		"</code>, %zu buckets. The colour scale is shared by the keys (largest cell "
		"%" PRIu64 "):</p>\n",
		m->nb, max);
	legend(out, &a, max);
	for (size_t s = 0; s < m->n_keys; s++)
		key_section(out, m, m->keys[s], &c[s], &a);
	fputs("</section>\n", out);
out:
	for (size_t s = 0; c && s < m->n_keys; s++) {
		free(c[s].c);
		free(c[s].counts);
	}
	free(c);
	return ret;
}

/* Column width for the page: MIN_COL_W, wider when the keys' cells would
 * pass CELL_BUDGET. */
static int column_width(const struct ktel_report *r)
{
	uint64_t cells = 0;
	int w = MIN_COL_W;

	for (size_t i = 0; i < r->n_m; i++)
		cells += (uint64_t)r->m[i]->n_keys * r->m[i]->nb;
	while (w < PLOT_W / 30 && cells * (uint64_t)(PLOT_W / w) > CELL_BUDGET)
		w++;
	return w;
}

int ktel_report__write_html(struct ktel_report *r, FILE *out)
{
	int col_w;

	prepare(r);
	col_w = column_width(r);
	page_head(out);
	page_summary(out, r);
	page_method(out);
	page_toc(out, r);
	for (size_t i = 0; i < r->n_m; i++)
		metric_section(out, r->m[i], i, col_w);
	fputs("</body>\n</html>\n", out);
	return ferror(out) ? -EIO : 0;
}

/* ---- the command -------------------------------------------------------------------- */

/* The value of option name (or its short form) at argv[*i]: "--name V",
 * "--name=V", "-o V". NULL when argv[*i] is not that option; *ret_missing
 * when it is but has no value. */
static const char *opt_value(int argc, char **argv, int *i, const char *name,
			     const char *short_name, bool *ret_missing)
{
	const char *arg = argv[*i];
	size_t n = strlen(name);

	if (strncmp(arg, name, n) == 0 && arg[n] == '=')
		return arg + n + 1;
	if (strcmp(arg, name) && (!short_name || strcmp(arg, short_name)))
		return NULL;
	if (*i + 1 >= argc) {
		*ret_missing = true;
		return NULL;
	}
	return argv[++*i];
}

struct args {
	const char *output;
	const char *patterns[MAX_PATTERNS];
	const char *files[MAX_FILES];
	size_t n_patterns, n_files;
	bool rotated;
	struct ktel_report_filter f;
};

/* A --since or --until value into f; an exit code. */
static int when_arg(const char *opt, const char *v, bool *set, bool *rel, int64_t *ms)
{
	if (ktel_report_parse_when(v, ms, rel)) {
		fprintf(stderr,
			"ktelemetryctl: report: %s: expected epoch seconds, a UTC date "
			"(\"2026-12-02\", \"2026-12-02T10:00\") or a duration before the newest "
			"window (\"6h\"), got \"%s\"\n",
			opt, v);
		return EXIT_USAGE;
	}
	*set = true;
	return 0;
}

static int parse_args(int argc, char **argv, struct args *a)
{
	for (int i = 1; i < argc; i++) {
		bool missing = false;
		const char *v;

		if ((v = opt_value(argc, argv, &i, "--output", "-o", &missing))) {
			a->output = v;
		} else if ((v = opt_value(argc, argv, &i, "--metric", NULL, &missing))) {
			if (a->n_patterns == MAX_PATTERNS) {
				fprintf(stderr, "ktelemetryctl: report: at most %d --metric\n",
					MAX_PATTERNS);
				return EXIT_USAGE;
			}
			a->patterns[a->n_patterns++] = v;
		} else if ((v = opt_value(argc, argv, &i, "--since", NULL, &missing))) {
			if (when_arg("--since", v, &a->f.since_set, &a->f.since_rel,
				     &a->f.since_ms))
				return EXIT_USAGE;
		} else if ((v = opt_value(argc, argv, &i, "--until", NULL, &missing))) {
			if (when_arg("--until", v, &a->f.until_set, &a->f.until_rel,
				     &a->f.until_ms))
				return EXIT_USAGE;
		} else if (missing) {
			fprintf(stderr, "ktelemetryctl: report: %s needs a value\n", argv[i]);
			return EXIT_USAGE;
		} else if (strcmp(argv[i], "--no-rotated") == 0) {
			a->rotated = false;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "ktelemetryctl: report: unexpected \"%s\"\n", argv[i]);
			return EXIT_USAGE;
		} else if (a->n_files == MAX_FILES) {
			fprintf(stderr, "ktelemetryctl: report: at most %d files\n", MAX_FILES);
			return EXIT_USAGE;
		} else {
			a->files[a->n_files++] = argv[i];
		}
	}
	if (!a->n_files) {
		fprintf(stderr,
			"ktelemetryctl: report needs the JSON sink's FILE (\"-\": stdin)\n");
		return EXIT_USAGE;
	}
	return 0;
}

/* Read path and, with rotated, its rotated files (path.N, path.N.gz);
 * false when path itself could not be read. */
static bool read_input(struct ktel_report *r, const char *path, bool rotated)
{
	struct ktel_err err = {0};
	bool ok = true;

	if (ktel_report__read_file(r, path, &err)) {
		fprintf(stderr, "ktelemetryctl: report: %s\n", err.msg);
		ok = false;
	}
	for (int n = 1; rotated && strcmp(path, "-") && n <= MAX_ROTATED; n++) {
		for (int gz = 0; gz < 2; gz++) {
			char name[PATH_MAX];

			if (snprintf(name, sizeof(name), "%s.%d%s", path, n, gz ? ".gz" : "") >=
				    (int)sizeof(name) ||
			    access(name, F_OK))
				continue;
			if (ktel_report__read_file(r, name, &err))
				fprintf(stderr, "ktelemetryctl: report: %s\n", err.msg);
		}
	}
	return ok;
}

/* Write the page to path ("-": stdout) through a temporary file renamed
 * over it, so a reader never sees half a page. */
static int write_output(struct ktel_report *r, const char *path)
{
	char tmp[PATH_MAX];
	FILE *f;
	int fd, w;

	if (strcmp(path, "-") == 0)
		return ktel_report__write_html(r, stdout) || fflush(stdout) ? -EIO : 0;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp%ld", path, (long)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		unlink(tmp);
		return -ENOMEM;
	}
	w = ktel_report__write_html(r, f);
	if (fclose(f) && !w)
		w = -errno;
	if (!w && rename(tmp, path))
		w = -errno;
	if (w)
		unlink(tmp);
	return w;
}

static void print_summary(const struct ktel_report *r, const struct args *a, bool json, bool ok,
			  bool written)
{
	const struct ktel_report_stats *st = &r->st;
	size_t metrics, keys;

	ktel_report__shape(r, &metrics, &keys);
	if (json) {
		json_t *skip = json_object();
		json_t *o;

		for (int k = 0; k < KTEL_REPORT_SKIP_N; k++)
			json_object_set_new(skip, skips[k].id,
					    json_integer((json_int_t)st->skip[k]));
		o = json_pack("{s:b, s:s?, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "ok", ok,
			      "output", written ? a->output : NULL, "metrics", (json_int_t)metrics,
			      "keys", (json_int_t)keys, "windows", (json_int_t)st->windows, "lines",
			      (json_int_t)st->lines, "other", (json_int_t)st->other, "filtered",
			      (json_int_t)st->filtered, "duplicates", (json_int_t)st->duplicates,
			      "skipped", (json_int_t)st->skipped, "skip", skip);
		if (o) {
			json_dumpf(o, stdout, JSON_COMPACT);
			fputc('\n', stdout);
		}
		json_decref(o);
	}
	if (written)
		fprintf(stderr,
			"ktelemetryctl: report: %zu metrics, %zu keys, %" PRIu64
			" windows from %zu files -> %s\n",
			metrics, keys, st->windows, r->n_files, a->output);
	if (st->skipped) {
		fprintf(stderr, "ktelemetryctl: report: skipped %" PRIu64 " of %" PRIu64 " lines",
			st->skipped, st->lines);
		for (int k = 0, first = 1; k < KTEL_REPORT_SKIP_N; k++) {
			if (!st->skip[k])
				continue;
			fprintf(stderr, "%s%" PRIu64 " %s (first at %s)", first ? ": " : "; ",
				st->skip[k], skips[k].text, st->first[k]);
			first = 0;
		}
		fputc('\n', stderr);
	}
	if (st->duplicates)
		fprintf(stderr, "ktelemetryctl: report: ignored %" PRIu64 " duplicate windows\n",
			st->duplicates);
	if (!st->windows)
		fprintf(stderr,
			"ktelemetryctl: report: no histogram window to draw (%" PRIu64
			" lines read, %" PRIu64 " left out by --metric, --since or --until)\n",
			st->lines, st->filtered);
}

int ktel_report_main(int argc, char **argv, bool json)
{
	struct args a = {.output = "ktelemetry-report.html", .rotated = true};
	struct ktel_report *r;
	bool inputs_ok = true;
	int rc, w;

	rc = parse_args(argc, argv, &a);
	if (rc)
		return rc;
	a.f.metrics = a.patterns;
	a.f.n_metrics = a.n_patterns;
	r = ktel_report__new(&a.f);
	if (!r) {
		fprintf(stderr, "ktelemetryctl: report: out of memory\n");
		return EXIT_FAIL;
	}
	for (size_t i = 0; i < a.n_files; i++)
		inputs_ok = read_input(r, a.files[i], a.rotated) && inputs_ok;
	w = write_output(r, a.output);
	if (w)
		fprintf(stderr, "ktelemetryctl: report: cannot write %s: %s\n", a.output,
			strerror(-w));
	rc = w || !inputs_ok || !r->st.windows ? EXIT_FAIL : EXIT_OK;
	print_summary(r, &a, json, rc == EXIT_OK, !w);
	ktel_report__free(r);
	return rc;
}
