// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Cgroups that live less than one pull interval keep their own names,
 * through the real ktelemetryd: block_io_latency attributed by cgroup
 * (K = 20), pulled every 3 s, with attribution_release_after 10 min so
 * that nothing is released by the grace rule. Right after a pull, N_SHORT
 * cgroups are each made, joined by a child that issues i + 1 O_DIRECT
 * reads of 4 KiB on a loop device the test sets up, and removed, all
 * within a fraction of the interval; no walk of cgroupfs can see them.
 * Checked:
 *
 *  - status names the source: "attribution": {"naming": "events"};
 *  - every cgroup comes out under its own name with exactly its reads, and
 *    no read of the loop device is `unknown`;
 *  - their release events release them: status's released_by_event grows
 *    by N_SHORT, the cached names come back to the count before, and the
 *    map holds none of their keys any more;
 *  - self-telemetry says so: ktel_attr_cgroups_released{rule="event"},
 *    ktel_attr_cgroup_events{result="taken"} and ktel_attr_keys_deleted
 *    of block_io_latency grow, and no event is lost.
 *
 * Needs root, a cgroup2 mount, losetup and a kernel with BTF (tp_btf).
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

#include "attr_names.h"
#include "daemon_harness.h"
#include "ktel_test.h"
#include "loop_device.h"

#define BLOCK 4096
#define N_SHORT 8
#define BLOCK_PIN "map_block_io_latency_block_io_latency_map"

static struct sandbox sb;
static pid_t daemon_pid = -1;
static struct ktel_test_loop loop;
static char cg_base[600], cg_rel[128];
static uint64_t ids[N_SHORT];

static int teardown(void **state)
{
	(void)state;
	if (daemon_pid > 0) {
		kill(daemon_pid, SIGKILL);
		waitpid(daemon_pid, NULL, 0);
		daemon_pid = -1;
	}
	ktel_test_loop_detach(&loop);
	if (cg_base[0])
		(void)ktel_test_run("find %s -mindepth 1 -depth -type d -exec rmdir {} + "
				    "2>/dev/null; rmdir %s",
				    cg_base, cg_base);
	cg_base[0] = '\0';
	sandbox_cleanup(&sb);
	return 0;
}

/* In a child: join the cgroup at path, `reads` O_DIRECT reads, exit. */
static void reader(const char *path, int reads)
{
	void *buf;
	int fd = ktel_test_loop_child_open(&loop, path, O_RDONLY, &buf);

	for (int i = 0; i < reads; i++)
		if (pread(fd, buf, BLOCK, (off_t)i * BLOCK) != BLOCK)
			_exit(12);
	_exit(0);
}

