// Tactic timing and the timing cache: candidates are timed and the fastest kept, a rebuild reads every
// time from the cache, and a cache from another device or a malformed one is handled.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "builder/builder.h"
#include "builder/tactics.h"
#include "builder/timing_cache.h"
#include "graph/network/network_internal.h"
#include "kiln/network.h"
#include "kiln/version.h"
#include "ops/activation/activation.h"
#include "runtime/engine.h"
#include "runtime/inspector.h"

namespace kiln {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()))).string();
}

void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// Two convolutions with random-looking weights: every convolution has several candidates (tactics).
std::unique_ptr<Network> conv_net() {
  auto net = std::make_unique<Network>();
  std::vector<float> w1(8 * 3 * 3 * 3), w2(8 * 8 * 3 * 3);
  for (size_t i = 0; i < w1.size(); ++i) w1[i] = static_cast<float>((i * 7919) % 13) / 13.f - 0.5f;
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = static_cast<float>((i * 104729) % 11) / 11.f - 0.5f;
  Weights a{DataType::kFloat32, w1.data(), static_cast<int64_t>(w1.size())};
  Weights b{DataType::kFloat32, w2.data(), static_cast<int64_t>(w2.size())};
  auto x = net->add_input("x", DataType::kFloat32, {1, 3, 16, 16});
  auto c1 = net->add_convolution(*x, 8, {3, 3}, a);
  auto c2 = net->add_convolution((*c1)->output(0), 8, {3, 3}, b);
  EXPECT_TRUE(net->mark_output((*c2)->output(0)).is_ok());
  return net;
}

// The runs of the race spy's kernels, one letter per run (its tactic), for problems of kRaceDims only.
const Dims kRaceDims{2, 3, 5, 7, 11};
std::string race_runs;

class RaceSpyKernel final : public Kernel {
 public:
  explicit RaceSpyKernel(std::string tactic) : tactic_(std::move(tactic)) {}
  Status run(KernelContext&) override {
    race_runs += tactic_;
    return Status::ok();
  }

 private:
  std::string tactic_;
};

// A CPU Activation implementation with three tactics that accepts only kRaceDims (so nothing else changes).
const bool kRaceSpyRegistered = KernelRegistry::global().add(KernelImpl{
    .name = "cpu.test_race_spy",
    .op = "Activation",
    .backend = Backend::kCpu,
    .priority = 1000,
    .supports =
        [](const OpCall& call) {
          return call.inputs[0].dims == kRaceDims ? Status::ok() : unsupported("a test spy: kRaceDims only");
        },
    .create = [](const OpCall& call) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<RaceSpyKernel>(call.tactic));
    },
    .tactics =
        [](const OpCall&) {
          return std::vector<std::string>{"a", "b", "c"};
        },
});

TEST(Tactics, CpuCandidatesAreTimedInTurns) {
  // Each candidate is made and warmed up, then the rounds run every candidate once in turn (timed one after
  // another, a burst of load on the machine fell on one candidate alone).
  ASSERT_TRUE(kRaceSpyRegistered);
  ActivationAttrs relu;
  const TensorDesc x{DataType::kFloat32, kRaceDims, true};
  const OpCall call{OpRegistry::global().find("Activation"), &relu, {x}, {x}};
  TacticSearch search;
  search.level = 2;  // at least 3 timed runs each
  std::vector<std::string> log;
  race_runs.clear();
  auto choice = choose_kernel(call, search, log);
  ASSERT_TRUE(choice.is_ok()) << choice.status().message();
  EXPECT_GE(search.timed, 3);  // the spy's three and the real CPU activation kernels
  ASSERT_GE(race_runs.size(), 12u) << race_runs;
  EXPECT_EQ(race_runs.substr(0, 12), "abcabcabcabc") << race_runs;  // warm-ups, then three rounds
}

