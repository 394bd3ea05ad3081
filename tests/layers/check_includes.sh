#!/usr/bin/env bash
# Layer rule for public headers: a layer may include include/kiln/X.h only when it links the layer that
# implements X (an internal "<layer>/x.h" include is already stopped by the per-layer include folders).
#   check_includes.sh SOURCE_DIR RULES_FILE    (RULES_FILE: build/layer_rules.txt, written by cmake/layers.cmake)
set -euo pipefail
src=$1
rules=$2
[ -f "$rules" ] || { echo "check_includes: $rules is missing: configure first"; exit 2; }
declare -A links impl
while read -r kind name rest; do
  case $kind in
    layer) links[${name%:}]=" $rest " ;;
    header) impl[${name%:}]=$rest ;;
  esac
done < "$rules"
status=0
for h in "$src"/include/kiln/*.h; do
  h=$(basename "$h")
  if [ -z "${impl[$h]:-}" ]; then
    echo "include/kiln/$h: no layer says it implements it; add it to IMPLEMENTS in that layer's kiln_layer() call"
    status=1
  fi
done
for layer in "${!links[@]}"; do
  dir=$src/src/${layer//_//}
  [ -d "$dir" ] || continue
  while IFS=: read -r file line text; do
    header=$(sed -E 's/.*#include "kiln\/([^"]+)".*/\1/' <<< "$text")
    owner=${impl[$header]:-}
    [ -n "$owner" ] || continue
    if [[ ${links[$layer]} != *" $owner "* ]]; then
      echo "${file#"$src"/}:$line: includes kiln/$header, which the $owner layer implements, but $layer does not link $owner (it links:${links[$layer]% })"
      status=1
    fi
  done < <(grep -rnE '^\s*#\s*include "kiln/[^"]+"' "$dir" --include='*.h' --include='*.cpp' --include='*.cu' --include='*.cuh' || true)
done
[ $status -eq 0 ] && echo "layer includes: ok (${#links[@]} layers, ${#impl[@]} public headers)"
exit $status
