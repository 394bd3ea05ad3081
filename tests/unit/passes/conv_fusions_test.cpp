// The convolution fusions: batchnorm-folding, conv-scale, conv-elementwise-sum, conv-activation. Each has a graph
// where it applies (report line, resulting node, same outputs as unoptimized) and one its restriction forbids.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstring>

#include "onnx/exporter.h"
#include "ops/activation/activation.h"
#include "ops/convolution/convolution.h"
#include "ops/elementwise/elementwise.h"
#include "ops/normalization/normalization.h"
#include "ops/scale/scale.h"
#include "pass_test_util.h"

namespace kiln {
namespace {

using pass_test::applied_by;
using pass_test::expect_same_as_unoptimized;
using pass_test::refused_by;

// Values in [lo, hi), reproducible per `seed`.
Tensor values(Dims dims, unsigned seed, float lo = -1.f, float hi = 1.f) {
  Tensor t = Tensor::empty(DataType::kFloat32, dims).value();
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s = s * 1664525u + 1013904223u;
    t.data<float>()[i] = lo + (hi - lo) * static_cast<float>(s >> 8) / 16777216.f;
  }
  return t;
}

std::unique_ptr<Attrs> conv_attrs(int64_t pad = 1) {
  auto a = std::make_unique<ConvolutionAttrs>();
  a->pads = {pad, pad, pad, pad};
  return a;
}
std::unique_ptr<Attrs> act(ActivationKind kind) { return std::make_unique<ActivationAttrs>(activation_defaults(kind)); }
std::unique_ptr<Attrs> act(ActivationKind kind, float alpha, float beta) {
  ActivationAttrs a = activation_defaults(kind);
  a.alpha = alpha;
  a.beta = beta;
  return std::make_unique<ActivationAttrs>(a);
}
std::unique_ptr<Attrs> ew(ElementWiseOp op) { return std::make_unique<ElementWiseAttrs>(elementwise_attrs(op)); }

// A 3x3 convolution (pad 1) with constant weights [4, 4, 3, 3] and bias [4]; named `name`, output `out`.
Node* add_conv(Graph& g, const std::string& name, Value* x, unsigned seed, std::string out = {}) {
  Value* w = *g.add_constant(name + ".w", values({4, 4, 3, 3}, seed, -0.3f, 0.3f));
  Value* b = *g.add_constant(name + ".b", values({4}, seed + 1));
  return *g.add_node("Convolution", name, conv_attrs(), {x, w, b}, {out.empty() ? name + ":0" : out});
}

void mark(Graph& g, Node* n) { ASSERT_TRUE(g.mark_output(n->outputs[0]).is_ok()); }

// Runs the optimizer with the CPU backend's hook on `g` (in place) and returns what it did.
OptimizerReport optimize(Graph& g, Backend backend = Backend::kCpu) {
  PassOptions options;
  options.backend = backend_hook(backend);
  OptimizerReport report;
  Status st = run_passes(g, options, &report);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  return report;
}

const ConvolutionAttrs& attrs_of(const Node* n) { return static_cast<const ConvolutionAttrs&>(*n->attrs); }

bool contains(const std::vector<std::string>& lines, const std::string& part) {
  for (const std::string& l : lines)
    if (l.find(part) != std::string::npos) return true;
  return false;
}
std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

// ---------------------------------------------------------------------------------------------
// batchnorm-folding

Node* add_bn(Graph& g, const std::string& name, Value* x, std::string out, Value* mean = nullptr) {
  Value* scale = *g.add_constant(name + ".scale", values({4}, 11, 0.5f, 1.5f));
  Value* bias = *g.add_constant(name + ".bias", values({4}, 12));
  if (!mean) mean = *g.add_constant(name + ".mean", values({4}, 13));
  Value* var = *g.add_constant(name + ".var", values({4}, 14, 0.2f, 2.f));
  auto a = std::make_unique<BatchNormalizationAttrs>();
  a->epsilon = 1e-3f;
  return *g.add_node("BatchNormalization", name, std::move(a), {x, scale, bias, mean, var}, {out});
}

TEST(ConvFusions, BatchNormFoldsIntoTheConvolution) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {1, 4, 6, 6});
  Node* conv = add_conv(g, "conv1", x, 1);
  mark(g, add_bn(g, "bn1", conv->outputs[0], "y"));
  // A second convolution reads the same weights: it keeps them.
  Node* other = *g.add_node("Convolution", "conv2", conv_attrs(), {x, conv->inputs[1]}, {"z"});
  mark(g, other);
  // A convolution without a bias gets one.
  Node* no_bias =
      *g.add_node("Convolution", "conv3", conv_attrs(), {x, *g.add_constant("w3", values({4, 4, 3, 3}, 5))});
  mark(g, add_bn(g, "bn3", no_bias->outputs[0], "v"));
  const Tensor before = g.find_value("conv1.w")->constant.clone().value();

  pass_test::Built built = expect_same_as_unoptimized(g, 1e-5);
  EXPECT_EQ(applied_by(built.report.optimizer, "batchnorm-folding"),
            (std::vector<std::string>{"folded 'conv1' + 'bn1' into 'conv1 + bn1' (new weights and bias)",
                                      "folded 'conv3' + 'bn3' into 'conv3 + bn3' (new weights and bias)"}));

  optimize(g);
  Node* fused = g.find_node("conv1 + bn1");
  ASSERT_NE(fused, nullptr) << g.to_text();
  EXPECT_EQ(fused->op(), "Convolution");
  EXPECT_EQ(fused->outputs[0]->name, "y");
  EXPECT_NE(fused->inputs[1]->name, "conv1.w");
  EXPECT_EQ(g.find_node("conv2")->inputs[1]->name, "conv1.w");
  ASSERT_NE(g.find_node("conv3 + bn3"), nullptr);
  EXPECT_NE(g.find_node("conv3 + bn3")->inputs.at(2), nullptr);
  const Tensor& w = g.find_value("conv1.w")->constant;
  EXPECT_EQ(std::memcmp(w.raw(), before.raw(), w.nbytes()), 0);  // never changed in place
}

