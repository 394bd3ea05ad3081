#pragma once
// Learning-rate policies (Caffe's, which DIGITS offers: fixed, step, multistep, exp, inv, poly, sigmoid;
// plus cosine), each with an optional linear warm-up; lr(step) for training, curve() for the studio's plot.
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/status.h"
#include "train/optim/options.h"

namespace kiln::train {

enum class LrPolicyKind { kFixed, kStep, kMultiStep, kExp, kInv, kPoly, kSigmoid, kCosine };

/// "fixed", "step", "multistep", "exp", "inv", "poly", "sigmoid", "cosine".
std::string_view lr_policy_name(LrPolicyKind kind);
const std::vector<std::string_view>& lr_policy_names();

/// The policy at step s (the iteration, from 0), Caffe's definitions:
///   fixed      base_lr
///   step       base_lr * gamma ^ floor(s / step_size)
///   multistep  base_lr * gamma ^ (number of `steps` entries <= s)
///   exp        base_lr * gamma ^ s
///   inv        base_lr * (1 + gamma * s) ^ (-power)
///   poly       base_lr * (1 - s / max_steps) ^ power            (0 from max_steps on)
///   sigmoid    base_lr / (1 + exp(-gamma * (s - step_size)))
///   cosine     min_lr + (base_lr - min_lr) * (1 + cos(pi * min(s, max_steps) / max_steps)) / 2
/// Warm-up (NeMo's): for s < warmup_steps the value is
///   warmup_init_lr + (policy(s) - warmup_init_lr) * (s + 1) / (warmup_steps + 1).
struct LrPolicyOptions {
  LrPolicyKind kind = LrPolicyKind::kFixed;
  double base_lr = 0.01;
  double gamma = 0.1;
  int64_t step_size = 0;
  std::vector<int64_t> steps;
  double power = 1;
  int64_t max_steps = 0;
  double min_lr = 0;
  int64_t warmup_steps = 0;
  double warmup_init_lr = 0;
};

class LrPolicy {
 public:
  /// Checks the options (errors name the field as `lr_policy.key`).
  static Result<LrPolicy> create(const LrPolicyOptions& options, std::string_view where = "lr_policy");
  /// From a config map: {name: step, gamma: 0.1, step_size: 1000, warmup_steps: 100}. `base_lr` is the
  /// optimizer's lr unless the map has `base_lr`; `total_steps` (0: unknown) is max_steps for poly and cosine
  /// unless the map has `max_steps`. Errors name the unknown key, the missing one or the bad value.
  static Result<LrPolicy> create(const OptionMap& config, double base_lr, int64_t total_steps = 0,
                                 std::string_view where = "lr_policy");

  /// The learning rate of step `step` (negative steps count as 0).
  double lr(int64_t step) const;
  /// (step, lr) pairs over [0, total_steps - 1] for a plot: `points` evenly spaced steps (every step when
  /// there are fewer), plus both sides of each jump (step boundaries, the end of warm-up), in step order.
  std::vector<std::pair<int64_t, double>> curve(int64_t total_steps, int points = 200) const;

  const LrPolicyOptions& options() const { return options_; }

 private:
  explicit LrPolicy(LrPolicyOptions options) : options_(std::move(options)) {}
  double policy(int64_t step) const;

  LrPolicyOptions options_;
};

}  // namespace kiln::train
