#include "ops/mlp/mlp.h"
#include <algorithm>
#include <cmath>

#include "harness.h"

namespace kiln::harness {
namespace {

// An MLP of `widths` (input width first) with one activation per layer (off: none); weights in +-1/sqrt(in).
OpCase mlp_case(std::string name, Dims batch, std::vector<int64_t> widths, std::vector<FusedActivation> acts) {
  MlpAttrs a;
  Dims x = batch;
  x.push_back(widths[0]);
  std::vector<InputSpec> in = {uniform(x)};
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    a.add_layer(acts[l]);
    const double scale = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(widths[l], 1)));  // keeps |h| near 1
    in.push_back(uniform({widths[l + 1], widths[l]}, -scale, scale));
    in.push_back(uniform({widths[l + 1]}));
  }
  return {"MLP", std::move(name), attrs(a), std::move(in)};
}

FusedActivation act(ActivationKind kind, float alpha = 0.f, float beta = 0.f) { return {true, kind, alpha, beta}; }

}  // namespace

KILN_OP_CASES(mlp) {
  const FusedActivation none;
  std::vector<OpCase> cases = {
      mlp_case("1 layer relu", {4}, {6, 5}, {act(ActivationKind::kRelu)}),
      mlp_case("2 layers relu, none", {3}, {8, 16, 4}, {act(ActivationKind::kRelu), none}),
      mlp_case("3 layers gelu tanh sigmoid over [2, 3, 5]", {2, 3}, {5, 7, 6, 3},
               {act(ActivationKind::kGelu), act(ActivationKind::kTanh), act(ActivationKind::kSigmoid)}),
      mlp_case("2 layers leaky relu, gelu tanh form", {5}, {4, 9, 2},
               {act(ActivationKind::kLeakyRelu, 0.1f), act(ActivationKind::kGelu, 0.f, 1.f)}),
      mlp_case("2 layers on a vector", {}, {6, 4, 3}, {act(ActivationKind::kRelu), act(ActivationKind::kElu, 1.f)}),
      mlp_case("2 layers softsign (no oneDNN post-op)", {2}, {3, 4, 2}, {act(ActivationKind::kSoftsign), none}),
      mlp_case("empty batch", {0}, {4, 3, 2}, {act(ActivationKind::kRelu), none}),
      mlp_case("3 layers odd widths relu, gelu tanh, softsign over [5, 3]", {5, 3}, {13, 40, 24, 7},
               {act(ActivationKind::kRelu), act(ActivationKind::kGelu, 0.f, 1.f), act(ActivationKind::kSoftsign)}),
  };
  OpCase big = mlp_case("4 layers 64 rows 256 -> 512 -> 512 -> 256 -> 10", {64}, {256, 512, 512, 256, 10},
                        {act(ActivationKind::kRelu), act(ActivationKind::kRelu), act(ActivationKind::kRelu), none});
  big.dtypes = {DataType::kFloat32};
  big.tolerance_scale = 4;  // 512-long dot products over four layers
  cases.push_back(big);
  return cases;
}

}  // namespace kiln::harness
