#!/usr/bin/env bash
# Kernel-level trace of one benchmark case (a folder written by bench.py: model.onnx, inputs/*.pb) with Nsight
# Systems when the machine has it: prints the CUDA kernels by total time (nsys's cuda_gpu_kern_sum report).
# usage: benchmarks/gpu/trace.sh FOLDER OUT_PREFIX [kiln exec flags...]   (KILN=build-gpu/bin/kiln)
set -uo pipefail
folder=$1 prefix=$2
shift 2
kiln=${KILN:-build-gpu/bin/kiln}
nsys=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -n 1)
[ -n "$nsys" ] || { echo "trace.sh: no nsys on this machine" >&2; exit 2; }
load=()
for f in "$folder"/inputs/*.pb; do n=$(basename "$f" .pb); load+=(--loadInputs "$n:$f"); done
"$nsys" profile --force-overwrite true --cuda-graph-trace=node -o "$prefix" "$kiln" exec --onnx "$folder/model.onnx" --device cuda --fp16 \
  --timingCacheFile "$folder/timing.cache" "${load[@]}" --useCudaGraph --noDataTransfers --iterations 50 \
  --duration 0 --warmUp 100 "$@" >"$prefix.exec.log" 2>&1 || { tail -n 5 "$prefix.exec.log"; exit 1; }
"$nsys" stats --report cuda_gpu_kern_sum --format csv "$prefix.nsys-rep" >"$prefix.kernels.csv" 2>/dev/null
head -n 40 "$prefix.kernels.csv" | cut -c1-220
