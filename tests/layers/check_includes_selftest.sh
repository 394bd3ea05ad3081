#!/usr/bin/env bash
# The layer include check must catch a violation: graph including kiln/runtime.h in a copy of the headers.
#   check_includes_selftest.sh SOURCE_DIR RULES_FILE
set -euo pipefail
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/include/kiln" "$tmp/src/graph"
cp "$1"/include/kiln/*.h "$tmp/include/kiln/"
echo '#include "kiln/runtime.h"' > "$tmp/src/graph/upward.cpp"
if out=$("$here/check_includes.sh" "$tmp" "$2"); then
  echo "the check passed a graph file that includes kiln/runtime.h"; exit 1
fi
grep -q "src/graph/upward.cpp:1: includes kiln/runtime.h, which the runtime layer implements" <<< "$out" || {
  echo "unexpected message: $out"; exit 1; }
echo "violation caught: $out"
