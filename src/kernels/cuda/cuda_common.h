#pragma once
// Shared CUDA kernel glue: error translation, per-thread cuDNN/cuBLAS handles bound to a stream,
// element types, launch sizes.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <optional>

#include "kernels/registry.h"

namespace kiln::cuda {

Status check(cudaError_t err, const char* what);
Status check(cudnnStatus_t err, const char* what);
Status check(cublasStatus_t err, const char* what);
/// Reads back a count kernels wrote at `device_count` (synchronizing `stream`: the run waits for it) and checks it
/// against `want`, what the output's inferred shape holds. A mismatch means the data changed after shapes were
/// inferred: "<op> finds <n> <what> but the output holds <want> (...)".
Status check_device_count(const int64_t* device_count, int64_t want, cudaStream_t stream, const char* op,
                          const char* what);

/// The shared memory a block may opt in to on `device` (cudaDevAttrMaxSharedMemoryPerBlockOptin), asked once per
/// device.
Result<size_t> shared_memory_limit(int device);

inline cudaStream_t native(Stream& stream) { return static_cast<cudaStream_t>(stream.native_handle()); }
/// The calling thread's cuDNN handle, set to `stream`.
Result<cudnnHandle_t> cudnn_handle(Stream& stream);
/// The calling thread's cuDNN handle for `device` (its stream left as it is): for queries that launch nothing.
Result<cudnnHandle_t> cudnn_handle(int device);
/// The calling thread's cuBLAS handle, set to `stream`.
Result<cublasHandle_t> cublas_handle(Stream& stream);

std::optional<cudnnDataType_t> cudnn_dtype(DataType dtype);
std::optional<cudaDataType_t> cuda_dtype(DataType dtype);

/// Blocks for a grid-stride loop over n elements.
inline unsigned grid_for(int64_t n, unsigned block = 256) {
  const int64_t blocks = (n + block - 1) / block;
  return static_cast<unsigned>(blocks < 65535 * 8 ? (blocks < 1 ? 1 : blocks) : 65535 * 8);
}

/// A cuDNN tensor descriptor that frees itself.
class TensorDescriptor {
 public:
  TensorDescriptor();
  ~TensorDescriptor();
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  /// Fully packed NCHW-style descriptor of rank 4 or 5 (smaller ranks are padded with trailing 1s).
  Status set(DataType dtype, const Dims& dims);
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

}  // namespace kiln::cuda
