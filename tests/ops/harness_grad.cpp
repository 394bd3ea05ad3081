// The op harness's `grad` mode. For each case of an op with a gradient rule: loss = sum_j sum(y_j * dy_j) with
// random dy_j, differentiated by autograd; the gradient of every floating-point input is checked against central
// finite differences of the reference forward (the loss summed in double on the host, so unperturbed outputs
// cancel exactly), then the backward graph runs on every other backend against the reference backward.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "core/cuda_runtime.h"
#include "harness.h"
#include "ops/elementwise/elementwise.h"
#include "ops/grad.h"
#include "ops/reduce/reduce.h"
#include "runner/graph_runner.h"
#include "train/autograd.h"

namespace kiln::harness {
namespace {

struct GradCase {
  std::unique_ptr<Graph> forward;                      // inputs x<i> (floating, differentiated) -> outputs y<j>
  std::vector<std::string> outputs;                    // the outputs the loss uses
  std::vector<Tensor> dy;                              // per used output
  std::vector<std::pair<std::string, Tensor>> inputs;  // graph inputs and their values
  train::TrainingGraph training;
};

bool differentiable_input(const OpSchema& schema, const TensorDesc& d, int i) {
  if (!d.present || !is_floating(d.dtype) || d.dims.numel() == 0) return false;
  return std::find(schema.value_inputs.begin(), schema.value_inputs.end(), i) == schema.value_inputs.end();
}

Result<GradCase> make_grad_case(const OpCase& c, const Prepared& p) {
  GradCase gc;
  gc.forward = std::make_unique<Graph>();
  Graph& g = *gc.forward;
  std::vector<Value*> ins;
  std::vector<std::string> params;
  for (size_t i = 0; i < p.call.inputs.size(); ++i) {
    const TensorDesc& d = p.call.inputs[i];
    if (!d.present) {
      ins.push_back(nullptr);
      continue;
    }
    const std::string name = "x" + std::to_string(i);
    Value* v;
    if (differentiable_input(*p.call.schema, d, static_cast<int>(i))) {
      KILN_ASSIGN_OR_RETURN(v, g.add_input(name, d.dtype, d.dims));
      gc.inputs.emplace_back(name, p.src[i]);
      params.push_back(name);
    } else {
      KILN_ASSIGN_OR_RETURN(v, g.add_constant(name, p.src[i]));
    }
    ins.push_back(v);
  }
  if (params.empty()) return Status(StatusCode::kNotFound, "no floating-point input to differentiate");
  KILN_ASSIGN_OR_RETURN(Node * node, g.add_node(c.op, "node", c.attrs->clone(), ins));
  std::vector<int> used = c.grad_outputs;
  if (used.empty())
    for (size_t j = 0; j < node->outputs.size(); ++j)
      if (is_floating(node->outputs[j]->dtype)) used.push_back(static_cast<int>(j));
  std::mt19937_64 rng(seed_for(c, DataType::kFloat32) ^ 0x5bd1e995u);
  Value* loss = nullptr;
  for (int j : used) {
    Value* y = node->outputs[j];
    KILN_RETURN_IF_ERROR(g.mark_output(y));
    gc.outputs.push_back(y->name);
    KILN_ASSIGN_OR_RETURN(Tensor dy, make_input(uniform(y->dims), y->dtype, rng));
    gc.dy.push_back(dy);
    KILN_ASSIGN_OR_RETURN(Value * dyv, g.add_constant("dy" + std::to_string(j), dy));
    KILN_ASSIGN_OR_RETURN(
        Node * prod, g.add_node("ElementWise", "loss_prod" + std::to_string(j),
                                std::make_unique<ElementWiseAttrs>(elementwise_attrs(ElementWiseOp::kProd)), {y, dyv}));
    auto sum_attrs = std::make_unique<ReduceAttrs>();
    sum_attrs->keep_dims = false;
    KILN_ASSIGN_OR_RETURN(
        Node * sum, g.add_node("Reduce", "loss_sum" + std::to_string(j), std::move(sum_attrs), {prod->outputs[0]}));
    Value* part = sum->outputs[0];
    if (loss) {
      KILN_ASSIGN_OR_RETURN(
          Node * add,
          g.add_node("ElementWise", "loss_add" + std::to_string(j),
                     std::make_unique<ElementWiseAttrs>(elementwise_attrs(ElementWiseOp::kSum)), {loss, part}));
      part = add->outputs[0];
    }
    loss = part;
  }
  if (!loss) return Status(StatusCode::kNotFound, "no floating-point output to differentiate");
  KILN_RETURN_IF_ERROR(g.rename_value(loss, "loss"));
  train::AutogradOptions options;
  options.params = params;
  options.allow_unreached = true;
  KILN_ASSIGN_OR_RETURN(gc.training, train::build_training_graph(g, "loss", options));
  return gc;
}

// sum_j sum(y_j * dy_j) in double, from a forward run.
Result<double> host_loss(GraphRunner& fwd, const GradCase& gc) {
  KILN_RETURN_IF_ERROR(fwd.run());
  double total = 0;
  for (size_t j = 0; j < gc.outputs.size(); ++j) {
    KILN_ASSIGN_OR_RETURN(Tensor y, fwd.output(gc.outputs[j]));
    for (int64_t k = 0; k < y.numel(); ++k) total += y.at(k) * gc.dy[j].at(k);
  }
  return total;
}

Result<std::vector<Tensor>> run_backward(const GradCase& gc, const BuildOptions& build) {
  KILN_ASSIGN_OR_RETURN(GraphRunner runner, GraphRunner::compile(*gc.training.graph, build));
  for (const auto& [name, value] : gc.inputs) KILN_RETURN_IF_ERROR(runner.set_input(name, value));
  KILN_RETURN_IF_ERROR(runner.run());
  std::vector<Tensor> grads;
  for (const std::string& g : gc.training.grads) {
    KILN_ASSIGN_OR_RETURN(Tensor t, runner.output(g));
    KILN_ASSIGN_OR_RETURN(Tensor copy, t.clone());
    grads.push_back(std::move(copy));
  }
  return grads;
}

// Checks the reference gradients against finite differences; "" when they agree.
Result<std::string> check_finite_differences(const OpCase& c, GradCase& gc, const std::vector<Tensor>& grads,
                                             int samples, int& skipped) {
  // A 16-bit output cannot resolve a small step (its rounding is a staircase): no finite differences.
  for (const std::string& y : gc.outputs) {
    const DataType d = gc.forward->find_value(y)->dtype;
    if (d == DataType::kFloat16 || d == DataType::kBFloat16) return std::string("16-bit output");
  }
  KILN_ASSIGN_OR_RETURN(GraphRunner fwd, GraphRunner::compile_reference(*gc.forward));
  std::vector<Tensor> values;  // writable copies the runner reads
  for (auto& [name, value] : gc.inputs) {
    KILN_ASSIGN_OR_RETURN(Tensor copy, value.clone());
    values.push_back(copy);
    KILN_RETURN_IF_ERROR(fwd.set_input(name, copy));
  }
  KILN_ASSIGN_OR_RETURN(double base, host_loss(fwd, gc));
  std::mt19937_64 rng(seed_for(c, DataType::kFloat32) ^ 0x2545f491u);
  const double tol = 2e-3 * c.tolerance_scale;
  for (size_t p = 0; p < gc.training.params.size(); ++p) {
    const std::string& name = gc.training.params[p];
    size_t vi = 0;
    while (vi < gc.inputs.size() && gc.inputs[vi].first != name) ++vi;
    if (vi == gc.inputs.size()) return internal_error("parameter ", name, " is not a harness input");
    Tensor& x = values[vi];
    const int64_t n = x.numel();
    std::vector<int64_t> picks;
    if (n <= samples) {
      for (int64_t k = 0; k < n; ++k) picks.push_back(k);
    } else {
      std::uniform_int_distribution<int64_t> pick(0, n - 1);
      for (int s = 0; s < samples; ++s) picks.push_back(pick(rng));
    }
    for (int64_t k : picks) {
      const double x0 = x.at(k);
      const double h = 1e-3 * std::max(1.0, std::fabs(x0));
      x.set(k, x0 + h);
      const double hp = x.at(k) - x0;  // the step float32 could represent
      KILN_ASSIGN_OR_RETURN(double lp, host_loss(fwd, gc));
      x.set(k, x0 - h);
      const double hm = x0 - x.at(k);
      KILN_ASSIGN_OR_RETURN(double lm, host_loss(fwd, gc));
      x.set(k, x0);
      const double forward_slope = (lp - base) / hp, backward_slope = (base - lm) / hm;
      const double fd = (lp - lm) / (hp + hm);
      if (!std::isfinite(fd)) continue;
      // A kink (ReLU at 0, a max tie) within the step: the one-sided slopes disagree; skip the sample.
      if (std::fabs(forward_slope - backward_slope) > 10 * tol * (1 + std::fabs(fd))) {
        ++skipped;
        continue;
      }
      const double got = grads[p].at(k);
      if (!(std::fabs(got - fd) <= tol * (1 + std::fabs(fd)))) {
        // A jump (sign, floor, round at a step) looks the same from both sides but scales as 1 / h: a
        // quarter step moves the quotient far; a smooth function's barely changes.
        x.set(k, x0 + h / 4);
        const double qp = x.at(k) - x0;
        KILN_ASSIGN_OR_RETURN(double lq, host_loss(fwd, gc));
        x.set(k, x0 - h / 4);
        const double qm = x0 - x.at(k);
        KILN_ASSIGN_OR_RETURN(double lr, host_loss(fwd, gc));
        x.set(k, x0);
        const double fd4 = (lq - lr) / (qp + qm);
        if (std::fabs(fd4 - fd) > 0.5 * std::fabs(fd)) {
          ++skipped;
          continue;
        }
        return str_cat("d loss / d ", name, "[", k, "]: rule gives ", got, ", finite differences ", fd);
      }
    }
  }
  return std::string();
}

}  // namespace

int run_grad(const GradOptions& opt) {
  const bool gpu = cuda::gpu_available();
  int cases = 0, checks = 0, failed = 0, skipped_samples = 0, refused = 0, no_fd = 0;
  std::set<std::string> ops, no_rule;
  for (auto& [family, factory] : case_factories()) {
    if (!opt.family.empty() && family != opt.family) continue;
    for (const OpCase& c : factory()) {
      if (!opt.op.empty() && c.op != opt.op) continue;
      if (!find_grad(c.op)) {
        no_rule.insert(c.op);
        continue;
      }
      auto p = prepare(c, DataType::kFloat32);
      if (!p.is_ok()) continue;  // a case only for other dtypes
      const std::string label = c.op + " [" + c.name + "]";
      auto gc = make_grad_case(c, *p);
      if (!gc.is_ok()) {
        if (gc.status().code() == StatusCode::kNotFound) continue;
        if (gc.status().code() == StatusCode::kUnsupported) {  // the rule refuses the case, saying why
          ++refused;
          std::printf("refused %s: %s\n", label.c_str(), gc.status().to_string().c_str());
          continue;
        }
        ++failed;
        std::printf("FAIL %s: autograd: %s\n", label.c_str(), gc.status().to_string().c_str());
        continue;
      }
      ++cases;
      ops.insert(c.op);
      BuildOptions ref;
      ref.backend = Backend::kRef;
      ref.optimization_level = 0;
      ref.passes.enabled = false;
      auto want = run_backward(*gc, ref);
      ++checks;
      if (!want.is_ok()) {
        ++failed;
        std::printf("FAIL %s: reference backward: %s\n", label.c_str(), want.status().to_string().c_str());
        continue;
      }
      auto fd = check_finite_differences(c, *gc, *want, opt.samples, skipped_samples);
      if (fd.is_ok() && *fd == "16-bit output") {
        ++no_fd;
        if (opt.verbose) std::printf("skip %s: finite differences (16-bit output)\n", label.c_str());
      } else if (!fd.is_ok() || !fd->empty()) {
        ++failed;
        std::printf("FAIL %s: %s\n", label.c_str(), fd.is_ok() ? fd->c_str() : fd.status().to_string().c_str());
        continue;
      } else if (opt.verbose) {
        std::printf("ok   %s: ref vs finite differences\n", label.c_str());
      }
      for (Backend b : {Backend::kCpu, Backend::kCuda}) {
        if (!opt.backend.empty() && opt.backend != backend_name(b)) continue;
        if (b == Backend::kCuda && !gpu) continue;
        BuildOptions build;
        build.backend = b;
        build.optimization_level = 1;
        build.passes.enabled = false;
        ++checks;
        auto got = run_backward(*gc, build);
        std::string problem;
        if (!got.is_ok()) {
          problem = got.status().to_string();
        } else {
          const Tolerance tol = tolerance_for(DataType::kFloat32, 10 * c.tolerance_scale);
          for (size_t i = 0; i < got->size() && problem.empty(); ++i) {
            std::string diff = compare((*got)[i], (*want)[i], tol);
            if (!diff.empty()) problem = gc->training.grads[i] + ": " + diff;
          }
        }
        if (!problem.empty()) {
          ++failed;
          std::printf("FAIL %s on %s: %s\n", label.c_str(), std::string(backend_name(b)).c_str(), problem.c_str());
        } else if (opt.verbose) {
          std::printf("ok   %s on %s\n", label.c_str(), std::string(backend_name(b)).c_str());
        }
      }
    }
  }
  if (!gpu) std::printf("cuda backend: skipped: no GPU\n");
  std::printf(
      "grad: %zu ops with gradient rules, %d cases, %d checks, %d failed (%d finite-difference samples skipped at "
      "kinks; %d cases with 16-bit outputs checked across backends only; %d cases refused by their rule)\n",
      ops.size(), cases, checks, failed, skipped_samples, no_fd, refused);
  if (opt.verbose && !no_rule.empty()) {
    std::printf("ops with harness cases and no gradient rule:");
    for (const std::string& o : no_rule) std::printf(" %s", o.c_str());
    std::printf("\n");
  }
  return failed ? 1 : 0;
}

}  // namespace kiln::harness
