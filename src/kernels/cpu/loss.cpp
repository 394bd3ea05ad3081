// CPU loss kernels and their backward kernels: FP32, OpenMP over chunks (deterministic: per-chunk partial
// sums added in order), SIMD-friendly inner loops; CrossEntropyLoss works on rows (or blocks of inner
// positions for [N, C, d...] inputs); CTCLoss runs one sample per thread.
#include <type_traits>

#include "core/parallel.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/ref/loss.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

using cpu::exp_approx;
using cpu::log_approx;
using loss::BceFactors;
using loss::BroadcastIndex;
using loss::ClassSplit;

constexpr int64_t kChunk = int64_t{1} << 14;

/// sum over blocks of `block` items of f(begin, end), blocks run in parallel, partial sums added in order.
template <class F>
double blocked_sum(int64_t n, int64_t block, int64_t work_per_item, F f) {
  const int64_t blocks = (n + block - 1) / block;
  std::vector<double> part(static_cast<size_t>(blocks), 0.0);
  parallel_for(blocks, grain_for(block * work_per_item),
               [&](int64_t b) { part[b] = f(b * block, std::min(n, (b + 1) * block)); });
  double sum = 0;
  for (double p : part) sum += p;
  return sum;
}
template <class F>
double chunked_sum(int64_t n, int64_t work_per_item, F f) {
  return blocked_sum(n, kChunk, work_per_item, f);
}

/// sum of f(i) over [lo, hi) in 8 independent float lanes (vectorises without reassociation flags).
template <class F>
float lane_sum(int64_t lo, int64_t hi, F f) {
  constexpr int kLanes = 8;
  float acc[kLanes] = {};
  int64_t i = lo;
  for (; i + kLanes <= hi; i += kLanes)
    for (int k = 0; k < kLanes; ++k) acc[k] += f(i + k);
  float tail = 0;
  for (; i < hi; ++i) tail += f(i);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

/// sum of f(i) over [lo, hi) for an f too large for lane_sum's unrolled lanes: values in blocks of 256 from a
/// vectorised loop, then added in lanes.
template <class F>
float block_sum(int64_t lo, int64_t hi, F f) {
  constexpr int64_t kBuf = 256;
  float buf[kBuf];
  float sum = 0;
  for (int64_t b = lo; b < hi; b += kBuf) {
    const int64_t len = std::min(kBuf, hi - b);
#pragma omp simd
    for (int64_t k = 0; k < len; ++k) buf[k] = f(b + k);
    sum += lane_sum(0, len, [&](int64_t k) { return buf[k]; });
  }
  return sum;
}

/// max of x[0, n) in 8 lanes.
inline float lane_max(const float* x, int64_t n) {
  constexpr int kLanes = 8;
  float m[kLanes];
  std::fill(m, m + kLanes, -std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) m[k] = std::max(m[k], x[i + k]);
  float tail = -std::numeric_limits<float>::infinity();
  for (; i < n; ++i) tail = std::max(tail, x[i]);
  for (int k = 0; k < kLanes; ++k) tail = std::max(tail, m[k]);
  return tail;
}

/// Runs f(begin, end) over chunks of [0, n) in parallel.
template <class F>
void chunked_for(int64_t n, int64_t work_per_item, F f) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  parallel_for(chunks, grain_for(kChunk * work_per_item),
               [&](int64_t c) { f(c * kChunk, std::min(n, (c + 1) * kChunk)); });
}

/// Output of a reduced loss: sum / denom (mean) or sum.
void write_scalar(Tensor& dst, LossReduction r, double sum, double denom) {
  dst.data<float>()[0] = static_cast<float>(r == LossReduction::kMean ? sum / denom : sum);
}

/// dLoss/d(per-item loss): a scalar for mean and sum (g), else dy itself (per).
struct Upstream {
  const float* per = nullptr;
  float g = 0;
  float at(int64_t i) const { return per ? per[i] : g; }
};
Upstream upstream(const Tensor& dy, LossReduction r, double denom) {
  if (r == LossReduction::kNone) return {dy.data<float>(), 0};
  const double g = dy.data<float>()[0];
  return {nullptr, static_cast<float>(r == LossReduction::kMean ? g / denom : g)};
}

enum class Pointwise { kMse, kL1, kSmoothL1 };

