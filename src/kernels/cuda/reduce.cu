// CUDA Reduce and ArgReduce. Reduce folds its axes into [outer, reduced, inner] when the reduced axes are
// contiguous (a warp or block per output row when inner is 1, else a 32x8 block per 32 columns), and walks the
// reduced coordinates of each output through strides otherwise. Floats accumulate in float32, integers in int64.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/common/indexing.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/value_input.h"
#include "ops/reduce/reduce.h"

namespace kiln {
namespace {

using cuda::kFullMask;

using cuda::is_nan;
using cuda::load_value;
using cuda::store_value;

// ---- reductions: start value, step, combine of two partial states, final value ----

struct FloatState {
  float a;  // the accumulator
  float m;  // log_sum_exp: the running maximum
};

struct FloatOps {
  using State = FloatState;
  ReduceOp op;

  __device__ State init() const {
    switch (op) {
      case ReduceOp::kProd: return {1.f, -INFINITY};
      case ReduceOp::kMax: return {-INFINITY, -INFINITY};
      case ReduceOp::kMin: return {INFINITY, -INFINITY};
      default: return {0.f, -INFINITY};
    }
  }
  __device__ void step(State& s, float x) const {
    switch (op) {
      case ReduceOp::kProd: s.a *= x; break;
      case ReduceOp::kMax: s.a = (x > s.a || isnan(x)) ? x : s.a; break;
      case ReduceOp::kMin: s.a = (x < s.a || isnan(x)) ? x : s.a; break;
      case ReduceOp::kL1: s.a += fabsf(x); break;
      case ReduceOp::kL2:
      case ReduceOp::kSumSquare: s.a += x * x; break;
      case ReduceOp::kLogSumExp:
        if (x > s.m) {
          s.a = s.a * expf(s.m - x) + 1.f;
          s.m = x;
        } else if (x != -INFINITY) {
          s.a += expf(x - s.m);  // NaN stays NaN, as in the reference
        }
        break;
      default: s.a += x; break;  // sum, mean, log_sum
    }
  }
  __device__ void combine(State& s, const State& o) const {
    switch (op) {
      case ReduceOp::kProd: s.a *= o.a; break;
      case ReduceOp::kMax:
      case ReduceOp::kMin: step(s, o.a); break;
      case ReduceOp::kLogSumExp: {
        const float m = fmaxf(s.m, o.m);
        if (m == -INFINITY) {
          s.a += o.a;
        } else {
          s.a = s.a * expf(s.m - m) + o.a * expf(o.m - m);
          s.m = m;
        }
        break;
      }
      default: s.a += o.a; break;
    }
  }
  template <class T>
  __device__ T finish(const State& s, int64_t count) const {
    switch (op) {
      case ReduceOp::kMean: return store_value<T>(count ? s.a / static_cast<float>(count) : NAN);
      case ReduceOp::kL2: return store_value<T>(sqrtf(s.a));
      case ReduceOp::kLogSum: return store_value<T>(logf(s.a));
      case ReduceOp::kLogSumExp: return store_value<T>(isinf(s.m) ? s.m : s.m + logf(s.a));
      default: return store_value<T>(s.a);
    }
  }
  __device__ static State shfl_xor(const State& s, int lane_mask) {
    return {__shfl_xor_sync(kFullMask, s.a, lane_mask), __shfl_xor_sync(kFullMask, s.m, lane_mask)};
  }
};

struct IntState {
  long long a;
};

// Integers as the reference does them: int64 accumulation, wrapping sums and products.
struct IntOps {
  using State = IntState;
  ReduceOp op;
  long long lowest, highest;  // of the element type: the start of max and min

