#include "ops/nms/nms.h"

#include <algorithm>
#include <numeric>

#include "ops/registry.h"

namespace kiln {
namespace {

struct Box {
  double y1, x1, y2, x2;
};

Box load_box(const Tensor& boxes, int64_t i, bool center) {
  const double a = boxes.at(i * 4), b = boxes.at(i * 4 + 1), c = boxes.at(i * 4 + 2), d = boxes.at(i * 4 + 3);
  if (center) return {b - d / 2, a - c / 2, b + d / 2, a + c / 2};
  return {std::min(a, c), std::min(b, d), std::max(a, c), std::max(b, d)};
}

// True when the IoU of p and q exceeds the threshold (boxes without area never suppress).
bool suppresses(const Box& p, const Box& q, double threshold) {
  const double ih = std::min(p.y2, q.y2) - std::max(p.y1, q.y1);
  const double iw = std::min(p.x2, q.x2) - std::max(p.x1, q.x1);
  if (ih <= 0 || iw <= 0) return false;
  const double ap = (p.y2 - p.y1) * (p.x2 - p.x1), aq = (q.y2 - q.y1) * (q.x2 - q.x1);
  if (ap <= 0 || aq <= 0) return false;
  const double inter = ih * iw;
  return inter / (ap + aq - inter) > threshold;
}

}  // namespace

Result<NmsParams> nms_params(const Tensor* max_output, const Tensor* iou_threshold, const Tensor* score_threshold) {
  NmsParams p;
  if (max_output && max_output->numel() > 0) p.max_output = tensor_to_int64s(*max_output)[0];  // INT64_MAX must survive
  if (iou_threshold && iou_threshold->numel() > 0) p.iou_threshold = iou_threshold->at(0);
  p.has_score_threshold = score_threshold && score_threshold->numel() > 0;
  if (p.has_score_threshold) p.score_threshold = score_threshold->at(0);
  if (!(p.iou_threshold >= 0.0 && p.iou_threshold <= 1.0))
    return invalid_argument("NonMaxSuppression 'iou_threshold' is ", p.iou_threshold, "; it must be in [0, 1]");
  return p;
}

void nms_select_class(const NmsAttrs& a, const NmsParams& p, const Tensor& boxes, const Tensor& scores, int64_t b,
                      int64_t c, std::vector<std::array<int64_t, 3>>& out) {
  const int64_t classes = scores.dims()[1], n = scores.dims()[2];
  if (p.max_output <= 0) return;
  const int64_t base = (b * classes + c) * n;
  std::vector<int64_t> order;
  std::vector<double> score(n);
  for (int64_t i = 0; i < n; ++i) {
    score[i] = scores.at(base + i);
    if (!p.has_score_threshold || score[i] > p.score_threshold) order.push_back(i);
  }
  // Highest score first; ties keep the lower box index first.
  std::stable_sort(order.begin(), order.end(), [&](int64_t l, int64_t r) { return score[l] > score[r]; });
  std::vector<Box> kept;
  for (int64_t i : order) {
    if (static_cast<int64_t>(kept.size()) >= p.max_output) break;
    const Box box = load_box(boxes, b * n + i, a.center_point_box);
    bool keep = true;
    for (const Box& k : kept) keep = keep && !suppresses(k, box, p.iou_threshold);
    if (!keep) continue;
    kept.push_back(box);
    out.push_back({b, c, i});
  }
}

Result<std::vector<std::array<int64_t, 3>>> nms_select(const NmsAttrs& a, const Tensor& boxes, const Tensor& scores,
                                                       const Tensor* max_output, const Tensor* iou_threshold,
                                                       const Tensor* score_threshold) {
  KILN_ASSIGN_OR_RETURN(const NmsParams p, nms_params(max_output, iou_threshold, score_threshold));
  std::vector<std::array<int64_t, 3>> out;
  for (int64_t b = 0; b < scores.dims()[0]; ++b)
    for (int64_t c = 0; c < scores.dims()[1]; ++c) nms_select_class(a, p, boxes, scores, b, c, out);
  return out;
}

namespace {

Status expect_scalar(const InferContext& ctx, int i, const char* name, bool integer) {
  if (!ctx.has_input(i)) return Status::ok();
  const TensorDesc& t = ctx.input(i);
  const bool int_type = t.dtype == DataType::kInt64 || t.dtype == DataType::kInt32;
  const bool float_type =
      t.dtype == DataType::kFloat32 || t.dtype == DataType::kFloat16 || t.dtype == DataType::kBFloat16;
  if (integer ? !int_type : !float_type)
    return invalid_argument("NonMaxSuppression input '", name, "' must be ", integer ? "int64" : "float32", ", got ",
                            dtype_name(t.dtype));
  if (t.dims.rank() > 1 || (t.dims.numel() != kDynamicDim && t.dims.numel() > 1))
    return invalid_argument("NonMaxSuppression input '", name, "' must hold one value, got shape ", t.dims.to_string());
  return Status::ok();
}

OpSchema nms_schema() {
  OpSchema s = make_schema<NmsAttrs>("NonMaxSuppression", "nms",
                                     "Greedy non-maximum suppression of boxes per batch and class (ONNX)");
  s.input_names = {"boxes", "scores", "max_output_boxes_per_class", "iou_threshold", "score_threshold"};
  s.min_inputs = 2;
  s.max_inputs = 5;
  s.value_inputs = {0, 1, 2, 3, 4};
  s.infer = [](const InferContext& ctx) -> Result<std::vector<TensorDesc>> {
    const auto& a = ctx.attrs_as<NmsAttrs>();
    const Dims& boxes = ctx.input(0).dims;
    const Dims& scores = ctx.input(1).dims;
    for (int i : {0, 1})
      if (!is_floating(ctx.input(i).dtype))
        return invalid_argument("NonMaxSuppression input '", i == 0 ? "boxes" : "scores", "' must be float, got ",
                                dtype_name(ctx.input(i).dtype));
    if (boxes.rank() != 3 || (boxes[2] != kDynamicDim && boxes[2] != 4))
      return invalid_argument("NonMaxSuppression input 'boxes' must have shape [batches, boxes, 4], got ",
                              boxes.to_string());
    if (scores.rank() != 3)
      return invalid_argument("NonMaxSuppression input 'scores' must have shape [batches, classes, boxes], got ",
                              scores.to_string());
    for (int d : {0, 1}) {
      const int sd = d == 0 ? 0 : 2;
      if (boxes[d] != kDynamicDim && scores[sd] != kDynamicDim && boxes[d] != scores[sd])
        return invalid_argument("NonMaxSuppression 'boxes' ", boxes.to_string(), " and 'scores' ", scores.to_string(),
                                " disagree on the number of ", d == 0 ? "batches" : "boxes");
    }
    KILN_RETURN_IF_ERROR(expect_scalar(ctx, 2, "max_output_boxes_per_class", true));
    KILN_RETURN_IF_ERROR(expect_scalar(ctx, 3, "iou_threshold", false));
    KILN_RETURN_IF_ERROR(expect_scalar(ctx, 4, "score_threshold", false));
    int64_t selected = kDynamicDim;
    const bool known = ctx.value(0) && ctx.value(1) && (!ctx.has_input(2) || ctx.value(2)) &&
                       (!ctx.has_input(3) || ctx.value(3)) && (!ctx.has_input(4) || ctx.value(4));
    if (known) {
      KILN_ASSIGN_OR_RETURN(auto sel,
                            nms_select(a, *ctx.value(0), *ctx.value(1), ctx.value(2), ctx.value(3), ctx.value(4)));
      selected = static_cast<int64_t>(sel.size());
    }
    return one_output(DataType::kInt64, Dims{selected, 3});
  };
  return s;
}

KILN_REGISTER_OP(nms_schema());

}  // namespace
}  // namespace kiln
