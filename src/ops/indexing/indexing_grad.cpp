// Gradient rules of the gathers, TopK and the scatters: the data gradient is a scatter-add of dy into zeros (repeated
// indices accumulate; ScatterND/ScatterElements with reduction add apply updates in order, so the sums are
// deterministic). Indices get no gradient.
#include <memory>

#include "ops/grad.h"
#include "ops/grad_util.h"
#include "ops/indexing/indexing.h"
#include "ops/shuffle/shuffle.h"

namespace kiln {
namespace {

using grad_util::require_static;

Result<GradValue> scatter_nd_add(GradBuilder& b, GradValue data, GradValue indices, GradValue updates) {
  auto attrs = std::make_unique<ScatterNDAttrs>();
  attrs->reduction = ScatterReduction::kAdd;
  return b.add1("ScatterND", std::move(attrs), {data, indices, updates});
}

// out = data[:axis] + indices + data[axis+1:]. dy's index dims are moved to the front, indices get a
// trailing 1 so each addresses one slice of axis 0 of the (axis-first) data, and the sum is moved back.
Status gather_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy || !b.needs_grad(0)) return Status::ok();
  const GradValue data = b.input(0), indices = b.input(1);
  KILN_RETURN_IF_ERROR(require_static(b, data, "input 'data'"));
  KILN_RETURN_IF_ERROR(require_static(b, indices, "input 'indices'"));
  const TensorDesc dd = b.desc(data);
  const Dims id = b.desc(indices).dims;
  const int r = dd.dims.rank(), q = id.rank();
  KILN_ASSIGN_OR_RETURN(const int axis, normalize_axis(b.attrs_as<GatherAttrs>().axis, r));
  if (q + 1 > kMaxRank)
    return unsupported("the gradient of Gather with indices of rank ", q, " needs rank ", q + 1,
                       " indices, over kiln's maximum of ", kMaxRank);
  // dy: [pre (axis), idx (q), post] -> [idx, pre, post]
  std::vector<int64_t> to_front;
  for (int i = axis; i < axis + q; ++i) to_front.push_back(i);
  for (int i = 0; i < axis; ++i) to_front.push_back(i);
  for (int i = axis + q; i < r - 1 + q; ++i) to_front.push_back(i);
  KILN_ASSIGN_OR_RETURN(GradValue upd, grad_util::transpose(b, dy, to_front));
  Dims target{dd.dims[axis]};
  for (int i = 0; i < r; ++i)
    if (i != axis) target.push_back(dd.dims[i]);
  KILN_ASSIGN_OR_RETURN(GradValue zeros, grad_util::zeros(b, dd.dtype, target));
  Dims id1 = id;
  id1.push_back(1);
  KILN_ASSIGN_OR_RETURN(GradValue idx, grad_util::reshape(b, indices, id1));
  KILN_ASSIGN_OR_RETURN(GradValue sum, scatter_nd_add(b, zeros, idx, upd));
  // [axis dim, pre, post] -> [pre, axis dim, post]
  std::vector<int64_t> back(static_cast<size_t>(r));
  for (int i = 0; i < r; ++i) back[static_cast<size_t>(i)] = i < axis ? i + 1 : (i == axis ? 0 : i);
  KILN_ASSIGN_OR_RETURN(GradValue g, grad_util::transpose(b, sum, back));
  return b.set_grad(0, g);
}

Status gather_elements_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy || !b.needs_grad(0)) return Status::ok();
  const GradValue data = b.input(0);
  KILN_RETURN_IF_ERROR(require_static(b, data, "input 'data'"));
  const TensorDesc dd = b.desc(data);
  KILN_ASSIGN_OR_RETURN(GradValue zeros, grad_util::zeros(b, dd.dtype, dd.dims));
  auto attrs = std::make_unique<ScatterElementsAttrs>();
  attrs->axis = b.attrs_as<GatherElementsAttrs>().axis;
  attrs->reduction = ScatterReduction::kAdd;
  KILN_ASSIGN_OR_RETURN(GradValue g, b.add1("ScatterElements", std::move(attrs), {zeros, b.input(1), dy}));
  return b.set_grad(0, g);
}

