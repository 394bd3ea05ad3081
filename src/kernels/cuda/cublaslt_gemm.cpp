#include "kernels/cuda/cublaslt_gemm.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>

#include "core/cuda_runtime.h"
#include "kernels/cuda/cuda_common.h"

namespace kiln::cuda {
namespace {

constexpr uint64_t kMaxWorkspace = uint64_t{32} << 20;  // the most workspace one GEMM's algorithm may ask for
constexpr int kTacticSearch = 32;                       // heuristic candidates searched for a named tactic

// float32 compute, with inputs rounded to TF32 when a float32 problem allows it.
cublasComputeType_t compute_type(const GemmProblem& p) {
  return p.tf32 && p.dtype == DataType::kFloat32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

Status lt_check(cublasStatus_t err, const char* call, const GemmProblem& p) {
  if (err == CUBLAS_STATUS_SUCCESS) return Status::ok();
  StatusCode code = StatusCode::kDeviceError;
  if (err == CUBLAS_STATUS_ALLOC_FAILED) code = StatusCode::kOutOfMemory;
  if (err == CUBLAS_STATUS_NOT_SUPPORTED) code = StatusCode::kUnsupported;
  return Status(code, str_cat(call, " for the GEMM ", p.to_string(), ": ", cublasGetStatusString(err)));
}

struct LtHandles {
  std::map<int, cublasLtHandle_t> handles;
  LtHandles() = default;
  LtHandles(const LtHandles&) = delete;
  LtHandles& operator=(const LtHandles&) = delete;
  ~LtHandles() {
    for (auto& [_, h] : handles) cublasLtDestroy(h);
  }
};
thread_local LtHandles lt_handles;

Result<int> current_device() {
  int device = 0;
  KILN_RETURN_IF_ERROR(check(cudaGetDevice(&device), "cudaGetDevice"));
  return device;
}

const char* epilogue_name(cublasLtEpilogue_t e) {
  switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: return "none";
    case CUBLASLT_EPILOGUE_BIAS: return "bias";
    case CUBLASLT_EPILOGUE_RELU: return "relu";
    case CUBLASLT_EPILOGUE_RELU_BIAS: return "bias+relu";
    case CUBLASLT_EPILOGUE_GELU: return "gelu";
    case CUBLASLT_EPILOGUE_GELU_BIAS: return "bias+gelu";
    default: return "other";
  }
}

// The epilogue cuBLASLt computes for `p` when it fuses the activation; `own` says whether the activation is left to
// a kernel after the GEMM. cuBLASLt's GELU is the tanh approximation, so only that form is fused (beta != 0 selects
// it in kiln's GELU), and only for float16/bfloat16: its tanh may be the fast hardware approximation, whose error
// (~5e-4 relative) float32's tolerance does not allow. The erf form and every other activation run as a kernel.
cublasLtEpilogue_t fused_epilogue(const GemmProblem& p, bool& own) {
  own = false;
  const FusedActivation& act = p.activation;
  if (act.on && act.kind == ActivationKind::kRelu) return p.bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
  if (act.on && act.kind == ActivationKind::kGelu && act.beta != 0.f && p.dtype != DataType::kFloat32)
    return p.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
  own = act.on;
  return p.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

template <class T>
T algo_config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T value{};
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &value, sizeof(value), &written) != CUBLAS_STATUS_SUCCESS)
    return T{};
  return value;
}

std::string encode(const cublasLtMatmulAlgo_t& a) {
  return str_cat("a", algo_config<int32_t>(a, CUBLASLT_ALGO_CONFIG_ID), "-t",
                 algo_config<uint32_t>(a, CUBLASLT_ALGO_CONFIG_TILE_ID), "-s",
                 algo_config<uint32_t>(a, CUBLASLT_ALGO_CONFIG_STAGES_ID), "-k",
                 algo_config<int32_t>(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM), "-r",
                 algo_config<uint32_t>(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME), "-w",
                 algo_config<uint32_t>(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING), "-c",
                 algo_config<uint32_t>(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION), "-i",
                 static_cast<unsigned>(algo_config<uint16_t>(a, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID)), "-l",
                 static_cast<unsigned>(algo_config<uint16_t>(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID)));
}

// A tactic string taken apart; nullopt when it is not one this file writes.
struct AlgoConfig {
  int32_t id = 0, splitk = 1;
  uint32_t tile = 0, stages = 0, reduction = 0, swizzle = 0, custom = 0;
  unsigned inner = 0, cluster = 0;
};

