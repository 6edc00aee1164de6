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

#endif /* KTEL_FSUTIL_H */
