#include "core/cuda_runtime.h"

#include <cuda_runtime.h>

#include <mutex>
#include <unordered_map>

namespace kiln::cuda {
namespace {

Status cuda_status(cudaError_t err, std::string_view what) {
  if (err == cudaSuccess) return Status::ok();
  return Status(StatusCode::kDeviceError, str_cat(what, " failed: ", cudaGetErrorString(err)));
}

class CudaStream final : public Stream {
 public:
  CudaStream(int device, cudaStream_t s) : device_(device), stream_(s) {}
  ~CudaStream() override { cudaStreamDestroy(stream_); }
  Device device() const override { return Device::cuda(device_); }
  Status synchronize() override { return cuda_status(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }
  void* native_handle() const override { return stream_; }

 private:
  int device_;
  cudaStream_t stream_;
};

class CudaEvent final : public Event {
 public:
  explicit CudaEvent(cudaEvent_t e) : event_(e) {}
  ~CudaEvent() override { cudaEventDestroy(event_); }
  Status record(Stream& stream) override {
    return cuda_status(cudaEventRecord(event_, static_cast<cudaStream_t>(stream.native_handle())), "cudaEventRecord");
  }
  Status synchronize() override { return cuda_status(cudaEventSynchronize(event_), "cudaEventSynchronize"); }
  Result<float> elapsed_ms_since(const Event& start) const override {
    const auto* s = dynamic_cast<const CudaEvent*>(&start);
    if (!s) return invalid_argument("elapsed time between events of different devices");
    float ms = 0;
    KILN_RETURN_IF_ERROR(cuda_status(cudaEventElapsedTime(&ms, s->event_, event_), "cudaEventElapsedTime"));
    return ms;
  }

 private:
  cudaEvent_t event_;
};

class DeviceAllocator final : public Allocator {
 public:
  explicit DeviceAllocator(int device) : device_(device) {}
  void* allocate(size_t bytes, size_t, std::string_view) override {
    void* p = nullptr;
    cudaSetDevice(device_);
    if (cudaMalloc(&p, bytes == 0 ? 256 : bytes) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return p;
  }
  void deallocate(void* ptr, size_t) override { cudaFree(ptr); }
  Device device() const override { return Device::cuda(device_); }

 private:
  int device_;
};

}  // namespace

RuntimeInfo query_runtime() {
  RuntimeInfo info;
  info.compiled = true;
  cudaDriverGetVersion(&info.driver_version);
  cudaRuntimeGetVersion(&info.runtime_version);
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    info.problem = info.driver_version == 0 ? std::string("no NVIDIA driver is installed")
                                            : str_cat("no usable GPU (", cudaGetErrorString(err), ")");
    cudaGetLastError();
    return info;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    info.gpus.push_back({i, prop.name, prop.major, prop.minor, prop.totalGlobalMem, prop.multiProcessorCount});
  }
  if (info.gpus.empty()) info.problem = "no GPU found";
  return info;
}

bool gpu_available() {
  static const bool kAvailable = !query_runtime().gpus.empty();
  return kAvailable;
}

Result<std::unique_ptr<Stream>> create_stream(int device) {
  KILN_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device), "cudaSetDevice"));
  cudaStream_t s = nullptr;
  KILN_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
  return std::unique_ptr<Stream>(std::make_unique<CudaStream>(device, s));
}

Result<std::unique_ptr<Event>> create_event(int device) {
  KILN_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device), "cudaSetDevice"));
  cudaEvent_t e = nullptr;
  KILN_RETURN_IF_ERROR(cuda_status(cudaEventCreate(&e), "cudaEventCreate"));
  return std::unique_ptr<Event>(std::make_unique<CudaEvent>(e));
}

Allocator& device_allocator(int device) {
  static std::mutex mu;
  static std::unordered_map<int, std::unique_ptr<DeviceAllocator>> allocators;
  std::lock_guard lock(mu);
  auto& a = allocators[device];
  if (!a) a = std::make_unique<DeviceAllocator>(device);
  return *a;
}

Status copy(const Tensor& src, Tensor& dst, Stream* stream) {
  if (src.dtype() != dst.dtype() || src.numel() != dst.numel())
    return invalid_argument("copy from ", src.describe(), " to ", dst.describe(), ": types or sizes differ");
  if (!src.is_contiguous() || !dst.is_contiguous()) return invalid_argument("copy needs contiguous tensors");
  cudaMemcpyKind kind = cudaMemcpyDefault;
  if (stream) {
    auto s = static_cast<cudaStream_t>(stream->native_handle());
    return cuda_status(cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), kind, s), "cudaMemcpyAsync");
  }
  return cuda_status(cudaMemcpy(dst.raw(), src.raw(), src.nbytes(), kind), "cudaMemcpy");
}

}  // namespace kiln::cuda
