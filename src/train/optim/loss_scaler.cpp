#include "train/optim/loss_scaler.h"

#include <algorithm>
#include <cmath>

namespace kiln::train {
namespace {

float clamp_scale(double scale, const LossScalerOptions& o) {
  return static_cast<float>(std::min(std::max(scale, o.min_scale), o.max_scale));
}

}  // namespace

Result<DynamicLossScaler> DynamicLossScaler::create(const LossScalerOptions& o, std::string_view where) {
  auto bad = [&](const char* key, double value, const char* want) {
    return invalid_argument(where, ".", key, " is ", value, "; it must be ", want);
  };
  if (!(o.min_scale > 0) || !std::isfinite(o.min_scale)) return bad("min_scale", o.min_scale, "finite and > 0");
  if (!(o.max_scale >= o.min_scale) || !std::isfinite(o.max_scale) || o.max_scale > 3.4e38)
    return bad("max_scale", o.max_scale, "finite, at most 3.4e38 (a float) and >= min_scale");
  if (!(o.init_scale >= o.min_scale && o.init_scale <= o.max_scale))
    return bad("init_scale", o.init_scale, "within [min_scale, max_scale]");
  if (!(o.growth_factor > 1) || !std::isfinite(o.growth_factor)) return bad("growth_factor", o.growth_factor, "> 1");
  if (!(o.backoff_factor > 0 && o.backoff_factor < 1)) return bad("backoff_factor", o.backoff_factor, "in (0, 1)");
  if (o.growth_interval < 1)
    return bad("growth_interval", static_cast<double>(o.growth_interval), "at least 1 (good steps before growth)");
  DynamicLossScaler s;
  s.options_ = o;
  s.scale_ = clamp_scale(o.init_scale, o);
  return s;
}

void DynamicLossScaler::update(bool found_inf) {
  if (found_inf) {
    scale_ = clamp_scale(static_cast<double>(scale_) * options_.backoff_factor, options_);
    good_steps_ = 0;
    return;
  }
  if (++good_steps_ < options_.growth_interval) return;
  scale_ = clamp_scale(static_cast<double>(scale_) * options_.growth_factor, options_);
  good_steps_ = 0;
}

Result<std::map<std::string, Tensor>> DynamicLossScaler::export_state() const {
  std::map<std::string, Tensor> out;
  KILN_ASSIGN_OR_RETURN(Tensor scale, Tensor::empty(DataType::kFloat32, Dims{}));
  *scale.data<float>() = scale_;
  out["loss_scaler.scale"] = std::move(scale);
  KILN_ASSIGN_OR_RETURN(Tensor good, Tensor::empty(DataType::kInt64, Dims{}));
  *good.data<int64_t>() = good_steps_;
  out["loss_scaler.good_steps"] = std::move(good);
  return out;
}

Status DynamicLossScaler::import_state(const std::map<std::string, Tensor>& state) {
  auto find = [&](const std::string& key, DataType dtype) -> Result<const Tensor*> {
    auto it = state.find(key);
    if (it == state.end()) return invalid_argument("loss scaler state has no '", key, "'");
    const Tensor& t = it->second;
    if (t.dtype() != dtype || t.numel() != 1 || !t.device().is_cpu())
      return invalid_argument("loss scaler state '", key, "' is ", t.describe(), "; expected a ", dtype_name(dtype),
                              " scalar on the host");
    return &t;
  };
  KILN_ASSIGN_OR_RETURN(const Tensor* scale, find("loss_scaler.scale", DataType::kFloat32));
  KILN_ASSIGN_OR_RETURN(const Tensor* good, find("loss_scaler.good_steps", DataType::kInt64));
  const float s = *scale->data<float>();
  const int64_t g = *good->data<int64_t>();
  if (!(s > 0) || !std::isfinite(s))
    return invalid_argument("loss scaler state 'loss_scaler.scale' is ", s, "; it must be finite and > 0");
  if (g < 0) return invalid_argument("loss scaler state 'loss_scaler.good_steps' is ", g, "; it must be >= 0");
  scale_ = s;
  good_steps_ = g;
  return Status::ok();
}

}  // namespace kiln::train
