// The public API (kiln/builder.h, kiln/runtime.h) used the way an application uses it: build a small
// network, serialize, deserialize, run two contexts bound by address, profile, and every misuse gives
// a Status that names the tensor (never a crash).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "kiln/builder.h"
#include "kiln/logger.h"
#include "kiln/runtime.h"

namespace kiln {
namespace {

#define API_OK(var, expr)                                                                                            \
  auto KILN_CONCAT(var, _result) = (expr);                                                                           \
  ASSERT_TRUE(KILN_CONCAT(var, _result).is_ok()) << #expr << ": " << KILN_CONCAT(var, _result).status().to_string(); \
  auto var = std::move(KILN_CONCAT(var, _result)).value()

#define EXPECT_OK(expr)                          \
  do {                                           \
    ::kiln::Status st_ = (expr);                 \
    EXPECT_TRUE(st_.is_ok()) << st_.to_string(); \
  } while (0)

#define EXPECT_ERROR(expr, text)                                                            \
  do {                                                                                      \
    ::kiln::Status st_ = (expr);                                                            \
    EXPECT_FALSE(st_.is_ok()) << #expr << " succeeded";                                     \
    EXPECT_NE(st_.message().find(text), std::string::npos) << "message: " << st_.message(); \
  } while (0)

// y = relu(x @ W^T + b) (layers "fc", "relu"), z = x * x (layer "square"); x is [batch, 4].
const std::vector<float> kW = {0.5f, -1, 2, 0, 1, 1, -1, 0.25f, -0.5f, 0, 0, 3};
const std::vector<float> kB = {0.1f, -0.2f, 0.3f};

Network make_network(const Dims& x_dims) {
  Network net;
  auto x = net.add_input("x", DataType::kFloat32, x_dims);
  EXPECT_TRUE(x.is_ok()) << x.status().to_string();
  auto fc = net.add_fully_connected(*x, 3, float_weights(kW), float_weights(kB));
  EXPECT_TRUE(fc.is_ok()) << fc.status().to_string();
  EXPECT_OK((*fc)->set_name("fc"));
  auto relu = net.add_activation((*fc)->output(0), ActivationType::kRelu);
  EXPECT_TRUE(relu.is_ok()) << relu.status().to_string();
  EXPECT_OK((*relu)->set_name("relu"));
  EXPECT_OK((*relu)->output(0)->set_name("y"));
  EXPECT_OK(net.mark_output((*relu)->output(0)));
  auto square = net.add_elementwise(*x, *x, ElementWiseOperation::kProd);
  EXPECT_TRUE(square.is_ok()) << square.status().to_string();
  EXPECT_OK((*square)->set_name("square"));
  EXPECT_OK((*square)->output(0)->set_name("z"));
  EXPECT_OK(net.mark_output((*square)->output(0)));
  return net;
}

std::vector<float> expected_y(const std::vector<float>& x) {
  std::vector<float> y;
  for (size_t n = 0; n < x.size() / 4; ++n)
    for (size_t o = 0; o < 3; ++o) {
      float acc = kB[o];
      for (size_t k = 0; k < 4; ++k) acc += x[n * 4 + k] * kW[o * 4 + k];
      y.push_back(std::max(acc, 0.f));
    }
  return y;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << "element " << i;
}

// A dynamic-batch engine with the profile [1, 4] .. [4, 4].
std::string build_dynamic_engine() {
  Network net = make_network({kDynamicDim, 4});
  BuilderConfig config;
  EXPECT_OK(config.set_profile_shapes("x", {1, 4}, {2, 4}, {4, 4}));
  auto bytes = Builder().build_serialized(net, config);
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  return bytes.is_ok() ? *bytes : std::string();
}

TEST(PublicApi, EngineQueries) {
  const std::string bytes = build_dynamic_engine();
  API_OK(engine, Runtime().deserialize_engine(bytes));
  ASSERT_EQ(engine->num_io_tensors(), 3);
  EXPECT_EQ(engine->io_tensor_name(0), "x");
  EXPECT_EQ(engine->io_tensor_name(1), "y");
  EXPECT_EQ(engine->io_tensor_name(2), "z");
  EXPECT_EQ(engine->io_tensor_name(3), "");
  EXPECT_EQ(engine->io_tensor_name(-1), "");
  EXPECT_EQ(engine->tensor_io_mode("x"), TensorIOMode::kInput);
  EXPECT_EQ(engine->tensor_io_mode("y"), TensorIOMode::kOutput);
  EXPECT_EQ(engine->tensor_io_mode("nope"), TensorIOMode::kNone);
  EXPECT_EQ(*engine->tensor_dtype("y"), DataType::kFloat32);
  EXPECT_EQ(*engine->tensor_shape("x"), (Dims{kDynamicDim, 4}));
  EXPECT_EQ(*engine->tensor_shape("y"), (Dims{kDynamicDim, 3}));
  EXPECT_ERROR(engine->tensor_shape("nope").status(), "no tensor 'nope' (inputs: x; outputs: y, z)");
  API_OK(range, engine->profile_shape("x"));
  EXPECT_EQ(range.min, (Dims{1, 4}));
  EXPECT_EQ(range.opt, (Dims{2, 4}));
  EXPECT_EQ(range.max, (Dims{4, 4}));
  EXPECT_ERROR(engine->profile_shape("y").status(), "is an output");
  EXPECT_EQ(engine->num_layers(), 2);  // the optimizer fuses fc + relu
  EXPECT_EQ(engine->profiling_verbosity(), ProfilingVerbosity::kLayerNamesOnly);
  EXPECT_EQ(engine->layer_information(), "square\nfc + relu\n");
}

TEST(PublicApi, TwoContextsBoundByAddress) {
  const std::string bytes = build_dynamic_engine();
  API_OK(engine, Runtime().deserialize_engine(bytes.data(), bytes.size()));
  API_OK(a, engine->create_execution_context());
  API_OK(b, engine->create_execution_context());

  std::vector<float> xa = {1, 2, 3, 4, -1, -2, 0.5f, 8};
  std::vector<float> xb = {0, 1, 0, 1, 2, 2, 2, 2, -3, 1, 4, -1};
  std::vector<float> ya(6, -7), za(8, -7), yb(9, -7), zb(12, -7);
  EXPECT_OK(a->set_input_shape("x", {2, 4}));
  EXPECT_OK(b->set_input_shape("x", {3, 4}));
  EXPECT_OK(a->set_tensor_address("x", xa.data()));
  EXPECT_OK(a->set_tensor_address("y", ya.data(), ya.size() * sizeof(float)));
  EXPECT_OK(a->set_tensor_address("z", za.data()));
  EXPECT_OK(b->set_tensor_address("x", xb.data(), xb.size() * sizeof(float)));
  EXPECT_OK(b->set_tensor_address("y", yb.data()));
  EXPECT_OK(b->set_tensor_address("z", zb.data()));
  EXPECT_EQ(a->tensor_address("y"), ya.data());
  EXPECT_EQ(a->tensor_address("nope"), nullptr);

  EXPECT_OK(a->execute());
  API_OK(event, create_event(Device::cpu()));
  EXPECT_OK(b->enqueue(cpu_stream(), event.get()));
  EXPECT_OK(event->synchronize());

  expect_near(ya, expected_y(xa));
  expect_near(yb, expected_y(xb));
  for (size_t i = 0; i < xa.size(); ++i) EXPECT_FLOAT_EQ(za[i], xa[i] * xa[i]);
  for (size_t i = 0; i < xb.size(); ++i) EXPECT_FLOAT_EQ(zb[i], xb[i] * xb[i]);
  EXPECT_EQ(*a->tensor_shape("y"), (Dims{2, 3}));
  EXPECT_EQ(*b->tensor_shape("z"), (Dims{3, 4}));

  // The binding holds the address: new values in the same memory give new results.
  for (float& v : xa) v = -v;
  EXPECT_OK(a->execute());
  expect_near(ya, expected_y(xa));

  // Contexts keep what they need of the engine alive.
  engine.reset();
  EXPECT_OK(b->execute());
  expect_near(yb, expected_y(xb));
}

TEST(PublicApi, ContextThreadCount) {
  const std::string bytes = build_dynamic_engine();
  API_OK(engine, Runtime().deserialize_engine(bytes.data(), bytes.size()));
  API_OK(ctx, engine->create_execution_context());
  EXPECT_EQ(ctx->threads(), 0);
  EXPECT_ERROR(ctx->set_threads(-2), "set_threads: -2 is negative");
  EXPECT_OK(ctx->set_threads(1));
  EXPECT_EQ(ctx->threads(), 1);
  std::vector<float> x = {1, 2, 3, 4, -1, -2, 0.5f, 8}, y(6, -7), z(8, -7);
  EXPECT_OK(ctx->set_input_shape("x", {2, 4}));
  EXPECT_OK(ctx->set_tensor_address("x", x.data()));
  EXPECT_OK(ctx->set_tensor_address("y", y.data()));
  EXPECT_OK(ctx->set_tensor_address("z", z.data()));
  EXPECT_OK(ctx->execute());
  expect_near(y, expected_y(x));
}

class RecordingProfiler final : public Profiler {
 public:
  void report_layer_time(const char* layer, float ms) noexcept override {
    layers.emplace_back(layer);
    if (!(ms >= 0)) negative = true;
  }
  std::vector<std::string> layers;
  bool negative = false;
};

TEST(PublicApi, ProfilerReceivesEveryLayer) {
  Network net = make_network({2, 4});
  BuilderConfig config;
  config.set_profiling_verbosity(ProfilingVerbosity::kDetailed);
  API_OK(bytes, Builder().build_serialized(net, config));
  API_OK(engine, Runtime().deserialize_engine(bytes));
  EXPECT_NE(engine->layer_information().find("fc + relu (FullyConnected): cpu."), std::string::npos)
      << engine->layer_information();
  API_OK(ctx, engine->create_execution_context());
  std::vector<float> x(8, 1.f), y(6), z(8);
  EXPECT_OK(ctx->set_tensor_address("x", x.data()));  // static shape: no set_input_shape needed
  EXPECT_OK(ctx->set_tensor_address("y", y.data()));
  EXPECT_OK(ctx->set_tensor_address("z", z.data()));
  RecordingProfiler profiler;
  ctx->set_profiler(&profiler);
  EXPECT_EQ(ctx->profiler(), &profiler);
  EXPECT_OK(ctx->execute());
  EXPECT_OK(ctx->execute());
  const std::vector<std::string> once = {"square", "fc + relu"};  // the optimizer fuses fc + relu
  ASSERT_EQ(profiler.layers.size(), 2 * static_cast<size_t>(engine->num_layers()));
  EXPECT_EQ(std::vector<std::string>(profiler.layers.begin(), profiler.layers.begin() + 2), once);
  EXPECT_EQ(std::vector<std::string>(profiler.layers.begin() + 2, profiler.layers.end()), once);
  EXPECT_FALSE(profiler.negative);
  ctx->set_profiler(nullptr);
  EXPECT_OK(ctx->execute());
  EXPECT_EQ(profiler.layers.size(), 4u);
}

TEST(PublicApi, SetInputShapeErrors) {
  const std::string bytes = build_dynamic_engine();
  API_OK(engine, Runtime().deserialize_engine(bytes));
  API_OK(ctx, engine->create_execution_context());
  EXPECT_ERROR(ctx->set_input_shape("x", {2, 4, 1}), "input 'x' takes rank 2 shapes [?, 4] within its profile");
  EXPECT_ERROR(ctx->set_input_shape("x", {2, 5}), "input 'x': dim 1 of [2, 5] must be 4");
  EXPECT_ERROR(ctx->set_input_shape("x", {5, 4}), "dim 0 of [5, 4] is outside [1, 4]");
  EXPECT_ERROR(ctx->set_input_shape("x", {0, 4}), "is outside [1, 4]");
  EXPECT_ERROR(ctx->set_input_shape("x", {kDynamicDim, 4}), "unknown dim 0");
  EXPECT_ERROR(ctx->set_input_shape("y", {2, 3}), "'y' is an output");
  EXPECT_ERROR(ctx->set_input_shape("w", {2, 4}), "no tensor 'w' (inputs: x; outputs: y, z)");
  EXPECT_OK(ctx->set_input_shape("x", {4, 4}));
  EXPECT_EQ(*ctx->tensor_shape("x"), (Dims{4, 4}));
}

TEST(PublicApi, ExecuteErrorsNameTheTensor) {
  const std::string bytes = build_dynamic_engine();
  API_OK(engine, Runtime().deserialize_engine(bytes));
  API_OK(ctx, engine->create_execution_context());
  std::vector<float> x(8, 1.f), y(6), z(8);
  EXPECT_ERROR(ctx->set_tensor_address("x", nullptr), "address given for 'x' is null");
  EXPECT_ERROR(ctx->set_tensor_address("q", x.data()), "no tensor 'q'");
  EXPECT_OK(ctx->set_tensor_address("y", y.data()));
  EXPECT_OK(ctx->set_tensor_address("z", z.data()));
  EXPECT_ERROR(ctx->execute(), "input 'x' has dynamic shape [?, 4]: call set_input_shape first");
  EXPECT_ERROR(ctx->tensor_shape("x").status(), "call set_input_shape first");
  EXPECT_ERROR(ctx->tensor_shape("y").status(), "known after a run");
  EXPECT_OK(ctx->set_input_shape("x", {2, 4}));
  EXPECT_ERROR(ctx->execute(), "input 'x' has no address");
  EXPECT_OK(ctx->set_tensor_address("x", x.data(), 4 * sizeof(float)));
  EXPECT_ERROR(ctx->execute(), "input 'x' of shape [2, 4] needs 32 bytes but its address was bound with 16");
  EXPECT_OK(ctx->set_tensor_address("x", x.data()));
  EXPECT_OK(ctx->set_tensor_address("y", y.data(), 2 * sizeof(float)));
  EXPECT_ERROR(ctx->execute(), "output 'y' of shape [2, 3] needs 24 bytes but its address holds 8");
  EXPECT_OK(ctx->set_tensor_address("y", y.data(), y.size() * sizeof(float)));
  EXPECT_OK(ctx->execute());
  EXPECT_ERROR(ctx->set_output_allocator("x", nullptr), "'x' is an input");
}

class VectorOutput final : public OutputAllocator {
 public:
  void* reallocate_output(const char* name, void* current, uint64_t bytes, uint64_t alignment) noexcept override {
    this->name = name;
    data.resize(bytes / sizeof(float));
    return data.data();
  }
  void notify_shape(const char* /*name*/, const Dims& d) noexcept override { dims = d; }
  std::string name;
  std::vector<float> data;
  Dims dims;
};

TEST(PublicApi, OutputAllocatorAndUserAllocator) {
  // The allocator must outlive the context (its tensors are released through it).
  TrackingAllocator tracking(cpu_allocator());
  const std::string bytes = build_dynamic_engine();
  API_OK(engine, Runtime().deserialize_engine(bytes));
  API_OK(ctx, engine->create_execution_context());
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  std::vector<float> z(12);
  VectorOutput y;
  EXPECT_OK(ctx->set_input_shape("x", {3, 4}));
  EXPECT_OK(ctx->set_tensor_address("x", x.data()));
  EXPECT_OK(ctx->set_output_allocator("y", &y));
  EXPECT_OK(ctx->set_tensor_address("z", z.data()));
  EXPECT_OK(ctx->set_allocator(&tracking));
  EXPECT_OK(ctx->execute());
  EXPECT_EQ(y.name, "y");
  EXPECT_EQ(y.dims, (Dims{3, 3}));
  expect_near(y.data, expected_y(x));
  // The run's own memory (the outputs before they are handed over) came from the user's allocator.
  EXPECT_GT(tracking.allocation_count(), 0u);
}

TEST(PublicApi, BadEngineBytesAreErrors) {
  Runtime runtime;
  EXPECT_FALSE(runtime.deserialize_engine(std::string_view()).is_ok());
  EXPECT_ERROR(runtime.deserialize_engine(nullptr, 0).status(), "empty");
  EXPECT_ERROR(runtime.deserialize_engine(nullptr, 5).status(), "null");
  EXPECT_FALSE(runtime.deserialize_engine(std::string_view("not an engine at all")).is_ok());
  const std::string bytes = build_dynamic_engine();
  ASSERT_FALSE(bytes.empty());
  // Every truncation, and a flipped byte at many places, is an error (never a crash).
  for (size_t n = 0; n < bytes.size(); n += std::max<size_t>(1, bytes.size() / 97))
    EXPECT_FALSE(runtime.deserialize_engine(std::string_view(bytes).substr(0, n)).is_ok()) << "truncated to " << n;
  // A flipped byte anywhere is an error: the prelude, the header and the body are all checksummed.
  for (size_t i = 0; i < bytes.size(); i += std::max<size_t>(1, bytes.size() / 61)) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    EXPECT_FALSE(runtime.deserialize_engine(bad).is_ok()) << "a flipped byte at " << i << " was accepted";
  }
  // Including the zero padding between the header JSON and the body (prelude: u64 header bytes at 16, u64 body
  // offset at 24), which neither checksum covers.
  uint64_t header_bytes = 0, body_offset = 0;
  std::memcpy(&header_bytes, bytes.data() + 16, 8);
  std::memcpy(&body_offset, bytes.data() + 24, 8);
  ASSERT_LE(64 + header_bytes, body_offset);
  for (uint64_t i = 64 + header_bytes; i < body_offset; ++i) {
    std::string bad = bytes;
    bad[i] = 'x';
    EXPECT_FALSE(runtime.deserialize_engine(bad).is_ok()) << "a changed padding byte at " << i << " was accepted";
  }
  EXPECT_ERROR(runtime.load_engine_file("/nonexistent/model.kengine").status(),
               "cannot read engine file '/nonexistent/model.kengine': no such file");
  EXPECT_ERROR(runtime.load_engine_file("/").status(), "not a regular file");
}

TEST(PublicApi, EngineFileRoundTrip) {
  const std::string bytes = build_dynamic_engine();
  const std::string path = ::testing::TempDir() + "public_api_test.kengine";
  std::ofstream(path, std::ios::binary) << bytes;
  API_OK(engine, Runtime().load_engine_file(path));
  EXPECT_EQ(engine->num_io_tensors(), 3);
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  auto truncated = Runtime().load_engine_file(path);
  EXPECT_ERROR(truncated.status(), path + ": ");
  std::remove(path.c_str());
}

TEST(PublicApi, BuilderConfigValidation) {
  BuilderConfig config;
  EXPECT_ERROR(config.set_profile_shapes("x", {1, 4}, {2, 4}, {4}), "must have the same rank (2, 2, 1)");
  EXPECT_ERROR(config.set_profile_shapes("x", {3, 4}, {2, 4}, {4, 4}),
               "dim 0 must satisfy min <= opt <= max but is 3, 2, 4");
  EXPECT_ERROR(config.set_profile_shapes("x", {1, 4}, {2, 4}, {kDynamicDim, 4}), "dim 0 is unknown");
  EXPECT_ERROR(config.set_profile_shapes("", {1}, {1}, {1}), "name is empty");
  EXPECT_TRUE(config.profile_shapes().empty());
  EXPECT_ERROR(config.set_optimization_level(6), "6 is not in 0..5");
  EXPECT_OK(config.set_optimization_level(0));
  EXPECT_EQ(config.optimization_level(), 0);
  EXPECT_ERROR(config.set_threads(-1), "negative");
  config.set_memory_pool_limit(MemoryPoolType::kWorkspace, 1 << 20);
  EXPECT_EQ(config.memory_pool_limit(MemoryPoolType::kWorkspace), 1u << 20);
  config.set_flag(BuilderFlag::kFp16);
  config.set_flag(BuilderFlag::kBf16);
  config.set_flag(BuilderFlag::kBf16, false);
  EXPECT_TRUE(config.flag(BuilderFlag::kFp16));
  EXPECT_FALSE(config.flag(BuilderFlag::kBf16));

  // Profiles are checked against the network at build time.
  Network net = make_network({kDynamicDim, 4});
  BuilderConfig unknown;
  EXPECT_OK(unknown.set_profile_shapes("image", {1, 4}, {1, 4}, {1, 4}));
  EXPECT_ERROR(Builder().build_serialized(net, unknown).status(),
               "names 'image', which is not an input of the network (inputs: x)");
  BuilderConfig rank;
  EXPECT_OK(rank.set_profile_shapes("x", {1, 4, 1}, {1, 4, 1}, {1, 4, 1}));
  EXPECT_ERROR(Builder().build_serialized(net, rank).status(), "has rank 3 but the input has shape [?, 4] (rank 2)");
  BuilderConfig fixed;
  EXPECT_OK(fixed.set_profile_shapes("x", {1, 2}, {1, 4}, {1, 8}));
  EXPECT_ERROR(Builder().build_serialized(net, fixed).status(),
               "gives dim 1 the range [2, 8] but the input fixes it to 4");
}

TEST(PublicApi, ReducedPrecisionFallsBackToFp32WithALogLine) {
  std::vector<std::string> lines;
  Logger& logger = Logger::global();
  const Severity level = logger.level();
  logger.set_level(Severity::kVerbose);
  logger.set_sink([&](Severity, std::string_view message) { lines.emplace_back(message); });
  Network net = make_network({2, 4});
  BuilderConfig config;
  config.set_flag(BuilderFlag::kFp16);
  auto bytes = Builder().build_serialized(net, config);
  logger.set_sink(nullptr);
  logger.set_level(level);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  auto has = [&](const std::string& text) {
    return std::any_of(lines.begin(), lines.end(),
                       [&](const std::string& l) { return l.find(text) != std::string::npos; });
  };
  // The CPU backend has no float16 fully connected kernel: the layer stays float32 and the log says why.
  EXPECT_TRUE(
      has("optimizer: precision: not lowering 'fc + relu' (FullyConnected): it runs in float32 (float16: no cpu "
          "kernel accepts"))
      << ::testing::PrintToString(lines);
  // The engine runs as an FP32 one.
  API_OK(engine, Runtime().deserialize_engine(*bytes));
  API_OK(ctx, engine->create_execution_context());
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8}, y(6), z(8);
  EXPECT_OK(ctx->set_tensor_address("x", x.data()));
  EXPECT_OK(ctx->set_tensor_address("y", y.data()));
  EXPECT_OK(ctx->set_tensor_address("z", z.data()));
  EXPECT_OK(ctx->execute());
  expect_near(y, expected_y(x));
}

