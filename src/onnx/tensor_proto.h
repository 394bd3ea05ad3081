#pragma once
// Conversions between ONNX TensorProto / type enums and kiln tensors.
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>

#include "kiln/tensor.h"

namespace kiln::onnx_import {

/// The bytes one import may hold in host tensors (initializers, external data, folded constants).
class MemoryBudget {
 public:
  explicit MemoryBudget(uint64_t limit) : limit_(limit) {}
  /// Takes `bytes` or fails (kOutOfMemory) with a message that starts with `what`.
  Status charge(uint64_t bytes, const std::string& what);
  void release(uint64_t bytes) { used_ -= std::min(bytes, used_); }
  uint64_t used() const { return used_; }
  uint64_t limit() const { return limit_; }

 private:
  uint64_t limit_;
  uint64_t used_ = 0;
};

/// Half of the machine's physical memory (or of the process's address-space cap): the default budget.
uint64_t default_memory_budget();
/// "1.5 GiB", "512 KiB".
std::string format_bytes(uint64_t bytes);

/// Where tensors stored outside the protobuf may be read from. External data must resolve (symlinks
/// followed) to a regular file inside the real `base_dir` or, when set, inside the real `extra_root`.
struct TensorSource {
  TensorSource(std::string dir = ".") : base_dir(std::move(dir)) {}  // NOLINT: a folder is a source
  TensorSource(const char* dir) : base_dir(dir) {}                   // NOLINT
  std::string base_dir;
  std::string extra_root;
  MemoryBudget* budget = nullptr;  ///< charged for every tensor read; nullptr: no limit
};

/// kiln's type for an ONNX element type. float64 computes as float32 and int16/uint16/uint32 widen
/// to int32/int64 (`narrowed` says so); nullopt for types kiln does not hold (string, complex, uint64).
std::optional<DataType> from_onnx_dtype(int64_t onnx_type, bool* narrowed = nullptr);
int to_onnx_dtype(DataType dtype);
std::string onnx_dtype_name(int64_t onnx_type);

/// Reads a TensorProto (raw, typed or external data, the latter through `source`'s sandbox) into a host
/// tensor; `what` names it in errors ("initializer 'conv1.weight'"). Errors never quote file bytes.
Result<Tensor> tensor_from_proto(const onnx::TensorProto& proto, const TensorSource& source, const std::string& what);
/// Writes a host tensor as raw data.
void tensor_to_proto(const Tensor& tensor, const std::string& name, onnx::TensorProto& proto);

}  // namespace kiln::onnx_import
