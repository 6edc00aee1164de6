// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "fsutil.h"

#include <errno.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
