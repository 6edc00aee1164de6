// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * dmabuf_export - export dma-bufs through a DRM driver (vgem in the lab guest).
 *
 *   dmabuf_export [--driver NAME] SIZE...
 *
 * For each SIZE (bytes, a multiple of 4096): create a dumb buffer of exactly
 * that size on the first /dev/dri/card* whose driver is NAME (default vgem),
 * export it as a dma-buf (DRM_IOCTL_PRIME_HANDLE_TO_FD), and print one line
 *
 *   dmabuf size=<bytes> exp_name=<name>
 *
 * taken from the dma-buf's own /proc/self/fdinfo entry, so the checks compare
 * the telemetry against what the kernel says it exported, not against what
 * was asked for. Exit status 0 when every export worked, 1 otherwise.
 *
 * Built with gcc -static on the host; the guest has no libdrm, so the few
 * UAPI structures (stable since Linux 3.x) are declared here.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

struct drm_version {
	int version_major, version_minor, version_patchlevel;
	size_t name_len;
	char *name;
	size_t date_len;
	char *date;
	size_t desc_len;
	char *desc;
};

struct drm_mode_create_dumb {
	uint32_t height, width, bpp, flags;
	uint32_t handle, pitch;
	uint64_t size;
};

struct drm_mode_destroy_dumb {
	uint32_t handle;
};

struct drm_prime_handle {
	uint32_t handle;
	uint32_t flags;
	int32_t fd;
};

#define DRM_IOCTL_VERSION _IOWR('d', 0x00, struct drm_version)
#define DRM_IOCTL_PRIME_HANDLE_TO_FD _IOWR('d', 0x2d, struct drm_prime_handle)
#define DRM_IOCTL_MODE_CREATE_DUMB _IOWR('d', 0xB2, struct drm_mode_create_dumb)
#define DRM_IOCTL_MODE_DESTROY_DUMB _IOWR('d', 0xB4, struct drm_mode_destroy_dumb)

static int open_card(const char *driver)
{
	for (int i = 0; i < 16; i++) {
		char path[32], name[64] = "";
		struct drm_version v = {.name = name, .name_len = sizeof(name) - 1};
		int fd;

		snprintf(path, sizeof(path), "/dev/dri/card%d", i);
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (ioctl(fd, DRM_IOCTL_VERSION, &v) == 0 && strcmp(name, driver) == 0)
			return fd;
		close(fd);
	}
	return -1;
}

/* "key:\tvalue" from the dma-buf's fdinfo into out. */
static int fdinfo_field(int fd, const char *key, char *out, size_t len)
{
	char path[64], line[256];
	size_t klen = strlen(key);
	int r = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			char *v = line + klen + 1;

			v += strspn(v, " \t");
			v[strcspn(v, "\n")] = '\0';
			snprintf(out, len, "%s", v);
			r = 0;
			break;
		}
	}
	fclose(f);
	return r;
}

static int export_one(int card, unsigned long long size)
{
	/* 32 bpp, one 4 KiB row per line: size = 4096 * height exactly. */
	struct drm_mode_create_dumb c = {.width = 1024, .bpp = 32, .height = size / 4096};
	struct drm_mode_destroy_dumb d = {0};
	struct drm_prime_handle p = {.flags = O_RDWR | O_CLOEXEC, .fd = -1};
	char got_size[32] = "?", exp_name[64] = "?";
	int r = 1;

	if (size == 0 || size % 4096) {
		fprintf(stderr, "dmabuf_export: size %llu is not a positive multiple of 4096\n",
			size);
		return 1;
	}
	if (ioctl(card, DRM_IOCTL_MODE_CREATE_DUMB, &c) < 0) {
		fprintf(stderr, "dmabuf_export: CREATE_DUMB %llu: %s\n", size, strerror(errno));
		return 1;
	}
	p.handle = d.handle = c.handle;
	if (ioctl(card, DRM_IOCTL_PRIME_HANDLE_TO_FD, &p) < 0) {
		fprintf(stderr, "dmabuf_export: PRIME_HANDLE_TO_FD %llu: %s\n", size,
			strerror(errno));
		goto destroy;
	}
	if (fdinfo_field(p.fd, "size", got_size, sizeof(got_size)) ||
	    fdinfo_field(p.fd, "exp_name", exp_name, sizeof(exp_name)))
		fprintf(stderr, "dmabuf_export: fd %d: no size/exp_name in fdinfo\n", p.fd);
	else
		r = 0;
	printf("dmabuf size=%s exp_name=%s\n", got_size, exp_name);
	close(p.fd);
destroy:
	ioctl(card, DRM_IOCTL_MODE_DESTROY_DUMB, &d);
	return r;
}

int main(int argc, char **argv)
{
	const char *driver = "vgem";
	int i = 1, card, status = 0;

	if (argc > 2 && strcmp(argv[1], "--driver") == 0) {
		driver = argv[2];
		i = 3;
	}
	if (i >= argc) {
		fprintf(stderr, "usage: dmabuf_export [--driver NAME] SIZE...\n");
		return 2;
	}
	card = open_card(driver);
	if (card < 0) {
		fprintf(stderr, "dmabuf_export: no /dev/dri/card* with driver %s\n", driver);
		return 1;
	}
	for (; i < argc; i++)
		status |= export_one(card, strtoull(argv[i], NULL, 0));
	close(card);
	fflush(stdout);
	return status;
}
