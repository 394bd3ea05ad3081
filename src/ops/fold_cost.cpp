#include "ops/fold_cost.h"

#include <map>

namespace kiln {
namespace {

std::map<std::string, FoldCostFn, std::less<>>& costs() {
  static auto* m = new std::map<std::string, FoldCostFn, std::less<>>;
  return *m;
}

}  // namespace

bool register_fold_cost(std::string op, FoldCostFn cost) {
  return costs().emplace(std::move(op), std::move(cost)).second;
}

double output_elements(const std::vector<TensorDesc>& outputs) {
  double n = 0;
  for (const TensorDesc& d : outputs) {
    if (!d.dims.is_static()) continue;
    double m = 1;
    for (int64_t x : d.dims) m *= static_cast<double>(x);
    n += m;
  }
  return n;
}

double fold_cost(const OpSchema& schema, const Attrs& attrs, const std::vector<const Tensor*>& inputs,
                 const std::vector<TensorDesc>& outputs) {
  if (auto it = costs().find(schema.name); it != costs().end()) return it->second(attrs, inputs, outputs);
  double n = output_elements(outputs);
  for (const Tensor* t : inputs)
    if (t) n += static_cast<double>(t->numel());
  return n;
}

}  // namespace kiln
