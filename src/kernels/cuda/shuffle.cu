// CUDA data movement of the shuffle family: Shuffle, Concatenation, Split, Slice, Expand, Tile, Padding and
// Identity, on raw elements of 1, 2, 4 or 8 bytes. Most are strided copies (copy.cuh); shapes come from the
// tensors, so only Slice and Padding read index inputs on the host.
#include <vector>

#include "kernels/common/shuffle_common.h"
#include "kernels/cuda/copy.cuh"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/types.cuh"
#include "ops/shuffle/shuffle.h"

namespace kiln {
namespace {

using cuda::CopyPlan;

// ---- Shuffle ------------------------------------------------------------------------------------

bool is_identity(std::span<const int64_t> perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// The copy of contiguous `dims` into their transpose by `perm` (contiguous).
CopyPlan transpose_plan(const Dims& dims, std::span<const int64_t> perm) {
  int64_t src[kMaxRank], dst[kMaxRank];
  cuda::row_major_strides(dims, src);
  const Dims out = permute_dims(dims, perm);
  cuda::row_major_strides(out, dst);
  CopyPlan plan;
  for (int i = 0; i < out.rank(); ++i) plan.add(out[i], {src[perm[i]], dst[i]});
  return plan;
}

// y = transpose(reshape(transpose(x, first), reshaped), second) in one pass: element i of y is element f of the
// first transpose (`to_flat` maps i to f), which is read from x at `from_flat`(f).
template <class W>
__global__ void double_transpose_kernel(cuda::Offsets<1> to_flat, cuda::Offsets<1> from_flat, const W* __restrict__ src,
                                        W* __restrict__ dst, int64_t n) {
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    int64_t f[1], off[1];
    to_flat.at(i, f);
    from_flat.at(f[0], off);
    dst[i] = src[off[0]];
  }
}

Status double_transpose(const Tensor& x, Tensor& y, const ShuffleAttrs& a, const Dims& reshaped, cudaStream_t stream) {
  // First stage: y's multi-index -> flat index of `reshaped` (= flat index of the first transpose's result).
  int64_t rs[kMaxRank];
  cuda::row_major_strides(reshaped, rs);
  cuda::Offsets<1> to_flat;
  for (int i = 0; i < y.rank(); ++i) to_flat.add(y.dims()[i], {rs[a.second_transpose[i]]});
  to_flat.simplify();
  // Second stage: flat index of the first transpose's result -> offset in x.
  int64_t xs[kMaxRank];
  cuda::row_major_strides(x.dims(), xs);
  const Dims first = permute_dims(x.dims(), a.first_transpose);
  cuda::Offsets<1> from_flat;
  for (int i = 0; i < first.rank(); ++i) from_flat.add(first[i], {xs[a.first_transpose[i]]});
  from_flat.simplify();
  const int64_t n = y.numel();
  const bool known = cuda::dispatch_word(dtype_size(x.dtype()), [&](auto w) {
    using W = cuda::type_of<decltype(w)>;
    double_transpose_kernel<W>
        <<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(to_flat, from_flat, x.data<W>(), y.data<W>(), n);
  });
  if (!known) return unsupported("Shuffle of ", dtype_name(x.dtype()), " elements");
  return cuda::check(cudaGetLastError(), "shuffle kernel launch");
}

Status run_shuffle(KernelContext& ctx) {
  const auto& a = ctx.attrs<ShuffleAttrs>();
  const Tensor& x = ctx.src[0];
  Tensor& y = ctx.dst[0];
  if (y.numel() != x.numel())
    return invalid_argument("Shuffle: output ", y.dims().to_string(), " and input ", x.dims().to_string(),
                            " differ in element count");
  if (y.numel() == 0) return Status::ok();
  const size_t esize = dtype_size(x.dtype());
  cudaStream_t stream = cuda::native(ctx.stream);
  const bool first = !is_identity(a.first_transpose), second = !is_identity(a.second_transpose);
  if ((!a.first_transpose.empty() && static_cast<int>(a.first_transpose.size()) != x.rank()) ||
      (!a.second_transpose.empty() && static_cast<int>(a.second_transpose.size()) != y.rank()))
    return invalid_argument("Shuffle: a permutation does not match the rank of its tensor");
  Dims reshaped = y.dims();
  for (size_t i = 0; i < a.second_transpose.size(); ++i)
    reshaped[static_cast<int>(a.second_transpose[i])] = y.dims()[static_cast<int>(i)];
  if (first && second) return double_transpose(x, y, a, reshaped, stream);
  if (first) return cuda::strided_copy(transpose_plan(x.dims(), a.first_transpose), y.raw(), x.raw(), esize, stream);
  if (second) return cuda::strided_copy(transpose_plan(reshaped, a.second_transpose), y.raw(), x.raw(), esize, stream);
  return cuda::check(cudaMemcpyAsync(y.raw(), x.raw(), x.nbytes(), cudaMemcpyDeviceToDevice, stream),
                     "cudaMemcpyAsync (reshape)");
}

// ---- Concatenation, Split -----------------------------------------------------------------------

// Copies `part` into (concat) or out of (split) `whole` at `offset` along `axis`.
Status copy_part(const Tensor& whole, const Tensor& part, int axis, int64_t offset, bool into_whole,
                 cudaStream_t stream) {
  if (part.numel() == 0) return Status::ok();
  const int64_t whole_axis = whole.dims()[axis];
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= part.dims()[i];
  for (int i = axis + 1; i < part.rank(); ++i) inner *= part.dims()[i];
  const int64_t block = part.dims()[axis] * inner;
  CopyPlan plan;
  plan.add(outer, {into_whole ? block : whole_axis * inner, into_whole ? whole_axis * inner : block});
  plan.add(block, {1, 1});
  const size_t esize = dtype_size(part.dtype());
  char* w = static_cast<char*>(whole.raw()) + offset * inner * static_cast<int64_t>(esize);
  if (into_whole) return cuda::strided_copy(plan, w, part.raw(), esize, stream);
  return cuda::strided_copy(plan, part.raw(), w, esize, stream);
}

Status run_concatenation(KernelContext& ctx) {
  const Tensor& y = ctx.dst[0];
  KILN_ASSIGN_OR_RETURN(int axis, normalize_axis(ctx.attrs<ConcatenationAttrs>().axis, y.rank()));
  int64_t total = 0;
  for (const Tensor& x : ctx.src) total += x.dims()[axis];
  if (total != y.dims()[axis])
    return invalid_argument("Concatenation inputs do not add up to the output along axis ", axis);
  int64_t offset = 0;
  for (const Tensor& x : ctx.src) {
    KILN_RETURN_IF_ERROR(copy_part(y, x, axis, offset, true, cuda::native(ctx.stream)));
    offset += x.dims()[axis];
  }
  return Status::ok();
}

Status run_split(KernelContext& ctx) {
  const Tensor& x = ctx.src[0];
  KILN_ASSIGN_OR_RETURN(int axis, normalize_axis(ctx.attrs<SplitAttrs>().axis, x.rank()));
  int64_t offset = 0;
  for (const Tensor& y : ctx.dst) offset += y.dims()[axis];
  if (offset != x.dims()[axis]) return invalid_argument("Split outputs do not add up to the input along the axis");
  offset = 0;
  for (const Tensor& y : ctx.dst) {
    KILN_RETURN_IF_ERROR(copy_part(x, y, axis, offset, false, cuda::native(ctx.stream)));
    offset += y.dims()[axis];
  }
  return Status::ok();
}

// ---- Slice, Expand ------------------------------------------------------------------------------

Status run_slice(KernelContext& ctx) {
  const Tensor& x = ctx.src[0];
  Tensor& y = ctx.dst[0];
  std::vector<int64_t> in[4];
  for (int i = 0; i < 4; ++i) {
    KILN_ASSIGN_OR_RETURN(in[i], cuda::index_values(ctx, i + 1));
  }
  KILN_ASSIGN_OR_RETURN(auto axes, resolve_slice(x.dims(), in[0], in[1], in[2], in[3]));
  Dims want = x.dims();
  for (int i = 0; i < want.rank(); ++i) want[i] = axes[i].size;
  KILN_RETURN_IF_ERROR(shuffle::expect_dst_dims(y, want, "Slice"));
  if (y.numel() == 0) return Status::ok();
  int64_t src[kMaxRank], dst[kMaxRank];
  cuda::row_major_strides(x.dims(), src);
  cuda::row_major_strides(y.dims(), dst);
  CopyPlan plan;
  int64_t base = 0;
  for (int i = 0; i < x.rank(); ++i) {
    base += axes[i].start * src[i];
    plan.add(axes[i].size, {axes[i].step * src[i], dst[i]});
  }
  const size_t esize = dtype_size(x.dtype());
  return cuda::strided_copy(plan, y.raw(), static_cast<const char*>(x.raw()) + base * static_cast<int64_t>(esize),
                            esize, cuda::native(ctx.stream));
}

Status run_expand(KernelContext& ctx) {
  const Tensor& x = ctx.src[0];
  Tensor& y = ctx.dst[0];
  const int shift = y.rank() - x.rank();
  if (shift < 0) return invalid_argument("Expand: output ", y.dims().to_string(), " has a lower rank than the input");
  for (int k = 0; k < x.rank(); ++k)
    if (x.dims()[k] != 1 && x.dims()[k] != y.dims()[k + shift])
      return invalid_argument("Expand: input ", x.dims().to_string(), " does not broadcast to the output ",
                              y.dims().to_string());
  if (y.numel() == 0) return Status::ok();
  int64_t src[kMaxRank], dst[kMaxRank];
  cuda::row_major_strides(x.dims(), src);
  cuda::row_major_strides(y.dims(), dst);
  CopyPlan plan;
  for (int i = 0; i < y.rank(); ++i) {
    const int k = i - shift;
    plan.add(y.dims()[i], {k >= 0 && x.dims()[k] != 1 ? src[k] : 0, dst[i]});
  }
  return cuda::strided_copy(plan, y.raw(), x.raw(), dtype_size(x.dtype()), cuda::native(ctx.stream));
}

// ---- Tile ---------------------------------------------------------------------------------------

// Output element at multi-index o reads input o % in_dims.
struct TilePlan {
  int rank = 0;
  int64_t out_dims[kMaxRank] = {};
  int64_t in_dims[kMaxRank] = {};
  int64_t in_strides[kMaxRank] = {};
};

template <class W>
__global__ void tile_kernel(TilePlan p, const W* __restrict__ src, W* __restrict__ dst, int64_t n) {
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    int64_t flat = i, off = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int64_t q = flat / p.out_dims[d];
      const int64_t o = flat - q * p.out_dims[d];
      flat = q;
      off += (o % p.in_dims[d]) * p.in_strides[d];
    }
    dst[i] = src[off];
  }
}

