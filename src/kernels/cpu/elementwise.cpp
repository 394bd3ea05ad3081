// CPU ElementWise, Where and Cast: oneDNN binary for float32 arithmetic and comparisons, own
// parallel loops (same-shape, scalar and row/column broadcast fast paths) for everything else.
#include <cpuid.h>
#include <immintrin.h>

#include <cstring>

#include "kernels/common/elementwise_broadcast.h"
#include "kernels/cpu/onednn.h"
#include "kernels/ref/elementwise.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

using ew::compute_t;

constexpr std::initializer_list<DataType> kAllTypes = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                                                       DataType::kInt8,    DataType::kUInt8,   DataType::kInt32,
                                                       DataType::kInt64,   DataType::kBool};

// ---- own loops ---------------------------------------------------------------------------------

template <ElementWiseOp Op, class A, class B, class C>
void binary_row(const A* a, const B* b, C* c, int64_t n, int64_t sa, int64_t sb, bool fmod) {
  auto f = [fmod](A x, B y) { return ew::store<C>(ref::binary<Op>(ew::load(x), ew::load(y), fmod)); };
  if (sa && sb) {
    for (int64_t i = 0; i < n; ++i) c[i] = f(a[i], b[i]);
  } else if (sa) {
    const B y = b[0];
    for (int64_t i = 0; i < n; ++i) c[i] = f(a[i], y);
  } else if (sb) {
    const A x = a[0];
    for (int64_t i = 0; i < n; ++i) c[i] = f(x, b[i]);
  } else {
    const C v = f(a[0], b[0]);
    for (int64_t i = 0; i < n; ++i) c[i] = v;
  }
}

template <ElementWiseOp Op, class A, class B>
void binary_loop(const Tensor& a, const Tensor& b, Tensor& c, bool fmod) {
  using R = decltype(ref::binary<Op>(compute_t<A>{}, compute_t<B>{}, false));
  using C = std::conditional_t<std::is_same_v<R, bool>, bool, A>;
  const Dims* in[2] = {&a.dims(), &b.dims()};
  const auto plan = ew::make_plan<2>(c.dims(), in);
  const A* pa = a.data<A>();
  const B* pb = b.data<B>();
  C* pc = c.data<C>();
  const int64_t sa = plan.inner_stride(0), sb = plan.inner_stride(1);
  ew::for_each_block(plan, [&](const int64_t* off, int64_t out, int64_t n) {
    binary_row<Op>(pa + off[0], pb + off[1], pc + out, n, sa, sb, fmod);
  });
}

/// Runs ElementWise with own loops; false when the op/dtype combination has none.
bool run_own_elementwise(const ElementWiseAttrs& attrs, const Tensor& a, const Tensor& b, Tensor& c) {
  bool done = false;
  ref::dispatch_op(attrs.op, [&](auto op) {
    constexpr ElementWiseOp kOp = decltype(op)::value;
    ew::dispatch_dtype(a.dtype(), [&](auto ta) {
      using A = typename decltype(ta)::type;
      if constexpr (kOp == ElementWiseOp::kPow) {
        ew::dispatch_dtype(b.dtype(), [&](auto tb) {
          using B = typename decltype(tb)::type;
          if constexpr (ref::op_accepts<kOp, compute_t<A>, compute_t<B>>()) {
            binary_loop<kOp, A, B>(a, b, c, attrs.fmod);
            done = true;
          }
        });
      } else if constexpr (ref::op_accepts<kOp, compute_t<A>>()) {
        if (b.dtype() == a.dtype()) {
          binary_loop<kOp, A, A>(a, b, c, attrs.fmod);
          done = true;
        }
      }
    });
  });
  return done;
}

Status run_elementwise_loop(KernelContext& ctx) {
  const auto& attrs = ctx.attrs<ElementWiseAttrs>();
  if (!run_own_elementwise(attrs, ctx.src[0], ctx.src[1], ctx.dst[0]))
    return unsupported("cpu.element_wise has no ", enum_name(attrs.op), " for ", dtype_name(ctx.src[0].dtype()));
  return Status::ok();
}

