// CUDA Compress. The runtime has already read the condition on the host to size the output; the kernel numbers the
// kept positions on the device (one block: each thread counts its chunk of the condition, the counts are scanned,
// then each thread writes its chunk's positions) and copies every kept slice in one pass over x. It then reads the
// kept count back to check it against the output (a stream synchronization, as the output size depends on data): a
// condition that changed since the shape was inferred is an error, never a write out of bounds.
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cublaslt_gemm.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/cuda/types.cuh"
#include "ops/compress/compress.h"

namespace kiln {
namespace {

constexpr unsigned kScanThreads = 1024;

// pos[i] = the output index of position i (-1 where the condition is false); *total = the kept count.
__global__ void number_kept_kernel(const bool* condition, int64_t n, int64_t* pos, int64_t* total) {
  __shared__ int64_t counts[kScanThreads];
  const int64_t chunk = (n + kScanThreads - 1) / kScanThreads;
  const int64_t begin = threadIdx.x * chunk, end = begin + chunk < n ? begin + chunk : n;
  int64_t count = 0;
  for (int64_t i = begin; i < end; ++i) count += condition[i] ? 1 : 0;
  counts[threadIdx.x] = count;
  __syncthreads();
  if (threadIdx.x == 0) {
    int64_t sum = 0;
    for (unsigned t = 0; t < kScanThreads; ++t) {
      const int64_t c = counts[t];
      counts[t] = sum;
      sum += c;
    }
    *total = sum;
  }
  __syncthreads();
  int64_t next = counts[threadIdx.x];
  for (int64_t i = begin; i < end; ++i) pos[i] = condition[i] ? next++ : -1;
}

// y[o, pos[a], in] = x[o, a, in] for kept positions a < n.
template <class W>
__global__ void compress_copy_kernel(const W* x, int64_t outer, int64_t size, int64_t inner, int64_t n,
                                     const int64_t* pos, int64_t kept, W* y) {
  const int64_t count = outer * size * inner;
  for (int64_t i = cuda::thread_index(); i < count; i += cuda::thread_count()) {
    const int64_t in = i % inner;
    const int64_t a = (i / inner) % size;
    const int64_t o = i / (inner * size);
    if (a >= n) continue;
    const int64_t p = pos[a];
    if (p < 0 || p >= kept) continue;
    y[(o * kept + p) * inner + in] = x[i];
  }
}

class CompressKernel final : public Kernel {
 public:
  Status run(KernelContext& ctx) override {
    const auto& a = ctx.attrs<CompressAttrs>();
    const Tensor& x = ctx.src[0];
    const Tensor& condition = ctx.src[1];
    Tensor& y = ctx.dst[0];
    int64_t outer = 1, size = x.numel(), inner = 1;
    if (a.has_axis) {
      auto axis = normalize_axis(a.axis, x.rank());
      if (!axis) return invalid_argument("Compress axis ", a.axis, " is out of range for input ", x.dims().to_string());
      size = x.dims()[*axis];
      for (int i = 0; i < x.rank(); ++i) {
        if (i < *axis) outer *= x.dims()[i];
        if (i > *axis) inner *= x.dims()[i];
      }
    }
    const int64_t n = std::min(size, condition.numel());
    const int64_t kept = outer * inner == 0 ? 0 : y.numel() / (outer * inner);
    if (kept * outer * inner != y.numel())
      return invalid_argument("Compress output ", y.dims().to_string(), " does not fit input ", x.dims().to_string());
    const cudaStream_t stream = cuda::native(ctx.stream);
    // Positions, then the total, in one scratch buffer.
    KILN_ASSIGN_OR_RETURN(void* scratch, scratch_.get(ctx.allocator, static_cast<size_t>(n + 1) * sizeof(int64_t),
                                                      "Compress positions", stream));
    auto* pos = static_cast<int64_t*>(scratch);
    number_kept_kernel<<<1, kScanThreads, 0, stream>>>(condition.data<bool>(), n, pos, pos + n);
    KILN_RETURN_IF_ERROR(cuda::check(cudaGetLastError(), "Compress numbering kernel launch"));
    KILN_RETURN_IF_ERROR(cuda::check_device_count(pos + n, kept, stream, "Compress", "slices to keep"));
    if (y.numel() == 0 || x.numel() == 0) return Status::ok();
    const bool known = cuda::dispatch_word(dtype_size(x.dtype()), [&](auto tag) {
      using W = cuda::type_of<decltype(tag)>;
      compress_copy_kernel<W><<<cuda::blocks_for(x.numel()), cuda::kThreads, 0, stream>>>(
          static_cast<const W*>(x.raw()), outer, size, inner, n, pos, kept, static_cast<W*>(y.raw()));
    });
    if (!known) return unsupported("Compress of ", dtype_name(x.dtype()));
    return cuda::check(cudaGetLastError(), "Compress copy kernel launch");
  }

 private:
  cuda::DeviceScratch scratch_;
};

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.compress",
    .op = "Compress",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) -> Status {
      KILN_RETURN_IF_ERROR(reject_fp8(call));
      if (call.inputs[1].dtype != DataType::kBool)
        return unsupported("the CUDA Compress takes a bool condition, got ", dtype_name(call.inputs[1].dtype));
      return Status::ok();
    },
    .create = [](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<CompressKernel>());
    },
});

}  // namespace
}  // namespace kiln