Status run_tile(KernelContext& ctx) {
  const Tensor& x = ctx.src[0];
  Tensor& y = ctx.dst[0];
  if (y.rank() != x.rank()) return invalid_argument("Tile: output rank differs from the input rank");
  const int64_t n = y.numel();
  if (n == 0) return Status::ok();
  TilePlan p;
  p.rank = x.rank();
  cuda::row_major_strides(x.dims(), p.in_strides);
  for (int i = 0; i < x.rank(); ++i) {
    // A non-empty output has no empty input dim, so each output dim is a whole number of repeats.
    if (x.dims()[i] == 0 || y.dims()[i] % x.dims()[i] != 0)
      return invalid_argument("Tile: output ", y.dims().to_string(), " is no repeat of the input ",
                              x.dims().to_string());
    p.out_dims[i] = y.dims()[i];
    p.in_dims[i] = x.dims()[i];
  }
  const bool known = cuda::dispatch_word(dtype_size(x.dtype()), [&](auto w) {
    using W = cuda::type_of<decltype(w)>;
    tile_kernel<W>
        <<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::native(ctx.stream)>>>(p, x.data<W>(), y.data<W>(), n);
  });
  if (!known) return unsupported("Tile of ", dtype_name(x.dtype()), " elements");
  return cuda::check(cudaGetLastError(), "tile kernel launch");
}

