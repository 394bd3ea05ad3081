// CPU kernels of the training ops that are loops over independent rows, planes, channels or elements: the
// reference bodies (kernels/ref/*.h) run in parallel (OpenMP) over those units.
#include <algorithm>
#include <utility>

#include "core/parallel.h"
#include "kernels/common/indexing.h"
#include "kernels/ref/dropout.h"
#include "kernels/ref/normalization_train_run.h"
#include "kernels/ref/pooling_backward.h"
#include "kernels/ref/softmax.h"
#include "kernels/ref/softmax_backward.h"
#include "ops/dropout/dropout.h"

namespace kiln {
namespace {

// Parallel over `n` units of about `work` elements each.
auto parallel_units(int64_t work) {
  return [work](int64_t n, auto&& f) { parallel_for(n, grain_for(work), f); };
}

template <bool kLog>
Status run_softmax_backward(KernelContext& ctx) {
  const AxisSplit s = ref::softmax_split(ctx.attrs<SoftmaxAttrs>(), ctx.src[1].dims());
  const float* dy = ctx.src[0].data<float>();
  const float* y = ctx.src[1].data<float>();
  float* dx = ctx.dst[0].data<float>();
  parallel_for(s.outer * s.inner, grain_for(s.size), [&](int64_t row) {
    const int64_t o = row / s.inner, in = row % s.inner;
    ref::softmax_backward_row<kLog>(dy, y, dx, o * s.size * s.inner + in, s.size, s.inner);
  });
  return Status::ok();
}

// One plane of a 2-D max or average PoolingBackward with direct indexing (the taps in the reference's order, so
// max pooling picks the same first maximum).
void pooling_backward_plane_2d(const PoolingAttrs& a, const PoolingGeometry& g, const float* x, const float* dy,
                               float* dx) {
  const int64_t h_in = g.in[0], w_in = g.in[1], h_out = g.out[0], w_out = g.out[1];
  std::fill(dx, dx + h_in * w_in, 0.f);
  const bool max = a.mode == PoolingMode::kMax;
  for (int64_t oh = 0; oh < h_out; ++oh) {
    const int64_t h0 = oh * g.stride[0] - g.pad_begin[0];
    for (int64_t ow = 0; ow < w_out; ++ow) {
      const int64_t w0 = ow * g.stride[1] - g.pad_begin[1];
      const float grad = dy[oh * w_out + ow];
      if (max) {
        float best = 0.f;
        int64_t best_at = -1;
        for (int64_t kh = 0; kh < g.kernel[0]; ++kh) {
          const int64_t h = h0 + kh * g.dilation[0];
          if (h < 0 || h >= h_in) continue;
          for (int64_t kw = 0; kw < g.kernel[1]; ++kw) {
            const int64_t w = w0 + kw * g.dilation[1];
            if (w < 0 || w >= w_in) continue;
            const float v = x[h * w_in + w];
            if (best_at < 0 || v > best) {
              best = v;
              best_at = h * w_in + w;
            }
          }
        }
        if (best_at >= 0) dx[best_at] += grad;
        continue;
      }
      int64_t valid_h = 0, valid_w = 0, padded_h = 0, padded_w = 0;
      for (int64_t kh = 0; kh < g.kernel[0]; ++kh) {
        const int64_t h = h0 + kh * g.dilation[0];
        valid_h += h >= 0 && h < h_in;
        padded_h += h >= -g.pad_begin[0] && h < h_in + g.pad_end[0];
      }
      for (int64_t kw = 0; kw < g.kernel[1]; ++kw) {
        const int64_t w = w0 + kw * g.dilation[1];
        valid_w += w >= 0 && w < w_in;
        padded_w += w >= -g.pad_begin[1] && w < w_in + g.pad_end[1];
      }
      const int64_t divisor = a.count_include_pad ? padded_h * padded_w : valid_h * valid_w;
      if (divisor == 0) continue;
      const float share = grad / static_cast<float>(divisor);
      for (int64_t kh = 0; kh < g.kernel[0]; ++kh) {
        const int64_t h = h0 + kh * g.dilation[0];
        if (h < 0 || h >= h_in) continue;
        for (int64_t kw = 0; kw < g.kernel[1]; ++kw) {
          const int64_t w = w0 + kw * g.dilation[1];
          if (w >= 0 && w < w_in) dx[h * w_in + w] += share;
        }
      }
    }
  }
}

Status run_pooling_backward(KernelContext& ctx) {
  const auto& a = ctx.attrs<PoolingAttrs>();
  KILN_ASSIGN_OR_RETURN(PoolingGeometry g, pooling_geometry(a, ctx.src[1].dims()));
  int64_t in_plane = 1, out_plane = 1, window = 1;
  for (int d = 0; d < g.spatial; ++d) {
    in_plane *= g.in[d];
    out_plane *= g.out[d];
    window *= g.kernel[d];
  }
  const float* dy = ctx.src[0].data<float>();
  const float* x = ctx.src[1].data<float>();
  float* dx = ctx.dst[0].data<float>();
  const bool fast = g.spatial == 2 && a.mode != PoolingMode::kLp;
  parallel_for(g.batch * g.channels, grain_for(out_plane * window + in_plane), [&](int64_t nc) {
    if (fast)
      pooling_backward_plane_2d(a, g, x + nc * in_plane, dy + nc * out_plane, dx + nc * in_plane);
    else
      ref::pooling_backward_plane(a, g, x + nc * in_plane, dy + nc * out_plane, dx + nc * in_plane);
  });
  return Status::ok();
}

int64_t per_channel_work(const Dims& x) { return x[1] > 0 ? x.numel() / x[1] : 1; }

Status run_batch_norm_training(KernelContext& ctx) {
  return ref::batch_norm_training(ctx, parallel_units(per_channel_work(ctx.src[0].dims())));
}

Status run_batch_norm_backward(KernelContext& ctx) {
  return ref::batch_norm_backward(ctx, parallel_units(per_channel_work(ctx.src[1].dims())));
}

Status run_layer_norm_backward(KernelContext& ctx) {
  const int64_t per_row = std::max<int64_t>(1, ctx.dst[1].numel());
  return ref::layer_norm_backward(ctx, parallel_units(per_row));
}

Status run_instance_norm_backward(KernelContext& ctx) {
  return ref::instance_norm_backward(ctx, parallel_units(per_channel_work(ctx.src[1].dims())));
}

Status run_lrn_backward(KernelContext& ctx) {
  const Dims& x = ctx.src[1].dims();
  return ref::lrn_backward(ctx, parallel_units(x[0] > 0 ? x.numel() / x[0] : 1));
}

int64_t step_of(const KernelContext& ctx) {
  if (ctx.src.size() < 2 || !ctx.src[1].defined()) return 0;
  const Tensor& s = ctx.src[1];
  return s.dtype() == DataType::kInt32 ? *s.data<int32_t>() : *s.data<int64_t>();
}

Status run_dropout(KernelContext& ctx) {
  const auto& a = ctx.attrs<DropoutAttrs>();
  const float* x = ctx.src[0].data<float>();
  float* y = ctx.dst[0].data<float>();
  uint8_t* mask = ctx.dst[1].data<uint8_t>();
  const uint64_t key = ref::dropout_key(a.seed, step_of(ctx));
  const uint32_t threshold = a.training ? ref::dropout_threshold(a.ratio) : 0;
  const float scale = a.training ? 1.f / (1.f - a.ratio) : 1.f;
  parallel_for(ctx.src[0].numel(), 1 << 14, [&](int64_t i) {
    const bool keep = threshold == 0 || ref::dropout_keep(key, i, threshold);
    mask[i] = keep ? 1 : 0;
    y[i] = keep ? x[i] * scale : 0.f;
  });
  return Status::ok();
}

Status run_dropout_backward(KernelContext& ctx) {
  const auto& a = ctx.attrs<DropoutAttrs>();
  const float* dy = ctx.src[0].data<float>();
  const uint8_t* mask = ctx.src[1].data<uint8_t>();
  float* dx = ctx.dst[0].data<float>();
  const float scale = a.training ? 1.f / (1.f - a.ratio) : 1.f;
  parallel_for(ctx.src[0].numel(), 1 << 14, [&](int64_t i) { dx[i] = mask[i] != 0 ? dy[i] * scale : 0.f; });
  return Status::ok();
}

Status float32_only(const OpCall& call) { return require_float_dtypes(call, {DataType::kFloat32}); }

KernelImpl cpu_impl(const char* name, const char* op, RunFn run, SupportsFn supports = float32_only) {
  return KernelImpl{.name = name,
                    .op = op,
                    .backend = Backend::kCpu,
                    .priority = 5,
                    .supports = std::move(supports),
                    .create = stateless(std::move(run))};
}

KILN_REGISTER_KERNEL(cpu_impl("cpu.softmax_backward", "SoftmaxBackward", run_softmax_backward<false>));
KILN_REGISTER_KERNEL(cpu_impl("cpu.log_softmax_backward", "LogSoftmaxBackward", run_softmax_backward<true>));
KILN_REGISTER_KERNEL(cpu_impl("cpu.pooling_backward", "PoolingBackward", run_pooling_backward,
                              [](const OpCall& call) -> Status {
                                KILN_RETURN_IF_ERROR(float32_only(call));
                                if (call.attrs_as<PoolingAttrs>().channels_last)
                                  return unsupported("PoolingBackward is NCHW only");
                                return Status::ok();
                              }));
KILN_REGISTER_KERNEL(cpu_impl("cpu.batch_normalization_training", "BatchNormalizationTraining",
                              run_batch_norm_training));
KILN_REGISTER_KERNEL(cpu_impl("cpu.batch_normalization_backward", "BatchNormalizationBackward",
                              run_batch_norm_backward));
KILN_REGISTER_KERNEL(cpu_impl("cpu.layer_normalization_backward", "LayerNormalizationBackward",
                              run_layer_norm_backward));
KILN_REGISTER_KERNEL(cpu_impl("cpu.instance_normalization_backward", "InstanceNormalizationBackward",
                              run_instance_norm_backward));
KILN_REGISTER_KERNEL(cpu_impl("cpu.lrn_backward", "LRNBackward", run_lrn_backward));
KILN_REGISTER_KERNEL(cpu_impl("cpu.dropout", "Dropout", run_dropout));
KILN_REGISTER_KERNEL(cpu_impl("cpu.dropout_backward", "DropoutBackward", run_dropout_backward));

}  // namespace
}  // namespace kiln
