#include "ops/rnn/rnn.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "ops/registry.h"

namespace kiln {

const char* enum_name(RnnDirection direction) {
  switch (direction) {
    case RnnDirection::kForward: return "forward";
    case RnnDirection::kReverse: return "reverse";
    case RnnDirection::kBidirectional: return "bidirectional";
  }
  return "?";
}

const char* enum_name(RnnActivation activation) {
  switch (activation) {
    case RnnActivation::kSigmoid: return "sigmoid";
    case RnnActivation::kTanh: return "tanh";
    case RnnActivation::kRelu: return "relu";
    case RnnActivation::kAffine: return "affine";
    case RnnActivation::kLeakyRelu: return "leaky_relu";
    case RnnActivation::kThresholdedRelu: return "thresholded_relu";
    case RnnActivation::kScaledTanh: return "scaled_tanh";
    case RnnActivation::kHardSigmoid: return "hard_sigmoid";
    case RnnActivation::kElu: return "elu";
    case RnnActivation::kSoftsign: return "softsign";
    case RnnActivation::kSoftplus: return "softplus";
  }
  return "?";
}

std::optional<RnnActivation> parse_rnn_activation(std::string_view name) {
  std::string key;
  for (char ch : name)
    if (ch != '_') key += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (int i = 0; i < kNumRnnActivations; ++i) {
    const auto a = static_cast<RnnActivation>(i);
    std::string n;
    for (const char* p = enum_name(a); *p; ++p)
      if (*p != '_') n += *p;
    if (n == key) return a;
  }
  return std::nullopt;
}

float rnn_activation_default_alpha(RnnActivation activation) {
  switch (activation) {
    case RnnActivation::kAffine: return 1.f;
    case RnnActivation::kLeakyRelu: return 0.01f;
    case RnnActivation::kThresholdedRelu: return 1.f;
    case RnnActivation::kScaledTanh: return 1.f;
    case RnnActivation::kHardSigmoid: return 0.2f;
    case RnnActivation::kElu: return 1.f;
    default: return 0.f;
  }
}

float rnn_activation_default_beta(RnnActivation activation) {
  switch (activation) {
    case RnnActivation::kScaledTanh: return 1.f;
    case RnnActivation::kHardSigmoid: return 0.5f;
    default: return 0.f;
  }
}

namespace {

bool takes_alpha(RnnActivation a) {
  switch (a) {
    case RnnActivation::kAffine:
    case RnnActivation::kLeakyRelu:
    case RnnActivation::kThresholdedRelu:
    case RnnActivation::kScaledTanh:
    case RnnActivation::kHardSigmoid:
    case RnnActivation::kElu: return true;
    default: return false;
  }
}

bool takes_beta(RnnActivation a) {
  return a == RnnActivation::kAffine || a == RnnActivation::kScaledTanh || a == RnnActivation::kHardSigmoid;
}

}  // namespace

Status set_onnx_activations(RnnCommonAttrs& attrs, std::span<const std::string> names, std::span<const float> alpha,
                            std::span<const float> beta) {
  attrs.activations.clear();
  attrs.activation_alpha.clear();
  attrs.activation_beta.clear();
  size_t next_alpha = 0, next_beta = 0;
  for (const std::string& name : names) {
    const auto a = parse_rnn_activation(name);
    if (!a)
      return invalid_argument("activations: unknown function '", name,
                              "'; expected Sigmoid, Tanh, Relu, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, "
                              "HardSigmoid, Elu, Softsign or Softplus");
    attrs.activations.push_back(static_cast<int64_t>(*a));
    float al = rnn_activation_default_alpha(*a), be = rnn_activation_default_beta(*a);
    if (takes_alpha(*a) && next_alpha < alpha.size()) al = alpha[next_alpha++];
    if (takes_beta(*a) && next_beta < beta.size()) be = beta[next_beta++];
    attrs.activation_alpha.push_back(al);
    attrs.activation_beta.push_back(be);
  }
  return Status::ok();
}

std::vector<RnnActivation> rnn_default_activations(int gate_functions) {
  if (gate_functions == 3) return {RnnActivation::kSigmoid, RnnActivation::kTanh, RnnActivation::kTanh};
  if (gate_functions == 2) return {RnnActivation::kSigmoid, RnnActivation::kTanh};
  return {RnnActivation::kTanh};
}

namespace {

// Per-op constants: gates per cell, activation functions per direction, whether it has a cell state.
struct RnnKind {
  const char* op;
  int gates;
  int functions;
  bool lstm;
};

constexpr RnnKind kLstm{"LSTM", 4, 3, true};
constexpr RnnKind kGru{"GRU", 3, 2, false};
constexpr RnnKind kRnn{"RNN", 1, 1, false};

constexpr const char* kInputNames[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};

bool is_static(int64_t d) { return d != kDynamicDim; }
int64_t times(int64_t a, int64_t b) { return is_static(a) && is_static(b) ? a * b : kDynamicDim; }

// Fails when input `i` has a static dim `axis` that differs from a static `want`.
Status expect_dim(const InferContext& ctx, int i, int axis, int64_t want, const char* meaning) {
  const int64_t got = ctx.input(i).dims[axis];
  if (is_static(got) && is_static(want) && got != want)
    return invalid_argument(kInputNames[i], " has shape ", ctx.input(i).dims.to_string(), ": dim ", axis, " is ", got,
                            " but must be ", want, " (", meaning, ")");
  return Status::ok();
}

Status expect_rank_of(const InferContext& ctx, int i, int rank, const char* layout) {
  if (!ctx.has_input(i)) return invalid_argument(kInputNames[i], " is missing");
  if (ctx.input(i).dims.rank() != rank)
    return invalid_argument(kInputNames[i], " must have rank ", rank, " ", layout, " but has shape ",
                            ctx.input(i).dims.to_string());
  return Status::ok();
}

Status check_attrs(const RnnCommonAttrs& a, const RnnKind& kind) {
  if (a.direction != RnnDirection::kForward && a.direction != RnnDirection::kReverse &&
      a.direction != RnnDirection::kBidirectional)
    return invalid_argument("direction ", static_cast<int64_t>(a.direction),
                            " is not forward, reverse or bidirectional");
  if (a.hidden_size < 0) return invalid_argument("hidden_size ", a.hidden_size, " must be positive (or 0: from R)");
  if (a.layout != 0 && a.layout != 1) return invalid_argument("layout ", a.layout, " must be 0 or 1");
  if (!(a.clip >= 0.f) || std::isinf(a.clip))
    return invalid_argument("clip ", a.clip, " must be a positive finite threshold (or 0: no clipping)");
  const size_t n = a.activations.size();
  const size_t per_dir = static_cast<size_t>(kind.functions);
  if (n != 0 && n != per_dir && n != per_dir * a.num_directions())
    return invalid_argument("activations has ", n, " functions; ", kind.op, " takes ", per_dir, " per direction (",
                            per_dir * a.num_directions(), " for ", enum_name(a.direction), ")");
  for (int64_t v : a.activations)
    if (v < 0 || v >= kNumRnnActivations)
      return invalid_argument("activations: ", v, " is not an activation function (0..", kNumRnnActivations - 1, ")");
  if (!a.activation_alpha.empty() && a.activation_alpha.size() != n)
    return invalid_argument("activation_alpha has ", a.activation_alpha.size(), " values but activations has ", n,
                            "; give one per function or none");
  if (!a.activation_beta.empty() && a.activation_beta.size() != n)
    return invalid_argument("activation_beta has ", a.activation_beta.size(), " values but activations has ", n,
                            "; give one per function or none");
  return Status::ok();
}

Result<std::vector<TensorDesc>> infer_rnn(const InferContext& ctx, const RnnCommonAttrs& a, const RnnKind& kind) {
  using namespace rnn_input;
  KILN_RETURN_IF_ERROR(check_attrs(a, kind));
  KILN_RETURN_IF_ERROR(expect_rank_of(ctx, kX, 3, a.layout == 0 ? "[seq, batch, input]" : "[batch, seq, input]"));
  KILN_RETURN_IF_ERROR(expect_rank_of(ctx, kW, 3, "[num_directions, gates * hidden, input]"));
  KILN_RETURN_IF_ERROR(expect_rank_of(ctx, kR, 3, "[num_directions, gates * hidden, hidden]"));
  const DataType dtype = ctx.input(kX).dtype;
  if (!is_floating(dtype)) return invalid_argument(kind.op, " needs floating-point X, got ", dtype_name(dtype));
  const int max_input = kind.lstm ? kP : kInitialH;
  for (int i = kW; i <= max_input; ++i) {
    if (i == kSequenceLens || !ctx.has_input(i)) continue;
    if (ctx.input(i).dtype != dtype)
      return invalid_argument(kInputNames[i], " is ", dtype_name(ctx.input(i).dtype), " but X is ", dtype_name(dtype),
                              "; all float inputs must share one type");
  }

  const Dims& x = ctx.input(kX).dims;
  const int64_t seq = a.layout == 0 ? x[0] : x[1];
  const int64_t batch = a.layout == 0 ? x[1] : x[0];
  const int64_t input = x[2];
  const int64_t dirs = a.num_directions();
  const int64_t g = kind.gates;
  int64_t hidden = a.hidden_size > 0 ? a.hidden_size : ctx.input(kR).dims[2];
  if (a.hidden_size > 0) KILN_RETURN_IF_ERROR(expect_dim(ctx, kR, 2, hidden, "hidden_size"));
  if (hidden == kDynamicDim && is_static(ctx.input(kR).dims[1]) && ctx.input(kR).dims[1] % g == 0)
    hidden = ctx.input(kR).dims[1] / g;

  KILN_RETURN_IF_ERROR(expect_dim(ctx, kW, 0, dirs, "num_directions"));
  KILN_RETURN_IF_ERROR(expect_dim(ctx, kW, 1, times(g, hidden), "gates * hidden_size"));
  KILN_RETURN_IF_ERROR(expect_dim(ctx, kW, 2, input, "input_size, X's last dim"));
  KILN_RETURN_IF_ERROR(expect_dim(ctx, kR, 0, dirs, "num_directions"));
  KILN_RETURN_IF_ERROR(expect_dim(ctx, kR, 1, times(g, hidden), "gates * hidden_size"));
  if (ctx.has_input(kB)) {
    KILN_RETURN_IF_ERROR(expect_rank_of(ctx, kB, 2, "[num_directions, 2 * gates * hidden]"));
    KILN_RETURN_IF_ERROR(expect_dim(ctx, kB, 0, dirs, "num_directions"));
    KILN_RETURN_IF_ERROR(expect_dim(ctx, kB, 1, times(2 * g, hidden), "2 * gates * hidden_size"));
  }
  if (ctx.has_input(kSequenceLens)) {
    KILN_RETURN_IF_ERROR(expect_rank_of(ctx, kSequenceLens, 1, "[batch]"));
    const DataType lens_type = ctx.input(kSequenceLens).dtype;
    if (lens_type != DataType::kInt32 && lens_type != DataType::kInt64)
      return invalid_argument("sequence_lens is ", dtype_name(lens_type), " but must be int32 (or int64)");
    KILN_RETURN_IF_ERROR(expect_dim(ctx, kSequenceLens, 0, batch, "batch_size"));
    if (const Tensor* lens = ctx.value(kSequenceLens)) {
      for (int64_t len : tensor_to_int64s(*lens))
        if (len < 0 || (is_static(seq) && len > seq))
          return invalid_argument("sequence_lens holds ", len, "; each length must be in [0, ", seq, "]");
    }
  }
  std::vector<int> state_inputs{kInitialH};
  if (kind.lstm) state_inputs.push_back(kInitialC);
  for (int i : state_inputs) {
    if (!ctx.has_input(i)) continue;
    KILN_RETURN_IF_ERROR(expect_rank_of(
        ctx, i, 3, a.layout == 0 ? "[num_directions, batch, hidden]" : "[batch, num_directions, hidden]"));
    KILN_RETURN_IF_ERROR(expect_dim(ctx, i, a.layout == 0 ? 0 : 1, dirs, "num_directions"));
    KILN_RETURN_IF_ERROR(expect_dim(ctx, i, a.layout == 0 ? 1 : 0, batch, "batch_size"));
    KILN_RETURN_IF_ERROR(expect_dim(ctx, i, 2, hidden, "hidden_size"));
  }
  if (kind.lstm && ctx.has_input(kP)) {
    KILN_RETURN_IF_ERROR(expect_rank_of(ctx, kP, 2, "[num_directions, 3 * hidden]"));
    KILN_RETURN_IF_ERROR(expect_dim(ctx, kP, 0, dirs, "num_directions"));
    KILN_RETURN_IF_ERROR(expect_dim(ctx, kP, 1, times(3, hidden), "3 * hidden_size"));
  }

  const Dims y = a.layout == 0 ? Dims{seq, dirs, batch, hidden} : Dims{batch, seq, dirs, hidden};
  const Dims state = a.layout == 0 ? Dims{dirs, batch, hidden} : Dims{batch, dirs, hidden};
  std::vector<TensorDesc> out{{dtype, y, true}, {dtype, state, true}};
  if (kind.lstm) out.push_back({dtype, state, true});
  return out;
}

OpSchema rnn_schema(const RnnKind& kind) {
  const char* summary = kind.lstm         ? "LSTM layer (ONNX): peepholes, clip, coupled gates, variable lengths"
                        : kind.gates == 3 ? "GRU layer (ONNX): linear_before_reset, clip, variable lengths"
                                          : "Elman RNN layer (ONNX): any activation, clip, variable lengths";
  OpSchema s;
  if (kind.lstm)
    s = make_schema<LstmAttrs>(kind.op, "rnn", summary);
  else if (kind.gates == 3)
    s = make_schema<GruAttrs>(kind.op, "rnn", summary);
  else
    s = make_schema<RnnAttrs>(kind.op, "rnn", summary);
  s.input_names = {"X", "W", "R", "B", "sequence_lens", "initial_h"};
  if (kind.lstm) {
    s.input_names.push_back("initial_c");
    s.input_names.push_back("P");
  }
  s.min_inputs = 3;
  s.max_inputs = static_cast<int>(s.input_names.size());
  s.infer = [kind](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    if (kind.lstm) return infer_rnn(ctx, ctx.attrs_as<LstmAttrs>(), kind);
    if (kind.gates == 3) return infer_rnn(ctx, ctx.attrs_as<GruAttrs>(), kind);
    return infer_rnn(ctx, ctx.attrs_as<RnnAttrs>(), kind);
  };
  return s;
}

// The backward ops: the forward's inputs, then dY, dY_h (and dY_c); outputs dX, dW, dR, dB, d_initial_h (and
// d_initial_c, dP).
Result<std::vector<TensorDesc>> infer_rnn_backward(const InferContext& ctx, const RnnCommonAttrs& a,
                                                   const RnnKind& kind, const char* op) {
  const int base = rnn_grad_input::dy(kind.lstm);
  const int n = std::min(ctx.num_inputs(), base);
  std::vector<TensorDesc> fwd_inputs;
  std::vector<const Tensor*> fwd_values;
  for (int i = 0; i < n; ++i) {
    fwd_inputs.push_back(ctx.input(i));
    fwd_values.push_back(ctx.value(i));
  }
  const InferContext fwd(ctx.attrs(), fwd_inputs, fwd_values);
  KILN_ASSIGN_OR_RETURN(std::vector<TensorDesc> outs, infer_rnn(fwd, a, kind));
  static constexpr const char* kGradNames[] = {"dY", "dY_h", "dY_c"};
  static constexpr const char* kOutNames[] = {"Y", "Y_h", "Y_c"};
  for (size_t k = 0; k < outs.size(); ++k) {
    const int i = base + static_cast<int>(k);
    if (!ctx.has_input(i)) continue;
    const TensorDesc& g = ctx.input(i);
    if (g.dtype != outs[k].dtype)
      return invalid_argument(op, ": ", kGradNames[k], " is ", dtype_name(g.dtype), " but ", kOutNames[k], " is ",
                              dtype_name(outs[k].dtype), "; the gradient must have its output's type");
    if (!dims_compatible(g.dims, outs[k].dims))
      return invalid_argument(op, ": ", kGradNames[k], " has shape ", g.dims.to_string(), " but ", kOutNames[k],
                              " has shape ", outs[k].dims.to_string(), "; the gradient must have its output's shape");
  }
  const DataType dtype = outs[0].dtype;
  const Dims& w = ctx.input(rnn_input::kW).dims;
  const int64_t hidden = outs[1].dims[2];
  std::vector<TensorDesc> grads{{dtype, ctx.input(rnn_input::kX).dims, true},
                                {dtype, w, true},
                                {dtype, ctx.input(rnn_input::kR).dims, true},
                                {dtype, Dims{w[0], times(2, w[1])}, true},
                                outs[1]};
  if (kind.lstm) {
    grads.push_back(outs[2]);
    grads.push_back({dtype, Dims{w[0], times(3, hidden)}, true});
  }
  return grads;
}

OpSchema rnn_backward_schema(const RnnKind& kind, const char* op) {
  const std::string summary =
      str_cat("gradient of ", kind.op, " with respect to X, W, R, B and the initial states (recomputes the forward)");
  OpSchema s;
  if (kind.lstm)
    s = make_schema<LstmAttrs>(op, "rnn", summary);
  else if (kind.gates == 3)
    s = make_schema<GruAttrs>(op, "rnn", summary);
  else
    s = make_schema<RnnAttrs>(op, "rnn", summary);
  s.input_names = {"X", "W", "R", "B", "sequence_lens", "initial_h"};
  if (kind.lstm) {
    s.input_names.push_back("initial_c");
    s.input_names.push_back("P");
  }
  s.input_names.push_back("dY");
  s.input_names.push_back("dY_h");
  if (kind.lstm) s.input_names.push_back("dY_c");
  s.min_inputs = 3;
  s.max_inputs = static_cast<int>(s.input_names.size());
  s.infer = [kind, op](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    if (kind.lstm) return infer_rnn_backward(ctx, ctx.attrs_as<LstmAttrs>(), kind, op);
    if (kind.gates == 3) return infer_rnn_backward(ctx, ctx.attrs_as<GruAttrs>(), kind, op);
    return infer_rnn_backward(ctx, ctx.attrs_as<RnnAttrs>(), kind, op);
  };
  return s;
}

KILN_REGISTER_OP(rnn_schema(kLstm));
KILN_REGISTER_OP(rnn_schema(kGru));
KILN_REGISTER_OP(rnn_schema(kRnn));
KILN_REGISTER_OP(rnn_backward_schema(kLstm, "LSTMBackward"));
KILN_REGISTER_OP(rnn_backward_schema(kGru, "GRUBackward"));
KILN_REGISTER_OP(rnn_backward_schema(kRnn, "RNNBackward"));

}  // namespace
}  // namespace kiln