// ---- Padding ------------------------------------------------------------------------------------

struct PadPlan {
  int rank = 0;
  PadMode mode = PadMode::kConstant;
  int64_t out_dims[kMaxRank] = {};
  int64_t in_dims[kMaxRank] = {};
  int64_t begin[kMaxRank] = {};
  int64_t end[kMaxRank] = {};
  int64_t in_strides[kMaxRank] = {};
};

template <class W>
__global__ void pad_kernel(PadPlan p, const W* __restrict__ src, const W* __restrict__ value, W* __restrict__ dst,
                           int64_t n) {
  const W fill = value ? value[0] : W{};
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    int64_t flat = i, off = 0;
    bool inside = true;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int64_t q = flat / p.out_dims[d];
      const int64_t o = flat - q * p.out_dims[d];
      flat = q;
      const int64_t s = pad_source_index(o, p.in_dims[d], p.begin[d], p.end[d], p.mode);
      inside = inside && s >= 0;
      off += s * p.in_strides[d];
    }
    dst[i] = inside ? src[off] : fill;
  }
}

Status run_padding(KernelContext& ctx) {
  const PadMode mode = ctx.attrs<PaddingAttrs>().mode;
  const Tensor& x = ctx.src[0];
  Tensor& y = ctx.dst[0];
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, cuda::index_values(ctx, 1));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, cuda::index_values(ctx, 3));
  KILN_ASSIGN_OR_RETURN(PadAmounts amounts, resolve_pads(x.rank(), pads, axes));
  Dims want = x.dims();
  for (int i = 0; i < want.rank(); ++i) want[i] += amounts.begin[i] + amounts.end[i];
  KILN_RETURN_IF_ERROR(shuffle::expect_dst_dims(y, want, "Padding"));
  const int64_t n = y.numel();
  if (n == 0) return Status::ok();
  cudaStream_t stream = cuda::native(ctx.stream);
  if (x.rank() == 0)
    return cuda::check(cudaMemcpyAsync(y.raw(), x.raw(), x.nbytes(), cudaMemcpyDeviceToDevice, stream),
                       "cudaMemcpyAsync (pad of a scalar)");
  PadPlan p;
  p.rank = x.rank();
  p.mode = mode;
  cuda::row_major_strides(x.dims(), p.in_strides);
  for (int i = 0; i < x.rank(); ++i) {
    p.out_dims[i] = y.dims()[i];
    p.in_dims[i] = x.dims()[i];
    p.begin[i] = amounts.begin[i];
    p.end[i] = amounts.end[i];
  }
  const bool has_value = ctx.src.size() > 2 && ctx.src[2].defined() && ctx.src[2].numel() > 0;
  const void* value = has_value ? ctx.src[2].raw() : nullptr;
  const bool known = cuda::dispatch_word(dtype_size(x.dtype()), [&](auto w) {
    using W = cuda::type_of<decltype(w)>;
    pad_kernel<W><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(p, x.data<W>(), static_cast<const W*>(value),
                                                                      y.data<W>(), n);
  });
  if (!known) return unsupported("Padding of ", dtype_name(x.dtype()), " elements");
  return cuda::check(cudaGetLastError(), "padding kernel launch");
}

