// CPU LSTMBackward, GRUBackward and RNNBackward: the shared host algorithm (kernels/common/rnn_backward.h) in
// float32 with oneDNN's sgemm for the larger products and the element math in parallel over batch entries.
#include <dnnl.hpp>
#include <vector>

#include "core/parallel.h"
#include "kernels/common/rnn_backward.h"

namespace kiln::cpu {
namespace {

using namespace rnn_input;

// Row-major c = op(a) op(b) + beta c. Small products run as plain loops: a threaded GEMM costs more in
// synchronisation than it saves at recurrent-step sizes.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
          float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k > 0 && m * n * k >= (int64_t{1} << 20)) {
    dnnl::sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.f, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // op(b) as a [k, n] row-major matrix, so the inner loop runs over contiguous memory.
  thread_local std::vector<float> bt;
  if (tb) {
    bt.resize(static_cast<size_t>(k * n));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t l = 0; l < k; ++l) bt[l * n + j] = b[j * ldb + l];
    b = bt.data();
    ldb = n;
  }
  for (int64_t i = 0; i < m; ++i) {
    float* ci = c + i * ldc;
    if (beta == 0.f) std::fill(ci, ci + n, 0.f);
    for (int64_t l = 0; l < k; ++l) {
      const float av = ta ? a[l * lda + i] : a[i * lda + l];
      const float* bl = b + l * ldb;
      for (int64_t j = 0; j < n; ++j) ci[j] += av * bl[j];
    }
  }
}

const float* optional_float(const KernelContext& ctx, int i) { return rnn::optional_input(ctx, i); }

template <class A>
Status run_backward(KernelContext& ctx, rnn::CellSpec spec) {
  const auto& a = ctx.attrs<A>();
  const bool lstm = spec.cell == rnn::CellKind::kLstm;
  const rnn::Problem p(ctx, a, lstm ? 4 : spec.cell == rnn::CellKind::kGru ? 3 : 1);
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> lens, rnn::lengths(ctx, p));
  const int dy = rnn_grad_input::dy(lstm);
  rnn::BackwardIo<float> io;
  io.x = ctx.src[kX].data<float>();
  io.w = ctx.src[kW].data<float>();
  io.r = ctx.src[kR].data<float>();
  io.bias = optional_float(ctx, kB);
  io.h0 = optional_float(ctx, kInitialH);
  io.dy = optional_float(ctx, dy);
  io.dy_h = optional_float(ctx, dy + 1);
  io.dx = ctx.dst[0].data<float>();
  io.dw = ctx.dst[1].data<float>();
  io.dr = ctx.dst[2].data<float>();
  io.db = ctx.dst[3].data<float>();
  io.dh0 = ctx.dst[4].data<float>();
  if (lstm) {
    io.c0 = optional_float(ctx, kInitialC);
    io.peep = optional_float(ctx, kP);
    io.dy_c = optional_float(ctx, dy + 2);
    io.dc0 = ctx.dst[5].data<float>();
    io.dp = ctx.dst[6].data<float>();
  }
  // Threads only for loops of more than about 2^15 multiply-adds: below that, waking them costs more.
  rnn::host_backward(p, a, spec, lens, io, gemm, [](int64_t n, int64_t work, auto&& fn) {
    parallel_for(n, std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(work, 1)), fn);
  });
  return Status::ok();
}

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

KILN_REGISTER_KERNEL(own_impl("cpu.lstm_backward", "LSTMBackward", [](KernelContext& ctx) {
  return run_backward<LstmAttrs>(ctx, {rnn::CellKind::kLstm, false, ctx.attrs<LstmAttrs>().input_forget, 3});
}));
KILN_REGISTER_KERNEL(own_impl("cpu.gru_backward", "GRUBackward", [](KernelContext& ctx) {
  return run_backward<GruAttrs>(ctx, {rnn::CellKind::kGru, ctx.attrs<GruAttrs>().linear_before_reset, false, 2});
}));
KILN_REGISTER_KERNEL(own_impl("cpu.rnn_backward", "RNNBackward", [](KernelContext& ctx) {
  return run_backward<RnnAttrs>(ctx, {rnn::CellKind::kRnn, false, false, 1});
}));

}  // namespace
}  // namespace kiln::cpu
