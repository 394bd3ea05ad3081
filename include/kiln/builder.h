#pragma once
/// The builder API (TensorRT's IBuilder / IBuilderConfig / INetworkDefinition / nvonnxparser in kiln
/// style): a network, made layer by layer (include/kiln/network.h) or parsed from ONNX, and a config
/// become a serialized engine that kiln::Runtime (include/kiln/runtime.h) loads.
///
///   kiln::OnnxParser parser;
///   auto network = parser.parse_from_file("model.onnx");        // Result<NetworkDefinition>
///   kiln::BuilderConfig config;
///   config.set_profile_shapes("image", {1, 3, 224, 224}, {8, 3, 224, 224}, {16, 3, 224, 224});
///   auto bytes = kiln::Builder().build_serialized(*network, config);   // Result<std::string>
///
/// Programs that use it link kiln::kiln (builder, ONNX importer and runtime).
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kiln/dims.h"
#include "kiln/dtype.h"
#include "kiln/network.h"
#include "kiln/runtime.h"
#include "kiln/status.h"

namespace kiln {

/// What the builder builds: a network made with the layer API, or a model OnnxParser read.
class NetworkDefinition {
 public:
  /// An empty network; add inputs, layers and outputs through network().
  NetworkDefinition();
  /// Takes a network made with the layer API.
  explicit NetworkDefinition(Network network);
  ~NetworkDefinition();
  NetworkDefinition(NetworkDefinition&&) noexcept;
  NetworkDefinition& operator=(NetworkDefinition&&) noexcept;
  NetworkDefinition(const NetworkDefinition&) = delete;
  NetworkDefinition& operator=(const NetworkDefinition&) = delete;

  /// The layer API of a network made by hand; nullptr for a model read by OnnxParser (its graph is
  /// built by the importer and is not editable layer by layer).
  Network* network();
  const Network* network() const;

  std::vector<std::string> input_names() const;
  std::vector<std::string> output_names() const;
  /// Element type and shape (kDynamicDim for dims known at run time) of an input or output.
  Result<DataType> tensor_dtype(const std::string& name) const;
  Result<Dims> tensor_shape(const std::string& name) const;
  /// Nodes of the graph (the importer may expand one ONNX node into several).
  int num_layers() const;
  /// A readable listing of the graph.
  std::string to_text() const;

