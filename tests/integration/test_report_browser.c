// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `ktelemetryctl report` rendered by a real browser (headless Chromium):
 * a JSON log with known counts (few wide windows of two keys, a server's
 * many narrow windows, hostile lines) becomes a page whose
 * - file names no URL and loads nothing (no script, link, url(), src);
 * - rendered DOM (--dump-dom) holds one heatmap cell per non-zero count of
 *   the log, at its window and bucket, with the log's count, and nothing
 *   else; the narrow windows' columns sum to the log's total;
 * - screenshot shows each cell in the colour its legend swatch gives that
 *   count (a PNG decoded here with zlib), and the p50 of a window the
 *   method gives.
 * The cells' screen positions come from a copy of the page with a probe
 * script added (the page itself runs none and forbids scripts), which
 * only writes attributes, so it lays out exactly as the page does.
 * Needs chromium (tools/lib.sh installs it); skipped without it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "ktel_test.h"

#define CTL_BIN KTEL_BINARY_DIR "/tools/ktelemetryctl"
#define T0 1796169600LL /* 2026-12-02T00:00:00Z */
#define N_KEYS 2
#define N_WIN 6
#define WIN_S 600
#define NB 32
#define N_FAST 1500
#define PAGE_W 1100

static char dir[64];
static const char *chromium;
static const char *const keys[N_KEYS] = {"vda", "vdb"};
/* The log's counts of io_latency: [key][window][bucket]. */
static uint64_t log_counts[N_KEYS][N_WIN][NB];
static uint64_t fast_total;

/* ---- the log ------------------------------------------------------------------- */

static void fill_counts(void)
{
	static const uint64_t fib[] = {1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987};

	for (int s = 0; s < N_KEYS; s++)
		for (int w = 0; w < N_WIN; w++) {
			unsigned b[3] = {5u + (unsigned)w, 8, 11u + (unsigned)s};

			for (int i = 0; i < 3; i++)
				log_counts[s][w][b[i]] += fib[(w * 3 + i * 5 + s * 7) % 15];
		}
	/* One window all in (256, 512]: its p50 is 384 (the method's
	 * interpolation, half way through the bucket). */
	memset(log_counts[0][0], 0, sizeof(log_counts[0][0]));
	log_counts[0][0][9] = 10;
}

static void put_hist(FILE *f, const char *metric, const char *dev, int64_t start_s, int64_t len_s,
		     const uint64_t *c, int seq)
{
	uint64_t sum = 0;

	fprintf(f,
		"{\"metric\":\"%s\",\"unit\":\"us\",\"type\":\"histogram\",\"start_s\":%" PRId64
		",\"end_s\":%" PRId64
		",\"boot_id\":\"b\",\"map_id\":3,\"seq\":%d,\"dims\":{\"dev\":"
		"\"%s\"},\"dims_raw\":{\"dev\":%d},\"histogram\":{\"scheme\":\"log2\",\"counts\":[",
		metric, start_s, start_s + len_s, seq, dev, dev[2] - 'a');
	for (int b = 0; b < NB; b++) {
		fprintf(f, "%s%" PRIu64, b ? "," : "", c[b]);
		sum += c[b];
	}
	fputs("],\"le\":[", f);
	for (int b = 0; b < NB - 1; b++)
		fprintf(f, "%s%u", b ? "," : "", 1u << b);
	fprintf(f, ",\"+Inf\"],\"count\":%" PRIu64 "}}\n", sum);
}

static void write_log(const char *path)
{
	FILE *f = fopen(path, "w");
	uint64_t c[NB];

	assert_non_null(f);
	for (int w = 0; w < N_WIN; w++)
		for (int s = 0; s < N_KEYS; s++)
			put_hist(f, "io_latency", keys[s], T0 + w * WIN_S, WIN_S, log_counts[s][w],
				 w * N_KEYS + s);
	/* A server's pulls: 1 s windows, more than the plot's pixels. */
	for (int i = 0; i < N_FAST; i++) {
		memset(c, 0, sizeof(c));
		c[4 + i % 3] = (uint64_t)(i % 5) + 1;
		fast_total += (uint64_t)(i % 5) + 1;
		put_hist(f, "fast_latency", "vda", T0 + i, 1, c, i);
	}
	/* Hostile lines: skipped and counted, never drawn. */
	fputs("not json at all\n", f);
	fputs("{\"metric\":\"<img src=http://example.com/x>\",\"type\":\"histogram\","
	      "\"start_s\":1,\"end_s\":2,\"histogram\":{\"counts\":[1,2],\"le\":[1]}}\n",
	      f);
	fclose(f);
}

