// MLP on CUDA: per layer one cuBLASLt GEMM whose epilogue adds the bias and applies the activation (a kernel right
// after it where cuBLASLt has no epilogue for the activation); intermediates live in two halves of one scratch
// buffer the kernel keeps, sized once for the widest hidden layer. A tactic names one cuBLASLt algorithm per layer,
// joined by '+'; the candidates take each layer's i-th heuristic choice. With TF32 allowed, float32 MLPs also get the
// TF32 heuristic's candidates, with "+tf32" after the last layer's algorithm (every layer then computes in TF32).
#include <algorithm>
#include <limits>

#include "kernels/cuda/cublaslt_gemm.h"
#include "kernels/cuda/cuda_common.h"
#include "ops/mlp/mlp.h"

namespace kiln {
namespace {

constexpr int kMaxTactics = 4;
constexpr int64_t kMaxGemmDim = std::numeric_limits<int32_t>::max();
constexpr size_t kScratchAlignment = 256;

bool static_inputs(const std::vector<TensorDesc>& in) {
  for (const TensorDesc& d : in)
    if (d.present && !d.dims.is_static()) return false;
  return true;
}

// Layer l's GEMM: h_{l+1}[rows, out] = act(h_l[rows, in] @ weights_l[out, in]^T + bias_l).
Result<std::vector<cuda::GemmProblem>> layer_problems(const OpCall& call, const std::vector<TensorDesc>& in) {
  const auto& attrs = call.attrs_as<MlpAttrs>();
  const Dims& x = in[0].dims;
  if (x.rank() < 1) return invalid_argument("MLP input 'x' must have rank >= 1");
  int64_t rows = 1;
  for (int i = 0; i + 1 < x.rank(); ++i) rows *= x[i];
  std::vector<cuda::GemmProblem> out;
  for (int l = 0; l < attrs.layers(); ++l) {
    const Dims& w = in[1 + 2 * l].dims;
    cuda::GemmProblem g;
    g.dtype = in[0].dtype;
    g.m = rows;
    g.n = w[0];
    g.k = w[1];
    g.trans_b = true;
    g.bias = true;
    g.activation = attrs.activation(l);
    if (g.m > kMaxGemmDim || g.n > kMaxGemmDim || g.k > kMaxGemmDim)
      return unsupported("cuBLASLt GEMMs here take m, n and k below 2^31; MLP layer ", l, " is ", g.to_string());
    out.push_back(g);
  }
  return out;
}

std::vector<std::string> split_tactic(const std::string& tactic) {
  std::vector<std::string> parts;
  size_t from = 0;
  for (size_t plus = tactic.find('+'); plus != std::string::npos; plus = tactic.find('+', from)) {
    parts.push_back(tactic.substr(from, plus - from));
    from = plus + 1;
  }
  parts.push_back(tactic.substr(from));
  return parts;
}

// The candidates of a chain: each layer's i-th heuristic choice joined by '+', then `suffix`.
std::vector<std::string> mlp_tactics(const std::vector<cuda::GemmProblem>& problems, std::string_view suffix) {
  std::vector<std::vector<std::string>> per_layer;
  size_t most = 0;
  for (const cuda::GemmProblem& p : problems) {
    per_layer.push_back(cuda::gemm_tactics(p, kMaxTactics));
    if (per_layer.back().empty()) return {};
    most = std::max(most, per_layer.back().size());
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < most; ++i) {
    std::string t;
    for (const auto& layer : per_layer) t += (t.empty() ? "" : "+") + layer[std::min(i, layer.size() - 1)];
    t += suffix;
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(std::move(t));
  }
  return out;
}

size_t round_up(size_t bytes) { return (bytes + kScratchAlignment - 1) / kScratchAlignment * kScratchAlignment; }

class CublasLtMlp final : public Kernel {
 public:
  explicit CublasLtMlp(const std::string& tactic) : tactic_(strip_tf32_suffix(tactic)), tf32_(is_tf32_tactic(tactic)) {}

  Status plan(const OpCall& call, const std::vector<TensorDesc>& in) {
    KILN_ASSIGN_OR_RETURN(std::vector<cuda::GemmProblem> problems, layer_problems(call, in));
    for (cuda::GemmProblem& p : problems) p.tf32 = tf32_;
    std::vector<std::string> tactics(problems.size());
    if (!tactic_.empty()) {
      tactics = split_tactic(tactic_);
      if (tactics.size() != problems.size())
        return invalid_argument("MLP tactic '", tactic_, "' names ", tactics.size(), " cuBLASLt algorithms for ",
                                problems.size(), " layers; rebuild the engine");
    }
    layers_.clear();
    workspace_bytes_ = 0;
    hidden_ = 0;
    for (size_t l = 0; l < problems.size(); ++l) {
      KILN_ASSIGN_OR_RETURN(auto gemm, cuda::GemmPlan::create(problems[l], tactics[l]));
      workspace_bytes_ = std::max(workspace_bytes_, gemm->workspace_bytes());
      if (l + 1 < problems.size()) hidden_ = std::max(hidden_, problems[l].n);
      layers_.push_back(std::move(gemm));
    }
    shapes_ = in;
    return Status::ok();
  }

