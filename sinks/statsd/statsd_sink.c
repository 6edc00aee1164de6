// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The statsd sink: records are formatted at submit() into datagrams in a
 * bounded queue; a zero-delay timer sends them on the next loop turn with
 * non-blocking sends (uv_udp_try_send, or send() on a unix datagram socket).
 * When the peer is down the window is dropped and counted. Over UDP the
 * socket stays open and every datagram is still sent: a send costs little
 * and the refusal (ICMP, at once on loopback) tells when the server is gone,
 * so the loss ends with the first datagram after it is back. A unix socket
 * that cannot be reached is re-opened after a capped, jittered exponential
 * backoff, and also at the next submit() once reconnect_min has passed since
 * the last try, so the records that come after the server is back are not
 * dropped for the rest of a long backoff. `reconnects` counts the first
 * delivery after a failure, not a re-open (a UDP connect() always works).
 */
#include "statsd_sink.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "android_event.h"
#include "statsd_line.h"
#include "sink_close.h"

#define DEFAULT_HOST "127.0.0.1"
#define DEFAULT_PORT 8125
#define DEFAULT_PREFIX "ktel."
#define DEFAULT_MAX_PACKET 1432
#define DEFAULT_MAX_QUEUE (1u << 20)
#define DEFAULT_RECONNECT_MIN_MS 100
#define DEFAULT_RECONNECT_MAX_MS 30000
#define UNIX_SNDBUF (2 << 20) /* what libstatssocket asks for */

static const char *const format_choices[] = {"statsd", "android", NULL};
static const char *const tags_choices[] = {"dogstatsd", "dotted", NULL};
static const char *const transport_choices[] = {"udp", "tcp", NULL};

const struct ktel_cfg_key ktel_statsd_sink_keys[] = {
	{"format", KTEL_CFG_ENUM, .choices = format_choices, .default_text = "statsd",
	 .doc = "\"statsd\": StatsD lines; \"android\": Android StatsEvent datagrams."},
	{"host", KTEL_CFG_STRING, .default_text = DEFAULT_HOST,
	 .doc = "StatsD server: IPv4/IPv6 literal or a name resolved asynchronously."},
	{"port", KTEL_CFG_INT, 1, 65535, .default_text = "8125", .doc = "StatsD UDP or TCP port."},
	{"transport", KTEL_CFG_ENUM, .choices = transport_choices, .default_text = "udp",
	 .doc = "host/port over UDP datagrams or a TCP stream (newline-terminated lines, "
		"reconnected with the same backoff)."},
	{"socket", KTEL_CFG_STRING, .default_text = "none; android: /dev/socket/statsdw",
	 .doc = "Unix datagram socket path instead of host/port."},
	{"prefix", KTEL_CFG_STRING, .default_text = DEFAULT_PREFIX,
	 .doc = "Prepended to every StatsD metric name."},
	{"tags", KTEL_CFG_ENUM, .choices = tags_choices, .default_text = "dotted",
	 .doc = "Dims and bucket bounds as dotted name segments (name.dim.v.bucket.le_0_001024: "
		"Netdata, Etsy StatsD, Graphite) or as DogStatsD tags "
		"(name.bucket:N|c|#le:0.001024,dim:v: Datadog, Telegraf)."},
	{"max_packet", KTEL_CFG_INT, 64, KTEL_STATSD_UDP_MAX - 1, .default_text = "1432",
	 .doc = "Largest StatsD datagram; lines are packed up to it, never split."},
	{"max_queue", KTEL_CFG_SIZE, 4096, 1LL << 30, .default_text = "1MiB",
	 .doc = "Bytes of datagrams waiting to be sent; beyond it records are dropped."},
	{"reconnect_min", KTEL_CFG_DURATION, 1, 3600000, .default_text = "100ms",
	 .doc = "First reconnect delay after a failure (doubles, jittered)."},
	{"reconnect_max", KTEL_CFG_DURATION, 1, 3600000, .default_text = "30s",
	 .doc = "Longest reconnect delay."},
	{NULL},
};

enum state {
	ST_RESOLVING, /* waiting for uv_getaddrinfo; records queue */
	ST_UP,        /* transport open; records are sent */
	ST_DOWN,      /* no transport: records are dropped; a unix socket is
		       * re-opened by the retry timer or at submit */
};

struct statsd_sink;

/* One datagram; owned by the queue, then by libuv while uv_udp_send has it. */
struct dgram {
	struct dgram *next;
	struct statsd_sink *sink;
	uv_udp_send_t req;
	uint32_t records; /* records whose last line is in this datagram */
	uint32_t len;
	char data[];
};

