// CUDA GatherND, ScatterND, ScatterElements and OneHot on raw elements (every movable dtype, int32/int64
// indices; OneHot takes any numeric indices). Negative indices count from the end. An index outside its axis
// (which the reference reports as an error) cannot fail a kernel: GatherND gives zeros for that slice, the
// scatters write nothing for that update, OneHot gives an all-off row (as the reference does).
//
// The scatters copy `data` to the output, then combine the updates into it, in one of three ways:
// - Ordered pass (deterministic, the reference's order): ScatterElements gives a thread to each line along the
//   axis, which applies that line's updates in order (lines never collide); ScatterND gives a thread to each
//   slice element, which applies every index tuple in order. Taken when the serial loop is short (<= 256 steps)
//   or there are many threads anyway.
// - Otherwise, for reduction 'none' and exact reductions (integers and bool, every float max/min): one thread per
//   update; 'none' stores directly (ONNX leaves the winner among duplicate indices undefined), the reductions use
//   compare-and-swap atomics (1- and 2-byte elements swap their aligned 4-byte word, so buffers must be 4-byte
//   aligned, as the allocator gives). A NaN meeting max/min keeps std::max/std::min's asymmetry only in order.
// - Otherwise (float add/mul, whose result depends on the order): sorted pass. Each update gets its target offset
//   as a key, a stable radix sort (CUB) groups the updates by target keeping their order, and one thread per
//   target applies its run of updates in that order: the reference's result, deterministically.
#include <cub/device/device_radix_sort.cuh>

#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>

#include "kernels/common/indexing.h"
#include "kernels/common/shuffle_common.h"
#include "kernels/cuda/cublaslt_gemm.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/cuda/types.cuh"
#include "ops/indexing/indexing.h"

namespace kiln {
namespace {

constexpr int64_t kSerialSteps = 256;       // the ordered pass's loop is short enough
constexpr int64_t kOrderedThreads = 16384;  // the ordered pass has enough threads anyway

template <class F>
bool dispatch_index(DataType d, F&& f) {
  if (d == DataType::kInt32) {
    f(cuda::Type<int32_t>{});
    return true;
  }
  if (d == DataType::kInt64) {
    f(cuda::Type<int64_t>{});
    return true;
  }
  return false;
}

template <class I>
__device__ inline bool wrap(int64_t& idx, I raw, int64_t size) {
  idx = static_cast<int64_t>(raw);
  if (idx < 0) idx += size;
  return idx >= 0 && idx < size;
}

// Index tuples addressing dims [first, first + m) of a row-major tensor.
struct TupleMap {
  int m = 0;
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};

  // Offset of tuple t, or -1 when one of its indices is out of range.
  template <class I>
  __device__ int64_t offset(const I* __restrict__ indices, int64_t t) const {
    int64_t off = 0;
    for (int k = 0; k < m; ++k) {
      int64_t idx;
      if (!wrap(idx, indices[t * m + k], dims[k])) return -1;
      off += idx * strides[k];
    }
    return off;
  }
};

TupleMap tuple_map(const Dims& data, int first, int m) {
  TupleMap map;
  int64_t strides[kMaxRank];
  cuda::row_major_strides(data, strides);
  map.m = m;
  for (int k = 0; k < m; ++k) {
    map.dims[k] = data[first + k];
    map.strides[k] = strides[first + k];
  }
  return map;
}

// ---- GatherND ---------------------------------------------------------------------------------------

// out[row][e] = data[batch(row)][tuple(row)][e], rows counting (batch, tuple) pairs.
template <class W, class I>
__global__ void gather_nd_kernel(TupleMap map, const W* __restrict__ data, const I* __restrict__ indices,
                                 W* __restrict__ out, int64_t tuples, int64_t batch_stride, int64_t slice, int64_t n) {
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    const int64_t row = i / slice, e = i - row * slice;
    const int64_t off = map.offset(indices, row);
    out[i] = off < 0 ? W{} : data[(row / tuples) * batch_stride + off + e];
  }
}

