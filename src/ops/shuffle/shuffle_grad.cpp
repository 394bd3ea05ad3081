// Gradient rules of the data-movement ops: each is the movement run backwards. Shuffle inverts its
// transposes and reshape in one Shuffle, Concatenation splits dy, Split concatenates, Slice and constant
// Padding pad with zeros (strided slices interleave zeros first), other Padding modes scatter-add, Expand sums back,
// Tile folds repeats.
#include <limits>
#include <memory>

#include "ops/grad.h"
#include "ops/grad_util.h"
#include "ops/indexing/indexing.h"
#include "ops/shuffle/shuffle.h"

namespace kiln {
namespace {

using grad_util::require_static;

// The int64 values of input i, which must be known before run time.
Result<std::vector<int64_t>> known_ints(GradBuilder& b, int i, std::string_view op, std::string_view name) {
  const Tensor* v = b.value(b.input(i));
  if (!v)
    return unsupported(op, " input '", name, "' is not known before run time; its gradient needs the value: make '",
                       name, "' a constant");
  return tensor_to_int64s(*v);
}

// Pads (constant 0) `g` by begin/end per axis (negative crops).
Result<GradValue> pad_zeros(GradBuilder& b, GradValue g, const std::vector<int64_t>& begin,
                            const std::vector<int64_t>& end) {
  bool any = false;
  for (size_t i = 0; i < begin.size(); ++i) any |= begin[i] != 0 || end[i] != 0;
  if (!any) return g;
  std::vector<int64_t> pads = begin;
  pads.insert(pads.end(), end.begin(), end.end());
  KILN_ASSIGN_OR_RETURN(GradValue p, grad_util::int64s(b, pads));
  auto attrs = std::make_unique<PaddingAttrs>();
  attrs->mode = PadMode::kConstant;
  return b.add1("Padding", std::move(attrs), {g, p});
}

// y = T2(R(T1(x))): dx = T1^-1(R^-1(T2^-1(dy))), one Shuffle.
Status shuffle_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy || !b.needs_grad(0)) return Status::ok();
  const auto& a = b.attrs_as<ShuffleAttrs>();
  KILN_RETURN_IF_ERROR(require_static(b, b.input(0), "input 'data'"));
  const Dims xd = b.desc(b.input(0)).dims;
  auto attrs = std::make_unique<ShuffleAttrs>();
  attrs->first_transpose = grad_util::inverse_permutation(a.second_transpose);
  attrs->has_reshape_dims = true;
  attrs->allowzero = true;
  attrs->reshape_dims = permute_dims(xd, a.first_transpose).to_vector();
  attrs->second_transpose = grad_util::inverse_permutation(a.first_transpose);
  KILN_ASSIGN_OR_RETURN(GradValue g, b.add1("Shuffle", std::move(attrs), {dy}));
  return b.set_grad(0, g);
}

Status concatenation_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy) return Status::ok();
  const int n = b.num_inputs();
  if (n == 1) return b.set_grad(0, dy);
  const Dims yd = b.desc(dy).dims;
  KILN_ASSIGN_OR_RETURN(const int axis, normalize_axis(b.attrs_as<ConcatenationAttrs>().axis, yd.rank()));
  auto attrs = std::make_unique<SplitAttrs>();
  attrs->axis = axis;
  for (int i = 0; i < n; ++i) {
    const int64_t d = b.desc(b.input(i)).dims[axis];
    if (d < 0)
      return unsupported("Concatenation input ", i, " has a dynamic size on axis ", axis,
                         "; its gradient needs static sizes");
    attrs->split.push_back(d);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<GradValue> parts, b.add("Split", std::move(attrs), {dy}));
  for (int i = 0; i < n; ++i) KILN_RETURN_IF_ERROR(b.set_grad(i, parts[static_cast<size_t>(i)]));
  return Status::ok();
}

