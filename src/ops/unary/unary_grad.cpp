// Gradient rule of Unary: dx = dy * f'(x), written with the output y where that is cheaper. Rounding
// and sign have a zero gradient (almost everywhere); Not, IsNaN and IsInf have bool outputs, which no
// gradient reaches.
#include "ops/grad.h"
#include "ops/grad_util.h"
#include "ops/unary/unary.h"

namespace kiln {
namespace {

using grad_util::binary;
using grad_util::unary;
constexpr ElementWiseOp kAdd = ElementWiseOp::kSum, kSub = ElementWiseOp::kSub, kMul = ElementWiseOp::kProd,
                        kDiv = ElementWiseOp::kDiv;

// 1 / sqrt(1 - x^2) (asin, acos), 1 / sqrt(x^2 + 1) (asinh) or 1 / sqrt(x^2 - 1) (acosh) as dy / sqrt(...).
Result<GradValue> dy_over_sqrt(GradBuilder& b, GradValue dy, GradValue x, UnaryOp op) {
  const DataType dt = b.desc(x).dtype;
  KILN_ASSIGN_OR_RETURN(GradValue one, b.scalar(1.0, dt));
  KILN_ASSIGN_OR_RETURN(GradValue x2, binary(b, kMul, x, x));
  GradValue inner;
  if (op == UnaryOp::kAsin || op == UnaryOp::kAcos) {
    KILN_ASSIGN_OR_RETURN(inner, binary(b, kSub, one, x2));
  } else if (op == UnaryOp::kAsinh) {
    KILN_ASSIGN_OR_RETURN(inner, binary(b, kAdd, x2, one));
  } else {
    KILN_ASSIGN_OR_RETURN(inner, binary(b, kSub, x2, one));
  }
  KILN_ASSIGN_OR_RETURN(GradValue root, unary(b, UnaryOp::kSqrt, inner));
  return binary(b, kDiv, dy, root);
}

Result<GradValue> input_grad(GradBuilder& b, UnaryOp op, GradValue dy) {
  const GradValue x = b.input(0), y = b.output(0);
  const DataType dt = b.desc(x).dtype;
  switch (op) {
    case UnaryOp::kExp: return binary(b, kMul, dy, y);
    case UnaryOp::kLog: return binary(b, kDiv, dy, x);
    case UnaryOp::kSqrt: {  // dy / (2 y)
      KILN_ASSIGN_OR_RETURN(GradValue q, binary(b, kDiv, dy, y));
      return grad_util::scaled(b, q, 0.5);
    }
    case UnaryOp::kReciprocal: {  // -dy * y^2
      KILN_ASSIGN_OR_RETURN(GradValue y2, binary(b, kMul, y, y));
      KILN_ASSIGN_OR_RETURN(GradValue t, binary(b, kMul, dy, y2));
      return unary(b, UnaryOp::kNeg, t);
    }
    case UnaryOp::kAbs: {  // dy * sign(x) (0 at x = 0)
      KILN_ASSIGN_OR_RETURN(GradValue s, unary(b, UnaryOp::kSign, x));
      return binary(b, kMul, dy, s);
    }
    case UnaryOp::kNeg: return unary(b, UnaryOp::kNeg, dy);
    case UnaryOp::kFloor:
    case UnaryOp::kCeil:
    case UnaryOp::kRound:
    case UnaryOp::kSign: return grad_util::zeros(b, dt, b.desc(x).dims);
    case UnaryOp::kErf: {  // dy * 2 / sqrt(pi) * exp(-x^2)
      KILN_ASSIGN_OR_RETURN(GradValue x2, binary(b, kMul, x, x));
      KILN_ASSIGN_OR_RETURN(GradValue n, unary(b, UnaryOp::kNeg, x2));
      KILN_ASSIGN_OR_RETURN(GradValue e, unary(b, UnaryOp::kExp, n));
      KILN_ASSIGN_OR_RETURN(GradValue t, binary(b, kMul, dy, e));
      return grad_util::scaled(b, t, 1.1283791670955126);  // 2 / sqrt(pi)
    }
    case UnaryOp::kSin: {
      KILN_ASSIGN_OR_RETURN(GradValue c, unary(b, UnaryOp::kCos, x));
      return binary(b, kMul, dy, c);
    }
    case UnaryOp::kCos: {
      KILN_ASSIGN_OR_RETURN(GradValue s, unary(b, UnaryOp::kSin, x));
      KILN_ASSIGN_OR_RETURN(GradValue t, binary(b, kMul, dy, s));
      return unary(b, UnaryOp::kNeg, t);
    }
    case UnaryOp::kTan: {  // dy * (1 + y^2)
      KILN_ASSIGN_OR_RETURN(GradValue one, b.scalar(1.0, dt));
      KILN_ASSIGN_OR_RETURN(GradValue y2, binary(b, kMul, y, y));
      KILN_ASSIGN_OR_RETURN(GradValue d, binary(b, kAdd, y2, one));
      return binary(b, kMul, dy, d);
    }
    case UnaryOp::kAsin:
    case UnaryOp::kAsinh:
    case UnaryOp::kAcosh: return dy_over_sqrt(b, dy, x, op);
    case UnaryOp::kAcos: {
      KILN_ASSIGN_OR_RETURN(GradValue t, dy_over_sqrt(b, dy, x, op));
      return unary(b, UnaryOp::kNeg, t);
    }
    case UnaryOp::kAtan:
    case UnaryOp::kAtanh: {  // dy / (1 + x^2), dy / (1 - x^2)
      KILN_ASSIGN_OR_RETURN(GradValue one, b.scalar(1.0, dt));
      KILN_ASSIGN_OR_RETURN(GradValue x2, binary(b, kMul, x, x));
      KILN_ASSIGN_OR_RETURN(GradValue d, binary(b, op == UnaryOp::kAtan ? kAdd : kSub, one, x2));
      return binary(b, kDiv, dy, d);
    }
    case UnaryOp::kSinh: {
      KILN_ASSIGN_OR_RETURN(GradValue c, unary(b, UnaryOp::kCosh, x));
      return binary(b, kMul, dy, c);
    }
    case UnaryOp::kCosh: {
      KILN_ASSIGN_OR_RETURN(GradValue s, unary(b, UnaryOp::kSinh, x));
      return binary(b, kMul, dy, s);
    }
    default: return GradValue{};  // Not, IsNaN, IsInf: bool outputs
  }
}

Status unary_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy || !b.needs_grad(0)) return Status::ok();
  const auto& attrs = b.attrs_as<UnaryAttrs>();
  KILN_ASSIGN_OR_RETURN(GradValue g, input_grad(b, attrs.op, dy));
  if (!g) return Status::ok();
  return b.set_grad(0, g);
}

KILN_REGISTER_GRAD("Unary", unary_grad);

}  // namespace
}  // namespace kiln
