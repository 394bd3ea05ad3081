// Network::add_* : one method per layer, each checking its arguments and adding one graph node.
#include <cstring>

#include "graph/network/network_internal.h"
#include "ops/activation/activation.h"
#include "ops/constant/constant.h"
#include "ops/convolution/convolution.h"
#include "ops/elementwise/elementwise.h"
#include "ops/indexing/indexing.h"
#include "ops/matmul/matmul.h"
#include "ops/normalization/normalization.h"
#include "ops/plugin/plugin_attrs.h"
#include "ops/pooling/pooling.h"
#include "ops/reduce/reduce.h"
#include "ops/resize/resize.h"
#include "ops/rnn/rnn.h"
#include "ops/scale/scale.h"
#include "ops/shuffle/shuffle.h"
#include "ops/softmax/softmax.h"
#include "ops/tensor/tensor_info.h"
#include "ops/unary/unary.h"

namespace kiln {

// The public enums mirror the op enums where their orders agree.
static_assert(static_cast<int>(ElementWiseOperation::kGreaterOrEqual) ==
              static_cast<int>(ElementWiseOp::kGreaterOrEqual));
static_assert(static_cast<int>(UnaryOperation::kIsInf) == static_cast<int>(UnaryOp::kIsInf));
static_assert(static_cast<int>(ReduceOperation::kSumSquare) == static_cast<int>(ReduceOp::kSumSquare));
static_assert(static_cast<int>(ReduceOperation::kAvg) == static_cast<int>(ReduceOp::kMean));
static_assert(static_cast<int>(ScaleLayerMode::kElementwise) == static_cast<int>(ScaleMode::kElementwise));
static_assert(static_cast<int>(FillMode::kWrap) == static_cast<int>(PadMode::kWrap));
static_assert(static_cast<int>(ResizeInterpolation::kCubic) == static_cast<int>(ResizeMode::kCubic));
static_assert(static_cast<int>(ResizeCoordinates::kAsymmetric) == static_cast<int>(ResizeCoordinateMode::kAsymmetric));
static_assert(static_cast<int>(ResizeRounding::kCeil) == static_cast<int>(ResizeNearestMode::kCeil));
static_assert(static_cast<int>(RecurrenceDirection::kBidirectional) == static_cast<int>(RnnDirection::kBidirectional));

namespace {

using detail::NetworkState;

ActivationKind activation_kind(ActivationType t) {
  switch (t) {
    case ActivationType::kRelu: return ActivationKind::kRelu;
    case ActivationType::kLeakyRelu: return ActivationKind::kLeakyRelu;
    case ActivationType::kElu: return ActivationKind::kElu;
    case ActivationType::kSelu: return ActivationKind::kSelu;
    case ActivationType::kSigmoid: return ActivationKind::kSigmoid;
    case ActivationType::kHardSigmoid: return ActivationKind::kHardSigmoid;
    case ActivationType::kTanh: return ActivationKind::kTanh;
    case ActivationType::kScaledTanh: return ActivationKind::kScaledTanh;
    case ActivationType::kSoftplus: return ActivationKind::kSoftplus;
    case ActivationType::kSoftsign: return ActivationKind::kSoftsign;
    case ActivationType::kClip: return ActivationKind::kClip;
    case ActivationType::kGelu: return ActivationKind::kGelu;
    case ActivationType::kSilu: return ActivationKind::kSilu;
    case ActivationType::kHardSwish: return ActivationKind::kHardSwish;
    case ActivationType::kMish: return ActivationKind::kMish;
    case ActivationType::kThresholdedRelu: return ActivationKind::kThresholdedRelu;
    case ActivationType::kCelu: return ActivationKind::kCelu;
  }
  return ActivationKind::kRelu;
}

/// One add_* call in progress: the layer's name and op, and errors that name both.
class Call {
 public:
  Call(NetworkState& s, const char* method, std::string_view op)
      : s_(s), method_(method), op_(op), name_(s.next_layer_name(op)) {}

  const std::string& name() const { return name_; }
  NetworkState& state() { return s_; }

  Status fail(Status st) const {
    return std::move(st).with_prefix(method_).with_node({static_cast<int>(s_.layers.size()), name_, op_});
  }
  template <class... Args>
  Status error(Args&&... args) const {
    return fail(invalid_argument(std::forward<Args>(args)...));
  }
  /// The graph value of `t`, or an error naming the argument.
  Result<Value*> value(const NetworkTensor* t, std::string_view what) const {
    Status st = s_.check_tensor(t, what);
    if (!st.is_ok()) return fail(std::move(st));
    return t->value();
  }
  Result<Value*> weights(std::string_view what, const Weights& w, const Dims& dims) {
    auto v = s_.add_weights(name_, what, w, dims);
    if (!v) return fail(v.take_status());
    return *v;
  }
  Result<Value*> int64s(std::string_view what, const std::vector<int64_t>& v) {
    auto r = s_.add_int64s(name_, what, v);
    if (!r) return fail(r.take_status());
    return *r;
  }
  /// Adds the node (trailing null inputs dropped) and its layer handle.
  template <class L = Layer, class A>
  Result<L*> add(LayerType type, A attrs, std::vector<Value*> inputs) {
    while (!inputs.empty() && !inputs.back()) inputs.pop_back();
    auto node = s_.graph.add_node(op_, name_, std::make_unique<A>(std::move(attrs)), std::move(inputs));
    if (!node) return fail(node.take_status());
    auto layer = std::make_unique<L>(&s_, *node, type);
    L* raw = layer.get();
    s_.layers.push_back(std::move(layer));
    return raw;
  }

