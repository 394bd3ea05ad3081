// Reference loss kernels and their backward kernels: plain loops, double accumulation.
#include "kernels/ref/loss.h"

#include "kernels/registry.h"

namespace kiln {
namespace {

using loss::BroadcastIndex;
using loss::ClassSplit;

enum class Pointwise { kMse, kL1, kSmoothL1 };

struct PointwiseParams {
  LossReduction reduction;
  double beta = 0;
};

PointwiseParams pointwise_params(const KernelContext& ctx, Pointwise kind) {
  if (kind == Pointwise::kSmoothL1) {
    const auto& a = ctx.attrs<SmoothL1LossAttrs>();
    return {a.reduction, a.beta};
  }
  return {ctx.attrs<LossAttrs>().reduction};
}

double pointwise_value(Pointwise kind, double d, double beta) {
  switch (kind) {
    case Pointwise::kMse: return d * d;
    case Pointwise::kL1: return std::abs(d);
    case Pointwise::kSmoothL1: return loss::smooth_l1(d, beta);
  }
  return 0;
}

double pointwise_grad(Pointwise kind, double d, double beta) {
  switch (kind) {
    case Pointwise::kMse: return 2 * d;
    case Pointwise::kL1: return loss::sign(d);
    case Pointwise::kSmoothL1: return loss::smooth_l1_grad(d, beta);
  }
  return 0;
}

/// Writes per-item losses `v` as the op's output: each for none, their sum or sum / denom otherwise.
void write_reduced(Tensor& dst, LossReduction r, const std::vector<double>& v, double denom) {
  float* out = dst.data<float>();
  if (r == LossReduction::kNone) {
    for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(v[i]);
    return;
  }
  double sum = 0;
  for (double x : v) sum += x;
  out[0] = static_cast<float>(r == LossReduction::kMean ? sum / denom : sum);
}

/// dLoss/d(per-item loss i): dy[i] for none, dy / denom for mean, dy for sum.
double upstream(const Tensor& dy, LossReduction r, int64_t i, double denom) {
  const float* g = dy.data<float>();
  if (r == LossReduction::kNone) return g[i];
  return r == LossReduction::kMean ? g[0] / denom : g[0];
}

template <Pointwise kKind>
Status run_pointwise(KernelContext& ctx) {
  const PointwiseParams p = pointwise_params(ctx, kKind);
  const Tensor& x = ctx.src[0];
  const float* xs = x.data<float>();
  const float* ts = ctx.src[1].data<float>();
  std::vector<double> v(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) v[i] = pointwise_value(kKind, double{xs[i]} - ts[i], p.beta);
  write_reduced(ctx.dst[0], p.reduction, v, static_cast<double>(x.numel()));
  return Status::ok();
}

template <Pointwise kKind>
Status run_pointwise_backward(KernelContext& ctx) {
  const PointwiseParams p = pointwise_params(ctx, kKind);
  const Tensor& x = ctx.src[1];
  const float* xs = x.data<float>();
  const float* ts = ctx.src[2].data<float>();
  float* dx = ctx.dst[0].data<float>();
  const double n = static_cast<double>(x.numel());
  for (int64_t i = 0; i < x.numel(); ++i)
    dx[i] = static_cast<float>(upstream(ctx.src[0], p.reduction, i, n) *
                               pointwise_grad(kKind, double{xs[i]} - ts[i], p.beta));
  return Status::ok();
}

/// Inputs of BCEWithLogitsLoss from `off`: x, t, weight?, pos_weight? (absent factors are 1).
struct BceInputs : loss::BceFactors {
  const float *x, *t;
  BceInputs(const KernelContext& ctx, int off)
      : BceFactors(ctx, off), x(ctx.src[off].data<float>()), t(ctx.src[off + 1].data<float>()) {}
};

Status run_bce(KernelContext& ctx) {
  const auto& a = ctx.attrs<LossAttrs>();
  const BceInputs in(ctx, 0);
  const int64_t n = ctx.src[0].numel();
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = loss::bce<double>(in.x[i], in.t[i], in.weight(i), in.pos_weight(i));
  write_reduced(ctx.dst[0], a.reduction, v, static_cast<double>(n));
  return Status::ok();
}

Status run_bce_backward(KernelContext& ctx) {
  const auto& a = ctx.attrs<BCEWithLogitsLossBackwardAttrs>();
  const BceInputs in(ctx, 1);
  const int64_t n = ctx.src[1].numel();
  float* dx = ctx.dst[0].data<float>();
  for (int64_t i = 0; i < n; ++i)
    dx[i] = static_cast<float>(upstream(ctx.src[0], a.reduction, i, static_cast<double>(n)) *
                               loss::bce_grad<double>(a.wrt, in.x[i], in.t[i], in.weight(i), in.pos_weight(i)));
  return Status::ok();
}

struct ClassParams {
  LossReduction reduction;
  int64_t ignore_index;
  double smoothing = 0;
  ClassLossWrt wrt = ClassLossWrt::kInput;
};

template <class A>
ClassParams class_params(const KernelContext& ctx) {
  const auto& a = ctx.attrs<A>();
  ClassParams p{a.reduction, a.ignore_index};
  if constexpr (requires { a.label_smoothing; }) p.smoothing = a.label_smoothing;
  if constexpr (requires { a.wrt; }) p.wrt = a.wrt;
  return p;
}

/// log_softmax of column (o, :, i) of x into `lp`.
void column_log_softmax(const float* x, const ClassSplit& s, int64_t o, int64_t i, std::vector<double>& lp) {
  lp.resize(static_cast<size_t>(s.classes));
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t c = 0; c < s.classes; ++c) max = std::max<double>(max, x[(o * s.classes + c) * s.inner + i]);
  double sum = 0;
  for (int64_t c = 0; c < s.classes; ++c) sum += std::exp(x[(o * s.classes + c) * s.inner + i] - max);
  const double lse = max + std::log(sum);
  for (int64_t c = 0; c < s.classes; ++c) lp[c] = x[(o * s.classes + c) * s.inner + i] - lse;
}

/// NLLLoss and CrossEntropyLoss, forward and backward, in one form: per item j the log-probabilities lp
/// (x itself for NLLLoss, log_softmax(x) over the classes for CrossEntropyLoss) and target weights
/// tt[c] (NLLLoss: 1 at the class; CrossEntropyLoss: (1 - eps) [c == class] or (1 - eps) t[c], plus eps / C);
/// loss_j = -sum_c w[c] tt[c] lp[c]. Mean divides by the sum of the counted items' class weights (class
/// targets) or by the item count (probability targets).
template <class A>
Status class_loss(KernelContext& ctx, bool nll) {
  const bool backward = requires(const A& a) { a.wrt; };
  const ClassParams p = class_params<A>(ctx);
  const int off = backward ? 1 : 0;
  const Tensor& xt = ctx.src[off];
  const Tensor& target = ctx.src[off + 1];
  const ClassSplit s = loss::class_split(xt.dims());
  const float* x = xt.data<float>();
  const float* w = loss::optional_data(ctx, off + 2);
  const double eps = p.smoothing, nclass = static_cast<double>(s.classes);
  const bool probs = is_floating(target.dtype());
  const int64_t items = s.outer * s.inner;
  std::vector<int64_t> cls;
  double denom = static_cast<double>(items);
  if (!probs)
    KILN_RETURN_IF_ERROR(
        loss::read_class_targets(nll ? "NLLLoss" : "CrossEntropyLoss", target, s, p.ignore_index, w, cls, denom));
  // Forward: per-item losses. Backward: the gradient of input `wrt` (zero first), and for the weights of a
  // mean over class targets the sum of the losses and the count per class (the denominator depends on them).
  std::vector<double> losses(static_cast<size_t>(items), 0.0), count(static_cast<size_t>(s.classes), 0.0);
  std::vector<double> dw(static_cast<size_t>(s.classes), 0.0);
  float* d = backward ? ctx.dst[0].data<float>() : nullptr;
  if (d) std::fill(d, d + ctx.dst[0].numel(), 0.f);
  std::vector<double> lp(static_cast<size_t>(s.classes)), tt(static_cast<size_t>(s.classes));
  for (int64_t j = 0; j < items; ++j) {
    if (!probs && cls[j] < 0) continue;
    const int64_t o = j / s.inner, i = j % s.inner;
    auto at = [&](int64_t c) { return (o * s.classes + c) * s.inner + i; };
    if (nll) {
      for (int64_t c = 0; c < s.classes; ++c) lp[c] = x[at(c)];
    } else {
      column_log_softmax(x, s, o, i, lp);
    }
    for (int64_t c = 0; c < s.classes; ++c) {
      if (nll)
        tt[c] = c == cls[j] ? 1.0 : 0.0;
      else if (probs)
        tt[c] = (1 - eps) * target.data<float>()[at(c)] + eps / nclass;
      else
        tt[c] = (c == cls[j] ? 1 - eps : 0.0) + eps / nclass;
    }
    double l = 0, qsum = 0;
    for (int64_t c = 0; c < s.classes; ++c) {
      const double q = (w ? w[c] : 1.0) * tt[c];
      qsum += q;
      if (q != 0) l -= q * lp[c];
    }
    losses[j] = l;
    if (!probs) count[cls[j]] += 1;
    if (!d) continue;
    const double g = upstream(ctx.src[0], p.reduction, j, denom);
    for (int64_t c = 0; c < s.classes; ++c) {
      const double wc = w ? w[c] : 1.0;
      switch (p.wrt) {
        case ClassLossWrt::kInput:
          d[at(c)] = static_cast<float>(nll ? -g * wc * tt[c] : g * (std::exp(lp[c]) * qsum - wc * tt[c]));
          break;
        case ClassLossWrt::kTarget: d[at(c)] = static_cast<float>(-g * (1 - eps) * wc * lp[c]); break;
        case ClassLossWrt::kWeight:
          if (tt[c] != 0) dw[c] -= g * tt[c] * lp[c];
          break;
      }
    }
  }
  if (!backward) {
    write_reduced(ctx.dst[0], p.reduction, losses, denom);
    return Status::ok();
  }
  if (p.wrt == ClassLossWrt::kWeight) {
    if (p.reduction == LossReduction::kMean && !probs) {
      double sum = 0;
      for (double v : losses) sum += v;
      const double dy = ctx.src[0].data<float>()[0];
      for (int64_t c = 0; c < s.classes; ++c) dw[c] -= dy * sum * count[c] / (denom * denom);
    }
    for (int64_t c = 0; c < s.classes; ++c) d[c] = static_cast<float>(dw[c]);
  }
  return Status::ok();
}

Status run_nll(KernelContext& ctx) { return class_loss<NLLLossAttrs>(ctx, true); }
Status run_nll_backward(KernelContext& ctx) { return class_loss<NLLLossBackwardAttrs>(ctx, true); }
Status run_cross_entropy(KernelContext& ctx) { return class_loss<CrossEntropyLossAttrs>(ctx, false); }
Status run_cross_entropy_backward(KernelContext& ctx) { return class_loss<CrossEntropyLossBackwardAttrs>(ctx, false); }

using loss::CtcProblem;

loss::CtcSample<double> ctc_sample(const CtcProblem& p, const float* lp, int64_t n, int64_t blank) {
  return {lp + n * p.C, p.N * p.C, p.labels.data() + p.start[n], p.input_length[n], p.length[n], p.C, blank};
}

Status run_ctc(KernelContext& ctx) {
  const auto& a = ctx.attrs<CTCLossAttrs>();
  CtcProblem p;
  KILN_RETURN_IF_ERROR(loss::read_ctc("CTCLoss", ctx, 0, p));
  const float* lp = ctx.src[0].data<float>();
  std::vector<double> v(static_cast<size_t>(p.N)), alpha;
  for (int64_t n = 0; n < p.N; ++n) {
    double nll = loss::ctc_alpha(ctc_sample(p, lp, n, a.blank), alpha);
    if (a.zero_infinity && std::isinf(nll)) nll = 0;
    // mean: each loss over its target length here, the sum over N in write_reduced
    v[n] =
        a.reduction == LossReduction::kMean ? nll * loss::ctc_scale(p, a.reduction, n) * static_cast<double>(p.N) : nll;
  }
  write_reduced(ctx.dst[0], a.reduction, v, static_cast<double>(p.N));
  return Status::ok();
}

Status run_ctc_backward(KernelContext& ctx) {
  const auto& a = ctx.attrs<CTCLossAttrs>();
  CtcProblem p;
  KILN_RETURN_IF_ERROR(loss::read_ctc("CTCLossBackward", ctx, 1, p));
  const float* lp = ctx.src[1].data<float>();
  const float* dy = ctx.src[0].data<float>();
  float* dx = ctx.dst[0].data<float>();
  std::fill(dx, dx + ctx.dst[0].numel(), 0.f);
  std::vector<double> alpha, beta;
  for (int64_t n = 0; n < p.N; ++n) {
    const loss::CtcSample<double> x = ctc_sample(p, lp, n, a.blank);
    const double nll = loss::ctc_alpha(x, alpha);
    if (a.zero_infinity && std::isinf(nll)) continue;
    loss::ctc_beta(x, beta);
    const double g = (a.reduction == LossReduction::kNone ? dy[n] : dy[0]) * loss::ctc_scale(p, a.reduction, n);
    loss::ctc_grad(x, nll, g, alpha, beta, dx + n * p.C);
  }
  return Status::ok();
}

KernelImpl ref_impl(const char* name, const char* op, RunFn run) {
  return with_float32_compute({
      .name = name,
      .op = op,
      .backend = Backend::kRef,
      .priority = 0,
      .supports =
          [](const OpCall& call) {
            return require_dtypes(call, {DataType::kFloat32, DataType::kInt32, DataType::kInt64});
          },
      .create = stateless(std::move(run)),
  });
}

KILN_REGISTER_KERNEL(ref_impl("ref.mse_loss", "MSELoss", run_pointwise<Pointwise::kMse>));
KILN_REGISTER_KERNEL(ref_impl("ref.l1_loss", "L1Loss", run_pointwise<Pointwise::kL1>));
KILN_REGISTER_KERNEL(ref_impl("ref.smooth_l1_loss", "SmoothL1Loss", run_pointwise<Pointwise::kSmoothL1>));
KILN_REGISTER_KERNEL(ref_impl("ref.mse_loss_backward", "MSELossBackward", run_pointwise_backward<Pointwise::kMse>));
KILN_REGISTER_KERNEL(ref_impl("ref.l1_loss_backward", "L1LossBackward", run_pointwise_backward<Pointwise::kL1>));
KILN_REGISTER_KERNEL(ref_impl("ref.smooth_l1_loss_backward", "SmoothL1LossBackward",
                              run_pointwise_backward<Pointwise::kSmoothL1>));
KILN_REGISTER_KERNEL(ref_impl("ref.bce_with_logits_loss", "BCEWithLogitsLoss", run_bce));
KILN_REGISTER_KERNEL(ref_impl("ref.bce_with_logits_loss_backward", "BCEWithLogitsLossBackward", run_bce_backward));
KILN_REGISTER_KERNEL(ref_impl("ref.nll_loss", "NLLLoss", run_nll));
KILN_REGISTER_KERNEL(ref_impl("ref.nll_loss_backward", "NLLLossBackward", run_nll_backward));
KILN_REGISTER_KERNEL(ref_impl("ref.cross_entropy_loss", "CrossEntropyLoss", run_cross_entropy));
KILN_REGISTER_KERNEL(ref_impl("ref.cross_entropy_loss_backward", "CrossEntropyLossBackward",
                              run_cross_entropy_backward));
KILN_REGISTER_KERNEL(ref_impl("ref.ctc_loss", "CTCLoss", run_ctc));
KILN_REGISTER_KERNEL(ref_impl("ref.ctc_loss_backward", "CTCLossBackward", run_ctc_backward));

}  // namespace
}  // namespace kiln
