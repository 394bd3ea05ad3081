// The optimizers on a GPU against the host path: every PyTorch-checked configuration of optim_test.cpp, large
// tensors (many blocks), the caller's stream, state export/import (also across devices), loss-scaled and skipped
// steps, clipping (deterministic norms) and gradient accumulation. Skipped without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/cuda_runtime.h"
#include "optim_cases.h"
#include "train/optim/gradients.h"
#include "train/optim/optimizer.h"

namespace kiln::train {
namespace {

using namespace optim_testing;  // NOLINT(google-build-using-namespace): the problem of optim_cases.h

#define REQUIRE_GPU()                                                            \
  if (!cuda::gpu_available()) {                                                  \
    GTEST_SKIP() << "skipped: no GPU (" << cuda::query_runtime().problem << ")"; \
  }

Tensor upload(const Tensor& host) {
  Tensor t = Tensor::empty(host.dtype(), host.dims(), cuda::device_allocator(0), "test").value();
  EXPECT_TRUE(cuda::copy(host, t).is_ok());
  return t;
}

Tensor download(const Tensor& device) {
  Tensor t = Tensor::empty(device.dtype(), device.dims()).value();
  EXPECT_TRUE(cuda::copy(device, t).is_ok());
  return t;
}

// The problem of optim_cases.h with the weights and grads on the GPU: grads are computed on the host from the
// downloaded weights and uploaded.
struct DeviceProblem {
  Problem host;
  Tensor w = upload(host.w), b = upload(host.b), gw = upload(host.gw), gb = upload(host.gb);

  std::vector<Parameter> params() const { return {{"w", w, gw}, {"b", b, gb}}; }
  void compute_grads() {
    ASSERT_TRUE(cuda::copy(w, host.w).is_ok());
    ASSERT_TRUE(cuda::copy(b, host.b).is_ok());
    host.compute_grads();
    ASSERT_TRUE(cuda::copy(host.gw, gw).is_ok());
    ASSERT_TRUE(cuda::copy(host.gb, gb).is_ok());
  }
  std::vector<float> values() const {
    std::vector<float> v = read(download(w)), vb = read(download(b));
    v.insert(v.end(), vb.begin(), vb.end());
    return v;
  }
  std::vector<float> grads() const {
    std::vector<float> v = read(download(gw)), vb = read(download(gb));
    v.insert(v.end(), vb.begin(), vb.end());
    return v;
  }
};

std::unique_ptr<Optimizer> create_on_device(const OptionMap& config, const DeviceProblem& problem) {
  auto opt = Optimizer::create(config, problem.params());
  EXPECT_TRUE(opt.is_ok()) << opt.status().to_string();
  if (!opt.is_ok()) return nullptr;
  EXPECT_TRUE((*opt)->device().is_cuda());
  return std::move(opt).value();
}

void run_device_steps(Optimizer& opt, DeviceProblem& problem, int steps) {
  for (int i = 0; i < steps; ++i) {
    problem.compute_grads();
    Status st = opt.step();
    ASSERT_TRUE(st.is_ok()) << st.to_string();
  }
}

// Within 1e-6 relative (the rules compute the same floats; norms are summed in another order).
void expect_same(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-9 + 1e-6 * std::abs(want[i])) << what << " element " << i;
}

void expect_same_state(const std::map<std::string, Tensor>& got, const std::map<std::string, Tensor>& want,
                       const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [key, value] : want) {
    ASSERT_EQ(got.count(key), 1u) << what << " " << key;
    const Tensor& t = got.at(key);
    ASSERT_TRUE(t.device().is_cpu()) << what << " " << key;
    ASSERT_EQ(t.dtype(), value.dtype()) << what << " " << key;
    ASSERT_EQ(t.dims(), value.dims()) << what << " " << key;
    if (t.dtype() == DataType::kFloat32) {
      expect_same(read(t), read(value), what + " " + key);
    } else {
      EXPECT_EQ(std::memcmp(t.raw(), value.raw(), t.nbytes()), 0) << what << " " << key;
    }
  }
}

TEST(OptimizerCuda, EveryConfigurationMatchesTheHost) {
  REQUIRE_GPU();
  for (const Case& c : cases()) {
    Problem host;
    auto a = create(c.config, host);
    ASSERT_TRUE(a);
    run_steps(*a, host, 5);

    DeviceProblem dev;
    auto d = create_on_device(c.config, dev);
    ASSERT_TRUE(d);
    run_device_steps(*d, dev, 5);
    expect_same(dev.values(), host.values(), c.name);
    expect_close(dev.values(), c.expected, c.name);  // and so PyTorch's
    EXPECT_EQ(d->steps(0), 5) << c.name;
    expect_same_state(d->export_state().value(), a->export_state().value(), c.name);
  }
}

