// The host ops: control flow (If, Loop, Scan, SequenceMap) runs subgraphs as sub-plans with their own
// scope; the sequence and optional ops move tensors between values; the string ops look inside strings. On a GPU engine
// they run on the host between device steps.
#include <algorithm>
#include <cstring>

#include "ops/control_flow/control_flow.h"
#include "runtime/engine.h"
#include "runtime/string_ops.h"

namespace kiln {
namespace {

Result<Tensor> scalar_tensor(DataType dtype, int64_t v) {
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(dtype, Dims{}));
  t.set(0, static_cast<double>(v));
  if (dtype == DataType::kInt64) t.data<int64_t>()[0] = v;
  return t;
}

// Elements [start, start + len) of axis `axis`.
Result<Tensor> slice_axis(const Tensor& src, int axis, int64_t start, int64_t len, bool keep_axis = true) {
  KILN_ASSIGN_OR_RETURN(Tensor t, src.contiguous());
  Dims dims = t.dims();
  const int64_t d = dims[axis];
  int64_t outer = 1, inner = static_cast<int64_t>(dtype_size(t.dtype()));
  for (int i = 0; i < axis; ++i) outer *= dims[i];
  for (int i = axis + 1; i < dims.rank(); ++i) inner *= dims[i];
  Dims out_dims;
  for (int i = 0; i < dims.rank(); ++i)
    if (i != axis || keep_axis) out_dims.push_back(i == axis ? len : dims[i]);
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::empty(t.dtype(), out_dims));
  const char* s = static_cast<const char*>(t.raw());
  char* o = static_cast<char*>(out.raw());
  for (int64_t k = 0; k < outer; ++k)
    std::memcpy(o + k * len * inner, s + (k * d + start) * inner, static_cast<size_t>(len * inner));
  return out;
}

// Concatenates along `axis`; with `new_axis` the pieces are stacked along a new axis there.
Result<Tensor> concat_axis(const std::vector<Tensor>& pieces, int64_t axis, bool new_axis, const char* op) {
  if (pieces.empty()) return invalid_argument(op, " has no tensors to concatenate");
  std::vector<Tensor> parts;
  const Dims& first = pieces[0].dims();
  const int rank = first.rank() + (new_axis ? 1 : 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return invalid_argument(op, " axis is out of range for elements ", first.to_string());
  for (const Tensor& p : pieces) {
    KILN_ASSIGN_OR_RETURN(Tensor c, p.contiguous());
    if (c.dtype() != pieces[0].dtype() || c.rank() != first.rank())
      return invalid_argument(op, ": elements ", first.to_string(), " and ", c.dims().to_string(), " differ");
    if (new_axis) {
      Dims d;
      for (int i = 0; i < c.rank(); ++i) {
        if (i == axis) d.push_back(1);
        d.push_back(c.dims()[i]);
      }
      if (axis == c.rank()) d.push_back(1);
      KILN_ASSIGN_OR_RETURN(c, c.reshape(d));
    }
    for (int i = 0; !parts.empty() && i < rank; ++i)
      if (i != axis && c.dims()[i] != parts[0].dims()[i])
        return invalid_argument(op, ": elements ", first.to_string(), " and ", p.dims().to_string(),
                                " differ outside the axis");
    parts.push_back(std::move(c));
  }
  Dims out_dims = parts[0].dims();
  int64_t total = 0;
  for (const Tensor& p : parts) total += p.dims()[static_cast<int>(axis)];
  out_dims[static_cast<int>(axis)] = total;
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::empty(parts[0].dtype(), out_dims));
  int64_t outer = 1, inner = static_cast<int64_t>(dtype_size(out.dtype()));
  for (int i = 0; i < axis; ++i) outer *= out_dims[i];
  for (int i = static_cast<int>(axis) + 1; i < out_dims.rank(); ++i) inner *= out_dims[i];
  char* o = static_cast<char*>(out.raw());
  for (int64_t k = 0; k < outer; ++k)
    for (const Tensor& p : parts) {
      const int64_t bytes = p.dims()[static_cast<int>(axis)] * inner;
      std::memcpy(o, static_cast<const char*>(p.raw()) + k * bytes, static_cast<size_t>(bytes));
      o += bytes;
    }
  return out;
}