// dx = concat(dy_0, dy_1, ...), zeros for outputs no gradient reaches.
Status split_grad(GradBuilder& b) {
  if (!b.needs_grad(0)) return Status::ok();
  const Dims xd = b.desc(b.input(0)).dims;
  KILN_ASSIGN_OR_RETURN(const int axis, normalize_axis(b.attrs_as<SplitAttrs>().axis, xd.rank()));
  std::vector<GradValue> parts;
  bool any = false;
  for (int i = 0; i < b.num_outputs(); ++i) {
    GradValue g = b.grad_output(i);
    any |= g.valid();
    if (!g) {
      const TensorDesc d = b.desc(b.output(i));
      KILN_ASSIGN_OR_RETURN(g, grad_util::zeros(b, d.dtype, d.dims));
    }
    parts.push_back(g);
  }
  if (!any) return Status::ok();
  if (parts.size() == 1) return b.set_grad(0, parts[0]);
  auto attrs = std::make_unique<ConcatenationAttrs>();
  attrs->axis = axis;
  KILN_ASSIGN_OR_RETURN(GradValue g, b.add1("Concatenation", std::move(attrs), std::move(parts)));
  return b.set_grad(0, g);
}

// dx = dy placed back where the slice read it, zeros elsewhere: reversed axes are flipped back, strided
// axes get step - 1 zeros after each element (reshape, pad, reshape), then one Padding puts the block
// at its start.
Status slice_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy || !b.needs_grad(0)) return Status::ok();
  KILN_RETURN_IF_ERROR(require_static(b, b.input(0), "input 'data'"));
  const Dims xd = b.desc(b.input(0)).dims;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> starts, known_ints(b, 1, "Slice", "starts"));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> ends, known_ints(b, 2, "Slice", "ends"));
  std::vector<int64_t> axes, steps;
  if (b.input(3)) {
    KILN_ASSIGN_OR_RETURN(axes, known_ints(b, 3, "Slice", "axes"));
  }
  if (b.input(4)) {
    KILN_ASSIGN_OR_RETURN(steps, known_ints(b, 4, "Slice", "steps"));
  }
  KILN_ASSIGN_OR_RETURN(std::vector<SliceAxis> sl, resolve_slice(xd, starts, ends, axes, steps));
  const int rank = xd.rank();
  GradValue g = dy;
  // Flip the axes read backwards, so every axis runs forwards from its lowest index.
  std::vector<int64_t> flip_axes;
  for (int i = 0; i < rank; ++i) {
    SliceAxis& s = sl[static_cast<size_t>(i)];
    if (s.step >= 0) continue;
    s.start += (s.size - 1) * s.step;
    s.step = -s.step;
    flip_axes.push_back(i);
  }
  if (!flip_axes.empty()) {
    const std::vector<int64_t> f_starts(flip_axes.size(), -1);
    const std::vector<int64_t> f_ends(flip_axes.size(), std::numeric_limits<int64_t>::min());
    const std::vector<int64_t> f_steps(flip_axes.size(), -1);
    KILN_ASSIGN_OR_RETURN(GradValue s0, grad_util::int64s(b, f_starts));
    KILN_ASSIGN_OR_RETURN(GradValue s1, grad_util::int64s(b, f_ends));
    KILN_ASSIGN_OR_RETURN(GradValue s2, grad_util::int64s(b, flip_axes));
    KILN_ASSIGN_OR_RETURN(GradValue s3, grad_util::int64s(b, f_steps));
    KILN_ASSIGN_OR_RETURN(g, b.add1("Slice", std::make_unique<NoAttrs>(), {g, s0, s1, s2, s3}));
  }
  std::vector<int64_t> begin(static_cast<size_t>(rank)), end(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) {
    const SliceAxis& s = sl[static_cast<size_t>(i)];
    int64_t extent = s.size;
    if (s.step > 1 && s.size > 0) {
      if (rank + 1 > kMaxRank)
        return unsupported("the gradient of a strided Slice of a rank-", rank, " tensor needs rank ", rank + 1,
                           ", over kiln's maximum of ", kMaxRank);
      // [.., n, ..] -> [.., n, 1, ..] -> pad the new axis to step -> [.., n * step, ..]
      const Dims cur = b.desc(g).dims;
      Dims split, padded_dims = cur;
      for (int d = 0; d < rank; ++d) {
        split.push_back(cur[d]);
        if (d == i) split.push_back(1);
      }
      extent = s.size * s.step;
      padded_dims[i] = extent;
      KILN_ASSIGN_OR_RETURN(GradValue r, grad_util::reshape(b, g, split));
      std::vector<int64_t> pb(static_cast<size_t>(rank + 1), 0), pe(static_cast<size_t>(rank + 1), 0);
      pe[static_cast<size_t>(i) + 1] = s.step - 1;
      KILN_ASSIGN_OR_RETURN(GradValue p, pad_zeros(b, r, pb, pe));
      KILN_ASSIGN_OR_RETURN(g, grad_util::reshape(b, p, padded_dims));
    }
    begin[static_cast<size_t>(i)] = s.start;
    end[static_cast<size_t>(i)] = xd[i] - s.start - extent;  // negative: the last step's zeros overhang
  }
  KILN_ASSIGN_OR_RETURN(g, pad_zeros(b, g, begin, end));
  return b.set_grad(0, g);
}

