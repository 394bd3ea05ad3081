// Gradient rules of LSTM, GRU and RNN: one LSTMBackward / GRUBackward / RNNBackward node that takes the forward's
// inputs and the gradients that reach Y, Y_h (and Y_c) and recomputes the forward itself (no saved activations: a
// training graph stays a graph of ordinary values). sequence_lens gets no gradient.
#include "ops/grad.h"
#include "ops/rnn/rnn.h"

namespace kiln {
namespace {

using namespace rnn_input;

template <class A>
Status rnn_grad(GradBuilder& b, const char* op, bool lstm) {
  const int forward_inputs = rnn_grad_input::dy(lstm);
  const int outputs = lstm ? 3 : 2;
  // The backward's outputs in order and the forward inputs they belong to.
  const std::vector<int> targets =
      lstm ? std::vector<int>{kX, kW, kR, kB, kInitialH, kInitialC, kP} : std::vector<int>{kX, kW, kR, kB, kInitialH};
  bool needed = false;
  for (int i : targets) needed |= i < b.num_inputs() && b.input(i).valid() && b.needs_grad(i);
  std::vector<GradValue> inputs;
  inputs.reserve(static_cast<size_t>(forward_inputs) + static_cast<size_t>(outputs));
  for (int i = 0; i < forward_inputs; ++i) inputs.push_back(i < b.num_inputs() ? b.input(i) : GradValue{});
  bool reached = false;
  for (int k = 0; k < outputs; ++k) {
    inputs.push_back(b.grad_output(k));
    reached |= b.grad_output(k).valid();
  }
  if (!needed || !reached) return Status::ok();
  KILN_ASSIGN_OR_RETURN(std::vector<GradValue> grads, b.add(op, std::make_unique<A>(b.attrs_as<A>()), inputs));
  for (size_t o = 0; o < targets.size() && o < grads.size(); ++o) {
    const int i = targets[o];
    if (i < b.num_inputs() && b.input(i).valid() && b.needs_grad(i)) KILN_RETURN_IF_ERROR(b.set_grad(i, grads[o]));
  }
  return Status::ok();
}

Status lstm_grad(GradBuilder& b) { return rnn_grad<LstmAttrs>(b, "LSTMBackward", true); }
Status gru_grad(GradBuilder& b) { return rnn_grad<GruAttrs>(b, "GRUBackward", false); }
Status plain_rnn_grad(GradBuilder& b) { return rnn_grad<RnnAttrs>(b, "RNNBackward", false); }

KILN_REGISTER_GRAD("LSTM", lstm_grad);
KILN_REGISTER_GRAD("GRU", gru_grad);
KILN_REGISTER_GRAD("RNN", plain_rnn_grad);

}  // namespace
}  // namespace kiln