struct statsd_sink {
	uv_loop_t *loop;
	char *name;
	bool android;
	bool tcp; /* host/port over a TCP stream instead of UDP */
	struct ktel_statsd_style style;
	char *prefix, *host, *socket_path;
	int port;
	size_t max_packet, max_queue;
	uint64_t backoff_min, backoff_max, backoff;
	uint64_t rng;
	uint16_t tid;

	enum state state;
	struct ktel_sink_close close;
	bool finishing;
	bool failed;       /* a failure since the last delivery */
	uint64_t last_try; /* now_ms() of the last open attempt */
	struct sockaddr_storage addr;
	uv_getaddrinfo_t gai;
	bool gai_pending;
	uv_udp_t *udp;
	int fd;            /* unix or TCP socket, -1 when closed */
	bool connecting;   /* TCP connect() in progress */
	uint32_t sent_off; /* TCP: bytes of the head datagram already written */
	uv_poll_t *poll;   /* watches fd for writability after EAGAIN */
	bool poll_active;
	char rxbuf[64]; /* anything the UDP peer sends us is discarded */
	uv_timer_t kick, retry;
	unsigned open_handles;

	struct dgram *head, *tail;
	size_t queued_bytes, inflight_bytes;
	unsigned inflight;
	/* Records of the last UDP datagram the kernel accepted: a refusal of
	 * it shows up only at the next send or in the socket's error. */
	uint32_t unconfirmed;

	struct ktel_statsd_packer packer;
	uint32_t packet_records;
	/* Between begin and end (sink.h): the submits are one batch, whose
	 * lines pack into datagrams across them, flushed at end. */
	bool in_batch;
	uint8_t *scratch;
	struct ktel_sink_stats st;
};

/* A unix datagram socket and the poll handle watching it (poll first). */
struct unix_conn {
	uv_poll_t poll;
	int fd;
};

static void pump(struct statsd_sink *s);
static void go_down(struct statsd_sink *s, const char *what, int err);
static void maybe_finish(struct statsd_sink *s);
static void on_close_deadline(void *owner);

/* ---- options ------------------------------------------------------------ */

static int opt_string(const json_t *opts, const char *key, const char *def, char **ret)
{
	const char *v = ktel_cfg_string(opts, key, def);

	*ret = NULL;
	if (!v)
		return 0;
	*ret = strdup(v);
	return *ret ? 0 : -ENOMEM;
}

/* Rules between keys that the table cannot express. */
static int check_combinations(const char *name, const json_t *opts, bool android,
			      struct ktel_err *err)
{
	bool udp = json_object_get(opts, "host") || json_object_get(opts, "port") ||
		   json_object_get(opts, "transport");

