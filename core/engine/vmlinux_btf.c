// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "vmlinux_btf.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include <bpf/btf.h>

/*
 * The lock is recursive: a btf__free() made while it is held (a failed
 * parse, the last release) comes back through the interposer to
 * ktel_vmlinux_btf__unlend() on the same thread.
 */
static struct {
	pthread_mutex_t lock;
	struct btf *btf;    /* the shared parse, NULL when unused */
	unsigned int holds; /* ktel_vmlinux_btf__hold() not yet released */
	unsigned int lent;  /* loans to libbpf not yet given back */
	bool lending;
	char *path;         /* NULL: KTEL_VMLINUX_BTF_PATH */
	struct ktel_vmlinux_btf_stats stats;
} shared = { .lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP };

/*
 * Map fd (a sysfs file of size bytes) and let libbpf copy it: the copy is
 * the only one in memory, since the kernel's pages behind the mapping are
 * not the process's (a PFN mapping, not in RSS). Returns 0 with *ret_btf
 * set, -EOPNOTSUPP when the file cannot be mapped (the caller reads it
 * instead), or -errno when libbpf refuses the bytes.
 */
static int parse_mapped(int fd, size_t size, struct btf **ret_btf)
{
	struct statfs sfs;
	struct btf *btf;
	void *data;
	int rc = 0;

	/* Only sysfs: a regular file could shrink under the mapping (SIGBUS). */
	if (fstatfs(fd, &sfs) || sfs.f_type != SYSFS_MAGIC)
		return -EOPNOTSUPP;
	data = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (data == MAP_FAILED)
		return -EOPNOTSUPP; /* before 6.16 sysfs BTF has no mmap */
	btf = btf__new(data, (__u32)size);
	if (!btf)
		rc = errno ? -errno : -EINVAL;
	munmap(data, size);
	if (!rc)
		*ret_btf = btf;
	return rc;
}

/* Why st cannot be a kernel BTF file (size checked before any read), or 0. */
static int check_stat(const struct stat *st, const char *path, struct ktel_err *err)
{
	if (!S_ISREG(st->st_mode))
		return ktel_err_set(err, EINVAL, "%s: cannot read kernel BTF: not a regular file",
				    path);
	if (st->st_size <= 0 || (unsigned long long)st->st_size > KTEL_VMLINUX_BTF_MAX)
		return ktel_err_set(err, st->st_size ? EFBIG : ENODATA,
				    "%s: cannot read kernel BTF: %lld bytes (expected 1 byte to %u MiB)",
				    path, (long long)st->st_size, KTEL_VMLINUX_BTF_MAX >> 20);
	return 0;
}

/* Open path and check it is a file of a plausible size; returns fd or -errno. */
static int open_checked(const char *path, size_t *ret_size, struct ktel_err *err)
{
	struct stat st;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		rc = errno;
		if (fd >= 0)
			close(fd);
		return ktel_err_set(err, rc, "%s: cannot read kernel BTF: %s", path, strerror(rc));
	}
	rc = check_stat(&st, path, err);
	if (rc) {
		close(fd);
		return rc;
	}
	*ret_size = (size_t)st.st_size;
	return fd;
}

struct btf *ktel_vmlinux_btf__parse(const char *path, bool *ret_mapped, struct ktel_err *err)
{
	struct btf *btf = NULL;
	size_t size = 0;
	int fd, rc;

	if (!path)
		path = KTEL_VMLINUX_BTF_PATH;
	fd = open_checked(path, &size, err);
	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	rc = parse_mapped(fd, size, &btf);
	close(fd);
	if (ret_mapped)
		*ret_mapped = !rc;
	if (rc == -EOPNOTSUPP) {
		/* Reads the file whole, then copies it: twice the size at once. */
		btf = btf__parse(path, NULL);
		rc = btf ? 0 : errno ? -errno : -EINVAL;
	}
	if (rc) {
		ktel_err_set(err, -rc, "%s: cannot read kernel BTF: %s", path, strerror(-rc));
		errno = -rc;
		return NULL;
	}
	return btf;
}

/* Free the shared parse once nothing holds or borrows it; lock held. */
static void drop_if_unused(void)
{
	struct btf *btf = shared.btf;

	if (!btf || shared.holds || shared.lent)
		return;
	/* Cleared first: the interposer must see it as any other BTF now. */
	shared.btf = NULL;
	btf__free(btf);
}

const struct btf *ktel_vmlinux_btf__hold(struct ktel_err *err)
{
	const struct btf *ret = NULL;
	bool mapped = false;

	pthread_mutex_lock(&shared.lock);
	if (!shared.btf) {
		shared.btf = ktel_vmlinux_btf__parse(shared.path, &mapped, err);
		if (!shared.btf)
			goto out;
		shared.stats.parses++;
		shared.stats.mapped += mapped;
	}
	shared.holds++;
	ret = shared.btf;
out:
	pthread_mutex_unlock(&shared.lock);
	return ret;
}

void ktel_vmlinux_btf__release(void)
{
	pthread_mutex_lock(&shared.lock);
	if (shared.holds)
		shared.holds--;
	drop_if_unused();
	pthread_mutex_unlock(&shared.lock);
}

const struct btf *ktel_vmlinux_btf__get(void)
{
	const struct btf *btf;

	pthread_mutex_lock(&shared.lock);
	btf = shared.btf;
	pthread_mutex_unlock(&shared.lock);
	return btf;
}

int ktel_vmlinux_btf__set_path(const char *path)
{
	char *copy = NULL;

	if (path && !(copy = strdup(path)))
		return -ENOMEM;
	pthread_mutex_lock(&shared.lock);
	free(shared.path);
	shared.path = copy;
	pthread_mutex_unlock(&shared.lock);
	return 0;
}

void ktel_vmlinux_btf__set_lending(bool on)
{
	pthread_mutex_lock(&shared.lock);
	shared.lending = on;
	pthread_mutex_unlock(&shared.lock);
}

bool ktel_vmlinux_btf__lending(void)
{
	bool on;

	pthread_mutex_lock(&shared.lock);
	on = shared.lending;
	pthread_mutex_unlock(&shared.lock);
	return on;
}

struct btf *ktel_vmlinux_btf__lend(void)
{
	struct btf *btf = NULL;

	pthread_mutex_lock(&shared.lock);
	/* Only while a scan holds it: a loan never makes a parse of its own. */
	if (shared.lending && shared.holds) {
		btf = shared.btf;
		shared.lent++;
		shared.stats.lends++;
	}
	pthread_mutex_unlock(&shared.lock);
	return btf;
}

bool ktel_vmlinux_btf__unlend(const struct btf *btf)
{
	bool mine;

	pthread_mutex_lock(&shared.lock);
	/* A free of the shared parse with no loan out is a bug elsewhere:
	 * ignoring it leaks nothing (the holds still free it) and frees
	 * nothing a holder still reads. */
	mine = btf && btf == shared.btf;
	if (mine && shared.lent) {
		shared.lent--;
		drop_if_unused();
	}
	pthread_mutex_unlock(&shared.lock);
	return mine;
}

void ktel_vmlinux_btf__stats(struct ktel_vmlinux_btf_stats *ret_stats)
{
	pthread_mutex_lock(&shared.lock);
	*ret_stats = shared.stats;
	pthread_mutex_unlock(&shared.lock);
}
