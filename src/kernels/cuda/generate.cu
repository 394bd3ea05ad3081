// CUDA ops that make or mask values: Trilu, Range, ConstantOfShape, Constant and EyeLike. Scalars that decide
// values (Trilu's k, Range's start and delta) are read by the kernels from device memory: no host round trip.
#include <cstring>
#include <mutex>

#include "kernels/common/shuffle_common.h"
#include "kernels/cuda/copy.cuh"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/types.cuh"
#include "kernels/ref/constant_of_shape.h"
#include "kernels/ref/eye_like.h"
#include "kernels/ref/range.h"
#include "ops/constant/constant.h"
#include "ops/trilu/trilu.h"

namespace kiln {
namespace {

// The bytes of `v` of storage type T, as the fill value of cuda::fill.
template <class T>
uint64_t value_bits(T v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}

// ---- Trilu --------------------------------------------------------------------------------------

template <class W>
__global__ void trilu_kernel(const W* __restrict__ src, W* __restrict__ dst, int64_t n, int64_t rows, int64_t cols,
                             const void* k_ptr, bool k_int32, bool upper) {
  int64_t k = 0;
  if (k_ptr) k = k_int32 ? static_cast<const int32_t*>(k_ptr)[0] : static_cast<const int64_t*>(k_ptr)[0];
  for (int64_t e = cuda::thread_index(); e < n; e += cuda::thread_count()) {
    const int64_t row = e / cols;
    const int64_t j = e - row * cols, i = row % rows;
    const bool keep = upper ? j - i >= k : j - i <= k;
    dst[e] = keep ? src[e] : W{};
  }
}

Status run_trilu(KernelContext& ctx) {
  const auto& a = ctx.attrs<TriluAttrs>();
  const Tensor& x = ctx.src[0];
  const int64_t n = x.numel();
  if (n == 0) return Status::ok();
  if (x.rank() < 2) return invalid_argument("Trilu needs a tensor of rank 2 or more, got ", x.dims().to_string());
  const int64_t rows = x.dims()[x.rank() - 2], cols = x.dims()[x.rank() - 1];
  const bool has_k = ctx.src.size() > 1 && ctx.src[1].defined() && ctx.src[1].numel() > 0;
  const void* k_ptr = has_k ? ctx.src[1].raw() : nullptr;
  const bool k_int32 = has_k && ctx.src[1].dtype() == DataType::kInt32;
  const bool known = cuda::dispatch_word(dtype_size(x.dtype()), [&](auto w) {
    using W = cuda::type_of<decltype(w)>;
    trilu_kernel<W><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::native(ctx.stream)>>>(
        x.data<W>(), ctx.dst[0].data<W>(), n, rows, cols, k_ptr, k_int32, a.upper);
  });
  if (!known) return unsupported("Trilu of ", dtype_name(x.dtype()), " elements");
  return cuda::check(cudaGetLastError(), "trilu kernel launch");
}

const int kTriluIndexInputs[] = {1};

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.trilu",
    .op = "Trilu",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) { return shuffle::supports_movement(call, kTriluIndexInputs); },
    .create = stateless(run_trilu),
});

// ---- Range --------------------------------------------------------------------------------------

// start + i * delta in int64 for integers, double for floats (ref::RangeFn), stored as T.
template <class T>
__global__ void range_kernel(const T* __restrict__ start, const T* __restrict__ delta, T* __restrict__ dst, int64_t n) {
  using Acc = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
  const auto s = static_cast<Acc>(cuda::load(start[0]));
  const auto d = static_cast<Acc>(cuda::load(delta[0]));
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count())
    dst[i] = cuda::store<T>(s + static_cast<Acc>(i) * d);
}

Status run_range(KernelContext& ctx) {
  // The output length was inferred from the values; check it again when the engine knows them.
  const Tensor *start = ctx.call.constant(0), *limit = ctx.call.constant(1), *delta = ctx.call.constant(2);
  Tensor& y = ctx.dst[0];
  if (start && limit && delta) {
    KILN_ASSIGN_OR_RETURN(int64_t len, range_length(start->dtype(), *start, *limit, *delta));
    if (y.numel() != len)
      return invalid_argument("Range: output has ", y.numel(), " elements but the inputs give ", len);
  }
  const int64_t n = y.numel();
  if (n == 0) return Status::ok();
  bool known = false;
  cuda::dispatch_dtype(y.dtype(), [&](auto tag) {
    using T = cuda::type_of<decltype(tag)>;
    if constexpr (!std::is_same_v<T, bool>) {
      range_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::native(ctx.stream)>>>(
          ctx.src[0].data<T>(), ctx.src[2].data<T>(), y.data<T>(), n);
      known = true;
    }
  });
  if (!known) return unsupported("no Range kernel for ", dtype_name(y.dtype()));
  return cuda::check(cudaGetLastError(), "range kernel launch");
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.range",
    .op = "Range",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = ref::supports_range,
    .create = stateless(run_range),
});

// ---- ConstantOfShape ----------------------------------------------------------------------------

