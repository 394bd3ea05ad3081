#include "ops/registry.h"

#include <algorithm>

#include "kiln/logger.h"

namespace kiln {

std::string TensorDesc::to_string() const {
  if (!present) return "(absent)";
  const std::string elem = str_cat(dtype_name(dtype), dims.to_string());
  return kind == ValueKind::kTensor ? elem : str_cat(value_kind_name(kind), " of ", elem);
}

std::string OpSchema::input_name(int i) const {
  if (i < static_cast<int>(input_names.size())) return input_names[i];
  if (!input_names.empty() && max_inputs < 0) return str_cat(input_names.back(), "[", i, "]");
  return str_cat("input ", i);
}

Result<std::vector<TensorDesc>> OpSchema::infer_outputs(const InferContext& ctx) const {
  const int n = ctx.num_inputs();
  if (n < min_inputs || (max_inputs >= 0 && n > max_inputs)) {
    return invalid_argument(name, " takes ", min_inputs,
                            max_inputs == min_inputs ? "" : (max_inputs < 0 ? " or more" : str_cat(" to ", max_inputs)),
                            " inputs but got ", n);
  }
  for (int i = 0; i < min_inputs; ++i)
    if (!ctx.input(i).present) return invalid_argument(name, ": required input '", input_name(i), "' is missing");
  // Only host ops (and Identity, which passes anything through) take sequences and optionals.
  if (!host && name != "Identity")
    for (int i = 0; i < n; ++i)
      if (ctx.input(i).present && ctx.input(i).kind != ValueKind::kTensor)
        return invalid_argument(name, " input '", input_name(i), "' is a ", value_kind_name(ctx.input(i).kind),
                                "; it takes tensors");
  return infer(ctx);
}

Status expect_rank(const InferContext& ctx, int i, int lo, int hi) {
  if (!ctx.has_input(i)) return invalid_argument("input ", i, " is missing");
  const int r = ctx.input(i).dims.rank();
  if (r < lo || r > hi) {
    if (lo == hi)
      return invalid_argument("input ", i, " must have rank ", lo, " but has shape ", ctx.input(i).dims.to_string());
    return invalid_argument("input ", i, " must have rank ", lo, " to ", hi, " but has shape ",
                            ctx.input(i).dims.to_string());
  }
  return Status::ok();
}

Status expect_dtype(const InferContext& ctx, int i, std::initializer_list<DataType> dtypes) {
  const DataType d = ctx.input(i).dtype;
  if (std::find(dtypes.begin(), dtypes.end(), d) != dtypes.end()) return Status::ok();
  std::string allowed;
  for (DataType t : dtypes) allowed += str_cat(allowed.empty() ? "" : ", ", dtype_name(t));
  return invalid_argument("input ", i, " has type ", dtype_name(d), " but must be one of: ", allowed);
}

const char* value_kind_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::kTensor: return "tensor";
    case ValueKind::kSequence: return "sequence";
    case ValueKind::kOptionalTensor: return "optional tensor";
    case ValueKind::kOptionalSequence: return "optional sequence";
  }
  return "?";
}

bool dims_compatible(const Dims& a, const Dims& b) {
  if (a.rank() != b.rank()) return false;
  for (int i = 0; i < a.rank(); ++i)
    if (a[i] >= 0 && b[i] >= 0 && a[i] != b[i]) return false;
  return true;
}

std::vector<int64_t> tensor_to_int64s(const Tensor& t) {
  std::vector<int64_t> out(static_cast<size_t>(std::max<int64_t>(t.numel(), 0)));
  for (size_t i = 0; i < out.size(); ++i) {
    if (t.dtype() == DataType::kInt64)
      out[i] = t.data<int64_t>()[i];
    else
      out[i] = static_cast<int64_t>(t.at(static_cast<int64_t>(i)));
  }
  return out;
}

std::vector<double> tensor_to_doubles(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(std::max<int64_t>(t.numel(), 0)));
  for (size_t i = 0; i < out.size(); ++i) out[i] = t.at(static_cast<int64_t>(i));
  return out;
}

OpRegistry& OpRegistry::global() {
  static OpRegistry* registry = new OpRegistry;
  return *registry;
}

bool OpRegistry::add(OpSchema schema) {
  if (schemas_.count(schema.name)) {
    log_error("op '", schema.name, "' is registered twice; keeping the first");
    return false;
  }
  std::string name = schema.name;
  schemas_.emplace(std::move(name), std::move(schema));
  return true;
}

const OpSchema* OpRegistry::find(std::string_view name) const {
  auto it = schemas_.find(name);
  return it == schemas_.end() ? nullptr : &it->second;
}

std::vector<const OpSchema*> OpRegistry::all() const {
  std::vector<const OpSchema*> out;
  for (auto& [_, s] : schemas_) out.push_back(&s);
  std::sort(out.begin(), out.end(),
            [](auto* a, auto* b) { return std::tie(a->family, a->name) < std::tie(b->family, b->name); });
  return out;
}

}  // namespace kiln
