#pragma once
/// The network definition API: build a graph layer by layer (TensorRT's INetworkDefinition in kiln
/// style). Every add_* call checks its arguments and infers its outputs at once; misuse is a Status
/// that names the layer. Weights are copied into the network. The builder turns a Network into an
/// engine (see the internal header src/graph/network/network_internal.h for the graph it holds).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/dims.h"
#include "kiln/dtype.h"
#include "kiln/plugin.h"
#include "kiln/status.h"

namespace kiln {

class Value;  // graph IR types, opaque here
class Node;
class Network;

namespace detail {
struct NetworkState;
}

/// A view of host memory holding `count` elements of `dtype`; copied by the call it is given to.
/// A count of 0 means "none" (an optional bias).
struct Weights {
  DataType dtype = DataType::kFloat32;
  const void* values = nullptr;
  int64_t count = 0;

  bool empty() const { return count == 0; }
};

/// Weights over a float vector (the vector must outlive the call only).
inline Weights float_weights(std::span<const float> v) {
  return {DataType::kFloat32, v.data(), static_cast<int64_t>(v.size())};
}

enum class LayerType {
  kConvolution,
  kDeconvolution,
  kPooling,
  kActivation,
  kFullyConnected,
  kMatrixMultiply,
  kScale,
  kElementWise,
  kUnary,
  kShuffle,
  kReduce,
  kArgReduce,
  kSoftmax,
  kLogSoftmax,
  kConcatenation,
  kSplit,
  kSlice,
  kPadding,
  kExpand,
  kTile,
  kConstant,
  kGather,
  kGatherElements,
  kGatherND,
  kScatter,
  kTopK,
  kOneHot,
  kResize,
  kLrn,
  kBatchNormalization,
  kLayerNormalization,
  kInstanceNormalization,
  kCast,
  kWhere,
  kRnn,
  kIdentity,
  kShape,
  kSize,
  kPlugin,
};
/// "Convolution", "Pooling", ...
const char* layer_type_name(LayerType type);

enum class ActivationType {
  kRelu,
  kLeakyRelu,  ///< alpha: slope (default 0.01)
  kElu,        ///< alpha (default 1)
  kSelu,       ///< alpha, beta (SELU's constants by default)
  kSigmoid,
  kHardSigmoid,  ///< clamp(alpha * x + beta, 0, 1)
  kTanh,
  kScaledTanh,  ///< alpha * tanh(beta * x)
  kSoftplus,
  kSoftsign,
  kClip,  ///< clamp(x, alpha, beta)
  kGelu,  ///< beta = 1 selects the tanh approximation
  kSilu,  ///< x * sigmoid(alpha * x)
  kHardSwish,
  kMish,
  kThresholdedRelu,  ///< x > alpha ? x : 0
  kCelu,
};

enum class PoolingType { kMax, kAverage, kLp };

/// How a convolution or pooling window is padded. Explicit modes use the pre/post padding;
/// round-up rounds the output size up (pooling only); same modes pad so that out = ceil(in / stride).
enum class PaddingMode { kExplicitRoundDown, kExplicitRoundUp, kSameUpper, kSameLower };

enum class ElementWiseOperation {
  kSum,
  kSub,
  kProd,
  kDiv,
  kMax,
  kMin,
  kPow,
  kMod,  ///< C fmod for floats, divisor-sign modulo for integers
  kAnd,
  kOr,
  kXor,
  kEqual,
  kLess,
  kLessOrEqual,
  kGreater,
  kGreaterOrEqual,
};

enum class UnaryOperation {
  kExp,
  kLog,
  kSqrt,
  kReciprocal,
  kAbs,
  kNeg,
  kFloor,
  kCeil,
  kRound,
  kSign,
  kErf,
  kSin,
  kCos,
  kTan,
  kAsin,
  kAcos,
  kAtan,
  kSinh,
  kCosh,
  kAsinh,
  kAcosh,
  kAtanh,
  kNot,
  kIsNan,
  kIsInf,
};

enum class ReduceOperation { kSum, kProd, kMax, kMin, kAvg, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };
enum class TopKOperation { kMax, kMin };
enum class MatrixOperation { kNone, kTranspose };
/// Scale coefficients: one value, one per channel, or one per element of the dims from the channel on.
enum class ScaleLayerMode { kUniform, kChannel, kElementwise };
enum class FillMode { kConstant, kReflect, kEdge, kWrap };
enum class ResizeInterpolation { kNearest, kLinear, kCubic };
enum class ResizeCoordinates { kHalfPixel, kHalfPixelSymmetric, kPytorchHalfPixel, kAlignCorners, kAsymmetric };
enum class ResizeRounding { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };
enum class RnnOperation { kRelu, kTanh, kLstm, kGru };
enum class RecurrenceDirection { kForward, kReverse, kBidirectional };
enum class ScatterMode { kElement, kND };

/// A tensor of a network (TensorRT's ITensor): a network input or a layer output. Owned by the network.
class NetworkTensor {
 public:
  NetworkTensor(detail::NetworkState* net, Value* value) : net_(net), value_(value) {}  ///< internal
  const std::string& name() const;
  /// Renames the tensor; names are unique within a network.
  Status set_name(std::string name);
  DataType dtype() const;
  /// kDynamicDim where unknown until run time.
  Dims dims() const;
  bool is_network_input() const;
  bool is_network_output() const;
  Value* value() const { return value_; }  ///< internal: the graph value