TEST(Tactics, TheSecondPassMeasuresWhatThisBuildMeasuredAgainAndKeepsTheLowerTime) {
  // The builder's second look at the layouts: a time this build measured (here made to look disturbed, 1000 ms) is
  // measured once more and the lower kept, in the cache too; a time a loaded cache gave is not measured again, and
  // nothing is measured a third time.
  ASSERT_TRUE(kRaceSpyRegistered);
  ActivationAttrs relu;
  const TensorDesc x{DataType::kFloat32, kRaceDims, true};
  const OpCall call{OpRegistry::global().find("Activation"), &relu, {x}, {x}};
  const KernelImpl* spy = nullptr;
  for (const KernelImpl* impl : KernelRegistry::global().find("Activation", Backend::kCpu))
    if (impl->name == "cpu.test_race_spy") spy = impl;
  ASSERT_NE(spy, nullptr);
  TimingCache cache(timing_device(Backend::kCpu));
  TacticSearch search;
  search.level = 1;
  search.cache = &cache;
  search.device = cache.device();
  std::vector<std::string> log;
  ASSERT_TRUE(choose_kernel(call, search, log).is_ok());
  const int first = search.timed;
  ASSERT_GE(first, 3);
  const std::string key_a = timing_key(call, *spy, "a", search.device);
  const std::string key_b = timing_key(call, *spy, "b", search.device);
  cache.put(key_a, 1000);        // a measurement a burst of load fell on
  search.measured.erase(key_b);  // as if a loaded cache had given b's time
  cache.put(key_b, 2000);
  search.second_pass = true;
  race_runs.clear();
  log.clear();
  auto again = choose_kernel(call, search, log);
  ASSERT_TRUE(again.is_ok()) << again.status().message();
  EXPECT_EQ(search.timed, first);  // no new candidates, only second measurements
  EXPECT_LT(*cache.find(key_a), 1000);
  EXPECT_EQ(*cache.find(key_b), 2000);
  EXPECT_NE(race_runs.find('a'), std::string::npos) << race_runs;
  EXPECT_EQ(race_runs.find('b'), std::string::npos) << race_runs;
  EXPECT_TRUE(std::any_of(log.begin(), log.end(), [](const std::string& l) {
    return l.find("cpu.test_race_spy[a]") != std::string::npos && l.find("the lower of 1000 and") != std::string::npos;
  })) << log.front();
  race_runs.clear();
  ASSERT_TRUE(choose_kernel(call, search, log).is_ok());
  EXPECT_EQ(race_runs, "");  // each measured again once only
}

TEST(TimingCache, SavedTimesAreReadBack) {
  const std::string path = temp_path("kiln_cache_roundtrip.json");
  TimingCache cache("cpu test");
  cache.put("k1", 1.5);
  cache.put("k2", 0.25);
  ASSERT_TRUE(cache.save(path).is_ok());
  TimingCache again("cpu test");
  std::vector<std::string> warnings;
  ASSERT_TRUE(again.load(path, warnings).is_ok());
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(again.size(), 2u);
  EXPECT_EQ(again.find("k1"), 1.5);
  EXPECT_EQ(again.find("k2"), 0.25);
  EXPECT_FALSE(again.find("k3").has_value());
  std::filesystem::remove(path);
}

TEST(TimingCache, AnotherDeviceOrVersionIsIgnoredWithAWarning) {
  const std::string path = temp_path("kiln_cache_other.json");
  TimingCache cache("cpu machine A");
  cache.put("k1", 1.0);
  ASSERT_TRUE(cache.save(path).is_ok());
  TimingCache other("cpu machine B");
  std::vector<std::string> warnings;
  ASSERT_TRUE(other.load(path, warnings).is_ok());
  EXPECT_EQ(other.size(), 0u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("cpu machine A"), std::string::npos) << warnings[0];

  write_file(path, R"({"kiln_version": "0.0.0-old", "device": "cpu machine B", "times": {"k1": 1}})");
  warnings.clear();
  ASSERT_TRUE(other.load(path, warnings).is_ok());
  EXPECT_EQ(other.size(), 0u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("0.0.0-old"), std::string::npos) << warnings[0];
  std::filesystem::remove(path);
}