 private:
  NetworkState& s_;
  const char* method_;
  std::string op_;
  std::string name_;
};

// NOLINTNEXTLINE(bugprone-macro-parentheses): `var` names the declared variable
#define KILN_NET_VALUE(var, call, tensor, what) KILN_ASSIGN_OR_RETURN(Value* var, (call).value(tensor, what))

int64_t product(const Dims& d, int from = 0) {
  int64_t p = 1;
  for (int i = from; i < d.rank(); ++i) {
    if (d[i] < 0) return kDynamicDim;
    p *= d[i];
  }
  return p;
}

Status check_window(const Call& c, const Dims& x, const Dims& window, std::string_view what) {
  const int nk = window.rank();
  if (nk < 1 || nk > 3) return c.error(what, " ", window.to_string(), " must have 1 to 3 dims");
  for (int64_t k : window)
    if (k <= 0) return c.error(what, " ", window.to_string(), " must be positive");
  if (x.rank() != nk + 2)
    return c.error("input has shape ", x.to_string(), " (rank ", x.rank(), ") but a ", nk, "-D ", what, " needs rank ",
                   nk + 2, " [N, C, spatial...]");
  if (x[1] == kDynamicDim) return c.error("input has shape ", x.to_string(), "; the channel dim must be known");
  return Status::ok();
}

Dims with_front(std::initializer_list<int64_t> front, const Dims& rest) {
  Dims d;
  for (int64_t v : front) d.push_back(v);
  for (int64_t v : rest) d.push_back(v);
  return d;
}

}  // namespace

Result<ConvolutionLayer*> Network::add_convolution(NetworkTensor* input, int64_t num_outputs, const Dims& kernel_dims,
                                                   Weights weights, Weights bias) {
  Call c(*state_, "add_convolution", "Convolution");
  KILN_NET_VALUE(x, c, input, "input");
  KILN_RETURN_IF_ERROR(check_window(c, x->dims, kernel_dims, "kernel"));
  if (num_outputs <= 0) return c.error("num_outputs is ", num_outputs, "; it must be positive");
  const int64_t channels = x->dims[1], per = num_outputs * kernel_dims.numel();
  const int64_t cin = weights.count / per;
  if (weights.count <= 0 || weights.count % per != 0 || cin > channels || channels % cin != 0 ||
      num_outputs % (channels / cin) != 0)
    return c.error("weights hold ", weights.count, " values but [num_outputs, C / groups, kernel...] = [", num_outputs,
                   ", ", channels, ", ", kernel_dims.to_string().substr(1), " needs ", per * channels,
                   " (or that divided by a group count dividing C and num_outputs)");
  ConvolutionAttrs a;
  a.kernel_shape = kernel_dims.to_vector();
  a.group = channels / cin;
  KILN_ASSIGN_OR_RETURN(Value * w, c.weights("weight", weights, with_front({num_outputs, cin}, kernel_dims)));
  Value* b = nullptr;
  if (!bias.empty()) {
    KILN_ASSIGN_OR_RETURN(b, c.weights("bias", bias, Dims{num_outputs}));
  }
  return c.add<ConvolutionLayer>(LayerType::kConvolution, a, {x, w, b});
}

Result<DeconvolutionLayer*> Network::add_deconvolution(NetworkTensor* input, int64_t num_outputs,
                                                       const Dims& kernel_dims, Weights weights, Weights bias) {
  Call c(*state_, "add_deconvolution", "Deconvolution");
  KILN_NET_VALUE(x, c, input, "input");
  KILN_RETURN_IF_ERROR(check_window(c, x->dims, kernel_dims, "kernel"));
  if (num_outputs <= 0) return c.error("num_outputs is ", num_outputs, "; it must be positive");
  const int64_t channels = x->dims[1], per = channels * kernel_dims.numel();
  const int64_t kout = weights.count / per;
  if (weights.count <= 0 || weights.count % per != 0 || num_outputs % kout != 0 || channels % (num_outputs / kout) != 0)
    return c.error("weights hold ", weights.count, " values but [C, num_outputs / groups, kernel...] = [", channels,
                   ", ", num_outputs, ", ", kernel_dims.to_string().substr(1), " needs ", per * num_outputs,
                   " (or that divided by a group count dividing C and num_outputs)");
  DeconvolutionAttrs a;
  a.kernel_shape = kernel_dims.to_vector();
  a.group = num_outputs / kout;
  KILN_ASSIGN_OR_RETURN(Value * w, c.weights("weight", weights, with_front({channels, kout}, kernel_dims)));
  Value* b = nullptr;
  if (!bias.empty()) {
    KILN_ASSIGN_OR_RETURN(b, c.weights("bias", bias, Dims{num_outputs}));
  }
  return c.add<DeconvolutionLayer>(LayerType::kDeconvolution, a, {x, w, b});
}

static PoolingMode pooling_mode(PoolingType t) {
  return t == PoolingType::kMax       ? PoolingMode::kMax
         : t == PoolingType::kAverage ? PoolingMode::kAverage
                                      : PoolingMode::kLp;
}

Result<PoolingLayer*> Network::add_pooling(NetworkTensor* input, PoolingType type, const Dims& window) {
  Call c(*state_, "add_pooling", "Pooling");
  KILN_NET_VALUE(x, c, input, "input");
  KILN_RETURN_IF_ERROR(check_window(c, x->dims, window, "window"));
  PoolingAttrs a;
  a.mode = pooling_mode(type);
  a.kernel_shape = window.to_vector();
  return c.add<PoolingLayer>(LayerType::kPooling, a, {x});
}

Result<PoolingLayer*> Network::add_global_pooling(NetworkTensor* input, PoolingType type) {
  Call c(*state_, "add_global_pooling", "Pooling");
  KILN_NET_VALUE(x, c, input, "input");
  if (x->dims.rank() < 3) return c.error("input has shape ", x->dims.to_string(), "; pooling needs [N, C, spatial...]");
  PoolingAttrs a;
  a.mode = pooling_mode(type);
  a.global = true;
  return c.add<PoolingLayer>(LayerType::kPooling, a, {x});
}

Result<ActivationLayer*> Network::add_activation(NetworkTensor* input, ActivationType type) {
  Call c(*state_, "add_activation", "Activation");
  KILN_NET_VALUE(x, c, input, "input");
  return c.add<ActivationLayer>(LayerType::kActivation, activation_defaults(activation_kind(type)), {x});
}

Result<Layer*> Network::add_parametric_relu(NetworkTensor* input, NetworkTensor* slope) {
  Call c(*state_, "add_parametric_relu", "Activation");
  KILN_NET_VALUE(x, c, input, "input");
  KILN_NET_VALUE(s, c, slope, "slope");
  return c.add(LayerType::kActivation, activation_defaults(ActivationKind::kPRelu), {x, s});
}

Result<Layer*> Network::add_fully_connected(NetworkTensor* input, int64_t num_outputs, Weights weights, Weights bias) {
  Call c(*state_, "add_fully_connected", "FullyConnected");
  KILN_NET_VALUE(x, c, input, "input");
  if (x->dims.rank() < 2) return c.error("input has shape ", x->dims.to_string(), "; it needs rank >= 2 [N, ...]");
  if (num_outputs <= 0) return c.error("num_outputs is ", num_outputs, "; it must be positive");
  const int64_t k = product(x->dims, 1);
  if (k == kDynamicDim)
    return c.error("input has shape ", x->dims.to_string(), "; the dims after the first must be known");
  if (weights.count != num_outputs * k)
    return c.error("weights hold ", weights.count, " values but [num_outputs, K] = [", num_outputs, ", ", k, "] needs ",
                   num_outputs * k, " (K: the product of the input dims ", x->dims.to_string(), " after the first)");
  KILN_ASSIGN_OR_RETURN(Value * w, c.weights("weight", weights, Dims{num_outputs, k}));
  Value* b = nullptr;
  if (!bias.empty()) {
    KILN_ASSIGN_OR_RETURN(b, c.weights("bias", bias, Dims{num_outputs}));
  }
  return c.add(LayerType::kFullyConnected, FullyConnectedAttrs{}, {x, w, b});
}

Result<Layer*> Network::add_matrix_multiply(NetworkTensor* a, MatrixOperation op_a, NetworkTensor* b,
                                            MatrixOperation op_b) {
  Call c(*state_, "add_matrix_multiply", "MatrixMultiply");
  KILN_NET_VALUE(va, c, a, "a");
  KILN_NET_VALUE(vb, c, b, "b");
  MatrixMultiplyAttrs attrs;
  attrs.transpose_a = op_a == MatrixOperation::kTranspose;
  attrs.transpose_b = op_b == MatrixOperation::kTranspose;
  return c.add(LayerType::kMatrixMultiply, attrs, {va, vb});
}

Result<ScaleLayer*> Network::add_scale(NetworkTensor* input, ScaleLayerMode mode, Weights shift, Weights scale,
                                       Weights power) {
  Call c(*state_, "add_scale", "Scale");
  KILN_NET_VALUE(x, c, input, "input");
  Dims coeff{1};
  if (mode != ScaleLayerMode::kUniform) {
    if (x->dims.rank() < 2) return c.error("input has shape ", x->dims.to_string(), "; it needs a channel axis 1");
    if (mode == ScaleLayerMode::kChannel) {
      coeff = Dims{x->dims[1]};
    } else {
      coeff = Dims{};
      for (int i = 1; i < x->dims.rank(); ++i) coeff.push_back(x->dims[i]);
    }
    if (!coeff.is_static()) return c.error("input has shape ", x->dims.to_string(), "; the scaled dims must be known");
  }
  std::vector<Value*> ins{x};
  const std::pair<const char*, const Weights*> parts[] = {{"shift", &shift}, {"scale", &scale}, {"power", &power}};
  for (auto [what, w] : parts) {
    Value* v = nullptr;
    if (!w->empty()) {
      KILN_ASSIGN_OR_RETURN(v, c.weights(what, *w, coeff));
    }
    ins.push_back(v);
  }
  ScaleAttrs a;
  a.mode = static_cast<ScaleMode>(mode);
  return c.add<ScaleLayer>(LayerType::kScale, a, ins);
}

Result<ElementWiseLayer*> Network::add_elementwise(NetworkTensor* a, NetworkTensor* b, ElementWiseOperation op) {
  Call c(*state_, "add_elementwise", "ElementWise");
  KILN_NET_VALUE(va, c, a, "a");
  KILN_NET_VALUE(vb, c, b, "b");
  return c.add<ElementWiseLayer>(LayerType::kElementWise,
                                 elementwise_attrs(static_cast<ElementWiseOp>(op), is_floating(va->dtype)), {va, vb});
}

Result<UnaryLayer*> Network::add_unary(NetworkTensor* input, UnaryOperation op) {
  Call c(*state_, "add_unary", "Unary");
  KILN_NET_VALUE(x, c, input, "input");
  return c.add<UnaryLayer>(LayerType::kUnary, unary_attrs(static_cast<UnaryOp>(op)), {x});
}

Result<ShuffleLayer*> Network::add_shuffle(NetworkTensor* input) {
  Call c(*state_, "add_shuffle", "Shuffle");
  KILN_NET_VALUE(x, c, input, "input");
  return c.add<ShuffleLayer>(LayerType::kShuffle, ShuffleAttrs{}, {x});
}

Result<Layer*> Network::add_reduce(NetworkTensor* input, ReduceOperation op, uint32_t axes_mask, bool keep_dims) {
  Call c(*state_, "add_reduce", "Reduce");
  KILN_NET_VALUE(x, c, input, "input");
  const int rank = x->dims.rank();
  if (axes_mask == 0) return c.error("axes_mask is 0; set bit i to reduce axis i");
  if (rank < 32 && (axes_mask >> rank) != 0)
    return c.error("axes_mask 0x", std::hex, axes_mask, std::dec, " names an axis beyond the input's rank ", rank,
                   " (shape ", x->dims.to_string(), ")");
  ReduceAttrs a;
  a.op = static_cast<ReduceOp>(op);
  for (int i = 0; i < rank; ++i)
    if (axes_mask & (1u << i)) a.axes.push_back(i);
  a.keep_dims = keep_dims;
  return c.add(LayerType::kReduce, a, {x});
}

Result<Layer*> Network::add_arg_reduce(NetworkTensor* input, TopKOperation op, int64_t axis, bool keep_dims) {
  Call c(*state_, "add_arg_reduce", "ArgReduce");
  KILN_NET_VALUE(x, c, input, "input");
  ArgReduceAttrs a;
  a.op = op == TopKOperation::kMax ? ArgReduceOp::kMax : ArgReduceOp::kMin;
  a.axis = axis;
  a.keep_dims = keep_dims;
  return c.add(LayerType::kArgReduce, a, {x});
}

Result<SoftmaxLayer*> Network::add_softmax(NetworkTensor* input) {
  Call c(*state_, "add_softmax", "Softmax");
  KILN_NET_VALUE(x, c, input, "input");
  return c.add<SoftmaxLayer>(LayerType::kSoftmax, SoftmaxAttrs{}, {x});
}

Result<SoftmaxLayer*> Network::add_log_softmax(NetworkTensor* input) {
  Call c(*state_, "add_log_softmax", "LogSoftmax");
  KILN_NET_VALUE(x, c, input, "input");
  return c.add<SoftmaxLayer>(LayerType::kLogSoftmax, SoftmaxAttrs{}, {x});
}

Result<ConcatenationLayer*> Network::add_concatenation(std::span<NetworkTensor* const> inputs, int64_t axis) {
  Call c(*state_, "add_concatenation", "Concatenation");
  if (inputs.empty()) return c.error("needs at least one input");
  std::vector<Value*> ins;
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_NET_VALUE(v, c, inputs[i], str_cat("input ", i));
    ins.push_back(v);
  }
  ConcatenationAttrs a;
  a.axis = axis;
  return c.add<ConcatenationLayer>(LayerType::kConcatenation, a, ins);
}

