// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Stream event decoder (core/engine/stream_reader.c's decode). Input:
 *   u8 flags, u8 sel, u16 btf_len (little-endian), btf_len bytes of raw
 *   BTF, then the ring buffer samples: events of the event type's size,
 *   the last one possibly short.
 * The event type (what a plugin's event_type names) is the BTF's named
 * struct number sel (modulo their count); with flags bit 7 its first members become dimensions as flags say,
 * labelled by the BTF's first enum or by a label map answering from the id.
 * The BTF is validated first, as the loader does for a plugin's object.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/btf.h>
#include <linux/btf.h>

#include "btf_layout.h"
#include "fuzz_libbpf.h"
#include "stream_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_DIMS 3

static int label_fn(void *ctx, uint32_t dim, uint64_t id, char *buf, size_t len)
{
	(void)ctx;
	if (id % 3 == 0)
		return -ENOENT;
	if (id % 7 == 0)
		return -EIO;
	/* Labels up to the whole buffer, to reach the storage bound. */
	memset(buf, 'a' + (int)(dim % 26), len - 1);
	buf[(id % len)] = '\0';
	buf[len - 1] = '\0';
	return 0;
}

/* Name of the sel-th named type of kind (modulo their count), or NULL. */
static const char *type_name(const struct btf *btf, uint32_t kind, uint32_t sel, uint32_t *ret_id)
{
	uint32_t n = btf__type_cnt(btf), count = 0;

	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t id = 1; id < n; id++) {
			const struct btf_type *t = btf__type_by_id(btf, id);
			const char *name;

			if (!t || btf_kind(t) != kind || !t->name_off)
				continue;
			name = btf__name_by_offset(btf, t->name_off);
			if (!name || !name[0])
				continue;
			if (pass == 0) {
				count++;
			} else if (sel-- == 0) {
				*ret_id = id;
				return name;
			}
		}
		if (!count)
			return NULL;
		sel %= count;
	}
	return NULL;
}

static void decode_all(struct ktel_stream_decoder *dec, const uint8_t *ev, size_t left)
{
	static struct ktel_event_field fields[KTEL_MAX_EVENT_FIELDS];
	struct ktel_stream_clock clk = {
		.mono_to_boot_ns = 1000,
		.mono_to_wall_ns = 1700000000000000000LL,
		.now_boot_ns = 5000000000ULL,
		.now_wall_ns = 1700000005000000000LL,
	};
	size_t esize = ktel_stream_decoder__event_size(dec);
	size_t ssize = ktel_stream_decoder__strbuf_size(dec);
	struct ktel_record rec;
	char *strbuf = malloc(ssize ? ssize : 1);

	if (!strbuf)
		return;
	ktel_stream_decoder__new_batch(dec);
	for (int i = 0; i < 64; i++) {
		size_t n = left < esize ? left : esize;
		int r;

		/* A sample of its own, so ASan sees reads past its end. */
		uint8_t *sample = malloc(n ? n : 1);

		if (!sample)
			break;
		memcpy(sample, ev, n);
		memset(&rec, 0, sizeof(rec));
		r = ktel_stream_decoder__decode(dec, sample, n, &clk, &rec, fields, strbuf);
		if (r == 0) {
			if (rec.event.n_fields > KTEL_MAX_EVENT_FIELDS ||
			    rec.n_dims > KTEL_MAX_DIMS)
				abort();
			for (uint32_t k = 0; k < rec.event.n_fields; k++)
				if (fields[k].type == KTEL_FIELD_VALUE_STRING &&
				    (!fields[k].s || strlen(fields[k].s) >= (ssize ? ssize : 1)))
					abort();
		} else if (n >= esize) {
			abort(); /* a whole event is decoded */
		}
		free(sample);
		if (left <= esize)
			break;
		ev += esize;
		left -= esize;
	}
	free(strbuf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ktel_dimension_desc dims[FUZZ_MAX_DIMS] = {0};
	char dim_names[FUZZ_MAX_DIMS][64];
	struct ktel_metric_desc md = {
		.struct_size = sizeof(md),
		.name = "fuzz_events",
		.atom_id = 100000,
		.model = KTEL_MODEL_STREAM,
		.unit = "events",
		.dims = dims,
	};
	struct ktel_stream_decoder *dec;
	const struct btf_member *m;
	const struct btf_type *t;
	const char *enum_name;
	uint32_t struct_id = 0, enum_id = 0;
	struct ktel_err err;
	struct btf *btf;
	size_t btf_len;
	uint8_t flags, sel;

	if (size < 4)
		return 0;
	flags = data[0];
	sel = data[1];
	btf_len = data[2] | (size_t)data[3] << 8;
	data += 4;
	size -= 4;
	if (btf_len > size)
		btf_len = size;
	fuzz_libbpf_quiet();
	btf = btf__new(data, btf_len);
	if (!btf)
		return 0;
	if (ktel_btf_validate(btf, &err) != 0)
		goto out;
	md.event_type = type_name(btf, BTF_KIND_STRUCT, sel, &struct_id);
	if (!md.event_type)
		goto out;
	enum_name = type_name(btf, BTF_KIND_ENUM, 0, &enum_id);
	t = btf__type_by_id(btf, struct_id);
	m = btf_members(t);
	for (uint32_t i = 0; i < btf_vlen(t) && md.n_dims < FUZZ_MAX_DIMS; i++, m++) {
		const char *name = btf__name_by_offset(btf, m->name_off);
		uint32_t bits = flags >> (2 * md.n_dims);

		if (!(flags & 0x80) || !name || !name[0])
			continue;
		snprintf(dim_names[md.n_dims], sizeof(dim_names[0]), "%s", name);
		dims[md.n_dims].name = dim_names[md.n_dims];
		dims[md.n_dims].label_enum = (bits & 1) ? enum_name : NULL;
		dims[md.n_dims].label_map = (bits & 2) ? "fuzz_labels" : NULL;
		md.n_dims++;
	}
	if (ktel_stream_decoder__new(&md, btf, label_fn, NULL, &dec, &err) == 0) {
		decode_all(dec, data + btf_len, size - btf_len);
		ktel_stream_decoder__free(dec);
	}
out:
	btf__free(btf);
	return 0;
}