TEST(ConvFusions, BatchNormWithRunTimeMeanOrASharedConvOutputIsRefused) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {1, 4, 6, 6});
  Value* mean = *g.add_input("mean", DataType::kFloat32, {4});
  Node* conv = add_conv(g, "conv1", x, 1);
  mark(g, add_bn(g, "bn1", conv->outputs[0], "y", mean));
  Node* conv2 = add_conv(g, "conv2", x, 2);
  mark(g, add_bn(g, "bn2", conv2->outputs[0], "z"));
  mark(g, *g.add_node("Activation", "tap", act(ActivationKind::kTanh), {conv2->outputs[0]}, {"t"}));

  OptimizerReport report = optimize(g);
  EXPECT_TRUE(applied_by(report, "batchnorm-folding").empty());
  const auto refused = refused_by(report, "batchnorm-folding");
  EXPECT_TRUE(contains(refused, "folding 'conv1' + 'bn1': its mean 'mean' is not constant")) << joined(refused);
  EXPECT_TRUE(contains(refused, "folding 'conv2' + 'bn2': 'conv2:0' is also read by 'tap'")) << joined(refused);
  EXPECT_NE(g.find_node("bn1"), nullptr);
  EXPECT_NE(g.find_node("bn2"), nullptr);
}

// ---------------------------------------------------------------------------------------------
// conv-scale

std::unique_ptr<Attrs> scale_attrs(ScaleMode mode, int64_t axis = 1) {
  auto a = std::make_unique<ScaleAttrs>();
  a->mode = mode;
  a->channel_axis = axis;
  return a;
}

