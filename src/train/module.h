#pragma once
// Modules: models written in C++ that add their ops to a graph IR. Parameters and buffers live in a
// ParameterStore (FP32 host tensors, initialized once from a seed); a module graph reads them as graph inputs
// (training and evaluation bind the store's tensors by address) or as constants (export).
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace kiln::train {

enum class Mode { kTrain, kEval };

/// The int64 scalar graph input a training step binds to its step number (Dropout draws a new mask per step).
inline constexpr std::string_view kStepInput = "train.step";

/// How a parameter starts. Kaiming-uniform is PyTorch's default for conv and linear weights
/// (bound = gain * sqrt(3 / fan_in) with a = sqrt(5), i.e. bound = 1 / sqrt(fan_in)).
struct Init {
  enum class Kind { kZeros, kOnes, kUniform, kNormal, kKaimingUniform, kKaimingNormal } kind = Init::Kind::kZeros;
  double a = 0, b = 0;  ///< uniform: [a, b]; normal: mean a, std b
  int64_t fan_in = 1;
  static Init zeros() { return {}; }
  static Init ones() { return {Kind::kOnes}; }
  static Init uniform(double lo, double hi) { return {Kind::kUniform, lo, hi}; }
  static Init normal(double mean, double std) { return {Kind::kNormal, mean, std}; }
  /// PyTorch's default for conv/linear weights and biases: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  static Init fan_in_uniform(int64_t fan_in) { return {Kind::kKaimingUniform, 0, 0, fan_in}; }
  /// He normal for ReLU networks: N(0, sqrt(2 / fan_in)).
  static Init kaiming_normal(int64_t fan_in) { return {Kind::kKaimingNormal, 0, 0, fan_in}; }
};

/// Parameters (trained) and buffers (state such as running statistics) by full name ("features.0.weight").
class ParameterStore {
 public:
  struct Entry {
    Tensor value;  ///< FP32, host, contiguous
    bool trainable = true;
  };
  explicit ParameterStore(uint64_t seed = 0) : seed_(seed), rng_(seed) {}
  uint64_t seed() const { return seed_; }

  /// The tensor named `name`, created and initialized on first use; a later use must ask the same dims.
  Result<Tensor> get_or_create(const std::string& name, const Dims& dims, const Init& init, bool trainable);
  const Entry* find(const std::string& name) const;
  Entry* find(const std::string& name);
  const std::map<std::string, Entry>& entries() const { return entries_; }
  std::vector<std::string> names(bool trainable) const;
  /// Replaces a value (checkpoint load); dims must match.
  Status assign(const std::string& name, const Tensor& value);
  int64_t parameter_count() const;

 private:
  std::map<std::string, Entry> entries_;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

/// What a module sees while it adds its ops: the graph, the store, the mode and a name scope.
class ModuleContext {
 public:
  ModuleContext(Graph& graph, ParameterStore& store, Mode mode, bool params_as_constants = false)
      : graph_(graph), store_(store), mode_(mode), constants_(params_as_constants) {}
  Graph& graph() { return graph_; }
  Mode mode() const { return mode_; }
  bool training() const { return mode_ == Mode::kTrain; }

  /// A trained parameter `local` of the current scope.
  Result<Value*> param(const std::string& local, const Dims& dims, const Init& init);
  /// A buffer (not trained) of the current scope.
  Result<Value*> buffer(const std::string& local, const Dims& dims, const Init& init);
  /// The step input (created on first use).
  Result<Value*> step_input();
  /// A seed for a random op of the current scope (stable across runs: a hash of the scope and the store's seed).
  int64_t scope_seed() const;
  /// In training: buffer `local` takes the value of `next` after each step (an output of the graph).
  Status update_buffer(const std::string& local, Value* next);
  /// Adds op `op` named after the scope; returns its outputs.
  Result<std::vector<Value*>> add(std::string_view op, std::unique_ptr<Attrs> attrs, std::vector<Value*> inputs);
  Result<Value*> add1(std::string_view op, std::unique_ptr<Attrs> attrs, std::vector<Value*> inputs);

  /// Enters child scope `name` ("features" then "0": names "features.0.weight").
  void push(const std::string& name) { scope_.push_back(name); }
  void pop() { scope_.pop_back(); }
  std::string scoped(const std::string& local) const;

  /// A no-grad region (RAII): parameters created inside are frozen (graph inputs the optimizer does not update,
  /// listed with the buffers) and no gradient flows back through the values its ops produce.
  class NoGrad {
   public:
    explicit NoGrad(ModuleContext& ctx) : ctx_(ctx) { ++ctx_.no_grad_depth_; }
    ~NoGrad() { --ctx_.no_grad_depth_; }
    NoGrad(const NoGrad&) = delete;
    NoGrad& operator=(const NoGrad&) = delete;

   private:
    ModuleContext& ctx_;
  };
  bool no_grad() const { return no_grad_depth_ > 0; }
  /// The values produced inside no-grad regions (AutogradOptions::stop_gradient).
  const std::vector<std::string>& no_grad_values() const { return no_grad_values_; }

  /// Graph inputs that are parameters / buffers (names), and buffer -> value holding its next value.
  const std::vector<std::string>& param_names() const { return params_; }
  const std::vector<std::string>& buffer_names() const { return buffers_; }
  const std::map<std::string, std::string>& buffer_updates() const { return updates_; }

 private:
  Result<Value*> tensor(const std::string& local, const Dims& dims, const Init& init, bool trainable);

  Graph& graph_;
  ParameterStore& store_;
  Mode mode_;
  bool constants_;
  std::vector<std::string> scope_;
  std::vector<std::string> params_, buffers_;
  std::map<std::string, std::string> updates_;
  int counter_ = 0;
  int no_grad_depth_ = 0;
  std::vector<std::string> no_grad_values_;
};

class Module {
 public:
  virtual ~Module() = default;
  /// Adds the module's ops reading `x`; returns its output.
  virtual Result<Value*> forward(ModuleContext& ctx, Value* x) = 0;
  /// "Conv2d(1, 32, kernel 3, stride 1, pad 1)".
  virtual std::string describe() const = 0;
};
using ModulePtr = std::shared_ptr<Module>;

/// Children run in order, each in its own scope (its name, or its index).
class Sequential : public Module {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<ModulePtr> children);
  Sequential& add(ModulePtr child, std::string name = "");
  Result<Value*> forward(ModuleContext& ctx, Value* x) override;
  std::string describe() const override;
  size_t size() const { return children_.size(); }

 private:
  std::vector<std::pair<std::string, ModulePtr>> children_;
};

// Layers (NCHW activations; weights as PyTorch lays them out).
ModulePtr conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1, int64_t pad = 0, int64_t groups = 1,
                 bool bias = true);