/* ---- the browser ---------------------------------------------------------------- */

static int run_chromium(const char *const *extra, size_t n_extra, const char *page, char **ret_out)
{
	char profile[128], out[128], err[128], *e = NULL;
	const char *argv[24];
	size_t n = 0;
	int rc;

	snprintf(profile, sizeof(profile), "--user-data-dir=%s/profile", dir);
	snprintf(out, sizeof(out), "%s/chromium.out", dir);
	snprintf(err, sizeof(err), "%s/chromium.err", dir);
	argv[n++] = chromium;
	argv[n++] = "--headless";
	argv[n++] = "--no-sandbox";
	argv[n++] = "--disable-gpu";
	argv[n++] = "--disable-background-networking";
	argv[n++] = "--disable-component-update";
	argv[n++] = "--no-first-run";
	argv[n++] = "--hide-scrollbars";
	argv[n++] = "--force-device-scale-factor=1";
	argv[n++] = "--force-color-profile=srgb";
	argv[n++] = profile;
	for (size_t i = 0; i < n_extra; i++)
		argv[n++] = extra[i];
	argv[n++] = page;
	argv[n] = NULL;
	rc = ktel_test_run_captured(argv, out, err, -1, 120, ret_out, &e);
	if (rc)
		printf("chromium exited %d: %s\n", rc, e);
	free(e);
	return rc;
}

/* ---- a tiny PNG reader: 8-bit RGB or RGBA, not interlaced (what Chromium
 * writes) ------------------------------------------------------------------------ */

struct image {
	uint32_t w, h, bpp;
	unsigned char *px; /* rows of w * bpp bytes */
};

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int paeth(int a, int b, int c)
{
	int p = a + b - c, pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);

	return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

static void read_png(const char *path, struct image *img)
{
	FILE *f = fopen(path, "rb");
	unsigned char *file, *idat = NULL, *raw;
	size_t len, n_idat = 0, stride;
	uLongf raw_len;
	long size;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	rewind(f);
	file = malloc((size_t)size);
	assert_int_equal(fread(file, 1, (size_t)size, f), (size_t)size);
	fclose(f);
	len = (size_t)size;
	assert_memory_equal(file, "\x89PNG\r\n\x1a\n", 8);
	for (size_t off = 8; off + 12 <= len;) {
		uint32_t n = be32(file + off);
		const unsigned char *type = file + off + 4, *data = file + off + 8;

		assert_true(off + 12 + n <= len);
		if (memcmp(type, "IHDR", 4) == 0) {
			img->w = be32(data);
			img->h = be32(data + 4);
			assert_int_equal(data[8], 8);              /* bit depth */
			assert_true(data[9] == 2 || data[9] == 6); /* RGB, RGBA */
			assert_int_equal(data[12], 0);             /* no interlace */
			img->bpp = data[9] == 6 ? 4 : 3;
		} else if (memcmp(type, "IDAT", 4) == 0) {
			idat = realloc(idat, n_idat + n);
			memcpy(idat + n_idat, data, n);
			n_idat += n;
		}
		off += 12 + n;
	}
	stride = (size_t)img->w * img->bpp;
	raw_len = (uLongf)((stride + 1) * img->h);
	raw = malloc(raw_len);
	assert_int_equal(uncompress(raw, &raw_len, idat, (uLong)n_idat), Z_OK);
	assert_int_equal(raw_len, (stride + 1) * img->h);
	img->px = malloc(stride * img->h);
	for (uint32_t y = 0; y < img->h; y++) {
		const unsigned char *in = raw + y * (stride + 1) + 1;
		unsigned char *row = img->px + y * stride, *up = y ? row - stride : NULL;
		int filter = in[-1];

		for (size_t x = 0; x < stride; x++) {
			int a = x >= img->bpp ? row[x - img->bpp] : 0, b = up ? up[x] : 0;
			int c = up && x >= img->bpp ? up[x - img->bpp] : 0;
			int p = filter == 0   ? 0
				: filter == 1 ? a
				: filter == 2 ? b
				: filter == 3 ? (a + b) / 2
					      : paeth(a, b, c);

			assert_true(filter <= 4);
			row[x] = (unsigned char)(in[x] + p);
		}
	}
	free(raw);
	free(idat);
	free(file);
}

