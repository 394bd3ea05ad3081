// ONNX Reshape, Transpose, Flatten, Squeeze, Unsqueeze -> kiln Shuffle; ConstantOfShape, Range,
// EyeLike -> their kiln ops.
#include "onnx/importers/shape_helpers.h"
#include "onnx/tensor_proto.h"
#include "ops/constant_of_shape/constant_of_shape.h"
#include "ops/eye_like/eye_like.h"
#include "ops/indexing/indexing.h"
#include "ops/shuffle/shuffle.h"
#include "ops/tensor/tensor_info.h"

namespace kiln::onnx_import {
namespace {

constexpr int64_t kLiteralOne = -1;

// Reshapes x so that output dim i is x's dim `from[i]`, or 1 where from[i] is kLiteralOne. Static
// dims give a plain reshape; dynamic ones build the shape at run time: Gather(Shape(x) ++ [1], from).
Status reshape_from(ImportContext& ctx, const OnnxNode& node, Value* x, const std::vector<int64_t>& from) {
  ShuffleAttrs a;
  a.has_reshape_dims = true;
  bool dynamic = false;
  for (int64_t f : from) {
    const int64_t d = f == kLiteralOne ? 1 : x->dims[static_cast<int>(f)];
    dynamic |= d < 0;
    a.reshape_dims.push_back(d);
  }
  if (!dynamic) return ctx.add(node, "Shuffle", a, {x}).status();
  const int rank = x->dims.rank();
  KILN_ASSIGN_OR_RETURN(Node * shape, ctx.add(node, "Shape", ShapeAttrs{}, {x}, false, "shape"));
  KILN_ASSIGN_OR_RETURN(Value * one, int64_constant(ctx, node, "one", {1}));
  KILN_ASSIGN_OR_RETURN(Node * padded, ctx.add(node, "Concatenation", ConcatenationAttrs{}, {shape->outputs[0], one},
                                               false, "shape_and_one"));
  std::vector<int64_t> idx;
  idx.reserve(from.size());
  for (int64_t f : from) idx.push_back(f == kLiteralOne ? rank : f);
  KILN_ASSIGN_OR_RETURN(Value * indices, int64_constant(ctx, node, "dims", idx));
  KILN_ASSIGN_OR_RETURN(Node * target,
                        ctx.add(node, "Gather", GatherAttrs{}, {padded->outputs[0], indices}, false, "target_shape"));
  return ctx.add(node, "Shuffle", ShuffleAttrs{}, {x, target->outputs[0]}).status();
}

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "Reshape",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      KILN_ASSIGN_OR_RETURN(Value * x, ctx.input(node, 0));
      ShuffleAttrs a;
      a.allowzero = node.attr_int("allowzero", 0) != 0;
      if (node.opset() < 5) {
        a.has_reshape_dims = true;
        KILN_ASSIGN_OR_RETURN(a.reshape_dims, node.attr_ints("shape"));
        return ctx.add(node, "Shuffle", a, {x}).status();
      }
      if (const Tensor* shape = ctx.constant_input(node, 1);
          shape && shape->dims().rank() == 1 && !is_floating(shape->dtype())) {
        a.has_reshape_dims = true;
        a.reshape_dims = tensor_to_int64s(*shape);
        return ctx.add(node, "Shuffle", a, {x}).status();
      }
      KILN_ASSIGN_OR_RETURN(Value * shape, ctx.input(node, 1));
      return ctx.add(node, "Shuffle", a, {x, shape}).status();
    },
});

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "Transpose",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      KILN_ASSIGN_OR_RETURN(Value * x, ctx.input(node, 0));
      ShuffleAttrs a;
      a.first_transpose = node.attr_ints("perm", {});
      if (a.first_transpose.empty())
        for (int i = x->dims.rank() - 1; i >= 0; --i) a.first_transpose.push_back(i);
      return ctx.add(node, "Shuffle", a, {x}).status();
    },
});

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "Flatten",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      KILN_ASSIGN_OR_RETURN(Value * x, ctx.input(node, 0));
      const int rank = x->dims.rank();
      int64_t axis = node.attr_int("axis", 1);
      if (axis < -rank || axis > rank) return node.error("Flatten axis ", axis, " is out of range for rank ", rank);
      if (axis < 0) axis += rank;
      // Products of the leading and trailing dims; -1 when one of them is dynamic.
      auto product = [&](int lo, int hi) {
        int64_t p = 1;
        for (int i = lo; i < hi; ++i) {
          if (x->dims[i] < 0) return int64_t{-1};
          p *= x->dims[i];
        }
        return p;
      };
      const int64_t outer = product(0, static_cast<int>(axis)), inner = product(static_cast<int>(axis), rank);
      ShuffleAttrs a;
      a.has_reshape_dims = true;
      if (outer >= 0 && inner >= 0) {
        a.reshape_dims = {outer, inner};
      } else if (outer > 0) {
        a.reshape_dims = {outer, -1};
      } else if (inner > 0) {
        a.reshape_dims = {-1, inner};
      } else if (axis == 1) {
        a.reshape_dims = {0, -1};
      } else {
        return node.unsupported_error("Flatten at axis ", axis, " of input shape ", x->dims.to_string(),
                                      ": dynamic dims on both sides of the axis; fix the input dims at import");
      }
      return ctx.add(node, "Shuffle", a, {x}).status();
    },
});

