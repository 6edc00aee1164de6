// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * memhog - put the lab guest under memory pressure.
 *
 *   memhog OOM_SCORE_ADJ MIB
 *
 * Sets its own oom_score_adj (so the OOM killer picks it, not the daemon,
 * and so DirectReclaimLatency has a known process_state label), then maps
 * and touches MIB MiB of anonymous memory 1 MiB at a time. The guest swaps
 * to 64 MiB of zram (tools/vm/init): once free memory runs out, allocations
 * wake kswapd and enter direct reclaim, which moves anonymous pages to zram;
 * with MIB larger than RAM plus swap the OOM killer ends this process in the
 * end. Inside a memory cgroup with a limit below MIB (and swap left) it is
 * memcg reclaim instead, and the hog finishes. It exits 0 if it ever gets all
 * MIB MiB.
 *
 * Transparent huge pages are off for the hog (PR_SET_THP_DISABLE): the lab
 * kernel has them always on, and khugepaged would collapse the hog's pages
 * into huge pages, charging each to the hog's memory cgroup from its own
 * context. At the cgroup's limit that charge reclaims, a memcg reclaim by
 * khugepaged (oom_score_adj 0, STATE_FOREGROUND, in the root cgroup) that
 * the checks would take for one of the hog's, whenever khugepaged's scan
 * (every 10 s) happens to come while the hog runs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned long mib;
	FILE *f;

	if (argc != 3) {
		fprintf(stderr, "usage: memhog OOM_SCORE_ADJ MIB\n");
		return 2;
	}
	mib = strtoul(argv[2], NULL, 0);
	f = fopen("/proc/self/oom_score_adj", "we");
	if (!f || fprintf(f, "%s\n", argv[1]) < 0 || fclose(f) != 0) {
		perror("memhog: oom_score_adj");
		return 1;
	}
	if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0)) {
		perror("memhog: PR_SET_THP_DISABLE");
		return 1;
	}
	for (unsigned long i = 0; i < mib; i++) {
		char *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0);

		if (p == MAP_FAILED) {
			perror("memhog: mmap");
			return 1;
		}
		/* Touch every page: the allocation happens at the fault. */
		for (long off = 0; off < (1 << 20); off += page)
			p[off] = (char)i;
	}
	printf("memhog: touched %lu MiB without being killed\n", mib);
	return 0;
}
