#pragma once
// The float32 bodies of BatchNormalizationTraining, BatchNormalizationBackward and LayerNormalizationBackward,
// parameterized by how channels / rows are looped: serially (reference) or in parallel (CPU).
#include <vector>

#include "kernels/common/indexing.h"
#include "kernels/ref/normalization_train.h"
#include "kernels/registry.h"
#include "ops/normalization/normalization.h"
#include "ops/normalization/normalization_train.h"

namespace kiln::ref {

inline ChannelView channel_view(const Dims& x) {
  ChannelView v;
  v.n = x[0];
  v.c = x[1];
  for (int i = 2; i < x.rank(); ++i) v.inner *= x[i];
  return v;
}

/// `loop(count, f)` calls f(i) for i in [0, count) (in any order, possibly in parallel).
template <class Loop>
Status batch_norm_training(KernelContext& ctx, Loop&& loop) {
  const auto& a = ctx.attrs<BatchNormalizationTrainingAttrs>();
  const ChannelView v = channel_view(ctx.src[0].dims());
  const BatchNormTrainingIo io{ctx.src[0].data<float>(), ctx.src[1].data<float>(), ctx.src[2].data<float>(),
                               ctx.src[3].data<float>(), ctx.src[4].data<float>(), ctx.dst[0].data<float>(),
                               ctx.dst[1].data<float>(), ctx.dst[2].data<float>(), ctx.dst[3].data<float>(),
                               ctx.dst[4].data<float>()};
  loop(v.c, [&](int64_t ch) { batch_norm_training_channel(v, io, a.epsilon, a.momentum, ch); });
  return Status::ok();
}

template <class Loop>
Status batch_norm_backward(KernelContext& ctx, Loop&& loop) {
  const auto& a = ctx.attrs<BatchNormalizationBackwardAttrs>();
  const ChannelView v = channel_view(ctx.src[1].dims());
  const BatchNormBackwardIo io{ctx.src[0].data<float>(),
                               ctx.src[1].data<float>(),
                               ctx.src[2].data<float>(),
                               ctx.src[3].data<float>(),
                               ctx.src[4].data<float>(),
                               ctx.dst[0].data<float>(),
                               ctx.dst[1].data<float>(),
                               ctx.dst[2].data<float>(),
                               a.global_stats ? ctx.dst[3].data<float>() : nullptr,
                               a.global_stats ? ctx.dst[4].data<float>() : nullptr};
  loop(v.c, [&](int64_t ch) { batch_norm_backward_channel(v, io, a.epsilon, a.global_stats, ch); });
  return Status::ok();
}

template <class Loop>
Status layer_norm_backward(KernelContext& ctx, Loop&& loop) {
  const auto& a = ctx.attrs<LayerNormalizationAttrs>();
  const Dims& xd = ctx.src[1].dims();
  KILN_ASSIGN_OR_RETURN(int axis, normalize_axis(a.axis, xd.rank()));
  const AxisSplit split(xd, axis);
  const int64_t rows = split.outer, d = split.size * split.inner;
  const Dims& norm = ctx.dst[1].dims();
  const float* dy = ctx.src[0].data<float>();
  const float* x = ctx.src[1].data<float>();
  const bool has_scale = ctx.src.size() > 2 && ctx.src[2].defined();
  const float* scale = has_scale ? ctx.src[2].data<float>() : nullptr;
  const BroadcastIndexer scale_at(has_scale ? ctx.src[2].dims() : Dims{}, norm);
  float* dx = ctx.dst[0].data<float>();
  float* dscale = ctx.dst[1].data<float>();
  std::vector<double> mean(static_cast<size_t>(rows)), inv_std(static_cast<size_t>(rows));
  loop(rows, [&](int64_t r) {
    row_moments(x + r * d, d, a.epsilon, mean[r], inv_std[r]);
    layer_norm_backward_row(dy + r * d, x + r * d, dx + r * d, d, mean[r], inv_std[r],
                            [&](int64_t j) { return scale ? static_cast<double>(scale[scale_at(j)]) : 1.0; });
  });
  loop(d, [&](int64_t j) {
    double acc = 0;
    for (int64_t r = 0; r < rows; ++r) acc += dy[r * d + j] * (x[r * d + j] - mean[r]) * inv_std[r];
    dscale[j] = static_cast<float>(acc);
  });
  return Status::ok();
}

/// InstanceNormalizationBackward: per channel (the unit `loop` runs), every batch item's plane as a layer-norm row.
template <class Loop>
Status instance_norm_backward(KernelContext& ctx, Loop&& loop) {
  const auto& a = ctx.attrs<InstanceNormalizationAttrs>();
  const ChannelView v = channel_view(ctx.src[1].dims());
  const float* dy = ctx.src[0].data<float>();
  const float* x = ctx.src[1].data<float>();
  const float* scale = ctx.src[2].data<float>();
  float* dx = ctx.dst[0].data<float>();
  float* dscale = ctx.dst[1].data<float>();
  float* dbias = ctx.dst[2].data<float>();
  loop(v.c, [&](int64_t ch) {
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t b = 0; b < v.n; ++b) {
      const int64_t base = (b * v.c + ch) * v.inner;
      double mean, inv_std;
      row_moments(x + base, v.inner, a.epsilon, mean, inv_std);
      const double s = scale[ch];
      layer_norm_backward_row(dy + base, x + base, dx + base, v.inner, mean, inv_std, [s](int64_t) { return s; });
      for (int64_t i = base; i < base + v.inner; ++i) {
        sum_dy += dy[i];
        sum_dy_xhat += dy[i] * (x[i] - mean) * inv_std;
      }
    }
    dscale[ch] = static_cast<float>(sum_dy_xhat);
    dbias[ch] = static_cast<float>(sum_dy);
  });
  return Status::ok();
}

template <class Loop>
Status lrn_backward(KernelContext& ctx, Loop&& loop) {
  const auto& a = ctx.attrs<LrnAttrs>();
  const AxisSplit s(ctx.src[1].dims(), 1);
  const int64_t item = s.size * s.inner;
  const float* dy = ctx.src[0].data<float>();
  const float* x = ctx.src[1].data<float>();
  float* dx = ctx.dst[0].data<float>();
  loop(s.outer, [&](int64_t n) {
    std::vector<double> d(static_cast<size_t>(item));
    lrn_backward_item(a.size, a.alpha, a.beta, a.bias, x + n * item, dy + n * item, dx + n * item, s.size, s.inner,
                      d.data());
  });
  return Status::ok();
}

}  // namespace kiln::ref
