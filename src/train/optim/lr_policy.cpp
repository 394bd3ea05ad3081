#include "train/optim/lr_policy.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "train/optim/option_reader.h"

namespace kiln::train {
namespace {

std::string key(std::string_view where, std::string_view k) {
  return where.empty() ? std::string(k) : str_cat(where, ".", k);
}

std::string names_list() {
  std::string list;
  for (std::string_view n : lr_policy_names()) list += (list.empty() ? "" : ", ") + std::string(n);
  return list;
}

}  // namespace

const std::vector<std::string_view>& lr_policy_names() {
  static const std::vector<std::string_view> kNames = {"fixed", "step", "multistep", "exp",
                                                       "inv",   "poly", "sigmoid",   "cosine"};
  return kNames;
}

std::string_view lr_policy_name(LrPolicyKind kind) { return lr_policy_names().at(static_cast<size_t>(kind)); }

Result<LrPolicy> LrPolicy::create(const LrPolicyOptions& o, std::string_view where) {
  auto bad = [&](std::string_view k, auto&&... what) { return invalid_argument(key(where, k), ": ", what...); };
  const std::string_view policy = lr_policy_name(o.kind);
  if (!(o.base_lr >= 0) || !std::isfinite(o.base_lr)) return bad("base_lr", o.base_lr, " must be >= 0");
  if (o.warmup_steps < 0) return bad("warmup_steps", o.warmup_steps, " must be >= 0");
  if (!(o.warmup_init_lr >= 0) || !std::isfinite(o.warmup_init_lr))
    return bad("warmup_init_lr", o.warmup_init_lr, " must be >= 0");
  switch (o.kind) {
    case LrPolicyKind::kFixed: break;
    case LrPolicyKind::kStep:
      if (o.step_size <= 0) return bad("step_size", o.step_size, " must be > 0 (steps between decays)");
      [[fallthrough]];
    case LrPolicyKind::kMultiStep:
    case LrPolicyKind::kExp:
      if (!(o.gamma > 0) || !std::isfinite(o.gamma)) return bad("gamma", o.gamma, " must be > 0 for ", policy);
      break;
    case LrPolicyKind::kInv:
      if (!(o.gamma >= 0) || !std::isfinite(o.gamma)) return bad("gamma", o.gamma, " must be >= 0 for inv");
      if (!std::isfinite(o.power)) return bad("power", o.power, " must be a finite number");
      break;
    case LrPolicyKind::kPoly:
      if (!(o.power >= 0) || !std::isfinite(o.power)) return bad("power", o.power, " must be >= 0 for poly");
      if (o.max_steps <= 0)
        return bad("max_steps", o.max_steps, " must be > 0 for poly (the step where the rate reaches 0)");
      break;
    case LrPolicyKind::kSigmoid:
      if (!std::isfinite(o.gamma)) return bad("gamma", o.gamma, " must be a finite number");
      break;
    case LrPolicyKind::kCosine:
      if (o.max_steps <= 0) return bad("max_steps", o.max_steps, " must be > 0 for cosine (the length of the decay)");
      if (!(o.min_lr >= 0) || !std::isfinite(o.min_lr)) return bad("min_lr", o.min_lr, " must be >= 0");
      break;
  }
  if (o.kind == LrPolicyKind::kMultiStep) {
    if (o.steps.empty()) return bad("steps", "multistep needs a list of steps at which to decay, e.g. [1000, 2000]");
    for (size_t i = 0; i < o.steps.size(); ++i) {
      if (o.steps[i] < 0) return bad("steps", "step ", o.steps[i], " is negative");
      if (i > 0 && o.steps[i] <= o.steps[i - 1])
        return bad("steps", "the steps must increase (", o.steps[i - 1], " is followed by ", o.steps[i], ")");
    }
  }
  return LrPolicy(o);
}

Result<LrPolicy> LrPolicy::create(const OptionMap& config, double base_lr, int64_t total_steps,
                                  std::string_view where) {
  auto it = config.find("name");
  if (it == config.end())
    return invalid_argument(key(where, "name"), ": missing; say which policy (", names_list(), ")");
  std::optional<std::string> name = it->second.text();
  if (!name) return invalid_argument(key(where, "name"), ": expected a policy name, got ", it->second.to_string());
  const auto& names = lr_policy_names();
  auto found = std::find(names.begin(), names.end(), *name);
  if (found == names.end()) {
    std::string hint = closest_match(*name, names);
    return invalid_argument(key(where, "name"), ": unknown learning-rate policy '", *name, "'",
                            hint.empty() ? "" : str_cat("; did you mean '", hint, "'?"), " (known: ", names_list(),
                            ")");
  }
  LrPolicyOptions o;
  o.kind = static_cast<LrPolicyKind>(found - names.begin());
  o.base_lr = base_lr;
  std::vector<std::string_view> keys = {"base_lr", "warmup_steps", "warmup_init_lr"};
  std::vector<std::string_view> required;
  switch (o.kind) {
    case LrPolicyKind::kFixed: break;
    case LrPolicyKind::kStep: keys.insert(keys.end(), {"gamma", "step_size"}), required = {"step_size"}; break;
    case LrPolicyKind::kMultiStep: keys.insert(keys.end(), {"gamma", "steps"}), required = {"steps"}; break;
    case LrPolicyKind::kExp: keys.push_back("gamma"), required = {"gamma"}; break;
    case LrPolicyKind::kInv: keys.insert(keys.end(), {"gamma", "power"}), required = {"gamma", "power"}; break;
    case LrPolicyKind::kPoly: keys.insert(keys.end(), {"power", "max_steps"}); break;
    case LrPolicyKind::kSigmoid:
      keys.insert(keys.end(), {"gamma", "step_size"}), required = {"gamma", "step_size"};
      break;
    case LrPolicyKind::kCosine: keys.insert(keys.end(), {"max_steps", "min_lr"}); break;
  }
  OptionReader r(config, std::string(where), str_cat("learning-rate policy '", *name, "'"));
  KILN_RETURN_IF_ERROR(r.allow(keys));
  for (std::string_view k : required)
    if (!r.has(k)) return invalid_argument(r.key_path(k), ": missing; the ", *name, " policy needs it");
  if ((o.kind == LrPolicyKind::kPoly || o.kind == LrPolicyKind::kCosine) && !r.has("max_steps")) {
    if (total_steps <= 0)
      return invalid_argument(r.key_path("max_steps"), ": missing; the ", *name,
                              " policy needs the run's length (set max_steps or the number of epochs)");
    o.max_steps = total_steps;
  }
  KILN_RETURN_IF_ERROR(r.number("base_lr", o.base_lr));
  KILN_RETURN_IF_ERROR(r.integer("warmup_steps", o.warmup_steps));
  KILN_RETURN_IF_ERROR(r.number("warmup_init_lr", o.warmup_init_lr));
  KILN_RETURN_IF_ERROR(r.number("gamma", o.gamma));
  KILN_RETURN_IF_ERROR(r.integer("step_size", o.step_size));
  KILN_RETURN_IF_ERROR(r.integers("steps", o.steps));
  KILN_RETURN_IF_ERROR(r.number("power", o.power));
  KILN_RETURN_IF_ERROR(r.integer("max_steps", o.max_steps));
  KILN_RETURN_IF_ERROR(r.number("min_lr", o.min_lr));
  return create(o, where);
}

double LrPolicy::policy(int64_t step) const {
  const LrPolicyOptions& o = options_;
  const auto s = static_cast<double>(step);
  switch (o.kind) {
    case LrPolicyKind::kFixed: return o.base_lr;
    case LrPolicyKind::kStep: {
      const int64_t decays = step / o.step_size;  // floor: steps are >= 0
      return o.base_lr * std::pow(o.gamma, static_cast<double>(decays));
    }
    case LrPolicyKind::kMultiStep: {
      auto passed = std::upper_bound(o.steps.begin(), o.steps.end(), step) - o.steps.begin();
      return o.base_lr * std::pow(o.gamma, static_cast<double>(passed));
    }
    case LrPolicyKind::kExp: return o.base_lr * std::pow(o.gamma, s);
    case LrPolicyKind::kInv: return o.base_lr * std::pow(1 + o.gamma * s, -o.power);
    case LrPolicyKind::kPoly:
      if (step >= o.max_steps) return 0;
      return o.base_lr * std::pow(1 - s / static_cast<double>(o.max_steps), o.power);
    case LrPolicyKind::kSigmoid:
      return o.base_lr * (1 / (1 + std::exp(-o.gamma * (s - static_cast<double>(o.step_size)))));
    case LrPolicyKind::kCosine: {
      const double t = static_cast<double>(std::min(step, o.max_steps)) / static_cast<double>(o.max_steps);
      return o.min_lr + (o.base_lr - o.min_lr) * (1 + std::cos(std::numbers::pi * t)) / 2;
    }
  }
  return o.base_lr;
}

double LrPolicy::lr(int64_t step) const {
  step = std::max<int64_t>(step, 0);
  const double value = policy(step);
  const LrPolicyOptions& o = options_;
  if (step >= o.warmup_steps) return value;
  const double fraction = static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps + 1);
  return o.warmup_init_lr + (value - o.warmup_init_lr) * fraction;
}