TEST(OptimizerCuda, LargeTensorsMatchTheHost) {
  REQUIRE_GPU();
  const int64_t n = int64_t{6} * 200011;  // many blocks and reduction partials, not a multiple of anything
  for (const char* name : {"adam", "rmsprop", "nesterov", "adagrad", "adadelta", "novograd"}) {
    OptionMap config = {{"name", name}, {"lr", 0.01}, {"weight_decay", 0.01}, {"clip_grad_norm", 50.0}};
    if (std::string(name) == "novograd") config.emplace("luc", true);
    Tensor hv = Tensor::empty(DataType::kFloat32, {n}).value(), hg = Tensor::empty(DataType::kFloat32, {n}).value();
    for (int64_t i = 0; i < n; ++i) hv.data<float>()[i] = kW0[i % 6] + 1e-6f * static_cast<float>(i % 1000);
    Tensor dv = upload(hv), dg = upload(hg);
    auto host = Optimizer::create(config, {{"big", hv, hg}}).value();
    auto dev = Optimizer::create(config, {{"big", dv, dg}}).value();
    for (int s = 0; s < 3; ++s) {
      for (int64_t i = 0; i < n; ++i) {
        float p = hv.data<float>()[i];
        hg.data<float>()[i] = kAW[i % 6] * (p - kTW[i % 6]) + std::cos(p);
      }
      ASSERT_TRUE(cuda::copy(hg, dg).is_ok());
      ASSERT_TRUE(host->step().is_ok());
      Status st = dev->step();
      ASSERT_TRUE(st.is_ok()) << name << ": " << st.to_string();
      // Continue both from the host's weights: each step compares one update, not drift.
      std::vector<float> got = read(download(dv)), want = read(hv);
      int64_t bad = 0;
      for (int64_t i = 0; i < n; ++i) bad += std::abs(got[i] - want[i]) > 1e-9 + 1e-6 * std::abs(want[i]);
      EXPECT_EQ(bad, 0) << name << " step " << s;
      ASSERT_TRUE(cuda::copy(hv, dv).is_ok());
    }
  }
}

TEST(OptimizerCuda, EmptyParametersAreFine) {
  REQUIRE_GPU();
  for (std::string_view name : optimizer_names()) {
    Tensor v = upload(Tensor::zeros(DataType::kFloat32, {0, 4}).value());
    Tensor g = upload(Tensor::zeros(DataType::kFloat32, {0, 4}).value());
    OptionMap config = {{"name", std::string(name)}, {"clip_grad_norm", 1.0}};
    if (name == "novograd") config.emplace("luc", true);
    auto opt = Optimizer::create(config, {{"e", v, g}});
    ASSERT_TRUE(opt.is_ok()) << opt.status().to_string();
    Status st = (*opt)->step();
    EXPECT_TRUE(st.is_ok()) << name << ": " << st.to_string();
    EXPECT_TRUE((*opt)->step({2.0, true}).is_ok()) << name;
    auto state = (*opt)->export_state();
    ASSERT_TRUE(state.is_ok());
    EXPECT_TRUE((*opt)->import_state(*state).is_ok()) << name;
  }
}

TEST(OptimizerCuda, RunsOnTheCallersStream) {
  REQUIRE_GPU();
  auto stream = cuda::create_stream(0).value();
  for (const Case& c : cases()) {
    DeviceProblem own, given;
    auto a = create_on_device(c.config, own);
    auto b = create_on_device(c.config, given);
    ASSERT_TRUE(a && b);
    b->set_stream(stream.get());
    EXPECT_EQ(b->stream(), stream.get());
    run_device_steps(*a, own, 3);
    for (int s = 0; s < 3; ++s) {
      given.compute_grads();  // synchronous copies: the grads are in place before the step's work
      ASSERT_TRUE(b->step().is_ok());
      ASSERT_TRUE(stream->synchronize().is_ok());
    }
    std::vector<float> got = given.values(), want = own.values();
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << c.name;
  }
}

