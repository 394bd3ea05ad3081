#include <gtest/gtest.h>

#include <limits>

#include "kernels/registry.h"
#include "op_test_util.h"
#include "ops/shuffle/shuffle.h"

namespace kiln {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

Tensor floats(Dims dims, std::vector<double> v) {
  Tensor t = *Tensor::empty(DataType::kFloat32, dims);
  for (size_t i = 0; i < v.size(); ++i) t.set(static_cast<int64_t>(i), v[i]);
  return t;
}
Tensor iota(Dims dims, DataType dtype = DataType::kFloat32) {
  Tensor t = *Tensor::empty(dtype, dims);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, static_cast<double>(i));
  return t;
}
Tensor i64s(std::vector<int64_t> v) {
  Tensor t = *Tensor::empty(DataType::kInt64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  return t;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Infers with every input's value known.
Result<std::vector<TensorDesc>> infer(const std::string& op, const Attrs& attrs, const std::vector<Tensor>& in) {
  std::vector<TensorDesc> descs;
  std::vector<const Tensor*> values;
  for (const Tensor& t : in) {
    descs.push_back(t.defined() ? TensorDesc{t.dtype(), t.dims(), true} : TensorDesc::absent());
    values.push_back(t.defined() ? &t : nullptr);
  }
  return OpRegistry::global().find(op)->infer_outputs(InferContext(attrs, descs, values));
}
// Infers from types and shapes only.
Result<std::vector<TensorDesc>> infer_descs(const std::string& op, const Attrs& attrs, std::vector<TensorDesc> in) {
  return OpRegistry::global().find(op)->infer_outputs(InferContext(attrs, in));
}

Dims dims_of(const std::string& op, const Attrs& attrs, const std::vector<Tensor>& in, int output = 0) {
  auto r = infer(op, attrs, in);
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? (*r)[output].dims : Dims{};
}
std::string error_of(const std::string& op, const Attrs& attrs, const std::vector<Tensor>& in) {
  auto r = infer(op, attrs, in);
  EXPECT_FALSE(r.is_ok()) << op << " unexpectedly accepted the inputs";
  return r.status().message();
}

// Runs `op` on ref and CPU; each output must equal `want` (one list per output).
void expect_values(const std::string& op, const Attrs& attrs, std::vector<Tensor> in,
                   std::vector<std::vector<double>> want) {
  auto outs = infer(op, attrs, in);
  ASSERT_TRUE(outs.is_ok()) << outs.status().to_string();
  OpCall call{OpRegistry::global().find(op), &attrs, {}, *outs};
  for (const Tensor& t : in)
    call.inputs.push_back(t.defined() ? TensorDesc{t.dtype(), t.dims(), true} : TensorDesc::absent());
  for (Backend b : {Backend::kRef, Backend::kCpu}) {
    std::vector<Tensor> dst;
    for (const TensorDesc& d : *outs) dst.push_back(*Tensor::empty(d.dtype, d.dims));
    Status s = op_test::run_engine(call, b, in, dst);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    ASSERT_EQ(dst.size(), want.size());
    for (size_t o = 0; o < want.size(); ++o) {
      std::vector<double> got;
      for (int64_t i = 0; i < dst[o].numel(); ++i) got.push_back(dst[o].at(i));
      EXPECT_EQ(got, want[o]) << op << " output " << o << " on " << backend_name(b);
    }
  }
}

ShuffleAttrs perm(std::vector<int64_t> p) {
  ShuffleAttrs a;
  a.first_transpose = std::move(p);
  return a;
}
ShuffleAttrs reshape(std::vector<int64_t> d, bool allowzero = false) {
  ShuffleAttrs a;
  a.has_reshape_dims = true;
  a.reshape_dims = std::move(d);
  a.allowzero = allowzero;
  return a;
}

TEST(Shuffle, InfersTransposeAndReshape) {
  EXPECT_EQ(dims_of("Shuffle", perm({0, 2, 3, 1}), {iota({2, 3, 4, 5})}), (Dims{2, 4, 5, 3}));
  EXPECT_EQ(dims_of("Shuffle", ShuffleAttrs{}, {iota({2, 3, 4}), i64s({0, -1})}), (Dims{2, 12}));
  EXPECT_EQ(dims_of("Shuffle", ShuffleAttrs{}, {iota({2, 3, 4}), i64s({-1, 0, 2})}), (Dims{4, 3, 2}));
  EXPECT_EQ(dims_of("Shuffle", reshape({}), {iota({1, 1})}), (Dims{}));
  EXPECT_EQ(dims_of("Shuffle", reshape({0, 4}, true), {iota({2, 0})}), (Dims{0, 4}));
  // Without allowzero, 0 copies the input dim: [2, 0, 4] (0 elements) cannot become [2, 4].
  EXPECT_TRUE(contains(error_of("Shuffle", reshape({0, 4}), {iota({2, 0, 4})}), "8 elements"));
  ShuffleAttrs both = reshape({6, 4});
  both.first_transpose = {1, 0, 2};
  both.second_transpose = {1, 0};
  EXPECT_EQ(dims_of("Shuffle", both, {iota({2, 3, 4})}), (Dims{4, 6}));
  // The shape input wins over reshape_dims.
  EXPECT_EQ(dims_of("Shuffle", reshape({24}), {iota({2, 3, 4}), i64s({4, 6})}), (Dims{4, 6}));
}

TEST(Shuffle, UnknownShapeValueGivesDynamicDims) {
  auto r = infer_descs("Shuffle", ShuffleAttrs{}, {{DataType::kFloat32, {2, 3}, true}, {DataType::kInt64, {3}, true}});
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].dims, (Dims{kDynamicDim, kDynamicDim, kDynamicDim}));
  auto dyn = infer("Shuffle", ShuffleAttrs{}, {iota({2, 3}), i64s({-1})});
  ASSERT_TRUE(dyn.is_ok());
  auto bad = infer_descs("Shuffle", ShuffleAttrs{},
                         {{DataType::kFloat32, {2, 3}, true}, {DataType::kInt64, {kDynamicDim}, true}});
  EXPECT_FALSE(bad.is_ok());
}

