#include "kernels/cuda/cuda_common.h"

#include <map>
#include <mutex>

#include "kernels/cuda/cublas_lazy.h"

namespace kiln::cuda {

Status check_device_count(const int64_t* device_count, int64_t want, cudaStream_t stream, const char* op,
                          const char* what) {
  int64_t got = 0;
  KILN_RETURN_IF_ERROR(check(cudaMemcpyAsync(&got, device_count, sizeof(got), cudaMemcpyDeviceToHost, stream),
                             "cudaMemcpyAsync (a count read back)"));
  KILN_RETURN_IF_ERROR(check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (a count read back)"));
  if (got != want)
    return invalid_argument(op, " finds ", got, " ", what, " but the output holds ", want,
                            " (its inputs changed since the output shape was inferred)");
  return Status::ok();
}

Result<size_t> shared_memory_limit(int device) {
  static std::mutex mu;
  static std::map<int, size_t> limits;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = limits.find(device); it != limits.end()) return it->second;
  int bytes = 0;
  KILN_RETURN_IF_ERROR(check(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                             "cudaDeviceGetAttribute (shared memory per block)"));
  limits[device] = static_cast<size_t>(bytes);
  return static_cast<size_t>(bytes);
}

Status check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::ok();
  cudaGetLastError();
  const StatusCode code = err == cudaErrorMemoryAllocation ? StatusCode::kOutOfMemory : StatusCode::kDeviceError;
  return Status(code, str_cat(what, ": ", cudaGetErrorString(err)));
}

Status check(cudnnStatus_t err, const char* what) {
  if (err == CUDNN_STATUS_SUCCESS) return Status::ok();
  const StatusCode code = err == CUDNN_STATUS_NOT_SUPPORTED ? StatusCode::kUnsupported : StatusCode::kDeviceError;
  return Status(code, str_cat(what, ": ", cudnnGetErrorString(err)));
}

Status check(cublasStatus_t err, const char* what) {
  if (err == CUBLAS_STATUS_SUCCESS) return Status::ok();
  const StatusCode code = err == CUBLAS_STATUS_ALLOC_FAILED ? StatusCode::kOutOfMemory : StatusCode::kDeviceError;
  std::string why = cublasGetStatusString(err);
  if (err == CUBLAS_STATUS_NOT_INITIALIZED)
    if (const std::string load = cublas_load_error(); !load.empty()) why = load;
  return Status(code, str_cat(what, ": ", why));
}

namespace {
struct ThreadHandles {
  std::map<int, cudnnHandle_t> cudnn;
  std::map<int, cublasHandle_t> cublas;
  ~ThreadHandles() {
    for (auto& [_, h] : cudnn) cudnnDestroy(h);
    for (auto& [_, h] : cublas) cublasDestroy(h);
  }
};
thread_local ThreadHandles handles;
}  // namespace

Result<cudnnHandle_t> cudnn_handle(int device) {
  auto& h = handles.cudnn[device];
  if (!h) {
    KILN_RETURN_IF_ERROR(check(cudaSetDevice(device), "cudaSetDevice"));
    KILN_RETURN_IF_ERROR(check(cudnnCreate(&h), "cudnnCreate"));
  }
  return h;
}

Result<cudnnHandle_t> cudnn_handle(Stream& stream) {
  KILN_ASSIGN_OR_RETURN(cudnnHandle_t h, cudnn_handle(stream.device().index));
  KILN_RETURN_IF_ERROR(check(cudnnSetStream(h, native(stream)), "cudnnSetStream"));
  return h;
}

Result<cublasHandle_t> cublas_handle(Stream& stream) {
  const int dev = stream.device().index;
  auto& h = handles.cublas[dev];
  if (!h) {
    KILN_RETURN_IF_ERROR(check(cudaSetDevice(dev), "cudaSetDevice"));
    KILN_RETURN_IF_ERROR(check(cublasCreate(&h), "cublasCreate"));
  }
  KILN_RETURN_IF_ERROR(check(cublasSetStream(h, native(stream)), "cublasSetStream"));
  return h;
}

std::optional<cudnnDataType_t> cudnn_dtype(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return CUDNN_DATA_FLOAT;
    case DataType::kFloat16: return CUDNN_DATA_HALF;
    case DataType::kBFloat16: return CUDNN_DATA_BFLOAT16;
    case DataType::kInt8: return CUDNN_DATA_INT8;
    case DataType::kInt32: return CUDNN_DATA_INT32;
    default: return std::nullopt;
  }
}

std::optional<cudaDataType_t> cuda_dtype(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return CUDA_R_32F;
    case DataType::kFloat16: return CUDA_R_16F;
    case DataType::kBFloat16: return CUDA_R_16BF;
    case DataType::kInt8: return CUDA_R_8I;
    case DataType::kInt32: return CUDA_R_32I;
    default: return std::nullopt;
  }
}

TensorDescriptor::TensorDescriptor() { cudnnCreateTensorDescriptor(&desc_); }
TensorDescriptor::~TensorDescriptor() { cudnnDestroyTensorDescriptor(desc_); }

Status TensorDescriptor::set(DataType dtype, const Dims& dims) {
  auto dt = cudnn_dtype(dtype);
  if (!dt) return unsupported("cuDNN has no ", dtype_name(dtype), " tensors");
  int d[kMaxRank], s[kMaxRank];
  const int rank = dims.rank() < 4 ? 4 : dims.rank();
  for (int i = 0; i < rank; ++i) d[i] = i < dims.rank() ? static_cast<int>(dims[i]) : 1;
  int acc = 1;
  for (int i = rank - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= d[i];
  }
  return check(cudnnSetTensorNdDescriptor(desc_, *dt, rank, d, s), "cudnnSetTensorNdDescriptor");
}

}  // namespace kiln::cuda
