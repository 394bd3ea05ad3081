#pragma once
// What the loss kernels share (reference and CPU): the per-element formulas, how a class loss sees its
// input, index loading, broadcast factors, the checked reading of class and CTC targets, and the CTC alpha-beta
// recursions in log space.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/registry.h"
#include "kiln/tensor.h"
#include "ops/loss/loss.h"

namespace kiln::loss {

template <class T>
T smooth_l1(T d, T beta) {
  const T a = std::abs(d);
  return a < beta ? T(0.5) * d * d / beta : a - T(0.5) * beta;
}
/// d smooth_l1 / d d; sign(d) at |d| >= beta (and for beta 0).
template <class T>
T smooth_l1_grad(T d, T beta) {
  if (std::abs(d) < beta) return d / beta;
  return d > 0 ? T(1) : d < 0 ? T(-1) : T(0);
}
template <class T>
T sign(T d) {
  return d > 0 ? T(1) : d < 0 ? T(-1) : T(0);
}
/// log(sigmoid(x)) without overflow.
template <class T>
T log_sigmoid(T x) {
  return std::min(x, T(0)) - std::log1p(std::exp(-std::abs(x)));
}
template <class T>
T sigmoid(T x) {
  if (x >= 0) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

/// BCEWithLogitsLoss of one element (w: weight, pw: pos_weight; 1 when absent).
template <class T>
T bce(T x, T t, T w, T pw) {
  return w * ((T(1) - t) * x - (T(1) + (pw - T(1)) * t) * log_sigmoid(x));
}
/// Its derivative with respect to input `wrt`.
template <class T>
T bce_grad(BceWrt wrt, T x, T t, T w, T pw) {
  switch (wrt) {
    case BceWrt::kInput: return w * ((T(1) - t) - (T(1) + (pw - T(1)) * t) * sigmoid(-x));
    case BceWrt::kTarget: return w * (-x - (pw - T(1)) * log_sigmoid(x));
    case BceWrt::kWeight: return (T(1) - t) * x - (T(1) + (pw - T(1)) * t) * log_sigmoid(x);
    case BceWrt::kPosWeight: return -w * t * log_sigmoid(x);
  }
  return T(0);
}

/// A class loss's input viewed as [outer, classes, inner]; target element o * inner + i is the class of
/// the column (o, :, i).
struct ClassSplit {
  int64_t outer = 1, classes = 1, inner = 1;
};
inline ClassSplit class_split(const Dims& x) {
  ClassSplit s;
  if (x.rank() == 1) {
    s.classes = x[0];
    return s;
  }
  s.outer = x[0];
  s.classes = x[1];
  for (int a = 2; a < x.rank(); ++a) s.inner *= x[a];
  return s;
}

/// Element `i` of an int32 or int64 tensor.
inline int64_t load_index(const Tensor& t, int64_t i) {
  return t.dtype() == DataType::kInt32 ? int64_t{t.data<int32_t>()[i]} : t.data<int64_t>()[i];
}

/// Maps an element of x to the element of a factor broadcast to x (right-aligned, dims equal or 1).
class BroadcastIndex {
 public:
  BroadcastIndex() = default;
  BroadcastIndex(const Dims& x, const Dims& f) : x_(x) {
    const int lead = x.rank() - f.rank();
    int64_t stride = 1;
    strides_ = Dims::of_rank(x.rank(), 0);
    for (int a = f.rank() - 1; a >= 0; --a) {
      strides_[a + lead] = f[a] == 1 ? 0 : stride;
      stride *= f[a];
    }
    // A factor equal to x's trailing dims (after leading 1s) is element i % numel: the common case.
    int64_t trailing = 1;
    int a = x.rank() - 1;
    for (; a >= 0 && strides_[a] != 0; --a) trailing *= x[a];
    bool rest_broadcast = true;
    for (int b = a; b >= 0; --b) rest_broadcast &= strides_[b] == 0;
    modulo_ = rest_broadcast ? std::max<int64_t>(trailing, 1) : 0;
  }
  int64_t operator()(int64_t i) const {
    if (modulo_) return i % modulo_;
    int64_t off = 0;
    for (int a = x_.rank() - 1; a >= 0; --a) {
      off += (i % x_[a]) * strides_[a];
      i /= x_[a];
    }
    return off;
  }
  /// Non-zero when the factor index is i % modulo().
  int64_t modulo() const { return modulo_; }

 private:
  Dims x_, strides_;
  int64_t modulo_ = 1;
};

/// Input i as float32 data, or null when the optional input is absent.
inline const float* optional_data(const KernelContext& ctx, size_t i) {
  return i < ctx.src.size() && ctx.src[i].defined() ? ctx.src[i].data<float>() : nullptr;
}

/// Class targets checked in one pass: per item its class or -1 (ignored), and the mean's denominator (the sum
/// of the counted items' weights).
template <class I>
Status read_class_targets(const char* op, const Tensor& target, const ClassSplit& s, int64_t ignore_index,
                          const float* weight, std::vector<I>& cls, double& denom) {
  const int64_t items = s.outer * s.inner;
  cls.resize(static_cast<size_t>(items));
  denom = 0;
  for (int64_t j = 0; j < items; ++j) {
    const int64_t c = load_index(target, j);
    if (c == ignore_index) {
      cls[j] = -1;
      continue;
    }
    if (c < 0 || c >= s.classes)
      return invalid_argument(op, ": target ", c, " at position ", j, " is not a class in [0, ", s.classes,
                              ") nor ignore_index ", ignore_index);
    cls[j] = static_cast<I>(c);
    denom += weight ? weight[c] : 1.0;
  }
  return Status::ok();
}

/// BCEWithLogitsLoss's optional weight and pos_weight (inputs off + 2 and off + 3), broadcast to input off.
struct BceFactors {
  const float *w = nullptr, *pw = nullptr;
  BroadcastIndex wi, pwi;

  BceFactors(const KernelContext& ctx, int off) {
    const Dims& dims = ctx.src[off].dims();
    if ((w = optional_data(ctx, off + 2))) wi = BroadcastIndex(dims, ctx.src[off + 2].dims());
    if ((pw = optional_data(ctx, off + 3))) pwi = BroadcastIndex(dims, ctx.src[off + 3].dims());
  }
  double weight(int64_t i) const { return w ? w[wi(i)] : 1.0; }
  double pos_weight(int64_t i) const { return pw ? pw[pwi(i)] : 1.0; }
};

/// The CTC problem of one op call (inputs from `off`): per sample where its labels start in `labels`, its target
/// and input lengths; lengths and labels checked (classes other than blank).
struct CtcProblem {
  int64_t T = 0, N = 0, C = 0;
  std::vector<int64_t> labels, start, length, input_length;
};

inline Status read_ctc(const char* op, const KernelContext& ctx, int off, CtcProblem& p) {
  const auto& a = ctx.attrs<CTCLossAttrs>();
  const Dims& d = ctx.src[off].dims();
  p.T = d[0];
  p.N = d[1];
  p.C = d[2];
  const Tensor& targets = ctx.src[off + 1];
  const bool padded = targets.rank() == 2;
  int64_t offset = 0;
  for (int64_t n = 0; n < p.N; ++n) {
    const int64_t in_len = load_index(ctx.src[off + 2], n), len = load_index(ctx.src[off + 3], n);
    if (in_len < 0 || in_len > p.T)
      return invalid_argument(op, ": input_lengths[", n, "] = ", in_len, " is not in [0, ", p.T, "]");
    const int64_t avail = padded ? targets.dims()[1] : targets.numel() - offset;
    if (len < 0 || len > avail)
      return invalid_argument(op, ": target_lengths[", n, "] = ", len, " does not fit the targets (",
                              padded ? "padded length " : "elements left ", avail, ")");
    const int64_t from = padded ? n * targets.dims()[1] : offset;
    p.start.push_back(static_cast<int64_t>(p.labels.size()));
    for (int64_t k = 0; k < len; ++k) {
      const int64_t c = load_index(targets, from + k);
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

/// What sample n's loss counts for in the output: 1 / (max(target length, 1) N) for mean, else 1.
inline double ctc_scale(const CtcProblem& p, LossReduction r, int64_t n) {
  if (r != LossReduction::kMean) return 1.0;
  return 1.0 / (std::max<double>(static_cast<double>(p.length[n]), 1.0) * static_cast<double>(p.N));
}

/// One CTC sample: its log-probabilities lp(t, c) = base[t * t_stride + c], the target labels, T and C.
template <class T>
struct CtcSample {
  const float* base;
  int64_t t_stride;
  const int64_t* labels;
  int64_t input_length, target_length, classes, blank;
  float lp(int64_t t, int64_t c) const { return base[t * t_stride + c]; }
  /// The label of position s of the blank-extended target (blank, l0, blank, l1, ..., blank).
  int64_t ext(int64_t s) const { return s % 2 == 0 ? blank : labels[s / 2]; }
  int64_t states() const { return 2 * target_length + 1; }
};

template <class T>
T log_add(T a, T b) {
  if (a < b) std::swap(a, b);
  if (b == -std::numeric_limits<T>::infinity()) return a;
  return a + std::log1p(std::exp(b - a));
}

/// log alpha[t][s] (probability of the prefix paths ending in state s at time t, emission at t included),
/// rows of `states()` values for t < input_length; returns the negative log-likelihood.
template <class T>
T ctc_alpha(const CtcSample<T>& x, std::vector<T>& alpha) {
  const T ninf = -std::numeric_limits<T>::infinity();
  const int64_t S = x.states(), len = x.input_length;
  alpha.assign(static_cast<size_t>(std::max<int64_t>(len, 1) * S), ninf);
  if (len == 0) return x.target_length == 0 ? T(0) : std::numeric_limits<T>::infinity();
  alpha[0] = x.lp(0, x.blank);
  if (S > 1) alpha[1] = x.lp(0, x.ext(1));
  for (int64_t t = 1; t < len; ++t) {
    const T* prev = &alpha[(t - 1) * S];
    T* cur = &alpha[t * S];
    for (int64_t s = 0; s < S; ++s) {
      const int64_t c = x.ext(s);
      T a = prev[s];
      if (s >= 1) a = log_add(a, prev[s - 1]);
      if (s >= 2 && c != x.blank && c != x.ext(s - 2)) a = log_add(a, prev[s - 2]);
      cur[s] = a == ninf ? ninf : a + x.lp(t, c);
    }
  }
  const T* last = &alpha[(len - 1) * S];
  const T ll = S > 1 ? log_add(last[S - 1], last[S - 2]) : last[0];
  return -ll;
}

/// log beta[t][s] (suffix paths from state s at time t, emission at t included), like ctc_alpha.
template <class T>
void ctc_beta(const CtcSample<T>& x, std::vector<T>& beta) {
  const T ninf = -std::numeric_limits<T>::infinity();
  const int64_t S = x.states(), len = x.input_length;
  beta.assign(static_cast<size_t>(std::max<int64_t>(len, 1) * S), ninf);
  if (len == 0) return;
  T* last = &beta[(len - 1) * S];
  last[S - 1] = x.lp(len - 1, x.ext(S - 1));
  if (S > 1) last[S - 2] = x.lp(len - 1, x.ext(S - 2));
  for (int64_t t = len - 2; t >= 0; --t) {
    const T* next = &beta[(t + 1) * S];
    T* cur = &beta[t * S];
    for (int64_t s = 0; s < S; ++s) {
      const int64_t c = x.ext(s);
      T b = next[s];
      if (s + 1 < S) b = log_add(b, next[s + 1]);
      if (s + 2 < S && c != x.blank && c != x.ext(s + 2)) b = log_add(b, next[s + 2]);
      cur[s] = b == ninf ? ninf : b + x.lp(t, c);
    }
  }
}

/// dLoss/dlp for one sample, given its loss nll and dLoss/dnll `g`: -g exp(alpha + beta - lp + nll) summed
/// over the states of each class (0 for classes not in the target and for t >= input_length). `grad`
/// points at element (0, n, 0) of the [T, N, C] gradient, rows t_stride apart, already zero.
template <class T>
void ctc_grad(const CtcSample<T>& x, T nll, T g, const std::vector<T>& alpha, const std::vector<T>& beta, float* grad) {
  const int64_t S = x.states();
  for (int64_t t = 0; t < x.input_length; ++t) {
    const T* a = &alpha[t * S];
    const T* b = &beta[t * S];
    float* row = grad + t * x.t_stride;
    for (int64_t s = 0; s < S; ++s) {
      const int64_t c = x.ext(s);
      const T v = a[s] + b[s];
      if (v == -std::numeric_limits<T>::infinity() && !std::isinf(nll)) continue;
      row[c] = static_cast<float>(row[c] - g * std::exp(v - x.lp(t, c) + nll));
    }
  }
}

}  // namespace kiln::loss
