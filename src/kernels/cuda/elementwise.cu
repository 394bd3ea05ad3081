// CUDA ElementWise, Where and Cast: the scalar definitions of ref/elementwise.h per element (float16/bfloat16
// compute in float). Operands that repeat whole (one element, the same shape, a bias row) take a flat kernel with
// 16-byte packs, other broadcasts a kernel over the merged dims; Where moves elements as words of their size.
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/cuda/types.cuh"
#include "kernels/ref/elementwise.h"

namespace kiln {
namespace {

using cuda::compute_t;
using cuda::Pack;

// ---- ElementWise --------------------------------------------------------------------------------

template <ElementWiseOp Op, class A, class B>
using binary_result_t =
    std::conditional_t<std::is_same_v<decltype(ref::binary<Op>(compute_t<A>{}, compute_t<B>{}, false)), bool>, bool, A>;

template <ElementWiseOp Op, class A, class B, class C>
__device__ inline C apply_binary(A x, B y, bool fmod) {
  return cuda::store<C>(ref::binary<Op>(cuda::load(x), cuda::load(y), fmod));
}

// N elements from e on of an operand that repeats with `period` (see cuda::repeat_period).
template <int N, class T>
__device__ inline Pack<T, N> load_pack(const T* __restrict__ p, int64_t period, int64_t e) {
  if (period == 1) {
    Pack<T, N> r;
#pragma unroll
    for (int j = 0; j < N; ++j) r.v[j] = p[0];
    return r;
  }
  return reinterpret_cast<const Pack<T, N>*>(p)[cuda::wrap_period(e, period) / N];
}

// Operands that repeat whole (one element, the output's shape, a suffix of its dims): element i reads
// a[i % a_period]. `packed`: the pointers and the periods suit packs of N elements.
template <ElementWiseOp Op, class A, class B, class C>
__global__ void binary_flat(const A* __restrict__ a, int64_t a_period, const B* __restrict__ b, int64_t b_period,
                            C* __restrict__ c, int64_t n, bool packed, bool fmod) {
  constexpr int N = cuda::kPackOf<A, B, C>;
  const int64_t packs = packed ? n / N : 0;
  for (int64_t p = cuda::thread_index(); p < packs; p += cuda::thread_count()) {
    const Pack<A, N> pa = load_pack<N>(a, a_period, p * N);
    const Pack<B, N> pb = load_pack<N>(b, b_period, p * N);
    Pack<C, N> pc;
#pragma unroll
    for (int j = 0; j < N; ++j) pc.v[j] = apply_binary<Op, A, B, C>(pa.v[j], pb.v[j], fmod);
    reinterpret_cast<Pack<C, N>*>(c)[p] = pc;
  }
  for (int64_t i = packs * N + cuda::thread_index(); i < n; i += cuda::thread_count())
    c[i] = apply_binary<Op, A, B, C>(a[cuda::wrap_period(i, a_period)], b[cuda::wrap_period(i, b_period)], fmod);
}

template <ElementWiseOp Op, class A, class B, class C>
__global__ void binary_broadcast(cuda::Offsets<2> at, const A* __restrict__ a, const B* __restrict__ b,
                                 C* __restrict__ c, int64_t n, bool fmod) {
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    int64_t off[2];
    at.at(i, off);
    c[i] = apply_binary<Op, A, B, C>(a[off[0]], b[off[1]], fmod);
  }
}

// Whether an operand repeating with `period` over n outputs can be read in aligned packs of N.
template <int N, class T>
bool packable(const T* p, int64_t period, int64_t n) {
  return period == 1 || ((period >= n || period % N == 0) && cuda::pack_aligned<T, N>(p));
}

// Calls f(op constant, Type<A>, Type<B>) when the kernels define `op` for storage types A x B (the reference's
// combinations); false otherwise.
template <class F>
bool visit_binary(ElementWiseOp op, DataType da, DataType db, F&& f) {
  bool found = false;
  ref::dispatch_op(op, [&](auto o) {
    constexpr ElementWiseOp kOp = std::decay_t<decltype(o)>::value;
    cuda::dispatch_dtype(da, [&](auto ta) {
      using A = cuda::type_of<decltype(ta)>;
      if constexpr (kOp == ElementWiseOp::kPow) {
        cuda::dispatch_dtype(db, [&](auto tb) {
          using B = cuda::type_of<decltype(tb)>;
          if constexpr (ref::op_accepts<kOp, compute_t<A>, compute_t<B>>()) {
            f(o, ta, tb);
            found = true;
          }
        });
      } else if constexpr (ref::op_accepts<kOp, compute_t<A>>()) {
        if (db == da) {
          f(o, ta, ta);
          found = true;
        }
      }
    });
  });
  return found;
}

Status run_elementwise(KernelContext& ctx) {
  const auto& attrs = ctx.attrs<ElementWiseAttrs>();
  const Tensor& a = ctx.src[0];
  const Tensor& b = ctx.src[1];
  Tensor& c = ctx.dst[0];
  const int64_t n = c.numel();
  if (n == 0) return Status::ok();
  cudaStream_t stream = cuda::native(ctx.stream);
  const int64_t a_period = cuda::repeat_period(a.dims(), c.dims());
  const int64_t b_period = cuda::repeat_period(b.dims(), c.dims());
  const bool found = visit_binary(attrs.op, a.dtype(), b.dtype(), [&](auto o, auto ta, auto tb) {
    constexpr ElementWiseOp kOp = std::decay_t<decltype(o)>::value;
    using A = cuda::type_of<decltype(ta)>;
    using B = cuda::type_of<decltype(tb)>;
    using C = binary_result_t<kOp, A, B>;
    const A* pa = a.data<A>();
    const B* pb = b.data<B>();
    C* pc = c.data<C>();
    if (a_period > 0 && b_period > 0) {
      constexpr int N = cuda::kPackOf<A, B, C>;
      const bool packed = packable<N>(pa, a_period, n) && packable<N>(pb, b_period, n) && cuda::pack_aligned<C, N>(pc);
      const int64_t items = packed ? (n + N - 1) / N : n;
      binary_flat<kOp, A, B, C><<<cuda::blocks_for(items), cuda::kThreads, 0, stream>>>(pa, a_period, pb, b_period, pc,
                                                                                        n, packed, attrs.fmod);
    } else {
      const Dims* in[2] = {&a.dims(), &b.dims()};
      const auto at = cuda::broadcast_offsets<2>(c.dims(), in);
      binary_broadcast<kOp, A, B, C><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(at, pa, pb, pc, n, attrs.fmod);
    }
  });
  if (!found)
    return unsupported("cuda.element_wise has no ", enum_name(attrs.op), " for ", dtype_name(a.dtype()), " x ",
                       dtype_name(b.dtype()));
  return cuda::check(cudaGetLastError(), "element_wise kernel launch");
}

Status supports_elementwise(const OpCall& call) {
  const auto& attrs = call.attrs_as<ElementWiseAttrs>();
  if (call.inputs.size() != 2 || !call.inputs[0].present || !call.inputs[1].present)
    return unsupported("ElementWise needs inputs a and b");
  const DataType da = call.inputs[0].dtype, db = call.inputs[1].dtype;
  if (!visit_binary(attrs.op, da, db, [](auto, auto, auto) {}))
    return unsupported("no ", enum_name(attrs.op), " kernel for ", dtype_name(da), " x ", dtype_name(db));
  return Status::ok();
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.element_wise",
    .op = "ElementWise",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = supports_elementwise,
    .create = stateless(run_elementwise),
});

