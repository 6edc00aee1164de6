// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libcurl and libsnappy, mapped only when a remote_write sink starts.
 *
 * The daemon is linked against neither: libcurl brings its TLS stack
 * (OpenSSL or gnutls, nghttp2, ssh2, ldap...), libsnappy is C++ and brings
 * libstdc++, and most daemons have no remote_write sink (the footprint rule,
 * docs/benchmarks.md; tests/unit daemon_needs_no_http_library). This file
 * defines the libcurl entry points the sink calls, with the library's own
 * prototypes, and ktel_snappy_*() for the two snappy calls;
 * ktel_rw_libs_load() dlopens both libraries by soname (KTEL_CURL_SONAME,
 * KTEL_SNAPPY_SONAME, read from the libraries at build time) and resolves
 * every symbol, or fails naming the library. Nothing here may be called
 * before that succeeded. libprotobuf-c is small and pure C: it is linked.
 */
#define CURL_DISABLE_TYPECHECK /* the typecheck macros would rename our definitions */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>
#include <snappy-c.h>

#include "rw_dlopen.h"

#ifndef KTEL_CURL_SONAME
#error "KTEL_CURL_SONAME: the build names libcurl's soname (sinks/CMakeLists.txt)"
#endif
#ifndef KTEL_SNAPPY_SONAME
#error "KTEL_SNAPPY_SONAME: the build names libsnappy's soname (sinks/CMakeLists.txt)"
#endif

static struct {
	void *curl, *snappy;
	CURLcode (*global_init)(long);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	void (*easy_cleanup)(CURL *);
	const char *(*easy_strerror)(CURLcode);
	CURLM *(*multi_init)(void);
	CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
	CURLMcode (*multi_add_handle)(CURLM *, CURL *);
	CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
	CURLMcode (*multi_socket_action)(CURLM *, curl_socket_t, int, int *);
	CURLMsg *(*multi_info_read)(CURLM *, int *);
	CURLMcode (*multi_cleanup)(CURLM *);
	CURLMcode (*multi_assign)(CURLM *, curl_socket_t, void *);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
	snappy_status (*compress)(const char *, size_t, char *, size_t *);
	snappy_status (*uncompress)(const char *, size_t, char *, size_t *);
	snappy_status (*uncompressed_length)(const char *, size_t, size_t *);
	size_t (*max_compressed_length)(size_t);
} lib;

struct sym {
	void **slot;
	const char *name;
	bool snappy;
};

static const struct sym syms[] = {
	{(void **)&lib.global_init, "curl_global_init", false},
	{(void **)&lib.easy_init, "curl_easy_init", false},
	{(void **)&lib.easy_setopt, "curl_easy_setopt", false},
	{(void **)&lib.easy_getinfo, "curl_easy_getinfo", false},
	{(void **)&lib.easy_cleanup, "curl_easy_cleanup", false},
	{(void **)&lib.easy_strerror, "curl_easy_strerror", false},
	{(void **)&lib.multi_init, "curl_multi_init", false},
	{(void **)&lib.multi_setopt, "curl_multi_setopt", false},
	{(void **)&lib.multi_add_handle, "curl_multi_add_handle", false},
	{(void **)&lib.multi_remove_handle, "curl_multi_remove_handle", false},
	{(void **)&lib.multi_socket_action, "curl_multi_socket_action", false},
	{(void **)&lib.multi_info_read, "curl_multi_info_read", false},
	{(void **)&lib.multi_cleanup, "curl_multi_cleanup", false},
	{(void **)&lib.multi_assign, "curl_multi_assign", false},
	{(void **)&lib.slist_append, "curl_slist_append", false},
	{(void **)&lib.slist_free_all, "curl_slist_free_all", false},
	{(void **)&lib.compress, "snappy_compress", true},
	{(void **)&lib.uncompress, "snappy_uncompress", true},
	{(void **)&lib.uncompressed_length, "snappy_uncompressed_length", true},
	{(void **)&lib.max_compressed_length, "snappy_max_compressed_length", true},
};

static void unload(void)
{
	if (lib.curl)
		dlclose(lib.curl);
	if (lib.snappy)
		dlclose(lib.snappy);
	lib.curl = lib.snappy = NULL;
}

static int open_lib(void **ret, const char *soname, const char *what, struct ktel_err *err)
{
	*ret = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	if (*ret)
		return 0;
	return ktel_err_set(err, ELIBACC,
			    "the remote_write sink needs %s (%s): %s (Debian: "
			    "apt-get install libcurl4 libsnappy1v5)",
			    what, soname, dlerror());
}

