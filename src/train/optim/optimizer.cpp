#include "train/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <type_traits>

#include "core/cuda_runtime.h"
#include "train/optim/device.h"
#include "train/optim/gradients.h"
#include "train/optim/loops.h"
#include "train/optim/rules.h"

namespace kiln::train {

template <class Scalars>
Status Optimizer::run(const Scalars& k, const rules::Tensors& t, int64_t n) const {
  if (on_device()) return device::apply(k, t, n, device::launch_on(device_, work_stream()));
  rules::with_rule(k, [&](const auto& rule) { loops::apply(rule, t, n); });
  return Status::ok();
}

namespace {

// Each optimizer fills its rule's scalars (rules.h: the element arithmetic and PyTorch's operation order are
// documented there) and applies the rule on the host (loops::apply: threaded chunks, simd loops) or on the device
// (device::apply: one kernel launch per parameter tensor).

class Sgd final : public Optimizer {
 public:
  Sgd(const SgdOptions& o, std::vector<Parameter> params) : Optimizer("sgd", o, std::move(params)), o_(o) {}

 protected:
  std::vector<Slot> slots() const override {
    if (o_.momentum == 0) return {};
    return {{"momentum_buffer"}};
  }
  Status update(ParamState& state, float* p, const float* g, int64_t n, float decay) override {
    rules::SgdScalars k;
    k.wd = static_cast<float>(l2_decay());
    k.neg_lr = static_cast<float>(-lr());
    k.momentum = static_cast<float>(o_.momentum);
    k.keep = static_cast<float>(1.0 - o_.dampening);
    k.decay = decay;
    k.first = state.step == 1;
    k.l2 = k.wd != 0;
    k.has_momentum = o_.momentum != 0;
    k.nesterov = o_.nesterov;
    return run(k, {p, g, k.has_momentum ? state.buffer(0) : nullptr}, n);
  }

 private:
  SgdOptions o_;
};

class Adagrad final : public Optimizer {
 public:
  Adagrad(const AdagradOptions& o, std::vector<Parameter> params) : Optimizer("adagrad", o, std::move(params)), o_(o) {}

 protected:
  std::vector<Slot> slots() const override {
    return {{"sum", false, static_cast<float>(o_.initial_accumulator_value)}};
  }
  Status update(ParamState& state, float* p, const float* g, int64_t n, float decay) override {
    rules::AdagradScalars k;
    k.wd = static_cast<float>(l2_decay());
    const double clr = lr() / (1 + static_cast<double>(state.step - 1) * o_.lr_decay);
    k.neg_clr = static_cast<float>(-clr);
    k.eps = static_cast<float>(o_.eps);
    k.decay = decay;
    k.l2 = k.wd != 0;
    return run(k, {p, g, state.buffer(0)}, n);
  }

 private:
  AdagradOptions o_;
};

class Rmsprop final : public Optimizer {
 public:
  Rmsprop(const RmspropOptions& o, std::vector<Parameter> params) : Optimizer("rmsprop", o, std::move(params)), o_(o) {}

 protected:
  std::vector<Slot> slots() const override {
    std::vector<Slot> s = {{"square_avg"}};
    if (o_.momentum > 0) s.push_back({"momentum_buffer"});
    if (o_.centered) s.push_back({"grad_avg"});
    return s;
  }
  Status update(ParamState& state, float* p, const float* g, int64_t n, float decay) override {
    rules::RmspropScalars k;
    k.wd = static_cast<float>(l2_decay());
    k.neg_lr = static_cast<float>(-lr());
    k.alpha = static_cast<float>(o_.alpha);
    k.one_minus_alpha = static_cast<float>(1.0 - o_.alpha);
    k.eps = static_cast<float>(o_.eps);
    k.momentum = static_cast<float>(o_.momentum);
    k.decay = decay;
    k.l2 = k.wd != 0;
    k.has_momentum = o_.momentum > 0;
    k.centered = o_.centered;
    float* buf = k.has_momentum ? state.buffer(1) : nullptr;
    float* ga = k.centered ? state.buffer(k.has_momentum ? 2 : 1) : nullptr;
    return run(k, {p, g, state.buffer(0), buf, ga}, n);
  }

