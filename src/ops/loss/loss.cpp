#include "ops/loss/loss.h"

#include <string>

#include "ops/registry.h"

namespace kiln {

const char* enum_name(LossReduction r) {
  switch (r) {
    case LossReduction::kNone: return "none";
    case LossReduction::kMean: return "mean";
    case LossReduction::kSum: return "sum";
  }
  return "?";
}

const char* enum_name(ClassLossWrt w) {
  switch (w) {
    case ClassLossWrt::kInput: return "input";
    case ClassLossWrt::kTarget: return "target";
    case ClassLossWrt::kWeight: return "weight";
  }
  return "?";
}

const char* enum_name(BceWrt w) {
  switch (w) {
    case BceWrt::kInput: return "input";
    case BceWrt::kTarget: return "target";
    case BceWrt::kWeight: return "weight";
    case BceWrt::kPosWeight: return "pos_weight";
  }
  return "?";
}

namespace {

bool is_index_dtype(DataType t) { return t == DataType::kInt32 || t == DataType::kInt64; }

Status check_reduction(const std::string& op, LossReduction r) {
  if (r != LossReduction::kNone && r != LossReduction::kMean && r != LossReduction::kSum)
    return invalid_argument(op, " reduction ", static_cast<int>(r), " is not none, mean or sum");
  return Status::ok();
}

/// The loss output: `per_item` dims for reduction none, a scalar otherwise.
std::vector<TensorDesc> loss_output(DataType dtype, LossReduction r, const Dims& per_item) {
  return one_output(dtype, r == LossReduction::kNone ? per_item : Dims{});
}

/// dy of a backward op: the forward loss's shape (`per_item` for none, a scalar otherwise).
Status check_dy(const std::string& op, const InferContext& ctx, LossReduction r, const Dims& per_item) {
  const TensorDesc& dy = ctx.input(0);
  if (dy.dtype != ctx.input(1).dtype)
    return invalid_argument(op, " input 'dy' is ", dtype_name(dy.dtype), " but the loss input is ",
                            dtype_name(ctx.input(1).dtype), ": give the gradient the loss's dtype");
  const Dims want = r == LossReduction::kNone ? per_item : Dims{};
  if (!dims_compatible(dy.dims, want))
    return invalid_argument(op, " input 'dy' has shape ", dy.dims.to_string(), " but the loss (reduction ",
                            enum_name(r), ") has shape ", want.to_string());
  return Status::ok();
}

/// x and target of the elementwise losses: floating, one dtype, one shape.
Status check_pair(const std::string& op, const InferContext& ctx, int x, int t) {
  const TensorDesc& xd = ctx.input(x);
  const TensorDesc& td = ctx.input(t);
  if (!is_floating(xd.dtype)) return invalid_argument(op, " needs a floating-point input, got ", dtype_name(xd.dtype));
  if (td.dtype != xd.dtype)
    return invalid_argument(op, " target is ", dtype_name(td.dtype), " but the input is ", dtype_name(xd.dtype),
                            ": cast the target to the input's dtype");
  if (!dims_compatible(xd.dims, td.dims))
    return invalid_argument(op, " target has shape ", td.dims.to_string(), " but the input has shape ",
                            xd.dims.to_string(), ": they must match");
  return Status::ok();
}

/// An optional per-element factor that broadcasts to x (right-aligned, each dim equal or 1).
Status check_broadcast_factor(const std::string& op, const InferContext& ctx, int i, const char* name, int x) {
  if (!ctx.has_input(i)) return Status::ok();
  const TensorDesc& f = ctx.input(i);
  const TensorDesc& xd = ctx.input(x);
  if (f.dtype != xd.dtype)
    return invalid_argument(op, " input '", name, "' is ", dtype_name(f.dtype), " but the input is ",
                            dtype_name(xd.dtype), ": give it the input's dtype");
  const int lead = xd.dims.rank() - f.dims.rank();
  bool ok = lead >= 0;
  for (int a = 0; ok && a < f.dims.rank(); ++a) {
    const int64_t fd = f.dims[a], xdim = xd.dims[a + lead];
    ok = fd == 1 || fd == xdim || fd == kDynamicDim || xdim == kDynamicDim;
  }
  if (!ok)
    return invalid_argument(op, " input '", name, "' of shape ", f.dims.to_string(),
                            " does not broadcast to the input's shape ", xd.dims.to_string());
  return Status::ok();
}

OpSchema pointwise_loss_schema(const char* name, const char* summary, bool smooth) {
  OpSchema s =
      smooth ? make_schema<SmoothL1LossAttrs>(name, "loss", summary) : make_schema<LossAttrs>(name, "loss", summary);
  s.input_names = {"x", "target"};
  s.min_inputs = s.max_inputs = 2;
  s.infer = [op = std::string(name), smooth](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    LossReduction r;
    if (smooth) {
      const auto& a = ctx.attrs_as<SmoothL1LossAttrs>();
      if (!(a.beta >= 0)) return invalid_argument(op, " beta ", a.beta, " must be >= 0");
      r = a.reduction;
    } else {
      r = ctx.attrs_as<LossAttrs>().reduction;
    }
    KILN_RETURN_IF_ERROR(check_reduction(op, r));
    KILN_RETURN_IF_ERROR(check_pair(op, ctx, 0, 1));
    return loss_output(ctx.input(0).dtype, r, ctx.input(0).dims);
  };
  return s;
}

OpSchema pointwise_loss_backward_schema(const char* name, const char* summary, bool smooth) {
  OpSchema s =
      smooth ? make_schema<SmoothL1LossAttrs>(name, "loss", summary) : make_schema<LossAttrs>(name, "loss", summary);
  s.input_names = {"dy", "x", "target"};
  s.min_inputs = s.max_inputs = 3;
  s.infer = [op = std::string(name), smooth](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const LossReduction r = smooth ? ctx.attrs_as<SmoothL1LossAttrs>().reduction : ctx.attrs_as<LossAttrs>().reduction;
    KILN_RETURN_IF_ERROR(check_reduction(op, r));
    KILN_RETURN_IF_ERROR(check_pair(op, ctx, 1, 2));
    KILN_RETURN_IF_ERROR(check_dy(op, ctx, r, ctx.input(1).dims));
    return one_output(ctx.input(1).dtype, ctx.input(1).dims);
  };
  return s;
}

KILN_REGISTER_OP(pointwise_loss_schema("MSELoss", "mean/sum/none of (x - target)^2 (torch.nn.MSELoss)", false));
KILN_REGISTER_OP(pointwise_loss_schema("L1Loss", "mean/sum/none of abs(x - target) (torch.nn.L1Loss)", false));
KILN_REGISTER_OP(pointwise_loss_schema("SmoothL1Loss", "Huber-like loss with threshold beta (torch.nn.SmoothL1Loss)",
                                       true));
KILN_REGISTER_OP(pointwise_loss_backward_schema("MSELossBackward", "dLoss/dx of MSELoss", false));
KILN_REGISTER_OP(pointwise_loss_backward_schema("L1LossBackward", "dLoss/dx of L1Loss (sign(x - target))", false));
KILN_REGISTER_OP(pointwise_loss_backward_schema("SmoothL1LossBackward", "dLoss/dx of SmoothL1Loss", true));

Status check_bce(const std::string& op, const InferContext& ctx, int off, LossReduction r) {
  KILN_RETURN_IF_ERROR(check_reduction(op, r));
  KILN_RETURN_IF_ERROR(check_pair(op, ctx, off, off + 1));
  KILN_RETURN_IF_ERROR(check_broadcast_factor(op, ctx, off + 2, "weight", off));
  return check_broadcast_factor(op, ctx, off + 3, "pos_weight", off);
}

KILN_REGISTER_OP([] {
  OpSchema s = make_schema<LossAttrs>(
      "BCEWithLogitsLoss", "loss",
      "binary cross-entropy of sigmoid(x), with optional weight and pos_weight (torch.nn.BCEWithLogitsLoss)");
  s.input_names = {"x", "target", "weight", "pos_weight"};
  s.min_inputs = 2;
  s.max_inputs = 4;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const LossReduction r = ctx.attrs_as<LossAttrs>().reduction;
    KILN_RETURN_IF_ERROR(check_bce("BCEWithLogitsLoss", ctx, 0, r));
    return loss_output(ctx.input(0).dtype, r, ctx.input(0).dims);
  };
  return s;
}());

KILN_REGISTER_OP([] {
  OpSchema s = make_schema<BCEWithLogitsLossBackwardAttrs>(
      "BCEWithLogitsLossBackward", "loss", "dLoss/d(input wrt) of BCEWithLogitsLoss, one value per element of x");
  s.input_names = {"dy", "x", "target", "weight", "pos_weight"};
  s.min_inputs = 3;
  s.max_inputs = 5;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const std::string op = "BCEWithLogitsLossBackward";
    const auto& a = ctx.attrs_as<BCEWithLogitsLossBackwardAttrs>();
    KILN_RETURN_IF_ERROR(check_bce(op, ctx, 1, a.reduction));
    KILN_RETURN_IF_ERROR(check_dy(op, ctx, a.reduction, ctx.input(1).dims));
    if ((a.wrt == BceWrt::kWeight && !ctx.has_input(3)) || (a.wrt == BceWrt::kPosWeight && !ctx.has_input(4)))
      return invalid_argument(op, " differentiates with respect to '", enum_name(a.wrt), "', which is absent");
    if (a.wrt != BceWrt::kInput && a.wrt != BceWrt::kTarget && a.wrt != BceWrt::kWeight && a.wrt != BceWrt::kPosWeight)
      return invalid_argument(op, " wrt ", static_cast<int>(a.wrt), " is not input, target, weight or pos_weight");
    return one_output(ctx.input(1).dtype, ctx.input(1).dims);
  };
  return s;
}());

