// Reference ElementWise, Where and Cast: one element at a time through BroadcastIndexer.
#include "kernels/ref/elementwise.h"

#include <cstring>

#include "kernels/common/indexing.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

template <ElementWiseOp Op, class A, class B>
void binary_loop(const Tensor& a, const Tensor& b, Tensor& c, bool fmod) {
  using C = decltype(ref::binary<Op>(A{}, B{}, false));
  const BroadcastIndexer a_at(a.dims(), c.dims()), b_at(b.dims(), c.dims());
  const A* pa = a.data<A>();
  const B* pb = b.data<B>();
  C* pc = c.data<C>();
  const int64_t n = c.numel();
  for (int64_t i = 0; i < n; ++i) pc[i] = ref::binary<Op>(pa[a_at(i)], pb[b_at(i)], fmod);
}

Status run_elementwise(KernelContext& ctx) {
  const auto& attrs = ctx.attrs<ElementWiseAttrs>();
  const Tensor& a = ctx.src[0];
  const Tensor& b = ctx.src[1];
  Tensor& c = ctx.dst[0];
  bool done = false;
  ref::dispatch_op(attrs.op, [&](auto op) {
    constexpr ElementWiseOp kOp = decltype(op)::value;
    ew::dispatch_dtype(a.dtype(), [&](auto ta) {
      using A = typename decltype(ta)::type;
      if constexpr (!ew::is_low_float_v<A>) {
        if constexpr (kOp == ElementWiseOp::kPow) {
          ew::dispatch_dtype(b.dtype(), [&](auto tb) {
            using B = typename decltype(tb)::type;
            if constexpr (!ew::is_low_float_v<B> && ref::op_accepts<kOp, A, B>()) {
              binary_loop<kOp, A, B>(a, b, c, attrs.fmod);
              done = true;
            }
          });
        } else if constexpr (ref::op_accepts<kOp, A>()) {
          if (b.dtype() == a.dtype()) {
            binary_loop<kOp, A, A>(a, b, c, attrs.fmod);
            done = true;
          }
        }
      }
    });
  });
  if (!done)
    return unsupported("ref.element_wise has no ", enum_name(attrs.op), " for ", dtype_name(a.dtype()), " x ",
                       dtype_name(b.dtype()));
  return Status::ok();
}

Status run_where(KernelContext& ctx) {
  const Tensor& cond = ctx.src[0];
  const Tensor& x = ctx.src[1];
  const Tensor& y = ctx.src[2];
  Tensor& out = ctx.dst[0];
  const BroadcastIndexer c_at(cond.dims(), out.dims()), x_at(x.dims(), out.dims()), y_at(y.dims(), out.dims());
  const size_t size = dtype_size(out.dtype());
  const auto* pc = cond.data<uint8_t>();
  const auto* px = x.data<char>();
  const auto* py = y.data<char>();
  auto* po = out.data<char>();
  const int64_t n = out.numel();
  for (int64_t i = 0; i < n; ++i) {
    const char* from = pc[c_at(i)] ? px + x_at(i) * size : py + y_at(i) * size;
    std::memcpy(po + i * size, from, size);
  }
  return Status::ok();
}

Status run_cast(KernelContext& ctx) {
  const Tensor& x = ctx.src[0];
  Tensor& y = ctx.dst[0];
  const int64_t n = x.numel();
  bool done = false;
  ew::dispatch_dtype(x.dtype(), [&](auto ts) {
    using S = typename decltype(ts)::type;
    done = ew::dispatch_dtype(y.dtype(), [&](auto td) {
      using D = typename decltype(td)::type;
      const S* src = x.data<S>();
      D* dst = y.data<D>();
      for (int64_t i = 0; i < n; ++i) dst[i] = ref::cast_element<D>(src[i]);
    });
  });
  if (!done) return unsupported("ref.cast has no ", dtype_name(x.dtype()), " -> ", dtype_name(y.dtype()));
  return Status::ok();
}

constexpr std::initializer_list<DataType> kComputeTypes = {DataType::kFloat32, DataType::kInt8,  DataType::kUInt8,
                                                           DataType::kInt32,   DataType::kInt64, DataType::kBool};
constexpr std::initializer_list<DataType> kAllTypes = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                                                       DataType::kInt8,    DataType::kUInt8,   DataType::kInt32,
                                                       DataType::kInt64,   DataType::kBool};

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.element_wise",
    .op = "ElementWise",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = [](const OpCall& call) { return require_dtypes(call, kComputeTypes); },
    .create = stateless(run_elementwise),
}));

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "ref.where",
    .op = "Where",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = [](const OpCall& call) { return require_dtypes(call, kAllTypes); },
    .create = stateless(run_where),
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "ref.cast",
    .op = "Cast",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = [](const OpCall& call) { return require_dtypes(call, kAllTypes); },
    .create = stateless(run_cast),
});

}  // namespace
}  // namespace kiln
