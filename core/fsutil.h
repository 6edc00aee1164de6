/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Small file-system helpers shared by the daemon's modules. */
#ifndef KTEL_FSUTIL_H
#define KTEL_FSUTIL_H

#include <sys/types.h>

/*
 * Create every missing directory above path (not path itself) with mode.
 * Returns 0 or -errno.
 */
int ktel_mkdir_parents(const char *path, mode_t mode);

struct ktel_err;

/*
 * Can a file at path be written the way it is saved (a temporary file in
 * the same directory, renamed over it)? Creates and removes a probe file,
 * leaving the directory as it was. 0, or -errno with err naming path.
 */
int ktel_dir_writable_for(const char *path, struct ktel_err *err);

#endif /* KTEL_FSUTIL_H */