Result<Layer*> Network::add_split(NetworkTensor* input, int64_t axis, const std::vector<int64_t>& sizes) {
  Call c(*state_, "add_split", "Split");
  KILN_NET_VALUE(x, c, input, "input");
  if (sizes.empty()) return c.error("sizes is empty; give one size per output");
  KILN_ASSIGN_OR_RETURN(Value * s, c.int64s("split", sizes));
  SplitAttrs a;
  a.axis = axis;
  return c.add(LayerType::kSplit, a, {x, s});
}

Result<Layer*> Network::add_slice(NetworkTensor* input, const Dims& start, const Dims& size, const Dims& stride) {
  Call c(*state_, "add_slice", "Slice");
  KILN_NET_VALUE(x, c, input, "input");
  const Dims& d = x->dims;
  if (start.rank() != d.rank() || size.rank() != d.rank() || stride.rank() != d.rank())
    return c.error("start ", start.to_string(), ", size ", size.to_string(), " and stride ", stride.to_string(),
                   " must each have the input's rank ", d.rank(), " (shape ", d.to_string(), ")");
  std::vector<int64_t> starts, ends, axes, steps;
  for (int i = 0; i < d.rank(); ++i) {
    if (stride[i] == 0) return c.error("stride ", stride.to_string(), " has a 0 on axis ", i);
    if (size[i] < 0) return c.error("size ", size.to_string(), " has a negative entry on axis ", i);
    const int64_t last = start[i] + (size[i] - 1) * stride[i];
    if (size[i] > 0 && d[i] != kDynamicDim && (start[i] < 0 || start[i] >= d[i] || last < 0 || last >= d[i]))
      return c.error("axis ", i, " reads indices ", start[i], " to ", last, " but the input ", d.to_string(), " has ",
                     d[i], " there");
    int64_t end = size[i] == 0 ? start[i] : last + (stride[i] > 0 ? 1 : -1);
    if (stride[i] < 0 && end < 0) end = INT64_MIN;
    starts.push_back(start[i]);
    ends.push_back(end);
    axes.push_back(i);
    steps.push_back(stride[i]);
  }
  KILN_ASSIGN_OR_RETURN(Value * vs, c.int64s("starts", starts));
  KILN_ASSIGN_OR_RETURN(Value * ve, c.int64s("ends", ends));
  KILN_ASSIGN_OR_RETURN(Value * va, c.int64s("axes", axes));
  KILN_ASSIGN_OR_RETURN(Value * vt, c.int64s("steps", steps));
  return c.add(LayerType::kSlice, NoAttrs{}, {x, vs, ve, va, vt});
}

