#include <gtest/gtest.h>

#include <cmath>

#include "kernels/registry.h"
#include "op_test_util.h"
#include "ops/rnn/rnn.h"

namespace kiln {
namespace {

TensorDesc f32(Dims d) { return {DataType::kFloat32, d, true}; }

Result<std::vector<TensorDesc>> infer(const char* op, const Attrs& a, std::vector<TensorDesc> in,
                                      std::vector<const Tensor*> values = {}) {
  const OpSchema* s = OpRegistry::global().find(op);
  if (!s) return internal_error("no schema ", op);
  return s->infer_outputs(InferContext(a, in, values));
}

// Expects inference to fail with a message containing `part`.
void expect_error(const char* op, const Attrs& a, std::vector<TensorDesc> in, const std::string& part,
                  std::vector<const Tensor*> values = {}) {
  auto r = infer(op, a, std::move(in), std::move(values));
  ASSERT_FALSE(r.is_ok()) << "expected an error containing '" << part << "'";
  EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message();
}

Tensor tensor(DataType dtype, Dims dims, std::vector<double> values) {
  Tensor t = *Tensor::empty(dtype, dims);
  for (size_t i = 0; i < values.size(); ++i) t.set(static_cast<int64_t>(i), values[i]);
  return t;
}

// Runs `op` on `backend`; inputs are host tensors (undefined for absent ones).
Result<std::vector<Tensor>> run(const char* op, const Attrs& a, const std::vector<Tensor>& src, Backend backend) {
  OpCall call;
  call.schema = OpRegistry::global().find(op);
  call.attrs = &a;
  std::vector<const Tensor*> values;
  for (const Tensor& t : src) {
    call.inputs.push_back(t.defined() ? TensorDesc{t.dtype(), t.dims(), true} : TensorDesc::absent());
    values.push_back(t.defined() ? &t : nullptr);
  }
  KILN_ASSIGN_OR_RETURN(call.outputs, call.schema->infer_outputs(InferContext(a, call.inputs, values)));
  std::vector<Tensor> dst;
  for (const TensorDesc& d : call.outputs) dst.push_back(*Tensor::empty(d.dtype, d.dims));
  KILN_RETURN_IF_ERROR(op_test::run_engine(call, backend, src, dst));
  return dst;
}

Tensor random(Dims dims, uint32_t seed) {
  Tensor t = *Tensor::empty(DataType::kFloat32, dims);
  uint32_t s = seed * 2654435761u + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s = s * 1664525u + 1013904223u;
    t.set(i, static_cast<double>(s >> 8) / (1 << 24) - 0.5);
  }
  return t;
}

TEST(RnnSchema, LstmShapes) {
  LstmAttrs a;
  a.direction = RnnDirection::kBidirectional;
  auto out = infer("LSTM", a,
                   {f32({5, 3, 4}),
                    f32({2, 24, 4}),
                    f32({2, 24, 6}),
                    f32({2, 48}),
                    {DataType::kInt32, {3}, true},
                    f32({2, 3, 6}),
                    f32({2, 3, 6}),
                    f32({2, 18})});
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  ASSERT_EQ(out->size(), 3u);
  EXPECT_EQ((*out)[0].dims, (Dims{5, 2, 3, 6}));
  EXPECT_EQ((*out)[1].dims, (Dims{2, 3, 6}));
  EXPECT_EQ((*out)[2].dims, (Dims{2, 3, 6}));
}

TEST(RnnSchema, LayoutOneAndDynamicDims) {
  GruAttrs a;
  a.layout = 1;
  auto out = infer("GRU", a, {f32({3, kDynamicDim, 4}), f32({1, 15, 4}), f32({1, 15, 5})});
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].dims, (Dims{3, kDynamicDim, 1, 5}));
  EXPECT_EQ((*out)[1].dims, (Dims{3, 1, 5}));
  RnnAttrs r;
  r.hidden_size = 7;
  auto rnn = infer("RNN", r, {f32({2, 2, 3}), f32({1, 7, 3}), f32({1, 7, kDynamicDim})});
  ASSERT_TRUE(rnn.is_ok()) << rnn.status().message();
  EXPECT_EQ((*rnn)[0].dims, (Dims{2, 1, 2, 7}));
}