/// Branch-free forms (they vectorise); inv_beta is 1 / beta, or a huge number for beta 0 (SmoothL1 is L1).
template <Pointwise kKind>
inline float pointwise_value(float d, float beta, float inv_beta) {
  if constexpr (kKind == Pointwise::kMse) return d * d;
  if constexpr (kKind == Pointwise::kL1) return std::abs(d);
  if constexpr (kKind == Pointwise::kSmoothL1) {
    const float a = std::abs(d), quadratic = 0.5f * d * d * inv_beta, linear = a - 0.5f * beta;
    return a < beta ? quadratic : linear;
  }
}
template <Pointwise kKind>
inline float pointwise_grad(float d, float inv_beta) {
  if constexpr (kKind == Pointwise::kMse) return 2 * d;
  if constexpr (kKind == Pointwise::kL1) return static_cast<float>(d > 0) - static_cast<float>(d < 0);
  if constexpr (kKind == Pointwise::kSmoothL1) return std::min(std::max(d * inv_beta, -1.f), 1.f);
}

template <Pointwise kKind>
std::pair<LossReduction, float> pointwise_params(const KernelContext& ctx) {
  if constexpr (kKind == Pointwise::kSmoothL1) {
    const auto& a = ctx.attrs<SmoothL1LossAttrs>();
    return {a.reduction, a.beta};
  }
  return {ctx.attrs<LossAttrs>().reduction, 0.f};
}

template <Pointwise kKind>
Status run_pointwise(KernelContext& ctx) {
  const auto params = pointwise_params<kKind>(ctx);
  const LossReduction r = params.first;
  const float beta = params.second, inv_beta = beta > 0 ? 1.f / beta : 1e30f;
  const int64_t n = ctx.src[0].numel();
  const float* x = ctx.src[0].data<float>();
  const float* t = ctx.src[1].data<float>();
  float* out = ctx.dst[0].data<float>();
  if (r == LossReduction::kNone) {
    chunked_for(n, 2, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) out[i] = pointwise_value<kKind>(x[i] - t[i], beta, inv_beta);
    });
    return Status::ok();
  }
  const double sum = chunked_sum(n, 2, [&](int64_t lo, int64_t hi) {
    return double{lane_sum(lo, hi, [&](int64_t i) { return pointwise_value<kKind>(x[i] - t[i], beta, inv_beta); })};
  });
  write_scalar(ctx.dst[0], r, sum, static_cast<double>(n));
  return Status::ok();
}

template <Pointwise kKind>
Status run_pointwise_backward(KernelContext& ctx) {
  const auto params = pointwise_params<kKind>(ctx);
  const LossReduction r = params.first;
  const float beta = params.second, inv_beta = beta > 0 ? 1.f / beta : 1e30f;
  const int64_t n = ctx.src[1].numel();
  const float* x = ctx.src[1].data<float>();
  const float* t = ctx.src[2].data<float>();
  float* dx = ctx.dst[0].data<float>();
  const Upstream up = upstream(ctx.src[0], r, static_cast<double>(n));
  chunked_for(n, 2, [&](int64_t lo, int64_t hi) {
    if (up.per) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) dx[i] = up.per[i] * pointwise_grad<kKind>(x[i] - t[i], inv_beta);
    } else {
      const float g = up.g;
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) dx[i] = g * pointwise_grad<kKind>(x[i] - t[i], inv_beta);
    }
  });
  return Status::ok();
}

/// weight or pos_weight (f, broadcast by `index`; 1 where absent) of elements [b, b + len) into out.
void fill_factor(const float* f, const BroadcastIndex& index, int64_t b, int64_t len, float* out) {
  if (!f) {
    std::fill(out, out + len, 1.f);
  } else if (const int64_t m = index.modulo()) {
    for (int64_t k = 0, j = b % m; k < len; ++k, j = j + 1 == m ? 0 : j + 1) out[k] = f[j];
  } else {
    for (int64_t k = 0; k < len; ++k) out[k] = f[index(b + k)];
  }
}

/// weight and pos_weight of elements [b, b + len) into wb and pwb.
void fill_factors(const BceFactors& f, int64_t b, int64_t len, float* wb, float* pwb) {
  fill_factor(f.w, f.wi, b, len, wb);
  fill_factor(f.pw, f.pwi, b, len, pwb);
}

constexpr int64_t kBceBlock = 256;

