#pragma once
// One cuBLASLt GEMM: row-major problems (optionally strided-batched, a batch stride of 0 broadcasting an operand)
// expressed for cuBLASLt's column-major API, with bias / ReLU / GELU (tanh) epilogues, a residual through C, and any
// other activation as a small kernel on the output right after the GEMM. Float32, float16 and bfloat16 with float32
// compute; float32 stays exact float32 unless the problem asks for TF32 (CUBLAS_COMPUTE_32F_FAST_TF32: inputs rounded
// to TF32 on tensor cores), which the GEMM ops offer as tactics with the "+tf32" suffix when the builder allows it.
//
// Tactics are cuBLASLt algorithms written as their configuration ("a<id>-t<tile>-s<stages>-k<splitK>-r<reduction>-
// w<swizzle>-c<custom>-i<inner shape>-l<cluster shape>"): the string names the algorithm itself, not a rank in one
// heuristic answer, so a timing-cache entry or an engine keeps meaning the same kernel even if the heuristic's
// order changes (another workspace limit, another cuBLASLt release). `create` looks the string up among the
// heuristic's candidates and otherwise rebuilds the algorithm from it and asks cuBLASLt to check it.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/registry.h"
#include "ops/activation/activation.h"

namespace kiln::cuda {

/// The calling thread's cuBLASLt handle for `device` (created on first use).
Result<cublasLtHandle_t> cublaslt_handle(int device);

/// y[b] = act(alpha * op(a[b]) @ op(b[b]) + beta * c[b] + bias) for b < batch, all row-major: a is [m, k] ([k, m]
/// when trans_a), b is [k, n] ([n, k] when trans_b), y and c are [m, n] (c has y's layout and may be y itself),
/// bias is [n]. Batch strides are in elements; 0 repeats one matrix for every batch.
struct GemmProblem {
  DataType dtype = DataType::kFloat32;  ///< a's and b's type (and y's and c's unless out_dtype says otherwise)
  /// y's (and c's) type when it is not `dtype`: float32 out of float16/bfloat16 inputs (no bias or activation).
  std::optional<DataType> out_dtype;
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  bool tf32 = false;  ///< float32 inputs rounded to TF32 (CUBLAS_COMPUTE_32F_FAST_TF32); ignored for other dtypes
  int64_t batch = 1;
  int64_t a_stride = 0, b_stride = 0;  ///< batch strides of a and b (y and c: m * n)
  float alpha = 1.f;
  bool with_c = false;  ///< c is read (with beta); otherwise beta is 0
  float beta = 0.f;
  bool bias = false;
  FusedActivation activation;
  /// The alignment in bytes every pointer passed to `run` is promised to have (the heuristic relies on it).
  int alignment = 16;

  DataType y_dtype() const { return out_dtype.value_or(dtype); }
  std::string to_string() const;
};

/// The cuBLASLt algorithms cuBLASLt's heuristic proposes for `p` (at most `max`, best first) as tactic strings;
/// empty when no GPU answers or cuBLASLt has none.
std::vector<std::string> gemm_tactics(const GemmProblem& p, int max = 8);

/// A GEMM planned for one problem and one algorithm: descriptors, algorithm and workspace size are fixed at
/// creation; `run` only launches.
class GemmPlan {
 public:
  /// Plans `p` with the algorithm named by `tactic` (empty: the heuristic's first). Fails, naming the problem,
  /// when cuBLASLt has no algorithm for it or the tactic is not valid for it on this GPU and cuBLASLt release.
  static Result<std::unique_ptr<GemmPlan>> create(const GemmProblem& p, const std::string& tactic);
  ~GemmPlan();
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;

  const GemmProblem& problem() const { return p_; }
  size_t workspace_bytes() const { return workspace_; }
  /// The algorithm as a tactic string, and how the epilogue is computed, for logs and the inspector.
  const std::string& tactic() const { return tactic_; }
  std::string detail() const;

  /// Enqueues the GEMM (and the activation kernel when cuBLASLt has no epilogue for it) on `stream`. `c` may equal
  /// `y`; it and `bias` are ignored unless the problem has them. `workspace` holds workspace_bytes().
  Status run(cudaStream_t stream, int device, const void* a, const void* b, const void* c, const void* bias, void* y,
             void* workspace) const;

  struct Descriptors;  ///< cuBLASLt's descriptors (defined in the .cpp)

 private:
  GemmPlan() = default;

  GemmProblem p_;
  std::unique_ptr<Descriptors> d_;
  cublasLtMatmulAlgo_t algo_{};
  size_t workspace_ = 0;
  std::string tactic_;
  bool own_activation_ = false;  // the activation runs as a kernel after the GEMM
};

/// y = scale1 * src1 + scale2 * src2 over `out` (each source optional, broadcast numpy-style to `out`; absent ones
/// count 0), computed in float32. `y` may be one of the sources when that source is not broadcast.
Status gemm_fill(DataType dtype, void* y, const Dims& out, const void* src1, const Dims& dims1, float scale1,
                 const void* src2, const Dims& dims2, float scale2, cudaStream_t stream);
/// y = act(y) in place over `count` elements, computed in float32 (a no-op when the activation is off).
Status gemm_activation(DataType dtype, void* y, int64_t count, const FusedActivation& act, cudaStream_t stream);

/// Scratch device memory a kernel instance keeps between runs (workspace, intermediates), allocated from the
/// context's allocator on first use and grown (after `stream` is done with the old one) when a run needs more.
class DeviceScratch {
 public:
  Result<void*> get(Allocator& allocator, size_t bytes, const char* tag, cudaStream_t stream);

 private:
  Tensor buffer_;
  const Allocator* owner_ = nullptr;
};

}  // namespace kiln::cuda
