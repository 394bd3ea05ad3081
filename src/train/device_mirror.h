#pragma once
// The values of a ParameterStore mirrored on a GPU, for CUDA training: uploaded once, bound to the step's
// engine in place and updated there by the optimizer (float32 master weights stay on the GPU), copied back
// to the store for snapshots and export. Nothing crosses PCIe per step but the batch, the loss and the logits.
#include <map>
#include <string>

#include "kiln/stream.h"
#include "train/module.h"

namespace kiln::train {

class DeviceMirror {
 public:
  /// Device copies of every entry of `store` on `device` (uploaded on `stream`).
  static Result<DeviceMirror> create(const ParameterStore& store, Device device, Stream& stream);

  /// The device tensor of entry `name` (an error names it when the store has no such entry).
  Result<Tensor> at(const std::string& name) const;
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  /// store -> GPU (after a snapshot is loaded), queued on `stream`.
  Status upload(const ParameterStore& store, Stream& stream);
  /// GPU -> store; returns once the copies have landed.
  Status download(ParameterStore& store, Stream& stream) const;
  /// Copies `value` (a device tensor of the same dims, e.g. an engine output) into entry `name` on `stream`.
  Status assign(const std::string& name, const Tensor& value, Stream& stream);

 private:
  std::map<std::string, Tensor> tensors_;
};

}  // namespace kiln::train
