// Precision: layers run in float16 or bfloat16 where the builder config allows it and the backend has a kernel
// in that precision, with casts only at precision boundaries; everything else stays in float32.
#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "kiln/logger.h"
#include "ops/elementwise/elementwise.h"
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln {
namespace {

// Layers worth running in reduced precision on their own: the heavy compute (with the convolution's backward
// ops, so a mixed-precision training graph runs its backward in reduced precision too).
const std::set<std::string> kCompute = {
    "Convolution", "Deconvolution", "MatrixMultiply",          "FullyConnected",
    "MLP",         "Attention",     "ConvolutionBackwardData", "ConvolutionBackwardFilter"};
// Layers that follow their inputs into reduced precision (no cast of their own is worth it): pointwise and data
// movement, whose float inputs are all data.
const std::set<std::string> kFollowers = {
    "Activation",     "ElementWise",   "Unary",          "Scale",    "Pooling",
    "Shuffle",        "Concatenation", "PointwiseChain", "Identity", "ActivationBackward",
    "PoolingBackward"};
// Layers whose data inputs follow into reduced precision while their parameters and statistics stay float32
// (the kernels read those as float and accumulate in float32): op -> the data inputs. Training's batch norm, as
// mixed precision runs it; LayerNormalization between a transformer's reduced-precision GEMMs (its mean and
// variance are float32 sums inside the kernel: only its input and output are rounded, as in PyTorch's autocast).
const std::map<std::string, std::vector<int>> kDataFollowers = {
    {"BatchNormalizationTraining", {0}}, {"BatchNormalizationBackward", {0, 1}}, {"LayerNormalization", {0}}};
// Softmax, the other norms and reductions accumulate in float32 and stay there.
const std::set<std::string> kFloat32Only = {"Softmax", "LogSoftmax", "BatchNormalization", "InstanceNormalization",
                                            "LRN",     "Reduce",     "GroupNormalization"};

std::string short_name(DataType t) {
  return t == DataType::kFloat16 ? "fp16" : t == DataType::kBFloat16 ? "bf16" : "fp32";
}

// The pin on `n`: its own name, or any part of a fused name ("a + b").
std::optional<DataType> pin_of(const Node& n, const std::map<std::string, DataType>& pinned) {
  if (auto it = pinned.find(n.name); it != pinned.end()) return it->second;
  size_t start = 0;
  while (start <= n.name.size()) {
    size_t end = n.name.find(" + ", start);
    const std::string part = n.name.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (auto it = pinned.find(part); it != pinned.end()) return it->second;
    if (end == std::string::npos) break;
    start = end + 3;
  }
  return std::nullopt;
}

bool has_float32_tensor(const Node& n) {
  for (const std::vector<Value*>* list : {&n.inputs, &n.outputs})
    for (const Value* v : *list)
      if (v && v->kind == ValueKind::kTensor && v->dtype == DataType::kFloat32) return true;
  return false;
}

class Lowering {
 public:
  explicit Lowering(PassContext& ctx) : ctx_(ctx), g_(ctx.graph()) {}

  // `v` in precision `t`: the value a boundary cast came from, an earlier cast of it, or a new cast.
  Result<Value*> in_precision(Value* v, DataType t) {
    if (v->producer && v->producer->op() == "Cast" && v->producer->inputs[0]->dtype == t) return v->producer->inputs[0];
    if (auto it = casts_.find({v, t}); it != casts_.end()) return it->second;
    auto attrs = std::make_unique<CastAttrs>();
    attrs->to = t;
    KILN_ASSIGN_OR_RETURN(Node * cast, g_.add_node("Cast", free_name(g_, str_cat(v->name, "/to_", short_name(t))),
                                                   std::move(attrs), {v}));
    casts_[{v, t}] = cast->outputs[0];
    new_casts_.push_back(cast);
    return cast->outputs[0];
  }

  // Whether an input of `n` (one of `only`, when given) already comes out of a layer in precision `t` (through a
  // boundary cast).
  static bool reads_precision(const Node& n, DataType t, const std::vector<int>* only = nullptr) {
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const Value* v = n.inputs[i];
      if (only && std::find(only->begin(), only->end(), static_cast<int>(i)) == only->end()) continue;
      if (v && v->producer && v->producer->op() == "Cast" && v->producer->inputs[0]->dtype == t) return true;
    }
    return false;
  }

  // Replaces `n` by the same layer in precision `t`, casting float32 inputs (only those in `only`, when given)
  // to t and outputs back. `check`: ask the backend first. On an error the graph is as it was.
  Status lower(Node* n, DataType t, bool check, const std::vector<int>* only = nullptr) {
    std::vector<Value*> inputs;
    const size_t casts_before = new_casts_.size();
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      Value* in = n->inputs[i];
      const bool data = !only || std::find(only->begin(), only->end(), static_cast<int>(i)) != only->end();
      if (!data || !in || in->kind != ValueKind::kTensor || in->dtype != DataType::kFloat32) {
        inputs.push_back(in);
        continue;
      }
      KILN_ASSIGN_OR_RETURN(Value * c, in_precision(in, t));
      inputs.push_back(c);
    }
    auto undo_casts = [&] {
      while (new_casts_.size() > casts_before) {
        Node* c = new_casts_.back();
        new_casts_.pop_back();
        if (c->outputs[0]->uses.empty()) {
          casts_.erase({c->inputs[0], c->outputs[0]->dtype});
          (void)g_.remove_node(c);
        }
      }
    };
    const std::string name = n->name;
    auto lowered = g_.add_node(n->op(), name + "#lowering", n->attrs->clone(), inputs, {}, {});
    if (!lowered) {
      undo_casts();
      return lowered.status();
    }
    Status why = check ? ctx_.backend_accepts(**lowered) : Status::ok();
    for (size_t i = 0; why.is_ok() && i < n->outputs.size(); ++i)
      if ((*lowered)->outputs[i]->dims != n->outputs[i]->dims)
        why = internal_error("output ", i, " changes shape in ", dtype_name(t));
    if (!why.is_ok()) {
      (void)g_.remove_node(*lowered);
      undo_casts();
      return why;
    }
    // Per output, the value that takes the old name: the cast back to float32, or the output itself.
    std::vector<Value*> named;
    for (size_t i = 0; i < n->outputs.size(); ++i) {
      Value* old = n->outputs[i];
      Value* now = (*lowered)->outputs[i];
      named.push_back(now);
      if (now->dtype == old->dtype) {
        g_.replace_all_uses(old, now);
        continue;
      }
      auto attrs = std::make_unique<CastAttrs>();
      attrs->to = old->dtype;
      KILN_ASSIGN_OR_RETURN(
          Node * back,
          g_.add_node("Cast", free_name(g_, str_cat(name, "/to_", short_name(old->dtype))), std::move(attrs), {now}));
      g_.replace_all_uses(old, back->outputs[0]);
      named.back() = back->outputs[0];
    }
    std::vector<std::string> names;
    for (Value* old : n->outputs) names.push_back(old->name);
    KILN_RETURN_IF_ERROR(g_.remove_node(n));
    Node* l = *lowered;
    // The float32 value keeps the old name (readers and graph outputs know it); the lowered one is "<name>/<t>".
    for (size_t i = 0; i < names.size(); ++i) {
      Value* v = l->outputs[i];
      if (named[i] != v) KILN_RETURN_IF_ERROR(g_.rename_value(v, free_name(g_, names[i] + "/" + short_name(t))));
      KILN_RETURN_IF_ERROR(g_.rename_value(named[i], names[i]));
    }
    return g_.rename_node(l, name);
  }

  // Weights and other constants cast at build time, not on every run.
  Status fold_constant_casts() {
    FoldLimits limits;
    limits.max_node_bytes = size_t{1} << 32;
    limits.max_work = 1e12;
    bool folded = false;
    for (Node* c : new_casts_)
      if (c->inputs[0]->is_constant()) folded = g_.try_fold(c, limits).folded || folded;
    return folded ? g_.fold_known_values() : Status::ok();
  }

 private:
  PassContext& ctx_;
  Graph& g_;
  std::map<std::pair<Value*, DataType>, Value*> casts_;
  std::vector<Node*> new_casts_;
};

