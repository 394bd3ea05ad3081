// CPU pooling: oneDNN pooling_v2 for max and average in float32; own code for Lp pooling, max
// indices, 8-bit integers and average pooling that counts ceil-mode overhang as padding.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/onednn.h"
#include "kernels/registry.h"
#include "ops/pooling/pooling.h"

namespace kiln {
namespace {

constexpr int64_t kParallelWork = 1 << 15;  // element visits below which threads cost more than they save

// oneDNN's right padding: enough for the last window (ceil mode), never less than the pads asked for.
int64_t onednn_right_pad(const PoolingAttrs& a, const PoolingGeometry& g, int i) {
  return a.ceil_mode ? std::max(g.pad_end[i], g.right_reach(i)) : g.pad_end[i];
}

// The oneDNN average divisor with include_padding is the whole kernel; ONNX (like PyTorch) does not
// count windows' overhang past the right padding in ceil mode.
bool has_ceil_overhang(const PoolingGeometry& g) {
  for (int i = 0; i < g.spatial; ++i)
    if (g.right_reach(i) > g.pad_end[i]) return true;
  return false;
}

Result<dnnl::pooling_v2_forward::primitive_desc> pooling_pd(const PoolingAttrs& a, const PoolingGeometry& g,
                                                            const Dims& x, const Dims& y) {
  dnnl::memory::dims strides, kernel, dilation, pad_l, pad_r;
  for (int i = 0; i < g.spatial; ++i) {
    strides.push_back(g.stride[i]);
    kernel.push_back(g.kernel[i]);
    dilation.push_back(g.dilation[i] - 1);  // oneDNN counts dilation from 0
    pad_l.push_back(g.pad_begin[i]);
    pad_r.push_back(onednn_right_pad(a, g, i));
  }
  using alg = dnnl::algorithm;
  const alg algo = a.mode == PoolingMode::kMax ? alg::pooling_max
                   : a.count_include_pad       ? alg::pooling_avg_include_padding
                                               : alg::pooling_avg_exclude_padding;
  std::optional<dnnl::pooling_v2_forward::primitive_desc> pd;
  Status s = onednn::guard("pooling", [&] {
    // channels_last: x and y are [N, H, W, C], which oneDNN sees as NCHW over NHWC memory.
    const auto desc = [&](const Dims& d) {
      return a.channels_last ? onednn::nhwc_desc(d, DataType::kFloat32) : onednn::plain_desc(d, DataType::kFloat32);
    };
    dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, algo, desc(x), desc(y), strides, kernel,
                                     dilation, pad_l, pad_r);
    pd.emplace(d, onednn::engine());
  });
  if (!s.is_ok()) return s;
  return *pd;
}

Status onednn_supports(const OpCall& call) {
  KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32}));
  const auto& a = call.attrs_as<PoolingAttrs>();
  if (a.mode == PoolingMode::kLp) return unsupported("oneDNN has no Lp pooling");
  if (a.return_indices) return unsupported("oneDNN's max pooling workspace is not ONNX indices");
  const Dims& x = call.inputs[0].dims;
  if (x.rank() > 5) return unsupported("oneDNN pools at most 3 spatial dims");
  if (!x.is_static()) return Status::ok();
  KILN_ASSIGN_OR_RETURN(PoolingGeometry g, pooling_geometry(a, x));
  if (a.mode == PoolingMode::kAverage && a.count_include_pad && has_ceil_overhang(g))
    return unsupported("oneDNN counts ceil-mode overhang in the average divisor");
  if (x.numel() == 0) return unsupported("oneDNN rejects empty tensors");
  auto pd = pooling_pd(a, g, x, call.outputs[0].dims);
  if (!pd) return unsupported("oneDNN rejects this pooling: ", pd.status().message());
  return Status::ok();
}

