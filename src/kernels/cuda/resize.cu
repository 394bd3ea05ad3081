// CUDA Resize (N-D): one thread per output element computes, per axis, the input taps of its coordinate (the
// definition of kernels/ref/resize.h, redone in device code: source coordinates in double without fused
// multiply-adds, so nearest rounding and tf_crop_and_resize's outside test pick what the reference picks), drops
// zero-weight taps (as the CPU kernel does) and sums the weighted products over every tap combination in double.
// Nearest (all rounding modes), N-linear and cubic (coefficient, exclude_outside), every coordinate
// transformation; float32/float16/bfloat16. Antialias is rejected: the reference has no antialias either.
#include <cstdint>
#include <vector>

#include "core/cuda_runtime.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/cuda/types.cuh"
#include "ops/resize/resize.h"

namespace kiln {
namespace {

struct AxisParams {
  int64_t in = 1, out = 1;
  double scale = 1.0, width = 1.0, roi_start = 0.0, roi_end = 1.0;
};

struct ResizeParams {
  int rank = 0;
  ResizeMode mode = ResizeMode::kNearest;
  ResizeCoordinateMode coord = ResizeCoordinateMode::kHalfPixel;
  ResizeNearestMode nearest = ResizeNearestMode::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  float extrapolation = 0.f;
  AxisParams ax[kMaxRank];
  int64_t in_strides[kMaxRank] = {};
  int64_t out_dims[kMaxRank] = {};
};

// x_original of output position x (ref::resize_source_coord); __dmul_rn/__dadd_rn keep nvcc from contracting
// products and sums into fused multiply-adds, which would round differently from the host.
__device__ double source_coord(ResizeCoordinateMode mode, const AxisParams& ax, int64_t x) {
  const double in = static_cast<double>(ax.in), width = ax.width, xr = static_cast<double>(x);
  switch (mode) {
    case ResizeCoordinateMode::kHalfPixel: return (xr + 0.5) / ax.scale - 0.5;
    case ResizeCoordinateMode::kHalfPixelSymmetric: {
      const double adjustment = static_cast<double>(ax.out) / width;
      const double offset = __dmul_rn(in / 2, 1 - adjustment);
      return __dadd_rn(offset, (xr + 0.5) / ax.scale) - 0.5;
    }
    case ResizeCoordinateMode::kPytorchHalfPixel: return width != 1 ? (xr + 0.5) / ax.scale - 0.5 : 0.0;
    case ResizeCoordinateMode::kAlignCorners: return width != 1 ? __dmul_rn(xr, in - 1) / (width - 1) : 0.0;
    case ResizeCoordinateMode::kAsymmetric: return xr / ax.scale;
    case ResizeCoordinateMode::kTfCropAndResize:
      if (width != 1) {
        const double start = __dmul_rn(ax.roi_start, in - 1);
        const double step = __dmul_rn(__dmul_rn(xr, ax.roi_end - ax.roi_start), in - 1) / (width - 1);
        return __dadd_rn(start, step);
      }
      return __dmul_rn(__dmul_rn(0.5, ax.roi_start + ax.roi_end), in - 1);
  }
  return 0.0;
}

__device__ double cubic_kernel(double s, double a) {
  s = fabs(s);
  if (s <= 1) return ((a + 2) * s - (a + 3)) * s * s + 1;
  if (s < 2) return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a;
  return 0.0;
}

// The non-zero taps of output position x on axis d (offsets already times the input stride); -1 when the
// position is outside the roi (extrapolation). At least one tap is kept.
__device__ int axis_taps(const ResizeParams& p, int d, int64_t x, int64_t* off, double* w) {
  const AxisParams& ax = p.ax[d];
  const double src = source_coord(p.coord, ax, x);
  const int64_t last = ax.in - 1;
  if (p.coord == ResizeCoordinateMode::kTfCropAndResize && (src < 0 || src > static_cast<double>(last))) return -1;
  const double fl = floor(src);
  const double frac = src - fl;
  const int64_t x0 = static_cast<int64_t>(fl);
  const int64_t stride = p.in_strides[d];
  auto clamp = [last](int64_t i) { return i < 0 ? int64_t{0} : (i > last ? last : i); };
  switch (p.mode) {
    case ResizeMode::kNearest: {
      int64_t i = x0;
      if (frac > 0) {
        switch (p.nearest) {
          case ResizeNearestMode::kRoundPreferFloor: i = frac <= 0.5 ? x0 : x0 + 1; break;
          case ResizeNearestMode::kRoundPreferCeil: i = frac < 0.5 ? x0 : x0 + 1; break;
          case ResizeNearestMode::kFloor: i = x0; break;
          case ResizeNearestMode::kCeil: i = x0 + 1; break;
        }
      }
      off[0] = clamp(i) * stride;
      w[0] = 1.0;
      return 1;
    }
    case ResizeMode::kLinear: {
      off[0] = clamp(x0) * stride;  // 1 - frac > 0 since frac < 1
      w[0] = 1 - frac;
      if (frac == 0) return 1;
      off[1] = clamp(x0 + 1) * stride;
      w[1] = frac;
      return 2;
    }
    case ResizeMode::kCubic: {
      double wt[4], sum = 0;
      for (int k = 0; k < 4; ++k) {
        const int64_t i = x0 - 1 + k;
        wt[k] = cubic_kernel(frac - (k - 1), p.cubic_a);
        if (p.exclude_outside && (i < 0 || i > last)) wt[k] = 0;
        sum += wt[k];
      }
      int n = 0;
      for (int k = 0; k < 4; ++k) {
        if (wt[k] == 0 && !(k == 3 && n == 0)) continue;
        off[n] = clamp(x0 - 1 + k) * stride;
        w[n++] = p.exclude_outside && sum != 0 ? wt[k] / sum : wt[k];
      }
      return n;
    }
  }
  return 0;
}

template <class T>
__global__ void __launch_bounds__(cuda::kThreads)
    resize_kernel(ResizeParams p, const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    int64_t off[kMaxRank][4];
    double w[kMaxRank][4];
    int taps[kMaxRank];
    bool outside = false;
    int64_t rest = i;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int64_t size = p.out_dims[d];
      const int64_t q = rest / size;
      const int64_t c = rest - q * size;
      rest = q;
      taps[d] = axis_taps(p, d, c, off[d], w[d]);
      outside |= taps[d] < 0;
    }
    if (outside) {
      y[i] = cuda::store<T>(p.extrapolation);
      continue;
    }
    // Every combination of taps, like an odometer.
    int pick[kMaxRank] = {};
    double sum = 0;
    while (true) {
      double wt = 1;
      int64_t o = 0;
      for (int d = 0; d < p.rank; ++d) {
        wt *= w[d][pick[d]];
        o += off[d][pick[d]];
      }
      sum += wt * static_cast<double>(cuda::load(x[o]));
      int d = p.rank - 1;
      while (d >= 0 && ++pick[d] == taps[d]) pick[d--] = 0;
      if (d < 0) break;
    }
    y[i] = cuda::store<T>(static_cast<float>(sum));
  }
}

