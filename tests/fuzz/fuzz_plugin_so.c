// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Plugin intake, the shared object itself (core/engine/plugin_elf.c and
 * core/engine/plugin_loader.c): the bytes are a file dropped into a plugin
 * directory. The loader copies it into a sealed memfd, validates the whole
 * ELF, lays out its data without running anything, applies the relocations
 * it trusts and reads the descriptor through bounds-checked pointers. The
 * input is written to a private file (mode 0644, in a 0700 directory under
 * the working directory, as a plugin directory must be) and opened the way
 * the daemon opens a drop-in; a refusal is an answer, a crash is a bug.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_libbpf.h"
#include "plugin_loader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[PATH_MAX], path[PATH_MAX];

static int setup(void)
{
	char tmpl[] = "fuzz-plugin-so.XXXXXX";

	if (dir[0])
		return 0;
	if (!mkdtemp(tmpl))
		return -1;
	if (!realpath(tmpl, dir))
		return -1;
	snprintf(path, sizeof(path), "%s/input.so", dir);
	return 0;
}

static void cleanup(void)
{
	unlink(path);
	rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ktel_plugin *plugin = NULL;
	struct ktel_err err;
	int fd;

	fuzz_libbpf_quiet();
	if (setup()) {
		perror("fuzz_plugin_so: private directory");
		abort();
	}
	static int registered;
	if (!registered) {
		registered = 1;
		atexit(cleanup);
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size)) {
		perror("fuzz_plugin_so: input file");
		abort();
	}
	close(fd);
	if (ktel_plugin__open_owner(path, getuid(), &plugin, &err) == 0)
		ktel_plugin__free(plugin);
	return 0;
}
