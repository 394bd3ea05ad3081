// The public builder API (include/kiln/builder.h) over the builder and the ONNX importer.
#include <optional>

#include "builder/builder.h"
#include "graph/engine_format.h"
#include "graph/network/network_internal.h"
#include "kiln/builder.h"
#include "kiln/logger.h"
#include "onnx/importer.h"
#include "runtime/api_profiles.h"

namespace kiln {

// ---- NetworkDefinition ----

struct NetworkDefinition::State {
  std::optional<Network> network;   // made with the layer API
  std::unique_ptr<Graph> imported;  // or read by OnnxParser

  const Graph& graph() const { return network ? network_graph(*network) : *imported; }
};

NetworkDefinition::NetworkDefinition() : state_(std::make_unique<State>()) { state_->network.emplace(); }
NetworkDefinition::NetworkDefinition(Network network) : state_(std::make_unique<State>()) {
  state_->network.emplace(std::move(network));
}
NetworkDefinition::NetworkDefinition(std::unique_ptr<State> state) : state_(std::move(state)) {}
NetworkDefinition::~NetworkDefinition() = default;
NetworkDefinition::NetworkDefinition(NetworkDefinition&&) noexcept = default;
NetworkDefinition& NetworkDefinition::operator=(NetworkDefinition&&) noexcept = default;

Network* NetworkDefinition::network() { return state_ && state_->network ? &*state_->network : nullptr; }
const Network* NetworkDefinition::network() const { return state_ && state_->network ? &*state_->network : nullptr; }

namespace {

std::string value_names(const std::vector<Value*>& values) {
  std::string s;
  for (const Value* v : values) s += (s.empty() ? "" : ", ") + v->name;
  return s.empty() ? "none" : s;
}

Result<const Value*> find_io(const Graph& g, const std::string& name) {
  for (const Value* v : g.inputs())
    if (v->name == name) return v;
  for (const Value* v : g.outputs())
    if (v->name == name) return v;
  return invalid_argument("the network has no input or output '", name, "' (inputs: ", value_names(g.inputs()),
                          "; outputs: ", value_names(g.outputs()), ")");
}

}  // namespace

std::vector<std::string> NetworkDefinition::input_names() const {
  std::vector<std::string> out;
  for (const Value* v : state_->graph().inputs()) out.push_back(v->name);
  return out;
}

std::vector<std::string> NetworkDefinition::output_names() const {
  std::vector<std::string> out;
  for (const Value* v : state_->graph().outputs()) out.push_back(v->name);
  return out;
}

Result<DataType> NetworkDefinition::tensor_dtype(const std::string& name) const {
  KILN_ASSIGN_OR_RETURN(const Value* v, find_io(state_->graph(), name));
  return v->dtype;
}

Result<Dims> NetworkDefinition::tensor_shape(const std::string& name) const {
  KILN_ASSIGN_OR_RETURN(const Value* v, find_io(state_->graph(), name));
  return v->dims;
}

int NetworkDefinition::num_layers() const { return static_cast<int>(state_->graph().nodes().size()); }

std::string NetworkDefinition::to_text() const { return state_->graph().to_text(); }

// ---- OnnxParser ----

Status OnnxParser::set_input_shape(const std::string& input, const Dims& dims) {
  if (input.empty()) return invalid_argument("OnnxParser::set_input_shape: the input name is empty");
  if (!dims.is_static())
    return invalid_argument("OnnxParser::set_input_shape: shape ", dims.to_string(), " for input '", input,
                            "' has an unknown dim; give every dim's size");
  input_shapes_[input] = dims;
  return Status::ok();
}

Result<NetworkDefinition> OnnxParser::parse_from_file(const std::string& path) {
  onnx_import::ImportOptions options;
  options.input_dims = input_shapes_;
  options.external_data_root = external_data_root_;
  options.memory_budget = memory_budget_;
  warnings_.clear();
  KILN_ASSIGN_OR_RETURN(onnx_import::ImportedModel model, onnx_import::import_file(path, options));
  for (const std::string& w : model.warnings) log_warning(path, ": ", w);
  warnings_ = std::move(model.warnings);
  auto state = std::make_unique<NetworkDefinition::State>();
  state->imported = std::move(model.graph);
  return NetworkDefinition(std::move(state));
}

Result<NetworkDefinition> OnnxParser::parse(const std::string& bytes, const std::string& base_dir,
                                            const std::string& source) {
  onnx_import::ImportOptions options;
  options.input_dims = input_shapes_;
  options.external_data_root = external_data_root_;
  options.memory_budget = memory_budget_;
  warnings_.clear();
  KILN_ASSIGN_OR_RETURN(onnx_import::ImportedModel model, onnx_import::import_bytes(bytes, base_dir, source, options));
  for (const std::string& w : model.warnings) log_warning(source, ": ", w);
  warnings_ = std::move(model.warnings);
  auto state = std::make_unique<NetworkDefinition::State>();
  state->imported = std::move(model.graph);
  return NetworkDefinition(std::move(state));
}

// ---- BuilderConfig ----

Status BuilderConfig::set_layer_precision(const std::string& layer, DataType precision) {
  if (precision != DataType::kFloat32 && precision != DataType::kFloat16 && precision != DataType::kBFloat16)
    return invalid_argument("set_layer_precision('", layer, "'): a layer runs in float32, float16 or bfloat16, not ",
                            dtype_name(precision));
  if (layer.empty()) return invalid_argument("set_layer_precision: give the layer's name");
  layer_precisions_[layer] = precision;
  return Status::ok();
}

void BuilderConfig::set_flag(BuilderFlag flag, bool on) {
  if (on)
    flags_ |= static_cast<uint32_t>(flag);
  else
    flags_ &= ~static_cast<uint32_t>(flag);
}

void BuilderConfig::set_memory_pool_limit(MemoryPoolType pool, uint64_t bytes) {
  if (pool == MemoryPoolType::kWorkspace) workspace_limit_ = bytes;
}

uint64_t BuilderConfig::memory_pool_limit(MemoryPoolType pool) const {
  return pool == MemoryPoolType::kWorkspace ? workspace_limit_ : 0;
}

Status BuilderConfig::set_profile_shapes(const std::string& input, const Dims& min, const Dims& opt, const Dims& max) {
  const std::string what = str_cat("optimization profile of '", input, "' (min ", min.to_string(), ", opt ",
                                   opt.to_string(), ", max ", max.to_string(), ")");
  if (input.empty()) return invalid_argument("set_profile_shapes: the input name is empty");
  if (min.rank() != opt.rank() || opt.rank() != max.rank())
    return invalid_argument(what, ": min, opt and max must have the same rank (", min.rank(), ", ", opt.rank(), ", ",
                            max.rank(), ")");
  for (int i = 0; i < min.rank(); ++i) {
    if (min[i] < 0 || opt[i] < 0 || max[i] < 0)
      return invalid_argument(what, ": dim ", i, " is unknown; give every dim's size");
    if (min[i] > opt[i] || opt[i] > max[i])
      return invalid_argument(what, ": dim ", i, " must satisfy min <= opt <= max but is ", min[i], ", ", opt[i], ", ",
                              max[i]);
  }
  profiles_[input] = ShapeRange{min, opt, max};
  return Status::ok();
}

Status BuilderConfig::set_optimization_level(int level) {
  if (level < 0 || level > 5)
    return invalid_argument("set_optimization_level: ", level, " is not in 0..5 (0 builds fastest, 5 times the most)");
  optimization_level_ = level;
  return Status::ok();
}

Status BuilderConfig::set_threads(int threads) {
  if (threads < 0) return invalid_argument("set_threads: ", threads, " is negative (0 means one per core)");
  threads_ = threads;
  return Status::ok();
}

// ---- Builder ----

namespace {

Result<std::string> build(const Graph& g, const BuilderConfig& config) {
  const ShapeRanges profiles(config.profile_shapes().begin(), config.profile_shapes().end());
  KILN_RETURN_IF_ERROR(check_profiles(g, profiles, "BuilderConfig"));
  BuildOptions options;
  options.passes.enabled = config.optimizer_enabled();
  options.passes.disabled = config.disabled_passes();
  options.passes.precision.fp16 = config.flag(BuilderFlag::kFp16);
  options.passes.precision.bf16 = config.flag(BuilderFlag::kBf16);
  options.passes.precision.tf32 = config.flag(BuilderFlag::kTf32);
  options.passes.precision.pinned = config.layer_precisions();
  options.workspace_limit = config.memory_pool_limit(MemoryPoolType::kWorkspace);
  options.optimization_level = config.optimization_level();
  options.timing_cache_path = config.timing_cache_path();
  options.threads = config.threads();
  // The profiles and the verbosity travel in the engine header, where the runtime API reads them.
  if (!profiles.empty()) options.header_extra[kProfilesHeaderKey] = profiles_to_json(profiles);
  options.header_extra[kVerbosityHeaderKey] = std::string(verbosity_name(config.profiling_verbosity()));
  return build_engine(g, options);
}

}  // namespace

Result<std::string> Builder::build_serialized(const NetworkDefinition& network, const BuilderConfig& config) const {
  if (!network.state_) return invalid_argument("build_serialized: the network definition was moved from");
  return build(network.state_->graph(), config);
}

Result<std::string> Builder::build_serialized(const Network& network, const BuilderConfig& config) const {
  return build(network_graph(network), config);
}

}  // namespace kiln