TEST(TimingCache, MalformedFilesAreErrorsNamingTheFile) {
  const std::string path = temp_path("kiln_cache_bad.json");
  const std::string version = version_string();
  for (const std::string& text :
       {std::string("not json"), std::string("[1, 2]"), std::string(R"({"times": {}})"),
        str_cat(R"({"kiln_version": ")", version, R"(", "device": "d", "times": {"k": "fast"}})"),
        str_cat(R"({"kiln_version": ")", version, R"(", "device": "d", "times": {"k": -1}})")}) {
    write_file(path, text);
    TimingCache cache("d");
    std::vector<std::string> warnings;
    Status st = cache.load(path, warnings);
    ASSERT_FALSE(st.is_ok()) << text;
    EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("delete it"), std::string::npos) << st.message();
  }
  std::filesystem::remove(path);
  const std::string dir = temp_path("kiln_cache_dir");
  std::filesystem::create_directory(dir);
  TimingCache cache("d");
  std::vector<std::string> warnings;
  EXPECT_FALSE(cache.load(dir, warnings).is_ok());
  std::filesystem::remove(dir);
}

TEST(Tactics, EveryCandidateIsTimedAndARebuildReadsTheCache) {
  const std::string path = temp_path("kiln_cache_build.json");
  std::filesystem::remove(path);
  auto net = conv_net();
  BuildOptions options;
  options.optimization_level = 1;
  options.timing_cache_path = path;
  BuildReport first;
  auto bytes = build_engine(network_graph(*net), options, &first);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  // Each convolution has at least two candidates (oneDNN blocked and plain layouts).
  EXPECT_GE(first.timed, 4);
  EXPECT_EQ(first.cached, 0);
  EXPECT_GT(first.timing_ms, 0);
  ASSERT_TRUE(std::filesystem::exists(path));

  BuildReport second;
  auto again = build_engine(network_graph(*net), options, &second);
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ(second.timed, 0);
  EXPECT_EQ(second.cached, first.timed);
  EXPECT_EQ(second.timing_ms, 0);
  // Same times, same choices: the same plan.
  EXPECT_EQ(first.choices, second.choices);

  BuildReport level0;
  options.optimization_level = 0;
  options.timing_cache_path.clear();
  ASSERT_TRUE(build_engine(network_graph(*net), options, &level0).is_ok());
  EXPECT_EQ(level0.timed + level0.cached, 0);
  std::filesystem::remove(path);
}

TEST(Tactics, TheFastestCachedCandidateIsChosen) {
  // Times planted in the cache decide: whichever tactic the cache says is fastest is the one planned.
  auto net = conv_net();
  const Graph& graph = network_graph(*net);
  const std::string path = temp_path("kiln_cache_planted.json");
  const std::string device = timing_device(Backend::kCpu);
  for (const std::string favourite : {"plain", "blocked"}) {
    TimingCache cache(device);
    int convolutions = 0;
    for (const auto& node : graph.nodes()) {
      if (node->op() != "Convolution") continue;
      ++convolutions;
      const OpCall call = node_call(*node);
      for (const KernelImpl* impl : KernelRegistry::global().find("Convolution", Backend::kCpu)) {
        if (!impl->supports(call).is_ok()) continue;
        std::vector<std::string> tactics = impl->tactics ? impl->tactics(call) : std::vector<std::string>{};
        if (tactics.empty()) tactics.emplace_back();
        for (const std::string& t : tactics) cache.put(timing_key(call, *impl, t, device), t == favourite ? 1 : 100);
      }
    }
    ASSERT_EQ(convolutions, 2);
    ASSERT_TRUE(cache.save(path).is_ok());
    BuildOptions options;
    options.timing_cache_path = path;
    options.passes.disabled = {"layout-nhwc", "layout-blocked"};  // the planted keys are the NCHW convolutions'
    BuildReport report;
    ASSERT_TRUE(build_engine(graph, options, &report).is_ok());
    EXPECT_EQ(report.timed, 0);
    int chosen = 0;
    for (const std::string& line : report.choices) chosen += line.find("[" + favourite + "]") != std::string::npos;
    EXPECT_EQ(chosen, 2) << favourite;
  }
  std::filesystem::remove(path);
}

