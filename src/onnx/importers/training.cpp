// ONNX ai.onnx.preview.training Adagrad, Momentum and Adam -> kiln elementwise arithmetic: one update of
// every (X, G, state...) group, with the learning rate R and the update count T known at run time.
#include <string>
#include <vector>

#include "onnx/importer.h"
#include "ops/elementwise/elementwise.h"
#include "ops/unary/unary.h"

namespace kiln::onnx_import {
namespace {

// Arithmetic on the node's values; every intermediate is named after the node and a running suffix.
class Arith {
 public:
  Arith(ImportContext& ctx, const OnnxNode& node) : ctx_(ctx), node_(node) {}

  Result<Value*> bin(ElementWiseOp op, Value* a, Value* b) {
    ElementWiseAttrs attrs;
    attrs.op = op;
    KILN_ASSIGN_OR_RETURN(Node * n, ctx_.add(node_, "ElementWise", attrs, {a, b}, false, next()));
    return n->outputs[0];
  }
  Result<Value*> add(Value* a, Value* b) { return bin(ElementWiseOp::kSum, a, b); }
  Result<Value*> sub(Value* a, Value* b) { return bin(ElementWiseOp::kSub, a, b); }
  Result<Value*> mul(Value* a, Value* b) { return bin(ElementWiseOp::kProd, a, b); }
  Result<Value*> div(Value* a, Value* b) { return bin(ElementWiseOp::kDiv, a, b); }
  Result<Value*> sqrt(Value* a) {
    UnaryAttrs attrs;
    attrs.op = UnaryOp::kSqrt;
    KILN_ASSIGN_OR_RETURN(Node * n, ctx_.add(node_, "Unary", attrs, {a}, false, next()));
    return n->outputs[0];
  }
  Result<Value*> where(Value* cond, Value* a, Value* b) {
    KILN_ASSIGN_OR_RETURN(Node * n, ctx_.add(node_, "Where", NoAttrs{}, {cond, a, b}, false, next()));
    return n->outputs[0];
  }
  Result<Value*> to_float(Value* a) {
    CastAttrs attrs;
    attrs.to = DataType::kFloat32;
    KILN_ASSIGN_OR_RETURN(Node * n, ctx_.add(node_, "Cast", attrs, {a}, false, next()));
    return n->outputs[0];
  }
  Result<Value*> scalar(double v, DataType dtype = DataType::kFloat32) {
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(dtype, Dims{}));
    t.set(0, v);
    return ctx_.add_constant(node_, next(), std::move(t));
  }

