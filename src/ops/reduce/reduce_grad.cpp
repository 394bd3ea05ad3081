// Gradient rule of Reduce: dy is reshaped to x's rank (1 on the reduced axes) and broadcast back over
// x by ElementWise (or Expand where nothing multiplies it). max/min share the gradient evenly among the
// elements equal to the result (ties split, as PyTorch's amax/amin do); prod handles zeros exactly.
#include <memory>

#include "ops/grad.h"
#include "ops/grad_util.h"
#include "ops/reduce/reduce.h"

namespace kiln {
namespace {

using grad_util::binary;
using grad_util::unary;
using grad_util::where;
constexpr ElementWiseOp kSub = ElementWiseOp::kSub, kMul = ElementWiseOp::kProd, kDiv = ElementWiseOp::kDiv,
                        kEq = ElementWiseOp::kEqual;

Result<GradValue> reduce(GradBuilder& b, ReduceOp op, GradValue x, const std::vector<int64_t>& axes) {
  auto attrs = std::make_unique<ReduceAttrs>();
  attrs->op = op;
  attrs->axes = axes;
  attrs->keep_dims = true;
  return b.add1("Reduce", std::move(attrs), {x});
}

// d prod / dx_i: the product of the others. With no zero it is y / x_i; with one zero only that element
// has a non-zero gradient (the product of the rest); with two or more zeros all are 0.
Result<GradValue> prod_factor(GradBuilder& b, GradValue x, const std::vector<int64_t>& axes) {
  const DataType dt = b.desc(x).dtype;
  KILN_ASSIGN_OR_RETURN(GradValue zero, b.scalar(0.0, dt));
  KILN_ASSIGN_OR_RETURN(GradValue one, b.scalar(1.0, dt));
  KILN_ASSIGN_OR_RETURN(GradValue is_zero, binary(b, kEq, x, zero));
  KILN_ASSIGN_OR_RETURN(GradValue zf, grad_util::cast(b, is_zero, dt));
  KILN_ASSIGN_OR_RETURN(GradValue zeros, reduce(b, ReduceOp::kSum, zf, axes));
  KILN_ASSIGN_OR_RETURN(GradValue x_nz, where(b, is_zero, one, x));
  KILN_ASSIGN_OR_RETURN(GradValue p_nz, reduce(b, ReduceOp::kProd, x_nz, axes));  // product of the non-zeros
  KILN_ASSIGN_OR_RETURN(GradValue none, binary(b, kEq, zeros, zero));
  KILN_ASSIGN_OR_RETURN(GradValue single, binary(b, kEq, zeros, one));
  KILN_ASSIGN_OR_RETURN(GradValue others, binary(b, kDiv, p_nz, x_nz));
  KILN_ASSIGN_OR_RETURN(GradValue at_nonzero, where(b, none, others, zero));
  KILN_ASSIGN_OR_RETURN(GradValue at_zero, where(b, single, p_nz, zero));
  return where(b, is_zero, at_zero, at_nonzero);
}

Status reduce_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy || !b.needs_grad(0)) return Status::ok();
  const auto& attrs = b.attrs_as<ReduceAttrs>();
  const GradValue x = b.input(0);
  KILN_RETURN_IF_ERROR(grad_util::require_static(b, x, "input 'data'"));
  const Dims xd = b.desc(x).dims;
  const DataType dt = b.desc(x).dtype;
  std::vector<int64_t> axes = attrs.axes;
  if (b.input(1)) {
    const Tensor* v = b.value(b.input(1));
    if (!v)
      return unsupported("Reduce takes its axes from input 'axes', whose value is not known before run time; ",
                         "the gradient needs them: make 'axes' a constant");
    axes = tensor_to_int64s(*v);
  }
  KILN_ASSIGN_OR_RETURN(ReducePlan plan, reduce_plan(attrs, xd, axes));
  if (plan.noop) return b.set_grad(0, dy);
  std::vector<int64_t> reduced;
  for (int i = 0; i < xd.rank(); ++i)
    if (plan.reduced[i]) reduced.push_back(i);
  const int64_t kept_n = plan.kept.numel();
  const int64_t count = kept_n > 0 ? xd.numel() / kept_n : 0;
  KILN_ASSIGN_OR_RETURN(GradValue dyk, grad_util::reshape(b, dy, plan.kept));
  auto y_kept = [&]() { return grad_util::reshape(b, b.output(0), plan.kept); };
  GradValue g;
  switch (attrs.op) {
    case ReduceOp::kSum: {
      KILN_ASSIGN_OR_RETURN(g, grad_util::expand(b, dyk, xd));
      break;
    }
    case ReduceOp::kMean: {
      KILN_ASSIGN_OR_RETURN(GradValue s, grad_util::scaled(b, dyk, count > 0 ? 1.0 / static_cast<double>(count) : 1.0));
      KILN_ASSIGN_OR_RETURN(g, grad_util::expand(b, s, xd));
      break;
    }
    case ReduceOp::kL1: {
      KILN_ASSIGN_OR_RETURN(GradValue s, unary(b, UnaryOp::kSign, x));
      KILN_ASSIGN_OR_RETURN(g, binary(b, kMul, dyk, s));
      break;
    }
    case ReduceOp::kSumSquare: {
      KILN_ASSIGN_OR_RETURN(GradValue s, grad_util::scaled(b, dyk, 2.0));
      KILN_ASSIGN_OR_RETURN(g, binary(b, kMul, s, x));
      break;
    }
    case ReduceOp::kL2: {  // dy * x / y, 0 where y == 0
      KILN_ASSIGN_OR_RETURN(GradValue yk, y_kept());
      KILN_ASSIGN_OR_RETURN(GradValue zero, b.scalar(0.0, dt));
      KILN_ASSIGN_OR_RETURN(GradValue y_zero, binary(b, kEq, yk, zero));
      KILN_ASSIGN_OR_RETURN(GradValue q, binary(b, kDiv, dyk, yk));
      KILN_ASSIGN_OR_RETURN(GradValue safe, where(b, y_zero, zero, q));
      KILN_ASSIGN_OR_RETURN(g, binary(b, kMul, safe, x));
      break;
    }
    case ReduceOp::kLogSum: {  // dy / sum(x) = dy / exp(y)
      KILN_ASSIGN_OR_RETURN(GradValue yk, y_kept());
      KILN_ASSIGN_OR_RETURN(GradValue s, unary(b, UnaryOp::kExp, yk));
      KILN_ASSIGN_OR_RETURN(GradValue q, binary(b, kDiv, dyk, s));
      KILN_ASSIGN_OR_RETURN(g, grad_util::expand(b, q, xd));
      break;
    }
    case ReduceOp::kLogSumExp: {  // dy * exp(x - y) (the softmax)
      KILN_ASSIGN_OR_RETURN(GradValue yk, y_kept());
      KILN_ASSIGN_OR_RETURN(GradValue d, binary(b, kSub, x, yk));
      KILN_ASSIGN_OR_RETURN(GradValue e, unary(b, UnaryOp::kExp, d));
      KILN_ASSIGN_OR_RETURN(g, binary(b, kMul, dyk, e));
      break;
    }
    case ReduceOp::kMax:
    case ReduceOp::kMin: {  // dy / (number of ties) at each element equal to y
      KILN_ASSIGN_OR_RETURN(GradValue yk, y_kept());
      KILN_ASSIGN_OR_RETURN(GradValue hit, binary(b, kEq, x, yk));
      KILN_ASSIGN_OR_RETURN(GradValue hf, grad_util::cast(b, hit, dt));
      KILN_ASSIGN_OR_RETURN(GradValue ties, reduce(b, ReduceOp::kSum, hf, reduced));
      KILN_ASSIGN_OR_RETURN(GradValue share, binary(b, kDiv, dyk, ties));
      KILN_ASSIGN_OR_RETURN(GradValue zero, b.scalar(0.0, dt));
      KILN_ASSIGN_OR_RETURN(g, where(b, hit, share, zero));
      break;
    }
    case ReduceOp::kProd: {
      KILN_ASSIGN_OR_RETURN(GradValue f, prod_factor(b, x, reduced));
      KILN_ASSIGN_OR_RETURN(g, binary(b, kMul, dyk, f));
      break;
    }
  }
  if (!g) return internal_error("Reduce ", enum_name(attrs.op), " has no gradient formula");
  return b.set_grad(0, g);
}

KILN_REGISTER_GRAD("Reduce", reduce_grad);

}  // namespace
}  // namespace kiln
