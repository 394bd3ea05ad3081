#!/usr/bin/env bash
# How kiln and ONNX Runtime degrade when other processes use the cores (kiln issue 7, "Threads").
# Each model runs at THREADS threads on an idle machine and next to busy-loop processes (unpinned, or pinned one per
# core), and the script prints the median latency of each and the ratio busy/idle. Models and inputs come from
# export_models.py's cache (the same as benchmarks/cpu/run); kiln builds each engine once, on the idle machine.
# Settings (environment):
#   MODELS="mobilenetv2 resnet50"  THREADS=2  RUNS=20  WARMUP_MS=300  KILN=build/bin/kiln  CACHE=benchmarks/cpu/cache
#   LOADS="idle 1 1p 2 2p"  (N: N busy loops, unpinned; Np: N busy loops, loop i pinned to core i mod nproc)
#   KILN_SPINS="cli 300000"  (kiln variants: 'cli' runs kiln as it is, a number sets GOMP_SPINCOUNT to it;
#                            300000 is libgomp's own default, what a program without any setting gets)
#   TIMEOUT=600 (seconds per process)  PY=/usr/bin/python3 (exports the models)
#   ORT=node (ort_run.js, npm onnxruntime-node) or python (ort_run.py with $PY, pip onnxruntime)
#   CPUS="" (e.g. "0,1": kiln, ONNX Runtime and the busy loops all run on these cores, as on a machine of that many)
# A benchmark, not a test: times depend on everything else the machine runs (the load average is printed next to
# every measurement). Exits 1 when a run failed, 2 when something is not installed.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
MODELS="${MODELS:-mobilenetv2 resnet50}"
THREADS="${THREADS:-2}"
RUNS="${RUNS:-20}"
WARMUP_MS="${WARMUP_MS:-300}"
KILN="${KILN:-$root/build/bin/kiln}"
CACHE="${CACHE:-$here/cache}"
LOADS="${LOADS:-idle 1 1p 2 2p}"
KILN_SPINS="${KILN_SPINS:-cli 300000}"
TIMEOUT="${TIMEOUT:-600}"
PY="${PY:-/usr/bin/python3}"
ORT="${ORT:-node}"
CPUS="${CPUS:-}"

# On CPUS only: the script re-runs itself under taskset, so that everything it starts stays on those cores.
if [ -n "$CPUS" ] && [ -z "${BUSY_MACHINE_PINNED:-}" ]; then
  BUSY_MACHINE_PINNED=1 exec taskset -c "$CPUS" "$0" "$@"
fi

missing() {
  echo "busy_machine.sh: $1 is missing; $2" >&2
  exit 2
}
[ -x "$KILN" ] || missing "kiln ($KILN)" "build it with 'make build'"
command -v taskset >/dev/null || missing "taskset (util-linux)" "install util-linux"
if [ "$ORT" = python ]; then
  $PY -c "import onnxruntime, onnx" 2>/dev/null || missing "ONNX Runtime for $PY (pip onnxruntime, onnx)" "install them"
else
  command -v node >/dev/null || missing "Node.js" "run scripts/install-bench-deps"
  [ -f "$here/node_modules/onnxruntime-node/package.json" ] ||
    missing "ONNX Runtime (npm onnxruntime-node in benchmarks/cpu/node_modules)" "run scripts/install-bench-deps"
fi

out="$CACHE/busy/$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$out"
cores="$(nproc)"
cpu_list=($(taskset -pc $$ | sed 's/.*: //' | tr ',' ' ' | xargs -n1 | awk -F- '{ if (NF == 2) for (i = $1; i <= $2; ++i) print i; else print $1 }'))
echo "# busy machine: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null)"
echo "# $(lscpu | sed -n 's/^Model name: *//p'), $cores cores${CPUS:+ (CPUs $CPUS of $(nproc --all))}; $THREADS threads each; median of $RUNS runs"
echo "# logs: $out"

cases=()
for m in $MODELS; do cases+=("$m:1"); done
if ! (cd "$here" && nice $PY export_models.py "$CACHE" "${cases[@]}" >"$out/export.log" 2>&1); then
  tail -5 "$out/export.log" >&2
  missing "an exported model" "export_models.py failed (log: $out/export.log); run scripts/install-bench-deps"
fi

busy_pids=()
stop_busy() {
  for p in "${busy_pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${busy_pids[@]}"; do wait "$p" 2>/dev/null; done
  busy_pids=()
}
trap stop_busy EXIT
trap 'exit 130' INT TERM
# start_busy LOAD: N busy loops ("N") or N loops pinned one per core ("Np"); "idle" starts none.
start_busy() {
  local load="$1" n pin=0
  [ "$load" = idle ] && return
  n="${load%p}"
  [ "$n" != "$load" ] && pin=1
  for ((i = 0; i < n; ++i)); do
    if [ $pin = 1 ]; then
      taskset -c "${cpu_list[$((i % ${#cpu_list[@]}))]}" bash -c 'while :; do :; done' &
    else
      bash -c 'while :; do :; done' &
    fi
    busy_pids+=($!)
  done
  sleep 1  # let the scheduler spread them
}

