// Reference LSTMBackward, GRUBackward and RNNBackward: the shared host algorithm (kernels/common/rnn_backward.h)
// in double, with plain triple-loop GEMMs, one batch entry after another.
#include <algorithm>

#include "kernels/common/rnn_backward.h"

namespace kiln {
namespace {

using namespace rnn_input;

// Row-major c = op(a) op(b) + beta c in double.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b, int64_t ldb,
          double beta, double* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t l = 0; l < k; ++l)
        s += (ta ? a[l * lda + i] : a[i * lda + l]) * (tb ? b[j * ldb + l] : b[l * ldb + j]);
      c[i * ldc + j] = s + (beta != 0 ? beta * c[i * ldc + j] : 0.0);
    }
}

std::vector<double> widen(const KernelContext& ctx, int i) {
  if (i >= static_cast<int>(ctx.src.size()) || !ctx.src[i].defined()) return {};
  const Tensor& t = ctx.src[i];
  const float* v = t.data<float>();
  return std::vector<double>(v, v + t.numel());
}

const double* ptr(const std::vector<double>& v, const KernelContext& ctx, int i) {
  return i < static_cast<int>(ctx.src.size()) && ctx.src[i].defined() ? v.data() : nullptr;
}

template <class A>
Status run_backward(KernelContext& ctx, rnn::CellSpec spec) {
  const auto& a = ctx.attrs<A>();
  const bool lstm = spec.cell == rnn::CellKind::kLstm;
  const rnn::Problem p(ctx, a, spec.cell == rnn::CellKind::kLstm ? 4 : spec.cell == rnn::CellKind::kGru ? 3 : 1);
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> lens, rnn::lengths(ctx, p));
  const int dy = rnn_grad_input::dy(lstm);
  const std::vector<double> x = widen(ctx, kX), w = widen(ctx, kW), r = widen(ctx, kR), bias = widen(ctx, kB),
                            h0 = widen(ctx, kInitialH), c0 = lstm ? widen(ctx, kInitialC) : std::vector<double>{},
                            peep = lstm ? widen(ctx, kP) : std::vector<double>{}, gy = widen(ctx, dy),
                            gy_h = widen(ctx, dy + 1), gy_c = lstm ? widen(ctx, dy + 2) : std::vector<double>{};
  std::vector<std::vector<double>> out(ctx.dst.size());
  for (size_t i = 0; i < out.size(); ++i) out[i].assign(static_cast<size_t>(ctx.dst[i].numel()), 0.0);
  rnn::BackwardIo<double> io;
  io.x = x.data();
  io.w = w.data();
  io.r = r.data();
  io.bias = ptr(bias, ctx, kB);
  io.h0 = ptr(h0, ctx, kInitialH);
  if (lstm) {
    io.c0 = ptr(c0, ctx, kInitialC);
    io.peep = ptr(peep, ctx, kP);
    io.dy_c = ptr(gy_c, ctx, dy + 2);
    io.dc0 = out[5].data();
    io.dp = out[6].data();
  }
  io.dy = ptr(gy, ctx, dy);
  io.dy_h = ptr(gy_h, ctx, dy + 1);
  io.dx = out[0].data();
  io.dw = out[1].data();
  io.dr = out[2].data();
  io.db = out[3].data();
  io.dh0 = out[4].data();
  rnn::host_backward(p, a, spec, lens, io, gemm, [](int64_t n, int64_t /*work*/, auto&& fn) {
    for (int64_t i = 0; i < n; ++i) fn(i);
  });
  for (size_t i = 0; i < out.size(); ++i)
    std::transform(out[i].begin(), out[i].end(), ctx.dst[i].data<float>(),
                   [](double v) { return static_cast<float>(v); });
  return Status::ok();
}

KernelImpl ref_impl(const char* name, const char* op, RunFn run) {
  return with_float32_compute({
      .name = name,
      .op = op,
      .backend = Backend::kRef,
      .priority = 0,
      .supports = [](const OpCall& call) { return require_float_dtypes(call, {DataType::kFloat32}); },
      .create = stateless(std::move(run)),
  });
}

KILN_REGISTER_KERNEL(ref_impl("ref.lstm_backward", "LSTMBackward", [](KernelContext& ctx) {
  return run_backward<LstmAttrs>(ctx, {rnn::CellKind::kLstm, false, ctx.attrs<LstmAttrs>().input_forget, 3});
}));
KILN_REGISTER_KERNEL(ref_impl("ref.gru_backward", "GRUBackward", [](KernelContext& ctx) {
  return run_backward<GruAttrs>(ctx, {rnn::CellKind::kGru, ctx.attrs<GruAttrs>().linear_before_reset, false, 2});
}));
KILN_REGISTER_KERNEL(ref_impl("ref.rnn_backward", "RNNBackward", [](KernelContext& ctx) {
  return run_backward<RnnAttrs>(ctx, {rnn::CellKind::kRnn, false, false, 1});
}));

}  // namespace
}  // namespace kiln
