// layout-blocked: 2-D float32 convolutions on activations in blocks of 8 channels (oneDNN's nChw8c), a stem reading
// NCHW, one shuffle where the layout ends; what cannot go in blocks is refused with the reason.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "builder/builder.h"
#include "graph_builders.h"
#include "ops/convolution/convolution.h"
#include "pass_test_util.h"
#include "runtime/inspector.h"

namespace kiln {
namespace {

using namespace pass_test;

Value* conv(Graph& g, const std::string& name, Value* x, int64_t out_channels, int64_t group = 1, int64_t stride = 1) {
  const int64_t in_channels = x->dims[1];
  Value* w = constant(
      g, name + ".w",
      ramp({out_channels, in_channels / group, 3, 3}, -0.3f + 0.01f * static_cast<float>(out_channels), 0.013f));
  Value* b = constant(g, name + ".b", ramp({out_channels}, -0.1f, 0.05f));
  auto a = std::make_unique<ConvolutionAttrs>();
  a->pads = {1, 1, 1, 1};
  a->group = group;
  a->strides = {stride, stride};
  return out(g.add_node("Convolution", name, std::move(a), {x, w, b}));
}

// An inverted-residual block after a stem: x (3 channels) -> stem (16, stride 2) + relu -> expand (16) + relu ->
// depthwise (16) -> project (16) + the stem's output -> y.
std::unique_ptr<Graph> mobile_net() {
  auto g = std::make_unique<Graph>();
  Value* x = *g->add_input("x", DataType::kFloat32, {2, 3, 13, 12});
  Value* stem = activation(*g, "stem_relu", conv(*g, "stem", x, 16, 1, 2), ActivationKind::kRelu);
  Value* expand = activation(*g, "expand_relu", conv(*g, "expand", stem, 16), ActivationKind::kRelu);
  Value* dw = conv(*g, "dw", expand, 16, 16);
  Value* y = binary(*g, "add", ElementWiseOp::kSum, conv(*g, "project", dw, 16), stem);
  EXPECT_TRUE(g->rename_value(y, "y").is_ok());
  EXPECT_TRUE(g->mark_output(y).is_ok());
  return g;
}

PassOptions channel_blocks(Backend backend, int64_t block = 8) {
  PassOptions o;
  o.backend = backend_hook(backend);
  o.layout.channel_block = block;
  return o;
}

// mobile_net() in blocks of `block` on the CPU (oneDNN's blocked kernels, not the reference fallback) and on the
// reference backend: every layer in blocks, the unoptimized graph's outputs.
void expect_blocks_run_every_layer(int64_t block) {
  auto g = mobile_net();
  const std::vector<Tensor> inputs = random_inputs(*g);
  PassOptions off;
  off.enabled = false;
  auto plain = build_and_run(*g, inputs, off, Backend::kRef);
  ASSERT_TRUE(plain.is_ok()) << plain.status().to_string();
  const std::string runs = str_cat(" runs in blocks of ", block, " channels");
  for (Backend backend : {Backend::kCpu, Backend::kRef}) {
    auto blocked = build_and_run(*g, inputs, channel_blocks(backend, block), backend);
    ASSERT_TRUE(blocked.is_ok()) << blocked.status().to_string();
    EXPECT_EQ(applied_by(blocked->report.optimizer, "layout-blocked"),
              (std::vector<std::string>{"'stem + stem_relu' (Convolution)" + runs,
                                        "'expand + expand_relu' (Convolution)" + runs, "'dw' (Convolution)" + runs,
                                        "'project + add' (Convolution)" + runs}));
    EXPECT_LE(max_difference(blocked->outputs, plain->outputs), 1e-5) << backend_name(backend);
    if (backend != Backend::kCpu) continue;
    for (const std::string& choice : blocked->report.choices) {
      if (choice.find("(Convolution)") != std::string::npos) {
        EXPECT_NE(choice.find("cpu.onednn.convolution"), std::string::npos) << choice;
      }
    }
  }
}

// The inspector's JSON of mobile_net() built in blocks of `block` on the CPU.
std::string blocked_layer_info(int64_t block) {
  BuildOptions options;
  options.optimization_level = 0;
  options.passes = channel_blocks(Backend::kCpu, block);
  auto bytes = build_engine(*mobile_net(), options);
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  if (!bytes) return "";
  auto engine = EngineImpl::deserialize(*bytes);
  EXPECT_TRUE(engine.is_ok()) << engine.status().to_string();
  return engine ? layer_info_json(**engine, nullptr) : "";
}

TEST(LayoutBlocked, ABlockRunsInChannelBlocksWithOneShuffleOut) {
  auto g = mobile_net();
  auto o = g->clone();
  OptimizerReport report;
  ASSERT_TRUE(run_passes(*o, channel_blocks(Backend::kCpu), &report).is_ok());
  EXPECT_EQ(applied_by(report, "layout-blocked"),
            (std::vector<std::string>{"'stem + stem_relu' (Convolution) runs in blocks of 8 channels",
                                      "'expand + expand_relu' (Convolution) runs in blocks of 8 channels",
                                      "'dw' (Convolution) runs in blocks of 8 channels",
                                      "'project + add' (Convolution) runs in blocks of 8 channels"}));
  ASSERT_TRUE(o->verify().is_ok());
  for (const Node* n : nodes_of(*o, "Convolution")) {
    const auto& a = static_cast<const ConvolutionAttrs&>(*n->attrs);
    EXPECT_EQ(a.channel_block, 8) << n->name;
    EXPECT_EQ(a.plain_input, n->name == "stem + stem_relu") << n->name;  // the stem reads x as it is
    EXPECT_EQ(n->inputs[1]->dims.rank(), 4) << n->name;                  // weights as they were
  }
  const Node* stem = o->find_node("stem + stem_relu");
  ASSERT_NE(stem, nullptr);
  EXPECT_EQ(stem->inputs[0], o->find_value("x"));
  EXPECT_EQ(stem->outputs[0]->dims, (Dims{2, 2, 7, 6, 8}));
  // The residual is the stem's blocked output itself.
  const Node* project = o->find_node("project + add");
  ASSERT_NE(project, nullptr);
  ASSERT_GT(project->inputs.size(), 3u);
  EXPECT_EQ(project->inputs[3], stem->outputs[0]);
  // One shuffle: back to NCHW for y.
  const auto shuffles = nodes_of(*o, "Shuffle");
  ASSERT_EQ(shuffles.size(), 1u);
  const Value* y = o->outputs().at(0);
  EXPECT_EQ(y->name, "y");
  EXPECT_EQ(y->dims, (Dims{2, 16, 7, 6}));
  EXPECT_EQ(y->producer, shuffles[0]);

  // Built and run on the CPU (oneDNN's blocked kernels) and the reference backend: the unoptimized graph's outputs.
  expect_blocks_run_every_layer(8);
  // The inspector names the layout of the blocked activations.
  const std::string info = blocked_layer_info(8);
  EXPECT_NE(info.find("\"Format\": \"nChw8c\""), std::string::npos) << info;
}

// Blocks of 16 (what the CPU builder asks for on AVX-512: oneDNN's nChw16c): every layer in blocks, the same
// outputs on oneDNN's kernels and the reference backend, and the inspector names the layout.
TEST(LayoutBlocked, BlocksOfSixteenChannels) {
  expect_blocks_run_every_layer(16);
  auto g = mobile_net();
  auto o = g->clone();
  OptimizerReport report;
  ASSERT_TRUE(run_passes(*o, channel_blocks(Backend::kCpu, 16), &report).is_ok());
  const Node* stem = o->find_node("stem + stem_relu");
  ASSERT_NE(stem, nullptr);
  EXPECT_EQ(stem->outputs[0]->dims, (Dims{2, 1, 7, 6, 16}));
  const std::string info = blocked_layer_info(16);
  EXPECT_NE(info.find("\"Format\": \"nChw16c\""), std::string::npos) << info;
  // Any other block is an error that says what the pass takes.
  auto other = g->clone();
  const Status st = run_passes(*other, channel_blocks(Backend::kCpu, 12), &report);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("blocks of 8 or 16 channels, not 12"), std::string::npos) << st.message();
}

TEST(LayoutBlocked, WhatCannotGoInBlocksIsRefusedWithTheReason) {
  auto g = std::make_unique<Graph>();
  Value* x = *g->add_input("x", DataType::kFloat32, {1, 16, 6, 6});
  Value* odd = conv(*g, "twelve", x, 12);                // 12 output channels
  Value* grouped = conv(*g, "grouped", x, 16, 2);        // grouped, not depthwise
  Value* after_odd = conv(*g, "after_twelve", odd, 16);  // 12 input channels, not a stem's few
  ASSERT_TRUE(g->mark_output(grouped).is_ok());
  ASSERT_TRUE(g->mark_output(after_odd).is_ok());
  OptimizerReport report;
  ASSERT_TRUE(run_passes(*g, channel_blocks(Backend::kCpu), &report).is_ok());
  EXPECT_TRUE(applied_by(report, "layout-blocked").empty());
  EXPECT_EQ(refused_by(report, "layout-blocked"),
            (std::vector<std::string>{
                "'twelve' (Convolution) in channel blocks: 12 output channels are not a multiple of 8",
                "'after_twelve' (Convolution) in channel blocks: 12 input channels are not a multiple of 8",
                "'grouped' (Convolution) in channel blocks: it is grouped (only ungrouped and depthwise convolutions "
                "go in blocks)"}));
  for (const Node* n : nodes_of(*g, "Convolution"))
    EXPECT_EQ(static_cast<const ConvolutionAttrs&>(*n->attrs).channel_block, 0) << n->name;
  EXPECT_TRUE(nodes_of(*g, "Shuffle").empty());
}

TEST(LayoutBlocked, AStemWhoseOutputIsReadInNchwStaysNchw) {
  auto g = std::make_unique<Graph>();
  Value* x = *g->add_input("x", DataType::kFloat32, {1, 3, 8, 8});
  Value* y = conv(*g, "stem", x, 8);
  ASSERT_TRUE(g->mark_output(y).is_ok());  // read by nobody but the caller: a shuffle back would be needed
  OptimizerReport report;
  ASSERT_TRUE(run_passes(*g, channel_blocks(Backend::kCpu), &report).is_ok());
  EXPECT_TRUE(applied_by(report, "layout-blocked").empty());
  ASSERT_EQ(refused_by(report, "layout-blocked").size(), 1u);
  EXPECT_NE(refused_by(report, "layout-blocked")[0].find("3 input channels, and not every reader"), std::string::npos);
}

// The times of a timing cache file, by key.
std::map<std::string, double> cache_times(const std::string& path) {
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  return j.at("times").get<std::map<std::string, double>>();
}

void set_cache_times(const std::string& from, const std::string& to, const std::map<std::string, double>& times) {
  std::ifstream in(from);
  nlohmann::json j = nlohmann::json::parse(in);
  j["times"] = times;
  std::ofstream(to) << j.dump();
}

// The CPU builder plans both layouts and keeps the one whose layers' timings sum to less: with the times in the
// cache planted, the blocked layout's own candidates decide.
TEST(LayoutBlocked, TheBuilderKeepsTheLayoutWhoseLayersSumToLess) {
  auto g = mobile_net();
  const std::string dir = std::filesystem::temp_directory_path() / str_cat("kiln_layout_choice_", ::getpid());
  std::filesystem::create_directories(dir);
  BuildOptions options;
  options.optimization_level = 1;
  // Both layouts timed, then NHWC alone: the keys only the first has are the blocked layout's own candidates.
  options.timing_cache_path = dir + "/both.json";
  BuildReport both;
  ASSERT_TRUE(build_engine(*g, options, &both).is_ok());
  EXPECT_NE(both.layout.find("the layers' timings sum to"), std::string::npos) << both.layout;
  BuildOptions nhwc_only = options;
  nhwc_only.timing_cache_path = dir + "/nhwc.json";
  nhwc_only.passes.disabled = {"layout-blocked"};
  BuildReport nhwc_report;
  ASSERT_TRUE(build_engine(*g, nhwc_only, &nhwc_report).is_ok());
  EXPECT_TRUE(nhwc_report.layout.empty());
  const auto all = cache_times(options.timing_cache_path), nhwc = cache_times(nhwc_only.timing_cache_path);
  int blocked_keys = 0;
  for (const auto& [key, ms] : all) blocked_keys += !nhwc.count(key) && key.find(".workspace") == std::string::npos;
  ASSERT_GT(blocked_keys, 4);

  const std::vector<Tensor> inputs = random_inputs(*g);
  PassOptions off;
  off.enabled = false;
  auto want = build_and_run(*g, inputs, off, Backend::kRef);
  ASSERT_TRUE(want.is_ok()) << want.status().to_string();
  for (const bool blocks_fast : {true, false}) {
    std::map<std::string, double> planted = all;
    for (auto& [key, ms] : planted)
      if (!nhwc.count(key) && key.find(".workspace") == std::string::npos) ms = blocks_fast ? 1e-6 : 1e6;
    BuildOptions planted_options = options;
    planted_options.timing_cache_path = dir + "/planted.json";
    set_cache_times(options.timing_cache_path, planted_options.timing_cache_path, planted);
    BuildReport report;
    auto bytes = build_engine(*g, planted_options, &report);
    ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
    EXPECT_EQ(report.timed, 0);
    EXPECT_EQ(report.layout.rfind(blocks_fast ? "channel blocks (" : "NHWC (", 0), 0u) << report.layout;
    EXPECT_EQ(applied_by(report.optimizer, "layout-blocked").size(), blocks_fast ? 4u : 0u);
    EXPECT_EQ(applied_by(report.optimizer, "layout-nhwc").empty(), blocks_fast);
    // The kept plan runs and computes what the unoptimized graph does.
    auto engine = EngineImpl::deserialize(*bytes);
    ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
    auto ctx = (*engine)->create_execution_context();
    ASSERT_TRUE(ctx.is_ok());
    ASSERT_TRUE((*ctx)->set_input("x", inputs[0]).is_ok());
    ASSERT_TRUE((*ctx)->execute().is_ok());
    auto y = (*ctx)->output("y");
    ASSERT_TRUE(y.is_ok());
    EXPECT_LE(max_difference({*y}, want->outputs), 1e-5);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kiln
