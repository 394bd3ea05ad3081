// CUDA Attention, flash style, as tactics of one implementation. "fma" (all float types): a block takes 16 query
// rows of one batch entry, walks the keys in tiles of 32 held in shared memory (as float32) and keeps per row a
// running maximum, a running sum and the output accumulators (online softmax, float32), so the score matrix never
// exists; a warp owns 4 query rows: lane j scores key j of the tile, then every lane accumulates its columns of the
// output. "wmma" (float16/bfloat16, head dims multiples of 16): the same walk with both products on tensor cores.
// Head dims up to 128. "gemm" (all float types): the scores as a whole, scale * q @ k^T in float32, by one cuBLASLt
// strided-batched GEMM, the masked softmax per row by a kernel (P in the input type), then P @ v by a second GEMM.
// "rows" (float16/bfloat16, head dims multiples of 16, Sk up to 512; attention_rows.cu): a warp keeps the whole
// score rows of its 16 queries in shared memory, K and V come in the input type (in chunks of 128 keys), both
// products on tensor cores, one plain softmax per row. "mma" (float16/bfloat16, D = Dv of 32, 64 or 128;
// attention_mma.cu): flash attention with scores, probabilities and output in registers (mma.sync).
#include <mma.h>

#include <algorithm>
#include <array>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cuda/attention_mma.h"
#include "kernels/cuda/attention_operands.cuh"
#include "kernels/cuda/attention_rows.h"
#include "kernels/cuda/cublaslt_gemm.h"
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
using AttentionArgs = cuda::AttentionOperands<T>;

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
    const T* qb = a.q_of(b);
    const T* kb = a.k_of(b);
    const T* vb = a.v_of(b);
    __syncthreads();  // the previous tile is done with shared memory
    for (int idx = tid; idx < kQueries * d; idx += kThreads) {
      const int64_t i = q0 + idx / d;
      sq[idx] = i < a.s ? to_float(qb[i * a.q_row() + idx % d]) : 0.f;
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
        sk[j * kpad + c] = j < keys ? to_float(kb[(k0 + j) * a.k_row() + c]) : 0.f;
      }
      for (int idx = tid; idx < kKeys * dv; idx += kThreads) {
        const int j = idx / dv;
        sv[idx] = j < keys ? to_float(vb[(k0 + j) * a.v_row() + idx % dv]) : 0.f;
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
      T* dst = a.out_of(b) + i * a.out_row();
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
    const T* qb = a.q_of(b);
    const T* kb = a.k_of(b);
    const T* vb = a.v_of(b);
    __syncthreads();  // the previous tile is done with shared memory
    for (int idx = tid; idx < kWmmaQueries * d; idx += kWmmaThreads) {
      const int64_t i = q0 + idx / d;
      sq[idx] = i < a.s ? qb[i * a.q_row() + idx % d] : from_float<T>(0.f);
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
        sk[idx] = j < keys ? kb[(k0 + j) * a.k_row() + idx % d] : from_float<T>(0.f);
      }
      for (int idx = tid; idx < kWmmaKeys * dv; idx += kWmmaThreads) {
        const int j = idx / dv;
        sv[idx] = j < keys ? vb[(k0 + j) * a.v_row() + idx % dv] : from_float<T>(0.f);
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
      T* dst = a.out_of(b) + i * a.out_row();
      const float inv = 1.f / l[r];
      for (int col = lane; col < dv; col += 32) dst[col] = from_float<T>(so[(row0 + r) * dv + col] * inv);
    }
  }
}

constexpr const char* kFma = "fma";
constexpr const char* kWmma = "wmma";
constexpr const char* kGemm = "gemm";
constexpr const char* kRows = "rows";
constexpr const char* kMma = "mma";

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
  const AttentionArgs<T> a = cuda::attention_operands<T>(ctx, s);

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

// ---- tactic "gemm": scores = scale * q @ k^T (cuBLASLt, float32 out), softmax rows (kernel), out = P @ v ----

constexpr int kSoftmaxWarps = 8;  // rows per block: one warp per row
constexpr int kSoftmaxThreads = kSoftmaxWarps * 32;
constexpr int64_t kMaxGemmDim = std::numeric_limits<int32_t>::max();
constexpr size_t kScratchAlign = 256;

template <class T>
struct SoftmaxArgs {
  float* scores;  // [rows, sk]: scale * q @ k^T; the mask is added in place
  T* p;           // [rows, sk]: the probabilities (may be `scores` itself when T is float)
  const T* mask;  // may be null
  int64_t rows, sk;
  int64_t mask_col_step;  // 1, or 0 when the mask broadcasts over the keys
  BroadcastIndexer mask_at;
};