/* ---- reading the DOM ---------------------------------------------------------------- */

/* The value of attribute name in the tag [tag, its '>'), into buf; false
 * when the tag has none. */
static bool attr(const char *tag, const char *name, char *buf, size_t len)
{
	const char *end = strchr(tag, '>'), *p;
	char key[64];
	size_t n;

	snprintf(key, sizeof(key), " %s=\"", name);
	p = strstr(tag, key);
	if (!p || !end || p > end)
		return false;
	p += strlen(key);
	n = strcspn(p, "\"");
	if (n >= len)
		return false;
	memcpy(buf, p, n);
	buf[n] = '\0';
	return true;
}

static uint64_t attr_u64(const char *tag, const char *name)
{
	char v[64];

	if (!attr(tag, name, v, sizeof(v)))
		fail_msg("%.120s: no %s", tag, name);
	return strtoull(v, NULL, 10);
}

/* The tag of the svg class cls whose data-key is key, after from. */
static const char *svg_of(const char *from, const char *cls, const char *key)
{
	char want[160];

	snprintf(want, sizeof(want), "<svg class=\"%s\"", cls);
	for (const char *p = from; (p = strstr(p, want)); p++) {
		char k[64];

		if (!key || (attr(p, "data-key", k, sizeof(k)) && strcmp(k, key) == 0))
			return p;
	}
	return NULL;
}

/* The section of metric in the DOM, and where it ends. */
static const char *section_of(const char *dom, const char *metric, const char **ret_end)
{
	char want[128];
	const char *p, *end;

	snprintf(want, sizeof(want), "<section class=\"metric\" id=\"m");
	for (p = dom; (p = strstr(p, want)); p++) {
		char m[64];

		if (attr(p, "data-metric", m, sizeof(m)) && strcmp(m, metric) == 0)
			break;
	}
	assert_non_null(p);
	end = strstr(p, "</section>");
	assert_non_null(end);
	*ret_end = end;
	return p;
}

struct swatch {
	uint64_t min, max;
	unsigned level;
	char fill[16];
};

/* The numbered swatches of the legend after from. */
static size_t legend_of(const char *from, struct swatch *sw, size_t most)
{
	const char *p = strstr(from, "<svg class=\"legend\""), *end = strstr(p, "</svg>");
	size_t n = 0;

	for (p = strstr(p, "<rect class=\"swatch\""); p && p < end;
	     p = strstr(p + 1, "<rect class=\"swatch\"")) {
		char lvl[16];

		assert_true(attr(p, "data-level", lvl, sizeof(lvl)));
		if (lvl[0] < '0' || lvl[0] > '9')
			continue;
		assert_true(n < most);
		sw[n].level = (unsigned)atoi(lvl);
		sw[n].min = attr_u64(p, "data-min");
		sw[n].max = attr_u64(p, "data-max");
		assert_true(attr(p, "fill", sw[n].fill, sizeof(sw[n].fill)));
		n++;
	}
	return n;
}

static void expect_pixel(const struct image *img, const char *tag, const char *fill)
{
	char px[32];
	unsigned x, y, r, g, b;
	const unsigned char *p;

	assert_true(attr(tag, "data-px", px, sizeof(px)));
	assert_int_equal(sscanf(px, "%u,%u", &x, &y), 2);
	assert_int_equal(sscanf(fill, "#%2x%2x%2x", &r, &g, &b), 3);
	assert_true(x < img->w && y < img->h);
	p = img->px + ((size_t)y * img->w + x) * img->bpp;
	if (p[0] != r || p[1] != g || p[2] != b)
		fail_msg("pixel (%u,%u) of %.100s is #%02x%02x%02x, the legend says %s", x, y, tag,
			 p[0], p[1], p[2], fill);
}

/* ---- the test ----------------------------------------------------------------------- */

static char *slurp_path(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return ktel_test_slurp(path);
}

/* The probe: every cell, swatch and column gets data-px, its centre on
 * the page; the body gets the page's height. */
