// CUDA GridSample (4-D): one thread per output point of one channel plane, running kernels/ref/grid_sample.h's code
// (double coordinates, nearest rounding half to even, zeros/border/reflection padding, bilinear and bicubic with
// a = -0.75), each sample rounded to float as there. float32/float16/bfloat16, x and grid of
// one type.
#include <cstdint>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/cuda/types.cuh"
#include "kernels/ref/grid_sample.h"

namespace kiln {
namespace {

// Elements of x as double on the device.
struct ToDouble {
  template <class T>
  __device__ double operator()(T v) const {
    return static_cast<double>(cuda::load(v));
  }
};

struct SampleParams {
  grid_sample::SampleMode mode;
  int64_t channels = 0, h = 0, w = 0, points = 0;
};

template <class T>
__global__ void grid_sample_kernel(SampleParams a, const T* __restrict__ x, const T* __restrict__ grid,
                                   T* __restrict__ y, int64_t n) {
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    const int64_t k = i % a.points;
    const int64_t plane = i / a.points;  // b * channels + ch
    const int64_t b = plane / a.channels;
    const auto p = grid_sample::make_plane(a.mode, x + plane * a.h * a.w, a.h, a.w, ToDouble{});
    const T* g = grid + (b * a.points + k) * 2;
    y[i] = cuda::store<T>(
        grid_sample::sample(a.mode, p, static_cast<double>(cuda::load(g[0])), static_cast<double>(cuda::load(g[1]))));
  }
}

Status run_grid_sample(KernelContext& ctx) {
  const auto& attrs = ctx.attrs<GridSampleAttrs>();
  const Tensor& x = ctx.src[0];
  const Tensor& grid = ctx.src[1];
  Tensor& y = ctx.dst[0];
  const int64_t n = y.numel();
  if (n == 0) return Status::ok();
  if (x.rank() != 4 || grid.rank() != 4 || y.rank() != 4 || grid.dims()[3] != 2 || grid.dims()[0] != x.dims()[0])
    return invalid_argument("GridSample: x ", x.dims().to_string(), " and grid ", grid.dims().to_string(),
                            " must be [N, C, H, W] and [N, H_out, W_out, 2]");
  SampleParams a;
  a.mode = grid_sample::sample_mode(attrs);
  a.channels = x.dims()[1];
  a.h = x.dims()[2];
  a.w = x.dims()[3];
  a.points = y.dims()[2] * y.dims()[3];
  if (x.numel() == 0)  // nothing to sample from: zeros (the reference would read nothing valid)
    return cuda::check(cudaMemsetAsync(y.raw(), 0, y.nbytes(), cuda::native(ctx.stream)), "cudaMemsetAsync");
  cudaStream_t stream = cuda::native(ctx.stream);
  const bool known = cuda::dispatch_float(x.dtype(), [&](auto tag) {
    using T = cuda::type_of<decltype(tag)>;
    grid_sample_kernel<T>
        <<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(a, x.data<T>(), grid.data<T>(), y.data<T>(), n);
  });
  if (!known) return unsupported("GridSample of ", dtype_name(x.dtype()));
  return cuda::check(cudaGetLastError(), "grid_sample kernel launch");
}

Status grid_sample_supports(const OpCall& call) {
  const DataType t = call.inputs[0].dtype;
  if (t != DataType::kFloat32 && t != DataType::kFloat16 && t != DataType::kBFloat16)
    return unsupported("input 'x' is ", dtype_name(t), "; CUDA GridSample takes float32, float16 or bfloat16");
  if (call.inputs[1].dtype != t)
    return unsupported("grid is ", dtype_name(call.inputs[1].dtype), ", x is ", dtype_name(t));
  if (call.outputs[0].dtype != t) return unsupported("output dtype differs from input 'x'");
  if (call.inputs[0].dims.rank() != 4) return unsupported("CUDA GridSample takes 4-D x only");
  return Status::ok();
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.grid_sample",
    .op = "GridSample",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = grid_sample_supports,
    .create = stateless(run_grid_sample),
});

}  // namespace
}  // namespace kiln
