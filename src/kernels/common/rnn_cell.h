#pragma once
// The per-element math of one LSTM / GRU / RNN step, forward (saving what the backward needs) and backward,
// shared by the reference (double), CPU (float) and CUDA (float) kernels. A step works on the whole batch: a GEMM
// first gives the recurrent products of every entry, then forward_element / backward_element run once per
// (batch entry, hidden unit); GRU with linear_before_reset = 0 needs a second GEMM and a second phase.
#include <math.h>

#include <cstdint>

#include "kernels/common/host_device.h"
#include "ops/rnn/rnn.h"

namespace kiln::rnn {

/// One activation function with its parameters, plain data for kernels.
struct Act {
  RnnActivation kind = RnnActivation::kTanh;
  float alpha = 0.f, beta = 0.f;
};

KILN_HD inline float m_exp(float x) { return expf(x); }
KILN_HD inline double m_exp(double x) { return exp(x); }
KILN_HD inline float m_expm1(float x) { return expm1f(x); }
KILN_HD inline double m_expm1(double x) { return expm1(x); }
KILN_HD inline float m_tanh(float x) { return tanhf(x); }
KILN_HD inline double m_tanh(double x) { return tanh(x); }
KILN_HD inline float m_log1p(float x) { return log1pf(x); }
KILN_HD inline double m_log1p(double x) { return log1p(x); }
KILN_HD inline float m_abs(float x) { return fabsf(x); }
KILN_HD inline double m_abs(double x) { return fabs(x); }

template <class T>
KILN_HD T act_sigmoid(T x) {
  return T(1) / (T(1) + m_exp(-x));
}

/// fn(x).
template <class T>
KILN_HD T activate(const Act& fn, T x) {
  const T alpha = fn.alpha, beta = fn.beta;
  switch (fn.kind) {
    case RnnActivation::kSigmoid: return act_sigmoid(x);
    case RnnActivation::kTanh: return m_tanh(x);
    case RnnActivation::kRelu: return x > T(0) ? x : T(0);
    case RnnActivation::kAffine: return alpha * x + beta;
    case RnnActivation::kLeakyRelu: return x >= T(0) ? x : alpha * x;
    case RnnActivation::kThresholdedRelu: return x > alpha ? x : T(0);
    case RnnActivation::kScaledTanh: return alpha * m_tanh(beta * x);
    case RnnActivation::kHardSigmoid: {
      const T v = alpha * x + beta;
      return v < T(0) ? T(0) : v > T(1) ? T(1) : v;
    }
    case RnnActivation::kElu: return x >= T(0) ? x : alpha * m_expm1(x);
    case RnnActivation::kSoftsign: return x / (T(1) + m_abs(x));
    case RnnActivation::kSoftplus: return x > T(20) ? x : m_log1p(m_exp(x));
  }
  return x;
}

/// fn'(x) (at a kink: the slope of the side the forward's comparison takes).
template <class T>
KILN_HD T activate_grad(const Act& fn, T x) {
  const T alpha = fn.alpha, beta = fn.beta;
  switch (fn.kind) {
    case RnnActivation::kSigmoid: {
      const T s = act_sigmoid(x);
      return s * (T(1) - s);
    }
    case RnnActivation::kTanh: {
      const T t = m_tanh(x);
      return T(1) - t * t;
    }
    case RnnActivation::kRelu: return x > T(0) ? T(1) : T(0);
    case RnnActivation::kAffine: return alpha;
    case RnnActivation::kLeakyRelu: return x >= T(0) ? T(1) : alpha;
    case RnnActivation::kThresholdedRelu: return x > alpha ? T(1) : T(0);
    case RnnActivation::kScaledTanh: {
      const T t = m_tanh(beta * x);
      return alpha * beta * (T(1) - t * t);
    }
    case RnnActivation::kHardSigmoid: {
      const T v = alpha * x + beta;
      return v > T(0) && v < T(1) ? alpha : T(0);
    }
    case RnnActivation::kElu: return x >= T(0) ? T(1) : alpha * m_exp(x);
    case RnnActivation::kSoftsign: {
      const T d = T(1) + m_abs(x);
      return T(1) / (d * d);
    }
    case RnnActivation::kSoftplus: return x > T(20) ? T(1) : act_sigmoid(x);
  }
  return T(1);
}

/// x clamped to [-clip, clip] (clip 0: unchanged).
template <class T>
KILN_HD T clip_to(T x, float clip) {
  const T c = clip;
  return clip > 0.f ? (x < -c ? -c : x > c ? c : x) : x;
}
/// fn(clip(x)) and its derivative with respect to x (0 where the clip clamps).
template <class T>
KILN_HD T gate(const Act& fn, T x, float clip) {
  return activate(fn, clip_to(x, clip));
}
template <class T>
KILN_HD T gate_grad(const Act& fn, T x, float clip) {
  const T c = clip;
  if (clip > 0.f && (x < -c || x > c)) return T(0);
  return activate_grad(fn, x);
}

/// gate_grad given also y = gate(fn, x, clip): sigmoid and tanh take their derivative from y (no second exp).
template <class T>
KILN_HD T gate_grad(const Act& fn, T x, T y, float clip) {
  const T c = clip;
  if (clip > 0.f && (x < -c || x > c)) return T(0);
  if (fn.kind == RnnActivation::kSigmoid) return y * (T(1) - y);
  if (fn.kind == RnnActivation::kTanh) return T(1) - y * y;
  return activate_grad(fn, x);
}

enum class CellKind : int { kLstm, kGru, kRnn };

/// Everything one step of one direction touches. Per-step buffers ([batch, n]) are indexed by the batch entry;
/// per-sequence buffers ([rows, n], rows laid out like X's rows) by the row of (t, b). Absent buffers are null.
template <class T>
struct Step {
  CellKind cell = CellKind::kLstm;
  bool lbr = false;           ///< GRU linear_before_reset
  bool input_forget = false;  ///< LSTM coupled gates
  float clip = 0.f;
  Act f, g, fh;  ///< the direction's functions (LSTM f, g, h; GRU f, g; RNN f)
  int64_t seq = 0, batch = 0, hidden = 0, dirs = 1, d = 0, layout = 0;
  bool reversed = false;
  int64_t k = 0;                  ///< the step's index in processing order
  const int64_t* lens = nullptr;  ///< [batch] valid lengths; null: all seq
  const T* peep = nullptr;        ///< the direction's P [3H] (i, o, f)
  const T* rb_h = nullptr;        ///< GRU lbr: the direction's Rb of the h gate [H]
  T* pre = nullptr;               ///< [rows, gates*H]: X W^T + biases in, full pre-activations out (unclipped)
  const T* hr = nullptr;          ///< [batch, gates*H] h R^T of this step (GRU non-lbr: h gate from r*h R_h^T)
  T* h = nullptr;                 ///< [batch, H] state, updated
  T* c = nullptr;                 ///< [batch, H] LSTM cell state, updated
  T* q = nullptr;                 ///< [batch, H] GRU non-lbr: r * h for the h gate's GEMM
  T* save_h = nullptr;            ///< [rows, H] h before the step
  T* save_c = nullptr;            ///< [rows, H] LSTM: c before the step
  T* save_c_new = nullptr;        ///< [rows, H] LSTM: c after the step
  T* save_extra = nullptr;        ///< [rows, H] GRU: r * h (non-lbr) or R_h h + Rb_h (lbr)
  T* y = nullptr;                 ///< Y (forward only)
  // Backward.
  const T* dy = nullptr;  ///< dY or null
  T* dh = nullptr;        ///< [batch, H] dLoss/dh after the step in, before the step out (partial: the GEMM adds)
  T* dc = nullptr;        ///< [batch, H] LSTM dLoss/dc likewise (complete)
  T* dq = nullptr;        ///< [batch, H] GRU non-lbr: dLoss/d(r*h) from the GEMM
  T* dstep = nullptr;     ///< [batch, gates*H] what the GEMM multiplies with R (zero for entries without the step)
  T* dpre = nullptr;      ///< [rows, gates*H] dLoss/d(pre-activation) for dW, dX, dB
  T* dpre_r = nullptr;    ///< [rows, gates*H] GRU lbr: the gradient the R side sees (h gate: through r)

