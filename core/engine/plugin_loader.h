/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Plugin loader: find, check, read and validate metric plugins.
 *
 * A plugin is data (core/include/ktelemetry/plugin.h). The loader runs no
 * plugin code at all: it never dlopens a plugin (which would run its ELF
 * constructors) but reads the descriptor out of the ELF data (plugin_elf.h,
 * struct ktel_elf_view), and only reads a file that nobody but root could
 * have written: the file and every parent
 * directory must be owned by root, not group/world writable, and the file a
 * regular file, not a symlink. The file is opened once (O_NOFOLLOW), judged
 * by fstat of that descriptor, read once into a sealed private copy whose
 * whole ELF structure is validated (plugin_elf.h), and only that copy is
 * loaded, so what was checked is what gets loaded and a truncated or growing
 * file cannot fault the process. The descriptor is then validated completely -
 * ABI, sizes, names, the embedded BPF ELF, the maps and programs the
 * descriptor names - so that a plugin that passes cannot make the daemon
 * crash or misread a map later - and copied, and the private copy freed (see
 * struct ktel_plugin). Every refusal is one line:
 * "<path>: refused: <rule>".
 */
#ifndef KTEL_PLUGIN_LOADER_H
#define KTEL_PLUGIN_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <ktelemetry/plugin.h>

#include "error.h"
#include "plugin_elf.h"

/* Limits on what one descriptor may declare, and on one directory scan. */
#define KTEL_PLUGIN_MAX_METRICS 64
#define KTEL_PLUGIN_MAX_DIMS 16
#define KTEL_PLUGIN_MAX_VARIANTS 64
#define KTEL_PLUGIN_MAX_PARAMS 64
#define KTEL_PLUGIN_MAX_PROGRAMS 64
#define KTEL_PLUGIN_NAME_MAX 64
#define KTEL_PLUGIN_SCAN_MAX 256
#define KTEL_PLUGIN_BPF_MAX (64u << 20)

/* Size of the descriptor structs as ABI 1.0 defined them: the least accepted. */
#define KTEL_PLUGIN_DESC_MIN_SIZE (offsetof(struct ktel_plugin_desc, n_params) + sizeof(uint32_t))
#define KTEL_METRIC_DESC_MIN_SIZE (offsetof(struct ktel_metric_desc, n_programs) + sizeof(uint32_t))

/*
 * A validated plugin. desc is a copy of the plugin's descriptor in this
 * daemon's layout (fields of newer minors dropped), and desc.metrics points
 * at such copies too, so the rest of the daemon indexes desc.metrics[i]
 * without caring about the plugin's struct sizes. Every string and array the
 * descriptor reaches (the BPF bytes included) is copied as well and the
 * private copy of the file is freed before ktel_plugin__open() returns:
 * nothing points into the file, so a plugin file rewritten in place cannot change or crash
 * a plugin already open, and each open is a fresh load of the file's
 * current content.
 */
struct ktel_plugin {
	char *path;      /* as given to ktel_plugin__open() */
	char *real_path; /* canonical path of the file */
	struct stat st;  /* fstat of the file that was loaded */
	struct ktel_plugin_desc desc;
	struct ktel_metric_desc *metrics;
	/* Every copy desc reaches, freed with the plugin. */
	void **owned;
	size_t n_owned, cap_owned;
};

/*
 * Check that path may be loaded: the file is a regular file, not a
 * symlink, owned by root, not group- or world-writable, and every directory
 * of its canonical parent path is too. Returns 0, or -EPERM (-ENOENT etc.
 * when it cannot be examined) with err "<path>: refused: <rule>".
 */
int ktel_path_check_safe(const char *path, struct ktel_err *err);

/*
 * Like ktel_path_check_safe(), but also trusts owner (besides root) as the
 * owner of the file and its directories. For unprivileged test runs and
 * daemons running as a dedicated user; owner 0 is ktel_path_check_safe().
 */
int ktel_path_check_safe_owner(const char *path, uid_t owner, struct ktel_err *err);

