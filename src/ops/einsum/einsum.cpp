#include "ops/einsum/einsum.h"

#include <algorithm>

#include "ops/fold_cost.h"
#include "ops/registry.h"

namespace kiln {
namespace {

constexpr int kLetters = 52;  // 'A'..'Z' then 'a'..'z': ids in ASCII order
constexpr int kEllipsis = -1;

int letter_id(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
  return -2;
}

std::string label_name(int id) { return std::string(1, id < 26 ? char('A' + id) : char('a' + id - 26)); }

// One term of the equation as label ids, kEllipsis for "...".
Result<std::vector<int>> parse_term(const std::string& eq, const std::string& term) {
  std::vector<int> out;
  bool ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    if (term[i] == '.') {
      if (term.compare(i, 3, "...") != 0)
        return invalid_argument("Einsum equation '", eq, "': a '.' must be part of an ellipsis '...'");
      if (ellipsis) return invalid_argument("Einsum equation '", eq, "': term '", term, "' has two ellipses");
      ellipsis = true;
      out.push_back(kEllipsis);
      i += 2;
      continue;
    }
    const int id = letter_id(term[i]);
    if (id < 0)
      return invalid_argument("Einsum equation '", eq, "': '", std::string(1, term[i]),
                              "' is not a label (labels are letters a-z, A-Z)");
    out.push_back(id);
  }
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts(1);
  for (char c : s) {
    if (c == sep)
      parts.emplace_back();
    else
      parts.back() += c;
  }
  return parts;
}

}  // namespace

Result<EinsumPlan> einsum_plan(const std::string& equation, std::span<const Dims> inputs) {
  std::string eq;
  for (char c : equation)
    if (c != ' ' && c != '\t') eq += c;
  const size_t arrow = eq.find("->");
  const bool explicit_output = arrow != std::string::npos;
  const std::string lhs = explicit_output ? eq.substr(0, arrow) : eq;
  const std::string rhs = explicit_output ? eq.substr(arrow + 2) : "";
  if (rhs.find("->") != std::string::npos || rhs.find(',') != std::string::npos)
    return invalid_argument("Einsum equation '", equation, "': the output after '->' must be one term");
  const auto terms_text = split(lhs, ',');
  if (terms_text.size() != inputs.size())
    return invalid_argument("Einsum equation '", equation, "' has ", terms_text.size(),
                            " input term(s) but the op has ", inputs.size(), " input(s)");

  std::vector<std::vector<int>> terms;
  int ellipsis_rank = 0;
  std::vector<int> ell_rank(inputs.size(), 0);
  for (size_t t = 0; t < terms_text.size(); ++t) {
    KILN_ASSIGN_OR_RETURN(auto term, parse_term(equation, terms_text[t]));
    const bool has_ell = std::count(term.begin(), term.end(), kEllipsis) > 0;
    const int letters = static_cast<int>(term.size()) - (has_ell ? 1 : 0);
    const int rank = inputs[t].rank();
    if (has_ell ? rank < letters : rank != letters)
      return invalid_argument("Einsum equation '", equation, "': term '", terms_text[t], "' names ", letters,
                              " axes but input ", t, " has shape ", inputs[t].to_string());
    ell_rank[t] = rank - letters;
    ellipsis_rank = std::max(ellipsis_rank, ell_rank[t]);
    terms.push_back(std::move(term));
  }
  const int num_labels = kLetters + ellipsis_rank;

  // Sizes: letters must agree; ellipsis axes broadcast (1 stretches).
  EinsumPlan plan;
  plan.sizes.assign(num_labels, 0);  // 0: unused so far
  std::vector<bool> used(num_labels, false);
  std::vector<int> count(num_labels, 0);
  // Per input, the label of each of its axes.
  std::vector<std::vector<int>> axis_labels(inputs.size());
  for (size_t t = 0; t < terms.size(); ++t) {
    for (int id : terms[t]) {
      if (id == kEllipsis) {
        for (int j = 0; j < ell_rank[t]; ++j) axis_labels[t].push_back(kLetters + ellipsis_rank - ell_rank[t] + j);
      } else {
        axis_labels[t].push_back(id);
        ++count[id];
      }
    }
    for (int ax = 0; ax < inputs[t].rank(); ++ax) {
      const int label = axis_labels[t][ax];
      const int64_t d = inputs[t][ax];
      int64_t& s = plan.sizes[label];
      if (!used[label] || s == kDynamicDim) {
        if (!used[label] || d != kDynamicDim) s = d;
      } else if (d != kDynamicDim && d != s) {
        if (label >= kLetters && (d == 1 || s == 1)) {
          s = std::max(s, d);
        } else {
          return invalid_argument(
              "Einsum equation '", equation,
              "': ", label < kLetters ? str_cat("label '", label_name(label), "'") : std::string("an ellipsis axis"),
              " has size ", s, " in one place and ", d, " in input ", t, " (shape ", inputs[t].to_string(), ")");
        }
      }
      used[label] = true;
    }
  }

  // Output labels.
  if (explicit_output) {
    KILN_ASSIGN_OR_RETURN(auto out_term, parse_term(equation, rhs));
    std::vector<bool> seen(num_labels, false);
    for (int id : out_term) {
      if (id == kEllipsis) {
        for (int e = 0; e < ellipsis_rank; ++e) plan.output_labels.push_back(kLetters + e);
        continue;
      }
      if (!used[id])
        return invalid_argument("Einsum equation '", equation, "': output label '", label_name(id),
                                "' does not appear in any input");
      if (seen[id])
        return invalid_argument("Einsum equation '", equation, "': output label '", label_name(id), "' appears twice");
      seen[id] = true;
      plan.output_labels.push_back(id);
    }
  } else {
    for (int e = 0; e < ellipsis_rank; ++e) plan.output_labels.push_back(kLetters + e);
    for (int id = 0; id < kLetters; ++id)
      if (count[id] == 1) plan.output_labels.push_back(id);
  }
  for (int label = 0; label < num_labels; ++label)
    if (used[label] &&
        std::find(plan.output_labels.begin(), plan.output_labels.end(), label) == plan.output_labels.end())
      plan.reduced_labels.push_back(label);
  for (int label : plan.output_labels) plan.out.push_back(plan.sizes[label]);

  // Element strides of each (contiguous) input per label.
  plan.strides.assign(inputs.size(), std::vector<int64_t>(num_labels, 0));
  for (size_t t = 0; t < inputs.size(); ++t) {
    int64_t stride = 1;
    for (int ax = inputs[t].rank() - 1; ax >= 0; --ax) {
      const int label = axis_labels[t][ax];
      const bool broadcast = inputs[t][ax] == 1 && plan.sizes[label] != 1;
      if (!broadcast) plan.strides[t][label] += stride;
      stride *= std::max<int64_t>(inputs[t][ax], 1);
    }
  }
  return plan;
}

