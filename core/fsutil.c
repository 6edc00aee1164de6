// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "fsutil.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