  __device__ State init() const {
    switch (op) {
      case ReduceOp::kProd: return {1};
      case ReduceOp::kMax: return {lowest};
      case ReduceOp::kMin: return {highest};
      default: return {0};
    }
  }
  __device__ void step(State& s, long long x) const {
    switch (op) {
      case ReduceOp::kMax: s.a = x > s.a ? x : s.a; break;
      case ReduceOp::kMin: s.a = x < s.a ? x : s.a; break;
      case ReduceOp::kProd:
        s.a = static_cast<long long>(static_cast<unsigned long long>(s.a) * static_cast<unsigned long long>(x));
        break;
      default:
        s.a = static_cast<long long>(static_cast<unsigned long long>(s.a) + static_cast<unsigned long long>(x));
        break;
    }
  }
  __device__ void combine(State& s, const State& o) const { step(s, o.a); }
  template <class T>
  __device__ T finish(const State& s, int64_t count) const {
    if (op == ReduceOp::kMean) return store_value<T>(count ? s.a / static_cast<long long>(count) : 0ll);
    return store_value<T>(s.a);
  }
  __device__ static State shfl_xor(const State& s, int lane_mask) {
    return {__shfl_xor_sync(kFullMask, s.a, lane_mask)};
  }
};

template <class Ops>
__device__ __forceinline__ typename Ops::State warp_combine(const Ops& ops, typename Ops::State s) {
  for (int o = 16; o > 0; o >>= 1) ops.combine(s, Ops::shfl_xor(s, o));
  return s;
}

// ---- where the elements of an output lie ----

// [outer, reduced, inner] row-major: output o = (outer index, inner index).
struct ContiguousMap {
  int64_t reduced, inner;
  __device__ int64_t base(int64_t o) const { return (o / inner) * reduced * inner + o % inner; }
  __device__ int64_t at(int64_t r) const { return r * inner; }
};

// Kept and reduced dims (merged where adjacent) each with their stride in x.
struct StridedMap {
  int kept_rank = 0, reduced_rank = 0;
  int64_t kept_size[kMaxRank] = {}, kept_stride[kMaxRank] = {};
  int64_t reduced_size[kMaxRank] = {}, reduced_stride[kMaxRank] = {};

