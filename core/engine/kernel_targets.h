/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Attach targets of the running kernel.
 *
 * Before a BPF object is loaded, each program's attach target (the tracepoint
 * or function its ELF section names) is looked up in the kernel's BTF, so a
 * program whose hook does not exist is switched off with a reason instead of
 * failing the whole load, and a plugin can carry variants of one program
 * (tp_btf, fentry, kprobe, a vendor hook) of which the loader picks the first
 * the kernel supports.
 *
 * Understood sections (libbpf spellings):
 *   tp_btf/X, raw_tp/X, raw_tracepoint/X  typedef btf_trace_X; nr_args is the
 *                                         FUNC_PROTO's params minus the
 *                                         leading void *
 *   fentry/X, fexit/X, fmod_ret/X (.s)    FUNC X; nr_args = its params
 *   kprobe/X, kretprobe/X                 FUNC X and kprobe support
 *   tracepoint/C/N, tp/C/N                tracefs events/C/N when tracefs is
 *                                         mounted, else typedef btf_trace_N
 * Other sections name no kernel target and are not checked.
 */
#ifndef KTEL_KERNEL_TARGETS_H
#define KTEL_KERNEL_TARGETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ktelemetry/plugin.h>

#include "error.h"
#include "vmlinux_btf.h"

struct btf;
struct ktel_targets;

#define KTEL_KPROBE_PMU_PATH "/sys/bus/event_source/devices/kprobe"
#define KTEL_TARGET_REASON_MAX 160

/*
 * Targets of the kernel BTF at btf_path; or, with btf_path NULL, of the
 * running kernel's BTF, the shared parse (ktel_vmlinux_btf__hold()). When
 * libbpf's loads borrow that parse (ktel_vmlinux_btf__lending()), the
 * object holds it while it lives (in the daemon: one plugin scan) and its
 * index points into it; otherwise, and for a btf_path, the names are copied
 * out and the parse freed before this returns, so it never sits beside the
 * parses libbpf makes. Returns NULL with errno set and err filled when the
 * file cannot be read or parsed.
 */
struct ktel_targets *ktel_targets__new(const char *btf_path, struct ktel_err *err);

/*
 * Wrap an existing BTF (e.g. a synthetic one built with btf__add_*). Takes
 * ownership of btf and frees it, here (the names are copied out).
 * Returns NULL with errno set on allocation failure.
 */
struct ktel_targets *ktel_targets__new_from_btf(struct btf *btf);

/* Free t (ending its hold of the shared parse, if any). Accepts NULL. */
void ktel_targets__free(struct ktel_targets *t);

/*
 * Override where kprobe support and tracefs are probed (tests point them at
 * temporary files). kprobe_pmu: a path that exists when the kernel supports
 * kprobes (default KTEL_KPROBE_PMU_PATH). tracefs: the tracefs mount point, or
 * "" to behave as if tracefs were not mounted (default: /sys/kernel/tracing,
 * then /sys/kernel/debug/tracing). NULL leaves a setting unchanged. The
 * strings are copied. Returns 0 or -ENOMEM.
 */
int ktel_targets__set_probe_paths(struct ktel_targets *t, const char *kprobe_pmu,
				  const char *tracefs);

/*
 * Check the attach target of a program in ELF section section_name.
 * Returns 0 when the target exists (or the section names none) and writes
 * its argument count, or -1 when unknown, to *ret_nr_args (may be NULL).
 * Returns -ENOENT when the target is missing and writes a one-line reason
 * ("tracepoint cma_alloc_start not in this kernel") to reason (may be NULL).
 */
int ktel_targets__check(const struct ktel_targets *t, const char *section_name, int *ret_nr_args,
			char *reason, size_t reason_len);

/* One program of a BPF object, as ktel_targets__choose() sees it. */
struct ktel_prog_choice {
	const char *name;    /* in: program (function) name */
	const char *section; /* in: ELF section name */
	/* in: non-NULL: not needed by this load (a program only an attributed
	 * metric needs, with that attribution off), this is why: never
	 * selected, and its group or its absence is no unmet requirement. */
	const char *unneeded;
	const char *excluded;                /* in: non-NULL: never select, this is why (a
			       * program the kernel refused to load) */
	bool selected;                       /* out: keep autoload on */
	int nr_args;                         /* out: target's argument count, -1 unknown */
	char reason[KTEL_TARGET_REASON_MAX]; /* out: why not selected, else "" */
};

/*
 * Decide which programs of an object to load. A program in no variant group
 * is selected when its target exists. Within a group, the first variant in
 * table order whose program's target exists and, when the variant's nr_args
 * is >= 0, has exactly that many arguments, is selected; the others are not,
 * each with its reason. Variants naming a program absent from progs are
 * ignored (the plugin loader refuses such plugins).
 *
 * A program may be listed in several groups, to stand for all of them (one
 * variant made of fewer hooks than the others: runq_latency's switch alone
 * replaces its wakeup hooks). Its first entry in table order decides it, as
 * above; a later entry, in a group whose first entry comes later in the
 * table, is that group's choice when the program was selected and is passed
 * over when it was not.
 *
 * All or nothing: every hook of an object is needed (a start hook without
 * its end only fills a start map), so when a variant group has no usable
 * variant or a program in no group is unusable, nothing is selected; the
 * programs that could have run say "not loaded: variant group G has no
 * usable variant" (or "program P cannot run"). Returns the number of
 * selected programs.
 */
size_t ktel_targets__choose(const struct ktel_targets *t, const struct ktel_prog_variant *variants,
			    uint32_t n_variants, struct ktel_prog_choice *progs, size_t n_progs);

/*
 * ktel_targets__choose() that also says why nothing was selected: writes to
 * why (may be NULL) one clause per unmet requirement, "; "-separated, in
 * table then program order: "variant group G: no usable variant (<reasons
 * of its variants>)" for a group, the program's reason for one in no group.
 * why is "" when the object can run.
 */
size_t ktel_targets__choose_why(const struct ktel_targets *t,
				const struct ktel_prog_variant *variants, uint32_t n_variants,
				struct ktel_prog_choice *progs, size_t n_progs, char *why,
				size_t why_len);

#endif /* KTEL_KERNEL_TARGETS_H */