class OnednnPooling final : public Kernel {
 public:
  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.src[0];
    if (!prim_ || x.dims() != dims_) {
      const auto& a = ctx.attrs<PoolingAttrs>();
      KILN_ASSIGN_OR_RETURN(PoolingGeometry g, pooling_geometry(a, x.dims()));
      KILN_ASSIGN_OR_RETURN(auto pd, pooling_pd(a, g, x.dims(), ctx.dst[0].dims()));
      KILN_RETURN_IF_ERROR(onednn::guard("pooling", [&] {
        prim_ = dnnl::pooling_v2_forward(pd);
        src_desc_ = pd.src_desc();
        dst_desc_ = pd.dst_desc();
        const size_t ws = pd.workspace_desc().get_size();
        workspace_ =
            ws ? std::optional<dnnl::memory>(dnnl::memory(pd.workspace_desc(), onednn::engine())) : std::nullopt;
      }));
      dims_ = x.dims();
    }
    return onednn::guard("pooling", [&] {
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, onednn::memory(src_desc_, x)},
                                                 {DNNL_ARG_DST, onednn::memory(dst_desc_, ctx.dst[0])}};
      if (workspace_) args.emplace(DNNL_ARG_WORKSPACE, *workspace_);
      prim_->execute(onednn::stream(), args);
      onednn::stream().wait();
    });
  }

 private:
  Dims dims_;
  dnnl::memory::desc src_desc_, dst_desc_;
  std::optional<dnnl::pooling_v2_forward> prim_;
  std::optional<dnnl::memory> workspace_;
};

// Geometry padded to 3 spatial dims (leading dims of size 1), for the own-code loops.
struct Window3 {
  int64_t in[3], out[3], kernel[3], stride[3], dilation[3], pad_begin[3], pad_end[3];
  explicit Window3(const PoolingGeometry& g) {
    const int shift = 3 - g.spatial;
    for (int i = 0; i < 3; ++i) {
      const int j = i - shift;
      const bool real = j >= 0;
      in[i] = real ? g.in[j] : 1;
      out[i] = real ? g.out[j] : 1;
      kernel[i] = real ? g.kernel[j] : 1;
      stride[i] = real ? g.stride[j] : 1;
      dilation[i] = real ? g.dilation[j] : 1;
      pad_begin[i] = real ? g.pad_begin[j] : 0;
      pad_end[i] = real ? g.pad_end[j] : 0;
    }
  }
};

// Taps [lo, hi) of a window starting at `start` whose positions start + j * dilation lie in [begin, end).
inline void tap_range(int64_t start, int64_t dilation, int64_t kernel, int64_t begin, int64_t end, int64_t& lo,
                      int64_t& hi) {
  lo = start >= begin ? 0 : (begin - start + dilation - 1) / dilation;
  hi = end > start ? std::min(kernel, (end - start + dilation - 1) / dilation) : 0;
  if (hi < lo) hi = lo;
}