 private:
  detail::NetworkState* net_;
  Value* value_;
};

/// A layer of a network (TensorRT's ILayer). Owned by the network.
class Layer {
 public:
  Layer(detail::NetworkState* net, Node* node, LayerType type) : net_(net), node_(node), type_(type) {}  ///< internal
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const;
  /// Renames the layer; names are unique within a network.
  Status set_name(std::string name);
  LayerType type() const { return type_; }
  int num_inputs() const;
  /// Input `i` (weights the network made are tensors too), or nullptr for a skipped optional input.
  NetworkTensor* input(int i) const;
  int num_outputs() const;
  NetworkTensor* output(int i) const;
  Node* node() const { return node_; }  ///< internal: the graph node

 protected:
  detail::NetworkState* net_;
  Node* node_;
  LayerType type_;
};

class ConvolutionLayer : public Layer {
 public:
  using Layer::Layer;
  Status set_stride(const Dims& stride);
  /// Symmetric padding: pre = post = `padding`.
  Status set_padding(const Dims& padding);
  Status set_pre_padding(const Dims& padding);
  Status set_post_padding(const Dims& padding);
  Status set_padding_mode(PaddingMode mode);
  Status set_dilation(const Dims& dilation);
  /// The weights hold [num_outputs, channels / groups, kernel...] values; the group count is checked against them.
  Status set_num_groups(int64_t groups);
  Dims stride() const;
  Dims pre_padding() const;
  Dims post_padding() const;
  Dims dilation() const;
  int64_t num_groups() const;
};

class DeconvolutionLayer : public Layer {
 public:
  using Layer::Layer;
  Status set_stride(const Dims& stride);
  Status set_padding(const Dims& padding);
  Status set_pre_padding(const Dims& padding);
  Status set_post_padding(const Dims& padding);
  Status set_padding_mode(PaddingMode mode);
  Status set_dilation(const Dims& dilation);
  Status set_output_padding(const Dims& padding);
  Status set_num_groups(int64_t groups);
};

class PoolingLayer : public Layer {
 public:
  using Layer::Layer;
  Status set_stride(const Dims& stride);
  Status set_padding(const Dims& padding);
  Status set_pre_padding(const Dims& padding);
  Status set_post_padding(const Dims& padding);
  Status set_padding_mode(PaddingMode mode);
  /// Average pooling: divide by the count of real (unpadded) elements (true, the default) or by the window size.
  Status set_average_count_excludes_padding(bool exclude);
  Status set_dilation(const Dims& dilation);
  /// Lp pooling: the norm order.
  Status set_lp_order(int64_t p);
};

class ActivationLayer : public Layer {
 public:
  using Layer::Layer;
  Status set_alpha(float alpha);
  Status set_beta(float beta);
  float alpha() const;
  float beta() const;
};

class ShuffleLayer : public Layer {
 public:
  using Layer::Layer;
  Status set_first_transpose(std::vector<int64_t> perm);
  /// 0 copies the input dim (unless zero_is_placeholder is false), -1 is inferred.
  Status set_reshape_dims(const Dims& dims);
  Status set_second_transpose(std::vector<int64_t> perm);
  Status set_zero_is_placeholder(bool placeholder);
};

class SoftmaxLayer : public Layer {
 public:
  using Layer::Layer;
  Status set_axis(int64_t axis);
};

class ConcatenationLayer : public Layer {
 public:
  using Layer::Layer;
  Status set_axis(int64_t axis);
};

class ScaleLayer : public Layer {
 public:
  using Layer::Layer;
  Status set_channel_axis(int64_t axis);
};

class ElementWiseLayer : public Layer {
 public:
  using Layer::Layer;
  Status set_operation(ElementWiseOperation op);
};

class UnaryLayer : public Layer {
 public:
  using Layer::Layer;
  Status set_operation(UnaryOperation op);
};

class ResizeLayer : public Layer {
 public:
  using Layer::Layer;
  Status set_coordinates(ResizeCoordinates mode);
  Status set_rounding(ResizeRounding rounding);
  /// Cubic interpolation's coefficient (default -0.75).
  Status set_cubic_coefficient(float a);
};

class PaddingLayer : public Layer {
 public:
  using Layer::Layer;
  Status set_mode(FillMode mode);
};

class ScatterLayer : public Layer {
 public:
  using Layer::Layer;
  Status set_axis(int64_t axis);  ///< kElement mode only
};

/// A network under construction. Not copyable; movable.
class Network {
 public:
  Network();
  ~Network();
  Network(Network&&) noexcept;
  Network& operator=(Network&&) noexcept;
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  /// A network input; kDynamicDim marks dims known only at run time.
  Result<NetworkTensor*> add_input(const std::string& name, DataType dtype, const Dims& dims);
  Status mark_output(NetworkTensor* tensor);