inline float log_sigmoid_v(float x) { return std::min(x, 0.f) - log_approx(1.f + exp_approx(-std::abs(x))); }

inline float bce_v(float x, float t, float w, float pw) {
  return w * ((1.f - t) * x - (1.f + (pw - 1.f) * t) * log_sigmoid_v(x));
}

template <BceWrt kWrt>
inline float bce_grad_v(float x, float t, float w, float pw) {
  if constexpr (kWrt == BceWrt::kInput)
    return w * ((1.f - t) - (1.f + (pw - 1.f) * t) / (1.f + exp_approx(x)));  // sigmoid(-x)
  if constexpr (kWrt == BceWrt::kTarget) return w * (-x - (pw - 1.f) * log_sigmoid_v(x));
  if constexpr (kWrt == BceWrt::kWeight) return (1.f - t) * x - (1.f + (pw - 1.f) * t) * log_sigmoid_v(x);
  if constexpr (kWrt == BceWrt::kPosWeight) return -w * t * log_sigmoid_v(x);
}

template <BceWrt kWrt, bool kPer>
void bce_backward_block(const float* x, const float* t, const float* wb, const float* pwb, const Upstream& up,
                        float* dx, int64_t b, int64_t len) {
#pragma omp simd
  for (int64_t k = 0; k < len; ++k)
    dx[b + k] = (kPer ? up.per[b + k] : up.g) * bce_grad_v<kWrt>(x[b + k], t[b + k], wb[k], pwb[k]);
}

template <BceWrt kWrt>
void bce_backward(const float* x, const float* t, const BceFactors& f, const Upstream& up, float* dx, int64_t n) {
  chunked_for(n, 8, [&](int64_t lo, int64_t hi) {
    float wb[kBceBlock], pwb[kBceBlock];
    for (int64_t b = lo; b < hi; b += kBceBlock) {
      const int64_t len = std::min(kBceBlock, hi - b);
      fill_factors(f, b, len, wb, pwb);
      if (up.per)
        bce_backward_block<kWrt, true>(x, t, wb, pwb, up, dx, b, len);
      else
        bce_backward_block<kWrt, false>(x, t, wb, pwb, up, dx, b, len);
    }
  });
}

Status run_bce(KernelContext& ctx) {
  const LossReduction r = ctx.attrs<LossAttrs>().reduction;
  const int64_t n = ctx.src[0].numel();
  const float* x = ctx.src[0].data<float>();
  const float* t = ctx.src[1].data<float>();
  const BceFactors f(ctx, 0);
  float* out = ctx.dst[0].data<float>();
  const bool none = r == LossReduction::kNone;
  const double sum = chunked_sum(n, 8, [&](int64_t lo, int64_t hi) {
    float wb[kBceBlock], pwb[kBceBlock], vb[kBceBlock];
    float acc = 0;
    for (int64_t b = lo; b < hi; b += kBceBlock) {
      const int64_t len = std::min(kBceBlock, hi - b);
      float* v = none ? out + b : vb;
      fill_factors(f, b, len, wb, pwb);
#pragma omp simd
      for (int64_t k = 0; k < len; ++k) v[k] = bce_v(x[b + k], t[b + k], wb[k], pwb[k]);
      if (!none) acc += lane_sum(0, len, [&](int64_t k) { return v[k]; });
    }
    return double{acc};
  });
  if (!none) write_scalar(ctx.dst[0], r, sum, static_cast<double>(n));
  return Status::ok();
}

Status run_bce_backward(KernelContext& ctx) {
  const auto& a = ctx.attrs<BCEWithLogitsLossBackwardAttrs>();
  const int64_t n = ctx.src[1].numel();
  const float* x = ctx.src[1].data<float>();
  const float* t = ctx.src[2].data<float>();
  const BceFactors f(ctx, 1);
  const Upstream up = upstream(ctx.src[0], a.reduction, static_cast<double>(n));
  float* dx = ctx.dst[0].data<float>();
  switch (a.wrt) {
    case BceWrt::kInput: bce_backward<BceWrt::kInput>(x, t, f, up, dx, n); break;
    case BceWrt::kTarget: bce_backward<BceWrt::kTarget>(x, t, f, up, dx, n); break;
    case BceWrt::kWeight: bce_backward<BceWrt::kWeight>(x, t, f, up, dx, n); break;
    case BceWrt::kPosWeight: bce_backward<BceWrt::kPosWeight>(x, t, f, up, dx, n); break;
  }
  return Status::ok();
}

