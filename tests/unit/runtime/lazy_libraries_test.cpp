// The CUDA build loads cuBLAS and cuBLASLt on first use only: a CPU engine's build and run leave them unloaded (they
// cost about 150 MB of memory once loaded). Checked in a fresh process (a death-test child), whatever other tests ran.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "builder/builder.h"
#include "ops/matmul/matmul.h"
#include "runtime/engine.h"

namespace kiln {
namespace {

bool mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(library) != std::string::npos) return true;
  return false;
}

// Builds and runs a CPU engine with a MatMul; exits 0 when cuBLASLt is not mapped afterwards, 2 when it is, 1 when
// the engine failed.
void run_cpu_matmul_and_exit() {
  Graph g;
  Value* a = *g.add_input("a", DataType::kFloat32, {4, 8});
  Value* b = *g.add_input("b", DataType::kFloat32, {8, 3});
  Node* mm = *g.add_node("MatrixMultiply", "mm", std::make_unique<MatrixMultiplyAttrs>(), {a, b});
  if (!g.mark_output(mm->outputs[0]).is_ok()) std::exit(1);
  BuildOptions options;
  options.backend = Backend::kCpu;
  auto bytes = build_engine(g, options);
  if (!bytes) std::exit(1);
  auto engine = EngineImpl::deserialize(*bytes);
  if (!engine) std::exit(1);
  auto ctx = (*engine)->create_execution_context();
  if (!ctx) std::exit(1);
  Tensor x = *Tensor::empty(DataType::kFloat32, Dims{4, 8});
  Tensor y = *Tensor::empty(DataType::kFloat32, Dims{8, 3});
  for (int64_t i = 0; i < 32; ++i) x.data<float>()[i] = static_cast<float>(i % 5) - 2.f;
  for (int64_t i = 0; i < 24; ++i) y.data<float>()[i] = static_cast<float>(i % 7) - 3.f;
  if (!(*ctx)->set_input("a", x).is_ok() || !(*ctx)->set_input("b", y).is_ok() || !(*ctx)->execute().is_ok())
    std::exit(1);
  std::exit(mapped("libcublasLt") || mapped("libcublas.so") ? 2 : 0);
}

TEST(LazyLibraries, ACpuEngineLeavesCublasUnloaded) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: what earlier tests loaded does not count
  EXPECT_EXIT(run_cpu_matmul_and_exit(), testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace kiln