 private:
  RmspropOptions o_;
};

class Adadelta final : public Optimizer {
 public:
  Adadelta(const AdadeltaOptions& o, std::vector<Parameter> params)
      : Optimizer("adadelta", o, std::move(params)), o_(o) {}

 protected:
  std::vector<Slot> slots() const override { return {{"square_avg"}, {"acc_delta"}}; }
  Status update(ParamState& state, float* p, const float* g, int64_t n, float decay) override {
    rules::AdadeltaScalars k;
    k.wd = static_cast<float>(l2_decay());
    k.neg_lr = static_cast<float>(-lr());
    k.rho = static_cast<float>(o_.rho);
    k.one_minus_rho = static_cast<float>(1.0 - o_.rho);
    k.eps = static_cast<float>(o_.eps);
    k.decay = decay;
    k.l2 = k.wd != 0;
    return run(k, {p, g, state.buffer(0), state.buffer(1)}, n);
  }

 private:
  AdadeltaOptions o_;
};

// Adam and AdamW (the decoupled decay is applied by Optimizer::step before update()).
class Adam final : public Optimizer {
 public:
  Adam(std::string name, const OptimizerOptions& options, const AdamOptions& o, std::vector<Parameter> params)
      : Optimizer(std::move(name), options, std::move(params)), o_(o) {}

 protected:
  std::vector<Slot> slots() const override {
    std::vector<Slot> s = {{"exp_avg"}, {"exp_avg_sq"}};
    if (o_.amsgrad) s.push_back({"max_exp_avg_sq"});
    return s;
  }
  Status update(ParamState& state, float* p, const float* g, int64_t n, float decay) override {
    rules::AdamScalars k;
    k.wd = static_cast<float>(l2_decay());
    k.b1 = static_cast<float>(o_.beta1);
    k.b2 = static_cast<float>(o_.beta2);
    k.one_minus_b1 = static_cast<float>(1.0 - o_.beta1);
    k.one_minus_b2 = static_cast<float>(1.0 - o_.beta2);
    const auto step = static_cast<double>(state.step);
    const double bias_correction1 = 1 - std::pow(o_.beta1, step);
    const double bias_correction2 = 1 - std::pow(o_.beta2, step);
    k.neg_step_size = static_cast<float>(-(lr() / bias_correction1));
    k.bc2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
    k.eps = static_cast<float>(o_.eps);
    k.decay = decay;
    k.l2 = k.wd != 0;
    k.amsgrad = o_.amsgrad;
    return run(k, {p, g, state.buffer(0), state.buffer(1), o_.amsgrad ? state.buffer(2) : nullptr}, n);
  }

 private:
  AdamOptions o_;
};

class Novograd final : public Optimizer {
 public:
  Novograd(const NovogradOptions& o, std::vector<Parameter> params)
      : Optimizer("novograd", o, std::move(params)), o_(o) {}