template <class A>
Status class_loss_supports(const OpCall& call, int target) {
  KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32, DataType::kInt32, DataType::kInt64}));
  if constexpr (requires(const A& a) { a.wrt; }) {
    if (call.attrs_as<A>().wrt != ClassLossWrt::kInput)
      return unsupported("gradients of the target or the class weights run on the reference kernel");
  }
  if (is_floating(call.inputs[target].dtype))
    return unsupported("class-probability targets run on the reference kernel");
  const Dims& x = call.inputs[target - 1].dims;
  if (x.rank() >= 2 && x[1] > int64_t{1} << 30) return unsupported("more than 2^30 classes");
  return Status::ok();
}

Status run_nll(KernelContext& ctx) {
  const auto& a = ctx.attrs<NLLLossAttrs>();
  const ClassSplit s = loss::class_split(ctx.src[0].dims());
  const float* x = ctx.src[0].data<float>();
  const float* w = loss::optional_data(ctx, 2);
  std::vector<int32_t> cls;
  double denom = 0;
  KILN_RETURN_IF_ERROR(loss::read_class_targets("NLLLoss", ctx.src[1], s, a.ignore_index, w, cls, denom));
  float* out = ctx.dst[0].data<float>();
  const int64_t items = static_cast<int64_t>(cls.size());
  const double sum = chunked_sum(items, 2, [&](int64_t lo, int64_t hi) {
    double acc = 0;
    for (int64_t j = lo; j < hi; ++j) {
      float v = 0;
      if (cls[j] >= 0) v = -(w ? w[cls[j]] : 1.f) * x[(j / s.inner * s.classes + cls[j]) * s.inner + j % s.inner];
      if (a.reduction == LossReduction::kNone) out[j] = v;
      acc += v;
    }
    return acc;
  });
  if (a.reduction != LossReduction::kNone) write_scalar(ctx.dst[0], a.reduction, sum, denom);
  return Status::ok();
}

Status run_nll_backward(KernelContext& ctx) {
  const auto& a = ctx.attrs<NLLLossBackwardAttrs>();
  const ClassSplit s = loss::class_split(ctx.src[1].dims());
  const float* w = loss::optional_data(ctx, 3);
  std::vector<int32_t> cls;
  double denom = 0;
  KILN_RETURN_IF_ERROR(loss::read_class_targets("NLLLossBackward", ctx.src[2], s, a.ignore_index, w, cls, denom));
  const Upstream up = upstream(ctx.src[0], a.reduction, denom);
  float* dx = ctx.dst[0].data<float>();
  // Zero each item's column and set its target entry; items of one sample share rows, so work per sample.
  parallel_for(s.outer, grain_for(s.classes * s.inner), [&](int64_t o) {
    float* base = dx + o * s.classes * s.inner;
    std::fill(base, base + s.classes * s.inner, 0.f);
    for (int64_t i = 0; i < s.inner; ++i) {
      const int64_t j = o * s.inner + i;
      if (cls[j] >= 0) base[cls[j] * s.inner + i] = -(w ? w[cls[j]] : 1.f) * up.at(j);
    }
  });
  return Status::ok();
}

/// CrossEntropyLoss over classes for one contiguous row (inner == 1): the loss of the row, and with
/// `dx` its gradient times g. q[c] = w[c] eps / C + (c == y) w[y] (1 - eps); loss = -sum_c q[c] lp[c].
struct CeParams {
  const float* w;
  int64_t classes;
  float eps;
  double wsum;  // sum of the weights (C without weights)
};

inline float ce_row(const CeParams& p, const float* x, int64_t y, float* dx, float g) {
  const int64_t nc = p.classes;
  const float mx = lane_max(x, nc);
  const float sum = block_sum(0, nc, [&](int64_t c) { return exp_approx(x[c] - mx); });
  const float lse = mx + std::log(sum);
  const float wy = p.w ? p.w[y] : 1.f;
  const float smooth = p.eps / static_cast<float>(nc);
  if (dx) {
    const float qsum = static_cast<float>(p.wsum) * smooth + wy * (1 - p.eps);
    const float gq = g * qsum;
    if (p.w) {
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) dx[c] = gq * exp_approx(x[c] - lse) - g * smooth * p.w[c];
    } else {
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) dx[c] = gq * exp_approx(x[c] - lse) - g * smooth;
    }
    dx[y] -= g * wy * (1 - p.eps);
    return 0;
  }
  float l = -(1 - p.eps) * wy * (x[y] - lse);
  if (p.eps != 0) {
    const float wx = p.w ? lane_sum(0, nc, [&](int64_t c) { return p.w[c] * x[c]; })
                         : lane_sum(0, nc, [&](int64_t c) { return x[c]; });
    l -= smooth * (wx - static_cast<float>(p.wsum) * lse);
  }
  return l;
}