TEST(PublicApi, NetworkDefinitionAndOnnxParser) {
  NetworkDefinition def(make_network({kDynamicDim, 4}));
  ASSERT_NE(def.network(), nullptr);
  EXPECT_EQ(def.input_names(), std::vector<std::string>{"x"});
  EXPECT_EQ(def.output_names(), (std::vector<std::string>{"y", "z"}));
  EXPECT_EQ(*def.tensor_shape("y"), (Dims{kDynamicDim, 3}));
  EXPECT_ERROR(def.tensor_dtype("q").status(), "no input or output 'q' (inputs: x; outputs: y, z)");
  API_OK(bytes, Builder().build_serialized(def, BuilderConfig()));
  EXPECT_FALSE(bytes.empty());

  OnnxParser parser;
  EXPECT_ERROR(parser.parse_from_file("/nonexistent/model.onnx").status(), "/nonexistent/model.onnx");
  EXPECT_ERROR(parser.set_input_shape("image", {kDynamicDim, 3}), "unknown dim");
  API_OK(model, parser.parse_from_file(KILN_TEST_MODEL));
  EXPECT_EQ(model.network(), nullptr);
  EXPECT_EQ(model.input_names(), std::vector<std::string>{"image"});
  EXPECT_GT(model.num_layers(), 0);
  API_OK(model_bytes, Builder().build_serialized(model, BuilderConfig()));
  API_OK(engine, Runtime().deserialize_engine(model_bytes));
  API_OK(image_dims, engine->tensor_shape("image"));
  std::vector<float> image(static_cast<size_t>(image_dims.numel()));
  for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<float>((i * 7) % 11) / 10.f;
  // Two contexts on one engine give the same detections.
  std::vector<std::vector<float>> boxes;
  for (int run = 0; run < 2; ++run) {
    API_OK(ctx, engine->create_execution_context());
    EXPECT_OK(ctx->set_tensor_address("image", image.data()));
    VectorOutput b, s, l;
    EXPECT_OK(ctx->set_output_allocator("boxes", &b));
    EXPECT_OK(ctx->set_output_allocator("scores", &s));
    EXPECT_OK(ctx->set_output_allocator("labels", &l));
    EXPECT_OK(ctx->execute());
    EXPECT_EQ(b.dims.rank(), 2);
    EXPECT_EQ(b.dims[0], s.dims[0]);
    boxes.push_back(b.data);
  }
  EXPECT_EQ(boxes[0], boxes[1]);
}

}  // namespace
}  // namespace kiln