  __device__ int64_t base(int64_t o) const {
    int64_t off = 0;
    for (int i = kept_rank - 1; i >= 0; --i) {
      off += (o % kept_size[i]) * kept_stride[i];
      o /= kept_size[i];
    }
    return off;
  }
  __device__ int64_t at(int64_t r) const {
    int64_t off = 0;
    for (int i = reduced_rank - 1; i >= 0; --i) {
      off += (r % reduced_size[i]) * reduced_stride[i];
      r /= reduced_size[i];
    }
    return off;
  }
};

constexpr int kRowThreads = 256;

// One warp (kBlock false) or one block (kBlock true) per output.
template <class T, class Ops, class Map, bool kBlock>
__global__ void __launch_bounds__(kRowThreads)
    reduce_rows_kernel(const T* x, T* y, int64_t outs, int64_t reduced, Ops ops, Map map) {
  using State = typename Ops::State;
  __shared__ State scratch[kRowThreads / 32];
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int64_t per_block = kBlock ? 1 : blockDim.x / 32;
  for (int64_t o0 = blockIdx.x * per_block; o0 < outs; o0 += gridDim.x * per_block) {
    const int64_t o = kBlock ? o0 : o0 + warp;
    State s = ops.init();
    if (o < outs) {
      const int64_t base = map.base(o);
      const int64_t first = kBlock ? threadIdx.x : lane, step = kBlock ? blockDim.x : 32;
      for (int64_t r = first; r < reduced; r += step) ops.step(s, load_value(x[base + map.at(r)]));
    }
    s = warp_combine(ops, s);
    if constexpr (kBlock) {
      if (lane == 0) scratch[warp] = s;
      __syncthreads();
      if (threadIdx.x == 0) {
        for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) ops.combine(s, scratch[w]);
        y[o] = ops.template finish<T>(s, reduced);
      }
      __syncthreads();
    } else {
      if (lane == 0 && o < outs) y[o] = ops.template finish<T>(s, reduced);
    }
  }
}

constexpr int kColWidth = 32, kColRows = 8;

// [outer, reduced, inner] with inner > 1: a 32x8 block per 32 adjacent columns of one outer index.
template <class T, class Ops>
__global__ void __launch_bounds__(kColWidth* kColRows)
    reduce_cols_kernel(const T* x, T* y, int64_t outer, int64_t reduced, int64_t inner, Ops ops) {
  using State = typename Ops::State;
  __shared__ State part[kColRows][kColWidth];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t tiles_per_row = (inner + kColWidth - 1) / kColWidth;
  for (int64_t t = blockIdx.x; t < outer * tiles_per_row; t += gridDim.x) {
    const int64_t ob = t / tiles_per_row, i = (t % tiles_per_row) * kColWidth + tx;
    State s = ops.init();
    if (i < inner) {
      const T* p = x + ob * reduced * inner + i;
      for (int64_t r = ty; r < reduced; r += kColRows) ops.step(s, load_value(p[r * inner]));
    }
    part[ty][tx] = s;
    __syncthreads();
    if (ty == 0 && i < inner) {
      for (int k = 1; k < kColRows; ++k) ops.combine(s, part[k][tx]);
      y[ob * inner + i] = ops.template finish<T>(s, reduced);
    }
    __syncthreads();
  }
}

unsigned capped_blocks(int64_t n) { return static_cast<unsigned>(std::clamp<int64_t>(n, 1, int64_t{1} << 20)); }

// The problem after dropping size-1 dims and merging adjacent dims that are both kept or both reduced.
struct ReduceShape {
  int64_t outs = 1, reduced = 1;
  bool contiguous = true;
  int64_t outer = 1, inner = 1;  // when contiguous
  StridedMap strided;            // otherwise
};

ReduceShape reduce_shape(const Dims& dims, const ReducePlan& plan) {
  const Dims strides = contiguous_strides(dims);
  struct Group {
    int64_t size, stride;
    bool reduced;
  };
  std::vector<Group> groups;
  for (int i = 0; i < dims.rank(); ++i) {
    if (dims[i] == 1) continue;
    if (!groups.empty() && groups.back().reduced == plan.reduced[i]) {
      groups.back().size *= dims[i];
      groups.back().stride = strides[i];
    } else {
      groups.push_back({dims[i], strides[i], plan.reduced[i]});
    }
  }
  ReduceShape s;
  int reduced_groups = 0;
  for (const Group& g : groups) {
    if (g.reduced) {
      ++reduced_groups;
      s.reduced *= g.size;
      s.strided.reduced_size[s.strided.reduced_rank] = g.size;
      s.strided.reduced_stride[s.strided.reduced_rank++] = g.stride;
    } else {
      s.outs *= g.size;
      s.strided.kept_size[s.strided.kept_rank] = g.size;
      s.strided.kept_stride[s.strided.kept_rank++] = g.stride;
      (reduced_groups ? s.inner : s.outer) *= g.size;
    }
  }
  s.contiguous = reduced_groups <= 1;
  return s;
}

template <class T, class Ops>
Status launch_reduce(KernelContext& ctx, const ReduceShape& sh, const Ops& ops) {
  const T* x = ctx.src[0].data<T>();
  T* y = ctx.dst[0].data<T>();
  cudaStream_t stream = cuda::native(ctx.stream);
  const bool block_per_output = sh.reduced > 1024;
  if (sh.contiguous && sh.inner > 1) {
    const int64_t tiles = sh.outer * ((sh.inner + kColWidth - 1) / kColWidth);
    reduce_cols_kernel<T, Ops>
        <<<capped_blocks(tiles), dim3(kColWidth, kColRows), 0, stream>>>(x, y, sh.outer, sh.reduced, sh.inner, ops);
  } else if (sh.contiguous) {
    const ContiguousMap map{sh.reduced, 1};
    if (block_per_output)
      reduce_rows_kernel<T, Ops, ContiguousMap, true>
          <<<capped_blocks(sh.outs), kRowThreads, 0, stream>>>(x, y, sh.outs, sh.reduced, ops, map);
    else
      reduce_rows_kernel<T, Ops, ContiguousMap, false>
          <<<capped_blocks((sh.outs + 7) / 8), kRowThreads, 0, stream>>>(x, y, sh.outs, sh.reduced, ops, map);
  } else {
    if (block_per_output)
      reduce_rows_kernel<T, Ops, StridedMap, true>
          <<<capped_blocks(sh.outs), kRowThreads, 0, stream>>>(x, y, sh.outs, sh.reduced, ops, sh.strided);
    else
      reduce_rows_kernel<T, Ops, StridedMap, false>
          <<<capped_blocks((sh.outs + 7) / 8), kRowThreads, 0, stream>>>(x, y, sh.outs, sh.reduced, ops, sh.strided);
  }
  return cuda::check(cudaGetLastError(), "reduce kernel launch");
}

template <class T>
Status launch_int_reduce(KernelContext& ctx, const ReduceShape& sh, ReduceOp op) {
  const IntOps ops{op, static_cast<long long>(std::numeric_limits<T>::lowest()),
                   static_cast<long long>(std::numeric_limits<T>::max())};
  return launch_reduce<T>(ctx, sh, ops);
}

// The reduced axes: input 1 when given, else the attribute.
Result<std::vector<int64_t>> axes_of(KernelContext& ctx) {
  if (ctx.src.size() < 2 || !ctx.src[1].defined()) return ctx.attrs<ReduceAttrs>().axes;
  return cuda::host_int64s(ctx, 1);
}

Status run_reduce(KernelContext& ctx) {
  const auto& a = ctx.attrs<ReduceAttrs>();
  const Tensor& x = ctx.src[0];
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, axes_of(ctx));
  KILN_ASSIGN_OR_RETURN(ReducePlan plan, reduce_plan(a, x.dims(), axes));
  if (plan.noop) {
    if (x.nbytes() == 0) return Status::ok();
    return cuda::check(
        cudaMemcpyAsync(ctx.dst[0].raw(), x.raw(), x.nbytes(), cudaMemcpyDeviceToDevice, cuda::native(ctx.stream)),
        "cudaMemcpyAsync (Reduce with no axes)");
  }
  const ReduceShape sh = reduce_shape(x.dims(), plan);
  if (ctx.dst[0].numel() == 0) return Status::ok();
  const FloatOps fops{a.op};
  switch (x.dtype()) {
    case DataType::kFloat32: return launch_reduce<float>(ctx, sh, fops);
    case DataType::kFloat16: return launch_reduce<__half>(ctx, sh, fops);
    case DataType::kBFloat16: return launch_reduce<__nv_bfloat16>(ctx, sh, fops);
    case DataType::kInt8: return launch_int_reduce<int8_t>(ctx, sh, a.op);
    case DataType::kUInt8: return launch_int_reduce<uint8_t>(ctx, sh, a.op);
    case DataType::kInt32: return launch_int_reduce<int32_t>(ctx, sh, a.op);
    case DataType::kInt64: return launch_int_reduce<int64_t>(ctx, sh, a.op);
    default: return unsupported("Reduce of ", dtype_name(x.dtype()));
  }
}