TEST(OptimizerCuda, ExportedStateResumesOnTheDeviceAndOnTheHost) {
  REQUIRE_GPU();
  for (const Case& c : cases()) {
    DeviceProblem straight;
    auto a = create_on_device(c.config, straight);
    ASSERT_TRUE(a);
    run_device_steps(*a, straight, 5);

    DeviceProblem first;
    auto b = create_on_device(c.config, first);
    ASSERT_TRUE(b);
    run_device_steps(*b, first, 3);
    auto state = b->export_state();
    ASSERT_TRUE(state.is_ok()) << state.status().to_string();
    std::vector<float> weights = first.values();
    run_device_steps(*b, first, 1);  // later steps must not change what was exported

    // On the device: bit-exact continuation.
    DeviceProblem resumed;
    std::memcpy(resumed.host.w.raw(), weights.data(), 6 * sizeof(float));
    std::memcpy(resumed.host.b.raw(), weights.data() + 6, 3 * sizeof(float));
    ASSERT_TRUE(cuda::copy(resumed.host.w, resumed.w).is_ok());
    ASSERT_TRUE(cuda::copy(resumed.host.b, resumed.b).is_ok());
    auto d = create_on_device(c.config, resumed);
    ASSERT_TRUE(d);
    Status st = d->import_state(*state);
    ASSERT_TRUE(st.is_ok()) << c.name << ": " << st.to_string();
    run_device_steps(*d, resumed, 2);
    std::vector<float> got = resumed.values(), want = straight.values();
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << c.name;
    EXPECT_EQ(d->steps(1), 5) << c.name;

    // On the host, from the device's checkpoint (and back): the same within float tolerance.
    Problem on_host;
    std::memcpy(on_host.w.raw(), weights.data(), 6 * sizeof(float));
    std::memcpy(on_host.b.raw(), weights.data() + 6, 3 * sizeof(float));
    auto h = create(c.config, on_host);
    ASSERT_TRUE(h);
    ASSERT_TRUE(h->import_state(*state).is_ok());
    run_steps(*h, on_host, 2);
    expect_same(on_host.values(), want, c.name + std::string(" on the host"));
  }
}

TEST(OptimizerCuda, NonfiniteGradsSkipTheStep) {
  REQUIRE_GPU();
  for (const Case& c : cases()) {
    DeviceProblem problem;
    auto opt = create_on_device(c.config, problem);
    ASSERT_TRUE(opt);
    run_device_steps(*opt, problem, 2);
    auto before = opt->export_state().value();
    std::vector<float> values = problem.values();
    problem.compute_grads();
    problem.host.gw.data<float>()[3] = std::numeric_limits<float>::infinity();
    ASSERT_TRUE(cuda::copy(problem.host.gw, problem.gw).is_ok());
    auto updated = opt->step({256.0, true});
    ASSERT_TRUE(updated.is_ok()) << c.name << ": " << updated.status().to_string();
    EXPECT_FALSE(*updated) << c.name;
    EXPECT_EQ(problem.values(), values) << c.name;
    EXPECT_EQ(opt->steps(0), 2) << c.name;
    expect_same_state(opt->export_state().value(), before, c.name);
  }
}

TEST(OptimizerCuda, ScaledGradsGiveTheUnscaledUpdate) {
  REQUIRE_GPU();
  for (const Case& c : cases()) {
    Problem host;
    auto a = create(c.config, host);
    run_steps(*a, host, 3);
    DeviceProblem dev;
    auto d = create_on_device(c.config, dev);
    ASSERT_TRUE(a && d);
    for (int s = 0; s < 3; ++s) {
      dev.compute_grads();
      for (Tensor* g : {&dev.host.gw, &dev.host.gb})
        for (int64_t i = 0; i < g->numel(); ++i) g->data<float>()[i] *= 1024.0f;
      ASSERT_TRUE(cuda::copy(dev.host.gw, dev.gw).is_ok());
      ASSERT_TRUE(cuda::copy(dev.host.gb, dev.gb).is_ok());
      auto updated = d->step({1024.0, true});
      ASSERT_TRUE(updated.is_ok()) << updated.status().to_string();
      EXPECT_TRUE(*updated);
    }
    expect_same(dev.values(), host.values(), c.name);
  }
}