	if (android && udp)
		return ktel_err_set(err, EINVAL,
				    "sinks.%s.%s: not used by format \"android\", which writes to a "
				    "unix socket (set socket)",
				    name,
				    json_object_get(opts, "host")   ? "host"
				    : json_object_get(opts, "port") ? "port"
								    : "transport");
	if (udp && json_object_get(opts, "socket"))
		return ktel_err_set(err, EINVAL,
				    "sinks.%s.socket: conflicts with host/port/transport (choose "
				    "UDP/TCP or a unix socket)",
				    name);
	for (size_t i = 0; android && i < 3; i++) {
		static const char *const statsd_only[] = {"tags", "prefix", "max_packet"};

		if (json_object_get(opts, statsd_only[i]))
			return ktel_err_set(err, EINVAL,
					    "sinks.%s.%s: applies to format \"statsd\" only", name,
					    statsd_only[i]);
	}
	if (json_object_get(opts, "socket") &&
	    strlen(json_string_value(json_object_get(opts, "socket"))) >=
		    sizeof(((struct sockaddr_un *)0)->sun_path))
		return ktel_err_set(err, ENAMETOOLONG,
				    "sinks.%s.socket: path longer than %zu bytes", name,
				    sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
	return 0;
}

static int parse_options(struct statsd_sink *s, const json_t *opts, struct ktel_err *err)
{
	const json_t *fmt = json_object_get(opts, "format");
	const char *def_socket;
	char path[128];
	int r;

	snprintf(path, sizeof(path), "sinks.%s", s->name);
	r = ktel_config_check_options(opts, ktel_statsd_sink_keys, path, err);
	if (r)
		return r;
	s->android = fmt && strcmp(json_string_value(fmt), "android") == 0;
	r = check_combinations(s->name, opts, s->android, err);
	if (r)
		return r;
	def_socket = s->android ? KTEL_ANDROID_DEFAULT_SOCKET : NULL;
	if (opt_string(opts, "socket", def_socket, &s->socket_path) ||
	    opt_string(opts, "prefix", DEFAULT_PREFIX, &s->prefix) ||
	    (!s->socket_path && opt_string(opts, "host", DEFAULT_HOST, &s->host)))
		return ktel_err_set(err, ENOMEM, "sinks.%s: out of memory", s->name);
	s->port = (int)ktel_cfg_int(opts, "port", DEFAULT_PORT);
	s->tcp = json_object_get(opts, "transport") &&
		 strcmp(json_string_value(json_object_get(opts, "transport")), "tcp") == 0;
	s->max_packet = (size_t)ktel_cfg_int(opts, "max_packet", DEFAULT_MAX_PACKET);
	s->max_queue = ktel_cfg_size(opts, "max_queue", DEFAULT_MAX_QUEUE);
	s->backoff_min = ktel_cfg_duration(opts, "reconnect_min", DEFAULT_RECONNECT_MIN_MS);
	s->backoff_max = ktel_cfg_duration(opts, "reconnect_max", DEFAULT_RECONNECT_MAX_MS);
	if (s->backoff_max < s->backoff_min)
		return ktel_err_set(err, EINVAL,
				    "sinks.%s.reconnect_max: must not be below reconnect_min",
				    s->name);
	if (s->max_queue < (s->android ? KTEL_ANDROID_MAX_DATAGRAM : s->max_packet))
		return ktel_err_set(err, EINVAL,
				    "sinks.%s.max_queue: must hold at least one datagram (%zu bytes)",
				    s->name,
				    s->android ? (size_t)KTEL_ANDROID_MAX_DATAGRAM : s->max_packet);
	s->style.prefix = s->prefix;
	/* Dotted by default: the common receivers without tags (Netdata on
	 * 8125, Etsy StatsD) would fold every tagged bucket into one series. */
	s->style.tags = KTEL_STATSD_TAGS_DOTTED;
	if (json_object_get(opts, "tags") &&
	    strcmp(json_string_value(json_object_get(opts, "tags")), "dogstatsd") == 0)
		s->style.tags = KTEL_STATSD_TAGS_DOGSTATSD;
	return 0;
}

/* ---- queue --------------------------------------------------------------- */

static void enqueue(struct statsd_sink *s, const void *data, size_t len, uint32_t records)
{
	struct dgram *d;

	if (s->state == ST_DOWN || s->finishing ||
	    s->queued_bytes + s->inflight_bytes + len > s->max_queue) {
		s->st.dropped += records;
		return;
	}
	/* A stream has no datagram boundary: every line ends with '\n'. */
	d = malloc(sizeof(*d) + len + s->tcp);
	if (!d) {
		s->st.dropped += records;
		return;
	}
	d->next = NULL;
	d->sink = s;
	d->records = records;
	memcpy(d->data, data, len);
	if (s->tcp)
		d->data[len++] = '\n';
	d->len = (uint32_t)len;
	if (s->tail)
		s->tail->next = d;
	else
		s->head = d;
	s->tail = d;
	s->queued_bytes += len;
}

static struct dgram *pop(struct statsd_sink *s)
{
	struct dgram *d = s->head;

	s->head = d->next;
	if (!s->head)
		s->tail = NULL;
	s->queued_bytes -= d->len;
	d->next = NULL;
	return d;
}

static void drop_queue(struct statsd_sink *s)
{
	while (s->head) {
		struct dgram *d = pop(s);

		s->st.dropped += d->records;
		free(d);
	}
}

/* records reached the peer: the first delivery after a failure is the
 * reconnect (not the re-open, which proves nothing for UDP). */
static void delivered(struct statsd_sink *s, uint32_t records)
{
	if (!records)
		return;
	s->backoff = s->backoff_min;
	s->st.sent += records;
	if (s->failed) {
		s->failed = false;
		s->st.reconnects++;
	}
}

/* The last accepted UDP datagram was not refused: it counts as sent. */
static void confirm(struct statsd_sink *s)
{
	delivered(s, s->unconfirmed);
	s->unconfirmed = 0;
}

/*
 * Count one I/O error and keep its text for status and the close log, so
 * that "1 errors" says which: what failed (a libc call's name), the peer,
 * and libuv's text of err ("sendto 127.0.0.1:8125: connection refused").
 */
static void note_error(struct statsd_sink *s, const char *what, int err)
{
	s->st.errors++;
	if (s->socket_path)
		snprintf(s->st.last_error, sizeof(s->st.last_error), "%s %s: %s", what,
			 s->socket_path, uv_strerror(err));
	else
		snprintf(s->st.last_error, sizeof(s->st.last_error), "%s %s:%d: %s", what, s->host,
			 s->port, uv_strerror(err));
}

/*
 * UDP: the peer refused what was sent unconfirmed (err says how). The
 * socket stays connected and later datagrams are still sent, so the loss is
 * the window the server was away and not a backoff on top of it.
 */
static void udp_refused(struct statsd_sink *s, int err)
{
	note_error(s, "sendto", err);
	s->st.dropped += s->unconfirmed;
	s->unconfirmed = 0;
	s->failed = true;
}

/* ---- transport ----------------------------------------------------------- */

static bool peer_down_error(int err)
{
	switch (-err) {
	case ECONNREFUSED:
	case ENOENT:
	case ENOTCONN:
	case ECONNRESET:
	case EPIPE:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case EHOSTDOWN:
	case ENETDOWN:
	case EDESTADDRREQ:
		return true;
	default:
		return false;
	}
}

static void handle_closed(uv_handle_t *h)
{
	struct statsd_sink *s = h->data;

	if (h->type == UV_POLL)
		close(((struct unix_conn *)h)->fd);
	if (h->type == UV_UDP || h->type == UV_POLL)
		free(h);
	s->open_handles--;
	maybe_finish(s);
}

static void transport_close(struct statsd_sink *s)
{
	if (s->udp) {
		uv_close((uv_handle_t *)s->udp, handle_closed);
		s->udp = NULL;
	}
	if (s->poll) {
		/* The fd is closed in handle_closed, once libuv let go of it. */
		uv_close((uv_handle_t *)s->poll, handle_closed);
		s->poll = NULL;
		s->poll_active = false;
		s->fd = -1;
		s->connecting = false;
		s->sent_off = 0;
	} else if (s->fd >= 0) {
		close(s->fd);
		s->fd = -1;
	}
}

static void udp_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct statsd_sink *s = h->data;