TEST(RnnSchema, MalformedInputsNameTheProblem) {
  LstmAttrs a;
  expect_error("LSTM", a, {f32({5, 3}), f32({1, 24, 4}), f32({1, 24, 6})}, "X must have rank 3");
  expect_error("LSTM", a, {f32({5, 3, 4}), f32({2, 24, 4}), f32({1, 24, 6})}, "num_directions");
  expect_error("LSTM", a, {f32({5, 3, 4}), f32({1, 24, 5}), f32({1, 24, 6})}, "input_size");
  expect_error("LSTM", a, {f32({5, 3, 4}), f32({1, 24, 4}), f32({1, 18, 6})}, "gates * hidden_size");
  expect_error("LSTM", a, {f32({5, 3, 4}), f32({1, 24, 4}), f32({1, 24, 6}), f32({1, 24})}, "2 * gates");
  expect_error("LSTM", a, {f32({5, 3, 4}), f32({1, 24, 4}), f32({1, 24, 6}), TensorDesc::absent(), f32({3})},
               "sequence_lens is float32");
  expect_error("LSTM", a,
               {f32({5, 3, 4}), f32({1, 24, 4}), f32({1, 24, 6}), TensorDesc::absent(), {DataType::kInt32, {2}, true}},
               "batch_size");
  expect_error(
      "LSTM", a,
      {f32({5, 3, 4}), f32({1, 24, 4}), f32({1, 24, 6}), TensorDesc::absent(), TensorDesc::absent(), f32({1, 2, 6})},
      "initial_h");
  expect_error("LSTM", a,
               {f32({5, 3, 4}), f32({1, 24, 4}), f32({1, 24, 6}), TensorDesc::absent(), TensorDesc::absent(),
                TensorDesc::absent(), TensorDesc::absent(), f32({1, 12})},
               "3 * hidden_size");
  expect_error("LSTM", a, {f32({5, 3, 4}), {DataType::kFloat16, {1, 24, 4}, true}, f32({1, 24, 6})}, "W is float16");
  expect_error("LSTM", a, {{DataType::kInt32, {5, 3, 4}, true}, f32({1, 24, 4}), f32({1, 24, 6})}, "floating-point X");
  Tensor lens = tensor(DataType::kInt32, {3}, {5, 6, 1});
  expect_error("LSTM", a,
               {f32({5, 3, 4}), f32({1, 24, 4}), f32({1, 24, 6}), TensorDesc::absent(), {DataType::kInt32, {3}, true}},
               "sequence_lens holds 6", {nullptr, nullptr, nullptr, nullptr, &lens});
  expect_error("LSTM", a, {f32({5, 3, 4}), f32({1, 24, 4})}, "takes 3 to 8 inputs");
}

TEST(RnnSchema, MalformedAttributes) {
  const std::vector<TensorDesc> in{f32({5, 3, 4}), f32({1, 24, 4}), f32({1, 24, 6})};
  LstmAttrs a;
  a.layout = 2;
  expect_error("LSTM", a, in, "layout 2");
  a = {};
  a.clip = -1.f;
  expect_error("LSTM", a, in, "clip");
  a = {};
  a.hidden_size = 5;
  expect_error("LSTM", a, in, "hidden_size");
  a = {};
  a.activations = {0, 1};
  expect_error("LSTM", a, in, "takes 3 per direction");
  a.activations = {0, 1, 99};
  expect_error("LSTM", a, in, "99 is not an activation");
  a.activations = {0, 1, 1};
  a.activation_alpha = {1.f};
  expect_error("LSTM", a, in, "activation_alpha has 1");
  GruAttrs g;
  g.direction = static_cast<RnnDirection>(7);
  expect_error("GRU", g, {f32({5, 3, 4}), f32({1, 18, 4}), f32({1, 18, 6})}, "direction 7");
}

TEST(RnnActivations, OnnxNamesAndParameterOrder) {
  EXPECT_EQ(parse_rnn_activation("LeakyRelu"), RnnActivation::kLeakyRelu);
  EXPECT_EQ(parse_rnn_activation("leaky_relu"), RnnActivation::kLeakyRelu);
  EXPECT_EQ(parse_rnn_activation("HardSigmoid"), RnnActivation::kHardSigmoid);
  EXPECT_FALSE(parse_rnn_activation("Gelu").has_value());
  RnnCommonAttrs a;
  const std::vector<std::string> names{"LeakyRelu", "Tanh", "HardSigmoid"};
  const std::vector<float> alpha{0.1f, 0.3f}, beta{0.6f};
  ASSERT_TRUE(set_onnx_activations(a, names, alpha, beta).is_ok());
  EXPECT_EQ(a.activations, (std::vector<int64_t>{static_cast<int64_t>(RnnActivation::kLeakyRelu),
                                                 static_cast<int64_t>(RnnActivation::kTanh),
                                                 static_cast<int64_t>(RnnActivation::kHardSigmoid)}));
  EXPECT_EQ(a.activation_alpha, (std::vector<float>{0.1f, 0.f, 0.3f}));
  EXPECT_EQ(a.activation_beta, (std::vector<float>{0.f, 0.f, 0.6f}));
  const std::vector<std::string> bad{"Sigmoid", "Swish"};
  auto s = set_onnx_activations(a, bad, {}, {});
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("Swish"), std::string::npos);
}