/*
 * Check path, read it without running it (no dlopen: its data laid out and
 * relocated, the descriptor found in .dynsym) and validate its descriptor:
 * ABI major, struct sizes, names ([a-z0-9_]+ for plugin, metric and
 * dimension names), that every pointer lies in the plugin, that the BPF bytes
 * are an ELF for EM_BPF which libbpf opens (without loading it), that every
 * map a metric names (map_name, lost_map, label_map) and every program a
 * variant or metric names exists in the object, that no two stream metrics
 * read the same ring buffer, and that every param is a .rodata integer.
 * The file is read into a sealed copy first and must be a complete ELF shared
 * object of this architecture ("built for aarch64, this daemon is x86_64");
 * a file that changed while read, or is truncated and modified within
 * KTEL_PLUGIN_QUIET_MS, is -EAGAIN "not yet quiet" (try again later). On
 * success stores a new plugin in *ret_plugin; on refusal returns -errno with
 * err "<path>: refused: <rule>".
 */
int ktel_plugin__open(const char *path, struct ktel_plugin **ret_plugin, struct ktel_err *err);

/* ktel_plugin__open() with ktel_path_check_safe_owner()'s owner. */
int ktel_plugin__open_owner(const char *path, uid_t owner, struct ktel_plugin **ret_plugin,
			    struct ktel_err *err);

/* Free the plugin and its copies. Accepts NULL. */
void ktel_plugin__free(struct ktel_plugin *plugin);

/* Called for each plugin a scan refuses; err->msg names the file and rule. */
typedef void (*ktel_plugin_refusal_fn)(const char *path, const struct ktel_err *err, void *ctx);

struct ktel_plugin_scan_opts {
	uid_t owner;                       /* extra trusted owner, 0: root only */
	size_t max_plugins;                /* plugins taken; 0: KTEL_PLUGIN_SCAN_MAX */
	ktel_plugin_refusal_fn on_refusal; /* may be NULL */
	/* Optional, for a caller that rescans: true leaves path out of the
	 * scan (the caller holds it, unchanged): not opened, not counted. */
	bool (*skip)(const char *path, void *ctx);
	/* Optional: the path of a plugin outside this scan that provides
	 * metric, or NULL. A plugin repeating such a name is refused too. */
	const char *(*metric_owner)(const char *metric, void *ctx);
	void *ctx; /* for the callbacks */
};

/* The plugins a scan accepted, in file name order. */
struct ktel_plugin_list {
	struct ktel_plugin **items;
	size_t n;
	size_t n_refused; /* refusals reported through on_refusal */
	size_t n_dropped; /* *.so files after max_plugins were taken, not examined */
	/* Files neither taken nor refused: still being written (see
	 * KTEL_PLUGIN_QUIET_MS); a caller should rescan after that period. */
	size_t n_not_quiet;
};

/*
 * Open every "*.so" in dir (but those opts->skip leaves out), in strcmp
 * order of file names so the result does not depend on the file system. A
 * plugin is refused (and reported through opts->on_refusal, the scan goes
 * on) when ktel_plugin__open() refuses it or when one of its metric names
 * was taken by an earlier plugin of the scan or, per opts->metric_owner, by
 * one the caller holds ("duplicate metric name X (already provided by
 * /path/a.so)"). Once max_plugins were taken, the files after them are
 * refused too, unexamined, and counted in n_dropped: refused files do not
 * count against the limit. A file that is not yet quiet is neither taken nor
 * refused, only counted in n_not_quiet. Returns 0 and a list
 * (possibly empty) in *ret_list, or -errno with err when dir cannot be read.
 * opts may be NULL.
 */
int ktel_plugin_dir__scan(const char *dir, const struct ktel_plugin_scan_opts *opts,
			  struct ktel_plugin_list **ret_list, struct ktel_err *err);

/*
 * The names (without the directory) of dir's "*.so" entries that do not
 * start with a dot, in strcmp order: what ktel_plugin_dir__scan() examines,
 * for a caller that opens them itself. Returns 0 or -errno with err
 * "<dir>: cannot read plugin directory: <reason>".
 */
int ktel_plugin_dir__names(const char *dir, char ***ret_names, size_t *ret_n, struct ktel_err *err);

/* Free what ktel_plugin_dir__names() returned. Accepts NULL. */
void ktel_plugin_dir__names_free(char **names, size_t n);

/* Free the list and every plugin in it. Accepts NULL. */
void ktel_plugin_list__free(struct ktel_plugin_list *list);

#endif /* KTEL_PLUGIN_LOADER_H */