// batch_dims 0: dx = ScatterND-add of dy at the index tuples. With batch_dims b each tuple gets its b
// batch coordinates prepended (an iota constant broadcast over the tuples), so one ScatterND covers all.
Status gather_nd_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy || !b.needs_grad(0)) return Status::ok();
  const GradValue data = b.input(0);
  GradValue indices = b.input(1);
  KILN_RETURN_IF_ERROR(require_static(b, data, "input 'data'"));
  KILN_RETURN_IF_ERROR(require_static(b, indices, "input 'indices'"));
  const TensorDesc dd = b.desc(data);
  const int64_t bd = b.attrs_as<GatherNDAttrs>().batch_dims;
  if (bd > 0) {
    const Dims id = b.desc(indices).dims;
    const int q = id.rank();
    Dims coord_dims = Dims::of_rank(q, 1), tuples;
    for (int i = 0; i < q - 1; ++i) tuples.push_back(id[i]);
    for (int i = 0; i < bd; ++i) coord_dims[i] = id[i];
    coord_dims[q - 1] = bd;
    KILN_ASSIGN_OR_RETURN(Tensor coords, Tensor::empty(DataType::kInt64, coord_dims));
    const int64_t batches = coords.numel() / bd;
    for (int64_t t = 0; t < batches; ++t)
      for (int64_t k = bd - 1, rest = t; k >= 0; --k) {
        coords.data<int64_t>()[t * bd + k] = rest % id[static_cast<int>(k)];
        rest /= id[static_cast<int>(k)];
      }
    KILN_ASSIGN_OR_RETURN(GradValue cv, b.constant(std::move(coords)));
    Dims full = tuples;
    full.push_back(bd);
    KILN_ASSIGN_OR_RETURN(GradValue cfull, grad_util::expand(b, cv, full));
    KILN_ASSIGN_OR_RETURN(GradValue i64, grad_util::cast(b, indices, DataType::kInt64));
    auto cat = std::make_unique<ConcatenationAttrs>();
    cat->axis = q - 1;
    KILN_ASSIGN_OR_RETURN(indices, b.add1("Concatenation", std::move(cat), {cfull, i64}));
  }
  KILN_ASSIGN_OR_RETURN(GradValue zeros, grad_util::zeros(b, dd.dtype, dd.dims));
  KILN_ASSIGN_OR_RETURN(GradValue g, scatter_nd_add(b, zeros, indices, dy));
  return b.set_grad(0, g);
}

// TopK: the values' gradient goes back to the positions output 1 names (distinct within each slice).
Status topk_grad(GradBuilder& b) {
  const GradValue dy = b.grad_output(0);
  if (!dy || !b.needs_grad(0)) return Status::ok();
  const GradValue x = b.input(0);
  KILN_RETURN_IF_ERROR(require_static(b, x, "input 'x'"));
  const TensorDesc xd = b.desc(x);
  KILN_ASSIGN_OR_RETURN(GradValue zeros, grad_util::zeros(b, xd.dtype, xd.dims));
  auto attrs = std::make_unique<ScatterElementsAttrs>();
  attrs->axis = b.attrs_as<TopKAttrs>().axis;
  attrs->reduction = ScatterReduction::kAdd;
  KILN_ASSIGN_OR_RETURN(GradValue g, b.add1("ScatterElements", std::move(attrs), {zeros, b.output(1), dy}));
  return b.set_grad(0, g);
}

std::unique_ptr<Attrs> scatter_attrs(bool nd, int64_t axis) {
  if (nd) return std::make_unique<ScatterNDAttrs>();
  auto e = std::make_unique<ScatterElementsAttrs>();
  e->axis = axis;
  return e;
}

Result<GradValue> gather_at(GradBuilder& b, bool nd, int64_t axis, GradValue x, GradValue indices) {
  if (nd) return b.add1("GatherND", std::make_unique<GatherNDAttrs>(), {x, indices});
  auto attrs = std::make_unique<GatherElementsAttrs>();
  attrs->axis = axis;
  return b.add1("GatherElements", std::move(attrs), {x, indices});
}

