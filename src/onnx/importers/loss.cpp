// ONNX NegativeLogLikelihoodLoss -> kiln NLLLoss; SoftmaxCrossEntropyLoss -> kiln CrossEntropyLoss (plus a
// LogSoftmax over the classes when the model asks for log_prob).
#include <limits>

#include "onnx/importer.h"
#include "ops/loss/loss.h"
#include "ops/softmax/softmax.h"

namespace kiln::onnx_import {
namespace {

Result<LossReduction> reduction_of(const OnnxNode& node) {
  const std::string r = node.attr_string("reduction", "mean");
  if (r == "mean") return LossReduction::kMean;
  if (r == "sum") return LossReduction::kSum;
  if (r == "none") return LossReduction::kNone;
  return node.error("attribute 'reduction' is '", r, "'; it must be 'none', 'sum' or 'mean'");
}

/// ONNX's ignore_index is optional: without it every target must be a class, which no target equal to
/// INT64_MIN can be.
int64_t ignore_index_of(const OnnxNode& node) {
  return node.attr_int("ignore_index", std::numeric_limits<int64_t>::min());
}

Status check_loss(const OnnxNode& node) { return reduction_of(node).status(); }

/// The optional weight input (index 2), or nullptr.
Result<Value*> optional_weight(ImportContext& ctx, const OnnxNode& node) {
  if (!node.has_input(2)) return static_cast<Value*>(nullptr);
  return ctx.input(node, 2);
}

Status import_nll(ImportContext& ctx, const OnnxNode& node) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value * target, ctx.input(node, 1));
  KILN_ASSIGN_OR_RETURN(Value * weight, optional_weight(ctx, node));
  NLLLossAttrs a;
  KILN_ASSIGN_OR_RETURN(a.reduction, reduction_of(node));
  a.ignore_index = ignore_index_of(node);
  std::vector<Value*> inputs{x, target};
  if (weight) inputs.push_back(weight);
  return ctx.add(node, "NLLLoss", a, inputs).status();
}

Status import_softmax_cross_entropy(ImportContext& ctx, const OnnxNode& node) {
  KILN_ASSIGN_OR_RETURN(Value * scores, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value * labels, ctx.input(node, 1));
  KILN_ASSIGN_OR_RETURN(Value * weight, optional_weight(ctx, node));
  if (scores->dims.rank() < 2)
    return node.error("input 'scores' has shape ", scores->dims.to_string(), "; it needs [N, C, ...]");
  CrossEntropyLossAttrs a;
  KILN_ASSIGN_OR_RETURN(a.reduction, reduction_of(node));
  a.ignore_index = ignore_index_of(node);
  std::vector<Value*> inputs{scores, labels};
  if (weight) inputs.push_back(weight);
  KILN_ASSIGN_OR_RETURN(Node * loss, ctx.add(node, "CrossEntropyLoss", a, inputs, /*final=*/false, "loss"));
  KILN_RETURN_IF_ERROR(ctx.bind_output(node, 0, loss->outputs[0]));
  if (!node.has_output(1)) return Status::ok();
  SoftmaxAttrs s;
  s.axis = 1;
  KILN_ASSIGN_OR_RETURN(Node * log_prob, ctx.add(node, "LogSoftmax", s, {scores}, /*final=*/false, "log_prob"));
  return ctx.bind_output(node, 1, log_prob->outputs[0]);
}

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "NegativeLogLikelihoodLoss", .import = import_nll, .check = check_loss});
KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "SoftmaxCrossEntropyLoss", .import = import_softmax_cross_entropy, .check = check_loss});

}  // namespace
}  // namespace kiln::onnx_import
