// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Ageing of user and process attribution ids through the real ktelemetryd,
 * block_io_latency pulled every second with attribution_release_after 3 s,
 * O_DIRECT reads on a loop device the test sets up:
 *
 *  - by process: three children read (i + 1 reads each) and exit; a fourth
 *    reads and stays alive, quiet. Each is counted exactly under its tgid;
 *    the exited ones' keys leave the map (their tgid no longer exists) and
 *    ktel_attr_keys_deleted counts them; the live one's key stays.
 *  - by user: children under three uids read and exit; a fourth uid keeps
 *    reading. After the grace period the quiet uids' keys leave the map,
 *    the busy one's stay.
 *
 * Needs root and losetup.
 */
#include <errno.h>
#include <fcntl.h>
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

#include <bpf/bpf.h>
#include <jansson.h>

#include "daemon_harness.h"
#include "ktel_test.h"
#include "loop_device.h"

#define BLOCK 4096
#define N_GONE 3
#define BLOCK_PIN "map_block_io_latency_block_io_latency_map"
#define UID0 61001

static struct sandbox sb;
static pid_t daemon_pid = -1, keeper = -1;
static struct ktel_test_loop loop;

static int teardown(void **state)
{
	(void)state;
	if (keeper > 0) {
		kill(keeper, SIGKILL);
		waitpid(keeper, NULL, 0);
		keeper = -1;
	}
	if (daemon_pid > 0) {
		kill(daemon_pid, SIGKILL);
		waitpid(daemon_pid, NULL, 0);
		daemon_pid = -1;
	}
	ktel_test_loop_detach(&loop);
	sandbox_cleanup(&sb);
	return 0;
}

static void setup(const char *name, const char *by)
{
	FILE *f;

	sandbox_init(&sb, name);
	ktel_test_loop_attach(&loop, sb.dir, 4);
	/* The test's own device: the children under other uids read it too. */
	assert_int_equal(chmod(loop.dev, 0666), 0);
	f = fopen(sb.config, "w");
	assert_non_null(f);
	fprintf(f,
		"{\"plugin_dirs\": [\"%s\"], \"pin_root\": \"%s\", \"state_file\": \"%s\",\n"
		" \"control_socket\": \"%s/control.sock\", \"interval\": \"1s\",\n"
		" \"enable_new_plugins\": false, \"attribution_release_after\": \"3s\",\n"
		" \"self_telemetry\": {\"interval\": \"1s\"},\n"
		" \"metrics\": {\"block_io_latency\": {\"enabled\": true, \"attribution\":\n"
		"   {\"by\": \"%s\", \"top\": 20, \"max_keys\": 1024}}},\n"
		" \"sinks\": {\"file\": {\"type\": \"json\", \"path\": \"%s\"}}}\n",
		KTEL_PLUGIN_DIR, sb.pin_root, sb.state, sb.dir, by, sb.out);
	fclose(f);
	daemon_pid = daemon_start(&sb, NULL);
	assert_true(daemon_pid > 0);
	if (!log_wait_for(&sb, "metric block_io_latency: collecting", 30)) {
		dump_log(&sb);
		fail_msg("the daemon did not start collecting block_io_latency");
	}
}

/* `reads` O_DIRECT reads of the loop device (in a child: exits on error). */
static void do_reads(int reads)
{
	void *buf;
	int fd = open(loop.dev, O_RDONLY | O_DIRECT);

	if (fd < 0 || posix_memalign(&buf, BLOCK, BLOCK))
		_exit(11);
	for (int i = 0; i < reads; i++)
		if (pread(fd, buf, BLOCK, (off_t)i * BLOCK) != BLOCK)
			_exit(12);
	close(fd);
	free(buf);
}

/* A child (under uid, unless 0) that reads and exits, or, with stay, then
 * waits for its end (reading every 300 ms when busy). */
static pid_t child(uid_t uid, int reads, bool stay, bool busy)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid)
		return pid;
	if (uid && setresuid(uid, uid, uid))
		_exit(13);
	do_reads(reads);
	while (stay) {
		usleep(300000);
		if (busy)
			do_reads(1);
	}
	_exit(0);
}

static void reap(pid_t pid)
{
	int status;

	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* The loop device's keys in the map whose attribution value's top half
 * (by process: the tgid) or whole value (by user: the uid) is want. */
static size_t keys_of(uint64_t want, bool top_half)
{
	char path[600];
	struct {
		uint32_t major, minor, op, pad;
		uint64_t attr;
	} key, next;
	void *prev = NULL;
	size_t n = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", sb.pin_root, BLOCK_PIN);
	fd = bpf_obj_get(path);
	assert_true(fd >= 0);
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (key.major == loop.major && key.minor == loop.minor &&
		    (top_half ? key.attr >> 32 : key.attr) == want)
			n++;
	}
	close(fd);
	return n;
}

/* Reads of the loop device the JSON sink has under the attribution value
 * named name (dimension dim). */
