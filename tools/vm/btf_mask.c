// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * btf_mask - copy a kernel BTF blob with some tracepoints hidden.
 *
 *   btf_mask IN OUT TRACEPOINT...
 *
 * Renames the typedef btf_trace_<TRACEPOINT> to Xtf_trace_<TRACEPOINT> by
 * changing one byte of its name in the string section: type ids, sizes and
 * every other name stay as they are, so CO-RE relocations and the attach ids
 * of other programs are unaffected. The lab bind-mounts OUT over
 * /sys/kernel/btf/vmlinux in the guest so that the loader, which checks for
 * the typedef before choosing a program variant, sees a kernel without those
 * tracepoints and falls back to the next variant (e.g. a kprobe). The kernel
 * itself is untouched. Exit 0 when every tracepoint was found exactly once.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct btf_header {
	uint16_t magic;
	uint8_t version;
	uint8_t flags;
	uint32_t hdr_len;
	uint32_t type_off, type_len;
	uint32_t str_off, str_len;
};

int main(int argc, char **argv)
{
	struct btf_header h;
	unsigned char *buf = NULL;
	long size;
	int status = 1;
	FILE *f;

	if (argc < 4) {
		fprintf(stderr, "usage: btf_mask IN OUT TRACEPOINT...\n");
		return 2;
	}
	f = fopen(argv[1], "rb");
	if (!f) {
		perror(argv[1]);
		return 1;
	}
	/* sysfs reports size 0 for small files but the real size for BTF;
	 * read in chunks anyway. */
	for (size = 0;;) {
		unsigned char *n = realloc(buf, (size_t)size + (1 << 20));
		size_t got;

		if (!n) {
			fprintf(stderr, "btf_mask: out of memory\n");
			goto out;
		}
		buf = n;
		got = fread(buf + size, 1, 1 << 20, f);
		size += (long)got;
		if (got == 0)
			break;
	}
	fclose(f);
	f = NULL;
	if ((size_t)size < sizeof(h)) {
		fprintf(stderr, "btf_mask: %s: too small for BTF\n", argv[1]);
		goto out;
	}
	memcpy(&h, buf, sizeof(h));
	if (h.magic != 0xeB9F || (uint64_t)h.hdr_len + h.str_off + h.str_len > (uint64_t)size) {
		fprintf(stderr, "btf_mask: %s: not a little-endian BTF blob\n", argv[1]);
		goto out;
	}
	status = 0;
	for (int i = 3; i < argc; i++) {
		char name[256];
		unsigned char *strs = buf + h.hdr_len + h.str_off, *hit = NULL;
		size_t len = (size_t)snprintf(name, sizeof(name), "btf_trace_%s", argv[i]);
		int hits = 0;

		/* Whole strings only: preceded and followed by NUL. */
		for (uint32_t off = 0; off + len < h.str_len; off++) {
			if ((off == 0 || strs[off - 1] == '\0') && strs[off + len] == '\0' &&
			    memcmp(strs + off, name, len) == 0) {
				hit = strs + off;
				hits++;
			}
		}
		if (hits != 1) {
			fprintf(stderr, "btf_mask: %s found %d times\n", name, hits);
			status = 1;
			continue;
		}
		hit[0] = 'X';
		printf("btf_mask: hid %s\n", name);
	}
	if (status)
		goto out;
	f = fopen(argv[2], "wb");
	if (!f || fwrite(buf, 1, (size_t)size, f) != (size_t)size || fclose(f) != 0) {
		perror(argv[2]);
		f = NULL;
		status = 1;
		goto out;
	}
	f = NULL;
out:
	if (f)
		fclose(f);
	free(buf);
	return status;
}
