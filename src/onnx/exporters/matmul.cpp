// kiln MatrixMultiply -> ONNX Gemm (2-D operands) or MatMul with Transpose / Mul / Add around it.
#include <numeric>

#include "onnx/exporter.h"
#include "ops/matmul/matmul.h"

namespace kiln::onnx_export {
namespace {

std::string scalar(ExportContext& ctx, const Node& node, const std::string& base, float v) {
  Tensor t = *Tensor::empty(node.outputs[0]->dtype, {});
  t.set(0, v);
  return ctx.add_initializer(node.name + "/" + base, t);
}

// Transposes the last two dims of `name` (rank >= 2).
std::string transpose_last(ExportContext& ctx, const Node& node, const std::string& name, int rank,
                           const std::string& base) {
  std::vector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[rank - 1], perm[rank - 2]);
  std::string out = ctx.fresh_name(node.name + "/" + base);
  set_attr(ctx.add_node("Transpose", {name}, {out}, node.name + "/" + base), "perm", perm);
  return out;
}

Status export_matmul(ExportContext& ctx, const Node& node) {
  const auto& a = static_cast<const MatrixMultiplyAttrs&>(*node.attrs);
  if (a.fused.on || (node.inputs.size() > kGemmResidualInput && node.inputs[kGemmResidualInput]))
    return unsupported("this MatrixMultiply has an optimizer epilogue (fused ",
                       a.fused.on ? "activation" : "residual add",
                       ") that ONNX's MatMul and Gemm cannot express; export the graph before optimizing it");
  const auto in = input_names(ctx, node);
  const auto out = output_names(ctx, node);
  const int ra = node.inputs[0]->dims.rank(), rb = node.inputs[1]->dims.rank();
  const bool has_c = in.size() > 2 && !in[2].empty();
  if (ra == 2 && rb == 2) {
    auto& n = ctx.add_node("Gemm", has_c ? in : std::vector<std::string>{in[0], in[1]}, out, node.name);
    if (a.transpose_a) set_attr(n, "transA", int64_t{1});
    if (a.transpose_b) set_attr(n, "transB", int64_t{1});
    if (a.alpha != 1.f) set_attr(n, "alpha", a.alpha);
    if (has_c && a.beta != 1.f) set_attr(n, "beta", a.beta);
    return Status::ok();
  }
  std::string lhs = in[0], rhs = in[1];
  if (a.transpose_a && ra >= 2) lhs = transpose_last(ctx, node, lhs, ra, "a_t");
  if (a.transpose_b && rb >= 2) rhs = transpose_last(ctx, node, rhs, rb, "b_t");
  const bool scale = a.alpha != 1.f;
  if (!scale && !has_c) {
    ctx.add_node("MatMul", {lhs, rhs}, out, node.name);
    return Status::ok();
  }
  std::string y = ctx.fresh_name(node.name + "/matmul");
  ctx.add_node("MatMul", {lhs, rhs}, {y}, node.name + "/matmul");
  if (scale) {
    const std::string scaled = has_c ? ctx.fresh_name(node.name + "/alpha_y") : out[0];
    ctx.add_node("Mul", {y, scalar(ctx, node, "alpha", a.alpha)}, {scaled}, node.name + "/alpha");
    y = scaled;
  }
  if (has_c) {
    std::string c = in[2];
    if (a.beta != 1.f) {
      c = ctx.fresh_name(node.name + "/beta_c");
      ctx.add_node("Mul", {in[2], scalar(ctx, node, "beta", a.beta)}, {c}, node.name + "/beta");
    }
    ctx.add_node("Add", {y, c}, out, node.name);
  }
  return Status::ok();
}

// kiln FullyConnected (y = flatten(x, axis) @ W^T + b) -> ONNX Flatten + Gemm(transB) for axis 1 (the layer's
// output is then [N, out], as Gemm's).
Status export_fully_connected(ExportContext& ctx, const Node& node) {
  const auto& a = static_cast<const FullyConnectedAttrs&>(*node.attrs);
  if (a.fused.on || (node.inputs.size() > kGemmResidualInput && node.inputs[kGemmResidualInput]))
    return unsupported("this FullyConnected has an optimizer epilogue (fused ",
                       a.fused.on ? "activation" : "residual add",
                       ") that ONNX's Gemm cannot express; export the graph before optimizing it");
  const int rank = node.inputs[0]->dims.rank();
  const int64_t axis = a.axis < 0 ? a.axis + rank : a.axis;
  if (axis != 1)
    return unsupported("FullyConnected with axis ", a.axis, " (only axis 1, a [N, out] output, exports as ONNX Gemm)");
  const auto in = input_names(ctx, node);
  const auto out = output_names(ctx, node);
  std::string flat = in[0];
  if (rank != 2) {
    flat = ctx.fresh_name(node.name + "/flatten");
    set_attr(ctx.add_node("Flatten", {in[0]}, {flat}, node.name + "/flatten"), "axis", int64_t{1});
  }
  std::vector<std::string> gemm_in{flat, in[1]};
  if (in.size() > 2 && !in[2].empty()) gemm_in.push_back(in[2]);
  set_attr(ctx.add_node("Gemm", gemm_in, out, node.name), "transB", int64_t{1});
  return Status::ok();
}

// The optimizer's MLP chains have no ONNX op: say so instead of "cannot export yet".
Status refuse_mlp(ExportContext&, const Node&) {
  return unsupported(
      "MLP is a layer chain fused by the optimizer and has no ONNX equivalent; export the graph "
      "before optimizing it");
}

KILN_REGISTER_ONNX_EXPORTER("MatrixMultiply", export_matmul);
KILN_REGISTER_ONNX_EXPORTER("MLP", refuse_mlp);
KILN_REGISTER_ONNX_EXPORTER("FullyConnected", export_fully_connected);

}  // namespace
}  // namespace kiln::onnx_export