TEST(Shuffle, RejectsMalformedInput) {
  std::string e = error_of("Shuffle", perm({0, 0, 1}), {iota({2, 3, 4})});
  EXPECT_TRUE(contains(e, "not a permutation")) << e;
  e = error_of("Shuffle", perm({1, 0}), {iota({2, 3, 4})});
  EXPECT_TRUE(contains(e, "rank 3")) << e;
  e = error_of("Shuffle", ShuffleAttrs{}, {iota({2, 3, 4}), i64s({5, 5})});
  EXPECT_TRUE(contains(e, "[2, 3, 4]") && contains(e, "[5, 5]")) << e;
  e = error_of("Shuffle", ShuffleAttrs{}, {iota({2, 3, 4}), i64s({-1, -1})});
  EXPECT_TRUE(contains(e, "more than one -1")) << e;
  e = error_of("Shuffle", ShuffleAttrs{}, {iota({2, 3, 4}), i64s({-2, 12})});
  EXPECT_TRUE(contains(e, "-2")) << e;
  e = error_of("Shuffle", ShuffleAttrs{}, {iota({24}), i64s({4, 0})});
  EXPECT_TRUE(contains(e, "copies dimension 1")) << e;
  e = error_of("Shuffle", reshape({0, -1}, true), {iota({0, 4})});
  EXPECT_TRUE(contains(e, "both 0 and -1")) << e;
  ShuffleAttrs second = reshape({6, 4});
  second.second_transpose = {0, 1, 2};
  e = error_of("Shuffle", second, {iota({24})});
  EXPECT_TRUE(contains(e, "second_transpose")) << e;
  e = error_of("Shuffle", ShuffleAttrs{}, {iota({4}), floats({1}, {4})});
  EXPECT_TRUE(contains(e, "'shape'") && contains(e, "int64")) << e;
  e = error_of("Shuffle", ShuffleAttrs{}, {iota({4}), i64s({1, 1, 1, 1, 1, 1, 1, 1, 4})});
  EXPECT_TRUE(contains(e, "maximum rank")) << e;
}

TEST(Shuffle, MovesValues) {
  expect_values("Shuffle", perm({1, 0}), {iota({2, 3})}, {{0, 3, 1, 4, 2, 5}});
  ShuffleAttrs both = reshape({2, 3});
  both.first_transpose = {1, 0};
  both.second_transpose = {1, 0};
  expect_values("Shuffle", both, {iota({2, 3})}, {{0, 4, 3, 2, 1, 5}});
  expect_values("Shuffle", perm({2, 0, 1}), {iota({2, 2, 2}, DataType::kInt64)}, {{0, 2, 4, 6, 1, 3, 5, 7}});
  expect_values("Shuffle", reshape({-1}), {iota({2, 2}, DataType::kInt8)}, {{0, 1, 2, 3}});
}

