// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Control socket server: see control.h and docs/control.md. The daemon is
 * reached only through the struct ktel_control_ops it handed to
 * ktel_control__new (its side: daemon_control.c). The wire pieces shared
 * with ktelemetryctl are in control_proto.c.
 */
#include "control.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "fsutil.h"
#include "jsonutil.h"
#include "log.h"
#include "record.h"
#include "utf8.h"

#define MAX_GROUPS 65536

static uint64_t idle_timeout_ms = KTEL_CONTROL_IDLE_TIMEOUT_MS;

void ktel_control_set_idle_timeout(uint64_t ms)
{
	idle_timeout_ms = ms ? ms : KTEL_CONTROL_IDLE_TIMEOUT_MS;
}
#define MAX_ENUM_LABELS 256

struct client {
	uv_pipe_t pipe;
	uv_shutdown_t shutdown;
	struct ktel_control *c;
	struct client *next, **pprev;
	char *buf; /* KTEL_CONTROL_MAX_LINE bytes once admitted */
	size_t len;
	size_t pending;        /* answer bytes not yet written */
	bool closing;          /* uv_close called by us */
	bool draining;         /* last answer queued, shutting down */
	bool admitted;         /* passed the checks, holds a slot */
	bool root;             /* peer uid 0 */
	bool paused;           /* reads stopped: complete lines wait in buf */
	bool blocked;          /* paused until its answers drain (on_write) */
	uint64_t last_request; /* uv_now of admission or the last complete request */
	uint64_t last_drain;   /* uv_now of the last written answer, or of queueing one */
	size_t pull_owed;      /* pull answers waiting for the pending pull */
	char *pull_name;       /* its metric (NULL: every enabled one) */
	unsigned int budget;   /* requests this turn may still answer */
};

struct ktel_control {
	uv_loop_t *loop;
	const struct ktel_control_ops *ops;
	void *ctx; /* the ops' */
	uv_pipe_t server;
	bool server_open;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	gid_t gid;
	dev_t dev;
	ino_t ino;
	struct client *clients;
	size_t admitted;  /* clients holding a slot */
	uv_timer_t sweep; /* closes idle clients */
	uv_idle_t resume; /* runs pending pulls, resumes paused clients */
	bool handles_open;
	size_t pending_closes;
	bool closing;
	struct ktel_control_stats stats;
};

struct write_req {
	uv_write_t req;
	struct client *cl;
	size_t len;
	char data[];
};

static const char *arg_type_name(enum ktel_ctl_arg_type t)
{
	return t == KTEL_CTL_ARG_UINT ? "an integer >= 0" : "a string";
}

static bool arg_type_ok(enum ktel_ctl_arg_type t, const json_t *v)
{
	if (t == KTEL_CTL_ARG_UINT)
		return json_is_integer(v) && json_integer_value(v) >= 0;
	return json_is_string(v);
}

static const struct ktel_ctl_arg *find_arg(const struct ktel_control_cmd *cmd, const char *key)
{
	for (const struct ktel_ctl_arg *a = cmd->args; a && a->name; a++)
		if (strcmp(a->name, key) == 0)
			return a;
	return NULL;
}

static int check_args(const struct ktel_control_cmd *cmd, const json_t *req, struct ktel_err *err)
{
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)req, key, v) {
		const struct ktel_ctl_arg *a;

		if (strcmp(key, "cmd") == 0)
			continue;
		a = find_arg(cmd, key);
		if (!a)
			return ktel_err_set(err, EINVAL, "%s: unknown argument \"%s\"", cmd->name,
					    key);
		if (!arg_type_ok(a->type, v))
			return ktel_err_set(err, EINVAL, "%s: \"%s\": expected %s", cmd->name, key,
					    arg_type_name(a->type));
	}
	for (const struct ktel_ctl_arg *a = cmd->args; a && a->name; a++)
		if (a->required && !json_object_get(req, a->name))
			return ktel_err_set(err, EINVAL, "%s: missing argument \"%s\"", cmd->name,
					    a->name);
	return 0;
}

int ktel_control_parse_request(const char *line, json_t **ret_req,
			       const struct ktel_control_cmd **ret_cmd, struct ktel_err *err)
{
	const struct ktel_control_cmd *cmd;
	json_error_t jerr;
	const char *name;
	json_t *req;
	int r;

	req = json_loads(line, JSON_REJECT_DUPLICATES, &jerr);
	if (!req)
		return ktel_err_set(err, EINVAL, "request is not JSON: %s (column %d)", jerr.text,
				    jerr.column);
	if (!json_is_object(req)) {
		r = ktel_err_set(err, EINVAL, "request is not a JSON object");
		goto fail;
	}
	name = json_string_value(json_object_get(req, "cmd"));
	if (!name) {
		r = ktel_err_set(err, EINVAL, "request has no \"cmd\" string");
		goto fail;
	}
	cmd = ktel_control_cmd_find(name);
	if (!cmd) {
		r = ktel_err_set(err, EINVAL, "unknown command \"%s\" (\"help\" lists them)", name);
		goto fail;
	}
	r = check_args(cmd, req, err);
	if (r)
		goto fail;
	*ret_req = req;
	*ret_cmd = cmd;
	return 0;
fail:
	json_decref(req);
	return r;
}

