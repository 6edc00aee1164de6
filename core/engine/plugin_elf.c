// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Plugin ELF intake: the sealed copy and the structural validation
 * (see plugin_elf.h).
 */
#include "plugin_elf.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SEALS (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

static const struct {
	unsigned int machine;
	const char *name;
} machines[] = {
	{EM_X86_64, "x86_64"}, {EM_AARCH64, "aarch64"},
	{EM_386, "i386"},      {EM_ARM, "arm"},
	{EM_RISCV, "riscv"},   {EM_PPC64, "ppc64"},
	{EM_PPC, "ppc"},       {EM_S390, "s390"},
	{EM_MIPS, "mips"},     {EM_LOONGARCH, "loongarch"},
	{EM_BPF, "bpf"},       {EM_SPARCV9, "sparc64"},
};

const char *ktel_elf_machine_name(unsigned int machine)
{
	for (size_t i = 0; i < sizeof(machines) / sizeof(machines[0]); i++)
		if (machines[i].machine == machine)
			return machines[i].name;
	return NULL;
}

unsigned int ktel_elf_host_machine(void)
{
#if defined(__x86_64__)
	return EM_X86_64;
#elif defined(__aarch64__)
	return EM_AARCH64;
#elif defined(__riscv) && __riscv_xlen == 64
	return EM_RISCV;
#elif defined(__powerpc64__)
	return EM_PPC64;
#elif defined(__s390x__)
	return EM_S390;
#else
#error "ktelemetry: unknown host architecture for plugin ELF checks"
#endif
}

/* ---- the sealed copy ------------------------------------------------- */

static bool same_version(const struct stat *a, const struct stat *b)
{
	return a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
	       a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && a->st_ino == b->st_ino;
}