TEST(ConvFusions, ScaleAndPerChannelConstantsFoldIntoTheConvolution) {
  // conv -> Scale(channel: shift, scale, power 1) -> * [4, 1, 1] -> [1, 4, 1, 1] + . -> * scalar -> y
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {2, 4, 5, 5});
  Node* conv = add_conv(g, "conv", x, 3);
  Value* shift = *g.add_constant("shift", values({4}, 21));
  Value* scale = *g.add_constant("scale", values({4}, 22, 0.5f, 2.f));
  Value* power = *g.add_constant("power", values({4}, 23, 1.f, 1.f));
  Node* sc = *g.add_node("Scale", "sc", scale_attrs(ScaleMode::kChannel), {conv->outputs[0], shift, scale, power});
  Node* mul = *g.add_node("ElementWise", "mul", ew(ElementWiseOp::kProd),
                          {sc->outputs[0], *g.add_constant("m", values({4, 1, 1}, 24))});
  Node* add = *g.add_node("ElementWise", "add", ew(ElementWiseOp::kSum),
                          {*g.add_constant("a", values({1, 4, 1, 1}, 25)), mul->outputs[0]});
  Node* last = *g.add_node("ElementWise", "twice", ew(ElementWiseOp::kProd),
                           {add->outputs[0], *g.add_constant("two", values({}, 26, 2.f, 2.f))}, {"y"});
  mark(g, last);

  pass_test::Built built = expect_same_as_unoptimized(g, 1e-5);
  EXPECT_EQ(applied_by(built.report.optimizer, "conv-scale"),
            (std::vector<std::string>{
                "folded 'conv' + 'sc' into 'conv + sc' (new weights and bias)",
                "folded 'conv + sc' + 'mul' into 'conv + sc + mul' (new weights and bias)",
                "folded 'conv + sc + mul' + 'add' into 'conv + sc + mul + add' (new weights and bias)",
                "folded 'conv + sc + mul + add' + 'twice' into 'conv + sc + mul + add + twice' (new weights and bias)",
            }));
  optimize(g);
  ASSERT_EQ(g.nodes().size(), 1u) << g.to_text();
  EXPECT_EQ(g.nodes()[0]->op(), "Convolution");
  EXPECT_EQ(g.nodes()[0]->outputs[0]->name, "y");
}

TEST(ConvFusions, AScaleWithAFusedActivationMovesItIntoTheEpilogue) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {1, 4, 5, 5});
  Node* conv = add_conv(g, "conv", x, 27);
  auto a = std::make_unique<ScaleAttrs>();
  a->mode = ScaleMode::kChannel;
  a->fused = FusedActivation::from(activation_defaults(ActivationKind::kRelu));
  mark(g, *g.add_node(
              "Scale", "sc + relu", std::move(a),
              {conv->outputs[0], *g.add_constant("shift", values({4}, 28)), *g.add_constant("scale", values({4}, 29))},
              {"y"}));
  pass_test::Built built = expect_same_as_unoptimized(g, 1e-5);
  EXPECT_EQ(applied_by(built.report.optimizer, "conv-scale"),
            std::vector<std::string>{
                "folded 'conv' + 'sc + relu' into 'conv + sc + relu' (new weights and bias, relu epilogue)"});
  optimize(g);
  ASSERT_EQ(g.nodes().size(), 1u) << g.to_text();
  EXPECT_TRUE(attrs_of(g.nodes()[0]).fused.on);
  EXPECT_EQ(attrs_of(g.nodes()[0]).fused.kind, ActivationKind::kRelu);
}

TEST(ConvFusions, ScaleWithRunTimePowerOrNonChannelConstantsIsRefused) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {1, 4, 5, 5});
  Value* power = *g.add_input("power", DataType::kFloat32, {1});
  Node* c1 = add_conv(g, "c1", x, 4);
  mark(g, *g.add_node("Scale", "pow", scale_attrs(ScaleMode::kUniform), {c1->outputs[0], nullptr, nullptr, power},
                      {"y1"}));
  Node* c2 = add_conv(g, "c2", x, 5);
  mark(g, *g.add_node("ElementWise", "plane", ew(ElementWiseOp::kProd),
                      {c2->outputs[0], *g.add_constant("p", values({1, 1, 5, 5}, 31))}, {"y2"}));
  Node* c3 = add_conv(g, "c3", x, 6);
  mark(g, *g.add_node("Scale", "rows", scale_attrs(ScaleMode::kChannel, 2),
                      {c3->outputs[0], *g.add_constant("s", values({5}, 32))}, {"y3"}));
  Node* c4 = add_conv(g, "c4", x, 7);
  mark(g, *g.add_node("Scale", "each", scale_attrs(ScaleMode::kElementwise, 1),
                      {c4->outputs[0], *g.add_constant("e", values({4, 5, 5}, 33))}, {"y4"}));

  // (A random power makes NaNs of negative bases: compared by the report and the unchanged nodes only.)
  OptimizerReport report = optimize(g);
  const auto refused = refused_by(report, "conv-scale");
  EXPECT_TRUE(applied_by(report, "conv-scale").empty());
  EXPECT_EQ(g.nodes().size(), 8u) << g.to_text();
  EXPECT_TRUE(contains(refused, "folding 'c1' + 'pow': its power 'power' is not constant")) << joined(refused);
  EXPECT_TRUE(contains(refused, "folding 'c2' + 'plane': the constant 'p' of shape [1, 1, 5, 5] is not per channel"))
      << joined(refused);
  EXPECT_TRUE(contains(refused, "folding 'c3' + 'rows': it scales along axis 2")) << joined(refused);
  EXPECT_TRUE(contains(refused, "folding 'c4' + 'each': its coefficients are per element")) << joined(refused);
}

