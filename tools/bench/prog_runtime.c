// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ktel-bench-prog-runtime: the bpf_stats body time of chosen programs of a
 * BPF object under the real events a command produces. Loads OBJ with only
 * the programs named (so two forms of one hook, a task start program and its
 * hash twin, can be measured one at a time from one object), attaches them,
 * turns bpf_stats on (BPF_ENABLE_STATS, for this process's lifetime only),
 * runs CMD through the shell, and prints each program's runs and ns per run
 * over CMD. Body time excludes the dispatch (the tp_btf floor). It prints
 * figures, never passes or fails on them (docs/benchmarks.md, "Start forms
 * under real events").
 *
 *   ktel-bench-prog-runtime OBJ CMD PROG [PROG...]
 *
 * Needs root. The programs' .rodata keeps its compiled defaults (attribution
 * off).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#define MAX_PROGS 16

/* libbpf's notes on the objects' own sections (.ktel.types) are not figures. */
static int quiet(enum libbpf_print_level level, const char *fmt, va_list args)
{
	(void)level;
	(void)fmt;
	(void)args;
	return 0;
}

static int prog_stats(const struct bpf_program *p, uint64_t *ret_time, uint64_t *ret_cnt)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);
	int err;

	memset(&info, 0, sizeof(info));
	err = bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len);
	if (err)
		return err;
	*ret_time = info.run_time_ns;
	*ret_cnt = info.run_cnt;
	return 0;
}

/* Whether name is one of the n names in names. */
static int wanted(const char *name, char **names, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(names[i], name))
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	struct bpf_program *progs[MAX_PROGS] = {}, *p;
	struct bpf_link *links[MAX_PROGS] = {};
	uint64_t t0[MAX_PROGS], n0[MAX_PROGS], t1, n1;
	int n = argc - 3, stats_fd = -1, rc = 1;
	struct bpf_object *obj;

	if (argc < 4 || n > MAX_PROGS) {
		fprintf(stderr,
			"usage: ktel-bench-prog-runtime OBJ CMD PROG [PROG...] "
			"(at most %d programs)\n",
			MAX_PROGS);
		return 2;
	}
	libbpf_set_print(quiet);
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj) {
		fprintf(stderr, "prog-runtime: open %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	bpf_object__for_each_program(p, obj)
		bpf_program__set_autoload(p, wanted(bpf_program__name(p), argv + 3, n));
	if (bpf_object__load(obj)) {
		fprintf(stderr, "prog-runtime: load %s: %s\n", argv[1], strerror(errno));
		goto out;
	}
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (stats_fd < 0) {
		fprintf(stderr, "prog-runtime: BPF_ENABLE_STATS: %s\n", strerror(-stats_fd));
		goto out;
	}
	for (int i = 0; i < n; i++) {
		progs[i] = bpf_object__find_program_by_name(obj, argv[3 + i]);
		links[i] = progs[i] ? bpf_program__attach(progs[i]) : NULL;
		if (!links[i] || prog_stats(progs[i], &t0[i], &n0[i])) {
			fprintf(stderr, "prog-runtime: %s: not in %s or not attached\n",
				argv[3 + i], argv[1]);
			goto out;
		}
	}
	if (system(argv[2]) != 0)
		fprintf(stderr, "prog-runtime: '%s' failed; figures cover what it did\n", argv[2]);
	for (int i = 0; i < n; i++) {
		if (prog_stats(progs[i], &t1, &n1))
			goto out;
		printf("%-32s %10" PRIu64 " runs %9.1f ns/run\n", argv[3 + i], n1 - n0[i],
		       n1 > n0[i] ? (double)(t1 - t0[i]) / (double)(n1 - n0[i]) : 0.0);
	}
	rc = 0;
out:
	for (int i = 0; i < n; i++)
		bpf_link__destroy(links[i]);
	if (stats_fd >= 0)
		close(stats_fd);
	bpf_object__close(obj);
	return rc;
}
