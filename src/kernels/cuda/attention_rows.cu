// Attention tactic "rows" (float16/bfloat16, head dims multiples of 16 up to 128, Sk up to 512): a block takes up to
// 64 query rows of one batch entry, 16 per warp, and keeps each warp's whole score rows in shared memory, so the
// softmax needs no running maximum. K and V come into shared memory in the input type (16-byte asynchronous copies
// when aligned), in chunks of up to 128 keys; with Sk <= 128 one chunk holds them all and V arrives while the scores
// are computed. Per warp: S = Q K^T (WMMA, float32) over its region, the masked softmax per row by the warp (P in the
// input type, written over the row it was computed from), O = P V (WMMA, float32), divided by the row sums.
#include <cuda_pipeline.h>
#include <mma.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <set>

#include "kernels/common/indexing.h"
#include "kernels/cuda/attention_operands.cuh"
#include "kernels/cuda/attention_rows.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/ref/attention.h"

namespace kiln::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kMaxWarps = 4;  // 16 query rows each
constexpr int kMaxThreads = kMaxWarps * 32;
constexpr int64_t kMaxHeadDim = 128;
constexpr int kMaxFrags = kMaxHeadDim / 16;  // 16-wide column blocks of a head dim
constexpr int64_t kMaxKeys = 512;
constexpr int kChunk = 128;  // keys per K / V buffer
constexpr int kPad = 8;      // elements after each Q, K, V row: rows start on different banks

// The operands and, for this kernel: Sk rounded up to 16 (keys past Sk are zeros, masked out), keys per K / V
// buffer, bytes of shared memory per warp (its Q rows, then its scores, P and output rows in turn), and whether q, k,
// v and out are 16-byte aligned (vector copies).
template <class T>
struct RowsArgs : AttentionOperands<T> {
  int skp;
  int chunk;
  int region;
  bool vec;
};

// Shared memory of a block of `warps` warps: the warp regions, then the K and V buffers. Every part starts at a
// multiple of 32 bytes, as WMMA wants.
struct RowsSmem {
  int skp = 0, chunk = 0;
  size_t region = 0, total = 0;
};

RowsSmem rows_smem(int warps, int64_t sk, int64_t d, int64_t dv, size_t elem) {
  RowsSmem m;
  m.skp = static_cast<int>((sk + 15) / 16 * 16);
  m.chunk = std::min(m.skp, kChunk);
  const size_t q_rows = 16 * (d + kPad) * elem, scores = 16 * (m.skp + 4) * sizeof(float),
               out = 16 * (dv + 4) * sizeof(float);
  m.region = (std::max({q_rows, scores, out}) + 127) / 128 * 128;
  m.total = warps * m.region + m.chunk * ((d + kPad) + (dv + kPad)) * elem;
  return m;
}

// The most warps (4, 2 or 1) whose block fits in `limit` bytes of shared memory, or 0.
int rows_warps(int64_t sk, int64_t d, int64_t dv, size_t elem, size_t limit) {
  for (int w = kMaxWarps; w >= 1; w /= 2)
    if (rows_smem(w, sk, d, dv, elem).total <= limit) return w;
  return 0;
}

// Rows [0, n) of a tile in shared memory (row r at dst + (r / 16) * group + (r % 16) * ld) from `src` (rows of
// `cols` elements, contiguous); rows at or past `valid` are zeros. Vector copies are asynchronous: commit and wait.
template <class T>
__device__ __forceinline__ void load_rows(T* dst, int ld, int group, const T* src, int cols, int n, int64_t valid,
                                          bool vec) {
  const int tid = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
  if (vec) {
    const int per_row = cols / 8;
    for (int idx = tid; idx < n * per_row; idx += threads) {
      const int r = idx / per_row, c = idx % per_row * 8;
      T* to = dst + (r >> 4) * group + (r & 15) * ld + c;
      if (r < valid)
        __pipeline_memcpy_async(to, src + static_cast<int64_t>(r) * cols + c, 16);
      else
        *reinterpret_cast<uint4*>(to) = make_uint4(0, 0, 0, 0);
    }
  } else {
    for (int idx = tid; idx < n * cols; idx += threads) {
      const int r = idx / cols, c = idx % cols;
      dst[(r >> 4) * group + (r & 15) * ld + c] =
          r < valid ? src[static_cast<int64_t>(r) * cols + c] : from_float<T>(0.f);
    }
  }
}

// The next chunk of K or V rows into its buffer (row r at dst + r * ld), once every warp is done with the last one.
template <class T>
__device__ __forceinline__ void next_chunk(T* dst, int ld, const T* src, int cols, int keys, int64_t valid, bool vec) {
  __syncthreads();
  load_rows(dst, ld, 16 * ld, src, cols, keys, valid, vec);
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();
}

