// CUDA RoiAlign: one thread per output cell (region, channel, bin) recomputes its region's sampling grid (roi_grid)
// and pools its bin with kernels/ref/roi_align.h's pool_bin (the reference's code: double, products rounded before
// the sums as on the host, each sample rounded to float).
// float32/float16/bfloat16 (x and rois of one type). A batch index outside the batch (an error in the
// reference) cannot fail the kernel: that region's cells are 0.
#include <cstdint>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/cuda/types.cuh"
#include "kernels/ref/roi_align.h"

namespace kiln {
namespace {

struct RoiParams {
  RoiGridParams grid;
  bool max_mode = false;
  int64_t batch = 0, channels = 0, h = 0, w = 0;
};

template <class T, class I>
__global__ void roi_align_kernel(RoiParams p, const T* __restrict__ x, const T* __restrict__ rois,
                                 const I* __restrict__ batch_indices, T* __restrict__ y, int64_t n) {
  const int64_t oh = p.grid.output_height, ow = p.grid.output_width;
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    const int64_t pw = i % ow;
    const int64_t ph = (i / ow) % oh;
    const int64_t ch = (i / (ow * oh)) % p.channels;
    const int64_t r = i / (ow * oh * p.channels);
    const int64_t b = static_cast<int64_t>(batch_indices[r]);
    if (b < 0 || b >= p.batch) {
      y[i] = cuda::store<T>(0.f);
      continue;
    }
    double roi[4];
    for (int k = 0; k < 4; ++k) roi[k] = static_cast<double>(cuda::load(rois[r * 4 + k]));
    const RoiGrid g = roi_grid(p.grid, roi);
    const T* plane = x + (b * p.channels + ch) * p.h * p.w;
    const int64_t w = p.w;
    auto at = [plane, w](int64_t yy, int64_t xx) { return static_cast<double>(cuda::load(plane[yy * w + xx])); };
    y[i] = cuda::store<T>(roi_align::pool_bin(g, oh, ow, ph, pw, p.max_mode, p.h, p.w, at));
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
  p.grid = roi_grid_params(a);
  p.max_mode = a.mode == RoiAlignMode::kMax;
  p.batch = x.dims()[0];
  p.channels = x.dims()[1];
  p.h = x.dims()[2];
  p.w = x.dims()[3];
  if (n != rois.dims()[0] * p.channels * a.output_height * a.output_width)
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
