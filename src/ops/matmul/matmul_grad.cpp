// Gradient rules of MatrixMultiply and FullyConnected, written as more matrix products. Training graphs
// are differentiated before the optimizer fuses anything, so a fused activation is refused; a fused
// residual gets dy.
#include <memory>

#include "ops/grad.h"
#include "ops/grad_util.h"
#include "ops/matmul/matmul.h"

namespace kiln {
namespace {

using grad_util::require_static;

Result<GradValue> mm(GradBuilder& b, GradValue x, GradValue y, bool ta, bool tb, float alpha = 1.f) {
  auto attrs = std::make_unique<MatrixMultiplyAttrs>();
  attrs->transpose_a = ta;
  attrs->transpose_b = tb;
  attrs->alpha = alpha;
  return b.add1("MatrixMultiply", std::move(attrs), {x, y});
}

Status refuse_fused(const FusedActivation& fused, const char* op) {
  if (!fused.on) return Status::ok();
  return unsupported(op, " carries a fused activation (", enum_name(fused.kind),
                     "), which has no gradient: differentiate the graph before the optimizer fuses it");
}

// y = alpha * op(a) @ op(b) + beta * c (+ residual). With 1-D operands promoted ([K] -> [1, K] for a,
// [K, 1] for b; transposes ignored) and dy = batch + [M, N]:
//   da = alpha * dy @ op(b)^T, db = alpha * op(a)^T @ dy (transposed back when the operand was), each
// summed over the batch dims its operand broadcast; dc = beta * dy summed to c's shape.
Status matmul_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy) return Status::ok();
  const auto& attrs = b.attrs_as<MatrixMultiplyAttrs>();
  KILN_RETURN_IF_ERROR(refuse_fused(attrs.fused, "MatrixMultiply"));
  const GradValue a = b.input(0), bv = b.input(1);
  KILN_RETURN_IF_ERROR(require_static(b, a, "input 'a'"));
  KILN_RETURN_IF_ERROR(require_static(b, bv, "input 'b'"));
  const Dims ad = b.desc(a).dims, bd = b.desc(bv).dims;
  KILN_ASSIGN_OR_RETURN(MatmulShape s, matmul_shape(ad, bd, attrs));
  const bool ta = !s.a_vector && attrs.transpose_a, tb = !s.b_vector && attrs.transpose_b;
  const Dims a2 = s.a_vector ? Dims{1, s.k} : ad;
  const Dims b2 = s.b_vector ? Dims{s.k, 1} : bd;
  Dims y2 = s.batch;
  y2.push_back(s.m);
  y2.push_back(s.n);
  KILN_ASSIGN_OR_RETURN(GradValue dy2, grad_util::reshape(b, dy, y2));
  const float alpha = attrs.alpha;
  if (b.needs_grad(0)) {
    KILN_ASSIGN_OR_RETURN(GradValue b2v, grad_util::reshape(b, bv, b2));
    GradValue g;
    if (!ta) {
      KILN_ASSIGN_OR_RETURN(g, mm(b, dy2, b2v, false, !tb, alpha));  // dy @ op(b)^T
    } else {
      KILN_ASSIGN_OR_RETURN(g, mm(b, b2v, dy2, tb, true, alpha));  // (dy @ op(b)^T)^T = op(b) @ dy^T
    }
    KILN_ASSIGN_OR_RETURN(GradValue summed, b.sum_to(g, a2));
    KILN_ASSIGN_OR_RETURN(GradValue ga, grad_util::reshape(b, summed, ad));
    KILN_RETURN_IF_ERROR(b.set_grad(0, ga));
  }
  if (b.needs_grad(1)) {
    KILN_ASSIGN_OR_RETURN(GradValue a2v, grad_util::reshape(b, a, a2));
    GradValue g;
    const int64_t rows = s.batch.numel() * s.m;
    if (!ta && !s.b_vector && bd.rank() == 2 && ad.rank() > 2) {
      // b is shared by every batch: fold the batch into the rows, one [rows, K] x [rows, N] product.
      KILN_ASSIGN_OR_RETURN(GradValue af, grad_util::reshape(b, a2v, Dims{rows, s.k}));
      KILN_ASSIGN_OR_RETURN(GradValue df, grad_util::reshape(b, dy2, Dims{rows, s.n}));
      if (!tb) {
        KILN_ASSIGN_OR_RETURN(g, mm(b, af, df, true, false, alpha));  // [K, N]
      } else {
        KILN_ASSIGN_OR_RETURN(g, mm(b, df, af, true, false, alpha));  // [N, K]
      }
    } else if (!tb) {
      KILN_ASSIGN_OR_RETURN(g, mm(b, a2v, dy2, !ta, false, alpha));  // op(a)^T @ dy
    } else {
      KILN_ASSIGN_OR_RETURN(g, mm(b, dy2, a2v, true, ta, alpha));  // (op(a)^T @ dy)^T = dy^T @ op(a)
    }
    KILN_ASSIGN_OR_RETURN(GradValue summed, b.sum_to(g, b2));
    KILN_ASSIGN_OR_RETURN(GradValue gb, grad_util::reshape(b, summed, bd));
    KILN_RETURN_IF_ERROR(b.set_grad(1, gb));
  }
  if (b.input(2) && b.needs_grad(2)) {
    KILN_ASSIGN_OR_RETURN(GradValue summed, b.sum_to(dy, b.desc(b.input(2)).dims));
    KILN_ASSIGN_OR_RETURN(GradValue gc, grad_util::scaled(b, summed, attrs.beta));
    KILN_RETURN_IF_ERROR(b.set_grad(2, gc));
  }
  if (b.input(kGemmResidualInput)) KILN_RETURN_IF_ERROR(b.set_grad(kGemmResidualInput, dy));
  return Status::ok();
}