/* Cgroup i made, read in i + 1 times, removed; its id kept. */
static void short_lived(int i)
{
	char path[700];
	struct stat st;
	pid_t pid;
	int status;

	snprintf(path, sizeof(path), "%s/s%02d", cg_base, i);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(stat(path, &st), 0);
	ids[i] = st.st_ino;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		reader(path, i + 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(rmdir(path), 0);
}

/*
 * Every block read on the machine is attributed, other tests' cgroups' too
 * (a concurrent churn test makes thousands): a top K and a kernel bound far
 * above them, and no churn budget, so the test's own cgroups are never
 * folded into other.
 */
static void start(void)
{
	FILE *f = fopen(sb.config, "w");

	assert_non_null(f);
	fprintf(f,
		"{\"plugin_dirs\": [\"%s\"], \"pin_root\": \"%s\", \"state_file\": \"%s\",\n"
		" \"control_socket\": \"%s/control.sock\", \"interval\": \"3s\",\n"
		" \"enable_new_plugins\": false, \"attribution_release_after\": \"10m\",\n"
		" \"self_telemetry\": {\"interval\": \"1s\"},\n"
		" \"metrics\": {\"block_io_latency\": {\"enabled\": true, \"attribution\":\n"
		"   {\"by\": \"cgroup\", \"top\": 1000, \"churn_per_hour\": 1000000,\n"
		"    \"max_keys\": 65536}}},\n"
		" \"sinks\": {\"file\": {\"type\": \"json\", \"path\": \"%s\"}}}\n",
		KTEL_PLUGIN_DIR, sb.pin_root, sb.state, sb.dir, sb.out);
	fclose(f);
	daemon_pid = daemon_start(&sb, NULL);
	assert_true(daemon_pid > 0);
	if (!log_wait_for(&sb, "metric block_io_latency: collecting", 30)) {
		dump_log(&sb);
		fail_msg("the daemon did not start collecting block_io_latency");
	}
}

/* status's "attribution" member, as integers by name (-1: absent). */
static int64_t naming_int(const char *name)
{
	json_t *st = sandbox_status(&sb), *a = json_object_get(st, "attribution");
	int64_t v = json_is_integer(json_object_get(a, name))
			    ? (int64_t)json_integer_value(json_object_get(a, name))
			    : -1;

	json_decref(st);
	return v;
}

/* block_io_latency's pulls so far. */
static int64_t pulls_now(void)
{
	json_t *st = sandbox_status(&sb), *m;
	int64_t v = -1;
	size_t i;

	json_array_foreach(json_object_get(st, "metrics"), i, m)
		if (strcmp(json_string_value(json_object_get(m, "name")) ?: "",
			   "block_io_latency") == 0)
			v = (int64_t)json_integer_value(json_object_get(m, "pulls"));
	json_decref(st);
	return v;
}

static char *naming_source(void)
{
	json_t *st = sandbox_status(&sb), *a = json_object_get(st, "attribution");
	char *s = strdup(json_string_value(json_object_get(a, "naming")) ?: "(none)");

	json_decref(st);
	return s;
}

/* What the JSON sink has of the loop device's reads, per cgroup s<i>, the
 * unknown ones, and all. */
struct reads {
	uint64_t per[N_SHORT], unknown, all;
};

static void read_out(struct reads *r)
{
	FILE *f = fopen(sb.out, "r");
	size_t rel_len = strlen(cg_rel), cap = 0;
	char *line = NULL;

	memset(r, 0, sizeof(*r));
	assert_non_null(f);
	while (getline(&line, &cap, f) > 0) {
		json_t *rec = json_loads(line, 0, NULL), *dims;
		const char *name, *op, *dev;
		uint64_t count;

		assert_non_null(rec);
		dims = json_object_get(rec, "dims");
		dev = json_string_value(json_object_get(dims, "device"));
		op = json_string_value(json_object_get(dims, "operation"));
		name = json_string_value(json_object_get(dims, "cgroup"));
		if (strcmp(json_string_value(json_object_get(rec, "metric")) ?: "",
			   "block_io_latency") != 0 ||
		    !dev || strcmp(dev, loop.name) != 0 || !op || strcmp(op, "read") != 0) {
			json_decref(rec);
			continue;
		}
		assert_non_null(name);
		count = (uint64_t)json_integer_value(
			json_object_get(json_object_get(rec, "histogram"), "count"));
		r->all += count;
		if (strcmp(name, "unknown") == 0)
			r->unknown += count;
		if (strncmp(name, cg_rel, rel_len) == 0 && name[rel_len] == '/' &&
		    name[rel_len + 1] == 's') {
			int i = atoi(name + rel_len + 2);

			assert_true(i >= 0 && i < N_SHORT);
			r->per[i] += count;
		}
		json_decref(rec);
	}
	free(line);
	fclose(f);
}

/* Keys of the map whose attribution value is one of the test's cgroups. */
static size_t keys_of_ids(void)
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
		for (int i = 0; i < N_SHORT; i++)
			n += key.attr == ids[i];
	}
	close(fd);
	return n;
}

/* The last total of a self-telemetry counter with dim=label. */
static int64_t self_total(const char *metric, const char *dim, const char *label)
{
	FILE *f = fopen(sb.out, "r");
	char *line = NULL;
	size_t cap = 0;
	int64_t total = -1;

	assert_non_null(f);
	while (getline(&line, &cap, f) > 0) {
		json_t *rec = json_loads(line, 0, NULL);
		json_t *d;

		if (rec &&
		    strcmp(json_string_value(json_object_get(rec, "metric")) ?: "", metric) == 0) {
			d = json_object_get(json_object_get(rec, "dims"), dim);
			if (json_is_string(d) && strcmp(json_string_value(d), label) == 0)
				total = (int64_t)json_integer_value(json_object_get(rec, "total"));
		}
		json_decref(rec);
	}
	free(line);
	fclose(f);
	return total;
}

