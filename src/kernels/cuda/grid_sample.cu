// CUDA GridSample (4-D): one thread per output point of one channel plane, following kernels/ref/grid_sample.h
// in device code (double coordinates, nearest rounding half to even, zeros/border/reflection padding, bilinear
// and bicubic with a = -0.75), each sample rounded to float as there. float32/float16/bfloat16, x and grid of
// one type.
#include <cstdint>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/cuda/types.cuh"
#include "ops/grid_sample/grid_sample.h"

namespace kiln {
namespace {

__device__ double reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    const double dx = lo - x;
    const int64_t n = static_cast<int64_t>(dx / range);
    const double r = dx - __dmul_rn(static_cast<double>(n), range);
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const int64_t n = static_cast<int64_t>(dx / range);
    const double r = dx - __dmul_rn(static_cast<double>(n), range);
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

__device__ inline int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

template <class T>
struct Plane {
  const T* data;
  int64_t h, w;
  GridSamplePadding padding;
  double lo_y, hi_y, lo_x, hi_x;

  __device__ double at(int64_t y, int64_t x) const {
    switch (padding) {
      case GridSamplePadding::kZeros:
        if (y < 0 || y >= h || x < 0 || x >= w) return 0.0;
        break;
      case GridSamplePadding::kBorder:
        y = clamp64(y, 0, h - 1);
        x = clamp64(x, 0, w - 1);
        break;
      case GridSamplePadding::kReflection:
        y = static_cast<int64_t>(reflect(static_cast<double>(y), lo_y, hi_y));
        x = static_cast<int64_t>(reflect(static_cast<double>(x), lo_x, hi_x));
        y = clamp64(y, 0, h - 1);
        x = clamp64(x, 0, w - 1);
        break;
    }
    return static_cast<double>(cuda::load(data[y * w + x]));
  }
};

__device__ void cubic_weights(double t, double* c) {
  constexpr double A = -0.75;
  auto near = [](double d) { return ((A + 2) * d - (A + 3)) * d * d + 1; };
  auto far = [](double d) { return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A; };
  c[0] = far(t + 1);
  c[1] = near(t);
  c[2] = near(1 - t);
  c[3] = far(2 - t);
}

struct SampleParams {
  GridSampleMode mode = GridSampleMode::kBilinear;
  GridSamplePadding padding = GridSamplePadding::kZeros;
  bool align_corners = false;
  int64_t channels = 0, h = 0, w = 0, points = 0;
};

template <class T>
__device__ float sample(const SampleParams& a, const Plane<T>& p, double gx, double gy) {
  auto denorm = [&](double g, int64_t len) {
    return a.align_corners ? __dmul_rn((g + 1) / 2, static_cast<double>(len - 1))
                           : (__dmul_rn(g + 1, static_cast<double>(len)) - 1) / 2;
  };
  double x = denorm(gx, p.w), y = denorm(gy, p.h);
  if (a.mode == GridSampleMode::kNearest) {
    x = nearbyint(x);
    y = nearbyint(y);
  }
  if (x < p.lo_x || x > p.hi_x) {
    if (a.padding == GridSamplePadding::kBorder) x = fmin(fmax(x, 0.0), static_cast<double>(p.w - 1));
    if (a.padding == GridSamplePadding::kReflection) x = reflect(x, p.lo_x, p.hi_x);
  }
  if (y < p.lo_y || y > p.hi_y) {
    if (a.padding == GridSamplePadding::kBorder) y = fmin(fmax(y, 0.0), static_cast<double>(p.h - 1));
    if (a.padding == GridSamplePadding::kReflection) y = reflect(y, p.lo_y, p.hi_y);
  }
  switch (a.mode) {
    case GridSampleMode::kNearest: return static_cast<float>(p.at(static_cast<int64_t>(y), static_cast<int64_t>(x)));
    case GridSampleMode::kBilinear: {
      const double x0 = floor(x), y0 = floor(y), fx = x - x0, fy = y - y0;
      const int64_t ix = static_cast<int64_t>(x0), iy = static_cast<int64_t>(y0);
      const double top = (1 - fx) * p.at(iy, ix) + fx * p.at(iy, ix + 1);
      const double bottom = (1 - fx) * p.at(iy + 1, ix) + fx * p.at(iy + 1, ix + 1);
      return static_cast<float>((1 - fy) * top + fy * bottom);
    }
    case GridSampleMode::kBicubic: {
      const double x0 = floor(x), y0 = floor(y);
      const int64_t ix = static_cast<int64_t>(x0) - 1, iy = static_cast<int64_t>(y0) - 1;
      double cx[4], cy[4];
      cubic_weights(x - x0, cx);
      cubic_weights(y - y0, cy);
      double acc = 0.0;
      for (int i = 0; i < 4; ++i) {
        double row = 0.0;
        for (int j = 0; j < 4; ++j) row += cx[j] * p.at(iy + i, ix + j);
        acc += cy[i] * row;
      }
      return static_cast<float>(acc);
    }
  }
  return 0.f;
}

template <class T>
__global__ void grid_sample_kernel(SampleParams a, const T* __restrict__ x, const T* __restrict__ grid,
                                   T* __restrict__ y, int64_t n) {
  const double shift = a.align_corners ? 0.0 : 0.5;
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    const int64_t k = i % a.points;
    const int64_t plane = i / a.points;  // b * channels + ch
    const int64_t b = plane / a.channels;
    const Plane<T> p{x + plane * a.h * a.w, a.h, a.w, a.padding, -shift, a.h - 1 + shift, -shift, a.w - 1 + shift};
    const T* g = grid + (b * a.points + k) * 2;
    y[i] = cuda::store<T>(sample(a, p, static_cast<double>(cuda::load(g[0])), static_cast<double>(cuda::load(g[1]))));
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
  a.mode = attrs.mode;
  a.padding = attrs.padding_mode;
  a.align_corners = attrs.align_corners;
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