static void write_probe(const char *html, const char *path)
{
	static const char probe[] =
		"<script>for (const e of document.querySelectorAll('rect.cell, rect.swatch, "
		"rect.win')) { const b = e.getBoundingClientRect(); e.setAttribute('data-px', "
		"Math.floor(b.left + b.width / 2 + scrollX) + ',' + Math.floor(b.top + b.height / "
		"2 + scrollY)); } document.body.setAttribute('data-height', "
		"document.documentElement.scrollHeight);</script>\n";
	const char *csp = strstr(html, "<meta http-equiv=\"Content-Security-Policy\"");
	const char *csp_end = csp ? strchr(csp, '>') : NULL, *body_end = strstr(html, "</body>");
	FILE *f = fopen(path, "w");

	assert_non_null(csp_end);
	assert_non_null(body_end);
	assert_non_null(f);
	fwrite(html, 1, (size_t)(csp - html), f);
	fwrite(csp_end + 1, 1, (size_t)(body_end - csp_end - 1), f);
	fputs(probe, f);
	fputs(body_end, f);
	fclose(f);
}

static void test_page_in_chromium(void **state)
{
	char log[128], html_path[128], probe_path[128], png_path[128], shot[160], size[64];
	char out[128], err[128], *o = NULL, *e = NULL, *html, *dom = NULL, *png_out = NULL;
	const char *argv[] = {CTL_BIN, "report", log, "-o", html_path, NULL};
	const char *sec, *sec_end, *p;
	struct swatch sw[16];
	size_t n_sw, cells = 0;
	uint64_t seen[N_KEYS][N_WIN][NB] = {{{0}}}, fast_sum = 0;
	struct image img = {0};
	long height;

	(void)state;
	snprintf(log, sizeof(log), "%s/k.jsonl", dir);
	snprintf(html_path, sizeof(html_path), "%s/report.html", dir);
	snprintf(probe_path, sizeof(probe_path), "%s/probe.html", dir);
	snprintf(png_path, sizeof(png_path), "%s/shot.png", dir);
	snprintf(out, sizeof(out), "%s/ctl.out", dir);
	snprintf(err, sizeof(err), "%s/ctl.err", dir);
	fill_counts();
	write_log(log);

	assert_int_equal(ktel_test_run_captured(argv, out, err, -1, 60, &o, &e), 0);
	printf("%s", e);
	assert_non_null(strstr(e, "skipped 2 of"));
	free(o);
	free(e);

	/* Self-contained: nothing that fetches, nothing that runs. */
	html = slurp_path("report.html");
	assert_null(strstr(html, "://"));
	assert_null(strstr(html, "<script"));
	assert_null(strstr(html, "<link"));
	assert_null(strstr(html, "<img"));
	assert_null(strstr(html, "url("));
	assert_null(strstr(html, "@import"));
	assert_null(strstr(html, " src="));
	assert_null(strstr(html, "href=\"/"));
	assert_non_null(strstr(html, "data-skipped=\"2\""));

	/* The DOM after the browser parsed (and the probe ran). */
	write_probe(html, probe_path);
	{
		const char *extra[] = {"--dump-dom", "--window-size=1100,800"};

		assert_int_equal(run_chromium(extra, 2, probe_path, &dom), 0);
	}
	p = strstr(dom, "data-height=\"");
	assert_non_null(p);
	height = atol(p + strlen("data-height=\""));
	assert_true(height > 400 && height < 20000);

	/* io_latency: every cell is a count of the log, at its window (by
	 * the column's start) and bucket, and in its legend's colour. */
	snprintf(shot, sizeof(shot), "--screenshot=%s", png_path);
	snprintf(size, sizeof(size), "--window-size=%d,%ld", PAGE_W, height);
	{
		const char *extra[] = {shot, size};

		assert_int_equal(run_chromium(extra, 2, html_path, &png_out), 0);
	}
	read_png(png_path, &img);
	assert_int_equal(img.w, PAGE_W);
	assert_true(img.h >= (uint32_t)height - 1);
	sec = section_of(dom, "io_latency", &sec_end);
	n_sw = legend_of(sec, sw, 16);
	assert_int_equal(n_sw, 8);
	for (int s = 0; s < N_KEYS; s++) {
		char key[32];
		const char *svg, *svg_end;

		snprintf(key, sizeof(key), "dev=%s", keys[s]);
		svg = svg_of(sec, "heatmap", key);
		assert_true(svg && svg < sec_end);
		svg_end = strstr(svg, "</svg>");
		assert_int_equal(attr_u64(svg, "data-columns"), N_WIN);
		for (p = strstr(svg, "<rect class=\"cell\""); p && p < svg_end;
		     p = strstr(p + 1, "<rect class=\"cell\"")) {
			uint64_t count = attr_u64(p, "data-count"), col = attr_u64(p, "data-col");
			uint64_t bucket = attr_u64(p, "data-bucket");
			char win_tag[64], fill[16];
			const char *win;
			int64_t start_ms;
			int w;
			size_t k;

			/* The column's window, by its start. */
			snprintf(win_tag, sizeof(win_tag),
				 "data-col=\"%" PRIu64 "\" data-start-ms=", col);
			win = strstr(svg, win_tag);
			assert_true(win && win < svg_end);
			start_ms = strtoll(win + strlen(win_tag) + 1, NULL, 10);
			w = (int)((start_ms / 1000 - T0) / WIN_S);
			assert_true(w >= 0 && w < N_WIN && bucket < NB);
			assert_int_equal(start_ms, (T0 + w * WIN_S) * 1000);
			if (count != log_counts[s][w][bucket])
				fail_msg("%s window %d bucket %" PRIu64 ": the page shows %" PRIu64
					 ", the log has %" PRIu64,
					 key, w, bucket, count, log_counts[s][w][bucket]);
			seen[s][w][bucket]++;
			cells++;
			/* Its colour: the legend's for that count, on screen. */
			for (k = 0; k < n_sw && !(count >= sw[k].min && count <= sw[k].max); k++)
				;
			assert_true(k < n_sw);
			assert_int_equal(attr_u64(p, "data-level"), sw[k].level);
			assert_true(attr(p, "fill", fill, sizeof(fill)));
			assert_string_equal(fill, sw[k].fill);
			expect_pixel(&img, p, sw[k].fill);
		}
	}
	/* ...and every count of the log has its cell, once. */
	for (int s = 0; s < N_KEYS; s++)
		for (int w = 0; w < N_WIN; w++)
			for (int b = 0; b < NB; b++)
				if ((log_counts[s][w][b] != 0) != (seen[s][w][b] == 1))
					fail_msg("key %s window %d bucket %d: count %" PRIu64
						 " drawn %" PRIu64 " times",
						 keys[s], w, b, log_counts[s][w][b], seen[s][w][b]);
	assert_true(cells > 20);
	/* The legend's own swatches are on screen in their colours too. */
	p = strstr(sec, "<rect class=\"swatch\" data-level=\"0\"");
	assert_non_null(p);
	expect_pixel(&img, p, sw[0].fill);
	/* The window all in (256, 512]: p50 384, as the page states its method. */
	p = strstr(svg_of(sec, "quantiles", "dev=vda"), "<rect class=\"qcol\" ");
	assert_non_null(p);
	assert_int_equal(attr_u64(p, "data-col"), 0);
	{
		char v[32];

		assert_true(attr(p, "data-p50", v, sizeof(v)));
		assert_string_equal(v, "384");
	}

	/* fast_latency: 1500 one-second windows summed into columns that the
	 * page says are sums, holding the log's total. */
	sec = section_of(dom, "fast_latency", &sec_end);
	p = strstr(sec, "data-binned=\"");
	assert_true(p && p < sec_end && p[strlen("data-binned=\"")] == '1');
	for (p = strstr(sec, "<rect class=\"cell\""); p && p < sec_end;
	     p = strstr(p + 1, "<rect class=\"cell\""))
		fast_sum += attr_u64(p, "data-count");
	assert_int_equal(fast_sum, fast_total);
	/* The hostile name drew nothing. */
	assert_null(strstr(dom, "example.com"));

	free(img.px);
	free(png_out);
	free(dom);
	free(html);
}

static int setup(void **state)
{
	static const char *const paths[] = {"/usr/bin/chromium", "/usr/bin/chromium-browser",
					    "/snap/bin/chromium"};

	(void)state;
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]) && !chromium; i++)
		if (access(paths[i], X_OK) == 0)
			chromium = paths[i];
	if (!chromium) {
		printf("SKIP report_browser: needs chromium (tools/lib.sh installs it)\n");
		fflush(stdout);
		exit(KTEL_TEST_SKIP);
	}
	snprintf(dir, sizeof(dir), "/tmp/ktel-report-browser-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return ktel_test_rm_rf(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_page_in_chromium),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