static void group_label(gid_t gid, char *buf, size_t len)
{
	struct group gr, *res = NULL;
	char tmp[4096];

	if (getgrgid_r(gid, &gr, tmp, sizeof(tmp), &res) == 0 && res)
		snprintf(buf, len, "%s", res->gr_name);
	else
		snprintf(buf, len, "%u", (unsigned)gid);
}

/* Is group among uid's primary and supplementary groups? */
static bool uid_in_group(uid_t uid, gid_t group)
{
	struct passwd pw, *res = NULL;
	char tmp[4096];
	gid_t *groups;
	int n = 64, want;
	bool found = false;

	if (getpwuid_r(uid, &pw, tmp, sizeof(tmp), &res) != 0 || !res)
		return false;
	if (res->pw_gid == group)
		return true;
	for (;;) {
		want = n;
		groups = calloc((size_t)n, sizeof(*groups));
		if (!groups)
			return false;
		if (getgrouplist(res->pw_name, res->pw_gid, groups, &want) >= 0)
			break;
		free(groups);
		/* want now says how many there are; bounded so a broken NSS
		 * answer cannot make us allocate without end. */
		if (want <= n || want > MAX_GROUPS)
			return false;
		n = want;
	}
	/* want is now how many groups getgrouplist wrote. */
	for (int i = 0; i < want && !found; i++)
		found = groups[i] == group;
	free(groups);
	return found;
}

static bool gid_in(const gid_t *groups, int n, gid_t group)
{
	for (int i = 0; i < n; i++)
		if (groups[i] == group)
			return true;
	return false;
}

int ktel_control_peer_check(uid_t uid, gid_t gid, const gid_t *groups, int n_groups, gid_t group,
			    struct ktel_err *err)
{
	char name[256];
	bool member;

	if (uid == 0)
		return 0;
	member = n_groups >= 0 ? gid_in(groups, n_groups, group) : uid_in_group(uid, group);
	if (group != (gid_t)-1 && (gid == group || member))
		return 0;
	group_label(group, name, sizeof(name));
	return ktel_err_set(err, EACCES,
			    "permission denied: uid %u is neither root nor in group %s",
			    (unsigned)uid, name);
}

/* ---- commands ------------------------------------------------------------ */

/* Each command hands its checked arguments to the daemon's operation. */

static const char *arg_name(const json_t *req)
{
	return json_string_value(json_object_get(req, "name"));
}

static int cmd_help(struct ktel_control *c, const json_t *req, json_t *resp, struct ktel_err *err)
{
	json_t *cmds = json_array();

	for (const struct ktel_control_cmd *cmd = ktel_control_cmds; cmd->name; cmd++) {
		json_t *args = json_array();

		for (const struct ktel_ctl_arg *a = cmd->args; a && a->name; a++)
			json_array_append_new(args,
					      json_pack("{s:s, s:s, s:b}", "name", a->name, "type",
							a->type == KTEL_CTL_ARG_UINT ? "uint"
										     : "string",
							"required", a->required));
		json_array_append_new(cmds, json_pack("{s:s, s:s, s:o}", "name", cmd->name, "help",
						      cmd->help, "args", args));
	}
	return json_object_set_new(resp, "commands", cmds) ? -ENOMEM : 0;
}

/* This server's part of status: the socket the answer came through (in the
 * place the daemon gave control_socket) and the server's counters. */
static json_t *control_json(const struct ktel_control *c)
{
	const struct ktel_control_stats *st = &c->stats;

	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "clients",
			 (json_int_t)st->clients, "accepted", (json_int_t)st->accepted, "denied",
			 (json_int_t)st->denied, "busy", (json_int_t)st->busy, "requests",
			 (json_int_t)st->requests, "errors", (json_int_t)st->errors, "too_long",
			 (json_int_t)st->too_long, "overflows", (json_int_t)st->overflows,
			 "idle_closed", (json_int_t)st->idle_closed);
}

static int cmd_status(struct ktel_control *c, const json_t *req, json_t *resp, struct ktel_err *err)
{
	json_t *d;
	int r = c->ops->status(c->ctx, resp, err);

	if (r)
		return r;
	d = json_object_get(resp, "daemon");
	if (!json_is_object(d))
		return ktel_err_set(err, ENOMEM, "out of memory");
	json_object_set_new(d, "control_socket", json_string(c->path));
	json_object_set_new(d, "control", control_json(c));
	return 0;
}