  KILN_HD int64_t gates() const { return cell == CellKind::kLstm ? 4 : cell == CellKind::kGru ? 3 : 1; }
  /// The time index of this step for entry b, or -1 when b has no such step.
  KILN_HD int64_t time(int64_t b) const {
    const int64_t len = lens ? lens[b] : seq;
    if (k >= len) return -1;
    return reversed ? len - 1 - k : k;
  }
  KILN_HD int64_t row(int64_t t, int64_t b) const { return layout == 0 ? t * batch + b : b * seq + t; }
  KILN_HD int64_t y_at(int64_t t, int64_t b) const {
    return (layout == 0 ? (t * dirs + d) * batch + b : (b * seq + t) * dirs + d) * hidden;
  }
};

/// Forward of unit j of entry b. Phase 0 for every cell; GRU non-lbr stops after r * h and finishes in phase 1
/// once the GEMM has added (r * h) R_h^T to hr's h columns.
template <class T>
KILN_HD void forward_element(const Step<T>& s, int phase, int64_t b, int64_t j) {
  const int64_t t = s.time(b);
  if (t < 0) return;
  const int64_t H = s.hidden, gh = s.gates() * H, row = s.row(t, b);
  T* pre = s.pre + row * gh;
  const T* hr = s.hr + b * gh;
  const T hp = s.h[b * H + j];
  T hn;
  if (s.cell == CellKind::kLstm) {
    const T cp = s.c[b * H + j];
    T& pi = pre[j];
    T& po = pre[H + j];
    T& pf = pre[2 * H + j];
    T& pc = pre[3 * H + j];
    pi += hr[j];
    po += hr[H + j];
    pf += hr[2 * H + j];
    pc += hr[3 * H + j];
    if (s.peep) {
      pi += T(s.peep[j]) * cp;
      pf += T(s.peep[2 * H + j]) * cp;
    }
    const T gi = gate(s.f, pi, s.clip);
    const T gf = s.input_forget ? T(1) - gi : gate(s.f, pf, s.clip);
    const T gc = gate(s.g, pc, s.clip);
    const T cn = gf * cp + gi * gc;
    if (s.peep) po += T(s.peep[H + j]) * cn;
    const T go = gate(s.f, po, s.clip);
    hn = go * activate(s.fh, cn);
    if (s.save_c) s.save_c[row * H + j] = cp;
    if (s.save_c_new) s.save_c_new[row * H + j] = cn;
    s.c[b * H + j] = cn;
  } else if (s.cell == CellKind::kGru) {
    T& pz = pre[j];
    T& pr = pre[H + j];
    T& ph = pre[2 * H + j];
    if (phase == 0) {
      pz += hr[j];
      pr += hr[H + j];
      const T gr = gate(s.f, pr, s.clip);
      if (!s.lbr) {
        s.q[b * H + j] = gr * hp;
        if (s.save_extra) s.save_extra[row * H + j] = gr * hp;
        if (s.save_h) s.save_h[row * H + j] = hp;
        return;
      }
      const T u = hr[2 * H + j] + (s.rb_h ? T(s.rb_h[j]) : T(0));
      if (s.save_extra) s.save_extra[row * H + j] = u;
      ph += gr * u;
    } else {
      ph += hr[2 * H + j];
    }
    const T gz = gate(s.f, pz, s.clip);
    hn = (T(1) - gz) * gate(s.g, ph, s.clip) + gz * hp;
  } else {
    T& p = pre[j];
    p += hr[j];
    hn = gate(s.f, p, s.clip);
  }
  if (s.save_h) s.save_h[row * H + j] = hp;
  s.h[b * H + j] = hn;
  if (s.y) s.y[s.y_at(t, b) + j] = hn;
}

/// Backward of unit j of entry b, steps in reverse processing order. Phase 0 for every cell (entries without the
/// step zero their dstep row); GRU non-lbr finishes r's gradient in phase 1 once the GEMM has put dq = dah R_h.
/// Afterwards the caller adds dstep R (GRU non-lbr: its z and r columns only) to dh.
template <class T>
KILN_HD void backward_element(const Step<T>& s, int phase, int64_t b, int64_t j) {
  const int64_t H = s.hidden, gates = s.gates(), gh = gates * H;
  const int64_t t = s.time(b);
  if (t < 0) {
    if (phase == 0)
      for (int64_t g = 0; g < gates; ++g) s.dstep[b * gh + g * H + j] = T(0);
    return;
  }
  const int64_t row = s.row(t, b);
  const T* pre = s.pre + row * gh;
  T* dpre = s.dpre + row * gh;
  T* dstep = s.dstep + b * gh;
  const T hp = s.save_h[row * H + j];
  if (phase == 1) {  // GRU non-lbr: r's gradient through r * h
    const T dqv = s.dq[b * H + j];
    const T gr = gate(s.f, pre[H + j], s.clip);
    const T dar = dqv * hp * gate_grad(s.f, pre[H + j], gr, s.clip);
    s.dh[b * H + j] += dqv * gr;
    dpre[H + j] = dar;
    dstep[H + j] = dar;
    return;
  }
  const T dh = s.dh[b * H + j] + (s.dy ? T(s.dy[s.y_at(t, b) + j]) : T(0));
  if (s.cell == CellKind::kLstm) {
    const T cp = s.save_c[row * H + j], cn = s.save_c_new[row * H + j];
    const T pi = pre[j], po = pre[H + j], pf = pre[2 * H + j], pc = pre[3 * H + j];
    const T gi = gate(s.f, pi, s.clip);
    const T gf = s.input_forget ? T(1) - gi : gate(s.f, pf, s.clip);
    const T gc = gate(s.g, pc, s.clip);
    const T go = gate(s.f, po, s.clip);
    const T hc = activate(s.fh, cn);
    const T dao = dh * hc * gate_grad(s.f, po, go, s.clip);
    T dc = s.dc[b * H + j] + dh * go * gate_grad(s.fh, cn, hc, 0.f);
    if (s.peep) dc += dao * T(s.peep[H + j]);
    T di = dc * gc;
    const T dgf = dc * cp;
    T dcp = dc * gf;
    T daf = T(0);
    if (s.input_forget) {
      di -= dgf;
    } else {
      daf = dgf * gate_grad(s.f, pf, gf, s.clip);
      if (s.peep) dcp += daf * T(s.peep[2 * H + j]);
    }
    const T dai = di * gate_grad(s.f, pi, gi, s.clip);
    if (s.peep) dcp += dai * T(s.peep[j]);
    const T dac = dc * gi * gate_grad(s.g, pc, gc, s.clip);
    dpre[j] = dstep[j] = dai;
    dpre[H + j] = dstep[H + j] = dao;
    dpre[2 * H + j] = dstep[2 * H + j] = daf;
    dpre[3 * H + j] = dstep[3 * H + j] = dac;
    s.dc[b * H + j] = dcp;
    s.dh[b * H + j] = T(0);
  } else if (s.cell == CellKind::kGru) {
    const T pz = pre[j], pr = pre[H + j], ph = pre[2 * H + j];
    const T gz = gate(s.f, pz, s.clip);
    const T gh_v = gate(s.g, ph, s.clip);
    const T daz = dh * (hp - gh_v) * gate_grad(s.f, pz, gz, s.clip);
    const T dah = dh * (T(1) - gz) * gate_grad(s.g, ph, gh_v, s.clip);
    s.dh[b * H + j] = dh * gz;
    dpre[j] = dstep[j] = daz;
    dpre[2 * H + j] = dah;
    if (s.lbr) {
      const T u = s.save_extra[row * H + j];
      const T gr = gate(s.f, pr, s.clip);
      const T dar = dah * u * gate_grad(s.f, pr, gr, s.clip);
      const T du = dah * gr;
      dpre[H + j] = dstep[H + j] = dar;
      dstep[2 * H + j] = du;
      T* dr = s.dpre_r + row * gh;
      dr[j] = daz;
      dr[H + j] = dar;
      dr[2 * H + j] = du;
    } else {
      dstep[H + j] = T(0);  // phase 1
      dstep[2 * H + j] = dah;
    }
  } else {
    const T da = dh * gate_grad(s.f, pre[j], s.clip);
    dpre[j] = dstep[j] = da;
    s.dh[b * H + j] = T(0);
  }
}

}  // namespace kiln::rnn