// Scan/loop outputs stacked along `axis` (an empty list gives a 0-length axis of `elem` dims).
Result<Tensor> stack(const std::vector<Tensor>& items, int64_t axis, DataType dtype, const Dims& elem, const char* op) {
  if (!items.empty()) return concat_axis(items, axis, true, op);
  Dims d;
  for (int i = 0; i <= elem.rank(); ++i) {
    if (i == axis) d.push_back(0);
    if (i < elem.rank()) d.push_back(elem[i] < 0 ? 0 : elem[i]);
  }
  return Tensor::empty(dtype, d);
}

class HostRun {
 public:
  HostRun(ContextImpl& ctx, const PlanStep& step, Scope& scope, Stream& stream, int depth)
      : ctx_(ctx), step_(step), node_(*step.node), scope_(scope), stream_(stream), depth_(depth) {}

  Status run() {
    Status s = dispatch();
    if (!s.is_ok()) return std::move(s).with_node(node_.context());
    return Status::ok();
  }

 private:
  template <class... Args>
  Status error(Args&&... args) {
    return invalid_argument(node_.op(), ": ", std::forward<Args>(args)...);
  }
  bool has(size_t i) const { return i < node_.inputs.size() && node_.inputs[i]; }
  Result<const RuntimeValue*> in(size_t i) {
    if (!has(i)) return error("input ", i, " is missing");
    const RuntimeValue* v = scope_.get(node_.inputs[i]);
    if (!v) return internal_error("input '", node_.inputs[i]->name, "' has no value");
    return v;
  }
  Result<Tensor> tensor_in(size_t i) {
    KILN_ASSIGN_OR_RETURN(const RuntimeValue* v, in(i));
    if (v->kind != ValueKind::kTensor) return error("input ", i, " is a ", value_kind_name(v->kind), ", not a tensor");
    return v->tensor;
  }
  Result<const std::vector<Tensor>*> seq_in(size_t i) {
    KILN_ASSIGN_OR_RETURN(const RuntimeValue* v, in(i));
    if (v->kind != ValueKind::kSequence)
      return error("input ", i, " is a ", value_kind_name(v->kind), ", not a sequence");
    return &v->items;
  }
  Result<int64_t> int_in(size_t i) {
    KILN_ASSIGN_OR_RETURN(Tensor t, tensor_in(i));
    if (t.numel() != 1) return error("input ", i, " must hold one value, got shape ", t.dims().to_string());
    return tensor_to_int64s(t)[0];
  }
  Result<bool> bool_in(size_t i) {
    KILN_ASSIGN_OR_RETURN(Tensor t, tensor_in(i));
    if (t.numel() != 1) return error("input ", i, " must hold one value, got shape ", t.dims().to_string());
    return t.at(0) != 0;
  }
  void set(size_t i, RuntimeValue v) {
    if (i < node_.outputs.size()) scope_.put(node_.outputs[i], std::move(v));
  }
  // A position in [-n, n - 1] (or [-n, n] when `end_ok`), made non-negative.
  Result<int64_t> position(int64_t pos, int64_t n, bool end_ok) {
    const int64_t hi = end_ok ? n : n - 1;
    if (pos < -n || pos > hi) return error("position ", pos, " is out of range for a sequence of ", n);
    return pos < 0 ? pos + n : pos;
  }
  Result<std::vector<RuntimeValue>> call(size_t sub, std::vector<RuntimeValue> args) {
    return ctx_.call_subgraph(step_, sub, scope_, std::move(args), stream_, depth_);
  }