 protected:
  std::vector<Slot> slots() const override {
    std::vector<Slot> s = {{"exp_avg"}, {"exp_avg_sq", true}};
    if (o_.amsgrad) s.push_back({"max_exp_avg_sq", true});
    return s;
  }
  Status update(ParamState& state, float* p, const float* g, int64_t n, float /*decay*/) override {
    // NovoGrad's weight decay is its own (added to the normalized gradient), so `decay` is always 1.
    rules::NovogradScalars k;
    k.beta2 = static_cast<float>(o_.beta2);
    k.one_minus_beta2 = static_cast<float>(1.0 - o_.beta2);
    k.eps = static_cast<float>(o_.eps);
    k.wd = static_cast<float>(weight_decay());
    k.b1 = static_cast<float>(o_.beta1);
    k.scale = static_cast<float>(o_.grad_averaging ? 1.0 - o_.beta1 : 1.0);
    k.neg_lr = static_cast<float>(-lr());
    k.luc_trust = static_cast<float>(o_.luc_trust);
    k.luc_eps = static_cast<float>(o_.luc_eps);
    k.lr = lr();
    k.amsgrad = o_.amsgrad;
    k.weight_decay = k.wd != 0;
    k.averaging = o_.grad_averaging;
    k.luc = o_.luc;
    const rules::Tensors t{p, g, state.buffer(0), state.buffer(1), o_.amsgrad ? state.buffer(2) : nullptr};
    if (on_device()) return device::novograd(k, t, n, device_workspace(), device::launch_on(device(), work_stream()));
    // The layer's second moment: the squared L2 norm of its gradient, averaged over steps.
    const auto grad_norm = static_cast<float>(std::sqrt(loops::sum_squares(g, n)));
    k.denom = rules::novograd_denom(grad_norm, t.s1, t.s2, k);
    // Without layer-wise update clipping the weights are updated in the same pass as the moment.
    rules::with_rule(k, [&](const auto& rule) { loops::apply(rule, t, n); });
    if (!o_.luc) return Status::ok();
    const auto data_norm = static_cast<float>(std::sqrt(loops::sum_squares(p, n)));
    const auto update_norm = static_cast<float>(std::sqrt(loops::sum_squares(t.s0, n)));
    loops::apply(rules::AddScaled{rules::novograd_luc_neg_lr(data_norm, update_norm, k)}, t, n);
    return Status::ok();
  }

