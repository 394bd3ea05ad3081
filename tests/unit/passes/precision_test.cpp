// The precision pass: layers run in bfloat16 / float16 where allowed and a kernel exists, casts only at precision
// boundaries, weights cast at build time, softmax kept in float32, pins obeyed, fallbacks said.
#include <gtest/gtest.h>

#include "graph_builders.h"
#include "kiln/builder.h"
#include "ops/convolution/convolution.h"
#include "ops/normalization/normalization.h"
#include "ops/softmax/softmax.h"
#include "pass_test_util.h"

namespace kiln {
namespace {

using namespace pass_test;

Value* conv(Graph& g, const std::string& name, Value* x, int64_t out_channels) {
  const int64_t in_channels = x->dims[1];
  Value* w = constant(g, name + ".w", ramp({out_channels, in_channels, 3, 3}, -0.3f, 0.01f));
  Value* b = constant(g, name + ".b", ramp({out_channels}, -0.1f, 0.05f));
  auto a = std::make_unique<ConvolutionAttrs>();
  a->pads = {1, 1, 1, 1};
  return out(g.add_node("Convolution", name, std::move(a), {x, w, b}));
}

// x -> conv1 -> relu1 -> conv2 -> softmax -> y
std::unique_ptr<Graph> conv_net() {
  auto g = std::make_unique<Graph>();
  Value* x = *g->add_input("x", DataType::kFloat32, {1, 3, 6, 6});
  Value* c2 = conv(*g, "conv2", activation(*g, "relu1", conv(*g, "conv1", x, 4), ActivationKind::kRelu), 4);
  auto sm = std::make_unique<SoftmaxAttrs>();
  sm->axis = 1;
  EXPECT_TRUE(g->mark_output(out(g->add_node("Softmax", "softmax", std::move(sm), {c2}, {"y"}))).is_ok());
  return g;
}

std::unique_ptr<Graph> optimized(const Graph& g, PrecisionOptions precision, Backend backend, OptimizerReport& r) {
  auto c = g.clone();
  PassOptions options;
  options.backend = backend_hook(backend);
  options.precision = std::move(precision);
  options.disabled = {"conv-activation"};  // relu1 stays a layer of its own: a follower of conv1's precision
  EXPECT_TRUE(run_passes(*c, options, &r).is_ok());
  return c;
}

// The largest difference between `g` built and run on the reference backend with precisions `p` and in float32
// (infinity when a build fails).
double difference_from_float32(const Graph& g, const PrecisionOptions& p) {
  const std::vector<Tensor> inputs = random_inputs(g);
  PassOptions on;
  on.precision = p;
  auto low = build_and_run(g, inputs, on, Backend::kRef);
  auto full = build_and_run(g, inputs, PassOptions{}, Backend::kRef);
  EXPECT_TRUE(low.is_ok()) << low.status().to_string();
  EXPECT_TRUE(full.is_ok()) << full.status().to_string();
  return low.is_ok() && full.is_ok() ? max_difference(low->outputs, full->outputs) : INFINITY;
}

int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node* node : g.nodes()) n += node->op() == op;
  return n;
}

TEST(Precision, Bfloat16WhereKernelsExistWithCastsOnlyAtBoundaries) {
  auto g = conv_net();
  PrecisionOptions p;
  p.bf16 = true;
  OptimizerReport report;
  auto o = optimized(*g, p, Backend::kRef, report);
  EXPECT_EQ(applied_by(report, "precision"),
            (std::vector<std::string>{"'conv1' (Convolution) runs in bfloat16", "'relu1' (Activation) runs in bfloat16",
                                      "'conv2' (Convolution) runs in bfloat16"}));
  EXPECT_EQ(refused_by(report, "precision"),
            std::vector<std::string>{"lowering 'softmax' (Softmax): softmax, norms and reductions stay in float32"});
  // One cast in (x), one out (before the softmax); the weights were cast at build time.
  EXPECT_EQ(count_op(*o, "Cast"), 2);
  EXPECT_EQ(o->find_node("conv1")->inputs[1]->dtype, DataType::kBFloat16);
  EXPECT_TRUE(o->find_node("conv1")->inputs[1]->is_constant());
  EXPECT_EQ(o->find_node("softmax")->inputs[0]->dtype, DataType::kFloat32);
  EXPECT_EQ(o->outputs()[0]->name, "y");
  EXPECT_EQ(o->outputs()[0]->dtype, DataType::kFloat32);

  // Within bfloat16's precision of the float32 network, built and run end to end.
  const double diff = difference_from_float32(*g, p);
  EXPECT_LE(diff, 3e-2);
  EXPECT_GT(diff, 0.0);  // it did run in another precision
}

