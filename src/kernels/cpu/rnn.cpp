// Own-code CPU LSTM, GRU and RNN: X W^T for every step in one GEMM, then per step H R^T over the whole
// batch (oneDNN's sgemm) and the gate math in parallel over batch entries. Handles every attribute:
// variable lengths, any activation, clip, peepholes, coupled gates, both layouts.
#include "kernels/cpu/rnn.h"
#include "kernels/cpu/vec_math.h"

#include <cstring>
#include <dnnl.hpp>

#include "core/parallel.h"
#include "kernels/common/rnn_problem.h"

namespace kiln::cpu {
namespace {

using namespace rnn_input;

// c[m, n] = a[m, k] * bt[k, n] (row-major with leading dimensions). Small products run as plain loops:
// a threaded GEMM costs more in synchronisation than it saves at recurrent-step sizes.
void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* bt, int64_t ldb, float* c,
          int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k > 0 && m * n * k >= (int64_t{1} << 20)) {
    dnnl::sgemm('N', 'N', m, n, k, 1.f, a, lda, bt, ldb, 0.f, c, ldc);
    return;
  }
  for (int64_t i = 0; i < m; ++i) {
    float* ci = c + i * ldc;
    std::fill(ci, ci + n, 0.f);
    for (int64_t kk = 0; kk < k; ++kk) {
      const float av = a[i * lda + kk];
      const float* br = bt + kk * ldb;
      for (int64_t j = 0; j < n; ++j) ci[j] += av * br[j];
    }
  }
}

// ONNX weights [rows, k] -> [k, rows], the layout gemm() takes.
void transpose(const float* src, int64_t rows, int64_t k, float* dst) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < k; ++i) dst[i * rows + r] = src[r * k + i];
}

// fn applied to v[0, n); sigmoid and tanh vectorised.
void activate(const rnn::Fn& fn, float* v, int64_t n) {
  switch (fn.kind) {
    case RnnActivation::kSigmoid:
      for (int64_t i = 0; i < n; ++i) v[i] = 1.f / (1.f + exp_approx(-v[i]));
      break;
    case RnnActivation::kTanh:
      for (int64_t i = 0; i < n; ++i) v[i] = 2.f / (1.f + exp_approx(-2.f * v[i])) - 1.f;
      break;
    default:
      for (int64_t i = 0; i < n; ++i) v[i] = fn(v[i]);
  }
}

void clip_all(float* v, int64_t n, float threshold) {
  if (threshold > 0.f)
    for (int64_t i = 0; i < n; ++i) v[i] = std::min(std::max(v[i], -threshold), threshold);
}

// State shared by the three cells for one run.
struct Run {
  rnn::Problem p;
  std::vector<int64_t> lens;
  int64_t steps = 0;  // the longest length
  const float *x, *w, *r, *bias, *h0;
  float *y, *y_h;
  int64_t gh;                   // gates * hidden
  std::vector<float> xw, hr;    // [x rows, gh], [batch, gh]
  std::vector<float> h;         // [batch, hidden]
  std::vector<float> wt, rt;    // this direction's W^T [input, gh] and R^T [hidden, gh]
  std::vector<float> dir_bias;  // [gh] bias folded into xw

  Run(KernelContext& ctx, const RnnCommonAttrs& a, int64_t gates)
      : p(ctx, a, gates),
        x(ctx.src[kX].data<float>()),
        w(ctx.src[kW].data<float>()),
        r(ctx.src[kR].data<float>()),
        bias(rnn::optional_input(ctx, kB)),
        h0(rnn::optional_input(ctx, kInitialH)),
        y(ctx.dst[0].data<float>()),
        y_h(ctx.dst[1].data<float>()),
        gh(gates * p.hidden) {}

