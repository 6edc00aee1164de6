/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Block device names for the "device" dimension (KTEL_DIM_DEV_*): major and
 * minor -> the kernel's name of the device ("nvme0n1", "loop0", "sda1"), the
 * name /proc/diskstats and node_exporter's `device` label use.
 *
 * The name is DEVNAME= of <sysfs_root>/dev/block/MAJ:MIN/uevent. The file's
 * content is not trusted: at most KTEL_BLOCKDEV_UEVENT_MAX bytes (a longer
 * file is refused, so no line is cut), a regular file opened without
 * following a final symlink and without blocking, and the name 1..31 bytes
 * (DISK_NAME_LEN) of [A-Za-z0-9._+-] or '/', written '!' as the kernel does
 * in /proc/diskstats ("cciss/c0d0" -> "cciss!c0d0"). MAJOR= and MINOR=, when
 * present, must be the numbers asked for. Anything else: no name.
 *
 * Devices come and go, and minors of dynamic majors (259: nvme partitions,
 * dm) are reused: a name is read again from sysfs once older than
 * KTEL_BLOCKDEV_TTL_NS, a device that did not resolve at every new time
 * (pull) it is asked for. Within one time an entry is never re-read. The cache holds at most cap devices; a
 * full cache replaces the least recently used entry not used at the current
 * time (so names handed out for one pull stay valid for that pull) and,
 * when every entry was used at this time, answers NULL and counts it.
 */
#ifndef KTEL_BLOCKDEV_H
#define KTEL_BLOCKDEV_H

#include <stddef.h>
#include <stdint.h>

#define KTEL_BLOCKDEV_NAME_MAX 32 /* DISK_NAME_LEN, with the NUL */
#define KTEL_BLOCKDEV_UEVENT_MAX 4096
#define KTEL_BLOCKDEV_TTL_NS (30ull * 1000000000ull)
#define KTEL_BLOCKDEV_CACHE_DEFAULT 64

/*
 * Parse a uevent file's text (len bytes, not NUL-terminated) for the device
 * major:minor into ret_name (KTEL_BLOCKDEV_NAME_MAX bytes). 0, or -EINVAL
 * (no valid DEVNAME, two of them, a NUL byte, or MAJOR/MINOR that differ).
 */
int ktel_blockdev_parse_uevent(const char *text, size_t len, uint32_t major, uint32_t minor,
			       char *ret_name);

/* Name of major:minor read from sysfs_root now: 0 or -errno. */
int ktel_blockdev_read(const char *sysfs_root, uint32_t major, uint32_t minor, char *ret_name);

struct ktel_blockdev_stats {
	uint64_t reads;      /* uevent files read */
	uint64_t unresolved; /* reads that gave no name */
	uint64_t full;       /* lookups answered NULL: every entry in use */
};

struct ktel_blockdev_cache;

/* sysfs_root: "/sys", or a test directory laid out like it. NULL + errno. */
struct ktel_blockdev_cache *ktel_blockdev_cache__new(const char *sysfs_root, uint32_t cap);
void ktel_blockdev_cache__free(struct ktel_blockdev_cache *c);

/*
 * Name of major:minor at time now_ns (CLOCK_BOOTTIME; one value for all the
 * lookups of one pull), or NULL when it does not resolve. The string lives
 * in the cache until a lookup at a later time replaces the entry.
 */
const char *ktel_blockdev_cache__name(struct ktel_blockdev_cache *c, uint32_t major, uint32_t minor,
				      uint64_t now_ns);

const struct ktel_blockdev_stats *ktel_blockdev_cache__stats(const struct ktel_blockdev_cache *c);

#endif /* KTEL_BLOCKDEV_H */