/// y = x @ W^T + b on x flattened from axis 1 ([N, in]).
ModulePtr linear(int64_t in, int64_t out, bool bias = true);
ModulePtr relu();
ModulePtr max_pool2d(int64_t kernel, int64_t stride = 0, int64_t pad = 0, bool ceil_mode = false);
ModulePtr avg_pool2d(int64_t kernel, int64_t stride = 0, int64_t pad = 0);
ModulePtr global_avg_pool();
/// [N, ...] -> [N, prod(...)].
ModulePtr flatten();
/// Batch normalization over channels (axis 1): batch statistics and running-statistics updates in training
/// (PyTorch's momentum 0.1), the running statistics in evaluation.
ModulePtr batch_norm2d(int64_t channels, double epsilon = 1e-5, double momentum = 0.1);
/// Drops elements with probability `ratio` in training (a new mask per step), identity in evaluation.
ModulePtr dropout(double ratio = 0.5);
/// y = a + b, both computed from the same input: `body(x) + shortcut(x)` (shortcut null: x), then `after`.
ModulePtr residual(ModulePtr body, ModulePtr shortcut = nullptr, ModulePtr after = nullptr);
/// Runs each branch on the input and concatenates the results along channels.
ModulePtr concat_branches(std::vector<ModulePtr> branches);
/// `inner` in a no-grad region: its parameters are frozen and no gradient flows back through it (a fixed
/// feature extractor under a trained head). Buffers still update in training (BatchNorm's running statistics).
ModulePtr no_grad(ModulePtr inner);

}  // namespace kiln::train
