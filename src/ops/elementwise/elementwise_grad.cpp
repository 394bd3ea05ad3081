// Gradient rules of ElementWise, Where and Cast. Broadcast operands get their gradient summed back to
// their own shape (GradBuilder::sum_to). Comparisons, logic and bit shifts have no gradient (their
// outputs are not floating point, so no gradient reaches them).
#include "ops/elementwise/elementwise.h"
#include "ops/grad.h"
#include "ops/grad_util.h"

namespace kiln {
namespace {

using grad_util::binary;
using grad_util::unary;
using grad_util::where;

// Gives input i the gradient g summed to its shape.
Status give(GradBuilder& b, int i, GradValue g) {
  if (!b.needs_grad(i)) return Status::ok();
  KILN_ASSIGN_OR_RETURN(GradValue s, b.sum_to(g, b.desc(b.input(i)).dims));
  return b.set_grad(i, s);
}

// max/min: the gradient goes to the winner; on a tie (a == b) to input a.
Status extremum_grad(GradBuilder& b, GradValue dy, bool max) {
  const GradValue a = b.input(0), c = b.input(1);
  KILN_ASSIGN_OR_RETURN(GradValue a_wins,
                        binary(b, max ? ElementWiseOp::kGreaterOrEqual : ElementWiseOp::kLessOrEqual, a, c));
  KILN_ASSIGN_OR_RETURN(GradValue zero, b.scalar(0.0, b.desc(dy).dtype));
  if (b.needs_grad(0)) {
    KILN_ASSIGN_OR_RETURN(GradValue g, where(b, a_wins, dy, zero));
    KILN_RETURN_IF_ERROR(give(b, 0, g));
  }
  if (b.needs_grad(1)) {
    KILN_ASSIGN_OR_RETURN(GradValue g, where(b, a_wins, zero, dy));
    KILN_RETURN_IF_ERROR(give(b, 1, g));
  }
  return Status::ok();
}

// y = a ^ b: da = dy * b * a ^ (b - 1); db = dy * y * log(a), taken as 0 where a == 0 (the limit for b > 0).
Status pow_grad(GradBuilder& b, GradValue dy) {
  const GradValue a = b.input(0), e = b.input(1), y = b.output(0);
  const DataType dt = b.desc(a).dtype;
  if (b.needs_grad(0)) {
    KILN_ASSIGN_OR_RETURN(GradValue ef, grad_util::cast(b, e, dt));
    KILN_ASSIGN_OR_RETURN(GradValue one, b.scalar(1.0, dt));
    KILN_ASSIGN_OR_RETURN(GradValue em1, binary(b, ElementWiseOp::kSub, ef, one));
    KILN_ASSIGN_OR_RETURN(GradValue p, binary(b, ElementWiseOp::kPow, a, em1));
    KILN_ASSIGN_OR_RETURN(GradValue t, binary(b, ElementWiseOp::kProd, ef, p));
    KILN_ASSIGN_OR_RETURN(GradValue g, binary(b, ElementWiseOp::kProd, dy, t));
    KILN_RETURN_IF_ERROR(give(b, 0, g));
  }
  if (b.needs_grad(1)) {
    KILN_ASSIGN_OR_RETURN(GradValue zero, b.scalar(0.0, dt));
    KILN_ASSIGN_OR_RETURN(GradValue a_zero, binary(b, ElementWiseOp::kEqual, a, zero));
    KILN_ASSIGN_OR_RETURN(GradValue log_a, unary(b, UnaryOp::kLog, a));
    KILN_ASSIGN_OR_RETURN(GradValue safe_log, where(b, a_zero, zero, log_a));
    KILN_ASSIGN_OR_RETURN(GradValue t, binary(b, ElementWiseOp::kProd, y, safe_log));
    KILN_ASSIGN_OR_RETURN(GradValue g, binary(b, ElementWiseOp::kProd, dy, t));
    KILN_ASSIGN_OR_RETURN(GradValue s, b.sum_to(g, b.desc(e).dims));
    KILN_ASSIGN_OR_RETURN(GradValue ge, grad_util::cast(b, s, b.desc(e).dtype));  // the exponent's own dtype
    KILN_RETURN_IF_ERROR(b.set_grad(1, ge));
  }
  return Status::ok();
}

Status elementwise_grad(GradBuilder& b) {
  const auto& attrs = b.attrs_as<ElementWiseAttrs>();
  const GradValue dy = b.grad_output(0);
  if (!dy) return Status::ok();
  const GradValue a = b.input(0), c = b.input(1), y = b.output(0);
  switch (attrs.op) {
    case ElementWiseOp::kSum: KILN_RETURN_IF_ERROR(give(b, 0, dy)); return give(b, 1, dy);
    case ElementWiseOp::kSub: {
      KILN_RETURN_IF_ERROR(give(b, 0, dy));
      if (!b.needs_grad(1)) return Status::ok();
      // Negate after summing: the reduced gradient is the smaller tensor.
      KILN_ASSIGN_OR_RETURN(GradValue s, b.sum_to(dy, b.desc(c).dims));
      KILN_ASSIGN_OR_RETURN(GradValue g, unary(b, UnaryOp::kNeg, s));
      return b.set_grad(1, g);
    }
    case ElementWiseOp::kProd:
      if (b.needs_grad(0)) {
        KILN_ASSIGN_OR_RETURN(GradValue g, binary(b, ElementWiseOp::kProd, dy, c));
        KILN_RETURN_IF_ERROR(give(b, 0, g));
      }
      if (b.needs_grad(1)) {
        KILN_ASSIGN_OR_RETURN(GradValue g, binary(b, ElementWiseOp::kProd, dy, a));
        KILN_RETURN_IF_ERROR(give(b, 1, g));
      }
      return Status::ok();
    case ElementWiseOp::kDiv: {
      // da = dy / b; db = -dy * a / b^2 = -(dy / b) * y.
      KILN_ASSIGN_OR_RETURN(GradValue q, binary(b, ElementWiseOp::kDiv, dy, c));
      KILN_RETURN_IF_ERROR(give(b, 0, q));
      if (!b.needs_grad(1)) return Status::ok();
      KILN_ASSIGN_OR_RETURN(GradValue t, binary(b, ElementWiseOp::kProd, q, y));
      KILN_ASSIGN_OR_RETURN(GradValue s, b.sum_to(t, b.desc(c).dims));
      KILN_ASSIGN_OR_RETURN(GradValue g, unary(b, UnaryOp::kNeg, s));
      return b.set_grad(1, g);
    }
    case ElementWiseOp::kMax: return extremum_grad(b, dy, true);
    case ElementWiseOp::kMin: return extremum_grad(b, dy, false);
    case ElementWiseOp::kPow: return pow_grad(b, dy);
    case ElementWiseOp::kMod: {
      // fmod: y = a - b * trunc(a / b), so da = dy and db = -dy * trunc(a / b) = -dy * (a - y) / b.
      KILN_RETURN_IF_ERROR(give(b, 0, dy));
      if (!b.needs_grad(1)) return Status::ok();
      KILN_ASSIGN_OR_RETURN(GradValue diff, binary(b, ElementWiseOp::kSub, a, y));
      KILN_ASSIGN_OR_RETURN(GradValue q, binary(b, ElementWiseOp::kDiv, diff, c));
      KILN_ASSIGN_OR_RETURN(GradValue t, binary(b, ElementWiseOp::kProd, dy, q));
      KILN_ASSIGN_OR_RETURN(GradValue s, b.sum_to(t, b.desc(c).dims));
      KILN_ASSIGN_OR_RETURN(GradValue g, unary(b, UnaryOp::kNeg, s));
      return b.set_grad(1, g);
    }
    default: return Status::ok();  // comparisons, logic, bit shifts: no gradient
  }
}

// y = condition ? x : y, every input broadcast.
Status where_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy) return Status::ok();
  const GradValue cond = b.input(0);
  KILN_ASSIGN_OR_RETURN(GradValue zero, b.scalar(0.0, b.desc(dy).dtype));
  if (b.needs_grad(1)) {
    KILN_ASSIGN_OR_RETURN(GradValue g, where(b, cond, dy, zero));
    KILN_RETURN_IF_ERROR(give(b, 1, g));
  }
  if (b.needs_grad(2)) {
    KILN_ASSIGN_OR_RETURN(GradValue g, where(b, cond, zero, dy));
    KILN_RETURN_IF_ERROR(give(b, 2, g));
  }
  return Status::ok();
}

// Between floating types the gradient is cast back; from other types there is none to give.
Status cast_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy || !b.needs_grad(0)) return Status::ok();
  const DataType from = b.desc(b.input(0)).dtype;
  if (!is_floating(from) || !is_floating(b.desc(dy).dtype)) return Status::ok();
  KILN_ASSIGN_OR_RETURN(GradValue g, grad_util::cast(b, dy, from));
  return b.set_grad(0, g);
}

KILN_REGISTER_GRAD("ElementWise", elementwise_grad);
KILN_REGISTER_GRAD("Where", where_grad);
KILN_REGISTER_GRAD("Cast", cast_grad);

}  // namespace
}  // namespace kiln
