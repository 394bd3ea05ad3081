// layout-nhwc: 2-D convolutions and pooling channels-last where the backend hook accepts them, one transpose into NHWC
// where the layout starts and one back where an NCHW value is read, weights permuted at build time.
#include <gtest/gtest.h>

#include "graph_builders.h"
#include "ops/convolution/convolution.h"
#include "ops/pooling/pooling.h"
#include "pass_test_util.h"
#include "runtime/inspector.h"

namespace kiln {
namespace {

using namespace pass_test;

Value* conv(Graph& g, const std::string& name, Value* x, int64_t out_channels, int64_t group = 1) {
  const int64_t in_channels = x->dims[1];
  // Distinct weights per layer (group changes the start), so common-subexpression removal keeps them apart.
  Value* w =
      constant(g, name + ".w",
               ramp({out_channels, in_channels / group, 3, 3}, -0.3f + 0.07f * static_cast<float>(group), 0.013f));
  Value* b = constant(g, name + ".b", ramp({out_channels}, -0.1f, 0.05f));
  auto a = std::make_unique<ConvolutionAttrs>();
  a->pads = {1, 1, 1, 1};
  a->group = group;
  return out(g.add_node("Convolution", name, std::move(a), {x, w, b}));
}

Value* max_pool(Graph& g, const std::string& name, Value* x) {
  auto a = std::make_unique<PoolingAttrs>();
  a->mode = PoolingMode::kMax;
  a->kernel_shape = {3, 3};
  a->strides = {2, 2};
  a->pads = {1, 1, 1, 1};
  return out(g.add_node("Pooling", name, std::move(a), {x}));
}

// x -> conv1 -> relu1 -> pool -> conv2 (group 2) -> add(pool) -> relu2 -> y: after the fusions conv1 + relu1, pool
// and conv2 + add + relu2 (the pool's output its residual).
std::unique_ptr<Graph> conv_pool_net(int64_t in_channels = 4, int64_t group2 = 2) {
  auto g = std::make_unique<Graph>();
  Value* x = *g->add_input("x", DataType::kFloat32, {2, in_channels, 9, 9});
  Value* p = max_pool(*g, "pool", activation(*g, "relu1", conv(*g, "conv1", x, 8), ActivationKind::kRelu));
  Value* sum = binary(*g, "add", ElementWiseOp::kSum, conv(*g, "conv2", p, 8, group2), p);
  Value* y = activation(*g, "relu2", sum, ActivationKind::kRelu);
  EXPECT_TRUE(g->rename_value(y, "y").is_ok());
  EXPECT_TRUE(g->mark_output(y).is_ok());
  return g;
}

PassOptions channels_last(Backend backend) {
  PassOptions o;
  o.backend = backend_hook(backend);
  o.layout.channels_last = true;  // the builder sets it for CUDA only: asked for here
  return o;
}

TEST(LayoutNhwc, ConvPoolConvRunsChannelsLastWithOneTransposeInAndOneOut) {
  auto g = conv_pool_net();
  auto o = g->clone();
  OptimizerReport report;
  ASSERT_TRUE(run_passes(*o, channels_last(Backend::kRef), &report).is_ok());
  EXPECT_EQ(applied_by(report, "layout-nhwc"),
            (std::vector<std::string>{"'conv1 + relu1' (Convolution) runs channels-last",
                                      "'pool' (Pooling) runs channels-last",
                                      "'conv2 + add + relu2' (Convolution) runs channels-last"}));
  ASSERT_TRUE(o->verify().is_ok());
  for (const Node* n : nodes_of(*o, "Convolution")) {
    EXPECT_TRUE(static_cast<const ConvolutionAttrs&>(*n->attrs).channels_last) << n->name;
    EXPECT_TRUE(n->inputs[1]->is_constant()) << n->name;           // weights permuted at build time
    EXPECT_EQ(n->inputs[1]->dims, (Dims{8, 3, 3, 4})) << n->name;  // [M, kH, kW, C/G]
  }
  for (const Node* n : nodes_of(*o, "Pooling")) EXPECT_TRUE(static_cast<const PoolingAttrs&>(*n->attrs).channels_last);
  // One transpose in (from x), one back (to y); the residual is the pooled NHWC value itself.
  const auto shuffles = nodes_of(*o, "Shuffle");
  ASSERT_EQ(shuffles.size(), 2u);
  const Node* in = o->find_value("x")->uses.at(0).node;
  EXPECT_EQ(in->op(), "Shuffle");
  EXPECT_EQ(static_cast<const ShuffleAttrs&>(*in->attrs).first_transpose, (std::vector<int64_t>{0, 2, 3, 1}));
  const Value* y = o->outputs().at(0);
  EXPECT_EQ(y->name, "y");
  EXPECT_EQ(y->dims, (Dims{2, 8, 5, 5}));
  ASSERT_NE(y->producer, nullptr);
  EXPECT_EQ(y->producer->op(), "Shuffle");
  EXPECT_EQ(static_cast<const ShuffleAttrs&>(*y->producer->attrs).first_transpose, (std::vector<int64_t>{0, 3, 1, 2}));
  const Node* conv2 = o->find_node("conv2 + add + relu2");
  ASSERT_NE(conv2, nullptr);
  ASSERT_GT(conv2->inputs.size(), 3u);
  ASSERT_NE(conv2->inputs[3], nullptr);
  EXPECT_EQ(conv2->inputs[3]->producer, o->find_node("pool"));
  EXPECT_EQ(conv2->inputs[0], conv2->inputs[3]);

  // Built and run on the reference backend: the outputs of the unoptimized graph.
  const std::vector<Tensor> inputs = random_inputs(*g);
  PassOptions off;
  off.enabled = false;
  auto plain = build_and_run(*g, inputs, off, Backend::kRef);
  auto nhwc = build_and_run(*g, inputs, channels_last(Backend::kRef), Backend::kRef);
  ASSERT_TRUE(plain.is_ok()) << plain.status().to_string();
  ASSERT_TRUE(nhwc.is_ok()) << nhwc.status().to_string();
  EXPECT_EQ(applied_by(nhwc->report.optimizer, "layout-nhwc").size(), 3u);
  EXPECT_LE(max_difference(nhwc->outputs, plain->outputs), 1e-5);
}

TEST(LayoutNhwc, GlobalPoolThenFlattenReadsTheTransposeBack) {
  auto g = std::make_unique<Graph>();
  Value* x = *g->add_input("x", DataType::kFloat32, {2, 3, 6, 6});
  auto gap = std::make_unique<PoolingAttrs>();
  gap->mode = PoolingMode::kAverage;
  gap->global = true;
  Value* p = out(g->add_node("Pooling", "gap", std::move(gap), {conv(*g, "conv", x, 8)}));
  Value* flat = reshape(*g, "flatten", p, {2, 8});
  ASSERT_TRUE(g->mark_output(flat).is_ok());
  auto o = g->clone();
  OptimizerReport report;
  ASSERT_TRUE(run_passes(*o, channels_last(Backend::kRef), &report).is_ok());
  EXPECT_EQ(applied_by(report, "layout-nhwc").size(), 2u);
  const Node* flatten = o->find_node("flatten");
  ASSERT_NE(flatten, nullptr);
  const Node* back = flatten->inputs[0]->producer;
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(static_cast<const ShuffleAttrs&>(*back->attrs).first_transpose, (std::vector<int64_t>{0, 3, 1, 2}));
  EXPECT_EQ(back->inputs[0]->producer, o->find_node("gap"));
  EXPECT_EQ(nodes_of(*o, "Shuffle").size(), 3u);  // in, back, and the flatten itself
  const std::vector<Tensor> inputs = random_inputs(*g);
  PassOptions off;
  off.enabled = false;
  auto plain = build_and_run(*g, inputs, off, Backend::kRef);
  auto nhwc = build_and_run(*g, inputs, channels_last(Backend::kRef), Backend::kRef);
  ASSERT_TRUE(plain.is_ok()) << plain.status().to_string();
  ASSERT_TRUE(nhwc.is_ok()) << nhwc.status().to_string();
  EXPECT_LE(max_difference(nhwc->outputs, plain->outputs), 1e-5);
}

TEST(LayoutNhwc, TheCpuBuilderRunsFloat32ChannelsLastWhereOneDnnTakesIt) {
  // 8 input channels per group and up: every layer goes NHWC, one transpose in and one out, same outputs.
  auto wide = conv_pool_net(8, 1);
  const std::vector<Tensor> inputs = random_inputs(*wide);
  PassOptions nchw;
  nchw.disabled = {"layout-nhwc"};
  auto plain = build_and_run(*wide, inputs, nchw, Backend::kCpu);
  auto built = build_and_run(*wide, inputs, PassOptions{}, Backend::kCpu);
  ASSERT_TRUE(plain.is_ok()) << plain.status().to_string();
  ASSERT_TRUE(built.is_ok()) << built.status().to_string();
  EXPECT_EQ(applied_by(built->report.optimizer, "layout-nhwc").size(), 3u);
  EXPECT_LE(max_difference(built->outputs, plain->outputs), 1e-5);
  int transposes = 0;
  for (const std::string& choice : built->report.choices) {
    if (choice.find("(Shuffle)") != std::string::npos) ++transposes;
    if (choice.find("(Convolution)") != std::string::npos || choice.find("(Pooling)") != std::string::npos) {
      EXPECT_NE(choice.find("cpu.onednn"), std::string::npos) << choice;  // not the reference fallback
    }
  }
  EXPECT_EQ(transposes, 2);
  // The inspector names the layouts: NHWC activations, KRSC weights ([M, kH, kW, C/group]).
  BuildOptions options;
  options.optimization_level = 0;
  auto bytes = build_engine(*wide, options);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  auto engine = EngineImpl::deserialize(*bytes);
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  const std::string info = layer_info_json(**engine, nullptr);
  EXPECT_NE(info.find("\"Format\": \"NHWC\""), std::string::npos) << info;
  EXPECT_NE(info.find("\"Format\": \"KRSC\""), std::string::npos) << info;

  // Few input channels per group (not depthwise) stay NCHW, and a pooling layer between them does not start an
  // NHWC region of its own: no transposes at all.
  auto g = conv_pool_net();
  auto o = g->clone();
  OptimizerReport report;
  PassOptions cpu = channels_last(Backend::kCpu);
  cpu.layout.pooling_joins_only = true;
  ASSERT_TRUE(run_passes(*o, cpu, &report).is_ok());
  EXPECT_TRUE(applied_by(report, "layout-nhwc").empty());
  const auto refused = refused_by(report, "layout-nhwc");
  ASSERT_EQ(refused.size(), 3u);
  EXPECT_NE(refused[0].find("4 input channels per group"), std::string::npos) << refused[0];
  EXPECT_NE(refused[1].find("does not start a channels-last region"), std::string::npos) << refused[1];
  EXPECT_TRUE(nodes_of(*o, "Shuffle").empty());

  // The CUDA builder's setting: float32 layers stay NCHW.
  auto f = g->clone();
  PassOptions half_only = channels_last(Backend::kRef);
  half_only.layout.reduced_precision_only = true;
  OptimizerReport r2;
  ASSERT_TRUE(run_passes(*f, half_only, &r2).is_ok());
  EXPECT_TRUE(applied_by(r2, "layout-nhwc").empty());
  ASSERT_EQ(refused_by(r2, "layout-nhwc").size(), 3u);
  EXPECT_NE(refused_by(r2, "layout-nhwc")[0].find("float32"), std::string::npos);
}

// ResNet's stem: a convolution with few input channels whose only reader is a max pool that feeds convolutions with
// 8 or more channels per group. On the CPU (pooling joins only) the stem starts the NHWC region all the same, so the
// pool runs channels-last too and the only transposes are the 4-channel input's and the output's.
TEST(LayoutNhwc, AStemBeforeAPoolStartsTheRegionWhenTheConvolutionsAfterItRunChannelsLast) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {2, 4, 12, 12});
  Value* p = max_pool(g, "pool", activation(g, "relu1", conv(g, "stem", x, 16), ActivationKind::kRelu));
  Value* y = conv(g, "conv2", p, 16);
  ASSERT_TRUE(g.rename_value(y, "y").is_ok());
  ASSERT_TRUE(g.mark_output(y).is_ok());
  PassOptions cpu = channels_last(Backend::kCpu);
  cpu.layout.pooling_joins_only = true;
  auto o = g.clone();
  OptimizerReport report;
  ASSERT_TRUE(run_passes(*o, cpu, &report).is_ok());
  EXPECT_EQ(
      applied_by(report, "layout-nhwc"),
      (std::vector<std::string>{"'stem + relu1' (Convolution) runs channels-last",
                                "'pool' (Pooling) runs channels-last", "'conv2' (Convolution) runs channels-last"}));
  EXPECT_EQ(nodes_of(*o, "Shuffle").size(), 2u);

