#pragma once
// The optimizers' element rules, one definition shared by the CPU loops (optimizer.cpp, gradients.cpp) and the
// CUDA kernels (optim_cuda.cu). A rule is a small functor: host-computed scalars (`k`) and compile-time flags
// (template parameters), applied to element i of a parameter, its grad and its state buffers. The flags make the
// branches every element would take compile-time, so the CPU loop body has no control flow and vectorizes.
//
// The arithmetic mirrors PyTorch's (torch/optim/*.py, single-tensor path) operation by operation, in float with the
// scalars rounded to float as PyTorch does: `a.mul_(b1).add_(g, alpha=1 - b1)` is a * b1 + (1 - b1) * g,
// addcmul(t1, t2, value=s) is a + s * t1 * t2, addcdiv is a + s * (t1 / t2). Keep the expressions as written: the
// CPU results must stay bit-identical across releases (resumed runs continue bit-exactly), and the CUDA file is
// compiled without FMA contraction so that the device computes the same floats.
#include <math.h>

#include <cstdint>
#include <tuple>
#include <type_traits>

#include "core/host_device.h"

namespace kiln::train::rules {

namespace detail {
template <class F, class... Done>
decltype(auto) dispatch(F& f, std::tuple<Done...> /*done*/) {
  return f(Done{}...);
}
template <class F, class... Done, class... Rest>
decltype(auto) dispatch(F& f, std::tuple<Done...> /*done*/, bool first, Rest... rest) {
  if (first) return dispatch(f, std::tuple<Done..., std::true_type>{}, rest...);
  return dispatch(f, std::tuple<Done..., std::false_type>{}, rest...);
}
}  // namespace detail

/// Calls f(std::bool_constant<flags>...) and returns what it returns (the same type for every combination).
template <class F, class... Flags>
decltype(auto) dispatch(F&& f, Flags... flags) {
  return detail::dispatch(f, std::tuple<>{}, static_cast<bool>(flags)...);
}

/// What a rule reads and writes at element i: the parameter, its grad and up to three state buffers (in the order
/// each rule documents; nullptr where the configuration has no such buffer).
struct Tensors {
  float* p = nullptr;
  const float* g = nullptr;
  float* s0 = nullptr;
  float* s1 = nullptr;
  float* s2 = nullptr;
};

/// True for inf and NaN (x - x is NaN for both, 0 for every finite x; no branch, so loops over it vectorize).
KILN_HD inline bool nonfinite(float x) { return !(x - x == 0.0f); }

// ---- SGD (momentum, Nesterov) -- buffers: s0 momentum_buffer

struct SgdScalars {
  float wd = 0;      ///< L2 weight decay added to the gradient (0 when decoupled)
  float neg_lr = 0;  ///< -lr
  float momentum = 0;
  float keep = 1;      ///< 1 - dampening
  float decay = 1;     ///< decoupled weight decay factor 1 - lr * weight_decay (1 without)
  bool first = false;  ///< the parameter's first step: the buffer starts as the gradient
  bool l2 = false, has_momentum = false, nesterov = false;
};

template <bool L2, bool Momentum, bool Nesterov>
struct Sgd {
  SgdScalars k;
  KILN_HD void operator()(const Tensors& t, int64_t i) const {
    const float w = t.p[i] * k.decay;
    float d = t.g[i];
    if constexpr (L2) d = d + k.wd * w;
    if constexpr (Momentum) {
      float* buf = t.s0;
      buf[i] = k.first ? d : buf[i] * k.momentum + k.keep * d;
      d = Nesterov ? d + k.momentum * buf[i] : buf[i];
    }
    t.p[i] = w + k.neg_lr * d;
  }
};

template <class F>
decltype(auto) with_rule(const SgdScalars& k, F&& f) {
  return dispatch(
      [&](auto l2, auto momentum, auto nesterov) {
        return f(Sgd<decltype(l2)::value, decltype(momentum)::value, decltype(nesterov)::value>{k});
      },
      k.l2, k.has_momentum, k.nesterov);
}

// ---- AdaGrad -- buffers: s0 sum

struct AdagradScalars {
  float wd = 0;
  float neg_clr = 0;  ///< -lr / (1 + (step - 1) * lr_decay)
  float eps = 0;
  float decay = 1;
  bool l2 = false;
};

template <bool L2>
struct Adagrad {
  AdagradScalars k;
  KILN_HD void operator()(const Tensors& t, int64_t i) const {
    float* sum = t.s0;
    const float w = t.p[i] * k.decay;
    float d = t.g[i];
    if constexpr (L2) d = d + k.wd * w;
    sum[i] = sum[i] + d * d;
    const float std = sqrtf(sum[i]) + k.eps;
    t.p[i] = w + k.neg_clr * (d / std);
  }
};

template <class F>
decltype(auto) with_rule(const AdagradScalars& k, F&& f) {
  return dispatch([&](auto l2) { return f(Adagrad<decltype(l2)::value>{k}); }, k.l2);
}

// ---- RMSprop (momentum, centered) -- buffers: s0 square_avg, s1 momentum_buffer, s2 grad_avg

struct RmspropScalars {
  float wd = 0;
  float neg_lr = 0;
  float alpha = 0;
  float one_minus_alpha = 0;
  float eps = 0;
  float momentum = 0;
  float decay = 1;
  bool l2 = false, has_momentum = false, centered = false;
};

template <bool L2, bool Momentum, bool Centered>
struct Rmsprop {
  RmspropScalars k;
  KILN_HD void operator()(const Tensors& t, int64_t i) const {
    float* sq = t.s0;
    const float w = t.p[i] * k.decay;
    float d = t.g[i];
    if constexpr (L2) d = d + k.wd * w;
    sq[i] = sq[i] * k.alpha + k.one_minus_alpha * d * d;
    float avg;
    if constexpr (Centered) {
      float* ga = t.s2;
      ga[i] = ga[i] * k.alpha + k.one_minus_alpha * d;
      avg = sqrtf(sq[i] + -1.0f * ga[i] * ga[i]);
    } else {
      avg = sqrtf(sq[i]);
    }
    avg = avg + k.eps;
    if constexpr (Momentum) {
      float* buf = t.s1;
      buf[i] = buf[i] * k.momentum + d / avg;
      t.p[i] = w + k.neg_lr * buf[i];
    } else {
      t.p[i] = w + k.neg_lr * (d / avg);
    }
  }
};

template <class F>
decltype(auto) with_rule(const RmspropScalars& k, F&& f) {
  return dispatch(
      [&](auto l2, auto momentum, auto centered) {
        return f(Rmsprop<decltype(l2)::value, decltype(momentum)::value, decltype(centered)::value>{k});
      },
      k.l2, k.has_momentum, k.centered);
}

// ---- AdaDelta -- buffers: s0 square_avg, s1 acc_delta

struct AdadeltaScalars {
  float wd = 0;
  float neg_lr = 0;
  float rho = 0;
  float one_minus_rho = 0;
  float eps = 0;
  float decay = 1;
  bool l2 = false;
};

template <bool L2>
struct Adadelta {
  AdadeltaScalars k;
  KILN_HD void operator()(const Tensors& t, int64_t i) const {
    float* sq = t.s0;
    float* acc = t.s1;
    const float w = t.p[i] * k.decay;
    float d = t.g[i];
    if constexpr (L2) d = d + k.wd * w;
    sq[i] = sq[i] * k.rho + k.one_minus_rho * d * d;
    const float std = sqrtf(sq[i] + k.eps);
    const float delta = sqrtf(acc[i] + k.eps) / std * d;
    acc[i] = acc[i] * k.rho + k.one_minus_rho * delta * delta;
    t.p[i] = w + k.neg_lr * delta;
  }
};

template <class F>
decltype(auto) with_rule(const AdadeltaScalars& k, F&& f) {
  return dispatch([&](auto l2) { return f(Adadelta<decltype(l2)::value>{k}); }, k.l2);
}

// ---- Adam, AdamW (AMSGrad) -- buffers: s0 exp_avg, s1 exp_avg_sq, s2 max_exp_avg_sq

struct AdamScalars {
  float wd = 0;
  float b1 = 0, b2 = 0;
  float one_minus_b1 = 0, one_minus_b2 = 0;
  float neg_step_size = 0;  ///< -lr / (1 - beta1^step)
  float bc2_sqrt = 1;       ///< sqrt(1 - beta2^step)
  float eps = 0;
  float decay = 1;
  bool l2 = false, amsgrad = false;
};

template <bool L2, bool Amsgrad>
struct Adam {
  AdamScalars k;
  KILN_HD void operator()(const Tensors& t, int64_t i) const {
    float* m = t.s0;
    float* v = t.s1;
    const float w = t.p[i] * k.decay;
    float d = t.g[i];
    if constexpr (L2) d = d + k.wd * w;
    m[i] = m[i] * k.b1 + k.one_minus_b1 * d;
    v[i] = v[i] * k.b2 + k.one_minus_b2 * d * d;
    float second = v[i];
    if constexpr (Amsgrad) {
      float* vmax = t.s2;
      vmax[i] = vmax[i] > v[i] ? vmax[i] : v[i];
      second = vmax[i];
    }
    const float denom = sqrtf(second) / k.bc2_sqrt + k.eps;
    t.p[i] = w + k.neg_step_size * (m[i] / denom);
  }
};

template <class F>
decltype(auto) with_rule(const AdamScalars& k, F&& f) {
  return dispatch([&](auto l2, auto amsgrad) { return f(Adam<decltype(l2)::value, decltype(amsgrad)::value>{k}); },
                  k.l2, k.amsgrad);
}

// ---- NovoGrad -- buffers: s0 exp_avg; the second moment (exp_avg_sq, max_exp_avg_sq) is one scalar per tensor

struct NovogradScalars {
  float beta2 = 0, one_minus_beta2 = 0;
  float eps = 0;
  float wd = 0;
  float b1 = 0;
  float scale = 1;  ///< 1 - beta1 with grad averaging, else 1
  float neg_lr = 0;
  float luc_trust = 0, luc_eps = 0;
  double lr = 0;
  bool amsgrad = false, weight_decay = false, averaging = false, luc = false;
  float denom = 1;  ///< sqrt(second moment) + eps of the tensor (novograd_denom), set per tensor
};

/// The tensor's second moment from the L2 norm of its gradient (the norm rounded to float, as a float tensor's
/// norm is): updates `v` (and `vmax` with AMSGrad) and returns the denominator sqrt(second) + eps.
KILN_HD inline float novograd_denom(float grad_norm, float* v, float* vmax, const NovogradScalars& k) {
  const float norm_sq = grad_norm * grad_norm;
  *v = *v == 0 ? norm_sq : *v * k.beta2 + k.one_minus_beta2 * norm_sq;
  float second = *v;
  if (k.amsgrad) {
    *vmax = *vmax > *v ? *vmax : *v;
    second = *vmax;
  }
  return sqrtf(second) + k.eps;
}

/// The moment update (and, without layer-wise update clipping, the weight update in the same pass).
template <bool WeightDecay, bool Averaging, bool Update>
struct NovogradMoment {
  NovogradScalars k;
  KILN_HD void operator()(const Tensors& t, int64_t i) const {
    float* m = t.s0;
    float d = t.g[i] / k.denom;
    if constexpr (WeightDecay) d = d + k.wd * t.p[i];
    if constexpr (Averaging) d = d * k.scale;
    m[i] = m[i] * k.b1 + d;
    if constexpr (Update) t.p[i] = t.p[i] + k.neg_lr * m[i];
  }
};

template <class F>
decltype(auto) with_rule(const NovogradScalars& k, F&& f) {
  return dispatch(
      [&](auto wd, auto averaging, auto update) {
        return f(NovogradMoment<decltype(wd)::value, decltype(averaging)::value, decltype(update)::value>{k});
      },
      k.weight_decay, k.averaging, !k.luc);
}

/// Layer-wise update clipping: -min(luc_trust * |w| / (|m| + luc_eps), lr), from the norms rounded to float.
KILN_HD inline float novograd_luc_neg_lr(float data_norm, float update_norm, const NovogradScalars& k) {
  const float factor = k.luc_trust * data_norm / (update_norm + k.luc_eps);
  const double f = static_cast<double>(factor);
  return static_cast<float>(-(k.lr < f ? k.lr : f));  // std::min(f, lr)
}

/// p += neg_lr * m (the update after layer-wise clipping). Buffers: s0 exp_avg.
struct AddScaled {
  float neg_lr = 0;
  KILN_HD void operator()(const Tensors& t, int64_t i) const { t.p[i] = t.p[i] + neg_lr * t.s0[i]; }
};

// ---- gradient rules: they write the grad in place (Tensors::p is the grad, g unused unless stated)

/// Clamp to [lo, hi] (clip_grad_value_).
struct ClampGrad {
  float lo = 0, hi = 0;
  KILN_HD void operator()(const Tensors& t, int64_t i) const {
    const float x = t.p[i];
    t.p[i] = x < lo ? lo : (x > hi ? hi : x);
  }
};

/// Multiply by a factor (clip_grad_norm_'s coefficient, loss unscaling).
struct ScaleGrad {
  float factor = 1;
  KILN_HD void operator()(const Tensors& t, int64_t i) const { t.p[i] = t.p[i] * factor; }
};

/// Loss unscaling: g *= inv_scale (in place); returns whether the result is inf or NaN.
struct UnscaleGrad {
  float inv_scale = 1;
  KILN_HD bool operator()(float* g, int64_t i) const {
    const float y = g[i] * inv_scale;
    g[i] = y;
    return nonfinite(y);
  }
};

/// Gradient accumulation: s0 is the running total; `first` starts it from the grad (t.g).
struct AccumulateGrad {
  bool first = false;
  KILN_HD void operator()(const Tensors& t, int64_t i) const { t.s0[i] = first ? t.g[i] : t.s0[i] + t.g[i]; }
};

/// The accumulated total (t.g) written to the grad (t.p), divided by the count for a mean.
struct FinishGrad {
  bool mean = false;
  float count = 1;
  KILN_HD void operator()(const Tensors& t, int64_t i) const { t.p[i] = mean ? t.g[i] / count : t.g[i]; }
};

}  // namespace kiln::train::rules