  Status start(const KernelContext& ctx) {
    KILN_ASSIGN_OR_RETURN(lens, rnn::lengths(ctx, p));
    steps = rnn::max_length(lens);
    bool full = true;
    for (int64_t l : lens) full &= l == p.seq;
    if (!full) std::fill(y, y + ctx.dst[0].numel(), 0.f);
    xw.resize(static_cast<size_t>(p.seq * p.batch * gh));
    hr.resize(static_cast<size_t>(p.batch * gh));
    h.resize(static_cast<size_t>(p.batch * p.hidden));
    dir_bias.assign(static_cast<size_t>(gh), 0.f);
    wt.resize(static_cast<size_t>(p.input * gh));
    rt.resize(static_cast<size_t>(p.hidden * gh));
    return Status::ok();
  }
  // Entries per parallel task: enough that small problems run inline.
  int64_t grain() const { return std::max<int64_t>(1, 8192 / std::max<int64_t>(gh, 1)); }
  const float* b_dir(int64_t d) const { return bias ? bias + d * 2 * gh : nullptr; }

  // Loads h (and `c` from `c0` when given) for direction d.
  void load_state(int64_t d, float* state, const float* src) const {
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t j = 0; j < p.hidden; ++j) state[b * p.hidden + j] = src ? src[p.state_at(d, b) + j] : 0.f;
  }
  void store_state(int64_t d, const float* state, float* dst) const {
    for (int64_t b = 0; b < p.batch; ++b)
      std::copy(state + b * p.hidden, state + (b + 1) * p.hidden, dst + p.state_at(d, b));
  }
  // Packs direction d's weights; xw = X W_d^T + dir_bias.
  void project(int64_t d) {
    transpose(w + d * gh * p.input, gh, p.input, wt.data());
    transpose(r + d * gh * p.hidden, gh, p.hidden, rt.data());
    const int64_t rows = p.seq * p.batch;
    gemm(rows, gh, p.input, x, p.input, wt.data(), gh, xw.data(), gh);
    parallel_for(rows, grain(), [&](int64_t row) {
      float* dst = xw.data() + row * gh;
      for (int64_t j = 0; j < gh; ++j) dst[j] += dir_bias[j];
    });
  }
  // Step index of the k-th step of batch entry b in direction d, or -1 when b has ended.
  int64_t step_time(int64_t d, int64_t b, int64_t k) const {
    if (k >= lens[b]) return -1;
    return p.reversed(d) ? lens[b] - 1 - k : k;
  }
};

}  // namespace

