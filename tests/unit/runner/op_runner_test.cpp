// The one execution loop: kernels pinned through the builder, outputs written into the caller's tensors, and
// single ops run as one-node engines (OpRunner).
#include <gtest/gtest.h>

#include <cmath>

#include "ops/activation/activation.h"
#include "ops/convolution/convolution.h"
#include "ops/matmul/matmul.h"
#include "runner/op_runner.h"

namespace kiln {
namespace {

Tensor filled(DataType d, Dims dims, double start, double step) {
  Tensor t = Tensor::empty(d, dims).value();
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, start + step * static_cast<double>(i));
  return t;
}

OpSpec matmul(DataType d, std::optional<KernelPin> pin = std::nullopt) {
  static const MatrixMultiplyAttrs attrs;
  OpSpec spec;
  spec.op = "MatrixMultiply";
  spec.attrs = &attrs;
  spec.inputs = {filled(d, {2, 3}, -2, 1), filled(d, {3, 4}, 1, 1)};
  spec.pin = std::move(pin);
  return spec;
}

std::string message(const Status& s) { return s.to_string(); }

TEST(KernelPin, ThePinnedImplementationRunsTheNode) {
  // cpu.onednn.matrix_multiply has the higher priority; the pin picks the own loops.
  auto unpinned = OpRunner::build(matmul(DataType::kFloat32));
  ASSERT_TRUE(unpinned.is_ok()) << unpinned.status().to_string();
  EXPECT_EQ(unpinned->kernel(), "cpu.onednn.matrix_multiply");
  auto pinned = OpRunner::build(matmul(DataType::kFloat32, KernelPin{"cpu.matrix_multiply", ""}));
  ASSERT_TRUE(pinned.is_ok()) << pinned.status().to_string();
  EXPECT_EQ(pinned->kernel(), "cpu.matrix_multiply");
  ASSERT_TRUE(pinned->run().is_ok());
  auto got = pinned->outputs();
  ASSERT_TRUE(got.is_ok());
  // [[-2,-1,0],[1,2,3]] x [[1..4],[5..8],[9..12]]
  const std::vector<double> want = {-7, -10, -13, -16, 38, 44, 50, 56};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ((*got)[0].at(static_cast<int64_t>(i)), want[i]) << i;
}

TEST(KernelPin, APinnedTacticIsBuilt) {
  static const ConvolutionAttrs attrs;
  OpSpec spec;
  spec.op = "Convolution";
  spec.attrs = &attrs;
  spec.inputs = {filled(DataType::kFloat32, {1, 2, 5, 5}, -1, 0.04),
                 filled(DataType::kFloat32, {3, 2, 3, 3}, 0.5, -0.02)};
  auto candidates = OpRunner::candidates(spec, Backend::kCpu);
  ASSERT_TRUE(candidates.is_ok()) << candidates.status().to_string();
  const OpCandidates::Accepted* onednn = nullptr;
  for (const auto& c : candidates->accepted)
    if (c.impl->name == "cpu.onednn.convolution") onednn = &c;
  ASSERT_NE(onednn, nullptr) << "oneDNN's convolution accepts a float32 3x3 convolution";
  ASSERT_GE(onednn->tactics.size(), 2u);
  spec.backend = Backend::kRef;
  auto want = run_op(spec);
  ASSERT_TRUE(want.is_ok()) << want.status().to_string();
  spec.backend = Backend::kCpu;
  for (const std::string& tactic : onednn->tactics) {
    spec.pin = KernelPin{"cpu.onednn.convolution", tactic};
    auto r = OpRunner::build(spec);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(r->kernel(), "cpu.onednn.convolution[" + tactic + "]");
    ASSERT_TRUE(r->run().is_ok());
    auto got = r->outputs();
    ASSERT_TRUE(got.is_ok());
    for (int64_t i = 0; i < (*want)[0].numel(); ++i) EXPECT_NEAR((*got)[0].at(i), (*want)[0].at(i), 1e-4) << tactic;
  }
  spec.pin = KernelPin{"cpu.onednn.convolution", "no-such-tactic"};
  auto bad = OpRunner::build(spec);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(message(bad.status()).find("has no tactic 'no-such-tactic'"), std::string::npos) << message(bad.status());
}

TEST(KernelPin, ARejectingPinFailsTheBuildWithItsReason) {
  // oneDNN's matrix multiply takes float32 only; the own loops take int32.
  auto r = OpRunner::build(matmul(DataType::kInt32, KernelPin{"cpu.onednn.matrix_multiply", ""}));
  ASSERT_FALSE(r.is_ok());
  const std::string m = message(r.status());
  EXPECT_NE(m.find("pinned implementation 'cpu.onednn.matrix_multiply' rejects"), std::string::npos) << m;
  EXPECT_NE(m.find("int32"), std::string::npos) << "the implementation's reason: " << m;
  EXPECT_NE(m.find("'op'"), std::string::npos) << "the node is named: " << m;
  // No fallback: a pinned node does not quietly run elsewhere.
  auto loops = OpRunner::build(matmul(DataType::kInt32, KernelPin{"cpu.matrix_multiply", ""}));
  ASSERT_TRUE(loops.is_ok()) << loops.status().to_string();
  EXPECT_EQ(loops->kernel(), "cpu.matrix_multiply");
}

TEST(KernelPin, UnknownImplementationsAndNodesAreNamed) {
  auto r = OpRunner::build(matmul(DataType::kFloat32, KernelPin{"cpu.no_such_kernel", ""}));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(message(r.status()).find("'cpu.no_such_kernel' is not one of MatrixMultiply"), std::string::npos)
      << message(r.status());
  EXPECT_NE(message(r.status()).find("cpu.matrix_multiply"), std::string::npos) << "lists the known ones";

  Graph g;
  Value* x = g.add_input("x", DataType::kFloat32, {4}).value();
  Node* n = g.add_node("Activation", "relu",
                       std::make_unique<ActivationAttrs>(activation_defaults(ActivationKind::kRelu)), {x})
                .value();
  ASSERT_TRUE(g.mark_output(n->outputs[0]).is_ok());
  BuildOptions options;
  options.passes.enabled = false;
  options.pinned["nowhere"] = KernelPin{"cpu.activation", ""};
  auto built = build_engine(g, options);
  ASSERT_FALSE(built.is_ok());
  EXPECT_NE(message(built.status()).find("node 'nowhere'"), std::string::npos) << message(built.status());
}

// relu over a graph input with a dynamic first dim.
std::unique_ptr<Graph> relu_graph() {
  auto g = std::make_unique<Graph>();
  Value* x = g->add_input("x", DataType::kFloat32, {kDynamicDim, 3}).value();
  Node* n = g->add_node("Activation", "relu",
                        std::make_unique<ActivationAttrs>(activation_defaults(ActivationKind::kRelu)), {x}, {"y"})
                .value();
  EXPECT_TRUE(g->mark_output(n->outputs[0]).is_ok());
  return g;
}

TEST(SetOutput, TheOutputLandsInTheBoundTensor) {
  auto g = relu_graph();
  BuildOptions options;
  auto runner = GraphRunner::compile(*g, options);
  ASSERT_TRUE(runner.is_ok()) << runner.status().to_string();
  Tensor x = filled(DataType::kFloat32, {2, 3}, -2.5, 1);
  Tensor y = filled(DataType::kFloat32, {2, 3}, 99, 0);
  ASSERT_TRUE(runner->set_input("x", x).is_ok());
  ASSERT_TRUE(runner->set_output("y", y).is_ok());
  ASSERT_TRUE(runner->run().is_ok());
  const std::vector<float> want = {0, 0, 0, 0.5f, 1.5f, 2.5f};
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(y.data<float>()[i], want[i]) << i;
  auto out = runner->output("y");
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(out->raw(), y.raw()) << "output() is the bound tensor";
  // A run with another batch no longer fits the bound tensor: an error naming the output, not a write past it.
  Tensor x4 = filled(DataType::kFloat32, {4, 3}, -1, 1);
  ASSERT_TRUE(runner->set_input("x", x4).is_ok());
  Status s = runner->run();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.to_string().find("output 'y' is bound to a tensor of shape [2, 3]"), std::string::npos) << s.to_string();
  // Unbound, the context allocates the output again.
  ASSERT_TRUE(runner->set_output("y", Tensor()).is_ok());
  ASSERT_TRUE(runner->run().is_ok());
  EXPECT_NE(runner->output("y")->raw(), y.raw());
  EXPECT_EQ(runner->output("y")->dims(), (Dims{4, 3}));
}

