// Mixed precision on a training graph: the precision pass runs the convolutions, their backward ops, ReLU and
// its backward in float16 and batch norm (forward and backward) on float16 data with float32 parameters and
// statistics; the parameters' gradients come out in float32 and match the float32 graph's.
#include <gtest/gtest.h>

#include "../passes/pass_test_util.h"
#include "ops/loss/loss.h"
#include "train/autograd.h"
#include "train/module.h"

namespace kiln::train {
namespace {

TEST(MixedPrecision, TrainingGraphRunsConvolutionsAndBatchNormInFloat16) {
  auto model = std::make_shared<Sequential>();
  model->add(conv2d(3, 8, 3, 1, 1, 1, false), "conv1").add(batch_norm2d(8), "bn1").add(relu(), "relu1");
  model->add(conv2d(8, 8, 3, 1, 1, 1, false), "conv2").add(global_avg_pool(), "pool").add(flatten(), "flatten");
  model->add(linear(8, 5), "fc");
  ParameterStore store(11);
  Graph g;
  ModuleContext ctx(g, store, Mode::kTrain);
  Value* x = g.add_input("image", DataType::kFloat32, Dims{4, 3, 8, 8}).value();
  Value* y = g.add_input("label", DataType::kInt64, Dims{4}).value();
  auto logits = model->forward(ctx, x);
  ASSERT_TRUE(logits.is_ok()) << logits.status().to_string();
  ASSERT_TRUE(g.add_node("CrossEntropyLoss", "loss", std::make_unique<CrossEntropyLossAttrs>(), {*logits, y}, {"loss"})
                  .is_ok());
  AutogradOptions options;
  options.params = ctx.param_names();
  options.state = ctx.buffer_names();
  auto tg = build_training_graph(g, "loss", options);
  ASSERT_TRUE(tg.is_ok()) << tg.status().to_string();

  PassOptions passes;
  passes.backend = backend_hook(Backend::kRef);
  passes.precision.fp16 = true;
  passes.precision.prefer_fp16 = true;
  auto low = tg->graph->clone();
  OptimizerReport report;
  ASSERT_TRUE(run_passes(*low, passes, &report).is_ok());
  int lowered = 0;
  for (const Node* n : low->nodes()) {
    const std::string& op = n->op();
    if (op == "Convolution" || op == "ConvolutionBackwardData" || op == "ConvolutionBackwardFilter") {
      // conv1's weight gradient reads the 3-channel image: float32 (no 16-bit tensor-core kernel for 3 channels).
      const bool stem_filter = op == "ConvolutionBackwardFilter" && n->inputs[0]->dims[1] == 3;
      EXPECT_EQ(n->inputs[0]->dtype, stem_filter ? DataType::kFloat32 : DataType::kFloat16) << n->name;
      lowered += !stem_filter;
    }
    if (op == "BatchNormalizationTraining") {
      EXPECT_EQ(n->inputs[0]->dtype, DataType::kFloat16) << n->name;
      EXPECT_EQ(n->inputs[1]->dtype, DataType::kFloat32) << n->name;   // scale
      EXPECT_EQ(n->outputs[3]->dtype, DataType::kFloat32) << n->name;  // running mean
      ++lowered;
    }
    if (op == "BatchNormalizationBackward") {
      EXPECT_EQ(n->inputs[0]->dtype, DataType::kFloat16) << n->name;
      EXPECT_EQ(n->outputs[1]->dtype, DataType::kFloat32) << n->name;  // dscale
      ++lowered;
    }
  }
  EXPECT_GE(lowered, 6);  // conv1 forward (no data gradient: its input is the image), conv2 x3, bn x2
  for (const std::string& grad : tg->grads) EXPECT_EQ(low->find_value(grad)->dtype, DataType::kFloat32) << grad;

  // Run both on the reference kernels: the gradients agree within float16's precision.
  std::vector<Tensor> inputs = pass_test::random_inputs(*tg->graph);
  for (size_t i = 0; i < tg->graph->inputs().size(); ++i) {
    const std::string& name = tg->graph->inputs()[i]->name;
    if (name == "label")
      for (int64_t k = 0; k < 4; ++k) inputs[i].data<int64_t>()[k] = k;
    else if (const ParameterStore::Entry* e = store.find(name))
      inputs[i] = e->value;
  }
  PassOptions off;
  off.enabled = false;
  auto full = pass_test::build_and_run(*tg->graph, inputs, off, Backend::kRef);
  auto half = pass_test::build_and_run(*tg->graph, inputs, passes, Backend::kRef);
  ASSERT_TRUE(full.is_ok()) << full.status().to_string();
  ASSERT_TRUE(half.is_ok()) << half.status().to_string();
  for (size_t i = 0; i < full->outputs.size(); ++i) {
    const Tensor& a = full->outputs[i];
    const Tensor& b = half->outputs[i];
    ASSERT_EQ(a.numel(), b.numel());
    double scale = 0, diff = 0;
    for (int64_t k = 0; k < a.numel(); ++k) {
      scale = std::max(scale, std::abs(a.at(k)));
      diff = std::max(diff, std::abs(a.at(k) - b.at(k)));
    }
    EXPECT_LE(diff, 2e-2 * (scale + 1e-3)) << "output " << tg->graph->outputs()[i]->name;
  }
}

}  // namespace
}  // namespace kiln::train