  Status dispatch() {
    const std::string& op = node_.op();
    if (op == "If") return run_if();
    if (op == "Loop") return run_loop();
    if (op == "Scan") return run_scan();
    if (op == "SequenceMap") return run_sequence_map();
    if (op == "Identity") {
      KILN_ASSIGN_OR_RETURN(const RuntimeValue* v, in(0));
      set(0, *v);
      return Status::ok();
    }
    if (op == "StringNormalizer" || op == "StringCast") {
      KILN_ASSIGN_OR_RETURN(Tensor x, tensor_in(0));
      Result<Tensor> y = op == "StringCast"
                             ? cast_strings(x, static_cast<const StringCastAttrs&>(*node_.attrs).to)
                             : normalize_strings(x, static_cast<const StringNormalizerAttrs&>(*node_.attrs));
      if (!y) return y.take_status();
      set(0, RuntimeValue::of(*y));
      return Status::ok();
    }
    if (op == "SequenceEmpty") {
      set(0, RuntimeValue::sequence({}));
      return Status::ok();
    }
    if (op == "SequenceConstruct") {
      std::vector<Tensor> items;
      for (size_t i = 0; i < node_.inputs.size(); ++i) {
        KILN_ASSIGN_OR_RETURN(Tensor t, tensor_in(i));
        items.push_back(t);
      }
      set(0, RuntimeValue::sequence(std::move(items)));
      return Status::ok();
    }
    if (op == "SequenceInsert") {
      KILN_ASSIGN_OR_RETURN(const std::vector<Tensor>* s, seq_in(0));
      KILN_ASSIGN_OR_RETURN(Tensor t, tensor_in(1));
      std::vector<Tensor> items = *s;
      int64_t pos = static_cast<int64_t>(items.size());
      if (has(2)) {
        KILN_ASSIGN_OR_RETURN(int64_t p, int_in(2));
        KILN_ASSIGN_OR_RETURN(pos, position(p, static_cast<int64_t>(items.size()), true));
      }
      items.insert(items.begin() + pos, t);
      set(0, RuntimeValue::sequence(std::move(items)));
      return Status::ok();
    }
    if (op == "SequenceAt") {
      KILN_ASSIGN_OR_RETURN(const std::vector<Tensor>* s, seq_in(0));
      KILN_ASSIGN_OR_RETURN(int64_t p, int_in(1));
      KILN_ASSIGN_OR_RETURN(int64_t pos, position(p, static_cast<int64_t>(s->size()), false));
      set(0, RuntimeValue::of((*s)[pos]));
      return Status::ok();
    }
    if (op == "SequenceErase") {
      KILN_ASSIGN_OR_RETURN(const std::vector<Tensor>* s, seq_in(0));
      std::vector<Tensor> items = *s;
      int64_t p = -1;
      if (has(1)) {
        KILN_ASSIGN_OR_RETURN(p, int_in(1));
      }
      KILN_ASSIGN_OR_RETURN(int64_t pos, position(p, static_cast<int64_t>(items.size()), false));
      items.erase(items.begin() + pos);
      set(0, RuntimeValue::sequence(std::move(items)));
      return Status::ok();
    }
    if (op == "SequenceLength") {
      KILN_ASSIGN_OR_RETURN(const std::vector<Tensor>* s, seq_in(0));
      KILN_ASSIGN_OR_RETURN(Tensor t, scalar_tensor(DataType::kInt64, static_cast<int64_t>(s->size())));
      set(0, RuntimeValue::of(t));
      return Status::ok();
    }
    if (op == "SplitToSequence") return run_split_to_sequence();
    if (op == "ConcatFromSequence") {
      const auto& a = static_cast<const ConcatFromSequenceAttrs&>(*node_.attrs);
      KILN_ASSIGN_OR_RETURN(const std::vector<Tensor>* s, seq_in(0));
      KILN_ASSIGN_OR_RETURN(Tensor t, concat_axis(*s, a.axis, a.new_axis, "ConcatFromSequence"));
      set(0, RuntimeValue::of(t));
      return Status::ok();
    }
    if (op == "Optional") {
      const auto& a = static_cast<const OptionalAttrs&>(*node_.attrs);
      if (!has(0)) {
        set(0, {a.sequence ? ValueKind::kOptionalSequence : ValueKind::kOptionalTensor, false, {}, {}});
        return Status::ok();
      }
      KILN_ASSIGN_OR_RETURN(const RuntimeValue* v, in(0));
      RuntimeValue o = *v;
      o.kind = v->kind == ValueKind::kSequence ? ValueKind::kOptionalSequence : ValueKind::kOptionalTensor;
      set(0, o);
      return Status::ok();
    }
    if (op == "OptionalHasElement") {
      bool present = false;
      if (has(0)) {
        KILN_ASSIGN_OR_RETURN(const RuntimeValue* v, in(0));
        present = v->present;
      }
      KILN_ASSIGN_OR_RETURN(Tensor t, scalar_tensor(DataType::kBool, present ? 1 : 0));
      set(0, RuntimeValue::of(t));
      return Status::ok();
    }
    if (op == "OptionalGetElement") {
      KILN_ASSIGN_OR_RETURN(const RuntimeValue* v, in(0));
      if (!v->present) return error("the optional is empty; check it with OptionalHasElement first");
      RuntimeValue o = *v;
      if (v->kind == ValueKind::kOptionalSequence) o.kind = ValueKind::kSequence;
      if (v->kind == ValueKind::kOptionalTensor) o.kind = ValueKind::kTensor;
      set(0, o);
      return Status::ok();
    }
    return unsupported("the runtime has no host implementation of ", op);
  }

