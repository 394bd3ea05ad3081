// ONNX normalization ops -> kiln BatchNormalization, LayerNormalization, InstanceNormalization, LRN.
#include "onnx/importer.h"
#include "ops/elementwise/elementwise.h"
#include "ops/normalization/normalization.h"
#include "ops/reduce/reduce.h"
#include "ops/shuffle/shuffle.h"

namespace kiln::onnx_import {
namespace {

Result<std::vector<Value*>> inputs_of(ImportContext& ctx, const OnnxNode& node, int count) {
  std::vector<Value*> inputs;
  for (int i = 0; i < count; ++i) {
    if (!node.has_input(i)) {
      inputs.push_back(nullptr);
      continue;
    }
    KILN_ASSIGN_OR_RETURN(Value * v, ctx.input(node, i));
    inputs.push_back(v);
  }
  while (!inputs.empty() && !inputs.back()) inputs.pop_back();
  return inputs;
}

bool training_mode(const OnnxNode& node) { return node.opset() >= 14 && node.attr_int("training_mode", 0) != 0; }

Status check_batch_norm(const OnnxNode& node) {
  if (training_mode(node)) return Status::ok();
  if (node.opset() < 9 && node.attr_int("spatial", 1) == 0)
    return node.unsupported_error("spatial=0 (per-element statistics) is not supported; kiln normalizes per channel");
  for (int i = 1; i < node.num_outputs(); ++i)
    if (node.has_output(i))
      return node.unsupported_error("output ", i,
                                    " (a training statistic) is requested; kiln imports BatchNormalization for "
                                    "inference only, with the single output Y");
  return Status::ok();
}

// training_mode=1: normalizes with the batch's own mean and (population) variance over every axis but the
// channels, and gives running_mean/var updated by `momentum` as outputs 1 and 2.
Status import_batch_norm_training(ImportContext& ctx, const OnnxNode& node, const BatchNormalizationAttrs& a,
                                  std::vector<Value*> inputs) {
  if (inputs.size() != 5 || !inputs[0] || !inputs[3] || !inputs[4])
    return node.error("needs X, scale, B, input_mean and input_var");
  Value* x = inputs[0];
  if (x->dims.rank() < 2) return node.error("X has rank ", x->dims.rank(), "; it must have a channel axis (rank >= 2)");
  ReduceAttrs mean_attrs;
  mean_attrs.op = ReduceOp::kMean;
  mean_attrs.keep_dims = true;
  for (int i = 0; i < x->dims.rank(); ++i)
    if (i != 1) mean_attrs.axes.push_back(i);
  auto elementwise = [&](ElementWiseOp op, Value* p, Value* q, const char* suffix) -> Result<Value*> {
    ElementWiseAttrs e;
    e.op = op;
    KILN_ASSIGN_OR_RETURN(Node * n, ctx.add(node, "ElementWise", e, {p, q}, false, suffix));
    return n->outputs[0];
  };
  auto per_channel = [&](Value* v, const char* suffix) -> Result<Value*> {  // [1, C, 1, ...] -> [C]
    ShuffleAttrs r;
    r.has_reshape_dims = true;
    r.reshape_dims = {-1};
    KILN_ASSIGN_OR_RETURN(Node * n, ctx.add(node, "Shuffle", r, {v}, false, suffix));
    return n->outputs[0];
  };
  KILN_ASSIGN_OR_RETURN(Node * mean, ctx.add(node, "Reduce", mean_attrs, {x}, false, "batch_mean"));
  KILN_ASSIGN_OR_RETURN(Value * centered, elementwise(ElementWiseOp::kSub, x, mean->outputs[0], "centered"));
  KILN_ASSIGN_OR_RETURN(Value * squares, elementwise(ElementWiseOp::kProd, centered, centered, "squares"));
  KILN_ASSIGN_OR_RETURN(Node * var, ctx.add(node, "Reduce", mean_attrs, {squares}, false, "batch_var"));
  KILN_ASSIGN_OR_RETURN(Value * batch_mean, per_channel(mean->outputs[0], "batch_mean_c"));
  KILN_ASSIGN_OR_RETURN(Value * batch_var, per_channel(var->outputs[0], "batch_var_c"));
  KILN_ASSIGN_OR_RETURN(Node * y, ctx.add(node, "BatchNormalization", a,
                                          {x, inputs[1], inputs[2], batch_mean, batch_var}, false, "normalize"));
  KILN_RETURN_IF_ERROR(ctx.bind_output(node, 0, y->outputs[0]));
  // running = input * momentum + batch * (1 - momentum)
  const double momentum = node.attr_float("momentum", 0.9f);
  for (int k = 0; k < 2; ++k) {
    if (!node.has_output(k + 1)) continue;
    Value* running = inputs[3 + k];
    Value* batch = k == 0 ? batch_mean : batch_var;
    KILN_ASSIGN_OR_RETURN(Tensor m, Tensor::zeros(running->dtype, Dims{}));
    m.set(0, momentum);
    KILN_ASSIGN_OR_RETURN(Tensor rest, Tensor::zeros(running->dtype, Dims{}));
    rest.set(0, 1 - momentum);
    KILN_ASSIGN_OR_RETURN(Value * mv, ctx.add_constant(node, k == 0 ? "momentum_mean" : "momentum_var", std::move(m)));
    KILN_ASSIGN_OR_RETURN(Value * rv, ctx.add_constant(node, k == 0 ? "rest_mean" : "rest_var", std::move(rest)));
    KILN_ASSIGN_OR_RETURN(Value * kept,
                          elementwise(ElementWiseOp::kProd, running, mv, k == 0 ? "kept_mean" : "kept_var"));
    KILN_ASSIGN_OR_RETURN(Value * added, elementwise(ElementWiseOp::kProd, batch, rv, k == 0 ? "new_mean" : "new_var"));
    KILN_ASSIGN_OR_RETURN(Value * out,
                          elementwise(ElementWiseOp::kSum, kept, added, k == 0 ? "running_mean" : "running_var"));
    KILN_RETURN_IF_ERROR(ctx.bind_output(node, k + 1, out));
  }
  return Status::ok();
}

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "BatchNormalization",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      BatchNormalizationAttrs a;
      a.epsilon = node.attr_float("epsilon", 1e-5f);
      KILN_ASSIGN_OR_RETURN(auto inputs, inputs_of(ctx, node, 5));
      if (training_mode(node)) return import_batch_norm_training(ctx, node, a, inputs);
      return ctx.add(node, "BatchNormalization", a, inputs).status();
    },
    .check = check_batch_norm,
});

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "LayerNormalization",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      LayerNormalizationAttrs a;
      a.axis = node.attr_int("axis", -1);
      a.epsilon = node.attr_float("epsilon", 1e-5f);
      a.return_stats = node.has_output(1) || node.has_output(2);
      KILN_ASSIGN_OR_RETURN(auto inputs, inputs_of(ctx, node, 3));
      return ctx.add(node, "LayerNormalization", a, inputs).status();
    },
});

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "InstanceNormalization",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      InstanceNormalizationAttrs a;
      a.epsilon = node.attr_float("epsilon", 1e-5f);
      KILN_ASSIGN_OR_RETURN(auto inputs, inputs_of(ctx, node, 3));
      return ctx.add(node, "InstanceNormalization", a, inputs).status();
    },
});

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "LRN",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      LrnAttrs a;
      KILN_ASSIGN_OR_RETURN(a.size, node.attr_int("size"));
      a.alpha = node.attr_float("alpha", 1e-4f);
      a.beta = node.attr_float("beta", 0.75f);
      a.bias = node.attr_float("bias", 1.f);
      KILN_ASSIGN_OR_RETURN(Value * x, ctx.input(node, 0));
      return ctx.add(node, "LRN", a, {x}).status();
    },
    .check = [](const OnnxNode& node) -> Status {
      if (!node.has_attr("size")) return node.error("the size attribute is required");
      return Status::ok();
    },
});

}  // namespace
}  // namespace kiln::onnx_import