std::optional<AlgoConfig> decode(const std::string& tactic) {
  AlgoConfig c;
  int used = 0;
  const int got = std::sscanf(tactic.c_str(), "a%d-t%u-s%u-k%d-r%u-w%u-c%u-i%u-l%u%n", &c.id, &c.tile, &c.stages,
                              &c.splitk, &c.reduction, &c.swizzle, &c.custom, &c.inner, &c.cluster, &used);
  if (got != 9 || used != static_cast<int>(tactic.size()) || c.inner > UINT16_MAX || c.cluster > UINT16_MAX)
    return std::nullopt;
  return c;
}

}  // namespace

struct GemmPlan::Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr;  // cuBLASLt's A: our b
  cublasLtMatrixLayout_t b = nullptr;  // cuBLASLt's B: our a
  cublasLtMatrixLayout_t c = nullptr;  // C and D: our y (and c)
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;

  Descriptors() = default;
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
  ~Descriptors() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

namespace {

using Descriptors = std::unique_ptr<GemmPlan::Descriptors>;

// A column-major layout of `rows` x `cols` with leading dimension `ld`, strided-batched when p.batch > 1.
Status make_layout(cublasLtMatrixLayout_t& layout, const GemmProblem& p, DataType dtype, uint64_t rows, uint64_t cols,
                   int64_t ld, int64_t batch_stride) {
  const cudaDataType_t type = *cuda_dtype(dtype);
  KILN_RETURN_IF_ERROR(
      lt_check(cublasLtMatrixLayoutCreate(&layout, type, rows, cols, ld), "cublasLtMatrixLayoutCreate", p));
  if (p.batch == 1) return Status::ok();
  const auto count = static_cast<int32_t>(p.batch);
  KILN_RETURN_IF_ERROR(
      lt_check(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
               "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)", p));
  return lt_check(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_stride,
                                                   sizeof(batch_stride)),
                  "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)", p);
}

// Row-major y = op(a) @ op(b) is column-major y^T = op(b)^T @ op(a)^T: cuBLASLt's A is our b, its B our a, and the
// row-major matrices are read as their column-major transposes (same memory, rows and columns swapped).
Result<Descriptors> make_descriptors(const GemmProblem& p, cublasLtEpilogue_t epilogue) {
  auto d = std::make_unique<GemmPlan::Descriptors>();
  d->epilogue = epilogue;
  KILN_RETURN_IF_ERROR(
      lt_check(cublasLtMatmulDescCreate(&d->op, compute_type(p), CUDA_R_32F), "cublasLtMatmulDescCreate", p));
  const cublasOperation_t op_a = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  KILN_RETURN_IF_ERROR(lt_check(cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)),
                                "cublasLtMatmulDescSetAttribute(TRANSA)", p));
  KILN_RETURN_IF_ERROR(lt_check(cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)),
                                "cublasLtMatmulDescSetAttribute(TRANSB)", p));
  KILN_RETURN_IF_ERROR(
      lt_check(cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)),
               "cublasLtMatmulDescSetAttribute(EPILOGUE)", p));
  const auto m = static_cast<uint64_t>(p.m), n = static_cast<uint64_t>(p.n), k = static_cast<uint64_t>(p.k);
  // Our b: [k, n] row-major is column-major n x k (ld n); transposed, [n, k] is column-major k x n (ld k).
  KILN_RETURN_IF_ERROR(
      make_layout(d->a, p, p.dtype, p.trans_b ? k : n, p.trans_b ? n : k, p.trans_b ? p.k : p.n, p.b_stride));
  // Our a: [m, k] row-major is column-major k x m (ld k); transposed, [k, m] is column-major m x k (ld m).
  KILN_RETURN_IF_ERROR(
      make_layout(d->b, p, p.dtype, p.trans_a ? m : k, p.trans_a ? k : m, p.trans_a ? p.m : p.k, p.a_stride));
  // y (and c): [m, n] row-major is column-major n x m (ld n).
  KILN_RETURN_IF_ERROR(make_layout(d->c, p, p.y_dtype(), n, m, p.n, p.m * p.n));
  KILN_RETURN_IF_ERROR(lt_check(cublasLtMatmulPreferenceCreate(&d->pref), "cublasLtMatmulPreferenceCreate", p));
  KILN_RETURN_IF_ERROR(lt_check(cublasLtMatmulPreferenceSetAttribute(d->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                     &kMaxWorkspace, sizeof(kMaxWorkspace)),
                                "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)", p));
  const auto align = static_cast<uint32_t>(p.alignment);
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    KILN_RETURN_IF_ERROR(lt_check(cublasLtMatmulPreferenceSetAttribute(d->pref, attr, &align, sizeof(align)),
                                  "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)", p));
  return d;
}