  Status run_if() {
    KILN_ASSIGN_OR_RETURN(bool cond, bool_in(0));
    KILN_ASSIGN_OR_RETURN(std::vector<RuntimeValue> outs, call(cond ? 0 : 1, {}));
    for (size_t i = 0; i < outs.size(); ++i) set(i, std::move(outs[i]));
    return Status::ok();
  }

  Status run_loop() {
    const Graph& body = *node_.subgraphs.at(0).graph;
    const size_t n = body.inputs().size() - 2, k = body.outputs().size() - 1 - n;
    int64_t trips = INT64_MAX;
    if (has(0)) {
      KILN_ASSIGN_OR_RETURN(trips, int_in(0));
    }
    bool cond = true;
    if (has(1)) {
      KILN_ASSIGN_OR_RETURN(cond, bool_in(1));
    }
    std::vector<RuntimeValue> carried;
    for (size_t i = 0; i < n; ++i) {
      if (!has(2 + i)) return error("carried value ", i, " has no initial value");
      KILN_ASSIGN_OR_RETURN(const RuntimeValue* v, in(2 + i));
      carried.push_back(*v);
    }
    std::vector<std::vector<Tensor>> scans(k);
    for (int64_t it = 0; it < trips && cond; ++it) {
      if (it >= kMaxLoopIterations)
        return error("the loop ran ", kMaxLoopIterations, " iterations without its condition or trip count ending it");
      std::vector<RuntimeValue> args;
      KILN_ASSIGN_OR_RETURN(Tensor iter, scalar_tensor(DataType::kInt64, it));
      KILN_ASSIGN_OR_RETURN(Tensor c, scalar_tensor(DataType::kBool, 1));
      args.push_back(RuntimeValue::of(iter));
      args.push_back(RuntimeValue::of(c));
      for (auto& v : carried) args.push_back(std::move(v));
      KILN_ASSIGN_OR_RETURN(std::vector<RuntimeValue> outs, call(0, std::move(args)));
      if (outs[0].kind != ValueKind::kTensor || outs[0].tensor.numel() != 1)
        return error("the body's condition output must hold one value");
      cond = outs[0].tensor.at(0) != 0;
      carried.assign(outs.begin() + 1, outs.begin() + 1 + static_cast<std::ptrdiff_t>(n));
      for (size_t j = 0; j < k; ++j) scans[j].push_back(outs[1 + n + j].tensor);
    }
    for (size_t i = 0; i < n; ++i) set(i, std::move(carried[i]));
    for (size_t j = 0; j < k; ++j) {
      const Value* e = body.outputs()[1 + n + j];
      KILN_ASSIGN_OR_RETURN(Tensor t, stack(scans[j], 0, e->dtype, e->dims, "Loop"));
      set(n + j, RuntimeValue::of(t));
    }
    return Status::ok();
  }

