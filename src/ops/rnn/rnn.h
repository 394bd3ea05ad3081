#pragma once
// Recurrent layers with ONNX semantics (opset 14): LSTM, GRU and the plain (Elman) RNN.
// Inputs X, W, R, B, sequence_lens, initial_h (and initial_c, P for LSTM); outputs Y, Y_h (and Y_c).
// Gate order is ONNX's: LSTM i,o,f,c; GRU z,r,h; RNN one gate.
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ops/attrs.h"

namespace kiln {

enum class RnnDirection { kForward, kReverse, kBidirectional };

/// The activation functions ONNX allows in recurrent ops.
enum class RnnActivation {
  kSigmoid,
  kTanh,
  kRelu,
  kAffine,           // alpha * x + beta
  kLeakyRelu,        // x >= 0 ? x : alpha * x
  kThresholdedRelu,  // x > alpha ? x : 0
  kScaledTanh,       // alpha * tanh(beta * x)
  kHardSigmoid,      // clamp(alpha * x + beta, 0, 1)
  kElu,              // x >= 0 ? x : alpha * (exp(x) - 1)
  kSoftsign,         // x / (1 + |x|)
  kSoftplus,         // log(1 + exp(x))
};
inline constexpr int kNumRnnActivations = 11;

const char* enum_name(RnnDirection direction);
const char* enum_name(RnnActivation activation);
/// Parses an ONNX activation name ("Sigmoid", "LeakyRelu", case-insensitive) or a kiln name ("leaky_relu").
std::optional<RnnActivation> parse_rnn_activation(std::string_view name);
/// ONNX's default alpha and beta of `activation` (0 where it takes none).
float rnn_activation_default_alpha(RnnActivation activation);
float rnn_activation_default_beta(RnnActivation activation);

/// Attributes every recurrent op shares.
struct RnnCommonAttrs {
  RnnDirection direction = RnnDirection::kForward;
  int64_t hidden_size = 0;  ///< 0: taken from R's last dimension
  /// RnnActivation values, per direction in gate-function order (LSTM f,g,h; GRU f,g; RNN f), forward
  /// direction first. Empty: the op's defaults. One direction's list serves both directions.
  std::vector<int64_t> activations;
  /// One alpha / beta per entry of `activations` (empty: each function's ONNX default). Note: ONNX lists
  /// only the values of functions that take them; set_onnx_activations() converts.
  std::vector<float> activation_alpha;
  std::vector<float> activation_beta;
  float clip = 0.f;    ///< > 0: every gate pre-activation is clamped to [-clip, clip]; 0: no clipping
  int64_t layout = 0;  ///< 0: X [seq, batch, input], Y [seq, dirs, batch, hidden]; 1: batch first

  template <class V>
  void visit_common(V& v) {
    v("direction", direction);
    v("hidden_size", hidden_size);
    v("activations", activations);
    v("activation_alpha", activation_alpha);
    v("activation_beta", activation_beta);
    v("clip", clip);
    v("layout", layout);
  }
  int num_directions() const { return direction == RnnDirection::kBidirectional ? 2 : 1; }
};

/// Fills activations / alpha / beta from ONNX's attributes, where alpha and beta values are consumed in
/// order only by the functions that take them.
Status set_onnx_activations(RnnCommonAttrs& attrs, std::span<const std::string> names, std::span<const float> alpha,
                            std::span<const float> beta);

/// LSTM: inputs X, W [dirs, 4H, I], R [dirs, 4H, H], B [dirs, 8H], sequence_lens [batch], initial_h,
/// initial_c [dirs, batch, H], P [dirs, 3H] (peepholes i,o,f). Outputs Y, Y_h, Y_c.
struct LstmAttrs : AttrsOf<LstmAttrs>, RnnCommonAttrs {
  bool input_forget = false;  ///< couples the gates: f = 1 - i

  template <class V>
  void visit(V& v) {
    visit_common(v);
    v("input_forget", input_forget);
  }
};

/// GRU: inputs X, W [dirs, 3H, I], R [dirs, 3H, H], B [dirs, 6H], sequence_lens, initial_h. Outputs Y, Y_h.
struct GruAttrs : AttrsOf<GruAttrs>, RnnCommonAttrs {
  bool linear_before_reset = false;  ///< r * (R_h h + Rb_h) instead of R_h (r * h) + Rb_h

  template <class V>
  void visit(V& v) {
    visit_common(v);
    v("linear_before_reset", linear_before_reset);
  }
};

/// RNN: inputs X, W [dirs, H, I], R [dirs, H, H], B [dirs, 2H], sequence_lens, initial_h. Outputs Y, Y_h.
struct RnnAttrs : AttrsOf<RnnAttrs>, RnnCommonAttrs {
  template <class V>
  void visit(V& v) {
    visit_common(v);
  }
};

/// Input indices shared by the three ops.
namespace rnn_input {
inline constexpr int kX = 0, kW = 1, kR = 2, kB = 3, kSequenceLens = 4, kInitialH = 5, kInitialC = 6, kP = 7;
}

/// The backward ops LSTMBackward, GRUBackward and RNNBackward take the forward op's attributes and inputs (X, W, R,
/// B, sequence_lens, initial_h[, initial_c, P]) followed by the gradients of its outputs (dY, dY_h[, dY_c]; each
/// optional: absent counts as zero). They recompute the forward internally (nothing is saved between the passes)
/// and output dX, dW, dR, dB, d_initial_h[, d_initial_c, dP], each of the shape of its forward input (dB, d_initial_*
/// and dP also when the forward input is absent). sequence_lens gets no gradient; where clip clamps a gate's
/// pre-activation its gradient is 0.
namespace rnn_grad_input {
/// Index of dY: after the forward inputs (8 for LSTM, 6 for GRU and RNN); dY_h and dY_c follow.
inline constexpr int dy(bool lstm) { return lstm ? 8 : 6; }
}  // namespace rnn_grad_input

/// The functions of one direction with their defaults: LSTM {sigmoid, tanh, tanh}, GRU {sigmoid, tanh}, RNN {tanh}.
std::vector<RnnActivation> rnn_default_activations(int gate_functions);

}  // namespace kiln