constexpr int64_t kBlock = 64;

/// The same for a block of `len` columns (o, :, i0 + k) of x viewed [outer, C, inner]: losses into l[k] or
/// gradients into dx (same layout as x) times g[k].
void ce_block(const CeParams& p, const float* x, int64_t inner, int64_t len, const int32_t* y, float* l, float* dx,
              const float* g) {
  const int64_t nc = p.classes;
  float max[kBlock], sum[kBlock], wx[kBlock];
  std::fill(max, max + len, -std::numeric_limits<float>::infinity());
  std::fill(sum, sum + len, 0.f);
  std::fill(wx, wx + len, 0.f);
  for (int64_t c = 0; c < nc; ++c)
    for (int64_t k = 0; k < len; ++k) max[k] = std::max(max[k], x[c * inner + k]);
  for (int64_t c = 0; c < nc; ++c) {
    const float wc = p.w ? p.w[c] : 1.f;
    for (int64_t k = 0; k < len; ++k) {
      sum[k] += exp_approx(x[c * inner + k] - max[k]);
      wx[k] += wc * x[c * inner + k];
    }
  }
  const float smooth = p.eps / static_cast<float>(nc);
  for (int64_t k = 0; k < len; ++k) max[k] += std::log(sum[k]);  // now the log-sum-exp
  if (!dx) {
    for (int64_t k = 0; k < len; ++k) {
      if (y[k] < 0) {
        l[k] = 0;
        continue;
      }
      const float wy = p.w ? p.w[y[k]] : 1.f;
      l[k] =
          -(1 - p.eps) * wy * (x[y[k] * inner + k] - max[k]) - smooth * (wx[k] - static_cast<float>(p.wsum) * max[k]);
    }
    return;
  }
  float gq[kBlock];
  for (int64_t k = 0; k < len; ++k) {
    const float wy = y[k] < 0 ? 0.f : p.w ? p.w[y[k]] : 1.f;
    gq[k] = y[k] < 0 ? 0.f : g[k] * (static_cast<float>(p.wsum) * smooth + wy * (1 - p.eps));
  }
  for (int64_t c = 0; c < nc; ++c) {
    const float ws = smooth * (p.w ? p.w[c] : 1.f);
    for (int64_t k = 0; k < len; ++k)
      dx[c * inner + k] = y[k] < 0 ? 0.f : gq[k] * exp_approx(x[c * inner + k] - max[k]) - g[k] * ws;
  }
  for (int64_t k = 0; k < len; ++k)
    if (y[k] >= 0) dx[y[k] * inner + k] -= g[k] * (1 - p.eps) * (p.w ? p.w[y[k]] : 1.f);
}