	*buf = uv_buf_init(s->rxbuf, sizeof(s->rxbuf));
}

/* A connected UDP socket reports ICMP port unreachable as a read error. */
static void udp_recv(uv_udp_t *h, ssize_t nread, const uv_buf_t *buf, const struct sockaddr *addr,
		     unsigned flags)
{
	struct statsd_sink *s = h->data;

	if (nread >= 0 || h != s->udp)
		return;
	if (peer_down_error((int)nread)) {
		udp_refused(s, (int)nread);
		return;
	}
	note_error(s, "recv", (int)nread);
}

static int udp_open(struct statsd_sink *s)
{
	uv_udp_t *u = malloc(sizeof(*u));
	int r;

	if (!u)
		return -ENOMEM;
	r = uv_udp_init(s->loop, u);
	if (r) {
		free(u);
		return r;
	}
	u->data = s;
	s->open_handles++;
	s->udp = u;
	r = uv_udp_connect(u, (const struct sockaddr *)&s->addr);
	if (!r)
		r = uv_udp_recv_start(u, udp_alloc, udp_recv);
	if (r)
		transport_close(s);
	return r;
}

/* The sink's poll handle on a connected (or connecting) socket fd. */
static int poll_attach(struct statsd_sink *s, int fd)
{
	struct unix_conn *conn = malloc(sizeof(*conn));
	int r;

	if (!conn)
		return -ENOMEM;
	r = uv_poll_init_socket(s->loop, &conn->poll, fd);
	if (r) {
		free(conn);
		return r;
	}
	conn->fd = fd;
	conn->poll.data = s;
	s->poll = &conn->poll;
	s->open_handles++;
	s->fd = fd;
	return 0;
}

static int unix_open(struct statsd_sink *s)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd, sndbuf = UNIX_SNDBUF, r;

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", s->socket_path);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* Best effort: a smaller buffer only means EAGAIN sooner. */
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		r = -errno;
		goto err_close;
	}
	r = poll_attach(s, fd);
	if (r)
		goto err_close;
	return 0;
err_close:
	close(fd);
	return r;
}

static void tcp_poll_cb(uv_poll_t *p, int status, int events);

/* Watch the TCP socket for the peer closing, and for room to write. */
static int tcp_watch(struct statsd_sink *s, bool writable)
{
	int r = uv_poll_start(s->poll, UV_READABLE | UV_DISCONNECT | (writable ? UV_WRITABLE : 0),
			      tcp_poll_cb);

	s->poll_active = !r && writable;
	return r;
}

/*
 * A non-blocking connect: records queue while it is in progress (the poll
 * reports its result), and are dropped with the queue if it fails.
 */
static int tcp_open(struct statsd_sink *s)
{
	socklen_t alen = s->addr.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
						       : sizeof(struct sockaddr_in);
	int fd, r;

	fd = socket(s->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&s->addr, alen) < 0 && errno != EINPROGRESS) {
		r = -errno;
		goto err_close;
	}
	r = poll_attach(s, fd);
	if (r)
		goto err_close;
	s->sent_off = 0;
	s->connecting = true;
	return tcp_watch(s, true);
