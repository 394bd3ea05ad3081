#include "ops/indexing/indexing.h"

#include <cmath>

#include "ops/registry.h"

namespace kiln {

const char* enum_name(ScatterReduction r) {
  switch (r) {
    case ScatterReduction::kNone: return "none";
    case ScatterReduction::kAdd: return "add";
    case ScatterReduction::kMul: return "mul";
    case ScatterReduction::kMax: return "max";
    case ScatterReduction::kMin: return "min";
  }
  return "?";
}

namespace {

Status expect_index_dtype(const InferContext& ctx, const char* op, int i) {
  const DataType d = ctx.input(i).dtype;
  if (d != DataType::kInt32 && d != DataType::kInt64)
    return invalid_argument(op, " input 'indices' must be int32 or int64, got ", dtype_name(d));
  return Status::ok();
}

Status expect_rank_at_least(const InferContext& ctx, const char* op, const char* name, int i, int lo) {
  if (ctx.input(i).dims.rank() < lo)
    return invalid_argument(op, " input '", name, "' must have rank >= ", lo, ", got shape ",
                            ctx.input(i).dims.to_string());
  return Status::ok();
}

Result<int> op_axis(const char* op, int64_t axis, int rank) {
  auto a = normalize_axis(axis, rank);
  if (!a) return invalid_argument(op, " attribute 'axis': ", a.status().message());
  return *a;
}

bool known(int64_t d) { return d != kDynamicDim; }

Status check_rank_limit(const char* op, int rank) {
  if (rank > kMaxRank)
    return invalid_argument(op, " output would have rank ", rank, "; kiln supports up to ", kMaxRank);
  return Status::ok();
}

// Non-axis dims of `indices` must not exceed those of `data` (GatherElements, ScatterElements).
Status check_elements_dims(const char* op, const Dims& data, const Dims& indices, int axis) {
  if (indices.rank() != data.rank())
    return invalid_argument(op, " input 'indices' must have the rank of 'data' (", data.rank(), "), got shape ",
                            indices.to_string());
  for (int d = 0; d < data.rank(); ++d)
    if (d != axis && known(data[d]) && known(indices[d]) && indices[d] > data[d])
      return invalid_argument(op, " 'indices' dim ", d, " is ", indices[d], " but 'data' has only ", data[d],
                              " there (shapes ", indices.to_string(), " and ", data.to_string(), ")");
  return Status::ok();
}

OpSchema gather_schema() {
  OpSchema s = make_schema<GatherAttrs>("Gather", "indexing", "Picks slices along an axis by index (ONNX Gather)");
  s.input_names = {"data", "indices"};
  s.min_inputs = s.max_inputs = 2;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& a = ctx.attrs_as<GatherAttrs>();
    KILN_RETURN_IF_ERROR(expect_rank_at_least(ctx, "Gather", "data", 0, 1));
    KILN_RETURN_IF_ERROR(expect_index_dtype(ctx, "Gather", 1));
    const Dims& data = ctx.input(0).dims;
    const Dims& idx = ctx.input(1).dims;
    KILN_ASSIGN_OR_RETURN(const int axis, op_axis("Gather", a.axis, data.rank()));
    KILN_RETURN_IF_ERROR(check_rank_limit("Gather", data.rank() - 1 + idx.rank()));
    Dims out;
    for (int i = 0; i < axis; ++i) out.push_back(data[i]);
    for (int64_t d : idx) out.push_back(d);
    for (int i = axis + 1; i < data.rank(); ++i) out.push_back(data[i]);
    return one_output(ctx.input(0).dtype, out);
  };
  return s;
}

OpSchema gather_elements_schema() {
  OpSchema s = make_schema<GatherElementsAttrs>("GatherElements", "indexing",
                                                "Picks one element per index along an axis (ONNX GatherElements)");
  s.input_names = {"data", "indices"};
  s.min_inputs = s.max_inputs = 2;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& a = ctx.attrs_as<GatherElementsAttrs>();
    KILN_RETURN_IF_ERROR(expect_rank_at_least(ctx, "GatherElements", "data", 0, 1));
    KILN_RETURN_IF_ERROR(expect_index_dtype(ctx, "GatherElements", 1));
    const Dims& data = ctx.input(0).dims;
    KILN_ASSIGN_OR_RETURN(const int axis, op_axis("GatherElements", a.axis, data.rank()));
    KILN_RETURN_IF_ERROR(check_elements_dims("GatherElements", data, ctx.input(1).dims, axis));
    return one_output(ctx.input(0).dtype, ctx.input(1).dims);
  };
  return s;
}

