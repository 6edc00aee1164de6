/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What a start would refuse on this machine beyond the document itself:
 * the paths of a valid config checked against the file system as it is.
 * --check-config and the start run the same checks, so a file the check
 * passes does not stop a start on these grounds.
 */
#ifndef KTEL_HOST_CHECK_H
#define KTEL_HOST_CHECK_H

#include "config.h"

/*
 * Add one message to errs for every path of cfg that the start would
 * refuse, each naming the config field, the path and the rule broken:
 *   plugin_dirs[1]: /vendor/lib64/ktelemetry/plugins: cannot read plugin
 *     directory: No such file or directory (create it, or remove it from
 *     plugin_dirs)
 * Checked: every plugin directory can be listed; the pin_root can be on
 * bpffs; the state_file is one the load accepts; the directories the start
 * creates (above the state_file, the control_socket and each JSON sink's
 * file) can be created and written; an existing JSON sink file can be
 * written; a stream sink's socket directory exists. Nothing is created,
 * moved or mounted. Writability is judged only when running as root, as a
 * start does: another user cannot tell what root may write.
 */
void ktel_host_check(const struct ktel_config *cfg, struct ktel_config_errors *errs);

#endif /* KTEL_HOST_CHECK_H */