/* Copy fd's st->st_size bytes into memfd with read(2): never a mapping of fd. */
static int copy_into(const char *path, int fd, int memfd, size_t size, struct ktel_err *err)
{
	static __thread char buf[64 << 10];
	size_t done = 0;

	while (done < size) {
		size_t want = size - done < sizeof(buf) ? size - done : sizeof(buf);
		ssize_t n = pread(fd, buf, want, (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return ktel_err_set(err, errno, "%s: refused: cannot read: %s", path,
					    strerror(errno));
		if (n == 0)
			return ktel_err_set(err, EAGAIN,
					    "%s: not yet quiet: file shrank while "
					    "it was read",
					    path);
		if (write(memfd, buf, (size_t)n) != n)
			return ktel_err_set(err, errno ? errno : EIO, "%s: cannot copy: %s", path,
					    strerror(errno ? errno : EIO));
		done += (size_t)n;
	}
	return 0;
}

int ktel_elf_image__read(const char *path, int fd, const struct stat *st,
			 struct ktel_elf_image **ret_image, struct ktel_err *err)
{
	struct ktel_elf_image *img;
	struct stat after;
	int rc;

	/* Empty is what a copy looks like before its first write. */
	if (st->st_size <= 0)
		return ktel_err_set(err, ENODATA, "%s: refused: empty file", path);
	if ((unsigned long long)st->st_size > KTEL_PLUGIN_FILE_MAX)
		return ktel_err_set(err, EFBIG, "%s: refused: file of %lld bytes, more than %u",
				    path, (long long)st->st_size, KTEL_PLUGIN_FILE_MAX);
	img = calloc(1, sizeof(*img));
	if (!img)
		return ktel_err_set(err, ENOMEM, "%s: out of memory", path);
	img->size = (size_t)st->st_size;
	img->memfd = memfd_create("ktel-plugin", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (img->memfd < 0) {
		rc = ktel_err_set(err, errno, "%s: cannot create a private copy: %s", path,
				  strerror(errno));
		goto fail;
	}
	rc = copy_into(path, fd, img->memfd, img->size, err);
	if (rc)
		goto fail;
	if (fstat(fd, &after) != 0 || !same_version(st, &after)) {
		rc = ktel_err_set(err, EAGAIN, "%s: not yet quiet: file changed while it was read",
				  path);
		goto fail;
	}
	if (fcntl(img->memfd, F_ADD_SEALS, SEALS) != 0) {
		rc = ktel_err_set(err, errno, "%s: cannot seal the private copy: %s", path,
				  strerror(errno));
		goto fail;
	}
	img->data = mmap(NULL, img->size, PROT_READ, MAP_PRIVATE, img->memfd, 0);
	if (img->data == MAP_FAILED) {
		img->data = NULL;
		rc = ktel_err_set(err, errno, "%s: cannot map the private copy: %s", path,
				  strerror(errno));
		goto fail;
	}
	*ret_image = img;
	return 0;
fail:
	ktel_elf_image__free(img);
	return rc;
}

void ktel_elf_image__free(struct ktel_elf_image *img)
{
	if (!img)
		return;
	if (img->data)
		munmap((void *)img->data, img->size);
	if (img->memfd >= 0)
		close(img->memfd);
	free(img);
}

/* ---- validation ------------------------------------------------------ */

struct elf_check {
	const unsigned char *data;
	size_t size;
	const char *path;
	struct ktel_err *err;
	const Elf64_Shdr *shdrs;
	uint16_t shnum;
};

/* Whether [off, off + len) lies in the file, without overflow. */
static bool in_file(const struct elf_check *c, uint64_t off, uint64_t len)
{
	return off <= c->size && len <= c->size - off;
}

static int refuse(const struct elf_check *c, int code, const char *fmt, va_list ap)
{
	char rule[256];

	vsnprintf(rule, sizeof(rule), fmt, ap);
	return ktel_err_set(c->err, code, "%s: refused: %s", c->path, rule);
}

/* Refuse with ENOEXEC "<path>: refused: <rule>": the ELF is malformed. */
__attribute__((format(printf, 2, 3))) static int bad(const struct elf_check *c, const char *fmt,
						     ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = refuse(c, ENOEXEC, fmt, ap);
	va_end(ap);
	return rc;
}

/* Refuse with ENODATA: the file ends before what the ELF describes. */
__attribute__((format(printf, 2, 3))) static int short_file(const struct elf_check *c,
							    const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = refuse(c, ENODATA, fmt, ap);
	va_end(ap);
	return rc;
}

/* The architecture first: a foreign plugin is named as such, not as broken. */
static int check_ident(const struct elf_check *c)
{
	const unsigned char *id = c->data;
	unsigned int machine, host = ktel_elf_host_machine();
	const char *name, *host_name = ktel_elf_machine_name(host);

	if (c->size < EI_NIDENT + 4 &&
	    memcmp(id, ELFMAG, c->size < SELFMAG ? c->size : SELFMAG) == 0)
		return short_file(c, "ELF header truncated (%zu of %zu bytes)", c->size,
				  sizeof(Elf64_Ehdr));
	if (c->size < EI_NIDENT + 4 || memcmp(id, ELFMAG, SELFMAG) != 0)
		return ktel_err_set(c->err, ENOEXEC,
				    "%s: refused: not a shared object (no ELF "
				    "header)",
				    c->path);
	/* e_machine is at offset 18 in both classes, in the file's byte order. */
	machine = id[EI_DATA] == ELFDATA2MSB ? (unsigned int)id[18] << 8 | id[19]
					     : (unsigned int)id[19] << 8 | id[18];
	if (machine != host) {
		name = ktel_elf_machine_name(machine);
		if (name)
			return ktel_err_set(c->err, ENOEXEC,
					    "%s: refused: built for %s, this "
					    "daemon is %s",
					    c->path, name, host_name);
		return ktel_err_set(c->err, ENOEXEC,
				    "%s: refused: built for ELF machine %u, "
				    "this daemon is %s",
				    c->path, machine, host_name);
	}
	if (id[EI_CLASS] != ELFCLASS64)
		return ktel_err_set(c->err, ENOEXEC,
				    "%s: refused: not a 64-bit ELF (class %u), "
				    "this daemon is %s",
				    c->path, id[EI_CLASS], host_name);
	if (id[EI_DATA] != (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB))
		return ktel_err_set(c->err, ENOEXEC,
				    "%s: refused: ELF byte order %u is not this "
				    "daemon's",
				    c->path, id[EI_DATA]);
	return 0;
}

static int check_header(struct elf_check *c)
{
	const Elf64_Ehdr *eh = (const void *)c->data;
	int rc = check_ident(c);

	if (rc)
		return rc;
	if (c->size < sizeof(*eh))
		return short_file(c, "ELF header truncated (%zu of %zu bytes)", c->size,
				  sizeof(*eh));
	if (eh->e_type != ET_DYN)
		return ktel_err_set(c->err, ENOEXEC,
				    "%s: refused: not a shared object (ELF type "
				    "%u)",
				    c->path, eh->e_type);
	if (eh->e_phnum == 0 || eh->e_phentsize != sizeof(Elf64_Phdr))
		return bad(c, "program header table malformed (%u entries of %u bytes)",
			   eh->e_phnum, eh->e_phentsize);
	if (!in_file(c, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr)))
		return short_file(c,
				  "program header table (%u entries at offset %llu) outside the "
				  "file",
				  eh->e_phnum, (unsigned long long)eh->e_phoff);
	if (eh->e_shnum == 0 || eh->e_shentsize != sizeof(Elf64_Shdr))
		return bad(c, "section header table malformed (%u entries of %u bytes)",
			   eh->e_shnum, eh->e_shentsize);
	if (!in_file(c, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr)))
		return short_file(c,
				  "section header table (%u entries at offset %llu) outside the "
				  "file",
				  eh->e_shnum, (unsigned long long)eh->e_shoff);
	if (eh->e_shoff % 8 || eh->e_phoff % 8)
		return bad(c, "header tables not 8-byte aligned");
	if (eh->e_shstrndx == SHN_UNDEF || eh->e_shstrndx >= eh->e_shnum)
		return bad(c, "section name table index %u invalid", eh->e_shstrndx);
	c->shdrs = (const void *)(c->data + eh->e_shoff);
	c->shnum = eh->e_shnum;
	return 0;
}

static int check_segments(const struct elf_check *c)
{
	const Elf64_Ehdr *eh = (const void *)c->data;
	const Elf64_Phdr *ph = (const void *)(c->data + eh->e_phoff);
	bool load = false;

	for (unsigned int i = 0; i < eh->e_phnum; i++) {
		if (!in_file(c, ph[i].p_offset, ph[i].p_filesz))
			return short_file(c,
					  "segment %u (offset %llu, %llu bytes) lies outside the file",
					  i, (unsigned long long)ph[i].p_offset,
					  (unsigned long long)ph[i].p_filesz);
		if (ph[i].p_type != PT_LOAD)
			continue;
		load = true;
		if (ph[i].p_filesz > ph[i].p_memsz)
			return bad(c, "PT_LOAD segment %u is larger in the file than in memory", i);
	}
	return load ? 0 : bad(c, "no PT_LOAD segment");
}

/* A string table: in the file (checked before) and ending in a NUL. */
static bool strtab_ok(const struct elf_check *c, const Elf64_Shdr *s)
{
	return s->sh_type == SHT_STRTAB && s->sh_size > 0 &&
	       c->data[s->sh_offset + s->sh_size - 1] == '\0';
}

static int check_symtab(const struct elf_check *c, const Elf64_Shdr *s, const char *name,
			unsigned int i)
{
	const Elf64_Sym *syms = (const void *)(c->data + s->sh_offset);
	const Elf64_Shdr *str;

	if (s->sh_entsize != sizeof(Elf64_Sym) || s->sh_size % sizeof(Elf64_Sym) ||
	    s->sh_offset % 8)
		return bad(c, "symbol table %s (section %u) has partial entries", name, i);
	if (s->sh_link == 0 || s->sh_link >= c->shnum || !strtab_ok(c, &c->shdrs[s->sh_link]))
		return bad(c, "symbol table %s (section %u) has no valid string table", name, i);
	str = &c->shdrs[s->sh_link];
	for (uint64_t k = 0; k < s->sh_size / sizeof(Elf64_Sym); k++)
		if (syms[k].st_name >= str->sh_size)
			return bad(c,
				   "symbol table %s (section %u) names a symbol outside its "
				   "string table",
				   name, i);
	return 0;
}

static int check_sections(const struct elf_check *c)
{
	const Elf64_Ehdr *eh = (const void *)c->data;
	const Elf64_Shdr *names = &c->shdrs[eh->e_shstrndx];
	int rc;

	for (unsigned int i = 0; i < c->shnum; i++) {
		const Elf64_Shdr *s = &c->shdrs[i];

		if (s->sh_type != SHT_NOBITS && !in_file(c, s->sh_offset, s->sh_size))
			return short_file(c,
					  "section %u (offset %llu, %llu bytes) lies outside the file",
					  i, (unsigned long long)s->sh_offset,
					  (unsigned long long)s->sh_size);
	}
	if (!strtab_ok(c, names))
		return bad(c,
			   "section name table (section %u) is not a terminated string "
			   "table",
			   eh->e_shstrndx);
	for (unsigned int i = 1; i < c->shnum; i++) {
		const Elf64_Shdr *s = &c->shdrs[i];
		const char *name;

		if (s->sh_name >= names->sh_size)
			return bad(c, "section %u has a name outside the name table", i);
		name = (const char *)c->data + names->sh_offset + s->sh_name;
		if (s->sh_type == SHT_STRTAB && !strtab_ok(c, s))
			return bad(c, "string table %s (section %u) is not NUL-terminated", name,
				   i);
		if (s->sh_type == SHT_SYMTAB || s->sh_type == SHT_DYNSYM) {
			rc = check_symtab(c, s, name, i);
			if (rc)
				return rc;
		}
	}
	return 0;
}

int ktel_elf_validate(const void *data, size_t size, const char *path, struct ktel_err *err)
{
	struct elf_check c = {.data = data, .size = size, .path = path, .err = err};
	int rc;

	rc = check_header(&c);
	rc = rc ?: check_segments(&c);
	return rc ?: check_sections(&c);
}

/* ---- reading the descriptor without running anything ----------------- */

#if defined(__x86_64__)
#define R_RELATIVE R_X86_64_RELATIVE
#define R_ABS64 R_X86_64_64
#define R_GLOB_DAT R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define R_RELATIVE R_AARCH64_RELATIVE
#define R_ABS64 R_AARCH64_ABS64
#define R_GLOB_DAT R_AARCH64_GLOB_DAT
#endif

#define VIEW_SPAN_MAX (256u << 20)
#define VIEW_RELOCS_MAX (1u << 20)

/* The address span the PT_LOAD segments cover (validated image). */
static int view_span(const struct elf_check *c, size_t *ret_span)
{
	const Elf64_Ehdr *eh = (const void *)c->data;
	const Elf64_Phdr *ph = (const void *)(c->data + eh->e_phoff);
	uint64_t span = 0;

	for (unsigned int i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type != PT_LOAD)
			continue;
		if (ph[i].p_vaddr > VIEW_SPAN_MAX || ph[i].p_memsz > VIEW_SPAN_MAX - ph[i].p_vaddr)
			return bad(c, "PT_LOAD segment %u extends beyond %u bytes of address space",
				   i, VIEW_SPAN_MAX);
		if (ph[i].p_vaddr + ph[i].p_memsz > span)
			span = ph[i].p_vaddr + ph[i].p_memsz;
	}
	*ret_span = (size_t)span;
	return 0;
}

