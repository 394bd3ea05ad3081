// MatrixMultiply and FullyConnected on CUDA through cuBLASLt, with the optimizer's epilogue (bias, residual,
// activation). Each call is one GEMM, a strided batch of them, or (batch dims broadcasting both ways) a few strided
// batches; a batch against one matrix folds into the rows of a single GEMM. Tactics are cuBLASLt algorithms; with
// TF32 allowed, float32 problems also get each algorithm of the TF32 heuristic with the "+tf32" suffix.
#include <algorithm>
#include <array>
#include <functional>
#include <limits>

#include "kernels/common/indexing.h"
#include "kernels/cuda/cublaslt_gemm.h"
#include "kernels/cuda/cuda_common.h"
#include "ops/matmul/matmul.h"

namespace kiln {
namespace {

constexpr int64_t kMaxGemmDim = std::numeric_limits<int32_t>::max();
constexpr int kMaxTactics = 8;

// Where the GEMM's C (added with beta) comes from.
enum class CSource {
  kNone,
  kInput,     // MatrixMultiply's c, already of the output's shape
  kResidual,  // the epilogue's residual (beta = 1)
  kFilled,    // y itself, filled first with beta * c (broadcast) + residual, then beta = 1
};

// A problem as GEMMs: `gemm` runs once per entry of `calls` (element offsets of a, b and y; c has y's layout).
struct GemmLayout {
  cuda::GemmProblem gemm;
  std::vector<std::array<int64_t, 3>> calls;
  bool folded = false;  // batch dims folded into the rows
  CSource c = CSource::kNone;
  int c_input = -1;     // the input read as C (kInput, kResidual) or broadcast into y (kFilled)
  int bias_input = -1;  // the input read as the epilogue's bias
  float fill_beta = 1.f;
  bool fill_residual = false;
  Dims out;
};

using LayoutFn = std::function<Result<GemmLayout>(const OpCall&, const std::vector<TensorDesc>&)>;

bool present(const std::vector<TensorDesc>& in, int i) { return i < static_cast<int>(in.size()) && in[i].present; }

// The largest power of two (at most 16) dividing every offset, in bytes: what the GEMM may assume of its pointers
// when the tensors themselves are 16-byte aligned (kiln's allocators give at least 64).
int alignment_of(std::initializer_list<int64_t> strides, const std::vector<std::array<int64_t, 3>>& calls,
                 size_t elem) {
  uint64_t bits = 16;
  auto take = [&](int64_t elements) { bits |= static_cast<uint64_t>(elements) * elem; };
  for (int64_t s : strides) take(s);
  for (const auto& c : calls)
    for (int64_t o : c) take(o);
  return static_cast<int>(bits & (~bits + 1));
}

Status check_limits(const cuda::GemmProblem& g) {
  if (g.m > kMaxGemmDim || g.n > kMaxGemmDim || g.k > kMaxGemmDim || g.batch > kMaxGemmDim)
    return unsupported("cuBLASLt GEMMs here take m, n, k and batch counts below 2^31; this one is ", g.to_string());
  return Status::ok();
}

Result<GemmLayout> matmul_layout(const OpCall& call, const std::vector<TensorDesc>& in) {
  const auto& attrs = call.attrs_as<MatrixMultiplyAttrs>();
  KILN_ASSIGN_OR_RETURN(MatmulShape s, matmul_shape(in[0].dims, in[1].dims, attrs));
  GemmLayout l;
  l.out = s.out;
  cuda::GemmProblem& g = l.gemm;
  g.dtype = in[0].dtype;
  g.m = s.m;
  g.n = s.n;
  g.k = s.k;
  g.trans_a = attrs.transpose_a && !s.a_vector;
  g.trans_b = attrs.transpose_b && !s.b_vector;
  g.alpha = attrs.alpha;
  g.activation = attrs.fused;
  const bool residual = present(in, kGemmResidualInput);
  // beta = 0 ignores c (as BLAS does).
  if (present(in, 2) && attrs.beta != 0.f) {
    const Dims& c = in[2].dims;
    const bool row = c.rank() >= 1 && c.numel() == s.n && c[c.rank() - 1] == s.n;
    if (row && attrs.beta == 1.f) {  // a bias over the last axis: the epilogue's
      g.bias = true;
      l.bias_input = 2;
      if (residual) {
        l.c = CSource::kResidual;
        l.c_input = kGemmResidualInput;
      }
    } else if (c.numel() == s.out.numel() && !residual) {  // broadcasts nowhere: C as it is
      l.c = CSource::kInput;
      l.c_input = 2;
    } else {
      l.c = CSource::kFilled;
      l.c_input = 2;
      l.fill_beta = attrs.beta;
      l.fill_residual = residual;
    }
  } else if (residual) {
    l.c = CSource::kResidual;
    l.c_input = kGemmResidualInput;
  }
  g.with_c = l.c != CSource::kNone;
  g.beta = l.c == CSource::kInput ? attrs.beta : 1.f;

  const int64_t a_matrix = s.m * s.k, b_matrix = s.k * s.n, y_matrix = s.m * s.n;
  const int br = s.batch.rank();
  l.folded = br > 0 && !g.trans_a && s.b_batch.numel() == 1 && s.a_batch == s.batch;
  if (l.folded || br == 0) {
    g.m = s.m * s.batch.numel();
    l.calls.push_back({0, 0, 0});
  } else {
    // The batch splits into outer dims (one call each) and the longest run of inner dims over which each operand is
    // either complete (stride: one matrix) or broadcast (stride 0): a strided batch.
    auto uniform = [&](const Dims& x, int from) {
      bool full = false, broadcast = false;
      for (int i = from; i < br; ++i) {
        if (s.batch[i] == 1) continue;
        (x[i] == 1 ? broadcast : full) = true;
      }
      return !(full && broadcast);
    };
    int split = br;
    while (split > 0 && uniform(s.a_batch, split - 1) && uniform(s.b_batch, split - 1)) --split;
    Dims outer, a_outer, b_outer;
    int64_t inner = 1;
    bool a_full = false, b_full = false;
    for (int i = 0; i < br; ++i) {
      if (i < split) {
        outer.push_back(s.batch[i]);
        a_outer.push_back(s.a_batch[i]);
        b_outer.push_back(s.b_batch[i]);
        continue;
      }
      inner *= s.batch[i];
      a_full |= s.batch[i] != 1 && s.a_batch[i] != 1;
      b_full |= s.batch[i] != 1 && s.b_batch[i] != 1;
    }
    g.batch = inner;
    g.a_stride = a_full ? a_matrix : 0;
    g.b_stride = b_full ? b_matrix : 0;
    const int64_t a_inner = a_full ? inner : 1, b_inner = b_full ? inner : 1;
    const BroadcastIndexer a_at(a_outer, outer), b_at(b_outer, outer);
    const int64_t calls = outer.numel();
    for (int64_t o = 0; o < calls; ++o)
      l.calls.push_back({a_at(o) * a_inner * a_matrix, b_at(o) * b_inner * b_matrix, o * inner * y_matrix});
  }
  g.alignment = alignment_of({g.a_stride, g.b_stride, g.batch > 1 ? y_matrix : 0}, l.calls, dtype_size(g.dtype));
  KILN_RETURN_IF_ERROR(check_limits(g));
  return l;
}

Result<GemmLayout> fully_connected_layout(const OpCall& call, const std::vector<TensorDesc>& in) {
  const auto& attrs = call.attrs_as<FullyConnectedAttrs>();
  const Dims& x = in[0].dims;
  const Dims& w = in[1].dims;
  const int r = x.rank();
  if (attrs.axis < -r || attrs.axis > r)
    return invalid_argument("FullyConnected axis ", attrs.axis, " is out of range for input 'x' of shape ",
                            x.to_string());
  const int axis = static_cast<int>(attrs.axis < 0 ? attrs.axis + r : attrs.axis);
  GemmLayout l;
  cuda::GemmProblem& g = l.gemm;
  g.dtype = in[0].dtype;
  g.m = 1;
  for (int i = 0; i < axis; ++i) {
    g.m *= x[i];
    l.out.push_back(x[i]);
  }
  g.n = w[0];
  g.k = w[1];
  l.out.push_back(g.n);
  g.trans_b = true;  // weights are [out, K]
  g.activation = attrs.fused;
  if (present(in, 2)) {
    g.bias = true;
    l.bias_input = 2;
  }
  if (present(in, kGemmResidualInput)) {
    l.c = CSource::kResidual;
    l.c_input = kGemmResidualInput;
  }
  g.with_c = l.c != CSource::kNone;
  g.beta = 1.f;
  l.calls.push_back({0, 0, 0});
  KILN_RETURN_IF_ERROR(check_limits(g));
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

const char* at(const void* base, int64_t elements, size_t elem) {
  return static_cast<const char*>(base) + static_cast<size_t>(elements) * elem;
}

class CublasLtGemm final : public Kernel {
 public:
  CublasLtGemm(LayoutFn layout, const std::string& tactic)
      : layout_fn_(std::move(layout)), tactic_(strip_tf32_suffix(tactic)), tf32_(is_tf32_tactic(tactic)) {}

  Status plan(const OpCall& call, const std::vector<TensorDesc>& in) {
    KILN_ASSIGN_OR_RETURN(layout_, layout_fn_(call, in));
    layout_.gemm.tf32 = tf32_;
    KILN_ASSIGN_OR_RETURN(gemm_, cuda::GemmPlan::create(layout_.gemm, tactic_));
    shapes_ = in;
    return Status::ok();
  }

  std::string detail() const override {
    if (!gemm_) return "";
    std::string s = gemm_->detail();
    if (layout_.folded) s += " (batch folded into rows)";
    if (layout_.calls.size() > 1) s += str_cat(" x ", layout_.calls.size(), " calls");
    if (layout_.c == CSource::kFilled) s += " (c broadcast by a kernel)";
    return s;
  }
  size_t workspace_bytes() const override { return gemm_ ? gemm_->workspace_bytes() : 0; }

  Status run(KernelContext& ctx) override {
    Tensor& y = ctx.dst[0];
    if (y.numel() == 0) return Status::ok();
    std::vector<TensorDesc> in;
    for (const Tensor& t : ctx.src) in.push_back({t.dtype(), t.dims(), t.defined()});
    if (!gemm_ || !same_shapes(in, shapes_)) {
      if (gemm_ && !tactic_.empty())
        return invalid_argument("cuBLASLt tactic '", tactic_, "' was chosen for other shapes than these (",
                                ctx.call.to_string(), "); rebuild the engine for these shapes");
      KILN_RETURN_IF_ERROR(plan(ctx.call, in));
    }
    const cudaStream_t stream = cuda::native(ctx.stream);
    const size_t elem = dtype_size(y.dtype());
    const Tensor* c_tensor = layout_.c_input >= 0 ? &ctx.src[layout_.c_input] : nullptr;
    if (layout_.c == CSource::kFilled) {
      const Tensor* r = layout_.fill_residual ? &ctx.src[kGemmResidualInput] : nullptr;
      KILN_RETURN_IF_ERROR(cuda::gemm_fill(y.dtype(), y.raw(), layout_.out, c_tensor->raw(), c_tensor->dims(),
                                           layout_.fill_beta, r ? r->raw() : nullptr, layout_.out, 1.f, stream));
    }
    const void* c = nullptr;
    if (layout_.c == CSource::kInput || layout_.c == CSource::kResidual) c = c_tensor->raw();
    if (layout_.c == CSource::kFilled) c = y.raw();
    const void* bias = layout_.bias_input >= 0 ? ctx.src[layout_.bias_input].raw() : nullptr;
    KILN_ASSIGN_OR_RETURN(void* workspace,
                          workspace_.get(ctx.allocator, gemm_->workspace_bytes(), "cuBLASLt workspace", stream));
    for (const auto& call : layout_.calls)
      KILN_RETURN_IF_ERROR(gemm_->run(stream, ctx.stream.device().index, at(ctx.src[0].raw(), call[0], elem),
                                      at(ctx.src[1].raw(), call[1], elem), c ? at(c, call[2], elem) : nullptr, bias,
                                      static_cast<char*>(y.raw()) + call[2] * static_cast<int64_t>(elem), workspace));
    return Status::ok();
  }

 private:
  LayoutFn layout_fn_;
  std::string tactic_;  // the cuBLASLt algorithm (without "+tf32")
  bool tf32_ = false;
  std::vector<TensorDesc> shapes_;  // what the plan is for
  GemmLayout layout_;
  std::unique_ptr<cuda::GemmPlan> gemm_;
  cuda::DeviceScratch workspace_;
};

Status gemm_supports(const OpCall& call, const LayoutFn& layout) {
  if (Status ok = require_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}); !ok.is_ok())
    return unsupported("cuBLASLt GEMMs take float32, float16 and bfloat16 only: ", ok.message());
  if (!static_inputs(call.inputs)) return Status::ok();  // planned when the shapes are known
  return layout(call, call.inputs).status();
}

std::vector<std::string> gemm_tactics(const OpCall& call, const LayoutFn& layout) {
  if (!static_inputs(call.inputs)) return {};
  auto l = layout(call, call.inputs);
  if (!l) return {};
  std::vector<std::string> out = cuda::gemm_tactics(l->gemm, kMaxTactics);
  if (tf32_tactics_allowed(call)) {
    l->gemm.tf32 = true;
    for (const std::string& t : cuda::gemm_tactics(l->gemm, kMaxTactics))
      out.push_back(t + std::string(kTf32TacticSuffix));
  }
  return out;
}

Result<std::unique_ptr<Kernel>> gemm_create(const OpCall& call, const LayoutFn& layout) {
  if (is_tf32_tactic(call.tactic) && call.inputs[0].dtype != DataType::kFloat32)
    return invalid_argument("cuBLASLt tactic '", call.tactic, "' rounds float32 inputs to TF32 but the problem is ",
                            call.to_string(), "; rebuild the engine");
  auto kernel = std::make_unique<CublasLtGemm>(layout, call.tactic);
  if (static_inputs(call.inputs)) {
    KILN_RETURN_IF_ERROR(kernel->plan(call, call.inputs));
  } else if (!call.tactic.empty()) {
    return invalid_argument("cuBLASLt tactic '", call.tactic, "' needs static shapes but the problem is ",
                            call.to_string(), "; rebuild the engine");
  }
  return std::unique_ptr<Kernel>(std::move(kernel));
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.cublaslt.matrix_multiply",
    .op = "MatrixMultiply",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) { return gemm_supports(call, matmul_layout); },
    .create = [](const OpCall& call) { return gemm_create(call, matmul_layout); },
    .tactics = [](const OpCall& call) { return gemm_tactics(call, matmul_layout); },
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.cublaslt.fully_connected",
    .op = "FullyConnected",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) { return gemm_supports(call, fully_connected_layout); },
    .create = [](const OpCall& call) { return gemm_create(call, fully_connected_layout); },
    .tactics = [](const OpCall& call) { return gemm_tactics(call, fully_connected_layout); },
});

}  // namespace
}  // namespace kiln
