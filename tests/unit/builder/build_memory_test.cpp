// Importing an ONNX model and building an engine from it holds the model's weights about once, not once per
// stage: the importer frees each initializer's protobuf data as it becomes a tensor (and parses the file without
// reading it whole first), matmul-weights-nk transposes weights in place, the graph's constants are freed as they
// are serialized, and each section is moved into the engine slice by slice. Measured as the peak RSS (VmHWM) of a
// fresh process (a death-test child) that uses kiln's CLI allocation policy (blocks of 1 MiB and more from mmap).
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "builder/builder.h"
#include "onnx/exporter.h"
#include "onnx/importer.h"
#include "ops/matmul/matmul.h"

namespace kiln {
namespace {

constexpr int64_t kWidth = 1024;
constexpr int kLayers = 16;  // 16 weights of 4 MiB: 64 MiB
constexpr double kWeightBytes = static_cast<double>(kLayers) * kWidth * kWidth * sizeof(float);

// x [8, W] through kLayers MatMuls with constant [W, W] weights (values that no pass folds away).
std::unique_ptr<Graph> chain_of_matmuls() {
  auto owned = std::make_unique<Graph>();
  Graph& g = *owned;
  Value* x = *g.add_input("x", DataType::kFloat32, {8, kWidth});
  for (int l = 0; l < kLayers; ++l) {
    Tensor w = *Tensor::empty(DataType::kFloat32, Dims{kWidth, kWidth});
    for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = static_cast<float>((i * 7 + l) % 13) * 1e-3f;
    Value* wv = *g.add_constant(str_cat("w", l), std::move(w));
    x = (*g.add_node("MatrixMultiply", str_cat("mm", l), std::make_unique<MatrixMultiplyAttrs>(), {x, wv}))->outputs[0];
  }
  (void)g.mark_output(x);
  return owned;
}

long status_kb(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + std::string(field).size() + 1);
  return -1;
}

// Exits 0 when importing and building took less than 1.5x the weights on top of what the process held before, 2
// when it took more (the numbers on stderr), 1 when something failed.
void import_and_build_and_exit(const std::string& path) {
  mallopt(M_MMAP_THRESHOLD, 1 << 20);  // as the kiln CLI does
  {
    const std::unique_ptr<Graph> g = chain_of_matmuls();
    if (!onnx_export::export_file(*g, path).is_ok()) std::exit(1);
  }
  {  // libraries and oneDNN's first primitives are loaded before the measurement
    Graph tiny;
    Value* a = *tiny.add_input("a", DataType::kFloat32, {2, 2});
    Node* mm = *tiny.add_node("MatrixMultiply", "mm", std::make_unique<MatrixMultiplyAttrs>(), {a, a});
    (void)tiny.mark_output(mm->outputs[0]);
    if (!build_engine(tiny, BuildOptions{})) std::exit(1);
  }
  malloc_trim(0);
  std::ofstream("/proc/self/clear_refs") << "5";  // resets VmHWM to the current RSS
  const long before_kb = status_kb("VmRSS:");
  auto model = onnx_import::import_file(path);
  if (!model) std::exit(1);
  BuildOptions options;
  options.optimization_level = 0;
  auto engine = build_engine_aligned(std::move(model->graph), options);
  if (!engine) std::exit(1);
  const double grew = static_cast<double>(status_kb("VmHWM:") - before_kb) * 1024;
  std::fprintf(stderr, "peak grew by %.1f MiB for %.1f MiB of weights\n", grew / (1 << 20), kWeightBytes / (1 << 20));
  std::exit(grew < 1.5 * kWeightBytes ? 0 : 2);
}

TEST(BuildMemory, ImportAndBuildHoldTheWeightsAboutOnce) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizers' allocators keep freed memory (quarantine, shadow): peak RSS means nothing there";
#endif
  if (!std::ifstream("/proc/self/clear_refs")) GTEST_SKIP() << "no /proc/self/clear_refs to reset the peak with";
  const std::string path =
      (std::filesystem::temp_directory_path() / ("kiln_build_memory_" + std::to_string(getpid()) + ".onnx")).string();
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: what earlier tests allocated does not count
  EXPECT_EXIT(import_and_build_and_exit(path), testing::ExitedWithCode(0), "");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace kiln