TEST(Concatenation, InfersAndRejects) {
  ConcatenationAttrs a;
  a.axis = -2;
  EXPECT_EQ(dims_of("Concatenation", a, {iota({2, 1, 4}), iota({2, 5, 4})}), (Dims{2, 6, 4}));
  std::string e = error_of("Concatenation", a, {iota({2, 1, 4}), iota({2, 5, 3})});
  EXPECT_TRUE(contains(e, "[2, 5, 3]") && contains(e, "[2, 1, 4]")) << e;
  e = error_of("Concatenation", a, {iota({2, 1, 4}), iota({2, 1})});
  EXPECT_TRUE(contains(e, "ranks must match")) << e;
  e = error_of("Concatenation", a, {iota({2, 1, 4}), iota({2, 1, 4}, DataType::kInt32)});
  EXPECT_TRUE(contains(e, "int32")) << e;
  a.axis = 3;
  e = error_of("Concatenation", a, {iota({2, 1, 4})});
  EXPECT_TRUE(contains(e, "axis") && contains(e, "3")) << e;
  e = error_of("Concatenation", ConcatenationAttrs{}, {iota({})});
  EXPECT_TRUE(contains(e, "scalar")) << e;
  ConcatenationAttrs one;
  one.axis = 1;
  expect_values("Concatenation", one, {floats({2, 1}, {1, 2}), floats({2, 2}, {3, 4, 5, 6})}, {{1, 3, 4, 2, 5, 6}});
}

TEST(Split, InfersSizes) {
  SplitAttrs a;
  a.axis = -1;
  a.num_outputs = 3;
  auto r = infer("Split", a, {iota({2, 7})});
  ASSERT_TRUE(r.is_ok());
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].dims, (Dims{2, 3}));
  EXPECT_EQ((*r)[2].dims, (Dims{2, 1}));
  SplitAttrs by_input;
  EXPECT_EQ(dims_of("Split", by_input, {iota({6, 2}), i64s({1, 5})}, 1), (Dims{5, 2}));
  std::string e = error_of("Split", by_input, {iota({6, 2}), i64s({1, 4})});
  EXPECT_TRUE(contains(e, "sum to 5") && contains(e, "size 6")) << e;
  e = error_of("Split", by_input, {iota({6, 2}), i64s({7, -1})});
  EXPECT_TRUE(contains(e, "negative")) << e;
  e = error_of("Split", SplitAttrs{}, {iota({6, 2})});
  EXPECT_TRUE(contains(e, "num_outputs")) << e;
  SplitAttrs too_many;
  too_many.num_outputs = 4;
  e = error_of("Split", too_many, {iota({5})});
  EXPECT_TRUE(contains(e, "num_outputs 4")) << e;
  SplitAttrs attr;
  attr.split = {2, 1};
  expect_values("Split", attr, {iota({3, 2})}, {{0, 1, 2, 3}, {4, 5}});
  expect_values("Split", a, {iota({1, 7})}, {{0, 1, 2}, {3, 4, 5}, {6}});
}