// Input 0 must have an element type the kernels instantiate.
Status numeric_input(const OpCall& call, const char* kernel) {
  const DataType d = call.inputs[0].dtype;
  switch (d) {
    case DataType::kFloat32:
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kInt8:
    case DataType::kUInt8:
    case DataType::kInt32:
    case DataType::kInt64: return Status::ok();
    default:
      return unsupported(kernel, " takes float32, float16, bfloat16, int8, uint8, int32 and int64 input 'data', not ",
                         dtype_name(d));
  }
}

// ---- ArgReduce ----

// Index of the best element along the axis for `inner` == 1: a warp per row; NaN never wins, except at index 0
// (the reference starts from element 0 and nothing compares above a NaN).
template <class T>
__global__ void __launch_bounds__(kRowThreads)
    arg_rows_kernel(const T* x, int64_t* y, int64_t rows, int64_t size, bool want_max, bool last) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int64_t per_block = blockDim.x / 32;
  for (int64_t row0 = blockIdx.x * per_block; row0 < rows; row0 += gridDim.x * per_block) {
    const int64_t row = row0 + warp;
    if (row >= rows) continue;  // warp-uniform
    const T* p = x + row * size;
    using V = decltype(load_value(p[0]));
    V best{};
    long long at = -1;
    for (int64_t j = lane; j < size; j += 32) {
      const V v = load_value(p[j]);
      if (is_nan(v)) continue;
      if (at < 0 || (want_max ? v > best : v < best) || (last && v == best)) {
        best = v;
        at = j;
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      const V ov = __shfl_xor_sync(kFullMask, best, o);
      const long long oat = __shfl_xor_sync(kFullMask, at, o);
      if (oat < 0) continue;
      const bool take = at < 0 || (want_max ? ov > best : ov < best) || (ov == best && (last ? oat > at : oat < at));
      if (take) {
        best = ov;
        at = oat;
      }
    }
    if (lane == 0) y[row] = (at < 0 || is_nan(load_value(p[0]))) ? 0 : at;
  }
}