// ---- Where --------------------------------------------------------------------------------------

template <class W>
__global__ void where_kernel(cuda::Offsets<3> at, const bool* __restrict__ cond, const W* __restrict__ x,
                             const W* __restrict__ y, W* __restrict__ out, int64_t n) {
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    int64_t off[3];
    at.at(i, off);
    out[i] = cond[off[0]] ? x[off[1]] : y[off[2]];
  }
}

Status run_where(KernelContext& ctx) {
  const Tensor& cond = ctx.src[0];
  const Tensor& x = ctx.src[1];
  const Tensor& y = ctx.src[2];
  Tensor& out = ctx.dst[0];
  const int64_t n = out.numel();
  if (n == 0) return Status::ok();
  const Dims* in[3] = {&cond.dims(), &x.dims(), &y.dims()};
  const auto at = cuda::broadcast_offsets<3>(out.dims(), in);
  const bool known = cuda::dispatch_word(dtype_size(out.dtype()), [&](auto w) {
    using W = cuda::type_of<decltype(w)>;
    where_kernel<W><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::native(ctx.stream)>>>(
        at, cond.data<bool>(), x.data<W>(), y.data<W>(), out.data<W>(), n);
  });
  if (!known) return unsupported("Where of ", dtype_name(out.dtype()), " elements");
  return cuda::check(cudaGetLastError(), "where kernel launch");
}

