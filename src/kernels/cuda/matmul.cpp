// FullyConnected on CUDA through cuBLAS: y[N, out] = x[N, K] @ w[out, K]^T + b.
#include "ops/matmul/matmul.h"
#include "kernels/cuda/cuda_common.h"

namespace kiln {
namespace {

Status run_fully_connected(KernelContext& ctx) {
  const auto& a = ctx.attrs<FullyConnectedAttrs>();
  const Tensor& x = ctx.src[0];
  const Tensor& w = ctx.src[1];
  Tensor& y = ctx.dst[0];
  KILN_ASSIGN_OR_RETURN(int axis, normalize_axis(a.axis, x.rank() + 1));
  int64_t n = 1;
  for (int i = 0; i < axis; ++i) n *= x.dims()[i];
  const int64_t out = w.dims()[0], k = w.dims()[1];
  if (n == 0 || out == 0) return Status::ok();
  KILN_ASSIGN_OR_RETURN(cublasHandle_t h, cuda::cublas_handle(ctx.stream));
  const auto dt = *cuda::cuda_dtype(x.dtype());
  // Row-major y = x w^T is column-major y^T = w x^T: (out x n) = (out x k) * (k x n).
  const float one = 1.f, zero = 0.f;
  KILN_RETURN_IF_ERROR(
      cuda::check(cublasSetMathMode(h, x.dtype() == DataType::kFloat32 ? CUBLAS_PEDANTIC_MATH : CUBLAS_DEFAULT_MATH),
                  "cublasSetMathMode"));
  KILN_RETURN_IF_ERROR(cuda::check(
      cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out), static_cast<int>(n), static_cast<int>(k), &one,
                   w.raw(), dt, static_cast<int>(k), x.raw(), dt, static_cast<int>(k), &zero, y.raw(), dt,
                   static_cast<int>(out), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx"));
  if (ctx.src.size() > 2 && ctx.src[2].defined()) {
    KILN_ASSIGN_OR_RETURN(cudnnHandle_t dh, cuda::cudnn_handle(ctx.stream));
    cuda::TensorDescriptor yd, bd;
    KILN_RETURN_IF_ERROR(yd.set(y.dtype(), Dims{n, out, 1, 1}));
    KILN_RETURN_IF_ERROR(bd.set(y.dtype(), Dims{1, out, 1, 1}));
    KILN_RETURN_IF_ERROR(
        cuda::check(cudnnAddTensor(dh, &one, bd.get(), ctx.src[2].raw(), &one, yd.get(), y.raw()), "cudnnAddTensor"));
  }
  return Status::ok();
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.cublas.fully_connected",
    .op = "FullyConnected",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) -> Status {
      if (call.attrs_as<FullyConnectedAttrs>().fused.on || call.has_input(kGemmResidualInput))
        return unsupported("cuBLAS fully connected computes no fused residual or activation");
      return require_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16});
    },
    .create = stateless(run_fully_connected),
});

}  // namespace
}  // namespace kiln
