#include "ops/grad_util.h"

#include <memory>

#include "ops/reduce/reduce.h"
#include "ops/shuffle/shuffle.h"

namespace kiln::grad_util {

Status require_static(const GradBuilder& b, GradValue v, std::string_view what) {
  const Dims dims = b.desc(v).dims;
  if (!dims.is_static())
    return unsupported("the gradient needs static dims but ", what, " has shape ", dims.to_string(),
                       "; give the training graph's inputs fixed shapes");
  return Status::ok();
}

Result<GradValue> int64s(GradBuilder& b, std::span<const int64_t> values) {
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(DataType::kInt64, Dims{static_cast<int64_t>(values.size())}));
  for (size_t i = 0; i < values.size(); ++i) t.data<int64_t>()[i] = values[i];
  return b.constant(std::move(t));
}

Result<GradValue> binary(GradBuilder& b, ElementWiseOp op, GradValue x, GradValue y) {
  return b.add1("ElementWise", std::make_unique<ElementWiseAttrs>(elementwise_attrs(op)), {x, y});
}

Result<GradValue> unary(GradBuilder& b, UnaryOp op, GradValue x) {
  return b.add1("Unary", std::make_unique<UnaryAttrs>(unary_attrs(op)), {x});
}

Result<GradValue> scaled(GradBuilder& b, GradValue x, double v) {
  if (v == 1.0) return x;
  if (v == -1.0) return unary(b, UnaryOp::kNeg, x);
  KILN_ASSIGN_OR_RETURN(GradValue s, b.scalar(v, b.desc(x).dtype));
  return binary(b, ElementWiseOp::kProd, x, s);
}

Result<GradValue> where(GradBuilder& b, GradValue c, GradValue x, GradValue y) {
  return b.add1("Where", std::make_unique<NoAttrs>(), {c, x, y});
}

Result<GradValue> cast(GradBuilder& b, GradValue x, DataType to) {
  if (b.desc(x).dtype == to) return x;
  return b.add1("Cast", std::make_unique<CastAttrs>(cast_to(to)), {x});
}

Result<GradValue> reshape(GradBuilder& b, GradValue x, const Dims& dims) {
  if (b.desc(x).dims == dims) return x;
  if (!dims.is_static())
    return unsupported("the gradient needs static dims but has to reshape to ", dims.to_string(),
                       "; give the training graph's inputs fixed shapes");
  auto attrs = std::make_unique<ShuffleAttrs>();
  attrs->has_reshape_dims = true;
  attrs->allowzero = true;
  attrs->reshape_dims = dims.to_vector();
  return b.add1("Shuffle", std::move(attrs), {x});
}

Result<GradValue> transpose(GradBuilder& b, GradValue x, std::vector<int64_t> perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
  if (identity) return x;
  auto attrs = std::make_unique<ShuffleAttrs>();
  attrs->first_transpose = std::move(perm);
  return b.add1("Shuffle", std::move(attrs), {x});
}

Result<GradValue> reduce_sum(GradBuilder& b, GradValue x, std::vector<int64_t> axes, bool keep_dims) {
  auto attrs = std::make_unique<ReduceAttrs>();
  attrs->op = ReduceOp::kSum;
  attrs->axes = std::move(axes);
  attrs->keep_dims = keep_dims;
  return b.add1("Reduce", std::move(attrs), {x});
}

Result<GradValue> expand(GradBuilder& b, GradValue x, const Dims& dims) {
  if (b.desc(x).dims == dims) return x;
  if (!dims.is_static())
    return unsupported("the gradient needs static dims but has to broadcast to ", dims.to_string(),
                       "; give the training graph's inputs fixed shapes");
  const std::vector<int64_t> shape = dims.to_vector();
  KILN_ASSIGN_OR_RETURN(GradValue s, int64s(b, shape));
  return b.add1("Expand", std::make_unique<NoAttrs>(), {x, s});
}

Result<GradValue> zeros(GradBuilder& b, DataType dtype, const Dims& dims) {
  KILN_ASSIGN_OR_RETURN(GradValue z, b.scalar(0.0, dtype));
  if (dims.rank() == 0) return z;
  return expand(b, z, dims);
}

std::vector<int64_t> inverse_permutation(std::span<const int64_t> perm) {
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  return inv;
}

}  // namespace kiln::grad_util
