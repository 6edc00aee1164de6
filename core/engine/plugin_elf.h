/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Plugin ELF intake: a private, immutable copy of a plugin file and the
 * structural checks the copy must pass before anything maps it as code.
 *
 * A plugin file can be truncated, still being written (scp, adb push) or
 * rewritten while it is read. mmap'ing such a file (what dlopen does) faults
 * with SIGBUS on a page past its end. So the file is read once, with read(2),
 * into a memfd the daemon filled itself and sealed (no write, shrink or
 * grow, and the seals themselves sealed), and the whole ELF is validated on
 * that copy: every program header, every PT_LOAD segment and every section
 * lies inside it, string tables are terminated, symbol tables are in bounds.
 * Only that copy is loaded afterwards.
 */
#ifndef KTEL_PLUGIN_ELF_H
#define KTEL_PLUGIN_ELF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "error.h"

/*
 * A file modified less than this long ago that is shorter than its ELF
 * headers say is "not yet quiet": a writer may still be at work, so it is
 * retried on a later scan instead of being refused.
 */
#define KTEL_PLUGIN_QUIET_MS 1000

/* Largest plugin file read (the embedded BPF object is bounded lower). */
#define KTEL_PLUGIN_FILE_MAX (128u << 20)

/* A sealed, read-only copy of a plugin file. */
struct ktel_elf_image {
	int memfd;                 /* sealed memfd holding the bytes */
	const unsigned char *data; /* read-only mapping of memfd */
	size_t size;
};

/*
 * Read the open file fd (whose fstat is st, path for messages) into a new
 * sealed image. Returns 0 with *ret_image, -EAGAIN when the file changed
 * size or mtime while it was read, or another -errno, with err
 * "<path>: refused: <rule>".
 */
int ktel_elf_image__read(const char *path, int fd, const struct stat *st,
			 struct ktel_elf_image **ret_image, struct ktel_err *err);

/* Unmap and close the image. Accepts NULL. */
void ktel_elf_image__free(struct ktel_elf_image *image);

/*
 * Validate data[0..size) as a shared object for this build's architecture:
 * ELF64, this byte order, ET_DYN, e_machine of this build, every program
 * header and PT_LOAD segment and every section inside the data, section
 * names and string tables NUL-terminated, symbol tables with whole entries,
 * a string table link and names inside it. Returns 0, -ENODATA when the
 * data ends before what the ELF describes (truncated, or still being
 * written), or -ENOEXEC, with err "<path>: refused: <rule>" ("built for
 * aarch64, this daemon is x86_64").
 */
int ktel_elf_validate(const void *data, size_t size, const char *path, struct ktel_err *err);

/* A relocation left unapplied (an import, an unsupported type). */
struct ktel_elf_bad_reloc {
	uint64_t offset; /* of the 8-byte slot in the image */
	char why[128];
};

/*
 * The plugin's data as the dynamic loader would lay it out, built without
 * running anything: the PT_LOAD segments copied to their addresses in a
 * private buffer (bss zero), the RELATIVE relocations and the ABS64 /
 * GLOB_DAT ones against symbols the object defines applied, so pointers in
 * it point into mem. Relocations against imports or of other types are not
 * applied and their slots are remembered: ktel_elf_view__check() refuses
 * any range that contains one. No constructor, no plugin code, runs.
 */
struct ktel_elf_view {
	unsigned char *mem;
	size_t span;     /* bytes of mem: the PT_LOAD address span */
	const void *sym; /* the symbol asked for */
	size_t sym_size;
	struct ktel_elf_bad_reloc *bad;
	size_t n_bad;
};

/*
 * Build the view of a validated image and find symbol, a defined data
 * object in .dynsym. Returns 0 with *ret_view, -ENOENT when symbol is not
 * defined ("exports no <symbol> symbol"), or -errno with err.
 */
int ktel_elf_view__new(const struct ktel_elf_image *img, const char *symbol, const char *path,
		       struct ktel_elf_view **ret_view, struct ktel_err *err);

void ktel_elf_view__free(struct ktel_elf_view *view);

/*
 * NULL when [ptr, ptr + size) lies inside the view and holds no unapplied
 * relocation; else "outside" or the reason of the relocation it holds.
 */
const char *ktel_elf_view__check(const struct ktel_elf_view *view, const void *ptr, size_t size);

/* Bytes from ptr to the end of the view; 0 when ptr is outside it. */
size_t ktel_elf_view__room(const struct ktel_elf_view *view, const void *ptr);

/* "x86_64", "aarch64", ... for an ELF e_machine; NULL when unknown. */
const char *ktel_elf_machine_name(unsigned int machine);

/* This build's e_machine. */
unsigned int ktel_elf_host_machine(void);

#endif /* KTEL_PLUGIN_ELF_H */
