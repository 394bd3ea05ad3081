// Attention tactic "mma" (float16/bfloat16, D = Dv of 32, 64 or 128): flash attention with the scores, the
// probabilities and the output accumulators in registers. A block takes 64 query rows of one batch entry, 16 per
// warp; K and V tiles of 64 keys come into shared memory by asynchronous copies, the next tile while the current one
// is used. Per tile and warp: S = Q K^T by mma.sync (m16n8k16, float32 accumulators; Q's fragments stay in
// registers for the whole walk), scale and mask added, the online softmax per row (a row's values are spread over
// the four lanes of a quad), P rounded to the input type straight from the accumulators into the A fragments of
// O += P V, whose V fragments come transposed by ldmatrix. The row sums are reduced over the quad once at the end.
#include <algorithm>
#include <limits>
#include <mutex>
#include <set>

#include "kernels/cuda/attention_mma.h"
#include "kernels/cuda/attention_operands.cuh"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/ref/attention.h"

namespace kiln::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kQueries = 16 * kWarps;  // query rows per block
constexpr int kKeys = 64;              // keys per K / V tile
constexpr int kPad = 8;                // elements after each K / V row in shared memory: rows start on other banks

// Shared memory of a block for head dim D: two stages of a K and a V tile.
constexpr size_t smem_bytes(int d, size_t elem) { return 2 * 2 * static_cast<size_t>(kKeys) * (d + kPad) * elem; }

