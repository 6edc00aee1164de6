// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "fsutil.h"

#include <errno.h>
#include <libgen.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#ifndef BPF_FS_MAGIC
#define BPF_FS_MAGIC 0xcafe4a11
#endif

#include "error.h"

int ktel_mkdir_parents(const char *path, mode_t mode)
{
	char *copy = strdup(path), *dir;
	struct stat st;
	int r = 0;

	if (!copy)
		return -ENOMEM;
	dir = dirname(copy);
	if (stat(dir, &st) != 0) {
		r = ktel_mkdir_parents(dir, mode);
		if (!r && mkdir(dir, mode) != 0 && errno != EEXIST)
			r = -errno;
	}
	free(copy);
	return r;
}

int ktel_dir_writable_for(const char *path, struct ktel_err *err)
{
	char probe[PATH_MAX];
	int fd;

	if (snprintf(probe, sizeof(probe), "%s.probe.XXXXXX", path) >= (int)sizeof(probe))
		return ktel_err_set(err, ENAMETOOLONG, "%s: path too long", path);
	fd = mkstemp(probe);
	if (fd < 0)
		return ktel_err_set(err, errno, "%s: cannot write in its directory: %s", path,
				    strerror(errno));
	close(fd);
	unlink(probe);
	return 0;
}

char *ktel_path_resolve(const char *path)
{
	char *real = realpath(path, NULL), *copy, *dir, *ret = NULL;
	const char *base;

	if (real)
		return real;
	copy = strdup(path);
	if (!copy)
		return NULL;
	base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	dir = dirname(copy);
	real = realpath(dir, NULL);
	if (!real || !*base)
		ret = strdup(path);
	else if (asprintf(&ret, "%s%s%s", real, strcmp(real, "/") ? "/" : "", base) < 0)
		ret = NULL;
	free(real);
	free(copy);
	return ret;
}

static bool on_bpffs(const char *path)
{
	struct statfs sfs;

	return statfs(path, &sfs) == 0 && (unsigned long)sfs.f_type == BPF_FS_MAGIC;
}

/* Is path mount_point or below it (by its text)? */
static bool below(const char *path, const char *mount_point)
{
	size_t n = strlen(mount_point);

	return strncmp(path, mount_point, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

int ktel_pin_root_check(const char *pin_root, const char *mount_point, struct ktel_err *err)
{
	char ancestor[PATH_MAX], parent[PATH_MAX + 3];
	struct stat st, pst;
	char *slash;

	if (pin_root[0] != '/')
		return ktel_err_set(err, EINVAL, "pin_root %s: must be an absolute path", pin_root);
	if (snprintf(ancestor, sizeof(ancestor), "%s", pin_root) >= (int)sizeof(ancestor))
		return ktel_err_set(err, ENAMETOOLONG, "pin_root: path too long");
	while (stat(ancestor, &st) != 0 && (slash = strrchr(ancestor, '/')))
		slash == ancestor ? (void)(slash[1] = '\0') : (void)(*slash = '\0');
	if (!on_bpffs(ancestor)) {
		if (below(pin_root, mount_point) && !on_bpffs(mount_point))
			return 0; /* the daemon mounts bpffs at mount_point */
		return ktel_err_set(err, ENOTSUP,
				    "pin_root %s: not on a bpf file system (%s is on "
				    "another file system; pins live below a bpffs mount such as %s)",
				    pin_root, ancestor, mount_point);
	}
	if (strcmp(ancestor, pin_root) != 0 || !S_ISDIR(st.st_mode))
		return S_ISDIR(st.st_mode) ? 0
					   : ktel_err_set(err, ENOTDIR,
							  "pin_root %s: %s is "
							  "not a directory",
							  pin_root, ancestor);
	snprintf(parent, sizeof(parent), "%s/..", pin_root);
	if (stat(parent, &pst) == 0 && (st.st_dev != pst.st_dev || st.st_ino == pst.st_ino))
		return ktel_err_set(err, EINVAL,
				    "pin_root %s: the root of a bpf filesystem, "
				    "shared by every BPF user: use a directory below it",
				    pin_root);
	return 0;
}
