/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The control protocol's wire pieces, shared by the daemon's server
 * (core/daemon/control.h) and ktelemetryctl: one JSON object per line each
 * way (docs/control.md). A request is {"cmd": "<name>", ...args}; the answer
 * is {"ok": true, ...} or {"ok": false, "error": "<one line>", "code":
 * "<class>"}. Nothing here needs a socket or the daemon.
 */
#ifndef KTEL_CONTROL_PROTO_H
#define KTEL_CONTROL_PROTO_H

#include <stddef.h>

#include <jansson.h>

#include "record.h"

/* Error classes in answers ("code"); ktelemetryctl maps them to exit codes. */
#define KTEL_CTL_E_REQUEST "bad_request"      /* not JSON, unknown cmd/arg, wrong type */
#define KTEL_CTL_E_NOT_FOUND "not_found"      /* no such metric */
#define KTEL_CTL_E_FAILED "failed"            /* the daemon tried and failed */
#define KTEL_CTL_E_DENIED "permission_denied" /* peer is neither root nor in the group */
#define KTEL_CTL_E_BUSY "busy"                /* too many clients */
#define KTEL_CTL_E_TOO_LONG "too_long"        /* request line over the limit */
#define KTEL_CTL_E_IDLE "idle_timeout"        /* no complete request for too long */


/*
 * Line framing. buf[0..*len) holds bytes received; every complete line
 * (ended by '\n'; a '\r' before it is dropped) is NUL-terminated in place
 * and passed to fn, then the incomplete tail is moved to the front and *len
 * updated. Returns 0; -E2BIG when the tail alone is max bytes or more (a
 * line longer than the limit: the caller should give up on the stream); or
 * fn's negative return, which stops the split (the rest stays in buf;
 * -EAGAIN leaves the line fn was given in buf too, unchanged, so that a
 * later call hands it over again).
 */
int ktel_control_split_lines(char *buf, size_t *len, size_t max, int (*fn)(char *line, void *ctx),
			     void *ctx);


/* msg as a JSON string that always exists: invalid UTF-8 bytes become '?'.
 * NULL only when out of memory. */
json_t *ktel_control_error_string(const char *msg);

/* {"ok": false, "error": msg, "code": code}; NULL on allocation failure. */
json_t *ktel_control_error(const char *code, const char *msg);

/*
 * The answer as one line, '\n' included (compact JSON never contains a raw
 * newline: jansson escapes them in strings). Caller frees. NULL on failure.
 */
char *ktel_control_dump_line(const json_t *resp, size_t *ret_len);

/* A record as the JSON sink writes it (sinks/json), parsed. NULL on failure. */
json_t *ktel_control_record_json(const struct ktel_record *r);

#endif /* KTEL_CONTROL_PROTO_H */
