#!/usr/bin/env bash
# The ops-table check compares only the columns of backends compiled into the build: a table with an
# extra backend column (as a CUDA build writes for a CPU-only one) passes; a wrong cell of a compiled
# backend still fails. Usage: doc_projection_test.sh HARNESS
set -euo pipefail
harness=$1
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
"$harness" support > "$dir/gen.md"
# add an "npu" column after the last compiled backend column and one npu implementation row
awk -F'|' -v OFS='|' '
  /^\| family \| op \| cases \|/ { in_ops = 1; $(NF-1) = " npu |" $(NF-1); print; next }
  in_ops && /^\|---/ { print "|---" $0; next }
  in_ops && /^\|/ { $(NF-1) = " f32 |" $(NF-1); print; next }
  { in_ops = 0; print }
  END { print "| npu.relu | Activation | npu | 9 |" }' "$dir/gen.md" > "$dir/wider.md"
out=$("$harness" support --check "$dir/wider.md")
grep -q "not checked: npu" <<< "$out" || { echo "expected the npu column to be skipped: $out"; exit 1; }
# a changed cell of a compiled backend must still fail
awk -F'|' -v OFS='|' '/^\| activation \| Activation \|/ { $5 = " i8 " } { print }' "$dir/wider.md" > "$dir/wrong.md"
if "$harness" support --check "$dir/wrong.md" > /dev/null; then echo "a wrong ref cell passed the check"; exit 1; fi
echo "ops-table projection: ok"
