// CUDA RoiAlign: one thread per output cell (region, channel, bin) recomputes its region's sampling grid
// (roi_align_grid, products rounded before the sums as on the host) and averages or maxes its bilinear samples
// with the edge rules of kernels/ref/roi_align.h, in double with each sample rounded to float as there.
// float32/float16/bfloat16 (x and rois of one type). A batch index outside the batch (an error in the
// reference) cannot fail the kernel: that region's cells are 0.
#include <cstdint>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/cuda/types.cuh"
#include "ops/roi_align/roi_align.h"

namespace kiln {
namespace {

struct RoiParams {
  bool half_pixel = true;
  bool max_mode = false;
  double scale = 1.0;
  int64_t sampling_ratio = 0;
  int64_t oh = 1, ow = 1;
  int64_t batch = 0, channels = 0, h = 0, w = 0;
};

template <class T>
__device__ float roi_sample(const T* __restrict__ plane, int64_t h, int64_t w, double y, double x, bool max_mode) {
  if (h <= 0 || w <= 0 || !isfinite(y) || !isfinite(x)) return 0.f;
  if (y < -1.0 || y > static_cast<double>(h) || x < -1.0 || x > static_cast<double>(w)) return 0.f;
  y = fmax(y, 0.0);
  x = fmax(x, 0.0);
  int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x), y1, x1;
  if (y0 >= h - 1) {
    y0 = y1 = h - 1;
    y = static_cast<double>(y0);
  } else {
    y1 = y0 + 1;
  }
  if (x0 >= w - 1) {
    x0 = x1 = w - 1;
    x = static_cast<double>(x0);
  } else {
    x1 = x0 + 1;
  }
  const double ly = y - y0, lx = x - x0, hy = 1 - ly, hx = 1 - lx;
  auto at = [&](int64_t yy, int64_t xx) { return static_cast<double>(cuda::load(plane[yy * w + xx])); };
  const double v00 = hy * hx * at(y0, x0), v01 = hy * lx * at(y0, x1);
  const double v10 = ly * hx * at(y1, x0), v11 = ly * lx * at(y1, x1);
  if (max_mode) return static_cast<float>(fmax(fmax(v00, v01), fmax(v10, v11)));
  return static_cast<float>(v00 + v01 + v10 + v11);
}

// Samples per bin side (roi_align_grid's side()).
__device__ int64_t grid_side(const RoiParams& p, double extent, int64_t out) {
  if (p.sampling_ratio > 0) return p.sampling_ratio;
  const double n = ceil(extent / static_cast<double>(out));
  if (!isfinite(n) || n <= 0) return 0;
  constexpr double kMaxSide = double(int64_t{1} << 30);
  return static_cast<int64_t>(fmin(n, kMaxSide));
}

template <class T, class I>
__global__ void roi_align_kernel(RoiParams p, const T* __restrict__ x, const T* __restrict__ rois,
                                 const I* __restrict__ batch_indices, T* __restrict__ y, int64_t n) {
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    const int64_t pw = i % p.ow;
    const int64_t ph = (i / p.ow) % p.oh;
    const int64_t ch = (i / (p.ow * p.oh)) % p.channels;
    const int64_t r = i / (p.ow * p.oh * p.channels);
    const int64_t b = static_cast<int64_t>(batch_indices[r]);
    if (b < 0 || b >= p.batch) {
      y[i] = cuda::store<T>(0.f);
      continue;
    }
    const double offset = p.half_pixel ? 0.5 : 0.0;
    double roi[4];
    for (int k = 0; k < 4; ++k) roi[k] = static_cast<double>(cuda::load(rois[r * 4 + k]));
    const double x_start = __dmul_rn(roi[0], p.scale) - offset;
    const double y_start = __dmul_rn(roi[1], p.scale) - offset;
    double roi_w = __dmul_rn(roi[2], p.scale) - offset - x_start;
    double roi_h = __dmul_rn(roi[3], p.scale) - offset - y_start;
    if (!p.half_pixel) {
      roi_w = fmax(roi_w, 1.0);
      roi_h = fmax(roi_h, 1.0);
    }
    int64_t gh = 0, gw = 0;
    if (isfinite(x_start) && isfinite(y_start) && isfinite(roi_w) && isfinite(roi_h)) {
      gh = grid_side(p, roi_h, p.oh);
      gw = grid_side(p, roi_w, p.ow);
    }
    const int64_t grid_h = gw > 0 ? gh : 0, grid_w = gh > 0 ? gw : 0;
    const double bin_h = roi_h / p.oh, bin_w = roi_w / p.ow;
    const double count = static_cast<double>(grid_h * grid_w > 1 ? grid_h * grid_w : 1);
    const T* plane = x + (b * p.channels + ch) * p.h * p.w;
    double acc = 0.0;
    bool first = true;
    for (int64_t iy = 0; iy < grid_h; ++iy) {
      const double yy =
          __dadd_rn(y_start + __dmul_rn(static_cast<double>(ph), bin_h), __dmul_rn(iy + 0.5, bin_h) / grid_h);
      for (int64_t ix = 0; ix < grid_w; ++ix) {
        const double xx =
            __dadd_rn(x_start + __dmul_rn(static_cast<double>(pw), bin_w), __dmul_rn(ix + 0.5, bin_w) / grid_w);
        const double v = roi_sample(plane, p.h, p.w, yy, xx, p.max_mode);
        if (p.max_mode)
          acc = first ? v : fmax(acc, v);
        else
          acc += v;
        first = false;
      }
    }
    y[i] = cuda::store<T>(static_cast<float>(p.max_mode ? acc : acc / count));
  }
}

