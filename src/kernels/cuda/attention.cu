// CUDA Attention, flash style, as two tactics of one implementation. "fma" (all float types): a block takes 16 query
// rows of one batch entry, walks the keys in tiles of 32 held in shared memory (as float32) and keeps per row a
// running maximum, a running sum and the output accumulators (online softmax, float32), so the score matrix never
// exists; a warp owns 4 query rows: lane j scores key j of the tile, then every lane accumulates its columns of the
// output. "wmma" (float16/bfloat16, head dims multiples of 16): the same walk with both products on tensor cores.
// Head dims up to 128.
#include <mma.h>

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

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

// ---- tactic "wmma": tensor cores for float16 / bfloat16, head dims multiples of 16 ----
// A block takes 64 query rows, 16 per warp. Per tile of 64 keys: S = Q K^T (WMMA, float32) into shared memory, the
// online softmax per row by the warp (P rounded to the input type), the output rows rescaled, then O += P V (WMMA)
// with O kept in shared memory as float32.

namespace wmma = nvcuda::wmma;

constexpr int kWmmaWarps = 4;
constexpr int kWmmaQueries = 16 * kWmmaWarps;
constexpr int kWmmaKeys = 64;
constexpr int kWmmaThreads = kWmmaWarps * 32;

size_t wmma_smem_bytes(int64_t d, int64_t dv) {
  const int64_t halves = kWmmaQueries * d + kWmmaKeys * d + kWmmaKeys * dv + kWmmaQueries * kWmmaKeys;  // Q K V P
  const int64_t floats = kWmmaQueries * kWmmaKeys + kWmmaQueries * dv;                                  // S O
  return static_cast<size_t>(halves * 2 + floats * 4 + kWmmaQueries * 8);  // + a mask row offset per query
}

template <class T>
__global__ void __launch_bounds__(kWmmaThreads) attention_wmma_kernel(AttentionArgs<T> a) {
  extern __shared__ __align__(128) unsigned char wmma_smem[];
  const int d = a.d, dv = a.dv;
  // Every region starts at a multiple of 32 bytes, as WMMA loads and stores want (d, dv multiples of 16).
  T* sq = reinterpret_cast<T*>(wmma_smem);                                 // [64][d]
  T* sk = sq + kWmmaQueries * d;                                           // [64][d]
  T* sv = sk + kWmmaKeys * d;                                              // [64][dv]
  T* sp = sv + kWmmaKeys * dv;                                             // [64][64]
  float* ss = reinterpret_cast<float*>(sp + kWmmaQueries * kWmmaKeys);     // [64][64]
  float* so = ss + kWmmaQueries * kWmmaKeys;                               // [64][dv]
  int64_t* mask_off = reinterpret_cast<int64_t*>(so + kWmmaQueries * dv);  // [64]
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int row0 = warp * 16;
  const int64_t q_tiles = (a.s + kWmmaQueries - 1) / kWmmaQueries;
  for (int64_t t = blockIdx.x; t < a.batch * q_tiles; t += gridDim.x) {
    const int64_t b = t / q_tiles, q0 = (t % q_tiles) * kWmmaQueries;
    const T* qb = a.q + a.q_at(b) * a.s * d;
    const T* kb = a.k + a.k_at(b) * a.sk * d;
    const T* vb = a.v + a.v_at(b) * a.sk * dv;
    __syncthreads();  // the previous tile is done with shared memory
    for (int idx = tid; idx < kWmmaQueries * d; idx += kWmmaThreads) {
      const int64_t i = q0 + idx / d;
      sq[idx] = i < a.s ? qb[i * d + idx % d] : from_float<T>(0.f);
    }
    for (int idx = tid; idx < kWmmaQueries * dv; idx += kWmmaThreads) so[idx] = 0.f;
    for (int r = tid; r < kWmmaQueries; r += kWmmaThreads) {
      const int64_t i = q0 + r;
      mask_off[r] = a.mask && i < a.s ? a.mask_at((b * a.s + i) * a.sk) : 0;
    }
    float m[16], l[16];
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      m[r] = -INFINITY;
      l[r] = 0.f;
    }
    for (int64_t k0 = 0; k0 < a.sk; k0 += kWmmaKeys) {
      const int keys = static_cast<int>(min(static_cast<int64_t>(kWmmaKeys), a.sk - k0));
      __syncthreads();  // Q, O and the mask offsets are ready; the previous key tile is consumed
      for (int idx = tid; idx < kWmmaKeys * d; idx += kWmmaThreads) {
        const int j = idx / d;
        sk[idx] = j < keys ? kb[(k0 + j) * d + idx % d] : from_float<T>(0.f);
      }
      for (int idx = tid; idx < kWmmaKeys * dv; idx += kWmmaThreads) {
        const int j = idx / dv;
        sv[idx] = j < keys ? vb[(k0 + j) * dv + idx % dv] : from_float<T>(0.f);
      }
      __syncthreads();
      // S[rows of this warp][64 keys] = Q K^T; K row-major [key][d] is K^T in column-major order.
      for (int n = 0; n < kWmmaKeys; n += 16) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::fill_fragment(acc, 0.f);
        for (int c = 0; c < d; c += 16) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
          wmma::load_matrix_sync(fa, sq + row0 * d + c, d);
          wmma::load_matrix_sync(fb, sk + n * d + c, d);
          wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(ss + row0 * kWmmaKeys + n, acc, kWmmaKeys, wmma::mem_row_major);
      }
      __syncwarp();
#pragma unroll
      for (int r = 0; r < 16; ++r) {
        const int row = row0 + r;
        const bool live = q0 + row < a.s;
        float v0 = -INFINITY, v1 = -INFINITY;
        if (live && lane < keys) {
          v0 = ss[row * kWmmaKeys + lane] * a.scale;
          if (a.mask) v0 += to_float(a.mask[mask_off[row] + (k0 + lane) * a.mask_col_step]);
        }
        if (live && lane + 32 < keys) {
          v1 = ss[row * kWmmaKeys + lane + 32] * a.scale;
          if (a.mask) v1 += to_float(a.mask[mask_off[row] + (k0 + lane + 32) * a.mask_col_step]);
        }
        const float m_new = fmaxf(m[r], cuda::warp_max(fmaxf(v0, v1)));
        const float p0 = v0 == -INFINITY ? 0.f : expf(v0 - m_new);
        const float p1 = v1 == -INFINITY ? 0.f : expf(v1 - m_new);
        const float correction = m[r] == -INFINITY ? 0.f : expf(m[r] - m_new);
        l[r] = l[r] * correction + cuda::warp_sum(p0 + p1);
        m[r] = m_new;
        sp[row * kWmmaKeys + lane] = from_float<T>(p0);
        sp[row * kWmmaKeys + lane + 32] = from_float<T>(p1);
        for (int col = lane; col < dv; col += 32) so[row * dv + col] *= correction;
      }
      __syncwarp();
      // O[rows of this warp] += P V.
      for (int n = 0; n < dv; n += 16) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::load_matrix_sync(acc, so + row0 * dv + n, dv, wmma::mem_row_major);
        for (int kk = 0; kk < kWmmaKeys; kk += 16) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
          wmma::load_matrix_sync(fa, sp + row0 * kWmmaKeys + kk, kWmmaKeys);
          wmma::load_matrix_sync(fb, sv + kk * dv + n, dv);
          wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(so + row0 * dv + n, acc, dv, wmma::mem_row_major);
      }
      __syncwarp();
    }
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      const int64_t i = q0 + row0 + r;
      if (i >= a.s) continue;
      T* dst = a.out + (b * a.s + i) * dv;
      const float inv = 1.f / l[r];
      for (int col = lane; col < dv; col += 32) dst[col] = from_float<T>(so[(row0 + r) * dv + col] * inv);
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

