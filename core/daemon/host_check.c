// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "host_check.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bpf_lifecycle.h"
#include "delta.h"
#include "error.h"
#include "fsutil.h"
#include "plugin_loader.h"

/*
 * Could start create the directories above path and write path there (it
 * creates them, then writes)? The nearest existing path above path must be
 * a directory and, as root, writable (not a read-only file system). With
 * create false the start creates nothing: path's own directory must exist.
 * 0, or -errno with err naming path and the rule.
 */
static int dir_check(const char *path, bool create, struct ktel_err *err)
{
	char dir[PATH_MAX], *slash;
	struct stat st;

	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
		return ktel_err_set(err, ENAMETOOLONG, "%s: path too long", path);
	for (;;) {
		slash = strrchr(dir, '/');
		if (!slash) {
			snprintf(dir, sizeof(dir), ".");
			break;
		}
		slash[slash == dir] = '\0'; /* "/x" -> "/" */
		if (!create || stat(dir, &st) == 0 || errno != ENOENT || strcmp(dir, "/") == 0)
			break;
	}
	if (stat(dir, &st))
		return ktel_err_set(err, errno, "%s: cannot reach its directory %s: %s%s", path,
				    dir, strerror(errno),
				    create ? "" : " (the directory is not created: create it)");
	if (!S_ISDIR(st.st_mode))
		return ktel_err_set(err, ENOTDIR, "%s: %s is not a directory", path, dir);
	if (geteuid() == 0 && access(dir, W_OK | X_OK))
		return ktel_err_set(err, errno, "%s: cannot write in %s: %s", path, dir,
				    strerror(errno));
	return 0;
}

/* An existing file the start opens for writing: not a directory, and, as
 * root, writable; a missing one is created, in a directory made for it. */
static int output_check(const char *path, struct ktel_err *err)
{
	struct stat st;

	if (stat(path, &st))
		return dir_check(path, true, err);
	if (S_ISDIR(st.st_mode))
		return ktel_err_set(err, EISDIR, "%s: is a directory, not a file to write", path);
	if (geteuid() == 0 && access(path, W_OK))
		return ktel_err_set(err, errno, "%s: cannot be written: %s", path, strerror(errno));
	return 0;
}

/* Can the start list dir? The same call the start's scan makes. */
static int plugin_dir_check(const char *dir, struct ktel_err *err)
{
	char **names = NULL;
	size_t n = 0;
	int r = ktel_plugin_dir__names(dir, &names, &n, err);

	ktel_plugin_dir__names_free(names, n);
	return r;
}

static void add(struct ktel_config_errors *errs, const char *field, const struct ktel_err *err)
{
	ktel_config_errors__add(errs, "%s: %s", field, err->msg);
}

static void check_sinks(const struct ktel_config *cfg, struct ktel_config_errors *errs)
{
	char field[300];
	struct ktel_err err;

	for (size_t i = 0; i < cfg->n_sinks; i++) {
		const struct ktel_sink_cfg *sc = &cfg->sinks[i];
		const char *path;

		if (strcmp(sc->type, "json") == 0) {
			path = ktel_cfg_string(sc->options, "path", NULL);
			snprintf(field, sizeof(field), "sinks.%s.path", sc->name);
			if (path && strcmp(path, "-") != 0 && output_check(path, &err))
				add(errs, field, &err);
		} else if (strcmp(sc->type, "stream") == 0) {
			path = ktel_cfg_string(sc->options, "socket", NULL);
			snprintf(field, sizeof(field), "sinks.%s.socket", sc->name);
			if (path && dir_check(path, false, &err))
				add(errs, field, &err);
		}
	}
}

void ktel_host_check(const struct ktel_config *cfg, struct ktel_config_errors *errs)
{
	char field[64];
	struct ktel_err err;

	for (size_t i = 0; i < cfg->n_plugin_dirs; i++) {
		snprintf(field, sizeof(field), "plugin_dirs[%zu]", i);
		if (plugin_dir_check(cfg->plugin_dirs[i], &err))
			ktel_config_errors__add(errs,
						"%s: %s (the start refuses a plugin directory it "
						"cannot list: create it, or remove it from "
						"plugin_dirs)",
						field, err.msg);
	}
	/* The message names pin_root already. */
	if (ktel_pin_root_check(cfg->pin_root, KTEL_BPFFS_MOUNT, &err))
		ktel_config_errors__add(errs, "%s", err.msg);
	if (ktel_delta_state_check(cfg->state_file, &err) || dir_check(cfg->state_file, true, &err))
		add(errs, "state_file", &err);
	if (dir_check(cfg->control_socket, true, &err))
		add(errs, "control_socket", &err);
	check_sinks(cfg, errs);
}