err_close:
	close(fd);
	return r;
}

static int transport_open(struct statsd_sink *s)
{
	if (s->socket_path)
		return unix_open(s);
	return s->tcp ? tcp_open(s) : udp_open(s);
}

/* The TCP peer closed or reset: what it did not read is lost. */
static bool tcp_peer_gone(struct statsd_sink *s)
{
	char buf[256];
	ssize_t n;

	do
		n = recv(s->fd, buf, sizeof(buf), MSG_DONTWAIT);
	while (n > 0);
	return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
}

static void tcp_poll_cb(uv_poll_t *p, int status, int events)
{
	struct statsd_sink *s = p->data;
	int soerr = 0;
	socklen_t len = sizeof(soerr);

	if (status < 0) {
		go_down(s, "poll", status);
		return;
	}
	if (s->connecting && (events & UV_WRITABLE)) {
		if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
			soerr = errno;
		if (soerr) {
			go_down(s, "connect", -soerr);
			return;
		}
		s->connecting = false;
	}
	if ((events & (UV_READABLE | UV_DISCONNECT)) && tcp_peer_gone(s)) {
		go_down(s, "recv", -ECONNRESET);
		return;
	}
	if (events & UV_WRITABLE) {
		if (tcp_watch(s, false)) {
			go_down(s, "poll", -EIO);
			return;
		}
		pump(s);
	}
}

/* Returns 0 (datagram written whole), -EAGAIN (wait for the poll) or an error. */
static int tcp_send(struct statsd_sink *s)
{
	struct dgram *d = s->head;
	ssize_t n;

	n = send(s->fd, d->data + s->sent_off, d->len - s->sent_off, MSG_NOSIGNAL);
	if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
		return -errno;
	if (n > 0)
		s->sent_off += (uint32_t)n;
	if (s->sent_off < d->len)
		return tcp_watch(s, true) ?: -EAGAIN;
	s->sent_off = 0;
	pop(s);
	delivered(s, d->records);
	free(d);
	return 0;
}

static void poll_writable(uv_poll_t *p, int status, int events)
{
	struct statsd_sink *s = p->data;

	uv_poll_stop(p);
	s->poll_active = false;
	if (status < 0) {
		go_down(s, "poll", status);
		return;
	}
	pump(s);
}

/* Returns 0 (datagram done), -EAGAIN (wait for the poll) or an error. */
static int unix_send(struct statsd_sink *s)
{
	struct dgram *d = s->head;
	bool retried = false;
	ssize_t n;
	int r;

again:
	n = send(s->fd, d->data, d->len, MSG_NOSIGNAL);
	if (n >= 0) {
		pop(s);
		delivered(s, d->records);
		free(d);
		return 0;
	}
	r = -errno;
	if (r == -EAGAIN || r == -EWOULDBLOCK) {
		r = uv_poll_start(s->poll, UV_WRITABLE, poll_writable);
		if (r)
			return r;
		s->poll_active = true;
		return -EAGAIN;
	}
	/* statsd restarted: libstatssocket re-connects once and retries. */
	if (!retried && (r == -ENOTCONN || r == -ECONNREFUSED || r == -ENOENT)) {
		retried = true;
		transport_close(s);
		r = unix_open(s);
		if (r)
			return r;
		s->failed = true; /* counted as a reconnect once the send works */
		goto again;
	}
	return r;
}

static void udp_sent(uv_udp_send_t *req, int status)
{
	struct dgram *d = req->data;
	struct statsd_sink *s = d->sink;

	s->inflight--;
	s->inflight_bytes -= d->len;
	if (!status) {
		confirm(s);
		s->unconfirmed = d->records;
	} else {
		s->st.dropped += d->records;
		if (status != UV_ECANCELED && !peer_down_error(status))
			note_error(s, "sendto", status);
	}
	free(d);
	if (status && status != UV_ECANCELED && peer_down_error(status))
		udp_refused(s, status);
	if (s->state == ST_UP)
		pump(s);
	maybe_finish(s);
}

/* Returns 0 (datagram taken) or an error with the datagram still queued. */
static int udp_send(struct statsd_sink *s)
{
	struct dgram *d = s->head;
	uv_buf_t b = uv_buf_init(d->data, d->len);
	int r;

	if (!s->inflight) {
		r = uv_udp_try_send(s->udp, &b, 1, NULL);
		if (r >= 0) {
			pop(s);
			confirm(s);
			s->unconfirmed = d->records;
			free(d);
			return 0;
		}
		if (r != UV_EAGAIN)
			return r;
	}
	/* The socket buffer is full (or earlier datagrams wait in libuv, and
	 * order matters): libuv sends it when the socket is writable. */
	d->req.data = d;
	r = uv_udp_send(&d->req, s->udp, &b, 1, NULL, udp_sent);
	if (r)
		return r;
	pop(s);
	s->inflight++;
	s->inflight_bytes += d->len;
	return 0;
}