constexpr std::initializer_list<DataType> kAllTypes = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                                                       DataType::kInt8,    DataType::kUInt8,   DataType::kInt32,
                                                       DataType::kInt64,   DataType::kBool};

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.where",
    .op = "Where",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) -> Status {
      KILN_RETURN_IF_ERROR(require_dtypes(call, kAllTypes));
      if (call.inputs.size() != 3 || call.inputs[0].dtype != DataType::kBool)
        return unsupported("Where needs a bool condition and inputs x and y");
      return Status::ok();
    },
    .create = stateless(run_where),
});

// ---- Cast ---------------------------------------------------------------------------------------

template <class D, class S>
__device__ inline D cast_one(S s) {
  return cuda::store<D>(ref::cast_value<compute_t<D>>(cuda::load(s)));
}

template <class S, class D>
__global__ void cast_kernel(const S* __restrict__ src, D* __restrict__ dst, int64_t n, bool packed) {
  constexpr int N = cuda::kPackOf<S, D>;
  const int64_t packs = packed ? n / N : 0;
  for (int64_t p = cuda::thread_index(); p < packs; p += cuda::thread_count()) {
    const Pack<S, N> ps = reinterpret_cast<const Pack<S, N>*>(src)[p];
    Pack<D, N> pd;
#pragma unroll
    for (int j = 0; j < N; ++j) pd.v[j] = cast_one<D>(ps.v[j]);
    reinterpret_cast<Pack<D, N>*>(dst)[p] = pd;
  }
  for (int64_t i = packs * N + cuda::thread_index(); i < n; i += cuda::thread_count()) dst[i] = cast_one<D>(src[i]);
}

Status run_cast(KernelContext& ctx) {
  const Tensor& x = ctx.src[0];
  Tensor& y = ctx.dst[0];
  const int64_t n = x.numel();
  if (n == 0) return Status::ok();
  cudaStream_t stream = cuda::native(ctx.stream);
  if (x.dtype() == y.dtype())
    return cuda::check(cudaMemcpyAsync(y.raw(), x.raw(), x.nbytes(), cudaMemcpyDeviceToDevice, stream),
                       "cudaMemcpyAsync (cast to the same dtype)");
  bool done = false;
  cuda::dispatch_dtype(x.dtype(), [&](auto ts) {
    using S = cuda::type_of<decltype(ts)>;
    done = cuda::dispatch_dtype(y.dtype(), [&](auto td) {
      using D = cuda::type_of<decltype(td)>;
      const S* src = x.data<S>();
      D* dst = y.data<D>();
      constexpr int N = cuda::kPackOf<S, D>;
      const bool packed = cuda::pack_aligned<S, N>(src) && cuda::pack_aligned<D, N>(dst);
      const int64_t items = packed ? (n + N - 1) / N : n;
      cast_kernel<S, D><<<cuda::blocks_for(items), cuda::kThreads, 0, stream>>>(src, dst, n, packed);
    });
  });
  if (!done) return unsupported("cuda.cast has no ", dtype_name(x.dtype()), " -> ", dtype_name(y.dtype()));
  return cuda::check(cudaGetLastError(), "cast kernel launch");
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.cast",
    .op = "Cast",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) { return require_dtypes(call, kAllTypes); },
    .create = stateless(run_cast),
});

}  // namespace
}  // namespace kiln