template <class T>
struct MmaTraits;
template <>
struct MmaTraits<__half> {
  static __device__ __forceinline__ void mma(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <>
struct MmaTraits<__nv_bfloat16> {
  static __device__ __forceinline__ void mma(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes from global to shared memory, asynchronously; `bytes` < 16 fills the rest with zeros.
__device__ __forceinline__ void copy16(void* dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(dst)), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void copy_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void copy_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// Four 8x8 matrices of 16-bit elements from shared memory, transposed (lane l gives the address of row l % 8 of
// matrix l / 8).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t* r, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(row)));
}

// Rows [k0, k0 + kKeys) of a [Sk, D] operand (rows `ld` elements apart) into a tile of shared memory (rows of
// D + kPad); rows at or past `sk` are zeros (V's padding rows meet probabilities of 0, and 0 * garbage could be NaN).
template <class T, int D>
__device__ __forceinline__ void load_tile(T* tile, const T* src, int64_t ld, int64_t k0, int64_t sk) {
  constexpr int kPerRow = D / 8;  // 16-byte pieces
  for (int idx = static_cast<int>(threadIdx.x); idx < kKeys * kPerRow; idx += kThreads) {
    const int r = idx / kPerRow, c = idx % kPerRow * 8;
    const bool valid = k0 + r < sk;
    copy16(tile + r * (D + kPad) + c, src + (valid ? (k0 + r) * ld + c : 0), valid ? 16 : 0);
  }
}

template <class T, int D>
__global__ void __launch_bounds__(kThreads) attention_mma_kernel(AttentionOperands<T> a) {
  extern __shared__ __align__(128) unsigned char mma_smem[];
  constexpr int kLd = D + kPad;
  constexpr int kDSteps = D / 16;                   // k steps of Q K^T
  constexpr int kOTiles = D / 8;                    // n tiles of the output
  T* const tiles = reinterpret_cast<T*>(mma_smem);  // [stage][K, V][kKeys][kLd]
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int g = lane >> 2, t = lane & 3;  // the quad a lane is in (a row of the fragments) and its place in it
  const int64_t q_tiles = (a.s + kQueries - 1) / kQueries;
  const int64_t b = blockIdx.x / q_tiles, row0 = blockIdx.x % q_tiles * kQueries + 16 * warp;
  const T* const qb = a.q_of(b);
  const T* const kb = a.k_of(b);
  const T* const vb = a.v_of(b);
  const int64_t q_row = a.q_row(), k_row = a.k_row(), v_row = a.v_row();
  const int64_t n_tiles = (a.sk + kKeys - 1) / kKeys;

  load_tile<T, D>(tiles, kb, k_row, 0, a.sk);
  load_tile<T, D>(tiles + kKeys * kLd, vb, v_row, 0, a.sk);
  copy_commit();

  // This lane's rows (g and g + 8 of the warp's 16): Q fragments, mask rows, running maximum and sum.
  const int64_t rows[2] = {row0 + g, row0 + g + 8};
  uint32_t qf[kDSteps][4];
#pragma unroll
  for (int ks = 0; ks < kDSteps; ++ks)
#pragma unroll
    for (int h = 0; h < 4; ++h) {  // a0: (g, 2t), a1: (g + 8, 2t), a2: (g, 2t + 8), a3: (g + 8, 2t + 8)
      const int64_t r = rows[h & 1];
      qf[ks][h] = r < a.s ? *reinterpret_cast<const uint32_t*>(qb + r * q_row + 16 * ks + 2 * t + 8 * (h >> 1)) : 0u;
    }
  const T* mask_row[2] = {nullptr, nullptr};
  if (a.mask)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      if (rows[h] < a.s) mask_row[h] = a.mask + a.mask_at((b * a.s + rows[h]) * a.sk);
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  float o[kOTiles][4];
#pragma unroll
  for (int n = 0; n < kOTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;

  for (int64_t tile = 0; tile < n_tiles; ++tile) {
    const int64_t k0 = tile * kKeys;
    T* const ks_tile = tiles + (tile & 1) * 2 * kKeys * kLd;
    T* const vs_tile = ks_tile + kKeys * kLd;
    if (tile + 1 < n_tiles) {  // the next tile into the other stage, which the previous iteration is done with
      T* const next = tiles + ((tile + 1) & 1) * 2 * kKeys * kLd;
      load_tile<T, D>(next, kb, k_row, k0 + kKeys, a.sk);
      load_tile<T, D>(next + kKeys * kLd, vb, v_row, k0 + kKeys, a.sk);
      copy_commit();
      copy_wait<1>();
    } else {
      copy_wait<0>();
    }
    __syncthreads();

    // S = Q K^T: n tile j holds keys k0 + 8 j + (2t, 2t + 1) for rows g (s[j][0..1]) and g + 8 (s[j][2..3]).
    float s[kKeys / 8][4];
#pragma unroll
    for (int j = 0; j < kKeys / 8; ++j) {
      s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
      const T* const krow = ks_tile + (8 * j + g) * kLd + 2 * t;
#pragma unroll
      for (int ks = 0; ks < kDSteps; ++ks) {
        const uint32_t b0 = *reinterpret_cast<const uint32_t*>(krow + 16 * ks);
        const uint32_t b1 = *reinterpret_cast<const uint32_t*>(krow + 16 * ks + 8);
        MmaTraits<T>::mma(s[j], qf[ks], b0, b1);
      }
    }
    // Scale, mask, keys past Sk; the online softmax of rows g (h = 0) and g + 8 (h = 1).
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kKeys / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1;
        const int64_t key = k0 + 8 * j + 2 * t + (e & 1);
        float x = -INFINITY;
        if (key < a.sk) {
          x = s[j][e] * a.scale;
          if (mask_row[h]) x += to_float(mask_row[h][key * a.mask_col_step]);
        }
        s[j][e] = x;
        tile_max[h] = fmaxf(tile_max[h], x);
      }
    float correction[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(kFullMask, tile_max[h], 1));
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(kFullMask, tile_max[h], 2));
      const float m_new = fmaxf(m[h], tile_max[h]);
      correction[h] = m_new == -INFINITY ? 1.f : __expf(m[h] - m_new);  // m = -inf: nothing to correct yet
      m[h] = m_new;
      l[h] *= correction[h];
    }
#pragma unroll
    for (int j = 0; j < kKeys / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1;
        const float p = s[j][e] == -INFINITY ? 0.f : __expf(s[j][e] - m[h]);
        s[j][e] = p;
      }
#pragma unroll
    for (int n = 0; n < kOTiles; ++n) {
      o[n][0] *= correction[0];
      o[n][1] *= correction[0];
      o[n][2] *= correction[1];
      o[n][3] *= correction[1];
    }
    // O += P V, 16 keys per step: P's A fragment is two n tiles of S; V's B fragments by ldmatrix (transposed).
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      uint32_t pf[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]), pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                        pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      // The sums are taken of the rounded probabilities, which are what multiplies V.
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const T* pair_lo = reinterpret_cast<const T*>(&pf[h]);
        const T* pair_hi = reinterpret_cast<const T*>(&pf[h + 2]);
        l[h] += to_float(pair_lo[0]) + to_float(pair_lo[1]) + to_float(pair_hi[0]) + to_float(pair_hi[1]);
      }
      const int mat = lane >> 3, r = lane & 7;
      const T* const vrow = vs_tile + (16 * kk + (mat & 1) * 8 + r) * kLd + (mat >> 1) * 8;
#pragma unroll
      for (int n = 0; n < kOTiles; n += 2) {
        uint32_t vf[4];
        ldmatrix_x4_trans(vf, vrow + 8 * n);
        MmaTraits<T>::mma(o[n], pf, vf[0], vf[1]);
        MmaTraits<T>::mma(o[n + 1], pf, vf[2], vf[3]);
      }
    }
    __syncthreads();  // every warp is done with this stage before the next iteration refills it
  }

  // Out = O / row sums (a row masked out entirely: 0 / 0 = NaN, as the reference gives).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(kFullMask, l[h], 1);
    l[h] += __shfl_xor_sync(kFullMask, l[h], 2);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (rows[h] >= a.s) continue;
    const float inv = 1.f / l[h];
    T* const dst = a.out_of(b) + rows[h] * a.out_row() + 2 * t;
#pragma unroll
    for (int n = 0; n < kOTiles; ++n)
      *reinterpret_cast<uint32_t*>(dst + 8 * n) = pack2<T>(o[n][2 * h] * inv, o[n][2 * h + 1] * inv);
  }
}

