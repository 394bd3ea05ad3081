// Weights that only packed kernels read are stored in the engine once, packed (Value::prepared_only): the build
// drops the original, the engine runs from the packed copy, a weight another step also reads is kept, and an engine
// whose prepared data cannot stand in for such a weight is refused with "rebuild the engine from the model".
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "builder/builder.h"
#include "graph/engine_format.h"
#include "kernels/cpu/cpu_features.h"
#include "ops/elementwise/elementwise.h"
#include "ops/matmul/matmul.h"
#include "runtime/engine.h"
#include "runtime/inspector.h"

namespace kiln {
namespace {

constexpr int64_t kRows = 13, kDepth = 300, kCols = 40;

Tensor filled(const Dims& dims, int seed) {
  Tensor t = *Tensor::empty(DataType::kFloat32, dims);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>((i * 37 + seed) % 23) / 46.f - 0.2f;
  return t;
}

// y = x [13, 300] times w [300, 40]; with `shared`, also z = w + w (a second reader of w).
std::unique_ptr<Graph> product_graph(bool shared) {
  auto g = std::make_unique<Graph>();
  Value* x = *g->add_input("x", DataType::kFloat32, {kRows, kDepth});
  Value* w = *g->add_constant("w", filled({kDepth, kCols}, 5));
  Node* mm = *g->add_node("MatrixMultiply", "mm", std::make_unique<MatrixMultiplyAttrs>(), {x, w});
  EXPECT_TRUE(g->mark_output(mm->outputs[0]).is_ok());
  if (shared) {
    auto sum = std::make_unique<ElementWiseAttrs>();
    sum->op = ElementWiseOp::kSum;
    Node* z = *g->add_node("ElementWise", "twice_w", std::move(sum), {w, w});
    EXPECT_TRUE(g->mark_output(z->outputs[0]).is_ok());
  }
  return g;
}

BuildOptions packed_options() {
  BuildOptions options;
  options.passes.enabled = false;  // the graph as written: no pass renames or transposes the weights
  options.pinned["mm"] = KernelPin{"cpu.packed_matrix_multiply", ""};
  return options;
}

// The engine's outputs for x, in the graph's order.
std::vector<Tensor> run(const EngineImpl& engine, const Tensor& x) {
  auto ctx = engine.create_execution_context();
  EXPECT_TRUE(ctx.is_ok()) << ctx.status().to_string();
  std::vector<Tensor> out;
  if (!ctx) return out;
  EXPECT_TRUE((*ctx)->set_input("x", x).is_ok());
  const Status ran = (*ctx)->execute();
  EXPECT_TRUE(ran.is_ok()) << ran.to_string();
  for (const std::string& name : engine.output_names()) out.push_back((*ctx)->output(name).value());
  return out;
}

void expect_matches_reference(const Graph& g, const std::vector<Tensor>& got, const Tensor& x) {
  BuildOptions ref;
  ref.backend = Backend::kRef;
  auto bytes = build_engine(g, ref);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  auto engine = EngineImpl::deserialize(*bytes);
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  const std::vector<Tensor> want = run(**engine, x);
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    ASSERT_EQ(got[o].dims(), want[o].dims());
    for (int64_t i = 0; i < got[o].numel(); ++i)
      ASSERT_NEAR(got[o].data<float>()[i], want[o].data<float>()[i], 1e-4) << "output " << o << " at " << i;
  }
}

TEST(PreparedOnly, WeightsOnlyThePackedKernelReadsAreStoredOncePacked) {
  if (!cpu::has_avx2_fma()) GTEST_SKIP() << "the packed kernels need AVX2 and FMA";
  const std::unique_ptr<Graph> g = product_graph(false);
  BuildReport report;
  auto bytes = build_engine(*g, packed_options(), &report);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  EXPECT_EQ(report.prepared_only_constants, 1);
  EXPECT_EQ(report.prepared_only_bytes, static_cast<uint64_t>(kDepth * kCols * sizeof(float)));
  auto container = read_engine_container(*bytes);
  ASSERT_TRUE(container.is_ok()) << container.status().to_string();
  EXPECT_LT(container->sections.at("weights").size(), static_cast<size_t>(kDepth * kCols * sizeof(float)));
  EXPECT_GE(container->sections.at("prepared").size(), static_cast<size_t>(kDepth * kCols * sizeof(float)));

  auto engine = EngineImpl::deserialize(*bytes);
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  const Value* w = (*engine)->graph().find_value("w");
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->prepared_only);
  EXPECT_FALSE(w->is_constant());
  EXPECT_EQ(w->dims, (Dims{kDepth, kCols}));
  const auto info = nlohmann::json::parse(layer_info_json(**engine));
  ASSERT_EQ(info["Layers"].size(), 1u);
  EXPECT_EQ(info["Layers"][0]["Inputs"][1]["Name"], "w");
  EXPECT_EQ(info["Layers"][0]["Inputs"][1].value("StoredOnlyPrepared", false), true) << info.dump();
  const Tensor x = filled({kRows, kDepth}, 1);
  expect_matches_reference(*g, run(**engine, x), x);
  // The caller's graph keeps its weights: the build worked on a copy.
  EXPECT_TRUE(g->find_value("w")->is_constant());
}