Status run_roi_align(KernelContext& ctx) {
  const auto& a = ctx.attrs<RoiAlignAttrs>();
  const Tensor& x = ctx.src[0];
  const Tensor& rois = ctx.src[1];
  const Tensor& batch_indices = ctx.src[2];
  Tensor& y = ctx.dst[0];
  const int64_t n = y.numel();
  if (n == 0) return Status::ok();
  if (x.rank() != 4 || rois.rank() != 2 || rois.dims()[1] != 4 || batch_indices.numel() != rois.dims()[0])
    return invalid_argument("RoiAlign: x ", x.dims().to_string(), ", rois ", rois.dims().to_string(),
                            " and batch_indices ", batch_indices.dims().to_string(),
                            " must be [N, C, H, W], [R, 4] and [R]");
  if (a.output_height < 1 || a.output_width < 1)
    return invalid_argument("RoiAlign: output_height and output_width must be >= 1");
  RoiParams p;
  p.half_pixel = a.coordinate_transformation_mode == RoiAlignCoordinateMode::kHalfPixel;
  p.max_mode = a.mode == RoiAlignMode::kMax;
  p.scale = a.spatial_scale;
  p.sampling_ratio = a.sampling_ratio;
  p.oh = a.output_height;
  p.ow = a.output_width;
  p.batch = x.dims()[0];
  p.channels = x.dims()[1];
  p.h = x.dims()[2];
  p.w = x.dims()[3];
  if (n != rois.dims()[0] * p.channels * p.oh * p.ow)
    return invalid_argument("RoiAlign: output ", y.dims().to_string(), " does not fit the inputs");
  cudaStream_t stream = cuda::native(ctx.stream);
  bool known = false;
  cuda::dispatch_float(x.dtype(), [&](auto tag) {
    using T = cuda::type_of<decltype(tag)>;
    auto launch = [&](auto ti) {
      using I = cuda::type_of<decltype(ti)>;
      roi_align_kernel<T, I><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(
          p, x.data<T>(), rois.data<T>(), batch_indices.data<I>(), y.data<T>(), n);
      known = true;
    };
    if (batch_indices.dtype() == DataType::kInt64) launch(cuda::Type<int64_t>{});
    if (batch_indices.dtype() == DataType::kInt32) launch(cuda::Type<int32_t>{});
  });
  if (!known)
    return unsupported("RoiAlign of ", dtype_name(x.dtype()), " with ", dtype_name(batch_indices.dtype()),
                       " batch_indices");
  return cuda::check(cudaGetLastError(), "roi_align kernel launch");
}

Status roi_align_supports(const OpCall& call) {
  const DataType t = call.inputs[0].dtype;
  if (t != DataType::kFloat32 && t != DataType::kFloat16 && t != DataType::kBFloat16)
    return unsupported("input 'x' is ", dtype_name(t), "; CUDA RoiAlign takes float32, float16 or bfloat16");
  if (call.inputs[1].dtype != t)
    return unsupported("rois are ", dtype_name(call.inputs[1].dtype), ", x is ", dtype_name(t));
  const DataType bi = call.inputs[2].dtype;
  if (bi != DataType::kInt64 && bi != DataType::kInt32)
    return unsupported("batch_indices are ", dtype_name(bi), " (int32 or int64 expected)");
  if (call.outputs[0].dtype != t) return unsupported("output dtype differs from input 'x'");
  return Status::ok();
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.roi_align",
    .op = "RoiAlign",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = roi_align_supports,
    .create = stateless(run_roi_align),
});

}  // namespace
}  // namespace kiln
