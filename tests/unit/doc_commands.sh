#!/bin/sh
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
# tools/check-doc-commands reads a page as a reader would: the commands of a
# fixture page (continuations, here-documents, quoted newlines, console
# prompts, markers, substitutions) are exactly the expected ones, and every
# page of the tree parses.
set -eu
src=$1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
cd "$src"
tools/check-doc-commands --list --build /nonexistent-build tests/unit/doc_commands/fixture.md |
  sed "s|/nonexistent-build|BUILD|g; s|$src|SRC|g" >"$out"
diff -u tests/unit/doc_commands/expected.txt "$out"
tools/check-doc-commands --list >/dev/null