  // A second reader of the pool that stays NCHW (here the graph output itself) keeps the stem NCHW, and the pool
  // then does not start a region of its own.
  Graph g2;
  Value* x2 = *g2.add_input("x", DataType::kFloat32, {2, 4, 12, 12});
  Value* p2 = max_pool(g2, "pool", conv(g2, "stem", x2, 16));
  ASSERT_TRUE(g2.mark_output(conv(g2, "conv2", p2, 16)).is_ok());
  ASSERT_TRUE(g2.mark_output(p2).is_ok());
  OptimizerReport r2;
  ASSERT_TRUE(run_passes(g2, cpu, &r2).is_ok());
  const auto refused = refused_by(r2, "layout-nhwc");
  ASSERT_GE(refused.size(), 2u);
  EXPECT_NE(refused[0].find("or a pooling before convolutions"), std::string::npos) << refused[0];
  EXPECT_NE(refused[1].find("does not start a channels-last region"), std::string::npos) << refused[1];
}

TEST(LayoutNhwc, Float16LayersGoChannelsLastWhenOnlyReducedPrecisionDoes) {
  auto g = conv_pool_net();
  PassOptions o = channels_last(Backend::kRef);
  o.layout.reduced_precision_only = true;
  o.precision.fp16 = true;
  auto c = g->clone();
  OptimizerReport report;
  ASSERT_TRUE(run_passes(*c, o, &report).is_ok());
  EXPECT_EQ(applied_by(report, "layout-nhwc").size(), 3u);
  // Cast and transpose in (x), the layers, transpose back and cast out (y).
  EXPECT_EQ(nodes_of(*c, "Shuffle").size(), 2u);
  EXPECT_EQ(nodes_of(*c, "Cast").size(), 2u);
  const std::vector<Tensor> inputs = random_inputs(*g);
  PassOptions fp16_nchw = o;
  fp16_nchw.disabled = {"layout-nhwc"};
  auto plain = build_and_run(*g, inputs, fp16_nchw, Backend::kRef);
  auto nhwc = build_and_run(*g, inputs, o, Backend::kRef);
  ASSERT_TRUE(plain.is_ok()) << plain.status().to_string();
  ASSERT_TRUE(nhwc.is_ok()) << nhwc.status().to_string();
  EXPECT_LE(max_difference(nhwc->outputs, plain->outputs), 1e-6);  // the same float16 arithmetic in another layout
}