Result<PaddingLayer*> Network::add_padding(NetworkTensor* input, const Dims& pre, const Dims& post,
                                           float constant_value) {
  Call c(*state_, "add_padding", "Padding");
  KILN_NET_VALUE(x, c, input, "input");
  const int r = x->dims.rank();
  if (pre.rank() != post.rank() || pre.rank() > r)
    return c.error("pre ", pre.to_string(), " and post ", post.to_string(),
                   " must have the same rank, at most the input's ", r, " (shape ", x->dims.to_string(), ")");
  std::vector<int64_t> pads(2 * static_cast<size_t>(r), 0);
  for (int i = 0; i < pre.rank(); ++i) {
    pads[r - pre.rank() + i] = pre[i];
    pads[2 * r - pre.rank() + i] = post[i];
  }
  KILN_ASSIGN_OR_RETURN(Value * p, c.int64s("pads", pads));
  Value* cv = nullptr;
  if (constant_value != 0.f) {
    auto t = Tensor::empty(x->dtype, Dims{});
    if (!t) return c.fail(t.take_status());
    t->set(0, constant_value);
    auto v = c.state().graph.add_constant(c.name() + ".constant_value", std::move(*t));
    if (!v) return c.fail(v.take_status());
    cv = *v;
  }
  return c.add<PaddingLayer>(LayerType::kPadding, PaddingAttrs{}, {x, p, cv});
}

