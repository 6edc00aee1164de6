// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libmicrohttpd, mapped only when a Prometheus sink starts.
 *
 * The daemon is not linked against libmicrohttpd: linking it maps the
 * library and its TLS stack (gnutls, nettle, p11-kit: ~2.3 MiB resident) into
 * every daemon, also the many with no Prometheus sink (docs/benchmarks.md,
 * "Daemon footprint"). This file defines the libmicrohttpd entry points the sink
 * calls, with the library's own prototypes; the first MHD_start_daemon()
 * dlopens the library (KTEL_MHD_SONAME, read from the library at build time)
 * and resolves them all, or fails with errno ELIBACC and logs why. Every
 * other entry point is reached only through a daemon that started.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

#include "log.h"

#ifndef KTEL_MHD_SONAME
#error "KTEL_MHD_SONAME: the build names libmicrohttpd's soname (sinks/CMakeLists.txt)"
#endif

static struct {
	void *lib;
	struct MHD_Daemon *(*start_daemon_va)(unsigned int, uint16_t, MHD_AcceptPolicyCallback,
					      void *, MHD_AccessHandlerCallback, void *, va_list);
	void (*stop_daemon)(struct MHD_Daemon *);
	const union MHD_DaemonInfo *(*get_daemon_info)(struct MHD_Daemon *, enum MHD_DaemonInfoType,
						       ...);
	const union MHD_ConnectionInfo *(*get_connection_info)(struct MHD_Connection *,
							       enum MHD_ConnectionInfoType, ...);
	const char *(*lookup_value)(struct MHD_Connection *, enum MHD_ValueKind, const char *);
	struct MHD_Response *(*from_buffer)(size_t, void *, enum MHD_ResponseMemoryMode);
	struct MHD_Response *(*from_buffer_free_cls)(size_t, void *, MHD_ContentReaderFreeCallback,
						     void *);
	enum MHD_Result (*add_header)(struct MHD_Response *, const char *, const char *);
	void (*destroy_response)(struct MHD_Response *);
	enum MHD_Result (*queue_response)(struct MHD_Connection *, unsigned int,
					  struct MHD_Response *);
} mhd;

static int resolve(void **slot, const char *name)
{
	*slot = dlsym(mhd.lib, name);
	if (*slot)
		return 0;
	ktel_log(KTEL_LOG_ERROR, "%s: no symbol %s", KTEL_MHD_SONAME, name);
	return -1;
}

static int mhd_load(void)
{
	if (mhd.lib)
		return 0;
	mhd.lib = dlopen(KTEL_MHD_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!mhd.lib) {
		ktel_log(KTEL_LOG_ERROR, "the Prometheus sink needs libmicrohttpd: %s", dlerror());
		return -1;
	}
	if (resolve((void **)&mhd.start_daemon_va, "MHD_start_daemon_va") ||
	    resolve((void **)&mhd.stop_daemon, "MHD_stop_daemon") ||
	    resolve((void **)&mhd.get_daemon_info, "MHD_get_daemon_info") ||
	    resolve((void **)&mhd.get_connection_info, "MHD_get_connection_info") ||
	    resolve((void **)&mhd.lookup_value, "MHD_lookup_connection_value") ||
	    resolve((void **)&mhd.from_buffer, "MHD_create_response_from_buffer") ||
	    resolve((void **)&mhd.from_buffer_free_cls,
		    "MHD_create_response_from_buffer_with_free_callback_cls") ||
	    resolve((void **)&mhd.add_header, "MHD_add_response_header") ||
	    resolve((void **)&mhd.destroy_response, "MHD_destroy_response") ||
	    resolve((void **)&mhd.queue_response, "MHD_queue_response")) {
		dlclose(mhd.lib);
		mhd.lib = NULL;
		return -1;
	}
	return 0;
}

struct MHD_Daemon *MHD_start_daemon(unsigned int flags, uint16_t port, MHD_AcceptPolicyCallback apc,
				    void *apc_cls, MHD_AccessHandlerCallback dh, void *dh_cls, ...)
{
	struct MHD_Daemon *daemon;
	va_list ap;

	if (mhd_load()) {
		errno = ELIBACC;
		return NULL;
	}
	va_start(ap, dh_cls);
	daemon = mhd.start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls, ap);
	va_end(ap);
	return daemon;
}

void MHD_stop_daemon(struct MHD_Daemon *daemon)
{
	mhd.stop_daemon(daemon);
}

/* The info types the sink asks for (MHD_DAEMON_INFO_BIND_PORT) take no argument. */
const union MHD_DaemonInfo *MHD_get_daemon_info(struct MHD_Daemon *daemon,
						enum MHD_DaemonInfoType info_type, ...)
{
	return mhd.get_daemon_info(daemon, info_type);
}

/* The info types the sink asks for (CONNECTION_FD, SOCKET_CONTEXT, CLIENT_ADDRESS) take no
 * argument. */
const union MHD_ConnectionInfo *MHD_get_connection_info(struct MHD_Connection *connection,
							enum MHD_ConnectionInfoType info_type, ...)
{
	return mhd.get_connection_info(connection, info_type);
}

const char *MHD_lookup_connection_value(struct MHD_Connection *connection, enum MHD_ValueKind kind,
					const char *key)
{
	return mhd.lookup_value(connection, kind, key);
}

struct MHD_Response *MHD_create_response_from_buffer(size_t size, void *buffer,
						     enum MHD_ResponseMemoryMode mode)
{
	return mhd.from_buffer(size, buffer, mode);
}

struct MHD_Response *MHD_create_response_from_buffer_with_free_callback_cls(
	size_t size, void *buffer, MHD_ContentReaderFreeCallback crfc, void *crfc_cls)
{
	return mhd.from_buffer_free_cls(size, buffer, crfc, crfc_cls);
}

enum MHD_Result MHD_add_response_header(struct MHD_Response *response, const char *header,
					const char *content)
{
	return mhd.add_header(response, header, content);
}

void MHD_destroy_response(struct MHD_Response *response)
{
	mhd.destroy_response(response);
}

enum MHD_Result MHD_queue_response(struct MHD_Connection *connection, unsigned int status_code,
				   struct MHD_Response *response)
{
	return mhd.queue_response(connection, status_code, response);
}
