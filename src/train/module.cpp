#include "train/module.h"

#include <cmath>

#include "ops/activation/activation.h"
#include "ops/convolution/convolution.h"
#include "ops/dropout/dropout.h"
#include "ops/elementwise/elementwise.h"
#include "ops/matmul/matmul.h"
#include "ops/normalization/normalization.h"
#include "ops/normalization/normalization_train.h"
#include "ops/pooling/pooling.h"
#include "ops/shuffle/shuffle.h"

namespace kiln::train {

// ParameterStore

Result<Tensor> ParameterStore::get_or_create(const std::string& name, const Dims& dims, const Init& init,
                                             bool trainable) {
  if (auto it = entries_.find(name); it != entries_.end()) {
    if (it->second.value.dims() != dims)
      return invalid_argument("parameter '", name, "' exists with shape ", it->second.value.dims().to_string(),
                              " but the model asks for ", dims.to_string());
    return it->second.value;
  }
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(DataType::kFloat32, dims, cpu_allocator(), "parameter"));
  float* p = t.data<float>();
  const int64_t n = t.numel();
  const double fan = static_cast<double>(std::max<int64_t>(init.fan_in, 1));
  switch (init.kind) {
    case Init::Kind::kZeros: std::fill(p, p + n, 0.f); break;
    case Init::Kind::kOnes: std::fill(p, p + n, 1.f); break;
    case Init::Kind::kUniform:
    case Init::Kind::kKaimingUniform: {
      const double bound = 1.0 / std::sqrt(fan);
      std::uniform_real_distribution<double> d(init.kind == Init::Kind::kUniform ? init.a : -bound,
                                               init.kind == Init::Kind::kUniform ? init.b : bound);
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(d(rng_));
      break;
    }
    case Init::Kind::kNormal:
    case Init::Kind::kKaimingNormal: {
      std::normal_distribution<double> d(init.kind == Init::Kind::kNormal ? init.a : 0.0,
                                         init.kind == Init::Kind::kNormal ? init.b : std::sqrt(2.0 / fan));
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(d(rng_));
      break;
    }
  }
  entries_[name] = Entry{t, trainable};
  return t;
}

