// The seed's fusion catalog beyond convolutions and GEMMs: shuffle + shuffle, shuffle + reduce, reduce (average
// over the spatial axes) -> pooling, the reduction fusions (L1Norm, sum of squares, L2Norm, LogSum, LogSumExp)
// and scale + activation.
#include <algorithm>
#include <numeric>
#include <set>

#include "ops/activation/activation.h"
#include "ops/elementwise/elementwise.h"
#include "ops/pooling/pooling.h"
#include "ops/reduce/reduce.h"
#include "ops/scale/scale.h"
#include "ops/shuffle/shuffle.h"
#include "ops/unary/unary.h"
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln {
namespace {

using Perm = std::vector<int64_t>;

bool is_identity(const Perm& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

Dims permuted(const Dims& d, const Perm& p) {
  Dims out = d;
  for (size_t i = 0; i < p.size(); ++i) out[static_cast<int>(i)] = d[static_cast<int>(p[i])];
  return out;
}

// ---- shuffle + shuffle ----

// One step of a shuffle: a transpose by `perm`, or a reshape to `dims`.
struct ShuffleStep {
  bool transpose = false;
  Perm perm;
  Dims dims;    // a reshape's target
  Dims before;  // the dims the step reads
};

// The steps of a Shuffle node with static dims: its first transpose, reshape, second transpose (each if present).
std::vector<ShuffleStep> shuffle_steps(const Node& n) {
  const auto& a = static_cast<const ShuffleAttrs&>(*n.attrs);
  const Dims in = n.inputs[0]->dims, out = n.outputs[0]->dims;
  std::vector<ShuffleStep> steps;
  Dims cur = in;
  if (!a.first_transpose.empty()) {
    steps.push_back({true, a.first_transpose, {}, cur});
    cur = permuted(cur, a.first_transpose);
  }
  if (a.has_reshape_dims) {
    Dims target = out;  // the reshape's result is the output before the second transpose
    if (!a.second_transpose.empty())
      for (size_t i = 0; i < a.second_transpose.size(); ++i)
        target[static_cast<int>(a.second_transpose[i])] = out[static_cast<int>(i)];
    steps.push_back({false, {}, target, cur});
    cur = target;
  }
  if (!a.second_transpose.empty()) steps.push_back({true, a.second_transpose, {}, cur});
  return steps;
}

// Appends `s` to `out`, merging it with the previous step (transposes compose, reshapes replace) and dropping
// steps that change nothing.
void push_step(std::vector<ShuffleStep>& out, ShuffleStep s) {
  if (s.transpose && is_identity(s.perm)) return;
  if (!s.transpose && s.dims == s.before) return;
  if (!out.empty() && out.back().transpose == s.transpose) {
    ShuffleStep prev = out.back();
    out.pop_back();
    ShuffleStep merged = prev;
    if (s.transpose)
      for (size_t i = 0; i < s.perm.size(); ++i) merged.perm[i] = prev.perm[static_cast<size_t>(s.perm[i])];
    else
      merged.dims = s.dims;
    push_step(out, merged);
    return;
  }
  out.push_back(std::move(s));
}

// One Shuffle's attributes for `steps` ([transpose] [reshape] [transpose]), or nullopt when they do not fit it.
std::optional<ShuffleAttrs> as_one_shuffle(const std::vector<ShuffleStep>& steps) {
  ShuffleAttrs a;
  size_t i = 0;
  if (i < steps.size() && steps[i].transpose && (i + 1 == steps.size() || !steps[i + 1].transpose))
    a.first_transpose = steps[i++].perm;
  if (i < steps.size() && !steps[i].transpose) {
    a.has_reshape_dims = true;
    a.reshape_dims = steps[i].dims.to_vector();
    a.allowzero = std::find(a.reshape_dims.begin(), a.reshape_dims.end(), 0) != a.reshape_dims.end();
    ++i;
  }
  if (i < steps.size() && steps[i].transpose) a.second_transpose = steps[i++].perm;
  if (i != steps.size()) return std::nullopt;
  return a;
}

Status fuse_shuffles(PassContext& ctx) {
  Graph& g = ctx.graph();
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
  std::set<Node*> gone;
  for (Node* first : order) {
    if (gone.count(first) || first->op() != "Shuffle") continue;
    auto chain = match_chain(g, first, {{"Shuffle"}, {"Shuffle"}});
    if (!chain) continue;
    Node* second = (*chain)[1];
    const std::string what = str_cat("fusing '", first->name, "' + '", second->name, "'");
    if (second->inputs.size() > 1 || first->inputs.size() > 1 || !first->inputs[0]->dims.is_static() ||
        !second->outputs[0]->dims.is_static()) {
      ctx.refused(what + ": a shape is known only at run time");
      continue;
    }
    std::vector<ShuffleStep> steps;
    for (Node* n : *chain)
      for (ShuffleStep& s : shuffle_steps(*n)) push_step(steps, std::move(s));
    Value* x = first->inputs[0];
    const std::string names = fused_name(*chain);
    if (steps.empty()) {
      Status st = bypass_node(g, second, first->outputs[0]);
      if (st.is_ok()) st = bypass_node(g, first, x);
      if (!st.is_ok()) {
        ctx.refused(what + ": " + st.message());
        continue;
      }
      gone.insert(chain->begin(), chain->end());
      ctx.applied(str_cat("removed '", names, "': together they change nothing"));
      continue;
    }
    std::optional<ShuffleAttrs> one = as_one_shuffle(steps);
    if (!one) {
      ctx.refused(what + ": they reshape on both sides of a transpose, which one shuffle cannot do");
      continue;
    }
    auto fused = replace_with_node(ctx, *chain, "Shuffle", std::make_unique<ShuffleAttrs>(*one), {x});
    if (!fused) {
      ctx.refused(what + ": " + fused.status().message());
      continue;
    }
    gone.insert(chain->begin(), chain->end());
    ctx.applied(str_cat("fused '", names, "' into one shuffle"));
  }
  return Status::ok();
}

// ---- shuffle + reduce ----

// Replaces `nodes` with `reduce` then (when needed) a Shuffle giving the old output's dims: `shuffle_attrs` empty
// means the reduce alone gives them. The nodes keep the fused name; the shuffle is "<name>/shuffle".
Status replace_with_reduce(PassContext& ctx, std::vector<Node*> nodes, std::unique_ptr<ReduceAttrs> reduce,
                           std::vector<Value*> inputs, std::optional<ShuffleAttrs> shuffle) {
  if (!shuffle) return replace_with_node(ctx, nodes, "Reduce", std::move(reduce), std::move(inputs)).status();
  Graph& g = ctx.graph();
  const std::string name = fused_name(nodes);
  KILN_ASSIGN_OR_RETURN(Node * r, g.add_node("Reduce", name + "#reducing", std::move(reduce), std::move(inputs)));
  Status why = ctx.backend_accepts(*r);
  if (!why.is_ok()) {
    KILN_RETURN_IF_ERROR(g.remove_node(r));
    return why;
  }
  // The shuffle takes the old output's place (name, readers); the reduce is its one input.
  auto fused = replace_with_node(ctx, nodes, "Shuffle", std::make_unique<ShuffleAttrs>(*shuffle), {r->outputs[0]},
                                 name + "/shuffle");
  if (!fused) {
    KILN_RETURN_IF_ERROR(g.remove_node(r));
    return fused.status();
  }
  KILN_RETURN_IF_ERROR(g.rename_node(r, name));
  return g.rename_value(r->outputs[0], name + ":0");
}

// The axes a Reduce folds when they are known now (nullopt: an axes input known only at run time).
std::optional<std::vector<int64_t>> known_reduce_axes(const Node& reduce) {
  const auto& a = static_cast<const ReduceAttrs&>(*reduce.attrs);
  const Value* axes = reduce.inputs.size() > 1 ? reduce.inputs[1] : nullptr;
  if (axes && !axes->value()) return std::nullopt;
  return reduce_axes(a, axes ? axes->value() : nullptr);
}

Status fuse_shuffle_reduce(PassContext& ctx) {
  Graph& g = ctx.graph();
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
  std::set<Node*> gone;
  for (Node* shuffle : order) {
    if (gone.count(shuffle)) continue;
    auto chain = match_chain(g, shuffle, {{"Shuffle"}, {"Reduce"}});
    if (!chain) continue;
    Node* reduce = (*chain)[1];
    const std::string what = str_cat("fusing '", shuffle->name, "' + '", reduce->name, "'");
    const auto& sa = static_cast<const ShuffleAttrs&>(*shuffle->attrs);
    const auto& ra = static_cast<const ReduceAttrs&>(*reduce->attrs);
    if (sa.has_reshape_dims) {
      ctx.refused(what + ": the shuffle reshapes (only a permutation fuses)");
      continue;
    }
    if (!ra.keep_dims) {
      ctx.refused(what + ": the reduce drops its axes (keepDimensions is off)");
      continue;
    }
    const std::vector<int64_t> axes = known_reduce_axes(*reduce).value_or(std::vector<int64_t>{});
    const Dims in = shuffle->inputs[0]->dims;
    const int rank = in.rank();
    if (axes.empty() || rank == 0) {
      ctx.refused(what + ": the reduce's axes are not known constants, or it reduces every axis");
      continue;
    }
    Perm p(rank);
    std::iota(p.begin(), p.end(), 0);
    for (const Perm* t : {&sa.first_transpose, &sa.second_transpose})
      if (!t->empty()) {
        Perm q = p;
        for (int i = 0; i < rank; ++i) q[i] = p[static_cast<size_t>((*t)[i])];
        p = q;
      }
    // Reducing axis i of the permuted tensor is reducing axis p[i] of x.
    auto reduce_attrs = std::make_unique<ReduceAttrs>(ra);
    reduce_attrs->axes.clear();
    for (int64_t ax : axes) reduce_attrs->axes.push_back(p[static_cast<size_t>(ax < 0 ? ax + rank : ax)]);
    std::sort(reduce_attrs->axes.begin(), reduce_attrs->axes.end());
    Dims reduced = in;
    for (int64_t ax : reduce_attrs->axes) reduced[static_cast<int>(ax)] = 1;
    const Dims out = reduce->outputs[0]->dims;
    // The kept axes in x's order and in the output's: when they agree, the result needs at most a reshape.
    std::vector<int64_t> kept_in, kept_out;
    for (int i = 0; i < rank; ++i) {
      if (reduced[i] != 1) kept_in.push_back(i);
      if (reduced[static_cast<int>(p[i])] != 1) kept_out.push_back(p[i]);
    }
    std::optional<ShuffleAttrs> after;
    if (reduced != out) {
      after = ShuffleAttrs{};
      if (kept_in == kept_out && out.is_static()) {
        after->has_reshape_dims = true;
        after->reshape_dims = out.to_vector();
      } else {
        after->first_transpose = p;
      }
    }
    std::vector<Value*> inputs = {shuffle->inputs[0]};
    const std::string names = fused_name(*chain);
    const bool reshape_only = after && after->has_reshape_dims;
    if (Status st = replace_with_reduce(ctx, *chain, std::move(reduce_attrs), inputs, after); !st.is_ok()) {
      ctx.refused(what + ": " + st.message());
      continue;
    }
    gone.insert(chain->begin(), chain->end());
    ctx.applied(str_cat("fused '", names, "': the reduce reads the unpermuted input",
                        !after         ? ""
                        : reshape_only ? ", then a reshape"
                                       : ", then permutes the reduced result"));
  }
  return Status::ok();
}

// ---- reduce -> pooling ----

Status reduce_to_pooling(PassContext& ctx) {
  Graph& g = ctx.graph();
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
  for (Node* n : order) {
    const auto* a = attrs_if<ReduceAttrs>(n, "Reduce");
    if (!a || a->op != ReduceOp::kMean) continue;
    const int rank = n->inputs[0]->dims.rank();
    const std::string what = str_cat("turning '", n->name, "' into a pooling");
    std::vector<int64_t> axes = known_reduce_axes(*n).value_or(std::vector<int64_t>{});
    for (int64_t& ax : axes)
      if (ax < 0) ax += rank;
    std::sort(axes.begin(), axes.end());
    std::vector<int64_t> spatial;
    for (int i = 2; i < rank; ++i) spatial.push_back(i);
    if (rank < 3 || rank > 5 || axes != spatial) continue;  // not a spatial average: nothing to say
    if (!a->keep_dims) {
      ctx.refused(what + ": it drops the spatial axes (keepDimensions is off)");
      continue;
    }
    auto pool = std::make_unique<PoolingAttrs>();
    pool->mode = PoolingMode::kAverage;
    pool->global = true;
    std::vector<Node*> nodes = {n};
    auto fused = replace_with_node(ctx, nodes, "Pooling", std::move(pool), {n->inputs[0]}, n->name);
    if (!fused) {
      ctx.refused(what + ": " + fused.status().message());
      continue;
    }
    ctx.applied(str_cat("'", (*fused)->name, "' (an average over the spatial axes) is a global average pooling"));
  }
  return Status::ok();
}

// ---- reduction fusions ----

bool is_unary(const Node* n, UnaryOp op) {
  const auto* a = attrs_if<UnaryAttrs>(n, "Unary");
  return a && a->op == op;
}
bool is_reduce(const Node* n, ReduceOp op) {
  const auto* a = attrs_if<ReduceAttrs>(n, "Reduce");
  return a && a->op == op;
}
// x * x or x ^ 2: the squared value, else nullptr.
Value* squared(const Node* n) {
  const auto* a = attrs_if<ElementWiseAttrs>(n, "ElementWise");
  if (!a || n->inputs.size() != 2) return nullptr;
  if (a->op == ElementWiseOp::kProd && n->inputs[0] == n->inputs[1]) return n->inputs[0];
  if (a->op == ElementWiseOp::kPow && known_all_equal(n->inputs[1], 2.0) && n->inputs[1]->dims.numel() == 1)
    return n->inputs[0];
  return nullptr;
}

// The producer of `v` when `v` is read only by its one consumer.
Node* sole_producer(const Graph& g, Value* v) {
  return v && v->producer && sole_consumer(g, v) ? v->producer : nullptr;
}

Status fuse_reductions(PassContext& ctx) {
  Graph& g = ctx.graph();
  bool changed = true;
  while (changed) {  // sum of squares first enables L2Norm; each rewrite restarts the scan
    changed = false;
    KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
    for (Node* n : order) {
      std::vector<Node*> nodes;
      Value* x = nullptr;
      ReduceOp op{};
      std::string label;
      Node* reduce = nullptr;
      if (is_unary(n, UnaryOp::kLog) && is_reduce(sole_producer(g, n->inputs[0]), ReduceOp::kSum)) {
        reduce = n->inputs[0]->producer;
        Node* exp = sole_producer(g, reduce->inputs[0]);
        if (is_unary(exp, UnaryOp::kExp)) {
          nodes = {exp, reduce, n};
          x = exp->inputs[0];
          op = ReduceOp::kLogSumExp;
          label = "LogSumExp";
        } else {
          nodes = {reduce, n};
          x = reduce->inputs[0];
          op = ReduceOp::kLogSum;
          label = "LogSum";
        }
      } else if (is_unary(n, UnaryOp::kSqrt) && is_reduce(sole_producer(g, n->inputs[0]), ReduceOp::kSumSquare)) {
        reduce = n->inputs[0]->producer;
        nodes = {reduce, n};
        x = reduce->inputs[0];
        op = ReduceOp::kL2;
        label = "L2Norm";
      } else if (is_reduce(n, ReduceOp::kSum)) {
        reduce = n;
        Node* before = sole_producer(g, n->inputs[0]);
        if (is_unary(before, UnaryOp::kAbs)) {
          x = before->inputs[0];
          op = ReduceOp::kL1;
          label = "L1Norm";
        } else if (before && (x = squared(before))) {
          op = ReduceOp::kSumSquare;
          label = "sum of squares";
        }
        if (x) nodes = {before, n};
      }
      if (nodes.empty() || !x || !is_floating(x->dtype)) continue;
      auto attrs = std::make_unique<ReduceAttrs>(static_cast<const ReduceAttrs&>(*reduce->attrs));
      attrs->op = op;
      std::vector<Value*> inputs = {x};
      if (reduce->inputs.size() > 1) inputs.push_back(reduce->inputs[1]);
      auto fused = replace_with_node(ctx, nodes, "Reduce", std::move(attrs), inputs);
      if (!fused) {
        ctx.refused(str_cat("fusing '", fused_name(nodes), "' into ", label, ": ", fused.status().message()));
        continue;
      }
      ctx.applied(str_cat("fused '", (*fused)->name, "' into one ", label, " reduction"));
      changed = true;
      break;
    }
  }
  return Status::ok();
}

// ---- scale + activation ----

Status fuse_scale_activation(PassContext& ctx) {
  Graph& g = ctx.graph();
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
  std::set<Node*> gone;
  for (Node* scale : order) {
    if (gone.count(scale)) continue;
    auto chain = match_chain(g, scale, {{"Scale"}, {"Activation"}});
    if (!chain) continue;
    Node* act = (*chain)[1];
    const auto& sa = static_cast<const ScaleAttrs&>(*scale->attrs);
    const auto& aa = static_cast<const ActivationAttrs&>(*act->attrs);
    const std::string what = str_cat("fusing '", scale->name, "' + '", act->name, "'");
    if (sa.fused.on || aa.kind == ActivationKind::kPRelu || act->inputs.size() > 1) {
      ctx.refused(what + (sa.fused.on ? ": the scale already has an activation" : ": PReLU takes a slope input"));
      continue;
    }
    auto attrs = std::make_unique<ScaleAttrs>(sa);
    attrs->fused = FusedActivation::from(aa);
    auto fused = replace_with_node(ctx, *chain, "Scale", std::move(attrs), scale->inputs);
    if (!fused) {
      ctx.refused(what + ": " + fused.status().message());
      continue;
    }
    gone.insert(chain->begin(), chain->end());
    ctx.applied(str_cat("fused '", (*fused)->name, "'"));
  }
  return Status::ok();
}

}  // namespace

Pass shuffle_shuffle_pass() {
  return {"shuffle-shuffle", "two shuffles in a row become one shuffle, or nothing when together they change nothing",
          fuse_shuffles};
}

Pass shuffle_reduce_pass() {
  return {"shuffle-reduce",
          "a permutation (no reshape) then a reduce with keepDimensions: the reduce reads the unpermuted input",
          fuse_shuffle_reduce};
}

Pass reduce_pooling_pass() {
  return {"reduce-pooling", "an average over all spatial axes with keepDimensions becomes a global average pooling",
          reduce_to_pooling};
}

Pass reduction_fusions_pass() {
  return {"reduction-fusions",
          "abs + sum -> L1Norm, square + sum -> sum of squares, + sqrt -> L2Norm, sum + log -> LogSum, exp + sum + log "
          "-> LogSumExp",
          fuse_reductions};
}

Pass scale_activation_pass() {
  return {"scale-activation", "a scale followed by an activation becomes one scale layer", fuse_scale_activation};
}

}  // namespace kiln
