#!/usr/bin/env bash
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# config/default.json is what the docs say it is, and bounded on disk:
# its JSON sink writes a file (not stdout) with rotation on, and the
# rotation size, the files kept and runq_stall_events' threshold_us default
# (the plugin's descriptor, as `ktelemetryctl inspect` reports it) are the
# figures docs/config.md states. No timing: the output rate itself is
# measured by tools/bench/default_output.sh (docs/benchmarks.md).
#
#   default_config.sh SOURCE_DIR KTELEMETRYCTL PLUGIN_DIR
set -euo pipefail

src=$1 ctl=$2 plugins=$3
fail() { echo "default_config: $*" >&2; exit 1; }
command -v jq >/dev/null || { echo "SKIP: no jq"; exit 77; }

cfg=$src/config/default.json
doc=$src/docs/config.md
sink=$(jq -c '[.sinks[] | select(.type == "json")] | first // empty' "$cfg")
[ -n "$sink" ] || fail "$cfg has no json sink"
path=$(jq -r '.path' <<<"$sink")
rotate=$(jq -r '.rotate_bytes // empty' <<<"$sink")
keep=$(jq -r '.keep // 5' <<<"$sink")
[ "$path" != "-" ] || fail "$cfg: the json sink writes to stdout, which nothing rotates"
[ -n "$rotate" ] || fail "$cfg: the json sink has no rotate_bytes: the file grows without bound"
[ "$(jq -r '.compress // false' <<<"$sink")" = true ] ||
  fail "$cfg: rotated files are not compressed"
[ "$(jq -r '.emit_zero // false' "$cfg")" = false ] ||
  fail "$cfg: emit_zero on writes a record per key every pull, changed or not"

threshold=$("$ctl" --socket /nonexistent/ktel-default-config.sock --json inspect \
  "$plugins/runq_stall_events.so" 2>/dev/null |
  jq -r '.params[] | select(.name == "threshold_us") | .default')
[ -n "$threshold" ] || fail "inspect does not list runq_stall_events' threshold_us"
[ "$threshold" = "$(jq -r '.metrics.runq_stall_events.params.threshold_us // empty' "$cfg")" ] ||
  [ -z "$(jq -r '.metrics.runq_stall_events.params.threshold_us // empty' "$cfg")" ] ||
  fail "$cfg sets threshold_us to another value than the plugin's default"

# The sentence of docs/config.md that states them.
want="\`$path\`, rotated at $rotate with $keep files kept (gzipped)"
grep -qF -- "$want" "$doc" || fail "docs/config.md does not say: $want"
want="\`threshold_us\` defaults to $threshold"
grep -qF -- "$want" "$doc" || fail "docs/config.md does not say: $want"
echo "default.json: $path, rotate_bytes $rotate, keep $keep; threshold_us $threshold: as documented"