  int num_inputs() const;
  NetworkTensor* input(int i) const;
  int num_outputs() const;
  NetworkTensor* output(int i) const;
  int num_layers() const;
  Layer* layer(int i) const;
  /// Finds a layer or a tensor by name, or nullptr.
  Layer* find_layer(std::string_view name) const;
  NetworkTensor* find_tensor(std::string_view name) const;
  /// Checks the whole network (every problem, one per line).
  Status validate() const;
  /// A readable listing of the network's graph.
  std::string to_text() const;

  // ---- layers ----

  /// Convolution over an [N, C, spatial...] input with kernel `kernel_dims` (1-3 spatial dims).
  /// `weights` holds [num_outputs, C / groups, kernel...] values (groups follow from the count; see
  /// set_num_groups), `bias` [num_outputs] or nothing.
  Result<ConvolutionLayer*> add_convolution(NetworkTensor* input, int64_t num_outputs, const Dims& kernel_dims,
                                            Weights weights, Weights bias = {});
  /// Transposed convolution; `weights` holds [C, num_outputs / groups, kernel...] values.
  Result<DeconvolutionLayer*> add_deconvolution(NetworkTensor* input, int64_t num_outputs, const Dims& kernel_dims,
                                                Weights weights, Weights bias = {});
  /// Pooling with window `window` over the spatial dims of [N, C, spatial...]; stride defaults to 1.
  Result<PoolingLayer*> add_pooling(NetworkTensor* input, PoolingType type, const Dims& window);
  /// Pooling over the whole spatial extent.
  Result<PoolingLayer*> add_global_pooling(NetworkTensor* input, PoolingType type);
  /// Elementwise activation with the type's default alpha/beta (change them with the setters).
  Result<ActivationLayer*> add_activation(NetworkTensor* input, ActivationType type);
  /// PReLU with a learned slope broadcast to x.
  Result<Layer*> add_parametric_relu(NetworkTensor* input, NetworkTensor* slope);
  /// y = x flattened to [N, K] @ weights^T + bias, K = product of the input dims after the first;
  /// `weights` holds [num_outputs, K] values, `bias` [num_outputs] or nothing. Output [N, num_outputs].
  Result<Layer*> add_fully_connected(NetworkTensor* input, int64_t num_outputs, Weights weights, Weights bias = {});
  /// op(a) @ op(b) with numpy batch broadcasting.
  Result<Layer*> add_matrix_multiply(NetworkTensor* a, MatrixOperation op_a, NetworkTensor* b, MatrixOperation op_b);
  /// y = (x * scale + shift) ^ power per `mode` over the channel axis 1; empty weights take 0, 1, 1.
  Result<ScaleLayer*> add_scale(NetworkTensor* input, ScaleLayerMode mode, Weights shift, Weights scale, Weights power);
  /// a (op) b with numpy broadcasting.
  Result<ElementWiseLayer*> add_elementwise(NetworkTensor* a, NetworkTensor* b, ElementWiseOperation op);
  Result<UnaryLayer*> add_unary(NetworkTensor* input, UnaryOperation op);
  /// An identity shuffle; configure it with the setters (transpose, reshape, transpose).
  Result<ShuffleLayer*> add_shuffle(NetworkTensor* input);
  /// Reduces the axes whose bits are set in `axes_mask` (bit i: axis i).
  Result<Layer*> add_reduce(NetworkTensor* input, ReduceOperation op, uint32_t axes_mask, bool keep_dims);
  /// Index (int64) of the max / min along `axis`.
  Result<Layer*> add_arg_reduce(NetworkTensor* input, TopKOperation op, int64_t axis, bool keep_dims);
  /// Softmax along the last axis (change it with set_axis).
  Result<SoftmaxLayer*> add_softmax(NetworkTensor* input);
  Result<SoftmaxLayer*> add_log_softmax(NetworkTensor* input);
  /// Joins tensors along `axis` (negative counts from the end).
  Result<ConcatenationLayer*> add_concatenation(std::span<NetworkTensor* const> inputs, int64_t axis = 0);
  /// Splits along `axis` into pieces of `sizes`; one output per piece.
  Result<Layer*> add_split(NetworkTensor* input, int64_t axis, const std::vector<int64_t>& sizes);
  /// Output element i reads input start + i * stride per axis; `size` is the output shape.
  Result<Layer*> add_slice(NetworkTensor* input, const Dims& start, const Dims& size, const Dims& stride);
  /// Pads (negative: crops) the last pre.rank() dims; zeros unless set_mode / constant_value say otherwise.
  Result<PaddingLayer*> add_padding(NetworkTensor* input, const Dims& pre, const Dims& post,
                                    float constant_value = 0.f);
  /// Broadcasts to `dims` (numpy rules).
  Result<Layer*> add_expand(NetworkTensor* input, const Dims& dims);
  Result<Layer*> add_tile(NetworkTensor* input, const Dims& repeats);
  /// A constant tensor of `dims` holding `weights` (count must be dims' element count).
  Result<Layer*> add_constant(const Dims& dims, Weights weights);
  Result<Layer*> add_gather(NetworkTensor* data, NetworkTensor* indices, int64_t axis);
  Result<Layer*> add_gather_elements(NetworkTensor* data, NetworkTensor* indices, int64_t axis);
  Result<Layer*> add_gather_nd(NetworkTensor* data, NetworkTensor* indices, int64_t batch_dims = 0);
  /// data with `updates` written at `indices` (element mode: along an axis, set_axis; ND mode: index tuples).
  Result<ScatterLayer*> add_scatter(NetworkTensor* data, NetworkTensor* indices, NetworkTensor* updates,
                                    ScatterMode mode);
  /// The k largest (kMax) or smallest (kMin) along the one axis set in `axes_mask`; outputs values, int64 indices.
  Result<Layer*> add_topk(NetworkTensor* input, TopKOperation op, int64_t k, uint32_t axes_mask);
  /// One-hot along a new `axis`; `values` is [off, on], `depth` a scalar or [1].
  Result<Layer*> add_one_hot(NetworkTensor* indices, NetworkTensor* values, NetworkTensor* depth, int64_t axis);
  /// Resizes to `output_dims` (every dim).
  Result<ResizeLayer*> add_resize(NetworkTensor* input, const Dims& output_dims, ResizeInterpolation mode);
  /// Resizes by one scale per dim.
  Result<ResizeLayer*> add_resize_scales(NetworkTensor* input, std::vector<float> scales, ResizeInterpolation mode);
  /// Local response normalization across `window` channels.
  Result<Layer*> add_lrn(NetworkTensor* input, int64_t window, float alpha, float beta, float k);
  /// Inference batch normalization over channel axis 1; each weight holds C values.
  Result<Layer*> add_batch_normalization(NetworkTensor* input, Weights scale, Weights bias, Weights mean,
                                         Weights variance, float epsilon = 1e-5f);
  /// Normalizes over dims [axis, rank); scale and bias hold the element count of those dims.
  Result<Layer*> add_layer_normalization(NetworkTensor* input, Weights scale, Weights bias, int64_t axis = -1,
                                         float epsilon = 1e-5f);
  /// Normalizes each (n, c) plane; scale and bias hold C values.
  Result<Layer*> add_instance_normalization(NetworkTensor* input, Weights scale, Weights bias, float epsilon = 1e-5f);
  Result<Layer*> add_cast(NetworkTensor* input, DataType to);
  /// condition ? x : y with broadcasting.
  Result<Layer*> add_where(NetworkTensor* condition, NetworkTensor* x, NetworkTensor* y);
  Result<Layer*> add_identity(NetworkTensor* input);
  /// The input's dims as an int64 vector.
  Result<Layer*> add_shape(NetworkTensor* input);
  /// The input's element count as an int64 scalar.
  Result<Layer*> add_size(NetworkTensor* input);
  /// A recurrent layer over input [seq, batch, input_size] (ONNX layout and gate order: LSTM i,o,f,c;
  /// GRU z,r,h). `weights` holds [dirs, gates * H, input_size], `recurrence` [dirs, gates * H, H] and
  /// `bias` (optional) [dirs, 2 * gates * H]. Outputs: Y [seq, dirs, batch, H], Y_h [dirs, batch, H]
  /// and, for LSTM, Y_c.
  Result<Layer*> add_rnn(NetworkTensor* input, RnnOperation op, RecurrenceDirection direction, int64_t hidden_size,
                         Weights weights, Weights recurrence, Weights bias = {});
  /// A registered plugin op (see kiln/plugin.h) over `inputs` with per-layer `fields`.
  Result<Layer*> add_plugin(std::string_view plugin, std::span<NetworkTensor* const> inputs, PluginFields fields = {});

 private:
  friend struct detail::NetworkState;
  std::unique_ptr<detail::NetworkState> state_;
};

}  // namespace kiln
