#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <typeinfo>

#include "harness.h"
#include "ops/loss/loss.h"

namespace kiln::harness {
namespace {

constexpr LossReduction kReductions[] = {LossReduction::kMean, LossReduction::kSum, LossReduction::kNone};
const DataType i64 = DataType::kInt64, i32 = DataType::kInt32;

std::string rname(LossReduction r) { return enum_name(r); }

/// dy of a backward op: the loss's shape for none, a scalar otherwise.
InputSpec dy_for(LossReduction r, const Dims& per_item) {
  return uniform(r == LossReduction::kNone ? per_item : Dims{}, -2, 2);
}

/// Marks a case float32-only (large problems).
OpCase f32(OpCase c) {
  c.dtypes = {DataType::kFloat32};
  return c;
}

void pointwise_cases(std::vector<OpCase>& cases) {
  const Dims small = {3, 4, 5}, big = {64, 4096};
  for (LossReduction r : kReductions) {
    LossAttrs a;
    a.reduction = r;
    SmoothL1LossAttrs s;
    s.reduction = r;
    s.beta = 0.5f;
    SmoothL1LossAttrs s0 = s;
    s0.beta = 0;
    for (auto [op, at] : {std::pair{"MSELoss", attrs(a)}, {"L1Loss", attrs(a)}, {"SmoothL1Loss", attrs(s)}}) {
      const std::string bwd = std::string(op) + "Backward";
      cases.push_back({op, rname(r), at, {uniform(small, -2, 2), uniform(small, -2, 2)}});
      cases.push_back({bwd, rname(r), at, {dy_for(r, small), uniform(small, -2, 2), uniform(small, -2, 2)}});
      // (No large sum: a float32 sum of 2^18 terms cannot resolve the grad mode's finite-difference steps.)
      if (r != LossReduction::kSum)
        cases.push_back(f32({op, rname(r) + " 64x4096", at, {uniform(big, -2, 2), uniform(big, -2, 2)}}));
      cases.push_back(
          f32({bwd, rname(r) + " 64x4096", at, {dy_for(r, big), uniform(big, -2, 2), uniform(big, -2, 2)}}));
    }
    cases.push_back({"SmoothL1Loss", rname(r) + " beta 0", attrs(s0), {uniform(small, -2, 2), uniform(small, -2, 2)}});
    cases.push_back({"SmoothL1LossBackward",
                     rname(r) + " beta 0",
                     attrs(s0),
                     {dy_for(r, small), uniform(small, -2, 2), uniform(small, -2, 2)}});
  }
  LossAttrs mean;
  cases.push_back({"MSELoss", "scalar", attrs(mean), {uniform({}, -2, 2), uniform({}, -2, 2)}});
  cases.push_back({"L1Loss", "empty", attrs(mean), {uniform({0, 3}), uniform({0, 3})}});
}

void bce_cases(std::vector<OpCase>& cases) {
  const Dims x = {4, 6};
  for (LossReduction r : kReductions) {
    LossAttrs a;
    a.reduction = r;
    const InputSpec logits = uniform(x, -6, 6), target = uniform(x, 0, 1);
    cases.push_back({"BCEWithLogitsLoss", rname(r), attrs(a), {logits, target}});
    cases.push_back({"BCEWithLogitsLoss",
                     rname(r) + " weight pos_weight",
                     attrs(a),
                     {logits, target, uniform({6}, 0.2, 2), uniform({6}, 0.2, 3)}});
    cases.push_back({"BCEWithLogitsLoss",
                     rname(r) + " weight [4,1]",
                     attrs(a),
                     {logits, target, uniform({4, 1}, 0.2, 2), absent()}});
    for (BceWrt wrt : {BceWrt::kInput, BceWrt::kTarget, BceWrt::kWeight, BceWrt::kPosWeight}) {
      BCEWithLogitsLossBackwardAttrs b;
      b.reduction = r;
      b.wrt = wrt;
      const std::string name = rname(r) + " wrt " + enum_name(wrt);
      cases.push_back({"BCEWithLogitsLossBackward",
                       name,
                       attrs(b),
                       {dy_for(r, x), logits, target, uniform({4, 1}, 0.2, 2), uniform({6}, 0.2, 3)}});
      if (wrt == BceWrt::kInput || wrt == BceWrt::kTarget)
        cases.push_back({"BCEWithLogitsLossBackward", name + " no factors", attrs(b), {dy_for(r, x), logits, target}});
    }
    const Dims big = {256, 1000};
    if (r != LossReduction::kSum)
      cases.push_back(f32({"BCEWithLogitsLoss",
                           rname(r) + " 256x1000",
                           attrs(a),
                           {uniform(big, -8, 8), uniform(big, 0, 1), absent(), uniform({1000}, 0.5, 2)}}));
    BCEWithLogitsLossBackwardAttrs b;
    b.reduction = r;
    cases.push_back(f32({"BCEWithLogitsLossBackward",
                         rname(r) + " 256x1000",
                         attrs(b),
                         {dy_for(r, big), uniform(big, -8, 8), uniform(big, 0, 1)}}));
  }
}

template <class A>
A class_attrs(LossReduction r, int64_t ignore_index) {
  A a;
  a.reduction = r;
  a.ignore_index = ignore_index;
  return a;
}

void class_cases(std::vector<OpCase>& cases) {
  struct Shape {
    const char* name;
    Dims x, item;
    int64_t classes;
  };
  const Shape shapes[] = {
      {"5x7", {5, 7}, {5}, 7}, {"2x4x3x5", {2, 4, 3, 5}, {2, 3, 5}, 4}, {"unbatched 6", {6}, {}, 6}};
  for (LossReduction r : kReductions)
    for (const Shape& s : shapes) {
      const std::string base = rname(r) + " " + s.name;
      // NLLLoss on log-probabilities (any values work); targets include ignore_index -1.
      const auto nll = attrs(class_attrs<NLLLossAttrs>(r, -1));
      const InputSpec lp = uniform(s.x, -4, 0), t = ints(s.item, -1, s.classes - 1), w = uniform({s.classes}, 0.2, 2);
      auto nll_b = [&](ClassLossWrt wrt) { return attrs(backward_attrs(class_attrs<NLLLossAttrs>(r, -1), wrt)); };
      cases.push_back({"NLLLoss", base, nll, {lp, t}});
      cases.push_back({"NLLLoss", base + " weight", nll, {lp, ints(s.item, 0, s.classes - 1, i32), w}});
      cases.push_back({"NLLLossBackward", base, nll_b(ClassLossWrt::kInput), {dy_for(r, s.item), lp, t}});
      cases.push_back(
          {"NLLLossBackward", base + " weight", nll_b(ClassLossWrt::kInput), {dy_for(r, s.item), lp, t, w}});
      cases.push_back(
          {"NLLLossBackward", base + " wrt weight", nll_b(ClassLossWrt::kWeight), {dy_for(r, s.item), lp, t, w}});
      for (float eps : {0.0f, 0.2f}) {
        auto ce = class_attrs<CrossEntropyLossAttrs>(r, -1);
        ce.label_smoothing = eps;
        auto ce_b = [&](ClassLossWrt wrt) { return attrs(backward_attrs(ce, wrt)); };
        const std::string name = base + (eps > 0 ? " smoothing 0.2" : "");
        const InputSpec logits = uniform(s.x, -5, 5), probs = uniform(s.x, 0, 1);
        const InputSpec dy = dy_for(r, s.item);
        cases.push_back({"CrossEntropyLoss", name, attrs(ce), {logits, t}});
        cases.push_back({"CrossEntropyLoss", name + " weight", attrs(ce), {logits, t, w}});
        cases.push_back({"CrossEntropyLossBackward", name, ce_b(ClassLossWrt::kInput), {dy, logits, t}});
        cases.push_back({"CrossEntropyLossBackward", name + " weight", ce_b(ClassLossWrt::kInput), {dy, logits, t, w}});
        cases.push_back(
            {"CrossEntropyLossBackward", name + " wrt weight", ce_b(ClassLossWrt::kWeight), {dy, logits, t, w}});
        cases.push_back({"CrossEntropyLoss", name + " probabilities", attrs(ce), {logits, probs, w}});
        cases.push_back(
            {"CrossEntropyLossBackward", name + " probabilities", ce_b(ClassLossWrt::kInput), {dy, logits, probs}});
        cases.push_back({"CrossEntropyLossBackward",
                         name + " probabilities wrt target",
                         ce_b(ClassLossWrt::kTarget),
                         {dy, logits, probs, w}});
        cases.push_back({"CrossEntropyLossBackward",
                         name + " probabilities wrt weight",
                         ce_b(ClassLossWrt::kWeight),
                         {dy, logits, probs, w}});
      }
    }
  // Large: a classifier batch, and a segmentation-like [N, C, H, W].
  for (LossReduction r : {LossReduction::kMean, LossReduction::kNone}) {
    auto ce = class_attrs<CrossEntropyLossAttrs>(r, 3);
    ce.label_smoothing = 0.1f;
    const auto ce_b = attrs(backward_attrs(ce, ClassLossWrt::kInput));
    const Dims rows = {512, 1000}, seg = {4, 21, 32, 32};
    const InputSpec logits = uniform(rows, -5, 5), t = ints({512}, 0, 999), seg_t = ints({4, 32, 32}, 0, 20);
    cases.push_back(f32({"CrossEntropyLoss", rname(r) + " 512x1000", attrs(ce), {logits, t}}));
    cases.push_back(f32({"CrossEntropyLossBackward", rname(r) + " 512x1000", ce_b, {dy_for(r, {512}), logits, t}}));
    cases.push_back(f32({"CrossEntropyLoss", rname(r) + " 4x21x32x32", attrs(ce), {uniform(seg, -5, 5), seg_t}}));
    cases.push_back(f32({"CrossEntropyLossBackward",
                         rname(r) + " 4x21x32x32",
                         ce_b,
                         {dy_for(r, {4, 32, 32}), uniform(seg, -5, 5), seg_t, uniform({21}, 0.5, 2)}}));
    const auto nll = class_attrs<NLLLossAttrs>(r, 3);
    const InputSpec lp = uniform(rows, -8, 0);
    cases.push_back(f32({"NLLLoss", rname(r) + " 512x1000", attrs(nll), {lp, t}}));
    cases.push_back(f32({"NLLLossBackward",
                         rname(r) + " 512x1000",
                         attrs(backward_attrs(nll, ClassLossWrt::kInput)),
                         {dy_for(r, {512}), lp, t}}));
  }
}

void ctc_cases(std::vector<OpCase>& cases) {
  for (LossReduction r : kReductions) {
    CTCLossAttrs a;
    a.reduction = r;
    const Dims lp = {12, 3, 5};
    // Padded targets [N, S]; sample 2 repeats a label (needs a blank between) and has a shorter input.
    const InputSpec targets = fixed(i64, {3, 4}, {1, 2, 3, 4, 2, 2, 3, 0, 4, 4, 0, 0});
    const InputSpec in_len = fixed(i64, {3}, {12, 10, 7}), t_len = fixed(i64, {3}, {4, 3, 2});
    cases.push_back({"CTCLoss", rname(r) + " padded", attrs(a), {uniform(lp, -4, -0.1), targets, in_len, t_len}});
    cases.push_back({"CTCLossBackward",
                     rname(r) + " padded",
                     attrs(a),
                     {dy_for(r, {3}), uniform(lp, -4, -0.1), targets, in_len, t_len}});
    // Concatenated targets, int32 lengths, blank 4, an empty target.
    CTCLossAttrs b = a;
    b.blank = 4;
    const InputSpec concat = fixed(i32, {5}, {0, 1, 1, 3, 2}), in32 = fixed(i32, {3}, {12, 12, 5}),
                    len32 = fixed(i32, {3}, {3, 0, 2});
    cases.push_back(
        {"CTCLoss", rname(r) + " concatenated blank 4", attrs(b), {uniform(lp, -4, -0.1), concat, in32, len32}});
    cases.push_back({"CTCLossBackward",
                     rname(r) + " concatenated blank 4",
                     attrs(b),
                     {dy_for(r, {3}), uniform(lp, -4, -0.1), concat, in32, len32}});
    // Sample 1 cannot be aligned (input length 2 < 3 labels): its loss and gradient are 0.
    CTCLossAttrs z = a;
    z.zero_infinity = true;
    const InputSpec short_len = fixed(i64, {3}, {12, 2, 7});
    cases.push_back(
        {"CTCLoss", rname(r) + " zero_infinity", attrs(z), {uniform(lp, -4, -0.1), targets, short_len, t_len}});
    cases.push_back({"CTCLossBackward",
                     rname(r) + " zero_infinity",
                     attrs(z),
                     {dy_for(r, {3}), uniform(lp, -4, -0.1), targets, short_len, t_len}});
  }
  // Repeated labels with barely enough frames (sample 0: 5 equal labels in 9 frames) or too few (sample 2: 4 in
  // 6, infinite loss: NaN gradient at its classes unless zero_infinity); empty inputs (sample 1 of "empty").
  for (LossReduction r : {LossReduction::kMean, LossReduction::kNone})
    for (bool zero : {false, true}) {
      CTCLossAttrs a;
      a.reduction = r;
      a.zero_infinity = zero;
      const std::string name = rname(r) + " repeats" + (zero ? " zero_infinity" : "");
      const InputSpec lp = uniform({9, 3, 4}, -3, -0.2);
      const InputSpec targets = fixed(i64, {3, 5}, {2, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3, 3, 1});
      const InputSpec in_len = fixed(i64, {3}, {9, 8, 6}), t_len = fixed(i64, {3}, {5, 5, 4});
      cases.push_back({"CTCLoss", name, attrs(a), {lp, targets, in_len, t_len}});
      cases.push_back({"CTCLossBackward", name, attrs(a), {dy_for(r, {3}), lp, targets, in_len, t_len}});
      const InputSpec empty_in = fixed(i32, {3}, {0, 0, 5}), empty_t = fixed(i32, {3}, {0, 2, 2});
      const InputSpec concat = fixed(i32, {4}, {1, 2, 3, 3});
      cases.push_back({"CTCLoss", name + " empty", attrs(a), {lp, concat, empty_in, empty_t}});
      cases.push_back({"CTCLossBackward", name + " empty", attrs(a), {dy_for(r, {3}), lp, concat, empty_in, empty_t}});
    }
  // Many classes (a subword vocabulary), concatenated int32 targets of mixed lengths, inputs shorter than T; and
  // long inputs and targets: T 1000, up to 300 labels (601 states: more than a block's threads). Forward cases
  // only with mean: float32 sums of losses this large cannot resolve the grad mode's finite-difference steps.
  {
    CTCLossAttrs a;
    a.blank = 999;
    const InputSpec lp = uniform({80, 6, 1000}, -9, -4), targets = ints({98}, 0, 998, i32);
    const InputSpec in_len = fixed(i32, {6}, {80, 10, 75, 3, 40, 60}), t_len = fixed(i32, {6}, {20, 0, 35, 1, 12, 30});
    cases.push_back({"CTCLoss", "mean 80x6x1000", attrs(a), {lp, targets, in_len, t_len}});
    CTCLossAttrs b;
    const InputSpec long_lp = uniform({1000, 4, 40}, -5, -0.5), long_targets = ints({4, 300}, 1, 39);
    const InputSpec long_in = fixed(i64, {4}, {1000, 900, 13, 7}), long_t = fixed(i64, {4}, {300, 257, 1, 0});
    cases.push_back(f32({"CTCLoss", "mean 1000x4x40", attrs(b), {long_lp, long_targets, long_in, long_t}}));
    for (LossReduction r : kReductions) {
      a.reduction = b.reduction = r;
      cases.push_back(
          {"CTCLossBackward", rname(r) + " 80x6x1000", attrs(a), {dy_for(r, {6}), lp, targets, in_len, t_len}});
      // The CPU kernel's float32 log-space sums (thousands) over 1000 frames leave ~1e-3 in exp(alpha + beta + nll).
      OpCase c = f32({"CTCLossBackward",
                      rname(r) + " 1000x4x40",
                      attrs(b),
                      {dy_for(r, {4}), long_lp, long_targets, long_in, long_t}});
      c.tolerance_scale = 10;
      cases.push_back(std::move(c));
    }
  }
  // Speech-sized: T 200, N 8, C 29, targets of 40.
  CTCLossAttrs a;
  std::vector<double> lens(8, 200), tlens(8, 40);
  cases.push_back(
      f32({"CTCLoss",
           "mean 200x8x29",
           attrs(a),
           {uniform({200, 8, 29}, -5, -0.5), ints({8, 40}, 1, 28), fixed(i64, {8}, lens), fixed(i64, {8}, tlens)}}));
  cases.push_back(f32({"CTCLossBackward",
                       "mean 200x8x29",
                       attrs(a),
                       {uniform({}, -2, 2), uniform({200, 8, 29}, -5, -0.5), ints({8, 40}, 1, 28),
                        fixed(i64, {8}, lens), fixed(i64, {8}, tlens)}}));
}

}  // namespace

KILN_OP_CASES(loss) {
  std::vector<OpCase> cases;
  pointwise_cases(cases);
  bce_cases(cases);
  class_cases(cases);
  ctc_cases(cases);
  // Sums of float32 losses resolve finite-difference steps (grad mode) only to a few 1e-3.
  for (OpCase& c : cases) {
    if (c.name.rfind("sum", 0) == 0) c.tolerance_scale = std::max(c.tolerance_scale, 4.0);
    // Forward and backward ops take different attribute structs: a case with the wrong one reads past it.
    const OpSchema* schema = OpRegistry::global().find(c.op);
    const std::unique_ptr<Attrs> fresh = schema ? schema->make_attrs() : nullptr;
    const Attrs& given = *c.attrs;
    if (!fresh || typeid(*fresh) != typeid(given)) {
      std::fprintf(stderr, "loss case %s [%s]: attributes of the wrong type\n", c.op.c_str(), c.name.c_str());
      std::abort();
    }
  }
  return cases;
}

}  // namespace kiln::harness
