/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The control socket's server: a unix stream socket through which
 * ktelemetryctl drives a running daemon. The wire format (one JSON object
 * per line each way) is in control_proto.h and docs/control.md. Requests
 * are answered in order, one line each.
 *
 * Access: the socket is 0660 root:<control group>; on top of the file mode,
 * every accepted client's credentials (SO_PEERCRED) are checked: uid 0, or a
 * member of the group (the peer's gid, the uid's primary group or one of its
 * supplementary groups). Anyone else gets one error line and is closed.
 *
 * Limits: a request line is at most KTEL_CONTROL_MAX_LINE bytes, at most
 * KTEL_CONTROL_MAX_CLIENTS clients are served at once, and at most
 * KTEL_CONTROL_MAX_PENDING bytes of answers wait for one slow client; past
 * any limit the client gets an error (when possible) and is closed, and the
 * event is counted in ktel_control_stats. A client that pipelines requests
 * faster than it reads is not closed but slowed: past
 * KTEL_CONTROL_PENDING_MARK bytes of answers queued, its requests wait (the
 * server stops reading it) until it has read half of them. A client that
 * reads none of its answers for the idle timeout is closed.
 *
 * The server reaches the daemon only through struct ktel_control_ops.
 *
 * This header also holds the server's pieces that need no socket (request
 * checking against the command table, answering a line, the peer check), so
 * that unit tests exercise them without privileges. The client's side
 * (inspection, rendering) lives with ktelemetryctl under tools/.
 */
#ifndef KTEL_CONTROL_H
#define KTEL_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <jansson.h>
#include <uv.h>

#include "control_proto.h"
#include "error.h"
#include "record.h"

struct ktel_control;

#define KTEL_CONTROL_MAX_LINE (64 * 1024)
#define KTEL_CONTROL_MAX_CLIENTS 16
#define KTEL_CONTROL_MAX_PENDING (16u << 20)
/* Past this many bytes of answers queued for a client, its requests wait
 * (reads stop) until they drain to half of it. */
#define KTEL_CONTROL_PENDING_MARK (1u << 20)
#define KTEL_CONTROL_BACKLOG 16
/* An admitted client that sends no complete request for this long is closed. */
#define KTEL_CONTROL_IDLE_TIMEOUT_MS 10000
/* Requests one client's read callback answers before the loop runs again. */
#define KTEL_CONTROL_BUDGET 256

struct ktel_control_stats {
	uint64_t accepted;    /* clients served */
	uint64_t denied;      /* refused by the credential check */
	uint64_t busy;        /* refused: KTEL_CONTROL_MAX_CLIENTS reached */
	uint64_t requests;    /* request lines answered */
	uint64_t errors;      /* answers with ok: false */
	uint64_t too_long;    /* clients closed for an over-long line */
	uint64_t overflows;   /* clients closed for not reading their answers */
	uint64_t idle_closed; /* clients closed for KTEL_CONTROL_IDLE_TIMEOUT_MS idle */
	size_t clients;       /* connected now */
};

/*
 * What the protocol asks of the daemon, handed to the server with an opaque
 * ctx (the daemon fills it: core/daemon/daemon_control.c). Data flows one way: the
 * server calls these and knows nothing else of the daemon, so tests and the
 * fuzz target drive it with a fake (tests/control_fake.h).
 *
 * Each operation fills the answer object resp ("ok": true already in it) and
 * returns 0, or -errno with err saying why: -ENOENT answers code not_found
 * (no metric of that name), -EINVAL bad_request, anything else failed. What
 * a failed operation put in resp stays in the answer (reload's errors, a
 * pull's partial records): it explains the failure. name is NULL where the
 * protocol's argument is optional and absent. Every member is required.
 */
struct ktel_control_ops {
	/* "daemon" (an object: the server adds "control_socket" and
	 * "control" to it), "plugins", "refused", "metrics", "sinks", "router". */
	int (*status)(void *ctx, json_t *resp, struct ktel_err *err);
	/* "refused", "metrics". */
	int (*list)(void *ctx, json_t *resp, struct ktel_err *err);
	/* Attach metric name's programs (lease_ms > 0: for that long, 0: for
	 * good); "metric", "enabled", "lease_ms", "programs". */
	int (*enable)(void *ctx, const char *name, uint64_t lease_ms, json_t *resp,
		      struct ktel_err *err);
	int (*disable)(void *ctx, const char *name, json_t *resp, struct ktel_err *err);
	/* Pull name (NULL: every enabled metric) now; "records", "errors",
	 * "pulled". */
	int (*pull)(void *ctx, const char *name, json_t *resp, struct ktel_err *err);
	/* "metric", "unit", "enabled", "last_pull", "totals", "window". */
	int (*show)(void *ctx, const char *name, json_t *resp, struct ktel_err *err);
	/* Re-read the config file; every error found appended to errors (an
	 * array of strings, the answer's "errors"). */
	int (*reload)(void *ctx, json_t *errors, struct ktel_err *err);
	/* "sockets": [{"sink", "socket"}] of the stream sinks. */
	int (*watch)(void *ctx, json_t *resp, struct ktel_err *err);
	/* The file sinks reopen their path; returns how many were asked. */
	size_t (*reopen)(void *ctx);
};