 private:
  friend class Builder;
  friend class OnnxParser;
  struct State;
  explicit NetworkDefinition(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

/// Reads ONNX models into network definitions (TensorRT's nvonnxparser::IParser).
class OnnxParser {
 public:
  OnnxParser() = default;
  /// A folder external data may also resolve into (model-hub caches keep blobs behind symlinks).
  void set_external_data_root(std::string folder) { external_data_root_ = std::move(folder); }
  /// Bytes of initializers, external data and folded constants one parse may hold (0: half of memory).
  void set_memory_budget(uint64_t bytes) { memory_budget_ = bytes; }
  /// Fixes an input's dynamic dims at import (e.g. the batch); the model's static dims must agree.
  Status set_input_shape(const std::string& input, const Dims& dims);

  /// Imports `path`; errors (the importer's) name the file and every node at fault.
  Result<NetworkDefinition> parse_from_file(const std::string& path);
  /// Imports a serialized model; `base_dir` resolves external data, `source` names it in errors.
  Result<NetworkDefinition> parse(const std::string& bytes, const std::string& base_dir = ".",
                                  const std::string& source = "<memory>");
  /// Warnings of the last parse (also logged at warning level).
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  std::string external_data_root_;
  uint64_t memory_budget_ = 0;
  std::map<std::string, Dims> input_shapes_;
  std::vector<std::string> warnings_;
};

/// Precisions the builder may choose besides FP32 (TensorRT's BuilderFlag). Layers without a kernel
/// in a requested precision run in FP32, with a verbose log line naming the layer; softmax, norms and
/// reductions always run in FP32. TF32 concerns the CUDA backend's matrix kernels (cuBLASLt GEMMs, cuDNN
/// convolutions): with it, their float32 tactics include ones that round inputs to TF32 (suffix "+tf32"), timed
/// like the others. TF32 is on by default, as in TensorRT; clear it for exact float32 products.
enum class BuilderFlag : uint32_t { kFp16 = 1, kBf16 = 2, kTf32 = 4 };

enum class MemoryPoolType { kWorkspace };

/// How an engine is built. Setters validate at once and say what is wrong.
class BuilderConfig {
 public:
  void set_flag(BuilderFlag flag, bool on = true);
  bool flag(BuilderFlag flag) const { return (flags_ & static_cast<uint32_t>(flag)) != 0; }
  uint32_t flags() const { return flags_; }

  /// The most scratch memory a layer may use (bytes; 0: no limit beyond the device's). Passed to the
  /// builder for its memory planner (today's kernels allocate their scratch memory at run time).
  void set_memory_pool_limit(MemoryPoolType pool, uint64_t bytes);
  uint64_t memory_pool_limit(MemoryPoolType pool) const;

  /// The shapes a dynamic input accepts: min <= opt <= max per dim, all of one rank; the builder checks
  /// the rank and static dims against the network. Setting an input again replaces its range.
  Status set_profile_shapes(const std::string& input, const Dims& min, const Dims& opt, const Dims& max);
  const std::map<std::string, ShapeRange>& profile_shapes() const { return profiles_; }

  /// A file that keeps kernel timings across builds (read before timing, updated after).
  void set_timing_cache_path(std::string path) { timing_cache_path_ = std::move(path); }
  const std::string& timing_cache_path() const { return timing_cache_path_; }

  /// 0 (fastest build: the first accepting kernel per layer) to 5 (most tactics timed); default 3.
  Status set_optimization_level(int level);
  int optimization_level() const { return optimization_level_; }

  /// What the engine keeps about its layers (Engine::layer_information); default kLayerNamesOnly.
  void set_profiling_verbosity(ProfilingVerbosity verbosity) { verbosity_ = verbosity; }
  ProfilingVerbosity profiling_verbosity() const { return verbosity_; }

  /// Threads the build may use (0: one per core). Passed to the builder like the timing cache.
  Status set_threads(int threads);
  int threads() const { return threads_; }

  /// Runs layer `layer` (or the fused layer it becomes part of) in `precision` (float32, float16 or
  /// bfloat16) whatever the flags say; without a fast kernel in it, the layer runs on the reference kernels.
  Status set_layer_precision(const std::string& layer, DataType precision);
  const std::map<std::string, DataType>& layer_precisions() const { return layer_precisions_; }

  /// The graph optimizer: on by default; a pass can be switched off by name (kiln exec --verbose lists them).
  void set_optimizer_enabled(bool on) { optimizer_ = on; }
  bool optimizer_enabled() const { return optimizer_; }
  void disable_pass(const std::string& name) { disabled_passes_.insert(name); }
  const std::set<std::string>& disabled_passes() const { return disabled_passes_; }

 private:
  uint32_t flags_ = static_cast<uint32_t>(BuilderFlag::kTf32);  // TensorRT's default
  uint64_t workspace_limit_ = 0;
  std::map<std::string, ShapeRange> profiles_;
  std::string timing_cache_path_;
  int optimization_level_ = 3;
  std::map<std::string, DataType> layer_precisions_;
  bool optimizer_ = true;
  std::set<std::string> disabled_passes_;
  ProfilingVerbosity verbosity_ = ProfilingVerbosity::kLayerNamesOnly;
  int threads_ = 0;
};

/// Builds serialized engines (for the CPU backend today).
class Builder {
 public:
  /// The engine's bytes, for Runtime::deserialize_engine or a file. Errors name the input, profile or
  /// node at fault (every node no kernel accepts, with the reasons).
  Result<std::string> build_serialized(const NetworkDefinition& network, const BuilderConfig& config) const;
  Result<std::string> build_serialized(const Network& network, const BuilderConfig& config) const;
};

}  // namespace kiln
