// CPU loss kernels and their backward kernels: FP32, OpenMP over chunks (deterministic: per-chunk partial
// sums added in order), SIMD-friendly inner loops; CrossEntropyLoss works on rows (or blocks of inner
// positions for [N, C, d...] inputs); CTCLoss runs one sample per thread.
#include <type_traits>

#include "core/parallel.h"
#include "kernels/ref/loss.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

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

template <Pointwise kKind>
inline float pointwise_value(float d, float beta) {
  if constexpr (kKind == Pointwise::kMse) return d * d;
  if constexpr (kKind == Pointwise::kL1) return std::abs(d);
  if constexpr (kKind == Pointwise::kSmoothL1) return loss::smooth_l1(d, beta);
}
template <Pointwise kKind>
inline float pointwise_grad(float d, float beta) {
  if constexpr (kKind == Pointwise::kMse) return 2 * d;
  if constexpr (kKind == Pointwise::kL1) return loss::sign(d);
  if constexpr (kKind == Pointwise::kSmoothL1) return loss::smooth_l1_grad(d, beta);
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
  const float beta = params.second;
  const int64_t n = ctx.src[0].numel();
  const float* x = ctx.src[0].data<float>();
  const float* t = ctx.src[1].data<float>();
  float* out = ctx.dst[0].data<float>();
  if (r == LossReduction::kNone) {
    chunked_for(n, 2, [&](int64_t lo, int64_t hi) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) out[i] = pointwise_value<kKind>(x[i] - t[i], beta);
    });
    return Status::ok();
  }
  const double sum = chunked_sum(n, 2, [&](int64_t lo, int64_t hi) {
    float acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t i = lo; i < hi; ++i) acc += pointwise_value<kKind>(x[i] - t[i], beta);
    return double{acc};
  });
  write_scalar(ctx.dst[0], r, sum, static_cast<double>(n));
  return Status::ok();
}

template <Pointwise kKind>
Status run_pointwise_backward(KernelContext& ctx) {
  const auto params = pointwise_params<kKind>(ctx);
  const LossReduction r = params.first;
  const float beta = params.second;
  const int64_t n = ctx.src[1].numel();
  const float* x = ctx.src[1].data<float>();
  const float* t = ctx.src[2].data<float>();
  float* dx = ctx.dst[0].data<float>();
  const Upstream up = upstream(ctx.src[0], r, static_cast<double>(n));
  chunked_for(n, 2, [&](int64_t lo, int64_t hi) {
    if (up.per) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) dx[i] = up.per[i] * pointwise_grad<kKind>(x[i] - t[i], beta);
    } else {
      const float g = up.g;
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) dx[i] = g * pointwise_grad<kKind>(x[i] - t[i], beta);
    }
  });
  return Status::ok();
}

/// The optional broadcast factors of BCEWithLogitsLoss (inputs off + 2 and off + 3).
struct BceFactors {
  const float *w = nullptr, *pw = nullptr;
  BroadcastIndex wi, pwi;

  BceFactors(const KernelContext& ctx, int off) {
    const Dims& dims = ctx.src[off].dims();
    if (ctx.src.size() > static_cast<size_t>(off) + 2 && ctx.src[off + 2].defined()) {
      w = ctx.src[off + 2].data<float>();
      wi = BroadcastIndex(dims, ctx.src[off + 2].dims());
    }
    if (ctx.src.size() > static_cast<size_t>(off) + 3 && ctx.src[off + 3].defined()) {
      pw = ctx.src[off + 3].data<float>();
      pwi = BroadcastIndex(dims, ctx.src[off + 3].dims());
    }
  }
  float weight(int64_t i) const { return w ? w[wi(i)] : 1.f; }
  float pos_weight(int64_t i) const { return pw ? pw[pwi(i)] : 1.f; }
};

