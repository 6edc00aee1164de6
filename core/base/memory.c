// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "memory.h"

#include <malloc.h>

void ktel_memory__init(void)
{
	/* Setting either threshold turns off glibc's dynamic adjustment. */
	mallopt(M_MMAP_THRESHOLD, KTEL_MMAP_THRESHOLD);
	mallopt(M_TRIM_THRESHOLD, 2 * KTEL_MMAP_THRESHOLD);
}

void ktel_memory__release(void)
{
	malloc_trim(0);
}