const ParameterStore::Entry* ParameterStore::find(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

ParameterStore::Entry* ParameterStore::find(const std::string& name) {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

std::vector<std::string> ParameterStore::names(bool trainable) const {
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_)
    if (e.trainable == trainable) out.push_back(name);
  return out;
}

Status ParameterStore::assign(const std::string& name, const Tensor& value) {
  Entry* e = find(name);
  if (!e) return invalid_argument("the model has no parameter or buffer '", name, "'");
  if (e->value.dims() != value.dims() || value.dtype() != DataType::kFloat32)
    return invalid_argument("'", name, "' has shape ", e->value.dims().to_string(), " float32 in the model but ",
                            value.dims().to_string(), " ", dtype_name(value.dtype()), " in the checkpoint");
  KILN_ASSIGN_OR_RETURN(Tensor src, value.contiguous());
  std::copy_n(static_cast<const char*>(src.raw()), src.nbytes(), static_cast<char*>(e->value.raw()));
  return {};
}

int64_t ParameterStore::parameter_count() const {
  int64_t n = 0;
  for (const auto& [name, e] : entries_)
    if (e.trainable) n += e.value.numel();
  return n;
}

// ModuleContext

std::string ModuleContext::scoped(const std::string& local) const {
  std::string out;
  for (const std::string& s : scope_) out += s + ".";
  return out + local;
}

Result<Value*> ModuleContext::tensor(const std::string& local, const Dims& dims, const Init& init, bool trainable) {
  const std::string name = scoped(local);
  KILN_ASSIGN_OR_RETURN(Tensor value, store_.get_or_create(name, dims, init, trainable));
  if (Value* existing = graph_.find_value(name)) return existing;  // shared weights
  (trainable && !no_grad() ? params_ : buffers_).push_back(name);
  if (constants_) return graph_.add_constant(name, value);
  return graph_.add_input(name, DataType::kFloat32, dims);
}

Result<Value*> ModuleContext::param(const std::string& local, const Dims& dims, const Init& init) {
  return tensor(local, dims, init, true);
}

Result<Value*> ModuleContext::buffer(const std::string& local, const Dims& dims, const Init& init) {
  return tensor(local, dims, init, false);
}

Result<Value*> ModuleContext::step_input() {
  if (Value* v = graph_.find_value(std::string(kStepInput))) return v;
  return graph_.add_input(std::string(kStepInput), DataType::kInt64, Dims{});
}

int64_t ModuleContext::scope_seed() const {
  uint64_t h = 1469598103934665603ull ^ store_.seed();
  for (char ch : scoped("")) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  return static_cast<int64_t>(h >> 1);
}

Status ModuleContext::update_buffer(const std::string& local, Value* next) {
  if (!training()) return {};
  const std::string name = scoped(local);
  if (!store_.find(name)) return internal_error("buffer '", name, "' is updated before it is created");
  KILN_RETURN_IF_ERROR(graph_.mark_output(next));
  updates_[name] = next->name;
  return {};
}

Result<std::vector<Value*>> ModuleContext::add(std::string_view op, std::unique_ptr<Attrs> attrs,
                                               std::vector<Value*> inputs) {
  std::string name = scoped(std::string(op));
  if (graph_.find_node(name) || graph_.find_value(name)) name += "#" + std::to_string(++counter_);
  KILN_ASSIGN_OR_RETURN(Node * node, graph_.add_node(op, name, std::move(attrs), std::move(inputs)));
  if (no_grad())
    for (const Value* v : node->outputs) no_grad_values_.push_back(v->name);
  return node->outputs;
}

Result<Value*> ModuleContext::add1(std::string_view op, std::unique_ptr<Attrs> attrs, std::vector<Value*> inputs) {
  KILN_ASSIGN_OR_RETURN(std::vector<Value*> outs, add(op, std::move(attrs), std::move(inputs)));
  return outs.at(0);
}

// Sequential

Sequential::Sequential(std::vector<ModulePtr> children) {
  for (auto& c : children) add(std::move(c));
}

Sequential& Sequential::add(ModulePtr child, std::string name) {
  if (name.empty()) name = std::to_string(children_.size());
  children_.emplace_back(std::move(name), std::move(child));
  return *this;
}

Result<Value*> Sequential::forward(ModuleContext& ctx, Value* x) {
  for (auto& [name, child] : children_) {
    ctx.push(name);
    auto y = child->forward(ctx, x);
    ctx.pop();
    if (!y.is_ok()) return y.take_status();
    x = *y;
  }
  return x;
}

std::string Sequential::describe() const {
  std::string out = "Sequential(\n";
  for (const auto& [name, child] : children_) out += "  (" + name + "): " + child->describe() + "\n";
  return out + ")";
}

namespace {

class Conv2d : public Module {
 public:
  Conv2d(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t pad, int64_t groups, bool bias)
      : in_(in), out_(out), k_(k), stride_(stride), pad_(pad), groups_(groups), bias_(bias) {}
  Result<Value*> forward(ModuleContext& ctx, Value* x) override {
    if (x->dims.rank() != 4 || (x->dims[1] >= 0 && x->dims[1] != in_))
      return invalid_argument(ctx.scoped("conv"), ": ", describe(), " expects [N, ", in_, ", H, W] but gets ",
                              x->dims.to_string());
    const int64_t fan_in = in_ / groups_ * k_ * k_;
    KILN_ASSIGN_OR_RETURN(Value * w,
                          ctx.param("weight", Dims{out_, in_ / groups_, k_, k_}, Init::fan_in_uniform(fan_in)));
    std::vector<Value*> ins{x, w};
    if (bias_) {
      KILN_ASSIGN_OR_RETURN(Value * b, ctx.param("bias", Dims{out_}, Init::fan_in_uniform(fan_in)));
      ins.push_back(b);
    }
    auto a = std::make_unique<ConvolutionAttrs>();
    a->kernel_shape = {k_, k_};
    a->strides = {stride_, stride_};
    a->pads = {pad_, pad_, pad_, pad_};
    a->group = groups_;
    return ctx.add1("Convolution", std::move(a), std::move(ins));
  }
  std::string describe() const override {
    return str_cat("Conv2d(", in_, ", ", out_, ", kernel ", k_, ", stride ", stride_, ", pad ", pad_,
                   groups_ > 1 ? str_cat(", groups ", groups_) : "", bias_ ? "" : ", no bias", ")");
  }

 private:
  int64_t in_, out_, k_, stride_, pad_, groups_;
  bool bias_;
};

class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, bool bias) : in_(in), out_(out), bias_(bias) {}
  Result<Value*> forward(ModuleContext& ctx, Value* x) override {
    int64_t k = 1;  // a dynamic dim leaves the check to FullyConnected at run time
    for (int i = 1; i < x->dims.rank(); ++i) k = (k < 0 || x->dims[i] < 0) ? -1 : k * x->dims[i];
    if (x->dims.rank() < 2 || (k >= 0 && k != in_))
      return invalid_argument(ctx.scoped("linear"), ": ", describe(), " expects [N, ", in_, "] but gets ",
                              x->dims.to_string());
    KILN_ASSIGN_OR_RETURN(Value * w, ctx.param("weight", Dims{out_, in_}, Init::fan_in_uniform(in_)));
    std::vector<Value*> ins{x, w};
    if (bias_) {
      KILN_ASSIGN_OR_RETURN(Value * b, ctx.param("bias", Dims{out_}, Init::fan_in_uniform(in_)));
      ins.push_back(b);
    }
    return ctx.add1("FullyConnected", std::make_unique<FullyConnectedAttrs>(), std::move(ins));
  }
  std::string describe() const override { return str_cat("Linear(", in_, ", ", out_, bias_ ? "" : ", no bias", ")"); }

 private:
  int64_t in_, out_;
  bool bias_;
};

