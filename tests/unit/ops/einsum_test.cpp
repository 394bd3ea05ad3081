#include <gtest/gtest.h>

#include "kernels/registry.h"
#include "op_test_util.h"
#include "ops/einsum/einsum.h"

namespace kiln {
namespace {

TensorDesc f32(Dims d) { return {DataType::kFloat32, d, true}; }

Result<std::vector<TensorDesc>> infer(const std::string& eq, std::vector<TensorDesc> in) {
  EinsumAttrs a;
  a.equation = eq;
  return OpRegistry::global().find("Einsum")->infer_outputs(InferContext(a, in));
}

void expect_error(const std::string& eq, std::vector<TensorDesc> in, const std::string& text) {
  auto r = infer(eq, std::move(in));
  ASSERT_FALSE(r.is_ok()) << eq;
  EXPECT_NE(r.status().message().find(text), std::string::npos) << r.status().message();
}

TEST(EinsumSchema, Shapes) {
  EXPECT_EQ((*infer("ij,jk->ik", {f32({2, 3}), f32({3, 4})}))[0].dims, (Dims{2, 4}));
  EXPECT_EQ((*infer("ij,jk", {f32({2, 3}), f32({3, 4})}))[0].dims, (Dims{2, 4}));
  EXPECT_EQ((*infer("ji", {f32({2, 3})}))[0].dims, (Dims{3, 2}));  // implicit: i then j
  EXPECT_EQ((*infer("i,i", {f32({5}), f32({5})}))[0].dims, (Dims{}));
  EXPECT_EQ((*infer("...ii->...i", {f32({7, 3, 3})}))[0].dims, (Dims{7, 3}));
  EXPECT_EQ((*infer("...ij,...jk", {f32({2, 1, 3, 4}), f32({5, 4, 6})}))[0].dims, (Dims{2, 5, 3, 6}));
  EXPECT_EQ((*infer("ij->", {f32({kDynamicDim, 3})}))[0].dims, (Dims{}));
  EXPECT_EQ((*infer("ij->ji", {f32({kDynamicDim, 3})}))[0].dims, (Dims{3, kDynamicDim}));
}

TEST(EinsumSchema, Errors) {
  expect_error("ij,jk->ik", {f32({2, 3})}, "1 input(s)");
  expect_error("ij,jk->ik", {f32({2, 3}), f32({4, 5})}, "label 'j' has size 3");
  expect_error("ijk", {f32({2, 3})}, "names 3 axes");
  expect_error("i1", {f32({2, 3})}, "is not a label");
  expect_error("ij->ik", {f32({2, 3})}, "output label 'k' does not appear");
  expect_error("ij->ii", {f32({2, 3})}, "appears twice");
  expect_error("i..j", {f32({2, 3})}, "ellipsis");
  expect_error("ij,ij", {f32({2, 3}), {DataType::kInt32, {2, 3}, true}}, "share one dtype");
}

TEST(EinsumKernels, TraceAndMatmul) {
  EinsumAttrs a;
  a.equation = "ii->";
  const Dims d = {3, 3};
  for (Backend b : {Backend::kRef, Backend::kCpu}) {
    auto x = *Tensor::empty(DataType::kFloat32, d);
    for (int i = 0; i < 9; ++i) x.set(i, i);
    OpCall call{OpRegistry::global().find("Einsum"), &a, {f32(d)}, {f32({})}};
    std::vector<Tensor> y{*Tensor::empty(DataType::kFloat32, {})};
    ASSERT_TRUE(op_test::run_engine(call, b, {x}, y).is_ok());
    EXPECT_FLOAT_EQ(y[0].at(0), 0 + 4 + 8) << backend_name(b);
  }
}

}  // namespace
}  // namespace kiln
