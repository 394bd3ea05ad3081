#!/usr/bin/env bash
# expect_error.sh KILN FILE TEXT [STATUS [ARGS...]]: `KILN inspect FILE ARGS` must exit with STATUS (default 1)
# and print TEXT. It runs with an 8 GiB address-space cap and a 120 s limit, so a bomb fails instead of
# taking the machine; @DIR@ in ARGS is FILE's folder.
kiln=$1 file=$2 text=$3 want=${4:-1}
shift $(( $# < 4 ? $# : 4 ))
args=()
for a in "$@"; do args+=("${a//@DIR@/$(dirname "$file")}"); done
out=$(ulimit -v 8388608; timeout 120 "$kiln" inspect "$file" "${args[@]}" 2>&1); rc=$?
if [ $rc -ne "$want" ]; then echo "expected exit status $want, got $rc: $out"; exit 1; fi
if ! grep -qF -- "$text" <<<"$out"; then echo "expected the message to contain: $text"; echo "got: $out"; exit 1; fi
echo "ok: $out"