/// NLLLoss and CrossEntropyLoss inputs starting at `off` (x, target, weight?): the per-sample loss shape.
Result<Dims> check_class_loss(const std::string& op, const InferContext& ctx, int off, bool allow_probs) {
  const TensorDesc& x = ctx.input(off);
  const TensorDesc& t = ctx.input(off + 1);
  if (!is_floating(x.dtype)) return invalid_argument(op, " needs a floating-point input, got ", dtype_name(x.dtype));
  const int r = x.dims.rank();
  if (r == 0) return invalid_argument(op, " needs an input of shape [N, C, ...] or [C], got a scalar");
  Dims per_item;
  for (int a = 0; a < r; ++a)
    if (a != (r == 1 ? 0 : 1)) per_item.push_back(x.dims[a]);
  const int64_t classes = x.dims[r == 1 ? 0 : 1];
  if (is_index_dtype(t.dtype)) {
    if (!dims_compatible(t.dims, per_item))
      return invalid_argument(op, " target of class indices has shape ", t.dims.to_string(), " but input ",
                              x.dims.to_string(), " needs ", per_item.to_string(),
                              " (the input's shape without the class dim)");
  } else if (allow_probs && t.dtype == x.dtype) {
    if (!dims_compatible(t.dims, x.dims))
      return invalid_argument(op, " target of class probabilities has shape ", t.dims.to_string(),
                              " but the input has shape ", x.dims.to_string(), ": they must match");
  } else {
    return invalid_argument(op, " target is ", dtype_name(t.dtype), ": give class indices as int32/int64",
                            allow_probs ? " or class probabilities in the input's dtype" : "");
  }
  if (ctx.has_input(off + 2)) {
    const TensorDesc& w = ctx.input(off + 2);
    if (w.dtype != x.dtype)
      return invalid_argument(op, " weight is ", dtype_name(w.dtype), " but the input is ", dtype_name(x.dtype));
    if (w.dims.rank() != 1 || !(w.dims[0] == classes || w.dims[0] == kDynamicDim || classes == kDynamicDim))
      return invalid_argument(op, " weight has shape ", w.dims.to_string(), " but needs one value per class: [",
                              classes, "]");
  }
  return per_item;
}