OpSchema gather_nd_schema() {
  OpSchema s = make_schema<GatherNDAttrs>("GatherND", "indexing",
                                          "Gathers slices addressed by index tuples (ONNX GatherND, batch_dims)");
  s.input_names = {"data", "indices"};
  s.min_inputs = s.max_inputs = 2;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& a = ctx.attrs_as<GatherNDAttrs>();
    KILN_RETURN_IF_ERROR(expect_rank_at_least(ctx, "GatherND", "data", 0, 1));
    KILN_RETURN_IF_ERROR(expect_rank_at_least(ctx, "GatherND", "indices", 1, 1));
    KILN_RETURN_IF_ERROR(expect_index_dtype(ctx, "GatherND", 1));
    const Dims& data = ctx.input(0).dims;
    const Dims& idx = ctx.input(1).dims;
    const int r = data.rank(), q = idx.rank();
    const int64_t b = a.batch_dims;
    if (b < 0 || b >= std::min(r, q))
      return invalid_argument("GatherND attribute 'batch_dims' is ", b, "; it must be in [0, ", std::min(r, q) - 1,
                              "] for data rank ", r, " and indices rank ", q);
    for (int i = 0; i < b; ++i)
      if (known(data[i]) && known(idx[i]) && data[i] != idx[i])
        return invalid_argument("GatherND batch dim ", i, " differs: data has ", data[i], ", indices has ", idx[i],
                                " (shapes ", data.to_string(), " and ", idx.to_string(), ")");
    const int64_t m = idx[q - 1];
    if (!known(m)) return invalid_argument("GatherND needs the last dim of 'indices' to be known");
    if (m < 1 || m > r - b)
      return invalid_argument("GatherND 'indices' last dim is ", m, "; it must be in [1, ", r - b, "] (data rank ", r,
                              " minus batch_dims ", b, ")");
    Dims out;
    for (int i = 0; i < q - 1; ++i) out.push_back(idx[i]);
    for (int i = static_cast<int>(b + m); i < r; ++i) out.push_back(data[i]);
    return one_output(ctx.input(0).dtype, out);
  };
  return s;
}

OpSchema scatter_nd_schema() {
  OpSchema s = make_schema<ScatterNDAttrs>(
      "ScatterND", "indexing", "Writes update slices at index tuples, optionally reducing (ONNX ScatterND)");
  s.input_names = {"data", "indices", "updates"};
  s.min_inputs = s.max_inputs = 3;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    KILN_RETURN_IF_ERROR(expect_rank_at_least(ctx, "ScatterND", "data", 0, 1));
    KILN_RETURN_IF_ERROR(expect_rank_at_least(ctx, "ScatterND", "indices", 1, 1));
    KILN_RETURN_IF_ERROR(expect_index_dtype(ctx, "ScatterND", 1));
    const Dims& data = ctx.input(0).dims;
    const Dims& idx = ctx.input(1).dims;
    const Dims& upd = ctx.input(2).dims;
    if (ctx.input(2).dtype != ctx.input(0).dtype)
      return invalid_argument("ScatterND 'updates' is ", dtype_name(ctx.input(2).dtype), " but 'data' is ",
                              dtype_name(ctx.input(0).dtype));
    const int r = data.rank(), q = idx.rank();
    const int64_t m = idx[q - 1];
    if (!known(m)) return invalid_argument("ScatterND needs the last dim of 'indices' to be known");
    if (m < 1 || m > r) return invalid_argument("ScatterND 'indices' last dim is ", m, "; it must be in [1, ", r, "]");
    Dims want;
    for (int i = 0; i < q - 1; ++i) want.push_back(idx[i]);
    for (int i = static_cast<int>(m); i < r; ++i) want.push_back(data[i]);
    bool ok = want.rank() == upd.rank();
    for (int i = 0; ok && i < upd.rank(); ++i) ok = !known(want[i]) || !known(upd[i]) || want[i] == upd[i];
    if (!ok)
      return invalid_argument("ScatterND 'updates' has shape ", upd.to_string(), " but must have shape ",
                              want.to_string(), " (indices.shape[:-1] + data.shape[", m, ":])");
    return one_output(ctx.input(0).dtype, data);
  };
  return s;
}

OpSchema scatter_elements_schema() {
  OpSchema s = make_schema<ScatterElementsAttrs>(
      "ScatterElements", "indexing", "Writes updates at per-element indices along an axis (ONNX ScatterElements)");
  s.input_names = {"data", "indices", "updates"};
  s.min_inputs = s.max_inputs = 3;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& a = ctx.attrs_as<ScatterElementsAttrs>();
    KILN_RETURN_IF_ERROR(expect_rank_at_least(ctx, "ScatterElements", "data", 0, 1));
    KILN_RETURN_IF_ERROR(expect_index_dtype(ctx, "ScatterElements", 1));
    const Dims& data = ctx.input(0).dims;
    if (ctx.input(2).dtype != ctx.input(0).dtype)
      return invalid_argument("ScatterElements 'updates' is ", dtype_name(ctx.input(2).dtype), " but 'data' is ",
                              dtype_name(ctx.input(0).dtype));
    KILN_ASSIGN_OR_RETURN(const int axis, op_axis("ScatterElements", a.axis, data.rank()));
    KILN_RETURN_IF_ERROR(check_elements_dims("ScatterElements", data, ctx.input(1).dims, axis));
    if (!dims_compatible(ctx.input(1).dims, ctx.input(2).dims))
      return invalid_argument("ScatterElements 'updates' shape ", ctx.input(2).dims.to_string(),
                              " must equal the 'indices' shape ", ctx.input(1).dims.to_string());
    return one_output(ctx.input(0).dtype, data);
  };
  return s;
}

