// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * remote_write sink ("type": "remote_write"): pushes the series the
 * Prometheus sink exposes - the same names, labels, cumulative values and
 * histogram form, from the one module that makes them (prom_series.h) - to
 * a Prometheus remote-write 1.0 receiver (Prometheus with
 * --web.enable-remote-write-receiver, Mimir, Thanos receive,
 * VictoriaMetrics...).
 *
 * Every `interval` (default 15s) the whole state is encoded at the current
 * wall-clock time, as a scrape would see it, into one WriteRequest
 * (rw_encode.h: protobuf, snappy block compression), and queued. The queue
 * holds at most max_queue_bytes of compressed requests (default 4MiB); one
 * that would go beyond it drops the oldest requests not in flight, counted.
 * Requests are sent one at a time, oldest first, so a receiver never sees a
 * series' samples out of order: POST to url with Content-Encoding: snappy,
 * Content-Type: application/x-protobuf, X-Prometheus-Remote-Write-Version:
 * 0.1.0, a User-Agent and the configured headers, each request bounded by
 * `timeout` (default 10s).
 * - 2xx: delivered.
 * - 5xx, 429, a connection failure or a timeout: retried after a capped,
 *   jittered exponential backoff (500 ms doubling to 30 s), the request kept
 *   at the head of the queue; new requests queue behind it.
 * - any other status (4xx: the receiver refuses the data, retrying cannot
 *   help): dropped, counted, the status and the start of the body logged.
 *
 * Counts (ktel_sink_stats, so in status and self-telemetry as for every
 * sink): `sent` and `dropped` are records. A record applied to the state is
 * carried by the next request encoded; it is sent when that request is
 * delivered and dropped when that request is (queue full, refused, still
 * queued at close). Records refused by the series table (type change, name
 * collision, max_series) are dropped at once; events are skipped. `errors`
 * counts failed attempts (each retry), `queued` the bytes waiting.
 *
 * libcurl's multi interface runs on the daemon's loop: its sockets are
 * watched with uv_poll, its timeout is a uv_timer (curl_multi_socket_action),
 * nothing blocks and there is no thread. libcurl and libsnappy are dlopened
 * when the first such sink is created (rw_dlopen.c).
 *
 * A series that ended (record.h series_end) is in the next request once,
 * each of its samples with Prometheus' staleness marker as the value
 * (rw_encode.h), then forgotten.
 *
 * Close: one last request of the state is queued when records came since
 * the previous one; the queue is sent until it is empty or the close
 * timeout passes; what is left then is dropped and counted.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "log.h"
#include "prom_series.h"
#include "remote_write_sink.h"
#include "rw_dlopen.h"
#include "rw_encode.h"
#include "sink_close.h"
#include "textbuf.h"

#define DEFAULT_INTERVAL_MS 15000
#define DEFAULT_TIMEOUT_MS 10000
#define DEFAULT_MAX_QUEUE_BYTES (4u << 20)
#define DEFAULT_MAX_SERIES 10000
#define MAX_MAX_SERIES 1000000
#define BACKOFF_MIN_MS 500
#define BACKOFF_MAX_MS 30000
#define REASON_BYTES 200 /* of a refusal's body, for the log */
#define USER_AGENT "ktelemetry-remote-write/1.0"

/* One encoded request, waiting or in flight. */
struct push {
	struct push *next;
	uint64_t records; /* applied since the previous push */
	uint64_t samples;
	size_t len;
	char data[];
};

/* A socket libcurl asked us to watch. */
struct rw_sock {
	uv_poll_t poll;
	struct rw_sink *s;
	struct rw_sock *next, **pprev; /* every socket not yet closing */
	curl_socket_t fd;
};

struct rw_sink {
	uv_loop_t *loop;
	char *name, *url;
	uint64_t interval_ms, timeout_ms, max_queue_bytes;
	struct curl_slist *headers;
	struct ktel_prom_set set;
	uint64_t pending_records; /* applied since the last push was encoded */

	struct push *head, *tail;
	size_t queued_bytes;
	CURLM *multi;
	CURL *easy;
	bool in_flight, backing_off;
	uint64_t backoff, rng;
	char errbuf[CURL_ERROR_SIZE];
	struct ktel_textbuf body; /* the start of the response, for the log */

	struct rw_sock *socks;
	uv_timer_t tick, curl_timer, retry;
	unsigned open_handles;
	struct ktel_complaint overflow_c, fail_c, refused_c;

	struct ktel_sink_stats st;
	struct ktel_sink_close close;
	bool finishing;
};