/// CrossEntropyLoss forward (dx null) or backward.
template <class A>
Status cross_entropy(KernelContext& ctx, int off, float* dx) {
  const auto& a = ctx.attrs<A>();
  const Tensor& xt = ctx.src[off];
  const ClassSplit s = loss::class_split(xt.dims());
  const float* x = xt.data<float>();
  const float* w = loss::optional_data(ctx, off + 2);
  std::vector<int32_t> cls;
  double denom = 0;
  KILN_RETURN_IF_ERROR(loss::read_class_targets(dx ? "CrossEntropyLossBackward" : "CrossEntropyLoss", ctx.src[off + 1],
                                                s, a.ignore_index, w, cls, denom));
  CeParams p{w, s.classes, a.label_smoothing, 0};
  for (int64_t c = 0; c < s.classes; ++c) p.wsum += w ? w[c] : 1.0;
  const Upstream up = dx ? upstream(ctx.src[0], a.reduction, denom) : Upstream{};
  float* out = dx ? nullptr : ctx.dst[0].data<float>();
  const bool none = a.reduction == LossReduction::kNone;
  const int64_t items = s.outer * s.inner;
  double sum = 0;
  if (s.inner == 1) {
    const int64_t rows = grain_for(s.classes * 8, int64_t{1} << 13);  // rows per block
    sum = blocked_sum(items, rows, s.classes * 8, [&](int64_t lo, int64_t hi) {
      double acc = 0;
      for (int64_t j = lo; j < hi; ++j) {
        float* drow = dx ? dx + j * s.classes : nullptr;
        if (cls[j] < 0) {
          if (drow) std::fill(drow, drow + s.classes, 0.f);
          if (out && none) out[j] = 0;
          continue;
        }
        const float v = ce_row(p, x + j * s.classes, cls[j], drow, dx ? up.at(j) : 0.f);
        if (out && none) out[j] = v;
        acc += v;
      }
      return acc;
    });
  } else {
    const int64_t blocks = (s.inner + kBlock - 1) / kBlock;
    std::vector<double> part(static_cast<size_t>(s.outer * blocks), 0.0);
    parallel_for(s.outer * blocks, grain_for(s.classes * std::min(kBlock, s.inner) * 4), [&](int64_t task) {
      const int64_t o = task / blocks, lo = (task % blocks) * kBlock, len = std::min(kBlock, s.inner - lo);
      const int64_t base = o * s.classes * s.inner + lo;
      const int32_t* y = cls.data() + o * s.inner + lo;
      float l[kBlock] = {}, g[kBlock] = {};
      for (int64_t k = 0; k < len; ++k) g[k] = dx ? up.at(o * s.inner + lo + k) : 0.f;
      ce_block(p, x + base, s.inner, len, y, l, dx ? dx + base : nullptr, g);
      if (dx) return;
      double acc = 0;
      for (int64_t k = 0; k < len; ++k) {
        if (none) out[o * s.inner + lo + k] = l[k];
        acc += l[k];
      }
      part[task] = acc;
    });
    for (double v : part) sum += v;
  }
  if (!dx && !none) write_scalar(ctx.dst[0], a.reduction, sum, denom);
  return Status::ok();
}

Status run_cross_entropy(KernelContext& ctx) { return cross_entropy<CrossEntropyLossAttrs>(ctx, 0, nullptr); }
Status run_cross_entropy_backward(KernelContext& ctx) {
  return cross_entropy<CrossEntropyLossBackwardAttrs>(ctx, 1, ctx.dst[0].data<float>());
}

using loss::CtcProblem;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// log(exp(a) + exp(b) + exp(c)) without branches (-inf when all are -inf).
inline float log_sum_exp3(float a, float b, float c) {
  const float m = std::max(a, std::max(b, c));
  const float base = m == kNegInf ? 0.f : m;
  const float r = base + log_approx(exp_approx(a - base) + exp_approx(b - base) + exp_approx(c - base));
  return m == kNegInf ? kNegInf : r;
}

/// One sample's CTC lattice in log space, vectorised over the states of a time step: emissions e[t][s] =
/// lp(t, ext(s)) of the blank-extended target, alpha (rows of S + 2: two -inf pads first) and beta (rows
/// of S + 2: two -inf pads last).
class CtcLattice {
 public:
  CtcLattice(const CtcProblem& p, const float* lp, int64_t n, int64_t blank)
      : states_(2 * p.length[n] + 1), len_(p.input_length[n]), width_(states_ + 2) {
    ext_.resize(static_cast<size_t>(states_));
    skip_.assign(static_cast<size_t>(states_), kNegInf);
    for (int64_t s = 0; s < states_; ++s) {
      ext_[s] = s % 2 == 0 ? blank : p.labels[p.start[n] + s / 2];
      if (s >= 2 && ext_[s] != blank && ext_[s] != ext_[s - 2]) skip_[s] = 0;
    }
    e_.resize(static_cast<size_t>(len_ * states_));
    for (int64_t t = 0; t < len_; ++t)
      for (int64_t s = 0; s < states_; ++s) e_[t * states_ + s] = lp[(t * p.N + n) * p.C + ext_[s]];
  }