TEST(PreparedOnly, AWeightAnotherStepReadsIsKept) {
  if (!cpu::has_avx2_fma()) GTEST_SKIP() << "the packed kernels need AVX2 and FMA";
  const std::unique_ptr<Graph> g = product_graph(true);
  BuildReport report;
  auto bytes = build_engine(*g, packed_options(), &report);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  EXPECT_EQ(report.prepared_only_constants, 0);
  auto engine = EngineImpl::deserialize(*bytes);
  ASSERT_TRUE(engine.is_ok()) << engine.status().to_string();
  EXPECT_TRUE((*engine)->graph().find_value("w")->is_constant());
  const Tensor x = filled({kRows, kDepth}, 2);
  expect_matches_reference(*g, run(**engine, x), x);
}

// The engine of the first test with its plan edited by `edit`; loading it must fail naming w.
void expect_refused_after(const std::function<void(nlohmann::json& plan)>& edit) {
  auto bytes = build_engine(*product_graph(false), packed_options());
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  auto c = read_engine_container(*bytes);
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  std::map<std::string, std::string> sections;
  for (const auto& [name, section] : c->sections) sections[name] = std::string(section);
  nlohmann::json plan = nlohmann::json::parse(sections.at("plan"));
  edit(plan);
  sections["plan"] = plan.dump();
  auto engine = EngineImpl::deserialize(write_engine_container(c->header, sections));
  ASSERT_FALSE(engine.is_ok());
  const std::string message = engine.status().message();
  EXPECT_NE(message.find("constant 'w' only as prepared data"), std::string::npos) << message;
  EXPECT_NE(message.find("node 'mm'"), std::string::npos) << message;
  EXPECT_NE(message.find("rebuild the engine from the model"), std::string::npos) << message;
}

TEST(PreparedOnly, AnEngineWhoseStepCannotStandInForTheWeightIsRefused) {
  if (!cpu::has_avx2_fma()) GTEST_SKIP() << "the packed kernels need AVX2 and FMA";
  expect_refused_after([](nlohmann::json& plan) {  // the step's prepared data gone
    for (auto& step : plan)
      if (step["node"] == "mm") step.erase("prepared");
  });
  expect_refused_after([](nlohmann::json& plan) {  // a kernel that reads the weights themselves
    for (auto& step : plan)
      if (step["node"] == "mm") step["kernel"] = "ref.matrix_multiply";
  });
}

// A packed kernel given prepared data for another matrix and no weights fails its run with what to do.
TEST(PreparedOnly, APackedKernelWithoutFittingPreparedDataOrWeightsSaysRebuild) {
  if (!cpu::has_avx2_fma()) GTEST_SKIP() << "the packed kernels need AVX2 and FMA";
  const KernelImpl* impl = nullptr;
  for (const KernelImpl* k : KernelRegistry::global().find("MatrixMultiply", Backend::kCpu))
    if (k->name == "cpu.packed_matrix_multiply") impl = k;
  ASSERT_NE(impl, nullptr);
  EXPECT_EQ(impl->prepared_replaces_input, 1);
  MatrixMultiplyAttrs a;
  const OpSchema* s = OpRegistry::global().find("MatrixMultiply");
  auto f32 = [](Dims d) { return TensorDesc{DataType::kFloat32, std::move(d), true}; };
  const Tensor other = filled({kDepth, kCols - 8}, 3);
  OpCall made{s, &a, {f32({kRows, kDepth}), f32({kDepth, kCols - 8})}, {f32({kRows, kCols - 8})}, {nullptr, &other}};
  auto blob = impl->prepare(made);
  ASSERT_TRUE(blob.is_ok()) << blob.status().to_string();
  OpCall call{s, &a, {f32({kRows, kDepth}), f32({kDepth, kCols})}, {f32({kRows, kCols})}, {nullptr, nullptr}};
  call.prepared = &*blob;
  auto kernel = impl->create(call);
  ASSERT_TRUE(kernel.is_ok()) << kernel.status().to_string();
  Tensor y = *Tensor::empty(DataType::kFloat32, {kRows, kCols});
  KernelContext ctx{call, {filled({kRows, kDepth}, 4), Tensor()}, {y}, cpu_stream(), cpu_allocator()};
  const Status ran = (*kernel)->run(ctx);
  ASSERT_FALSE(ran.is_ok());
  EXPECT_NE(ran.message().find("rebuild the engine from the model"), std::string::npos) << ran.message();
}

}  // namespace
}  // namespace kiln
