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

/*
 * The path as the kernel will see it once the file exists: the canonical
 * path of an existing file, else its existing directory's canonical path
 * and its base name, else path unchanged (relative to the working
 * directory). So "/run/k//c.sock" and "/run/k/./c.sock" compare equal.
 * A new string (caller frees), or NULL with errno set.
 */
char *ktel_path_resolve(const char *path);

/*
 * Could pin_root be used as a pin root: an absolute path below a bpf
 * filesystem, or below mount_point where the daemon mounts one when none
 * is, and not the root of a bpf filesystem? The checks ktel_bpffs_ensure()
 * makes at start, without creating or mounting anything. 0, or -errno with
 * err naming pin_root and the rule.
 */
int ktel_pin_root_check(const char *pin_root, const char *mount_point, struct ktel_err *err);

#endif /* KTEL_FSUTIL_H */
