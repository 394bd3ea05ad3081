#include "ops/grad.h"

#include <map>

#include "kiln/logger.h"
#include "ops/reduce/reduce.h"
#include "ops/shuffle/shuffle.h"

namespace kiln {
namespace {

std::map<std::string, GradFn, std::less<>>& grad_rules() {
  static std::map<std::string, GradFn, std::less<>> rules;
  return rules;
}

}  // namespace

bool register_grad(std::string_view op, GradFn fn) {
  auto [it, added] = grad_rules().emplace(std::string(op), fn);
  if (!added) log_error("a second gradient rule for op '", op, "' was registered; the first is kept");
  return added;
}

GradFn find_grad(std::string_view op) {
  auto it = grad_rules().find(op);
  return it == grad_rules().end() ? nullptr : it->second;
}

Result<GradValue> GradBuilder::add1(std::string_view op, std::unique_ptr<Attrs> attrs, std::vector<GradValue> inputs) {
  KILN_ASSIGN_OR_RETURN(std::vector<GradValue> outs, add(op, std::move(attrs), std::move(inputs)));
  if (outs.empty()) return internal_error("op ", op, " made no output");
  return outs[0];
}

Result<GradValue> GradBuilder::scalar(double v, DataType dtype) {
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(dtype, Dims{}));
  store_element(t.raw(), dtype, 0, v);
  return constant(std::move(t));
}

Result<GradValue> GradBuilder::sum_to(GradValue g, const Dims& dims) {
  const Dims have = desc(g).dims;
  if (have == dims) return g;
  const int rank = have.rank(), lead = have.rank() - dims.rank();
  if (lead < 0)
    return invalid_argument("sum_to: gradient of shape ", have.to_string(), " cannot sum to ", dims.to_string());
  auto attrs = std::make_unique<ReduceAttrs>();
  attrs->op = ReduceOp::kSum;
  attrs->keep_dims = true;
  for (int a = 0; a < rank; ++a)
    if (a < lead || (dims[a - lead] == 1 && have[a] != 1)) attrs->axes.push_back(a);
  GradValue summed = g;
  if (!attrs->axes.empty()) {
    KILN_ASSIGN_OR_RETURN(summed, add1("Reduce", std::move(attrs), {g}));
  }
  if (desc(summed).dims == dims) return summed;
  auto reshape = std::make_unique<ShuffleAttrs>();
  reshape->has_reshape_dims = true;
  reshape->allowzero = true;
  for (int a = 0; a < dims.rank(); ++a) reshape->reshape_dims.push_back(dims[a]);
  return add1("Shuffle", std::move(reshape), {summed});
}

}  // namespace kiln