template <class T>
__global__ void __launch_bounds__(kMaxThreads) attention_rows_kernel(RowsArgs<T> a) {
  extern __shared__ __align__(128) unsigned char rows_smem_bytes[];
  const int warps = static_cast<int>(blockDim.x) >> 5, rows = 16 * warps;
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int d = a.d, dv = a.dv, ldq = d + kPad, ldk = d + kPad, ldv = dv + kPad;
  const int lds = a.skp + 4, ldp = 2 * lds, ldo = dv + 4;  // P rows lie over the first half of their score rows
  unsigned char* const mine = rows_smem_bytes + warp * a.region;
  T* const sk = reinterpret_cast<T*>(rows_smem_bytes + warps * a.region);  // [chunk][d + kPad]
  T* const sv = sk + a.chunk * ldk;                                        // [chunk][dv + kPad]
  const T* const sq = reinterpret_cast<const T*>(mine);                    // [16][d + kPad]
  float* const ss = reinterpret_cast<float*>(mine);                        // [16][skp + 4]
  T* const sp = reinterpret_cast<T*>(mine);                                // [16][2 * (skp + 4)]
  float* const so = reinterpret_cast<float*>(mine);                        // [16][dv + 4]
  const int64_t tiles = (a.s + rows - 1) / rows;
  for (int64_t t = blockIdx.x; t < a.batch * tiles; t += gridDim.x) {
    const int64_t b = t / tiles, q0 = (t % tiles) * rows, row0 = q0 + 16 * warp;
    const T* qb = a.q + a.q_at(b) * a.s * d;
    const T* kb = a.k + a.k_at(b) * a.sk * d;
    const T* vb = a.v + a.v_at(b) * a.sk * dv;
    const bool warp_live = row0 < a.s;  // padding rows only: nothing to compute, only the barriers to keep
    __syncthreads();                    // the previous tile is done with shared memory
    load_rows(reinterpret_cast<T*>(rows_smem_bytes), ldq, a.region / static_cast<int>(sizeof(T)), qb + q0 * d, d, rows,
              a.s - q0, a.vec);
    load_rows(sk, ldk, 16 * ldk, kb, d, a.chunk, a.sk, a.vec);
    __pipeline_commit();
    load_rows(sv, ldv, 16 * ldv, vb, dv, a.chunk, a.sk, a.vec);
    __pipeline_commit();
    // Lanes 2 r and 2 r + 1 share row r of the warp's 16: its mask offset and, later, its sum of probabilities.
    const int my_r = lane >> 1, my_h = lane & 1;
    const int64_t my_row = row0 + my_r;
    const int64_t my_mask = a.mask && my_row < a.s ? a.mask_at((b * a.s + my_row) * a.sk) : 0;
    __pipeline_wait_prior(1);  // Q and the first K chunk
    __syncthreads();

    // S = Q K^T for this warp's rows, chunk by chunk of keys.
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> qf[kMaxFrags];
    if (warp_live) {
#pragma unroll
      for (int f = 0; f < kMaxFrags; ++f)
        if (16 * f < d) wmma::load_matrix_sync(qf[f], sq + 16 * f, ldq);
    }
    __syncwarp();  // the Q rows are in registers: the scores may overwrite them
    for (int k0 = 0; k0 < a.skp; k0 += a.chunk) {
      const int keys = min(a.chunk, a.skp - k0);
      if (k0 > 0) next_chunk(sk, ldk, kb + static_cast<int64_t>(k0) * d, d, keys, a.sk - k0, a.vec);
      if (!warp_live) continue;
      for (int n = 0; n < keys; n += 16) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::fill_fragment(acc, 0.f);
#pragma unroll
        for (int f = 0; f < kMaxFrags; ++f) {
          if (16 * f >= d) break;
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> kf;  // K rows [key][d] are K^T by columns
          wmma::load_matrix_sync(kf, sk + n * ldk + 16 * f, ldk);
          wmma::mma_sync(acc, qf[f], kf, acc);
        }
        wmma::store_matrix_sync(ss + k0 + n, acc, lds, wmma::mem_row_major);
      }
    }
    __syncwarp();

    // Softmax in float32, two lanes per row, all rows at once (no reduction over the warp per row). Pass 1: each
    // lane turns its contiguous half of the row into x = scale * s + mask in place (padded keys: -inf) and takes the
    // maximum. Pass 2: the two lanes walk the row's keys interleaved (key 2 i + h at step i), P = exp(x - max) in
    // T written over the row's first bytes: step i's P overwrites x[i], read at step i / 2 (a barrier per step
    // orders step 0), and the sum is taken of what P holds. A row masked out entirely sums to 0 and comes out as
    // 0 / 0 = NaN, as the reference gives.
    float my_sum = 0.f;
    if (warp_live) {
      float* const xr = ss + my_r * lds;
      const T* const mr = a.mask && my_row < a.s ? a.mask + my_mask : nullptr;
      const int half = a.skp / 2;
      float mx = -INFINITY;
#pragma unroll 8
      for (int i = 0; i < half; ++i) {
        const int j = my_h * half + i;
        float x = -INFINITY;
        if (j < a.sk) x = xr[j] * a.scale + (mr ? to_float(mr[j * a.mask_col_step]) : 0.f);
        xr[j] = x;
        mx = fmaxf(mx, x);
      }
      mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 1));
      __syncwarp();
      T* const pr = sp + my_r * ldp;
      float sum = 0.f;
      for (int i = 0; i < half; ++i) {
        const int j = 2 * i + my_h;
        const float x = xr[j];
        __syncwarp();
        const T p = from_float<T>(x == -INFINITY ? 0.f : expf(x - mx));
        pr[j] = p;
        sum += to_float(p);
      }
      my_sum = sum + __shfl_xor_sync(kFullMask, sum, 1);
    }
    __syncwarp();

    // O = P V, chunk by chunk of keys; the first V chunk was loaded with Q and K.
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> of[kMaxFrags];
#pragma unroll
    for (int f = 0; f < kMaxFrags; ++f)
      if (16 * f < dv) wmma::fill_fragment(of[f], 0.f);
    __pipeline_wait_prior(0);
    __syncthreads();
    for (int k0 = 0; k0 < a.skp; k0 += a.chunk) {
      const int keys = min(a.chunk, a.skp - k0);
      if (k0 > 0) next_chunk(sv, ldv, vb + static_cast<int64_t>(k0) * dv, dv, keys, a.sk - k0, a.vec);
      if (!warp_live) continue;
      for (int kk = 0; kk < keys; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> pf;
        wmma::load_matrix_sync(pf, sp + k0 + kk, ldp);
#pragma unroll
        for (int f = 0; f < kMaxFrags; ++f) {
          if (16 * f >= dv) break;
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> vf;
          wmma::load_matrix_sync(vf, sv + kk * ldv + 16 * f, ldv);
          wmma::mma_sync(of[f], pf, vf, of[f]);
        }
      }
    }
    if (!warp_live) continue;  // the next tile starts with a barrier every warp reaches
    __syncwarp();              // P is consumed: the output rows may overwrite it