# On a machine with a GPU `kiln exec` picks it by default: this is about the CPU.
device_flags=()
"$KILN" exec --help 2>&1 | grep -q -- "--device" && device_flags=(--device cpu)

status=0
# run_case LOG CMD...: the command's median latency (ms) on stdout, "fail" when it failed.
median() {
  local log="$1" pattern="$2"
  shift 2
  if timeout "$TIMEOUT" "$@" >"$log" 2>&1; then
    sed -n "$pattern" "$log" | head -1 | awk '{ printf "%.2f", $1 }'
  else
    echo fail
  fi
}

declare -A ms load_avg
runtimes=()
for spin in $KILN_SPINS; do runtimes+=("kiln:$spin"); done
runtimes+=(ort)
for c in "${cases[@]}"; do
  model="${c%:*}"
  dir="$CACHE/$model-b1"
  load_flags=()
  for f in "$dir"/inputs/*.pb; do load_flags+=(--loadInputs "$(basename "$f" .pb):$f"); done
  engine="$out/$model.engine"
  echo "== $model: building kiln's engine (load average $(cut -d' ' -f1 /proc/loadavg))"
  if ! timeout "$TIMEOUT" "$KILN" exec "${device_flags[@]}" --onnx "$dir/model.onnx" --threads "$THREADS" \
    --saveEngine "$engine" \
    --iterations 1 --duration 0 --warmUp 0 "${load_flags[@]}" >"$out/$model-build.log" 2>&1; then
    echo "  kiln build failed: $out/$model-build.log"
    status=1
    continue
  fi
  for load in $LOADS; do
    start_busy "$load"
    for rt in "${runtimes[@]}"; do
      log="$out/$model-$load-${rt/:/-}.log"
      la="$(cut -d' ' -f1 /proc/loadavg)"
      if [ "$rt" = ort ]; then
        runner=(node "$here/ort_run.js")
        [ "$ORT" = python ] && runner=($PY "$here/ort_run.py")
        v="$(median "$log" 's/.*median_ms=\([0-9.]*\).*/\1/p' "${runner[@]}" "$dir" --runs "$RUNS" \
          --warmup-ms "$WARMUP_MS" --threads "$THREADS")"
      else
        spin="${rt#kiln:}"
        envs=(env)
        [ "$spin" != cli ] && envs+=(GOMP_SPINCOUNT="$spin")
        v="$(median "$log" 's/.*Latency:.* median = \([0-9.e+-]*\) ms.*/\1/p' "${envs[@]}" "$KILN" exec \
          "${device_flags[@]}" --loadEngine "$engine" --threads "$THREADS" --iterations "$RUNS" --duration 0 --warmUp "$WARMUP_MS" \
          "${load_flags[@]}")"
      fi
      [ "$v" = fail ] && status=1
      ms["$model|$rt|$load"]="$v"
      load_avg["$model|$rt|$load"]="$la"
      echo "  $load: $rt median $v ms (load average $la before the run)"
    done
    stop_busy
  done
done

label() {
  case "$1" in
    ort) echo "ORT" ;;
    kiln:cli) echo "kiln" ;;
    kiln:*) echo "kiln GOMP_SPINCOUNT=${1#kiln:}" ;;
  esac
}
load_label() {
  case "$1" in
    idle) echo "idle" ;;
    *p) echo "${1%p} busy, pinned" ;;
    *) echo "$1 busy" ;;
  esac
}
echo
header="| model | runtime |"
rule="|---|---|"
for load in $LOADS; do
  header+=" $(load_label "$load") ms |"
  rule+="---|"
done
for load in $LOADS; do
  [ "$load" = idle ] && continue
  header+=" $(load_label "$load") / idle |"
  rule+="---|"
done
echo "$header"
echo "$rule"
for c in "${cases[@]}"; do
  model="${c%:*}"
  for rt in "${runtimes[@]}"; do
    row="| $model | $(label "$rt") |"
    for load in $LOADS; do row+=" ${ms["$model|$rt|$load"]:--} (${load_avg["$model|$rt|$load"]:--}) |"; done
    idle="${ms["$model|$rt|idle"]:-}"
    for load in $LOADS; do
      [ "$load" = idle ] && continue
      row+=" $(awk -v b="${ms["$model|$rt|$load"]:-}" -v i="$idle" \
        'BEGIN { if (b + 0 > 0 && i + 0 > 0) printf "%.1f", b / i; else print "-" }') |"
    done
    echo "$row"
  done
done
echo
echo "(in parentheses: the 1-minute load average before the run; the machine's other work counts as load too)"
exit $status
