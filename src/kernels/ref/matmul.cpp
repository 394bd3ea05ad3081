// Reference MatrixMultiply and FullyConnected: one dot product per output element, then the optimizer's
// epilogue (residual add, fused activation).
#include <cmath>
#include <type_traits>

#include "kernels/common/indexing.h"
#include "kernels/ref/activation.h"
#include "kernels/registry.h"
#include "ops/matmul/matmul.h"

namespace kiln {
namespace {

template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

template <class T>
T finish(Acc<T> dot, const T* c, float alpha, float beta) {
  if constexpr (std::is_integral_v<T>) {
    if (alpha == 1.f && (!c || beta == 1.f)) return static_cast<T>(dot + (c ? static_cast<int64_t>(*c) : 0));
    const double v = alpha * static_cast<double>(dot) + (c ? beta * static_cast<double>(*c) : 0.0);
    return static_cast<T>(std::llround(v));
  } else {
    return static_cast<T>(alpha * dot + (c ? beta * static_cast<double>(*c) : 0.0));
  }
}

const Tensor* residual_of(const KernelContext& ctx) {
  return ctx.src.size() > kGemmResidualInput && ctx.src[kGemmResidualInput].defined() ? &ctx.src[kGemmResidualInput]
                                                                                      : nullptr;
}

// y += residual, then the fused activation (floating types only; the schema rejects it for integers).
template <class T>
void apply_epilogue(const KernelContext& ctx, const FusedActivation& fused, Tensor& y) {
  T* dst = y.data<T>();
  const int64_t n = y.numel();
  if (const Tensor* r = residual_of(ctx)) {
    const T* src = r->data<T>();
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(dst[i] + src[i]);
  }
  if constexpr (std::is_same_v<T, float>) ref::apply_fused(fused, dst, n);
}

template <class T>
Status matmul_typed(KernelContext& ctx) {
  const auto& attrs = ctx.attrs<MatrixMultiplyAttrs>();
  const Tensor& ta = ctx.src[0];
  const Tensor& tb = ctx.src[1];
  KILN_ASSIGN_OR_RETURN(MatmulShape s, matmul_shape(ta.dims(), tb.dims(), attrs));
  const T* a = ta.data<T>();
  const T* b = tb.data<T>();
  const bool has_c = ctx.src.size() > 2 && ctx.src[2].defined();
  const T* c = has_c ? ctx.src[2].data<T>() : nullptr;
  T* y = ctx.dst[0].data<T>();
  const bool trans_a = attrs.transpose_a && !s.a_vector;
  const bool trans_b = attrs.transpose_b && !s.b_vector;
  const BroadcastIndexer a_batch(s.a_batch, s.batch), b_batch(s.b_batch, s.batch);
  const BroadcastIndexer c_at(has_c ? ctx.src[2].dims() : Dims{}, s.out);
  const int64_t m = s.m, n = s.n, k = s.k;
  const int64_t batches = s.batch.numel();
  for (int64_t bi = 0; bi < batches; ++bi) {
    const T* ab = a + a_batch(bi) * m * k;
    const T* bb = b + b_batch(bi) * k * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        Acc<T> dot = 0;
        for (int64_t p = 0; p < k; ++p) {
          const T av = trans_a ? ab[p * m + i] : ab[i * k + p];
          const T bv = trans_b ? bb[j * k + p] : bb[p * n + j];
          dot += static_cast<Acc<T>>(av) * static_cast<Acc<T>>(bv);
        }
        const int64_t o = (bi * m + i) * n + j;
        y[o] = finish<T>(dot, has_c ? c + c_at(o) : nullptr, attrs.alpha, attrs.beta);
      }
    }
  }
  apply_epilogue<T>(ctx, attrs.fused, ctx.dst[0]);
  return Status::ok();
}

Status run_matrix_multiply(KernelContext& ctx) {
  switch (ctx.src[0].dtype()) {
    case DataType::kFloat32: return matmul_typed<float>(ctx);
    case DataType::kInt32: return matmul_typed<int32_t>(ctx);
    case DataType::kInt64: return matmul_typed<int64_t>(ctx);
    default: return unsupported("ref.matrix_multiply has no ", dtype_name(ctx.src[0].dtype()), " path");
  }
}

Status run_fully_connected(KernelContext& ctx) {
  const Tensor& x = ctx.src[0];
  const Tensor& w = ctx.src[1];
  const bool has_bias = ctx.src.size() > 2 && ctx.src[2].defined();
  const int64_t outs = w.dims()[0], k = w.dims()[1];
  const int64_t rows = k > 0 ? x.numel() / k : ctx.dst[0].numel() / std::max<int64_t>(outs, 1);
  const float* src = x.data<float>();
  const float* wt = w.data<float>();
  const float* bias = has_bias ? ctx.src[2].data<float>() : nullptr;
  float* dst = ctx.dst[0].data<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < outs; ++o) {
      double dot = bias ? bias[o] : 0.0;
      for (int64_t p = 0; p < k; ++p) dot += static_cast<double>(src[r * k + p]) * wt[o * k + p];
      dst[r * outs + o] = static_cast<float>(dot);
    }
  apply_epilogue<float>(ctx, ctx.attrs<FullyConnectedAttrs>().fused, ctx.dst[0]);
  return Status::ok();
}

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.matrix_multiply",
    .op = "MatrixMultiply",
    .backend = Backend::kRef,
    .priority = 0,
    .supports =
        [](const OpCall& call) {
          return require_dtypes(call, {DataType::kFloat32, DataType::kInt32, DataType::kInt64});
        },
    .create = stateless(run_matrix_multiply),
}));

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.fully_connected",
    .op = "FullyConnected",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = [](const OpCall& call) { return require_dtypes(call, {DataType::kFloat32}); },
    .create = stateless(run_fully_connected),
}));

}  // namespace
}  // namespace kiln