Status run_gather_nd(KernelContext& ctx) {
  const Tensor& data = ctx.src[0];
  const Tensor& indices = ctx.src[1];
  Tensor& out = ctx.dst[0];
  const int64_t n = out.numel();
  if (n == 0) return Status::ok();
  const int b = static_cast<int>(ctx.attrs<GatherNDAttrs>().batch_dims);
  const int q = indices.rank();
  if (q < 1 || b < 0 || b >= q) return invalid_argument("GatherND: batch_dims ", b, " does not fit indices rank ", q);
  const int64_t m = indices.dims()[q - 1];
  if (b + m > data.rank())
    return invalid_argument("GatherND: index tuples of ", m, " values after ", b, " batch dims exceed data rank ",
                            data.rank());
  int64_t tuples = 1, slice = 1;
  for (int i = b; i < q - 1; ++i) tuples *= indices.dims()[i];
  for (int i = b + static_cast<int>(m); i < data.rank(); ++i) slice *= data.dims()[i];
  int64_t strides[kMaxRank];
  cuda::row_major_strides(data.dims(), strides);
  const int64_t batch_stride = b > 0 ? strides[b - 1] : 0;
  const TupleMap map = tuple_map(data.dims(), b, static_cast<int>(m));
  cudaStream_t stream = cuda::native(ctx.stream);
  bool known = false;
  cuda::dispatch_word(dtype_size(data.dtype()), [&](auto w) {
    using W = cuda::type_of<decltype(w)>;
    known = dispatch_index(indices.dtype(), [&](auto ti) {
      using I = cuda::type_of<decltype(ti)>;
      gather_nd_kernel<W, I><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(
          map, data.data<W>(), indices.data<I>(), out.data<W>(), std::max<int64_t>(tuples, 1), batch_stride, slice, n);
    });
  });
  if (!known)
    return unsupported("GatherND of ", dtype_name(data.dtype()), " with ", dtype_name(indices.dtype()), " indices");
  return cuda::check(cudaGetLastError(), "gather_nd kernel launch");
}

// ---- combining ----------------------------------------------------------------------------------------

// dst (op)= src as kernels/common/indexing_ops_util.h's combine: integers wrap, bool add/max are or, mul/min
// and, 16-bit floats compute in float; max/min keep std::max/std::min's choice on ties and NaN.
template <class T>
__device__ inline T combine(ScatterReduction r, T dst, T src) {
  if constexpr (std::is_same_v<T, bool>) {
    switch (r) {
      case ScatterReduction::kNone: return src;
      case ScatterReduction::kAdd:
      case ScatterReduction::kMax: return dst || src;
      case ScatterReduction::kMul:
      case ScatterReduction::kMin: return dst && src;
    }
    return src;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<decltype(T{} + T{})>;  // wrapping arithmetic in at least int's width
    switch (r) {
      case ScatterReduction::kNone: return src;
      case ScatterReduction::kAdd: return static_cast<T>(static_cast<U>(dst) + static_cast<U>(src));
      case ScatterReduction::kMul: return static_cast<T>(static_cast<U>(dst) * static_cast<U>(src));
      case ScatterReduction::kMax: return dst < src ? src : dst;
      case ScatterReduction::kMin: return src < dst ? src : dst;
    }
    return src;
  } else {
    const float a = cuda::load(dst), b = cuda::load(src);
    switch (r) {
      case ScatterReduction::kNone: return src;
      case ScatterReduction::kAdd: return cuda::store<T>(a + b);
      case ScatterReduction::kMul: return cuda::store<T>(a * b);
      case ScatterReduction::kMax: return a < b ? src : dst;
      case ScatterReduction::kMin: return b < a ? src : dst;
    }
    return src;
  }
}

