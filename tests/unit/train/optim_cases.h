#pragma once
// The optimizer tests' small problem and the PyTorch-checked configurations (optim_test.cpp checks them on the host,
// optim_cuda_test.cpp on a GPU against the host).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "train/optim/optimizer.h"

namespace kiln::train::optim_testing {

// The problem of tests/unit/train/optim_reference.py: w [2, 3] and b [3]; the gradient of p is
// a * (p - t) + cos(p) (of 0.5 * sum(a * (p - t)^2) + sum(sin(p))).
inline const std::vector<float> kW0 = {0.5f, -1.2f, 0.3f, 2.0f, -0.7f, 0.1f}, kB0 = {0.05f, -0.3f, 1.5f};
inline const std::vector<float> kAW = {1.0f, 2.0f, 0.5f, 3.0f, 0.25f, 1.5f},
                                kTW = {0.1f, 0.2f, -0.3f, 1.0f, 0.0f, 0.5f};
inline const std::vector<float> kAB = {0.5f, 4.0f, 1.0f}, kTB = {1.0f, -1.0f, 0.0f};

inline Tensor make(const std::vector<float>& values, const Dims& dims) {
  Tensor t = Tensor::empty(DataType::kFloat32, dims).value();
  std::memcpy(t.raw(), values.data(), values.size() * sizeof(float));
  return t;
}

inline std::vector<float> read(const Tensor& t) { return {t.data<float>(), t.data<float>() + t.numel()}; }

struct Problem {
  Tensor w = make(kW0, {2, 3}), b = make(kB0, {3});
  Tensor gw = Tensor::zeros(DataType::kFloat32, {2, 3}).value(), gb = Tensor::zeros(DataType::kFloat32, {3}).value();

  std::vector<Parameter> params() const { return {{"w", w, gw}, {"b", b, gb}}; }
  void compute_grads() const {
    for (int64_t i = 0; i < 6; ++i) {
      float p = w.data<float>()[i];
      gw.data<float>()[i] = kAW[i] * (p - kTW[i]) + std::cos(p);
    }
    for (int64_t i = 0; i < 3; ++i) {
      float p = b.data<float>()[i];
      gb.data<float>()[i] = kAB[i] * (p - kTB[i]) + std::cos(p);
    }
  }
  std::vector<float> values() const {
    std::vector<float> v = read(w), vb = read(b);
    v.insert(v.end(), vb.begin(), vb.end());
    return v;
  }
  std::vector<float> grads() const {
    std::vector<float> v = read(gw), vb = read(gb);
    v.insert(v.end(), vb.begin(), vb.end());
    return v;
  }
};

inline std::unique_ptr<Optimizer> create(const OptionMap& config, const Problem& problem) {
  auto opt = Optimizer::create(config, problem.params());
  EXPECT_TRUE(opt.is_ok()) << opt.status().to_string();
  return std::move(opt).value();
}

inline void run_steps(Optimizer& opt, const Problem& problem, int steps) {
  for (int i = 0; i < steps; ++i) {
    problem.compute_grads();
    ASSERT_TRUE(opt.step().is_ok());
  }
}

inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-7 + 4e-6 * std::abs(want[i])) << what << " element " << i;
}

struct Case {
  const char* name;
  OptionMap config;
  std::vector<float> expected;  // w then b after 5 steps
};