// x -> conv1 -> layer_norm (over the last axis, float32 scale and bias) -> conv2
std::unique_ptr<Graph> conv_layer_norm_net() {
  auto g = std::make_unique<Graph>();
  Value* x = *g->add_input("x", DataType::kFloat32, {1, 3, 6, 6});
  Value* c1 = conv(*g, "conv1", x, 4);
  Value* scale = constant(*g, "ln.scale", ramp({6}, 0.5f, 0.1f));
  Value* bias = constant(*g, "ln.bias", ramp({6}, -0.2f, 0.05f));
  auto ln = std::make_unique<LayerNormalizationAttrs>();
  ln->axis = -1;
  Value* n = out(g->add_node("LayerNormalization", "layer_norm", std::move(ln), {c1, scale, bias}));
  EXPECT_TRUE(g->mark_output(conv(*g, "conv2", n, 4)).is_ok());
  return g;
}

TEST(Precision, LayerNormFollowsItsInputWithFloat32Parameters) {
  auto g = conv_layer_norm_net();
  PrecisionOptions p;
  p.bf16 = true;
  OptimizerReport report;
  auto o = optimized(*g, p, Backend::kRef, report);
  const auto applied = applied_by(report, "precision");
  EXPECT_NE(std::find(applied.begin(), applied.end(), "'layer_norm' (LayerNormalization) runs in bfloat16"),
            applied.end());
  const Node* ln = o->find_node("layer_norm");
  ASSERT_NE(ln, nullptr);
  // No cast around it: conv1's bfloat16 output in, bfloat16 out to conv2; scale and bias stay float32.
  EXPECT_EQ(ln->inputs[0]->producer->name, "conv1");
  EXPECT_EQ(ln->outputs[0]->dtype, DataType::kBFloat16);
  EXPECT_EQ(ln->inputs[1]->dtype, DataType::kFloat32);
  EXPECT_EQ(ln->inputs[2]->dtype, DataType::kFloat32);
  EXPECT_EQ(count_op(*o, "Cast"), 2);  // x in, y out

  const double diff = difference_from_float32(*g, p);
  EXPECT_LE(diff, 5e-2);
  EXPECT_GT(diff, 0.0);
}

TEST(Precision, LayersWithoutAKernelStayFloat32AndSayWhy) {
  auto g = conv_net();
  PrecisionOptions p;
  p.fp16 = true;
  OptimizerReport report;
  // The CPU backend has no float16 convolution: every layer stays float32, the build does not fail.
  auto o = optimized(*g, p, Backend::kCpu, report);
  EXPECT_TRUE(applied_by(report, "precision").empty());
  const auto refused = refused_by(report, "precision");
  ASSERT_GE(refused.size(), 2u);
  EXPECT_NE(refused[0].find("lowering 'conv1' (Convolution): it runs in float32 (float16: no cpu kernel"),
            std::string::npos)
      << refused[0];
  EXPECT_EQ(count_op(*o, "Cast"), 0);
  PassOptions on;
  on.precision = p;
  auto built = build_and_run(*g, random_inputs(*g), on, Backend::kCpu);
  ASSERT_TRUE(built.is_ok()) << built.status().to_string();
}

TEST(Precision, PinnedLayersStayAsPinned) {
  auto g = conv_net();
  PrecisionOptions p;  // no flags: only the pins count
  p.pinned = {{"conv2", DataType::kFloat16}, {"conv1", DataType::kFloat32}, {"nonexistent", DataType::kFloat16}};
  OptimizerReport report;
  auto o = optimized(*g, p, Backend::kCpu, report);
  EXPECT_EQ(applied_by(report, "precision"),
            std::vector<std::string>{"'conv2' (Convolution) runs in float16 as pinned"});
  EXPECT_EQ(refused_by(report, "precision"),
            std::vector<std::string>{"pinning 'nonexistent' to float16: the network has no such layer"});
  EXPECT_EQ(o->find_node("conv2")->outputs[0]->dtype, DataType::kFloat16);
  EXPECT_EQ(o->find_node("conv1")->outputs[0]->dtype, DataType::kFloat32);
  // No CPU float16 convolution: the builder runs the pinned layer on the reference kernel, with a warning.
  PassOptions on;
  on.precision = p;
  const std::vector<Tensor> inputs = random_inputs(*g);
  auto built = build_and_run(*g, inputs, on, Backend::kCpu);
  ASSERT_TRUE(built.is_ok()) << built.status().to_string();
  bool warned = false;
  for (const std::string& w : built->report.warnings) warned = warned || w.find("'conv2'") != std::string::npos;
  EXPECT_TRUE(warned);
  auto full = build_and_run(*g, inputs, PassOptions{}, Backend::kCpu);
  ASSERT_TRUE(full.is_ok());
  EXPECT_LE(max_difference(built->outputs, full->outputs), 1e-2);
}

TEST(Precision, BuilderConfigChecksLayerPrecisions) {
  BuilderConfig config;
  EXPECT_TRUE(config.set_layer_precision("conv1", DataType::kBFloat16).is_ok());
  Status bad = config.set_layer_precision("conv1", DataType::kInt8);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.message().find("float32, float16 or bfloat16"), std::string::npos) << bad.message();
  EXPECT_FALSE(config.set_layer_precision("", DataType::kFloat16).is_ok());
  EXPECT_EQ(config.layer_precisions().at("conv1"), DataType::kBFloat16);
}

}  // namespace
}  // namespace kiln