// *addr (op)= v atomically, by compare-and-swap on the 4- or 8-byte word holding *addr.
template <class T>
__device__ void atomic_combine(ScatterReduction r, T* addr, T v) {
  if constexpr (sizeof(T) == 8) {
    auto* word = reinterpret_cast<unsigned long long*>(addr);
    unsigned long long old = *word, assumed;
    do {
      assumed = old;
      T cur;
      memcpy(&cur, &assumed, 8);
      const T next = combine(r, cur, v);
      unsigned long long bits;
      memcpy(&bits, &next, 8);
      old = atomicCAS(word, assumed, bits);
    } while (old != assumed);
  } else {
    const uintptr_t p = reinterpret_cast<uintptr_t>(addr);
    auto* word = reinterpret_cast<unsigned int*>(p & ~uintptr_t{3});
    const unsigned shift = static_cast<unsigned>(p & 3) * 8;
    constexpr unsigned low = sizeof(T) == 1 ? 0xffu : sizeof(T) == 2 ? 0xffffu : 0xffffffffu;
    const unsigned mask = low << shift;
    unsigned old = *word, assumed;
    do {
      assumed = old;
      const unsigned part = (assumed & mask) >> shift;
      T cur;
      memcpy(&cur, &part, sizeof(T));  // little-endian: the low bytes
      const T next = combine(r, cur, v);
      unsigned bits = 0;
      memcpy(&bits, &next, sizeof(T));
      old = atomicCAS(word, assumed, (assumed & ~mask) | ((bits << shift) & mask));
    } while (old != assumed);
  }
}

// Whether atomics give the reference's result whatever the order: everything but float add/mul.
bool exact_unordered(DataType d, ScatterReduction r) {
  return !(is_floating(d) && (r == ScatterReduction::kAdd || r == ScatterReduction::kMul));
}

template <class F>
bool dispatch_scatter(DataType d, F&& f) {
  return cuda::dispatch_dtype(d, std::forward<F>(f));
}

Status copy_data(const Tensor& data, Tensor& out, cudaStream_t stream) {
  if (out.raw() == data.raw() || data.nbytes() == 0) return Status::ok();
  return cuda::check(cudaMemcpyAsync(out.raw(), data.raw(), data.nbytes(), cudaMemcpyDeviceToDevice, stream),
                     "cudaMemcpyAsync");
}

// ---- the sorted pass -----------------------------------------------------------------------------------

using Key = unsigned long long;  // target offset + 1; 0 for an update with an out-of-range index

// Applies each run of equal keys (one target) in order; the thread at a run's head does the run.
template <class T>
__global__ void combine_runs_kernel(ScatterReduction r, const Key* __restrict__ keys, const int64_t* __restrict__ order,
                                    const T* __restrict__ updates, T* __restrict__ out, int64_t n) {
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    const Key k = keys[i];
    if (k == 0 || (i > 0 && keys[i - 1] == k)) continue;
    T acc = out[k - 1];
    for (int64_t j = i; j < n && keys[j] == k; ++j) acc = combine(r, acc, updates[order[j]]);
    out[k - 1] = acc;
  }
}

// Scratch of the sorted pass: keys and update numbers before and after the sort, and CUB's storage.
struct SortBuffers {
  Key* keys = nullptr;
  Key* sorted_keys = nullptr;
  int64_t* order = nullptr;
  int64_t* sorted_order = nullptr;
  void* temp = nullptr;
  size_t temp_bytes = 0;
  int end_bit = 64;
};

constexpr size_t align256(size_t b) { return (b + 255) / 256 * 256; }

Result<SortBuffers> sort_buffers(KernelContext& ctx, cuda::DeviceScratch& scratch, int64_t n, int64_t targets,
                                 cudaStream_t stream) {
  SortBuffers b;
  b.end_bit = std::max(1, static_cast<int>(std::bit_width(static_cast<uint64_t>(targets) + 1)));
  KILN_RETURN_IF_ERROR(
      cuda::check(cub::DeviceRadixSort::SortPairs(nullptr, b.temp_bytes, static_cast<const Key*>(nullptr),
                                                  static_cast<Key*>(nullptr), static_cast<const int64_t*>(nullptr),
                                                  static_cast<int64_t*>(nullptr), n, 0, b.end_bit, stream),
                  "cub::DeviceRadixSort::SortPairs (size query)"));
  const size_t array = align256(static_cast<size_t>(n) * 8);
  KILN_ASSIGN_OR_RETURN(
      void* base, scratch.get(ctx.allocator, 4 * array + align256(b.temp_bytes) + 256, "scatter sort scratch", stream));
  char* p = static_cast<char*>(base);
  b.keys = reinterpret_cast<Key*>(p);
  b.sorted_keys = reinterpret_cast<Key*>(p + array);
  b.order = reinterpret_cast<int64_t*>(p + 2 * array);
  b.sorted_order = reinterpret_cast<int64_t*>(p + 3 * array);
  b.temp = p + 4 * array;
  return b;
}