// ---- oneDNN binary -----------------------------------------------------------------------------

struct OnednnBinaryAlg {
  dnnl::algorithm alg;
  bool commutative;
  dnnl::algorithm swapped;  ///< the algorithm with src0 and src1 exchanged
};

std::optional<OnednnBinaryAlg> binary_algorithm(ElementWiseOp op) {
  using alg = dnnl::algorithm;
  switch (op) {
    case ElementWiseOp::kSum: return OnednnBinaryAlg{alg::binary_add, true, alg::binary_add};
    case ElementWiseOp::kSub: return OnednnBinaryAlg{alg::binary_sub, false, alg::binary_sub};
    case ElementWiseOp::kProd: return OnednnBinaryAlg{alg::binary_mul, true, alg::binary_mul};
    case ElementWiseOp::kDiv: return OnednnBinaryAlg{alg::binary_div, false, alg::binary_div};
    case ElementWiseOp::kMax: return OnednnBinaryAlg{alg::binary_max, true, alg::binary_max};
    case ElementWiseOp::kMin: return OnednnBinaryAlg{alg::binary_min, true, alg::binary_min};
    case ElementWiseOp::kEqual: return OnednnBinaryAlg{alg::binary_eq, true, alg::binary_eq};
    case ElementWiseOp::kLess: return OnednnBinaryAlg{alg::binary_lt, true, alg::binary_gt};
    case ElementWiseOp::kLessOrEqual: return OnednnBinaryAlg{alg::binary_le, true, alg::binary_ge};
    case ElementWiseOp::kGreater: return OnednnBinaryAlg{alg::binary_gt, true, alg::binary_lt};
    case ElementWiseOp::kGreaterOrEqual: return OnednnBinaryAlg{alg::binary_ge, true, alg::binary_le};
    default: return std::nullopt;
  }
}

/// Dims of `d` padded with leading 1s to `rank` (rank 0 becomes {1}).
dnnl::memory::dims padded(const Dims& d, int rank) {
  dnnl::memory::dims out(std::max(rank, 1), 1);
  for (int i = 0; i < d.rank(); ++i) out[out.size() - d.rank() + i] = d[i];
  return out;
}

dnnl::memory::desc dense_desc(const dnnl::memory::dims& dims, dnnl::memory::data_type dt) {
  dnnl::memory::dims strides(dims.size());
  int64_t acc = 1;
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    strides[i] = acc;
    acc *= std::max<int64_t>(dims[i], 1);
  }
  return dnnl::memory::desc(dims, dt, strides);
}

/// Which operand oneDNN can take as src0 (it broadcasts src1 only): 0, 1 (swapped), or none.
std::optional<int> onednn_src0(ElementWiseOp op, const Dims& a, const Dims& b, const Dims& out) {
  const int rank = out.rank();
  if (padded(a, rank) == padded(out, rank)) return 0;
  if (binary_algorithm(op)->commutative && padded(b, rank) == padded(out, rank)) return 1;
  return std::nullopt;
}

class OnednnBinary final : public Kernel {
 public:
  /// oneDNN's implementation ("ref:any" where it has no fast code for the broadcast).
  std::string detail() const override { return impl_.empty() ? "" : "oneDNN " + impl_; }