static void pump(struct rw_sink *s);
static void finish(struct rw_sink *s);
static void on_close_deadline(void *owner);

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- queue ---- */

static void push_drop(struct rw_sink *s, struct push *p, struct push **link)
{
	*link = p->next;
	if (s->tail == p)
		s->tail = NULL;
	if (!s->tail)
		for (struct push *q = s->head; q; q = q->next)
			s->tail = q;
	s->queued_bytes -= p->len;
	s->st.dropped += p->records;
	free(p);
}

/* Make room for len bytes: drop the oldest requests not in flight. */
static void make_room(struct rw_sink *s, size_t len)
{
	struct push **link = s->in_flight ? &s->head->next : &s->head;

	while (*link && s->queued_bytes + len > s->max_queue_bytes) {
		ktel_complain(&s->overflow_c, KTEL_LOG_WARN,
			      "sink %s: queue full (%" PRIu64 " bytes): dropping the oldest "
			      "request (%" PRIu64 " samples)",
			      s->name, s->max_queue_bytes, (*link)->samples);
		push_drop(s, *link, link);
	}
}

/* Encode the whole state now and queue it. */
static void enqueue_state(struct rw_sink *s)
{
	struct push *p;
	uint64_t samples;
	size_t len;
	char *body;
	int ret;

	ret = ktel_rw_encode(&s->set, now_ms(), &body, &len, &samples);
	/* The ended series' markers are in this request (or, out of memory,
	 * never sent: the receiver then ends the series itself, 5 minutes
	 * after its last sample). */
	ktel_prom_set__free_ended(&s->set);
	if (ret == -ENODATA)
		return;
	p = ret ? NULL : malloc(sizeof(*p) + len);
	if (!p) {
		if (!ret)
			free(body);
		s->st.dropped += s->pending_records;
		s->pending_records = 0;
		s->st.errors++;
		return;
	}
	memcpy(p->data, body, len);
	free(body);
	p->len = len;
	p->samples = samples;
	p->records = s->pending_records;
	p->next = NULL;
	s->pending_records = 0;
	if (len > s->max_queue_bytes) {
		ktel_complain(&s->overflow_c, KTEL_LOG_WARN,
			      "sink %s: a request of %zu bytes is "
			      "larger than max_queue_bytes: dropped",
			      s->name, len);
		s->st.dropped += p->records;
		free(p);
		return;
	}
	make_room(s, len);
	/* Only the request in flight is left and the new one does not fit
	 * next to it: the new one goes, so the queue never holds more than
	 * max_queue_bytes (a slow connect kept the head in flight on qemu's
	 * arm64 and the queue went over). */
	if (s->queued_bytes + len > s->max_queue_bytes) {
		ktel_complain(&s->overflow_c, KTEL_LOG_WARN,
			      "sink %s: queue full (%" PRIu64
			      " bytes) with a request in flight: dropping the new request (%" PRIu64
			      " samples)",
			      s->name, s->max_queue_bytes, p->samples);
		s->st.dropped += p->records;
		free(p);
		return;
	}
	if (s->tail)
		s->tail->next = p;
	else
		s->head = p;
	s->tail = p;
	s->queued_bytes += len;
}

/* ---- libcurl on the loop ---- */

static void check_done(struct rw_sink *s);

static void on_sock_closed(uv_handle_t *h)
{
	struct rw_sock *k = h->data;
	struct rw_sink *s = k->s;

	free(k);
	if (--s->open_handles == 0 && s->finishing)
		finish(s);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
	struct rw_sock *k = h->data;
	struct rw_sink *s = k->s;
	int flags = 0, running;

	if (status < 0)
		flags = CURL_CSELECT_ERR;
	if (events & UV_READABLE)
		flags |= CURL_CSELECT_IN;
	if (events & UV_WRITABLE)
		flags |= CURL_CSELECT_OUT;
	curl_multi_socket_action(s->multi, k->fd, flags, &running);
	check_done(s);
}

static void sock_close(struct rw_sock *k)
{
	*k->pprev = k->next;
	if (k->next)
		k->next->pprev = k->pprev;
	uv_poll_stop(&k->poll);
	uv_close((uv_handle_t *)&k->poll, on_sock_closed);
}