static uint64_t reads_of(const char *dim, const char *name)
{
	FILE *f = fopen(sb.out, "r");
	char *line = NULL;
	size_t cap = 0;
	uint64_t n = 0;

	assert_non_null(f);
	while (getline(&line, &cap, f) > 0) {
		json_t *rec = json_loads(line, 0, NULL), *dims = json_object_get(rec, "dims");
		const char *dev = json_string_value(json_object_get(dims, "device"));
		const char *op = json_string_value(json_object_get(dims, "operation"));
		const char *v = json_string_value(json_object_get(dims, dim));

		if (dev && strcmp(dev, loop.name) == 0 && op && strcmp(op, "read") == 0 && v &&
		    strcmp(v, name) == 0)
			n += (uint64_t)json_integer_value(
				json_object_get(json_object_get(rec, "histogram"), "count"));
		json_decref(rec);
	}
	free(line);
	fclose(f);
	return n;
}

/* The last total of self-telemetry's ktel_attr_keys_deleted of the metric. */
static int64_t keys_deleted(void)
{
	FILE *f = fopen(sb.out, "r");
	char *line = NULL;
	size_t cap = 0;
	int64_t total = -1;

	assert_non_null(f);
	while (getline(&line, &cap, f) > 0) {
		json_t *rec = json_loads(line, 0, NULL);
		const char *m = json_string_value(json_object_get(rec, "metric"));
		const char *d = json_string_value(
			json_object_get(json_object_get(rec, "dims"), "metric"));

		if (m && strcmp(m, "ktel_attr_keys_deleted") == 0 && d &&
		    strcmp(d, "block_io_latency") == 0)
			total = (int64_t)json_integer_value(json_object_get(rec, "total"));
		json_decref(rec);
	}
	free(line);
	fclose(f);
	return total;
}

static void test_process_ageing(void **state)
{
	pid_t gone[N_GONE];
	char name[32];
	size_t left = 0;
	int waited;

	(void)state;
	setup("attr-age-proc", "process");
	keeper = child(0, 2, true, false);
	for (int i = 0; i < N_GONE; i++) {
		gone[i] = child(0, i + 1, false, false);
		reap(gone[i]);
	}
	/* A pull or two names them; then the sweep (every 0.75 s) finds them
	 * gone and the next pull deletes their keys. */
	sleep(3);
	for (waited = 0; waited < 20; waited++) {
		left = 0;
		for (int i = 0; i < N_GONE; i++)
			left += keys_of((uint64_t)gone[i], true);
		if (!left)
			break;
		sleep(1);
	}
	sleep(2); /* self-telemetry's next round */
	printf("  exited processes' keys left: %zu after %d s; the live one's: %zu; "
	       "keys deleted: %lld\n",
	       left, waited + 3, keys_of((uint64_t)keeper, true), (long long)keys_deleted());
	for (int i = 0; i < N_GONE; i++) {
		snprintf(name, sizeof(name), "%d", gone[i]);
		printf("  process %s: %llu reads (issued %d)\n", name,
		       (unsigned long long)reads_of("process", name), i + 1);
		assert_int_equal(reads_of("process", name), (uint64_t)(i + 1));
	}
	snprintf(name, sizeof(name), "%d", keeper);
	assert_int_equal(reads_of("process", name), 2);
	assert_int_equal(left, 0);
	assert_true(keys_of((uint64_t)keeper, true) >= 1);
	assert_true(keys_deleted() >= N_GONE);
	kill(daemon_pid, SIGTERM);
	assert_int_equal(daemon_wait(daemon_pid, 30), 0);
	daemon_pid = -1;
}

static void test_user_ageing(void **state)
{
	char name[32];
	size_t left = 0;
	int waited;

	(void)state;
	setup("attr-age-user", "user");
	keeper = child(UID0 + N_GONE, 1, true, true);
	for (int i = 0; i < N_GONE; i++)
		reap(child(UID0 + i, i + 1, false, false));
	/* Quiet for 3 s, then a sweep (every 0.75 s) and a pull. */
	for (waited = 0; waited < 20; waited++) {
		sleep(1);
		left = 0;
		for (int i = 0; i < N_GONE; i++)
			left += keys_of(UID0 + i, false);
		if (!left && waited >= 3)
			break;
	}
	printf("  quiet users' keys left: %zu after %d s; the busy user's: %zu\n", left, waited + 1,
	       keys_of(UID0 + N_GONE, false));
	for (int i = 0; i < N_GONE; i++) {
		snprintf(name, sizeof(name), "%d", UID0 + i);
		assert_int_equal(reads_of("user", name), (uint64_t)(i + 1));
	}
	assert_int_equal(left, 0);
	assert_true(keys_of(UID0 + N_GONE, false) >= 1);
	kill(daemon_pid, SIGTERM);
	assert_int_equal(daemon_wait(daemon_pid, 30), 0);
	daemon_pid = -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_process_ageing, teardown),
		cmocka_unit_test_teardown(test_user_ageing, teardown),
	};

	if (geteuid() != 0) {
		fprintf(stderr, "SKIP: needs root (BPF, loop devices, setresuid)\n");
		return 77;
	}
	if (ktel_test_run("losetup --version > /dev/null 2>&1") != 0) {
		fprintf(stderr, "FAIL: losetup must run\n");
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