constexpr const char* kFma = "fma";
constexpr const char* kWmma = "wmma";

template <class T>
Status launch(KernelContext& ctx, bool use_wmma) {
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
  if constexpr (!std::is_same_v<T, float>) {
    if (use_wmma) {
      if (s.d % 16 || s.dv % 16)
        return unsupported("cuda.attention tactic wmma needs head dims that are multiples of 16, not D = ", s.d,
                           ", Dv = ", s.dv);
      const size_t smem = wmma_smem_bytes(s.d, s.dv);
      KILN_RETURN_IF_ERROR(
          cuda::check(cudaFuncSetAttribute(attention_wmma_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem)),
                      "cudaFuncSetAttribute (attention shared memory)"));
      const int64_t tiles = a.batch * ((s.s + kWmmaQueries - 1) / kWmmaQueries);
      const auto blocks = static_cast<unsigned>(std::clamp<int64_t>(tiles, 1, int64_t{1} << 24));
      attention_wmma_kernel<T><<<blocks, kWmmaThreads, smem, stream>>>(a);
      return cuda::check(cudaGetLastError(), "attention (wmma) kernel launch");
    }
  }
  const int64_t tiles = a.batch * ((s.s + kQueries - 1) / kQueries);
  const auto blocks = static_cast<unsigned>(std::clamp<int64_t>(tiles, 1, int64_t{1} << 24));
  attention_kernel<T><<<blocks, kThreads, smem_bytes(s.d, s.dv), stream>>>(a);
  return cuda::check(cudaGetLastError(), "attention kernel launch");
}

Status run_attention(KernelContext& ctx, bool use_wmma) {
  switch (ctx.src[0].dtype()) {
    case DataType::kFloat32: return launch<float>(ctx, false);
    case DataType::kFloat16: return launch<__half>(ctx, use_wmma);
    case DataType::kBFloat16: return launch<__nv_bfloat16>(ctx, use_wmma);
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

// The wmma tactic takes float16/bfloat16 problems whose head dims are multiples of 16 (supports checked the rest).
bool wmma_fits(const OpCall& call) {
  const DataType t = call.inputs[0].dtype;
  const Dims& q = call.inputs[0].dims;
  const Dims& v = call.inputs[2].dims;
  return (t == DataType::kFloat16 || t == DataType::kBFloat16) && q[q.rank() - 1] % 16 == 0 &&
         v[v.rank() - 1] % 16 == 0;
}

std::vector<std::string> attention_tactics(const OpCall& call) {
  if (wmma_fits(call)) return {kFma, kWmma};
  return {kFma};
}

Result<std::unique_ptr<Kernel>> create_attention(const OpCall& call) {
  if (call.tactic.empty() || call.tactic == kFma)
    return stateless([](KernelContext& ctx) { return run_attention(ctx, false); })(call);
  if (call.tactic == kWmma) {
    if (!wmma_fits(call))
      return invalid_argument(
          "cuda.attention tactic wmma takes float16/bfloat16 with head dims that are multiples "
          "of 16; this problem has ",
          call.to_string());
    return stateless([](KernelContext& ctx) { return run_attention(ctx, true); })(call);
  }
  return invalid_argument("cuda.attention has no tactic '", call.tactic, "' (it has fma and wmma)");
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.attention",
    .op = "Attention",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = attention_supports,
    .create = create_attention,
    .tactics = attention_tactics,
});

}  // namespace
}  // namespace kiln