 private:
  NovogradOptions o_;
};

Status check_float(const Tensor& t, const std::string& what) {
  if (t.dtype() != DataType::kFloat32)
    return invalid_argument(what, " is ", t.describe(), "; optimizers take float32 (FP32 master weights)");
  if (!t.device().is_cpu() && !t.device().is_cuda())
    return unsupported(what, " is ", t.describe(), "; optimizers run on the host or on a CUDA GPU");
  if (!t.is_contiguous()) return invalid_argument(what, " is ", t.describe(), " but not contiguous");
  if (t.numel() > 0 && t.raw() == nullptr) return invalid_argument(what, " has no memory");
  return Status::ok();
}

}  // namespace

Status check_parameters(const std::vector<Parameter>& params) {
  std::set<std::string> names;
  for (size_t i = 0; i < params.size(); ++i) {
    const Parameter& p = params[i];
    if (p.name.empty()) return invalid_argument("parameter ", i, " has no name; give every parameter a unique name");
    if (!names.insert(p.name).second)
      return invalid_argument("parameter '", p.name, "' is listed twice; give every parameter a unique name");
    if (!p.value.defined()) return invalid_argument("parameter '", p.name, "' has no value");
    KILN_RETURN_IF_ERROR(check_float(p.value, str_cat("parameter '", p.name, "'")));
    const Device first = params[0].value.device();
    if (p.value.device() != first)
      return invalid_argument("parameter '", p.name, "' is on ", p.value.device().to_string(), " but parameter '",
                              params[0].name, "' is on ", first.to_string(),
                              "; put all parameters (and their grads) on one device");
    if (!p.grad.defined()) continue;
    KILN_RETURN_IF_ERROR(check_float(p.grad, str_cat("the gradient of '", p.name, "'")));
    if (p.grad.device() != p.value.device())
      return invalid_argument("the gradient of '", p.name, "' is on ", p.grad.device().to_string(),
                              " but the parameter is on ", p.value.device().to_string(),
                              "; keep each grad on its parameter's device");
    if (p.grad.dims() != p.value.dims())
      return invalid_argument("the gradient of '", p.name, "' has dims ", p.grad.dims().to_string(),
                              " but the parameter has ", p.value.dims().to_string());
  }
  return Status::ok();
}

Optimizer::Optimizer(std::string name, OptimizerOptions options, std::vector<Parameter> params)
    : name_(std::move(name)), options_(options), params_(std::move(params)), lr_(common().lr) {
  if (!params_.empty()) device_ = params_[0].value.device();
}

const OptimizerCommon& Optimizer::common() const {
  return std::visit([](const auto& o) -> const OptimizerCommon& { return o; }, options_);
}

double Optimizer::l2_decay() const {
  const OptimizerCommon& c = common();
  return c.decoupled_weight_decay ? 0.0 : c.weight_decay;
}

double Optimizer::weight_decay() const { return common().weight_decay; }

Status Optimizer::init_state() {
  std::vector<Slot> slot_list = slots();
  states_.clear();
  states_.reserve(params_.size());
  if (on_device()) {
    KILN_ASSIGN_OR_RETURN(own_stream_, cuda::create_stream(device_.index));
    // Scratch for the device reductions (NovoGrad's norms) and the non-finite flag: the largest tensor's partials
    // plus the results (see device::novograd), as int64 elements (8 bytes, like the doubles it holds).
    int64_t blocks = 0;
    for (const Parameter& p : params_) blocks = std::max(blocks, device::reduction_blocks(p.value.numel()));
    KILN_ASSIGN_OR_RETURN(workspace_, Tensor::empty(DataType::kInt64, Dims{blocks + 8},
                                                    cuda::device_allocator(device_.index), "optimizer workspace"));
  }
  const device::Launch on = device::launch_on(device_, own_stream_.get());
  for (const Parameter& p : params_) {
    ParamState state;
    state.dims = p.value.dims();
    for (const Slot& slot : slot_list) {
      const Dims dims = slot.scalar ? Dims{} : p.value.dims();
      if (on_device()) {
        KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(DataType::kFloat32, dims, cuda::device_allocator(device_.index),
                                                      "optimizer state"));
        KILN_RETURN_IF_ERROR(device::fill(t.data<float>(), t.numel(), slot.init, on));
        state.buffers.push_back(std::move(t));
      } else {
        KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(DataType::kFloat32, dims, cpu_allocator(), "optimizer state"));
        std::fill_n(t.data<float>(), t.numel(), slot.init);
        state.buffers.push_back(std::move(t));
      }
    }
    states_.push_back(std::move(state));
  }
  if (on_device()) KILN_RETURN_IF_ERROR(device::synchronize(on));
  return Status::ok();
}
Result<std::unique_ptr<Optimizer>> Optimizer::create(const OptimizerOptions& options, std::vector<Parameter> params) {
  KILN_RETURN_IF_ERROR(validate(options));
  KILN_RETURN_IF_ERROR(check_parameters(params));
  std::unique_ptr<Optimizer> opt = std::visit(
      [&](const auto& o) -> std::unique_ptr<Optimizer> {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, SgdOptions>) {
          return std::make_unique<Sgd>(o, std::move(params));
        } else if constexpr (std::is_same_v<T, AdagradOptions>) {
          return std::make_unique<Adagrad>(o, std::move(params));
        } else if constexpr (std::is_same_v<T, RmspropOptions>) {
          return std::make_unique<Rmsprop>(o, std::move(params));
        } else if constexpr (std::is_same_v<T, AdadeltaOptions>) {
          return std::make_unique<Adadelta>(o, std::move(params));
        } else if constexpr (std::is_same_v<T, AdamOptions>) {
          return std::make_unique<Adam>("adam", o, o, std::move(params));
        } else if constexpr (std::is_same_v<T, AdamWOptions>) {
          return std::make_unique<Adam>("adamw", o, o, std::move(params));
        } else {
          static_assert(std::is_same_v<T, NovogradOptions>);
          return std::make_unique<Novograd>(o, std::move(params));
        }
      },
      options);
  KILN_RETURN_IF_ERROR(opt->init_state());
  return opt;
}