#pragma unroll
    for (int f = 0; f < kMaxFrags; ++f)
      if (16 * f < dv) wmma::store_matrix_sync(so + 16 * f, of[f], ldo, wmma::mem_row_major);
    __syncwarp();

    // Out rows = O / row sums, 8 columns per lane and step (16 * dv / 8 is a multiple of 32: every lane shuffles).
    const float my_inv = 1.f / my_sum;
    const int per_row = dv / 8;
    for (int idx = lane; idx < 16 * per_row; idx += 32) {
      const int r = idx / per_row, c = idx % per_row * 8;
      const float inv = __shfl_sync(kFullMask, my_inv, 2 * r);
      if (row0 + r >= a.s) continue;
      const float4 lo = *reinterpret_cast<const float4*>(so + r * ldo + c);
      const float4 hi = *reinterpret_cast<const float4*>(so + r * ldo + c + 4);
      T* dst = a.out + (b * a.s + row0 + r) * dv + c;
      if (a.vec) {
        *reinterpret_cast<uint4*>(dst) = make_uint4(pack2<T>(lo.x * inv, lo.y * inv), pack2<T>(lo.z * inv, lo.w * inv),
                                                    pack2<T>(hi.x * inv, hi.y * inv), pack2<T>(hi.z * inv, hi.w * inv));
      } else {
        const float o[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
        for (int e = 0; e < 8; ++e) dst[e] = from_float<T>(o[e] * inv);
      }
    }
  }
}