/*
 * On loopback the ICMP refusal of the last datagram is already pending when
 * send returns; collect it now so it neither hides nor spills into the next
 * window.
 */
static void udp_check(struct statsd_sink *s)
{
	int soerr = 0;
	socklen_t len = sizeof(soerr);
	uv_os_fd_t fd;

	if (!s->udp || uv_fileno((uv_handle_t *)s->udp, &fd) ||
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
		return;
	if (!soerr) {
		if (!s->inflight)
			confirm(s);
		return;
	}
	if (peer_down_error(-soerr))
		udp_refused(s, -soerr);
	else
		note_error(s, "sendto", -soerr);
}

static void pump(struct statsd_sink *s)
{
	bool resent = false;

	while (s->state == ST_UP && s->head && !s->poll_active && !s->connecting) {
		int r = s->udp ? udp_send(s) : s->tcp ? tcp_send(s) : unix_send(s);

		if (r == -EAGAIN)
			break;
		if (!r) {
			resent = false;
			continue;
		}
		/* The refusal is that of the datagram before; this one was not
		 * sent: send it again, once. */
		if (s->udp && peer_down_error(r) && !resent) {
			udp_refused(s, r);
			resent = true;
			continue;
		}
		if (!s->udp && (peer_down_error(r) || !s->poll)) {
			go_down(s, "send", r);
			break;
		}
		/* Anything else concerns this datagram only (EMSGSIZE...). */
		note_error(s, s->udp ? "sendto" : "send", r);
		if (s->head) {
			struct dgram *d = pop(s);

			s->st.dropped += d->records;
			free(d);
		}
	}
	if (s->state == ST_UP && s->udp)
		udp_check(s);
	maybe_finish(s);
}

static void kick_cb(uv_timer_t *t)
{
	pump(t->data);
}

static void kick(struct statsd_sink *s)
{
	if (s->state == ST_UP && s->head && !s->finishing)
		uv_timer_start(&s->kick, kick_cb, 0, 0);
}

/* ---- failure and reconnect ----------------------------------------------- */

/* Between half the backoff and all of it, at random ("equal jitter"), so
 * many daemons that lost one server do not come back in step. */
static uint64_t jittered(struct statsd_sink *s)
{
	uint64_t half = s->backoff / 2;

	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 7;
	s->rng ^= s->rng << 17;
	return half + (half ? s->rng % (half + 1) : 0) + (s->backoff & 1);
}

static void resolve(struct statsd_sink *s);
/*
 * The time of open attempts: the clock itself, not uv_now(), the loop's
 * time cached at the start of its iteration. A submit() after blocking work
 * (a pull, or a caller that ran no loop for a while) saw a stale uv_now()
 * and skipped the at-submit retry as "too soon after the last", so the
 * window that came right after the server was back was dropped.
 */
static uint64_t now_ms(void)
{
	return uv_hrtime() / 1000000;
}


static void retry_cb(uv_timer_t *t)
{
	struct statsd_sink *s = t->data;
	int r;

	if (s->finishing)
		return;
	if (!s->socket_path && s->addr.ss_family == AF_UNSPEC) {
		resolve(s);
		return;
	}
	s->last_try = now_ms();
	r = transport_open(s);
	if (r) {
		go_down(s, "connect", r);
		return;
	}
	s->state = ST_UP;
	kick(s);
}

/*
 * Unix socket down: try now rather than at the end of a backoff that may
 * have grown to reconnect_max, at most once per reconnect_min. A failed try
 * (connect() on a missing or dead socket fails at once) changes nothing.
 */
static void retry_at_submit(struct statsd_sink *s)
{
	if (s->state != ST_DOWN || (!s->socket_path && !s->tcp) || s->close.closing ||
	    now_ms() - s->last_try < s->backoff_min)
		return;
	s->last_try = now_ms();
	if (transport_open(s))
		return;
	uv_timer_stop(&s->retry);
	s->state = ST_UP;
}

/*
 * The peer is gone: what was sent unconfirmed and what waits is the lost
 * window; records submitted until the retry are dropped at once.
 */
static void go_down(struct statsd_sink *s, const char *what, int err)
{
	uint64_t delay;

	note_error(s, what, err);
	s->st.dropped += s->unconfirmed;
	s->unconfirmed = 0;
	s->failed = true;
	drop_queue(s);
	transport_close(s);
	s->state = ST_DOWN;
	s->last_try = now_ms();
	if (s->close.closing) {
		maybe_finish(s);
		return;
	}
	delay = jittered(s);
	s->backoff = s->backoff * 2 > s->backoff_max ? s->backoff_max : s->backoff * 2;
	uv_timer_start(&s->retry, retry_cb, delay, 0);
}

static void resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
	struct statsd_sink *s = req->data;
	int r;

	s->gai_pending = false;
	if (!status && res && res->ai_addrlen <= sizeof(s->addr))
		memcpy(&s->addr, res->ai_addr, res->ai_addrlen);
	uv_freeaddrinfo(res);
	if (s->finishing) {
		maybe_finish(s);
		return;
	}
	r = status ? status : s->addr.ss_family == AF_UNSPEC ? -EADDRNOTAVAIL : 0;
	if (r) {
		go_down(s, "resolve", r);
		return;
	}
	r = transport_open(s);
	if (r) {
		s->addr.ss_family = AF_UNSPEC;
		go_down(s, "connect", r);
		return;
	}
	s->state = ST_UP;
	kick(s);
	maybe_finish(s);
}