// Row r = b * S + i of the scores: add the mask row, then the max-subtracted softmax in float32. Each lane keeps the
// same columns in every pass, so writing the masked scores (and P, when it aliases them) in place needs no barrier.
template <class T>
__global__ void __launch_bounds__(kSoftmaxThreads) attention_softmax_kernel(SoftmaxArgs<T> a) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kSoftmaxWarps;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kSoftmaxWarps + (threadIdx.x >> 5); row < a.rows;
       row += warps) {
    float* x = a.scores + row * a.sk;
    T* p = a.p + row * a.sk;
    const T* m = a.mask ? a.mask + a.mask_at(row * a.sk) : nullptr;
    float mx = -INFINITY;
    for (int64_t j = lane; j < a.sk; j += 32) {
      float v = x[j];
      if (m) {
        v += to_float(m[j * a.mask_col_step]);
        x[j] = v;
      }
      mx = fmaxf(mx, v);
    }
    mx = cuda::warp_max(mx);
    float sum = 0.f;
    for (int64_t j = lane; j < a.sk; j += 32) {
      const float v = x[j];
      if (v != -INFINITY) sum += expf(v - mx);
    }
    sum = cuda::warp_sum(sum);
    const float inv = 1.f / sum;  // a row masked out entirely: 0 * inf = NaN, as the reference gives
    for (int64_t j = lane; j < a.sk; j += 32) {
      const float v = x[j];
      p[j] = from_float<T>((v == -INFINITY ? 0.f : expf(v - mx)) * inv);
    }
  }
}

template <class T>
Status launch_softmax(float* scores, void* p, const void* mask, const Dims& mask_dims, const AttentionShape& s,
                      cudaStream_t stream) {
  const SoftmaxArgs<T> a{
      .scores = scores,
      .p = static_cast<T*>(p),
      .mask = static_cast<const T*>(mask),
      .rows = s.batch.numel() * s.s,
      .sk = s.sk,
      .mask_col_step = mask && mask_dims.rank() > 0 && mask_dims[mask_dims.rank() - 1] != 1 ? 1 : 0,
      .mask_at = BroadcastIndexer(mask ? mask_dims : Dims{}, s.scores()),
  };
  const int64_t blocks = (a.rows + kSoftmaxWarps - 1) / kSoftmaxWarps;
  attention_softmax_kernel<T>
      <<<static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, int64_t{1} << 20)), kSoftmaxThreads, 0, stream>>>(a);
  return cuda::check(cudaGetLastError(), "attention softmax kernel launch");
}

bool present(const std::vector<TensorDesc>& in, int i) { return i < static_cast<int>(in.size()) && in[i].present; }

// The problem as GEMMs. The batch splits into outer dims (one pair of GEMMs each) and the longest run of inner dims
// over which each of q, k and v is either complete (a strided batch) or broadcast (batch stride 0).
struct GemmLayout {
  AttentionShape shape;
  bool work = false;                          // anything to multiply (no empty output, Sk > 0)
  cuda::GemmProblem qk;                       // scores [inner, S, Sk] (float32) = scale * q @ k^T
  cuda::GemmProblem pv;                       // out [inner, S, Dv] = P @ v
  int64_t inner = 1;                          // batch entries per GEMM
  std::vector<std::array<int64_t, 3>> calls;  // per outer entry: element offsets of q, k and v
};

// The largest power of two (at most 16) dividing every byte offset: what a GEMM may assume of its pointers when the
// buffers themselves are 16-byte aligned.
int alignment_of(const std::vector<int64_t>& byte_offsets) {
  uint64_t bits = 16;
  for (int64_t o : byte_offsets) bits |= static_cast<uint64_t>(o);
  return static_cast<int>(bits & (~bits + 1));
}

