#pragma once
// Data movement: Shuffle (transpose/reshape/transpose), Concatenation, Split, Slice, Padding,
// Expand, Tile. Every op is dtype-agnostic; shape-deciding parameters come as int inputs (ONNX).
#include <span>
#include <vector>

#include "core/host_device.h"
#include "kiln/dims.h"
#include "ops/attrs.h"

namespace kiln {

/// TensorRT IShuffleLayer: y = transpose(reshape(transpose(x, first_transpose), shape), second_transpose).
/// Inputs: data, optional int64 `shape` (wins over reshape_dims). An empty perm means identity.
struct ShuffleAttrs : AttrsOf<ShuffleAttrs> {
  std::vector<int64_t> first_transpose;
  bool has_reshape_dims = false;  ///< reshape_dims applies (an empty list then reshapes to a scalar)
  std::vector<int64_t> reshape_dims;
  bool allowzero = false;  ///< ONNX Reshape: 0 is a real size instead of "copy the input dim"
  std::vector<int64_t> second_transpose;

  template <class V>
  void visit(V& v) {
    v("first_transpose", first_transpose);
    v("has_reshape_dims", has_reshape_dims);
    v("reshape_dims", reshape_dims);
    v("allowzero", allowzero);
    v("second_transpose", second_transpose);
  }
};

struct ConcatenationAttrs : AttrsOf<ConcatenationAttrs> {
  int64_t axis = 0;  ///< negative counts from the end

  template <class V>
  void visit(V& v) {
    v("axis", axis);
  }
};

/// ONNX Split. Sizes from input 1 (opset 13+) or `split` (older opsets); otherwise `num_outputs`
/// chunks of ceil(dim / num_outputs) with a smaller last one (opset 18).
struct SplitAttrs : AttrsOf<SplitAttrs> {
  int64_t axis = 0;
  std::vector<int64_t> split;
  int64_t num_outputs = 0;  ///< 0: not given

  template <class V>
  void visit(V& v) {
    v("axis", axis);
    v("split", split);
    v("num_outputs", num_outputs);
  }
};

enum class PadMode { kConstant, kReflect, kEdge, kWrap };
const char* enum_name(PadMode mode);

/// ONNX Pad. Inputs: data, pads, optional constant_value, optional axes.
struct PaddingAttrs : AttrsOf<PaddingAttrs> {
  PadMode mode = PadMode::kConstant;

  template <class V>
  void visit(V& v) {
    v("mode", mode);
  }
};

// Shared by the infer functions and the kernels (which recompute from the run-time values).

/// Checks that `perm` is empty (identity) or a permutation of 0..rank-1; `what` names it in errors.
Status check_permutation(std::span<const int64_t> perm, int rank, std::string_view what);
/// dims[perm[i]] for each i; `perm` empty means identity.
Dims permute_dims(const Dims& dims, std::span<const int64_t> perm);
/// ONNX Reshape of `in` to `shape` (0 copies a dim unless allowzero, -1 is inferred).
Result<Dims> resolve_reshape(const Dims& in, std::span<const int64_t> shape, bool allowzero);

/// One sliced axis: element i of the output reads input index start + i * step.
struct SliceAxis {
  int64_t start = 0, step = 1, size = 0;
};
/// ONNX Slice on `dims`; unlisted axes are taken whole. `axes` and `steps` may be empty.
Result<std::vector<SliceAxis>> resolve_slice(const Dims& dims, std::span<const int64_t> starts,
                                             std::span<const int64_t> ends, std::span<const int64_t> axes,
                                             std::span<const int64_t> steps);

/// Pads before and after each axis of a rank-`rank` tensor (negative crops).
struct PadAmounts {
  std::vector<int64_t> begin, end;
};
/// ONNX Pad's `pads` (2 * number of axes) for `axes` (empty: all axes).
Result<PadAmounts> resolve_pads(int rank, std::span<const int64_t> pads, std::span<const int64_t> axes);

/// Maps output index `o` of a padded axis to an input index, or -1 for the constant value (host and device).
/// The source is the input after cropping: [lo, lo + n) with lo = max(-begin, 0).
KILN_HD inline int64_t pad_source_index(int64_t o, int64_t dim, int64_t begin, int64_t end, PadMode mode) {
  const int64_t lo = begin < 0 ? -begin : 0;
  const int64_t n = dim - lo - (end < 0 ? -end : 0);
  int64_t j = o - (begin > 0 ? begin : 0);
  if (j >= 0 && j < n) return lo + j;
  if (mode == PadMode::kConstant || n <= 0) return -1;
  switch (mode) {
    case PadMode::kEdge: j = j < 0 ? 0 : n - 1; break;
    case PadMode::kWrap: j = ((j % n) + n) % n; break;
    case PadMode::kReflect: {
      if (n == 1) {
        j = 0;
        break;
      }
      const int64_t period = 2 * (n - 1);
      j = ((j % period) + period) % period;
      if (j >= n) j = period - j;
      break;
    }
    default: break;
  }
  return lo + j;
}

}  // namespace kiln