TEST(Slice, ResolvesOnnxSemantics) {
  const NoAttrs none;
  EXPECT_EQ(dims_of("Slice", none, {iota({5, 6}), i64s({1, -4}), i64s({kMax, -1})}), (Dims{4, 3}));
  expect_values("Slice", none, {iota({5}), i64s({-1}), i64s({kMin}), i64s({0}), i64s({-1})}, {{4, 3, 2, 1, 0}});
  expect_values("Slice", none, {iota({6}), i64s({4}), i64s({0}), i64s({0}), i64s({-2})}, {{4, 2}});
  expect_values("Slice", none, {iota({7}), i64s({1}), i64s({kMax}), i64s({0}), i64s({2})}, {{1, 3, 5}});
  expect_values("Slice", none, {iota({3}), i64s({-100}), i64s({100})}, {{0, 1, 2}});
  expect_values("Slice", none, {iota({5}), i64s({100}), i64s({-100}), i64s({0}), i64s({-3})}, {{4, 1}});
  expect_values("Slice", none, {iota({2, 3}), i64s({2, 1}), i64s({kMin, kMin}), i64s({-1, 0}), i64s({-1, -2})},
                {{5, 4, 3}});
  // A negative step towards an end clamped to the last index selects nothing.
  EXPECT_EQ(dims_of("Slice", none, {iota({3}), i64s({1}), i64s({kMax}), i64s({0}), i64s({-1})}), (Dims{0}));
  EXPECT_EQ(dims_of("Slice", none, {iota({4, 5}), i64s({3}), i64s({1})}), (Dims{0, 5}));
  expect_values("Slice", none, {iota({5}), i64s({1}), i64s({kMax}), i64s({0}), i64s({kMax})}, {{1}});
  expect_values("Slice", none, {iota({5}), i64s({-1}), i64s({kMin}), i64s({0}), i64s({kMin})}, {{4}});
  std::string e = error_of("Slice", none, {iota({4}), i64s({0}), i64s({2}), i64s({0}), i64s({0})});
  EXPECT_TRUE(contains(e, "0 step")) << e;
  e = error_of("Slice", none, {iota({4, 4}), i64s({0, 0}), i64s({2, 2}), i64s({1, -1})});
  EXPECT_TRUE(contains(e, "repeats axis 1")) << e;
  e = error_of("Slice", none, {iota({4}), i64s({0}), i64s({2}), i64s({1})});
  EXPECT_TRUE(contains(e, "out of range")) << e;
  e = error_of("Slice", none, {iota({4}), i64s({0, 1}), i64s({2})});
  EXPECT_TRUE(contains(e, "same length")) << e;
  auto dyn = infer_descs("Slice", none,
                         {{DataType::kFloat32, {4, 5}, true},
                          {DataType::kInt64, {1}, true},
                          {DataType::kInt64, {1}, true},
                          {DataType::kInt64, {1}, true}});
  ASSERT_TRUE(dyn.is_ok());
  EXPECT_EQ((*dyn)[0].dims, (Dims{kDynamicDim, kDynamicDim}));
}

TEST(Padding, ModesAndCropping) {
  PaddingAttrs a;
  expect_values("Padding", a, {floats({3}, {1, 2, 3}), i64s({2, 2}), floats({}, {9})}, {{9, 9, 1, 2, 3, 9, 9}});
  a.mode = PadMode::kReflect;
  expect_values("Padding", a, {floats({3}, {1, 2, 3}), i64s({2, 2})}, {{3, 2, 1, 2, 3, 2, 1}});
  expect_values("Padding", a, {floats({2}, {1, 2}), i64s({3, 0})}, {{2, 1, 2, 1, 2}});
  expect_values("Padding", a, {floats({5}, {1, 2, 3, 4, 5}), i64s({-1, 2})}, {{2, 3, 4, 5, 4, 3}});
  a.mode = PadMode::kEdge;
  expect_values("Padding", a, {floats({3}, {1, 2, 3}), i64s({2, 2})}, {{1, 1, 1, 2, 3, 3, 3}});
  expect_values("Padding", a, {floats({5}, {1, 2, 3, 4, 5}), i64s({1, -2})}, {{1, 1, 2, 3}});
  a.mode = PadMode::kWrap;
  expect_values("Padding", a, {floats({3}, {1, 2, 3}), i64s({2, 2})}, {{2, 3, 1, 2, 3, 1, 2}});
  PaddingAttrs c;
  expect_values("Padding", c, {floats({2, 2}, {1, 2, 3, 4}), i64s({1, 0}), Tensor(), i64s({0})}, {{0, 0, 1, 2, 3, 4}});
  EXPECT_EQ(dims_of("Padding", c, {iota({1, 3, 4, 5}), i64s({1, 2, -1, 0}), Tensor(), i64s({-1, 1})}),
            (Dims{1, 5, 4, 5}));
  std::string e = error_of("Padding", c, {iota({3, 4}), i64s({0, -5, 0, 0})});
  EXPECT_TRUE(contains(e, "negative size")) << e;
  e = error_of("Padding", c, {iota({3, 4}), i64s({1, 1})});
  EXPECT_TRUE(contains(e, "4 entries")) << e;
  PaddingAttrs r;
  r.mode = PadMode::kReflect;
  e = error_of("Padding", r, {iota({3, 0}), i64s({0, 1, 0, 1})});
  EXPECT_TRUE(contains(e, "no input elements")) << e;
  e = error_of("Padding", c, {iota({3}), i64s({1, 1}), floats({2}, {1, 2})});
  EXPECT_TRUE(contains(e, "constant_value")) << e;
}

