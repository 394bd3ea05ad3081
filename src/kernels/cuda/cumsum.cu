// CUDA CumSum: along the last axis a warp scans each line in chunks of 32 (shuffles, a carry between chunks);
// along another axis a thread scans each column in order (adjacent threads read adjacent columns). Floats
// accumulate in float32, integers wrap in their own width.
#include <algorithm>
#include <cstdint>

#include "kernels/common/indexing.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/value_input.h"
#include "ops/cumsum/cumsum.h"

namespace kiln {
namespace {

// The accumulator of each element type and the conversions to and from it.
template <class T>
struct ScanTraits {
  using Acc = float;
  __device__ static Acc load(T v) { return cuda::to_float(v); }
  __device__ static T store(Acc a) { return cuda::from_float<T>(a); }
};
template <>
struct ScanTraits<int32_t> {
  using Acc = unsigned int;  // wraps like the reference's int32 sums
  __device__ static Acc load(int32_t v) { return static_cast<Acc>(v); }
  __device__ static int32_t store(Acc a) { return static_cast<int32_t>(a); }
};
template <>
struct ScanTraits<int64_t> {
  using Acc = unsigned long long;
  __device__ static Acc load(int64_t v) { return static_cast<Acc>(v); }
  __device__ static int64_t store(Acc a) { return static_cast<int64_t>(a); }
};

constexpr int kThreads = 256;

// inner == 1: one warp per line of `size` contiguous elements.
template <class T>
__global__ void __launch_bounds__(kThreads)
    cumsum_rows_kernel(const T* x, T* y, int64_t lines, int64_t size, bool exclusive, bool reverse) {
  using Tr = ScanTraits<T>;
  using Acc = typename Tr::Acc;
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int64_t per_block = kThreads / 32;
  for (int64_t line0 = blockIdx.x * per_block; line0 < lines; line0 += gridDim.x * per_block) {
    const int64_t line = line0 + warp;
    if (line >= lines) continue;  // the same for the whole warp
    const T* src = x + line * size;
    T* dst = y + line * size;
    Acc carry = 0;
    for (int64_t c0 = 0; c0 < size; c0 += 32) {
      const int64_t k = c0 + lane;
      const int64_t at = reverse ? size - 1 - k : k;
      const Acc v = k < size ? Tr::load(src[at]) : Acc(0);
      Acc incl = v;
      for (int o = 1; o < 32; o <<= 1) {
        const Acc up = __shfl_up_sync(cuda::kFullMask, incl, o);
        if (lane >= o) incl += up;
      }
      Acc excl = __shfl_up_sync(cuda::kFullMask, incl, 1);
      if (lane == 0) excl = 0;
      if (k < size) dst[at] = Tr::store(carry + (exclusive ? excl : incl));
      carry += __shfl_sync(cuda::kFullMask, incl, 31);
    }
  }
}

// inner > 1: one thread per column, in order along the axis.
template <class T>
__global__ void cumsum_cols_kernel(const T* x, T* y, int64_t outer, int64_t size, int64_t inner, bool exclusive,
                                   bool reverse) {
  using Tr = ScanTraits<T>;
  using Acc = typename Tr::Acc;
  const int64_t n = outer * inner;
  for (int64_t col = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; col < n; col += int64_t{blockDim.x} * gridDim.x) {
    const int64_t base = (col / inner) * size * inner + col % inner;
    Acc acc = 0;
    for (int64_t k = 0; k < size; ++k) {
      const int64_t i = base + (reverse ? size - 1 - k : k) * inner;
      const Acc v = Tr::load(x[i]);
      if (exclusive) {
        y[i] = Tr::store(acc);
        acc += v;
      } else {
        acc += v;
        y[i] = Tr::store(acc);
      }
    }
  }
}

template <class T>
Status launch(KernelContext& ctx, int axis) {
  const auto& a = ctx.attrs<CumSumAttrs>();
  const AxisSplit s(ctx.src[0].dims(), axis);
  const T* x = ctx.src[0].data<T>();
  T* y = ctx.dst[0].data<T>();
  cudaStream_t stream = cuda::native(ctx.stream);
  if (s.inner == 1) {
    const auto blocks = static_cast<unsigned>(std::clamp<int64_t>((s.outer + 7) / 8, 1, int64_t{1} << 20));
    cumsum_rows_kernel<T><<<blocks, kThreads, 0, stream>>>(x, y, s.outer, s.size, a.exclusive, a.reverse);
  } else {
    cumsum_cols_kernel<T><<<cuda::grid_for(s.outer * s.inner), kThreads, 0, stream>>>(x, y, s.outer, s.size, s.inner,
                                                                                      a.exclusive, a.reverse);
  }
  return cuda::check(cudaGetLastError(), "cumsum kernel launch");
}

Status run_cumsum(KernelContext& ctx) {
  const Tensor& x = ctx.src[0];
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, cuda::host_int64s(ctx, 1));
  const int64_t r = x.rank();
  if (axes.size() != 1) return invalid_argument("CumSum input 'axis' must hold one element, got ", axes.size());
  if (axes[0] < -r || axes[0] >= r)
    return invalid_argument("CumSum axis ", axes[0], " is out of range for input 'x' of shape ", x.dims().to_string());
  const int axis = static_cast<int>(axes[0] < 0 ? axes[0] + r : axes[0]);
  if (x.numel() == 0) return Status::ok();
  switch (x.dtype()) {
    case DataType::kFloat32: return launch<float>(ctx, axis);
    case DataType::kFloat16: return launch<__half>(ctx, axis);
    case DataType::kBFloat16: return launch<__nv_bfloat16>(ctx, axis);
    case DataType::kInt32: return launch<int32_t>(ctx, axis);
    case DataType::kInt64: return launch<int64_t>(ctx, axis);
    default: return unsupported("CumSum of ", dtype_name(x.dtype()));
  }
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.cumsum",
    .op = "CumSum",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports =
        [](const OpCall& call) {
          return require_dtypes(
              call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kInt32, DataType::kInt64});
        },
    .create = stateless(run_cumsum),
});

}  // namespace
}  // namespace kiln