Result<GemmLayout> gemm_layout(const std::vector<TensorDesc>& in, float scale) {
  const bool masked = present(in, 3);
  GemmLayout l;
  KILN_ASSIGN_OR_RETURN(l.shape, attention_shape(in[0].dims, in[1].dims, in[2].dims, masked ? &in[3].dims : nullptr));
  const AttentionShape& s = l.shape;
  const DataType dtype = in[0].dtype;
  l.work = s.batch.numel() > 0 && s.s > 0 && s.dv > 0 && s.sk > 0;
  if (s.d == 0)
    return unsupported("cuda.attention tactic gemm needs a head dim D > 0 (the scores are a product over D)");
  if (s.s > kMaxGemmDim || s.sk > kMaxGemmDim || s.d > kMaxGemmDim || s.dv > kMaxGemmDim)
    return unsupported("cuda.attention tactic gemm takes sizes below 2^31; this problem has S = ", s.s, ", Sk = ", s.sk,
                       ", D = ", s.d, ", Dv = ", s.dv);
  const Dims& batch = s.batch;
  const int br = batch.rank();
  const Dims qb = cuda::attention_batch_dims(in[0].dims, batch), kb = cuda::attention_batch_dims(in[1].dims, batch),
             vb = cuda::attention_batch_dims(in[2].dims, batch);
  auto uniform = [&](const Dims& x, int from) {
    bool full = false, broadcast = false;
    for (int i = from; i < br; ++i) {
      if (batch[i] == 1) continue;
      (x[i] == 1 ? broadcast : full) = true;
    }
    return !(full && broadcast);
  };
  int split = br;
  while (split > 0 && uniform(qb, split - 1) && uniform(kb, split - 1) && uniform(vb, split - 1)) --split;
  Dims outer, q_outer, k_outer, v_outer;
  bool q_full = false, k_full = false, v_full = false;
  for (int i = 0; i < br; ++i) {
    if (i < split) {
      outer.push_back(batch[i]);
      q_outer.push_back(qb[i]);
      k_outer.push_back(kb[i]);
      v_outer.push_back(vb[i]);
      continue;
    }
    l.inner *= batch[i];
    q_full |= batch[i] != 1 && qb[i] != 1;
    k_full |= batch[i] != 1 && kb[i] != 1;
    v_full |= batch[i] != 1 && vb[i] != 1;
  }
  if (l.inner > kMaxGemmDim)
    return unsupported("cuda.attention tactic gemm takes strided batches below 2^31 entries, not ", l.inner);
  const int64_t q_matrix = s.s * s.d, k_matrix = s.sk * s.d, v_matrix = s.sk * s.dv;
  const int64_t scores_matrix = s.s * s.sk, out_matrix = s.s * s.dv;
  const BroadcastIndexer q_at(q_outer, outer), k_at(k_outer, outer), v_at(v_outer, outer);
  const int64_t q_inner = q_full ? l.inner : 1, k_inner = k_full ? l.inner : 1, v_inner = v_full ? l.inner : 1;
  for (int64_t o = 0; o < outer.numel(); ++o)
    l.calls.push_back({q_at(o) * q_inner * q_matrix, k_at(o) * k_inner * k_matrix, v_at(o) * v_inner * v_matrix});

  const auto elem = static_cast<int64_t>(dtype_size(dtype));
  cuda::GemmProblem& qk = l.qk;
  qk.dtype = dtype;
  if (dtype != DataType::kFloat32) qk.out_dtype = DataType::kFloat32;
  qk.m = s.s;
  qk.n = s.sk;
  qk.k = s.d;
  qk.trans_b = true;  // k is [Sk, D]
  qk.batch = l.inner;
  qk.a_stride = q_full ? q_matrix : 0;
  qk.b_stride = k_full ? k_matrix : 0;
  qk.alpha = scale;
  cuda::GemmProblem& pv = l.pv;
  pv.dtype = dtype;
  pv.m = s.s;
  pv.n = s.dv;
  pv.k = s.sk;
  pv.batch = l.inner;
  pv.a_stride = scores_matrix;
  pv.b_stride = v_full ? v_matrix : 0;
  std::vector<int64_t> qk_offsets{qk.a_stride * elem, qk.b_stride * elem, scores_matrix * 4};
  std::vector<int64_t> pv_offsets{pv.a_stride * elem, pv.b_stride * elem, out_matrix * elem};
  for (size_t o = 0; o < l.calls.size(); ++o) {
    const auto first = static_cast<int64_t>(o) * l.inner;  // the call's first batch entry
    qk_offsets.insert(qk_offsets.end(), {l.calls[o][0] * elem, l.calls[o][1] * elem, first * scores_matrix * 4});
    pv_offsets.insert(pv_offsets.end(),
                      {first * scores_matrix * elem, l.calls[o][2] * elem, first * out_matrix * elem});
  }
  qk.alignment = alignment_of(qk_offsets);
  pv.alignment = alignment_of(pv_offsets);
  return l;
}

bool static_inputs(const std::vector<TensorDesc>& in) {
  for (const TensorDesc& d : in)
    if (d.present && !d.dims.is_static()) return false;
  return true;
}