Status run_bce(KernelContext& ctx) {
  const LossReduction r = ctx.attrs<BCEWithLogitsLossAttrs>().reduction;
  const int64_t n = ctx.src[0].numel();
  const float* x = ctx.src[0].data<float>();
  const float* t = ctx.src[1].data<float>();
  const BceFactors f(ctx, 0);
  float* out = ctx.dst[0].data<float>();
  const double sum = chunked_sum(n, 8, [&](int64_t lo, int64_t hi) {
    float acc = 0;
    if (!f.w && !f.pw) {
#pragma omp simd reduction(+ : acc)
      for (int64_t i = lo; i < hi; ++i) {
        const float v = loss::bce(x[i], t[i], 1.f, 1.f);
        if (r == LossReduction::kNone) out[i] = v;
        acc += v;
      }
    } else {
      for (int64_t i = lo; i < hi; ++i) {
        const float v = loss::bce(x[i], t[i], f.weight(i), f.pos_weight(i));
        if (r == LossReduction::kNone) out[i] = v;
        acc += v;
      }
    }
    return double{acc};
  });
  if (r != LossReduction::kNone) write_scalar(ctx.dst[0], r, sum, static_cast<double>(n));
  return Status::ok();
}

Status run_bce_backward(KernelContext& ctx) {
  const auto& a = ctx.attrs<BCEWithLogitsLossAttrs>();
  const int64_t n = ctx.src[1].numel();
  const float* x = ctx.src[1].data<float>();
  const float* t = ctx.src[2].data<float>();
  const BceFactors f(ctx, 1);
  const Upstream up = upstream(ctx.src[0], a.reduction, static_cast<double>(n));
  float* dx = ctx.dst[0].data<float>();
  chunked_for(n, 8, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      dx[i] = up.at(i) * loss::bce_grad(a.wrt, x[i], t[i], f.weight(i), f.pos_weight(i));
  });
  return Status::ok();
}

/// Class targets checked in one pass: per item its class or -1 (ignored), and the sum of the counted
/// items' weights (mean's denominator).
Status read_targets(const char* op, const Tensor& target, const ClassSplit& s, int64_t ignore_index, const float* w,
                    std::vector<int32_t>& cls, double& denom) {
  const int64_t items = s.outer * s.inner;
  cls.resize(static_cast<size_t>(items));
  denom = 0;
  for (int64_t j = 0; j < items; ++j) {
    const int64_t c = loss::load_index(target, j);
    if (c == ignore_index) {
      cls[j] = -1;
      continue;
    }
    if (c < 0 || c >= s.classes)
      return invalid_argument(op, ": target ", c, " at position ", j, " is not a class in [0, ", s.classes,
                              ") nor ignore_index ", ignore_index);
    cls[j] = static_cast<int32_t>(c);
    denom += w ? w[c] : 1.0;
  }
  return Status::ok();
}

const float* optional_data(const KernelContext& ctx, size_t i) {
  return i < ctx.src.size() && ctx.src[i].defined() ? ctx.src[i].data<float>() : nullptr;
}

Status class_loss_supports(const OpCall& call, int target) {
  KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32, DataType::kInt32, DataType::kInt64}));
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
  const float* w = optional_data(ctx, 2);
  std::vector<int32_t> cls;
  double denom = 0;
  KILN_RETURN_IF_ERROR(read_targets("NLLLoss", ctx.src[1], s, a.ignore_index, w, cls, denom));
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
  const auto& a = ctx.attrs<NLLLossAttrs>();
  const ClassSplit s = loss::class_split(ctx.src[1].dims());
  const float* w = optional_data(ctx, 3);
  std::vector<int32_t> cls;
  double denom = 0;
  KILN_RETURN_IF_ERROR(read_targets("NLLLossBackward", ctx.src[2], s, a.ignore_index, w, cls, denom));
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
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (int64_t c = 0; c < nc; ++c) mx = std::max(mx, x[c]);
  float sum = 0, wx = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < nc; ++c) sum += std::exp(x[c] - mx);
  const float lse = mx + std::log(sum);
  const float wy = p.w ? p.w[y] : 1.f;
  const float smooth = p.eps / static_cast<float>(nc);
  if (dx) {
    const float qsum = static_cast<float>(p.wsum) * smooth + wy * (1 - p.eps);
    const float gq = g * qsum;
    if (p.w) {
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) dx[c] = gq * std::exp(x[c] - lse) - g * smooth * p.w[c];
    } else {
#pragma omp simd
      for (int64_t c = 0; c < nc; ++c) dx[c] = gq * std::exp(x[c] - lse) - g * smooth;
    }
    dx[y] -= g * wy * (1 - p.eps);
    return 0;
  }
  float l = -(1 - p.eps) * wy * (x[y] - lse);
  if (p.eps != 0) {
    if (p.w) {
#pragma omp simd reduction(+ : wx)
      for (int64_t c = 0; c < nc; ++c) wx += p.w[c] * x[c];
    } else {
#pragma omp simd reduction(+ : wx)
      for (int64_t c = 0; c < nc; ++c) wx += x[c];
    }
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
      sum[k] += std::exp(x[c * inner + k] - max[k]);
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
      dx[c * inner + k] = y[k] < 0 ? 0.f : gq[k] * std::exp(x[c * inner + k] - max[k]) - g[k] * ws;
  }
  for (int64_t k = 0; k < len; ++k)
    if (y[k] >= 0) dx[y[k] * inner + k] -= g[k] * (1 - p.eps) * (p.w ? p.w[y[k]] : 1.f);
}

