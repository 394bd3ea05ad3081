// The network handles: Network, NetworkTensor, Layer, and the shared state behind them.
#include <cstring>

#include "graph/network/network_internal.h"

namespace kiln {

Graph& network_graph(Network& network) { return detail::NetworkState::of(network).graph; }
const Graph& network_graph(const Network& network) { return detail::NetworkState::of(network).graph; }

const char* layer_type_name(LayerType type) {
  switch (type) {
    case LayerType::kConvolution: return "Convolution";
    case LayerType::kDeconvolution: return "Deconvolution";
    case LayerType::kPooling: return "Pooling";
    case LayerType::kActivation: return "Activation";
    case LayerType::kFullyConnected: return "FullyConnected";
    case LayerType::kMatrixMultiply: return "MatrixMultiply";
    case LayerType::kScale: return "Scale";
    case LayerType::kElementWise: return "ElementWise";
    case LayerType::kUnary: return "Unary";
    case LayerType::kShuffle: return "Shuffle";
    case LayerType::kReduce: return "Reduce";
    case LayerType::kArgReduce: return "ArgReduce";
    case LayerType::kSoftmax: return "Softmax";
    case LayerType::kLogSoftmax: return "LogSoftmax";
    case LayerType::kConcatenation: return "Concatenation";
    case LayerType::kSplit: return "Split";
    case LayerType::kSlice: return "Slice";
    case LayerType::kPadding: return "Padding";
    case LayerType::kExpand: return "Expand";
    case LayerType::kTile: return "Tile";
    case LayerType::kConstant: return "Constant";
    case LayerType::kGather: return "Gather";
    case LayerType::kGatherElements: return "GatherElements";
    case LayerType::kGatherND: return "GatherND";
    case LayerType::kScatter: return "Scatter";
    case LayerType::kTopK: return "TopK";
    case LayerType::kOneHot: return "OneHot";
    case LayerType::kResize: return "Resize";
    case LayerType::kLrn: return "LRN";
    case LayerType::kBatchNormalization: return "BatchNormalization";
    case LayerType::kLayerNormalization: return "LayerNormalization";
    case LayerType::kInstanceNormalization: return "InstanceNormalization";
    case LayerType::kCast: return "Cast";
    case LayerType::kWhere: return "Where";
    case LayerType::kRnn: return "RNN";
    case LayerType::kIdentity: return "Identity";
    case LayerType::kShape: return "Shape";
    case LayerType::kSize: return "Size";
    case LayerType::kPlugin: return "Plugin";
  }
  return "?";
}

namespace detail {

NetworkTensor* NetworkState::tensor_for(Value* v) {
  if (!v) return nullptr;
  auto& slot = tensors[v];
  if (!slot) slot = std::make_unique<NetworkTensor>(this, v);
  return slot.get();
}

Layer* NetworkState::layer_for(const Node* node) const {
  for (auto& l : layers)
    if (l->node() == node) return l.get();
  return nullptr;
}

std::string NetworkState::next_layer_name(std::string_view op) const {
  for (size_t i = layers.size();; ++i) {
    std::string name = str_cat(op, "_", i);
    if (!graph.find_node(name)) return name;
  }
}

Status NetworkState::check_tensor(const NetworkTensor* t, std::string_view what) const {
  if (!t) return invalid_argument(what, " is null");
  auto it = tensors.find(t->value());
  if (it == tensors.end() || it->second.get() != t) return invalid_argument(what, " is not a tensor of this network");
  return Status::ok();
}

Result<Value*> NetworkState::add_weights(const std::string& layer, std::string_view what, const Weights& w,
                                         const Dims& dims) {
  if (w.count != dims.numel())
    return invalid_argument(what, " holds ", w.count, " values but ", dims.to_string(), " needs ", dims.numel());
  if (w.count > 0 && !w.values) return invalid_argument(what, " has a count of ", w.count, " but no values");
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(w.dtype, dims));
  if (w.count > 0) std::memcpy(t.raw(), w.values, t.nbytes());
  std::string name = str_cat(layer, ".", what);
  for (int i = 1; graph.find_value(name); ++i) name = str_cat(layer, ".", what, "_", i);
  return graph.add_constant(std::move(name), std::move(t));
}

Result<Value*> NetworkState::add_int64s(const std::string& layer, std::string_view what,
                                        const std::vector<int64_t>& v) {
  return add_weights(layer, what, Weights{DataType::kInt64, v.data(), static_cast<int64_t>(v.size())},
                     Dims{static_cast<int64_t>(v.size())});
}

Status NetworkState::reinfer(Node* node, std::unique_ptr<Attrs> saved) {
  Status st = graph.infer_shapes();
  if (st.is_ok()) return st;
  node->attrs = std::move(saved);
  Status restored = graph.infer_shapes();
  if (!restored.is_ok())
    return internal_error("could not restore the network after a failed change: ", restored.message());
  return std::move(st).with_node(node->context());
}

}  // namespace detail