/* Lay the PT_LOAD segments out as the dynamic loader would, data only. */
static void view_layout(const struct elf_check *c, struct ktel_elf_view *v)
{
	const Elf64_Ehdr *eh = (const void *)c->data;
	const Elf64_Phdr *ph = (const void *)(c->data + eh->e_phoff);

	for (unsigned int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD)
			memcpy(v->mem + ph[i].p_vaddr, c->data + ph[i].p_offset, ph[i].p_filesz);
}

static int view_mark_bad(const struct elf_check *c, struct ktel_elf_view *v, uint64_t off,
			 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Remember a slot left unrelocated: the descriptor must not reach it. */
static int view_mark_bad(const struct elf_check *c, struct ktel_elf_view *v, uint64_t off,
			 const char *fmt, ...)
{
	struct ktel_elf_bad_reloc *grown;
	va_list ap;

	grown = realloc(v->bad, (v->n_bad + 1) * sizeof(*grown));
	if (!grown)
		return ktel_err_set(c->err, ENOMEM, "%s: out of memory", c->path);
	v->bad = grown;
	grown[v->n_bad].offset = off;
	va_start(ap, fmt);
	vsnprintf(grown[v->n_bad].why, sizeof(grown->why), fmt, ap);
	va_end(ap);
	v->n_bad++;
	return 0;
}

static const char *sym_name(const struct elf_check *c, const Elf64_Shdr *symtab,
			    const Elf64_Sym *sym)
{
	const Elf64_Shdr *str = &c->shdrs[symtab->sh_link];

	return (const char *)c->data + str->sh_offset + sym->st_name;
}

/* Apply one relocation to the view, or mark its slot as not applied. */
static int view_reloc(const struct elf_check *c, struct ktel_elf_view *v, const Elf64_Shdr *symtab,
		      const Elf64_Rela *r)
{
	const Elf64_Sym *syms = (const void *)(c->data + symtab->sh_offset);
	uint64_t nsyms = symtab->sh_size / sizeof(Elf64_Sym), idx = ELF64_R_SYM(r->r_info);
	uint32_t type = ELF64_R_TYPE(r->r_info);
	uintptr_t base = (uintptr_t)v->mem, val;

	if (r->r_offset > v->span || v->span - r->r_offset < 8)
		return bad(c, "relocation at 0x%llx outside the loaded image",
			   (unsigned long long)r->r_offset);
	if (type == R_RELATIVE) {
		val = base + (uintptr_t)r->r_addend;
	} else if (type == R_ABS64 || type == R_GLOB_DAT) {
		if (idx == 0 || idx >= nsyms)
			return bad(c, "relocation at 0x%llx names symbol %llu of %llu",
				   (unsigned long long)r->r_offset, (unsigned long long)idx,
				   (unsigned long long)nsyms);
		if (syms[idx].st_shndx == SHN_UNDEF || syms[idx].st_shndx >= SHN_LORESERVE)
			return view_mark_bad(c, v, r->r_offset,
					     "import of %s (relocation at 0x%llx)",
					     sym_name(c, symtab, &syms[idx]),
					     (unsigned long long)r->r_offset);
		val = base + (uintptr_t)syms[idx].st_value + (uintptr_t)r->r_addend;
	} else {
		return view_mark_bad(c, v, r->r_offset, "relocation type %u at 0x%llx", type,
				     (unsigned long long)r->r_offset);
	}
	memcpy(v->mem + r->r_offset, &val, sizeof(val));
	return 0;
}

static int view_relocate(const struct elf_check *c, struct ktel_elf_view *v)
{
	size_t total = 0;
	int rc;

	for (unsigned int i = 1; i < c->shnum; i++) {
		const Elf64_Shdr *s = &c->shdrs[i];
		const Elf64_Rela *r;

		if (s->sh_type == SHT_REL)
			return bad(c, "section %u holds REL relocations (only RELA are read)", i);
		if (s->sh_type != SHT_RELA)
			continue;
		if (s->sh_entsize != sizeof(Elf64_Rela) || s->sh_size % sizeof(Elf64_Rela) ||
		    s->sh_offset % 8 || s->sh_link == 0 || s->sh_link >= c->shnum ||
		    c->shdrs[s->sh_link].sh_type != SHT_DYNSYM)
			return bad(c, "relocation section %u malformed", i);
		/* Only now: a NOBITS section's offset was never checked against the file. */
		r = (const void *)(c->data + s->sh_offset);
		total += s->sh_size / sizeof(Elf64_Rela);
		if (total > VIEW_RELOCS_MAX)
			return bad(c, "more than %u relocations", VIEW_RELOCS_MAX);
		for (uint64_t k = 0; k < s->sh_size / sizeof(Elf64_Rela); k++) {
			rc = view_reloc(c, v, &c->shdrs[s->sh_link], &r[k]);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* Find the defined object symbol name in .dynsym. */
static int view_find(const struct elf_check *c, struct ktel_elf_view *v, const char *name)
{
	for (unsigned int i = 1; i < c->shnum; i++) {
		const Elf64_Shdr *s = &c->shdrs[i];
		const Elf64_Sym *syms;

		if (s->sh_type != SHT_DYNSYM)
			continue;
		syms = (const void *)(c->data + s->sh_offset);
		for (uint64_t k = 1; k < s->sh_size / sizeof(Elf64_Sym); k++) {
			const Elf64_Sym *sym = &syms[k];

			if (strcmp(sym_name(c, s, sym), name) != 0)
				continue;
			if (sym->st_shndx == SHN_UNDEF || sym->st_shndx >= SHN_LORESERVE)
				return ktel_err_set(c->err, ENOENT,
						    "%s: refused: exports no %s symbol "
						    "(not a ktelemetry plugin)",
						    c->path, name);
			if (ELF64_ST_TYPE(sym->st_info) != STT_OBJECT || sym->st_value > v->span ||
			    sym->st_size > v->span - sym->st_value)
				return bad(c, "symbol %s is not a data object inside the image",
					   name);
			v->sym = v->mem + sym->st_value;
			v->sym_size = (size_t)sym->st_size;
			return 0;
		}
	}
	return ktel_err_set(c->err, ENOENT,
			    "%s: refused: exports no %s symbol (not a ktelemetry "
			    "plugin)",
			    c->path, name);
}

int ktel_elf_view__new(const struct ktel_elf_image *img, const char *symbol, const char *path,
		       struct ktel_elf_view **ret_view, struct ktel_err *err)
{
	struct elf_check c = {.data = img->data, .size = img->size, .path = path, .err = err};
	struct ktel_elf_view *v;
	size_t span = 0;
	int rc;

	rc = check_header(&c);
	rc = rc ?: view_span(&c, &span);
	if (rc)
		return rc;
	v = calloc(1, sizeof(*v));
	if (v)
		v->mem = calloc(1, span ? span : 1);
	if (!v || !v->mem) {
		ktel_elf_view__free(v);
		return ktel_err_set(err, ENOMEM, "%s: out of memory", path);
	}
	v->span = span;
	view_layout(&c, v);
	rc = view_relocate(&c, v);
	rc = rc ?: view_find(&c, v, symbol);
	if (rc) {
		ktel_elf_view__free(v);
		return rc;
	}
	*ret_view = v;
	return 0;
}

void ktel_elf_view__free(struct ktel_elf_view *v)
{
	if (!v)
		return;
	free(v->mem);
	free(v->bad);
	free(v);
}

const char *ktel_elf_view__check(const struct ktel_elf_view *v, const void *ptr, size_t size)
{
	uintptr_t p = (uintptr_t)ptr, base = (uintptr_t)v->mem;
	uint64_t off;

	if (!ptr || p < base || p - base > v->span || size > v->span - (p - base))
		return "outside";
	off = p - base;
	for (size_t i = 0; i < v->n_bad; i++)
		if (v->bad[i].offset < off + size && off < v->bad[i].offset + 8)
			return v->bad[i].why;
	return NULL;
}

size_t ktel_elf_view__room(const struct ktel_elf_view *v, const void *ptr)
{
	if (ktel_elf_view__check(v, ptr, 1))
		return 0;
	return v->span - ((uintptr_t)ptr - (uintptr_t)v->mem);
}