int ktel_rw_libs_load(struct ktel_err *err)
{
	int ret;

	if (lib.curl && lib.snappy)
		return 0;
	ret = open_lib(&lib.curl, KTEL_CURL_SONAME, "libcurl", err);
	ret = ret ?: open_lib(&lib.snappy, KTEL_SNAPPY_SONAME, "libsnappy", err);
	for (size_t i = 0; !ret && i < sizeof(syms) / sizeof(syms[0]); i++) {
		*syms[i].slot = dlsym(syms[i].snappy ? lib.snappy : lib.curl, syms[i].name);
		if (!*syms[i].slot)
			ret = ktel_err_set(err, ELIBACC, "%s: no symbol %s",
					   syms[i].snappy ? KTEL_SNAPPY_SONAME : KTEL_CURL_SONAME,
					   syms[i].name);
	}
	/* Once, on the loop thread, before any other curl call (not thread-safe
	 * in this libcurl; nothing else in the process uses curl). */
	if (!ret && lib.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		ret = ktel_err_set(err, ELIBACC, "%s: curl_global_init failed", KTEL_CURL_SONAME);
	if (ret)
		unload();
	return ret;
}

/* ---- snappy ---- */

size_t ktel_snappy_max_compressed_length(size_t len)
{
	return lib.max_compressed_length(len);
}

int ktel_snappy_compress(const char *in, size_t len, char *out, size_t *out_len)
{
	return lib.compress(in, len, out, out_len) == SNAPPY_OK ? 0 : -EINVAL;
}

int ktel_snappy_uncompress(const char *in, size_t len, char *out, size_t *out_len)
{
	return lib.uncompress(in, len, out, out_len) == SNAPPY_OK ? 0 : -EINVAL;
}

int ktel_snappy_uncompressed_length(const char *in, size_t len, size_t *ret)
{
	return lib.uncompressed_length(in, len, ret) == SNAPPY_OK ? 0 : -EINVAL;
}

/* ---- libcurl ---- */

CURL *curl_easy_init(void)
{
	return lib.easy_init();
}

/* One argument after the option, of the type the option's number range
 * says (curl.h CURLOPTTYPE_*), forwarded as that type. */
CURLcode curl_easy_setopt(CURL *curl, CURLoption option, ...)
{
	va_list ap;
	CURLcode rc;

	va_start(ap, option);
	if (option < CURLOPTTYPE_OBJECTPOINT)
		rc = lib.easy_setopt(curl, option, va_arg(ap, long));
	else if (option >= CURLOPTTYPE_OFF_T && option < CURLOPTTYPE_BLOB)
		rc = lib.easy_setopt(curl, option, va_arg(ap, curl_off_t));
	else
		rc = lib.easy_setopt(curl, option, va_arg(ap, void *));
	va_end(ap);
	return rc;
}

/* Every info takes one pointer. */
CURLcode curl_easy_getinfo(CURL *curl, CURLINFO info, ...)
{
	va_list ap;
	CURLcode rc;

	va_start(ap, info);
	rc = lib.easy_getinfo(curl, info, va_arg(ap, void *));
	va_end(ap);
	return rc;
}

void curl_easy_cleanup(CURL *curl)
{
	lib.easy_cleanup(curl);
}

const char *curl_easy_strerror(CURLcode code)
{
	return lib.easy_strerror(code);
}

CURLM *curl_multi_init(void)
{
	return lib.multi_init();
}

CURLMcode curl_multi_setopt(CURLM *multi, CURLMoption option, ...)
{
	va_list ap;
	CURLMcode rc;

	va_start(ap, option);
	if (option < CURLOPTTYPE_OBJECTPOINT)
		rc = lib.multi_setopt(multi, option, va_arg(ap, long));
	else if (option >= CURLOPTTYPE_OFF_T)
		rc = lib.multi_setopt(multi, option, va_arg(ap, curl_off_t));
	else
		rc = lib.multi_setopt(multi, option, va_arg(ap, void *));
	va_end(ap);
	return rc;
}

CURLMcode curl_multi_add_handle(CURLM *multi, CURL *curl)
{
	return lib.multi_add_handle(multi, curl);
}

CURLMcode curl_multi_remove_handle(CURLM *multi, CURL *curl)
{
	return lib.multi_remove_handle(multi, curl);
}

CURLMcode curl_multi_socket_action(CURLM *multi, curl_socket_t fd, int ev, int *running)
{
	return lib.multi_socket_action(multi, fd, ev, running);
}

CURLMsg *curl_multi_info_read(CURLM *multi, int *msgs_in_queue)
{
	return lib.multi_info_read(multi, msgs_in_queue);
}

CURLMcode curl_multi_cleanup(CURLM *multi)
{
	return lib.multi_cleanup(multi);
}

CURLMcode curl_multi_assign(CURLM *multi, curl_socket_t fd, void *p)
{
	return lib.multi_assign(multi, fd, p);
}

struct curl_slist *curl_slist_append(struct curl_slist *list, const char *s)
{
	return lib.slist_append(list, s);
}

void curl_slist_free_all(struct curl_slist *list)
{
	lib.slist_free_all(list);
}