// ---- NetworkTensor ----

const std::string& NetworkTensor::name() const { return value_->name; }

Status NetworkTensor::set_name(std::string name) {
  if (name.empty()) return invalid_argument("tensor '", value_->name, "': a name must not be empty");
  if (name == value_->name) return Status::ok();
  if (net_->graph.find_value(name))
    return invalid_argument("tensor '", value_->name, "' cannot be renamed '", name, "': another tensor has that name");
  return net_->graph.rename_value(value_, std::move(name));
}

DataType NetworkTensor::dtype() const { return value_->dtype; }
Dims NetworkTensor::dims() const { return value_->dims; }
bool NetworkTensor::is_network_input() const { return value_->is_graph_input; }
bool NetworkTensor::is_network_output() const {
  for (Value* v : net_->graph.outputs())
    if (v == value_) return true;
  return false;
}

// ---- Layer ----

const std::string& Layer::name() const { return node_->name; }

Status Layer::set_name(std::string name) {
  if (name.empty()) return invalid_argument("a layer name must not be empty").with_node(node_->context());
  if (name == node_->name) return Status::ok();
  if (net_->graph.find_node(name))
    return invalid_argument("cannot rename the layer '", name, "': another layer has that name")
        .with_node(node_->context());
  return net_->graph.rename_node(node_, std::move(name));
}

int Layer::num_inputs() const { return static_cast<int>(node_->inputs.size()); }
NetworkTensor* Layer::input(int i) const {
  if (i < 0 || i >= num_inputs()) return nullptr;
  return net_->tensor_for(node_->inputs[i]);
}
int Layer::num_outputs() const { return static_cast<int>(node_->outputs.size()); }
NetworkTensor* Layer::output(int i) const {
  if (i < 0 || i >= num_outputs()) return nullptr;
  return net_->tensor_for(node_->outputs[i]);
}

// ---- Network ----

Network::Network() : state_(std::make_unique<detail::NetworkState>()) {}
Network::~Network() = default;
Network::Network(Network&&) noexcept = default;
Network& Network::operator=(Network&&) noexcept = default;

Result<NetworkTensor*> Network::add_input(const std::string& name, DataType dtype, const Dims& dims) {
  if (name.empty()) return invalid_argument("add_input: a network input needs a name");
  for (int64_t d : dims)
    if (d < 0 && d != kDynamicDim)
      return invalid_argument("add_input: input '", name, "' has dims ", dims.to_string(),
                              "; a dim must be >= 0 or kDynamicDim");
  auto v = state_->graph.add_input(name, dtype, dims);
  if (!v) return v.take_status().with_prefix("add_input");
  NetworkTensor* t = state_->tensor_for(*v);
  state_->inputs.push_back(t);
  return t;
}

Status Network::mark_output(NetworkTensor* tensor) {
  KILN_RETURN_IF_ERROR(state_->check_tensor(tensor, "mark_output: the tensor"));
  if (tensor->is_network_output()) return Status::ok();
  KILN_RETURN_IF_ERROR(state_->graph.mark_output(tensor->value()));
  state_->outputs.push_back(tensor);
  return Status::ok();
}

int Network::num_inputs() const { return static_cast<int>(state_->inputs.size()); }
NetworkTensor* Network::input(int i) const { return i >= 0 && i < num_inputs() ? state_->inputs[i] : nullptr; }
int Network::num_outputs() const { return static_cast<int>(state_->outputs.size()); }
NetworkTensor* Network::output(int i) const { return i >= 0 && i < num_outputs() ? state_->outputs[i] : nullptr; }
int Network::num_layers() const { return static_cast<int>(state_->layers.size()); }
Layer* Network::layer(int i) const { return i >= 0 && i < num_layers() ? state_->layers[i].get() : nullptr; }

Layer* Network::find_layer(std::string_view name) const {
  for (auto& l : state_->layers)
    if (l->name() == name) return l.get();
  return nullptr;
}

NetworkTensor* Network::find_tensor(std::string_view name) const {
  Value* v = state_->graph.find_value(name);
  return v ? state_->tensor_for(v) : nullptr;
}

Status Network::validate() const {
  if (state_->outputs.empty()) return invalid_argument("the network has no outputs: call mark_output");
  return state_->graph.verify();
}

std::string Network::to_text() const { return state_->graph.to_text(); }

}  // namespace kiln