Result<std::vector<cublasLtMatmulHeuristicResult_t>> heuristic(cublasLtHandle_t h, const GemmProblem& p,
                                                               const GemmPlan::Descriptors& d, int count) {
  std::vector<cublasLtMatmulHeuristicResult_t> found(static_cast<size_t>(count));
  int returned = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(h, d.op, d.a, d.b, d.c, d.c, d.pref, count, found.data(), &returned);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED)
    returned = 0;  // no algorithm for this configuration
  else
    KILN_RETURN_IF_ERROR(lt_check(st, "cublasLtMatmulAlgoGetHeuristic", p));
  found.resize(static_cast<size_t>(std::clamp(returned, 0, count)));
  std::erase_if(found, [](const cublasLtMatmulHeuristicResult_t& r) { return r.state != CUBLAS_STATUS_SUCCESS; });
  return found;
}

// The descriptors of `p` and cuBLASLt's candidates for them: with the activation fused into cuBLASLt's epilogue
// where it has one, else (or when no algorithm takes the fused epilogue) with the activation left to a kernel.
struct Candidates {
  Descriptors d;
  bool own_activation = false;
  std::vector<cublasLtMatmulHeuristicResult_t> algos;
};

Result<Candidates> candidates(cublasLtHandle_t h, const GemmProblem& p, int count) {
  Candidates c;
  const cublasLtEpilogue_t fused = fused_epilogue(p, c.own_activation);
  KILN_ASSIGN_OR_RETURN(c.d, make_descriptors(p, fused));
  auto found = heuristic(h, p, *c.d, count);
  const bool fusing = p.activation.on && !c.own_activation;
  if (!found && !fusing) return found.take_status();
  if (found) c.algos = std::move(*found);
  if (c.algos.empty() && fusing) {
    c.own_activation = true;
    KILN_ASSIGN_OR_RETURN(c.d, make_descriptors(p, p.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT));
    KILN_ASSIGN_OR_RETURN(c.algos, heuristic(h, p, *c.d, count));
  }
  if (c.algos.empty())
    return unsupported("cuBLASLt has no algorithm for the GEMM ", p.to_string(),
                       " (cublasLtMatmulAlgoGetHeuristic returned none)");
  return c;
}

bool plannable(const GemmProblem& p) { return p.m > 0 && p.n > 0 && p.k > 0 && p.batch > 0; }

bool aligned(const void* ptr, int alignment) { return reinterpret_cast<uintptr_t>(ptr) % alignment == 0; }

}  // namespace

std::string GemmProblem::to_string() const {
  std::string s = str_cat(dtype_name(dtype), " m=", m, " n=", n, " k=", k);
  if (y_dtype() != dtype) s += str_cat(" (", dtype_name(y_dtype()), " out)");
  if (batch != 1) s += str_cat(" batch=", batch, " (strides a ", a_stride, ", b ", b_stride, ")");
  if (trans_a) s += " a transposed";
  if (trans_b) s += " b transposed";
  if (tf32 && dtype == DataType::kFloat32) s += " tf32";
  if (alpha != 1.f) s += str_cat(" alpha=", alpha);
  if (with_c) s += str_cat(" beta=", beta);
  if (bias) s += " bias";
  if (activation.on) s += str_cat(" ", enum_name(activation.kind));
  return s;
}

Result<cublasLtHandle_t> cublaslt_handle(int device) {
  auto it = lt_handles.handles.find(device);
  if (it != lt_handles.handles.end()) return it->second;
  KILN_RETURN_IF_ERROR(check(cudaSetDevice(device), "cudaSetDevice"));
  cublasLtHandle_t h = nullptr;
  KILN_RETURN_IF_ERROR(check(cublasLtCreate(&h), "cublasLtCreate"));
  lt_handles.handles[device] = h;
  return h;
}

std::vector<std::string> gemm_tactics(const GemmProblem& p, int max) {
  if (!gpu_available() || !plannable(p) || max < 1) return {};
  auto device = current_device();
  if (!device) return {};
  auto h = cublaslt_handle(*device);
  if (!h) return {};
  auto found = candidates(*h, p, max);
  if (!found) return {};
  std::vector<std::string> out;
  for (const auto& r : found->algos) {
    std::string t = encode(r.algo);
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(std::move(t));
  }
  return out;
}

