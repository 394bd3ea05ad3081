#pragma once
// After `kiln train`: the trained classifier exported to ONNX (run folder's model.onnx), imported back, built
// into an engine and checked against the trainer's own evaluation graph on real images.
#include <string>

#include "train/trainer.h"

namespace kiln::cli {

struct ExportCheck {
  std::string onnx_path;
  int64_t images = 0;
  double max_abs_diff = 0;  ///< probabilities: engine from the ONNX file vs the evaluation graph
};

Result<ExportCheck> export_and_check(train::Trainer& trainer, const std::string& run_dir);

}  // namespace kiln::cli
