#pragma once
// Autograd over the graph IR: from a model graph and a scalar loss value, a training graph whose
// outputs are the loss (and the model's outputs) plus one gradient per parameter. Parameters become
// graph inputs, so a step binds their current values by address; the backward nodes come from the
// ops' gradient rules (ops/grad.h).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace kiln::train {

struct AutogradOptions {
  /// Values to differentiate (constants or graph inputs, by name). Empty: every floating-point constant
  /// a gradient reaches (constants no gradient reaches stay constants).
  std::vector<std::string> params;
  /// Values (by name) to keep as plain graph inputs without a gradient (state such as BatchNorm's running
  /// statistics, which the step updates through other outputs).
  std::vector<std::string> state;
  /// Values (by name) no gradient flows through, as if detached: what produced them is not differentiated from
  /// them (a no-grad region of the model: ModuleContext's NoGrad).
  std::vector<std::string> stop_gradient;
  /// With explicit params: leave out those no gradient reaches instead of failing (the op harness).
  bool allow_unreached = false;
  /// Rules see training() == true (Dropout active, BatchNorm on batch statistics).
  bool training = true;
  /// The backward starts from a graph input (kLossScaleInput, a scalar of the loss's type) instead of 1: the
  /// gradients come out multiplied by it (loss scaling for float16 training; the loss output is not scaled).
  bool loss_scale_input = false;
};

/// The graph input that seeds the backward when AutogradOptions::loss_scale_input is set.
inline constexpr std::string_view kLossScaleInput = "train.loss_scale";

struct TrainingGraph {
  std::unique_ptr<Graph> graph;
  std::string loss;                       ///< the scalar loss output
  std::vector<std::string> params;        ///< graph inputs that are trained, in a stable order
  std::vector<std::string> grads;         ///< graph outputs, grads[i] = dLoss/d params[i] ("<param>.grad")
  std::map<std::string, Tensor> initial;  ///< the starting value of each param and state input
  int backward_nodes = 0;
};

/// Differentiates value `loss` (a one-element floating-point value of `model`) with respect to the
/// parameters. Errors name the node whose op has no gradient rule and say what to do.
Result<TrainingGraph> build_training_graph(const Graph& model, const std::string& loss,
                                           const AutogradOptions& options = {});

/// The name of the gradient output of parameter `param`.
inline std::string grad_name(const std::string& param) { return param + ".grad"; }

}  // namespace kiln::train
