// The standard classifiers: each builds, one training step runs through autograd on the CPU backend with every
// gradient finite, and the evaluation graph exports to ONNX and imports back with the same outputs.
#include <gtest/gtest.h>

#include <cmath>

#include "onnx/exporter.h"
#include "onnx/importer.h"
#include "ops/loss/loss.h"
#include "runner/graph_runner.h"
#include "train/autograd.h"
#include "train/trainer.h"

namespace kiln::train {
namespace {

Tensor random_images(Dims dims, uint64_t seed) {
  Tensor t = Tensor::empty(DataType::kFloat32, dims).value();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

void check_model(const std::string& name, ImageShape shape, int64_t batch) {
  SCOPED_TRACE(name);
  TrainConfig::Model m;
  m.name = name;
  auto model = make_model(m, shape, 10);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  ParameterStore store(7);
  const Dims image_dims{batch, shape.channels, shape.height, shape.width};
  Tensor images = random_images(image_dims, 1);
  Tensor labels = Tensor::empty(DataType::kInt64, Dims{batch}).value();
  for (int64_t i = 0; i < batch; ++i) labels.data<int64_t>()[i] = (i * 3) % 10;

  // Training: loss and gradients.
  Graph g;
  ModuleContext ctx(g, store, Mode::kTrain);
  Value* x = g.add_input("image", DataType::kFloat32, image_dims).value();
  Value* y = g.add_input("label", DataType::kInt64, Dims{batch}).value();
  auto logits = (*model)->forward(ctx, x);
  ASSERT_TRUE(logits.is_ok()) << logits.status().to_string();
  ASSERT_EQ((*logits)->dims, (Dims{batch, 10}));
  ASSERT_TRUE(g.add_node("CrossEntropyLoss", "loss", std::make_unique<CrossEntropyLossAttrs>(), {*logits, y}, {"loss"})
                  .is_ok());
  AutogradOptions options;
  options.params = ctx.param_names();
  options.state = ctx.buffer_names();
  auto tg = build_training_graph(g, "loss", options);
  ASSERT_TRUE(tg.is_ok()) << tg.status().to_string();
  BuildOptions build;
  build.optimization_level = 0;
  auto runner = GraphRunner::compile(*tg->graph, build);
  ASSERT_TRUE(runner.is_ok()) << runner.status().to_string();
  ASSERT_TRUE(runner->set_input("image", images).is_ok());
  ASSERT_TRUE(runner->set_input("label", labels).is_ok());
  for (const auto& [pname, entry] : store.entries()) ASSERT_TRUE(runner->set_input(pname, entry.value).is_ok());
  if (tg->graph->find_value(std::string(kStepInput))) {
    Tensor step = Tensor::zeros(DataType::kInt64, Dims{}).value();
    ASSERT_TRUE(runner->set_input(std::string(kStepInput), step).is_ok());
  }
  ASSERT_TRUE(runner->run().is_ok());
  const double loss = runner->output("loss")->at(0);
  EXPECT_TRUE(std::isfinite(loss) && loss > 0) << loss;
  double norm = 0;
  for (const std::string& grad : tg->grads) {
    Tensor t = *runner->output(grad);
    for (int64_t i = 0; i < t.numel(); ++i) {
      ASSERT_TRUE(std::isfinite(t.at(i))) << grad;
      norm += t.at(i) * t.at(i);
    }
  }
  EXPECT_GT(norm, 0);
  EXPECT_EQ(tg->params.size(), store.names(true).size());

  // Evaluation: export, import, same outputs.
  Graph eg;
  ModuleContext ectx(eg, store, Mode::kEval, true);
  Value* ex = eg.add_input("image", DataType::kFloat32, image_dims).value();
  auto elogits = (*model)->forward(ectx, ex);
  ASSERT_TRUE(elogits.is_ok());
  ASSERT_TRUE(eg.rename_value(*elogits, "logits").is_ok());
  ASSERT_TRUE(eg.mark_output(*elogits).is_ok());
  auto bytes = onnx_export::export_model(eg);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  auto back = onnx_import::import_bytes(*bytes, ".", name + ".onnx");
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  auto a = GraphRunner::compile(eg, build), b = GraphRunner::compile(*back->graph, build);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  for (GraphRunner* r : {&*a, &*b}) {
    ASSERT_TRUE(r->set_input("image", images).is_ok());
    ASSERT_TRUE(r->run().is_ok());
  }
  Tensor want = *a->output("logits"), got = *b->output("logits");
  for (int64_t i = 0; i < want.numel(); ++i) EXPECT_NEAR(got.at(i), want.at(i), 1e-4 * (1 + std::fabs(want.at(i))));
}

TEST(Models, FashionCnnAndLeNet) {
  check_model("fashion_cnn", {28, 28, 1}, 4);
  check_model("lenet", {28, 28, 1}, 4);
}

TEST(Models, ResNet18WithBatchNormAndResiduals) { check_model("resnet18", {32, 32, 3}, 2); }

TEST(Models, GoogLeNetWithInceptionBranches) { check_model("googlenet", {32, 32, 3}, 2); }

TEST(Models, NoGradRegionFreezesItsParametersAndStopsTheBackward) {
  // A frozen feature extractor (conv + batch norm) under a trained head.
  auto features = std::make_shared<Sequential>();
  features->add(conv2d(1, 4, 3, 1, 1), "conv").add(batch_norm2d(4), "bn").add(relu(), "relu");
  auto model = std::make_shared<Sequential>();
  model->add(no_grad(features), "features").add(flatten(), "flatten").add(linear(4 * 8 * 8, 10), "head");
  ParameterStore store(3);
  Graph g;
  ModuleContext ctx(g, store, Mode::kTrain);
  Value* x = g.add_input("image", DataType::kFloat32, Dims{2, 1, 8, 8}).value();
  Value* y = g.add_input("label", DataType::kInt64, Dims{2}).value();
  auto logits = model->forward(ctx, x);
  ASSERT_TRUE(logits.is_ok()) << logits.status().to_string();
  ASSERT_TRUE(g.add_node("CrossEntropyLoss", "loss", std::make_unique<CrossEntropyLossAttrs>(), {*logits, y}, {"loss"})
                  .is_ok());
  EXPECT_EQ(ctx.param_names(), (std::vector<std::string>{"head.weight", "head.bias"}));
  EXPECT_FALSE(ctx.no_grad_values().empty());
  AutogradOptions options;
  options.params = ctx.param_names();
  options.state = ctx.buffer_names();
  options.stop_gradient = ctx.no_grad_values();
  auto tg = build_training_graph(g, "loss", options);
  ASSERT_TRUE(tg.is_ok()) << tg.status().to_string();
  EXPECT_EQ(tg->grads, (std::vector<std::string>{"head.weight.grad", "head.bias.grad"}));
  for (const Node* n : tg->graph->nodes()) {
    EXPECT_NE(n->op(), "ConvolutionBackwardFilter") << n->name;
    EXPECT_NE(n->op(), "BatchNormalizationBackward") << n->name;
  }
  // The features still run in training mode: the running statistics update.
  EXPECT_EQ(ctx.buffer_updates().size(), 2u);
  EXPECT_EQ(model->describe().find("NoGrad(") != std::string::npos, true);
  // Without the region every parameter is trained.
  Graph g2;
  ParameterStore store2(3);
  ModuleContext ctx2(g2, store2, Mode::kTrain);
  Value* x2 = g2.add_input("image", DataType::kFloat32, Dims{2, 1, 8, 8}).value();
  ASSERT_TRUE(features->forward(ctx2, x2).is_ok());
  EXPECT_EQ(ctx2.param_names().size(), 4u);  // conv weight and bias, bn scale and bias
}

TEST(Models, UnknownNamesAndSmallImagesAreErrors) {
  TrainConfig::Model m;
  m.name = "vgg";
  auto r = make_model(m, {28, 28, 1}, 10);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("fashion_cnn, lenet, alexnet"), std::string::npos);
  m.name = "alexnet";
  auto small = make_model(m, {28, 28, 1}, 10);
  ASSERT_FALSE(small.is_ok());
  EXPECT_NE(small.status().message().find("at least 63x63"), std::string::npos);
}

}  // namespace
}  // namespace kiln::train