  std::string detail() const override {
    std::string s;
    for (const auto& layer : layers_) s += (s.empty() ? "" : "; ") + layer->detail();
    return s;
  }
  size_t workspace_bytes() const override {
    if (layers_.empty()) return workspace_bytes_;
    return workspace_bytes_ + (layers_.size() > 1 ? 2 * intermediate_bytes() : 0);
  }

  Status run(KernelContext& ctx) override {
    Tensor& y = ctx.dst[0];
    if (y.numel() == 0) return Status::ok();
    std::vector<TensorDesc> in;
    for (const Tensor& t : ctx.src) in.push_back({t.dtype(), t.dims(), t.defined()});
    bool same = !layers_.empty();
    for (size_t i = 0; same && i < std::min(in.size(), shapes_.size()); ++i) same = in[i].dims == shapes_[i].dims;
    if (!same) {
      if (!layers_.empty() && !tactic_.empty())
        return invalid_argument("cuBLASLt MLP tactic was chosen for other shapes than these (", ctx.call.to_string(),
                                "); rebuild the engine for these shapes");
      KILN_RETURN_IF_ERROR(plan(ctx.call, in));
    }
    const cudaStream_t stream = cuda::native(ctx.stream);
    const size_t half = intermediate_bytes();
    char* scratch = nullptr;
    if (layers_.size() > 1) {
      KILN_ASSIGN_OR_RETURN(void* s, intermediates_.get(ctx.allocator, 2 * half, "MLP intermediates", stream));
      scratch = static_cast<char*>(s);
    }
    KILN_ASSIGN_OR_RETURN(void* workspace,
                          workspace_.get(ctx.allocator, workspace_bytes_, "cuBLASLt workspace", stream));
    const void* src = ctx.src[0].raw();
    for (size_t l = 0; l < layers_.size(); ++l) {
      void* dst = l + 1 == layers_.size() ? y.raw() : scratch + (l % 2) * half;
      KILN_RETURN_IF_ERROR(layers_[l]->run(stream, ctx.stream.device().index, src, ctx.src[1 + 2 * l].raw(), nullptr,
                                           ctx.src[2 + 2 * l].raw(), dst, workspace));
      src = dst;
    }
    return Status::ok();
  }

 private:
  size_t intermediate_bytes() const {
    if (layers_.empty()) return 0;
    const cuda::GemmProblem& p = layers_.front()->problem();
    return round_up(static_cast<size_t>(p.m) * static_cast<size_t>(hidden_) * dtype_size(p.dtype));
  }

  std::string tactic_;  // the layers' cuBLASLt algorithms (without "+tf32")
  bool tf32_ = false;
  std::vector<TensorDesc> shapes_;
  std::vector<std::unique_ptr<cuda::GemmPlan>> layers_;
  int64_t hidden_ = 0;  // the widest intermediate
  size_t workspace_bytes_ = 0;
  cuda::DeviceScratch intermediates_, workspace_;
};

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.cublaslt.mlp",
    .op = "MLP",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) -> Status {
      if (Status ok = require_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}); !ok.is_ok())
        return unsupported("cuBLASLt GEMMs take float32, float16 and bfloat16 only: ", ok.message());
      if (!static_inputs(call.inputs)) return Status::ok();
      return layer_problems(call, call.inputs).status();
    },
    .create = [](const OpCall& call) -> Result<std::unique_ptr<Kernel>> {
      if (is_tf32_tactic(call.tactic) && call.inputs[0].dtype != DataType::kFloat32)
        return invalid_argument("cuBLASLt MLP tactic '", call.tactic,
                                "' rounds float32 inputs to TF32 but the problem is ", call.to_string(),
                                "; rebuild the engine");
      auto kernel = std::make_unique<CublasLtMlp>(call.tactic);
      if (static_inputs(call.inputs)) {
        KILN_RETURN_IF_ERROR(kernel->plan(call, call.inputs));
      } else if (!call.tactic.empty()) {
        return invalid_argument("cuBLASLt MLP tactic '", call.tactic, "' needs static shapes but the problem is ",
                                call.to_string(), "; rebuild the engine");
      }
      return std::unique_ptr<Kernel>(std::move(kernel));
    },
    .tactics = [](const OpCall& call) -> std::vector<std::string> {
      if (!static_inputs(call.inputs)) return {};
      auto problems = layer_problems(call, call.inputs);
      if (!problems) return {};
      std::vector<std::string> out = mlp_tactics(*problems, "");
      if (tf32_tactics_allowed(call)) {
        for (cuda::GemmProblem& p : *problems) p.tf32 = true;
        for (std::string& t : mlp_tactics(*problems, kTf32TacticSuffix)) out.push_back(std::move(t));
      }
      return out;
    },
});

}  // namespace
}  // namespace kiln