GemmPlan::~GemmPlan() = default;

Result<std::unique_ptr<GemmPlan>> GemmPlan::create(const GemmProblem& p, const std::string& tactic) {
  std::unique_ptr<GemmPlan> plan(new GemmPlan());
  plan->p_ = p;
  if (p.dtype != DataType::kFloat32 && p.dtype != DataType::kFloat16 && p.dtype != DataType::kBFloat16)
    return unsupported("cuBLASLt GEMMs here take float32, float16 or bfloat16, not ", dtype_name(p.dtype));
  if (p.alignment < 1 || (p.alignment & (p.alignment - 1)) != 0)
    return internal_error("GEMM alignment ", p.alignment, " is not a power of two");
  if (p.y_dtype() != p.dtype && (p.y_dtype() != DataType::kFloat32 || p.bias || p.activation.on))
    return internal_error("the GEMM ", p.to_string(),
                          " asks for another output type than its inputs' with a bias or an activation, or not "
                          "float32; GemmPlan takes float32 out of float16/bfloat16 only without an epilogue");
  if (!plannable(p)) {
    // Nothing to multiply: no output, or K = 0 (y = beta * c + bias, then the activation, by own kernels).
    if (!tactic.empty())
      return invalid_argument("tactic '", tactic, "' names a cuBLASLt algorithm but the GEMM ", p.to_string(),
                              " has nothing to multiply; rebuild the engine");
    plan->own_activation_ = p.activation.on;
    return plan;
  }
  KILN_ASSIGN_OR_RETURN(int device, current_device());
  KILN_ASSIGN_OR_RETURN(cublasLtHandle_t h, cublaslt_handle(device));
  KILN_ASSIGN_OR_RETURN(Candidates c, candidates(h, p, tactic.empty() ? 1 : kTacticSearch));
  plan->own_activation_ = c.own_activation;
  plan->d_ = std::move(c.d);
  if (tactic.empty()) {
    plan->algo_ = c.algos.front().algo;
    plan->workspace_ = c.algos.front().workspaceSize;
    plan->tactic_ = encode(plan->algo_);
    return plan;
  }
  for (const auto& r : c.algos)
    if (encode(r.algo) == tactic) {
      plan->algo_ = r.algo;
      plan->workspace_ = r.workspaceSize;
      plan->tactic_ = tactic;
      return plan;
    }
  // Not among the heuristic's candidates now: rebuild the algorithm from its configuration and let cuBLASLt check it.
  const std::optional<AlgoConfig> cfg = decode(tactic);
  if (!cfg)
    return invalid_argument("'", tactic, "' is not a cuBLASLt tactic (expected a<id>-t<tile>-s<stages>-k<splitK>-",
                            "r<reduction>-w<swizzle>-c<custom>-i<inner>-l<cluster>); rebuild the engine");
  const cudaDataType_t type = *cuda_dtype(p.dtype), y_type = *cuda_dtype(p.y_dtype());
  cublasLtMatmulAlgo_t algo{};
  const std::string what = str_cat("tactic '", tactic, "'");
  KILN_RETURN_IF_ERROR(
      lt_check(cublasLtMatmulAlgoInit(h, compute_type(p), CUDA_R_32F, type, type, y_type, y_type, cfg->id, &algo),
               str_cat("cublasLtMatmulAlgoInit (", what, ")").c_str(), p));
  const auto inner = static_cast<uint16_t>(cfg->inner), cluster = static_cast<uint16_t>(cfg->cluster);
  const struct {
    cublasLtMatmulAlgoConfigAttributes_t attr;
    const void* value;
    size_t size;
  } settings[] = {
      {CUBLASLT_ALGO_CONFIG_TILE_ID, &cfg->tile, sizeof(cfg->tile)},
      {CUBLASLT_ALGO_CONFIG_STAGES_ID, &cfg->stages, sizeof(cfg->stages)},
      {CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &cfg->splitk, sizeof(cfg->splitk)},
      {CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &cfg->reduction, sizeof(cfg->reduction)},
      {CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &cfg->swizzle, sizeof(cfg->swizzle)},
      {CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &cfg->custom, sizeof(cfg->custom)},
      {CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, &inner, sizeof(inner)},
      {CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof(cluster)},
  };
  for (const auto& s : settings)
    KILN_RETURN_IF_ERROR(lt_check(cublasLtMatmulAlgoConfigSetAttribute(&algo, s.attr, s.value, s.size),
                                  str_cat("cublasLtMatmulAlgoConfigSetAttribute (", what, ")").c_str(), p));
  cublasLtMatmulHeuristicResult_t checked{};
  const GemmPlan::Descriptors& d = *plan->d_;
  const cublasStatus_t st = cublasLtMatmulAlgoCheck(h, d.op, d.a, d.b, d.c, d.c, &algo, &checked);
  if (st != CUBLAS_STATUS_SUCCESS || checked.state != CUBLAS_STATUS_SUCCESS)
    return unsupported(what, " is not a valid cuBLASLt algorithm for the GEMM ", p.to_string(),
                       " on this GPU and cuBLASLt release (cublasLtMatmulAlgoCheck: ",
                       cublasGetStatusString(st != CUBLAS_STATUS_SUCCESS ? st : checked.state),
                       "); rebuild the engine");
  plan->algo_ = algo;
  plan->workspace_ = checked.workspaceSize;
  plan->tactic_ = tactic;
  return plan;
}

