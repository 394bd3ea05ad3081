// cpu.packed_matrix_multiply and cpu.packed_fully_connected: float32 products whose B is one matrix (weights),
// folded over A's batch into one [rows, K] x [K, N] product on packed_gemm.h, with the epilogue (bias, residual,
// any fused activation) applied as each tile is stored. B is packed at build time when it is an engine constant
// (the engine's prepared section), on each run otherwise. Competes with oneDNN's matmul and inner product in tactic
// timing: on 2 EPYC (Zen 3) cores about level with oneDNN 2.6's sgemm on BERT-base's shapes; tactic timing gave it 60
// of BERT-base's 72 MatMuls at batch 1. Where it runs, the engine holds only the packed copy of weights no other
// step reads (prepared_replaces_input).
#include <memory>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/registry.h"
#include "ops/matmul/matmul.h"

namespace kiln {
namespace {

const Tensor* present(const KernelContext& ctx, size_t i) {
  return ctx.src.size() > i && ctx.src[i].defined() ? &ctx.src[i] : nullptr;
}

// B of a call as a k x n view: MatrixMultiply's [k, n] (or [n, k] transposed), FullyConnected's [n, k].
cpu::MatrixView weights_view(const OpCall& call, const float* data, const Dims& w) {
  const bool fully_connected = call.schema->name == "FullyConnected";
  const bool transposed = fully_connected || call.attrs_as<MatrixMultiplyAttrs>().transpose_b;
  const int64_t k = transposed ? w[1] : w[0], n = transposed ? w[0] : w[1];
  return cpu::MatrixView{data, k, n, transposed ? 1 : n, transposed ? k : 1};
}

class PackedProduct final : public Kernel {
 public:
  explicit PackedProduct(const OpCall& call) {
    const Tensor* w = call.constant(1);
    packed_.init(call.prepared, weights_view(call, w ? w->data<float>() : nullptr, call.inputs[1].dims));
  }

  Status run(KernelContext& ctx) override {
    Tensor& y = ctx.dst[0];
    if (y.numel() == 0) return Status::ok();
    const Tensor* w = present(ctx, 1);  // absent when the engine holds it only packed
    KILN_ASSIGN_OR_RETURN(
        const cpu::PackedColumns* packed,
        packed_.for_run(weights_view(ctx.call, w ? w->data<float>() : nullptr, ctx.call.inputs[1].dims)));
    const cpu::PackedColumns& b = *packed;
    const Tensor& a = ctx.src[0];
    if (a.numel() % b.k != 0 || y.numel() != a.numel() / b.k * b.n)
      return invalid_argument("cpu.packed product: input ", a.dims().to_string(), " and output ", y.dims().to_string(),
                              " do not fit weights of ", b.k, " x ", b.n);
    const Tensor* residual = present(ctx, kGemmResidualInput);
    if (residual && residual->numel() != y.numel())
      return invalid_argument("cpu.packed product: residual ", residual->dims().to_string(), " is not the output's ",
                              y.dims().to_string());
    cpu::GemmEpilogue e;
    e.bias = present(ctx, 2) ? ctx.src[2].data<float>() : nullptr;
    e.residual = residual ? residual->data<float>() : nullptr;
    e.fused = ctx.call.schema->name == "FullyConnected" ? ctx.attrs<FullyConnectedAttrs>().fused
                                                        : ctx.attrs<MatrixMultiplyAttrs>().fused;
    cpu::packed_gemm(a.numel() / b.k, a.data<float>(), b.k, b, y.data<float>(), b.n, e);
    return Status::ok();
  }

  std::string detail() const override {
    return cpu::use_avx512() ? "packed GEMM 8x32, AVX-512" : "packed GEMM 6x16, AVX2";
  }

 private:
  cpu::PackedWeights packed_;
};

Status common_supports(const OpCall& call, const FusedActivation& fused) {
  if (!cpu::has_avx2_fma()) return unsupported("needs AVX2 and FMA");
  KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32}));
  const Dims& w = call.inputs[1].dims;
  if (w.rank() != 2 || !w.is_static() || w[0] == 0 || w[1] == 0)
    return unsupported("takes one static, non-empty weight matrix (rank 2)");
  if (fused.on && fused.kind == ActivationKind::kPRelu) return unsupported("applies no PReLU");
  if (call.has_input(2)) {
    const Dims& c = call.inputs[2].dims;
    const int64_t n = weights_view(call, nullptr, w).n;
    if (!c.is_static() || c.numel() != n || c.rank() < 1 || c[c.rank() - 1] != n)
      return unsupported("adds a bias over the output's last axis only");
  }
  return Status::ok();
}

Status matmul_supports(const OpCall& call) {
  const auto& a = call.attrs_as<MatrixMultiplyAttrs>();
  KILN_RETURN_IF_ERROR(common_supports(call, a.fused));
  if (a.alpha != 1.f || (call.has_input(2) && a.beta != 1.f)) return unsupported("takes alpha = beta = 1 only");
  const Dims& x = call.inputs[0].dims;
  if (x.rank() < 1) return unsupported("takes a matrix or a batch of them as A");
  if (a.transpose_a && x.rank() > 1) return unsupported("takes A untransposed");
  if (x.rank() > 1 && x[x.rank() - 1] != call.inputs[1].dims[a.transpose_b ? 1 : 0])
    return unsupported("needs A's last axis to be B's K");
  return Status::ok();
}

Status fully_connected_supports(const OpCall& call) {
  return common_supports(call, call.attrs_as<FullyConnectedAttrs>().fused);
}

Result<Tensor> prepare(const OpCall& call) {
  const Tensor* w = call.constant(1);
  if (!w) return Tensor();
  return cpu::PackedWeights::prepare(weights_view(call, w->data<float>(), w->dims()));
}

Result<std::unique_ptr<Kernel>> create(const OpCall& call) {
  return std::unique_ptr<Kernel>(std::make_unique<PackedProduct>(call));
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.packed_matrix_multiply",
    .op = "MatrixMultiply",
    .backend = Backend::kCpu,
    .priority = 9,
    .supports = matmul_supports,
    .create = create,
    .prepare = prepare,
    .prepared_replaces_input = 1,
    .in_place_input = in_place(kGemmResidualInput),  // the GEMM reads each residual just before it stores there
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.packed_fully_connected",
    .op = "FullyConnected",
    .backend = Backend::kCpu,
    .priority = 9,
    .supports = fully_connected_supports,
    .create = create,
    .prepare = prepare,
    .prepared_replaces_input = 1,
    .in_place_input = in_place(kGemmResidualInput),  // the GEMM reads each residual just before it stores there
});

}  // namespace
}  // namespace kiln