template <class A>
OpSchema class_loss_schema(const char* name, const char* summary, bool backward, bool cross_entropy) {
  OpSchema s = make_schema<A>(name, "loss", summary);
  s.input_names = backward ? std::vector<std::string>{"dy", "x", "target", "weight"}
                           : std::vector<std::string>{"x", "target", "weight"};
  s.min_inputs = backward ? 3 : 2;
  s.max_inputs = backward ? 4 : 3;
  s.infer = [op = std::string(name), backward,
             cross_entropy](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& a = ctx.attrs_as<A>();
    KILN_RETURN_IF_ERROR(check_reduction(op, a.reduction));
    if constexpr (requires { a.label_smoothing; }) {
      if (!(a.label_smoothing >= 0 && a.label_smoothing <= 1))
        return invalid_argument(op, " label_smoothing ", a.label_smoothing, " must lie in [0, 1]");
    }
    const int off = backward ? 1 : 0;
    KILN_ASSIGN_OR_RETURN(Dims per_item, check_class_loss(op, ctx, off, cross_entropy));
    const DataType dtype = ctx.input(off).dtype;
    if constexpr (requires { a.wrt; }) {
      KILN_RETURN_IF_ERROR(check_dy(op, ctx, a.reduction, per_item));
      switch (a.wrt) {
        case ClassLossWrt::kInput: return one_output(dtype, ctx.input(1).dims);
        case ClassLossWrt::kTarget:
          if (!is_floating(ctx.input(2).dtype))
            return invalid_argument(op, " differentiates with respect to the target, but it holds class indices");
          return one_output(dtype, ctx.input(1).dims);
        case ClassLossWrt::kWeight:
          if (!ctx.has_input(3))
            return invalid_argument(op, " differentiates with respect to the class weights, which are absent");
          return one_output(dtype, ctx.input(3).dims);
      }
      return invalid_argument(op, " wrt ", static_cast<int>(a.wrt), " is not input, target or weight");
    } else {
      return loss_output(dtype, a.reduction, per_item);
    }
  };
  return s;
}

