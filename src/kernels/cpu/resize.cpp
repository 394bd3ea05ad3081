// CPU Resize: per-axis tap tables (index + weight per output position) built once per run, then
// each thread fills whole output rows; oneDNN resampling where its coordinate mapping equals ONNX's.
#include <cmath>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/onednn.h"
#include "kernels/ref/resize.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

struct AxisTable {
  std::vector<int> n;          // taps per output position (0: outside, extrapolate)
  std::vector<int64_t> index;  // 4 per position, already times the input stride
  std::vector<float> weight;   // 4 per position
};

AxisTable make_table(const ResizeAttrs& a, const ResizeAxis& ax, int64_t stride) {
  AxisTable t;
  t.n.resize(ax.out);
  t.index.resize(ax.out * 4);
  t.weight.resize(ax.out * 4);
  for (int64_t x = 0; x < ax.out; ++x) {
    const ref::ResizeTaps taps = ref::resize_taps(a, ax, x);
    int n = 0;
    for (int k = 0; k < taps.n && !taps.outside; ++k) {
      if (taps.weight[k] == 0 && !(k == taps.n - 1 && n == 0)) continue;  // keep at least one tap
      t.index[x * 4 + n] = taps.index[k] * stride;
      t.weight[x * 4 + n] = static_cast<float>(taps.weight[k]);
      ++n;
    }
    t.n[x] = n;
  }
  return t;
}

Result<std::vector<ResizeAxis>> plan_for(const KernelContext& ctx) {
  auto value = [&](int i) {
    return i < static_cast<int>(ctx.src.size()) && ctx.src[i].defined() ? &ctx.src[i] : nullptr;
  };
  return resize_plan(ctx.attrs<ResizeAttrs>(), ctx.src[0].dims(), value(1), value(2), value(3));
}

Status run_tables(KernelContext& ctx, const std::vector<ResizeAxis>& plan) {
  const auto& a = ctx.attrs<ResizeAttrs>();
  const Tensor& x = ctx.src[0];
  const Tensor& y = ctx.dst[0];
  const int r = x.rank();
  if (y.numel() == 0) return Status::ok();
  const Dims strides = contiguous_strides(x.dims());
  std::vector<AxisTable> tables;
  tables.reserve(r);
  for (int d = 0; d < r; ++d) tables.push_back(make_table(a, plan[d], strides[d]));
  const float* src = x.data<float>();
  float* dst = y.data<float>();
  const int64_t width = y.dims()[r - 1];
  const int64_t rows = y.numel() / width;
  const AxisTable& last = tables[r - 1];
  const float extrapolation = a.extrapolation_value;
  parallel_for(rows, std::max<int64_t>(1, 4096 / width), [&](int64_t row) {
    float* out = dst + row * width;
    int64_t pos[kMaxRank];
    int64_t rest = row;
    bool outside = false;
    for (int d = r - 2; d >= 0; --d) {
      pos[d] = rest % y.dims()[d];
      rest /= y.dims()[d];
      outside |= tables[d].n[pos[d]] == 0;
    }
    if (outside) {
      for (int64_t w = 0; w < width; ++w) out[w] = extrapolation;
      return;
    }
    for (int64_t w = 0; w < width; ++w) out[w] = 0.f;
    int pick[kMaxRank] = {};
    while (true) {
      float wt = 1.f;
      int64_t base = 0;
      for (int d = 0; d < r - 1; ++d) {
        wt *= tables[d].weight[pos[d] * 4 + pick[d]];
        base += tables[d].index[pos[d] * 4 + pick[d]];
      }
      const float* in = src + base;
      for (int64_t w = 0; w < width; ++w) {
        const int n = last.n[w];
        const int64_t* li = &last.index[w * 4];
        const float* lw = &last.weight[w * 4];
        float acc = 0.f;
        for (int k = 0; k < n; ++k) acc += lw[k] * in[li[k]];
        out[w] += wt * acc;
      }
      int d = r - 2;
      while (d >= 0 && ++pick[d] == tables[d].n[pos[d]]) pick[d--] = 0;
      if (d < 0) break;
    }
    for (int64_t w = 0; w < width; ++w)
      if (last.n[w] == 0) out[w] = extrapolation;
  });
  return Status::ok();
}

Status run_own(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(auto plan, plan_for(ctx));
  return run_tables(ctx, plan);
}

Status float_only(const OpCall& call) {
  if (call.inputs[0].dtype != DataType::kFloat32)
    return unsupported("input 0 is ", dtype_name(call.inputs[0].dtype), "; CPU Resize takes float32");
  if (call.attrs_as<ResizeAttrs>().antialias) return unsupported("Resize with antialias is not implemented");
  return Status::ok();
}

