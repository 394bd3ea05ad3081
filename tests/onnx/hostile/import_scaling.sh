#!/usr/bin/env bash
# import_scaling.sh KILN DIR [N...]: imports generated Relu chains of 25k and 100k nodes (or N...) and
# fails when 4x the nodes take 8x the CPU time or more. Prints each size's time.
set -euo pipefail
kiln=$1 dir=$2
shift 2
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(25000 100000)
mkdir -p "$dir"
chain() {
  awk -v n="$1" 'BEGIN {
    print "ir_version: 8 opset_import { domain: \"\" version: 13 } graph { name: \"g\""
    print "input { name: \"t0\" type { tensor_type { elem_type: 1 shape { dim { dim_value: 4 } } } } }"
    for (i = 1; i <= n; i++) printf "node { input: \"t%d\" output: \"t%d\" op_type: \"Relu\" name: \"r%d\" }\n", i - 1, i, i
    printf "output { name: \"t%d\" type { tensor_type { elem_type: 1 } } } }\n", n
  }' | protoc --proto_path=/usr/include --encode=onnx.ModelProto onnx/onnx.proto > "$dir/chain_$1.onnx"
}
declare -A secs
for n in "${sizes[@]}"; do
  chain "$n"
  # CPU time (user + sys) of the import, less noisy than wall time on a shared machine.
  TIMEFORMAT='%U %S %R'
  t=$( { time "$kiln" inspect "$dir/chain_$n.onnx" >/dev/null 2>&1; } 2>&1)
  secs[$n]=$(echo "$t" | awk '{ print $1 + $2 }')
  echo "$n nodes: ${secs[$n]} s CPU, $(echo "$t" | awk '{ print $3 }') s wall"
done
if [ ${#sizes[@]} -eq 2 ]; then
  a=${secs[${sizes[0]}]} b=${secs[${sizes[1]}]}
  awk -v a="$a" -v b="$b" 'BEGIN { r = (b + 0.05) / (a + 0.05); printf "ratio %.2f\n", r; exit !(r < 8) }'
fi