static int cmd_list(struct ktel_control *c, const json_t *req, json_t *resp, struct ktel_err *err)
{
	return c->ops->list(c->ctx, resp, err);
}

static int cmd_enable(struct ktel_control *c, const json_t *req, json_t *resp, struct ktel_err *err)
{
	json_t *v = json_object_get(req, "for_ms");

	return c->ops->enable(c->ctx, arg_name(req), v ? (uint64_t)json_integer_value(v) : 0, resp,
			      err);
}

static int cmd_disable(struct ktel_control *c, const json_t *req, json_t *resp,
		       struct ktel_err *err)
{
	return c->ops->disable(c->ctx, arg_name(req), resp, err);
}

static int cmd_pull(struct ktel_control *c, const json_t *req, json_t *resp, struct ktel_err *err)
{
	return c->ops->pull(c->ctx, arg_name(req), resp, err);
}

static int cmd_show(struct ktel_control *c, const json_t *req, json_t *resp, struct ktel_err *err)
{
	return c->ops->show(c->ctx, arg_name(req), resp, err);
}

static int cmd_reload(struct ktel_control *c, const json_t *req, json_t *resp, struct ktel_err *err)
{
	json_t *a = json_array(), *e;
	size_t i;
	int r;

	json_object_set_new(resp, "errors", a);
	ktel_log(KTEL_LOG_INFO, "control: reloading the configuration");
	r = c->ops->reload(c->ctx, a, err);
	/* The daemon's message says what runs now (the old config, or the new
	 * one without some metrics); the log has what the reply has. */
	json_array_foreach(a, i, e)
		ktel_log(KTEL_LOG_ERROR, "reload: %s", json_string_value(e));
	if (r)
		ktel_log(KTEL_LOG_ERROR, "reload: %s", err->msg);
	return r;
}

static int cmd_watch(struct ktel_control *c, const json_t *req, json_t *resp, struct ktel_err *err)
{
	return c->ops->watch(c->ctx, resp, err);
}

/* logrotate's postrotate (as SIGUSR1): the file sinks reopen their path. */
static int cmd_reopen(struct ktel_control *c, const json_t *req, json_t *resp, struct ktel_err *err)
{
	json_object_set_new(resp, "sinks", json_integer((json_int_t)c->ops->reopen(c->ctx)));
	return 0;
}

static const struct ktel_ctl_arg args_none[] = {{NULL}};
static const struct ktel_ctl_arg args_name[] = {
	{"name", KTEL_CTL_ARG_STRING, true},
	{NULL},
};
static const struct ktel_ctl_arg args_opt_name[] = {
	{"name", KTEL_CTL_ARG_STRING, false},
	{NULL},
};
static const struct ktel_ctl_arg args_enable[] = {
	{"name", KTEL_CTL_ARG_STRING, true},
	{"for_ms", KTEL_CTL_ARG_UINT, false},
	{NULL},
};

const struct ktel_control_cmd ktel_control_cmds[] = {
	{"help", "the commands and their arguments", args_none, cmd_help},
	{"status",
	 "daemon, plugins, programs (run count/time, recursion misses), last pulls, "
	 "sinks",
	 args_none, cmd_status},
	{"list", "metrics: plugin, enabled, unit, atom, interval, problem", args_none, cmd_list},
	{"enable", "attach a metric's programs and start pulling it (for_ms: lease)", args_enable,
	 cmd_enable},
	{"disable", "pull once more, then detach a metric's programs (maps and deltas kept)",
	 args_name, cmd_disable},
	{"pull", "pull one metric (name) or every enabled one now; returns the records",
	 args_opt_name, cmd_pull},
	{"show", "cumulative values per key as of the last pull, and the last window", args_name,
	 cmd_show},
	{"reload", "re-read the config file; applied only when all of it is valid", args_none,
	 cmd_reload},
	{"watch", "the sockets of the stream sinks", args_none, cmd_watch},
	{"reopen", "file sinks reopen their path (logrotate postrotate; as SIGUSR1)", args_none,
	 cmd_reopen},
	{NULL},
};

const struct ktel_control_cmd *ktel_control_cmd_find(const char *name)
{
	for (const struct ktel_control_cmd *cmd = ktel_control_cmds; name && cmd->name; cmd++)
		if (strcmp(cmd->name, name) == 0)
			return cmd;
	return NULL;
}

static const char *code_of(int r)
{
	switch (-r) {
	case EINVAL:
		return KTEL_CTL_E_REQUEST;
	case ENOENT:
		return KTEL_CTL_E_NOT_FOUND;
	default:
		return KTEL_CTL_E_FAILED;
	}
}

