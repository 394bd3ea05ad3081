// CUDA Unary: the scalar definitions of ref/unary.h per element in a flat kernel with 16-byte packs
// (float16/bfloat16 compute in float; integers and bool as the reference defines them).
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/cuda/types.cuh"
#include "kernels/ref/unary.h"

namespace kiln {
namespace {

using cuda::compute_t;
using cuda::Pack;

template <UnaryOp Op, class T>
using unary_result_t = std::conditional_t<std::is_same_v<decltype(ref::unary<Op>(compute_t<T>{})), bool>, bool, T>;

template <UnaryOp Op, class T, class R>
__global__ void unary_kernel(const T* __restrict__ src, R* __restrict__ dst, int64_t n, bool packed, bool pos,
                             bool neg) {
  constexpr int N = cuda::kPackOf<T, R>;
  const int64_t packs = packed ? n / N : 0;
  for (int64_t p = cuda::thread_index(); p < packs; p += cuda::thread_count()) {
    const Pack<T, N> ps = reinterpret_cast<const Pack<T, N>*>(src)[p];
    Pack<R, N> pd;
#pragma unroll
    for (int j = 0; j < N; ++j) pd.v[j] = cuda::store<R>(ref::unary<Op>(cuda::load(ps.v[j]), pos, neg));
    reinterpret_cast<Pack<R, N>*>(dst)[p] = pd;
  }
  for (int64_t i = packs * N + cuda::thread_index(); i < n; i += cuda::thread_count())
    dst[i] = cuda::store<R>(ref::unary<Op>(cuda::load(src[i]), pos, neg));
}

// Calls f(op constant, Type<T>) when the kernels define `op` for storage type T; false otherwise.
template <class F>
bool visit_unary(UnaryOp op, DataType dtype, F&& f) {
  bool found = false;
  ref::dispatch_unary_op(op, [&](auto o) {
    constexpr UnaryOp kOp = std::decay_t<decltype(o)>::value;
    cuda::dispatch_dtype(dtype, [&](auto tag) {
      using T = cuda::type_of<decltype(tag)>;
      if constexpr (ref::unary_accepts<kOp, compute_t<T>>()) {
        f(o, tag);
        found = true;
      }
    });
  });
  return found;
}

Status run_unary(KernelContext& ctx) {
  const auto& attrs = ctx.attrs<UnaryAttrs>();
  const Tensor& x = ctx.src[0];
  Tensor& y = ctx.dst[0];
  const int64_t n = x.numel();
  if (n == 0) return Status::ok();
  cudaStream_t stream = cuda::native(ctx.stream);
  const bool found = visit_unary(attrs.op, x.dtype(), [&](auto o, auto tag) {
    constexpr UnaryOp kOp = std::decay_t<decltype(o)>::value;
    using T = cuda::type_of<decltype(tag)>;
    using R = unary_result_t<kOp, T>;
    const T* src = x.data<T>();
    R* dst = y.data<R>();
    constexpr int N = cuda::kPackOf<T, R>;
    const bool packed = cuda::pack_aligned<T, N>(src) && cuda::pack_aligned<R, N>(dst);
    const int64_t items = packed ? (n + N - 1) / N : n;
    unary_kernel<kOp, T, R><<<cuda::blocks_for(items), cuda::kThreads, 0, stream>>>(
        src, dst, n, packed, attrs.detect_positive, attrs.detect_negative);
  });
  if (!found) return unsupported("cuda.unary has no ", enum_name(attrs.op), " for ", dtype_name(x.dtype()));
  return cuda::check(cudaGetLastError(), "unary kernel launch");
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.unary",
    .op = "Unary",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) -> Status {
      const auto& attrs = call.attrs_as<UnaryAttrs>();
      if (call.inputs.empty() || !call.inputs[0].present) return unsupported("Unary needs input x");
      const DataType d = call.inputs[0].dtype;
      if (!visit_unary(attrs.op, d, [](auto, auto) {}))
        return unsupported("no ", enum_name(attrs.op), " kernel for ", dtype_name(d));
      return Status::ok();
    },
    .create = stateless(run_unary),
});

}  // namespace
}  // namespace kiln
