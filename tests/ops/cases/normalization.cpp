#include "ops/normalization/normalization.h"
#include "harness.h"

namespace kiln::harness {

KILN_OP_CASES(normalization) {
  std::vector<OpCase> cases;

  for (Dims x : {Dims{8, 5}, Dims{2, 4, 9}, Dims{2, 3, 5, 7}, Dims{1, 3, 2, 3, 4}, Dims{8, 32, 28, 28}}) {
    const int64_t c = x[1];
    BatchNormalizationAttrs a;
    a.epsilon = x.rank() == 3 ? 1e-3f : 1e-5f;
    cases.push_back(
        {"BatchNormalization",
         "x " + x.to_string(),
         attrs(a),
         {uniform(x, -3, 3), uniform({c}, 0.5, 2), uniform({c}, -1, 1), uniform({c}, -1, 1), uniform({c}, 0.1, 2)}});
  }

  struct Ln {
    const char* name;
    Dims x;
    int64_t axis;
    std::vector<InputSpec> params;
    bool stats = false;
  };
  const Ln lns[] = {
      {"axis -1 2d", {4, 16}, -1, {uniform({16}), uniform({16})}},
      {"axis 1 4d", {2, 3, 4, 5}, 1, {uniform({3, 4, 5}), uniform({3, 4, 5})}},
      {"axis -2 3d", {2, 6, 8}, -2, {uniform({6, 8}), uniform({6, 8})}},
      {"axis 0", {3, 4}, 0, {uniform({3, 4}), uniform({3, 4})}},
      {"axis 2 4d", {2, 3, 4, 5}, 2, {uniform({4, 5}), uniform({4, 5})}},
      {"1d", {10}, 0, {uniform({10}), uniform({10})}},
      {"no scale no bias", {3, 12}, -1, {}},
      {"scale only", {3, 12}, -1, {uniform({12})}},
      {"bias only", {3, 12}, -1, {absent(), uniform({12})}},
      {"broadcast scale", {2, 6, 8}, -2, {uniform({8}), uniform({1, 8})}},
      {"broadcast scale [6,1]", {2, 6, 8}, 1, {uniform({6, 1}), uniform({1})}},
      {"stats", {3, 4, 5}, -1, {uniform({5}), uniform({5})}, true},
      {"stats axis 1", {3, 4, 5}, 1, {uniform({4, 5}), absent()}, true},
      {"big 64x768", {64, 768}, -1, {uniform({768}), uniform({768})}},
      // CUDA's warp-per-row kernel: a partial block of rows, lanes without a vector, stats.
      {"33 rows of 40 stats", {33, 40}, -1, {uniform({40}), uniform({40})}, true},
      {"rows of 1536", {2, 5, 1536}, -1, {uniform({1536}), absent()}},
      {"row of 1024 stats",
       {6, 1024},
       -1,
       {uniform({1024}), uniform({1024})},
       true},  // float32: the most CUDA takes a warp per row
      {"row of 4096", {8, 4096}, -1, {uniform({4096}), uniform({4096})}},
      {"row of 1", {5, 1}, -1, {uniform({1}), uniform({1})}, true},
      {"row of 16384", {2, 4, 4096}, 1, {uniform({4, 4096}), uniform({4096})}},
  };
  for (const Ln& l : lns) {
    LayerNormalizationAttrs a;
    a.axis = l.axis;
    a.return_stats = l.stats;
    std::vector<InputSpec> inputs{uniform(l.x, -3, 3)};
    inputs.insert(inputs.end(), l.params.begin(), l.params.end());
    cases.push_back({"LayerNormalization", l.name, attrs(a), inputs});
    if (l.stats) cases.back().grad_outputs = {0};  // grad mode: mean and inv_std are saved statistics
  }
  LayerNormalizationAttrs eps;
  eps.epsilon = 0.1f;
  cases.push_back({"LayerNormalization", "epsilon 0.1", attrs(eps), {uniform({4, 7}, -0.3, 0.3)}});

  for (Dims x : {Dims{2, 3, 5, 5}, Dims{2, 4, 10}, Dims{1, 2, 3, 4, 5}, Dims{4, 32, 32, 32}}) {
    const int64_t c = x[1];
    cases.push_back({"InstanceNormalization",
                     "x " + x.to_string(),
                     attrs(InstanceNormalizationAttrs{}),
                     {uniform(x, -3, 3), uniform({c}, 0.5, 2), uniform({c}, -1, 1)}});
  }

  struct Lrn {
    int64_t size;
    Dims x;
  };
  for (const Lrn& l : {Lrn{3, {2, 7, 5, 5}}, Lrn{5, {1, 8, 4, 6}}, Lrn{4, {2, 6, 3, 3}}, Lrn{1, {1, 4, 3, 3}},
                       Lrn{2, {2, 6, 8}}, Lrn{5, {1, 7, 2, 3, 4}}, Lrn{6, {2, 5}}, Lrn{5, {2, 32, 28, 28}}}) {
    LrnAttrs a;
    a.size = l.size;
    a.alpha = 0.02f;
    a.beta = 0.75f;
    a.bias = l.size == 4 ? 2.f : 1.f;
    cases.push_back(
        {"LRN", "size " + std::to_string(l.size) + " x " + l.x.to_string(), attrs(a), {uniform(l.x, -3, 3)}});
  }
  return cases;
}

}  // namespace kiln::harness
