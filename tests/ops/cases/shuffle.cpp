#include <limits>

#include "harness.h"
#include "ops/shuffle/shuffle.h"

namespace kiln::harness {
namespace {

const std::vector<DataType> kAll = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kInt8,
                                    DataType::kUInt8,   DataType::kInt32,   DataType::kInt64,    DataType::kBool};
const std::vector<DataType> kSome = {DataType::kFloat32, DataType::kFloat16, DataType::kInt8, DataType::kInt64,
                                     DataType::kBool};
// Bigger cases (perf) run in two dtypes to keep the harness fast.
const std::vector<DataType> kBig = {DataType::kFloat32, DataType::kUInt8};

constexpr double kInt64Max = 9223372036854775807.0;  // saturates to INT64_MAX when stored
constexpr double kInt64Min = -9223372036854775808.0;

InputSpec data(Dims dims) { return uniform(dims, -100, 100); }
InputSpec i64s(std::vector<double> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return fixed(DataType::kInt64, {n}, std::move(v));
}

ShuffleAttrs perm(std::vector<int64_t> p) {
  ShuffleAttrs a;
  a.first_transpose = std::move(p);
  return a;
}
ShuffleAttrs reshape(std::vector<int64_t> dims, bool allowzero = false) {
  ShuffleAttrs a;
  a.has_reshape_dims = true;
  a.reshape_dims = std::move(dims);
  a.allowzero = allowzero;
  return a;
}

void shuffle_cases(std::vector<OpCase>& c) {
  auto add = [&](std::string name, ShuffleAttrs a, std::vector<InputSpec> in, std::vector<DataType> d = kAll) {
    c.push_back({"Shuffle", std::move(name), attrs(a), std::move(in), std::move(d)});
  };
  add("transpose 2d", perm({1, 0}), {data({5, 7})});
  add("transpose 3d 0,2,1", perm({0, 2, 1}), {data({3, 4, 5})});
  add("transpose 3d 2,0,1", perm({2, 0, 1}), {data({3, 4, 5})}, kSome);
  add("transpose 4d nchw->nhwc", perm({0, 2, 3, 1}), {data({2, 3, 4, 5})});
  add("transpose 4d nhwc->nchw", perm({0, 3, 1, 2}), {data({2, 4, 5, 3})}, kSome);
  add("transpose 5d", perm({4, 2, 0, 3, 1}), {data({2, 3, 2, 4, 3})});
  add("transpose 6d", perm({5, 1, 3, 0, 4, 2}), {data({2, 3, 2, 4, 3, 2})});
  add("transpose 8d", perm({7, 0, 6, 2, 5, 1, 4, 3}), {data({2, 1, 3, 2, 2, 1, 3, 2})}, kSome);
  add("transpose keeping inner dim", perm({0, 2, 1, 3}), {data({2, 5, 3, 8})});
  add("transpose with 1-dims", perm({1, 0, 3, 2}), {data({1, 6, 1, 5})}, kSome);
  add("identity perm rank 1", perm({0}), {data({9})}, kSome);
  add("scalar no-op", ShuffleAttrs{}, {data({})}, kSome);
  add("reshape input 0,-1", ShuffleAttrs{}, {data({2, 3, 4}), i64s({0, -1})});
  add("reshape input -1,0 int32", ShuffleAttrs{}, {data({2, 3, 4}), fixed(DataType::kInt32, {3}, {-1, 3, 0})}, kSome);
  add("flatten attr", reshape({0, -1}), {data({2, 3, 4, 5})}, kSome);
  add("reshape attr -1", reshape({-1}), {data({2, 3, 4})}, kSome);
  add("squeeze-like", reshape({3, 4}), {data({1, 3, 1, 4})});
  add("unsqueeze-like input", ShuffleAttrs{}, {data({3, 4}), i64s({1, 3, 1, 4})});
  add("to scalar", reshape({}), {data({1, 1})}, kSome);
  add("allowzero empty", reshape({0, 5}, true), {data({2, 0, 3})}, kSome);
  add("input shape wins", reshape({24}), {data({2, 3, 4}), i64s({4, 6})}, kSome);
  ShuffleAttrs both = reshape({6, 4});
  both.first_transpose = {1, 0, 2};
  both.second_transpose = {1, 0};
  add("transpose reshape transpose", both, {data({2, 3, 4})});
  ShuffleAttrs second = reshape({4, 3, 2});
  second.second_transpose = {2, 0, 1};
  add("reshape then transpose", second, {data({6, 4})}, kSome);
  ShuffleAttrs both4 = reshape({6, 2, 5});
  both4.first_transpose = {2, 0, 1};
  both4.second_transpose = {2, 1, 0};
  add("transpose reshape transpose 3d", both4, {data({3, 4, 5})}, kSome);
  add("big 64^3 transpose 0,2,1", perm({0, 2, 1}), {data({64, 64, 64})}, kBig);
  add("big nchw->nhwc", perm({0, 2, 3, 1}), {data({4, 32, 32, 32})}, kBig);
  // An image batch into channels-last and back (3 channels: the thin side of the transpose).
  add("big nchw->nhwc 3 channels", perm({0, 2, 3, 1}), {data({4, 3, 40, 37})}, kBig);
  add("big nhwc->nchw 3 channels", perm({0, 3, 1, 2}), {data({4, 40, 37, 3})}, kBig);
}

void concat_split_cases(std::vector<OpCase>& c) {
  auto concat = [&](std::string name, int64_t axis, std::vector<InputSpec> in, std::vector<DataType> d = kAll) {
    ConcatenationAttrs a;
    a.axis = axis;
    c.push_back({"Concatenation", std::move(name), attrs(a), std::move(in), std::move(d)});
  };
  concat("axis 0", 0, {data({1, 3, 4}), data({2, 3, 4}), data({3, 3, 4})});
  concat("axis 1", 1, {data({2, 1, 4}), data({2, 5, 4}), data({2, 2, 4})});
  concat("axis 2", 2, {data({2, 3, 4}), data({2, 3, 1})}, kSome);
  concat("axis -1", -1, {data({2, 3, 2}), data({2, 3, 5}), data({2, 3, 1})}, kSome);
  concat("rank 1", 0, {data({3}), data({5})}, kSome);
  concat("single input", 1, {data({3, 4})}, kSome);
  concat("empty part", 0, {data({2, 3}), data({0, 3}), data({1, 3})}, kSome);
  concat("big axis 1", 1, {data({32, 64, 64}), data({32, 32, 64}), data({32, 64, 64})}, kBig);

  auto split = [&](std::string name, SplitAttrs a, std::vector<InputSpec> in, std::vector<DataType> d = kAll) {
    c.push_back({"Split", std::move(name), attrs(a), std::move(in), std::move(d)});
  };
  SplitAttrs even;
  even.axis = 1;
  even.num_outputs = 3;
  split("even num_outputs", even, {data({2, 6, 3})});
  SplitAttrs uneven;
  uneven.axis = -1;
  uneven.num_outputs = 3;
  split("uneven num_outputs 7/3", uneven, {data({2, 7})}, kSome);
  SplitAttrs by_input;
  by_input.axis = -1;
  split("sizes input", by_input, {data({2, 3, 6}), i64s({1, 2, 3})});
  split("sizes input with 0", by_input, {data({2, 4}), i64s({0, 3, 1})}, kSome);
  SplitAttrs by_attr;
  by_attr.split = {3, 1};
  split("sizes attribute axis 0", by_attr, {data({4, 3})}, kSome);
  SplitAttrs one;
  one.num_outputs = 1;
  split("one output", one, {data({5})}, kSome);
  SplitAttrs big;
  big.axis = 1;
  big.num_outputs = 3;
  split("big axis 1", big, {data({64, 96, 64})}, kBig);
}

void slice_cases(std::vector<OpCase>& c) {
  auto slice = [&](std::string name, std::vector<InputSpec> in, std::vector<DataType> d = kAll) {
    c.push_back({"Slice", std::move(name), attrs(NoAttrs{}), std::move(in), std::move(d)});
  };
  slice("basic 2d", {data({5, 6}), i64s({1, 2}), i64s({4, 5})});
  slice("negative start end axes", {data({4, 6}), i64s({-3}), i64s({-1}), i64s({-1})});
  slice("stepped", {data({7, 3, 8}), i64s({0, 1}), i64s({7, 8}), i64s({0, 2}), i64s({2, 3})}, kSome);
  slice("reverse int64 min", {data({3, 5}), i64s({-1}), i64s({kInt64Min}), i64s({1}), i64s({-1})});
  slice("negative step 2", {data({6, 4}), i64s({4}), i64s({0}), i64s({0}), i64s({-2})}, kSome);
  slice("clamped", {data({4, 5}), i64s({-100, 2}), i64s({100, kInt64Max})}, kSome);
  slice("clamped negative step", {data({5}), i64s({100}), i64s({-100}), i64s({0}), i64s({-3})}, kSome);
  slice("empty result", {data({4, 5}), i64s({3}), i64s({1}), i64s({1})}, kSome);
  slice("int32 indices",
        {data({3, 4, 5}), fixed(DataType::kInt32, {2}, {1, 1}), fixed(DataType::kInt32, {2}, {3, 5}),
         fixed(DataType::kInt32, {2}, {2, 0})},
        kSome);
  slice("rank 4 inner step", {data({2, 3, 4, 9}), i64s({1, 0}), i64s({3, 9}), i64s({1, 3}), i64s({1, 2})}, kSome);
  slice("big", {data({64, 64, 64}), i64s({1, 0}), i64s({63, 64}), i64s({1, 2}), i64s({1, 2})}, kBig);
}

void pad_cases(std::vector<OpCase>& c) {
  auto pad = [&](std::string name, PadMode mode, std::vector<InputSpec> in, std::vector<DataType> d = kAll) {
    PaddingAttrs a;
    a.mode = mode;
    c.push_back({"Padding", std::move(name), attrs(a), std::move(in), std::move(d)});
  };
  InputSpec value = fixed(DataType::kFloat32, {}, {7});
  value.dtype = std::nullopt;  // the case dtype, like the data
  pad("constant value", PadMode::kConstant, {data({3, 4}), i64s({1, 2, 0, 1}), value});
  InputSpec value1 = fixed(DataType::kFloat32, {1}, {-5});
  value1.dtype = std::nullopt;
  pad("constant value [1]", PadMode::kConstant, {data({2, 3}), i64s({0, 1, 1, 0}), value1}, kSome);
  pad("constant zero nchw", PadMode::kConstant, {data({1, 2, 3, 4}), i64s({0, 0, 1, 2, 0, 0, 2, 1})});
  pad("reflect", PadMode::kReflect, {data({3, 5}), i64s({2, 2, 2, 3})});
  pad("reflect beyond dim", PadMode::kReflect, {data({2, 3}), i64s({0, 5, 0, 4})}, kSome);
  pad("edge", PadMode::kEdge, {data({3, 4}), i64s({2, 1, 1, 3})});
  pad("wrap", PadMode::kWrap, {data({3, 4}), i64s({1, 5, 2, 2})});
  pad("negative constant", PadMode::kConstant, {data({5, 6}), i64s({-1, 2, 1, -2})}, kSome);
  pad("negative reflect", PadMode::kReflect, {data({5, 6}), i64s({-1, 2, 2, -2})}, kSome);
  pad("negative edge", PadMode::kEdge, {data({5, 6}), i64s({-2, -1, 1, 3})}, kSome);
  pad("axes -1", PadMode::kConstant, {data({2, 3, 4}), i64s({1, 2}), absent(), i64s({-1})}, kSome);
  pad("axes 0,2 reflect", PadMode::kReflect, {data({3, 2, 4}), i64s({1, 2, 2, 1}), absent(), i64s({0, 2})}, kSome);
  pad("rank 1 wrap", PadMode::kWrap, {data({4}), i64s({6, 1})}, kSome);
  pad("rank 0", PadMode::kConstant, {data({}), i64s({})}, kSome);
  pad("big constant", PadMode::kConstant, {data({4, 16, 62, 62}), i64s({0, 0, 1, 1, 0, 0, 1, 1})}, kBig);
  pad("big reflect", PadMode::kReflect, {data({4, 16, 60, 60}), i64s({0, 0, 2, 2, 0, 0, 2, 2})}, kBig);
}

void expand_tile_cases(std::vector<OpCase>& c) {
  auto expand = [&](std::string name, std::vector<InputSpec> in, std::vector<DataType> d = kAll) {
    c.push_back({"Expand", std::move(name), attrs(NoAttrs{}), std::move(in), std::move(d)});
  };
  expand("to higher rank", {data({3, 1}), i64s({2, 3, 4})});
  expand("bidirectional", {data({1, 4}), i64s({3, 1})});
  expand("shape of lower rank", {data({2, 3, 4}), i64s({1, 4})}, kSome);
  expand("scalar", {data({}), i64s({2, 3})}, kSome);
  expand("middle broadcast", {data({2, 1, 3}), i64s({2, 5, 3})}, kSome);
  expand("to empty", {data({1, 3}), i64s({0, 3})}, kSome);
  expand("big", {data({1, 64, 1}), i64s({64, 64, 64})}, kBig);

  auto tile = [&](std::string name, std::vector<InputSpec> in, std::vector<DataType> d = kAll) {
    c.push_back({"Tile", std::move(name), attrs(NoAttrs{}), std::move(in), std::move(d)});
  };
  tile("2d", {data({2, 3}), i64s({2, 3})});
  tile("3d with ones", {data({2, 1, 3}), i64s({1, 4, 2})}, kSome);
  tile("rank 1", {data({4}), i64s({3})}, kSome);
  tile("zero repeats", {data({2, 3}), i64s({0, 2})}, kSome);
  tile("big", {data({16, 16, 16}), i64s({4, 4, 4})}, kBig);
}

}  // namespace

KILN_OP_CASES(shuffle) {
  std::vector<OpCase> cases;
  shuffle_cases(cases);
  concat_split_cases(cases);
  slice_cases(cases);
  pad_cases(cases);
  expand_tile_cases(cases);
  return cases;
}

}  // namespace kiln::harness