Result<Layer*> Network::add_expand(NetworkTensor* input, const Dims& dims) {
  Call c(*state_, "add_expand", "Expand");
  KILN_NET_VALUE(x, c, input, "input");
  KILN_ASSIGN_OR_RETURN(Value * s, c.int64s("shape", dims.to_vector()));
  return c.add(LayerType::kExpand, NoAttrs{}, {x, s});
}

Result<Layer*> Network::add_tile(NetworkTensor* input, const Dims& repeats) {
  Call c(*state_, "add_tile", "Tile");
  KILN_NET_VALUE(x, c, input, "input");
  if (repeats.rank() != x->dims.rank())
    return c.error("repeats ", repeats.to_string(), " must have the input's rank ", x->dims.rank());
  KILN_ASSIGN_OR_RETURN(Value * s, c.int64s("repeats", repeats.to_vector()));
  return c.add(LayerType::kTile, NoAttrs{}, {x, s});
}

Result<Layer*> Network::add_constant(const Dims& dims, Weights weights) {
  Call c(*state_, "add_constant", "Constant");
  if (!dims.is_static()) return c.error("dims ", dims.to_string(), " must be known");
  if (weights.count != dims.numel())
    return c.error("weights hold ", weights.count, " values but dims ", dims.to_string(), " need ", dims.numel());
  if (weights.count > 0 && !weights.values) return c.error("weights have a count but no values");
  auto t = Tensor::empty(weights.dtype, dims);
  if (!t) return c.fail(t.take_status());
  if (weights.count > 0) std::memcpy(t->raw(), weights.values, t->nbytes());
  auto a = constant_attrs_from(*t);
  if (!a) return c.fail(a.take_status());
  return c.add(LayerType::kConstant, std::move(*a), {});
}

