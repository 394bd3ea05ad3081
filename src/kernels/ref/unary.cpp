// Reference Unary: the scalar definitions in ref/unary.h, one element at a time.
#include "kernels/ref/unary.h"

#include "kernels/registry.h"

namespace kiln {
namespace {

Status run_unary(KernelContext& ctx) {
  const auto& attrs = ctx.attrs<UnaryAttrs>();
  const Tensor& x = ctx.src[0];
  Tensor& y = ctx.dst[0];
  const int64_t n = x.numel();
  bool done = false;
  ref::dispatch_unary_op(attrs.op, [&](auto op) {
    constexpr UnaryOp kOp = decltype(op)::value;
    ew::dispatch_dtype(x.dtype(), [&](auto tx) {
      using T = typename decltype(tx)::type;
      if constexpr (!ew::is_low_float_v<T> && ref::unary_accepts<kOp, T>()) {
        using R = decltype(ref::unary<kOp>(T{}));
        const T* src = x.data<T>();
        R* dst = y.data<R>();
        for (int64_t i = 0; i < n; ++i) dst[i] = ref::unary<kOp>(src[i], attrs.detect_positive, attrs.detect_negative);
        done = true;
      }
    });
  });
  if (!done) return unsupported("ref.unary has no ", enum_name(attrs.op), " for ", dtype_name(x.dtype()));
  return Status::ok();
}

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.unary",
    .op = "Unary",
    .backend = Backend::kRef,
    .priority = 0,
    .supports =
        [](const OpCall& call) {
          return require_dtypes(call, {DataType::kFloat32, DataType::kInt8, DataType::kUInt8, DataType::kInt32,
                                       DataType::kInt64, DataType::kBool});
        },
    .create = stateless(run_unary),
}));

}  // namespace
}  // namespace kiln