// Computed once with PyTorch 1.13 (Debian's python3-torch) by tests/unit/train/optim_reference.py:
// torch.optim's SGD, Adagrad, RMSprop, Adadelta, Adam, AdamW; NovoGrad written out with torch ops as
// NeMo's nemo/core/optim/novograd.py defines it.
inline const std::vector<Case>& cases() {
  static const std::vector<Case> kCases = {
      {"sgd",
       {{"name", "sgd"}, {"lr", 0.1}},
       {-0.0567876734f, -0.496309757f, -0.281347156f, 1.13592637f, -0.943833947f, -0.047909867f, -0.18579933f,
        -1.08009624f, 0.723815858f}},
      {"sgd_l2",
       {{"name", "sgd"}, {"lr", 0.1}, {"weight_decay", 0.01}},
       {-0.0577976741f, -0.49409613f, -0.281544507f, 1.13093984f, -0.940495074f, -0.0479893163f, -0.185553744f,
        -1.07818842f, 0.718093276f}},
      {"momentum",
       {{"name", "momentum"}, {"lr", 0.1}, {"momentum", 0.9}, {"dampening", 0.1}},
       {-0.804080546f, 0.390604824f, -1.07328582f, 0.0600421317f, -1.2777735f, -0.243663147f, -0.51399672f, -1.6260097f,
        -0.359831661f}},
      {"nesterov",
       {{"name", "nesterov"}, {"lr", 0.05}, {"weight_decay", 0.001}},
       {-0.422054738f, -0.0488396585f, -0.664835334f, 0.585779965f, -1.10547841f, -0.14464052f, -0.343659431f,
        -1.44093788f, 0.20336403f}},
      {"adagrad",
       {{"name", "adagrad"},
        {"lr", 0.1},
        {"lr_decay", 0.01},
        {"weight_decay", 0.01},
        {"initial_accumulator_value", 0.1}},
       {0.19638592f, -0.907391071f, -0.00797835737f, 1.69868207f, -0.96267283f, -0.101598717f, -0.221400023f,
        -0.593495607f, 1.18559253f}},
      {"rmsprop",
       {{"name", "rmsprop"}, {"lr", 0.01}},
       {0.185367554f, -0.900728703f, -0.0194395222f, 1.69179857f, -0.987603188f, -0.125902608f, -0.251591682f,
        -0.59949404f, 1.17580271f}},
      {"rmsprop_centered",
       {{"name", "rmsprop"},
        {"lr", 0.01},
        {"alpha", 0.9},
        {"momentum", 0.5},
        {"centered", true},
        {"weight_decay", 0.01}},
       {0.29895246f, -1.0034622f, 0.0975734144f, 1.80098367f, -0.893596768f, -0.0774432346f, -0.147748455f,
        -0.496710896f, 1.29640555f}},
      {"adadelta",
       {{"name", "adadelta"}, {"rho", 0.9}, {"weight_decay", 0.01}},
       {0.483593881f, -1.18364429f, 0.283578306f, 1.98361886f, -0.716332436f, 0.0837987736f, 0.0336243957f,
        -0.316359103f, 1.4835676f}},
      {"adam",
       {{"name", "adam"}, {"lr", 0.01}, {"betas", {0.8, 0.99}}, {"weight_decay", 0.01}},
       {0.450037748f, -1.15010965f, 0.250016093f, 1.95007265f, -0.749853849f, 0.0503627695f, 8.22506845e-05f,
        -0.349894792f, 1.45000076f}},
      {"adam_amsgrad",
       {{"name", "adam"}, {"lr", 0.01}, {"amsgrad", true}},
       {0.450018644f, -1.15005624f, 0.250007719f, 1.95003664f, -0.749926627f, 0.0501943938f, 4.08096239e-05f,
        -0.349946499f, 1.45000005f}},
      {"adamw",
       {{"name", "adamw"}, {"lr", 0.01}, {"weight_decay", 0.1}},
       {0.447624534f, -1.14417529f, 0.248610869f, 1.94016457f, -0.74633956f, 0.0497972704f, -0.000108648092f,
        -0.348351419f, 1.44261503f}},
      {"novograd",
       {{"name", "novograd"}, {"lr", 0.01}},
       {0.455742866f, -1.11672938f, 0.256433666f, 1.91129947f, -0.720389009f, 0.0863860548f, 0.0321220271f,
        -0.425368041f, 1.44624519f}},
      {"novograd_options",
       {{"name", "novograd"},
        {"lr", 0.01},
        {"betas", {0.9, 0.99}},
        {"weight_decay", 0.01},
        {"grad_averaging", true},
        {"amsgrad", true}},
       {0.49578017f, -1.19192755f, 0.295878053f, 1.99134362f, -0.7018255f, 0.0987031534f, 0.0483165197f, -0.311957657f,
        1.49477255f}},
      {"novograd_luc",
       {{"name", "novograd"}, {"lr", 0.01}, {"luc", true}, {"luc_trust", 0.02}},
       {0.455742866f, -1.11672938f, 0.256433666f, 1.91129947f, -0.720389009f, 0.0863860548f, 0.0346562602f,
        -0.407851756f, 1.45387757f}},
      // clip_grad_norm: 0.5 before each step
      {"sgd_clip",
       {{"name", "sgd"}, {"lr", 0.1}, {"clip_grad_norm", 0.5}},
       {0.442218065f, -1.09444749f, 0.242896616f, 1.88638198f, -0.726500213f, 0.0824164003f, 0.0262779631f,
        -0.458443195f, 1.42826629f}},
  };
  return kCases;
}

}  // namespace kiln::train::optim_testing
