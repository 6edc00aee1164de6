// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Test fixture: a shared object that does not export the ktel_plugin symbol. */
#include <ktelemetry/plugin.h>

KTEL_PLUGIN_EXPORT const int ktel_not_a_plugin = 1;