// Affine(1, 0) makes the RNN linear: h_t = W x_t + R h_{t-1} + Wb + Rb, easy to follow by hand.
TEST(RnnKernels, LinearRnnByHandWithClip) {
  RnnAttrs a;
  a.activations = {static_cast<int64_t>(RnnActivation::kAffine)};
  a.activation_alpha = {1.f};
  a.activation_beta = {0.f};
  const std::vector<Tensor> src{tensor(DataType::kFloat32, {2, 1, 1}, {1, 2}),
                                tensor(DataType::kFloat32, {1, 1, 1}, {2}),
                                tensor(DataType::kFloat32, {1, 1, 1}, {0.5}),
                                tensor(DataType::kFloat32, {1, 2}, {0.1, 0.2}),
                                Tensor(),
                                tensor(DataType::kFloat32, {1, 1, 1}, {1})};
  for (Backend b : {Backend::kRef, Backend::kCpu}) {
    auto out = run("RNN", a, src, b);
    ASSERT_TRUE(out.is_ok()) << out.status().message();
    EXPECT_NEAR((*out)[0].at(0), 2.8, 1e-5);  // 2 * 1 + 0.5 * 1 + 0.3
    EXPECT_NEAR((*out)[0].at(1), 5.7, 1e-5);  // 2 * 2 + 0.5 * 2.8 + 0.3
    EXPECT_NEAR((*out)[1].at(0), 5.7, 1e-5);
  }
  a.clip = 3.f;
  for (Backend b : {Backend::kRef, Backend::kCpu}) {
    auto out = run("RNN", a, src, b);
    ASSERT_TRUE(out.is_ok()) << out.status().message();
    EXPECT_NEAR((*out)[0].at(0), 2.8, 1e-5);
    EXPECT_NEAR((*out)[0].at(1), 3.0, 1e-5);  // 5.7 clipped
  }
}

// input_forget couples f = 1 - i; one step of a one-unit LSTM written out from the ONNX equations.
TEST(RnnKernels, LstmInputForgetByHand) {
  LstmAttrs a;
  a.input_forget = true;
  const double wi = 0.3, wo = -0.2, wf = 5.0, wc = 0.7, c0 = 0.5;
  const std::vector<Tensor> src{tensor(DataType::kFloat32, {1, 1, 1}, {1}),
                                tensor(DataType::kFloat32, {1, 4, 1}, {wi, wo, wf, wc}),
                                tensor(DataType::kFloat32, {1, 4, 1}, {0, 0, 0, 0}),
                                Tensor(),
                                Tensor(),
                                tensor(DataType::kFloat32, {1, 1, 1}, {0}),
                                tensor(DataType::kFloat32, {1, 1, 1}, {c0})};
  auto sigmoid = [](double x) { return 1 / (1 + std::exp(-x)); };
  const double i = sigmoid(wi), c = (1 - i) * c0 + i * std::tanh(wc), h = sigmoid(wo) * std::tanh(c);
  for (Backend b : {Backend::kRef, Backend::kCpu}) {
    auto out = run("LSTM", a, src, b);
    ASSERT_TRUE(out.is_ok()) << out.status().message();
    EXPECT_NEAR((*out)[0].at(0), h, 1e-5);
    EXPECT_NEAR((*out)[1].at(0), h, 1e-5);
    EXPECT_NEAR((*out)[2].at(0), c, 1e-5);
  }
}

// A batch entry with sequence length L gives what the same entry gives alone on its first L steps,
// in both directions; Y is zero past L.
TEST(RnnKernels, SequenceLengthsMatchTruncatedRuns) {
  const int64_t seq = 4, hidden = 3, input = 2, len0 = 2;
  for (const char* op : {"LSTM", "GRU", "RNN"}) {
    const int64_t gates = std::string(op) == "LSTM" ? 4 : std::string(op) == "GRU" ? 3 : 1;
    LstmAttrs la;
    GruAttrs ga;
    RnnAttrs ra;
    la.direction = ga.direction = ra.direction = RnnDirection::kBidirectional;
    const Attrs& a = gates == 4 ? static_cast<const Attrs&>(la) : gates == 3 ? static_cast<const Attrs&>(ga) : ra;
    const Tensor x = random({seq, 2, input}, 1), w = random({2, gates * hidden, input}, 2),
                 r = random({2, gates * hidden, hidden}, 3), b = random({2, 2 * gates * hidden}, 4);
    const Tensor lens = tensor(DataType::kInt32, {2}, {static_cast<double>(len0), static_cast<double>(seq)});
    // Entry 0 alone, truncated to len0 steps.
    Tensor x0 = *Tensor::empty(DataType::kFloat32, {len0, 1, input});
    for (int64_t t = 0; t < len0; ++t)
      for (int64_t i = 0; i < input; ++i) x0.set(t * input + i, x.at((t * 2) * input + i));
    for (Backend be : {Backend::kRef, Backend::kCpu}) {
      auto full = run(op, a, {x, w, r, b, lens}, be);
      auto alone = run(op, a, {x0, w, r, b}, be);
      ASSERT_TRUE(full.is_ok()) << full.status().message();
      ASSERT_TRUE(alone.is_ok()) << alone.status().message();
      const Tensor &y = (*full)[0], &y0 = (*alone)[0];
      for (int64_t t = 0; t < seq; ++t)
        for (int64_t d = 0; d < 2; ++d)
          for (int64_t j = 0; j < hidden; ++j) {
            const double got = y.at(((t * 2 + d) * 2 + 0) * hidden + j);
            const double want = t < len0 ? y0.at((t * 2 + d) * hidden + j) : 0.0;
            EXPECT_NEAR(got, want, 1e-5) << op << " t=" << t << " d=" << d;
          }
      for (int64_t d = 0; d < 2; ++d)
        for (int64_t j = 0; j < hidden; ++j)
          EXPECT_NEAR((*full)[1].at((d * 2 + 0) * hidden + j), (*alone)[1].at(d * hidden + j), 1e-5) << op;
    }
  }
}

