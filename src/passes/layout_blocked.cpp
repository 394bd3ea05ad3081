// layout-blocked: 2-D float32 convolutions run on activations in blocks of channels (LayoutOptions::channel_block: 8,
// oneDNN's nChw8c, or 16, its nChw16c on AVX-512) where the backend has such a kernel (oneDNN's jit convolutions on the
// CPU). An activation crosses into blocks once (a shuffle) and stays there between such layers: oneDNN then runs every
// layer on its own layout with no reorder around it. A stem over a few channels reads NCHW and writes blocks
// (`plain_input`) when every reader of its output runs in blocks. Each converted layer's NCHW output is kept by a
// shuffle back for readers that stay NCHW; those nobody reads are removed at the end of the pass. Weights stay as they
// are (oneDNN's own layout is prepared at build time). Runs before layout-nhwc, which takes the convolutions this pass
// leaves.
#include <unordered_map>

#include "kiln/logger.h"
#include "ops/convolution/convolution.h"
#include "ops/shuffle/shuffle.h"
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln {
namespace {

// [N, C, H, W] -> [N, C/B, H, W, B]: a reshape to [N, C/B, B, H, W], then the block's B channels moved last.
std::unique_ptr<ShuffleAttrs> to_blocks(const Dims& nchw, int64_t block) {
  auto a = std::make_unique<ShuffleAttrs>();
  a->has_reshape_dims = true;
  a->reshape_dims = {0, nchw[1] / block, block, nchw[2], nchw[3]};  // 0: the batch as it is
  a->second_transpose = {0, 1, 3, 4, 2};
  return a;
}

// [N, C/B, H, W, B] -> [N, C, H, W].
std::unique_ptr<ShuffleAttrs> from_blocks(const Dims& nchw) {
  auto a = std::make_unique<ShuffleAttrs>();
  a->first_transpose = {0, 1, 4, 2, 3};
  a->has_reshape_dims = true;
  a->reshape_dims = {0, nchw[1], nchw[2], nchw[3]};
  return a;
}

// Static channel and spatial sizes (the batch may be dynamic).
bool static_chw(const Dims& d) {
  return d.rank() == 4 && d[1] != kDynamicDim && d[2] != kDynamicDim && d[3] != kDynamicDim;
}

// Why a convolution cannot run in blocks (empty: it can), and whether it would read NCHW (a stem).
struct Fit {
  std::string why_not;
  bool plain_input = false;
};

Fit fit(const Node& n, int64_t block) {
  const auto* c = attrs_if<ConvolutionAttrs>(&n, "Convolution");
  if (!c) return {"not a convolution"};
  if (c->channels_last || c->channel_block > 0) return {"it has a layout already"};
  if (n.inputs.size() < 2 || !n.inputs[0] || !n.inputs[1] || n.inputs[0]->kind != ValueKind::kTensor)
    return {"it has no activation input"};
  const Dims& x = n.inputs[0]->dims;
  const Dims& w = n.inputs[1]->dims;
  if (x.rank() != 4 || w.rank() != 4) return {"it is not 2-D"};
  if (n.inputs[0]->dtype != DataType::kFloat32) return {str_cat("it runs in ", dtype_name(n.inputs[0]->dtype))};
  if (!static_chw(x) || !w.is_static()) return {"its channel or spatial sizes are dynamic"};
  if (!n.inputs[1]->is_constant()) return {"its weights are not a constant"};
  const int64_t ch = x[1], m = w[0], per_group = w[1];
  if (m % block != 0) return {str_cat(m, " output channels are not a multiple of ", block)};
  const bool depthwise = c->group > 1 && per_group == 1 && m == ch;
  if (c->group != 1 && !depthwise) return {"it is grouped (only ungrouped and depthwise convolutions go in blocks)"};
  if (ch % block == 0) return {};
  if (c->group == 1 && ch < block) return {"", true};
  return {str_cat(ch, " input channels are not a multiple of ", block)};
}

class Rewrite {
 public:
  Rewrite(PassContext& ctx, int64_t block) : ctx_(ctx), g_(ctx.graph()), block_(block) {}

  // Replaces `n` by its twin in blocks; on an error the graph is as it was (bar shuffles nobody reads, which
  // finish and dead-code removal drop) and the status says why.
  Status convert(Node* n, bool plain_input) {
    auto attrs = std::make_unique<ConvolutionAttrs>(static_cast<const ConvolutionAttrs&>(*n->attrs));
    attrs->channel_block = block_;
    attrs->plain_input = plain_input;
    std::vector<Value*> inputs = n->inputs;
    // x (unless the stem reads NCHW) and the residual (input 3) in blocks; the weights and bias as they are.
    for (size_t i : {size_t{0}, size_t{3}}) {
      if (i >= inputs.size() || !inputs[i] || (i == 0 && plain_input)) continue;
      KILN_ASSIGN_OR_RETURN(inputs[i], blocks_of(inputs[i]));
    }
    const std::string name = n->name;
    Value* old = n->outputs[0];
    KILN_ASSIGN_OR_RETURN(Node * twin, g_.add_node(n->op(), name + "#blocked", std::move(attrs), inputs));
    Value* y = twin->outputs[0];
    Status why = ctx_.backend_accepts(*twin);
    if (why.is_ok() && (y->dtype != old->dtype || y->dims != nchw_to_blocked(old->dims, block_)))
      why = internal_error("the blocked output ", y->dims.to_string(), " is not the blocked form of ",
                           old->dims.to_string());
    if (!why.is_ok()) {
      (void)g_.remove_node(twin);
      return why;
    }
    // The NCHW value keeps its name (readers and graph outputs know it) through the shuffle back.
    auto back = g_.add_node("Shuffle", free_name(g_, name + "/from_blocks"), from_blocks(old->dims), {y});
    if (!back) {
      (void)g_.remove_node(twin);
      return back.status();
    }
    Value* nchw = (*back)->outputs[0];
    g_.replace_all_uses(old, nchw);
    const std::string value_name = old->name;
    KILN_RETURN_IF_ERROR(g_.remove_node(n));
    KILN_RETURN_IF_ERROR(g_.rename_value(y, free_name(g_, value_name + "/blocked")));
    KILN_RETURN_IF_ERROR(g_.rename_value(nchw, value_name));
    KILN_RETURN_IF_ERROR(g_.rename_node(twin, name));
    blocks_[nchw] = y;
    shuffles_.push_back(*back);
    return Status::ok();
  }

  // Drops the shuffles nobody reads; the number left (into and out of blocks).
  Result<int> finish() {
    int left = 0;
    for (Node* s : shuffles_) {
      if (s->outputs[0]->uses.empty() && !is_graph_output(g_, s->outputs[0])) {
        KILN_RETURN_IF_ERROR(g_.remove_node(s));
        continue;
      }
      ++left;
    }
    return left;
  }

 private:
  // The blocked form of `v`: a converted layer's output, or a new shuffle.
  Result<Value*> blocks_of(Value* v) {
    if (auto it = blocks_.find(v); it != blocks_.end()) return it->second;
    if (!static_chw(v->dims) || v->dims[1] % block_ != 0)
      return unsupported("'", v->name, "' of shape ", v->dims.to_string(), " cannot be held in blocks of ", block_,
                         " channels");
    const std::string name = free_name(g_, v->name + "/to_blocks");
    KILN_ASSIGN_OR_RETURN(Node * s, g_.add_node("Shuffle", name, to_blocks(v->dims, block_), {v}, {name}));
    shuffles_.push_back(s);
    blocks_[v] = s->outputs[0];
    return s->outputs[0];
  }

  PassContext& ctx_;
  Graph& g_;
  int64_t block_;
  std::unordered_map<const Value*, Value*> blocks_;  // NCHW value -> its blocked form
  std::vector<Node*> shuffles_;                      // the shuffles made, both ways
};

// Whether every reader of `n`'s output is a convolution that can run in blocks reading them (a stem's blocked
// output then saves a shuffle rather than adding one).
bool readers_run_in_blocks(const Graph& g, const Node& n, int64_t block) {
  const Value* y = n.outputs[0];
  if (is_graph_output(g, y) || y->uses.empty()) return false;
  for (const Use& u : y->uses) {
    if (u.input != 0 && u.input != 3) return false;
    const Fit f = fit(*u.node, block);
    if (!f.why_not.empty() || f.plain_input) return false;
  }
  return true;
}

Status layout_blocked(PassContext& ctx) {
  const int64_t block = ctx.layout().channel_block;
  if (block == 0) return Status::ok();
  if (block != 8 && block != 16)
    return invalid_argument("layout-blocked takes blocks of 8 or 16 channels, not ", block);
  Graph& g = ctx.graph();
  Rewrite rewrite(ctx, block);
  int layers = 0;
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
  for (Node* n : order) {
    if (n->op() != "Convolution") continue;
    const std::string name = n->name;
    const Fit f = fit(*n, block);
    if (!f.why_not.empty()) {
      ctx.refused(str_cat("'", name, "' (Convolution) in channel blocks: ", f.why_not));
      continue;
    }
    if (f.plain_input && !readers_run_in_blocks(g, *n, block)) {
      ctx.refused(str_cat("'", name, "' (Convolution) in channel blocks: ", n->inputs[0]->dims[1],
                          " input channels, and not every reader of its output runs in blocks (a shuffle back would "
                          "cost more than the layer gains)"));
      continue;
    }
    if (Status st = rewrite.convert(n, f.plain_input); !st.is_ok()) {
      ctx.refused(str_cat("'", name, "' (Convolution) in channel blocks: ", st.message()));
      continue;
    }
    ++layers;
    ctx.applied(str_cat("'", name, "' (Convolution) runs in blocks of ", block, " channels"));
  }
  KILN_ASSIGN_OR_RETURN(int shuffles, rewrite.finish());
  if (layers > 0)
    log_info("optimizer: layout-blocked: nChw", block, "c (", layers, " convolutions in blocks of ", block,
             " channels, ", shuffles, " shuffles)");
  return Status::ok();
}

}  // namespace

Pass layout_blocked_pass() {
  return {"layout-blocked",
          "runs 2-D float32 convolutions on activations in blocks of 8 or 16 channels (oneDNN's nChw8c, nChw16c) "
          "where the backend has such kernels (CPU builds): shuffles only where the layout changes",
          layout_blocked};
}

}  // namespace kiln