/* CURLMOPT_SOCKETFUNCTION: watch fd for what curl waits for, or stop. */
static int on_socket(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp)
{
	struct rw_sink *s = userp;
	struct rw_sock *k = socketp;
	int events = 0;

	(void)e;
	if (what == CURL_POLL_REMOVE) {
		if (k) {
			sock_close(k);
			curl_multi_assign(s->multi, fd, NULL);
		}
		return 0;
	}
	if (!k) {
		k = calloc(1, sizeof(*k));
		if (!k || uv_poll_init_socket(s->loop, &k->poll, fd)) {
			free(k);
			return -1;
		}
		k->s = s;
		k->fd = fd;
		k->poll.data = k;
		k->next = s->socks;
		k->pprev = &s->socks;
		if (s->socks)
			s->socks->pprev = &k->next;
		s->socks = k;
		s->open_handles++;
		curl_multi_assign(s->multi, fd, k);
	}
	if (what & CURL_POLL_IN)
		events |= UV_READABLE;
	if (what & CURL_POLL_OUT)
		events |= UV_WRITABLE;
	uv_poll_start(&k->poll, events, on_poll);
	return 0;
}

static void on_curl_timeout(uv_timer_t *t)
{
	struct rw_sink *s = t->data;
	int running;

	curl_multi_socket_action(s->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_done(s);
}

/* CURLMOPT_TIMERFUNCTION: call socket_action(TIMEOUT) after timeout_ms. */
static int on_curl_timer(CURLM *m, long timeout_ms, void *userp)
{
	struct rw_sink *s = userp;

	(void)m;
	if (timeout_ms < 0)
		uv_timer_stop(&s->curl_timer);
	else
		uv_timer_start(&s->curl_timer, on_curl_timeout, (uint64_t)timeout_ms, 0);
	return 0;
}

/* CURLOPT_WRITEFUNCTION: keep the start of the body for the log. */
static size_t on_body(char *data, size_t size, size_t n, void *userp)
{
	struct rw_sink *s = userp;
	size_t len = size * n;

	if (s->body.len < REASON_BYTES)
		ktel_textbuf_put(&s->body, data,
				 len < REASON_BYTES - s->body.len ? len
								  : REASON_BYTES - s->body.len);
	return len;
}

/* ---- sending ---- */

/* Between half the backoff and all of it ("equal jitter"), as statsd. */
static uint64_t jittered(struct rw_sink *s)
{
	uint64_t half = s->backoff / 2;

	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 7;
	s->rng ^= s->rng << 17;
	return half + (half ? s->rng % (half + 1) : 0);
}

static void on_retry(uv_timer_t *t)
{
	struct rw_sink *s = t->data;

	s->backing_off = false;
	pump(s);
}

static void retry_later(struct rw_sink *s, const char *why)
{
	uint64_t delay = jittered(s);

	s->st.errors++;
	ktel_complain(&s->fail_c, KTEL_LOG_WARN,
		      "sink %s: POST %s: %s; retrying in %" PRIu64 " ms (%zu bytes queued)",
		      s->name, s->url, why, delay, s->queued_bytes);
	s->backoff = s->backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : s->backoff * 2;
	s->backing_off = true;
	uv_timer_start(&s->retry, on_retry, delay, 0);
}

static void delivered(struct rw_sink *s)
{
	struct push *p = s->head;

	s->st.sent += p->records;
	s->head = p->next;
	if (!s->head)
		s->tail = NULL;
	s->queued_bytes -= p->len;
	free(p);
	s->backoff = BACKOFF_MIN_MS;
	ktel_complain_clear(&s->fail_c, "sink %s: POST %s delivers again", s->name, s->url);
}

/* The head request ended with result and HTTP status. */
static void request_done(struct rw_sink *s, CURLcode result, long status)
{
	char why[REASON_BYTES + 64];

	s->in_flight = false;
	if (result == CURLE_OK && status >= 200 && status < 300) {
		delivered(s);
	} else if (result != CURLE_OK) {
		retry_later(s, s->errbuf[0] ? s->errbuf : curl_easy_strerror(result));
	} else if (status >= 500 || status == 429) {
		snprintf(why, sizeof(why), "HTTP %ld %.*s", status, (int)s->body.len,
			 s->body.p ? s->body.p : "");
		retry_later(s, why);
	} else {
		ktel_complain(&s->refused_c, KTEL_LOG_WARN,
			      "sink %s: POST %s: HTTP %ld %.*s: "
			      "refused, %" PRIu64 " samples dropped",
			      s->name, s->url, status, (int)s->body.len, s->body.p ? s->body.p : "",
			      s->head->samples);
		s->st.errors++;
		push_drop(s, s->head, &s->head);
	}
}

static void check_done(struct rw_sink *s)
{
	CURLMsg *m;
	int left;
	long status = 0;

	while ((m = curl_multi_info_read(s->multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &status);
		curl_multi_remove_handle(s->multi, m->easy_handle);
		request_done(s, m->data.result, status);
	}
	pump(s);
}

/* Start the head request unless one is in flight or a backoff runs. */
static void pump(struct rw_sink *s)
{
	if (s->close.closing && !s->head && !s->in_flight) {
		finish(s);
		return;
	}
	if (s->in_flight || s->backing_off || !s->head || s->finishing)
		return;
	s->errbuf[0] = '\0';
	s->body.len = 0;
	s->body.fail = false;
	curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, (const char *)s->head->data);
	curl_easy_setopt(s->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)s->head->len);
	if (curl_multi_add_handle(s->multi, s->easy) != CURLM_OK) {
		retry_later(s, "curl_multi_add_handle failed");
		return;
	}
	s->in_flight = true;
}

