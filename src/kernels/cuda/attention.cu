// CUDA Attention, flash style: a block takes 16 query rows of one batch entry, walks the keys in tiles of 32 held
// in shared memory (as float32) and keeps per row a running maximum, a running sum and the output accumulators
// (online softmax, float32), so the score matrix never exists. A warp owns 4 query rows: lane j scores key j of
// the tile, then every lane accumulates its columns of the output. Head dims up to 128; float32, float16, bfloat16.
#include <algorithm>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/ref/attention.h"

namespace kiln {
namespace {

using cuda::from_float;
using cuda::to_float;

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 4;
constexpr int kQueries = kWarps * kRowsPerWarp;  // query rows per block
constexpr int kKeys = 32;                        // keys per tile: one per lane
constexpr int kThreads = kWarps * 32;
constexpr int64_t kMaxHeadDim = 128;
constexpr int kColsPerLane = kMaxHeadDim / 32;

template <class T>
struct AttentionArgs {
  const T *q, *k, *v, *mask;  // mask may be null
  T* out;
  int64_t batch, s, sk;
  int d, dv;
  float scale;
  int64_t mask_col_step;  // 1, or 0 when the mask broadcasts over the keys
  BroadcastIndexer q_at, k_at, v_at, mask_at;
};

size_t smem_bytes(int64_t d, int64_t dv) {
  return static_cast<size_t>(kQueries * d + kKeys * (d + 1) + kKeys * dv) * sizeof(float);
}

template <class T>
__global__ void __launch_bounds__(kThreads) attention_kernel(AttentionArgs<T> a) {
  extern __shared__ float smem[];
  const int d = a.d, dv = a.dv, kpad = d + 1;  // K rows padded: lanes read distinct banks
  float* sq = smem;                            // [kQueries][d]
  float* sk = sq + kQueries * d;               // [kKeys][d + 1]
  float* sv = sk + kKeys * kpad;               // [kKeys][dv]
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int64_t q_tiles = (a.s + kQueries - 1) / kQueries;
  for (int64_t t = blockIdx.x; t < a.batch * q_tiles; t += gridDim.x) {
    const int64_t b = t / q_tiles, q0 = (t % q_tiles) * kQueries;
    const T* qb = a.q + a.q_at(b) * a.s * d;
    const T* kb = a.k + a.k_at(b) * a.sk * d;
    const T* vb = a.v + a.v_at(b) * a.sk * dv;
    __syncthreads();  // the previous tile is done with shared memory
    for (int idx = tid; idx < kQueries * d; idx += kThreads) {
      const int64_t i = q0 + idx / d;
      sq[idx] = i < a.s ? to_float(qb[i * d + idx % d]) : 0.f;
    }
    float m[kRowsPerWarp], l[kRowsPerWarp], o[kRowsPerWarp][kColsPerLane];
    const T* mask_row[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t i = q0 + warp * kRowsPerWarp + r;
      m[r] = -INFINITY;
      l[r] = 0.f;
#pragma unroll
      for (int e = 0; e < kColsPerLane; ++e) o[r][e] = 0.f;
      mask_row[r] = a.mask && i < a.s ? a.mask + a.mask_at((b * a.s + i) * a.sk) : nullptr;
    }
    for (int64_t k0 = 0; k0 < a.sk; k0 += kKeys) {
      const int keys = static_cast<int>(min(static_cast<int64_t>(kKeys), a.sk - k0));
      __syncthreads();  // the queries are loaded and the previous key tile is consumed
      for (int idx = tid; idx < kKeys * d; idx += kThreads) {
        const int j = idx / d, c = idx % d;
        sk[j * kpad + c] = j < keys ? to_float(kb[(k0 + j) * d + c]) : 0.f;
      }
      for (int idx = tid; idx < kKeys * dv; idx += kThreads) {
        const int j = idx / dv;
        sv[idx] = j < keys ? to_float(vb[(k0 + j) * dv + idx % dv]) : 0.f;
      }
      __syncthreads();
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const int row = warp * kRowsPerWarp + r;
        if (q0 + row >= a.s) continue;  // the same for the whole warp
        const float* qr = sq + row * d;
        const float* kr = sk + lane * kpad;
        float dot = 0.f;
        for (int c = 0; c < d; ++c) dot = fmaf(qr[c], kr[c], dot);
        float score = -INFINITY;
        if (lane < keys) {
          score = dot * a.scale;
          if (mask_row[r]) score += to_float(mask_row[r][(k0 + lane) * a.mask_col_step]);
        }
        const float m_new = fmaxf(m[r], cuda::warp_max(score));
        const float p = score == -INFINITY ? 0.f : expf(score - m_new);
        const float correction = m[r] == -INFINITY ? 0.f : expf(m[r] - m_new);
        l[r] = l[r] * correction + cuda::warp_sum(p);
        m[r] = m_new;
#pragma unroll
        for (int e = 0; e < kColsPerLane; ++e) o[r][e] *= correction;
        for (int j = 0; j < keys; ++j) {
          const float pj = __shfl_sync(cuda::kFullMask, p, j);
          const float* vr = sv + j * dv;
#pragma unroll
          for (int e = 0; e < kColsPerLane; ++e) {
            const int col = lane + 32 * e;
            if (col < dv) o[r][e] = fmaf(pj, vr[col], o[r][e]);
          }
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t i = q0 + warp * kRowsPerWarp + r;
      if (i >= a.s) continue;
      T* dst = a.out + (b * a.s + i) * dv;
      const float inv = 1.f / l[r];  // 0 / 0 = NaN for a row masked out entirely, as the reference gives
#pragma unroll
      for (int e = 0; e < kColsPerLane; ++e) {
        const int col = lane + 32 * e;
        if (col < dv) dst[col] = from_float<T>(o[r][e] * inv);
      }
    }
  }
}

// The batch dims of `d` right-aligned to `batch` (1 where absent), as BroadcastIndexer wants them.
Dims batch_dims_of(const Dims& d, const Dims& batch) {
  Dims out = Dims::of_rank(batch.rank(), 1);
  const int n = d.rank() - 2;
  for (int i = 0; i < n; ++i) out[batch.rank() - n + i] = d[i];
  return out;
}

template <class T>
Status launch(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(AttentionShape s, ref::attention_shape_of(ctx));
  Tensor& y = ctx.dst[0];
  if (y.numel() == 0) return Status::ok();
  cudaStream_t stream = cuda::native(ctx.stream);
  if (s.sk == 0)  // softmax over nothing, then a product over nothing: zeros
    return cuda::check(cudaMemsetAsync(y.raw(), 0, y.nbytes(), stream), "cudaMemsetAsync (Attention with no keys)");
  if (s.d > kMaxHeadDim || s.dv > kMaxHeadDim)
    return unsupported("cuda.attention takes head dims up to ", kMaxHeadDim, ", not D = ", s.d, ", Dv = ", s.dv);
  const bool masked = ctx.src.size() > 3 && ctx.src[3].defined();
  const Dims mask_dims = masked ? ctx.src[3].dims() : Dims{};
  AttentionArgs<T> a{
      .q = ctx.src[0].data<T>(),
      .k = ctx.src[1].data<T>(),
      .v = ctx.src[2].data<T>(),
      .mask = masked ? ctx.src[3].data<T>() : nullptr,
      .out = y.data<T>(),
      .batch = s.batch.numel(),
      .s = s.s,
      .sk = s.sk,
      .d = static_cast<int>(s.d),
      .dv = static_cast<int>(s.dv),
      .scale = ctx.attrs<AttentionAttrs>().scale,
      .mask_col_step = masked && mask_dims.rank() > 0 && mask_dims[mask_dims.rank() - 1] != 1 ? 1 : 0,
      .q_at = BroadcastIndexer(batch_dims_of(ctx.src[0].dims(), s.batch), s.batch),
      .k_at = BroadcastIndexer(batch_dims_of(ctx.src[1].dims(), s.batch), s.batch),
      .v_at = BroadcastIndexer(batch_dims_of(ctx.src[2].dims(), s.batch), s.batch),
      .mask_at = BroadcastIndexer(mask_dims, s.scores()),
  };
  const int64_t tiles = a.batch * ((s.s + kQueries - 1) / kQueries);
  const auto blocks = static_cast<unsigned>(std::clamp<int64_t>(tiles, 1, int64_t{1} << 24));
  attention_kernel<T><<<blocks, kThreads, smem_bytes(s.d, s.dv), stream>>>(a);
  return cuda::check(cudaGetLastError(), "attention kernel launch");
}

Status run_attention(KernelContext& ctx) {
  switch (ctx.src[0].dtype()) {
    case DataType::kFloat32: return launch<float>(ctx);
    case DataType::kFloat16: return launch<__half>(ctx);
    case DataType::kBFloat16: return launch<__nv_bfloat16>(ctx);
    default: return unsupported("Attention of ", dtype_name(ctx.src[0].dtype()));
  }
}

Status attention_supports(const OpCall& call) {
  KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}));
  const Dims& q = call.inputs[0].dims;
  const Dims& v = call.inputs[2].dims;
  if (q.rank() < 2 || v.rank() < 2) return unsupported("cuda.attention needs q and v of rank >= 2");
  const int64_t d = q[q.rank() - 1], dv = v[v.rank() - 1];
  if (d < 0 || dv < 0)
    return unsupported("cuda.attention needs static head dims (the last dims of 'q' ", q.to_string(), " and 'v' ",
                       v.to_string(), ")");
  if (d > kMaxHeadDim || dv > kMaxHeadDim)
    return unsupported("cuda.attention keeps a tile of keys and values in shared memory for head dims up to ",
                       kMaxHeadDim, "; 'q' has D = ", d, " and 'v' Dv = ", dv,
                       " (split the heads, or let another implementation take it)");
  return Status::ok();
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.attention",
    .op = "Attention",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = attention_supports,
    .create = stateless(run_attention),
});

}  // namespace
}  // namespace kiln
