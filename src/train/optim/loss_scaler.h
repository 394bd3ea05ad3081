#pragma once
// Dynamic loss scaling for mixed-precision (FP16) training, with torch.cuda.amp.GradScaler's semantics: the loss is
// multiplied by scale() before backward, the step unscales the grads and is skipped when any is inf or NaN, and
// update() then halves the scale (an overflow) or doubles it after growth_interval good steps in a row.
//
//   loss * scaler.scale() -> backward -> auto updated = optimizer.step({scaler.scale(), true});
//   scaler.update(!*updated);
#include <cstdint>
#include <map>
#include <string>

#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln::train {

struct LossScalerOptions {
  double init_scale = 65536.0;     ///< 2^16, GradScaler's
  double growth_factor = 2.0;      ///< > 1
  double backoff_factor = 0.5;     ///< in (0, 1)
  int64_t growth_interval = 2000;  ///< good steps in a row before the scale grows; >= 1
  /// Bounds the scale never leaves (GradScaler has none; these keep a diverged run from driving it to 0 or inf).
  double min_scale = 1.0;
  double max_scale = 16777216.0;  ///< 2^24
};

class DynamicLossScaler {
 public:
  /// Checks the options (errors name the field as `where.key`).
  static Result<DynamicLossScaler> create(const LossScalerOptions& options = {},
                                          std::string_view where = "loss_scaler");

  /// The factor to multiply the loss by (and to pass to Optimizer::step as grad_scale). A float32 value, as
  /// GradScaler keeps it.
  float scale() const { return scale_; }
  /// Good (finite) steps since the last change of the scale.
  int64_t good_steps() const { return good_steps_; }
  const LossScalerOptions& options() const { return options_; }

  /// After each step: found_inf (the step was skipped) multiplies the scale by backoff_factor and restarts the
  /// count; otherwise the count grows, and at growth_interval the scale is multiplied by growth_factor and the count
  /// restarts. The scale stays within [min_scale, max_scale].
  void update(bool found_inf);

  /// `loss_scaler.scale` (float32 scalar) and `loss_scaler.good_steps` (int64 scalar), for checkpoints.
  Result<std::map<std::string, Tensor>> export_state() const;
  /// Restores both from export_state(); errors name the missing or malformed key.
  Status import_state(const std::map<std::string, Tensor>& state);

 private:
  LossScalerOptions options_;
  float scale_ = 65536.0f;
  int64_t good_steps_ = 0;
};

}  // namespace kiln::train