Result<Layer*> Network::add_gather(NetworkTensor* data, NetworkTensor* indices, int64_t axis) {
  Call c(*state_, "add_gather", "Gather");
  KILN_NET_VALUE(d, c, data, "data");
  KILN_NET_VALUE(i, c, indices, "indices");
  GatherAttrs a;
  a.axis = axis;
  return c.add(LayerType::kGather, a, {d, i});
}

Result<Layer*> Network::add_gather_elements(NetworkTensor* data, NetworkTensor* indices, int64_t axis) {
  Call c(*state_, "add_gather_elements", "GatherElements");
  KILN_NET_VALUE(d, c, data, "data");
  KILN_NET_VALUE(i, c, indices, "indices");
  GatherElementsAttrs a;
  a.axis = axis;
  return c.add(LayerType::kGatherElements, a, {d, i});
}

Result<Layer*> Network::add_gather_nd(NetworkTensor* data, NetworkTensor* indices, int64_t batch_dims) {
  Call c(*state_, "add_gather_nd", "GatherND");
  KILN_NET_VALUE(d, c, data, "data");
  KILN_NET_VALUE(i, c, indices, "indices");
  GatherNDAttrs a;
  a.batch_dims = batch_dims;
  return c.add(LayerType::kGatherND, a, {d, i});
}

Result<ScatterLayer*> Network::add_scatter(NetworkTensor* data, NetworkTensor* indices, NetworkTensor* updates,
                                           ScatterMode mode) {
  Call c(*state_, "add_scatter", mode == ScatterMode::kElement ? "ScatterElements" : "ScatterND");
  KILN_NET_VALUE(d, c, data, "data");
  KILN_NET_VALUE(i, c, indices, "indices");
  KILN_NET_VALUE(u, c, updates, "updates");
  if (mode == ScatterMode::kElement) return c.add<ScatterLayer>(LayerType::kScatter, ScatterElementsAttrs{}, {d, i, u});
  return c.add<ScatterLayer>(LayerType::kScatter, ScatterNDAttrs{}, {d, i, u});
}

Result<Layer*> Network::add_topk(NetworkTensor* input, TopKOperation op, int64_t k, uint32_t axes_mask) {
  Call c(*state_, "add_topk", "TopK");
  KILN_NET_VALUE(x, c, input, "input");
  const int rank = x->dims.rank();
  if (axes_mask == 0 || (axes_mask & (axes_mask - 1)) != 0 || (rank < 32 && (axes_mask >> rank) != 0))
    return c.error("axes_mask 0x", std::hex, axes_mask, std::dec, " must set exactly one axis of the input ",
                   x->dims.to_string());
  TopKAttrs a;
  a.largest = op == TopKOperation::kMax;
  a.axis = 0;
  while (!(axes_mask & (1u << a.axis))) ++a.axis;
  KILN_ASSIGN_OR_RETURN(Value * kv, c.int64s("k", {k}));
  return c.add(LayerType::kTopK, a, {x, kv});
}

Result<Layer*> Network::add_one_hot(NetworkTensor* indices, NetworkTensor* values, NetworkTensor* depth, int64_t axis) {
  Call c(*state_, "add_one_hot", "OneHot");
  KILN_NET_VALUE(i, c, indices, "indices");
  KILN_NET_VALUE(v, c, values, "values");
  KILN_NET_VALUE(d, c, depth, "depth");
  OneHotAttrs a;
  a.axis = axis;
  return c.add(LayerType::kOneHot, a, {i, d, v});
}