OpSchema topk_schema() {
  OpSchema s = make_schema<TopKAttrs>("TopK", "indexing",
                                      "The k largest or smallest values along an axis and their indices (ONNX TopK)");
  s.input_names = {"x", "k"};
  s.min_inputs = s.max_inputs = 2;
  s.value_inputs = {1};
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& a = ctx.attrs_as<TopKAttrs>();
    KILN_RETURN_IF_ERROR(expect_rank_at_least(ctx, "TopK", "x", 0, 1));
    if (ctx.input(0).dtype == DataType::kBool) return invalid_argument("TopK does not take bool input 'x'");
    if (ctx.input(1).dtype != DataType::kInt64 && ctx.input(1).dtype != DataType::kInt32)
      return invalid_argument("TopK input 'k' must be int64, got ", dtype_name(ctx.input(1).dtype));
    if (ctx.input(1).dims.numel() != 1)
      return invalid_argument("TopK input 'k' must hold one value (shape [1]), got shape ",
                              ctx.input(1).dims.to_string());
    Dims out = ctx.input(0).dims;
    KILN_ASSIGN_OR_RETURN(const int axis, op_axis("TopK", a.axis, out.rank()));
    if (const Tensor* kt = ctx.value(1)) {
      const int64_t k = tensor_to_int64s(*kt).at(0);
      if (k < 0 || (known(out[axis]) && k > out[axis]))
        return invalid_argument("TopK 'k' is ", k, "; it must be in [0, ", out[axis], "] (the size of axis ", axis,
                                " of 'x' ", out.to_string(), ")");
      out[axis] = k;
    } else {
      out[axis] = kDynamicDim;
    }
    return std::vector<TensorDesc>{{ctx.input(0).dtype, out, true}, {DataType::kInt64, out, true}};
  };
  return s;
}

OpSchema one_hot_schema() {
  OpSchema s = make_schema<OneHotAttrs>("OneHot", "indexing", "One-hot encoding along a new axis (ONNX OneHot)");
  s.input_names = {"indices", "depth", "values"};
  s.min_inputs = s.max_inputs = 3;
  s.value_inputs = {1};
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& a = ctx.attrs_as<OneHotAttrs>();
    const Dims& idx = ctx.input(0).dims;
    if (ctx.input(0).dtype == DataType::kBool) return invalid_argument("OneHot input 'indices' must be numeric");
    if (ctx.input(1).dims.numel() != 1)
      return invalid_argument("OneHot input 'depth' must hold one value, got shape ", ctx.input(1).dims.to_string());
    if (ctx.input(2).dims.rank() != 1 || ctx.input(2).dims[0] != 2)
      return invalid_argument("OneHot input 'values' must have shape [2] ([off, on]), got ",
                              ctx.input(2).dims.to_string());
    KILN_RETURN_IF_ERROR(check_rank_limit("OneHot", idx.rank() + 1));
    KILN_ASSIGN_OR_RETURN(const int axis, op_axis("OneHot", a.axis, idx.rank() + 1));
    int64_t depth = kDynamicDim;
    if (const Tensor* dt = ctx.value(1)) {
      const double d = tensor_to_doubles(*dt).at(0);
      if (!(d >= 1) || d > 1e9) return invalid_argument("OneHot 'depth' is ", d, "; it must be in [1, 1e9]");
      depth = static_cast<int64_t>(d);
    }
    Dims out;
    for (int i = 0, j = 0; i <= idx.rank(); ++i) out.push_back(i == axis ? depth : idx[j++]);
    return one_output(ctx.input(2).dtype, out);
  };
  return s;
}

KILN_REGISTER_OP(gather_schema());
KILN_REGISTER_OP(gather_elements_schema());
KILN_REGISTER_OP(gather_nd_schema());
KILN_REGISTER_OP(scatter_nd_schema());
KILN_REGISTER_OP(scatter_elements_schema());
KILN_REGISTER_OP(topk_schema());
KILN_REGISTER_OP(one_hot_schema());

}  // namespace
}  // namespace kiln