Status run_lstm(KernelContext& ctx) {
  const auto& a = ctx.attrs<LstmAttrs>();
  Run s(ctx, a, 4);
  KILN_RETURN_IF_ERROR(s.start(ctx));
  const int64_t hidden = s.p.hidden;
  const float* c0 = rnn::optional_input(ctx, kInitialC);
  const float* peep = rnn::optional_input(ctx, kP);
  float* y_c = ctx.dst[2].data<float>();
  std::vector<float> c(static_cast<size_t>(s.p.batch * hidden));
  for (int64_t d = 0; d < s.p.dirs; ++d) {
    const std::vector<rnn::Fn> fns = rnn::functions(a, 3, static_cast<int>(d));
    const rnn::Fn &f = fns[0], &g = fns[1], &hf = fns[2];
    const float* bd = s.b_dir(d);
    if (bd)
      for (int64_t j = 0; j < s.gh; ++j) s.dir_bias[j] = bd[j] + bd[s.gh + j];
    const float* pd = peep ? peep + d * 3 * hidden : nullptr;
    s.load_state(d, s.h.data(), s.h0);
    s.load_state(d, c.data(), c0);
    s.project(d);
    for (int64_t k = 0; k < s.steps; ++k) {
      gemm(s.p.batch, s.gh, hidden, s.h.data(), hidden, s.rt.data(), s.gh, s.hr.data(), s.gh);
      parallel_for(s.p.batch, s.grain(), [&](int64_t b) {
        const int64_t t = s.step_time(d, b, k);
        if (t < 0) return;
        const float* gx = s.xw.data() + s.p.x_row(t, b) * s.gh;
        float* pre = s.hr.data() + b * s.gh;  // gate pre-activations, then gates, in place
        float* hb = s.h.data() + b * hidden;
        float* cb = c.data() + b * hidden;
        float* yt = s.y + s.p.y_at(t, d, b);
        // ONNX gate order i, o, f, c; peepholes i, o, f.
        float *gi = pre, *go = pre + hidden, *gf = pre + 2 * hidden, *gc = pre + 3 * hidden;
        for (int64_t j = 0; j < s.gh; ++j) pre[j] += gx[j];
        if (pd)
          for (int64_t j = 0; j < hidden; ++j) {
            gi[j] += pd[j] * cb[j];
            gf[j] += pd[2 * hidden + j] * cb[j];
          }
        clip_all(gi, hidden, a.clip);
        clip_all(gf, 2 * hidden, a.clip);
        activate(f, gi, hidden);
        if (a.input_forget)
          for (int64_t j = 0; j < hidden; ++j) gf[j] = 1.f - gi[j];
        else
          activate(f, gf, hidden);
        activate(g, gc, hidden);
        for (int64_t j = 0; j < hidden; ++j) cb[j] = gf[j] * cb[j] + gi[j] * gc[j];
        if (pd)
          for (int64_t j = 0; j < hidden; ++j) go[j] += pd[hidden + j] * cb[j];
        clip_all(go, hidden, a.clip);
        activate(f, go, hidden);
        std::copy(cb, cb + hidden, yt);
        activate(hf, yt, hidden);
        for (int64_t j = 0; j < hidden; ++j) hb[j] = yt[j] *= go[j];
      });
    }
    s.store_state(d, s.h.data(), s.y_h);
    s.store_state(d, c.data(), y_c);
  }
  return Status::ok();
}

Status run_gru(KernelContext& ctx) {
  const auto& a = ctx.attrs<GruAttrs>();
  Run s(ctx, a, 3);
  KILN_RETURN_IF_ERROR(s.start(ctx));
  const int64_t hidden = s.p.hidden;
  std::vector<float> rh(static_cast<size_t>(s.p.batch * hidden)), rb_h(static_cast<size_t>(hidden));
  for (int64_t d = 0; d < s.p.dirs; ++d) {
    const std::vector<rnn::Fn> fns = rnn::functions(a, 2, static_cast<int>(d));
    const rnn::Fn &f = fns[0], &g = fns[1];
    const float* bd = s.b_dir(d);
    std::fill(rb_h.begin(), rb_h.end(), 0.f);
    if (bd) {
      // z and r take both biases up front; h takes Rb_h inside the reset product when linear_before_reset.
      for (int64_t j = 0; j < s.gh; ++j)
        s.dir_bias[j] = bd[j] + (j < 2 * hidden || !a.linear_before_reset ? bd[s.gh + j] : 0.f);
      if (a.linear_before_reset) std::copy(bd + s.gh + 2 * hidden, bd + 2 * s.gh, rb_h.begin());
    }
    s.load_state(d, s.h.data(), s.h0);
    s.project(d);
    for (int64_t k = 0; k < s.steps; ++k) {
      // lbr: all three gates from h; otherwise z and r from h, then h's gate from r * h.
      gemm(s.p.batch, a.linear_before_reset ? s.gh : 2 * hidden, hidden, s.h.data(), hidden, s.rt.data(), s.gh,
           s.hr.data(), s.gh);
      parallel_for(s.p.batch, s.grain(), [&](int64_t b) {
        const int64_t t = s.step_time(d, b, k);
        if (t < 0) return;
        const float* gx = s.xw.data() + s.p.x_row(t, b) * s.gh;
        float* zr = s.hr.data() + b * s.gh;  // z and r pre-activations, then gates, in place
        for (int64_t j = 0; j < 2 * hidden; ++j) zr[j] += gx[j];
        clip_all(zr, 2 * hidden, a.clip);
        activate(f, zr, 2 * hidden);
        if (!a.linear_before_reset) {
          const float* hb = s.h.data() + b * hidden;
          for (int64_t j = 0; j < hidden; ++j) rh[b * hidden + j] = zr[hidden + j] * hb[j];
        }
      });
      if (!a.linear_before_reset)
        gemm(s.p.batch, hidden, hidden, rh.data(), hidden, s.rt.data() + 2 * hidden, s.gh, s.hr.data() + 2 * hidden,
             s.gh);
      parallel_for(s.p.batch, s.grain(), [&](int64_t b) {
        const int64_t t = s.step_time(d, b, k);
        if (t < 0) return;
        const float* gx = s.xw.data() + s.p.x_row(t, b) * s.gh;
        const float* z = s.hr.data() + b * s.gh;
        const float* reset = z + hidden;
        float* gh = s.hr.data() + b * s.gh + 2 * hidden;  // h's pre-activation, then its gate
        float* hb = s.h.data() + b * hidden;
        float* yt = s.y + s.p.y_at(t, d, b);
        if (a.linear_before_reset)
          for (int64_t j = 0; j < hidden; ++j) gh[j] = gx[2 * hidden + j] + reset[j] * (gh[j] + rb_h[j]);
        else
          for (int64_t j = 0; j < hidden; ++j) gh[j] += gx[2 * hidden + j];
        clip_all(gh, hidden, a.clip);
        activate(g, gh, hidden);
        for (int64_t j = 0; j < hidden; ++j) yt[j] = hb[j] = (1.f - z[j]) * gh[j] + z[j] * hb[j];
      });
    }
    s.store_state(d, s.h.data(), s.y_h);
  }
  return Status::ok();
}

