/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libcurl and libsnappy for the remote_write sink, dlopened (rw_dlopen.c):
 * the libcurl API is called as usual once ktel_rw_libs_load() succeeded;
 * snappy's block format through the functions below.
 */
#ifndef KTEL_RW_DLOPEN_H
#define KTEL_RW_DLOPEN_H

#include <stddef.h>

#include "error.h"

/* Map both libraries and resolve what the sink calls; idempotent. 0, or
 * -ELIBACC with the library named in err. */
int ktel_rw_libs_load(struct ktel_err *err);

/* snappy block format (not framed). 0 or -EINVAL. */
size_t ktel_snappy_max_compressed_length(size_t len);
int ktel_snappy_compress(const char *in, size_t len, char *out, size_t *out_len);
int ktel_snappy_uncompress(const char *in, size_t len, char *out, size_t *out_len);
int ktel_snappy_uncompressed_length(const char *in, size_t len, size_t *ret);

#endif /* KTEL_RW_DLOPEN_H */
