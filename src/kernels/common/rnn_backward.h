#pragma once
// The host algorithm of LSTMBackward, GRUBackward and RNNBackward, shared by the reference (double) and CPU (float)
// kernels; the CUDA kernel runs the same sequence with cuBLAS and device loops. Per direction: recompute the
// forward (X W^T for every step in one GEMM, then per step h R^T and the cell's element math, saving the
// pre-activations and states), then walk the steps backwards (the element math, then one GEMM dstep R into dh), and
// finish with GEMMs over all steps: dW = dpre^T X, dX += dpre W, dR = dpre^T h_prev; dB and dP are column sums.
#include <vector>

#include "kernels/common/rnn_cell.h"
#include "kernels/common/rnn_problem.h"

namespace kiln::rnn {

/// The backward's tensors as T arrays (absent inputs null). Outputs are fully written.
template <class T>
struct BackwardIo {
  const T *x = nullptr, *w = nullptr, *r = nullptr, *bias = nullptr, *h0 = nullptr, *c0 = nullptr, *peep = nullptr;
  const T *dy = nullptr, *dy_h = nullptr, *dy_c = nullptr;
  T *dx = nullptr, *dw = nullptr, *dr = nullptr, *db = nullptr, *dh0 = nullptr, *dc0 = nullptr, *dp = nullptr;
};

/// The cell's constants besides the direction's functions.
struct CellSpec {
  CellKind cell = CellKind::kLstm;
  bool lbr = false, input_forget = false;
  int functions = 3;  ///< activation functions per direction
};

inline Act to_act(const Fn& fn) { return {fn.kind, fn.alpha, fn.beta}; }

/// Runs the backward. gemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc): row-major c = op(a) op(b) + beta c
/// (beta 0 or 1; with k == 0 it must still scale c). each(n, work, fn) calls fn(i) for i < n, in any
/// order (`work`: about how many multiply-adds one call does, for choosing whether to use threads).
template <class T, class Gemm, class Each>
void host_backward(const Problem& p, const RnnCommonAttrs& a, const CellSpec& spec, const std::vector<int64_t>& lens,
                   const BackwardIo<T>& io, Gemm&& gemm, Each&& each) {
  const int64_t H = p.hidden, I = p.input, B = p.batch, gates = p.gates, gh = gates * H;
  const int64_t rows = p.seq * p.batch;
  const bool gru = spec.cell == CellKind::kGru, split = gru && !spec.lbr;  // split: GRU h gate from r * h
  const int64_t rec_cols = split ? 2 * H : gh;                             // columns of the step GEMMs over R
  auto zero = [](T* v, int64_t n) { std::fill(v, v + n, T(0)); };
  zero(io.dx, rows * I);
  const int64_t dirs = p.dirs;
  std::vector<int64_t> lens64(lens.begin(), lens.end());
  int64_t steps = 0;
  for (int64_t l : lens64) steps = std::max(steps, l);

  std::vector<T> pre(static_cast<size_t>(rows * gh)), hr(static_cast<size_t>(B * gh));
  std::vector<T> h(static_cast<size_t>(B * H)), c(static_cast<size_t>(B * H)), q(static_cast<size_t>(B * H));
  std::vector<T> save_h(static_cast<size_t>(rows * H)), save_c, save_c_new, save_extra;
  std::vector<T> dpre(static_cast<size_t>(rows * gh)), dpre_r, dstep(static_cast<size_t>(B * gh));
  std::vector<T> dh(static_cast<size_t>(B * H)), dc(static_cast<size_t>(B * H)), dq(static_cast<size_t>(B * H));
  if (spec.cell == CellKind::kLstm) {
    save_c.resize(static_cast<size_t>(rows * H));
    save_c_new.resize(static_cast<size_t>(rows * H));
  }
  if (gru) save_extra.resize(static_cast<size_t>(rows * H));
  if (gru && spec.lbr) dpre_r.resize(static_cast<size_t>(rows * gh));

  for (int64_t d = 0; d < dirs; ++d) {
    const T* wd = io.w + d * gh * I;
    const T* rd = io.r + d * gh * H;
    const T* bd = io.bias ? io.bias + d * 2 * gh : nullptr;
    const std::vector<Fn> fns = functions(a, spec.functions, static_cast<int>(d));
    Step<T> s;
    s.cell = spec.cell;
    s.lbr = spec.lbr;
    s.input_forget = spec.input_forget;
    s.clip = a.clip;
    s.f = to_act(fns[0]);
    if (fns.size() > 1) s.g = to_act(fns[1]);
    if (fns.size() > 2) s.fh = to_act(fns[2]);
    s.seq = p.seq;
    s.batch = B;
    s.hidden = H;
    s.dirs = dirs;
    s.d = d;
    s.layout = p.layout;
    s.reversed = p.reversed(d);
    s.lens = lens64.data();
    s.peep = io.peep ? io.peep + d * 3 * H : nullptr;
    s.rb_h = gru && spec.lbr && bd ? bd + gh + 2 * H : nullptr;
    s.pre = pre.data();
    s.hr = hr.data();
    s.h = h.data();
    s.c = c.data();
    s.q = q.data();
    s.save_h = save_h.data();
    s.save_c = save_c.empty() ? nullptr : save_c.data();
    s.save_c_new = save_c_new.empty() ? nullptr : save_c_new.data();
    s.save_extra = save_extra.empty() ? nullptr : save_extra.data();

    // Forward.
    gemm(false, true, rows, gh, I, io.x, I, wd, I, T(0), pre.data(), gh);
    if (bd) {
      std::vector<T> bias(static_cast<size_t>(gh));
      for (int64_t j = 0; j < gh; ++j) bias[j] = bd[j] + (gru && spec.lbr && j >= 2 * H ? T(0) : bd[gh + j]);
      each(rows, gh, [&](int64_t row) {
        for (int64_t j = 0; j < gh; ++j) pre[row * gh + j] += bias[j];
      });
    }
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < H; ++j) {
        const int64_t at = p.state_at(d, b) + j;
        h[b * H + j] = io.h0 ? io.h0[at] : T(0);
        c[b * H + j] = io.c0 ? io.c0[at] : T(0);
      }
    zero(q.data(), B * H);
    zero(save_h.data(), rows * H);
    if (s.save_c) zero(s.save_c, rows * H);
    if (s.save_c_new) zero(s.save_c_new, rows * H);
    if (s.save_extra) zero(s.save_extra, rows * H);
    for (int64_t k = 0; k < steps; ++k) {
      s.k = k;
      gemm(false, true, B, rec_cols, H, h.data(), H, rd, H, T(0), hr.data(), gh);
      each(B, 8 * gh, [&](int64_t b) {
        for (int64_t j = 0; j < H; ++j) forward_element(s, 0, b, j);
      });
      if (split) {
        gemm(false, true, B, H, H, q.data(), H, rd + 2 * H * H, H, T(0), hr.data() + 2 * H, gh);
        each(B, 8 * gh, [&](int64_t b) {
          for (int64_t j = 0; j < H; ++j) forward_element(s, 1, b, j);
        });
      }
    }

    // Backward.
    s.dy = io.dy;
    s.dh = dh.data();
    s.dc = dc.data();
    s.dq = dq.data();
    s.dstep = dstep.data();
    s.dpre = dpre.data();
    s.dpre_r = dpre_r.empty() ? nullptr : dpre_r.data();
    zero(dpre.data(), rows * gh);
    if (s.dpre_r) zero(s.dpre_r, rows * gh);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < H; ++j) {
        const int64_t at = p.state_at(d, b) + j;
        dh[b * H + j] = io.dy_h ? io.dy_h[at] : T(0);
        dc[b * H + j] = io.dy_c ? io.dy_c[at] : T(0);
      }
    for (int64_t k = steps - 1; k >= 0; --k) {
      s.k = k;
      each(B, 8 * gh, [&](int64_t b) {
        for (int64_t j = 0; j < H; ++j) backward_element(s, 0, b, j);
      });
      if (split) {
        gemm(false, false, B, H, H, dstep.data() + 2 * H, gh, rd + 2 * H * H, H, T(0), dq.data(), H);
        each(B, 8 * gh, [&](int64_t b) {
          for (int64_t j = 0; j < H; ++j) backward_element(s, 1, b, j);
        });
      }
      gemm(false, false, B, H, rec_cols, dstep.data(), gh, rd, H, T(1), dh.data(), H);
    }
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < H; ++j) {
        const int64_t at = p.state_at(d, b) + j;
        io.dh0[at] = dh[b * H + j];
        if (io.dc0) io.dc0[at] = dc[b * H + j];
      }

    // Weights, input, biases, peepholes.
    const T* dpre_rec = s.dpre_r ? s.dpre_r : dpre.data();
    T* dwd = io.dw + d * gh * I;
    T* drd = io.dr + d * gh * H;
    gemm(true, false, gh, I, rows, dpre.data(), gh, io.x, I, T(0), dwd, I);
    gemm(false, false, rows, I, gh, dpre.data(), gh, wd, I, T(1), io.dx, I);
    if (split) {
      gemm(true, false, 2 * H, H, rows, dpre.data(), gh, save_h.data(), H, T(0), drd, H);
      gemm(true, false, H, H, rows, dpre.data() + 2 * H, gh, save_extra.data(), H, T(0), drd + 2 * H * H, H);
    } else {
      gemm(true, false, gh, H, rows, dpre_rec, gh, save_h.data(), H, T(0), drd, H);
    }
    T* dbd = io.db + d * 2 * gh;
    each(gh, 2 * rows, [&](int64_t j) {
      T sw = 0, sr = 0;
      for (int64_t row = 0; row < rows; ++row) {
        sw += dpre[row * gh + j];
        sr += dpre_rec[row * gh + j];
      }
      dbd[j] = sw;
      dbd[gh + j] = sr;
    });
    if (io.dp) {
      T* dpd = io.dp + d * 3 * H;
      each(H, 3 * rows, [&](int64_t j) {
        T si = 0, so = 0, sf = 0;
        for (int64_t row = 0; row < rows; ++row) {
          si += dpre[row * gh + j] * save_c[row * H + j];
          so += dpre[row * gh + H + j] * save_c_new[row * H + j];
          sf += dpre[row * gh + 2 * H + j] * save_c[row * H + j];
        }
        dpd[j] = si;
        dpd[H + j] = so;
        dpd[2 * H + j] = sf;
      });
    }
  }
}

}  // namespace kiln::rnn
