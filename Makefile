# kiln: `make run` installs what is missing, builds and runs the main job (doctor, then exec); `make test` also runs every test.
.PHONY: deps build run bench test test-sanitize test-tsan conformance conformance-cuda fuzz fuzz-smoke format format-check tidy ops-doc clean

PRESET ?= release
JOBS ?= $(shell nproc)

deps:
	@scripts/install-deps

build: deps
	@cmake --preset $(PRESET) >/dev/null
	@cmake --build --preset $(PRESET) -j $(JOBS)

# The main job: check the install, then build and time an engine of a model the project ships (a small
# PyTorch-exported detector with control flow, tests/onnx/detection/models).
run: build
	build/bin/kiln doctor
	build/bin/kiln exec --onnx tests/onnx/detection/models/detection/tiny_detector/model.onnx --duration 1

# CPU benchmark against ONNX Runtime and PyTorch (benchmarks/cpu/README.md); not part of make test.
bench: build
	@scripts/install-bench-deps
	benchmarks/cpu/run

test: build format-check tidy
	@ctest --preset $(PRESET) -j $(JOBS)
	@$(MAKE) --no-print-directory test-sanitize
	@$(MAKE) --no-print-directory test-tsan
	@$(MAKE) --no-print-directory fuzz-smoke

test-sanitize: deps
	@cmake --preset sanitize >/dev/null
	@cmake --build --preset sanitize -j $(JOBS)
	@ctest --preset sanitize -j $(JOBS)

# ThreadSanitizer on the tests that run many execution contexts of one engine on many threads. OpenMP is off
# in them (OMP_NUM_THREADS=1): libgomp is not instrumented, so its barriers would read as races.
test-tsan: deps
	@cmake --preset tsan >/dev/null
	@cmake --build --preset tsan -j $(JOBS)
	@ctest --preset tsan -j $(JOBS)

# The ONNX backend test suite, with the graph optimizer and without: writes docs/onnx-conformance.md, fails below
# tests/onnx/floor.txt or where a test passes only without the optimizer.
conformance: build
	build/bin/kiln_onnx_conformance --write docs/onnx-conformance.md --floor tests/onnx/floor.txt \
	  --known-failures tests/onnx/known-failures.txt --check-optimizer
	build/bin/kiln_onnx_conformance --no-optimizer --floor tests/onnx/floor.txt

# The same suite through the CUDA backend (a GPU machine; scripts/gpu-check runs it with CONFORMANCE=1): writes
# docs/onnx-conformance-cuda.md, fails below tests/onnx/floor-cuda.txt.
conformance-cuda: build
	build/bin/kiln_onnx_conformance --device cuda --write docs/onnx-conformance-cuda.md \
	  --floor tests/onnx/floor-cuda.txt --known-failures tests/onnx/known-failures.txt

# libFuzzer (clang + ASan) on the ONNX importer and on the engine reader; FUZZ_SECONDS bounds each run.
FUZZ_SECONDS ?= 600
FUZZ_LIMITS = -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 -print_final_stats=1
fuzz: deps
	@cmake --preset fuzz >/dev/null
	@cmake --build --preset fuzz -j $(JOBS)
	@mkdir -p build-fuzz/corpus build-fuzz/engine-corpus
	build-fuzz/bin/kiln_fuzz_onnx_import build-fuzz/corpus tests/fuzz/seeds -max_total_time=$(FUZZ_SECONDS) $(FUZZ_LIMITS)
	build-fuzz/bin/kiln_fuzz_engine_reader build-fuzz/engine-corpus tests/fuzz/engine_seeds \
	  -max_total_time=$(FUZZ_SECONDS) $(FUZZ_LIMITS)

fuzz-smoke:
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=30

format:
	@git ls-files -co --exclude-standard '*.h' '*.cpp' '*.cu' '*.cuh' | xargs clang-format -i

format-check:
	@scripts/check-format

# clang-tidy on src/ and apps/; files unchanged since they last passed are skipped (scripts/tidy).
tidy: build
	@scripts/tidy build

ops-doc: build
	build/bin/kiln_op_harness support --write docs/ops.md

clean:
	rm -rf build build-debug build-sanitize build-cpu