static void on_tick(uv_timer_t *t)
{
	struct rw_sink *s = t->data;

	enqueue_state(s);
	pump(s);
}

/* ---- setup ---- */

static int easy_setup(struct rw_sink *s)
{
	CURL *e = s->easy;
	int bad = 0;

	bad |= curl_easy_setopt(e, CURLOPT_URL, s->url);
	bad |= curl_easy_setopt(e, CURLOPT_POST, 1L);
	bad |= curl_easy_setopt(e, CURLOPT_HTTPHEADER, s->headers);
	bad |= curl_easy_setopt(e, CURLOPT_USERAGENT, USER_AGENT);
	bad |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)s->timeout_ms);
	bad |= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)s->timeout_ms);
	bad |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	bad |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, s->errbuf);
	bad |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	bad |= curl_easy_setopt(e, CURLOPT_WRITEDATA, s);
	/* http and https only, also for redirects (none followed anyway). */
	bad |= curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	return bad ? -EINVAL : 0;
}

static int curl_setup(struct rw_sink *s, struct ktel_err *err)
{
	int ret = ktel_rw_libs_load(err);

	if (ret)
		return ret;
	s->multi = curl_multi_init();
	s->easy = curl_easy_init();
	if (!s->multi || !s->easy)
		return ktel_err_set(err, ENOMEM, "sinks.%s: cannot set up libcurl", s->name);
	curl_multi_setopt(s->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
	curl_multi_setopt(s->multi, CURLMOPT_SOCKETDATA, s);
	curl_multi_setopt(s->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
	curl_multi_setopt(s->multi, CURLMOPT_TIMERDATA, s);
	if (easy_setup(s))
		return ktel_err_set(err, EINVAL,
				    "sinks.%s: libcurl refuses the request options "
				    "(url \"%s\")",
				    s->name, s->url);
	return 0;
}

/* The fixed headers, then the configured ones ("Name: value"). */
static int headers_setup(struct rw_sink *s, const json_t *opts)
{
	static const char *const fixed[] = {
		"Content-Encoding: snappy", "Content-Type: application/x-protobuf",
		"X-Prometheus-Remote-Write-Version: 0.1.0",
		"Expect:", /* no 100-continue round trip */
	};
	const json_t *h = json_object_get(opts, "headers");
	const char *key;
	json_t *v;
	char line[8192];

	for (size_t i = 0; i < KTEL_ARRAY_SIZE(fixed); i++) {
		struct curl_slist *l = curl_slist_append(s->headers, fixed[i]);

		if (!l)
			return -ENOMEM;
		s->headers = l;
	}
	json_object_foreach((json_t *)h, key, v) {
		struct curl_slist *l;

		/* The config rules refuse these too; a header line must never
		 * carry another. */
		if (strpbrk(key, "\r\n: ") || strpbrk(json_string_value(v), "\r\n"))
			return -EINVAL;
		snprintf(line, sizeof(line), "%s: %s", key, json_string_value(v));
		l = curl_slist_append(s->headers, line);
		if (!l)
			return -ENOMEM;
		s->headers = l;
	}
	return 0;
}

static const struct ktel_cfg_key rw_options[] = {
	{"url", KTEL_CFG_STRING, .default_text = KTEL_CFG_REQUIRED,
	 .doc = "Remote-write endpoint, http:// or https:// (Prometheus: "
		"http://HOST:9090/api/v1/write)."},
	{"interval", KTEL_CFG_DURATION, 100, 3600000, .default_text = "15s",
	 .doc = "How often the whole state is pushed, at the time of the push."},
	{"timeout", KTEL_CFG_DURATION, 100, 600000, .default_text = "10s",
	 .doc = "Bound on one request, connection included."},
	{"max_queue_bytes", KTEL_CFG_SIZE, 1024, 1ll << 32, .default_text = "4MiB",
	 .doc = "Bound on compressed requests waiting; beyond it the oldest are dropped "
		"and counted."},
	{"headers", KTEL_CFG_STRING_MAP, .default_text = "{}",
	 .doc = "Extra HTTP headers, name to value (authorization, a tenant id)."},
	{"labels", KTEL_CFG_STRING_MAP, .default_text = "{}",
	 .doc = "Labels added to every pushed series (the machine's identity: an instance "
		"or host name), name to value. A metric dimension of the same name is "
		"renamed exported_<name> (Prometheus' honor_labels: false), and the daemon "
		"warns at start and reload."},
	{"prefix", KTEL_CFG_STRING, .default_text = "\"" KTEL_PROM_DEFAULT_PREFIX "\"",
	 .doc = "Prepended to metric names that do not already start with it (as the "
		"prometheus sink)."},
	{"max_series", KTEL_CFG_INT, 1, MAX_MAX_SERIES, .default_text = "10000",
	 .doc = "Bound on pushed series; records that would add one beyond it are dropped "
		"and counted."},
	{NULL},
};

static int parse_opts(struct rw_sink *s, const json_t *opts, struct ktel_err *err)
{
	char path[128];
	int ret;

	snprintf(path, sizeof(path), "sinks.%s", s->name);
	ret = ktel_config_check_options(opts, rw_options, path, err);
	if (ret)
		return ret;
	s->url = strdup(ktel_cfg_string(opts, "url", ""));
	s->interval_ms = ktel_cfg_duration(opts, "interval", DEFAULT_INTERVAL_MS);
	s->timeout_ms = ktel_cfg_duration(opts, "timeout", DEFAULT_TIMEOUT_MS);
	s->max_queue_bytes = ktel_cfg_size(opts, "max_queue_bytes", DEFAULT_MAX_QUEUE_BYTES);
	if (!s->url ||
	    ktel_prom_set__init(&s->set, ktel_cfg_string(opts, "prefix", KTEL_PROM_DEFAULT_PREFIX),
				(uint64_t)ktel_cfg_int(opts, "max_series", DEFAULT_MAX_SERIES)))
		return ktel_err_set(err, ENOMEM, "sinks.%s: out of memory", s->name);
	ret = ktel_prom_set__add_labels(&s->set, json_object_get(opts, "labels"), s->name, err);
	if (ret)
		return ret;
	for (const char *p = s->set.prefix; *p; p++)
		if (!ktel_prom_name_char(*p, p == s->set.prefix, true))
			return ktel_err_set(err, EINVAL,
					    "sinks.%s.prefix: \"%s\" is not a "
					    "Prometheus metric name prefix ([a-zA-Z_:][a-zA-Z0-9_:]*)",
					    s->name, s->set.prefix);
	return 0;
}

static void timer_init(struct rw_sink *s, uv_timer_t *t)
{
	uv_timer_init(s->loop, t);
	t->data = s;
	s->open_handles++;
}

static void free_sink(struct rw_sink *s)
{
	struct push *p, *next;

	for (p = s->head; p; p = next) {
		next = p->next;
		free(p);
	}
	if (s->easy)
		curl_easy_cleanup(s->easy);
	if (s->headers)
		curl_slist_free_all(s->headers);
	ktel_prom_set__fini(&s->set);
	free(s->body.p);
	free(s->url);
	free(s->name);
	free(s);
}

static int rw_create(uv_loop_t *loop, const char *name, const json_t *opts, void **ret_priv,
		     struct ktel_err *err)
{
	struct rw_sink *s = calloc(1, sizeof(*s));
	int ret;

	if (!s || !(s->name = strdup(name))) {
		free(s);
		return ktel_err_set(err, ENOMEM, "sinks.%s: out of memory", name);
	}
	s->loop = loop;
	s->backoff = BACKOFF_MIN_MS;
	s->rng = (uint64_t)now_ms() ^ (uint64_t)(uintptr_t)s;
	ret = parse_opts(s, opts, err);
	if (!ret && (ret = curl_setup(s, err)) == -ELIBACC)
		ktel_err_prefix(err, "sinks.%s: ", name);
	if (!ret && (ret = headers_setup(s, opts)) == -EINVAL)
		ret = ktel_err_set(err, EINVAL,
				   "sinks.%s.headers: a name or value holds CR, LF "
				   "or another header",
				   name);
	else if (ret == -ENOMEM)
		ret = ktel_err_set(err, ENOMEM, "sinks.%s: out of memory", name);
	if (!ret && curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, s->headers) != CURLE_OK)
		ret = ktel_err_set(err, EINVAL, "sinks.%s: libcurl refuses the headers", name);
	if (ret) {
		if (s->multi)
			curl_multi_cleanup(s->multi);
		free_sink(s);
		return ret;
	}
	timer_init(s, &s->tick);
	timer_init(s, &s->curl_timer);
	timer_init(s, &s->retry);
	ktel_sink_close__init(&s->close, s->loop, s, on_close_deadline);
	s->open_handles++;
	uv_timer_start(&s->tick, on_tick, s->interval_ms, s->interval_ms);
	*ret_priv = s;
	return 0;
}

/* ---- ops ---- */

static void rw_submit(void *priv, const struct ktel_record *recs, size_t n)
{
	struct rw_sink *s = priv;

	if (s->close.closing) {
		s->st.dropped += n;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		switch (ktel_prom_set__apply(&s->set, &recs[i])) {
		case KTEL_PROM_APPLIED:
			s->pending_records++;
			break;
		case KTEL_PROM_SKIPPED:
			s->st.skipped++;
			break;
		default:
			s->st.dropped++;
			break;
		}
	}
}

static void rw_stats(void *priv, struct ktel_sink_stats *ret)
{
	struct rw_sink *s = priv;

	*ret = s->st;
	ret->queued = s->queued_bytes;
}

static void on_handle_closed(uv_handle_t *h)
{
	struct rw_sink *s = h->data;

	if (--s->open_handles == 0)
		finish(s);
}

/*
 * The end, once: drop what is left (counted), let libcurl close its
 * sockets (its socket callback closes their polls), close the timers; when
 * the last handle has closed, report and free.
 */
static void finish(struct rw_sink *s)
{
	if (!s->finishing) {
		s->finishing = true;
		if (s->in_flight)
			curl_multi_remove_handle(s->multi, s->easy);
		s->in_flight = false;
		while (s->head)
			push_drop(s, s->head, &s->head);
		s->st.dropped += s->pending_records;
		s->pending_records = 0;
		curl_multi_cleanup(s->multi);
		s->multi = NULL;
		while (s->socks) /* any libcurl did not say it was done with */
			sock_close(s->socks);
		uv_close((uv_handle_t *)&s->tick, on_handle_closed);
		uv_close((uv_handle_t *)&s->curl_timer, on_handle_closed);
		uv_close((uv_handle_t *)&s->retry, on_handle_closed);
		uv_close((uv_handle_t *)&s->close.timer, on_handle_closed);
		return;
	}
	if (s->open_handles)
		return;
	s->st.queued = 0;
	ktel_sink_close__report(&s->close); /* stats are final and still readable (sink.h) */
	free_sink(s);
}

static void on_close_deadline(void *owner)
{
	struct rw_sink *s = owner;

	if (s->head)
		ktel_log(KTEL_LOG_WARN,
			 "sink %s: close timeout: %zu bytes of requests not "
			 "delivered, dropped",
			 s->name, s->queued_bytes);
	finish(s);
}

static void rw_close(void *priv, uint64_t timeout_ms, ktel_sink_closed_cb done, void *ctx)
{
	struct rw_sink *s = priv;

	if (ktel_sink_close__begin(&s->close, timeout_ms, done, ctx))
		return;
	uv_timer_stop(&s->tick);
	if (s->pending_records)
		enqueue_state(s);
	/* No time to send anything: what is queued is dropped now. */
	if (s->close.timed_out) {
		on_close_deadline(s);
		return;
	}
	/* Waiting out a backoff could take the whole timeout: try once more now. */
	if (s->backing_off) {
		uv_timer_stop(&s->retry);
		s->backing_off = false;
	}
	pump(s);
}

static void rw_where(void *priv, char *buf, size_t len)
{
	const struct rw_sink *s = priv;

	snprintf(buf, len, "remote write %s", s->url);
}

const struct ktel_sink_ops ktel_remote_write_sink_ops = {
	.type = "remote_write",
	.where = rw_where,
	.options = rw_options,
	.create = rw_create,
	.submit = rw_submit,
	.close = rw_close,
	.stats = rw_stats,
	.cumulative = true,
};