Result<ResizeLayer*> Network::add_resize(NetworkTensor* input, const Dims& output_dims, ResizeInterpolation mode) {
  Call c(*state_, "add_resize", "Resize");
  KILN_NET_VALUE(x, c, input, "input");
  if (output_dims.rank() != x->dims.rank())
    return c.error("output_dims ", output_dims.to_string(), " must have the input's rank ", x->dims.rank());
  KILN_ASSIGN_OR_RETURN(Value * s, c.int64s("sizes", output_dims.to_vector()));
  ResizeAttrs a;
  a.mode = static_cast<ResizeMode>(mode);
  return c.add<ResizeLayer>(LayerType::kResize, a, {x, nullptr, nullptr, s});
}

Result<ResizeLayer*> Network::add_resize_scales(NetworkTensor* input, std::vector<float> scales,
                                                ResizeInterpolation mode) {
  Call c(*state_, "add_resize_scales", "Resize");
  KILN_NET_VALUE(x, c, input, "input");
  if (static_cast<int>(scales.size()) != x->dims.rank())
    return c.error(scales.size(), " scales given but the input ", x->dims.to_string(), " has rank ", x->dims.rank());
  KILN_ASSIGN_OR_RETURN(Value * s,
                        c.weights("scales", float_weights(scales), Dims{static_cast<int64_t>(scales.size())}));
  ResizeAttrs a;
  a.mode = static_cast<ResizeMode>(mode);
  return c.add<ResizeLayer>(LayerType::kResize, a, {x, nullptr, s});
}

Result<Layer*> Network::add_lrn(NetworkTensor* input, int64_t window, float alpha, float beta, float k) {
  Call c(*state_, "add_lrn", "LRN");
  KILN_NET_VALUE(x, c, input, "input");
  if (window <= 0) return c.error("window is ", window, "; it must be positive");
  LrnAttrs a;
  a.size = window;
  a.alpha = alpha;
  a.beta = beta;
  a.bias = k;
  return c.add(LayerType::kLrn, a, {x});
}

Result<Layer*> Network::add_batch_normalization(NetworkTensor* input, Weights scale, Weights bias, Weights mean,
                                                Weights variance, float epsilon) {
  Call c(*state_, "add_batch_normalization", "BatchNormalization");
  KILN_NET_VALUE(x, c, input, "input");
  if (x->dims.rank() < 2 || x->dims[1] == kDynamicDim)
    return c.error("input has shape ", x->dims.to_string(), "; it needs a known channel dim 1");
  const Dims cd{x->dims[1]};
  KILN_ASSIGN_OR_RETURN(Value * s, c.weights("scale", scale, cd));
  KILN_ASSIGN_OR_RETURN(Value * b, c.weights("bias", bias, cd));
  KILN_ASSIGN_OR_RETURN(Value * m, c.weights("mean", mean, cd));
  KILN_ASSIGN_OR_RETURN(Value * v, c.weights("variance", variance, cd));
  BatchNormalizationAttrs a;
  a.epsilon = epsilon;
  return c.add(LayerType::kBatchNormalization, a, {x, s, b, m, v});
}

Result<Layer*> Network::add_layer_normalization(NetworkTensor* input, Weights scale, Weights bias, int64_t axis,
                                                float epsilon) {
  Call c(*state_, "add_layer_normalization", "LayerNormalization");
  KILN_NET_VALUE(x, c, input, "input");
  auto ax = normalize_axis(axis, x->dims.rank());
  if (!ax) return c.fail(ax.take_status());
  Dims nd;
  for (int i = *ax; i < x->dims.rank(); ++i) nd.push_back(x->dims[i]);
  if (!nd.is_static()) return c.error("input has shape ", x->dims.to_string(), "; the normalized dims must be known");
  Value* s = nullptr;
  Value* b = nullptr;
  if (!scale.empty()) {
    KILN_ASSIGN_OR_RETURN(s, c.weights("scale", scale, nd));
  }
  if (!bias.empty()) {
    KILN_ASSIGN_OR_RETURN(b, c.weights("bias", bias, nd));
  }
  LayerNormalizationAttrs a;
  a.axis = axis;
  a.epsilon = epsilon;
  return c.add(LayerType::kLayerNormalization, a, {x, s, b});
}

Result<Layer*> Network::add_instance_normalization(NetworkTensor* input, Weights scale, Weights bias, float epsilon) {
  Call c(*state_, "add_instance_normalization", "InstanceNormalization");
  KILN_NET_VALUE(x, c, input, "input");
  if (x->dims.rank() < 3 || x->dims[1] == kDynamicDim)
    return c.error("input has shape ", x->dims.to_string(), "; it needs [N, C, spatial...] with a known C");
  const Dims cd{x->dims[1]};
  KILN_ASSIGN_OR_RETURN(Value * s, c.weights("scale", scale, cd));
  KILN_ASSIGN_OR_RETURN(Value * b, c.weights("bias", bias, cd));
  InstanceNormalizationAttrs a;
  a.epsilon = epsilon;
  return c.add(LayerType::kInstanceNormalization, a, {x, s, b});
}