// Squeeze with axes known only at run time is decided at import when exactly that many dims are
// statically 1; nullopt otherwise.
std::optional<std::vector<int64_t>> unambiguous_squeeze(ImportContext& ctx, const OnnxNode& node) {
  Value* x = ctx.lookup(node.proto().input(0));
  Value* axes = ctx.lookup(node.proto().input(1));
  if (!x || !axes || axes->dims.rank() != 1) return std::nullopt;
  std::vector<int64_t> ones;
  for (int i = 0; i < x->dims.rank(); ++i) {
    if (x->dims[i] < 0) return std::nullopt;
    if (x->dims[i] == 1) ones.push_back(i);
  }
  if (axes->dims[0] != static_cast<int64_t>(ones.size())) return std::nullopt;
  return ones;
}

// Squeeze/Unsqueeze with axes known only at run time. With R the rank the axes index (input rank
// for Squeeze, output rank for Unsqueeze), key = iota(R) with R written at the axes; the R - k
// smallest keys (TopK) are the kept positions in order. Squeeze gathers those dims of Shape(x);
// Unsqueeze scatters Shape(x) into ones(R) at them.
Status runtime_axes_reshape(ImportContext& ctx, const OnnxNode& node, Value* x, Value* axes, bool squeeze) {
  if (axes->dims.rank() != 1 || axes->dims[0] < 0)
    return node.unsupported_error(node.op_type(), " input 'axes' must be a constant or a 1-D tensor of known length");
  const int64_t k = axes->dims[0];
  const int64_t rank = squeeze ? x->dims.rank() : x->dims.rank() + k;
  if (rank > kMaxRank)
    return node.unsupported_error(node.op_type(), " to rank ", rank, "; kiln's maximum is ", kMaxRank);
  if (squeeze && k > rank) return node.error("Squeeze has ", k, " axes but the input has rank ", rank);
  std::vector<int64_t> iota(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) iota[static_cast<size_t>(i)] = i;
  KILN_ASSIGN_OR_RETURN(Value * positions, int64_constant(ctx, node, "positions", iota));
  KILN_ASSIGN_OR_RETURN(Value * marks, int64_constant(ctx, node, "marks", std::vector<int64_t>(k, rank)));
  if (axes->dtype != DataType::kInt64) return node.error(node.op_type(), " input 'axes' must be int64");
  KILN_ASSIGN_OR_RETURN(Node * key, ctx.add(node, "ScatterElements", ScatterElementsAttrs{}, {positions, axes, marks},
                                            false, "axis_key"));
  KILN_ASSIGN_OR_RETURN(Value * keep_count, int64_constant(ctx, node, "keep_count", {rank - k}));
  TopKAttrs smallest;
  smallest.axis = 0;
  smallest.largest = false;
  KILN_ASSIGN_OR_RETURN(Node * kept,
                        ctx.add(node, "TopK", smallest, {key->outputs[0], keep_count}, false, "kept_axes"));
  KILN_ASSIGN_OR_RETURN(Node * shape, ctx.add(node, "Shape", ShapeAttrs{}, {x}, false, "shape"));
  Node* target = nullptr;
  if (squeeze) {
    KILN_ASSIGN_OR_RETURN(
        target, ctx.add(node, "Gather", GatherAttrs{}, {shape->outputs[0], kept->outputs[1]}, false, "target_shape"));
  } else {
    KILN_ASSIGN_OR_RETURN(Value * ones, int64_constant(ctx, node, "ones", std::vector<int64_t>(rank, 1)));
    KILN_ASSIGN_OR_RETURN(target, ctx.add(node, "ScatterElements", ScatterElementsAttrs{},
                                          {ones, kept->outputs[1], shape->outputs[0]}, false, "target_shape"));
  }
  return ctx.add(node, "Shuffle", ShuffleAttrs{}, {x, target->outputs[0]}).status();
}

