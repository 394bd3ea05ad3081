#pragma once
// Helpers for optimizer tests: run a graph through the builder with the optimizer on or off and compare the
// outputs on random inputs; read what the passes did.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "builder/builder.h"
#include "runtime/engine.h"

namespace kiln::pass_test {

/// Random inputs (uniform in [-1, 1], never all zero; integers in [0, 4)) for every graph input.
inline std::vector<Tensor> random_inputs(const Graph& g, unsigned seed = 7) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::vector<Tensor> out;
  for (const Value* in : g.inputs()) {
    Tensor t = Tensor::empty(in->dtype, in->dims).value();
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (in->dtype == DataType::kFloat32)
        t.data<float>()[i] = uniform(rng);
      else if (in->dtype == DataType::kInt64)
        t.data<int64_t>()[i] = static_cast<int64_t>(rng() % 4);
      else if (in->dtype == DataType::kInt32)
        t.data<int32_t>()[i] = static_cast<int32_t>(rng() % 4);
      else
        ADD_FAILURE() << "random_inputs: no random values for " << dtype_name(in->dtype);
    }
    out.push_back(std::move(t));
  }
  return out;
}

struct Built {
  std::vector<Tensor> outputs;
  BuildReport report;
  std::string engine_inspect;  ///< one line per layer: name, op, kernel
};

/// Builds `g` on `backend` with `passes` and runs it on `inputs`.
inline Result<Built> build_and_run(const Graph& g, const std::vector<Tensor>& inputs, PassOptions passes,
                                   Backend backend = Backend::kCpu) {
  BuildOptions options;
  options.backend = backend;
  options.optimization_level = 0;
  options.passes = std::move(passes);
  Built built;
  KILN_ASSIGN_OR_RETURN(std::string bytes, build_engine(g, options, &built.report));
  KILN_ASSIGN_OR_RETURN(auto engine, EngineImpl::deserialize(bytes));
  built.engine_inspect = engine->inspect();
  KILN_ASSIGN_OR_RETURN(auto ctx, engine->create_execution_context());
  for (size_t i = 0; i < inputs.size(); ++i) KILN_RETURN_IF_ERROR(ctx->set_input(g.inputs()[i]->name, inputs[i]));
  KILN_RETURN_IF_ERROR(ctx->execute());
  for (const std::string& name : engine->output_names()) {
    KILN_ASSIGN_OR_RETURN(Tensor t, ctx->output(name));
    KILN_ASSIGN_OR_RETURN(Tensor c, t.clone());
    built.outputs.push_back(std::move(c));
  }
  return built;
}

/// The largest |a - b| / (1 + |b|) over two lists of float32 tensors of equal shapes (infinity on a mismatch).
inline double max_difference(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].dims() != b[i].dims() || a[i].dtype() != DataType::kFloat32 || b[i].dtype() != DataType::kFloat32)
      return INFINITY;
    const Tensor &x = a[i], &y = b[i];
    for (int64_t k = 0; k < x.numel(); ++k) {
      const double d = std::abs(double(x.data<float>()[k]) - y.data<float>()[k]) / (1 + std::abs(y.data<float>()[k]));
      if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
    }
  }
  return worst;
}

/// Builds and runs `g` with the optimizer on (except `disabled`) and off; expects equal outputs within
/// `tolerance` and returns the optimized build (its report says what the passes did).
inline Built expect_same_as_unoptimized(const Graph& g, double tolerance = 1e-5, std::set<std::string> disabled = {},
                                        Backend backend = Backend::kCpu) {
  const std::vector<Tensor> inputs = random_inputs(g);
  PassOptions off;
  off.enabled = false;
  PassOptions on;
  on.disabled = std::move(disabled);
  auto plain = build_and_run(g, inputs, off, backend);
  auto optimized = build_and_run(g, inputs, on, backend);
  EXPECT_TRUE(plain.is_ok()) << plain.status().to_string();
  EXPECT_TRUE(optimized.is_ok()) << optimized.status().to_string();
  if (!plain || !optimized) return {};
  EXPECT_LE(max_difference(optimized->outputs, plain->outputs), tolerance);
  return std::move(*optimized);
}

/// The nodes of `g` running `op`.
inline std::vector<const Node*> nodes_of(const Graph& g, const std::string& op) {
  std::vector<const Node*> out;
  for (const Node* n : g.nodes())
    if (n->op() == op) out.push_back(n);
  return out;
}

/// The rewrites pass `pass` applied (the report's lines without the "pass: " prefix).
inline std::vector<std::string> applied_by(const OptimizerReport& r, const std::string& pass) {
  std::vector<std::string> out;
  for (const std::string& line : r.applied)
    if (line.rfind(pass + ": ", 0) == 0) out.push_back(line.substr(pass.size() + 2));
  return out;
}
inline std::vector<std::string> refused_by(const OptimizerReport& r, const std::string& pass) {
  std::vector<std::string> out;
  for (const std::string& line : r.refused)
    if (line.rfind(pass + ": ", 0) == 0) out.push_back(line.substr(pass.size() + 2));
  return out;
}

}  // namespace kiln::pass_test
