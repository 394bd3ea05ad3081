#pragma once
// Short ways to add the nodes optimizer tests are made of.
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "ops/activation/activation.h"
#include "ops/elementwise/elementwise.h"
#include "ops/reduce/reduce.h"
#include "ops/scale/scale.h"
#include "ops/shuffle/shuffle.h"
#include "ops/unary/unary.h"

namespace kiln::pass_test {

inline Tensor filled(Dims dims, float v) {
  Tensor t = Tensor::empty(DataType::kFloat32, dims).value();
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = v;
  return t;
}
/// 0.5, 0.6, 0.7, ... : distinct values so a wrong broadcast shows.
inline Tensor ramp(Dims dims, float start = 0.5f, float step = 0.1f) {
  Tensor t = Tensor::empty(DataType::kFloat32, dims).value();
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = start + step * static_cast<float>(i);
  return t;
}

inline Value* out(Result<Node*> n) { return n.value()->outputs[0]; }

inline Value* activation(Graph& g, const std::string& name, Value* x, ActivationKind kind) {
  return out(g.add_node("Activation", name, std::make_unique<ActivationAttrs>(activation_defaults(kind)), {x}));
}
inline Value* binary(Graph& g, const std::string& name, ElementWiseOp op, Value* a, Value* b) {
  return out(g.add_node("ElementWise", name, std::make_unique<ElementWiseAttrs>(elementwise_attrs(op)), {a, b}));
}
inline Value* unary(Graph& g, const std::string& name, UnaryOp op, Value* x) {
  auto a = std::make_unique<UnaryAttrs>();
  a->op = op;
  return out(g.add_node("Unary", name, std::move(a), {x}));
}
inline Value* reduce(Graph& g, const std::string& name, ReduceOp op, Value* x, std::vector<int64_t> axes,
                     bool keep_dims = true) {
  auto a = std::make_unique<ReduceAttrs>();
  a->op = op;
  a->axes = std::move(axes);
  a->keep_dims = keep_dims;
  return out(g.add_node("Reduce", name, std::move(a), {x}));
}
inline Value* transpose(Graph& g, const std::string& name, Value* x, std::vector<int64_t> perm) {
  auto a = std::make_unique<ShuffleAttrs>();
  a->first_transpose = std::move(perm);
  return out(g.add_node("Shuffle", name, std::move(a), {x}));
}
inline Value* reshape(Graph& g, const std::string& name, Value* x, std::vector<int64_t> dims) {
  auto a = std::make_unique<ShuffleAttrs>();
  a->has_reshape_dims = true;
  a->reshape_dims = std::move(dims);
  return out(g.add_node("Shuffle", name, std::move(a), {x}));
}
inline Value* constant(Graph& g, const std::string& name, Tensor t) {
  return g.add_constant(name, std::move(t)).value();
}

/// The op of the node producing graph output `i`.
inline std::string output_op(const Graph& g, int i = 0) {
  const Value* v = g.outputs()[i];
  return v->producer ? v->producer->op() : "";
}

}  // namespace kiln::pass_test
