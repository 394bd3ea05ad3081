// libFuzzer target: arbitrary bytes through the ONNX importer must give a model or a Status,
// never a crash, a hang or an unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/registry.h"
#include "kiln/logger.h"
#include "onnx/importer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    kiln::Logger::global().set_level(kiln::Severity::kInternalError);
    (void)kiln::backend_name(kiln::Backend::kRef);  // links the kernels: folding runs the reference evaluator
    return true;
  }();
  (void)quiet;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  // The budgets a server taking strangers' models would set; the fuzzer's -rss_limit_mb and -timeout sit
  // above them, so an input that gets past them is a finding.
  kiln::onnx_import::ImportOptions options;
  options.memory_budget = uint64_t{256} << 20;
  options.fold_work_limit = 1e7;
  options.fold_work_total = 1e8;
  options.large_tensor_bytes = UINT64_MAX;
  auto model = kiln::onnx_import::import_bytes(bytes, "/nonexistent-fuzz-dir", "fuzz-input", options);
  if (model) (void)model->graph->verify();
  return 0;
}