// Lets the kernel for (T, D) take its shared memory on `device` (the current device), once per device.
template <class T, int D>
Status raise_smem_limit(int device) {
  static std::mutex mu;
  static std::set<int> raised;
  std::lock_guard<std::mutex> lock(mu);
  if (raised.count(device)) return Status::ok();
  KILN_RETURN_IF_ERROR(
      check(cudaFuncSetAttribute(attention_mma_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(smem_bytes(D, sizeof(T)))),
            "cudaFuncSetAttribute (attention mma shared memory)"));
  raised.insert(device);
  return Status::ok();
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

Status mma_fit(DataType dtype, int64_t d, int64_t dv, size_t limit) {
  if (dtype != DataType::kFloat16 && dtype != DataType::kBFloat16)
    return unsupported("cuda.attention tactic mma takes float16 and bfloat16, not ", dtype_name(dtype));
  if (d != dv || (d != 32 && d != 64 && d != 128))
    return unsupported("cuda.attention tactic mma takes equal head dims D = Dv of 32, 64 or 128, not D = ", d,
                       ", Dv = ", dv);
  if (smem_bytes(static_cast<int>(d), dtype_size(dtype)) > limit)
    return unsupported("cuda.attention tactic mma needs ", smem_bytes(static_cast<int>(d), dtype_size(dtype)),
                       " bytes of shared memory per block; this device offers ", limit);
  return Status::ok();
}

template <class T, int D>
Status launch_mma(KernelContext& ctx, const AttentionShape& s, cudaStream_t stream) {
  KILN_RETURN_IF_ERROR((raise_smem_limit<T, D>(ctx.stream.device().index)));
  const AttentionOperands<T> a = attention_operands<T>(ctx, s);
  const int64_t blocks = a.batch * ((s.s + kQueries - 1) / kQueries);
  if (blocks > std::numeric_limits<int32_t>::max())
    return unsupported("cuda.attention tactic mma launches a block per 64 queries of each batch entry; ", blocks,
                       " blocks are too many");
  attention_mma_kernel<T, D><<<static_cast<unsigned>(blocks), kThreads, smem_bytes(D, sizeof(T)), stream>>>(a);
  return check(cudaGetLastError(), "attention (mma) kernel launch");
}

template <class T>
Status launch_for_dim(KernelContext& ctx, const AttentionShape& s, cudaStream_t stream) {
  switch (s.d) {
    case 32: return launch_mma<T, 32>(ctx, s, stream);
    case 64: return launch_mma<T, 64>(ctx, s, stream);
    case 128: return launch_mma<T, 128>(ctx, s, stream);
    default: return unsupported("cuda.attention tactic mma takes head dims 32, 64 and 128, not ", s.d);
  }
}

}  // namespace

Status attention_mma_fits(const OpCall& call) {
  if (call.inputs.size() < 3) return unsupported("cuda.attention tactic mma needs q, k and v");
  if (call.inputs[0].dims.rank() < 2 || call.inputs[2].dims.rank() < 2)
    return unsupported("cuda.attention tactic mma needs q and v of rank >= 2");
  int device = 0;
  KILN_RETURN_IF_ERROR(check(cudaGetDevice(&device), "cudaGetDevice"));
  KILN_ASSIGN_OR_RETURN(const size_t limit, shared_memory_limit(device));
  const auto [d, dv] = ref::attention_head_dims(call);
  return mma_fit(call.inputs[0].dtype, d, dv, limit);
}

bool attention_mma_aligned(const KernelContext& ctx) {
  for (int i = 0; i < 3; ++i)
    if (!aligned16(ctx.src[i].raw())) return false;
  return aligned16(ctx.dst[0].raw());
}

Status run_attention_mma(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(AttentionShape s, ref::attention_shape_of(ctx));
  Tensor& y = ctx.dst[0];
  if (y.numel() == 0) return Status::ok();
  cudaStream_t stream = native(ctx.stream);
  if (s.sk == 0)  // softmax over nothing, then a product over nothing: zeros
    return check(cudaMemsetAsync(y.raw(), 0, y.nbytes(), stream), "cudaMemsetAsync (Attention with no keys)");
  KILN_ASSIGN_OR_RETURN(const size_t limit, shared_memory_limit(ctx.stream.device().index));
  KILN_RETURN_IF_ERROR(mma_fit(ctx.src[0].dtype(), s.d, s.dv, limit));
  if (!attention_mma_aligned(ctx))
    return unsupported(
        "cuda.attention tactic mma copies q, k and v in 16-byte pieces; an operand or the output is not "
        "16-byte aligned");
  switch (ctx.src[0].dtype()) {
    case DataType::kFloat16: return launch_for_dim<__half>(ctx, s, stream);
    case DataType::kBFloat16: return launch_for_dim<__nv_bfloat16>(ctx, s, stream);
    default:
      return unsupported("cuda.attention tactic mma takes float16 and bfloat16, not ", dtype_name(ctx.src[0].dtype()));
  }
}

}  // namespace kiln::cuda