// Input i on the host (roi, scales, sizes): the engine's constant, the tensor itself when on the host, else a
// copy read back once the stream's earlier work is done. Undefined when absent.
Result<Tensor> host_value(KernelContext& ctx, int i) {
  if (i >= static_cast<int>(ctx.src.size()) || !ctx.src[i].defined()) return Tensor();
  if (const Tensor* c = ctx.call.constant(i)) return *c;
  const Tensor& t = ctx.src[i];
  if (t.device().is_cpu() || t.numel() == 0) return t;
  KILN_ASSIGN_OR_RETURN(Tensor host, Tensor::empty(t.dtype(), t.dims()));
  KILN_RETURN_IF_ERROR(ctx.stream.synchronize());
  KILN_RETURN_IF_ERROR(cuda::copy(t, host));
  return host;
}

Status run_resize(KernelContext& ctx) {
  const auto& a = ctx.attrs<ResizeAttrs>();
  const Tensor& x = ctx.src[0];
  Tensor& y = ctx.dst[0];
  const int64_t n = y.numel();
  if (n == 0) return Status::ok();
  cudaStream_t stream = cuda::native(ctx.stream);
  if (x.numel() == 0)  // nothing to sample: the reference reads nothing either way; give zeros, not garbage
    return cuda::check(cudaMemsetAsync(y.raw(), 0, y.nbytes(), stream), "cudaMemsetAsync");
  Tensor host[4];
  for (int i = 1; i <= 3; ++i) {
    KILN_ASSIGN_OR_RETURN(host[i], host_value(ctx, i));
  }
  auto value = [&](int i) { return host[i].defined() ? &host[i] : nullptr; };
  KILN_ASSIGN_OR_RETURN(std::vector<ResizeAxis> plan, resize_plan(a, x.dims(), value(1), value(2), value(3)));
  ResizeParams p;
  p.rank = x.rank();
  p.mode = a.mode;
  p.coord = a.coordinate_transformation_mode;
  p.nearest = a.nearest_mode;
  p.cubic_a = a.cubic_coeff_a;
  p.exclude_outside = a.exclude_outside;
  p.extrapolation = a.extrapolation_value;
  cuda::row_major_strides(x.dims(), p.in_strides);
  for (int d = 0; d < p.rank; ++d) {
    const ResizeAxis& ax = plan[d];
    if (ax.out != y.dims()[d])
      return invalid_argument("Resize: output tensor has shape ", y.dims().to_string(), " but the inputs give ", ax.out,
                              " on axis ", d);
    p.out_dims[d] = ax.out;
    p.ax[d] = AxisParams{ax.in, ax.out, ax.scale, ax.width, ax.roi_start, ax.roi_end};
  }
  const bool known = cuda::dispatch_float(x.dtype(), [&](auto tag) {
    using T = cuda::type_of<decltype(tag)>;
    resize_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(p, x.data<T>(), y.data<T>(), n);
  });
  if (!known) return unsupported("Resize of ", dtype_name(x.dtype()));
  return cuda::check(cudaGetLastError(), "resize kernel launch");
}

Status resize_supports(const OpCall& call) {
  const DataType t = call.inputs[0].dtype;
  if (t != DataType::kFloat32 && t != DataType::kFloat16 && t != DataType::kBFloat16)
    return unsupported("input 'x' is ", dtype_name(t), "; CUDA Resize takes float32, float16 or bfloat16");
  if (call.outputs[0].dtype != t) return unsupported("output dtype differs from input 'x'");
  if (call.attrs_as<ResizeAttrs>().antialias)
    return unsupported("Resize with antialias is not implemented (no reference kernel has it)");
  return Status::ok();
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.resize",
    .op = "Resize",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = resize_supports,
    .create = stateless(run_resize),
});

}  // namespace
}  // namespace kiln
