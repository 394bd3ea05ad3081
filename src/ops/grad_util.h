#pragma once
// Small builders shared by the gradient rules of the tensor ops (elementwise, unary, reduce, shuffle,
// matmul, indexing, scale): one backward node each, composed from existing ops.
#include <span>
#include <string_view>
#include <vector>

#include "ops/elementwise/elementwise.h"
#include "ops/grad.h"
#include "ops/unary/unary.h"

namespace kiln::grad_util {

/// Fails (naming `what` and its shape) unless `v` has static dims: the rules build shape constants.
Status require_static(const GradBuilder& b, GradValue v, std::string_view what);
/// An int64 vector constant (shapes, axes, pads).
Result<GradValue> int64s(GradBuilder& b, std::span<const int64_t> values);
/// a (op) b with broadcasting.
Result<GradValue> binary(GradBuilder& b, ElementWiseOp op, GradValue x, GradValue y);
/// f(x).
Result<GradValue> unary(GradBuilder& b, UnaryOp op, GradValue x);
/// x * scalar (x itself when `v` is 1).
Result<GradValue> scaled(GradBuilder& b, GradValue x, double v);
/// where(c, x, y) with broadcasting.
Result<GradValue> where(GradBuilder& b, GradValue c, GradValue x, GradValue y);
Result<GradValue> cast(GradBuilder& b, GradValue x, DataType to);
/// Reshape to static `dims`.
Result<GradValue> reshape(GradBuilder& b, GradValue x, const Dims& dims);
/// Transpose by `perm` (y dims[i] = x dims[perm[i]]); x itself for the identity.
Result<GradValue> transpose(GradBuilder& b, GradValue x, std::vector<int64_t> perm);
/// Sum over `axes` (all axes when empty).
Result<GradValue> reduce_sum(GradBuilder& b, GradValue x, std::vector<int64_t> axes, bool keep_dims);
/// Broadcast `x` to static `dims` (Expand); x itself when it has them already.
Result<GradValue> expand(GradBuilder& b, GradValue x, const Dims& dims);
/// Zeros of `dtype` and static `dims` (a broadcast scalar).
Result<GradValue> zeros(GradBuilder& b, DataType dtype, const Dims& dims);
/// The inverse of permutation `perm` (empty stays empty).
std::vector<int64_t> inverse_permutation(std::span<const int64_t> perm);

}  // namespace kiln::grad_util