/* Run a checked request (req is the caller's); NULL only when out of memory. */
static json_t *run(struct ktel_control *c, const json_t *req, const struct ktel_control_cmd *cmd)
{
	struct ktel_err err = {0};
	json_t *resp;
	int r;

	resp = json_object();
	if (!resp)
		return NULL;
	ktel_json_set_bool(resp, "ok", true);
	r = cmd->fn(c, req, resp, &err);
	if (r) {
		/* Keep what the command filled in (reload's errors, pull's
		 * partial records): it explains the failure. */
		ktel_json_set_bool(resp, "ok", false);
		json_object_set_new(resp, "error",
				    ktel_control_error_string(err.msg[0] ? err.msg : strerror(-r)));
		ktel_json_set_str(resp, "code", code_of(r));
	}
	return resp;
}

json_t *ktel_control_answer_line(const struct ktel_control_ops *ops, void *ctx, const char *line)
{
	/* A server that never listens: the commands see only ops and ctx (and
	 * an empty path and zero counters in status). */
	struct ktel_control c = {.ops = ops, .ctx = ctx};
	const struct ktel_control_cmd *cmd = NULL;
	struct ktel_err err = {0};
	json_t *req = NULL, *resp;

	if (ktel_control_parse_request(line, &req, &cmd, &err))
		return ktel_control_error(KTEL_CTL_E_REQUEST, err.msg);
	resp = run(&c, req, cmd);
	json_decref(req);
	return resp;
}

/* ---- server --------------------------------------------------------------- */

static void on_resume(uv_idle_t *h);

static void maybe_free(struct ktel_control *c)
{
	if (c->closing && !c->pending_closes && !c->clients)
		free(c);
}

static void on_client_closed(uv_handle_t *h)
{
	struct client *cl = h->data;
	struct ktel_control *c = cl->c;

	free(cl->buf);
	free(cl->pull_name);
	free(cl);
	c->pending_closes--;
	maybe_free(c);
}

static void close_client(struct client *cl)
{
	struct ktel_control *c = cl->c;

	if (cl->closing)
		return;
	cl->closing = true;
	if (cl->admitted)
		c->admitted--;
	*cl->pprev = cl->next;
	if (cl->next)
		cl->next->pprev = cl->pprev;
	c->stats.clients--;
	if (!c->clients)
		uv_timer_stop(&c->sweep);
	c->pending_closes++;
	uv_close((uv_handle_t *)&cl->pipe, on_client_closed);
}

static void on_write(uv_write_t *req, int status)
{
	struct write_req *w = (struct write_req *)req;
	struct client *cl = w->cl;

	cl->pending -= w->len;
	free(w);
	if (status < 0) {
		if (status != UV_ECANCELED)
			close_client(cl);
		return;
	}
	cl->last_drain = uv_now(cl->c->loop);
	/* A client that reads gets its waiting requests answered again once
	 * its answers have drained to half the mark (hysteresis: not one
	 * request per written answer). */
	if (cl->blocked && !cl->closing && cl->pending <= KTEL_CONTROL_PENDING_MARK / 2) {
		cl->blocked = false;
		uv_idle_start(&cl->c->resume, on_resume);
	}
}

/* Queue line for cl; false when the client had to be closed instead. */
static bool send_line(struct client *cl, const char *line, size_t len)
{
	struct write_req *w;
	uv_buf_t b;

	if (cl->pending + len > KTEL_CONTROL_MAX_PENDING) {
		/* It does not read its answers: it gets no more memory. */
		cl->c->stats.overflows++;
		close_client(cl);
		return false;
	}
	w = malloc(sizeof(*w) + len);
	if (!w) {
		close_client(cl);
		return false;
	}
	if (!cl->pending)
		cl->last_drain = uv_now(cl->c->loop); /* its deadline starts now */
	w->cl = cl;
	w->len = len;
	memcpy(w->data, line, len);
	b = uv_buf_init(w->data, (unsigned int)len);
	if (uv_write(&w->req, (uv_stream_t *)&cl->pipe, &b, 1, on_write)) {
		free(w);
		close_client(cl);
		return false;
	}
	cl->pending += len;
	return true;
}

static bool send_json(struct client *cl, const json_t *resp)
{
	size_t len;
	char *line = resp ? ktel_control_dump_line(resp, &len) : NULL;
	bool ok;

	if (!line) {
		close_client(cl);
		return false;
	}
	ok = send_line(cl, line, len);
	free(line);
	return ok;
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
	close_client(req->data);
}

/* Send one error answer, then close once it is written. */
static void refuse(struct client *cl, const char *code, const char *msg)
{
	json_t *resp = ktel_control_error(code, msg);

	cl->draining = true;
	uv_read_stop((uv_stream_t *)&cl->pipe);
	if (!send_json(cl, resp)) {
		json_decref(resp);
		return;
	}
	json_decref(resp);
	cl->c->stats.errors++;
	cl->shutdown.data = cl;
	if (uv_shutdown(&cl->shutdown, (uv_stream_t *)&cl->pipe, on_shutdown))
		close_client(cl);
}

