#include "ops/softmax/softmax.h"
#include "harness.h"

namespace kiln::harness {
namespace {

SoftmaxAttrs sm(int64_t axis, bool coerce_2d = false) {
  SoftmaxAttrs a;
  a.axis = axis;
  a.coerce_2d = coerce_2d;
  return a;
}

}  // namespace

KILN_OP_CASES(softmax) {
  std::vector<OpCase> cases;
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    const Dims x = {2, 3, 4, 5};
    cases.push_back({op, "axis -1 default", attrs(SoftmaxAttrs{}), {uniform(x, -5, 5)}});
    cases.push_back({op, "axis 0", attrs(sm(0)), {uniform(x, -5, 5)}});
    cases.push_back({op, "axis 1", attrs(sm(1)), {uniform(x, -5, 5)}});
    cases.push_back({op, "axis -2", attrs(sm(-2)), {uniform(x, -5, 5)}});
    cases.push_back({op, "rank 1", attrs(sm(0)), {uniform({13}, -5, 5)}});
    cases.push_back({op, "size-1 axis", attrs(sm(1)), {uniform({4, 1, 3}, -5, 5)}});
    cases.push_back({op, "large logits", attrs(sm(-1)), {uniform({3, 50}, 60, 100)}});
    cases.push_back({op, "coerce_2d axis 1", attrs(sm(1, true)), {uniform(x, -5, 5)}});
    cases.push_back({op, "coerce_2d axis 2", attrs(sm(2, true)), {uniform(x, -5, 5)}});
    cases.push_back({op, "empty", attrs(sm(-1)), {uniform({0, 4}, -5, 5)}});
    OpCase big{op, "128x1000 axis -1", attrs(sm(-1)), {uniform({128, 1000}, -5, 5)}};
    big.dtypes = {DataType::kFloat32};
    // grad mode: log-softmax outputs near -log(1000) rounded to float32 make the finite differences over a
    // 1000-wide row noisy (about 1%).
    if (std::string(op) == "LogSoftmax") big.tolerance_scale = 4;
    cases.push_back(big);
    OpCase big_mid{op, "16x256x64 axis 1", attrs(sm(1)), {uniform({16, 256, 64}, -5, 5)}};
    big_mid.dtypes = {DataType::kFloat32};
    cases.push_back(big_mid);
  }
  return cases;
}

}  // namespace kiln::harness
