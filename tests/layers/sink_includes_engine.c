// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Must not build: a sink sees the base layer only, never the engine. */
#include "sink.h"
#include "delta.h"

int layer_probe(void);
int layer_probe(void)
{
	return 0;
}