// ---------------------------------------------------------------------------------------------
// conv-elementwise-sum

TEST(ConvFusions, SumBecomesTheResidualInEitherOrder) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {2, 4, 6, 6});
  Node* a = add_conv(g, "a", x, 8);
  mark(g, *g.add_node("ElementWise", "add_a", ew(ElementWiseOp::kSum), {a->outputs[0], x}, {"ya"}));
  Node* b = add_conv(g, "b", x, 9);
  mark(g, *g.add_node("ElementWise", "add_b", ew(ElementWiseOp::kSum), {x, b->outputs[0]}, {"yb"}));

  pass_test::Built built = expect_same_as_unoptimized(g, 1e-5, {"conv-activation"});
  EXPECT_EQ(applied_by(built.report.optimizer, "conv-elementwise-sum"),
            (std::vector<std::string>{"fused 'a' + 'add_a' into 'a + add_a' (the sum is its residual input)",
                                      "fused 'b' + 'add_b' into 'b + add_b' (the sum is its residual input)"}));
  optimize(g);
  for (const char* name : {"a + add_a", "b + add_b"}) {
    Node* n = g.find_node(name);
    ASSERT_NE(n, nullptr) << g.to_text();
    ASSERT_EQ(n->inputs.size(), 4u);
    EXPECT_EQ(n->inputs[3], x);
    EXPECT_FALSE(attrs_of(n).fused.on);
  }
}

TEST(ConvFusions, SumThatWouldBroadcastIsRefused) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {2, 4, 6, 6});
  Value* per_channel = *g.add_input("c", DataType::kFloat32, {1, 4, 1, 1});
  Value* one_image = *g.add_input("i", DataType::kFloat32, {1, 4, 6, 6});
  Node* a = add_conv(g, "a", x, 10);
  mark(g, *g.add_node("ElementWise", "add_c", ew(ElementWiseOp::kSum), {a->outputs[0], per_channel}, {"ya"}));
  Node* b = add_conv(g, "b", x, 11);
  mark(g, *g.add_node("ElementWise", "add_i", ew(ElementWiseOp::kSum), {one_image, b->outputs[0]}, {"yb"}));

  pass_test::Built built = expect_same_as_unoptimized(g, 1e-5);
  const auto refused = refused_by(built.report.optimizer, "conv-elementwise-sum");
  EXPECT_TRUE(applied_by(built.report.optimizer, "conv-elementwise-sum").empty());
  EXPECT_TRUE(contains(refused, "fusing 'a' + 'add_c': the other operand 'c' of shape [1, 4, 1, 1] would broadcast"))
      << joined(refused);
  EXPECT_TRUE(contains(refused, "fusing 'b' + 'add_i': the other operand 'i' of shape [1, 4, 6, 6] would broadcast"))
      << joined(refused);
}

// ---------------------------------------------------------------------------------------------
// conv-activation

TEST(ConvFusions, ActivationsBecomeTheEpilogue) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {1, 4, 6, 6});
  struct Case {
    const char* name;
    ActivationKind kind;
    float alpha, beta;
  };
  const Case cases[] = {{"relu", ActivationKind::kRelu, 0.f, 0.f},
                        {"relu6", ActivationKind::kClip, 0.f, 6.f},
                        {"sigmoid", ActivationKind::kSigmoid, 0.f, 0.f},
                        {"silu", ActivationKind::kSilu, 1.f, 0.f}};
  unsigned seed = 40;
  for (const Case& c : cases) {
    Node* conv = add_conv(g, str_cat("conv_", c.name), x, seed++);
    mark(g,
         *g.add_node("Activation", c.name, act(c.kind, c.alpha, c.beta), {conv->outputs[0]}, {str_cat("y_", c.name)}));
  }
  pass_test::Built built = expect_same_as_unoptimized(g, 1e-5);
  const auto applied = applied_by(built.report.optimizer, "conv-activation");
  ASSERT_EQ(applied.size(), 4u) << joined(applied);
  EXPECT_EQ(applied[1], "fused 'conv_relu6' + 'relu6' into 'conv_relu6 + relu6' (clip epilogue)");
  optimize(g);
  for (const Case& c : cases) {
    Node* n = g.find_node(str_cat("conv_", c.name, " + ", c.name));
    ASSERT_NE(n, nullptr) << g.to_text();
    EXPECT_EQ(n->outputs[0]->name, str_cat("y_", c.name));
    const FusedActivation& f = attrs_of(n).fused;
    EXPECT_TRUE(f.on);
    EXPECT_EQ(f.kind, c.kind);
    EXPECT_EQ(f.alpha, c.alpha);
    EXPECT_EQ(f.beta, c.beta);
  }
}

