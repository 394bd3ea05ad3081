#include "grad_check.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <sstream>

#include "graph/graph.h"
#include "ops/grad.h"
#include "ops/registry.h"
#include "runner/graph_runner.h"

namespace kiln::train::testing {
namespace {

// A GradBuilder over a graph holding one forward node, its output gradients given as graph inputs.
class DirectGradBuilder final : public GradBuilder {
 public:
  DirectGradBuilder(Graph& g, Node& node, std::map<const Value*, Value*> out_grads, std::vector<bool> needs,
                    bool training)
      : g_(g), node_(node), out_grads_(std::move(out_grads)), needs_(std::move(needs)), training_(training) {}

  const Attrs& attrs() const override { return *node_.attrs; }
  int num_inputs() const override { return static_cast<int>(node_.inputs.size()); }
  int num_outputs() const override { return static_cast<int>(node_.outputs.size()); }
  GradValue input(int i) const override { return wrap(i < num_inputs() ? node_.inputs[i] : nullptr); }
  GradValue output(int i) const override { return wrap(i < num_outputs() ? node_.outputs[i] : nullptr); }
  TensorDesc desc(GradValue v) const override { return get(v) ? get(v)->desc() : TensorDesc::absent(); }
  const Tensor* value(GradValue v) const override { return get(v) ? get(v)->value() : nullptr; }
  GradValue grad_output(int i) const override {
    if (i >= num_outputs()) return {};
    auto it = out_grads_.find(node_.outputs[i]);
    return it == out_grads_.end() ? GradValue{} : wrap(it->second);
  }
  bool needs_grad(int i) const override { return i < static_cast<int>(needs_.size()) && needs_[i]; }
  Status set_grad(int i, GradValue gv) override {
    Value* v = get(gv);
    if (!needs_grad(i) || !v) return Status::ok();
    if (grads.count(i)) return internal_error("input ", i, " got two gradients (this check takes one)");
    if (v->dims != node_.inputs[i]->dims || v->dtype != node_.inputs[i]->dtype)
      return internal_error("gradient ", v->to_string(), " for input ", node_.inputs[i]->to_string());
    grads[i] = v;
    return Status::ok();
  }
  Result<std::vector<GradValue>> add(std::string_view op, std::unique_ptr<Attrs> attrs,
                                     std::vector<GradValue> inputs) override {
    std::vector<Value*> ins;
    for (GradValue v : inputs) ins.push_back(get(v));
    KILN_ASSIGN_OR_RETURN(Node * n, g_.add_node(op, "grad" + std::to_string(counter_++), std::move(attrs), ins));
    ++added;
    std::vector<GradValue> outs;
    for (Value* o : n->outputs) outs.push_back(wrap(o));
    return outs;
  }
  Result<GradValue> constant(Tensor value) override {
    KILN_ASSIGN_OR_RETURN(Value * v, g_.add_constant("const" + std::to_string(counter_++), std::move(value)));
    return wrap(v);
  }
  bool training() const override { return training_; }

  std::map<int, Value*> grads;
  int added = 0;

 private:
  GradValue wrap(Value* v) const {
    if (!v) return {};
    auto it = std::find(values_.begin(), values_.end(), v);
    if (it != values_.end()) return GradValue{static_cast<int>(it - values_.begin())};
    values_.push_back(v);
    return GradValue{static_cast<int>(values_.size() - 1)};
  }
  Value* get(GradValue v) const {
    return v.valid() && v.id < static_cast<int>(values_.size()) ? values_[v.id] : nullptr;
  }

  Graph& g_;
  Node& node_;
  std::map<const Value*, Value*> out_grads_;
  std::vector<bool> needs_;
  bool training_;
  int counter_ = 0;
  mutable std::vector<Value*> values_;
};

std::string name_of(int i) { return "in" + std::to_string(i); }

struct Built {
  std::unique_ptr<Graph> graph;
  std::map<int, std::string> grads;  // input -> gradient output name
  int added = 0;
};

// The forward node on graph inputs; with `backward`, dy as input "dy" and the rule's gradients as outputs.
Result<Built> build(const GradCheck& c, const Tensor& dy_like, bool backward) {
  Built b;
  b.graph = std::make_unique<Graph>();
  Graph& g = *b.graph;
  std::vector<Value*> ins;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (!c.inputs[i].defined()) {
      ins.push_back(nullptr);
      continue;
    }
    KILN_ASSIGN_OR_RETURN(Value * v,
                          g.add_input(name_of(static_cast<int>(i)), c.inputs[i].dtype(), c.inputs[i].dims()));
    ins.push_back(v);
  }
  KILN_ASSIGN_OR_RETURN(Node * node, g.add_node(c.op, "node", c.attrs->clone(), ins));
  KILN_RETURN_IF_ERROR(g.mark_output(node->outputs[0]));
  if (backward) {
    KILN_ASSIGN_OR_RETURN(Value * dy, g.add_input("dy", dy_like.dtype(), dy_like.dims()));
    std::vector<bool> needs(c.inputs.size(), false);
    for (int i : c.check) needs[i] = true;
    DirectGradBuilder gb(g, *node, {{node->outputs[0], dy}}, needs, c.training);
    KILN_RETURN_IF_ERROR(find_grad(c.op) ? find_grad(c.op)(gb) : invalid_argument("no rule for ", c.op));
    b.added = gb.added;
    for (int i : c.check) {
      auto it = gb.grads.find(i);
      if (it == gb.grads.end()) return invalid_argument("the rule gave input ", i, " no gradient");
      Value* v = it->second;
      if (v->is_graph_input) {  // an identity gradient: copy it to an output of its own
        KILN_ASSIGN_OR_RETURN(Node * id, g.add_node("Identity", "copy" + std::to_string(i),
                                                    OpRegistry::global().find("Identity")->make_attrs(), {v}));
        v = id->outputs[0];
      }
      KILN_RETURN_IF_ERROR(g.rename_value(v, "grad" + std::to_string(i) + "_out"));
      KILN_RETURN_IF_ERROR(g.mark_output(v));
      b.grads[i] = v->name;
    }
  }
  return b;
}

Result<GraphRunner> compile(const Graph& g, Backend backend) {
  if (backend == Backend::kRef) return GraphRunner::compile_reference(g);
  BuildOptions o;
  o.backend = backend;
  o.optimization_level = 0;
  o.passes.enabled = false;
  o.reference_fallback = false;
  return GraphRunner::compile(g, o);
}

std::vector<double> to_doubles(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[i] = t.at(i);
  return out;
}

Status bind_inputs(GraphRunner& r, const std::vector<Tensor>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined()) KILN_RETURN_IF_ERROR(r.set_input(name_of(static_cast<int>(i)), inputs[i]));
  return Status::ok();
}