TEST(LayoutNhwc, ChannelsLastIsTwoDimensionalOnly) {
  Graph g;
  Value* x = *g.add_input("x", DataType::kFloat32, {1, 2, 4, 4, 4});
  Value* w = *g.add_constant("w", ramp({3, 2, 3, 3, 3}));
  auto a = std::make_unique<ConvolutionAttrs>();
  a->channels_last = true;
  auto n = g.add_node("Convolution", "conv3d", std::move(a), {x, w});
  ASSERT_FALSE(n.is_ok());
  EXPECT_NE(n.status().to_string().find("conv3d"), std::string::npos) << n.status().to_string();
  EXPECT_NE(n.status().to_string().find("channels_last"), std::string::npos) << n.status().to_string();

  auto p = std::make_unique<PoolingAttrs>();
  p->kernel_shape = {2};
  p->channels_last = true;
  Value* x1 = *g.add_input("x1", DataType::kFloat32, {1, 4, 3});
  auto m = g.add_node("Pooling", "pool1d", std::move(p), {x1});
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().to_string().find("pool1d"), std::string::npos) << m.status().to_string();

  // NHWC shapes: x [N, H, W, C], w [M, kH, kW, C/G] -> y [N, Ho, Wo, M].
  Value* xn = *g.add_input("xn", DataType::kFloat32, {2, 7, 6, 4});
  Value* wn = *g.add_constant("wn", ramp({6, 3, 3, 2}));
  auto c = std::make_unique<ConvolutionAttrs>();
  c->channels_last = true;
  c->group = 2;
  c->strides = {2, 2};
  c->pads = {1, 1, 1, 1};
  auto conv_nhwc = g.add_node("Convolution", "nhwc", std::move(c), {xn, wn});
  ASSERT_TRUE(conv_nhwc.is_ok()) << conv_nhwc.status().to_string();
  EXPECT_EQ((*conv_nhwc)->outputs[0]->dims, (Dims{2, 4, 3, 6}));
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(LayoutNhwc, SmallBatchesStayNchw) {
  auto g = conv_pool_net();  // batch 2
  auto o = g->clone();
  PassOptions options = channels_last(Backend::kRef);
  options.layout.min_batch = 8;
  OptimizerReport report;
  ASSERT_TRUE(run_passes(*o, options, &report).is_ok());
  EXPECT_TRUE(applied_by(report, "layout-nhwc").empty());
  EXPECT_TRUE(nodes_of(*o, "Shuffle").empty());
  options.layout.min_batch = 2;
  auto o2 = g->clone();
  ASSERT_TRUE(run_passes(*o2, options, &report).is_ok());
  EXPECT_EQ(nodes_of(*o2, "Shuffle").size(), 2u);
}

}  // namespace
}  // namespace kiln