 private:
  std::string next() { return str_cat("t", count_++); }
  ImportContext& ctx_;
  const OnnxNode& node_;
  int count_ = 0;
};

// The inputs after R and T split into `groups` lists of equal length (X, G, then the states).
Result<std::vector<std::vector<Value*>>> grouped_inputs(ImportContext& ctx, const OnnxNode& node, int groups) {
  const int n = node.num_inputs() - 2;
  if (n <= 0 || n % groups != 0)
    return node.error("has ", node.num_inputs(), " inputs; it takes R, T and ", groups,
                      " lists of tensors of equal length");
  if (node.num_outputs() != n / groups * (groups - 1))
    return node.error("has ", node.num_outputs(), " outputs for ", n / groups, " tensors to update; it must have ",
                      n / groups * (groups - 1));
  std::vector<std::vector<Value*>> out(static_cast<size_t>(groups));
  for (int i = 0; i < n; ++i) {
    KILN_ASSIGN_OR_RETURN(Value * v, ctx.input(node, i + 2));
    if (!v) return node.error("input ", i + 2, " is missing");
    if (v->dtype != DataType::kFloat32 && v->dtype != DataType::kFloat16 && v->dtype != DataType::kBFloat16)
      return node.unsupported_error("input ", i + 2, " is ", dtype_name(v->dtype), "; the optimizers update floats");
    out[static_cast<size_t>(i / (n / groups))].push_back(v);
  }
  return out;
}

struct RateAndCount {
  Value* rate;     // R as float32
  Value* count;    // T as float32
  Value* started;  // T > 0
};

Result<RateAndCount> rate_and_count(ImportContext& ctx, const OnnxNode& node, Arith& a) {
  KILN_ASSIGN_OR_RETURN(Value * r, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value * t, ctx.input(node, 1));
  if (!r || !t) return node.error("needs the learning rate R and the update count T");
  RateAndCount out{};
  KILN_ASSIGN_OR_RETURN(out.rate, a.to_float(r));
  KILN_ASSIGN_OR_RETURN(out.count, a.to_float(t));
  KILN_ASSIGN_OR_RETURN(Value * zero, a.scalar(0));
  KILN_ASSIGN_OR_RETURN(out.started, a.bin(ElementWiseOp::kGreater, out.count, zero));
  return out;
}

// norm_coefficient * X + G, computed in float32.
Result<Value*> regularized(Arith& a, Value* x, Value* g, Value* norm) {
  KILN_ASSIGN_OR_RETURN(Value * xf, a.to_float(x));
  KILN_ASSIGN_OR_RETURN(Value * gf, a.to_float(g));
  KILN_ASSIGN_OR_RETURN(Value * nx, a.mul(norm, xf));
  return a.add(nx, gf);
}

// Binds output `i` to `v` cast back to `like`'s type.
Status bind_as(ImportContext& ctx, const OnnxNode& node, int i, Value* v, const Value* like) {
  if (like->dtype == DataType::kFloat32) return ctx.bind_output(node, i, v);
  CastAttrs attrs;
  attrs.to = like->dtype;
  KILN_ASSIGN_OR_RETURN(Node * n, ctx.add(node, "Cast", attrs, {v}, false, str_cat("out", i)));
  return ctx.bind_output(node, i, n->outputs[0]);
}

Status import_adagrad(ImportContext& ctx, const OnnxNode& node) {
  KILN_ASSIGN_OR_RETURN(auto groups, grouped_inputs(ctx, node, 3));
  Arith a(ctx, node);
  KILN_ASSIGN_OR_RETURN(RateAndCount rt, rate_and_count(ctx, node, a));
  KILN_ASSIGN_OR_RETURN(Value * decay, a.scalar(node.attr_float("decay_factor", 0)));
  KILN_ASSIGN_OR_RETURN(Value * eps, a.scalar(node.attr_float("epsilon", 1e-6f)));
  KILN_ASSIGN_OR_RETURN(Value * norm, a.scalar(node.attr_float("norm_coefficient", 0)));
  KILN_ASSIGN_OR_RETURN(Value * one, a.scalar(1));
  // r = R / (1 + T * decay_factor)
  KILN_ASSIGN_OR_RETURN(Value * td, a.mul(rt.count, decay));
  KILN_ASSIGN_OR_RETURN(Value * denom, a.add(one, td));
  KILN_ASSIGN_OR_RETURN(Value * r, a.div(rt.rate, denom));
  const int n = static_cast<int>(groups[0].size());
  for (int k = 0; k < n; ++k) {
    Value *x = groups[0][k], *g = groups[1][k], *h = groups[2][k];
    KILN_ASSIGN_OR_RETURN(Value * gr, regularized(a, x, g, norm));
    KILN_ASSIGN_OR_RETURN(Value * hf, a.to_float(h));
    KILN_ASSIGN_OR_RETURN(Value * g2, a.mul(gr, gr));
    KILN_ASSIGN_OR_RETURN(Value * h_new, a.add(hf, g2));
    KILN_ASSIGN_OR_RETURN(Value * root, a.sqrt(h_new));
    KILN_ASSIGN_OR_RETURN(Value * adaptive, a.add(root, eps));
    KILN_ASSIGN_OR_RETURN(Value * step, a.mul(r, gr));
    KILN_ASSIGN_OR_RETURN(Value * scaled, a.div(step, adaptive));
    KILN_ASSIGN_OR_RETURN(Value * xf, a.to_float(x));
    KILN_ASSIGN_OR_RETURN(Value * x_new, a.sub(xf, scaled));
    KILN_RETURN_IF_ERROR(bind_as(ctx, node, k, x_new, x));
    KILN_RETURN_IF_ERROR(bind_as(ctx, node, n + k, h_new, h));
  }
  return Status::ok();
}

Status import_momentum(ImportContext& ctx, const OnnxNode& node) {
  KILN_ASSIGN_OR_RETURN(auto groups, grouped_inputs(ctx, node, 3));
  const std::string mode = node.attr_string("mode", "standard");
  if (mode != "standard" && mode != "nesterov") return node.error("mode '", mode, "' is not 'standard' or 'nesterov'");
  Arith a(ctx, node);
  KILN_ASSIGN_OR_RETURN(RateAndCount rt, rate_and_count(ctx, node, a));
  KILN_ASSIGN_OR_RETURN(const float alpha_v, node.attr_float("alpha"));  // all three are required
  KILN_ASSIGN_OR_RETURN(const float beta_v, node.attr_float("beta"));
  KILN_ASSIGN_OR_RETURN(const float norm_v, node.attr_float("norm_coefficient"));
  KILN_ASSIGN_OR_RETURN(Value * alpha, a.scalar(alpha_v));
  KILN_ASSIGN_OR_RETURN(Value * beta, a.scalar(beta_v));
  KILN_ASSIGN_OR_RETURN(Value * norm, a.scalar(norm_v));
  KILN_ASSIGN_OR_RETURN(Value * one, a.scalar(1));
  // The first update (T = 0) takes the whole gradient.
  KILN_ASSIGN_OR_RETURN(Value * beta_t, a.where(rt.started, beta, one));
  const int n = static_cast<int>(groups[0].size());
  for (int k = 0; k < n; ++k) {
    Value *x = groups[0][k], *g = groups[1][k], *v = groups[2][k];
    KILN_ASSIGN_OR_RETURN(Value * gr, regularized(a, x, g, norm));
    KILN_ASSIGN_OR_RETURN(Value * vf, a.to_float(v));
    KILN_ASSIGN_OR_RETURN(Value * av, a.mul(alpha, vf));
    KILN_ASSIGN_OR_RETURN(Value * bg, a.mul(beta_t, gr));
    KILN_ASSIGN_OR_RETURN(Value * v_new, a.add(av, bg));
    Value* direction = v_new;
    if (mode == "nesterov") {
      KILN_ASSIGN_OR_RETURN(Value * av_new, a.mul(alpha, v_new));
      KILN_ASSIGN_OR_RETURN(direction, a.add(gr, av_new));
    }
    KILN_ASSIGN_OR_RETURN(Value * step, a.mul(rt.rate, direction));
    KILN_ASSIGN_OR_RETURN(Value * xf, a.to_float(x));
    KILN_ASSIGN_OR_RETURN(Value * x_new, a.sub(xf, step));
    KILN_RETURN_IF_ERROR(bind_as(ctx, node, k, x_new, x));
    KILN_RETURN_IF_ERROR(bind_as(ctx, node, n + k, v_new, v));
  }
  return Status::ok();
}

Status import_adam(ImportContext& ctx, const OnnxNode& node) {
  KILN_ASSIGN_OR_RETURN(auto groups, grouped_inputs(ctx, node, 4));
  Arith a(ctx, node);
  KILN_ASSIGN_OR_RETURN(RateAndCount rt, rate_and_count(ctx, node, a));
  const double alpha_v = node.attr_float("alpha", 0.9f), beta_v = node.attr_float("beta", 0.999f);
  KILN_ASSIGN_OR_RETURN(Value * alpha, a.scalar(alpha_v));
  KILN_ASSIGN_OR_RETURN(Value * beta, a.scalar(beta_v));
  KILN_ASSIGN_OR_RETURN(Value * alpha_c, a.scalar(1 - alpha_v));
  KILN_ASSIGN_OR_RETURN(Value * beta_c, a.scalar(1 - beta_v));
  KILN_ASSIGN_OR_RETURN(Value * eps, a.scalar(node.attr_float("epsilon", 1e-6f)));
  KILN_ASSIGN_OR_RETURN(Value * norm, a.scalar(node.attr_float("norm_coefficient", 0)));
  KILN_ASSIGN_OR_RETURN(Value * post, a.scalar(1 - node.attr_float("norm_coefficient_post", 0)));
  KILN_ASSIGN_OR_RETURN(Value * one, a.scalar(1));
  // Bias correction from the second update on: r * sqrt(1 - beta^T) / (1 - alpha^T).
  KILN_ASSIGN_OR_RETURN(Value * alpha_t, a.bin(ElementWiseOp::kPow, alpha, rt.count));
  KILN_ASSIGN_OR_RETURN(Value * beta_t, a.bin(ElementWiseOp::kPow, beta, rt.count));
  KILN_ASSIGN_OR_RETURN(Value * one_minus_bt, a.sub(one, beta_t));
  KILN_ASSIGN_OR_RETURN(Value * one_minus_at, a.sub(one, alpha_t));
  KILN_ASSIGN_OR_RETURN(Value * root_bt, a.sqrt(one_minus_bt));
  KILN_ASSIGN_OR_RETURN(Value * r_root, a.mul(rt.rate, root_bt));
  KILN_ASSIGN_OR_RETURN(Value * corrected, a.div(r_root, one_minus_at));
  KILN_ASSIGN_OR_RETURN(Value * r, a.where(rt.started, corrected, rt.rate));
  const int n = static_cast<int>(groups[0].size());
  for (int k = 0; k < n; ++k) {
    Value *x = groups[0][k], *g = groups[1][k], *v = groups[2][k], *h = groups[3][k];
    KILN_ASSIGN_OR_RETURN(Value * gr, regularized(a, x, g, norm));
    KILN_ASSIGN_OR_RETURN(Value * vf, a.to_float(v));
    KILN_ASSIGN_OR_RETURN(Value * hf, a.to_float(h));
    KILN_ASSIGN_OR_RETURN(Value * av, a.mul(alpha, vf));
    KILN_ASSIGN_OR_RETURN(Value * ag, a.mul(alpha_c, gr));
    KILN_ASSIGN_OR_RETURN(Value * v_new, a.add(av, ag));
    KILN_ASSIGN_OR_RETURN(Value * g2, a.mul(gr, gr));
    KILN_ASSIGN_OR_RETURN(Value * bh, a.mul(beta, hf));
    KILN_ASSIGN_OR_RETURN(Value * bg2, a.mul(beta_c, g2));
    KILN_ASSIGN_OR_RETURN(Value * h_new, a.add(bh, bg2));
    KILN_ASSIGN_OR_RETURN(Value * root, a.sqrt(h_new));
    KILN_ASSIGN_OR_RETURN(Value * denom, a.add(root, eps));
    KILN_ASSIGN_OR_RETURN(Value * ratio, a.div(v_new, denom));
    KILN_ASSIGN_OR_RETURN(Value * step, a.mul(r, ratio));
    KILN_ASSIGN_OR_RETURN(Value * xf, a.to_float(x));
    KILN_ASSIGN_OR_RETURN(Value * moved, a.sub(xf, step));
    KILN_ASSIGN_OR_RETURN(Value * x_new, a.mul(post, moved));
    KILN_RETURN_IF_ERROR(bind_as(ctx, node, k, x_new, x));
    KILN_RETURN_IF_ERROR(bind_as(ctx, node, n + k, v_new, v));
    KILN_RETURN_IF_ERROR(bind_as(ctx, node, 2 * n + k, h_new, h));
  }
  return Status::ok();
}

constexpr const char* kTraining = "ai.onnx.preview.training";
KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{.op_type = "Adagrad", .domain = kTraining, .import = import_adagrad});
KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{.op_type = "Momentum", .domain = kTraining, .import = import_momentum});
KILN_REGISTER_ONNX_IMPORTER(OnnxImporter{.op_type = "Adam", .domain = kTraining, .import = import_adam});

}  // namespace
}  // namespace kiln::onnx_import