Result<std::string> check(const GradCheck& c) {
  // dy: the forward output's shape, from a forward run.
  KILN_ASSIGN_OR_RETURN(Built fwd, build(c, Tensor(), false));
  KILN_ASSIGN_OR_RETURN(GraphRunner f, compile(*fwd.graph, Backend::kRef));
  std::vector<Tensor> inputs;
  for (const Tensor& t : c.inputs) {
    if (!t.defined()) {
      inputs.emplace_back();
      continue;
    }
    KILN_ASSIGN_OR_RETURN(Tensor copy, t.clone());
    inputs.push_back(std::move(copy));
  }
  KILN_RETURN_IF_ERROR(bind_inputs(f, inputs));
  KILN_RETURN_IF_ERROR(f.run());
  KILN_ASSIGN_OR_RETURN(Tensor y, f.output(fwd.graph->outputs()[0]->name));
  const Tensor dy = random_tensor(y.dims(), -1, 1, 99);
  const std::vector<double> dyv = to_doubles(dy);
  auto loss = [&]() -> Result<double> {
    KILN_RETURN_IF_ERROR(f.run());
    KILN_ASSIGN_OR_RETURN(Tensor out, f.output(fwd.graph->outputs()[0]->name));
    double s = 0;
    for (int64_t i = 0; i < out.numel(); ++i) s += out.at(i) * dyv[i];
    return s;
  };

  KILN_ASSIGN_OR_RETURN(Built bwd, build(c, dy, true));
  std::map<int, std::vector<double>> ref_grads;
  for (Backend backend : {Backend::kRef, Backend::kCpu}) {
    KILN_ASSIGN_OR_RETURN(GraphRunner r, compile(*bwd.graph, backend));
    KILN_RETURN_IF_ERROR(bind_inputs(r, c.inputs));
    KILN_RETURN_IF_ERROR(r.set_input("dy", dy));
    KILN_RETURN_IF_ERROR(r.run());
    for (auto& [i, name] : bwd.grads) {
      KILN_ASSIGN_OR_RETURN(Tensor g, r.output(name));
      std::vector<double> got = to_doubles(g);
      if (backend == Backend::kRef) {
        ref_grads[i] = got;
        continue;
      }
      for (size_t j = 0; j < got.size(); ++j)
        if (std::fabs(got[j] - ref_grads[i][j]) > 1e-4 + 1e-4 * std::fabs(ref_grads[i][j]))
          return str_cat("cpu gradient of input ", i, " element ", j, " is ", got[j], "; reference ", ref_grads[i][j]);
    }
  }
  // Central differences on the reference forward.
  for (int i : c.check) {
    Tensor& x = inputs[i];
    for (int64_t j = 0; j < x.numel(); ++j) {
      const double v = x.at(j);
      x.set(j, v + c.step);
      const double up_at = x.at(j);
      KILN_ASSIGN_OR_RETURN(double up, loss());
      x.set(j, v - c.step);
      const double down_at = x.at(j);
      KILN_ASSIGN_OR_RETURN(double down, loss());
      x.set(j, v);
      const double fd = (up - down) / (up_at - down_at);
      const double got = ref_grads[i][j];
      if (std::fabs(fd - got) > c.tolerance * (1 + std::fabs(fd)))
        return str_cat(c.op, " gradient of input ", i, " element ", j, " is ", got, "; finite differences give ", fd);
    }
  }
  return std::string();
}

}  // namespace

Tensor random_tensor(const Dims& dims, double lo, double hi, uint32_t seed) {
  Tensor t = Tensor::empty(DataType::kFloat32, dims).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, u(rng));
  return t;
}

Tensor distinct_tensor(const Dims& dims, double lo, double gap, uint32_t seed) {
  Tensor t = Tensor::empty(DataType::kFloat32, dims).value();
  std::vector<int64_t> order(static_cast<size_t>(t.numel()));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, lo + gap * static_cast<double>(order[i]));
  return t;
}

Tensor int64_scalar(int64_t v) {
  Tensor t = Tensor::empty(DataType::kInt64, Dims{}).value();
  *t.data<int64_t>() = v;
  return t;
}

std::string check_gradients(const GradCheck& c) {
  auto r = check(c);
  return r.is_ok() ? *r : r.status().to_string();
}

int backward_nodes(const GradCheck& c) {
  auto b = build(c, random_tensor(c.inputs[0].dims(), -1, 1, 1), true);
  return b.is_ok() ? b->added : -1;
}

}  // namespace kiln::train::testing