// Sorts the keys filled by the caller (with order[i] = i) and combines the runs.
template <class T>
Status sort_and_combine(const SortBuffers& b, ScatterReduction r, const T* updates, T* out, int64_t n,
                        cudaStream_t stream) {
  size_t temp_bytes = b.temp_bytes;
  KILN_RETURN_IF_ERROR(cuda::check(cub::DeviceRadixSort::SortPairs(b.temp, temp_bytes, b.keys, b.sorted_keys, b.order,
                                                                   b.sorted_order, n, 0, b.end_bit, stream),
                                   "cub::DeviceRadixSort::SortPairs"));
  combine_runs_kernel<T>
      <<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(r, b.sorted_keys, b.sorted_order, updates, out, n);
  return cuda::check(cudaGetLastError(), "scatter combine kernel launch");
}

/// A scatter kernel instance: keeps the sorted pass's scratch between runs.
class ScatterKernel final : public Kernel {
 public:
  using Fn = Status (*)(KernelContext&, cuda::DeviceScratch&);
  explicit ScatterKernel(Fn fn) : fn_(fn) {}
  Status run(KernelContext& ctx) override { return fn_(ctx, scratch_); }

 private:
  Fn fn_;
  cuda::DeviceScratch scratch_;
};

CreateFn scatter_create(ScatterKernel::Fn fn) {
  return [fn](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
    return std::unique_ptr<Kernel>(std::make_unique<ScatterKernel>(fn));
  };
}

// ---- ScatterND ----------------------------------------------------------------------------------------

// One thread per slice element e: every tuple in order.
template <class T, class I>
__global__ void scatter_nd_ordered_kernel(TupleMap map, ScatterReduction r, const I* __restrict__ indices,
                                          const T* __restrict__ updates, T* __restrict__ out, int64_t tuples,
                                          int64_t slice) {
  for (int64_t e = cuda::thread_index(); e < slice; e += cuda::thread_count())
    for (int64_t t = 0; t < tuples; ++t) {
      const int64_t off = map.offset(indices, t);
      if (off >= 0) out[off + e] = combine(r, out[off + e], updates[t * slice + e]);
    }
}

// One thread per update element: a plain store for 'none', else an atomic combine.
template <class T, class I>
__global__ void scatter_nd_parallel_kernel(TupleMap map, ScatterReduction r, const I* __restrict__ indices,
                                           const T* __restrict__ updates, T* __restrict__ out, int64_t slice,
                                           int64_t n) {
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    const int64_t t = i / slice, e = i - t * slice;
    const int64_t off = map.offset(indices, t);
    if (off < 0) continue;
    if (r == ScatterReduction::kNone)
      out[off + e] = updates[i];
    else
      atomic_combine(r, out + off + e, updates[i]);
  }
}

// Keys of the sorted pass: update i = (t, e) targets offset(t) + e.
template <class I>
__global__ void scatter_nd_keys_kernel(TupleMap map, const I* __restrict__ indices, Key* __restrict__ keys,
                                       int64_t* __restrict__ order, int64_t slice, int64_t n) {
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    const int64_t t = i / slice, e = i - t * slice;
    const int64_t off = map.offset(indices, t);
    keys[i] = off < 0 ? Key{0} : static_cast<Key>(off + e) + 1;
    order[i] = i;
  }
}