// Lets the kernel for T take up to `bytes` of shared memory on `device` (the current device), once per device.
template <class T>
Status raise_smem_limit(int device, size_t bytes) {
  static std::mutex mu;
  static std::set<int> raised;
  std::lock_guard<std::mutex> lock(mu);
  if (raised.count(device)) return Status::ok();
  KILN_RETURN_IF_ERROR(check(cudaFuncSetAttribute(attention_rows_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                  static_cast<int>(bytes)),
                             "cudaFuncSetAttribute (attention rows shared memory)"));
  raised.insert(device);
  return Status::ok();
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The sizes alone: dtype and head dims, Sk, and a block that fits in `limit` bytes.
Status rows_fit(DataType dtype, int64_t sk, int64_t d, int64_t dv, size_t limit) {
  if (dtype != DataType::kFloat16 && dtype != DataType::kBFloat16)
    return unsupported("cuda.attention tactic rows takes float16 and bfloat16, not ", dtype_name(dtype));
  if (d <= 0 || dv <= 0 || d % 16 || dv % 16 || d > kMaxHeadDim || dv > kMaxHeadDim)
    return unsupported("cuda.attention tactic rows needs head dims that are multiples of 16 from 16 to ", kMaxHeadDim,
                       ", not D = ", d, ", Dv = ", dv);
  if (sk < 0) return unsupported("cuda.attention tactic rows sizes its shared memory by Sk, which must be static");
  if (sk > kMaxKeys)
    return unsupported("cuda.attention tactic rows keeps whole score rows in shared memory for Sk up to ", kMaxKeys,
                       ", not Sk = ", sk);
  if (rows_warps(sk, d, dv, dtype_size(dtype), limit) == 0)
    return unsupported("cuda.attention tactic rows needs ", rows_smem(1, sk, d, dv, dtype_size(dtype)).total,
                       " bytes of shared memory per block for Sk = ", sk, ", D = ", d, ", Dv = ", dv,
                       "; this device offers ", limit);
  return Status::ok();
}

template <class T>
Status launch_rows(KernelContext& ctx, const AttentionShape& s, cudaStream_t stream) {
  const int device = ctx.stream.device().index;
  KILN_ASSIGN_OR_RETURN(const size_t limit, shared_memory_limit(device));
  KILN_RETURN_IF_ERROR(rows_fit(ctx.src[0].dtype(), s.sk, s.d, s.dv, limit));
  const int warps = rows_warps(s.sk, s.d, s.dv, sizeof(T), limit);
  const RowsSmem m = rows_smem(warps, s.sk, s.d, s.dv, sizeof(T));
  KILN_RETURN_IF_ERROR(raise_smem_limit<T>(device, limit));
  Tensor& y = ctx.dst[0];
  const RowsArgs<T> a{
      attention_operands<T>(ctx, s), m.skp, m.chunk, static_cast<int>(m.region),
      aligned16(ctx.src[0].raw()) && aligned16(ctx.src[1].raw()) && aligned16(ctx.src[2].raw()) && aligned16(y.raw())};

  const int64_t tiles = a.batch * ((s.s + 16 * warps - 1) / (16 * warps));
  const auto blocks = static_cast<unsigned>(std::clamp<int64_t>(tiles, 1, int64_t{1} << 24));
  attention_rows_kernel<T><<<blocks, 32 * warps, m.total, stream>>>(a);
  return check(cudaGetLastError(), "attention (rows) kernel launch");
}

}  // namespace

Status attention_rows_fits(const OpCall& call) {
  if (call.inputs.size() < 3) return unsupported("cuda.attention tactic rows needs q, k and v");
  if (call.attrs_as<AttentionAttrs>().heads)
    return unsupported("cuda.attention tactic rows takes the plain layout, not heads interleaved in the features");
  const Dims& q = call.inputs[0].dims;
  const Dims& k = call.inputs[1].dims;
  const Dims& v = call.inputs[2].dims;
  if (q.rank() < 2 || k.rank() < 2 || v.rank() < 2)
    return unsupported("cuda.attention tactic rows needs q, k and v of rank >= 2");
  int device = 0;
  KILN_RETURN_IF_ERROR(check(cudaGetDevice(&device), "cudaGetDevice"));
  KILN_ASSIGN_OR_RETURN(const size_t limit, shared_memory_limit(device));
  return rows_fit(call.inputs[0].dtype, k[k.rank() - 2], q[q.rank() - 1], v[v.rank() - 1], limit);
}

Status run_attention_rows(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(AttentionShape s, ref::attention_shape_of(ctx));
  Tensor& y = ctx.dst[0];
  if (y.numel() == 0) return Status::ok();
  cudaStream_t stream = native(ctx.stream);
  if (s.sk == 0)  // softmax over nothing, then a product over nothing: zeros
    return check(cudaMemsetAsync(y.raw(), 0, y.nbytes(), stream), "cudaMemsetAsync (Attention with no keys)");
  switch (ctx.src[0].dtype()) {
    case DataType::kFloat16: return launch_rows<__half>(ctx, s, stream);
    case DataType::kBFloat16: return launch_rows<__nv_bfloat16>(ctx, s, stream);
    default:
      return unsupported("cuda.attention tactic rows takes float16 and bfloat16, not ", dtype_name(ctx.src[0].dtype()));
  }
}

}  // namespace kiln::cuda
