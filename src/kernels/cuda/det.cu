// CUDA Det: one thread per matrix, LU decomposition with partial pivoting in double (as the reference), the matrix
// copied into a double scratch buffer the kernel keeps between runs. Simple rather than fast: batches of small
// matrices, as models use Det.
#include <cstdint>

#include "kernels/cuda/cublaslt_gemm.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/cuda/types.cuh"

namespace kiln {
namespace {

template <class T>
__global__ void det_kernel(const T* x, int64_t count, int64_t n, double* work_all, T* y) {
  for (int64_t b = cuda::thread_index(); b < count; b += cuda::thread_count()) {
    double* work = work_all + b * n * n;
    const T* a = x + b * n * n;
    for (int64_t i = 0; i < n * n; ++i) work[i] = static_cast<double>(cuda::load(a[i]));
    double det = 1;
    for (int64_t c = 0; c < n && det != 0.0; ++c) {
      int64_t pivot = c;
      for (int64_t r = c + 1; r < n; ++r)
        if (fabs(work[r * n + c]) > fabs(work[pivot * n + c])) pivot = r;
      if (work[pivot * n + c] == 0.0) {
        det = 0.0;
        break;
      }
      if (pivot != c) {
        for (int64_t j = 0; j < n; ++j) {
          const double t = work[c * n + j];
          work[c * n + j] = work[pivot * n + j];
          work[pivot * n + j] = t;
        }
        det = -det;
      }
      const double p = work[c * n + c];
      det *= p;
      for (int64_t r = c + 1; r < n; ++r) {
        const double f = work[r * n + c] / p;
        if (f == 0.0) continue;
        for (int64_t j = c + 1; j < n; ++j) work[r * n + j] -= f * work[c * n + j];
      }
    }
    y[b] = cuda::store<T>(static_cast<float>(det));
  }
}

class DetKernel final : public Kernel {
 public:
  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.src[0];
    Tensor& y = ctx.dst[0];
    if (x.rank() < 2 || x.dims()[x.rank() - 1] != x.dims()[x.rank() - 2])
      return invalid_argument("Det input must be [..., n, n], got ", x.dims().to_string());
    const int64_t n = x.dims()[x.rank() - 1];
    const int64_t count = y.numel();
    if (count * n * n != x.numel())
      return invalid_argument("Det output ", y.dims().to_string(), " does not fit input ", x.dims().to_string());
    if (count == 0) return Status::ok();
    const cudaStream_t stream = cuda::native(ctx.stream);
    workspace_bytes_ = static_cast<size_t>(x.numel()) * sizeof(double);
    KILN_ASSIGN_OR_RETURN(void* work, work_.get(ctx.allocator, workspace_bytes_, "Det scratch", stream));
    auto* w = static_cast<double*>(work);
    switch (x.dtype()) {
      case DataType::kFloat32:
        det_kernel<float>
            <<<cuda::blocks_for(count), cuda::kThreads, 0, stream>>>(x.data<float>(), count, n, w, y.data<float>());
        break;
      case DataType::kFloat16:
        det_kernel<__half>
            <<<cuda::blocks_for(count), cuda::kThreads, 0, stream>>>(x.data<__half>(), count, n, w, y.data<__half>());
        break;
      case DataType::kBFloat16:
        det_kernel<__nv_bfloat16><<<cuda::blocks_for(count), cuda::kThreads, 0, stream>>>(
            x.data<__nv_bfloat16>(), count, n, w, y.data<__nv_bfloat16>());
        break;
      default: return unsupported("Det of ", dtype_name(x.dtype()));
    }
    return cuda::check(cudaGetLastError(), "Det kernel launch");
  }
  size_t workspace_bytes() const override { return workspace_bytes_; }

 private:
  size_t workspace_bytes_ = 0;
  cuda::DeviceScratch work_;
};

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.det",
    .op = "Det",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports =
        [](const OpCall& call) {
          return require_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16});
        },
    .create = [](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<DetKernel>());
    },
});

}  // namespace
}  // namespace kiln