Status run_scatter_nd(KernelContext& ctx, cuda::DeviceScratch& scratch) {
  const Tensor& data = ctx.src[0];
  const Tensor& indices = ctx.src[1];
  const Tensor& updates = ctx.src[2];
  Tensor& out = ctx.dst[0];
  const ScatterReduction red = ctx.attrs<ScatterNDAttrs>().reduction;
  cudaStream_t stream = cuda::native(ctx.stream);
  KILN_RETURN_IF_ERROR(copy_data(data, out, stream));
  if (indices.rank() < 1) return invalid_argument("ScatterND: 'indices' must have rank >= 1");
  const int64_t m = indices.dims()[indices.rank() - 1];
  if (m > data.rank())
    return invalid_argument("ScatterND: index tuples of ", m, " values exceed data rank ", data.rank());
  const int64_t tuples = m ? indices.numel() / m : 0;
  int64_t slice = 1;
  for (int i = static_cast<int>(m); i < data.rank(); ++i) slice *= data.dims()[i];
  if (tuples == 0 || slice == 0 || out.numel() == 0) return Status::ok();
  if (updates.numel() != tuples * slice)
    return invalid_argument("ScatterND: 'updates' has ", updates.numel(), " elements; the indices address ",
                            tuples * slice);
  const TupleMap map = tuple_map(data.dims(), 0, static_cast<int>(m));
  const int64_t n = tuples * slice;
  const bool ordered = tuples <= kSerialSteps || slice >= kOrderedThreads;
  const bool sorted = !ordered && !exact_unordered(data.dtype(), red);
  SortBuffers sb;
  if (sorted) {
    KILN_ASSIGN_OR_RETURN(sb, sort_buffers(ctx, scratch, n, out.numel(), stream));
  }
  bool known = false;
  Status status = Status::ok();
  dispatch_scatter(data.dtype(), [&](auto tag) {
    using T = cuda::type_of<decltype(tag)>;
    known = dispatch_index(indices.dtype(), [&](auto ti) {
      using I = cuda::type_of<decltype(ti)>;
      if (ordered) {
        scatter_nd_ordered_kernel<T, I><<<cuda::blocks_for(slice), cuda::kThreads, 0, stream>>>(
            map, red, indices.data<I>(), updates.data<T>(), out.data<T>(), tuples, slice);
      } else if (sorted) {
        scatter_nd_keys_kernel<I>
            <<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(map, indices.data<I>(), sb.keys, sb.order, slice, n);
        (void)(status = sort_and_combine<T>(sb, red, updates.data<T>(), out.data<T>(), n, stream));
      } else {
        scatter_nd_parallel_kernel<T, I><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(
            map, red, indices.data<I>(), updates.data<T>(), out.data<T>(), slice, n);
      }
    });
  });
  if (!known)
    return unsupported("ScatterND of ", dtype_name(data.dtype()), " with ", dtype_name(indices.dtype()), " indices");
  KILN_RETURN_IF_ERROR(status);
  return cuda::check(cudaGetLastError(), "scatter_nd kernel launch");
}

// ---- ScatterElements ----------------------------------------------------------------------------------

struct ElementsPlan {
  int rank = 0;
  int axis = 0;
  int64_t axis_size = 0;              // data's
  int64_t index_dims[kMaxRank] = {};  // indices' (= updates') dims
  int64_t data_strides[kMaxRank] = {};
};

// Offset in out of index element f, less its axis term; sets the index element's offset along the axis.
__device__ inline int64_t element_base(const ElementsPlan& p, int64_t flat) {
  int64_t off = 0;
  for (int d = p.rank - 1; d >= 0; --d) {
    const int64_t q = flat / p.index_dims[d];
    const int64_t c = flat - q * p.index_dims[d];
    flat = q;
    if (d != p.axis) off += c * p.data_strides[d];
  }
  return off;
}

// One thread per line along the axis (lines are the index elements with axis coordinate 0, numbered by
// line = outer * inner_count + inner): the line's updates in order.
template <class T, class I>
__global__ void scatter_elements_ordered_kernel(ElementsPlan p, ScatterReduction r, const I* __restrict__ indices,
                                                const T* __restrict__ updates, T* __restrict__ out, int64_t inner,
                                                int64_t lines) {
  const int64_t len = p.index_dims[p.axis];
  const int64_t axis_stride = p.data_strides[p.axis];
  for (int64_t line = cuda::thread_index(); line < lines; line += cuda::thread_count()) {
    const int64_t o = line / inner, in = line - o * inner;
    const int64_t first = o * len * inner + in;  // flat index element of coordinate 0 along the axis
    const int64_t base = element_base(p, first);
    for (int64_t j = 0; j < len; ++j) {
      const int64_t f = first + j * inner;
      int64_t idx;
      if (!wrap(idx, indices[f], p.axis_size)) continue;
      T& dst = out[base + idx * axis_stride];
      dst = combine(r, dst, updates[f]);
    }
  }
}