// ResNet's block: conv + add + relu becomes one layer, on the CPU and on the reference backend.
TEST(ConvFusions, ConvAddReluIsOneLayer) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {1, 4, 6, 6});
  Node* conv = add_conv(g, "conv", x, 50);
  Node* add = *g.add_node("ElementWise", "add", ew(ElementWiseOp::kSum), {conv->outputs[0], x});
  mark(g, *g.add_node("Activation", "relu", act(ActivationKind::kRelu), {add->outputs[0]}, {"y"}));
  for (Backend backend : {Backend::kCpu, Backend::kRef}) {
    pass_test::Built built = expect_same_as_unoptimized(g, 1e-5, {}, backend);
    EXPECT_EQ(applied_by(built.report.optimizer, "conv-activation"),
              std::vector<std::string>{"fused 'conv + add' + 'relu' into 'conv + add + relu' (relu epilogue)"});
    EXPECT_EQ(built.report.optimizer.nodes_after, 1u);
  }
  optimize(g);
  ASSERT_EQ(g.nodes().size(), 1u);
  Node* n = g.nodes()[0];
  EXPECT_EQ(n->name, "conv + add + relu");
  EXPECT_EQ(n->inputs.at(3), x);
  EXPECT_TRUE(attrs_of(n).fused.on);
}

TEST(ConvFusions, PreluSharedOutputsAndKindsWithoutAPostOpAreRefused) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {1, 4, 6, 6});
  Node* c1 = add_conv(g, "c1", x, 60);
  Value* slope = *g.add_constant("slope", values({4, 1, 1}, 61));
  mark(g, *g.add_node("Activation", "prelu", act(ActivationKind::kPRelu), {c1->outputs[0], slope}, {"y1"}));
  Node* c2 = add_conv(g, "c2", x, 62);
  mark(g, *g.add_node("Activation", "softsign", act(ActivationKind::kSoftsign), {c2->outputs[0]}, {"y2"}));
  Node* c3 = add_conv(g, "c3", x, 63);
  mark(g, *g.add_node("Activation", "relu", act(ActivationKind::kRelu), {c3->outputs[0]}, {"y3"}));
  mark(g, c3);

  pass_test::Built built = expect_same_as_unoptimized(g, 1e-5);
  const auto refused = refused_by(built.report.optimizer, "conv-activation");
  EXPECT_TRUE(applied_by(built.report.optimizer, "conv-activation").empty());
  EXPECT_TRUE(contains(refused, "fusing 'c1' + 'prelu': PReLU takes its slope as an input")) << joined(refused);
  EXPECT_TRUE(contains(refused, "fusing 'c2' + 'softsign':")) << joined(refused);
  EXPECT_TRUE(contains(refused, "oneDNN has no eltwise post-op for a fused softsign")) << joined(refused);
  EXPECT_TRUE(contains(refused, "fusing 'c3' + 'relu': 'c3:0' is a graph output")) << joined(refused);
}

TEST(ConvFusions, OnnxExportRefusesAnEpilogue) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {1, 4, 6, 6});
  Node* conv = add_conv(g, "conv", x, 70);
  mark(g, *g.add_node("Activation", "relu", act(ActivationKind::kRelu), {conv->outputs[0]}, {"y"}));
  optimize(g);
  ASSERT_EQ(g.nodes().size(), 1u);
  onnx::GraphProto proto;
  Status st = onnx_export::export_graph(g, proto);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("Convolution 'conv + relu' has an epilogue (a fused activation)"), std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace kiln