// inner > 1: a thread per output walks the axis in order, as the reference does.
template <class T>
__global__ void arg_cols_kernel(const T* x, int64_t* y, int64_t outer, int64_t size, int64_t inner, bool want_max,
                                bool last) {
  const int64_t n = outer * inner;
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < n; o += int64_t{blockDim.x} * gridDim.x) {
    const T* p = x + (o / inner) * size * inner + o % inner;
    auto b = load_value(p[0]);
    int64_t best = 0;
    for (int64_t j = 1; j < size; ++j) {
      const auto v = load_value(p[j * inner]);
      if ((want_max ? v > b : v < b) || (last && v == b)) {
        best = j;
        b = v;
      }
    }
    y[o] = best;
  }
}

template <class T>
Status launch_arg(KernelContext& ctx) {
  const auto& a = ctx.attrs<ArgReduceAttrs>();
  const Tensor& x = ctx.src[0];
  KILN_ASSIGN_OR_RETURN(int axis, normalize_axis(a.axis, x.rank()));
  const AxisSplit s(x.dims(), axis);
  if (ctx.dst[0].numel() == 0) return Status::ok();
  if (s.size == 0) return invalid_argument("ArgReduce over an empty axis has no index to return");
  const bool want_max = a.op == ArgReduceOp::kMax;
  cudaStream_t stream = cuda::native(ctx.stream);
  if (s.inner == 1)
    arg_rows_kernel<T><<<capped_blocks((s.outer + 7) / 8), kRowThreads, 0, stream>>>(
        x.data<T>(), ctx.dst[0].data<int64_t>(), s.outer, s.size, want_max, a.select_last_index);
  else
    arg_cols_kernel<T><<<cuda::grid_for(s.outer * s.inner), 256, 0, stream>>>(
        x.data<T>(), ctx.dst[0].data<int64_t>(), s.outer, s.size, s.inner, want_max, a.select_last_index);
  return cuda::check(cudaGetLastError(), "arg reduce kernel launch");
}

Status run_arg_reduce(KernelContext& ctx) {
  switch (ctx.src[0].dtype()) {
    case DataType::kFloat32: return launch_arg<float>(ctx);
    case DataType::kFloat16: return launch_arg<__half>(ctx);
    case DataType::kBFloat16: return launch_arg<__nv_bfloat16>(ctx);
    case DataType::kInt8: return launch_arg<int8_t>(ctx);
    case DataType::kUInt8: return launch_arg<uint8_t>(ctx);
    case DataType::kInt32: return launch_arg<int32_t>(ctx);
    case DataType::kInt64: return launch_arg<int64_t>(ctx);
    default: return unsupported("ArgReduce of ", dtype_name(ctx.src[0].dtype()));
  }
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.reduce",
    .op = "Reduce",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) { return numeric_input(call, "cuda.reduce"); },
    .create = stateless(run_reduce),
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.arg_reduce",
    .op = "ArgReduce",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) { return numeric_input(call, "cuda.arg_reduce"); },
    .create = stateless(run_arg_reduce),
});

}  // namespace
}  // namespace kiln