static bool same_name(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/*
 * A pull joins the client's pending one (same metric or both "all"): one
 * pull answers them all on the next loop turn. 0 when taken, -EAGAIN when
 * the line must wait for the pending pull's answer (order is kept).
 */
static int take_pull(struct client *cl, const json_t *req)
{
	const char *name = json_string_value(json_object_get(req, "name"));

	if (cl->pull_owed && !same_name(cl->pull_name, name))
		return -EAGAIN;
	if (!cl->pull_owed && name && !(cl->pull_name = strdup(name)))
		return -ENOMEM;
	cl->pull_owed++;
	uv_idle_start(&cl->c->resume, on_resume);
	return 0;
}

static int on_line(char *line, void *ctx)
{
	struct client *cl = ctx;
	struct ktel_control *c = cl->c;
	const struct ktel_control_cmd *cmd = NULL;
	struct ktel_err err = {0};
	json_t *req = NULL, *resp;
	bool ok;
	int r;

	if (cl->closing || cl->draining)
		return -ECANCELED;
	if (!line[0])
		return 0; /* blank lines are keep-alives, not requests */
	if (cl->pending > KTEL_CONTROL_PENDING_MARK) {
		/* Backpressure: no more answers until these drain (on_write). */
		cl->blocked = true;
		return -EAGAIN;
	}
	if (!cl->budget)
		return -EAGAIN; /* the rest on the next loop turn */
	r = ktel_control_parse_request(line, &req, &cmd, &err);
	if (!r && cmd->fn == cmd_pull) {
		r = take_pull(cl, req);
		json_decref(req);
		if (r == -ENOMEM)
			close_client(cl);
		if (!r) {
			cl->budget--;
			cl->last_request = uv_now(c->loop);
		}
		return r ? (r == -EAGAIN ? r : -ECANCELED) : 0;
	}
	if (cl->pull_owed) {
		json_decref(req);
		return -EAGAIN;
	}
	cl->budget--;
	cl->last_request = uv_now(c->loop);
	resp = r ? ktel_control_error(KTEL_CTL_E_REQUEST, err.msg) : run(c, req, cmd);
	json_decref(req);
	c->stats.requests++;
	if (resp && !json_is_true(json_object_get(resp, "ok")))
		c->stats.errors++;
	ok = send_json(cl, resp);
	json_decref(resp);
	return ok ? 0 : -ECANCELED;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct client *cl = h->data;

	*buf = uv_buf_init(cl->buf + cl->len, (unsigned int)(KTEL_CONTROL_MAX_LINE - cl->len));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* Stop reading; the complete lines in buf wait for on_resume (a blocked
 * client's for on_write, which starts it: the idle handle would spin the
 * loop meanwhile). */
static void pause_client(struct client *cl)
{
	if (!cl->paused) {
		uv_read_stop((uv_stream_t *)&cl->pipe);
		cl->paused = true;
	}
	if (!cl->blocked)
		uv_idle_start(&cl->c->resume, on_resume);
}

/* Answer up to KTEL_CONTROL_BUDGET of the complete lines in cl's buffer. */
static void process(struct client *cl)
{
	char msg[128];
	int r;

	cl->budget = KTEL_CONTROL_BUDGET;
	r = ktel_control_split_lines(cl->buf, &cl->len, KTEL_CONTROL_MAX_LINE, on_line, cl);
	if (cl->closing || cl->draining)
		return;
	if (r == -EAGAIN) {
		pause_client(cl);
		return;
	}
	if (r == -E2BIG) {
		cl->c->stats.too_long++;
		snprintf(msg, sizeof(msg), "request longer than %d bytes", KTEL_CONTROL_MAX_LINE);
		refuse(cl, KTEL_CTL_E_TOO_LONG, msg);
		return;
	}
	if (cl->paused) {
		cl->paused = false;
		if (uv_read_start((uv_stream_t *)&cl->pipe, on_alloc, on_read))
			close_client(cl);
	}
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct client *cl = s->data;

	if (nread < 0) {
		close_client(cl);
		return;
	}
	cl->len += (size_t)nread;
	process(cl);
}

/* The answer to a pull of name (NULL: every enabled metric). */
static json_t *pull_answer(struct ktel_control *c, const char *name)
{
	json_t *req = name ? json_pack("{s:s, s:s}", "cmd", "pull", "name", name)
			   : json_pack("{s:s}", "cmd", "pull");
	json_t *resp = req ? run(c, req, ktel_control_cmd_find("pull")) : NULL;

	json_decref(req);
	return resp;
}

/*
 * Send every client waiting for a pull of name its answers, as many as fit
 * under KTEL_CONTROL_PENDING_MARK: the rest stay owed, and the client is
 * blocked until its answers drain (then a new pull answers them).
 */
static void answer_pulls(struct ktel_control *c, const char *name, const json_t *resp)
{
	size_t len = 0;
	char *line = resp ? ktel_control_dump_line(resp, &len) : NULL;
	bool failed = resp && !json_is_true(json_object_get(resp, "ok"));
	struct client *cl, *next;

	for (cl = c->clients; cl; cl = next) {
		next = cl->next;
		if (!cl->pull_owed || !same_name(cl->pull_name, name))
			continue;
		while (cl->pull_owed && !cl->closing && cl->pending <= KTEL_CONTROL_PENDING_MARK) {
			if (!line || !send_line(cl, line, len)) {
				close_client(cl);
				break;
			}
			cl->pull_owed--;
			c->stats.requests++;
			c->stats.errors += failed;
		}
		if (cl->pull_owed && !cl->closing) {
			cl->blocked = true;
			continue;
		}
		cl->pull_owed = 0;
		free(cl->pull_name);
		cl->pull_name = NULL;
	}
	free(line);
}

/* One pull per metric asked for answers every pull request waiting for it. */
static void run_pulls(struct ktel_control *c)
{
	for (struct client *cl = c->clients; cl; cl = cl->next) {
		char *name;
		json_t *resp;

		if (!cl->pull_owed || cl->closing || cl->blocked)
			continue;
		name = cl->pull_name; /* answer_pulls frees it */
		cl->pull_name = NULL;
		resp = pull_answer(c, name);
		cl->pull_name = name;
		name = name ? strdup(name) : NULL;
		if (cl->pull_name && !name) {
			close_client(cl);
			json_decref(resp);
			continue;
		}
		answer_pulls(c, name, resp);
		free(name);
		json_decref(resp);
	}
}

static void on_resume(uv_idle_t *h)
{
	struct ktel_control *c = h->data;
	struct client *cl, *next;
	bool more = false;

	run_pulls(c);
	for (cl = c->clients; cl; cl = next) {
		next = cl->next;
		if (cl->paused && !cl->closing && !cl->draining && !cl->blocked)
			process(cl);
	}
	for (cl = c->clients; cl && !more; cl = cl->next)
		more = !cl->closing && !cl->blocked &&
		       (cl->pull_owed || (cl->paused && !cl->draining));
	if (!more)
		uv_idle_stop(h);
}

/*
 * Close the clients that sent no complete request for idle_timeout_ms, and
 * those that read none of their answers for as long (whether blocked or
 * not: an answer that cannot be written would hold the slot forever; no
 * answer can tell them, they do not read).
 */
static void on_sweep(uv_timer_t *t)
{
	struct ktel_control *c = t->data;
	uint64_t now = uv_now(c->loop);
	struct client *cl, *next;
	char msg[128];

	for (cl = c->clients; cl; cl = next) {
		next = cl->next;
		if (!cl->closing && cl->pending && now - cl->last_drain >= idle_timeout_ms) {
			c->stats.overflows++;
			close_client(cl);
			continue;
		}
		if (!cl->admitted || cl->closing || cl->draining || cl->paused || cl->pull_owed ||
		    now - cl->last_request < idle_timeout_ms)
			continue;
		c->stats.idle_closed++;
		snprintf(msg, sizeof(msg), "idle: no complete request in %" PRIu64 " ms; closed",
			 idle_timeout_ms);
		refuse(cl, KTEL_CTL_E_IDLE, msg);
	}
}

/* Admit or refuse a freshly accepted client. */
/*
 * The connecting process's supplementary groups (SO_PEERGROUPS, Linux 4.13)
 * in a new array *ret: how many, or -1 (*ret NULL) when the kernel cannot
 * say. ERANGE tells the size needed; it is bounded like getgrouplist's.
 */
static int peer_groups(int fd, gid_t **ret)
{
	socklen_t len = 64 * sizeof(gid_t), want;
	gid_t *g = NULL, *bigger;

	for (;;) {
		bigger = realloc(g, len);
		if (!bigger)
			break;
		g = bigger;
		want = len;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &want) == 0) {
			*ret = g;
			return (int)(want / sizeof(gid_t));
		}
		if (errno != ERANGE || want <= len || want > MAX_GROUPS * sizeof(gid_t))
			break;
		len = want;
	}
	free(g);
	*ret = NULL;
	return -1;
}