Result<std::unique_ptr<Optimizer>> Optimizer::create(const OptionMap& config, std::vector<Parameter> params,
                                                     std::string_view where) {
  KILN_ASSIGN_OR_RETURN(OptimizerOptions options, parse_optimizer_options(config, where));
  return create(options, std::move(params));
}

Status Optimizer::check_list() const {
  if (params_.size() != states_.size())
    return invalid_argument("the optimizer was created for ", states_.size(), " parameters but now has ",
                            params_.size(), "; create a new optimizer for another parameter list");
  return Status::ok();
}

Status Optimizer::check_step() const {
  KILN_RETURN_IF_ERROR(check_list());
  KILN_RETURN_IF_ERROR(check_parameters(params_));
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].value.dims() != states_[i].dims)
      return invalid_argument("parameter '", params_[i].name, "' changed dims from ", states_[i].dims.to_string(),
                              " to ", params_[i].value.dims().to_string(), " since the optimizer was created");
  }
  if (!params_.empty() && params_[0].value.device() != device_)
    return invalid_argument("parameter '", params_[0].name, "' is on ", params_[0].value.device().to_string(),
                            " but the optimizer was created for parameters (and keeps its state) on ",
                            device_.to_string(), "; create a new optimizer for the new device");
  if (on_device() && stream_ != nullptr && stream_->device() != device_)
    return invalid_argument("the optimizer's stream is on ", stream_->device().to_string(),
                            " but its parameters are on ", device_.to_string(),
                            "; set a stream of the parameters' device");
  return Status::ok();
}

Status Optimizer::finish_own_stream() const {
  if (!on_device() || stream_ != nullptr) return Status::ok();
  return device::synchronize(device::launch_on(device_, own_stream_.get()));
}

Status Optimizer::step() { return step(StepOptions{}).status(); }

Result<bool> Optimizer::step(const StepOptions& options) {
  KILN_RETURN_IF_ERROR(check_step());
  if (!(options.grad_scale > 0) || !std::isfinite(options.grad_scale))
    return invalid_argument("optimizer step: grad_scale ", options.grad_scale,
                            " must be finite and > 0 (the factor the loss, and so the grads, were multiplied by)");
  Stream* stream = on_device() ? work_stream() : nullptr;
  if (options.grad_scale != 1 || options.skip_nonfinite) {
    KILN_ASSIGN_OR_RETURN(bool nonfinite, unscale_grads(params_, options.grad_scale, stream));
    if (nonfinite && options.skip_nonfinite) return false;
  }
  const OptimizerCommon& c = common();
  if (c.clip_grad_value > 0) KILN_RETURN_IF_ERROR(clip_grad_value(params_, c.clip_grad_value, stream));
  if (c.clip_grad_norm > 0) KILN_RETURN_IF_ERROR(clip_grad_norm(params_, c.clip_grad_norm, 2.0, stream).status());
  // Decoupled weight decay scales the weights by 1 - lr * weight_decay before the update (in the same
  // pass; a factor of exactly 1 leaves them unchanged).
  const auto decay = static_cast<float>(c.decoupled_weight_decay ? 1.0 - lr_ * c.weight_decay : 1.0);
  for (size_t i = 0; i < params_.size(); ++i) {
    Parameter& p = params_[i];
    if (!p.grad.defined()) continue;
    ParamState& state = states_[i];
    ++state.step;
    KILN_RETURN_IF_ERROR(update(state, p.value.data<float>(), p.grad.data<float>(), p.value.numel(), decay));
  }
  KILN_RETURN_IF_ERROR(finish_own_stream());
  return true;
}

