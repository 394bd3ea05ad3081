// Gradient rule of Scale: y = u ^ p with u = x * scale + shift. Each coefficient is reshaped to the
// shape that broadcasts it over x (uniform: a scalar; channel: [C, 1, ...]; elementwise: x's dims from
// channel_axis), so the rule is ElementWise arithmetic plus sums back to the coefficient's shape.
#include "ops/grad.h"
#include "ops/grad_util.h"
#include "ops/scale/scale.h"

namespace kiln {
namespace {

using grad_util::binary;
constexpr ElementWiseOp kAdd = ElementWiseOp::kSum, kSub = ElementWiseOp::kSub, kMul = ElementWiseOp::kProd;
constexpr int kShift = 1, kScale = 2, kPower = 3;

Status scale_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy) return Status::ok();
  const auto& attrs = b.attrs_as<ScaleAttrs>();
  if (attrs.fused.on)
    return unsupported("Scale carries a fused activation (", enum_name(attrs.fused.kind),
                       "), which has no gradient: differentiate the graph before the optimizer fuses it");
  const GradValue x = b.input(0);
  KILN_RETURN_IF_ERROR(grad_util::require_static(b, x, "input 'x'"));
  const Dims xd = b.desc(x).dims;
  const DataType dt = b.desc(x).dtype;
  Dims cb;  // the broadcast shape of a coefficient
  if (attrs.mode != ScaleMode::kUniform) {
    KILN_ASSIGN_OR_RETURN(const int axis, normalize_axis(attrs.channel_axis, xd.rank()));
    for (int i = axis; i < xd.rank(); ++i) cb.push_back(attrs.mode == ScaleMode::kElementwise || i == axis ? xd[i] : 1);
  }
  GradValue coef[4];
  for (int i = kShift; i <= kPower; ++i) {
    if (b.input(i)) {
      KILN_ASSIGN_OR_RETURN(coef[i], grad_util::reshape(b, b.input(i), cb));
    }
  }
  // Gives coefficient i the gradient g (x-shaped) summed to its own shape.
  auto give = [&](int i, GradValue g) -> Status {
    KILN_ASSIGN_OR_RETURN(GradValue s, b.sum_to(g, cb));
    KILN_ASSIGN_OR_RETURN(GradValue own, grad_util::reshape(b, s, b.desc(b.input(i)).dims));
    return b.set_grad(i, own);
  };
  GradValue du = dy;  // dLoss/du
  if (coef[kPower]) {
    GradValue u = x;
    if (coef[kScale]) {
      KILN_ASSIGN_OR_RETURN(u, binary(b, kMul, u, coef[kScale]));
    }
    if (coef[kShift]) {
      KILN_ASSIGN_OR_RETURN(u, binary(b, kAdd, u, coef[kShift]));
    }
    const GradValue p = coef[kPower];
    KILN_ASSIGN_OR_RETURN(GradValue one, b.scalar(1.0, dt));
    KILN_ASSIGN_OR_RETURN(GradValue pm1, binary(b, kSub, p, one));
    KILN_ASSIGN_OR_RETURN(GradValue upm1, binary(b, ElementWiseOp::kPow, u, pm1));
    KILN_ASSIGN_OR_RETURN(GradValue dydu, binary(b, kMul, p, upm1));
    KILN_ASSIGN_OR_RETURN(du, binary(b, kMul, dy, dydu));
    if (b.needs_grad(kPower)) {  // dy * y * log(u), 0 where u == 0
      KILN_ASSIGN_OR_RETURN(GradValue zero, b.scalar(0.0, dt));
      KILN_ASSIGN_OR_RETURN(GradValue u_zero, binary(b, ElementWiseOp::kEqual, u, zero));
      KILN_ASSIGN_OR_RETURN(GradValue log_u, grad_util::unary(b, UnaryOp::kLog, u));
      KILN_ASSIGN_OR_RETURN(GradValue safe, grad_util::where(b, u_zero, zero, log_u));
      KILN_ASSIGN_OR_RETURN(GradValue t, binary(b, kMul, b.output(0), safe));
      KILN_ASSIGN_OR_RETURN(GradValue g, binary(b, kMul, dy, t));
      KILN_RETURN_IF_ERROR(give(kPower, g));
    }
  }
  if (b.needs_grad(0)) {
    GradValue g = du;
    if (coef[kScale]) {
      KILN_ASSIGN_OR_RETURN(g, binary(b, kMul, du, coef[kScale]));
    }
    KILN_RETURN_IF_ERROR(b.set_grad(0, g));
  }
  if (coef[kShift] && b.needs_grad(kShift)) KILN_RETURN_IF_ERROR(give(kShift, du));
  if (coef[kScale] && b.needs_grad(kScale)) {
    KILN_ASSIGN_OR_RETURN(GradValue g, binary(b, kMul, du, x));
    KILN_RETURN_IF_ERROR(give(kScale, g));
  }
  return Status::ok();
}

KILN_REGISTER_GRAD("Scale", scale_grad);

}  // namespace
}  // namespace kiln
