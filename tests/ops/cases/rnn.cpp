#include "ops/rnn/rnn.h"
#include "harness.h"

namespace kiln::harness {
namespace {

struct Shape {
  int64_t seq = 4, batch = 3, input = 5, hidden = 6;
};

// What a case feeds besides X, W and R.
struct Feed {
  bool bias = true;
  bool initial = true;            // initial_h (and initial_c for LSTM)
  bool peepholes = false;         // LSTM only
  std::vector<double> lens = {};  // sequence_lens values; empty: absent
  DataType lens_type = DataType::kInt32;
};

// Inputs X, W, R, B, sequence_lens, initial_h[, initial_c, P]; trailing absent ones are dropped.
std::vector<InputSpec> rnn_inputs(int64_t gates, const RnnCommonAttrs& a, Shape s, const Feed& f, bool lstm,
                                  double x_range = 1.0) {
  const int64_t dirs = a.num_directions();
  const Dims x = a.layout == 0 ? Dims{s.seq, s.batch, s.input} : Dims{s.batch, s.seq, s.input};
  const Dims state = a.layout == 0 ? Dims{dirs, s.batch, s.hidden} : Dims{s.batch, dirs, s.hidden};
  std::vector<InputSpec> in{uniform(x, -x_range, x_range), uniform({dirs, gates * s.hidden, s.input}, -0.5, 0.5),
                            uniform({dirs, gates * s.hidden, s.hidden}, -0.5, 0.5)};
  in.push_back(f.bias ? uniform({dirs, 2 * gates * s.hidden}, -0.5, 0.5) : absent());
  in.push_back(f.lens.empty() ? absent() : fixed(f.lens_type, {s.batch}, f.lens));
  in.push_back(f.initial ? uniform(state, -0.8, 0.8) : absent());
  if (lstm) {
    in.push_back(f.initial ? uniform(state, -0.8, 0.8) : absent());
    in.push_back(f.peepholes ? uniform({dirs, 3 * s.hidden}, -0.5, 0.5) : absent());
  }
  while (in.size() > 3 && in.back().absent) in.pop_back();
  return in;
}

std::vector<int64_t> acts(std::initializer_list<RnnActivation> list) {
  std::vector<int64_t> out;
  for (RnnActivation a : list) out.push_back(static_cast<int64_t>(a));
  return out;
}

template <class A>
A with(RnnDirection direction, int64_t layout = 0) {
  A a;
  a.direction = direction;
  a.layout = layout;
  return a;
}

constexpr auto kFwd = RnnDirection::kForward;
constexpr auto kRev = RnnDirection::kReverse;
constexpr auto kBi = RnnDirection::kBidirectional;
const std::vector<DataType> kF32 = {DataType::kFloat32};

void lstm_cases(std::vector<OpCase>& cases) {
  auto add = [&](const char* name, LstmAttrs a, Shape s, Feed f, double x_range = 1.0) {
    cases.push_back({"LSTM", name, attrs(a), rnn_inputs(4, a, s, f, true, x_range)});
  };
  add("forward X W R only", with<LstmAttrs>(kFwd), {}, {.bias = false, .initial = false});
  add("forward bias initial", with<LstmAttrs>(kFwd), {}, {});
  add("reverse bias initial", with<LstmAttrs>(kRev), {}, {});
  add("bidirectional", with<LstmAttrs>(kBi), {}, {});
  add("bidirectional no initial", with<LstmAttrs>(kBi), {5, 2, 3, 4}, {.initial = false});
  add("forward peepholes", with<LstmAttrs>(kFwd), {}, {.peepholes = true});
  add("bidirectional peepholes", with<LstmAttrs>(kBi), {}, {.peepholes = true});
  add("forward lens 4,2,0", with<LstmAttrs>(kFwd), {}, {.lens = {4, 2, 0}});
  add("reverse lens 1,3,4", with<LstmAttrs>(kRev), {}, {.lens = {1, 3, 4}});
  add("bidirectional lens 3,4,2 peepholes", with<LstmAttrs>(kBi), {}, {.peepholes = true, .lens = {3, 4, 2}});
  add("lens all full int32", with<LstmAttrs>(kBi), {}, {.lens = {4, 4, 4}});
  add("lens int64", with<LstmAttrs>(kFwd), {}, {.lens = {2, 4, 3}, .lens_type = DataType::kInt64});
  LstmAttrs clip = with<LstmAttrs>(kBi);
  clip.clip = 0.7f;
  add("clip 0.7", clip, {}, {.peepholes = true}, 3.0);
  LstmAttrs coupled = with<LstmAttrs>(kFwd);
  coupled.input_forget = true;
  add("input_forget", coupled, {}, {.peepholes = true});
  add("layout 1 forward", with<LstmAttrs>(kFwd, 1), {}, {});
  add("layout 1 bidirectional lens", with<LstmAttrs>(kBi, 1), {}, {.peepholes = true, .lens = {2, 4, 1}});
  LstmAttrs custom = with<LstmAttrs>(kBi);
  custom.activations = acts({RnnActivation::kHardSigmoid, RnnActivation::kLeakyRelu, RnnActivation::kSoftsign,
                             RnnActivation::kSigmoid, RnnActivation::kElu, RnnActivation::kScaledTanh});
  custom.activation_alpha = {0.3f, 0.1f, 0.f, 0.f, 0.8f, 0.9f};
  custom.activation_beta = {0.4f, 0.f, 0.f, 0.f, 0.f, 1.3f};
  add("activations hard_sigmoid leaky_relu softsign | sigmoid elu scaled_tanh", custom, {}, {});
  LstmAttrs one_list = with<LstmAttrs>(kBi);
  one_list.activations = acts({RnnActivation::kSigmoid, RnnActivation::kRelu, RnnActivation::kTanh});
  add("activations sigmoid relu tanh both directions", one_list, {3, 2, 4, 5}, {});
  add("seq 1 batch 1", with<LstmAttrs>(kBi), {1, 1, 2, 3}, {});
  LstmAttrs sized = with<LstmAttrs>(kFwd);
  sized.hidden_size = 8;
  add("hidden_size 8 input 6", sized, {5, 2, 6, 8}, {});
  // Larger problem for perf; float32 only, hidden 32 accumulates longer dot products.
  cases.push_back({"LSTM", "perf 16x8x32x32 bidirectional", attrs(with<LstmAttrs>(kBi)),
                   rnn_inputs(4, with<LstmAttrs>(kBi), {16, 8, 32, 32}, {}, true), kF32, 2.0});
}

void gru_cases(std::vector<OpCase>& cases) {
  auto add = [&](const char* name, GruAttrs a, Shape s, Feed f, double x_range = 1.0) {
    cases.push_back({"GRU", name, attrs(a), rnn_inputs(3, a, s, f, false, x_range)});
  };
  for (bool lbr : {false, true}) {
    auto g = [&](RnnDirection d, int64_t layout = 0) {
      GruAttrs a = with<GruAttrs>(d, layout);
      a.linear_before_reset = lbr;
      return a;
    };
    const std::string tag = lbr ? " lbr" : "";
    auto name = [&](const char* base) { return std::string(base) + tag; };
    auto add_named = [&](const std::string& n, GruAttrs a, Shape s, Feed f, double x_range = 1.0) {
      cases.push_back({"GRU", n, attrs(a), rnn_inputs(3, a, s, f, false, x_range)});
    };
    add_named(name("forward X W R only"), g(kFwd), {}, {.bias = false, .initial = false});
    add_named(name("forward bias initial"), g(kFwd), {}, {});
    add_named(name("reverse bias initial"), g(kRev), {}, {});
    add_named(name("bidirectional"), g(kBi), {}, {});
    add_named(name("bidirectional lens 2,0,4"), g(kBi), {}, {.lens = {2, 0, 4}});
    add_named(name("reverse lens 3,1,4"), g(kRev), {}, {.lens = {3, 1, 4}});
    add_named(name("lens all full"), g(kFwd), {}, {.lens = {4, 4, 4}});
    GruAttrs clip = g(kBi);
    clip.clip = 0.6f;
    add_named(name("clip 0.6"), clip, {}, {}, 3.0);
    add_named(name("layout 1 forward"), g(kFwd, 1), {}, {});
    add_named(name("layout 1 bidirectional lens"), g(kBi, 1), {5, 2, 3, 4}, {.lens = {5, 3}});
    GruAttrs custom = g(kBi);
    custom.activations = acts({RnnActivation::kHardSigmoid, RnnActivation::kAffine, RnnActivation::kSigmoid,
                               RnnActivation::kThresholdedRelu});
    custom.activation_alpha = {0.25f, 0.7f, 0.f, 0.1f};
    custom.activation_beta = {0.45f, 0.05f, 0.f, 0.f};
    add_named(name("activations hard_sigmoid affine | sigmoid thresholded_relu"), custom, {}, {});
    cases.push_back({"GRU", name("perf 16x8x32x32 bidirectional"), attrs(g(kBi)),
                     rnn_inputs(3, g(kBi), {16, 8, 32, 32}, {}, false), kF32, 2.0});
  }
  GruAttrs one = with<GruAttrs>(kFwd);
  one.activations = acts({RnnActivation::kSigmoid, RnnActivation::kSoftplus});
  add("activations sigmoid softplus", one, {2, 2, 3, 4}, {});
  add("seq 1 batch 1", with<GruAttrs>(kBi), {1, 1, 2, 3}, {});
}

void rnn_cases(std::vector<OpCase>& cases) {
  auto add = [&](const char* name, RnnAttrs a, Shape s, Feed f, double x_range = 1.0) {
    cases.push_back({"RNN", name, attrs(a), rnn_inputs(1, a, s, f, false, x_range)});
  };
  auto act = [](RnnDirection d, std::initializer_list<RnnActivation> fns, std::vector<float> alpha = {},
                std::vector<float> beta = {}, int64_t layout = 0) {
    RnnAttrs a = with<RnnAttrs>(d, layout);
    a.activations = acts(fns);
    a.activation_alpha = std::move(alpha);
    a.activation_beta = std::move(beta);
    return a;
  };
  add("forward tanh X W R only", with<RnnAttrs>(kFwd), {}, {.bias = false, .initial = false});
  add("forward tanh bias initial", with<RnnAttrs>(kFwd), {}, {});
  add("reverse relu", act(kRev, {RnnActivation::kRelu}), {}, {});
  add("bidirectional tanh", with<RnnAttrs>(kBi), {}, {});
  add("bidirectional sigmoid | relu", act(kBi, {RnnActivation::kSigmoid, RnnActivation::kRelu}), {}, {});
  add("forward leaky_relu 0.2", act(kFwd, {RnnActivation::kLeakyRelu}, {0.2f}, {0.f}), {}, {});
  add("bidirectional lens 1,4,3", with<RnnAttrs>(kBi), {}, {.lens = {1, 4, 3}});
  add("reverse lens 0,2,4", with<RnnAttrs>(kRev), {}, {.lens = {0, 2, 4}});
  add("lens all full", with<RnnAttrs>(kBi), {}, {.lens = {4, 4, 4}});
  RnnAttrs clip = with<RnnAttrs>(kBi);
  clip.clip = 0.5f;
  add("clip 0.5", clip, {}, {}, 3.0);
  add("layout 1 forward", with<RnnAttrs>(kFwd, 1), {}, {});
  add("layout 1 bidirectional lens", with<RnnAttrs>(kBi, 1), {}, {.lens = {4, 2, 3}});
  add("thresholded_relu | softplus",
      act(kBi, {RnnActivation::kThresholdedRelu, RnnActivation::kSoftplus}, {0.2f, 0.f}, {0.f, 0.f}), {}, {});
  add("affine | scaled_tanh",
      act(kBi, {RnnActivation::kAffine, RnnActivation::kScaledTanh}, {0.6f, 1.5f}, {0.1f, 0.7f}), {}, {});
  add("elu", act(kFwd, {RnnActivation::kElu}), {}, {});
  add("softsign", act(kRev, {RnnActivation::kSoftsign}), {}, {});
  add("hard_sigmoid", act(kFwd, {RnnActivation::kHardSigmoid}), {}, {});
  add("seq 1 batch 1", with<RnnAttrs>(kBi), {1, 1, 2, 3}, {});
  // 4.0: grad mode's finite differences of a float32 loss over 8192 outputs resolve this case's bias gradient only
  // to about 1.5% (a step 10x larger agrees to 1e-5).
  cases.push_back({"RNN", "perf 16x8x32x32 bidirectional", attrs(with<RnnAttrs>(kBi)),
                   rnn_inputs(1, with<RnnAttrs>(kBi), {16, 8, 32, 32}, {}, false), kF32, 4.0});
}

// grad mode: the forward ops with only some outputs reaching the loss (the others get no gradient).
void partial_grad_cases(std::vector<OpCase>& cases) {
  const Shape small{3, 2, 3, 4};
  auto add = [&](const char* op, const char* name, std::shared_ptr<Attrs> a, std::vector<InputSpec> in,
                 std::vector<int> used) {
    OpCase c{op, name, std::move(a), std::move(in), kF32};
    c.grad_outputs = std::move(used);
    cases.push_back(std::move(c));
  };
  LstmAttrs lstm = with<LstmAttrs>(kBi);
  add("LSTM", "grad Y only lens 3,1", attrs(lstm),
      rnn_inputs(4, lstm, small, {.peepholes = true, .lens = {3, 1}}, true), {0});
  add("LSTM", "grad Y_h only", attrs(lstm), rnn_inputs(4, lstm, small, {.peepholes = true}, true), {1});
  add("LSTM", "grad Y_c only lens 2,0", attrs(lstm), rnn_inputs(4, lstm, small, {.lens = {2, 0}}, true), {2});
  LstmAttrs rev1 = with<LstmAttrs>(kRev, 1);
  add("LSTM", "grad Y_h Y_c layout 1 reverse", attrs(rev1), rnn_inputs(4, rev1, small, {.peepholes = true}, true),
      {1, 2});
  for (bool lbr : {false, true}) {
    GruAttrs gru = with<GruAttrs>(kBi);
    gru.linear_before_reset = lbr;
    add("GRU", lbr ? "grad Y_h only lbr" : "grad Y_h only", attrs(gru),
        rnn_inputs(3, gru, small, {.lens = {1, 3}}, false), {1});
  }
  RnnAttrs plain = with<RnnAttrs>(kRev);
  add("RNN", "grad Y only", attrs(plain), rnn_inputs(1, plain, small, {}, false), {0});
}

// test mode: the backward ops themselves (the forward's inputs, then dY, dY_h[, dY_c]).
void backward_cases(std::vector<OpCase>& cases) {
  struct Grads {
    bool y = true, y_h = true, y_c = true;
  };
  auto inputs = [](int64_t gates, const RnnCommonAttrs& a, Shape s, const Feed& f, bool lstm, Grads g) {
    std::vector<InputSpec> in = rnn_inputs(gates, a, s, f, lstm);
    while (static_cast<int>(in.size()) < rnn_grad_input::dy(lstm)) in.push_back(absent());
    const int64_t dirs = a.num_directions();
    const Dims y = a.layout == 0 ? Dims{s.seq, dirs, s.batch, s.hidden} : Dims{s.batch, s.seq, dirs, s.hidden};
    const Dims state = a.layout == 0 ? Dims{dirs, s.batch, s.hidden} : Dims{s.batch, dirs, s.hidden};
    in.push_back(g.y ? uniform(y) : absent());
    in.push_back(g.y_h ? uniform(state) : absent());
    if (lstm) in.push_back(g.y_c ? uniform(state) : absent());
    return in;
  };
  const Shape s{4, 3, 5, 6};
  auto lstm = [&](const char* name, LstmAttrs a, Feed f, Grads g = {}) {
    cases.push_back({"LSTMBackward", name, attrs(a), inputs(4, a, s, f, true, g), kF32, 2.0});
  };
  cases.push_back({"LSTMBackward",
                   "forward 16-bit",
                   attrs(with<LstmAttrs>(kFwd)),
                   inputs(4, with<LstmAttrs>(kFwd), {3, 2, 3, 4}, {}, true, {}),
                   {DataType::kFloat16, DataType::kBFloat16},
                   2.0});
  lstm("forward", with<LstmAttrs>(kFwd), {});
  lstm("bidirectional peepholes lens", with<LstmAttrs>(kBi), {.peepholes = true, .lens = {4, 2, 0}});
  lstm("reverse layout 1 dY_h only", with<LstmAttrs>(kRev, 1), {.bias = false, .initial = false},
       {.y = false, .y_c = false});
  LstmAttrs coupled = with<LstmAttrs>(kFwd);
  coupled.input_forget = true;
  coupled.clip = 0.8f;
  lstm("input_forget clip", coupled, {.peepholes = true});
  cases.push_back({"LSTMBackward", "perf 16x8x32x32 bidirectional", attrs(with<LstmAttrs>(kBi)),
                   inputs(4, with<LstmAttrs>(kBi), {16, 8, 32, 32}, {}, true, {}), kF32, 4.0});
  for (bool lbr : {false, true}) {
    auto gru = [&](const std::string& name, GruAttrs a, Feed f, Grads g = {}) {
      a.linear_before_reset = lbr;
      cases.push_back({"GRUBackward", name + (lbr ? " lbr" : ""), attrs(a), inputs(3, a, s, f, false, g), kF32, 2.0});
    };
    GruAttrs half = with<GruAttrs>(kFwd);
    half.linear_before_reset = lbr;
    cases.push_back({"GRUBackward",
                     std::string("forward 16-bit") + (lbr ? " lbr" : ""),
                     attrs(half),
                     inputs(3, half, {3, 2, 3, 4}, {}, false, {}),
                     {DataType::kFloat16, DataType::kBFloat16},
                     2.0});
    gru("forward", with<GruAttrs>(kFwd), {});
    gru("bidirectional lens", with<GruAttrs>(kBi), {.lens = {2, 4, 0}});
    gru("reverse layout 1 dY only", with<GruAttrs>(kRev, 1), {.bias = false}, {.y_h = false});
    GruAttrs act = with<GruAttrs>(kBi);
    act.activations = acts({RnnActivation::kHardSigmoid, RnnActivation::kSoftsign});
    act.clip = 0.9f;
    gru("activations clip", act, {});
    GruAttrs big = with<GruAttrs>(kBi);
    big.linear_before_reset = lbr;
    cases.push_back({"GRUBackward", std::string("perf 16x8x32x32 bidirectional") + (lbr ? " lbr" : ""), attrs(big),
                     inputs(3, big, {16, 8, 32, 32}, {}, false, {}), kF32, 4.0});
  }
  auto rnn = [&](const char* name, RnnAttrs a, Feed f, Grads g = {}) {
    cases.push_back({"RNNBackward", name, attrs(a), inputs(1, a, s, f, false, g), kF32, 2.0});
  };
  rnn("forward", with<RnnAttrs>(kFwd), {});
  RnnAttrs relu = with<RnnAttrs>(kBi, 1);
  relu.activations = acts({RnnActivation::kRelu});
  rnn("bidirectional relu layout 1 lens", relu, {.lens = {3, 1, 4}});
  rnn("reverse no gradients", with<RnnAttrs>(kRev), {}, {.y = false, .y_h = false});
  cases.push_back({"RNNBackward", "perf 16x8x32x32 bidirectional", attrs(with<RnnAttrs>(kBi)),
                   inputs(1, with<RnnAttrs>(kBi), {16, 8, 32, 32}, {}, false, {}), kF32, 4.0});
}

}  // namespace

KILN_OP_CASES(rnn) {
  std::vector<OpCase> cases;
  lstm_cases(cases);
  gru_cases(cases);
  rnn_cases(cases);
  partial_grad_cases(cases);
  backward_cases(cases);
  return cases;
}

}  // namespace kiln::harness
