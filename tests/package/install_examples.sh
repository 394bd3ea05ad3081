#!/usr/bin/env bash
# Installs the build into a temporary prefix, builds examples/ against it with find_package(kiln) (and
# run_engine once more with pkg-config), builds an engine from MODEL with build_engine, runs it with
# run_engine, and checks that run_engine needs no builder, ONNX or protobuf library.
#   install_examples.sh BUILD_DIR SOURCE_DIR MODEL.onnx
set -euo pipefail
build=$1
src=$2
model=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() { echo "FAILED: $*"; exit 1; }

cmake --install "$build" --prefix "$prefix" > "$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }
for f in include/kiln/runtime.h include/kiln/builder.h bin/kiln lib/cmake/kiln/kilnConfig.cmake \
         lib/cmake/kiln/kilnConfigVersion.cmake lib/pkgconfig/kiln.pc lib/pkgconfig/kiln-runtime.pc; do
  [ -e "$prefix/$f" ] || fail "$f was not installed"
done
for lib in core ops graph kernels onnx builder runtime api; do
  soname=$(readelf -d "$prefix/lib/libkiln_$lib.so" | sed -nE 's/.*SONAME.*\[(.*)\]/\1/p')
  [ -n "$soname" ] && [ -e "$prefix/lib/$soname" ] || fail "libkiln_$lib.so has no SONAME link (got '$soname')"
done
# Installed headers include only each other.
if grep -rhE '#include "' "$prefix/include/kiln" | grep -vE '#include "kiln/'; then fail "an installed header includes a non-public header"; fi
"$prefix/bin/kiln" --version | grep -q "kiln" || fail "the installed kiln binary does not run"

gen=()
command -v ninja > /dev/null && gen=(-G Ninja)
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$src/examples" -B "$tmp/examples" "${gen[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; fail "configuring examples/"; }
cmake --build "$tmp/examples" -j 2 > "$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "building examples/"; }

"$tmp/examples/build_engine" "$model" "$tmp/model.kengine" || fail "build_engine"
out=$("$tmp/examples/run_engine" "$tmp/model.kengine") || { echo "$out"; fail "run_engine"; }
echo "$out"
grep -q "^output " <<< "$out" || fail "run_engine printed no output"

# run_engine links the runtime alone: nothing above it, directly or through another library.
needed=$(readelf -d "$tmp/examples/run_engine" | sed -nE 's/.*NEEDED.*\[(.*)\]/\1/p')
echo "run_engine NEEDED: $(tr '\n' ' ' <<< "$needed")"
grep -q libkiln_runtime <<< "$needed" || fail "run_engine does not need libkiln_runtime"
forbidden='libkiln_(onnx|builder|api)|libonnx|libprotobuf'
if grep -E "$forbidden" <<< "$needed"; then fail "run_engine needs a builder, ONNX or protobuf library"; fi
if ldd "$tmp/examples/run_engine" | grep -E "$forbidden"; then fail "run_engine loads a builder, ONNX or protobuf library"; fi
readelf -d "$tmp/examples/build_engine" | grep -q libkiln_api || fail "build_engine does not need libkiln_api"

# pkg-config: the same program against kiln-runtime.pc.
if command -v pkg-config > /dev/null; then
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
  pkg-config --exists --print-errors kiln kiln-runtime || fail "pkg-config cannot read kiln.pc / kiln-runtime.pc"
  # shellcheck disable=SC2046
  c++ -std=c++20 -O1 "$src/examples/run_engine.cpp" -o "$tmp/run_engine_pc" $(pkg-config --cflags --libs kiln-runtime) ||
    fail "building run_engine with pkg-config"
  pc_out=$(LD_LIBRARY_PATH=$prefix/lib "$tmp/run_engine_pc" "$tmp/model.kengine") || fail "run_engine (pkg-config build)"
  [ "$pc_out" = "$out" ] || fail "the pkg-config build printed something else"
  echo "pkg-config build: same output"
fi
echo "PASSED: examples built against the installed package"