  /// Fills alpha; returns the negative log-likelihood (inf when no alignment fits).
  float forward() {
    if (len_ == 0) return states_ == 1 ? 0.f : std::numeric_limits<float>::infinity();
    alpha_.assign(static_cast<size_t>(len_ * width_), kNegInf);
    alpha_[2] = e_[0];
    if (states_ > 1) alpha_[3] = e_[1];
    const float* skip = skip_.data();
    for (int64_t t = 1; t < len_; ++t) {
      const float* prev = &alpha_[(t - 1) * width_];
      float* cur = &alpha_[t * width_] + 2;
      const float* e = &e_[t * states_];
#pragma omp simd
      for (int64_t s = 0; s < states_; ++s) cur[s] = log_sum_exp3(prev[s + 2], prev[s + 1], prev[s] + skip[s]) + e[s];
    }
    const float* last = &alpha_[(len_ - 1) * width_] + 2;
    const float ll = states_ > 1 ? log_sum_exp3(last[states_ - 1], last[states_ - 2], kNegInf) : last[0];
    return -ll;
  }

  /// Fills beta (after forward()).
  void backward() {
    beta_.assign(static_cast<size_t>(len_ * width_), kNegInf);
    if (len_ == 0) return;
    float* last = &beta_[(len_ - 1) * width_];
    last[states_ - 1] = e_[(len_ - 1) * states_ + states_ - 1];
    if (states_ > 1) last[states_ - 2] = e_[(len_ - 1) * states_ + states_ - 2];
    // Skipping from s to s + 2 is allowed exactly when skipping into s + 2 is.
    std::vector<float> skip2(static_cast<size_t>(states_), kNegInf);
    for (int64_t s = 0; s + 2 < states_; ++s) skip2[s] = skip_[s + 2];
    const float* skip = skip2.data();
    for (int64_t t = len_ - 2; t >= 0; --t) {
      const float* next = &beta_[(t + 1) * width_];
      float* cur = &beta_[t * width_];
      const float* e = &e_[t * states_];
#pragma omp simd
      for (int64_t s = 0; s < states_; ++s) cur[s] = log_sum_exp3(next[s], next[s + 1], next[s + 2] + skip[s]) + e[s];
    }
  }

  /// dx[t, c] -= g exp(alpha + beta - e + nll) over the states of class c; dx points at (0, n, 0), rows
  /// `stride` apart. An infinite nll (no alignment) gives NaN for the target's classes, as the reference.
  void grad(float nll, float g, float* dx, int64_t stride) const {
    std::vector<float> occ(static_cast<size_t>(states_));
    const bool impossible = std::isinf(nll);
    for (int64_t t = 0; t < len_; ++t) {
      const float* a = &alpha_[t * width_] + 2;
      const float* b = &beta_[t * width_];
      const float* e = &e_[t * states_];
      float* o = occ.data();
      if (!impossible) {
#pragma omp simd
        for (int64_t s = 0; s < states_; ++s) {
          const float v = a[s] + b[s];  // -inf for a state no alignment passes (e may be -inf there too)
          o[s] = v == kNegInf ? 0.f : g * exp_approx(v - e[s] + nll);
        }
      }
      float* row = dx + t * stride;
      for (int64_t s = 0; s < states_; ++s)
        row[ext_[s]] = impossible ? std::numeric_limits<float>::quiet_NaN() : row[ext_[s]] - o[s];
    }
  }

 private:
  int64_t states_, len_, width_;
  std::vector<int64_t> ext_;
  std::vector<float> skip_, e_, alpha_, beta_;
};

Status run_ctc(KernelContext& ctx) {
  const auto& a = ctx.attrs<CTCLossAttrs>();
  CtcProblem p;
  KILN_RETURN_IF_ERROR(loss::read_ctc("CTCLoss", ctx, 0, p));
  const float* lp = ctx.src[0].data<float>();
  std::vector<float> nll(static_cast<size_t>(p.N));
  parallel_for(p.N, 1, [&](int64_t n) {
    float v = CtcLattice(p, lp, n, a.blank).forward();
    if (a.zero_infinity && std::isinf(v)) v = 0;
    nll[n] = v;
  });
  float* out = ctx.dst[0].data<float>();
  if (a.reduction == LossReduction::kNone) {
    std::copy(nll.begin(), nll.end(), out);
    return Status::ok();
  }
  double sum = 0;
  for (int64_t n = 0; n < p.N; ++n) sum += double{nll[n]} * loss::ctc_scale(p, a.reduction, n);
  out[0] = static_cast<float>(sum);
  return Status::ok();
}

