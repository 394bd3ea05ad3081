#include "train/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <type_traits>

#include "train/optim/gradients.h"
#include "train/optim/loops.h"

namespace kiln::train {
namespace {

// The element rules mirror PyTorch's (torch/optim/*.py, single-tensor path) operation by operation, in
// float with the scalars rounded to float as PyTorch does: `a.mul_(b1).add_(g, alpha=1 - b1)` is
// a * b1 + (1 - b1) * g, addcmul(t1, t2, value=s) is a + s * t1 * t2, addcdiv is a + s * (t1 / t2).

class Sgd final : public Optimizer {
 public:
  Sgd(const SgdOptions& o, std::vector<Parameter> params) : Optimizer("sgd", o, std::move(params)), o_(o) {}

 protected:
  std::vector<Slot> slots() const override {
    if (o_.momentum == 0) return {};
    return {{"momentum_buffer"}};
  }
  void update(ParamState& state, float* p, const float* g, int64_t n, float decay) override {
    const auto wd = static_cast<float>(l2_decay());
    const auto neg_lr = static_cast<float>(-lr());
    const auto m = static_cast<float>(o_.momentum);
    const auto keep = static_cast<float>(1.0 - o_.dampening);
    const bool first = state.step == 1;
    float* buf = o_.momentum != 0 ? state.buffer(0) : nullptr;
    loops::dispatch(
        [&](auto l2, auto momentum, auto nesterov) {
          loops::for_chunks(n, [&](int64_t b, int64_t e) {
#pragma omp simd
            for (int64_t i = b; i < e; ++i) {
              const float w = p[i] * decay;
              float d = g[i];
              if constexpr (decltype(l2)::value) d = d + wd * w;
              if constexpr (decltype(momentum)::value) {
                buf[i] = first ? d : buf[i] * m + keep * d;
                d = decltype(nesterov)::value ? d + m * buf[i] : buf[i];
              }
              p[i] = w + neg_lr * d;
            }
          });
        },
        wd != 0, o_.momentum != 0, o_.nesterov);
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
  void update(ParamState& state, float* p, const float* g, int64_t n, float decay) override {
    const auto wd = static_cast<float>(l2_decay());
    const double clr = lr() / (1 + static_cast<double>(state.step - 1) * o_.lr_decay);
    const auto neg_clr = static_cast<float>(-clr);
    const auto eps = static_cast<float>(o_.eps);
    float* sum = state.buffer(0);
    loops::dispatch(
        [&](auto l2) {
          loops::for_chunks(n, [&](int64_t b, int64_t e) {
#pragma omp simd
            for (int64_t i = b; i < e; ++i) {
              const float w = p[i] * decay;
              float d = g[i];
              if constexpr (decltype(l2)::value) d = d + wd * w;
              sum[i] = sum[i] + d * d;
              float std = std::sqrt(sum[i]) + eps;
              p[i] = w + neg_clr * (d / std);
            }
          });
        },
        wd != 0);
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
  void update(ParamState& state, float* p, const float* g, int64_t n, float decay) override {
    const auto wd = static_cast<float>(l2_decay());
    const auto neg_lr = static_cast<float>(-lr());
    const auto alpha = static_cast<float>(o_.alpha);
    const auto one_minus_alpha = static_cast<float>(1.0 - o_.alpha);
    const auto eps = static_cast<float>(o_.eps);
    const auto m = static_cast<float>(o_.momentum);
    const bool has_momentum = o_.momentum > 0;
    float* sq = state.buffer(0);
    float* buf = has_momentum ? state.buffer(1) : nullptr;
    float* ga = o_.centered ? state.buffer(has_momentum ? 2 : 1) : nullptr;
    loops::dispatch(
        [&](auto l2, auto momentum, auto centered) {
          loops::for_chunks(n, [&](int64_t b, int64_t e) {
#pragma omp simd
            for (int64_t i = b; i < e; ++i) {
              const float w = p[i] * decay;
              float d = g[i];
              if constexpr (decltype(l2)::value) d = d + wd * w;
              sq[i] = sq[i] * alpha + one_minus_alpha * d * d;
              float avg;
              if constexpr (decltype(centered)::value) {
                ga[i] = ga[i] * alpha + one_minus_alpha * d;
                avg = std::sqrt(sq[i] + -1.0f * ga[i] * ga[i]);
              } else {
                avg = std::sqrt(sq[i]);
              }
              avg = avg + eps;
              if constexpr (decltype(momentum)::value) {
                buf[i] = buf[i] * m + d / avg;
                p[i] = w + neg_lr * buf[i];
              } else {
                p[i] = w + neg_lr * (d / avg);
              }
            }
          });
        },
        wd != 0, has_momentum, o_.centered);
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
  void update(ParamState& state, float* p, const float* g, int64_t n, float decay) override {
    const auto wd = static_cast<float>(l2_decay());
    const auto neg_lr = static_cast<float>(-lr());
    const auto rho = static_cast<float>(o_.rho);
    const auto one_minus_rho = static_cast<float>(1.0 - o_.rho);
    const auto eps = static_cast<float>(o_.eps);
    float* sq = state.buffer(0);
    float* acc = state.buffer(1);
    loops::dispatch(
        [&](auto l2) {
          loops::for_chunks(n, [&](int64_t b, int64_t e) {
#pragma omp simd
            for (int64_t i = b; i < e; ++i) {
              const float w = p[i] * decay;
              float d = g[i];
              if constexpr (decltype(l2)::value) d = d + wd * w;
              sq[i] = sq[i] * rho + one_minus_rho * d * d;
              float std = std::sqrt(sq[i] + eps);
              float delta = std::sqrt(acc[i] + eps) / std * d;
              acc[i] = acc[i] * rho + one_minus_rho * delta * delta;
              p[i] = w + neg_lr * delta;
            }
          });
        },
        wd != 0);
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
  void update(ParamState& state, float* p, const float* g, int64_t n, float decay) override {
    const auto wd = static_cast<float>(l2_decay());
    const auto b1 = static_cast<float>(o_.beta1), b2 = static_cast<float>(o_.beta2);
    const auto one_minus_b1 = static_cast<float>(1.0 - o_.beta1);
    const auto one_minus_b2 = static_cast<float>(1.0 - o_.beta2);
    const auto step = static_cast<double>(state.step);
    const double bias_correction1 = 1 - std::pow(o_.beta1, step);
    const double bias_correction2 = 1 - std::pow(o_.beta2, step);
    const auto neg_step_size = static_cast<float>(-(lr() / bias_correction1));
    const auto bc2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
    const auto eps = static_cast<float>(o_.eps);
    float* m = state.buffer(0);
    float* v = state.buffer(1);
    float* vmax = o_.amsgrad ? state.buffer(2) : nullptr;
    loops::dispatch(
        [&](auto l2, auto amsgrad) {
          loops::for_chunks(n, [&](int64_t b, int64_t e) {
#pragma omp simd
            for (int64_t i = b; i < e; ++i) {
              const float w = p[i] * decay;
              float d = g[i];
              if constexpr (decltype(l2)::value) d = d + wd * w;
              m[i] = m[i] * b1 + one_minus_b1 * d;
              v[i] = v[i] * b2 + one_minus_b2 * d * d;
              float second = v[i];
              if constexpr (decltype(amsgrad)::value) {
                vmax[i] = vmax[i] > v[i] ? vmax[i] : v[i];
                second = vmax[i];
              }
              float denom = std::sqrt(second) / bc2_sqrt + eps;
              p[i] = w + neg_step_size * (m[i] / denom);
            }
          });
        },
        wd != 0, o_.amsgrad);
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
  void update(ParamState& state, float* p, const float* g, int64_t n, float /*decay*/) override {
    // The layer's second moment: the squared L2 norm of its gradient, averaged over steps.
    const auto grad_norm = static_cast<float>(std::sqrt(loops::sum_squares(g, n)));
    const float norm_sq = grad_norm * grad_norm;
    float& v = *state.buffer(1);
    v = v == 0 ? norm_sq : v * static_cast<float>(o_.beta2) + static_cast<float>(1.0 - o_.beta2) * norm_sq;
    float second = v;
    if (o_.amsgrad) {
      float& vmax = *state.buffer(2);
      vmax = vmax > v ? vmax : v;
      second = vmax;
    }
    const float denom = std::sqrt(second) + static_cast<float>(o_.eps);
    // NovoGrad's weight decay is its own (added to the normalized gradient), so `decay` is always 1.
    const auto wd = static_cast<float>(weight_decay());
    const auto b1 = static_cast<float>(o_.beta1);
    const auto scale = static_cast<float>(o_.grad_averaging ? 1.0 - o_.beta1 : 1.0);
    const auto neg_lr = static_cast<float>(-lr());
    float* m = state.buffer(0);
    // Without layer-wise update clipping the weights are updated in the same pass as the moment.
    loops::dispatch(
        [&](auto weight_decay, auto averaging, auto update) {
          loops::for_chunks(n, [&](int64_t b, int64_t e) {
#pragma omp simd
            for (int64_t i = b; i < e; ++i) {
              float d = g[i] / denom;
              if constexpr (decltype(weight_decay)::value) d = d + wd * p[i];
              if constexpr (decltype(averaging)::value) d = d * scale;
              m[i] = m[i] * b1 + d;
              if constexpr (decltype(update)::value) p[i] = p[i] + neg_lr * m[i];
            }
          });
        },
        wd != 0, o_.grad_averaging, !o_.luc);
    if (!o_.luc) return;
    const auto data_norm = static_cast<float>(std::sqrt(loops::sum_squares(p, n)));
    const auto update_norm = static_cast<float>(std::sqrt(loops::sum_squares(m, n)));
    const float factor = static_cast<float>(o_.luc_trust) * data_norm / (update_norm + static_cast<float>(o_.luc_eps));
    const auto neg_luc_lr = static_cast<float>(-std::min(static_cast<double>(factor), lr()));
    loops::for_chunks(n, [&](int64_t b, int64_t e) {
#pragma omp simd
      for (int64_t i = b; i < e; ++i) p[i] = p[i] + neg_luc_lr * m[i];
    });
  }

 private:
  NovogradOptions o_;
};

Status check_host_float(const Tensor& t, const std::string& what) {
  if (t.dtype() != DataType::kFloat32)
    return invalid_argument(what, " is ", t.describe(), "; optimizers take float32 (FP32 master weights)");
  if (!t.device().is_cpu())
    return unsupported(what, " is ", t.describe(), "; optimizers run on host memory for now: copy it to the host");
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
    KILN_RETURN_IF_ERROR(check_host_float(p.value, str_cat("parameter '", p.name, "'")));
    if (!p.grad.defined()) continue;
    KILN_RETURN_IF_ERROR(check_host_float(p.grad, str_cat("the gradient of '", p.name, "'")));
    if (p.grad.dims() != p.value.dims())
      return invalid_argument("the gradient of '", p.name, "' has dims ", p.grad.dims().to_string(),
                              " but the parameter has ", p.value.dims().to_string());
  }
  return Status::ok();
}

Optimizer::Optimizer(std::string name, OptimizerOptions options, std::vector<Parameter> params)
    : name_(std::move(name)), options_(options), params_(std::move(params)), lr_(common().lr) {}

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
  for (const Parameter& p : params_) {
    ParamState state;
    state.dims = p.value.dims();
    for (const Slot& slot : slot_list) {
      KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(DataType::kFloat32, slot.scalar ? Dims{} : p.value.dims(),
                                                    cpu_allocator(), "optimizer state"));
      std::fill_n(t.data<float>(), t.numel(), slot.init);
      state.buffers.push_back(std::move(t));
    }
    states_.push_back(std::move(state));
  }
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

Status Optimizer::step() {
  KILN_RETURN_IF_ERROR(check_list());
  KILN_RETURN_IF_ERROR(check_parameters(params_));
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].value.dims() != states_[i].dims)
      return invalid_argument("parameter '", params_[i].name, "' changed dims from ", states_[i].dims.to_string(),
                              " to ", params_[i].value.dims().to_string(), " since the optimizer was created");
  }
  const OptimizerCommon& c = common();
  if (c.clip_grad_value > 0) KILN_RETURN_IF_ERROR(clip_grad_value(params_, c.clip_grad_value));
  if (c.clip_grad_norm > 0) KILN_RETURN_IF_ERROR(clip_grad_norm(params_, c.clip_grad_norm).status());
  // Decoupled weight decay scales the weights by 1 - lr * weight_decay before the update (in the same
  // pass; a factor of exactly 1 leaves them unchanged).
  const auto decay = static_cast<float>(c.decoupled_weight_decay ? 1.0 - lr_ * c.weight_decay : 1.0);
  for (size_t i = 0; i < params_.size(); ++i) {
    Parameter& p = params_[i];
    if (!p.grad.defined()) continue;
    ParamState& state = states_[i];
    ++state.step;
    update(state, p.value.data<float>(), p.grad.data<float>(), p.value.numel(), decay);
  }
  return Status::ok();
}

Result<std::map<std::string, Tensor>> Optimizer::export_state() const {
  KILN_RETURN_IF_ERROR(check_list());
  std::vector<Slot> slot_list = slots();
  std::map<std::string, Tensor> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Tensor step, Tensor::empty(DataType::kInt64, Dims{}));
    *step.data<int64_t>() = states_[i].step;
    out[params_[i].name + ".step"] = std::move(step);
    for (size_t s = 0; s < slot_list.size(); ++s) {
      KILN_ASSIGN_OR_RETURN(Tensor copy, states_[i].buffers[s].clone());
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
  for (size_t i = 0; i < params_.size(); ++i) {
    states_[i].step = steps[i];
    for (size_t s = 0; s < slot_list.size(); ++s)
      std::memcpy(states_[i].buffers[s].raw(), sources[i][s]->raw(), sources[i][s]->nbytes());
  }
  return Status::ok();
}

}  // namespace kiln::train
