#pragma once
// Finite-difference checks of gradient rules: a small model graph with float inputs (the parameters),
// loss = sum(y * r) for a fixed random r, autograd's gradients (reference backend, and the CPU backend
// with the optimizer against them) compared with central differences of the forward graph.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "ops/elementwise/elementwise.h"
#include "ops/reduce/reduce.h"
#include "runner/graph_runner.h"
#include "train/autograd.h"

namespace kiln::train::grad_check {

struct CheckOptions {
  double h = 1e-2;     ///< central difference step
  double atol = 3e-3;  ///< |autograd - numeric| <= atol + rtol * |numeric|
  double rtol = 1e-2;
  bool cpu = true;  ///< also run the training graph on the CPU backend (optimizer on) against the reference
};

class GradModel {
 public:
  /// A float32 parameter with values uniform in [lo, hi].
  Value* param(const std::string& name, const Dims& dims, double lo = -1.0, double hi = 1.0) {
    std::uniform_real_distribution<double> u(lo, hi);
    std::vector<float> v(static_cast<size_t>(dims.numel()));
    for (float& e : v) e = static_cast<float>(u(rng_));
    return param_values(name, dims, v);
  }
  /// A float32 parameter with given values.
  Value* param_values(const std::string& name, const Dims& dims, const std::vector<float>& v) {
    Tensor t = *Tensor::empty(DataType::kFloat32, dims);
    for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = v[i];
    values[name] = std::move(t);
    params.push_back(name);
    return *graph.add_input(name, DataType::kFloat32, dims);
  }
  /// A constant of any dtype from doubles.
  Value* constant(const std::string& name, DataType dtype, const Dims& dims, const std::vector<double>& v) {
    Tensor t = *Tensor::empty(dtype, dims);
    for (size_t i = 0; i < v.size(); ++i) t.set(static_cast<int64_t>(i), v[i]);
    return *graph.add_constant(name, std::move(t));
  }
  Value* ints(const std::string& name, const std::vector<int64_t>& v) {
    std::vector<double> d(v.begin(), v.end());
    return constant(name, DataType::kInt64, Dims{static_cast<int64_t>(v.size())}, d);
  }
  /// Output `out` of a new node.
  Value* node(std::string_view op, std::unique_ptr<Attrs> attrs, std::vector<Value*> ins, int out = 0) {
    auto n = graph.add_node(op, "n" + std::to_string(count_++), std::move(attrs), std::move(ins));
    EXPECT_TRUE(n.is_ok()) << n.status().to_string();
    return n.is_ok() ? (*n)->outputs[static_cast<size_t>(out)] : nullptr;
  }
  Node* node_all(std::string_view op, std::unique_ptr<Attrs> attrs, std::vector<Value*> ins) {
    auto n = graph.add_node(op, "n" + std::to_string(count_++), std::move(attrs), std::move(ins));
    EXPECT_TRUE(n.is_ok()) << n.status().to_string();
    return n.is_ok() ? *n : nullptr;
  }
  std::mt19937& rng() { return rng_; }

  Graph graph;
  std::map<std::string, Tensor> values;
  std::vector<std::string> params;