KILN_REGISTER_OP(class_loss_schema<NLLLossAttrs>(
    "NLLLoss", "negative log-likelihood of class targets from log-probabilities (torch.nn.NLLLoss)", false, false));
KILN_REGISTER_OP(class_loss_schema<NLLLossBackwardAttrs>("NLLLossBackward", "dLoss/d(input wrt) of NLLLoss", true,
                                                         false));
KILN_REGISTER_OP(class_loss_schema<CrossEntropyLossAttrs>(
    "CrossEntropyLoss", "log-softmax + NLL from logits, class weights, label smoothing (torch.nn.CrossEntropyLoss)",
    false, true));
KILN_REGISTER_OP(class_loss_schema<CrossEntropyLossBackwardAttrs>("CrossEntropyLossBackward",
                                                                  "dLoss/d(input wrt) of CrossEntropyLoss", true,
                                                                  true));

Result<int64_t> check_ctc(const std::string& op, const InferContext& ctx, int off) {
  const auto& a = ctx.attrs_as<CTCLossAttrs>();
  KILN_RETURN_IF_ERROR(check_reduction(op, a.reduction));
  const TensorDesc& lp = ctx.input(off);
  if (!is_floating(lp.dtype) || lp.dims.rank() != 3)
    return invalid_argument(op, " needs log_probs of shape [T, N, C] in a floating-point type, got ", lp.to_string());
  const int64_t n = lp.dims[1], c = lp.dims[2];
  if (a.blank < 0 || (c != kDynamicDim && a.blank >= c))
    return invalid_argument(op, " blank ", a.blank, " is not a class of log_probs ", lp.dims.to_string());
  const TensorDesc& targets = ctx.input(off + 1);
  if (!is_index_dtype(targets.dtype) || targets.dims.rank() < 1 || targets.dims.rank() > 2)
    return invalid_argument(op, " needs integer targets of shape [N, S] (padded) or [sum(target_lengths)], got ",
                            targets.to_string());
  if (targets.dims.rank() == 2 && !dims_compatible(Dims{targets.dims[0]}, Dims{n}))
    return invalid_argument(op, " targets ", targets.dims.to_string(), " have ", targets.dims[0],
                            " rows but log_probs has batch ", n);
  for (int i : {off + 2, off + 3}) {
    const TensorDesc& len = ctx.input(i);
    if (!is_index_dtype(len.dtype) || !dims_compatible(len.dims, Dims{n}))
      return invalid_argument(op, " input '", i == off + 2 ? "input_lengths" : "target_lengths",
                              "' must be int32/int64 of shape [", n, "], got ", len.to_string());
  }
  return n;
}

KILN_REGISTER_OP([] {
  OpSchema s =
      make_schema<CTCLossAttrs>("CTCLoss", "loss", "connectionist temporal classification loss (torch.nn.CTCLoss)");
  s.input_names = {"log_probs", "targets", "input_lengths", "target_lengths"};
  s.min_inputs = s.max_inputs = 4;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    KILN_ASSIGN_OR_RETURN(int64_t n, check_ctc("CTCLoss", ctx, 0));
    return loss_output(ctx.input(0).dtype, ctx.attrs_as<CTCLossAttrs>().reduction, Dims{n});
  };
  return s;
}());

KILN_REGISTER_OP([] {
  OpSchema s = make_schema<CTCLossAttrs>("CTCLossBackward", "loss", "dLoss/dlog_probs of CTCLoss");
  s.input_names = {"dy", "log_probs", "targets", "input_lengths", "target_lengths"};
  s.min_inputs = s.max_inputs = 5;
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const std::string op = "CTCLossBackward";
    KILN_ASSIGN_OR_RETURN(int64_t n, check_ctc(op, ctx, 1));
    KILN_RETURN_IF_ERROR(check_dy(op, ctx, ctx.attrs_as<CTCLossAttrs>().reduction, Dims{n}));
    return one_output(ctx.input(1).dtype, ctx.input(1).dims);
  };
  return s;
}());

}  // namespace
}  // namespace kiln
