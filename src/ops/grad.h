#pragma once
// Gradient rules: how an op's backward pass is written as more ops. The ops layer sees the training
// graph only through GradBuilder (implemented by src/train's autograd), so a rule lives beside its op's
// schema: `KILN_REGISTER_GRAD("Convolution", convolution_grad);` in src/ops/<family>/<family>_grad.cpp.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/status.h"
#include "kiln/tensor.h"
#include "ops/schema.h"

namespace kiln {

/// A value of the training graph as a rule sees it; invalid (id < 0) for "none" (an absent optional
/// input, or an output no gradient reaches).
struct GradValue {
  int id = -1;
  bool valid() const { return id >= 0; }
  explicit operator bool() const { return valid(); }
};

/// The view a gradient rule gets of one forward node in the graph being differentiated.
/// Gradients have the dtype and dims of the value they belong to.
class GradBuilder {
 public:
  virtual ~GradBuilder() = default;

  /// The forward node: its attributes, inputs (invalid where an optional input is absent) and outputs.
  virtual const Attrs& attrs() const = 0;
  template <class A>
  const A& attrs_as() const {
    return static_cast<const A&>(attrs());
  }
  virtual int num_inputs() const = 0;
  virtual int num_outputs() const = 0;
  virtual GradValue input(int i) const = 0;
  virtual GradValue output(int i) const = 0;
  /// Type and shape of any value (forward or added by the rule).
  virtual TensorDesc desc(GradValue v) const = 0;
  /// The host value of `v` when known before run time (a constant or folded value), else nullptr.
  virtual const Tensor* value(GradValue v) const = 0;

  /// dLoss/d(output i); invalid when no gradient reaches that output (treat it as zero).
  virtual GradValue grad_output(int i) const = 0;
  /// Whether the loss needs dLoss/d(input i) (a trainable parameter or something computed from one).
  virtual bool needs_grad(int i) const = 0;
  /// Gives dLoss/d(input i); a second call for the same input adds to the first. The value must have the
  /// input's dims (reduce broadcast dims first: sum_to) and dtype.
  virtual Status set_grad(int i, GradValue g) = 0;

  /// Adds a backward node of registered op `op` and returns its outputs. It is named after the forward
  /// node ("<node>/grad/<op>"); errors carry the forward node's context.
  virtual Result<std::vector<GradValue>> add(std::string_view op, std::unique_ptr<Attrs> attrs,
                                             std::vector<GradValue> inputs) = 0;
  /// A constant (small tensors: scalars, shapes, axes).
  virtual Result<GradValue> constant(Tensor value) = 0;
  /// True while the graph is differentiated for training (Dropout active, BatchNorm on batch statistics).
  virtual bool training() const = 0;

  // Helpers built on the calls above (src/ops/grad.cpp).
  /// add() for an op with one output.
  Result<GradValue> add1(std::string_view op, std::unique_ptr<Attrs> attrs, std::vector<GradValue> inputs);
  /// Sums `g` over the dims that broadcasting added or stretched so it gets `dims` (the shape of an
  /// operand of a broadcasting op); `g` itself when the shapes already match.
  Result<GradValue> sum_to(GradValue g, const Dims& dims);
  /// A float32 scalar constant of dtype `dtype`.
  Result<GradValue> scalar(double v, DataType dtype);
};

/// Emits the backward ops of one node (calls set_grad for each input that needs_grad).
using GradFn = Status (*)(GradBuilder&);

/// Registers `fn` as the gradient of op `op` (kept beside the schemas; a second rule for an op is a
/// startup error, logged, first kept).
bool register_grad(std::string_view op, GradFn fn);
/// The rule of op `op`, or nullptr when it has none (the op cannot be trained through).
GradFn find_grad(std::string_view op);

#define KILN_REGISTER_GRAD(op, fn) \
  static const bool KILN_CONCAT(kiln_grad_registered_, __LINE__) = ::kiln::register_grad(op, fn)

}  // namespace kiln