Status choose_precisions(PassContext& ctx) {
  const PrecisionOptions& p = ctx.precision();
  if (p.tf32)
    log_verbose("optimizer: precision: TF32 allowed (used by CUDA matrix kernels; the CPU computes in float32)");
  if (!p.any()) return Status::ok();
  std::vector<DataType> allowed;
  if (p.fp16) allowed.push_back(DataType::kFloat16);
  if (p.bf16) allowed.insert(p.prefer_fp16 ? allowed.end() : allowed.begin(), DataType::kBFloat16);
  Graph& g = ctx.graph();
  for (const auto& [name, t] : p.pinned) {
    bool found = false;
    for (Node* n : g.nodes()) found = found || pin_of(*n, {{name, t}}).has_value();
    if (!found) ctx.refused(str_cat("pinning '", name, "' to ", dtype_name(t), ": the network has no such layer"));
  }
  Lowering lowering(ctx);
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
  for (Node* n : order) {
    if (n->schema->host || !n->subgraphs.empty() || !has_float32_tensor(*n)) continue;
    const std::string name = n->name, op = n->op();
    const std::optional<DataType> pin = pin_of(*n, p.pinned);
    if (pin) {
      if (*pin == DataType::kFloat32) continue;
      // Pinned layers stay as pinned: without a fast kernel the builder runs them on the reference kernels.
      if (Status st = lowering.lower(n, *pin, false); !st.is_ok())
        return Status(st.code(), str_cat("layer '", name, "' pinned to ", dtype_name(*pin), ": ", st.message()));
      ctx.applied(str_cat("'", name, "' (", op, ") runs in ", dtype_name(*pin), " as pinned"));
      continue;
    }
    if (allowed.empty()) continue;
    if (kFloat32Only.count(op)) {
      ctx.refused(str_cat("lowering '", name, "' (", op, "): softmax, norms and reductions stay in float32"));
      continue;
    }
    if (op == "ConvolutionBackwardFilter" && n->inputs[0] && n->inputs[0]->dims.rank() >= 2 &&
        n->inputs[0]->dims[1] > 0 && n->inputs[0]->dims[1] < 8) {
      // A stem's weight gradient (3 image channels): cuDNN has no tensor-core kernel for so few 16-bit channels,
      // and its fallback took 59 ms for ResNet-50's conv1 at batch 256 on an H200.
      ctx.refused(str_cat("lowering '", name, "' (", op, "): fewer than 8 input channels: float32 is faster"));
      continue;
    }
    const bool compute = kCompute.count(op) > 0;
    const auto data_only = kDataFollowers.find(op);
    const std::vector<int>* only = data_only != kDataFollowers.end() ? &data_only->second : nullptr;
    if (!compute && !only && !kFollowers.count(op)) continue;
    std::string reasons;
    bool done = false;
    for (DataType t : allowed) {
      if (!compute && !Lowering::reads_precision(*n, t, only)) continue;  // a follower only follows
      Status st = lowering.lower(n, t, true, only);
      if (st.is_ok()) {
        ctx.applied(str_cat("'", name, "' (", op, ") runs in ", dtype_name(t)));
        done = true;
        break;
      }
      reasons += str_cat(reasons.empty() ? "" : "; ", dtype_name(t), ": ", st.message());
    }
    if (!done && !reasons.empty())
      ctx.refused(str_cat("lowering '", name, "' (", op, "): it runs in float32 (", reasons, ")"));
  }
  return lowering.fold_constant_casts();
}

}  // namespace

Pass precision_pass() {
  return {"precision",
          "runs layers in float16 / bfloat16 where allowed and a kernel exists (casts only at precision boundaries); "
          "softmax, norms and reductions stay in float32",
          choose_precisions};
}

}  // namespace kiln
