// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "vmlinux_btf.h"

#include <dlfcn.h>
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
 * A plain lock, never held across a call into libbpf that may free a BTF
 * (a failed parse frees its half-built BTF with btf__free(), which in the
 * daemon is the interposer's, which calls ktel_vmlinux_btf__unlend()), and
 * the shared parse is freed with the function the interposer hands over,
 * libbpf's own: nothing here comes back through the interposer.
 */
static struct {
	pthread_mutex_t lock;
	struct btf *btf;           /* the shared parse, NULL when unused */
	unsigned int holds;        /* ktel_vmlinux_btf__hold() not yet released */
	unsigned int lent;         /* loans to libbpf not yet given back */
	ktel_btf_free_fn free_btf; /* libbpf's btf__free() while lending, else NULL */
	char *path;                /* NULL: KTEL_VMLINUX_BTF_PATH */
	struct ktel_vmlinux_btf_stats stats;
} shared = {.lock = PTHREAD_MUTEX_INITIALIZER};

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

/*
 * How to free the shared parse; lock held. While lending, what the
 * interposer handed over; else libbpf's btf__free() all the same, found
 * past the executable (this file is linked into it, as is an interposer if
 * any), so that no call of it reaches an interposer either. NULL only if
 * libbpf is not loaded, which linking against it rules out.
 */
static ktel_btf_free_fn free_fn(void)
{
	static ktel_btf_free_fn libbpf_free;

	if (shared.free_btf)
		return shared.free_btf;
	if (!libbpf_free)
		libbpf_free = (ktel_btf_free_fn)dlsym(RTLD_NEXT, "btf__free");
	return libbpf_free;
}

/*
 * Once nothing holds or borrows the shared parse: forget it and return it
 * for the caller to free with free_fn() after unlocking; else NULL. Lock
 * held.
 */
static struct btf *take_if_unused(void)
{
	struct btf *btf = shared.btf;

	if (!btf || shared.holds || shared.lent)
		return NULL;
	/* Cleared first: from now on it is like any other BTF to the interposer. */
	shared.btf = NULL;
	return btf;
}

/* Free btf (NULL: nothing) with fn, outside the lock. */
static void free_parse(struct btf *btf, ktel_btf_free_fn fn)
{
	if (btf && fn)
		fn(btf);
}

const struct btf *ktel_vmlinux_btf__hold(struct ktel_err *err)
{
	struct btf *btf, *spare = NULL;
	ktel_btf_free_fn fn;
	bool mapped = false;
	char *path = NULL;

	pthread_mutex_lock(&shared.lock);
	if (shared.btf) {
		shared.holds++;
		btf = shared.btf;
		pthread_mutex_unlock(&shared.lock);
		return btf;
	}
	if (shared.path && !(path = strdup(shared.path))) {
		pthread_mutex_unlock(&shared.lock);
		ktel_err_set(err, ENOMEM, "cannot read kernel BTF: out of memory");
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_unlock(&shared.lock);
	/* Unlocked: libbpf may free a half-built BTF, see shared.lock. */
	btf = ktel_vmlinux_btf__parse(path, &mapped, err);
	free(path);
	if (!btf)
		return NULL;
	pthread_mutex_lock(&shared.lock);
	if (shared.btf) {
		/* Another thread's parse came first: share that one. */
		spare = btf;
	} else {
		shared.btf = btf;
		shared.stats.parses++;
		shared.stats.mapped += mapped;
	}
	shared.holds++;
	btf = shared.btf;
	fn = free_fn();
	pthread_mutex_unlock(&shared.lock);
	free_parse(spare, fn);
	return btf;
}

void ktel_vmlinux_btf__release(void)
{
	ktel_btf_free_fn fn;
	struct btf *dead;

	pthread_mutex_lock(&shared.lock);
	if (shared.holds)
		shared.holds--;
	dead = take_if_unused();
	fn = free_fn();
	pthread_mutex_unlock(&shared.lock);
	free_parse(dead, fn);
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

void ktel_vmlinux_btf__set_lending(ktel_btf_free_fn free_btf)
{
	pthread_mutex_lock(&shared.lock);
	shared.free_btf = free_btf;
	pthread_mutex_unlock(&shared.lock);
}

bool ktel_vmlinux_btf__lending(void)
{
	bool on;

	pthread_mutex_lock(&shared.lock);
	on = shared.free_btf;
	pthread_mutex_unlock(&shared.lock);
	return on;
}

struct btf *ktel_vmlinux_btf__lend(void)
{
	struct btf *btf = NULL;

	pthread_mutex_lock(&shared.lock);
	/* Only while a scan holds it: a loan never makes a parse of its own. */
	if (shared.free_btf && shared.holds) {
		btf = shared.btf;
		shared.lent++;
		shared.stats.lends++;
	}
	pthread_mutex_unlock(&shared.lock);
	return btf;
}

bool ktel_vmlinux_btf__unlend(const struct btf *btf)
{
	struct btf *dead = NULL;
	ktel_btf_free_fn fn;
	bool mine;

	pthread_mutex_lock(&shared.lock);
	/* A free of the shared parse with no loan out is a bug elsewhere:
	 * ignoring it leaks nothing (the holds still free it) and frees
	 * nothing a holder still reads. */
	mine = btf && btf == shared.btf;
	if (mine && shared.lent) {
		shared.lent--;
		dead = take_if_unused();
	}
	fn = free_fn();
	pthread_mutex_unlock(&shared.lock);
	free_parse(dead, fn);
	return mine;
}

void ktel_vmlinux_btf__stats(struct ktel_vmlinux_btf_stats *ret_stats)
{
	pthread_mutex_lock(&shared.lock);
	*ret_stats = shared.stats;
	pthread_mutex_unlock(&shared.lock);
}