Status run_rnn(KernelContext& ctx) {
  const auto& a = ctx.attrs<RnnAttrs>();
  Run s(ctx, a, 1);
  KILN_RETURN_IF_ERROR(s.start(ctx));
  const int64_t hidden = s.p.hidden;
  for (int64_t d = 0; d < s.p.dirs; ++d) {
    const rnn::Fn f = rnn::functions(a, 1, static_cast<int>(d))[0];
    const float* bd = s.b_dir(d);
    if (bd)
      for (int64_t j = 0; j < s.gh; ++j) s.dir_bias[j] = bd[j] + bd[s.gh + j];
    s.load_state(d, s.h.data(), s.h0);
    s.project(d);
    for (int64_t k = 0; k < s.steps; ++k) {
      gemm(s.p.batch, hidden, hidden, s.h.data(), hidden, s.rt.data(), hidden, s.hr.data(), hidden);
      parallel_for(s.p.batch, s.grain(), [&](int64_t b) {
        const int64_t t = s.step_time(d, b, k);
        if (t < 0) return;
        const float* gx = s.xw.data() + s.p.x_row(t, b) * hidden;
        float* pre = s.hr.data() + b * hidden;
        float* yt = s.y + s.p.y_at(t, d, b);
        for (int64_t j = 0; j < hidden; ++j) pre[j] += gx[j];
        clip_all(pre, hidden, a.clip);
        activate(f, pre, hidden);
        std::copy(pre, pre + hidden, yt);
        std::copy(pre, pre + hidden, s.h.data() + b * hidden);
      });
    }
    s.store_state(d, s.h.data(), s.y_h);
  }
  return Status::ok();
}

namespace {

KernelImpl own_impl(const char* name, const char* op, RunFn run) {
  return {
      .name = name,
      .op = op,
      .backend = Backend::kCpu,
      .priority = 5,
      .supports = [](const OpCall& call) { return require_float_dtypes(call, {DataType::kFloat32}); },
      .create = stateless(std::move(run)),
  };
}

KILN_REGISTER_KERNEL(own_impl("cpu.lstm", "LSTM", run_lstm));
KILN_REGISTER_KERNEL(own_impl("cpu.gru", "GRU", run_gru));
KILN_REGISTER_KERNEL(own_impl("cpu.rnn", "RNN", run_rnn));

}  // namespace
}  // namespace kiln::cpu