Status run_constant_of_shape(KernelContext& ctx) {
  const auto& a = ctx.attrs<ConstantOfShapeAttrs>();
  Tensor& y = ctx.dst[0];
  uint64_t bits = 0;
  const bool known = ew::dispatch_dtype(y.dtype(), [&](auto tag) {
    using T = cuda::type_of<decltype(tag)>;
    bits = value_bits(ref::constant_of_shape_value<T>(a));
  });
  if (!known) return unsupported("no ConstantOfShape kernel for ", dtype_name(y.dtype()));
  return cuda::fill(y.raw(), y.numel(), dtype_size(y.dtype()), bits, cuda::native(ctx.stream));
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.constant_of_shape",
    .op = "ConstantOfShape",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = ref::supports_constant_of_shape,
    .create = stateless(run_constant_of_shape),
});

// ---- Constant -----------------------------------------------------------------------------------

// Decodes the value once; the first run copies it to the device (through the context's allocator; like prepared
// weights, not counted as workspace) and every run copies it from there, so the runs after the first make no host
// transfer (and can be captured in a CUDA graph).
class CudaConstant final : public Kernel {
 public:
  explicit CudaConstant(Tensor value) : value_(std::move(value)) {}

  Status run(KernelContext& ctx) override {
    Tensor& y = ctx.dst[0];
    if (y.dtype() != value_.dtype() || y.dims() != value_.dims())
      return invalid_argument("Constant output ", y.describe(), " does not match its value ", value_.describe());
    if (value_.nbytes() == 0) return Status::ok();
    cudaStream_t stream = cuda::native(ctx.stream);
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (!device_.defined() || device_.device() != y.device()) {
        KILN_ASSIGN_OR_RETURN(Tensor d, Tensor::empty(value_.dtype(), value_.dims(), ctx.allocator, "constant"));
        KILN_RETURN_IF_ERROR(
            cuda::check(cudaMemcpyAsync(d.raw(), value_.raw(), value_.nbytes(), cudaMemcpyHostToDevice, stream),
                        "cudaMemcpyAsync"));
        KILN_RETURN_IF_ERROR(cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
        device_ = std::move(d);
      }
    }
    return cuda::check(cudaMemcpyAsync(y.raw(), device_.raw(), value_.nbytes(), cudaMemcpyDeviceToDevice, stream),
                       "cudaMemcpyAsync (constant)");
  }

 private:
  Tensor value_;
  std::mutex mutex_;
  Tensor device_;
};

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.constant",
    .op = "Constant",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) -> Status {
      KILN_RETURN_IF_ERROR(shuffle::supports_movement(call));
      const auto& a = call.attrs_as<ConstantAttrs>();
      if (call.outputs.size() != 1 || call.outputs[0].dtype != a.dtype)
        return unsupported("the output type differs from the constant's ", dtype_name(a.dtype));
      return Status::ok();
    },
    .create = [](const OpCall& call) -> Result<std::unique_ptr<Kernel>> {
      KILN_ASSIGN_OR_RETURN(Tensor value, constant_value(call.attrs_as<ConstantAttrs>()));
      return std::unique_ptr<Kernel>(std::make_unique<CudaConstant>(std::move(value)));
    },
});

// ---- EyeLike ------------------------------------------------------------------------------------

template <class W>
__global__ void eye_like_kernel(W* __restrict__ dst, int64_t n, int64_t cols, int64_t k, W one) {
  for (int64_t e = cuda::thread_index(); e < n; e += cuda::thread_count()) {
    const int64_t i = e / cols, j = e - i * cols;
    dst[e] = j - i == k ? one : W{};
  }
}

Status run_eye_like(KernelContext& ctx) {
  const int64_t k = ctx.attrs<EyeLikeAttrs>().k;
  Tensor& y = ctx.dst[0];
  const int64_t n = y.numel();
  if (n == 0) return Status::ok();
  if (y.rank() != 2) return invalid_argument("EyeLike needs a 2-D output, got ", y.dims().to_string());
  uint64_t one = 0;
  const bool typed = ew::dispatch_dtype(y.dtype(), [&](auto tag) {
    using T = cuda::type_of<decltype(tag)>;
    one = value_bits(ew::store<T>(1));
  });
  if (!typed) return unsupported("no EyeLike kernel for ", dtype_name(y.dtype()));
  const bool known = cuda::dispatch_word(dtype_size(y.dtype()), [&](auto w) {
    using W = cuda::type_of<decltype(w)>;
    W v;
    std::memcpy(&v, &one, sizeof(W));
    eye_like_kernel<W>
        <<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::native(ctx.stream)>>>(y.data<W>(), n, y.dims()[1], k, v);
  });
  if (!known) return unsupported("EyeLike of ", dtype_name(y.dtype()), " elements");
  return cuda::check(cudaGetLastError(), "eye_like kernel launch");
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.eye_like",
    .op = "EyeLike",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = ref::supports_eye_like,
    .create = stateless(run_eye_like),
});

}  // namespace
}  // namespace kiln
