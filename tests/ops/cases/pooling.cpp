#include "ops/pooling/pooling.h"
#include "harness.h"

namespace kiln::harness {
namespace {

PoolingAttrs pool(PoolingMode mode, std::vector<int64_t> kernel, std::vector<int64_t> strides = {},
                  std::vector<int64_t> pads = {}) {
  PoolingAttrs a;
  a.mode = mode;
  a.kernel_shape = std::move(kernel);
  a.strides = std::move(strides);
  a.pads = std::move(pads);
  return a;
}

}  // namespace

KILN_OP_CASES(pooling) {
  using M = PoolingMode;
  std::vector<OpCase> cases;

  for (M mode : {M::kMax, M::kAverage, M::kLp}) {
    const std::string m = enum_name(mode);
    auto named = [&](const char* what) { return m + " " + what; };
    auto push = [&](const char* what, PoolingAttrs a, Dims dims) {
      cases.push_back({"Pooling", named(what), attrs(a), {uniform(dims, -2, 2)}});
    };
    push("1d k3 s2 pad1", pool(mode, {3}, {2}, {1, 1}), {2, 3, 11});
    push("2d k3 s2", pool(mode, {3, 3}, {2, 2}), {2, 3, 9, 9});
    push("2d k2 s1 asym pads", pool(mode, {2, 3}, {1, 2}, {1, 0, 0, 2}), {1, 2, 6, 7});
    push("3d k2 s2", pool(mode, {2, 2, 2}, {2, 2, 2}), {1, 2, 6, 5, 4});
    push("3d k3 s2 pad1", pool(mode, {3, 3, 3}, {2, 2, 2}, {1, 1, 1, 1, 1, 1}), {1, 2, 5, 6, 5});
    PoolingAttrs ceil = pool(mode, {3, 3}, {2, 2}, {1, 1, 1, 1});
    ceil.ceil_mode = true;
    push("2d ceil_mode pad1", ceil, {1, 3, 8, 7});
    // Ceil mode where a further window would start in the right padding and is dropped.
    PoolingAttrs drop = pool(mode, {2}, {2}, {1, 1});
    drop.ceil_mode = true;
    push("1d ceil_mode last window dropped", drop, {2, 2, 5});
    PoolingAttrs ceil3 = pool(mode, {2, 2, 2}, {2, 2, 2});
    ceil3.ceil_mode = true;
    push("3d ceil_mode", ceil3, {1, 2, 5, 5, 3});
    PoolingAttrs dil = pool(mode, {2, 2}, {1, 1});
    dil.dilations = {2, 3};
    push("2d dilations", dil, {1, 2, 7, 8});
    PoolingAttrs dil_pad = pool(mode, {3}, {2}, {2, 1});
    dil_pad.dilations = {2};
    dil_pad.ceil_mode = true;
    push("1d dilation pads ceil", dil_pad, {2, 2, 12});
    for (PoolingAutoPad ap : {PoolingAutoPad::kSameUpper, PoolingAutoPad::kSameLower, PoolingAutoPad::kValid}) {
      PoolingAttrs a = pool(mode, {3, 2}, {2, 2});
      a.auto_pad = ap;
      cases.push_back({"Pooling", m + " auto_pad " + enum_name(ap), attrs(a), {uniform({1, 2, 7, 6}, -2, 2)}});
    }
    for (int r = 1; r <= 3; ++r) {
      PoolingAttrs g;
      g.mode = mode;
      g.global = true;
      Dims dims = r == 1 ? Dims{2, 3, 10} : r == 2 ? Dims{2, 3, 5, 6} : Dims{1, 3, 3, 4, 5};
      cases.push_back({"Pooling", m + " global " + std::to_string(r) + "d", attrs(g), {uniform(dims, -2, 2)}});
    }
    push("2d big k3 s2 pad1", pool(mode, {3, 3}, {2, 2}, {1, 1, 1, 1}), {4, 32, 32, 32});
  }

  // channels_last (the layout-nhwc pass's layers): x and y [N, H, W, C].
  {
    PoolingAttrs max = pool(M::kMax, {3, 3}, {2, 2}, {1, 1, 1, 1});
    max.channels_last = true;
    cases.push_back({"Pooling", "nhwc max 3x3 s2 pad1", attrs(max), {uniform({2, 9, 9, 16}, -2, 2)}});
    PoolingAttrs avg = pool(M::kAverage, {3, 3}, {2, 2}, {1, 1, 1, 1});
    avg.channels_last = true;
    cases.push_back({"Pooling", "nhwc average 3x3 s2 pad1", attrs(avg), {uniform({1, 8, 7, 8}, -2, 2)}});
    PoolingAttrs global;
    global.mode = M::kAverage;
    global.global = true;
    global.channels_last = true;
    cases.push_back({"Pooling", "nhwc global average", attrs(global), {uniform({2, 5, 6, 16}, -2, 2)}});
  }

  // Average: padding counted or not, with and without ceil-mode overhang.
  for (bool include : {false, true}) {
    const std::string inc = include ? "include_pad" : "exclude_pad";
    PoolingAttrs a = pool(M::kAverage, {3, 3}, {2, 2}, {1, 1, 1, 1});
    a.count_include_pad = include;
    cases.push_back({"Pooling", "average 2d " + inc, attrs(a), {uniform({2, 2, 7, 7}, -2, 2)}});
    a.ceil_mode = true;
    cases.push_back({"Pooling", "average 2d ceil " + inc, attrs(a), {uniform({2, 2, 8, 8}, -2, 2)}});
    PoolingAttrs b = pool(M::kAverage, {3}, {2}, {2, 1});
    b.count_include_pad = include;
    b.ceil_mode = true;
    cases.push_back({"Pooling", "average 1d ceil asym " + inc, attrs(b), {uniform({1, 3, 10}, -2, 2)}});
    PoolingAttrs c = pool(M::kAverage, {2, 2, 3}, {1, 2, 2}, {1, 0, 1, 0, 1, 2});
    c.count_include_pad = include;
    cases.push_back({"Pooling", "average 3d pads " + inc, attrs(c), {uniform({1, 2, 4, 5, 6}, -2, 2)}});
    PoolingAttrs s = pool(M::kAverage, {4, 3}, {3, 2});
    s.auto_pad = PoolingAutoPad::kSameLower;
    s.count_include_pad = include;
    cases.push_back({"Pooling", "average SAME_LOWER " + inc, attrs(s), {uniform({1, 2, 8, 7}, -2, 2)}});
  }

  // Lp orders.
  for (int64_t p : {1, 3}) {
    PoolingAttrs a = pool(M::kLp, {3, 3}, {1, 1}, {1, 1, 1, 1});
    a.p = p;
    cases.push_back({"Pooling", "lp p=" + std::to_string(p), attrs(a), {uniform({1, 3, 6, 6}, -2, 2)}});
    PoolingAttrs g;
    g.mode = M::kLp;
    g.global = true;
    g.p = p;
    cases.push_back({"Pooling", "lp global p=" + std::to_string(p), attrs(g), {uniform({2, 3, 4, 5}, -2, 2)}});
  }

  // Max with indices (ONNX MaxPool's second output).
  auto with_indices = [&](const char* name, PoolingAttrs a, Dims dims) {
    a.return_indices = true;
    cases.push_back({"Pooling", name, attrs(a), {uniform(dims, -2, 2)}});
  };
  with_indices("max indices 1d pad", pool(M::kMax, {3}, {2}, {1, 1}), {2, 3, 9});
  with_indices("max indices 2d", pool(M::kMax, {3, 3}, {2, 2}, {1, 1, 1, 1}), {2, 3, 8, 9});
  PoolingAttrs idx_ceil = pool(M::kMax, {2, 2, 2}, {2, 2, 2}, {1, 0, 1, 1, 0, 0});
  idx_ceil.ceil_mode = true;
  with_indices("max indices 3d ceil", idx_ceil, {1, 2, 5, 4, 5});
  PoolingAttrs idx_dil = pool(M::kMax, {2, 2}, {1, 1});
  idx_dil.dilations = {2, 2};
  with_indices("max indices dilations", idx_dil, {1, 2, 6, 6});
  PoolingAttrs idx_global;
  idx_global.global = true;
  with_indices("max indices global", idx_global, {2, 3, 4, 5});
  with_indices("max indices global 4d", idx_global, {1, 2, 3, 2, 4, 3});
  for (M mode : {M::kAverage, M::kLp}) {
    PoolingAttrs g;
    g.mode = mode;
    g.global = true;
    cases.push_back(
        {"Pooling", std::string(enum_name(mode)) + " global 4d", attrs(g), {uniform({2, 2, 3, 2, 2, 3}, -2, 2)}});
  }

  // Max on 8-bit integers (ONNX MaxPool allows them); small ranges make ties, first one wins.
  PoolingAttrs i8 = pool(M::kMax, {3, 3}, {2, 2}, {1, 1, 1, 1});
  cases.push_back(
      {"Pooling", "max int8", attrs(i8), {uniform({2, 3, 7, 7}, 0, 100)}, {DataType::kInt8, DataType::kUInt8}});
  i8.return_indices = true;
  cases.push_back({"Pooling",
                   "max int8 ties with indices",
                   attrs(i8),
                   {uniform({2, 3, 7, 7}, 0, 3)},
                   {DataType::kInt8, DataType::kUInt8}});
  return cases;
}

}  // namespace kiln::harness