TEST(GradientClippingCuda, MatchesTheHostAndIsDeterministic) {
  REQUIRE_GPU();
  DeviceProblem dev;
  Problem host;
  std::vector<Parameter> dp = dev.params(), hp = host.params();
  for (double norm_type : {2.0, 1.0, 3.0, static_cast<double>(std::numeric_limits<float>::infinity())}) {
    dev.compute_grads();
    host.compute_grads();
    auto want = clip_grad_norm(hp, 0.5, norm_type);
    auto got = clip_grad_norm(dp, 0.5, norm_type);
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    EXPECT_NEAR(*got, *want, 1e-12 * *want) << norm_type;
    expect_same(dev.grads(), host.grads(), "clip_grad_norm");
  }
  dev.compute_grads();
  host.compute_grads();
  ASSERT_TRUE(clip_grad_value(hp, 0.4).is_ok());
  ASSERT_TRUE(clip_grad_value(dp, 0.4).is_ok());
  EXPECT_EQ(dev.grads(), host.grads());

  // An inf grad: an error that says so, as on the host.
  dev.compute_grads();
  dev.host.gb.data<float>()[2] = std::numeric_limits<float>::infinity();
  ASSERT_TRUE(cuda::copy(dev.host.gb, dev.gb).is_ok());
  auto bad = clip_grad_norm(dp, 1.0);
  EXPECT_NE(bad.status().message().find("norm is inf"), std::string::npos) << bad.status().message();
  dev.host.gb.data<float>()[2] = std::numeric_limits<float>::quiet_NaN();
  ASSERT_TRUE(cuda::copy(dev.host.gb, dev.gb).is_ok());
  EXPECT_TRUE(std::isnan(grad_norm(dp, std::numeric_limits<double>::infinity()).value()));

  // A large norm: the same double on every call, on the caller's stream too, and close to the exact sum.
  const int64_t n = 3000017;
  Tensor hv = Tensor::zeros(DataType::kFloat32, {n}).value(), hg = Tensor::empty(DataType::kFloat32, {n}).value();
  double exact = 0;
  for (int64_t i = 0; i < n; ++i) {
    hg.data<float>()[i] = static_cast<float>((i * 7919) % 1001 - 500) * 1e-3f;
    exact += static_cast<double>(hg.data<float>()[i]) * hg.data<float>()[i];
  }
  std::vector<Parameter> big = {{"v", upload(hv), upload(hg)}, {"e", upload(hv), upload(hg)}};
  auto stream = cuda::create_stream(0).value();
  const double first = grad_norm(big).value();
  EXPECT_NEAR(first, std::sqrt(2 * exact), 1e-10 * std::sqrt(2 * exact));
  for (int r = 0; r < 3; ++r) EXPECT_EQ(grad_norm(big, 2.0, r == 1 ? stream.get() : nullptr).value(), first);
}

TEST(GradAccumulatorCuda, MatchesTheHostAndResumes) {
  REQUIRE_GPU();
  DeviceProblem dev;
  Problem host;
  std::vector<Parameter> dp = dev.params(), hp = host.params();
  auto hacc = GradAccumulator::create(hp, 3).value();
  auto dacc = GradAccumulator::create(dp, 3).value();
  auto stream = cuda::create_stream(0).value();
  dacc.set_stream(stream.get());
  for (int i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 6; ++j) host.w.data<float>()[j] = kW0[j] + 0.1f * i;
    host.compute_grads();
    ASSERT_TRUE(cuda::copy(host.gw, dev.gw).is_ok());
    ASSERT_TRUE(cuda::copy(host.gb, dev.gb).is_ok());
    ASSERT_TRUE(hacc.add(hp).is_ok());
    ASSERT_TRUE(dacc.add(dp).is_ok());
    ASSERT_TRUE(stream->synchronize().is_ok());
    if (i == 1) {
      // Mid-group: a host checkpoint of the device totals resumes on the device and on the host.
      auto state = dacc.export_state();
      ASSERT_TRUE(state.is_ok()) << state.status().to_string();
      auto hstate = hacc.export_state().value();
      expect_same_state(*state,
                        {{"grad_accum.count", hstate.at("grad_accum.count")},
                         {"w.grad_accum", hstate.at("w.grad_accum")},
                         {"b.grad_accum", hstate.at("b.grad_accum")},
                         {"w.grad_accum_touched", hstate.at("w.grad_accum_touched")},
                         {"b.grad_accum_touched", hstate.at("b.grad_accum_touched")}},
                        "accumulator");
      auto again = GradAccumulator::create(dp, 3).value();
      ASSERT_TRUE(again.import_state(*state).is_ok());
      dacc = std::move(again);  // the default stream from here on
    }
  }
  ASSERT_TRUE(hacc.finish(hp).is_ok());
  ASSERT_TRUE(dacc.finish(dp).is_ok());
  EXPECT_EQ(dev.grads(), host.grads());
}

}  // namespace
}  // namespace kiln::train