template <class T>
void pool_planes(const PoolingAttrs& a, const Window3& w, int64_t planes, const T* src, T* dst, int64_t* indices) {
  const int64_t in_plane = w.in[0] * w.in[1] * w.in[2];
  const int64_t out_plane = w.out[0] * w.out[1] * w.out[2];
  const float p = static_cast<float>(a.p);
  // One task per (plane, output depth row); small problems stay on the calling thread.
  const int64_t task_work = std::max<int64_t>(w.out[1] * w.out[2] * w.kernel[0] * w.kernel[1] * w.kernel[2], 1);
  parallel_for(planes * w.out[0], std::max<int64_t>(kParallelWork / task_work, 1), [&](int64_t task) {
    const int64_t nc = task / w.out[0], od = task % w.out[0];
    const T* plane = src + nc * in_plane;
    const int64_t sd = od * w.stride[0] - w.pad_begin[0];
    int64_t d_lo, d_hi, dp_lo, dp_hi;
    tap_range(sd, w.dilation[0], w.kernel[0], 0, w.in[0], d_lo, d_hi);
    tap_range(sd, w.dilation[0], w.kernel[0], -w.pad_begin[0], w.in[0] + w.pad_end[0], dp_lo, dp_hi);
    for (int64_t oh = 0; oh < w.out[1]; ++oh) {
      const int64_t sh = oh * w.stride[1] - w.pad_begin[1];
      int64_t h_lo, h_hi, hp_lo, hp_hi;
      tap_range(sh, w.dilation[1], w.kernel[1], 0, w.in[1], h_lo, h_hi);
      tap_range(sh, w.dilation[1], w.kernel[1], -w.pad_begin[1], w.in[1] + w.pad_end[1], hp_lo, hp_hi);
      for (int64_t ow = 0; ow < w.out[2]; ++ow) {
        const int64_t sw = ow * w.stride[2] - w.pad_begin[2];
        int64_t w_lo, w_hi, wp_lo, wp_hi;
        tap_range(sw, w.dilation[2], w.kernel[2], 0, w.in[2], w_lo, w_hi);
        tap_range(sw, w.dilation[2], w.kernel[2], -w.pad_begin[2], w.in[2] + w.pad_end[2], wp_lo, wp_hi);
        const int64_t o = nc * out_plane + (od * w.out[1] + oh) * w.out[2] + ow;
        if (a.mode == PoolingMode::kMax) {
          T best = std::numeric_limits<T>::lowest();
          if constexpr (std::is_floating_point_v<T>) best = -std::numeric_limits<T>::infinity();
          int64_t best_at = -1;
          for (int64_t kd = d_lo; kd < d_hi; ++kd)
            for (int64_t kh = h_lo; kh < h_hi; ++kh) {
              const int64_t row = ((sd + kd * w.dilation[0]) * w.in[1] + sh + kh * w.dilation[1]) * w.in[2] + sw;
              for (int64_t kw = w_lo; kw < w_hi; ++kw) {
                const int64_t at = row + kw * w.dilation[2];
                if (best_at < 0 || plane[at] > best) {
                  best = plane[at];
                  best_at = at;
                }
              }
            }
          dst[o] = best;
          if (indices) indices[o] = best_at < 0 ? -1 : nc * in_plane + best_at;
          continue;
        }
        float sum = 0.f;
        for (int64_t kd = d_lo; kd < d_hi; ++kd)
          for (int64_t kh = h_lo; kh < h_hi; ++kh) {
            const T* row = plane + ((sd + kd * w.dilation[0]) * w.in[1] + sh + kh * w.dilation[1]) * w.in[2] + sw;
            if (a.mode == PoolingMode::kAverage) {
              for (int64_t kw = w_lo; kw < w_hi; ++kw) sum += static_cast<float>(row[kw * w.dilation[2]]);
            } else if (a.p == 1) {
              for (int64_t kw = w_lo; kw < w_hi; ++kw) sum += std::fabs(static_cast<float>(row[kw * w.dilation[2]]));
            } else if (a.p == 2) {
              for (int64_t kw = w_lo; kw < w_hi; ++kw) {
                const float v = static_cast<float>(row[kw * w.dilation[2]]);
                sum += v * v;
              }
            } else {
              for (int64_t kw = w_lo; kw < w_hi; ++kw)
                sum += std::pow(std::fabs(static_cast<float>(row[kw * w.dilation[2]])), p);
            }
          }
        float y;
        if (a.mode == PoolingMode::kAverage) {
          const int64_t count = a.count_include_pad ? (dp_hi - dp_lo) * (hp_hi - hp_lo) * (wp_hi - wp_lo)
                                                    : (d_hi - d_lo) * (h_hi - h_lo) * (w_hi - w_lo);
          y = count ? sum / static_cast<float>(count) : 0.f;
        } else {
          y = a.p == 1 ? sum : a.p == 2 ? std::sqrt(sum) : std::pow(sum, 1.f / p);
        }
        dst[o] = static_cast<T>(y);
      }
    }
  });
}

// 2-D float32 max pooling without dilation or indices (a CNN's stem pool, NCHW): per output row, the column maxima
// of the window's rows first (contiguous, vectorized), then the maxima of each window's columns. The general loops
// above took 4.8 ms for ResNet-50's 3x3 stride-2 pool at batch 1 (oneDNN's plain-layout pooling, 9.2 ms).
bool plain_max_2d(const PoolingAttrs& a, const PoolingGeometry& g) {
  return a.mode == PoolingMode::kMax && !a.return_indices && !a.global && g.spatial == 2 && g.dilation[0] == 1 &&
         g.dilation[1] == 1;
}