Result<Layer*> Network::add_cast(NetworkTensor* input, DataType to) {
  Call c(*state_, "add_cast", "Cast");
  KILN_NET_VALUE(x, c, input, "input");
  return c.add(LayerType::kCast, cast_to(to), {x});
}

Result<Layer*> Network::add_where(NetworkTensor* condition, NetworkTensor* x, NetworkTensor* y) {
  Call c(*state_, "add_where", "Where");
  KILN_NET_VALUE(vc, c, condition, "condition");
  KILN_NET_VALUE(vx, c, x, "x");
  KILN_NET_VALUE(vy, c, y, "y");
  return c.add(LayerType::kWhere, NoAttrs{}, {vc, vx, vy});
}

Result<Layer*> Network::add_identity(NetworkTensor* input) {
  Call c(*state_, "add_identity", "Identity");
  KILN_NET_VALUE(x, c, input, "input");
  return c.add(LayerType::kIdentity, NoAttrs{}, {x});
}

Result<Layer*> Network::add_shape(NetworkTensor* input) {
  Call c(*state_, "add_shape", "Shape");
  KILN_NET_VALUE(x, c, input, "input");
  return c.add(LayerType::kShape, ShapeAttrs{}, {x});
}

Result<Layer*> Network::add_size(NetworkTensor* input) {
  Call c(*state_, "add_size", "Size");
  KILN_NET_VALUE(x, c, input, "input");
  return c.add(LayerType::kSize, NoAttrs{}, {x});
}

Result<Layer*> Network::add_rnn(NetworkTensor* input, RnnOperation op, RecurrenceDirection direction,
                                int64_t hidden_size, Weights weights, Weights recurrence, Weights bias) {
  const char* op_name = op == RnnOperation::kLstm ? "LSTM" : op == RnnOperation::kGru ? "GRU" : "RNN";
  Call c(*state_, "add_rnn", op_name);
  KILN_NET_VALUE(x, c, input, "input");
  if (x->dims.rank() != 3 || x->dims[2] == kDynamicDim)
    return c.error("input has shape ", x->dims.to_string(),
                   "; it needs [seq, batch, input_size] with a known input_size");
  if (hidden_size <= 0) return c.error("hidden_size is ", hidden_size, "; it must be positive");
  const int64_t gates = op == RnnOperation::kLstm ? 4 : op == RnnOperation::kGru ? 3 : 1;
  const int64_t dirs = direction == RecurrenceDirection::kBidirectional ? 2 : 1;
  const int64_t h = hidden_size;
  KILN_ASSIGN_OR_RETURN(Value * w, c.weights("weights", weights, Dims{dirs, gates * h, x->dims[2]}));
  KILN_ASSIGN_OR_RETURN(Value * r, c.weights("recurrence", recurrence, Dims{dirs, gates * h, h}));
  Value* b = nullptr;
  if (!bias.empty()) {
    KILN_ASSIGN_OR_RETURN(b, c.weights("bias", bias, Dims{dirs, 2 * gates * h}));
  }
  const std::vector<Value*> ins{x, w, r, b};
  auto fill = [&](RnnCommonAttrs& a) {
    a.direction = static_cast<RnnDirection>(direction);
    a.hidden_size = h;
  };
  if (op == RnnOperation::kLstm) {
    LstmAttrs a;
    fill(a);
    return c.add(LayerType::kRnn, a, ins);
  }
  if (op == RnnOperation::kGru) {
    GruAttrs a;
    fill(a);
    return c.add(LayerType::kRnn, a, ins);
  }
  RnnAttrs a;
  fill(a);
  a.activations = {static_cast<int64_t>(op == RnnOperation::kRelu ? RnnActivation::kRelu : RnnActivation::kTanh)};
  return c.add(LayerType::kRnn, a, ins);
}

Result<Layer*> Network::add_plugin(std::string_view plugin, std::span<NetworkTensor* const> inputs,
                                   PluginFields fields) {
  Call c(*state_, "add_plugin", plugin);
  const OpSchema* schema = OpRegistry::global().find(plugin);
  if (!schema || schema->family != kPluginFamily)
    return c.fail(Status(StatusCode::kNotFound,
                         str_cat("no plugin named '", plugin, "' is registered; call register_plugin first")));
  std::vector<Value*> ins;
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_NET_VALUE(v, c, inputs[i], str_cat("input ", i));
    ins.push_back(v);
  }
  PluginAttrs a;
  a.ints = std::move(fields.ints);
  a.floats = std::move(fields.floats);
  a.text = std::move(fields.text);
  return c.add(LayerType::kPlugin, a, ins);
}

}  // namespace kiln