TEST(RnnKernels, BadSequenceLengthIsAnErrorAtRunTime) {
  GruAttrs a;
  const std::vector<Tensor> src{random({3, 2, 2}, 5), random({1, 6, 2}, 6), random({1, 6, 2}, 7), Tensor(),
                                tensor(DataType::kInt32, {2}, {1, 3})};
  // Inference sees the value too; a kernel called with a later bad value must still refuse it.
  OpCall call;
  call.schema = OpRegistry::global().find("GRU");
  call.attrs = &a;
  for (const Tensor& t : src)
    call.inputs.push_back(t.defined() ? TensorDesc{t.dtype(), t.dims(), true} : TensorDesc::absent());
  call.outputs = *call.schema->infer_outputs(InferContext(a, call.inputs));
  std::vector<Tensor> bad = src;
  bad[4] = tensor(DataType::kInt32, {2}, {1, 9});
  for (Backend be : {Backend::kRef, Backend::kCpu}) {
    std::vector<Tensor> dst;
    for (const TensorDesc& d : call.outputs) dst.push_back(*Tensor::empty(d.dtype, d.dims));
    Status s = op_test::run_engine(call, be, bad, dst);
    ASSERT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("sequence_lens[1] is 9"), std::string::npos) << s.message();
  }
}

// Zero steps: Y is empty and the final state is the initial one; zero batch: everything is empty.
TEST(RnnKernels, EmptySequenceAndBatch) {
  LstmAttrs a;
  const Tensor h0 = random({1, 2, 3}, 8), c0 = random({1, 2, 3}, 9);
  for (Backend be : {Backend::kRef, Backend::kCpu}) {
    auto out =
        run("LSTM", a, {random({0, 2, 2}, 1), random({1, 12, 2}, 2), random({1, 12, 3}, 3), Tensor(), Tensor(), h0, c0},
            be);
    ASSERT_TRUE(out.is_ok()) << out.status().message();
    EXPECT_EQ((*out)[0].dims(), (Dims{0, 1, 2, 3}));
    for (int64_t i = 0; i < 6; ++i) {
      EXPECT_EQ((*out)[1].at(i), h0.at(i));
      EXPECT_EQ((*out)[2].at(i), c0.at(i));
    }
    auto none = run("GRU", GruAttrs{}, {random({3, 0, 2}, 1), random({1, 9, 2}, 2), random({1, 9, 3}, 3)}, be);
    ASSERT_TRUE(none.is_ok()) << none.status().message();
    EXPECT_EQ((*none)[0].dims(), (Dims{3, 1, 0, 3}));
  }
}

TEST(RnnKernels, OnednnRejectsWithReasons) {
  LstmAttrs a;
  a.clip = 1.f;
  OpCall call{OpRegistry::global().find("LSTM"),
              &a,
              {f32({2, 1, 2}), f32({1, 8, 2}), f32({1, 8, 2})},
              {f32({2, 1, 1, 2}), f32({1, 1, 2}), f32({1, 1, 2})}};
  auto impls = KernelRegistry::global().find("LSTM", Backend::kCpu);
  ASSERT_GE(impls.size(), 2u);
  EXPECT_EQ(impls[0]->name, "cpu.onednn.lstm");
  Status s = impls[0]->supports(call);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("clip"), std::string::npos);
  auto chosen = KernelRegistry::global().select(call, Backend::kCpu);
  ASSERT_TRUE(chosen.is_ok());
  EXPECT_EQ((*chosen)->name, "cpu.lstm");
}

}  // namespace
}  // namespace kiln
