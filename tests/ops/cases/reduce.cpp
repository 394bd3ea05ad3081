#include "ops/reduce/reduce.h"
#include "harness.h"

namespace kiln::harness {
namespace {

ReduceAttrs red(ReduceOp op, bool keep_dims = true, std::vector<int64_t> axes = {}, bool noop = false) {
  ReduceAttrs a;
  a.op = op;
  a.keep_dims = keep_dims;
  a.axes = std::move(axes);
  a.noop_with_empty_axes = noop;
  return a;
}

ArgReduceAttrs arg(ArgReduceOp op, int64_t axis, bool keep_dims, bool last = false) {
  ArgReduceAttrs a;
  a.op = op;
  a.axis = axis;
  a.keep_dims = keep_dims;
  a.select_last_index = last;
  return a;
}

InputSpec axes_input(std::vector<double> axes) {
  const Dims dims = {static_cast<int64_t>(axes.size())};
  return fixed(DataType::kInt64, dims, std::move(axes));
}

// Input range that keeps each reduction well defined and well conditioned.
InputSpec data_for(ReduceOp op, Dims dims) {
  switch (op) {
    case ReduceOp::kLogSum: return uniform(dims, 0.1, 2);
    case ReduceOp::kProd: return uniform(dims, 0.6, 1.4);
    default: return uniform(dims, -2, 2);
  }
}

}  // namespace

KILN_OP_CASES(reduce) {
  std::vector<OpCase> cases;
  const ReduceOp ops[] = {ReduceOp::kSum,       ReduceOp::kProd,     ReduceOp::kMax, ReduceOp::kMin,
                          ReduceOp::kMean,      ReduceOp::kL1,       ReduceOp::kL2,  ReduceOp::kLogSum,
                          ReduceOp::kLogSumExp, ReduceOp::kSumSquare};
  const Dims x = {3, 4, 5};
  for (ReduceOp op : ops) {
    const std::string n = enum_name(op);
    cases.push_back({"Reduce", n + " axis 1 keep", attrs(red(op)), {data_for(op, x), axes_input({1})}});
    cases.push_back({"Reduce", n + " axes 0,2 drop", attrs(red(op, false)), {data_for(op, x), axes_input({0, 2})}});
    cases.push_back({"Reduce", n + " axis -1 drop", attrs(red(op, false)), {data_for(op, x), axes_input({-1})}});
    cases.push_back({"Reduce", n + " all keep", attrs(red(op)), {data_for(op, x)}});
    cases.push_back({"Reduce", n + " all drop", attrs(red(op, false)), {data_for(op, {2, 3, 2, 4})}});
    cases.push_back({"Reduce", n + " attr axes -3,-1", attrs(red(op, true, {-3, -1})), {data_for(op, {2, 3, 2, 4})}});
    cases.push_back(
        {"Reduce", n + " 4-D axes 1,2", attrs(red(op, true)), {data_for(op, {2, 6, 3, 3}), axes_input({1, 2})}});
  }
  cases.push_back(
      {"Reduce", "noop empty axes input", attrs(red(ReduceOp::kSum, true, {}, true)), {uniform(x), axes_input({})}});
  cases.push_back({"Reduce", "noop empty axes attr", attrs(red(ReduceOp::kMax, false, {}, true)), {uniform(x)}});
  cases.push_back(
      {"Reduce", "empty axes input reduces all", attrs(red(ReduceOp::kMean, false)), {uniform(x), axes_input({})}});
  cases.push_back({"Reduce", "scalar", attrs(red(ReduceOp::kL2, false)), {uniform({})}});
  cases.push_back({"Reduce", "rank 1", attrs(red(ReduceOp::kSum, false)), {uniform({17}), axes_input({0})}});
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMean, ReduceOp::kLogSumExp, ReduceOp::kProd})
    cases.push_back(
        {"Reduce", str_cat(enum_name(op), " over empty axis"), attrs(red(op)), {uniform({0, 3}), axes_input({0})}});
  cases.push_back(
      {"Reduce", "keep axis of empty", attrs(red(ReduceOp::kSum, false)), {uniform({0, 3}), axes_input({1})}});

  // Integers: sum/prod on int32/int64, max/min on int8/uint8/int32/int64.
  const std::vector<DataType> sum_ints = {DataType::kInt32, DataType::kInt64};
  const std::vector<DataType> max_ints = {DataType::kInt8, DataType::kUInt8, DataType::kInt32, DataType::kInt64};
  auto int_case = [&](std::string name, ReduceAttrs a, std::vector<InputSpec> in, std::vector<DataType> dts) {
    OpCase c{"Reduce", std::move(name), attrs(a), std::move(in)};
    c.dtypes = dts;
    cases.push_back(std::move(c));
  };
  auto data = [](Dims d, double lo, double hi) { return uniform(d, lo, hi); };
  int_case("int sum axis 1", red(ReduceOp::kSum), {data(x, -50, 50), axes_input({1})}, sum_ints);
  int_case("int sum all drop", red(ReduceOp::kSum, false), {data(x, -50, 50)}, sum_ints);
  int_case("int prod axis -2", red(ReduceOp::kProd, false), {data(x, -3, 3), axes_input({-2})}, sum_ints);
  int_case("int max axes 0,2", red(ReduceOp::kMax), {data(x, 0, 100), axes_input({0, 2})}, max_ints);
  int_case("int min axis 1 drop", red(ReduceOp::kMin, false), {data(x, 0, 100), axes_input({1})}, max_ints);
  int_case("int max over empty axis", red(ReduceOp::kMax), {data({0, 3}, 0, 9), axes_input({0})}, max_ints);
  int_case("int min attr axes", red(ReduceOp::kMin, true, {-1}), {data(x, 0, 100)}, max_ints);

  // Bigger problems for perf (float32 only).
  auto big = [&](std::string name, ReduceAttrs a, std::vector<InputSpec> in, double tol) {
    OpCase c{"Reduce", std::move(name), attrs(a), std::move(in)};
    c.dtypes = {DataType::kFloat32};
    c.tolerance_scale = tol;
    cases.push_back(std::move(c));
  };
  // 4096-long float32 sums differ from the double-accumulated reference by a few ulps of the partial sums.
  big("sum 64x4096 axis 1", red(ReduceOp::kSum, false), {uniform({64, 4096}), axes_input({1})}, 4);
  big("mean 16x256x64 axis 1", red(ReduceOp::kMean), {uniform({16, 256, 64}), axes_input({1})}, 1);
  big("max 256x1024 axis -1", red(ReduceOp::kMax, false), {uniform({256, 1024}), axes_input({-1})}, 1);
  big("log_sum_exp 256x1024", red(ReduceOp::kLogSumExp, false), {uniform({256, 1024}), axes_input({-1})}, 1);

  // Reduced axes that are not adjacent: short rows (a warp per output) and long ones (a block per output), in
  // every float type.
  cases.push_back({"Reduce",
                   "l2 non-adjacent axes 0,2",
                   attrs(red(ReduceOp::kL2, false)),
                   {uniform({6, 5, 4, 3}), axes_input({0, 2})}});
  cases.push_back({"Reduce",
                   "mean non-adjacent axes 1,3 of 8x64x4x64",
                   attrs(red(ReduceOp::kMean)),
                   {uniform({8, 64, 4, 64}), axes_input({1, 3})}});
  cases.push_back({"Reduce",
                   "log_sum_exp non-adjacent axes 0,2,4 of 4x3x32x2x40",
                   attrs(red(ReduceOp::kLogSumExp)),
                   {uniform({4, 3, 32, 2, 40}), axes_input({0, 2, 4})}});
  cases.push_back({"Reduce",
                   "max columns 3x2000x40 axis 1",
                   attrs(red(ReduceOp::kMax, false)),
                   {uniform({3, 2000, 40}), axes_input({1})}});

  const ArgReduceOp arg_ops[] = {ArgReduceOp::kMax, ArgReduceOp::kMin};
  const std::vector<DataType> arg_types = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kInt8,
                                           DataType::kUInt8,   DataType::kInt32,   DataType::kInt64};
  for (ArgReduceOp op : arg_ops) {
    const std::string n = str_cat("arg", enum_name(op));
    auto add = [&](std::string name, ArgReduceAttrs a, Dims d, double lo, double hi) {
      OpCase c{"ArgReduce", n + " " + name, attrs(a), {uniform(d, lo, hi)}};
      c.dtypes = arg_types;
      cases.push_back(std::move(c));
    };
    add("axis 0 keep", arg(op, 0, true), x, -50, 50);
    add("axis 1 drop", arg(op, 1, false), x, -50, 50);
    add("axis -1 keep", arg(op, -1, true), {2, 3, 7}, -50, 50);
    add("ties first", arg(op, 1, false), {4, 9, 2}, 0, 3);
    add("ties last", arg(op, 1, false, true), {4, 9, 2}, 0, 3);
    add("ties last axis -1", arg(op, -1, true, true), {5, 8}, 0, 2);
    add("rank 1", arg(op, 0, false), {11}, -50, 50);
  }
  OpCase big_arg{
      "ArgReduce", "argmax 256x1024 axis 1", attrs(arg(ArgReduceOp::kMax, 1, false)), {uniform({256, 1024})}};
  big_arg.dtypes = {DataType::kFloat32};
  cases.push_back(big_arg);
  // Long rows of few values: ties between the lanes of a warp.
  for (bool last : {false, true}) {
    OpCase ties{"ArgReduce",
                str_cat("argmin 64x1000 ties", last ? " last" : " first"),
                attrs(arg(ArgReduceOp::kMin, -1, false, last)),
                {uniform({64, 1000}, 0, 5)}};
    ties.dtypes = {DataType::kInt32, DataType::kInt8};
    cases.push_back(ties);
  }
  return cases;
}

}  // namespace kiln::harness
