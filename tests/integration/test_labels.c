// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Label values users join on (device names, operations), end to end: a
 * REAL daemon with
 * block_io_latency, a loop device made here over a file in the sandbox,
 * O_DIRECT writes and reads on it, and then
 *  - the Prometheus exposition (curl) has series with device="loopN" next
 *    to major/minor and operation="read" / "write",
 *  - the JSON sink has the same in dims, while dims_raw keeps the raw
 *    numbers only (no "device"),
 *  - ktelemetryctl show prints device=loopN, operation=read,
 * with the counts equal to the kernel's: tracefs block_rq_complete lines
 * for that device (tracefs_oracle.h). Needs root, losetup and curl.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon_harness.h"
#include "ktel_test.h"
#include "tracefs_oracle.h"

#define CTL_BIN KTEL_BINARY_DIR "/tools/ktelemetryctl"
#define IO_SIZE 4096
#define N_WRITES 200
#define N_READS 300

struct loopdev {
	char path[64]; /* /dev/loopN */
	char name[32]; /* loopN */
	unsigned major, minor;
};

/* The device attached, detached by the group teardown even after a failure. */
static struct loopdev attached;

static void detach(void)
{
	if (attached.path[0])
		ktel_test_run("losetup -d '%s'", attached.path);
	attached.path[0] = '\0';
}

static int loop_detach(void **state)
{
	detach();
	return sandbox_remove_all(state);
}

/* A loop device over an 8 MiB file in the sandbox. */
static void loop_attach(const struct sandbox *sb, struct loopdev *ld)
{
	char cmd[800];
	struct stat st;
	FILE *p;

	assert_int_equal(ktel_test_run("truncate -s 8M '%s/disk.img'", sb->dir), 0);
	snprintf(cmd, sizeof(cmd), "losetup --find --show '%s/disk.img'", sb->dir);
	p = popen(cmd, "r");
	assert_non_null(p);
	if (!fgets(ld->path, sizeof(ld->path), p))
		ld->path[0] = '\0';
	assert_int_equal(pclose(p), 0);
	ld->path[strcspn(ld->path, "\n")] = '\0';
	attached = *ld;
	assert_int_equal(stat(ld->path, &st), 0);
	ld->major = major(st.st_rdev);
	ld->minor = minor(st.st_rdev);
	snprintf(ld->name, sizeof(ld->name), "%s", strrchr(ld->path, '/') + 1);
	/* udev's probe of the new device reads it: let that happen now. */
	(void)!system("udevadm settle -t 10 >/dev/null 2>&1");
	printf("loop device %s (%u:%u)\n", ld->path, ld->major, ld->minor);
}