Result<std::map<std::string, Tensor>> Optimizer::export_state() const {
  KILN_RETURN_IF_ERROR(check_list());
  std::vector<Slot> slot_list = slots();
  const device::Launch on = device::launch_on(device_, work_stream());
  std::map<std::string, Tensor> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Tensor step, Tensor::empty(DataType::kInt64, Dims{}));
    *step.data<int64_t>() = states_[i].step;
    out[params_[i].name + ".step"] = std::move(step);
    for (size_t s = 0; s < slot_list.size(); ++s) {
      const Tensor& buffer = states_[i].buffers[s];
      Tensor copy;
      if (on_device()) {
        // Queued after the steps on the work stream, so it reads their results.
        KILN_ASSIGN_OR_RETURN(copy, Tensor::empty(DataType::kFloat32, buffer.dims()));
        KILN_RETURN_IF_ERROR(device::copy_and_wait(copy.raw(), buffer.raw(), buffer.nbytes(), on));
      } else {
        KILN_ASSIGN_OR_RETURN(copy, buffer.clone());
      }
      out[params_[i].name + "." + slot_list[s].name] = std::move(copy);
    }
  }
  return out;
}
Status Optimizer::import_state(const std::map<std::string, Tensor>& state) {
  KILN_RETURN_IF_ERROR(check_list());
  std::vector<Slot> slot_list = slots();
  // Check everything before changing anything.
  auto find = [&](const std::string& key, DataType dtype, const Dims& dims) -> Result<const Tensor*> {
    auto it = state.find(key);
    if (it == state.end())
      return invalid_argument("optimizer state has no '", key, "'; was it saved by another optimizer (this one is ",
                              name_, ") or for other parameters?");
    const Tensor& t = it->second;
    if (t.dtype() != dtype || t.dims() != dims || !t.device().is_cpu() || !t.is_contiguous())
      return invalid_argument("optimizer state '", key, "' is ", t.describe(), "; expected ", dtype_name(dtype),
                              dims.to_string(), " on the host");
    return &t;
  };
  std::vector<std::vector<const Tensor*>> sources(params_.size());
  std::vector<int64_t> steps(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(const Tensor* step, find(params_[i].name + ".step", DataType::kInt64, Dims{}));
    steps[i] = *step->data<int64_t>();
    if (steps[i] < 0) return invalid_argument("optimizer state '", params_[i].name, ".step' is negative");
    for (size_t s = 0; s < slot_list.size(); ++s) {
      Dims dims = slot_list[s].scalar ? Dims{} : states_[i].dims;
      KILN_ASSIGN_OR_RETURN(const Tensor* t, find(params_[i].name + "." + slot_list[s].name, DataType::kFloat32, dims));
      sources[i].push_back(t);
    }
  }
  size_t expected = params_.size() * (1 + slot_list.size());
  if (state.size() != expected) {
    std::set<std::string> known;
    for (const Parameter& p : params_) {
      known.insert(p.name + ".step");
      for (const Slot& s : slot_list) known.insert(p.name + "." + s.name);
    }
    for (const auto& [key, value] : state)
      if (!known.count(key))
        return invalid_argument("optimizer state has '", key, "', which is not state of this ", name_,
                                " optimizer; was it saved by another optimizer or for other parameters?");
  }
  const device::Launch on = device::launch_on(device_, work_stream());
  for (size_t i = 0; i < params_.size(); ++i) {
    states_[i].step = steps[i];
    for (size_t s = 0; s < slot_list.size(); ++s) {
      if (on_device()) {
        // Queued after earlier steps on the work stream; waits, so the host tensors may go when it returns.
        KILN_RETURN_IF_ERROR(
            device::copy_and_wait(states_[i].buffers[s].raw(), sources[i][s]->raw(), sources[i][s]->nbytes(), on));
      } else {
        std::memcpy(states_[i].buffers[s].raw(), sources[i][s]->raw(), sources[i][s]->nbytes());
      }
    }
  }
  return Status::ok();
}

}  // namespace kiln::train