class Relu : public Module {
 public:
  Result<Value*> forward(ModuleContext& ctx, Value* x) override {
    return ctx.add1("Activation", std::make_unique<ActivationAttrs>(activation_defaults(ActivationKind::kRelu)), {x});
  }
  std::string describe() const override { return "ReLU()"; }
};

class Pool2d : public Module {
 public:
  Pool2d(PoolingMode mode, int64_t k, int64_t stride, int64_t pad, bool global, bool ceil_mode = false)
      : mode_(mode), k_(k), stride_(stride ? stride : k), pad_(pad), global_(global), ceil_(ceil_mode) {}
  Result<Value*> forward(ModuleContext& ctx, Value* x) override {
    auto a = std::make_unique<PoolingAttrs>();
    a->mode = mode_;
    a->global = global_;
    if (!global_) {
      a->kernel_shape = {k_, k_};
      a->strides = {stride_, stride_};
      a->pads = {pad_, pad_, pad_, pad_};
      a->count_include_pad = true;  // PyTorch's AvgPool2d default
      a->ceil_mode = ceil_;
    }
    return ctx.add1("Pooling", std::move(a), {x});
  }
  std::string describe() const override {
    const char* kind = mode_ == PoolingMode::kMax ? "MaxPool2d" : "AvgPool2d";
    if (global_) return str_cat("Global", kind, "()");
    return str_cat(kind, "(kernel ", k_, ", stride ", stride_, ", pad ", pad_, ")");
  }

 private:
  PoolingMode mode_;
  int64_t k_, stride_, pad_;
  bool global_, ceil_;
};

class Flatten : public Module {
 public:
  Result<Value*> forward(ModuleContext& ctx, Value* x) override {
    auto a = std::make_unique<ShuffleAttrs>();
    a->has_reshape_dims = true;
    a->reshape_dims = {0, -1};
    return ctx.add1("Shuffle", std::move(a), {x});
  }
  std::string describe() const override { return "Flatten()"; }
};

class BatchNorm2d : public Module {
 public:
  BatchNorm2d(int64_t c, double eps, double momentum) : c_(c), eps_(eps), momentum_(momentum) {}
  Result<Value*> forward(ModuleContext& ctx, Value* x) override {
    if (x->dims.rank() < 2 || x->dims[1] != c_)
      return invalid_argument(ctx.scoped("batch_norm"), ": ", describe(), " expects ", c_, " channels but gets ",
                              x->dims.to_string());
    KILN_ASSIGN_OR_RETURN(Value * scale, ctx.param("weight", Dims{c_}, Init::ones()));
    KILN_ASSIGN_OR_RETURN(Value * bias, ctx.param("bias", Dims{c_}, Init::zeros()));
    KILN_ASSIGN_OR_RETURN(Value * mean, ctx.buffer("running_mean", Dims{c_}, Init::zeros()));
    KILN_ASSIGN_OR_RETURN(Value * var, ctx.buffer("running_var", Dims{c_}, Init::ones()));
    if (!ctx.training()) {
      auto a = std::make_unique<BatchNormalizationAttrs>();
      a->epsilon = static_cast<float>(eps_);
      return ctx.add1("BatchNormalization", std::move(a), {x, scale, bias, mean, var});
    }
    auto a = std::make_unique<BatchNormalizationTrainingAttrs>();
    a->epsilon = static_cast<float>(eps_);
    a->momentum = static_cast<float>(1.0 - momentum_);  // ONNX's convention: the weight of the running value
    KILN_ASSIGN_OR_RETURN(std::vector<Value*> outs,
                          ctx.add("BatchNormalizationTraining", std::move(a), {x, scale, bias, mean, var}));
    KILN_RETURN_IF_ERROR(ctx.update_buffer("running_mean", outs[1]));
    KILN_RETURN_IF_ERROR(ctx.update_buffer("running_var", outs[2]));
    return outs[0];
  }
  std::string describe() const override { return str_cat("BatchNorm2d(", c_, ")"); }

 private:
  int64_t c_;
  double eps_, momentum_;
};

