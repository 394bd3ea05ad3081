#pragma once
// Control flow (If, Loop, Scan, SequenceMap) and the sequence and optional ops. They own subgraphs or
// move whole values, so they are host ops: the runtime runs them itself, between kernel steps.
#include <vector>

#include "ops/schema.h"

namespace kiln {

/// Loop and Scan stop with an error after this many iterations (a hostile model must not hang).
inline constexpr int64_t kMaxLoopIterations = int64_t{1} << 24;

struct ScanAttrs : AttrsOf<ScanAttrs> {
  int64_t num_scan_inputs = 0;
  std::vector<int64_t> scan_input_directions, scan_output_directions, scan_input_axes, scan_output_axes;
  bool batched = false;  ///< opset 8: input 0 is sequence_lens and every input has a batch dim 0

  template <class V>
  void visit(V& v) {
    v("num_scan_inputs", num_scan_inputs);
    v("scan_input_directions", scan_input_directions);
    v("scan_output_directions", scan_output_directions);
    v("scan_input_axes", scan_input_axes);
    v("scan_output_axes", scan_output_axes);
    v("batched", batched);
  }
};

struct SequenceEmptyAttrs : AttrsOf<SequenceEmptyAttrs> {
  DataType dtype = DataType::kFloat32;

  template <class V>
  void visit(V& v) {
    v("dtype", dtype);
  }
};

struct SplitToSequenceAttrs : AttrsOf<SplitToSequenceAttrs> {
  int64_t axis = 0;
  bool keepdims = true;

  template <class V>
  void visit(V& v) {
    v("axis", axis);
    v("keepdims", keepdims);
  }
};

struct ConcatFromSequenceAttrs : AttrsOf<ConcatFromSequenceAttrs> {
  int64_t axis = 0;
  bool new_axis = false;

  template <class V>
  void visit(V& v) {
    v("axis", axis);
    v("new_axis", new_axis);
  }
};

/// Optional: the element type of an empty optional (without an input).
struct OptionalAttrs : AttrsOf<OptionalAttrs> {
  bool sequence = false;
  DataType dtype = DataType::kFloat32;

  template <class V>
  void visit(V& v) {
    v("sequence", sequence);
    v("dtype", dtype);
  }
};

/// The desc both of two descs fit: dims kept where they agree, unknown elsewhere.
Result<TensorDesc> merge_descs(const TensorDesc& a, const TensorDesc& b);
/// Scan's axis for scan input/output i (negative counts from the end of `rank`).
int64_t scan_axis(const std::vector<int64_t>& axes, size_t i, int rank);

}  // namespace kiln
