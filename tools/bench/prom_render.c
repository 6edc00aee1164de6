// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ktel-bench-prom-render: what a small batch costs the daemon's loop when a
 * Prometheus sink already holds many series, and what one scrape costs.
 *
 * Method. A prometheus sink on 127.0.0.1 (port 0, max_series 1,000,000) is
 * filled with N histogram series of one metric ("lat", unit us, 32 log2
 * buckets, sum present, one dim "k" = 0..N-1), the shape a per-key latency
 * map gives. Then, ROUNDS times: one batch of one record (a new delta for
 * series 0) is submitted and the loop is run until it has nothing left to
 * do; the time from submit() to the end of that loop run is the loop cost of
 * the batch (everything the sink does on the loop thread because records
 * arrived). After that one scrape: a GET /metrics over TCP, timed from
 * connect to the last byte, and the body's size. Figures: the median and
 * the worst loop cost, the scrape time. For N = 1,000, 10,000 and 100,000
 * (or the Ns given on the command line).
 *
 * Usage: ktel-bench-prom-render [N...]
 * Needs no privilege. Prints figures; never passes or fails on them.
 */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <uv.h>

#include "prometheus/prometheus_sink.h"

#define ROUNDS 9

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void record_for(struct ktel_record *r, int64_t key)
{
	memset(r, 0, sizeof(*r));
	r->type = KTEL_RECORD_HISTOGRAM;
	r->metric = "lat";
	r->unit = "us";
	r->boot_id = "bench";
	r->n_dims = 1;
	r->dims[0].name = "k";
	r->dims[0].value = key;
	r->hist.delta.scheme = KTEL_HIST_LOG2;
	r->hist.delta.n_buckets = KTEL_HIST_BUCKETS;
	for (uint32_t b = 0; b < KTEL_HIST_BUCKETS; b++)
		r->hist.delta.counts[b] = (uint64_t)(key + b) % 5;
	r->hist.delta.has_sum = true;
	r->hist.delta.sum = (uint64_t)key * 7 + 3;
	r->hist.total = r->hist.delta;
}

/* GET /metrics; returns the body size, or -1. */
static long scrape(unsigned port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
	static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
	static char buf[1 << 16];
	long total = 0, head = -1;
	ssize_t n;
	int fd;

	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    write(fd, req, sizeof(req) - 1) != (ssize_t)sizeof(req) - 1) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		if (head < 0) {
			char *sep = memmem(buf, (size_t)n, "\r\n\r\n", 4);

			if (sep)
				head = total + (sep + 4 - buf);
		}
		total += n;
	}
	close(fd);
	return head < 0 ? -1 : total - head;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void on_closed(void *ctx)
{
	*(int *)ctx = 1;
}

static int bench(long n_series)
{
	const struct ktel_sink_ops *ops = &ktel_prometheus_sink_ops;
	json_t *opts = json_pack("{s:s, s:i, s:i}", "type", "prometheus", "port", 0, "max_series",
				 1000000);
	struct ktel_err err = {0};
	uint64_t cost[ROUNDS], t0, t_scrape;
	struct ktel_record *batch;
	struct ktel_sink_stats st;
	void *priv = NULL;
	uv_loop_t loop;
	int closed = 0;
	long body;

	batch = calloc(1024, sizeof(*batch));
	if (!opts || !batch)
		return -1;
	uv_loop_init(&loop);
	if (ops->create(&loop, "bench", opts, &priv, &err)) {
		fprintf(stderr, "prometheus sink: %s\n", err.msg);
		return -1;
	}
	json_decref(opts);
	/* Fill in batches of 1024, the loop run once at the end only, so the
	 * fill itself is not what is measured. */
	for (long k = 0; k < n_series; k += 1024) {
		size_t m = (size_t)(n_series - k < 1024 ? n_series - k : 1024);

		for (size_t i = 0; i < m; i++)
			record_for(&batch[i], k + (long)i);
		ops->submit(priv, batch, m);
	}
	uv_run(&loop, UV_RUN_NOWAIT);
	for (int i = 0; i < ROUNDS; i++) {
		record_for(&batch[0], 0);
		t0 = now_ns();
		ops->submit(priv, batch, 1);
		while (uv_run(&loop, UV_RUN_NOWAIT))
			;
		cost[i] = now_ns() - t0;
	}
	t0 = now_ns();
	body = scrape(ktel_prometheus_sink__port(priv));
	t_scrape = now_ns() - t0;
	ops->stats(priv, &st);
	qsort(cost, ROUNDS, sizeof(cost[0]), cmp_u64);
	printf("%8ld series: loop per 1-record batch median %12.1f us, worst %12.1f us; "
	       "scrape %9.1f ms, %ld bytes (records applied %" PRIu64 ")\n",
	       n_series, cost[ROUNDS / 2] / 1e3, cost[ROUNDS - 1] / 1e3, t_scrape / 1e6, body,
	       st.sent);
	ops->close(priv, 1000, on_closed, &closed);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
	free(batch);
	return closed ? 0 : -1;
}

int main(int argc, char **argv)
{
	static const long defaults[] = {1000, 10000, 100000};

	printf("prometheus sink: loop cost of a 1-record batch, %d rounds per size; one scrape\n",
	       ROUNDS);
	if (argc > 1) {
		for (int i = 1; i < argc; i++)
			if (bench(strtol(argv[i], NULL, 10)))
				return 1;
		return 0;
	}
	for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
		if (bench(defaults[i]))
			return 1;
	return 0;
}