/*
 * Listen on path for the daemon behind ops and ctx (both kept, not copied:
 * they must outlive the server). The parent directory is created (0750) when
 * missing. An existing socket is replaced only when nothing answers on it;
 * when another process listens there, fail with -EADDRINUSE. The socket is
 * made 0660 and owned by root:gid (gid (gid_t)-1: the group is left alone).
 * Returns 0 and the server in *ret, or -errno with err naming the path.
 */
int ktel_control__new(uv_loop_t *loop, const struct ktel_control_ops *ops, void *ctx,
		      const char *path, gid_t gid, struct ktel_control **ret, struct ktel_err *err);

/*
 * Stop listening, remove the socket file, close every client. The handles
 * close on the loop and c is freed in their close callbacks, so call this
 * while the loop still runs (the daemon's shutdown); when the loop has
 * already finished (its handles closed by someone else), c is freed at once.
 * c must not be used afterwards. Accepts NULL.
 */
void ktel_control__close(struct ktel_control *c);

/* The same as ktel_control__close() (the _new/_free pair); call one, once. */
void ktel_control__free(struct ktel_control *c);

/*
 * Test hook, process-wide: the idle timeout of servers created afterwards
 * (0: back to KTEL_CONTROL_IDLE_TIMEOUT_MS). Not a config key.
 */
void ktel_control_set_idle_timeout(uint64_t ms);

void ktel_control__stats(const struct ktel_control *c, struct ktel_control_stats *ret);
const char *ktel_control__path(const struct ktel_control *c);

/* ---- server pieces that need no socket ------------------------------------ */

/* One command of the protocol, as requests and help see it. */
enum ktel_ctl_arg_type {
	KTEL_CTL_ARG_STRING = 1,
	KTEL_CTL_ARG_UINT = 2, /* integer >= 0 */
};

struct ktel_ctl_arg {
	const char *name;
	enum ktel_ctl_arg_type type;
	bool required;
};

struct ktel_control_cmd {
	const char *name;
	const char *help;
	const struct ktel_ctl_arg *args; /* {NULL}-terminated */
	int (*fn)(struct ktel_control *c, const json_t *req, json_t *resp, struct ktel_err *err);
};

/* The command table ({NULL}-terminated) and lookup by name (NULL: none). */
extern const struct ktel_control_cmd ktel_control_cmds[];
const struct ktel_control_cmd *ktel_control_cmd_find(const char *name);

/*
 * Check one request line: a JSON object, "cmd" a string naming a command,
 * every other key one of the command's arguments with the right type, and
 * the required ones present. Returns 0 with the parsed object (the caller
 * decrefs) and the command, or -EINVAL with err saying what is wrong.
 */
int ktel_control_parse_request(const char *line, json_t **ret_req,
			       const struct ktel_control_cmd **ret_cmd, struct ktel_err *err);

/*
 * Answer one request line without a socket, the way the server answers a
 * client (except that pulls are not coalesced and status shows an empty
 * control_socket and zero counters): the command's answer, or the
 * bad_request error for a line the parser refused. NULL only when out of
 * memory. For unit tests and the fuzz target, with a fake daemon.
 */
json_t *ktel_control_answer_line(const struct ktel_control_ops *ops, void *ctx, const char *line);

/*
 * May a peer with uid, (effective) gid and supplementary groups[0..n_groups)
 * use a socket of group `group`? 0 for uid 0, for gid == group and for a
 * peer whose supplementary groups contain group; otherwise -EACCES with err
 * "permission denied: uid N is neither root nor in group G" (G: the group's
 * name, or its number when it has none). The groups are the connecting
 * process's own (SO_PEERGROUPS); n_groups < 0 means the kernel could not
 * say, and the user database (getgrouplist of uid's name) is asked instead.
 */
int ktel_control_peer_check(uid_t uid, gid_t gid, const gid_t *groups, int n_groups, gid_t group,
			    struct ktel_err *err);

#endif /* KTEL_CONTROL_H */
