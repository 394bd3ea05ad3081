#pragma once
// Checkpoints: named tensors (weights, buffers, optimizer state, RNG and loader state) and a JSON object of
// metadata in one file, written atomically (a crash leaves the previous file), read back with every size
// checked against the file and a CRC-32 over the whole, so a truncated or corrupted file is an error.
#include <map>
#include <string>

#include "kiln/tensor.h"

namespace kiln::train {

struct Checkpoint {
  std::string meta_json = "{}";  ///< a JSON object (epoch, step, config, ...)
  std::map<std::string, Tensor> tensors;
};

/// Writes `path` through a temporary file renamed into place.
Status save_checkpoint(const std::string& path, const Checkpoint& checkpoint);
/// Reads a checkpoint; errors name the file and say what is wrong with it.
Result<Checkpoint> load_checkpoint(const std::string& path);

}  // namespace kiln::train
