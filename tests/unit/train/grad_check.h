#pragma once
// Checks one op's gradient rule against central finite differences: the forward node alone, dy given as a graph
// input (so no other op's rule is involved), loss = sum(y * dy) in double, gradients run on the reference and CPU
// backends through GraphRunner.
#include <memory>
#include <string>
#include <vector>

#include "kiln/tensor.h"
#include "ops/attrs.h"

namespace kiln::train::testing {

struct GradCheck {
  std::string op;
  std::shared_ptr<const Attrs> attrs;
  std::vector<Tensor> inputs;  ///< undefined: an absent optional input
  std::vector<int> check;      ///< inputs whose gradient is checked (the others need none)
  bool training = true;
  double step = 1e-3;
  double tolerance = 1e-2;  ///< absolute and relative
};

/// Uniform floats in [lo, hi] from a fixed seed.
Tensor random_tensor(const Dims& dims, double lo, double hi, uint32_t seed);
/// Distinct values (a shuffled ramp from lo in steps of `gap`), so max-type ops have no near ties.
Tensor distinct_tensor(const Dims& dims, double lo, double gap, uint32_t seed);
Tensor int64_scalar(int64_t v);

/// Empty when every checked gradient matches the finite differences (and CPU matches the reference), else
/// what differs first.
std::string check_gradients(const GradCheck& c);

/// The number of backward nodes the rule added (for rules that should add none).
int backward_nodes(const GradCheck& c);

}  // namespace kiln::train::testing
