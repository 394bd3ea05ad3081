// CUDA TopK: a block per line along the axis sorts (value, index) pairs in shared memory with a bitonic network
// (NaN counts as the largest value, equal values keep the lower index first, as the reference's stable sort does)
// and writes the first k. Lines up to 4096 elements.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/common/indexing.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/device_math.cuh"
#include "ops/indexing/indexing.h"

namespace kiln {
namespace {

using cuda::is_nan;
using cuda::load_value;

constexpr int64_t kMaxLine = 4096;
constexpr int kMaxThreads = 512;

template <class K>
__device__ __forceinline__ bool greater(K a, K b) {
  if (is_nan(a)) return !is_nan(b);
  if (is_nan(b)) return false;
  return a > b;
}

// Whether slot a comes before slot b in the output order; slots at or past `size` are padding and come last.
template <class K>
__device__ __forceinline__ bool before(const K* key, const int* idx, int a, int b, int size, bool largest) {
  const int ia = idx[a], ib = idx[b];
  if (ia >= size) return false;
  if (ib >= size) return true;
  const K ka = key[a], kb = key[b];
  if (largest ? greater(ka, kb) : greater(kb, ka)) return true;
  if (largest ? greater(kb, ka) : greater(ka, kb)) return false;
  return ia < ib;
}

template <class T, class K>
__global__ void __launch_bounds__(kMaxThreads) topk_kernel(const T* x, T* values, int64_t* indices, int64_t outer,
                                                           int size, int64_t inner, int k, int slots, bool largest) {
  extern __shared__ __align__(16) unsigned char smem[];
  K* key = reinterpret_cast<K*>(smem);             // [slots]
  int* idx = reinterpret_cast<int*>(key + slots);  // [slots]
  const int tid = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
  for (int64_t line = blockIdx.x; line < outer * inner; line += gridDim.x) {
    const int64_t o = line / inner, in = line % inner;
    const T* src = x + o * size * inner + in;
    __syncthreads();  // the previous line's results are written
    for (int j = tid; j < slots; j += threads) {
      idx[j] = j;
      key[j] = j < size ? load_value(src[j * inner]) : K{};
    }
    for (int span = 2; span <= slots; span <<= 1)
      for (int stride = span >> 1; stride > 0; stride >>= 1) {
        __syncthreads();
        for (int t = tid; t < slots / 2; t += threads) {
          const int a = 2 * t - (t & (stride - 1)), b = a + stride;
          const bool ascending = (a & span) == 0;
          if (ascending ? before(key, idx, b, a, size, largest) : before(key, idx, a, b, size, largest)) {
            const K kt = key[a];
            key[a] = key[b];
            key[b] = kt;
            const int it = idx[a];
            idx[a] = idx[b];
            idx[b] = it;
          }
        }
      }
    __syncthreads();
    for (int j = tid; j < k; j += threads) {
      const int i = idx[j];
      const int64_t at = (o * k + j) * inner + in;
      values[at] = src[i * inner];
      indices[at] = i;
    }
  }
}

template <class T>
Status launch(KernelContext& ctx) {
  const auto& a = ctx.attrs<TopKAttrs>();
  const Tensor& x = ctx.src[0];
  KILN_ASSIGN_OR_RETURN(int axis, normalize_axis(a.axis, x.rank()));
  const AxisSplit s(x.dims(), axis);
  const int64_t k = ctx.dst[0].dims()[axis];
  if (ctx.dst[0].numel() == 0) return Status::ok();
  if (s.size > kMaxLine || k > s.size)
    return unsupported("cuda.topk sorts lines of up to ", kMaxLine, " elements, not ", s.size);
  using K = std::conditional_t<std::is_integral_v<T>, long long, float>;  // what load_value gives
  int slots = 1;
  while (slots < s.size) slots <<= 1;
  const int threads = std::clamp(slots / 2, 32, kMaxThreads);
  const size_t smem = static_cast<size_t>(slots) * (sizeof(K) + sizeof(int));
  const auto blocks = static_cast<unsigned>(std::clamp<int64_t>(s.outer * s.inner, 1, int64_t{1} << 20));
  topk_kernel<T, K><<<blocks, threads, smem, cuda::native(ctx.stream)>>>(
      x.data<T>(), ctx.dst[0].data<T>(), ctx.dst[1].data<int64_t>(), s.outer, static_cast<int>(s.size), s.inner,
      static_cast<int>(k), slots, a.largest);
  return cuda::check(cudaGetLastError(), "topk kernel launch");
}

Status run_topk(KernelContext& ctx) {
  switch (ctx.src[0].dtype()) {
    case DataType::kFloat32: return launch<float>(ctx);
    case DataType::kFloat16: return launch<__half>(ctx);
    case DataType::kBFloat16: return launch<__nv_bfloat16>(ctx);
    case DataType::kInt8: return launch<int8_t>(ctx);
    case DataType::kUInt8: return launch<uint8_t>(ctx);
    case DataType::kInt32: return launch<int32_t>(ctx);
    case DataType::kInt64: return launch<int64_t>(ctx);
    default: return unsupported("TopK of ", dtype_name(ctx.src[0].dtype()));
  }
}

Status topk_supports(const OpCall& call) {
  const TensorDesc& x = call.inputs[0];
  switch (x.dtype) {
    case DataType::kFloat32:
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kInt8:
    case DataType::kUInt8:
    case DataType::kInt32:
    case DataType::kInt64: break;
    default:
      return unsupported("cuda.topk takes float32, float16, bfloat16, int8, uint8, int32 and int64 input 'x', not ",
                         dtype_name(x.dtype));
  }
  const auto axis = normalize_axis(call.attrs_as<TopKAttrs>().axis, x.dims.rank());
  if (!axis) return axis.status();
  const int64_t size = x.dims[*axis];
  if (size < 0 || size > kMaxLine)
    return unsupported("cuda.topk sorts each line in shared memory: the axis of 'x' ", x.dims.to_string(),
                       " must have a static size of at most ", kMaxLine);
  return Status::ok();
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.topk",
    .op = "TopK",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = topk_supports,
    .create = stateless(run_topk),
});

}  // namespace
}  // namespace kiln
