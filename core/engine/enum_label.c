// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include "enum_label.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "btf_layout.h"

struct ktel_enum_labels {
	const struct btf *btf;
	__u32 enum_id;
	__u32 n;
	/* labels[i] for enumerator i, "" when it has none. */
	char (*labels)[KTEL_ENUM_LABEL_MAX];
};

static bool ident_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_';
}

bool ktel_enum_name_valid(const char *name)
{
	size_t i;

	if (!name)
		return false;
	for (i = 0; name[i] && i < KTEL_ENUM_LABEL_MAX; i++)
		if (!ident_char(name[i]))
			return false;
	return i > 0 && i < KTEL_ENUM_LABEL_MAX;
}

/* Longest common prefix of the valid names; SIZE_MAX when there are none. */
static size_t common_prefix(const char *const *names, size_t n, const char **ret_first)
{
	const char *first = NULL;
	size_t len = SIZE_MAX;

	for (size_t i = 0; i < n; i++) {
		size_t k = 0;

		if (!ktel_enum_name_valid(names[i]))
			continue;
		if (!first) {
			first = names[i];
			len = strlen(first);
			continue;
		}
		while (k < len && names[i][k] == first[k])
			k++;
		len = k;
	}
	*ret_first = first;
	return len;
}

/* Some valid name is exactly the first len bytes of first. */
static bool some_name_is(const char *const *names, size_t n, const char *first, size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (ktel_enum_name_valid(names[i]) && strlen(names[i]) == len &&
		    strncmp(names[i], first, len) == 0)
			return true;
	return false;
}

/* Length of first[0..len) up to and including its last '_', or 0. */
static size_t cut_to_underscore(const char *first, size_t len)
{
	while (len > 0 && first[len - 1] != '_')
		len--;
	return len;
}

size_t ktel_enum_prefix_len(const char *const *names, size_t n)
{
	const char *first;
	size_t len = common_prefix(names, n, &first);

	if (!first)
		return 0;
	len = cut_to_underscore(first, len);
	while (len > 0 && some_name_is(names, n, first, len))
		len = cut_to_underscore(first, len - 1);
	return len;
}

int ktel_enum_short_name(const char *name, size_t prefix, char *buf, size_t cap)
{
	size_t len, i;

	if (!ktel_enum_name_valid(name))
		return -EINVAL;
	len = strlen(name);
	if (prefix >= len || len - prefix >= cap)
		return -EINVAL;
	for (i = prefix; i < len; i++) {
		char c = name[i];

		buf[i - prefix] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
	}
	buf[len - prefix] = '\0';
	return 0;
}

int ktel_enum_labels__new(const struct btf *btf, __u32 enum_id, struct ktel_enum_labels **ret,
			  struct ktel_err *err)
{
	struct ktel_enum_labels *el;
	const char **names = NULL;
	size_t prefix;
	__u32 n = ktel_layout_enum_count(btf, enum_id);

	if (!n)
		return ktel_err_set(err, EINVAL, "type %u is no enum with enumerators", enum_id);
	el = calloc(1, sizeof(*el));
	names = calloc(n, sizeof(*names));
	if (el)
		el->labels = calloc(n, sizeof(*el->labels));
	if (!el || !names || !el->labels) {
		free(names);
		ktel_enum_labels__free(el);
		return ktel_err_set(err, ENOMEM, "out of memory");
	}
	el->btf = btf;
	el->enum_id = enum_id;
	el->n = n;
	for (__u32 i = 0; i < n; i++)
		names[i] = ktel_layout_enum_name(btf, enum_id, i);
	prefix = ktel_enum_prefix_len(names, n);
	for (__u32 i = 0; i < n; i++)
		if (ktel_enum_short_name(names[i], prefix, el->labels[i], sizeof(el->labels[i])))
			el->labels[i][0] = '\0';
	free(names);
	*ret = el;
	return 0;
}

void ktel_enum_labels__free(struct ktel_enum_labels *el)
{
	if (!el)
		return;
	free(el->labels);
	free(el);
}

const char *ktel_enum_labels__find(const struct ktel_enum_labels *el, int64_t value)
{
	int i = el ? ktel_layout_enum_index(el->btf, el->enum_id, value) : -1;

	if (i < 0 || (__u32)i >= el->n || !el->labels[i][0])
		return NULL;
	return el->labels[i];
}
