#pragma once
// Gradient clipping, loss unscaling and accumulation over micro-batches, on the parameters' float32 grads, in host
// memory or on a GPU (check_parameters). For parameters on a GPU the work is queued on `stream` (nullptr: the legacy
// default stream, and the call waits for it before returning); a function that returns a value read from the device
// (a norm, whether a grad is not finite) waits for the stream to read it (one small copy).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/stream.h"
#include "train/optim/optimizer.h"

namespace kiln::train {

/// Scales every grad by min(1, max_norm / (total_norm + 1e-6)), where total_norm is the norm of all grads
/// together (norm_type 2 = L2, or infinity = largest magnitude); PyTorch's clip_grad_norm_. Returns
/// total_norm. Parameters without a grad are left out. The sum is in double, in a fixed order, so the
/// result does not depend on the thread count.
/// On a GPU the norm is a deterministic reduction too (device.h: a fixed partition, partials combined in a
/// fixed order), so it does not depend on the GPU either.
Result<double> clip_grad_norm(std::vector<Parameter>& params, double max_norm, double norm_type = 2.0,
                              Stream* stream = nullptr);
/// Clamps every grad element to [-clip_value, clip_value]; PyTorch's clip_grad_value_.
Status clip_grad_value(std::vector<Parameter>& params, double clip_value, Stream* stream = nullptr);
/// The norm of all grads together (norm_type 2, infinity, or any p > 0).
Result<double> grad_norm(const std::vector<Parameter>& params, double norm_type = 2.0, Stream* stream = nullptr);
/// Multiplies every grad by 1 / grad_scale (rounded to float, as torch.cuda.amp does) in place and says whether any
/// grad is inf or NaN afterwards (the loss scale overflowed: skip the step). grad_scale is finite and > 0.
Result<bool> unscale_grads(std::vector<Parameter>& params, double grad_scale, Stream* stream = nullptr);

/// Sums (or averages) the grads of N micro-batches before one optimizer step:
///   for each micro-batch: backward (fills the params' grads); accumulator.add(params);
///   if (accumulator.ready()) { accumulator.finish(params); optimizer.step(); }
class GradAccumulator {
 public:
  enum class Mode { kSum, kMean };

  /// Buffers shaped like `params` (by name and dims), on their device; `micro_batches` >= 1.
  static Result<GradAccumulator> create(const std::vector<Parameter>& params, int micro_batches,
                                        Mode mode = Mode::kMean);

  /// For parameters on a GPU: the stream add() and finish() queue their work on, in order with the caller's (they
  /// then return without waiting). nullptr (the default): the legacy default stream, and they wait for it.
  void set_stream(Stream* stream) { stream_ = stream; }

  /// Adds each parameter's current grad to its running total (a parameter without a grad adds nothing).
  Status add(const std::vector<Parameter>& params);
  int count() const { return count_; }
  int micro_batches() const { return micro_batches_; }
  bool ready() const { return count_ >= micro_batches_; }
  /// Writes the total (kSum) or total / count() (kMean) into each parameter's grad and starts over.
  /// Needs at least one add(); may be called before ready() (an epoch's last, shorter group).
  Status finish(std::vector<Parameter>& params);
  void reset() { count_ = 0; }

  /// `grad_accum.count`, and per parameter `<name>.grad_accum` (float32) and `<name>.grad_accum_touched`
  /// (bool), for a checkpoint taken mid-group: host tensors (copied from and to the device for GPU parameters).
  Result<std::map<std::string, Tensor>> export_state() const;
  Status import_state(const std::map<std::string, Tensor>& state);

 private:
  struct Entry {
    std::string name;
    Tensor total;
    bool touched = false;  ///< some add() had a grad for it since the last finish()
  };
  Status match(const std::vector<Parameter>& params) const;
  /// Waits for the legacy default stream when no stream was set (device parameters).
  Status finish_default_stream() const;

  std::vector<Entry> entries_;
  Device device_;
  Stream* stream_ = nullptr;
  int micro_batches_ = 1;
  int count_ = 0;
  Mode mode_ = Mode::kMean;
};

}  // namespace kiln::train