static void test_shortlived(void **state)
{
	char mount[512], *source;
	int64_t released0, cached0, cached = 0, released = 0;
	int64_t pulls0;
	struct reads r;
	int waited;

	(void)state;
	sandbox_init(&sb, "attr-short");
	ktel_test_loop_attach(&loop, sb.dir, 4);
	assert_int_equal(ktel_attr_cgroup2_mount(NULL, mount, sizeof(mount)), 0);
	snprintf(cg_rel, sizeof(cg_rel), "ktel-short-%d", getpid());
	snprintf(cg_base, sizeof(cg_base), "%s/%s", mount, cg_rel);
	assert_int_equal(mkdir(cg_base, 0755), 0);
	start();
	/* The first pull walked cgroupfs (for the cgroups made before the
	 * events started): the cache's count from then on is the baseline. */
	sleep(4);
	source = naming_source();
	printf("  naming source: %s\n", source);
	assert_string_equal(source, "events");
	free(source);
	released0 = naming_int("released_by_event");
	cached0 = naming_int("cgroups");
	assert_true(released0 >= 0 && cached0 > 0);
	/* Right after a pull (one comes every 3 s: wait for the next), so all
	 * of them live and go within one interval. */
	pulls0 = pulls_now();
	for (waited = 0; waited < 100 && pulls_now() == pulls0; waited++)
		usleep(50000);
	assert_true(pulls_now() > pulls0);
	for (int i = 0; i < N_SHORT; i++)
		short_lived(i);
	/* Two pulls: the one that reads their events, the one that deletes
	 * their keys after every metric pulled past their release. */
	for (waited = 0; waited < 20; waited++) {
		sleep(1);
		released = naming_int("released_by_event") - released0;
		cached = naming_int("cgroups");
		if (released >= N_SHORT && cached <= cached0 && keys_of_ids() == 0)
			break;
	}
	read_out(&r);
	printf("  reads of the loop device: %llu, %llu unknown; released by event: %lld; "
	       "names cached %lld (before %lld) after %d s\n",
	       (unsigned long long)r.all, (unsigned long long)r.unknown, (long long)released,
	       (long long)cached, (long long)cached0, waited + 1);
	for (int i = 0; i < N_SHORT; i++) {
		printf("  %s/s%02d: %llu reads (issued %d)\n", cg_rel, i,
		       (unsigned long long)r.per[i], i + 1);
		assert_int_equal(r.per[i], (uint64_t)(i + 1));
	}
	assert_int_equal(r.unknown, 0);
	assert_true(released >= N_SHORT);
	/* Other cgroups of the machine may come and go meanwhile (a system
	 * service): a little slack, never the test's own. */
	assert_true(cached <= cached0 + 2);
	assert_int_equal(keys_of_ids(), 0);
	/* Self-telemetry (every second) has seen it. */
	sleep(2);
	assert_true(self_total("ktel_attr_cgroups_released", "rule", "event") >= N_SHORT);
	assert_true(self_total("ktel_attr_cgroup_events", "result", "taken") >= 3 * N_SHORT);
	assert_int_equal(self_total("ktel_attr_cgroup_events", "result", "lost"), 0);
	assert_true(self_total("ktel_attr_keys_deleted", "metric", "block_io_latency") >= N_SHORT);
	kill(daemon_pid, SIGTERM);
	assert_int_equal(daemon_wait(daemon_pid, 30), 0);
	daemon_pid = -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_shortlived, teardown),
	};

	if (geteuid() != 0) {
		fprintf(stderr, "SKIP: needs root (BPF, cgroups, loop devices)\n");
		return 77;
	}
	if (ktel_test_run("losetup --version > /dev/null 2>&1") != 0) {
		fprintf(stderr, "FAIL: losetup must run\n");
		return 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