static void resolve(struct statsd_sink *s)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM};
	char port[8];
	int r;

	snprintf(port, sizeof(port), "%d", s->port);
	s->state = ST_RESOLVING;
	s->gai.data = s;
	r = uv_getaddrinfo(s->loop, &s->gai, resolved, s->host, port, &hints);
	if (r) {
		go_down(s, "resolve", r);
		return;
	}
	s->gai_pending = true;
}

/* IPv4 or IPv6 literal: no resolver round trip. */
static bool literal_address(struct statsd_sink *s)
{
	struct sockaddr_in *in = (struct sockaddr_in *)&s->addr;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&s->addr;

	return uv_ip4_addr(s->host, s->port, in) == 0 || uv_ip6_addr(s->host, s->port, in6) == 0;
}

/* ---- sink operations ----------------------------------------------------- */

static void sink_free(struct statsd_sink *s)
{
	if (!s)
		return;
	drop_queue(s);
	ktel_statsd_packer__release(&s->packer);
	free(s->scratch);
	free(s->name);
	free(s->prefix);
	free(s->host);
	free(s->socket_path);
	free(s);
}

static int packet_done(void *ctx, const char *data, size_t len)
{
	struct statsd_sink *s = ctx;

	enqueue(s, data, len, s->packet_records);
	s->packet_records = 0;
	return 0;
}

static int add_unit(void *ctx, const char *unit, size_t len)
{
	struct statsd_sink *s = ctx;

	return ktel_statsd_packer__add(&s->packer, unit, len);
}

static int statsd_create(uv_loop_t *loop, const char *name, const json_t *opts, void **ret_priv,
			 struct ktel_err *err)
{
	struct statsd_sink *s;
	int r;

	s = calloc(1, sizeof(*s));
	if (!s)
		return ktel_err_set(err, ENOMEM, "sinks.%s: out of memory", name);
	s->fd = -1;
	s->loop = loop;
	s->name = strdup(name);
	if (!s->name) {
		r = ktel_err_set(err, ENOMEM, "sinks.%s: out of memory", name);
		goto err_free;
	}
	r = parse_options(s, opts, err);
	if (r)
		goto err_free;
	r = s->android ? 0 : ktel_statsd_packer__init(&s->packer, s->max_packet, packet_done, s);
	s->scratch = s->android ? malloc(KTEL_ANDROID_MAX_DATAGRAM) : NULL;
	if (r || (s->android && !s->scratch)) {
		r = ktel_err_set(err, ENOMEM, "sinks.%s: out of memory", name);
		goto err_free;
	}
	s->backoff = s->backoff_min;
	s->rng = uv_hrtime() ^ (uintptr_t)s ^ 0x9e3779b97f4a7c15ULL;
	s->tid = (uint16_t)gettid();
	uv_timer_init(loop, &s->kick);
	uv_timer_init(loop, &s->retry);
	ktel_sink_close__init(&s->close, loop, s, on_close_deadline);
	s->kick.data = s->retry.data = s;
	s->open_handles = 3;
	/* From here on the handles exist: failures are runtime, not config. */
	if (s->socket_path || literal_address(s)) {
		s->state = ST_UP;
		r = transport_open(s);
		if (r)
			go_down(s, "connect", r);
	} else {
		s->addr.ss_family = AF_UNSPEC;
		resolve(s);
	}
	*ret_priv = s;
	return 0;
err_free:
	sink_free(s);
	return r;
}

/* The end of a batch: its last datagram is queued and sending starts. */
static void batch_flush(struct statsd_sink *s)
{
	if (!s->android)
		ktel_statsd_packer__flush(&s->packer);
	kick(s);
}

