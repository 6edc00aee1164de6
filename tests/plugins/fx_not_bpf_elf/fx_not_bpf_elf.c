// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Test fixture: the embedded bytes are a valid x86-64 ELF header, not BPF. */
#include <elf.h>

#include <ktelemetry/plugin.h>

static const Elf64_Ehdr x86_elf = {
	.e_ident = {ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3, ELFCLASS64, ELFDATA2LSB, EV_CURRENT},
	.e_type = ET_REL,
	.e_machine = EM_X86_64,
	.e_version = EV_CURRENT,
	.e_shoff = 0,
	.e_ehsize = sizeof(Elf64_Ehdr),
	.e_shentsize = sizeof(Elf64_Shdr),
	.e_shnum = 0,
	.e_shstrndx = 0,
};

/* The descriptor reads as a table: kept as laid out by hand. */
/* clang-format off */
static const struct ktel_metric_desc metrics[] = {
	KTEL_METRIC(.name = "fx_not_bpf_elf", .map_name = "fx_not_bpf_elf_map",
		    .model = KTEL_MODEL_ACCUMULATOR, .unit = "us", .scheme = KTEL_HIST_LOG2),
};

KTEL_PLUGIN(.name = "fx_not_bpf_elf", .version = "1.0",
	    .bpf_object = &x86_elf, .bpf_object_size = sizeof(x86_elf),
	    .metrics = metrics, .n_metrics = KTEL_ARRAY_SIZE(metrics));
/* clang-format on */