/* n O_DIRECT requests of IO_SIZE at distinct offsets: writes or reads. */
static void direct_io(const struct loopdev *ld, bool write, int n)
{
	void *buf = NULL;
	int fd = open(ld->path, (write ? O_WRONLY : O_RDONLY) | O_DIRECT | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(posix_memalign(&buf, IO_SIZE, IO_SIZE), 0);
	memset(buf, 0x5a, IO_SIZE);
	for (int i = 0; i < n; i++) {
		off_t off = (off_t)i * IO_SIZE;
		ssize_t r = write ? pwrite(fd, buf, IO_SIZE, off) : pread(fd, buf, IO_SIZE, off);

		assert_int_equal(r, IO_SIZE);
	}
	free(buf);
	close(fd);
}

/*
 * Completions tracefs saw on major:minor, by the operation block_io_latency
 * folds them into: rwbs "R..." reads, "W..." writes; a leading 'F' is a
 * preflush, not the operation ("FWS" is a write).
 */
static void tracefs_count(struct tracefs_counter *tc, const struct loopdev *ld, uint64_t *ret_reads,
			  uint64_t *ret_writes)
{
	char path[512], *line = NULL, want[32];
	size_t cap = 0;
	FILE *f;

	*ret_reads = *ret_writes = 0;
	snprintf(path, sizeof(path), "%s/tracing_on", tc->dir);
	tracefs_write_file(path, "0");
	snprintf(path, sizeof(path), "%s/trace", tc->dir);
	snprintf(want, sizeof(want), "block_rq_complete: %u,%u ", ld->major, ld->minor);
	f = fopen(path, "r");
	assert_non_null(f);
	while (getline(&line, &cap, f) > 0) {
		const char *p = line[0] == '#' ? NULL : strstr(line, want);
		char op;

		if (!p)
			continue;
		p += strlen(want);
		op = p[0] == 'F' && (p[1] == 'R' || p[1] == 'W') ? p[1] : p[0];
		*ret_reads += op == 'R';
		*ret_writes += op == 'W';
	}
	free(line);
	fclose(f);
	rmdir(tc->dir);
}

static void write_config(const struct sandbox *sb)
{
	FILE *f = fopen(sb->config, "w");

	assert_non_null(f);
	fprintf(f,
		"{\"plugin_dirs\": [\"%s\"], \"pin_root\": \"%s\", \"state_file\": \"%s\",\n"
		" \"control_socket\": \"%s/control.sock\", \"interval\": \"1s\",\n"
		" \"sinks\": {\"file\": {\"type\": \"json\", \"path\": \"%s\"},\n"
		"  \"prom\": {\"type\": \"prometheus\", \"listen\": \"127.0.0.1\", \"port\": 0}}}\n",
		KTEL_PLUGIN_DIR, sb->pin_root, sb->state, sb->dir, sb->out);
	fclose(f);
}

/*
 * The value of the histogram's _count series whose labels are exactly
 * major, minor, operation and device of ld; -1 when there is none.
 */
static long long prom_count(const char *text, const struct loopdev *ld, const char *op)
{
	char want[256];
	const char *p;

	snprintf(want, sizeof(want),
		 "ktel_block_io_latency_seconds_count{major=\"%u\",minor=\"%u\","
		 "operation=\"%s\",device=\"%s\"} ",
		 ld->major, ld->minor, op, ld->name);
	p = strstr(text, want);
	return p ? strtoll(p + strlen(want), NULL, 10) : -1;
}

struct json_tally {
	const struct loopdev *ld;
	uint64_t reads, writes;
	size_t records, labelled, raw_device;
};

/* Sum the JSON deltas of ld's records by operation label; check dims_raw. */
static void json_count(const struct sandbox *sb, struct json_tally *t)
{
	FILE *f = fopen(sb->out, "r");
	char *line = NULL;
	size_t cap = 0;

	assert_non_null(f);
	while (getline(&line, &cap, f) > 0) {
		json_t *rec = json_loads(line, 0, NULL), *dims, *raw, *c;
		const char *op, *dev;
		uint64_t n = 0;
		size_t i;

		assert_non_null(rec);
		dims = json_object_get(rec, "dims");
		raw = json_object_get(rec, "dims_raw");
		if (strcmp(json_string_value(json_object_get(rec, "metric")) ?: "",
			   "block_io_latency") != 0 ||
		    json_integer_value(json_object_get(raw, "major")) != t->ld->major ||
		    json_integer_value(json_object_get(raw, "minor")) != t->ld->minor) {
			json_decref(rec);
			continue;
		}
		t->records++;
		op = json_string_value(json_object_get(dims, "operation"));
		dev = json_string_value(json_object_get(dims, "device"));
		t->labelled += dev && strcmp(dev, t->ld->name) == 0;
		t->raw_device += json_object_get(raw, "device") != NULL;
		/* dims_raw: the integers, as before labels were shortened. */
		assert_true(json_is_integer(json_object_get(raw, "operation")));
		json_array_foreach(json_object_get(json_object_get(rec, "histogram"), "counts"), i,
				   c)
			n += (uint64_t)json_integer_value(c);
		if (op && strcmp(op, "read") == 0)
			t->reads += n;
		else if (op && strcmp(op, "write") == 0)
			t->writes += n;
		json_decref(rec);
	}
	free(line);
	fclose(f);
}

static void test_device_and_operation_labels(void **state)
{
	struct tracefs_counter tc;
	struct json_tally t = {0};
	struct loopdev ld;
	struct sandbox sb;
	uint64_t k_reads, k_writes;
	long long p_reads, p_writes;
	char *text, out[800];
	unsigned port;
	pid_t pid;

	(void)state;
	sandbox_init(&sb, "labels");
	loop_attach(&sb, &ld);
	write_config(&sb);
	pid = daemon_start(&sb, NULL);
	port = daemon_prom_port(&sb);
	if (!log_wait_for(&sb, "metric block_io_latency: collecting", 30)) {
		dump_log(&sb);
		fail_msg("block_io_latency not collecting");
	}
	assert_int_equal(tracefs_start(&tc, "block/block_rq_complete"), 0);
	direct_io(&ld, true, N_WRITES);
	direct_io(&ld, false, N_READS);
	tracefs_count(&tc, &ld, &k_reads, &k_writes);
	/* Scrape until a pull has taken in every completion the kernel saw: a
	 * fixed wait for "two pulls" was too short on a loaded machine, where
	 * a 1 s pull timer runs late. What counts is the scrape's agreement
	 * with the kernel, checked below, not how soon it comes. */
	for (int tries = 0; tries < 60; tries++) {
		long long r, w;

		assert_int_equal(ktel_test_run("curl -sS -f --max-time 10 -o '%s/scrape.txt' "
					       "http://127.0.0.1:%u/metrics",
					       sb.dir, port),
				 0);
		snprintf(out, sizeof(out), "%s/scrape.txt", sb.dir);
		text = ktel_test_slurp(out);
		r = prom_count(text, &ld, "read");
		w = prom_count(text, &ld, "write");
		free(text);
		if (r == (long long)k_reads && w == (long long)k_writes)
			break;
		usleep(500 * 1000);
	}
	snprintf(out, sizeof(out), "%s/show.txt", sb.dir);
	assert_int_equal(ktel_test_run("'%s' --socket '%s/control.sock' show block_io_latency "
				       "> '%s' 2>&1",
				       CTL_BIN, sb.dir, out),
			 0);
	kill(pid, SIGTERM);
	assert_int_equal(daemon_wait(pid, 30), 0);
	detach();

	snprintf(out, sizeof(out), "%s/scrape.txt", sb.dir);
	text = ktel_test_slurp(out);
	p_reads = prom_count(text, &ld, "read");
	p_writes = prom_count(text, &ld, "write");
	t.ld = &ld;
	json_count(&sb, &t);
	printf("%s: kernel %" PRIu64 " reads %" PRIu64 " writes; prometheus %lld / %lld; "
	       "json %" PRIu64 " / %" PRIu64 " in %zu records\n",
	       ld.name, k_reads, k_writes, p_reads, p_writes, t.reads, t.writes, t.records);
	if (p_reads < 0 || p_writes < 0) {
		char *grep = strstr(text, "ktel_block_io_latency_seconds_count");

		fail_msg("no series with device=\"%s\" and operation=\"read\"/\"write\"; first "
			 "block_io_latency count line: %.300s",
			 ld.name, grep ? grep : "(none)");
	}
	/* Every request we issued, and as many as the kernel completed. */
	assert_true(k_reads >= N_READS && k_writes >= N_WRITES);
	assert_int_equal(p_reads, k_reads);
	assert_int_equal(p_writes, k_writes);
	assert_int_equal(t.reads, k_reads);
	assert_int_equal(t.writes, k_writes);
	/* Every record of the device is named; dims_raw never carries it. */
	assert_true(t.records >= 2);
	assert_int_equal(t.labelled, t.records);
	assert_int_equal(t.raw_device, 0);
	/* No enumerator spelling is left in the exposition. */
	assert_null(strstr(text, "BLOCK_OP_"));
	free(text);

	snprintf(out, sizeof(out), "%s/show.txt", sb.dir);
	text = ktel_test_slurp(out);
	{
		char want[128];

		snprintf(want, sizeof(want), "operation=read, device=%s]", ld.name);
		if (!strstr(text, want))
			fail_msg("ktelemetryctl show lacks \"%s\":\n%s", want, text);
	}
	free(text);
	sandbox_cleanup(&sb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_device_and_operation_labels),
	};

	ktel_test_require_root("test_labels");
	if (ktel_test_run("command -v losetup curl >/dev/null") != 0) {
		printf("FAIL: losetup and curl are needed (util-linux, curl)\n");
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, loop_detach);
}