static void admit(struct ktel_control *c, struct client *cl)
{
	gid_t *groups = NULL;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct ktel_err err;
	int n_groups, r;
	uv_os_fd_t fd;

	if (uv_fileno((uv_handle_t *)&cl->pipe, &fd) ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len)) {
		close_client(cl);
		return;
	}
	n_groups = peer_groups(fd, &groups);
	r = ktel_control_peer_check(cred.uid, cred.gid, groups, n_groups, c->gid, &err);
	free(groups);
	if (r) {
		c->stats.denied++;
		refuse(cl, KTEL_CTL_E_DENIED, err.msg);
		return;
	}
	/* The last slot is root's: idle or hostile members cannot lock it out. */
	if (c->admitted >= KTEL_CONTROL_MAX_CLIENTS - (cred.uid != 0)) {
		c->stats.busy++;
		snprintf(err.msg, sizeof(err.msg),
			 "busy: %zu clients are connected already "
			 "(the last of %d slots is kept for root)",
			 c->admitted, KTEL_CONTROL_MAX_CLIENTS);
		refuse(cl, KTEL_CTL_E_BUSY, err.msg);
		return;
	}
	cl->buf = malloc(KTEL_CONTROL_MAX_LINE);
	if (!cl->buf || uv_read_start((uv_stream_t *)&cl->pipe, on_alloc, on_read)) {
		close_client(cl);
		return;
	}
	cl->admitted = true;
	cl->root = cred.uid == 0;
	cl->last_request = uv_now(c->loop);
	c->admitted++;
	c->stats.accepted++;
}