TEST(Tactics, TheWorkspaceLimitIsHonored) {
  // The blocked layout needs buffers for the converted activations; the plain layout and the own loops
  // need none. Under a 1-byte limit no blocked tactic is chosen, at every level.
  auto net = conv_net();
  for (int level : {0, 1}) {
    BuildOptions options;
    options.optimization_level = level;
    options.workspace_limit = 1;
    // NCHW activations: the blocked tactic needs conversion buffers.
    options.passes.disabled = {"layout-nhwc", "layout-blocked"};
    BuildReport report;
    auto bytes = build_engine(network_graph(*net), options, &report);
    ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
    EXPECT_EQ(report.timed, level == 0 ? 2 : 2 * 2);  // level 0 stops at the first that fits
    for (const std::string& line : report.choices) EXPECT_EQ(line.find("[blocked]"), std::string::npos) << line;
  }
}

// Runs an engine on `x` and returns its only output.
Tensor run_engine(const std::string& bytes, const Tensor& x, std::string* layer_info = nullptr) {
  auto engine = EngineImpl::deserialize(bytes);
  EXPECT_TRUE(engine.is_ok()) << engine.status().to_string();
  auto ctx = (*engine)->create_execution_context().value();
  EXPECT_TRUE(ctx->set_input("x", x).is_ok());
  EXPECT_TRUE(ctx->execute().is_ok());
  if (layer_info) *layer_info = layer_info_json(**engine, ctx.get());
  return ctx->output((*engine)->output_names()[0]).value();
}

TEST(Tactics, ConvolutionWeightsArePreparedAtBuildTime) {
  // The blocked tactic's weights are stored in the engine in oneDNN's layout and used from there; the
  // outputs match the reference kernels.
  auto net = conv_net();
  Tensor x = *Tensor::empty(DataType::kFloat32, Dims{1, 3, 16, 16});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>((i * 37) % 17) / 17.f - 0.4f;
  BuildOptions options;
  options.optimization_level = 0;  // the first candidate: oneDNN, blocked layout
  auto bytes = build_engine(network_graph(*net), options);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  std::string info;
  const Tensor got = run_engine(*bytes, x, &info);
  const auto layers = nlohmann::json::parse(info)["Layers"];
  int prepared = 0;
  for (const auto& layer : layers) {
    if (!layer.contains("PreparedBytes")) continue;
    ++prepared;
    EXPECT_GT(layer["PreparedBytes"].get<size_t>(), 0u);
    EXPECT_NE(layer["Implementation"].get<std::string>().find("weights prepared at build time"), std::string::npos)
        << layer.dump();
  }
  // The 3-channel first layer runs channels-last on cpu.conv_nhwc_few_channels, which prepares nothing.
  EXPECT_EQ(prepared, 1) << info;

  BuildOptions ref;
  ref.backend = Backend::kRef;
  auto ref_bytes = build_engine(network_graph(*net), ref);
  ASSERT_TRUE(ref_bytes.is_ok()) << ref_bytes.status().to_string();
  const Tensor want = run_engine(*ref_bytes, x);
  ASSERT_EQ(got.dims(), want.dims());
  for (int64_t i = 0; i < got.numel(); ++i) EXPECT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-4) << i;
}

TEST(Tactics, LevelIsValidated) {
  auto net = conv_net();
  BuildOptions options;
  options.optimization_level = 6;
  auto bytes = build_engine(network_graph(*net), options);
  ASSERT_FALSE(bytes.is_ok());
  EXPECT_NE(bytes.status().message().find("optimization level"), std::string::npos) << bytes.status().message();
}

}  // namespace
}  // namespace kiln