// What oneDNN resampling computes: half_pixel coordinates with factor out/in, edge clamping;
// nearest rounds halves up. Matching ONNX modes are checked from the shapes here and from the
// scale values at run time (the kernel falls back to the table code when they differ).
Status onednn_supports(const OpCall& call) {
  KILN_RETURN_IF_ERROR(float_only(call));
  const auto& a = call.attrs_as<ResizeAttrs>();
  const Dims& in = call.inputs[0].dims;
  const Dims& out = call.outputs[0].dims;
  if (in.rank() < 3 || in.rank() > 5) return unsupported("oneDNN resampling needs rank 3 to 5, got ", in.rank());
  if (!in.is_static() || !out.is_static()) return unsupported("oneDNN resampling needs static shapes");
  if (in[0] != out[0] || in[1] != out[1]) return unsupported("oneDNN resampling keeps the N and C dims");
  using CM = ResizeCoordinateMode;
  const CM cm = a.coordinate_transformation_mode;
  bool int_up = true, pow2_down = true;
  for (int d = 2; d < in.rank(); ++d) {
    if (in[d] == 0 || out[d] == 0) return unsupported("oneDNN resampling needs non-empty spatial dims");
    if (cm == CM::kPytorchHalfPixel && out[d] == 1)
      return unsupported("pytorch_half_pixel with output length 1 is not oneDNN's mapping");
    int_up &= out[d] % in[d] == 0;
    const int64_t f = out[d] <= in[d] && in[d] % out[d] == 0 ? in[d] / out[d] : 0;
    pow2_down &= f > 0 && (f & (f - 1)) == 0;
  }
  const bool half_pixel = cm == CM::kHalfPixel || cm == CM::kPytorchHalfPixel || cm == CM::kHalfPixelSymmetric;
  if (a.mode == ResizeMode::kLinear) {
    if (!half_pixel)
      return unsupported("oneDNN linear resampling only matches half_pixel coordinates, not ", enum_name(cm));
    return Status::ok();
  }
  if (a.mode != ResizeMode::kNearest) return unsupported("oneDNN has no ", enum_name(a.mode), " resampling");
  const ResizeNearestMode nm = a.nearest_mode;
  if (half_pixel && nm == ResizeNearestMode::kRoundPreferCeil && (int_up || pow2_down)) return Status::ok();
  if (half_pixel && nm == ResizeNearestMode::kRoundPreferFloor && int_up) return Status::ok();
  if (cm == CM::kAsymmetric && nm == ResizeNearestMode::kFloor && int_up) return Status::ok();
  return unsupported(
      "oneDNN nearest resampling matches ONNX only for half_pixel + round_prefer_ceil (integer up or "
      "power-of-two down factors), half_pixel + round_prefer_floor or asymmetric + floor (integer up "
      "factors); got ",
      enum_name(cm), " + ", enum_name(nm));
}

class OnednnResize final : public Kernel {
 public:
  Status run(KernelContext& ctx) override {
    KILN_ASSIGN_OR_RETURN(auto plan, plan_for(ctx));
    // oneDNN's factor is out/in: other scale values (e.g. 0.6f for 5 -> 3) take the table path.
    for (int d = 0; d < ctx.src[0].rank(); ++d) {
      const bool identity = d < 2 ? plan[d].scale == 1.0 : true;
      if (!identity || plan[d].scale * static_cast<double>(plan[d].in) != static_cast<double>(plan[d].out))
        return run_tables(ctx, plan);
    }
    const Tensor& x = ctx.src[0];
    return onednn::guard("resampling", [&] {
      if (!prim_ || x.dims() != dims_) {
        src_desc_ = onednn::plain_desc(x.dims(), DataType::kFloat32);
        dst_desc_ = onednn::plain_desc(ctx.dst[0].dims(), DataType::kFloat32);
        const auto algo = ctx.attrs<ResizeAttrs>().mode == ResizeMode::kLinear ? dnnl::algorithm::resampling_linear
                                                                               : dnnl::algorithm::resampling_nearest;
        dnnl::resampling_forward::desc d(dnnl::prop_kind::forward_inference, algo, src_desc_, dst_desc_);
        prim_ = dnnl::resampling_forward(dnnl::resampling_forward::primitive_desc(d, onednn::engine()));
        dims_ = x.dims();
      }
      prim_->execute(onednn::stream(), {{DNNL_ARG_SRC, onednn::memory(src_desc_, x)},
                                        {DNNL_ARG_DST, onednn::memory(dst_desc_, ctx.dst[0])}});
      onednn::stream().wait();
    });
  }

 private:
  Dims dims_;
  dnnl::memory::desc src_desc_, dst_desc_;
  std::optional<dnnl::resampling_forward> prim_;
};

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.onednn.resize",
    .op = "Resize",
    .backend = Backend::kCpu,
    .priority = 10,
    .supports = onednn_supports,
    .create = [](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<OnednnResize>());
    },
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.resize",
    .op = "Resize",
    .backend = Backend::kCpu,
    .priority = 5,
    .supports = float_only,
    .create = stateless(run_own),
});

}  // namespace
}  // namespace kiln
