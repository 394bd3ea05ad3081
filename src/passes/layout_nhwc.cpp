// layout-nhwc: 2-D convolutions and pooling run channels-last (NHWC) where the target backend has such a kernel
// (cuDNN's float16/bfloat16 tensor-core kernels want NHWC). An activation crosses to NHWC once (a transpose) and stays
// there between such layers; constant weights are permuted at build time; each converted layer's NCHW output is kept
// by a transpose back for readers that stay NCHW, and those nobody reads are removed at the end of the pass.
#include <cstdint>
#include <cstring>
#include <unordered_map>

#include "core/parallel.h"
#include "kiln/logger.h"
#include "ops/convolution/convolution.h"
#include "ops/pooling/pooling.h"
#include "ops/shuffle/shuffle.h"
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln {
namespace {

// dst[(b * s + i) * c + k] = src[(b * c + k) * s + i] for elements of type T (a plain copy loop: per-element memcpy
// took 315 ms of ResNet-50's build), output channels b in parallel: most of the time is the first touch of the new
// tensor's pages, and page faults on two threads took half the time of one on this project's VMs.
template <class T>
void permute_elements(const void* src, void* dst, int64_t n, int64_t c, int64_t s) {
  const T* from = static_cast<const T*>(src);
  T* to = static_cast<T*>(dst);
  parallel_for(n, grain_for(c * s), [&](int64_t b) {
    for (int64_t k = 0; k < c; ++k) {
      const T* row = from + (b * c + k) * s;
      T* col = to + b * s * c + k;
      for (int64_t i = 0; i < s; ++i) col[i * c] = row[i];
    }
  });
}

// [N, C, H, W] -> [N, H, W, C] of a rank-4 constant (weights [M, C/G, kH, kW] -> [M, kH, kW, C/G] alike).
Result<Tensor> permute_to_nhwc(const Tensor& t) {
  const Dims& d = t.dims();
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::empty(t.dtype(), Dims{d[0], d[2], d[3], d[1]}));
  const int64_t n = d[0], c = d[1], s = d[2] * d[3];
  switch (dtype_size(t.dtype())) {
    case 1: permute_elements<uint8_t>(t.raw(), out.raw(), n, c, s); break;
    case 2: permute_elements<uint16_t>(t.raw(), out.raw(), n, c, s); break;
    case 4: permute_elements<uint32_t>(t.raw(), out.raw(), n, c, s); break;
    case 8: permute_elements<uint64_t>(t.raw(), out.raw(), n, c, s); break;
    default: {
      const size_t e = dtype_size(t.dtype());
      const auto* src = static_cast<const unsigned char*>(t.raw());
      auto* dst = static_cast<unsigned char*>(out.raw());
      for (int64_t b = 0; b < n; ++b)
        for (int64_t k = 0; k < c; ++k)
          for (int64_t i = 0; i < s; ++i)
            std::memcpy(dst + static_cast<size_t>((b * s + i) * c + k) * e,
                        src + static_cast<size_t>((b * c + k) * s + i) * e, e);
    }
  }
  return out;
}

std::unique_ptr<ShuffleAttrs> transpose(std::vector<int64_t> perm) {
  auto a = std::make_unique<ShuffleAttrs>();
  a->first_transpose = std::move(perm);
  return a;
}

// The channels-last twin's attributes of a node the pass converts, or null when it does not take `n`.
std::unique_ptr<Attrs> channels_last_attrs(const Node& n) {
  if (n.schema->host || n.inputs.empty() || !n.inputs[0] || n.inputs[0]->kind != ValueKind::kTensor ||
      n.inputs[0]->dims.rank() != 4)
    return nullptr;
  if (const auto* c = attrs_if<ConvolutionAttrs>(&n, "Convolution")) {
    if (c->channels_last || n.inputs.size() < 2 || !n.inputs[1] || n.inputs[1]->dims.rank() != 4) return nullptr;
    auto a = std::make_unique<ConvolutionAttrs>(*c);
    a->channels_last = true;
    return a;
  }
  if (const auto* p = attrs_if<PoolingAttrs>(&n, "Pooling")) {
    if (p->channels_last || p->return_indices || n.outputs.size() != 1) return nullptr;
    auto a = std::make_unique<PoolingAttrs>(*p);
    a->channels_last = true;
    return a;
  }
  return nullptr;
}

// A convolution with fewer than 8 input channels per group, not depthwise (a stem): oneDNN runs those in NCHW.
bool few_input_channels(const Node& n) {
  const auto* c = attrs_if<ConvolutionAttrs>(&n, "Convolution");
  if (!c || n.inputs.size() < 2 || !n.inputs[1] || n.inputs[1]->dims.rank() != 4) return false;
  const int64_t per_group = n.inputs[1]->dims[1];
  return per_group < 8 && !(c->group > 1 && per_group == 1);
}

// Whether every reader of `y` goes channels-last too: a convolution with 8 or more input channels per group (or
// depthwise), or a pooling layer whose own readers are such convolutions (ResNet's stem: convolution, max pool,
// convolutions), so that a stem's NHWC output saves a transpose rather than adding two.
bool readers_run_channels_last(const Graph& g, const Value* y, bool through_pooling = true) {
  if (is_graph_output(g, y) || y->uses.empty()) return false;
  for (const Use& u : y->uses) {
    if (u.input != 0 || !channels_last_attrs(*u.node)) return false;
    if (u.node->op() == "Pooling") {
      if (!through_pooling || !readers_run_channels_last(g, u.node->outputs[0], false)) return false;
    } else if (u.node->op() != "Convolution" || few_input_channels(*u.node)) {
      return false;
    }
  }
  return true;
}

class Rewrite {
 public:
  explicit Rewrite(PassContext& ctx) : ctx_(ctx), g_(ctx.graph()) {}

  // Replaces `n` by its channels-last twin; on an error the graph is as it was (bar unused permuted weights, which
  // dead-code removal drops) and the status says why.
  Status convert(Node* n, std::unique_ptr<Attrs> attrs) {
    const bool conv = n->op() == "Convolution";
    if (conv && !n->inputs[1]->is_constant())
      return unsupported("its weights are not a constant (they would need a transpose on every run)");
    const size_t in_before = to_nhwc_.size();
    auto undo = [&] {
      while (to_nhwc_.size() > in_before) {
        Node* t = to_nhwc_.back();
        to_nhwc_.pop_back();
        nhwc_.erase(t->inputs[0]);
        (void)g_.remove_node(t);
      }
    };
    std::vector<Value*> inputs = n->inputs;
    // x, the weights and the residual (input 3) are NHWC in the twin; the bias [M] stays as it is.
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i] || (i == 2 && conv) || i > 3) continue;
      Result<Value*> v = nhwc_of(inputs[i]);
      if (!v) {
        undo();
        return v.status();
      }
      inputs[i] = *v;
    }
    const std::string name = n->name;
    Value* old = n->outputs[0];
    auto twin = g_.add_node(n->op(), name + "#nhwc", std::move(attrs), inputs);
    if (!twin) {
      undo();
      return twin.status();
    }
    Value* y = (*twin)->outputs[0];
    Status why = ctx_.backend_accepts(**twin);
    if (why.is_ok() && (y->dtype != old->dtype || y->dims != nchw_to_nhwc(old->dims)))
      why = internal_error("the channels-last output ", y->dims.to_string(), " is not the NHWC form of ",
                           old->dims.to_string());
    if (!why.is_ok()) {
      (void)g_.remove_node(*twin);
      undo();
      return why;
    }
    // The NCHW value keeps its name (readers and graph outputs know it) through the transpose back.
    auto back = g_.add_node("Shuffle", free_name(g_, name + "/to_nchw"), transpose({0, 3, 1, 2}), {y});
    if (!back) {
      (void)g_.remove_node(*twin);
      undo();
      return back.status();
    }
    Value* nchw = (*back)->outputs[0];
    g_.replace_all_uses(old, nchw);
    const std::string value_name = old->name;
    KILN_RETURN_IF_ERROR(g_.remove_node(n));
    KILN_RETURN_IF_ERROR(g_.rename_value(y, free_name(g_, value_name + "/nhwc")));
    KILN_RETURN_IF_ERROR(g_.rename_value(nchw, value_name));
    KILN_RETURN_IF_ERROR(g_.rename_node(*twin, name));
    nhwc_[nchw] = y;
    to_nchw_.push_back(*back);
    return Status::ok();
  }

  // True when `v` has an NHWC form already (a converted layer's output or a transpose made before).
  bool has_nhwc(const Value* v) const { return nhwc_.count(v) > 0; }

  // Drops the transposes back that nobody reads; the number of transposes left (in and back).
  Result<int> finish() {
    int left = static_cast<int>(to_nhwc_.size());
    for (Node* b : to_nchw_) {
      if (b->outputs[0]->uses.empty() && !is_graph_output(g_, b->outputs[0])) {
        KILN_RETURN_IF_ERROR(g_.remove_node(b));
        continue;
      }
      ++left;
    }
    return left;
  }

 private:
  // The NHWC form of `v`: one made before, a permuted constant, or a new transpose.
  Result<Value*> nhwc_of(Value* v) {
    if (auto it = nhwc_.find(v); it != nhwc_.end()) return it->second;
    if (v->dims.rank() != 4) return invalid_argument("'", v->name, "' of shape ", v->dims.to_string(), " is not 4-D");
    Value* out = nullptr;
    if (v->is_constant()) {
      KILN_ASSIGN_OR_RETURN(Tensor t, permute_to_nhwc(v->constant));
      KILN_ASSIGN_OR_RETURN(out, g_.add_constant(free_name(g_, v->name + "/nhwc"), std::move(t)));
    } else {
      const std::string name = free_name(g_, v->name + "/to_nhwc");
      KILN_ASSIGN_OR_RETURN(Node * t, g_.add_node("Shuffle", name, transpose({0, 2, 3, 1}), {v}, {name}));
      to_nhwc_.push_back(t);
      out = t->outputs[0];
    }
    nhwc_[v] = out;
    return out;
  }

  PassContext& ctx_;
  Graph& g_;
  std::unordered_map<const Value*, Value*> nhwc_;  // NCHW value -> its NHWC form
  std::vector<Node*> to_nhwc_, to_nchw_;           // the transposes made
};