// Reflect, edge and wrap padding: per padded axis, each output position adds its gradient to the input
// position it copied (ScatterElements with reduction add, indices broadcast along the other axes).
Result<GradValue> unpad_copies(GradBuilder& b, GradValue dy, const Dims& xd, const PadAmounts& p, PadMode mode) {
  GradValue g = dy;
  const int rank = xd.rank();
  for (int a = 0; a < rank; ++a) {
    const int64_t begin = p.begin[static_cast<size_t>(a)], end = p.end[static_cast<size_t>(a)];
    if (begin == 0 && end == 0) continue;
    const TensorDesc cur = b.desc(g);
    Dims idx_dims = Dims::of_rank(rank, 1);
    idx_dims[a] = cur.dims[a];
    KILN_ASSIGN_OR_RETURN(Tensor idx, Tensor::empty(DataType::kInt64, idx_dims));
    for (int64_t o = 0; o < cur.dims[a]; ++o) idx.data<int64_t>()[o] = pad_source_index(o, xd[a], begin, end, mode);
    KILN_ASSIGN_OR_RETURN(GradValue iv, b.constant(std::move(idx)));
    KILN_ASSIGN_OR_RETURN(GradValue full, grad_util::expand(b, iv, cur.dims));
    Dims target = cur.dims;
    target[a] = xd[a];
    KILN_ASSIGN_OR_RETURN(GradValue zeros, grad_util::zeros(b, cur.dtype, target));
    auto attrs = std::make_unique<ScatterElementsAttrs>();
    attrs->axis = a;
    attrs->reduction = ScatterReduction::kAdd;
    KILN_ASSIGN_OR_RETURN(g, b.add1("ScatterElements", std::move(attrs), {zeros, full, g}));
  }
  return g;
}