std::string GemmPlan::detail() const {
  if (!d_) return own_activation_ ? str_cat("no product (K = 0); ", enum_name(p_.activation.kind), " kernel") : "";
  std::string s = str_cat("cuBLASLt ", tactic_, " epilogue ", epilogue_name(d_->epilogue));
  if (compute_type(p_) == CUBLAS_COMPUTE_32F_FAST_TF32) s += " (TF32 compute)";
  if (own_activation_) s += str_cat(" + ", enum_name(p_.activation.kind), " kernel");
  return s;
}

Status GemmPlan::run(cudaStream_t stream, int device, const void* a, const void* b, const void* c, const void* bias,
                     void* y, void* workspace) const {
  const GemmProblem& p = p_;
  if (p.m <= 0 || p.n <= 0 || p.batch <= 0) return Status::ok();
  const int64_t count = p.batch * p.m * p.n;
  if (!d_) {  // K = 0
    const Dims out{p.batch * p.m, p.n};
    KILN_RETURN_IF_ERROR(gemm_fill(p.y_dtype(), y, out, p.with_c ? c : nullptr, out, p.beta, p.bias ? bias : nullptr,
                                   Dims{p.n}, 1.f, stream));
    return gemm_activation(p.y_dtype(), y, count, p.activation, stream);
  }
  const struct {
    const void* ptr;
    const char* name;
  } operands[] = {{a, "a"}, {b, "b"}, {y, "the output"}, {p.with_c ? c : y, "c"}};
  for (const auto& o : operands)
    if (!aligned(o.ptr, p.alignment))
      return invalid_argument("the GEMM ", p.to_string(), " was planned for ", p.alignment,
                              "-byte aligned buffers but ", o.name, " is at ", o.ptr, "; give it a ", p.alignment,
                              "-byte aligned device buffer");
  KILN_ASSIGN_OR_RETURN(cublasLtHandle_t h, cublaslt_handle(device));
  if (p.bias)
    KILN_RETURN_IF_ERROR(
        lt_check(cublasLtMatmulDescSetAttribute(d_->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
                 "cublasLtMatmulDescSetAttribute(BIAS_POINTER)", p));
  const float alpha = p.alpha, beta = p.with_c ? p.beta : 0.f;
  KILN_RETURN_IF_ERROR(lt_check(cublasLtMatmul(h, d_->op, &alpha, b, d_->a, a, d_->b, &beta, p.with_c ? c : y, d_->c, y,
                                               d_->c, &algo_, workspace, workspace_, stream),
                                str_cat("cublasLtMatmul (", tactic_, ")").c_str(), p));
  if (own_activation_) return gemm_activation(p.y_dtype(), y, count, p.activation, stream);
  return Status::ok();
}

Result<void*> DeviceScratch::get(Allocator& allocator, size_t bytes, const char* tag, cudaStream_t stream) {
  if (bytes == 0) return nullptr;
  if (buffer_.defined() && owner_ == &allocator && buffer_.nbytes() >= bytes) return buffer_.raw();
  if (buffer_.defined()) {
    // Work queued earlier may still use the old buffer: let it finish before the memory goes back.
    KILN_RETURN_IF_ERROR(check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
    buffer_ = Tensor();
  }
  KILN_ASSIGN_OR_RETURN(buffer_, Tensor::empty(DataType::kUInt8, {static_cast<int64_t>(bytes)}, allocator, tag));
  owner_ = &allocator;
  return buffer_.raw();
}

}  // namespace kiln::cuda
