#pragma once
// Optimizers over a list of parameters (FP32 master weights on the host or on one GPU), with PyTorch's update
// rules (NovoGrad: NVIDIA's, as NeMo has it), weight decay (L2 or decoupled), gradient clipping, loss-scaled steps
// for mixed precision, a factory from config, and state export/import for checkpoints (a resumed optimizer
// continues bit-exactly). The element rules are rules.h's, shared by the CPU loops and the CUDA kernels.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kiln/stream.h"
#include "kiln/tensor.h"
#include "train/optim/options.h"

namespace kiln::train {

namespace rules {
struct Tensors;
}

/// A trained value and its gradient: float32, contiguous, same dims, and either all parameters (values and grads)
/// in host memory or all on one CUDA device. The optimizer updates `value` in place (through the shared buffer);
/// a parameter whose `grad` is undefined is skipped.
struct Parameter {
  std::string name;
  Tensor value;
  Tensor grad;
};

/// Fields every optimizer has. Clipping (0 = off) is applied to the grads, in place, before the update:
/// by value first, then by global L2 norm over all parameters (PyTorch's clip_grad_value_/clip_grad_norm_).
struct OptimizerCommon {
  double lr = 1e-3;
  double weight_decay = 0;
  /// Decay the weights directly (p -= lr * weight_decay * p, AdamW's way) rather than adding
  /// weight_decay * p to the gradient (L2). AdamW is always decoupled; NovoGrad has its own rule.
  bool decoupled_weight_decay = false;
  double clip_grad_norm = 0;
  double clip_grad_value = 0;
};

/// SGD with optional momentum (heavy ball or Nesterov), torch.optim.SGD.
struct SgdOptions : OptimizerCommon {
  SgdOptions() { lr = 0.01; }
  double momentum = 0;
  double dampening = 0;
  bool nesterov = false;
};

/// torch.optim.Adagrad.
struct AdagradOptions : OptimizerCommon {
  AdagradOptions() { lr = 0.01; }
  double lr_decay = 0;
  double initial_accumulator_value = 0;
  double eps = 1e-10;
};

/// torch.optim.RMSprop (with momentum, centered).
struct RmspropOptions : OptimizerCommon {
  RmspropOptions() { lr = 0.01; }
  double alpha = 0.99;
  double eps = 1e-8;
  double momentum = 0;
  bool centered = false;
};

/// torch.optim.Adadelta.
struct AdadeltaOptions : OptimizerCommon {
  AdadeltaOptions() { lr = 1.0; }
  double rho = 0.9;
  double eps = 1e-6;
};

/// torch.optim.Adam (decoupled_weight_decay makes it AdamW).
struct AdamOptions : OptimizerCommon {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  bool amsgrad = false;
};

/// torch.optim.AdamW: Adam with decoupled weight decay (default 0.01).
struct AdamWOptions : AdamOptions {
  AdamWOptions() {
    weight_decay = 0.01;
    decoupled_weight_decay = true;
  }
};

/// NVIDIA's NovoGrad as NeMo has it: layer-wise second moment (one scalar per parameter tensor), weight
/// decay added to the normalized gradient, optional grad averaging, AMSGrad and layer-wise update clipping.
struct NovogradOptions : OptimizerCommon {
  double beta1 = 0.95;
  double beta2 = 0.98;
  double eps = 1e-8;
  bool grad_averaging = false;
  bool amsgrad = false;
  bool luc = false;  ///< clip the update to luc_trust * |w| / |update| (at most lr)
  double luc_trust = 1e-3;
  double luc_eps = 1e-8;
};

/// How one step treats the grads (mixed precision).
struct StepOptions {
  /// The grads are scaled by this (the loss was multiplied by it): they are divided by it first, in place (the
  /// grads hold the unscaled values afterwards, also when the step is skipped). Finite and > 0.
  double grad_scale = 1.0;
  /// When any grad has an inf or NaN (after unscaling), nothing is updated: no parameter, no state, no step
  /// counted (a loss scaler then lowers the scale; see loss_scaler.h).
  bool skip_nonfinite = false;
};

using OptimizerOptions = std::variant<SgdOptions, AdagradOptions, RmspropOptions, AdadeltaOptions, AdamOptions,
                                      AdamWOptions, NovogradOptions>;

/// The optimizer names the factory knows: sgd, momentum (SGD, momentum 0.9 unless given), nesterov (SGD,
/// Nesterov momentum 0.9 unless given), adagrad, rmsprop, adadelta, adam, adamw, novograd.
const std::vector<std::string_view>& optimizer_names();

/// Typed options from a config map: `name` plus hyper-parameters, e.g. {name: adam, lr: 0.001, betas:
/// [0.9, 0.999], weight_decay: 0}. Errors name the key (`where.key`), the unknown key or the bad value.
Result<OptimizerOptions> parse_optimizer_options(const OptionMap& config, std::string_view where = "optim");
/// The same with the name given apart (any `name` key in `config` is ignored).
Result<OptimizerOptions> parse_optimizer_options(std::string_view name, const OptionMap& config,
                                                 std::string_view where = "optim");
/// Checks the ranges of typed options (the factory calls it too); errors name the field as `where.key`.
Status validate(const OptimizerOptions& options, std::string_view where = "optim");

class Optimizer {
 public:
  /// An optimizer over `params` (see Parameter for what they must be; names must be unique).
  static Result<std::unique_ptr<Optimizer>> create(const OptimizerOptions& options, std::vector<Parameter> params);
  /// parse_optimizer_options + create.
  static Result<std::unique_ptr<Optimizer>> create(const OptionMap& config, std::vector<Parameter> params,
                                                   std::string_view where = "optim");

  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// "sgd", "adam", ... (the options' kind; momentum and nesterov are "sgd").
  const std::string& name() const { return name_; }
  const OptimizerOptions& options() const { return options_; }
  /// The learning rate of the next step (a learning-rate policy sets it before each step).
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }

  /// The parameters; the caller may rebind `grad` (and `value`, same dims) between steps, but not add or
  /// remove parameters.
  std::vector<Parameter>& params() { return params_; }
  const std::vector<Parameter>& params() const { return params_; }
  /// Steps taken by parameter `index` (parameters without a grad at a step do not count it).
  int64_t steps(size_t index) const { return states_.at(index).step; }

  /// Where the parameters and the state live (the parameters' device when the optimizer was created).
  Device device() const { return device_; }
  /// The stream the device work of step(), export_state() and import_state() is queued on (parameters on a GPU;
  /// ignored for host parameters). nullptr (the default) is a stream the optimizer owns: the caller must have
  /// finished the work that wrote the grads (synchronized its stream) before step(), and step() returns once the
  /// update has finished on the GPU. With the caller's stream the work is queued in order with the caller's own and
  /// step() returns without waiting for the update, except for what it must read back: one small copy per step for
  /// skip_nonfinite, one for clip_grad_norm. The stream must be on the parameters' device. The work queued there
  /// uses the optimizer's state: let it finish (synchronize the stream) before destroying the optimizer.
  void set_stream(Stream* stream) { stream_ = stream; }
  Stream* stream() const { return stream_; }

  /// One update of every parameter that has a grad (clipping first when the options ask for it).
  Status step();
  /// The same with the grads unscaled first and, with skip_nonfinite, skipped when any is not finite. True: the
  /// parameters were updated; false: skipped (the grads had an inf or NaN).
  Result<bool> step(const StepOptions& options);

  /// The state: per parameter `<name>.step` (int64 scalar) and its buffers (`<name>.exp_avg`, ...,
  /// float32, PyTorch's state names). Deep copies: later steps do not change them.
  Result<std::map<std::string, Tensor>> export_state() const;
  /// Restores state from export_state() of an optimizer of the same kind and options over parameters of
  /// the same names and dims; every key must be present and none may be left over. The tensors are host tensors
  /// (copied to the device for GPU parameters).
  Status import_state(const std::map<std::string, Tensor>& state);

 protected:
  /// A per-parameter state buffer: one float per element of the parameter, or one scalar.
  struct Slot {
    std::string name;
    bool scalar = false;
    float init = 0;
  };
  struct ParamState {
    int64_t step = 0;             ///< steps taken, including the current one while updating
    Dims dims;                    ///< the parameter's dims when the optimizer was created
    std::vector<Tensor> buffers;  ///< one per slot, in slots() order, on the parameters' device
    float* buffer(size_t slot) const { return buffers[slot].data<float>(); }
  };

  Optimizer(std::string name, OptimizerOptions options, std::vector<Parameter> params);
  virtual std::vector<Slot> slots() const = 0;
  /// Updates `n` elements of one parameter (host or device pointers: see on_device()); `state.step` is already
  /// incremented. The weights are param[i] * decay (decoupled weight decay, 1 without) before the update.
  virtual Status update(ParamState& state, float* param, const float* grad, int64_t n, float decay) = 0;

  /// Applies the element rule with scalars `k` (rules.h) to n elements: the CPU loop, or one kernel launch on the
  /// work stream for device parameters.
  template <class Scalars>
  Status run(const Scalars& k, const rules::Tensors& t, int64_t n) const;

  bool on_device() const { return device_.is_cuda(); }
  /// The stream device work goes to (the caller's or the optimizer's own).
  Stream* work_stream() const { return stream_ != nullptr ? stream_ : own_stream_.get(); }
  /// Device scratch for the reductions (device parameters): at least the largest reduction_blocks(n) + 4 doubles.
  double* device_workspace() const { return static_cast<double*>(workspace_.raw()); }

  const OptimizerCommon& common() const;
  /// The weight decay to add to the gradient: 0 when it is decoupled (applied by step() instead).
  double l2_decay() const;
  double weight_decay() const;

 private:
  Status init_state();
  Status check_list() const;
  /// check_list, check_parameters, and the parameters' dims and device still those of the state.
  Status check_step() const;
  /// Unscales the grads in place; true when any is inf or NaN afterwards.
  Result<bool> unscale(double grad_scale);
  /// Waits for the optimizer's own stream (nothing to wait for with the caller's stream or on the host).
  Status finish_own_stream() const;

  std::string name_;
  OptimizerOptions options_;
  std::vector<Parameter> params_;
  std::vector<ParamState> states_;
  double lr_ = 0;
  Device device_;
  Stream* stream_ = nullptr;
  std::unique_ptr<Stream> own_stream_;
  Tensor workspace_;  ///< device scratch (doubles): reductions' partials and results, the non-finite flag
};

/// Checks that `params` are float32 contiguous tensors with matching grads (undefined grads allowed), all in host
/// memory or all on one CUDA device (values and grads), names unique and non-empty. Errors name the parameter.
Status check_parameters(const std::vector<Parameter>& params);

}  // namespace kiln::train