/// CrossEntropyLoss forward (dx null) or backward.
Status cross_entropy(KernelContext& ctx, int off, float* dx) {
  const auto& a = ctx.attrs<CrossEntropyLossAttrs>();
  const Tensor& xt = ctx.src[off];
  const ClassSplit s = loss::class_split(xt.dims());
  const float* x = xt.data<float>();
  const float* w = optional_data(ctx, off + 2);
  std::vector<int32_t> cls;
  double denom = 0;
  KILN_RETURN_IF_ERROR(read_targets(dx ? "CrossEntropyLossBackward" : "CrossEntropyLoss", ctx.src[off + 1], s,
                                    a.ignore_index, w, cls, denom));
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

Status run_cross_entropy(KernelContext& ctx) { return cross_entropy(ctx, 0, nullptr); }
Status run_cross_entropy_backward(KernelContext& ctx) { return cross_entropy(ctx, 1, ctx.dst[0].data<float>()); }

/// CTC: per sample its labels (checked) and lengths; samples run in parallel.
struct CtcProblem {
  int64_t T = 0, N = 0, C = 0;
  std::vector<int64_t> labels, start, length, input_length;
};

Status read_ctc(const char* op, const KernelContext& ctx, int off, CtcProblem& p) {
  const auto& a = ctx.attrs<CTCLossAttrs>();
  const Dims& d = ctx.src[off].dims();
  p.T = d[0];
  p.N = d[1];
  p.C = d[2];
  const Tensor& targets = ctx.src[off + 1];
  const bool padded = targets.rank() == 2;
  int64_t offset = 0;
  for (int64_t n = 0; n < p.N; ++n) {
    const int64_t in_len = loss::load_index(ctx.src[off + 2], n), len = loss::load_index(ctx.src[off + 3], n);
    if (in_len < 0 || in_len > p.T)
      return invalid_argument(op, ": input_lengths[", n, "] = ", in_len, " is not in [0, ", p.T, "]");
    const int64_t avail = padded ? targets.dims()[1] : targets.numel() - offset;
    if (len < 0 || len > avail)
      return invalid_argument(op, ": target_lengths[", n, "] = ", len, " does not fit the targets (",
                              padded ? "padded length " : "elements left ", avail, ")");
    const int64_t from = padded ? n * targets.dims()[1] : offset;
    p.start.push_back(static_cast<int64_t>(p.labels.size()));
    for (int64_t k = 0; k < len; ++k) {
      const int64_t c = loss::load_index(targets, from + k);
      if (c < 0 || c >= p.C || c == a.blank)
        return invalid_argument(op, ": target ", c, " of sample ", n, " is not a class in [0, ", p.C,
                                ") other than blank ", a.blank);
      p.labels.push_back(c);
    }
    p.length.push_back(len);
    p.input_length.push_back(in_len);
    offset += len;
  }
  return Status::ok();
}

loss::CtcSample<float> ctc_sample(const CtcProblem& p, const float* lp, int64_t n, int64_t blank) {
  return {lp + n * p.C, p.N * p.C, p.labels.data() + p.start[n], p.input_length[n], p.length[n], p.C, blank};
}

/// What a sample's loss counts for: 1 (none, sum) or 1 / (max(target length, 1) N) (mean).
float ctc_scale(const CtcProblem& p, LossReduction r, int64_t n) {
  if (r != LossReduction::kMean) return 1.f;
  return static_cast<float>(1.0 / (std::max<double>(static_cast<double>(p.length[n]), 1.0) * static_cast<double>(p.N)));
}

Status run_ctc(KernelContext& ctx) {
  const auto& a = ctx.attrs<CTCLossAttrs>();
  CtcProblem p;
  KILN_RETURN_IF_ERROR(read_ctc("CTCLoss", ctx, 0, p));
  const float* lp = ctx.src[0].data<float>();
  std::vector<float> nll(static_cast<size_t>(p.N));
  parallel_for(p.N, 1, [&](int64_t n) {
    std::vector<float> alpha;
    float v = loss::ctc_alpha(ctc_sample(p, lp, n, a.blank), alpha);
    if (a.zero_infinity && std::isinf(v)) v = 0;
    nll[n] = v;
  });
  float* out = ctx.dst[0].data<float>();
  if (a.reduction == LossReduction::kNone) {
    std::copy(nll.begin(), nll.end(), out);
    return Status::ok();
  }
  double sum = 0;
  for (int64_t n = 0; n < p.N; ++n) sum += double{nll[n]} * ctc_scale(p, a.reduction, n);
  out[0] = static_cast<float>(sum);
  return Status::ok();
}

Status run_ctc_backward(KernelContext& ctx) {
  const auto& a = ctx.attrs<CTCLossAttrs>();
  CtcProblem p;
  KILN_RETURN_IF_ERROR(read_ctc("CTCLossBackward", ctx, 1, p));
  const float* lp = ctx.src[1].data<float>();
  const float* dy = ctx.src[0].data<float>();
  float* dx = ctx.dst[0].data<float>();
  parallel_for(p.N, 1, [&](int64_t n) {
    for (int64_t t = 0; t < p.T; ++t) std::fill(dx + (t * p.N + n) * p.C, dx + (t * p.N + n + 1) * p.C, 0.f);
    const loss::CtcSample<float> x = ctc_sample(p, lp, n, a.blank);
    std::vector<float> alpha, beta;
    const float nll = loss::ctc_alpha(x, alpha);
    if (a.zero_infinity && std::isinf(nll)) return;
    loss::ctc_beta(x, beta);
    const float g = (a.reduction == LossReduction::kNone ? dy[n] : dy[0]) * ctc_scale(p, a.reduction, n);
    loss::ctc_grad(x, nll, g, alpha, beta, dx + n * p.C);
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
                              [](const OpCall& call) { return class_loss_supports(call, 1); }));
KILN_REGISTER_KERNEL(cpu_impl("cpu.nll_loss_backward", "NLLLossBackward", run_nll_backward,
                              [](const OpCall& call) { return class_loss_supports(call, 2); }));
KILN_REGISTER_KERNEL(cpu_impl("cpu.cross_entropy_loss", "CrossEntropyLoss", run_cross_entropy,
                              [](const OpCall& call) { return class_loss_supports(call, 1); }));
KILN_REGISTER_KERNEL(cpu_impl("cpu.cross_entropy_loss_backward", "CrossEntropyLossBackward", run_cross_entropy_backward,
                              [](const OpCall& call) { return class_loss_supports(call, 2); }));
KILN_REGISTER_KERNEL(cpu_impl("cpu.ctc_loss", "CTCLoss", run_ctc));
KILN_REGISTER_KERNEL(cpu_impl("cpu.ctc_loss_backward", "CTCLossBackward", run_ctc_backward));

}  // namespace
}  // namespace kiln
