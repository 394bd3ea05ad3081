#pragma once
// MatrixMultiply (ONNX MatMul and Gemm) and FullyConnected (TensorRT's fully connected layer).
#include "kiln/dims.h"
#include "ops/activation/activation.h"
#include "ops/attrs.h"

namespace kiln {

/// y = alpha * op(a) @ op(b) + beta * c, op() transposing the last two dims when asked.
/// Numpy matmul rules: a 1-D `a` is a row vector [1, K] and a 1-D `b` a column vector [K, 1], the
/// promoted dim being dropped from the output (transpose flags do not apply to 1-D operands);
/// batch dims (all but the last two) broadcast. `c` (optional) broadcasts to the output (Gemm's bias).
/// The optimizer's epilogue: y = fused(alpha * op(a) @ op(b) + beta * c + residual), where `residual`
/// (optional input 3) has the output's dtype and dims.
struct MatrixMultiplyAttrs : AttrsOf<MatrixMultiplyAttrs> {
  bool transpose_a = false;
  bool transpose_b = false;
  float alpha = 1.f;
  float beta = 1.f;
  FusedActivation fused;

  template <class V>
  void visit(V& v) {
    v("transpose_a", transpose_a);
    v("transpose_b", transpose_b);
    v("alpha", alpha);
    v("beta", beta);
    fused.visit(v);
  }
};

/// y[n..., o] = sum_k x[n..., k...] * weights[o, k] + bias[o]: x is flattened into
/// [prod(dims[0:axis]), prod(dims[axis:])]; the output keeps x's dims before `axis` and appends `out`
/// (with axis = 1: [N, out]). weights is [out, K], bias (optional) is [out].
/// The optimizer's epilogue: y = fused(x @ weights^T + bias + residual), `residual` (optional input 3)
/// having the output's dtype and dims.
struct FullyConnectedAttrs : AttrsOf<FullyConnectedAttrs> {
  int64_t axis = 1;
  FusedActivation fused;

  template <class V>
  void visit(V& v) {
    v("axis", axis);
    fused.visit(v);
  }
};

/// The input index of the epilogue's residual in MatrixMultiply and FullyConnected.
inline constexpr int kGemmResidualInput = 3;

/// The matmul problem after 1-D promotion and transposition, all in row-major element counts.
struct MatmulShape {
  Dims batch;             ///< broadcast batch dims of the output
  Dims a_batch, b_batch;  ///< each operand's batch dims, right-aligned to `batch` (1 where absent)
  int64_t m = 1, n = 1, k = 1;
  bool a_vector = false, b_vector = false;  ///< 1-D operands (promoted)
  Dims out;                                 ///< the output dims
};

/// Resolves shapes of `a` and `b` for `attrs`; errors name the shapes and say what is expected.
Result<MatmulShape> matmul_shape(const Dims& a, const Dims& b, const MatrixMultiplyAttrs& attrs);

}  // namespace kiln