// ---- Identity -----------------------------------------------------------------------------------

Status run_identity(KernelContext& ctx) {
  const Tensor& x = ctx.src[0];
  if (x.nbytes() == 0) return Status::ok();
  return cuda::check(
      cudaMemcpyAsync(ctx.dst[0].raw(), x.raw(), x.nbytes(), cudaMemcpyDeviceToDevice, cuda::native(ctx.stream)),
      "cudaMemcpyAsync (identity)");
}

Status supports_identity(const OpCall& call) {
  KILN_RETURN_IF_ERROR(shuffle::supports_movement(call));
  for (const TensorDesc& t : call.inputs)
    if (t.present && t.kind != ValueKind::kTensor)
      return unsupported("Identity of a ", value_kind_name(t.kind), " runs on the host");
  return Status::ok();
}

// ---- registration -------------------------------------------------------------------------------

const int kOneIndexInput[] = {1};
const int kSliceIndexInputs[] = {1, 2, 3, 4};
const int kPadIndexInputs[] = {1, 3};

KernelImpl cuda_impl(const char* name, const char* op, RunFn run, std::span<const int> index_inputs) {
  return KernelImpl{
      .name = name,
      .op = op,
      .backend = Backend::kCuda,
      .priority = 10,
      .supports = [index_inputs](const OpCall& call) { return shuffle::supports_movement(call, index_inputs); },
      .create = stateless(std::move(run)),
  };
}

KILN_REGISTER_KERNEL(cuda_impl("cuda.shuffle", "Shuffle", run_shuffle, kOneIndexInput));
KILN_REGISTER_KERNEL(cuda_impl("cuda.concatenation", "Concatenation", run_concatenation, {}));
KILN_REGISTER_KERNEL(cuda_impl("cuda.split", "Split", run_split, kOneIndexInput));
KILN_REGISTER_KERNEL(cuda_impl("cuda.slice", "Slice", run_slice, kSliceIndexInputs));
KILN_REGISTER_KERNEL(cuda_impl("cuda.expand", "Expand", run_expand, kOneIndexInput));
KILN_REGISTER_KERNEL(cuda_impl("cuda.tile", "Tile", run_tile, kOneIndexInput));
KILN_REGISTER_KERNEL(cuda_impl("cuda.padding", "Padding", run_padding, kPadIndexInputs));
KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.identity",
    .op = "Identity",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = supports_identity,
    .create = stateless(run_identity),
});

}  // namespace
}  // namespace kiln