static uint64_t sweep_interval(void);

static void on_connection(uv_stream_t *server, int status)
{
	struct ktel_control *c = server->data;
	struct client *cl;

	if (status < 0 || c->closing)
		return;
	cl = calloc(1, sizeof(*cl));
	if (!cl)
		return;
	cl->c = c;
	uv_pipe_init(c->loop, &cl->pipe, 0);
	cl->pipe.data = cl;
	/* Linked (and counted) before anything can fail, so that one
	 * close_client path releases it. */
	cl->next = c->clients;
	if (cl->next)
		cl->next->pprev = &cl->next;
	cl->pprev = &c->clients;
	c->clients = cl;
	c->stats.clients++;
	/* The sweep runs only while someone is connected: an idle daemon
	 * wakes for its timers, not once a second for nobody. */
	if (!uv_is_active((uv_handle_t *)&c->sweep))
		uv_timer_start(&c->sweep, on_sweep, sweep_interval(), sweep_interval());
	if (uv_accept(server, (uv_stream_t *)&cl->pipe)) {
		close_client(cl);
		return;
	}
	admit(c, cl);
}

/* Remove a stale socket at path; refuse when someone answers on it. */
static int clear_path(const char *path, struct ktel_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	int fd, r;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0
				       : ktel_err_set(err, errno, "control socket %s: %s", path,
						      strerror(errno));
	if (!S_ISSOCK(st.st_mode))
		return ktel_err_set(err, EEXIST,
				    "control socket %s: exists and is not a socket; "
				    "not replacing it",
				    path);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return ktel_err_set(err, errno, "control socket %s: socket: %s", path,
				    strerror(errno));
	r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	/* EAGAIN: its backlog is full, so something does listen. */
	if (r == 0 || errno == EAGAIN || errno == EINPROGRESS) {
		close(fd);
		return ktel_err_set(err, EADDRINUSE,
				    "control socket %s: another daemon is "
				    "listening on it; stop it or configure another "
				    "control_socket",
				    path);
	}
	r = errno;
	close(fd);
	if (r != ECONNREFUSED)
		return ktel_err_set(err, r,
				    "control socket %s: cannot tell whether it is in use: "
				    "%s",
				    path, strerror(r));
	if (unlink(path) != 0 && errno != ENOENT)
		return ktel_err_set(err, errno, "control socket %s: removing the stale socket: %s",
				    path, strerror(errno));
	return 0;
}

static int listen_on(struct ktel_control *c, const char *path, struct ktel_err *err)
{
	struct stat st;
	int r;

	r = uv_pipe_bind(&c->server, path);
	if (r)
		return ktel_err_set(err, -r, "control socket %s: bind: %s", path, uv_strerror(r));
	/* Remember the file we made: close removes it and nothing else. */
	if (stat(path, &st) == 0) {
		c->dev = st.st_dev;
		c->ino = st.st_ino;
	}
	if (chmod(path, 0660) != 0)
		return ktel_err_set(err, errno, "control socket %s: chmod 0660: %s", path,
				    strerror(errno));
	if ((geteuid() == 0 || c->gid != (gid_t)-1) &&
	    chown(path, geteuid() == 0 ? 0 : (uid_t)-1, c->gid) != 0)
		return ktel_err_set(err, errno, "control socket %s: chown to group %u: %s", path,
				    (unsigned)c->gid, strerror(errno));
	r = uv_listen((uv_stream_t *)&c->server, KTEL_CONTROL_BACKLOG, on_connection);
	if (r)
		return ktel_err_set(err, -r, "control socket %s: listen: %s", path, uv_strerror(r));
	return 0;
}

/*
 * Create the socket's directory when missing (0750). A directory created here
 * gets control_group, so the group's members can reach the socket; one that
 * exists is left alone, with a warning when that group cannot search it.
 */
