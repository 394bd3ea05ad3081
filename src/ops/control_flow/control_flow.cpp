#include "ops/control_flow/control_flow.h"

#include "ops/registry.h"

namespace kiln {

Result<TensorDesc> merge_descs(const TensorDesc& a, const TensorDesc& b) {
  // An optional meets the kind it holds (Loop carrying an optional that the body fills): stays optional.
  const bool holds = (a.kind == ValueKind::kOptionalSequence && b.kind == ValueKind::kSequence) ||
                     (a.kind == ValueKind::kOptionalTensor && b.kind == ValueKind::kTensor);
  if (holds) return merge_descs(a, kind_desc(b, a.kind));
  if (a.kind != b.kind) return invalid_argument("a ", value_kind_name(a.kind), " meets a ", value_kind_name(b.kind));
  if (a.dtype != b.dtype) return invalid_argument(dtype_name(a.dtype), " meets ", dtype_name(b.dtype));
  TensorDesc out = a;
  if (a.kind != ValueKind::kTensor && a.dims.rank() == 0) return b;  // element shape unknown
  if (a.dims.rank() != b.dims.rank()) {
    for (int i = 0; i < out.dims.rank(); ++i) out.dims[i] = kDynamicDim;
    return out;
  }
  for (int i = 0; i < a.dims.rank(); ++i)
    if (a.dims[i] != b.dims[i]) out.dims[i] = kDynamicDim;
  return out;
}

int64_t scan_axis(const std::vector<int64_t>& axes, size_t i, int rank) {
  const int64_t a = i < axes.size() ? axes[i] : 0;
  return a < 0 ? a + rank : a;
}

namespace {

using Descs = std::vector<TensorDesc>;

Status expect_subgraphs(const InferContext& ctx, const char* op, std::initializer_list<const char*> names) {
  if (ctx.subgraphs().size() != names.size())
    return invalid_argument(op, " needs its subgraph", names.size() > 1 ? "s" : "", " (", *names.begin(),
                            names.size() > 1 ? ", ..." : "", ")");
  return Status::ok();
}

Status expect_kind(const InferContext& ctx, const char* op, int i, std::initializer_list<ValueKind> kinds) {
  if (!ctx.has_input(i)) return Status::ok();
  for (ValueKind k : kinds)
    if (ctx.input(i).kind == k) return Status::ok();
  return invalid_argument(op, " input ", i, " is a ", value_kind_name(ctx.input(i).kind), "; it must be a ",
                          value_kind_name(*kinds.begin()));
}

Status expect_scalar_int(const InferContext& ctx, const char* op, int i, const char* name) {
  if (!ctx.has_input(i)) return Status::ok();
  const TensorDesc& d = ctx.input(i);
  if (d.kind != ValueKind::kTensor || (d.dtype != DataType::kInt64 && d.dtype != DataType::kInt32))
    return invalid_argument(op, " input '", name, "' must be an int64 scalar, got ", d.to_string());
  if (d.dims.is_static() && d.dims.numel() != 1)
    return invalid_argument(op, " input '", name, "' must hold one value, got shape ", d.dims.to_string());
  return Status::ok();
}

OpSchema if_schema() {
  OpSchema s = make_schema<NoAttrs>("If", "control_flow", "runs then_branch or else_branch by a boolean (ONNX If)");
  s.input_names = {"cond", "captured"};
  s.max_inputs = -1;
  s.host = true;
  s.infer = [](const InferContext& ctx) -> Result<Descs> {
    KILN_RETURN_IF_ERROR(expect_subgraphs(ctx, "If", {"then_branch", "else_branch"}));
    const TensorDesc& c = ctx.input(0);
    if (c.kind != ValueKind::kTensor || (c.dims.is_static() && c.dims.numel() != 1))
      return invalid_argument("If 'cond' must hold one value, got ", c.to_string());
    const auto& then_out = ctx.subgraphs()[0].outputs;
    const auto& else_out = ctx.subgraphs()[1].outputs;
    if (then_out.size() != else_out.size())
      return invalid_argument("If branches give ", then_out.size(), " and ", else_out.size(),
                              " outputs; they must give the same number");
    Descs out;
    for (size_t i = 0; i < then_out.size(); ++i) {
      auto m = merge_descs(then_out[i], else_out[i]);
      if (!m) return invalid_argument("If output ", i, " differs between the branches: ", m.status().message());
      out.push_back(*m);
    }
    return out;
  };
  return s;
}

OpSchema loop_schema() {
  OpSchema s = make_schema<NoAttrs>("Loop", "control_flow",
                                    "runs body while a trip count and a condition allow, with carried values and scan "
                                    "outputs (ONNX Loop)");
  s.input_names = {"M", "cond", "v_initial"};
  s.min_inputs = 0;  // M and cond may both be left out
  s.max_inputs = -1;
  s.host = true;
  s.infer = [](const InferContext& ctx) -> Result<Descs> {
    KILN_RETURN_IF_ERROR(expect_subgraphs(ctx, "Loop", {"body"}));
    KILN_RETURN_IF_ERROR(expect_scalar_int(ctx, "Loop", 0, "M"));
    const SubgraphSig& body = ctx.subgraphs()[0];
    if (body.inputs.size() < 2 || body.outputs.empty())
      return invalid_argument("Loop body must take (iteration_num, cond, carried...) and give (cond, carried...)");
    const size_t n = body.inputs.size() - 2;
    if (body.outputs.size() < 1 + n)
      return invalid_argument("Loop body gives ", body.outputs.size(), " outputs for ", n,
                              " carried values; it must give cond and every carried value");
    if (static_cast<size_t>(ctx.num_inputs()) < 2 + n)
      return invalid_argument("Loop has ", ctx.num_inputs() - 2, " initial values for ", n, " carried values");
    Descs out;
    for (size_t i = 0; i < n; ++i) {
      auto m = merge_descs(ctx.input(static_cast<int>(2 + i)), body.outputs[1 + i]);
      if (!m) return invalid_argument("Loop carried value ", i, " changes type in the body: ", m.status().message());
      out.push_back(*m);
    }
    for (size_t k = 1 + n; k < body.outputs.size(); ++k) {
      const TensorDesc& e = body.outputs[k];
      if (e.kind != ValueKind::kTensor) return invalid_argument("Loop scan output ", k - 1 - n, " must be a tensor");
      Dims d{kDynamicDim};
      for (int64_t x : e.dims) d.push_back(x);
      out.push_back({e.dtype, d, true});
    }
    return out;
  };
  return s;
}

OpSchema scan_schema() {
  OpSchema s = make_schema<ScanAttrs>("Scan", "control_flow",
                                      "runs body over slices of the scan inputs with carried state (ONNX Scan)");
  s.input_names = {"initial_state_and_scan_inputs"};
  s.min_inputs = 0;  // opset 8's first input, sequence_lens, may be left out
  s.max_inputs = -1;
  s.host = true;
  s.infer = [](const InferContext& ctx) -> Result<Descs> {
    const auto& a = ctx.attrs_as<ScanAttrs>();
    KILN_RETURN_IF_ERROR(expect_subgraphs(ctx, "Scan", {"body"}));
    const SubgraphSig& body = ctx.subgraphs()[0];
    const int first = a.batched ? 1 : 0, lead = a.batched ? 1 : 0;
    const int64_t m = a.num_scan_inputs;
    if (m < 1 || static_cast<size_t>(m) > body.inputs.size())
      return invalid_argument("Scan num_scan_inputs is ", m, "; it must be in [1, ", body.inputs.size(), "]");
    const size_t n = body.inputs.size() - static_cast<size_t>(m);
    if (ctx.num_inputs() < first + static_cast<int>(n + m) || body.outputs.size() < n)
      return invalid_argument("Scan has ", ctx.num_inputs() - first, " inputs and its body ", body.outputs.size(),
                              " outputs for ", n, " states and ", m, " scan inputs");
    int64_t len = kDynamicDim, batch = kDynamicDim;
    for (int64_t j = 0; j < m; ++j) {
      const Dims& d = ctx.input(first + static_cast<int>(n + j)).dims;
      const int64_t ax = scan_axis(a.scan_input_axes, j, d.rank() - lead) + lead;
      if (ax < lead || ax >= d.rank())
        return invalid_argument("Scan input axis ", ax - lead, " is out of range for scan input ", j, " ",
                                d.to_string());
      if (j == 0) len = d[ax];
      if (lead && d.rank() > 0) batch = d[0];
    }
    Descs out;
    for (size_t i = 0; i < n; ++i) {
      TensorDesc init = ctx.input(first + static_cast<int>(i));
      TensorDesc o = body.outputs[i];
      if (lead) {
        Dims d{init.dims.rank() > 0 ? init.dims[0] : kDynamicDim};
        for (int64_t x : o.dims) d.push_back(x);
        o.dims = d;
      }
      auto mg = merge_descs(init, o);
      if (!mg) return invalid_argument("Scan state ", i, " changes type in the body: ", mg.status().message());
      out.push_back(*mg);
    }
    for (size_t k = n; k < body.outputs.size(); ++k) {
      const TensorDesc& e = body.outputs[k];
      const int64_t ax = scan_axis(a.scan_output_axes, k - n, e.dims.rank() + 1);
      if (ax < 0 || ax > e.dims.rank()) return invalid_argument("Scan output axis ", ax, " is out of range");
      Dims d;
      if (lead) d.push_back(batch);
      for (int i = 0; i <= e.dims.rank(); ++i) {
        if (i == ax) d.push_back(len);
        if (i < e.dims.rank()) d.push_back(e.dims[i]);
      }
      out.push_back({e.dtype, d, true});
    }
    return out;
  };
  return s;
}

OpSchema sequence_map_schema() {
  OpSchema s = make_schema<NoAttrs>("SequenceMap", "control_flow",
                                    "applies body to each element of the input sequences (ONNX SequenceMap)");
  s.input_names = {"input_sequence", "additional_inputs"};
  s.max_inputs = -1;
  s.host = true;
  s.infer = [](const InferContext& ctx) -> Result<Descs> {
    KILN_RETURN_IF_ERROR(expect_subgraphs(ctx, "SequenceMap", {"body"}));
    KILN_RETURN_IF_ERROR(expect_kind(ctx, "SequenceMap", 0, {ValueKind::kSequence}));
    Descs out;
    for (const TensorDesc& o : ctx.subgraphs()[0].outputs) out.push_back(kind_desc(o, ValueKind::kSequence));
    return out;
  };
  return s;
}

OpSchema sequence_empty_schema() {
  OpSchema s =
      make_schema<SequenceEmptyAttrs>("SequenceEmpty", "control_flow", "an empty sequence (ONNX SequenceEmpty)");
  s.min_inputs = s.max_inputs = 0;
  s.host = true;
  s.infer = [](const InferContext& ctx) -> Result<Descs> {
    return Descs{{ctx.attrs_as<SequenceEmptyAttrs>().dtype, {}, true, ValueKind::kSequence}};
  };
  return s;
}

OpSchema sequence_construct_schema() {
  OpSchema s = make_schema<NoAttrs>("SequenceConstruct", "control_flow",
                                    "a sequence of the input tensors (ONNX SequenceConstruct)");
  s.input_names = {"inputs"};
  s.max_inputs = -1;
  s.host = true;
  s.infer = [](const InferContext& ctx) -> Result<Descs> {
    TensorDesc e = ctx.input(0);
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      KILN_RETURN_IF_ERROR(expect_kind(ctx, "SequenceConstruct", i, {ValueKind::kTensor}));
      auto m = merge_descs(e, ctx.input(i));
      if (!m) return invalid_argument("SequenceConstruct input ", i, ": ", m.status().message());
      e = *m;
    }
    return Descs{kind_desc(e, ValueKind::kSequence)};
  };
  return s;
}

OpSchema sequence_insert_schema() {
  OpSchema s = make_schema<NoAttrs>("SequenceInsert", "control_flow",
                                    "the sequence with a tensor inserted at a position (ONNX SequenceInsert)");
  s.input_names = {"input_sequence", "tensor", "position"};
  s.min_inputs = 2;
  s.max_inputs = 3;
  s.host = true;
  s.infer = [](const InferContext& ctx) -> Result<Descs> {
    KILN_RETURN_IF_ERROR(expect_kind(ctx, "SequenceInsert", 0, {ValueKind::kSequence}));
    KILN_RETURN_IF_ERROR(expect_kind(ctx, "SequenceInsert", 1, {ValueKind::kTensor}));
    KILN_RETURN_IF_ERROR(expect_scalar_int(ctx, "SequenceInsert", 2, "position"));
    auto m = merge_descs(ctx.input(0), kind_desc(ctx.input(1), ValueKind::kSequence));
    if (!m) return invalid_argument("SequenceInsert: ", m.status().message());
    return Descs{*m};
  };
  return s;
}

OpSchema sequence_at_schema() {
  OpSchema s = make_schema<NoAttrs>("SequenceAt", "control_flow", "the element at a position (ONNX SequenceAt)");
  s.input_names = {"input_sequence", "position"};
  s.min_inputs = s.max_inputs = 2;
  s.host = true;
  s.infer = [](const InferContext& ctx) -> Result<Descs> {
    KILN_RETURN_IF_ERROR(expect_kind(ctx, "SequenceAt", 0, {ValueKind::kSequence}));
    KILN_RETURN_IF_ERROR(expect_scalar_int(ctx, "SequenceAt", 1, "position"));
    return Descs{kind_desc(ctx.input(0), ValueKind::kTensor)};
  };
  return s;
}

OpSchema sequence_erase_schema() {
  OpSchema s = make_schema<NoAttrs>("SequenceErase", "control_flow",
                                    "the sequence without the element at a position (ONNX SequenceErase)");
  s.input_names = {"input_sequence", "position"};
  s.max_inputs = 2;
  s.host = true;
  s.infer = [](const InferContext& ctx) -> Result<Descs> {
    KILN_RETURN_IF_ERROR(expect_kind(ctx, "SequenceErase", 0, {ValueKind::kSequence}));
    KILN_RETURN_IF_ERROR(expect_scalar_int(ctx, "SequenceErase", 1, "position"));
    return Descs{ctx.input(0)};
  };
  return s;
}

OpSchema sequence_length_schema() {
  OpSchema s = make_schema<NoAttrs>("SequenceLength", "control_flow",
                                    "the number of elements as an int64 scalar (ONNX SequenceLength)");
  s.input_names = {"input_sequence"};
  s.host = true;
  s.infer = [](const InferContext& ctx) -> Result<Descs> {
    KILN_RETURN_IF_ERROR(expect_kind(ctx, "SequenceLength", 0, {ValueKind::kSequence}));
    return one_output(DataType::kInt64, {});
  };
  return s;
}

OpSchema split_to_sequence_schema() {
  OpSchema s = make_schema<SplitToSequenceAttrs>(
      "SplitToSequence", "control_flow", "splits a tensor into a sequence along an axis (ONNX SplitToSequence)");
  s.input_names = {"input", "split"};
  s.max_inputs = 2;
  s.host = true;
  s.infer = [](const InferContext& ctx) -> Result<Descs> {
    const auto& a = ctx.attrs_as<SplitToSequenceAttrs>();
    Dims d = ctx.input(0).dims;
    const int64_t axis = a.axis < 0 ? a.axis + d.rank() : a.axis;
    if (axis < 0 || axis >= d.rank())
      return invalid_argument("SplitToSequence axis ", a.axis, " is out of range for input ", d.to_string());
    if (ctx.has_input(1)) {
      const DataType t = ctx.input(1).dtype;
      if (t != DataType::kInt64 && t != DataType::kInt32)
        return invalid_argument("SplitToSequence 'split' must be int64, got ", dtype_name(t));
      d[static_cast<int>(axis)] = kDynamicDim;
    } else if (a.keepdims) {
      d[static_cast<int>(axis)] = 1;
    } else {
      Dims e;
      for (int i = 0; i < d.rank(); ++i)
        if (i != axis) e.push_back(d[i]);
      d = e;
    }
    return Descs{{ctx.input(0).dtype, d, true, ValueKind::kSequence}};
  };
  return s;
}

OpSchema concat_from_sequence_schema() {
  OpSchema s = make_schema<ConcatFromSequenceAttrs>(
      "ConcatFromSequence", "control_flow",
      "concatenates (or stacks) the elements of a sequence (ONNX ConcatFromSequence)");
  s.input_names = {"input_sequence"};
  s.host = true;
  s.infer = [](const InferContext& ctx) -> Result<Descs> {
    KILN_RETURN_IF_ERROR(expect_kind(ctx, "ConcatFromSequence", 0, {ValueKind::kSequence}));
    const auto& a = ctx.attrs_as<ConcatFromSequenceAttrs>();
    Dims d = ctx.input(0).dims;
    const int rank = d.rank() + (a.new_axis ? 1 : 0);
    const int64_t axis = a.axis < 0 ? a.axis + rank : a.axis;
    if (rank > 0 && (axis < 0 || axis >= rank))
      return invalid_argument("ConcatFromSequence axis ", a.axis, " is out of range for elements ", d.to_string());
    Dims out;
    for (int i = 0; i < rank; ++i) {
      if (i == axis)
        out.push_back(kDynamicDim);
      else
        out.push_back(d[a.new_axis && i > axis ? i - 1 : i]);
    }
    return one_output(ctx.input(0).dtype, out);
  };
  return s;
}

OpSchema optional_schema() {
  OpSchema s = make_schema<OptionalAttrs>("Optional", "control_flow",
                                          "an optional holding the input, or an empty one (ONNX Optional)");
  s.input_names = {"input"};
  s.min_inputs = 0;
  s.host = true;
  s.infer = [](const InferContext& ctx) -> Result<Descs> {
    if (ctx.has_input(0)) {
      KILN_RETURN_IF_ERROR(expect_kind(ctx, "Optional", 0, {ValueKind::kTensor, ValueKind::kSequence}));
      const bool seq = ctx.input(0).kind == ValueKind::kSequence;
      return Descs{kind_desc(ctx.input(0), seq ? ValueKind::kOptionalSequence : ValueKind::kOptionalTensor)};
    }
    const auto& a = ctx.attrs_as<OptionalAttrs>();
    return Descs{{a.dtype, {}, true, a.sequence ? ValueKind::kOptionalSequence : ValueKind::kOptionalTensor}};
  };
  return s;
}

OpSchema optional_has_element_schema() {
  OpSchema s = make_schema<NoAttrs>("OptionalHasElement", "control_flow",
                                    "whether an optional holds a value (ONNX OptionalHasElement)");
  s.input_names = {"input"};
  s.min_inputs = 0;
  s.host = true;
  s.infer = [](const InferContext&) -> Result<Descs> { return one_output(DataType::kBool, {}); };
  return s;
}

OpSchema optional_get_element_schema() {
  OpSchema s = make_schema<NoAttrs>("OptionalGetElement", "control_flow",
                                    "the value an optional holds (ONNX OptionalGetElement)");
  s.input_names = {"input"};
  s.host = true;
  s.infer = [](const InferContext& ctx) -> Result<Descs> {
    const ValueKind k = ctx.input(0).kind;
    const ValueKind e =
        k == ValueKind::kOptionalSequence || k == ValueKind::kSequence ? ValueKind::kSequence : ValueKind::kTensor;
    return Descs{kind_desc(ctx.input(0), e)};
  };
  return s;
}

KILN_REGISTER_OP(if_schema());
KILN_REGISTER_OP(loop_schema());
KILN_REGISTER_OP(scan_schema());
KILN_REGISTER_OP(sequence_map_schema());
KILN_REGISTER_OP(sequence_empty_schema());
KILN_REGISTER_OP(sequence_construct_schema());
KILN_REGISTER_OP(sequence_insert_schema());
KILN_REGISTER_OP(sequence_at_schema());
KILN_REGISTER_OP(sequence_erase_schema());
KILN_REGISTER_OP(sequence_length_schema());
KILN_REGISTER_OP(split_to_sequence_schema());
KILN_REGISTER_OP(concat_from_sequence_schema());
KILN_REGISTER_OP(optional_schema());
KILN_REGISTER_OP(optional_has_element_schema());
KILN_REGISTER_OP(optional_get_element_schema());

}  // namespace

}  // namespace kiln
