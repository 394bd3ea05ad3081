// Convolution fusions: batch norms, scales and constant per-channel multiplies or adds folded into the
// convolution's weights and bias; a sum with another tensor becomes the convolution's residual input; an
// activation after it becomes its fused activation (the epilogue, y = act(conv(x, w) + b + residual)).
#include <cmath>
#include <optional>

#include "ops/activation/activation.h"
#include "ops/convolution/convolution.h"
#include "ops/elementwise/elementwise.h"
#include "ops/normalization/normalization.h"
#include "ops/scale/scale.h"
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln {
namespace {

const ConvolutionAttrs* conv_attrs(const Node* n) { return attrs_if<ConvolutionAttrs>(n, "Convolution"); }

bool has_residual(const Node& conv) { return conv.inputs.size() > 3 && conv.inputs[3]; }

Value* input_or_null(const Node& n, size_t i) { return i < n.inputs.size() ? n.inputs[i] : nullptr; }

std::string pair_name(const Node& a, const Node& b) { return str_cat("'", a.name, "' + '", b.name, "'"); }

// Why the output of `conv` cannot disappear into a fused layer with `next` ("" when it can).
std::string shared_output_reason(const Graph& g, const Node& conv, const Node& next) {
  const Value* out = conv.outputs[0];
  if (is_graph_output(g, out)) return str_cat("'", out->name, "' is a graph output");
  for (const Use& u : out->uses)
    if (u.node != &next) return str_cat("'", out->name, "' is also read by '", u.node->name, "'");
  return "";
}

// ---------------------------------------------------------------------------------------------
// Folding a per-channel affine map y = conv * scale[c] + shift[c] into the weights and bias.

// The per-output-channel factors: scale[c] and shift[c] for each of the conv's `m` channels.
struct ChannelAffine {
  std::vector<double> scale, shift;
};

// Why the weights and bias of `conv` cannot be rewritten ("" when they can): they must be known float32 values.
std::string foldable_reason(const Node& conv) {
  const Value* w = conv.inputs[1];
  const Value* b = input_or_null(conv, 2);
  if (has_conv_epilogue(*conv_attrs(&conv), has_residual(conv)))
    return str_cat("'", conv.name, "' already has an epilogue (residual or fused activation)");
  if (!w->value()) return str_cat("the weights '", w->name, "' are not constant");
  if (w->dtype != DataType::kFloat32) return str_cat("the weights '", w->name, "' are ", dtype_name(w->dtype));
  if (b && !b->value()) return str_cat("the bias '", b->name, "' is not constant");
  return "";
}

// The output channels of a convolution with known weights [M, C / group, k...].
int64_t output_channels(const Node& conv) { return conv.inputs[1]->value()->dims()[0]; }

// New constants w' = w * scale[c] and b' = b * scale[c] + shift[c] for `conv` (the originals stay as they are:
// other readers keep theirs). Pair of (weights, bias).
Result<std::pair<Value*, Value*>> folded_parameters(Graph& g, const Node& conv, const ChannelAffine& f,
                                                    const std::string& tag) {
  const Tensor& w = *conv.inputs[1]->value();
  const Value* b = input_or_null(conv, 2);
  const int64_t m = w.dims()[0];
  const int64_t per = m > 0 ? w.numel() / m : 0;
  const std::vector<double> wv = tensor_to_doubles(w);
  const std::vector<double> bv = b ? tensor_to_doubles(*b->value()) : std::vector<double>(m, 0.0);
  KILN_ASSIGN_OR_RETURN(Tensor nw, Tensor::empty(DataType::kFloat32, w.dims()));
  KILN_ASSIGN_OR_RETURN(Tensor nb, Tensor::empty(DataType::kFloat32, Dims{m}));
  for (int64_t c = 0; c < m; ++c) {
    for (int64_t i = 0; i < per; ++i) nw.data<float>()[c * per + i] = static_cast<float>(wv[c * per + i] * f.scale[c]);
    nb.data<float>()[c] = static_cast<float>(bv[c] * f.scale[c] + f.shift[c]);
  }
  KILN_ASSIGN_OR_RETURN(Value * new_w, g.add_constant(free_name(g, str_cat(conv.inputs[1]->name, "/", tag)), nw));
  KILN_ASSIGN_OR_RETURN(Value * new_b, g.add_constant(free_name(g, str_cat(conv.name, "/", tag, "_bias")), nb));
  return std::make_pair(new_w, new_b);
}

// Replaces `conv` + `next` by one Convolution with weights and bias folded by `f` (and `act`, the activation
// `next` had fused, as its epilogue). On a refusal (the backend) the new constants are dropped again and the
// status says why.
Result<Node*> fold_into_conv(PassContext& ctx, Node* conv, Node* next, const ChannelAffine& f, const std::string& tag,
                             const FusedActivation& act = {}) {
  Graph& g = ctx.graph();
  KILN_ASSIGN_OR_RETURN(auto params, folded_parameters(g, *conv, f, tag));
  auto attrs = std::make_unique<ConvolutionAttrs>(*conv_attrs(conv));
  attrs->fused = act;
  Node* nodes[] = {conv, next};
  auto fused =
      replace_with_node(ctx, nodes, "Convolution", std::move(attrs), {conv->inputs[0], params.first, params.second});
  if (!fused) g.remove_dead_nodes();  // the unused new constants
  return fused;
}

// ---------------------------------------------------------------------------------------------
// batchnorm-folding

// scale[c] = gamma / sqrt(var + eps), shift[c] = beta - mean * scale[c], or why the parameters do not fold.
Result<ChannelAffine> batchnorm_affine(const Node& bn, int64_t m) {
  const char* names[] = {"scale", "bias", "mean", "var"};
  std::vector<double> p[4];
  for (int i = 0; i < 4; ++i) {
    const Value* v = bn.inputs[i + 1];
    if (!v->value()) return unsupported("its ", names[i], " '", v->name, "' is not constant");
    p[i] = tensor_to_doubles(*v->value());
    if (static_cast<int64_t>(p[i].size()) != m)
      return unsupported("its ", names[i], " has ", p[i].size(), " values for ", m, " channels");
  }
  const double eps = static_cast<const BatchNormalizationAttrs*>(bn.attrs.get())->epsilon;
  ChannelAffine f;
  for (int64_t c = 0; c < m; ++c) {
    const double s = p[0][c] / std::sqrt(p[3][c] + eps);
    f.scale.push_back(s);
    f.shift.push_back(p[1][c] - p[2][c] * s);
  }
  return f;
}

Status fold_batchnorms(PassContext& ctx) {
  Graph& g = ctx.graph();
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
  for (Node* bn : order) {
    if (bn->op() != "BatchNormalization") continue;
    Node* conv = bn->inputs[0]->producer;
    if (!conv_attrs(conv)) continue;
    const std::string what = pair_name(*conv, *bn);
    std::string why = shared_output_reason(g, *conv, *bn);
    if (why.empty()) why = foldable_reason(*conv);
    if (!why.empty()) {
      ctx.refused(str_cat("folding ", what, ": ", why));
      continue;
    }
    auto f = batchnorm_affine(*bn, output_channels(*conv));
    if (!f) {
      ctx.refused(str_cat("folding ", what, ": ", f.status().message()));
      continue;
    }
    auto fused = fold_into_conv(ctx, conv, bn, *f, "bn_folded");
    if (!fused) {
      ctx.refused(str_cat("folding ", what, ": ", fused.status().message()));
      continue;
    }
    ctx.applied(str_cat("folded ", what, " into '", (*fused)->name, "' (new weights and bias)"));
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// conv-scale

// The per-channel factors of a Scale node after a conv with `m` channels on axis 1 of rank `rank`, or why not.
Result<ChannelAffine> scale_affine(const Node& scale, int64_t m, int rank) {
  const auto& a = static_cast<const ScaleAttrs&>(*scale.attrs);
  const int64_t axis = a.channel_axis < 0 ? a.channel_axis + rank : a.channel_axis;
  if (a.mode == ScaleMode::kElementwise) return unsupported("its coefficients are per element, not per channel");
  if (a.mode == ScaleMode::kChannel && axis != 1)
    return unsupported("it scales along axis ", a.channel_axis, ", not the convolution's channel axis 1");
  const Value* power = input_or_null(scale, 3);
  if (power && !power->value()) return unsupported("its power '", power->name, "' is not constant");
  if (power && !known_all_equal(power, 1.0)) return unsupported("it raises to a power other than 1");
  ChannelAffine f{std::vector<double>(m, 1.0), std::vector<double>(m, 0.0)};
  const char* names[] = {"shift", "scale"};
  for (int i = 0; i < 2; ++i) {
    const Value* v = input_or_null(scale, i + 1);
    if (!v) continue;
    if (!v->value()) return unsupported("its ", names[i], " '", v->name, "' is not constant");
    const std::vector<double> c = tensor_to_doubles(*v->value());
    std::vector<double>& out = i == 0 ? f.shift : f.scale;
    for (int64_t ch = 0; ch < m; ++ch) out[ch] = c.size() == 1 ? c[0] : c.at(ch);
  }
  return f;
}

// Whether `dims` broadcast against a conv output of rank `rank` touches only the channel axis (1): after
// aligning to the right, every dim but the channel's is 1.
bool per_channel_shape(const Dims& dims, int rank) {
  if (dims.rank() > rank) return false;
  for (int i = 0; i < dims.rank(); ++i) {
    const int axis = rank - dims.rank() + i;
    if (axis != 1 && dims[i] != 1) return false;
  }
  return true;
}

// The factors of an ElementWise multiply or add of the conv output by a constant `c`, or why not.
Result<ChannelAffine> elementwise_affine(ElementWiseOp op, const Value& c, const Value& conv_out, int64_t m) {
  if (!per_channel_shape(c.dims, conv_out.dims.rank()))
    return unsupported("the constant '", c.name, "' of shape ", c.dims.to_string(), " is not per channel of ",
                       conv_out.dims.to_string(), " ([C, 1, 1], [1, C, 1, 1] or one value)");
  const std::vector<double> v = tensor_to_doubles(*c.value());
  ChannelAffine f{std::vector<double>(m, 1.0), std::vector<double>(m, 0.0)};
  for (int64_t ch = 0; ch < m; ++ch)
    (op == ElementWiseOp::kProd ? f.scale : f.shift)[ch] = v.size() == 1 ? v[0] : v[ch];
  return f;
}

// A candidate of conv-scale: the Scale or ElementWise `next` reading conv's output, with its factors or why not.
// nullopt when `next` is no candidate at all (an add of a tensor that is not constant: conv-elementwise-sum's).
std::optional<Result<ChannelAffine>> scale_candidate(const Node& next, const Node& conv) {
  const Value* out = conv.outputs[0];
  const auto* ew = attrs_if<ElementWiseAttrs>(&next, "ElementWise");
  const Value* other = nullptr;
  if (next.op() == "Scale") {
    if (next.inputs[0] != out) return std::nullopt;
  } else {
    if (!ew || (ew->op != ElementWiseOp::kProd && ew->op != ElementWiseOp::kSum) || next.inputs.size() != 2)
      return std::nullopt;
    other = next.inputs[0] == out ? next.inputs[1] : next.inputs[0];
    if (!other || other == out || !other->value()) return std::nullopt;
  }
  if (out->dtype != DataType::kFloat32) return Result<ChannelAffine>(unsupported("it is not float32"));
  if (!conv.inputs[1]->value())  // the weights' count of output channels is needed below
    return Result<ChannelAffine>(unsupported("the weights '", conv.inputs[1]->name, "' are not constant"));
  if (!other) return scale_affine(next, output_channels(conv), out->dims.rank());
  return elementwise_affine(ew->op, *other, *out, output_channels(conv));
}

Status fold_scales(PassContext& ctx) {
  Graph& g = ctx.graph();
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
  for (Node* next : order) {
    if (next->op() != "Scale" && next->op() != "ElementWise") continue;
    // Scale: its input x; ElementWise: either operand (the other one is the constant).
    Node* conv = nullptr;
    for (size_t i = 0; i < (next->op() == "Scale" ? 1 : next->inputs.size()); ++i)
      if (next->inputs[i] && conv_attrs(next->inputs[i]->producer)) conv = next->inputs[i]->producer;
    if (!conv) continue;
    auto f = scale_candidate(*next, *conv);
    if (!f) continue;
    const std::string what = pair_name(*conv, *next);
    std::string why = shared_output_reason(g, *conv, *next);
    if (why.empty()) why = foldable_reason(*conv);
    if (why.empty() && !f->is_ok()) why = f->status().message();
    if (!why.empty()) {
      ctx.refused(str_cat("folding ", what, ": ", why));
      continue;
    }
    // A Scale's own fused activation (scale-activation) becomes the convolution's.
    const auto* sa = attrs_if<ScaleAttrs>(next, "Scale");
    const FusedActivation act = sa ? sa->fused : FusedActivation{};
    auto fused = fold_into_conv(ctx, conv, next, **f, "scaled", act);
    if (!fused) {
      ctx.refused(str_cat("folding ", what, ": ", fused.status().message()));
      continue;
    }
    ctx.applied(str_cat("folded ", what, " into '", (*fused)->name, "' (new weights and bias",
                        act.on ? str_cat(", ", enum_name(act.kind), " epilogue") : "", ")"));
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// conv-elementwise-sum

// Why convolution `conv`, operand `i` of `add`, cannot take the other operand as its residual ("" when it can).
std::string residual_refusal(const Graph& g, const Node& conv, const Node& add, int i) {
  if (add.inputs[0] == add.inputs[1]) return "it adds the convolution's output to itself";
  std::string why = shared_output_reason(g, conv, add);
  if (why.empty() && has_conv_epilogue(*conv_attrs(&conv), has_residual(conv)))
    why = str_cat("'", conv.name, "' already has an epilogue (residual or fused activation)");
  const Value* out = conv.outputs[0];
  const Value* other = add.inputs[1 - i];
  if (why.empty() && (other->dims != out->dims || other->dtype != out->dtype))
    why = str_cat("the other operand '", other->name, "' of shape ", other->dims.to_string(), " would broadcast to ",
                  out->dims.to_string(), " (a residual has the convolution's output shape: no broadcasting)");
  return why;
}

Status fuse_sums(PassContext& ctx) {
  Graph& g = ctx.graph();
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
  for (Node* add : order) {
    const auto* ew = attrs_if<ElementWiseAttrs>(add, "ElementWise");
    if (!ew || ew->op != ElementWiseOp::kSum || add->inputs.size() != 2 || !add->inputs[0] || !add->inputs[1]) continue;
    // Operand 0's convolution first; the first refusal is reported when neither can take the other operand.
    Node* conv = nullptr;
    int at = 0;
    std::string refusal;
    for (int i = 0; i < 2 && !conv; ++i) {
      Node* p = add->inputs[i]->producer;
      if (!conv_attrs(p)) continue;
      std::string why = residual_refusal(g, *p, *add, i);
      if (why.empty()) {
        conv = p;
        at = i;
      } else if (refusal.empty()) {
        refusal = str_cat("fusing ", pair_name(*p, *add), ": ", why);
      }
    }
    if (!conv) {
      if (!refusal.empty()) ctx.refused(refusal);
      continue;
    }
    const std::string what = pair_name(*conv, *add);
    std::vector<Value*> inputs{conv->inputs[0], conv->inputs[1], input_or_null(*conv, 2), add->inputs[1 - at]};
    Node* nodes[] = {conv, add};
    auto fused = replace_with_node(ctx, nodes, "Convolution", std::make_unique<ConvolutionAttrs>(*conv_attrs(conv)),
                                   std::move(inputs));
    if (!fused) {
      ctx.refused(str_cat("fusing ", what, ": ", fused.status().message()));
      continue;
    }
    ctx.applied(str_cat("fused ", what, " into '", (*fused)->name, "' (the sum is its residual input)"));
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// conv-activation

Status fuse_activations(PassContext& ctx) {
  Graph& g = ctx.graph();
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
  for (Node* act : order) {
    const auto* aa = attrs_if<ActivationAttrs>(act, "Activation");
    Node* conv = aa ? act->inputs[0]->producer : nullptr;
    const ConvolutionAttrs* ca = conv_attrs(conv);
    if (!ca) continue;
    const std::string what = pair_name(*conv, *act);
    std::string why = shared_output_reason(g, *conv, *act);
    if (why.empty() && aa->kind == ActivationKind::kPRelu) why = "PReLU takes its slope as an input";
    if (why.empty() && ca->fused.on) why = str_cat("'", conv->name, "' already has a fused activation");
    if (!why.empty()) {
      ctx.refused(str_cat("fusing ", what, ": ", why));
      continue;
    }
    auto attrs = std::make_unique<ConvolutionAttrs>(*ca);
    attrs->fused = FusedActivation::from(*aa);
    Node* nodes[] = {conv, act};
    std::vector<Value*> inputs(conv->inputs.begin(), conv->inputs.end());
    auto fused = replace_with_node(ctx, nodes, "Convolution", std::move(attrs), std::move(inputs));
    if (!fused) {
      ctx.refused(str_cat("fusing ", what, ": ", fused.status().message()));
      continue;
    }
    // The activation node (and its attributes) is gone: name the kind from the fused layer's copy.
    const auto& fused_attrs = static_cast<const ConvolutionAttrs&>(*(*fused)->attrs);
    ctx.applied(
        str_cat("fused ", what, " into '", (*fused)->name, "' (", enum_name(fused_attrs.fused.kind), " epilogue)"));
  }
  return Status::ok();
}

}  // namespace

Pass batchnorm_folding_pass() {
  return {"batchnorm-folding",
          "folds a BatchNormalization with constant parameters into the Convolution before it (new weights and bias)",
          fold_batchnorms};
}

Pass conv_scale_pass() {
  return {"conv-scale",
          "folds a per-channel Scale (power 1), or a multiply or add by a per-channel constant, into the Convolution "
          "before it",
          fold_scales};
}

Pass conv_elementwise_sum_pass() {
  return {"conv-elementwise-sum",
          "makes the other operand of a sum after a Convolution its residual input (same shape, no broadcasting)",
          fuse_sums};
}

Pass conv_activation_pass() {
  return {"conv-activation", "fuses an activation (not PReLU) after a Convolution into its epilogue", fuse_activations};
}

}  // namespace kiln