// With reduction none and a repeated index the last update wins, and only it gets the gradient: each
// update's position number is scattered (none) into -1s, read back at its index, and compared.
Result<GradValue> winners(GradBuilder& b, bool nd, int64_t axis, const Dims& data, const Dims& upd, GradValue indices) {
  KILN_ASSIGN_OR_RETURN(Tensor iota, Tensor::empty(DataType::kInt64, upd));
  for (int64_t k = 0; k < iota.numel(); ++k) iota.data<int64_t>()[k] = k;
  KILN_ASSIGN_OR_RETURN(GradValue ids, b.constant(std::move(iota)));
  KILN_ASSIGN_OR_RETURN(GradValue minus_one, b.scalar(-1.0, DataType::kInt64));
  KILN_ASSIGN_OR_RETURN(GradValue none, grad_util::expand(b, minus_one, data));
  KILN_ASSIGN_OR_RETURN(GradValue last,
                        b.add1(nd ? "ScatterND" : "ScatterElements", scatter_attrs(nd, axis), {none, indices, ids}));
  KILN_ASSIGN_OR_RETURN(GradValue won, gather_at(b, nd, axis, last, indices));
  return grad_util::binary(b, ElementWiseOp::kEqual, won, ids);
}

// ScatterND / ScatterElements with reduction none or add: the updates' gradient is dy gathered at the
// indices (for none, only where the update was the one that stayed); the data's is dy, with the
// overwritten positions zeroed for none (add keeps them).
Status scatter_grad(GradBuilder& b, bool nd) {
  const GradValue dy = b.grad_output(0);
  if (!dy) return Status::ok();
  const ScatterReduction red =
      nd ? b.attrs_as<ScatterNDAttrs>().reduction : b.attrs_as<ScatterElementsAttrs>().reduction;
  if (red != ScatterReduction::kNone && red != ScatterReduction::kAdd)
    return unsupported(nd ? "ScatterND" : "ScatterElements", " with reduction ", enum_name(red),
                       " has no gradient (only none and add)");
  const int64_t axis = nd ? 0 : b.attrs_as<ScatterElementsAttrs>().axis;
  const GradValue indices = b.input(1), updates = b.input(2);
  KILN_RETURN_IF_ERROR(require_static(b, b.input(0), "input 'data'"));
  KILN_RETURN_IF_ERROR(require_static(b, updates, "input 'updates'"));
  const TensorDesc ud = b.desc(updates);
  if (b.needs_grad(0)) {
    GradValue g = dy;
    if (red == ScatterReduction::kNone) {
      KILN_ASSIGN_OR_RETURN(GradValue zeros, grad_util::zeros(b, ud.dtype, ud.dims));
      KILN_ASSIGN_OR_RETURN(
          g, b.add1(nd ? "ScatterND" : "ScatterElements", scatter_attrs(nd, axis), {dy, indices, zeros}));
    }
    KILN_RETURN_IF_ERROR(b.set_grad(0, g));
  }
  if (b.needs_grad(2)) {
    KILN_ASSIGN_OR_RETURN(GradValue g, gather_at(b, nd, axis, dy, indices));
    if (red == ScatterReduction::kNone) {
      KILN_ASSIGN_OR_RETURN(GradValue won, winners(b, nd, axis, b.desc(b.input(0)).dims, ud.dims, indices));
      KILN_ASSIGN_OR_RETURN(GradValue zero, b.scalar(0.0, ud.dtype));
      KILN_ASSIGN_OR_RETURN(g, grad_util::where(b, won, g, zero));
    }
    KILN_RETURN_IF_ERROR(b.set_grad(2, g));
  }
  return Status::ok();
}

Status scatter_nd_grad(GradBuilder& b) { return scatter_grad(b, true); }
Status scatter_elements_grad(GradBuilder& b) { return scatter_grad(b, false); }

KILN_REGISTER_GRAD("Gather", gather_grad);
KILN_REGISTER_GRAD("GatherElements", gather_elements_grad);
KILN_REGISTER_GRAD("GatherND", gather_nd_grad);
KILN_REGISTER_GRAD("TopK", topk_grad);
KILN_REGISTER_GRAD("ScatterND", scatter_nd_grad);
KILN_REGISTER_GRAD("ScatterElements", scatter_elements_grad);

}  // namespace
}  // namespace kiln
