#pragma once
// OpSchema: everything kiln knows about an op independent of any backend: its attributes,
// inputs, shape and dtype inference. Gradient rules register beside it (ops/grad.h).
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/dims.h"
#include "kiln/dtype.h"
#include "kiln/tensor.h"
#include "ops/attrs.h"

namespace kiln {

/// What a value holds. For sequences and optionals, dtype and dims describe the element (dims of rank 0
/// where the element shape is not known before run time).
enum class ValueKind : uint8_t { kTensor, kSequence, kOptionalTensor, kOptionalSequence };
const char* value_kind_name(ValueKind kind);
inline bool is_optional(ValueKind k) { return k == ValueKind::kOptionalTensor || k == ValueKind::kOptionalSequence; }

/// Type and shape of one op input or output; `present` is false for a skipped optional input.
struct TensorDesc {
  DataType dtype = DataType::kFloat32;
  Dims dims;
  bool present = true;
  ValueKind kind = ValueKind::kTensor;

  static TensorDesc absent() { return {DataType::kFloat32, {}, false}; }
  std::string to_string() const;
  bool operator==(const TensorDesc&) const = default;
};

/// The inputs and outputs of a graph a node owns (If's branches, Loop's body), for its shape inference.
struct SubgraphSig {
  std::string name;  ///< the ONNX attribute name: "then_branch", "body"
  std::vector<TensorDesc> inputs, outputs;
};

/// What shape inference sees: input descs, attributes and, where known, input values.
class InferContext {
 public:
  InferContext(const Attrs& attrs, std::span<const TensorDesc> inputs, std::span<const Tensor* const> values = {})
      : attrs_(attrs), inputs_(inputs), values_(values) {}

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  bool has_input(int i) const { return i < num_inputs() && inputs_[i].present; }
  const TensorDesc& input(int i) const { return inputs_[i]; }
  /// The host value of input i when known now (a constant, or any input at run time), else nullptr.
  const Tensor* value(int i) const {
    return i < static_cast<int>(values_.size()) && has_input(i) ? values_[i] : nullptr;
  }
  const Attrs& attrs() const { return attrs_; }
  /// Signatures of the graphs the node owns (empty for ordinary ops).
  std::span<const SubgraphSig> subgraphs() const { return subgraphs_; }
  void set_subgraphs(std::span<const SubgraphSig> s) { subgraphs_ = s; }
  template <class A>
  const A& attrs_as() const {
    return static_cast<const A&>(attrs_);
  }

 private:
  const Attrs& attrs_;
  std::span<const TensorDesc> inputs_;
  std::span<const Tensor* const> values_;
  std::span<const SubgraphSig> subgraphs_;
};

using InferFn = std::function<Result<std::vector<TensorDesc>>(const InferContext&)>;

struct OpSchema {
  std::string name;                      ///< "Convolution"
  std::string family;                    ///< the folder under src/ops, e.g. "convolution"
  std::string summary;                   ///< one line for docs/ops.md
  std::vector<std::string> input_names;  ///< for messages; the last may repeat when variadic
  int min_inputs = 1;
  int max_inputs = 1;  ///< -1: any number
  /// Inputs whose values (not only shapes) decide the output shape, e.g. Reshape's shape.
  std::vector<int> value_inputs;
  /// The outputs depend only on the inputs' types and shapes (Shape, Size): foldable once shapes are static.
  bool shape_only = false;
  /// Control flow, sequence and optional ops: the runtime runs them on the host itself (they move
  /// values and run subgraphs; no kernel computes them).
  bool host = false;
  /// Traits the optimizer's passes read.
  /// Each output element depends only on the input elements at the same (broadcast) index: Activation,
  /// ElementWise, Unary, Cast, Where.
  bool pointwise = false;
  /// Equal inputs and attributes give equal outputs (common-subexpression elimination may merge two nodes).
  bool deterministic = true;
  std::function<std::unique_ptr<Attrs>()> make_attrs;
  InferFn infer;

  std::string input_name(int i) const;
  /// Checks the input count and runs inference; errors name the op.
  Result<std::vector<TensorDesc>> infer_outputs(const InferContext& ctx) const;
};

/// A schema with `A` as its attribute type.
template <class A>
OpSchema make_schema(std::string name, std::string family, std::string summary) {
  OpSchema s;
  s.name = std::move(name);
  s.family = std::move(family);
  s.summary = std::move(summary);
  s.make_attrs = [] { return std::unique_ptr<Attrs>(std::make_unique<A>()); };
  return s;
}

// Small helpers shared by the infer functions.

/// Fails unless input `i` exists and has rank in [lo, hi].
Status expect_rank(const InferContext& ctx, int i, int lo, int hi);
/// Fails unless input `i` has one of `dtypes`.
Status expect_dtype(const InferContext& ctx, int i, std::initializer_list<DataType> dtypes);
/// The element desc a sequence or optional of `elem` has.
inline TensorDesc kind_desc(const TensorDesc& elem, ValueKind kind) { return {elem.dtype, elem.dims, true, kind}; }
/// Same rank and equal where both dims are known: an unknown dim is checked when it is known (at run time).
bool dims_compatible(const Dims& a, const Dims& b);
/// Reads an integer tensor (int32/int64) known at this time as a vector.
std::vector<int64_t> tensor_to_int64s(const Tensor& t);
std::vector<double> tensor_to_doubles(const Tensor& t);
/// Result of one output with the dtype of input 0 and dims `dims`.
inline std::vector<TensorDesc> one_output(DataType dtype, const Dims& dims) { return {TensorDesc{dtype, dims, true}}; }

}  // namespace kiln
