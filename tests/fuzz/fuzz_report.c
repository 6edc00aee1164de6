// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `ktelemetryctl report`'s reader and page (tools/ktelemetryctl/report.c):
 * the bytes are a JSON log, split into lines as the reader splits a file.
 * Whatever the lines hold, the report must not crash or leak, the page must
 * be whole, and no markup of the input may reach it: every element of the
 * page is one the report writes. The first line is also read as a --since
 * time.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The elements the report writes: any other '<' came from the input. */
static bool known_tag(const char *p)
{
	static const char *const tags[] = {"!DOCTYPE", "html",     "head",    "meta",    "title",
					   "style",    "body",     "h1",      "h2",      "h3",
					   "p",        "code",     "details", "summary", "b",
					   "table",    "tr",       "th",      "td",      "a",
					   "section",  "span",     "svg",     "rect",    "text",
					   "line",     "polyline", "circle"};
	size_t n;

	p += p[1] == '/' ? 2 : 1;
	n = strcspn(p, " >");
	for (size_t i = 0; i < sizeof(tags) / sizeof(tags[0]); i++)
		if (strlen(tags[i]) == n && strncmp(p, tags[i], n) == 0)
			return true;
	return false;
}

static void check_page(const char *html, size_t len)
{
	if (len < 16 || strcmp(html + len - 8, "</html>\n") != 0) {
		fprintf(stderr, "the page is not whole\n");
		abort();
	}
	for (const char *p = strchr(html, '<'); p; p = strchr(p + 1, '<'))
		if (!known_tag(p)) {
			fprintf(stderr, "the page holds markup of the input: \"%.40s\"\n", p);
			abort();
		}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ktel_report *r = ktel_report__new(NULL);
	const char *p = (const char *)data, *end = p + size;
	char *html = NULL, first[64];
	size_t len = 0, n = 0;
	int64_t ms;
	bool rel;
	FILE *f;

	if (!r)
		return 0;
	for (uint64_t lineno = 1; p < end; lineno++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = (size_t)((nl ? nl : end) - p);

		if (lineno == 1) {
			n = l < sizeof(first) - 1 ? l : sizeof(first) - 1;
			memcpy(first, p, n);
		}
		ktel_report__add_line(r, p, l, "fuzz", lineno);
		p += l + (nl != NULL);
	}
	first[n] = '\0';
	ktel_report_parse_when(first, &ms, &rel);
	f = open_memstream(&html, &len);
	if (f) {
		ktel_report__write_html(r, f);
		fclose(f);
		check_page(html, len);
	}
	free(html);
	ktel_report__free(r);
	return 0;
}
