// The network definition API: every add_* method built, run on the CPU through the builder and the
// runtime, and checked against hand-computed values; misuse messages; a plugin end to end.
#include "kiln/network.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "builder/builder.h"
#include "graph/network/network_internal.h"
#include "kiln/plugin.h"
#include "runtime/engine.h"

namespace kiln {
namespace {

#define NET_OK(var, expr)                                                                                            \
  auto KILN_CONCAT(var, _result) = (expr);                                                                           \
  ASSERT_TRUE(KILN_CONCAT(var, _result).is_ok()) << #expr << ": " << KILN_CONCAT(var, _result).status().to_string(); \
  auto var = std::move(KILN_CONCAT(var, _result)).value()

#define EXPECT_OK(expr)                          \
  do {                                           \
    ::kiln::Status st_ = (expr);                 \
    EXPECT_TRUE(st_.is_ok()) << st_.to_string(); \
  } while (0)

Tensor make(DataType dtype, const Dims& dims, const std::vector<double>& v) {
  Tensor t = *Tensor::empty(dtype, dims);
  for (size_t i = 0; i < v.size(); ++i) t.set(static_cast<int64_t>(i), v[i]);
  return t;
}
Tensor f32(const Dims& dims, const std::vector<double>& v) { return make(DataType::kFloat32, dims, v); }

std::vector<double> values(const Tensor& t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.at(i));
  return out;
}

void expect_values(const Tensor& t, const std::vector<double>& want, double tol = 1e-5) {
  std::vector<double> got = values(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

/// Builds `net` with the builder (CPU), runs it with the runtime and returns every output in order.
Result<std::vector<Tensor>> run(Network& net, const std::vector<Tensor>& inputs, std::string* inspect = nullptr) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, build_engine(network_graph(net), BuildOptions{}));
  KILN_ASSIGN_OR_RETURN(auto engine, EngineImpl::deserialize(bytes));
  if (inspect) *inspect = engine->inspect();
  KILN_ASSIGN_OR_RETURN(auto ctx, engine->create_execution_context());
  for (size_t i = 0; i < inputs.size(); ++i) KILN_RETURN_IF_ERROR(ctx->set_input(net.input(i)->name(), inputs[i]));
  KILN_RETURN_IF_ERROR(ctx->execute());
  std::vector<Tensor> out;
  for (int i = 0; i < net.num_outputs(); ++i) {
    KILN_ASSIGN_OR_RETURN(Tensor t, ctx->output(net.output(i)->name()));
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<float> ramp(size_t n, float scale, float phase = 0.f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * static_cast<float>(i) + phase);
  return v;
}

// ---- a plain reference for the MNIST-class net ----

std::vector<float> ref_conv(const std::vector<float>& x, int n, int c, int h, int w, const std::vector<float>& wt,
                            const std::vector<float>& b, int k, int kh, int kw) {
  const int oh = h - kh + 1, ow = w - kw + 1;
  std::vector<float> y(static_cast<size_t>(n) * k * oh * ow);
  for (int in = 0; in < n; ++in)
    for (int o = 0; o < k; ++o)
      for (int i = 0; i < oh; ++i)
        for (int j = 0; j < ow; ++j) {
          double s = b[o];
          for (int ci = 0; ci < c; ++ci)
            for (int a = 0; a < kh; ++a)
              for (int bb = 0; bb < kw; ++bb)
                s += x[((in * c + ci) * h + i + a) * w + j + bb] * wt[((o * c + ci) * kh + a) * kw + bb];
          y[((in * k + o) * oh + i) * ow + j] = static_cast<float>(s);
        }
  return y;
}

std::vector<float> ref_maxpool2(const std::vector<float>& x, int n, int c, int h, int w) {
  const int oh = h / 2, ow = w / 2;
  std::vector<float> y(static_cast<size_t>(n) * c * oh * ow);
  for (int p = 0; p < n * c; ++p)
    for (int i = 0; i < oh; ++i)
      for (int j = 0; j < ow; ++j) {
        float m = -1e30f;
        for (int a = 0; a < 2; ++a)
          for (int b = 0; b < 2; ++b) m = std::max(m, x[(p * h + 2 * i + a) * w + 2 * j + b]);
        y[(p * oh + i) * ow + j] = m;
      }
  return y;
}

std::vector<float> ref_fc(const std::vector<float>& x, int n, int k, const std::vector<float>& wt,
                          const std::vector<float>& b, int m) {
  std::vector<float> y(static_cast<size_t>(n) * m);
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < m; ++o) {
      double s = b[o];
      for (int j = 0; j < k; ++j) s += x[i * k + j] * wt[o * k + j];
      y[i * m + o] = static_cast<float>(s);
    }
  return y;
}

TEST(Network, MnistClassNetMatchesReference) {
  constexpr int kN = 2;
  Network net;
  NET_OK(x, net.add_input("data", DataType::kFloat32, {kN, 1, 12, 12}));
  const auto w1 = ramp(4 * 1 * 3 * 3, 0.5f), b1 = ramp(4, 0.1f, 1.f);
  const auto w2 = ramp(6 * 4 * 2 * 2, 0.3f, 2.f), b2 = ramp(6, 0.1f, 3.f);
  const auto w3 = ramp(16 * 24, 0.2f, 4.f), b3 = ramp(16, 0.1f, 5.f);
  const auto w4 = ramp(10 * 16, 0.4f, 6.f), b4 = ramp(10, 0.1f, 7.f);

  NET_OK(conv1, net.add_convolution(x, 4, {3, 3}, float_weights(w1), float_weights(b1)));
  EXPECT_OK(conv1->set_name("conv1"));
  NET_OK(pool1, net.add_pooling(conv1->output(0), PoolingType::kMax, {2, 2}));
  EXPECT_OK(pool1->set_stride({2, 2}));
  NET_OK(conv2, net.add_convolution(pool1->output(0), 6, {2, 2}, float_weights(w2), float_weights(b2)));
  NET_OK(pool2, net.add_pooling(conv2->output(0), PoolingType::kMax, {2, 2}));
  EXPECT_OK(pool2->set_stride({2, 2}));
  NET_OK(ip1, net.add_fully_connected(pool2->output(0), 16, float_weights(w3), float_weights(b3)));
  NET_OK(relu, net.add_activation(ip1->output(0), ActivationType::kRelu));
  NET_OK(ip2, net.add_fully_connected(relu->output(0), 10, float_weights(w4), float_weights(b4)));
  NET_OK(prob, net.add_softmax(ip2->output(0)));
  EXPECT_OK(prob->output(0)->set_name("prob"));
  EXPECT_OK(net.mark_output(prob->output(0)));

  EXPECT_EQ(net.num_layers(), 8);
  EXPECT_EQ(conv1->name(), "conv1");
  EXPECT_EQ(conv1->type(), LayerType::kConvolution);
  EXPECT_EQ(net.find_layer("conv1"), conv1);
  EXPECT_EQ(std::string(layer_type_name(pool1->type())), "Pooling");
  EXPECT_EQ(conv1->output(0)->dims(), (Dims{kN, 4, 10, 10}));
  EXPECT_EQ(pool1->output(0)->dims(), (Dims{kN, 4, 5, 5}));
  EXPECT_EQ(pool2->output(0)->dims(), (Dims{kN, 6, 2, 2}));
  EXPECT_EQ(prob->output(0)->dims(), (Dims{kN, 10}));
  EXPECT_EQ(net.output(0)->name(), "prob");
  EXPECT_TRUE(net.output(0)->is_network_output());
  EXPECT_TRUE(x->is_network_input());
  EXPECT_EQ(net.find_tensor("prob"), prob->output(0));
  EXPECT_EQ(conv1->num_inputs(), 3);
  EXPECT_EQ(conv1->input(0), x);
  EXPECT_OK(net.validate());
  EXPECT_NE(net.to_text().find("conv1"), std::string::npos);

  std::vector<float> in(kN * 144);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>((i * 7919) % 255) / 255.f;
  std::vector<double> in_d(in.begin(), in.end());
  NET_OK(out, run(net, {f32({kN, 1, 12, 12}, in_d)}));

  auto y = ref_conv(in, kN, 1, 12, 12, w1, b1, 4, 3, 3);
  y = ref_maxpool2(y, kN, 4, 10, 10);
  y = ref_conv(y, kN, 4, 5, 5, w2, b2, 6, 2, 2);
  y = ref_maxpool2(y, kN, 6, 4, 4);
  y = ref_fc(y, kN, 24, w3, b3, 16);
  for (float& v : y) v = std::max(v, 0.f);
  y = ref_fc(y, kN, 16, w4, b4, 10);
  std::vector<double> want;
  for (int i = 0; i < kN; ++i) {
    double m = -1e30, s = 0;
    for (int j = 0; j < 10; ++j) m = std::max(m, double(y[i * 10 + j]));
    for (int j = 0; j < 10; ++j) s += std::exp(y[i * 10 + j] - m);
    for (int j = 0; j < 10; ++j) want.push_back(std::exp(y[i * 10 + j] - m) / s);
  }
  expect_values(out[0], want, 1e-5);
  double total = 0;
  for (int j = 0; j < 10; ++j) total += out[0].at(j);
  EXPECT_NEAR(total, 1.0, 1e-5);
}

TEST(Network, ConvolutionSettersPaddingAndGroups) {
  Network net;
  NET_OK(x, net.add_input("x", DataType::kFloat32, {1, 1, 3, 3}));
  const std::vector<float> ones(9, 1.f);
  NET_OK(conv, net.add_convolution(x, 1, {3, 3}, float_weights(ones)));
  EXPECT_EQ(conv->output(0)->dims(), (Dims{1, 1, 1, 1}));
  EXPECT_OK(conv->set_padding({1, 1}));
  EXPECT_EQ(conv->output(0)->dims(), (Dims{1, 1, 3, 3}));
  EXPECT_EQ(conv->pre_padding(), (Dims{1, 1}));
  EXPECT_EQ(conv->post_padding(), (Dims{1, 1}));
  EXPECT_EQ(conv->stride(), (Dims{1, 1}));
  EXPECT_EQ(conv->dilation(), (Dims{1, 1}));
  EXPECT_OK(net.mark_output(conv->output(0)));

  NET_OK(same, net.add_convolution(x, 1, {3, 3}, float_weights(ones)));
  EXPECT_OK(same->set_padding_mode(PaddingMode::kSameUpper));
  EXPECT_OK(same->set_stride({2, 2}));
  EXPECT_EQ(same->output(0)->dims(), (Dims{1, 1, 2, 2}));
  NET_OK(asym, net.add_convolution(x, 1, {3, 3}, float_weights(ones)));
  EXPECT_OK(asym->set_pre_padding({1, 0}));
  EXPECT_OK(asym->set_post_padding({0, 2}));
  EXPECT_EQ(asym->output(0)->dims(), (Dims{1, 1, 2, 3}));
  NET_OK(dil, net.add_convolution(x, 1, {2, 2}, float_weights(std::vector<float>(4, 1.f))));
  EXPECT_OK(dil->set_dilation({2, 2}));
  EXPECT_EQ(dil->output(0)->dims(), (Dims{1, 1, 1, 1}));
  EXPECT_OK(net.mark_output(dil->output(0)));

  NET_OK(out, run(net, {f32({1, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1})}));
  expect_values(out[0], {4, 6, 4, 6, 9, 6, 4, 6, 4});
  expect_values(out[1], {4});

  // Depthwise: two channels, two outputs, one weight each: the weight count implies two groups.
  Network dw;
  NET_OK(y, dw.add_input("y", DataType::kFloat32, {1, 2, 1, 2}));
  const std::vector<float> wts{10, 100};
  NET_OK(dconv, dw.add_convolution(y, 2, {1, 1}, float_weights(wts)));
  EXPECT_EQ(dconv->num_groups(), 2);
  EXPECT_OK(dconv->set_num_groups(2));
  Status bad = dconv->set_num_groups(1);
  EXPECT_FALSE(bad.is_ok());
  EXPECT_NE(bad.to_string().find("num_groups = 2"), std::string::npos) << bad.to_string();
  EXPECT_OK(dw.mark_output(dconv->output(0)));
  NET_OK(dout, run(dw, {f32({1, 2, 1, 2}, {1, 2, 3, 4})}));
  expect_values(dout[0], {10, 20, 300, 400});
}

TEST(Network, Deconvolution) {
  Network net;
  NET_OK(x, net.add_input("x", DataType::kFloat32, {1, 1, 2, 2}));
  const std::vector<float> w(4, 1.f), b{0.5f};
  NET_OK(deconv, net.add_deconvolution(x, 1, {2, 2}, float_weights(w), float_weights(b)));
  EXPECT_OK(deconv->set_stride({2, 2}));
  EXPECT_EQ(deconv->output(0)->dims(), (Dims{1, 1, 4, 4}));
  EXPECT_OK(net.mark_output(deconv->output(0)));
  NET_OK(out, run(net, {f32({1, 1, 2, 2}, {1, 2, 3, 4})}));
  expect_values(out[0], {1.5, 1.5, 2.5, 2.5, 1.5, 1.5, 2.5, 2.5, 3.5, 3.5, 4.5, 4.5, 3.5, 3.5, 4.5, 4.5});

  Network net2;
  NET_OK(x2, net2.add_input("x", DataType::kFloat32, {1, 1, 2, 2}));
  NET_OK(d2, net2.add_deconvolution(x2, 1, {2, 2}, float_weights(w)));
  EXPECT_OK(d2->set_stride({2, 2}));
  EXPECT_OK(d2->set_output_padding({1, 1}));
  EXPECT_OK(d2->set_padding({0, 0}));
  EXPECT_OK(d2->set_dilation({1, 1}));
  EXPECT_OK(d2->set_num_groups(1));
  EXPECT_EQ(d2->output(0)->dims(), (Dims{1, 1, 5, 5}));
  EXPECT_OK(d2->set_pre_padding({1, 1}));
  EXPECT_OK(d2->set_post_padding({1, 1}));
  EXPECT_EQ(d2->output(0)->dims(), (Dims{1, 1, 3, 3}));
  EXPECT_OK(d2->set_padding_mode(PaddingMode::kExplicitRoundDown));
}

TEST(Network, PoolingModes) {
  Network net;
  NET_OK(x, net.add_input("x", DataType::kFloat32, {1, 1, 2, 2}));
  NET_OK(excl, net.add_pooling(x, PoolingType::kAverage, {2, 2}));
  EXPECT_OK(excl->set_padding({1, 1}));
  NET_OK(incl, net.add_pooling(x, PoolingType::kAverage, {2, 2}));
  EXPECT_OK(incl->set_padding({1, 1}));
  EXPECT_OK(incl->set_average_count_excludes_padding(false));
  NET_OK(global, net.add_global_pooling(x, PoolingType::kAverage));
  NET_OK(lp, net.add_global_pooling(x, PoolingType::kLp));
  EXPECT_OK(lp->set_lp_order(1));
  for (Layer* l :
       {static_cast<Layer*>(excl), static_cast<Layer*>(incl), static_cast<Layer*>(global), static_cast<Layer*>(lp)})
    EXPECT_OK(net.mark_output(l->output(0)));
  NET_OK(out, run(net, {f32({1, 1, 2, 2}, {1, 2, 3, 4})}));
  expect_values(out[0], {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4});
  expect_values(out[1], {0.25, 0.75, 0.5, 1, 2.5, 1.5, 0.75, 1.75, 1});
  expect_values(out[2], {2.5});
  expect_values(out[3], {10});

  Network up;
  NET_OK(y, up.add_input("y", DataType::kFloat32, {1, 1, 3, 3}));
  NET_OK(p, up.add_pooling(y, PoolingType::kMax, {2, 2}));
  EXPECT_OK(p->set_stride({2, 2}));
  EXPECT_EQ(p->output(0)->dims(), (Dims{1, 1, 1, 1}));
  EXPECT_OK(p->set_padding_mode(PaddingMode::kExplicitRoundUp));
  EXPECT_EQ(p->output(0)->dims(), (Dims{1, 1, 2, 2}));
  EXPECT_OK(p->set_padding_mode(PaddingMode::kSameUpper));
  EXPECT_EQ(p->output(0)->dims(), (Dims{1, 1, 2, 2}));
  EXPECT_OK(p->set_padding_mode(PaddingMode::kExplicitRoundDown));
  EXPECT_OK(p->set_pre_padding({1, 1}));
  EXPECT_OK(p->set_post_padding({0, 0}));
  EXPECT_OK(p->set_dilation({1, 1}));
  EXPECT_EQ(p->output(0)->dims(), (Dims{1, 1, 2, 2}));
}

TEST(Network, ActivationsAndPRelu) {
  Network net;
  NET_OK(x, net.add_input("x", DataType::kFloat32, {4}));
  NET_OK(leaky, net.add_activation(x, ActivationType::kLeakyRelu));
  EXPECT_OK(leaky->set_alpha(0.1f));
  EXPECT_FLOAT_EQ(leaky->alpha(), 0.1f);
  NET_OK(clip, net.add_activation(x, ActivationType::kClip));
  EXPECT_OK(clip->set_alpha(-1.f));
  EXPECT_OK(clip->set_beta(1.f));
  EXPECT_FLOAT_EQ(clip->beta(), 1.f);
  const std::vector<float> half{0.5f};
  NET_OK(slope, net.add_constant({1}, float_weights(half)));
  NET_OK(prelu, net.add_parametric_relu(x, slope->output(0)));
  NET_OK(sig, net.add_activation(x, ActivationType::kSigmoid));
  for (Layer* l : {static_cast<Layer*>(leaky), static_cast<Layer*>(clip), prelu, static_cast<Layer*>(sig)})
    EXPECT_OK(net.mark_output(l->output(0)));
  NET_OK(out, run(net, {f32({4}, {-2, -1, 0, 3})}));
  expect_values(out[0], {-0.2, -0.1, 0, 3});
  expect_values(out[1], {-1, -1, 0, 1});
  expect_values(out[2], {-1, -0.5, 0, 3});
  expect_values(out[3], {1 / (1 + std::exp(2.0)), 1 / (1 + std::exp(1.0)), 0.5, 1 / (1 + std::exp(-3.0))});
}

TEST(Network, MatrixMultiplyScaleElementWiseUnary) {
  Network net;
  NET_OK(a, net.add_input("a", DataType::kFloat32, {2, 3}));
  NET_OK(b, net.add_input("b", DataType::kFloat32, {2, 3}));
  NET_OK(mm, net.add_matrix_multiply(a, MatrixOperation::kNone, b, MatrixOperation::kTranspose));
  EXPECT_EQ(mm->output(0)->dims(), (Dims{2, 2}));
  NET_OK(s, net.add_input("s", DataType::kFloat32, {1, 2, 1, 2}));
  const std::vector<float> shift{1, 2}, scale{2, 3}, power{2};
  NET_OK(sc, net.add_scale(s, ScaleLayerMode::kChannel, float_weights(shift), float_weights(scale), {}));
  EXPECT_OK(sc->set_channel_axis(1));
  NET_OK(sq, net.add_scale(s, ScaleLayerMode::kUniform, {}, {}, float_weights(power)));
  NET_OK(sum, net.add_elementwise(a, b, ElementWiseOperation::kSum));
  NET_OK(prod, net.add_elementwise(a, b, ElementWiseOperation::kSum));
  EXPECT_OK(prod->set_operation(ElementWiseOperation::kProd));
  NET_OK(absl, net.add_unary(a, UnaryOperation::kExp));
  EXPECT_OK(absl->set_operation(UnaryOperation::kAbs));
  for (Layer* l : {mm, static_cast<Layer*>(sc), static_cast<Layer*>(sq), static_cast<Layer*>(sum),
                   static_cast<Layer*>(prod), static_cast<Layer*>(absl)})
    EXPECT_OK(net.mark_output(l->output(0)));
  NET_OK(out, run(net, {f32({2, 3}, {1, 2, 3, 4, 5, -6}), f32({2, 3}, {1, 0, 1, 0, 1, 0}),
                        f32({1, 2, 1, 2}, {1, 2, 3, 4})}));
  expect_values(out[0], {4, 2, -2, 5});
  expect_values(out[1], {3, 5, 11, 14});
  expect_values(out[2], {1, 4, 9, 16});
  expect_values(out[3], {2, 2, 4, 4, 6, -6});
  expect_values(out[4], {1, 0, 3, 0, 5, 0});
  expect_values(out[5], {1, 2, 3, 4, 5, 6});
}

TEST(Network, ShuffleReduceSoftmax) {
  Network net;
  NET_OK(x, net.add_input("x", DataType::kFloat32, {2, 3}));
  NET_OK(sh, net.add_shuffle(x));
  EXPECT_OK(sh->set_first_transpose({1, 0}));
  EXPECT_OK(sh->set_reshape_dims({6}));
  NET_OK(sh2, net.add_shuffle(x));
  EXPECT_OK(sh2->set_reshape_dims({3, 2}));
  EXPECT_OK(sh2->set_second_transpose({1, 0}));
  EXPECT_OK(sh2->set_zero_is_placeholder(true));
  EXPECT_EQ(sh2->output(0)->dims(), (Dims{2, 3}));
  NET_OK(rsum, net.add_reduce(x, ReduceOperation::kSum, 0b10, false));
  EXPECT_EQ(rsum->output(0)->dims(), (Dims{2}));
  NET_OK(ravg, net.add_reduce(x, ReduceOperation::kAvg, 0b01, true));
  EXPECT_EQ(ravg->output(0)->dims(), (Dims{1, 3}));
  NET_OK(amax, net.add_arg_reduce(x, TopKOperation::kMax, 1, false));
  NET_OK(sm, net.add_softmax(x));
  EXPECT_OK(sm->set_axis(0));
  NET_OK(lsm, net.add_log_softmax(x));
  for (Layer* l : {static_cast<Layer*>(sh), static_cast<Layer*>(sh2), rsum, ravg, amax, static_cast<Layer*>(sm),
                   static_cast<Layer*>(lsm)})
    EXPECT_OK(net.mark_output(l->output(0)));
  const double l3 = std::log(3.0);
  NET_OK(out, run(net, {f32({2, 3}, {0, 1, 2, l3, 4, 5})}));
  expect_values(out[0], {0, l3, 1, 4, 2, 5});
  expect_values(out[1], {0, 2, 4, 1, l3, 5});
  expect_values(out[2], {3, l3 + 9});
  expect_values(out[3], {l3 / 2, 2.5, 3.5});
  EXPECT_EQ(out[4].dtype(), DataType::kInt64);
  expect_values(out[4], {2, 2});
  const double e = std::exp(1.0);
  expect_values(out[5], {1 / 4.0, 1 / (1 + std::exp(3.0)), 1 / (1 + std::exp(3.0)), 3 / 4.0,
                         std::exp(3.0) / (1 + std::exp(3.0)), std::exp(3.0) / (1 + std::exp(3.0))});
  const double lse = std::log(1 + e + e * e);
  expect_values(out[6],
                {-lse, 1 - lse, 2 - lse, l3 - std::log(3 + std::exp(4.0) + std::exp(5.0)),
                 4 - std::log(3 + std::exp(4.0) + std::exp(5.0)), 5 - std::log(3 + std::exp(4.0) + std::exp(5.0))});
}

TEST(Network, ConcatSplitSlicePadExpandTile) {
  Network net;
  NET_OK(a, net.add_input("a", DataType::kFloat32, {1, 2}));
  NET_OK(b, net.add_input("b", DataType::kFloat32, {1, 1}));
  std::vector<NetworkTensor*> ins{a, b};
  NET_OK(cat, net.add_concatenation(ins, 1));
  EXPECT_OK(cat->set_axis(-1));
  EXPECT_FALSE(cat->set_axis(0).is_ok());
  EXPECT_EQ(cat->output(0)->dims(), (Dims{1, 3}));
  NET_OK(v, net.add_input("v", DataType::kFloat32, {6}));
  NET_OK(split, net.add_split(v, 0, {2, 4}));
  EXPECT_EQ(split->num_outputs(), 2);
  NET_OK(rev, net.add_slice(v, {5}, {3}, {-2}));
  NET_OK(fwd, net.add_slice(v, {1}, {2}, {2}));
  NET_OK(pad, net.add_padding(a, {1}, {2}, 7.f));
  EXPECT_EQ(pad->output(0)->dims(), (Dims{1, 5}));
  NET_OK(refl, net.add_padding(v, {2}, {1}));
  EXPECT_OK(refl->set_mode(FillMode::kReflect));
  NET_OK(ex, net.add_expand(a, {3, 2}));
  NET_OK(tile, net.add_tile(a, {1, 3}));
  for (NetworkTensor* t : {cat->output(0), split->output(0), split->output(1), rev->output(0), fwd->output(0),
                           pad->output(0), refl->output(0), ex->output(0), tile->output(0)})
    EXPECT_OK(net.mark_output(t));
  NET_OK(out, run(net, {f32({1, 2}, {1, 2}), f32({1, 1}, {3}), f32({6}, {0, 1, 2, 3, 4, 5})}));
  expect_values(out[0], {1, 2, 3});
  expect_values(out[1], {0, 1});
  expect_values(out[2], {2, 3, 4, 5});
  expect_values(out[3], {5, 3, 1});
  expect_values(out[4], {1, 3});
  expect_values(out[5], {7, 1, 2, 7, 7});
  expect_values(out[6], {2, 1, 0, 1, 2, 3, 4, 5, 4});
  expect_values(out[7], {1, 2, 1, 2, 1, 2});
  expect_values(out[8], {1, 2, 1, 2, 1, 2});
}

TEST(Network, ConstantGatherScatterTopKOneHot) {
  Network net;
  NET_OK(data, net.add_input("data", DataType::kFloat32, {3, 2}));
  const std::vector<int64_t> idx{2, 0};
  NET_OK(indices, net.add_constant({2}, Weights{DataType::kInt64, idx.data(), 2}));
  NET_OK(gather, net.add_gather(data, indices->output(0), 0));
  EXPECT_EQ(gather->output(0)->dims(), (Dims{2, 2}));

  NET_OK(d2, net.add_input("d2", DataType::kFloat32, {2, 2}));
  const std::vector<int64_t> ge{0, 0, 1, 0}, gnd{0, 0, 1, 1};
  NET_OK(ge_idx, net.add_constant({2, 2}, Weights{DataType::kInt64, ge.data(), 4}));
  NET_OK(gel, net.add_gather_elements(d2, ge_idx->output(0), 1));
  NET_OK(gnd_idx, net.add_constant({2, 2}, Weights{DataType::kInt64, gnd.data(), 4}));
  NET_OK(gnd_l, net.add_gather_nd(d2, gnd_idx->output(0)));

  const std::vector<float> zeros(3, 0.f), upd{5, 6}, upd2{7, 8};
  NET_OK(z, net.add_constant({3}, float_weights(zeros)));
  NET_OK(u, net.add_constant({2}, float_weights(upd)));
  NET_OK(sc, net.add_scatter(z->output(0), indices->output(0), u->output(0), ScatterMode::kElement));
  EXPECT_OK(sc->set_axis(0));
  const std::vector<int64_t> nd{1, 2};
  NET_OK(nd_idx, net.add_constant({2, 1}, Weights{DataType::kInt64, nd.data(), 2}));
  NET_OK(u2, net.add_constant({2}, float_weights(upd2)));
  NET_OK(scnd, net.add_scatter(z->output(0), nd_idx->output(0), u2->output(0), ScatterMode::kND));
  EXPECT_FALSE(scnd->set_axis(0).is_ok());

  NET_OK(t, net.add_input("t", DataType::kFloat32, {5}));
  NET_OK(top, net.add_topk(t, TopKOperation::kMax, 2, 1));
  EXPECT_EQ(top->num_outputs(), 2);
  NET_OK(bottom, net.add_topk(t, TopKOperation::kMin, 1, 1));

  const std::vector<int64_t> hot{0, 2, 1}, depth{3};
  const std::vector<float> offon{0, 1};
  NET_OK(hi, net.add_constant({3}, Weights{DataType::kInt64, hot.data(), 3}));
  NET_OK(hd, net.add_constant({1}, Weights{DataType::kInt64, depth.data(), 1}));
  NET_OK(hv, net.add_constant({2}, float_weights(offon)));
  NET_OK(onehot, net.add_one_hot(hi->output(0), hv->output(0), hd->output(0), -1));

  for (NetworkTensor* o :
       {gather->output(0), gel->output(0), gnd_l->output(0), sc->output(0), scnd->output(0), top->output(0),
        top->output(1), bottom->output(0), bottom->output(1), onehot->output(0), indices->output(0)})
    EXPECT_OK(net.mark_output(o));
  NET_OK(out, run(net, {f32({3, 2}, {0, 1, 2, 3, 4, 5}), f32({2, 2}, {1, 2, 3, 4}), f32({5}, {1, 5, 3, 4, 2})}));
  expect_values(out[0], {4, 5, 0, 1});
  expect_values(out[1], {1, 1, 4, 3});
  expect_values(out[2], {1, 4});
  expect_values(out[3], {6, 0, 5});
  expect_values(out[4], {0, 7, 8});
  expect_values(out[5], {5, 4});
  expect_values(out[6], {1, 3});
  expect_values(out[7], {1});
  expect_values(out[8], {0});
  expect_values(out[9], {1, 0, 0, 0, 0, 1, 0, 1, 0});
  expect_values(out[10], {2, 0});
}

TEST(Network, ResizeAndNormalizations) {
  Network net;
  NET_OK(x, net.add_input("x", DataType::kFloat32, {1, 1, 2, 2}));
  NET_OK(rs, net.add_resize(x, {1, 1, 4, 4}, ResizeInterpolation::kNearest));
  EXPECT_OK(rs->set_coordinates(ResizeCoordinates::kHalfPixel));
  EXPECT_OK(rs->set_rounding(ResizeRounding::kRoundPreferFloor));
  EXPECT_OK(rs->set_cubic_coefficient(-0.5f));
  NET_OK(rs2, net.add_resize_scales(x, {1, 1, 2, 2}, ResizeInterpolation::kNearest));
  EXPECT_EQ(rs2->output(0)->dims(), (Dims{1, 1, 4, 4}));

  NET_OK(c, net.add_input("c", DataType::kFloat32, {1, 3, 1, 1}));
  NET_OK(lrn, net.add_lrn(c, 3, 3.f, 1.f, 1.f));
  NET_OK(b, net.add_input("b", DataType::kFloat32, {1, 2, 1, 1}));
  const std::vector<float> s{2, 3}, bias{1, 1}, mean{0, 1}, var{1, 4};
  NET_OK(bn, net.add_batch_normalization(b, float_weights(s), float_weights(bias), float_weights(mean),
                                         float_weights(var), 0.f));
  NET_OK(l, net.add_input("l", DataType::kFloat32, {1, 2}));
  const std::vector<float> ls{2, 1}, lb{0, 10};
  NET_OK(ln, net.add_layer_normalization(l, float_weights(ls), float_weights(lb), -1, 0.f));
  NET_OK(i, net.add_input("i", DataType::kFloat32, {1, 1, 2}));
  const std::vector<float> one{1}, zero{0};
  NET_OK(in, net.add_instance_normalization(i, float_weights(one), float_weights(zero), 0.f));
  for (Layer* layer : {static_cast<Layer*>(rs), static_cast<Layer*>(rs2), lrn, bn, ln, in})
    EXPECT_OK(net.mark_output(layer->output(0)));
  NET_OK(out, run(net, {f32({1, 1, 2, 2}, {1, 2, 3, 4}), f32({1, 3, 1, 1}, {1, 2, 3}), f32({1, 2, 1, 1}, {1, 2}),
                        f32({1, 2}, {1, 3}), f32({1, 1, 2}, {1, 3})}));
  const std::vector<double> up{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4};
  expect_values(out[0], up);
  expect_values(out[1], up);
  expect_values(out[2], {1.0 / 6, 2.0 / 15, 3.0 / 14});
  expect_values(out[3], {3, 2.5});
  expect_values(out[4], {-2, 11});
  expect_values(out[5], {-1, 1});
}

TEST(Network, CastWhereIdentityShapeSize) {
  Network net;
  NET_OK(x, net.add_input("x", DataType::kFloat32, {3}));
  NET_OK(cast, net.add_cast(x, DataType::kInt32));
  const std::vector<float> zero{0}, nines{9, 9, 9};
  NET_OK(z, net.add_constant({1}, float_weights(zero)));
  NET_OK(gt, net.add_elementwise(x, z->output(0), ElementWiseOperation::kGreater));
  EXPECT_EQ(gt->output(0)->dtype(), DataType::kBool);
  NET_OK(n, net.add_constant({3}, float_weights(nines)));
  NET_OK(where, net.add_where(gt->output(0), x, n->output(0)));
  NET_OK(id, net.add_identity(x));
  NET_OK(m, net.add_input("m", DataType::kFloat32, {2, 3}));
  NET_OK(shape, net.add_shape(m));
  NET_OK(size, net.add_size(m));
  EXPECT_EQ(size->output(0)->dims().rank(), 0);
  for (Layer* l : {cast, where, id, shape, size}) EXPECT_OK(net.mark_output(l->output(0)));
  NET_OK(out, run(net, {f32({3}, {1.7, -2.2, 3}), f32({2, 3}, {0, 0, 0, 0, 0, 0})}));
  EXPECT_EQ(out[0].dtype(), DataType::kInt32);
  expect_values(out[0], {1, -2, 3});
  expect_values(out[1], {1.7, 9, 3}, 1e-6);
  expect_values(out[2], {1.7, -2.2, 3}, 1e-6);
  expect_values(out[3], {2, 3});
  expect_values(out[4], {6});
}

TEST(Network, RecurrentLayers) {
  Network net;
  NET_OK(x, net.add_input("x", DataType::kFloat32, {3, 1, 1}));
  const std::vector<float> w{0.8f}, r{0.5f}, b{0.1f, -0.2f};
  NET_OK(rnn, net.add_rnn(x, RnnOperation::kTanh, RecurrenceDirection::kForward, 1, float_weights(w), float_weights(r),
                          float_weights(b)));
  EXPECT_EQ(rnn->num_outputs(), 2);
  EXPECT_EQ(rnn->output(0)->dims(), (Dims{3, 1, 1, 1}));

  NET_OK(x2, net.add_input("x2", DataType::kFloat32, {2, 1, 1}));
  std::vector<float> lw(8, 0.f), lr(16, 0.f), lb(16, 0.f);
  lb[6] = lb[7] = 1.f;  // the cell gate's input bias: c~ = tanh(1)
  NET_OK(lstm, net.add_rnn(x2, RnnOperation::kLstm, RecurrenceDirection::kForward, 2, float_weights(lw),
                           float_weights(lr), float_weights(lb)));
  EXPECT_EQ(lstm->num_outputs(), 3);
  EXPECT_EQ(lstm->output(2)->dims(), (Dims{1, 1, 2}));

  std::vector<float> gw(12, 0.f), gr(24, 0.f);
  NET_OK(gru, net.add_rnn(x2, RnnOperation::kGru, RecurrenceDirection::kBidirectional, 2, float_weights(gw),
                          float_weights(gr)));
  EXPECT_EQ(gru->output(0)->dims(), (Dims{2, 2, 1, 2}));
  for (NetworkTensor* t : {rnn->output(0), lstm->output(0), lstm->output(2), gru->output(0)})
    EXPECT_OK(net.mark_output(t));
  NET_OK(out, run(net, {f32({3, 1, 1}, {0.5, -1, 2}), f32({2, 1, 1}, {3, 4})}));
  double h = 0;
  std::vector<double> want;
  for (double xv : {0.5, -1.0, 2.0}) {
    h = std::tanh(0.8 * xv + 0.5 * h - 0.1);
    want.push_back(h);
  }
  expect_values(out[0], want);
  const double c1 = 0.5 * std::tanh(1.0), h1 = 0.5 * std::tanh(c1);
  const double c2 = 0.5 * c1 + 0.5 * std::tanh(1.0), h2 = 0.5 * std::tanh(c2);
  expect_values(out[1], {h1, h1, h2, h2});
  expect_values(out[2], {c2, c2});
  expect_values(out[3], std::vector<double>(8, 0.0));
}

Status register_add_one() {
  if (has_plugin("AddOne")) return Status::ok();
  PluginDef def;
  def.name = "AddOne";
  def.summary = "y = x + 1 (+ fields.floats[0])";
  def.infer = [](std::span<const PluginTensorDesc> in, const PluginFields&) -> Result<std::vector<PluginTensorDesc>> {
    if (in[0].dtype != DataType::kFloat32) return invalid_argument("AddOne takes float32");
    return std::vector<PluginTensorDesc>{in[0]};
  };
  def.run_cpu = [](std::span<const Tensor> in, std::span<Tensor> out, const PluginFields& f) -> Status {
    const float extra = f.floats.empty() ? 0.f : f.floats[0];
    for (int64_t i = 0; i < in[0].numel(); ++i) out[0].set(i, in[0].at(i) + 1.0 + extra);
    return Status::ok();
  };
  return register_plugin(std::move(def));
}

TEST(Network, PluginEndToEnd) {
  ASSERT_TRUE(register_add_one().is_ok());
  EXPECT_TRUE(has_plugin("AddOne"));
  Network net;
  NET_OK(x, net.add_input("x", DataType::kFloat32, {3}));
  NetworkTensor* ins[] = {x};
  NET_OK(p1, net.add_plugin("AddOne", ins));
  EXPECT_EQ(p1->type(), LayerType::kPlugin);
  EXPECT_OK(p1->set_name("add_one"));
  NetworkTensor* ins2[] = {p1->output(0)};
  NET_OK(p2, net.add_plugin("AddOne", ins2, PluginFields{{}, {0.5f}, ""}));
  EXPECT_OK(net.mark_output(p2->output(0)));
  std::string inspect;
  NET_OK(out, run(net, {f32({3}, {1, 2, 3})}, &inspect));
  expect_values(out[0], {3.5, 4.5, 5.5});
  EXPECT_NE(inspect.find("plugin.AddOne"), std::string::npos) << inspect;

  // The plugin's own checks speak through the layer.
  NET_OK(i, net.add_input("i", DataType::kInt32, {3}));
  NetworkTensor* ins3[] = {i};
  auto bad = net.add_plugin("AddOne", ins3);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().to_string().find("(AddOne): add_plugin: AddOne takes float32"), std::string::npos)
      << bad.status().to_string();
}