static int make_socket_dir(const char *path, gid_t gid, struct ktel_err *err)
{
	char tmp[PATH_MAX], dir[PATH_MAX], name[256];
	bool existed;
	struct stat st;
	int r;

	snprintf(tmp, sizeof(tmp), "%s", path);
	snprintf(dir, sizeof(dir), "%s", dirname(tmp));
	existed = stat(dir, &st) == 0;
	r = ktel_mkdir_parents(path, 0750);
	if (r)
		return ktel_err_set(err, -r, "control socket %s: cannot create its directory: %s",
				    path, strerror(-r));
	if (gid == (gid_t)-1 || gid == 0)
		return 0;
	if (!existed) {
		if (chown(dir, (uid_t)-1, gid) != 0)
			return ktel_err_set(err, errno,
					    "control socket %s: chown %s to group %u: %s", path,
					    dir, (unsigned)gid, strerror(errno));
		return 0;
	}
	if (!(st.st_mode & S_IXOTH) && !(st.st_gid == gid && (st.st_mode & S_IXGRP))) {
		group_label(gid, name, sizeof(name));
		ktel_log(KTEL_LOG_WARN,
			 "control socket %s: group %s cannot search %s (mode %04o, "
			 "group %u): its members cannot connect",
			 path, name, dir, (unsigned)(st.st_mode & 07777), (unsigned)st.st_gid);
	}
	return 0;
}

static uint64_t sweep_interval(void)
{
	uint64_t ms = idle_timeout_ms / 4 + 1;

	return ms > 1000 ? 1000 : ms;
}

int ktel_control__new(uv_loop_t *loop, const struct ktel_control_ops *ops, void *ctx,
		      const char *path, gid_t gid, struct ktel_control **ret, struct ktel_err *err)
{
	struct ktel_control *c;
	int r;

	if (!ops)
		return ktel_err_set(err, EINVAL, "control socket \"%s\": no daemon operations",
				    path ? path : "");
	if (!path || !path[0] || strlen(path) >= sizeof(c->path))
		return ktel_err_set(err, ENAMETOOLONG,
				    "control socket \"%s\": path empty or "
				    "longer than %zu bytes",
				    path ? path : "", sizeof(c->path) - 1);
	r = make_socket_dir(path, gid, err);
	if (r)
		return r;
	r = clear_path(path, err);
	if (r)
		return r;
	c = calloc(1, sizeof(*c));
	if (!c)
		return ktel_err_set(err, ENOMEM, "out of memory");
	c->loop = loop;
	c->ops = ops;
	c->ctx = ctx;
	c->gid = gid;
	snprintf(c->path, sizeof(c->path), "%s", path);
	uv_pipe_init(loop, &c->server, 0);
	c->server.data = c;
	c->server_open = true;
	uv_timer_init(loop, &c->sweep);
	c->sweep.data = c;
	uv_idle_init(loop, &c->resume);
	c->resume.data = c;
	c->handles_open = true;
	uv_unref((uv_handle_t *)&c->sweep);
	r = listen_on(c, path, err);
	if (r) {
		ktel_control__close(c);
		return r;
	}
	*ret = c;
	return 0;
}

static void on_server_closed(uv_handle_t *h)
{
	struct ktel_control *c = h->data;

	c->pending_closes--;
	maybe_free(c);
}

/* Remove our socket file, not one another process put there since. */
static void unlink_ours(const struct ktel_control *c)
{
	struct stat st;

	if (c->ino && stat(c->path, &st) == 0 && st.st_dev == c->dev && st.st_ino == c->ino)
		unlink(c->path);
}

void ktel_control__close(struct ktel_control *c)
{
	struct client *cl, *next;

	if (!c || c->closing)
		return;
	c->closing = true;
	unlink_ours(c);
	/* A handle someone else already closed (a uv_walk at the end of the
	 * loop) gets no callback from us: its close has completed. */
	if (c->server_open && !uv_is_closing((uv_handle_t *)&c->server)) {
		c->pending_closes++;
		uv_close((uv_handle_t *)&c->server, on_server_closed);
	}
	if (c->handles_open) {
		uv_handle_t *hs[] = {(uv_handle_t *)&c->sweep, (uv_handle_t *)&c->resume};

		for (size_t i = 0; i < 2; i++) {
			if (uv_is_closing(hs[i]))
				continue;
			c->pending_closes++;
			uv_close(hs[i], on_server_closed);
		}
	}
	for (cl = c->clients; cl; cl = next) {
		next = cl->next;
		if (!uv_is_closing((uv_handle_t *)&cl->pipe)) {
			close_client(cl);
			continue;
		}
		*cl->pprev = cl->next;
		if (cl->next)
			cl->next->pprev = cl->pprev;
		free(cl->buf);
		free(cl->pull_name);
		free(cl);
	}
	maybe_free(c);
}

void ktel_control__free(struct ktel_control *c)
{
	ktel_control__close(c);
}

void ktel_control__stats(const struct ktel_control *c, struct ktel_control_stats *ret)
{
	*ret = c->stats;
}

const char *ktel_control__path(const struct ktel_control *c)
{
	return c->path;
}