namespace {

OpSchema einsum_schema() {
  OpSchema s = make_schema<EinsumAttrs>("Einsum", "einsum", "sum of products over labelled axes (ONNX Einsum)");
  s.input_names = {"inputs"};
  s.min_inputs = 1;
  s.max_inputs = -1;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& a = ctx.attrs_as<EinsumAttrs>();
    std::vector<Dims> dims;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i)) return invalid_argument("Einsum input ", i, " is missing");
      if (ctx.input(i).dtype != ctx.input(0).dtype)
        return invalid_argument("Einsum inputs must share one dtype; input 0 is ", dtype_name(ctx.input(0).dtype),
                                ", input ", i, " is ", dtype_name(ctx.input(i).dtype));
      dims.push_back(ctx.input(i).dims);
    }
    if (ctx.input(0).dtype == DataType::kBool) return invalid_argument("Einsum does not take bool inputs");
    KILN_ASSIGN_OR_RETURN(EinsumPlan plan, einsum_plan(a.equation, dims));
    return one_output(ctx.input(0).dtype, plan.out);
  };
  return s;
}

KILN_REGISTER_OP(einsum_schema());

KILN_REGISTER_FOLD_COST("Einsum", [](const Attrs& attrs, const std::vector<const Tensor*>& in,
                                     const std::vector<TensorDesc>& out) {
  std::vector<Dims> dims;
  dims.reserve(in.size());
  for (const Tensor* t : in) dims.push_back(t ? t->dims() : Dims{});
  auto plan = einsum_plan(static_cast<const EinsumAttrs&>(attrs).equation, dims);
  if (!plan) return output_elements(out);
  double work = 1;  // every combination of label values is visited
  for (int64_t size : plan->sizes) work *= static_cast<double>(std::max<int64_t>(size, 1));
  return work;
});

}  // namespace
}  // namespace kiln