// Constant padding: dx = dy with the pads cut off and zeros where the padding cropped (pads negated);
// the constant gets the sum of dy over the padded positions. Other modes: unpad_copies.
Status padding_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy || (!b.needs_grad(0) && !b.needs_grad(2))) return Status::ok();
  const auto& a = b.attrs_as<PaddingAttrs>();
  KILN_RETURN_IF_ERROR(require_static(b, b.input(0), "input 'data'"));
  const Dims xd = b.desc(b.input(0)).dims;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, known_ints(b, 1, "Padding", "pads"));
  std::vector<int64_t> axes;
  if (b.input(3)) {
    KILN_ASSIGN_OR_RETURN(axes, known_ints(b, 3, "Padding", "axes"));
  }
  KILN_ASSIGN_OR_RETURN(PadAmounts p, resolve_pads(xd.rank(), pads, axes));
  if (a.mode != PadMode::kConstant) {
    if (!b.needs_grad(0)) return Status::ok();
    KILN_ASSIGN_OR_RETURN(GradValue dx, unpad_copies(b, dy, xd, p, a.mode));
    return b.set_grad(0, dx);
  }
  std::vector<int64_t> begin = p.begin, end = p.end;
  for (auto* v : {&begin, &end})
    for (int64_t& d : *v) d = -d;
  KILN_ASSIGN_OR_RETURN(GradValue dx, pad_zeros(b, dy, begin, end));
  if (b.needs_grad(0)) KILN_RETURN_IF_ERROR(b.set_grad(0, dx));
  if (b.needs_grad(2)) {
    KILN_ASSIGN_OR_RETURN(GradValue all, grad_util::reduce_sum(b, dy, {}, false));
    KILN_ASSIGN_OR_RETURN(GradValue inner, grad_util::reduce_sum(b, dx, {}, false));
    KILN_ASSIGN_OR_RETURN(GradValue d, grad_util::binary(b, ElementWiseOp::kSub, all, inner));
    KILN_ASSIGN_OR_RETURN(GradValue dc, grad_util::reshape(b, d, b.desc(b.input(2)).dims));
    KILN_RETURN_IF_ERROR(b.set_grad(2, dc));
  }
  return Status::ok();
}

Status expand_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy || !b.needs_grad(0)) return Status::ok();
  KILN_ASSIGN_OR_RETURN(GradValue g, b.sum_to(dy, b.desc(b.input(0)).dims));
  return b.set_grad(0, g);
}

// y axis i = repeats[i] copies of x axis i: per tiled axis, [.., r * d, ..] -> [.., r, d, ..] summed over r.
Status tile_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy || !b.needs_grad(0)) return Status::ok();
  KILN_RETURN_IF_ERROR(require_static(b, b.input(0), "input 'input'"));
  const TensorDesc xd = b.desc(b.input(0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> reps, known_ints(b, 1, "Tile", "repeats"));
  const int rank = xd.dims.rank();
  for (int64_t r : reps)
    if (r == 0) {
      KILN_ASSIGN_OR_RETURN(GradValue z, grad_util::zeros(b, xd.dtype, xd.dims));
      return b.set_grad(0, z);
    }
  GradValue g = dy;
  for (int i = 0; i < rank; ++i) {
    const int64_t r = reps[static_cast<size_t>(i)];
    if (r == 1) continue;
    if (xd.dims[i] != 1) {
      if (rank + 1 > kMaxRank)
        return unsupported("the gradient of Tile of a rank-", rank, " tensor needs rank ", rank + 1,
                           ", over kiln's maximum of ", kMaxRank);
      const Dims cur = b.desc(g).dims;
      Dims split;
      for (int d = 0; d < rank; ++d) {
        if (d == i) split.push_back(r);
        split.push_back(d == i ? xd.dims[i] : cur[d]);
      }
      KILN_ASSIGN_OR_RETURN(GradValue s, grad_util::reshape(b, g, split));
      KILN_ASSIGN_OR_RETURN(g, grad_util::reduce_sum(b, s, {i}, false));
    } else {
      KILN_ASSIGN_OR_RETURN(g, grad_util::reduce_sum(b, g, {i}, true));  // [.., r, ..] -> [.., 1, ..]
    }
  }
  return b.set_grad(0, g);
}

KILN_REGISTER_GRAD("Shuffle", shuffle_grad);
KILN_REGISTER_GRAD("Concatenation", concatenation_grad);
KILN_REGISTER_GRAD("Split", split_grad);
KILN_REGISTER_GRAD("Slice", slice_grad);
KILN_REGISTER_GRAD("Padding", padding_grad);
KILN_REGISTER_GRAD("Expand", expand_grad);
KILN_REGISTER_GRAD("Tile", tile_grad);

}  // namespace
}  // namespace kiln