  // One Scan over unbatched inputs: `states` in, scan inputs sliced per iteration; fills states and scan outputs.
  Status scan_once(std::vector<RuntimeValue>& states, const std::vector<Tensor>& scan_in,
                   std::vector<Tensor>& scan_out) {
    const auto& a = static_cast<const ScanAttrs&>(*node_.attrs);
    const Graph& body = *node_.subgraphs.at(0).graph;
    const size_t n = states.size(), m = scan_in.size(), k = body.outputs().size() - n;
    int64_t len = -1;
    std::vector<int> axes;
    for (size_t j = 0; j < m; ++j) {
      const int64_t ax = scan_axis(a.scan_input_axes, j, scan_in[j].rank());
      if (ax < 0 || ax >= scan_in[j].rank()) return error("scan input ", j, " has no axis ", ax);
      axes.push_back(static_cast<int>(ax));
      const int64_t l = scan_in[j].dims()[static_cast<int>(ax)];
      if (len >= 0 && l != len) return error("scan inputs have lengths ", len, " and ", l, "; they must agree");
      len = l;
    }
    if (len > kMaxLoopIterations) return error("the scan length ", len, " is over the limit ", kMaxLoopIterations);
    std::vector<std::vector<Tensor>> outs_k(k);
    for (int64_t t = 0; t < len; ++t) {
      std::vector<RuntimeValue> args = states;
      for (size_t j = 0; j < m; ++j) {
        const bool rev = j < a.scan_input_directions.size() && a.scan_input_directions[j] == 1;
        KILN_ASSIGN_OR_RETURN(Tensor s, slice_axis(scan_in[j], axes[j], rev ? len - 1 - t : t, 1, false));
        args.push_back(RuntimeValue::of(s));
      }
      KILN_ASSIGN_OR_RETURN(std::vector<RuntimeValue> outs, call(0, std::move(args)));
      for (size_t i = 0; i < n; ++i) states[i] = outs[i];
      for (size_t j = 0; j < k; ++j) outs_k[j].push_back(outs[n + j].tensor);
    }
    for (size_t j = 0; j < k; ++j) {
      if (j < a.scan_output_directions.size() && a.scan_output_directions[j] == 1)
        std::reverse(outs_k[j].begin(), outs_k[j].end());
      const Value* e = body.outputs()[n + j];
      const int64_t ax = scan_axis(a.scan_output_axes, j, e->dims.rank() + 1);
      KILN_ASSIGN_OR_RETURN(Tensor st, stack(outs_k[j], ax, e->dtype, e->dims, "Scan"));
      scan_out.push_back(st);
    }
    return Status::ok();
  }