TEST(Expand, BroadcastsBothWays) {
  const NoAttrs none;
  EXPECT_EQ(dims_of("Expand", none, {iota({1, 4}), i64s({3, 1})}), (Dims{3, 4}));
  EXPECT_EQ(dims_of("Expand", none, {iota({2, 3, 4}), i64s({4})}), (Dims{2, 3, 4}));
  std::string e = error_of("Expand", none, {iota({2}), i64s({1 << 30, 1 << 30, 1 << 30, 1})});
  EXPECT_TRUE(contains(e, "absurdly large")) << e;
  e = error_of("Expand", none, {iota({2, 3}), i64s({4, 4})});
  EXPECT_TRUE(contains(e, "[2, 3]") && contains(e, "[4, 4]")) << e;
  e = error_of("Expand", none, {iota({2, 3}), i64s({-2, 3})});
  EXPECT_TRUE(contains(e, "negative")) << e;
  expect_values("Expand", none, {floats({3, 1}, {1, 2, 3}), i64s({2, 1, 2})}, {{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}});
  auto dyn = infer_descs("Expand", none, {{DataType::kFloat32, {1, 4}, true}, {DataType::kInt64, {3}, true}});
  ASSERT_TRUE(dyn.is_ok());
  EXPECT_EQ((*dyn)[0].dims, (Dims{kDynamicDim, kDynamicDim, 4}));
}

TEST(Tile, RepeatsAxes) {
  const NoAttrs none;
  EXPECT_EQ(dims_of("Tile", none, {iota({2, 3}), i64s({2, 0})}), (Dims{4, 0}));
  expect_values("Tile", none, {floats({2}, {1, 2}), i64s({3})}, {{1, 2, 1, 2, 1, 2}});
  expect_values("Tile", none, {floats({2, 2}, {1, 2, 3, 4}), i64s({2, 1})}, {{1, 2, 3, 4, 1, 2, 3, 4}});
  expect_values("Tile", none, {floats({2, 2}, {1, 2, 3, 4}), i64s({1, 2})}, {{1, 2, 1, 2, 3, 4, 3, 4}});
  std::string e = error_of("Tile", none, {iota({2, 3}), i64s({2})});
  EXPECT_TRUE(contains(e, "repeats") && contains(e, "2 elements")) << e;
  e = error_of("Tile", none, {iota({2, 3}), i64s({2, -1})});
  EXPECT_TRUE(contains(e, "negative")) << e;
}

TEST(Shuffle, CpuTacticsAcceptWhatTheyCover) {
  ShuffleAttrs t = perm({1, 0});
  OpCall call{OpRegistry::global().find("Shuffle"),
              &t,
              {{DataType::kFloat32, {4, 5}, true}},
              {{DataType::kFloat32, {5, 4}, true}}};
  auto f32 = KernelRegistry::global().select(call, Backend::kCpu);
  ASSERT_TRUE(f32.is_ok());
  EXPECT_EQ((*f32)->name, "cpu.onednn.shuffle");
  call.inputs[0].dtype = call.outputs[0].dtype = DataType::kFloat16;
  auto f16 = KernelRegistry::global().select(call, Backend::kCpu);
  ASSERT_TRUE(f16.is_ok());
  EXPECT_EQ((*f16)->name, "cpu.shuffle");
  call.inputs[0].dtype = call.outputs[0].dtype = DataType::kFp8E4M3;
  auto fp8 = KernelRegistry::global().select(call, Backend::kCpu);
  ASSERT_FALSE(fp8.is_ok());
  EXPECT_TRUE(contains(fp8.status().message(), "fp8e4m3")) << fp8.status().message();
}

TEST(ShuffleAttrs, PrintAndJson) {
  PaddingAttrs p;
  p.mode = PadMode::kWrap;
  EXPECT_EQ(p.to_string(), "mode=wrap");
  ShuffleAttrs a = reshape({0, -1}, true);
  a.second_transpose = {1, 0};
  ShuffleAttrs b;
  ASSERT_TRUE(b.from_json(a.to_json()).is_ok());
  EXPECT_TRUE(b.equals(a));
  EXPECT_EQ(b.hash(), a.hash());
}

}  // namespace
}  // namespace kiln