Status run_ctc_backward(KernelContext& ctx) {
  const auto& a = ctx.attrs<CTCLossAttrs>();
  CtcProblem p;
  KILN_RETURN_IF_ERROR(loss::read_ctc("CTCLossBackward", ctx, 1, p));
  const float* lp = ctx.src[1].data<float>();
  const float* dy = ctx.src[0].data<float>();
  float* dx = ctx.dst[0].data<float>();
  parallel_for(p.N, 1, [&](int64_t n) {
    for (int64_t t = 0; t < p.T; ++t) std::fill(dx + (t * p.N + n) * p.C, dx + (t * p.N + n + 1) * p.C, 0.f);
    CtcLattice lattice(p, lp, n, a.blank);
    const float nll = lattice.forward();
    if (a.zero_infinity && std::isinf(nll)) return;
    lattice.backward();
    const float g =
        (a.reduction == LossReduction::kNone ? dy[n] : dy[0]) * static_cast<float>(loss::ctc_scale(p, a.reduction, n));
    lattice.grad(nll, g, dx + n * p.C, p.N * p.C);
  });
  return Status::ok();
}

KernelImpl cpu_impl(const char* name, const char* op, RunFn run, SupportsFn supports = {}) {
  if (!supports)
    supports = [](const OpCall& call) {
      return require_dtypes(call, {DataType::kFloat32, DataType::kInt32, DataType::kInt64});
    };
  return {
      .name = name,
      .op = op,
      .backend = Backend::kCpu,
      .priority = 10,
      .supports = std::move(supports),
      .create = stateless(std::move(run)),
  };
}

KILN_REGISTER_KERNEL(cpu_impl("cpu.mse_loss", "MSELoss", run_pointwise<Pointwise::kMse>));
KILN_REGISTER_KERNEL(cpu_impl("cpu.l1_loss", "L1Loss", run_pointwise<Pointwise::kL1>));
KILN_REGISTER_KERNEL(cpu_impl("cpu.smooth_l1_loss", "SmoothL1Loss", run_pointwise<Pointwise::kSmoothL1>));
KILN_REGISTER_KERNEL(cpu_impl("cpu.mse_loss_backward", "MSELossBackward", run_pointwise_backward<Pointwise::kMse>));
KILN_REGISTER_KERNEL(cpu_impl("cpu.l1_loss_backward", "L1LossBackward", run_pointwise_backward<Pointwise::kL1>));
KILN_REGISTER_KERNEL(cpu_impl("cpu.smooth_l1_loss_backward", "SmoothL1LossBackward",
                              run_pointwise_backward<Pointwise::kSmoothL1>));
KILN_REGISTER_KERNEL(cpu_impl("cpu.bce_with_logits_loss", "BCEWithLogitsLoss", run_bce));
KILN_REGISTER_KERNEL(cpu_impl("cpu.bce_with_logits_loss_backward", "BCEWithLogitsLossBackward", run_bce_backward));
KILN_REGISTER_KERNEL(cpu_impl("cpu.nll_loss", "NLLLoss", run_nll,
                              [](const OpCall& call) { return class_loss_supports<NLLLossAttrs>(call, 1); }));
KILN_REGISTER_KERNEL(cpu_impl("cpu.nll_loss_backward", "NLLLossBackward", run_nll_backward,
                              [](const OpCall& call) { return class_loss_supports<NLLLossBackwardAttrs>(call, 2); }));
KILN_REGISTER_KERNEL(cpu_impl("cpu.cross_entropy_loss", "CrossEntropyLoss", run_cross_entropy,
                              [](const OpCall& call) { return class_loss_supports<CrossEntropyLossAttrs>(call, 1); }));
KILN_REGISTER_KERNEL(cpu_impl("cpu.cross_entropy_loss_backward", "CrossEntropyLossBackward", run_cross_entropy_backward,
                              [](const OpCall& call) {
                                return class_loss_supports<CrossEntropyLossBackwardAttrs>(call, 2);
                              }));
KILN_REGISTER_KERNEL(cpu_impl("cpu.ctc_loss", "CTCLoss", run_ctc));
KILN_REGISTER_KERNEL(cpu_impl("cpu.ctc_loss_backward", "CTCLossBackward", run_ctc_backward));

}  // namespace
}  // namespace kiln