// Whether `a` and `b` have the same inputs and shapes (a missing trailing entry counts as absent).
bool same_shapes(const std::vector<TensorDesc>& a, const std::vector<TensorDesc>& b) {
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    const bool in_a = present(a, static_cast<int>(i)), in_b = present(b, static_cast<int>(i));
    if (in_a != in_b || (in_a && a[i].dims != b[i].dims)) return false;
  }
  return true;
}

size_t round_up(size_t bytes) { return (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign; }

class AttentionGemm final : public Kernel {
 public:
  explicit AttentionGemm(float scale) : scale_(scale) {}

  // Plans both GEMMs and the scratch for these shapes: [cuBLASLt workspace][scores, float32][P, input type; for
  // float32 P overwrites the scores].
  Status plan(const std::vector<TensorDesc>& in) {
    KILN_ASSIGN_OR_RETURN(GemmLayout l, gemm_layout(in, scale_));
    std::unique_ptr<cuda::GemmPlan> qk, pv;
    size_t workspace = 0, scores_at = 0, p_at = 0, total = 0;
    if (l.work) {
      KILN_ASSIGN_OR_RETURN(qk, cuda::GemmPlan::create(l.qk, ""));
      KILN_ASSIGN_OR_RETURN(pv, cuda::GemmPlan::create(l.pv, ""));
      const auto scores = static_cast<size_t>(l.shape.batch.numel() * l.shape.s * l.shape.sk);
      const DataType dtype = in[0].dtype;
      scores_at = round_up(std::max(qk->workspace_bytes(), pv->workspace_bytes()));
      p_at = scores_at;
      total = scores_at + round_up(scores * sizeof(float));
      if (dtype != DataType::kFloat32) {
        p_at = total;
        total += round_up(scores * dtype_size(dtype));
      }
      workspace = scores_at;
    }
    layout_ = std::move(l);
    qk_ = std::move(qk);
    pv_ = std::move(pv);
    workspace_ = workspace;
    scores_at_ = scores_at;
    p_at_ = p_at;
    total_ = total;
    shapes_ = in;
    planned_ = true;
    return Status::ok();
  }

  std::string detail() const override {
    if (!qk_ || !pv_) return "";
    std::string s = str_cat("scores: ", qk_->detail(), "; softmax kernel; out: ", pv_->detail());
    if (layout_.calls.size() > 1) s += str_cat(" (x ", layout_.calls.size(), " calls each)");
    return s;
  }
  size_t workspace_bytes() const override { return total_; }

  Status run(KernelContext& ctx) override {
    Tensor& y = ctx.dst[0];
    if (y.numel() == 0) return Status::ok();
    const cudaStream_t stream = cuda::native(ctx.stream);
    std::vector<TensorDesc> in;
    for (const Tensor& t : ctx.src) in.push_back({t.dtype(), t.dims(), t.defined()});
    if (!planned_ || !same_shapes(in, shapes_)) KILN_RETURN_IF_ERROR(plan(in));
    const AttentionShape& s = layout_.shape;
    if (!layout_.work)  // no keys: softmax over nothing, then a product over nothing: zeros
      return cuda::check(cudaMemsetAsync(y.raw(), 0, y.nbytes(), stream), "cudaMemsetAsync (Attention with no keys)");
    KILN_ASSIGN_OR_RETURN(void* base, scratch_.get(ctx.allocator, total_, "Attention scores", stream));
    char* const scratch = static_cast<char*>(base);
    void* const workspace = workspace_ ? scratch : nullptr;
    auto* const scores = reinterpret_cast<float*>(scratch + scores_at_);
    char* const p = scratch + p_at_;
    const DataType dtype = y.dtype();
    const auto elem = static_cast<int64_t>(dtype_size(dtype));
    const int device = ctx.stream.device().index;
    const char* q = static_cast<const char*>(ctx.src[0].raw());
    const char* k = static_cast<const char*>(ctx.src[1].raw());
    const char* v = static_cast<const char*>(ctx.src[2].raw());
    const int64_t scores_matrix = s.s * s.sk, out_matrix = s.s * s.dv;
    for (size_t o = 0; o < layout_.calls.size(); ++o) {
      const auto first = static_cast<int64_t>(o) * layout_.inner;
      KILN_RETURN_IF_ERROR(qk_->run(stream, device, q + layout_.calls[o][0] * elem, k + layout_.calls[o][1] * elem,
                                    nullptr, nullptr, scores + first * scores_matrix, workspace));
    }
    const bool masked = ctx.src.size() > 3 && ctx.src[3].defined();
    const void* mask = masked ? ctx.src[3].raw() : nullptr;
    const Dims mask_dims = masked ? ctx.src[3].dims() : Dims{};
    switch (dtype) {
      case DataType::kFloat32:
        KILN_RETURN_IF_ERROR(launch_softmax<float>(scores, p, mask, mask_dims, s, stream));
        break;
      case DataType::kFloat16:
        KILN_RETURN_IF_ERROR(launch_softmax<__half>(scores, p, mask, mask_dims, s, stream));
        break;
      case DataType::kBFloat16:
        KILN_RETURN_IF_ERROR(launch_softmax<__nv_bfloat16>(scores, p, mask, mask_dims, s, stream));
        break;
      default: return unsupported("Attention of ", dtype_name(dtype));
    }
    char* out = static_cast<char*>(y.raw());
    for (size_t o = 0; o < layout_.calls.size(); ++o) {
      const auto first = static_cast<int64_t>(o) * layout_.inner;
      KILN_RETURN_IF_ERROR(pv_->run(stream, device, p + first * scores_matrix * elem, v + layout_.calls[o][2] * elem,
                                    nullptr, nullptr, out + first * out_matrix * elem, workspace));
    }
    return Status::ok();
  }

 private:
  float scale_;
  bool planned_ = false;
  std::vector<TensorDesc> shapes_;  // what the plan is for
  GemmLayout layout_;
  std::unique_ptr<cuda::GemmPlan> qk_, pv_;
  size_t workspace_ = 0, scores_at_ = 0, p_at_ = 0, total_ = 0;  // scratch: sizes and offsets in bytes
  cuda::DeviceScratch scratch_;
};

// The gemm tactic takes problems of static shapes whose sizes cuBLASLt takes (supports checked the rest).
Status gemm_fits(const OpCall& call) {
  if (call.attrs_as<AttentionAttrs>().heads)
    return unsupported("cuda.attention tactic gemm takes the plain layout, not heads interleaved in the features");
  if (!static_inputs(call.inputs))
    return unsupported("cuda.attention tactic gemm plans its GEMMs for static shapes; this problem has ",
                       call.to_string());
  return gemm_layout(call.inputs, call.attrs_as<AttentionAttrs>().scale).status();
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
  const auto [d, dv] = ref::attention_head_dims(call);
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
  const auto [d, dv] = ref::attention_head_dims(call);
  return (t == DataType::kFloat16 || t == DataType::kBFloat16) && d % 16 == 0 && dv % 16 == 0;
}

std::vector<std::string> attention_tactics(const OpCall& call) {
  std::vector<std::string> tactics{kFma};
  if (wmma_fits(call)) tactics.push_back(kWmma);
  if (gemm_fits(call).is_ok()) tactics.push_back(kGemm);
  if (cuda::attention_rows_fits(call).is_ok()) tactics.push_back(kRows);
  if (cuda::attention_mma_fits(call).is_ok()) tactics.push_back(kMma);
  return tactics;
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
  if (call.tactic == kGemm) {
    const Status fits = gemm_fits(call);
    if (!fits.is_ok())
      return invalid_argument("cuda.attention tactic gemm does not take this problem: ", fits.message());
    auto kernel = std::make_unique<AttentionGemm>(call.attrs_as<AttentionAttrs>().scale);
    KILN_RETURN_IF_ERROR(kernel->plan(call.inputs));
    return std::unique_ptr<Kernel>(std::move(kernel));
  }
  if (call.tactic == kRows) {
    const Status fits = cuda::attention_rows_fits(call);
    if (!fits.is_ok())
      return invalid_argument("cuda.attention tactic rows does not take this problem: ", fits.message());
    return stateless([](KernelContext& ctx) { return cuda::run_attention_rows(ctx); })(call);
  }
  if (call.tactic == kMma) {
    const Status fits = cuda::attention_mma_fits(call);
    if (!fits.is_ok())
      return invalid_argument("cuda.attention tactic mma does not take this problem: ", fits.message());
    // Operands at addresses the user bound may be unaligned: those runs take the wmma kernel (same head dims).
    return stateless([](KernelContext& ctx) {
      return cuda::attention_mma_aligned(ctx) ? cuda::run_attention_mma(ctx) : run_attention(ctx, true);
    })(call);
  }
  return invalid_argument("cuda.attention has no tactic '", call.tactic, "' (it has fma, wmma, gemm, rows and mma)");
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