  Status run(KernelContext& ctx) override {
    const auto& attrs = ctx.attrs<ElementWiseAttrs>();
    const Tensor& a = ctx.src[0];
    const Tensor& b = ctx.src[1];
    Tensor& c = ctx.dst[0];
    if (c.numel() == 0) return Status::ok();
    const auto src0 = onednn_src0(attrs.op, a.dims(), b.dims(), c.dims());
    if (!src0) {  // shapes known only now that oneDNN cannot broadcast
      run_own_elementwise(attrs, a, b, c);
      return Status::ok();
    }
    const Tensor& s0 = *src0 == 0 ? a : b;
    const Tensor& s1 = *src0 == 0 ? b : a;
    return onednn::guard("binary", [&] {
      if (!prim_ || s0.dims() != dims0_ || s1.dims() != dims1_ || c.dims() != dims_out_ || *src0 != swapped_) {
        const OnednnBinaryAlg alg = *binary_algorithm(attrs.op);
        const int rank = c.rank();
        using dt = dnnl::memory::data_type;
        desc0_ = dense_desc(padded(s0.dims(), rank), dt::f32);
        desc1_ = dense_desc(padded(s1.dims(), rank), dt::f32);
        desc_out_ = dense_desc(padded(c.dims(), rank), c.dtype() == DataType::kBool ? dt::u8 : dt::f32);
        dnnl::binary::desc d(*src0 == 0 ? alg.alg : alg.swapped, desc0_, desc1_, desc_out_);
        const dnnl::binary::primitive_desc pd(d, onednn::engine());
        prim_ = dnnl::binary(pd);
        impl_ = pd.impl_info_str();
        dims0_ = s0.dims();
        dims1_ = s1.dims();
        dims_out_ = c.dims();
        swapped_ = *src0;
      }
      auto mem = [](const dnnl::memory::desc& desc, const Tensor& t) {
        return dnnl::memory(desc, onednn::engine(), t.raw());
      };
      prim_->execute(
          onednn::stream(),
          {{DNNL_ARG_SRC_0, mem(desc0_, s0)}, {DNNL_ARG_SRC_1, mem(desc1_, s1)}, {DNNL_ARG_DST, mem(desc_out_, c)}});
      onednn::stream().wait();
    });
  }

 private:
  Dims dims0_, dims1_, dims_out_;
  int swapped_ = 0;
  dnnl::memory::desc desc0_, desc1_, desc_out_;
  std::optional<dnnl::binary> prim_;
  std::string impl_;
};

Status onednn_binary_supports(const OpCall& call) {
  const auto& attrs = call.attrs_as<ElementWiseAttrs>();
  if (!binary_algorithm(attrs.op)) return unsupported("oneDNN has no binary ", enum_name(attrs.op));
  for (const TensorDesc& t : call.inputs)
    if (t.dtype != DataType::kFloat32)
      return unsupported("oneDNN binary is used for float32 only, got ", dtype_name(t.dtype));
  const TensorDesc& a = call.inputs[0];
  const TensorDesc& b = call.inputs[1];
  const TensorDesc& out = call.outputs[0];
  if (a.dims.is_static() && b.dims.is_static() && out.dims.is_static() &&
      !onednn_src0(attrs.op, a.dims, b.dims, out.dims))
    return unsupported("oneDNN binary broadcasts only src1 and ", enum_name(attrs.op), " is not commutative (input a ",
                       a.dims.to_string(), " broadcasts to ", out.dims.to_string(), ")");
  return Status::ok();
}

// ---- Where -------------------------------------------------------------------------------------

template <class T>
void where_loop(const Tensor& cond, const Tensor& x, const Tensor& y, Tensor& out) {
  const Dims* in[3] = {&cond.dims(), &x.dims(), &y.dims()};
  const auto plan = ew::make_plan<3>(out.dims(), in);
  const auto* pc = cond.data<uint8_t>();
  const T* px = static_cast<const T*>(x.raw());
  const T* py = static_cast<const T*>(y.raw());
  T* po = static_cast<T*>(out.raw());
  const int64_t sc = plan.inner_stride(0), sx = plan.inner_stride(1), sy = plan.inner_stride(2);
  ew::for_each_block(plan, [&](const int64_t* off, int64_t o, int64_t n) {
    const uint8_t* c = pc + off[0];
    const T* xs = px + off[1];
    const T* ys = py + off[2];
    T* dst = po + o;
    if (sc && sx && sy) {
      for (int64_t i = 0; i < n; ++i) dst[i] = c[i] ? xs[i] : ys[i];
    } else if (!sc) {
      const T* from = c[0] ? xs : ys;
      const int64_t s = c[0] ? sx : sy;
      if (s)
        std::memcpy(dst, from, n * sizeof(T));
      else
        std::fill(dst, dst + n, from[0]);
    } else {
      for (int64_t i = 0; i < n; ++i) dst[i] = c[i] ? xs[i * sx] : ys[i * sy];
    }
  });
}

