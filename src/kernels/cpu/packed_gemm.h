#pragma once
// The CPU's own float32 matrix product for a B known ahead (weights): B packed once into panels of 16 columns, the
// product blocked for the caches (blocks of K rows; per six rows of A, read in place, the register kernel of
// panel_gemm.h against a group of panels), with the layer's epilogue (bias, residual, activation) applied as each
// tile is stored. Needs AVX2 and FMA (cpu::has_avx2_fma); runs an 8 x 32 AVX-512 kernel where cpu::use_avx512.
#include <cstdint>
#include <functional>
#include <vector>

#include "kiln/status.h"
#include "kiln/tensor.h"
#include "ops/activation/activation.h"

namespace kiln::cpu {

/// B (k x n) as panels of 16 columns, n padded with zero columns to a multiple of 16; each panel its k rows of 16
/// floats one after another.
struct PackedColumns {
  int64_t k = 0, n = 0;
  const float* data = nullptr;

  int64_t panels() const { return (n + 15) / 16; }
};

/// Where a B (k x n) is, element (p, j) at data[p * row_stride + j * col_stride].
struct MatrixView {
  const float* data = nullptr;
  int64_t k = 0, n = 0, row_stride = 0, col_stride = 0;
};

/// A kernel's packed B: the engine's prepared copy (made by `prepare` at build time) when there is one of the
/// right size, else packed here, once for an engine constant or on each run for weights given at run time.
class PackedWeights {
 public:
  /// The prepared blob for the engine: a 64-byte header (k, n), then the panels.
  static Result<Tensor> prepare(const MatrixView& b);
  /// At kernel creation: adopts `prepared` (a view: the engine keeps it) when it holds a k x n matrix, else packs
  /// `constant` when its data is there (an engine constant); otherwise the weights come with each run.
  void init(const Tensor* prepared, const MatrixView& constant);
  /// B for a run whose weights are `given`: packed again unless init fixed them (a buffer at the same address may
  /// hold new weights). An error when init fixed nothing and `given` has no data (an engine that stores the
  /// weights only as prepared data that does not fit this kernel).
  Result<const PackedColumns*> for_run(const MatrixView& given);

 private:
  bool adopt(const Tensor* prepared, int64_t k, int64_t n);
  void pack(const MatrixView& b);

  bool fixed_ = false;  // adopted or packed from a constant at init
  std::vector<float> storage_;
  PackedColumns columns_;
};

/// What is applied to each result before it is stored, in this order: + bias[j], + residual[i, j], activation.
struct GemmEpilogue {
  const float* bias = nullptr;      ///< n floats, or none
  const float* residual = nullptr;  ///< m x n with the output's row stride (it may be the output itself), or none
  FusedActivation fused;
};

/// c (m x n, rows ldc apart) = epilogue(a (m x k, rows lda apart) times b), on the calling thread's CPU team.
void packed_gemm(int64_t m, const float* a, int64_t lda, const PackedColumns& b, float* c, int64_t ldc,
                 const GemmEpilogue& epilogue);

/// A whose rows are made on demand (a convolution's im2col rows, never stored whole): writes rows [row, row + count)
/// (count <= 8), columns [col, col + depth) to out, row i at out + i * depth. Called from several threads at once.
using RowGather = std::function<void(int64_t row, int64_t count, int64_t col, int64_t depth, float* out)>;

/// packed_gemm with A's rows from `gather`.
void packed_gemm(int64_t m, const RowGather& gather, const PackedColumns& b, float* c, int64_t ldc,
                 const GemmEpilogue& epilogue);

}  // namespace kiln::cpu