// y = flatten(x, axis) @ w^T + bias: with x2 = [N, K] and dy2 = [N, O], dx = dy2 @ w, dw = dy2^T @ x2,
// dbias = the column sums of dy2.
Status fully_connected_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy) return Status::ok();
  const auto& attrs = b.attrs_as<FullyConnectedAttrs>();
  KILN_RETURN_IF_ERROR(refuse_fused(attrs.fused, "FullyConnected"));
  const GradValue x = b.input(0), w = b.input(1);
  KILN_RETURN_IF_ERROR(require_static(b, x, "input 'x'"));
  KILN_RETURN_IF_ERROR(require_static(b, w, "input 'weights'"));
  const Dims xd = b.desc(x).dims, wd = b.desc(w).dims;
  const int axis = static_cast<int>(attrs.axis < 0 ? attrs.axis + xd.rank() : attrs.axis);  // as the schema reads it
  int64_t n = 1;
  for (int i = 0; i < axis; ++i) n *= xd[i];
  const int64_t o = wd[0], k = wd[1];
  KILN_ASSIGN_OR_RETURN(GradValue dy2, grad_util::reshape(b, dy, Dims{n, o}));
  if (b.needs_grad(0)) {
    KILN_ASSIGN_OR_RETURN(GradValue g, mm(b, dy2, w, false, false));
    KILN_ASSIGN_OR_RETURN(GradValue gx, grad_util::reshape(b, g, xd));
    KILN_RETURN_IF_ERROR(b.set_grad(0, gx));
  }
  if (b.needs_grad(1)) {
    KILN_ASSIGN_OR_RETURN(GradValue x2, grad_util::reshape(b, x, Dims{n, k}));
    KILN_ASSIGN_OR_RETURN(GradValue gw, mm(b, dy2, x2, true, false));
    KILN_RETURN_IF_ERROR(b.set_grad(1, gw));
  }
  if (b.input(2) && b.needs_grad(2)) {
    KILN_ASSIGN_OR_RETURN(GradValue gb, grad_util::reduce_sum(b, dy2, {0}, false));
    KILN_RETURN_IF_ERROR(b.set_grad(2, gb));
  }
  if (b.input(kGemmResidualInput)) KILN_RETURN_IF_ERROR(b.set_grad(kGemmResidualInput, dy));
  return Status::ok();
}

KILN_REGISTER_GRAD("MatrixMultiply", matmul_grad);
KILN_REGISTER_GRAD("FullyConnected", fully_connected_grad);

}  // namespace
}  // namespace kiln