  Status run_scan() {
    const auto& a = static_cast<const ScanAttrs&>(*node_.attrs);
    const Graph& body = *node_.subgraphs.at(0).graph;
    const size_t m = static_cast<size_t>(a.num_scan_inputs), n = body.inputs().size() - m;
    const size_t first = a.batched ? 1 : 0;
    std::vector<RuntimeValue> states;
    std::vector<Tensor> scan_in;
    for (size_t i = 0; i < n + m; ++i) {
      KILN_ASSIGN_OR_RETURN(Tensor t, tensor_in(first + i));
      if (i < n)
        states.push_back(RuntimeValue::of(t));
      else
        scan_in.push_back(t);
    }
    if (!a.batched) {
      std::vector<Tensor> scan_out;
      KILN_RETURN_IF_ERROR(scan_once(states, scan_in, scan_out));
      for (size_t i = 0; i < n; ++i) set(i, states[i]);
      for (size_t j = 0; j < scan_out.size(); ++j) set(n + j, RuntimeValue::of(scan_out[j]));
      return Status::ok();
    }
    // Opset 8: every input has a batch dim 0; the body runs per batch entry.
    if (has(0)) return unsupported("Scan (opset 8) with sequence_lens is not supported; re-export at opset 9 or later");
    const int64_t batch = scan_in.empty() || scan_in[0].rank() == 0 ? 0 : scan_in[0].dims()[0];
    std::vector<std::vector<Tensor>> state_b(n), out_b;
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<RuntimeValue> st;
      std::vector<Tensor> sc, out;
      for (size_t i = 0; i < n; ++i) {
        KILN_ASSIGN_OR_RETURN(Tensor s, slice_axis(states[i].tensor, 0, b, 1, false));
        st.push_back(RuntimeValue::of(s));
      }
      for (const Tensor& t : scan_in) {
        KILN_ASSIGN_OR_RETURN(Tensor s, slice_axis(t, 0, b, 1, false));
        sc.push_back(s);
      }
      KILN_RETURN_IF_ERROR(scan_once(st, sc, out));
      for (size_t i = 0; i < n; ++i) state_b[i].push_back(st[i].tensor);
      out_b.resize(out.size());
      for (size_t j = 0; j < out.size(); ++j) out_b[j].push_back(out[j]);
    }
    for (size_t i = 0; i < n; ++i) {
      KILN_ASSIGN_OR_RETURN(Tensor t, concat_axis(state_b[i], 0, true, "Scan"));
      set(i, RuntimeValue::of(t));
    }
    for (size_t j = 0; j < out_b.size(); ++j) {
      KILN_ASSIGN_OR_RETURN(Tensor t, concat_axis(out_b[j], 0, true, "Scan"));
      set(n + j, RuntimeValue::of(t));
    }
    return Status::ok();
  }

  Status run_sequence_map() {
    KILN_ASSIGN_OR_RETURN(const std::vector<Tensor>* s0, seq_in(0));
    const size_t len = s0->size();
    std::vector<const RuntimeValue*> ins;
    for (size_t i = 0; i < node_.inputs.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(const RuntimeValue* v, in(i));
      if (v->kind == ValueKind::kSequence && v->items.size() != len)
        return error("input sequences have lengths ", len, " and ", v->items.size(), "; they must agree");
      ins.push_back(v);
    }
    const size_t formal = node_.subgraphs.at(0).graph->inputs().size();
    std::vector<std::vector<Tensor>> outs(node_.outputs.size());
    for (size_t e = 0; e < len; ++e) {
      std::vector<RuntimeValue> args;
      for (size_t i = 0; i < formal && i < ins.size(); ++i)
        args.push_back(ins[i]->kind == ValueKind::kSequence ? RuntimeValue::of(ins[i]->items[e]) : *ins[i]);
      KILN_ASSIGN_OR_RETURN(std::vector<RuntimeValue> r, call(0, std::move(args)));
      for (size_t j = 0; j < r.size() && j < outs.size(); ++j) outs[j].push_back(r[j].tensor);
    }
    for (size_t j = 0; j < outs.size(); ++j) set(j, RuntimeValue::sequence(std::move(outs[j])));
    return Status::ok();
  }

  Status run_split_to_sequence() {
    const auto& a = static_cast<const SplitToSequenceAttrs&>(*node_.attrs);
    KILN_ASSIGN_OR_RETURN(Tensor x, tensor_in(0));
    const int64_t axis = a.axis < 0 ? a.axis + x.rank() : a.axis;
    if (axis < 0 || axis >= x.rank()) return error("axis ", a.axis, " is out of range for ", x.dims().to_string());
    const int ax = static_cast<int>(axis);
    const int64_t d = x.dims()[ax];
    std::vector<int64_t> sizes;
    bool keep = true;
    if (!has(1)) {
      sizes.assign(static_cast<size_t>(d), 1);
      keep = a.keepdims;
    } else {
      KILN_ASSIGN_OR_RETURN(Tensor s, tensor_in(1));
      std::vector<int64_t> v = tensor_to_int64s(s);
      if (s.rank() == 0) {
        if (v[0] <= 0) return error("split ", v[0], " must be positive");
        for (int64_t at = 0; at < d; at += v[0]) sizes.push_back(std::min(v[0], d - at));
      } else {
        int64_t total = 0;
        for (int64_t part : v) {
          if (part < 0) return error("split sizes must not be negative");
          total += part;
        }
        if (total != d) return error("split sizes add up to ", total, " but the axis has ", d);
        sizes = v;
      }
    }
    std::vector<Tensor> items;
    int64_t at = 0;
    for (int64_t len : sizes) {
      KILN_ASSIGN_OR_RETURN(Tensor t, slice_axis(x, ax, at, len, keep));
      items.push_back(t);
      at += len;
    }
    set(0, RuntimeValue::sequence(std::move(items)));
    return Status::ok();
  }

  ContextImpl& ctx_;
  const PlanStep& step_;
  const Node& node_;
  Scope& scope_;
  Stream& stream_;
  int depth_;
};

}  // namespace

Status run_host_op(ContextImpl& ctx, const PlanStep& step, Scope& scope, Stream& stream, int depth) {
  return HostRun(ctx, step, scope, stream, depth).run();
}

}  // namespace kiln