class Dropout : public Module {
 public:
  explicit Dropout(double ratio) : ratio_(ratio) {}
  Result<Value*> forward(ModuleContext& ctx, Value* x) override {
    if (!ctx.training() || ratio_ == 0) return x;
    KILN_ASSIGN_OR_RETURN(Value * step, ctx.step_input());
    auto a = std::make_unique<DropoutAttrs>();
    a->ratio = static_cast<float>(ratio_);
    a->seed = ctx.scope_seed();
    return ctx.add1("Dropout", std::move(a), {x, step});
  }
  std::string describe() const override { return str_cat("Dropout(", ratio_, ")"); }

 private:
  double ratio_;
};

class Residual : public Module {
 public:
  Residual(ModulePtr body, ModulePtr shortcut, ModulePtr after)
      : body_(std::move(body)), shortcut_(std::move(shortcut)), after_(std::move(after)) {}
  Result<Value*> forward(ModuleContext& ctx, Value* x) override {
    ctx.push("body");
    auto y = body_->forward(ctx, x);
    ctx.pop();
    if (!y.is_ok()) return y.take_status();
    Value* s = x;
    if (shortcut_) {
      ctx.push("shortcut");
      auto r = shortcut_->forward(ctx, x);
      ctx.pop();
      if (!r.is_ok()) return r.take_status();
      s = *r;
    }
    KILN_ASSIGN_OR_RETURN(
        Value * sum,
        ctx.add1("ElementWise", std::make_unique<ElementWiseAttrs>(elementwise_attrs(ElementWiseOp::kSum)), {*y, s}));
    if (!after_) return sum;
    return after_->forward(ctx, sum);
  }
  std::string describe() const override {
    return "Residual(" + body_->describe() + (shortcut_ ? " + " + shortcut_->describe() : " + identity") + ")";
  }

 private:
  ModulePtr body_, shortcut_, after_;
};

class ConcatBranches : public Module {
 public:
  explicit ConcatBranches(std::vector<ModulePtr> branches) : branches_(std::move(branches)) {}
  Result<Value*> forward(ModuleContext& ctx, Value* x) override {
    std::vector<Value*> outs;
    for (size_t i = 0; i < branches_.size(); ++i) {
      ctx.push("branch" + std::to_string(i + 1));
      auto y = branches_[i]->forward(ctx, x);
      ctx.pop();
      if (!y.is_ok()) return y.take_status();
      outs.push_back(*y);
    }
    auto a = std::make_unique<ConcatenationAttrs>();
    a->axis = 1;
    return ctx.add1("Concatenation", std::move(a), std::move(outs));
  }
  std::string describe() const override { return str_cat("ConcatBranches(", branches_.size(), " branches)"); }

 private:
  std::vector<ModulePtr> branches_;
};

}  // namespace

ModulePtr batch_norm2d(int64_t channels, double epsilon, double momentum) {
  return std::make_shared<BatchNorm2d>(channels, epsilon, momentum);
}
ModulePtr dropout(double ratio) { return std::make_shared<Dropout>(ratio); }
ModulePtr residual(ModulePtr body, ModulePtr shortcut, ModulePtr after) {
  return std::make_shared<Residual>(std::move(body), std::move(shortcut), std::move(after));
}
ModulePtr concat_branches(std::vector<ModulePtr> branches) {
  return std::make_shared<ConcatBranches>(std::move(branches));
}

ModulePtr conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t pad, int64_t groups, bool bias) {
  return std::make_shared<Conv2d>(in, out, kernel, stride, pad, groups, bias);
}
ModulePtr linear(int64_t in, int64_t out, bool bias) { return std::make_shared<Linear>(in, out, bias); }
ModulePtr relu() { return std::make_shared<Relu>(); }
ModulePtr max_pool2d(int64_t kernel, int64_t stride, int64_t pad, bool ceil_mode) {
  return std::make_shared<Pool2d>(PoolingMode::kMax, kernel, stride, pad, false, ceil_mode);
}
ModulePtr avg_pool2d(int64_t kernel, int64_t stride, int64_t pad) {
  return std::make_shared<Pool2d>(PoolingMode::kAverage, kernel, stride, pad, false);
}
ModulePtr global_avg_pool() { return std::make_shared<Pool2d>(PoolingMode::kAverage, 0, 0, 0, true); }
ModulePtr flatten() { return std::make_shared<Flatten>(); }

}  // namespace kiln::train

namespace kiln::train {
namespace {

class NoGradModule final : public Module {
 public:
  explicit NoGradModule(ModulePtr inner) : inner_(std::move(inner)) {}
  Result<Value*> forward(ModuleContext& ctx, Value* x) override {
    ModuleContext::NoGrad region(ctx);
    return inner_->forward(ctx, x);
  }
  std::string describe() const override { return "NoGrad(" + inner_->describe() + ")"; }

 private:
  ModulePtr inner_;
};

}  // namespace

ModulePtr no_grad(ModulePtr inner) { return std::make_shared<NoGradModule>(std::move(inner)); }

}  // namespace kiln::train