TEST(SetOutput, WrongTensorsAreRefused) {
  auto g = relu_graph();
  auto runner = GraphRunner::compile(*g, BuildOptions{});
  ASSERT_TRUE(runner.is_ok()) << runner.status().to_string();
  Status dtype = runner->set_output("y", filled(DataType::kInt32, {2, 3}, 0, 0));
  EXPECT_NE(dtype.to_string().find("output 'y' is float32 but the tensor bound to it is int32"), std::string::npos)
      << dtype.to_string();
  Status shape = runner->set_output("y", filled(DataType::kFloat32, {2, 4}, 0, 0));
  EXPECT_NE(shape.to_string().find("output 'y' has shape"), std::string::npos) << shape.to_string();
  Status rank = runner->set_output("y", filled(DataType::kFloat32, {6}, 0, 0));
  EXPECT_FALSE(rank.is_ok());
  Status name = runner->set_output("z", filled(DataType::kFloat32, {2, 3}, 0, 0));
  EXPECT_NE(name.to_string().find("no output 'z' (outputs: y)"), std::string::npos) << name.to_string();
}

TEST(OpRunner, RunsAnOpOnEachBackendAndListsCandidates) {
  const ActivationAttrs relu = activation_defaults(ActivationKind::kRelu);
  OpSpec spec;
  spec.op = "Activation";
  spec.attrs = &relu;
  spec.inputs = {filled(DataType::kFloat32, {5}, -2, 1)};
  for (Backend b : {Backend::kRef, Backend::kCpu}) {
    spec.backend = b;
    auto candidates = OpRunner::candidates(spec, b);
    ASSERT_TRUE(candidates.is_ok());
    ASSERT_FALSE(candidates->accepted.empty()) << backend_name(b);
    for (const auto& c : candidates->accepted) EXPECT_EQ(c.impl->backend, b);
    auto r = OpRunner::build(spec);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(r->kernel(), candidates->accepted.front().impl->name) << "unpinned: the first accepting kernel";
    // Poison in the bound output is overwritten everywhere.
    Tensor poisoned = filled(DataType::kFloat32, {5}, std::nan(""), 0);
    ASSERT_TRUE(r->set_output(0, poisoned).is_ok());
    ASSERT_TRUE(r->run().is_ok());
    auto got = r->outputs();
    ASSERT_TRUE(got.is_ok());
    const std::vector<double> want = {0, 0, 0, 1, 2};
    for (int64_t i = 0; i < 5; ++i) EXPECT_EQ((*got)[0].at(i), want[i]) << backend_name(b) << " " << i;
    auto us = r->time_us(2);
    ASSERT_TRUE(us.is_ok());
    EXPECT_GT(*us, 0);
  }
  spec.op = "NoSuchOp";
  auto unknown = OpRunner::build(spec);
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_NE(unknown.status().to_string().find("no op 'NoSuchOp'"), std::string::npos) << unknown.status().to_string();
}

TEST(OpRunner, ShapeErrorsNameTheNode) {
  OpSpec spec = matmul(DataType::kFloat32);
  spec.inputs[1] = filled(DataType::kFloat32, {5, 4}, 0, 1);
  auto r = run_op(spec);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().to_string().find("'op'"), std::string::npos) << r.status().to_string();
}

}  // namespace
}  // namespace kiln