// Squeeze/Unsqueeze axes: an attribute before opset 13, an optional input after.
Result<std::optional<std::vector<int64_t>>> squeeze_axes(ImportContext& ctx, const OnnxNode& node) {
  if (node.opset() < 13) {
    if (!node.has_attr("axes")) return std::optional<std::vector<int64_t>>();
    KILN_ASSIGN_OR_RETURN(auto axes, node.attr_ints("axes"));
    return std::optional<std::vector<int64_t>>(axes);
  }
  if (!node.has_input(1)) return std::optional<std::vector<int64_t>>();
  if (!ctx.constant_input(node, 1) && node.op_type() == "Squeeze")
    if (auto deduced = unambiguous_squeeze(ctx, node)) return deduced;
  KILN_ASSIGN_OR_RETURN(auto axes, constant_ints(ctx, node, 1, "axes"));
  return std::optional<std::vector<int64_t>>(axes);
}

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "Squeeze",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      KILN_ASSIGN_OR_RETURN(Value * x, ctx.input(node, 0));
      if (node.opset() >= 13 && node.has_input(1) && !ctx.constant_input(node, 1) && !unambiguous_squeeze(ctx, node)) {
        KILN_ASSIGN_OR_RETURN(Value * axes, ctx.input(node, 1));
        return runtime_axes_reshape(ctx, node, x, axes, true);
      }
      KILN_ASSIGN_OR_RETURN(auto axes, squeeze_axes(ctx, node));
      const int rank = x->dims.rank();
      std::vector<bool> drop(rank, false);
      if (axes) {
        KILN_ASSIGN_OR_RETURN(auto ax, node_axes(node, *axes, rank, "Squeeze axis"));
        for (int a : ax) {
          if (x->dims[a] >= 0 && x->dims[a] != 1)
            return node.error("Squeeze axis ", a, " of input shape ", x->dims.to_string(), " has size ", x->dims[a],
                              ", not 1");
          drop[a] = true;
        }
      } else {
        for (int i = 0; i < rank; ++i) {
          if (x->dims[i] < 0)
            return node.unsupported_error("Squeeze without axes on input shape ", x->dims.to_string(),
                                          ": whether dynamic dim ", i, " is 1 is unknown; give the axes");
          drop[i] = x->dims[i] == 1;
        }
      }
      std::vector<int64_t> from;
      for (int i = 0; i < rank; ++i)
        if (!drop[i]) from.push_back(i);
      return reshape_from(ctx, node, x, from);
    },
});

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "Unsqueeze",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      KILN_ASSIGN_OR_RETURN(Value * x, ctx.input(node, 0));
      if (node.opset() >= 13 && node.has_input(1) && !ctx.constant_input(node, 1)) {
        KILN_ASSIGN_OR_RETURN(Value * axes, ctx.input(node, 1));
        return runtime_axes_reshape(ctx, node, x, axes, false);
      }
      KILN_ASSIGN_OR_RETURN(auto axes, squeeze_axes(ctx, node));
      if (!axes) return node.error("Unsqueeze needs axes");
      const int out_rank = x->dims.rank() + static_cast<int>(axes->size());
      if (out_rank > kMaxRank)
        return node.unsupported_error("Unsqueeze to rank ", out_rank, "; kiln's maximum rank is ", kMaxRank);
      KILN_ASSIGN_OR_RETURN(auto ax, node_axes(node, *axes, out_rank, "Unsqueeze axis"));
      std::vector<bool> inserted(out_rank, false);
      for (int a : ax) inserted[a] = true;
      std::vector<int64_t> from;
      from.reserve(out_rank);
      int64_t next = 0;
      for (int i = 0; i < out_rank; ++i) from.push_back(inserted[i] ? kLiteralOne : next++);
      return reshape_from(ctx, node, x, from);
    },
});

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "ConstantOfShape",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      KILN_ASSIGN_OR_RETURN(Value * shape, ctx.input(node, 0));
      ConstantOfShapeAttrs a;
      for (const auto& attr : node.proto().attribute()) {
        if (attr.name() != "value") continue;
        KILN_ASSIGN_OR_RETURN(Tensor v, tensor_from_proto(attr.t(), ctx.tensor_source(), "ConstantOfShape 'value'"));
        if (v.numel() != 1) return node.error("ConstantOfShape 'value' must hold one element, got ", v.numel());
        a.dtype = v.dtype();
        if (is_floating(v.dtype()))
          a.value = static_cast<float>(v.at(0));
        else
          a.int_value = tensor_to_int64s(v)[0];
      }
      return ctx.add(node, "ConstantOfShape", a, {shape}).status();
    },
});

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "Range",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      std::vector<Value*> in;
      for (int i = 0; i < 3; ++i) {
        KILN_ASSIGN_OR_RETURN(Value * v, ctx.input(node, i));
        in.push_back(v);
      }
      return ctx.add(node, "Range", NoAttrs{}, in).status();
    },
});

KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{
    .op_type = "EyeLike",
    .import = [](ImportContext& ctx, const OnnxNode& node) -> Status {
      KILN_ASSIGN_OR_RETURN(Value * x, ctx.input(node, 0));
      EyeLikeAttrs a;
      a.k = node.attr_int("k", 0);
      if (node.has_attr("dtype")) {
        const int64_t t = node.attr_int("dtype", 1);
        const auto d = from_onnx_dtype(t);
        if (!d) return node.unsupported_error("EyeLike dtype ", onnx_dtype_name(t), " is not supported by kiln");
        a.has_dtype = true;
        a.dtype = *d;
      }
      return ctx.add(node, "EyeLike", a, {x}).status();
    },
});

}  // namespace
}  // namespace kiln::onnx_import