 private:
  std::mt19937 rng_{1234};
  int count_ = 0;
};

template <class A>
std::unique_ptr<Attrs> attrs_of(A a) {
  return std::make_unique<A>(std::move(a));
}

/// Adds loss = sum(y * r) to the model (r given, or random in [-1, 1]); returns the loss value.
inline Value* add_loss(GradModel& m, Value* y, std::vector<double> r = {}) {
  if (r.empty()) {
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (int64_t i = 0; i < y->dims.numel(); ++i) r.push_back(u(m.rng()));
  }
  Value* rv = m.constant("loss_weights", y->dtype, y->dims, r);
  Value* prod = m.node("ElementWise", attrs_of(elementwise_attrs(ElementWiseOp::kProd)), {y, rv});
  ReduceAttrs sum;
  sum.op = ReduceOp::kSum;
  sum.keep_dims = false;
  auto n = m.graph.add_node("Reduce", "loss_sum", attrs_of(sum), {prod}, {"loss"});
  EXPECT_TRUE(n.is_ok()) << n.status().to_string();
  EXPECT_TRUE(m.graph.mark_output((*n)->outputs[0]).is_ok());
  return (*n)->outputs[0];
}

/// Runs `runner` with the model's values; the named outputs as doubles.
inline std::map<std::string, std::vector<double>> run_outputs(GraphRunner& runner, GradModel& m,
                                                              const std::vector<std::string>& names) {
  std::map<std::string, std::vector<double>> out;
  for (auto& [name, t] : m.values) EXPECT_TRUE(runner.set_input(name, t).is_ok()) << name;
  Status st = runner.run();
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  if (!st.is_ok()) return out;
  for (const std::string& n : names) {
    auto t = runner.output(n);
    EXPECT_TRUE(t.is_ok()) << n << ": " << t.status().to_string();
    if (!t.is_ok()) continue;
    Tensor c = *t->contiguous();
    std::vector<double>& v = out[n];
    for (int64_t i = 0; i < c.numel(); ++i) v.push_back(c.at(i));
  }
  return out;
}

/// Autograd's gradients of the model's loss (after add_loss) per parameter, on the reference backend.
inline std::map<std::string, std::vector<double>> autograd(GradModel& m, CheckOptions o = {}) {
  AutogradOptions ao;
  ao.params = m.params;
  auto tg = build_training_graph(m.graph, "loss", ao);
  EXPECT_TRUE(tg.is_ok()) << tg.status().to_string();
  if (!tg.is_ok()) return {};
  std::vector<std::string> names;
  for (const std::string& p : m.params) names.push_back(grad_name(p));
  auto ref = GraphRunner::compile_reference(*tg->graph);
  EXPECT_TRUE(ref.is_ok()) << ref.status().to_string() << "\n" << tg->graph->to_text();
  if (!ref.is_ok()) return {};
  auto want = run_outputs(*ref, m, names);
  if (o.cpu) {
    BuildOptions bo;
    bo.optimization_level = 0;
    auto cpu = GraphRunner::compile(*tg->graph, bo);
    EXPECT_TRUE(cpu.is_ok()) << cpu.status().to_string();
    if (cpu.is_ok()) {
      auto got = run_outputs(*cpu, m, names);
      for (auto& [name, v] : want) {
        const std::vector<double>& c = got[name];
        EXPECT_EQ(c.size(), v.size()) << name;
        for (size_t i = 0; i < std::min(c.size(), v.size()); ++i)
          EXPECT_NEAR(c[i], v[i], 1e-4 + 1e-4 * std::abs(v[i])) << "cpu backend, " << name << "[" << i << "]";
      }
    }
  }
  std::map<std::string, std::vector<double>> by_param;
  for (const std::string& p : m.params) by_param[p] = want[grad_name(p)];
  return by_param;
}

/// Adds the loss to `y` and checks every parameter's gradient against central differences.
inline void check_grads(GradModel& m, Value* y, CheckOptions o = {}) {
  ASSERT_NE(y, nullptr);
  add_loss(m, y);
  auto grads = autograd(m, o);
  ASSERT_EQ(grads.size(), m.params.size());
  auto fwd = GraphRunner::compile_reference(m.graph);
  ASSERT_TRUE(fwd.is_ok()) << fwd.status().to_string();
  for (const std::string& p : m.params) {
    Tensor& t = m.values[p];
    const std::vector<double>& g = grads[p];
    ASSERT_EQ(static_cast<int64_t>(g.size()), t.numel()) << p;
    for (int64_t i = 0; i < t.numel(); ++i) {
      const float x0 = t.data<float>()[i];
      t.data<float>()[i] = static_cast<float>(x0 + o.h);
      const double up = run_outputs(*fwd, m, {"loss"})["loss"].at(0);
      t.data<float>()[i] = static_cast<float>(x0 - o.h);
      const double down = run_outputs(*fwd, m, {"loss"})["loss"].at(0);
      t.data<float>()[i] = x0;
      const double numeric = (up - down) / (2 * o.h);
      EXPECT_NEAR(g[static_cast<size_t>(i)], numeric, o.atol + o.rtol * std::abs(numeric))
          << "d loss / d " << p << "[" << i << "]";
    }
  }
}

}  // namespace kiln::train::grad_check