std::vector<std::pair<int64_t, double>> LrPolicy::curve(int64_t total_steps, int points) const {
  std::vector<int64_t> steps;
  if (total_steps <= 0) return {};
  const int64_t last = total_steps - 1;
  points = std::max(points, 2);
  if (total_steps <= points) {
    for (int64_t s = 0; s <= last; ++s) steps.push_back(s);
  } else {
    for (int i = 0; i < points; ++i)
      steps.push_back(static_cast<int64_t>(std::llround(static_cast<double>(last) * i / (points - 1))));
    // Both sides of each jump, at most `points` of them, so steps show as steps in the plot.
    std::vector<int64_t> jumps;
    const LrPolicyOptions& o = options_;
    if (o.warmup_steps > 0) jumps.push_back(o.warmup_steps);
    if (o.kind == LrPolicyKind::kStep)
      for (int64_t s = o.step_size; s <= last && static_cast<int64_t>(jumps.size()) < points; s += o.step_size)
        jumps.push_back(s);
    if (o.kind == LrPolicyKind::kMultiStep) jumps.insert(jumps.end(), o.steps.begin(), o.steps.end());
    int added = 0;
    for (int64_t s : jumps) {
      if (s <= 0 || s > last || added >= points) continue;
      steps.push_back(s - 1);
      steps.push_back(s);
      ++added;
    }
    std::sort(steps.begin(), steps.end());
    steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  }
  std::vector<std::pair<int64_t, double>> out;
  out.reserve(steps.size());
  for (int64_t s : steps) out.emplace_back(s, lr(s));
  return out;
}

}  // namespace kiln::train