TEST(Network, PluginRegistrationErrors) {
  ASSERT_TRUE(register_add_one().is_ok());
  PluginDef dup;
  dup.name = "AddOne";
  dup.infer = [](std::span<const PluginTensorDesc> in, const PluginFields&) -> Result<std::vector<PluginTensorDesc>> {
    return std::vector<PluginTensorDesc>{in[0]};
  };
  dup.run_cpu = [](std::span<const Tensor>, std::span<Tensor>, const PluginFields&) { return Status::ok(); };
  Status s = register_plugin(dup);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("already exists"), std::string::npos) << s.message();
  dup.name = "Convolution";
  EXPECT_FALSE(register_plugin(dup).is_ok());
  dup.name = "NoRun";
  dup.run_cpu = nullptr;
  EXPECT_NE(register_plugin(dup).message().find("no CPU run function"), std::string::npos);

  Network net;
  NET_OK(x, net.add_input("x", DataType::kFloat32, {3}));
  NetworkTensor* ins[] = {x};
  auto missing = net.add_plugin("NoSuchPlugin", ins);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().to_string().find("no plugin named 'NoSuchPlugin'"), std::string::npos);
}

TEST(Network, MisuseNamesTheLayer) {
  Network net;
  NET_OK(x, net.add_input("x", DataType::kFloat32, {1, 1, 5, 5}));
  const std::vector<float> ten(10, 1.f);
  auto conv = net.add_convolution(x, 3, {5, 5}, float_weights(ten));
  ASSERT_FALSE(conv.is_ok());
  EXPECT_EQ(conv.status().code(), StatusCode::kInvalidArgument);
  const std::string msg = conv.status().to_string();
  EXPECT_NE(msg.find("'Convolution_0' (Convolution): add_convolution: weights hold 10 values"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("needs 75"), std::string::npos) << msg;

  NET_OK(flat, net.add_input("flat", DataType::kFloat32, {1, 5, 5}));
  const std::vector<float> k9(9, 1.f);
  auto rank = net.add_convolution(flat, 1, {3, 3}, float_weights(k9));
  ASSERT_FALSE(rank.is_ok());
  EXPECT_NE(rank.status().to_string().find("(rank 3) but a 2-D kernel needs rank 4"), std::string::npos)
      << rank.status().to_string();

  NET_OK(a, net.add_input("a", DataType::kFloat32, {2, 3}));
  NET_OK(b, net.add_input("b", DataType::kFloat32, {4}));
  auto ew = net.add_elementwise(a, b, ElementWiseOperation::kSum);
  ASSERT_FALSE(ew.is_ok());
  EXPECT_NE(ew.status().to_string().find("'ElementWise_0' (ElementWise): add_elementwise:"), std::string::npos)
      << ew.status().to_string();

  auto fc = net.add_fully_connected(a, 4, float_weights(ten));
  ASSERT_FALSE(fc.is_ok());
  EXPECT_NE(fc.status().to_string().find("weights hold 10 values but [num_outputs, K] = [4, 3] needs 12"),
            std::string::npos)
      << fc.status().to_string();

  Network other;
  NET_OK(foreign, other.add_input("f", DataType::kFloat32, {2, 3}));
  auto cross = net.add_activation(foreign, ActivationType::kRelu);
  ASSERT_FALSE(cross.is_ok());
  EXPECT_NE(cross.status().to_string().find("input is not a tensor of this network"), std::string::npos);
  EXPECT_FALSE(net.add_unary(nullptr, UnaryOperation::kExp).is_ok());
  EXPECT_FALSE(net.mark_output(nullptr).is_ok());
  EXPECT_FALSE(net.add_input("a", DataType::kFloat32, {1}).is_ok());
  EXPECT_FALSE(net.validate().is_ok());

  auto mask = net.add_reduce(a, ReduceOperation::kSum, 0b100, true);
  ASSERT_FALSE(mask.is_ok());
  EXPECT_NE(mask.status().to_string().find("beyond the input's rank 2"), std::string::npos)
      << mask.status().to_string();
  EXPECT_FALSE(net.add_topk(a, TopKOperation::kMax, 1, 0b11).is_ok());
  auto topk = net.add_topk(a, TopKOperation::kMax, 9, 0b10);
  ASSERT_FALSE(topk.is_ok());
  EXPECT_NE(topk.status().to_string().find("(TopK)"), std::string::npos);
  EXPECT_FALSE(net.add_slice(a, {0, 2}, {2, 2}, {1, 1}).is_ok());
  EXPECT_FALSE(net.add_constant({2, 2}, float_weights(ten)).is_ok());

  // A failed setter names the layer and leaves the network as it was.
  NET_OK(sh, net.add_shuffle(a));
  Status bad = sh->set_reshape_dims({7});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.to_string().find("'Shuffle_"), std::string::npos) << bad.to_string();
  EXPECT_NE(bad.to_string().find("set_reshape_dims"), std::string::npos) << bad.to_string();
  EXPECT_EQ(sh->output(0)->dims(), (Dims{2, 3}));
  EXPECT_OK(sh->set_reshape_dims({3, 2}));
  EXPECT_EQ(sh->output(0)->dims(), (Dims{3, 2}));

  NET_OK(pool, net.add_pooling(x, PoolingType::kMax, {2, 2}));
  Status stride = pool->set_stride({0, 1});
  EXPECT_FALSE(stride.is_ok());
  EXPECT_NE(stride.to_string().find("(Pooling): set_stride: stride [0, 1] has an entry below 1"), std::string::npos)
      << stride.to_string();
  EXPECT_FALSE(pool->set_padding({1}).is_ok());
  EXPECT_EQ(pool->output(0)->dims(), (Dims{1, 1, 4, 4}));
  NET_OK(c1, net.add_convolution(x, 1, {3, 3}, float_weights(k9)));
  EXPECT_FALSE(c1->set_padding_mode(PaddingMode::kExplicitRoundUp).is_ok());

  // Names are unique.
  EXPECT_OK(pool->set_name("pool"));
  Status dup = c1->set_name("pool");
  EXPECT_FALSE(dup.is_ok());
  EXPECT_NE(dup.to_string().find("another layer has that name"), std::string::npos);
  EXPECT_FALSE(pool->output(0)->set_name("a").is_ok());
  EXPECT_OK(pool->output(0)->set_name("pooled"));
  EXPECT_EQ(net.find_tensor("pooled"), pool->output(0));
}

}  // namespace
}  // namespace kiln