void max_pool_2d(const Window3& w, int64_t planes, const float* src, float* dst) {
  const int64_t in_h = w.in[1], in_w = w.in[2], out_h = w.out[1], out_w = w.out[2];
  const int64_t task_work = std::max<int64_t>(out_w * w.kernel[1] + in_w * w.kernel[1], 1);
  parallel_for(planes * out_h, std::max<int64_t>(kParallelWork / task_work, 1), [&](int64_t task) {
    const int64_t nc = task / out_h, oh = task % out_h;
    const float* plane = src + nc * in_h * in_w;
    float* out = dst + (nc * out_h + oh) * out_w;
    const int64_t sh = oh * w.stride[1] - w.pad_begin[1];
    int64_t h_lo, h_hi;
    tap_range(sh, 1, w.kernel[1], 0, in_h, h_lo, h_hi);
    constexpr float kNone = -std::numeric_limits<float>::infinity();
    if (h_lo == h_hi) {  // the window lies in the padding
      std::fill(out, out + out_w, kNone);
      return;
    }
    thread_local std::vector<float> columns;
    columns.assign(plane + (sh + h_lo) * in_w, plane + (sh + h_lo + 1) * in_w);
    for (int64_t kh = h_lo + 1; kh < h_hi; ++kh) {
      const float* row = plane + (sh + kh) * in_w;
      for (int64_t x = 0; x < in_w; ++x) columns[x] = row[x] > columns[x] ? row[x] : columns[x];
    }
    for (int64_t ow = 0; ow < out_w; ++ow) {
      const int64_t sw = ow * w.stride[2] - w.pad_begin[2];
      int64_t w_lo, w_hi;
      tap_range(sw, 1, w.kernel[2], 0, in_w, w_lo, w_hi);
      float best = w_lo < w_hi ? columns[sw + w_lo] : kNone;
      for (int64_t kw = w_lo + 1; kw < w_hi; ++kw) best = columns[sw + kw] > best ? columns[sw + kw] : best;
      out[ow] = best;
    }
  });
}

Status run_own_pooling(KernelContext& ctx) {
  const auto& a = ctx.attrs<PoolingAttrs>();
  KILN_ASSIGN_OR_RETURN(PoolingGeometry g, pooling_geometry(a, ctx.src[0].dims()));
  if (ctx.src[0].dtype() == DataType::kFloat32 && plain_max_2d(a, g)) {
    max_pool_2d(Window3(g), g.batch * g.channels, ctx.src[0].data<float>(), ctx.dst[0].data<float>());
    return Status::ok();
  }
  if (a.global) {
    // Any number of spatial dims pool as one flattened dim; flat indices stay the same.
    for (int i = 1; i < g.spatial; ++i) g.in[0] *= g.in[i];
    g.kernel[0] = g.in[0];
    g.spatial = 1;
  }
  const Window3 w(g);
  const int64_t planes = g.batch * g.channels;
  int64_t* indices = a.return_indices ? ctx.dst[1].data<int64_t>() : nullptr;
  switch (ctx.src[0].dtype()) {
    case DataType::kFloat32:
      pool_planes(a, w, planes, ctx.src[0].data<float>(), ctx.dst[0].data<float>(), indices);
      break;
    case DataType::kInt8:
      pool_planes(a, w, planes, ctx.src[0].data<int8_t>(), ctx.dst[0].data<int8_t>(), indices);
      break;
    case DataType::kUInt8:
      pool_planes(a, w, planes, ctx.src[0].data<uint8_t>(), ctx.dst[0].data<uint8_t>(), indices);
      break;
    default: return unsupported("cpu.pooling has no ", dtype_name(ctx.src[0].dtype()), " path");
  }
  return Status::ok();
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.onednn.pooling",
    .op = "Pooling",
    .backend = Backend::kCpu,
    .priority = 10,
    .supports = onednn_supports,
    .create = [](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<OnednnPooling>());
    },
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.pooling",
    .op = "Pooling",
    .backend = Backend::kCpu,
    .priority = 5,
    .supports = [](const OpCall& call) -> Status {
      const DataType d = call.inputs[0].dtype;
      if (d != DataType::kFloat32 && d != DataType::kInt8 && d != DataType::kUInt8)
        return unsupported("cpu.pooling takes float32, int8 or uint8 input, not ", dtype_name(d));
      if (call.attrs_as<PoolingAttrs>().channels_last)
        return unsupported("cpu.pooling takes NCHW tensors, not channels_last (NHWC)");
      if (call.inputs[0].dims.rank() > 5 && !call.attrs_as<PoolingAttrs>().global)
        return unsupported("cpu.pooling handles at most 3 spatial dims");
      return Status::ok();
    },
    .create = stateless(run_own_pooling),
});

}  // namespace
}  // namespace kiln
