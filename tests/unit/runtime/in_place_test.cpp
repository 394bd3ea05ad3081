// Outputs placed over the input they replace (KernelImpl::in_place_input): a residual convolution's output takes its
// residual's memory where the convolution reads it last, and only there.
#include <gtest/gtest.h>

#include <cmath>

#include "../passes/graph_builders.h"
#include "builder/builder.h"
#include "ops/convolution/convolution.h"
#include "runtime/engine.h"

namespace kiln {
namespace {

using namespace pass_test;

Value* conv(Graph& g, const std::string& name, Value* x, float start) {
  const int64_t c = x->dims[1];
  Value* w = constant(g, name + ".w", ramp({c, c, 3, 3}, start, 0.011f));
  Value* b = constant(g, name + ".b", ramp({c}, -0.1f, 0.05f));
  auto a = std::make_unique<ConvolutionAttrs>();
  a->pads = {1, 1, 1, 1};
  return out(g.add_node("Convolution", name, std::move(a), {x, w, b}));
}

// x -> conv1 = a -> conv2 -> conv3 -> add(a) -> relu -> conv4 -> y (a ResNet block: conv3 + add + relu reads a last);
// with `reuse`, y = conv4 + a, so that a is read after the residual convolution as well.
std::unique_ptr<Graph> residual_net(bool reuse) {
  auto g = std::make_unique<Graph>();
  Value* x = *g->add_input("x", DataType::kFloat32, {1, 8, 10, 10});
  Value* a = conv(*g, "conv1", x, -0.4f);
  Value* b = conv(*g, "conv2", a, -0.3f);
  Value* r = activation(*g, "relu", binary(*g, "add", ElementWiseOp::kSum, conv(*g, "conv3", b, -0.25f), a),
                        ActivationKind::kRelu);
  Value* y = conv(*g, "conv4", r, -0.2f);
  if (reuse) y = binary(*g, "add2", ElementWiseOp::kSum, y, a);
  EXPECT_TRUE(g->rename_value(y, "y").is_ok());
  EXPECT_TRUE(g->mark_output(y).is_ok());
  EXPECT_TRUE(g->infer_shapes().is_ok());
  return g;
}

struct Outcome {
  MemoryReport memory;
  Tensor y;
};

Outcome run(const Graph& g, Backend backend) {
  BuildOptions options;
  options.backend = backend;
  options.optimization_level = 0;                               // the first kernel that accepts each node: no timing
  options.passes.disabled = {"layout-nhwc", "layout-blocked"};  // NCHW throughout: no transposes between
  auto bytes = build_engine(g, options);
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  auto engine = EngineImpl::deserialize(*bytes);
  EXPECT_TRUE(engine.is_ok()) << engine.status().to_string();
  auto ctx = (*engine)->create_execution_context().value();
  EXPECT_TRUE(ctx->set_input("x", ramp({1, 8, 10, 10}, -2.f, 0.037f)).is_ok());
  const Status st = ctx->execute();
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return Outcome{ctx->memory_report().value(), ctx->output("y").value().clone().value()};
}

void expect_near(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.dims(), want.dims());
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-4 + 1e-4 * std::fabs(want.data<float>()[i])) << i;
}

TEST(InPlace, AResidualConvolutionWritesOverTheResidualItReadsLast) {
  auto g = residual_net(false);
  const Outcome cpu = run(*g, Backend::kCpu);
  const Outcome ref = run(*g, Backend::kRef);  // reference kernels never share
  // a, conv2's output and conv3 + add + relu's over a (3200 bytes each): two blocks; conv4's output, y, is the
  // caller's.
  EXPECT_EQ(cpu.memory.planned_values, 3);
  EXPECT_EQ(cpu.memory.in_place_values, 1);
  EXPECT_EQ(cpu.memory.unplanned_bytes, 9600u);
  EXPECT_EQ(cpu.memory.planned_bytes, 6400u);
  EXPECT_EQ(ref.memory.planned_bytes, 9600u);  // without: a, conv2's output and the sum all alive at conv3
  EXPECT_EQ(ref.memory.in_place_values, 0);
  expect_near(cpu.y, ref.y);
}

TEST(InPlace, AResidualReadLaterKeepsItsOwnMemory) {
  auto g = residual_net(true);
  const Outcome cpu = run(*g, Backend::kCpu);
  const Outcome ref = run(*g, Backend::kRef);
  EXPECT_EQ(cpu.memory.in_place_values, 0);
  EXPECT_EQ(cpu.memory.planned_bytes, 9600u);  // a lives on while conv2's output and the sum are made
  expect_near(cpu.y, ref.y);
}

}  // namespace
}  // namespace kiln