template <class T, class I>
__global__ void scatter_elements_parallel_kernel(ElementsPlan p, ScatterReduction r, const I* __restrict__ indices,
                                                 const T* __restrict__ updates, T* __restrict__ out, int64_t n) {
  for (int64_t f = cuda::thread_index(); f < n; f += cuda::thread_count()) {
    int64_t idx;
    if (!wrap(idx, indices[f], p.axis_size)) continue;
    T* dst = out + element_base(p, f) + idx * p.data_strides[p.axis];
    if (r == ScatterReduction::kNone)
      *dst = updates[f];
    else
      atomic_combine(r, dst, updates[f]);
  }
}

// Keys of the sorted pass: update f targets its element of out.
template <class I>
__global__ void scatter_elements_keys_kernel(ElementsPlan p, const I* __restrict__ indices, Key* __restrict__ keys,
                                             int64_t* __restrict__ order, int64_t n) {
  for (int64_t f = cuda::thread_index(); f < n; f += cuda::thread_count()) {
    int64_t idx;
    keys[f] = wrap(idx, indices[f], p.axis_size)
                  ? static_cast<Key>(element_base(p, f) + idx * p.data_strides[p.axis]) + 1
                  : Key{0};
    order[f] = f;
  }
}

Status run_scatter_elements(KernelContext& ctx, cuda::DeviceScratch& scratch) {
  const Tensor& data = ctx.src[0];
  const Tensor& indices = ctx.src[1];
  const Tensor& updates = ctx.src[2];
  Tensor& out = ctx.dst[0];
  const auto& a = ctx.attrs<ScatterElementsAttrs>();
  cudaStream_t stream = cuda::native(ctx.stream);
  KILN_RETURN_IF_ERROR(copy_data(data, out, stream));
  const int64_t n = indices.numel();
  if (n == 0 || out.numel() == 0) return Status::ok();
  KILN_ASSIGN_OR_RETURN(int axis, normalize_axis(a.axis, data.rank()));
  if (indices.rank() != data.rank() || updates.dims() != indices.dims())
    return invalid_argument("ScatterElements: indices ", indices.dims().to_string(), ", updates ",
                            updates.dims().to_string(), " and data ", data.dims().to_string(),
                            " must have one rank and indices the shape of updates");
  ElementsPlan p;
  p.rank = data.rank();
  p.axis = axis;
  p.axis_size = data.dims()[axis];
  cuda::row_major_strides(data.dims(), p.data_strides);
  for (int d = 0; d < p.rank; ++d) p.index_dims[d] = indices.dims()[d];
  const AxisSplit split(indices.dims(), axis);
  const int64_t lines = split.outer * split.inner;
  const bool ordered = split.size <= kSerialSteps || lines >= kOrderedThreads;
  const bool sorted = !ordered && !exact_unordered(data.dtype(), a.reduction);
  SortBuffers sb;
  if (sorted) {
    KILN_ASSIGN_OR_RETURN(sb, sort_buffers(ctx, scratch, n, out.numel(), stream));
  }
  bool known = false;
  Status status = Status::ok();
  dispatch_scatter(data.dtype(), [&](auto tag) {
    using T = cuda::type_of<decltype(tag)>;
    known = dispatch_index(indices.dtype(), [&](auto ti) {
      using I = cuda::type_of<decltype(ti)>;
      if (ordered) {
        scatter_elements_ordered_kernel<T, I><<<cuda::blocks_for(lines), cuda::kThreads, 0, stream>>>(
            p, a.reduction, indices.data<I>(), updates.data<T>(), out.data<T>(), split.inner, lines);
      } else if (sorted) {
        scatter_elements_keys_kernel<I>
            <<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(p, indices.data<I>(), sb.keys, sb.order, n);
        (void)(status = sort_and_combine<T>(sb, a.reduction, updates.data<T>(), out.data<T>(), n, stream));
      } else {
        scatter_elements_parallel_kernel<T, I><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(
            p, a.reduction, indices.data<I>(), updates.data<T>(), out.data<T>(), n);
      }
    });
  });
  if (!known)
    return unsupported("ScatterElements of ", dtype_name(data.dtype()), " with ", dtype_name(indices.dtype()),
                       " indices");
  KILN_RETURN_IF_ERROR(status);
  return cuda::check(cudaGetLastError(), "scatter_elements kernel launch");
}