Status layout_nhwc(PassContext& ctx) {
  if (!ctx.layout().channels_last) return Status::ok();
  Graph& g = ctx.graph();
  Rewrite rewrite(ctx);
  int layers = 0;
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, g.topological_order());
  for (Node* n : order) {
    std::unique_ptr<Attrs> attrs = channels_last_attrs(*n);
    if (!attrs) continue;
    const std::string name = n->name, op = n->op();
    const DataType dt = n->inputs[0]->dtype;
    if (ctx.layout().reduced_precision_only && dt != DataType::kFloat16 && dt != DataType::kBFloat16) {
      ctx.refused(str_cat("'", name, "' (", op, ") channels-last: it runs in ", dtype_name(dt),
                          "; only float16 and bfloat16 layers go NHWC here (tensor-core kernels)"));
      continue;
    }
    const int64_t batch = n->inputs[0]->dims.rank() > 0 ? n->inputs[0]->dims[0] : 1;
    if (batch >= 0 && batch < ctx.layout().min_batch) {
      ctx.refused(str_cat("'", name, "' (", op, ") channels-last: batch ", batch, " is below ", ctx.layout().min_batch,
                          ", where NCHW kernels are faster"));
      continue;
    }
    if (ctx.layout().pooling_joins_only && few_input_channels(*n) && !readers_run_channels_last(g, n->outputs[0])) {
      ctx.refused(
          str_cat("'", name, "' (", op, ") channels-last: ", n->inputs[1]->dims[1], " input channels per ",
                  "group, and not every reader of its output is a convolution (or a pooling before convolutions) that ",
                  "runs channels-last (the ", "transposes in and out would cost more than the layer gains)"));
      continue;
    }
    if (op == "Pooling" && ctx.layout().pooling_joins_only && !rewrite.has_nhwc(n->inputs[0])) {
      ctx.refused(str_cat("'", name, "' (", op, ") channels-last: its input is NCHW, and a pooling layer does not ",
                          "start a channels-last region here (the transposes would cost more than they save)"));
      continue;
    }
    if (Status st = rewrite.convert(n, std::move(attrs)); !st.is_ok()) {
      ctx.refused(str_cat("'", name, "' (", op, ") channels-last: ", st.message()));
      continue;
    }
    ++layers;
    ctx.applied(str_cat("'", name, "' (", op, ") runs channels-last"));
  }
  KILN_ASSIGN_OR_RETURN(int transposes, rewrite.finish());
  if (layers > 0)
    log_info("optimizer: layout-nhwc: NHWC (", layers, " layers channels-last, ", transposes, " transposes)");
  return Status::ok();
}

}  // namespace

Pass layout_nhwc_pass() {
  return {"layout-nhwc",
          "runs 2-D convolutions and pooling channels-last (NHWC) where the backend has such kernels (CUDA builds): "
          "transposes only where the layout changes, weights permuted at build time",
          layout_nhwc};
}

}  // namespace kiln