/* A pull routed in windows is packed as one submit of all of it: the same
 * datagrams, not one short datagram per window. */
static void statsd_begin(void *priv)
{
	struct statsd_sink *s = priv;

	retry_at_submit(s);
	s->in_batch = true;
}

static void statsd_end(void *priv)
{
	struct statsd_sink *s = priv;

	s->in_batch = false;
	batch_flush(s);
}

static void statsd_submit(void *priv, const struct ktel_record *recs, size_t n)
{
	struct statsd_sink *s = priv;

	if (!s->in_batch)
		retry_at_submit(s);
	for (size_t i = 0; i < n; i++) {
		int len;

		if (s->close.closing) {
			s->st.dropped++;
			continue;
		}
		/* A series' end (record.h) has no delta: nothing to send. */
		if (ktel_record_ends_only(&recs[i]))
			continue;
		/* Not a loss: the android format has no form for a record
		 * without an atom id (self-telemetry), so it is not sent and
		 * counted as skipped, not as dropped. */
		if (s->android && !recs[i].atom_id) {
			s->st.skipped++;
			continue;
		}
		if (s->android) {
			len = ktel_android__encode_record(&recs[i], s->tid, s->scratch,
							  KTEL_ANDROID_MAX_DATAGRAM);
			if (len < 0)
				s->st.dropped++;
			else
				enqueue(s, s->scratch, (size_t)len, 1);
			continue;
		}
		/* A record whose line could not be sent (too long) is dropped
		 * as a whole in the counts, though its other lines go out. */
		if (ktel_statsd__format(&s->style, &recs[i], add_unit, s))
			s->st.dropped++;
		else
			s->packet_records++;
	}
	if (!s->in_batch)
		batch_flush(s);
}

/* Everything that could be sent was, or time is up: release it all. */
static void finish(struct statsd_sink *s)
{
	if (s->finishing)
		return;
	s->finishing = true;
	drop_queue(s);
	s->st.dropped += s->packet_records;
	s->packet_records = 0;
	confirm(s);
	transport_close(s);
	if (s->gai_pending)
		uv_cancel((uv_req_t *)&s->gai);
	uv_close((uv_handle_t *)&s->kick, handle_closed);
	uv_close((uv_handle_t *)&s->retry, handle_closed);
	uv_close((uv_handle_t *)&s->close.timer, handle_closed);
}

/*
 * Called whenever something completes. While closing, finish once nothing
 * waits; once finishing, free once every handle and request came back.
 */
static void maybe_finish(struct statsd_sink *s)
{
	if (!s->close.closing)
		return;
	if (!s->finishing) {
		if (!s->head && !s->inflight && !s->gai_pending)
			finish(s);
		return;
	}
	if (s->open_handles || s->gai_pending || s->inflight)
		return;
	/* done() may still read the stats; free afterwards. Not closing
	 * from here on: nothing done() sets off can end the sink again. */
	s->close.closing = false;
	ktel_sink_close__report(&s->close);
	sink_free(s);
}

static void on_close_deadline(void *owner)
{
	finish(owner);
}

static void statsd_close(void *priv, uint64_t timeout_ms, ktel_sink_closed_cb done, void *ctx)
{
	struct statsd_sink *s = priv;

	if (ktel_sink_close__begin(&s->close, timeout_ms, done, ctx))
		return;
	uv_timer_stop(&s->kick);
	uv_timer_stop(&s->retry);
	if (s->close.timed_out) {
		finish(s);
		return;
	}
	if (s->state == ST_UP && s->head)
		pump(s);
	if (!s->finishing && !s->head && !s->inflight && !s->gai_pending)
		finish(s);
}

static void statsd_stats(void *priv, struct ktel_sink_stats *ret)
{
	struct statsd_sink *s = priv;

	*ret = s->st;
	ret->queued = s->queued_bytes + s->inflight_bytes;
}

/* See ktel_sink_ops.where. */
static void statsd_where(void *priv, char *buf, size_t len)
{
	const struct statsd_sink *s = priv;

	if (s->socket_path)
		snprintf(buf, len, "%s to unix socket %s", s->android ? "android" : "statsd",
			 s->socket_path);
	else
		snprintf(buf, len, "statsd to %s %s:%d", s->tcp ? "tcp" : "udp", s->host, s->port);
}

const struct ktel_sink_ops ktel_statsd_sink_ops = {
	.type = "statsd",
	.where = statsd_where,
	.options = ktel_statsd_sink_keys,
	.create = statsd_create,
	.submit = statsd_submit,
	.begin = statsd_begin,
	.end = statsd_end,
	.close = statsd_close,
	.stats = statsd_stats,
};