// ---- OneHot -------------------------------------------------------------------------------------------

// out[o][d][i] = values[indices[o][i] (wrapped) == d].
template <class W, class X>
__global__ void one_hot_kernel(const X* __restrict__ indices, const W* __restrict__ values, W* __restrict__ out,
                               int64_t depth, int64_t inner, int64_t n) {
  const W off = values[0], on = values[1];
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    const int64_t row = i / inner, in = i - row * inner;
    const int64_t o = row / depth, d = row - o * depth;
    const double v = static_cast<double>(cuda::load(indices[o * inner + in]));
    bool hot = false;
    if (isfinite(v)) {
      int64_t idx = static_cast<int64_t>(v);
      if (idx < 0) idx += depth;
      hot = idx == d;  // an index outside [-depth, depth - 1] matches no d
    }
    out[i] = hot ? on : off;
  }
}

Status run_one_hot(KernelContext& ctx) {
  const Tensor& indices = ctx.src[0];
  const Tensor& values = ctx.src[2];
  Tensor& out = ctx.dst[0];
  const int64_t n = out.numel();
  if (n == 0) return Status::ok();
  if (values.numel() != 2) return invalid_argument("OneHot: 'values' must hold [off, on], got ", values.numel());
  KILN_ASSIGN_OR_RETURN(int axis, normalize_axis(ctx.attrs<OneHotAttrs>().axis, out.rank()));
  const AxisSplit split(out.dims(), axis);
  if (split.outer * split.inner != indices.numel())
    return invalid_argument("OneHot: output ", out.dims().to_string(), " does not fit indices ",
                            indices.dims().to_string());
  cudaStream_t stream = cuda::native(ctx.stream);
  bool known = false;
  cuda::dispatch_word(dtype_size(values.dtype()), [&](auto w) {
    using W = cuda::type_of<decltype(w)>;
    known = cuda::dispatch_dtype(indices.dtype(), [&](auto ti) {
      using X = cuda::type_of<decltype(ti)>;
      if constexpr (!std::is_same_v<X, bool>)
        one_hot_kernel<W, X><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(
            indices.data<X>(), values.data<W>(), out.data<W>(), split.size, split.inner, n);
    });
  });
  if (!known || indices.dtype() == DataType::kBool)
    return unsupported("OneHot of ", dtype_name(values.dtype()), " with ", dtype_name(indices.dtype()), " indices");
  return cuda::check(cudaGetLastError(), "one_hot kernel launch");
}

Status one_hot_supports(const OpCall& call) {
  const DataType t = call.inputs[0].dtype;
  if (t == DataType::kBool || !shuffle::movable_dtype(t))
    return unsupported("indices are ", dtype_name(t), "; CUDA OneHot takes numeric indices");
  if (!shuffle::movable_dtype(call.inputs[2].dtype))
    return unsupported("values are ", dtype_name(call.inputs[2].dtype));
  if (call.outputs[0].dtype != call.inputs[2].dtype) return unsupported("output dtype differs from 'values'");
  return Status::ok();
}

const int kIndexInput[] = {1};

Status scatter_supports(const OpCall& call) { return shuffle::supports_movement(call, kIndexInput); }

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.gather_nd",
    .op = "GatherND",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = scatter_supports,
    .create = stateless(run_gather_nd),
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.scatter_nd",
    .op = "ScatterND",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = scatter_supports,
    .create = scatter_create(run_scatter_nd),
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.scatter_elements",
    .op = "ScatterElements",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = scatter_supports,
    .create = scatter_create(run_scatter_elements),
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.one_hot",
    .op = "OneHot",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = one_hot_supports,
    .create = stateless(run_one_hot),
});

}  // namespace
}  // namespace kiln