Status run_where(KernelContext& ctx) {
  const Tensor& x = ctx.src[1];
  switch (dtype_size(x.dtype())) {
    case 1: where_loop<uint8_t>(ctx.src[0], x, ctx.src[2], ctx.dst[0]); break;
    case 2: where_loop<uint16_t>(ctx.src[0], x, ctx.src[2], ctx.dst[0]); break;
    case 4: where_loop<uint32_t>(ctx.src[0], x, ctx.src[2], ctx.dst[0]); break;
    case 8: where_loop<uint64_t>(ctx.src[0], x, ctx.src[2], ctx.dst[0]); break;
    default: return unsupported("cpu.where has no ", dtype_name(x.dtype()));
  }
  return Status::ok();
}

// ---- Cast --------------------------------------------------------------------------------------

// float32 <-> float16 with F16C: the same rounding (to nearest even, overflow to inf) as Half.
__attribute__((target("avx,f16c"))) void f32_to_f16(const float* src, uint16_t* dst, int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + 8 <= end; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < end; ++i) dst[i] = float_to_half_bits(src[i]);
}

__attribute__((target("avx,f16c"))) void f16_to_f32(const uint16_t* src, float* dst, int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + 8 <= end; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < end; ++i) dst[i] = half_bits_to_float(src[i]);
}

bool has_f16c() {
  // CPUID leaf 1, ECX: bit 28 AVX, bit 29 F16C (clang 14 has no "f16c" for __builtin_cpu_supports)
  static const bool kYes = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx >> 28 & 1) && (ecx >> 29 & 1);
  }();
  return kYes;
}

Status run_cast(KernelContext& ctx) {
  const Tensor& x = ctx.src[0];
  Tensor& y = ctx.dst[0];
  const int64_t n = x.numel();
  if (x.dtype() == y.dtype()) {
    std::memcpy(y.raw(), x.raw(), x.nbytes());
    return Status::ok();
  }
  if (has_f16c() && x.dtype() == DataType::kFloat32 && y.dtype() == DataType::kFloat16) {
    ew::for_each_range(n, [&](int64_t b, int64_t e) { f32_to_f16(x.data<float>(), y.data<uint16_t>(), b, e); });
    return Status::ok();
  }
  if (has_f16c() && x.dtype() == DataType::kFloat16 && y.dtype() == DataType::kFloat32) {
    ew::for_each_range(n, [&](int64_t b, int64_t e) { f16_to_f32(x.data<uint16_t>(), y.data<float>(), b, e); });
    return Status::ok();
  }
  bool done = false;
  ew::dispatch_dtype(x.dtype(), [&](auto ts) {
    using S = typename decltype(ts)::type;
    done = ew::dispatch_dtype(y.dtype(), [&](auto td) {
      using D = typename decltype(td)::type;
      const S* src = x.data<S>();
      D* dst = y.data<D>();
      ew::for_each_range(n, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) dst[i] = ref::cast_element<D>(src[i]);
      });
    });
  });
  if (!done) return unsupported("cpu.cast has no ", dtype_name(x.dtype()), " -> ", dtype_name(y.dtype()));
  return Status::ok();
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.onednn.element_wise",
    .op = "ElementWise",
    .backend = Backend::kCpu,
    .priority = 10,
    .supports = onednn_binary_supports,
    .create = [](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<OnednnBinary>());
    },
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.element_wise",
    .op = "ElementWise",
    .backend = Backend::kCpu,
    .priority = 5,
    .supports = [](const OpCall& call) { return require_dtypes(call, kAllTypes); },
    .create = stateless(run_elementwise_loop),
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.where",
    .op = "Where",
    .backend = Backend::kCpu,
    .priority = 5,
    .supports = [](const OpCall& call) { return require_dtypes(call, kAllTypes); },
    .create = stateless(run_where),
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.cast",
    .op = "Cast",
    .backend = Backend::kCpu,
    .priority = 5,
    .supports = [](const OpCall& call) { return require_dtypes(call, kAllTypes); },
    .create = stateless(run_cast),
});

}  // namespace
}  // namespace kiln
