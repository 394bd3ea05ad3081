// CUDA training normalization (the formulas of kernels/ref/normalization_train.h, sums in float32):
// - BatchNormalizationTraining: one block per channel of x [N, C, ...]: batch mean, then the variance around it (no
//   Bessel correction), y = x * s + t, the running statistics momentum * running + (1 - momentum) * batch, and the
//   saved mean and 1 / sqrt(var + epsilon).
// - BatchNormalizationBackward: one block per channel: sum(dy) and sum(dy * xhat) in one pass, then dx (training:
//   with the batch statistics' dependence on x; global_stats: dx = dy * scale * inv_std, plus dmean and dvar).
// - LayerNormalizationBackward: one block per row (the dims before axis): mean and inv_std (kept in scratch), the
//   row sums of g = dy * scale and g * xhat, dx; then one thread per normalized element sums dscale over the rows.
// Per-channel parameters may have another float type than x (read through load_float).
#include <algorithm>
#include <cmath>

#include "kernels/common/indexing.h"
#include "kernels/cuda/cublaslt_gemm.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/types.cuh"
#include "ops/normalization/normalization.h"
#include "ops/normalization/normalization_train.h"

namespace kiln {
namespace {

using cuda::FloatKind;

constexpr int kThreads = 256;

__device__ inline void store_float(void* p, FloatKind kind, int64_t i, float v) {
  switch (kind) {
    case FloatKind::kF16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    case FloatKind::kBF16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    default: static_cast<float*>(p)[i] = v; break;
  }
}

// A tensor whose float type is known at run time.
struct FloatRef {
  void* p = nullptr;
  FloatKind kind = FloatKind::kF32;
  __device__ float operator[](int64_t i) const { return cuda::load_float(p, kind, i); }
  __device__ void set(int64_t i, float v) const { store_float(p, kind, i, v); }
};

FloatRef float_ref(const Tensor& t) {
  return {const_cast<void*>(t.raw()), cuda::float_kind(t.dtype()).value_or(FloatKind::kF32)};
}

// x as [n, c, inner]: element idx (< n * inner) of channel ch.
struct Channels {
  int64_t n = 1, c = 1, inner = 1;
  __device__ int64_t at(int64_t ch, int64_t idx) const { return ((idx / inner) * c + ch) * inner + idx % inner; }
};

Channels channels_of(const Dims& x) {
  Channels v;
  v.n = x[0];
  v.c = x[1];
  for (int i = 2; i < x.rank(); ++i) v.inner *= x[i];
  return v;
}

unsigned blocks_for(int64_t units) { return static_cast<unsigned>(std::clamp<int64_t>(units, 1, int64_t{1} << 20)); }

template <class T>
__global__ void __launch_bounds__(kThreads)
    batch_norm_training_kernel(Channels v, const T* x, T* y, FloatRef scale, FloatRef bias, FloatRef running_mean,
                               FloatRef running_var, FloatRef new_mean, FloatRef new_var, float* saved_mean,
                               float* saved_inv_std, float epsilon, float momentum) {
  __shared__ float scratch[32];
  const int64_t count = v.n * v.inner;
  for (int64_t ch = blockIdx.x; ch < v.c; ch += gridDim.x) {
    float part = 0.f;
    for (int64_t idx = threadIdx.x; idx < count; idx += blockDim.x) part += cuda::to_float(x[v.at(ch, idx)]);
    const float mean = count > 0 ? cuda::block_sum(part, scratch) / static_cast<float>(count) : 0.f;
    part = 0.f;
    for (int64_t idx = threadIdx.x; idx < count; idx += blockDim.x) {
      const float d = cuda::to_float(x[v.at(ch, idx)]) - mean;
      part += d * d;
    }
    const float var = count > 0 ? cuda::block_sum(part, scratch) / static_cast<float>(count) : 0.f;
    const double inv_std = 1.0 / sqrt(static_cast<double>(var) + epsilon);
    const float s = static_cast<float>(scale[ch] * inv_std);
    const float t = static_cast<float>(bias[ch] - static_cast<double>(mean) * s);
    for (int64_t idx = threadIdx.x; idx < count; idx += blockDim.x) {
      const int64_t i = v.at(ch, idx);
      y[i] = cuda::from_float<T>(cuda::to_float(x[i]) * s + t);
    }
    if (threadIdx.x == 0) {
      new_mean.set(ch, static_cast<float>(momentum * static_cast<double>(running_mean[ch]) + (1.0 - momentum) * mean));
      new_var.set(ch, static_cast<float>(momentum * static_cast<double>(running_var[ch]) + (1.0 - momentum) * var));
      saved_mean[ch] = mean;
      saved_inv_std[ch] = static_cast<float>(inv_std);
    }
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    batch_norm_backward_kernel(Channels v, const T* dy, const T* x, FloatRef scale, FloatRef mean_in, FloatRef stat,
                               T* dx, FloatRef dscale, FloatRef dbias, FloatRef dmean, FloatRef dvar, float epsilon,
                               bool global_stats) {
  __shared__ float scratch[32];
  const int64_t count = v.n * v.inner;
  for (int64_t ch = blockIdx.x; ch < v.c; ch += gridDim.x) {
    const float mean = mean_in[ch];
    const double inv_std_d =
        global_stats ? 1.0 / sqrt(static_cast<double>(stat[ch]) + epsilon) : static_cast<double>(stat[ch]);
    const float inv_std = static_cast<float>(inv_std_d);
    float part_dy = 0.f, part_dy_xhat = 0.f;
    for (int64_t idx = threadIdx.x; idx < count; idx += blockDim.x) {
      const int64_t i = v.at(ch, idx);
      const float g = cuda::to_float(dy[i]);
      part_dy += g;
      part_dy_xhat += g * (cuda::to_float(x[i]) - mean) * inv_std;
    }
    const float sum_dy = cuda::block_sum(part_dy, scratch);
    const float sum_dy_xhat = cuda::block_sum(part_dy_xhat, scratch);
    const double sc = scale[ch];
    const float k = static_cast<float>(sc * inv_std_d);
    if (threadIdx.x == 0) {
      dbias.set(ch, sum_dy);
      dscale.set(ch, sum_dy_xhat);
      if (global_stats) {
        dmean.set(ch, static_cast<float>(-sc * inv_std_d * sum_dy));
        dvar.set(ch, static_cast<float>(-0.5 * sc * inv_std_d * inv_std_d * sum_dy_xhat));
      }
    }
    if (global_stats) {
      for (int64_t idx = threadIdx.x; idx < count; idx += blockDim.x) {
        const int64_t i = v.at(ch, idx);
        dx[i] = cuda::from_float<T>(cuda::to_float(dy[i]) * k);
      }
      continue;
    }
    const float mean_dy = count > 0 ? sum_dy / static_cast<float>(count) : 0.f;
    const float mean_dy_xhat = count > 0 ? sum_dy_xhat / static_cast<float>(count) : 0.f;
    for (int64_t idx = threadIdx.x; idx < count; idx += blockDim.x) {
      const int64_t i = v.at(ch, idx);
      const float xv = cuda::to_float(x[i]);
      dx[i] = cuda::from_float<T>(k * (cuda::to_float(dy[i]) - mean_dy - (xv - mean) * inv_std * mean_dy_xhat));
    }
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    layer_norm_backward_rows(const T* dy, const T* x, T* dx, FloatRef scale, BroadcastIndexer scale_at, int64_t rows,
                             int64_t d, float epsilon, float* mean_out, float* inv_std_out) {
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * d;
    const T* gr = dy + r * d;
    float part = 0.f;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) part += cuda::to_float(xr[j]);
    const float mean = d > 0 ? cuda::block_sum(part, scratch) / static_cast<float>(d) : 0.f;
    part = 0.f;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      const float e = cuda::to_float(xr[j]) - mean;
      part += e * e;
    }
    const float var = d > 0 ? cuda::block_sum(part, scratch) / static_cast<float>(d) : 0.f;
    const float inv_std = static_cast<float>(1.0 / sqrt(static_cast<double>(var) + epsilon));
    float part_g = 0.f, part_gx = 0.f;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      const float g = cuda::to_float(gr[j]) * (scale.p ? scale[scale_at(j)] : 1.f);
      part_g += g;
      part_gx += g * (cuda::to_float(xr[j]) - mean) * inv_std;
    }
    const float sum_g = cuda::block_sum(part_g, scratch);
    const float sum_gx = cuda::block_sum(part_gx, scratch);
    const float mg = d > 0 ? sum_g / static_cast<float>(d) : 0.f;
    const float mgx = d > 0 ? sum_gx / static_cast<float>(d) : 0.f;
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      const float xhat = (cuda::to_float(xr[j]) - mean) * inv_std;
      const float g = cuda::to_float(gr[j]) * (scale.p ? scale[scale_at(j)] : 1.f);
      dx[r * d + j] = cuda::from_float<T>(inv_std * (g - mg - xhat * mgx));
    }
    if (threadIdx.x == 0) {
      mean_out[r] = mean;
      inv_std_out[r] = inv_std;
    }
  }
}

template <class T>
__global__ void layer_norm_backward_dscale(const T* dy, const T* x, const float* mean, const float* inv_std,
                                           int64_t rows, int64_t d, T* dscale) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < d; j += int64_t{blockDim.x} * gridDim.x) {
    float acc = 0.f;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r * d + j;
      acc += cuda::to_float(dy[i]) * (cuda::to_float(x[i]) - mean[r]) * inv_std[r];
    }
    dscale[j] = cuda::from_float<T>(acc);
  }
}

template <class F>
Status dispatch(DataType dt, const char* op, F&& f) {
  switch (dt) {
    case DataType::kFloat32: return f(cuda::Type<float>{});
    case DataType::kFloat16: return f(cuda::Type<__half>{});
    case DataType::kBFloat16: return f(cuda::Type<__nv_bfloat16>{});
    default: return unsupported(op, " on ", dtype_name(dt));
  }
}

Status run_batch_norm_training(KernelContext& ctx) {
  const auto& a = ctx.attrs<BatchNormalizationTrainingAttrs>();
  const Tensor& x = ctx.src[0];
  const Channels v = channels_of(x.dims());
  if (v.c == 0) return Status::ok();
  return dispatch(x.dtype(), "BatchNormalizationTraining", [&](auto tag) {
    using T = cuda::type_of<decltype(tag)>;
    batch_norm_training_kernel<T><<<blocks_for(v.c), kThreads, 0, cuda::native(ctx.stream)>>>(
        v, x.data<T>(), ctx.dst[0].data<T>(), float_ref(ctx.src[1]), float_ref(ctx.src[2]), float_ref(ctx.src[3]),
        float_ref(ctx.src[4]), float_ref(ctx.dst[1]), float_ref(ctx.dst[2]), ctx.dst[3].data<float>(),
        ctx.dst[4].data<float>(), a.epsilon, a.momentum);
    return cuda::check(cudaGetLastError(), "batch norm training kernel launch");
  });
}

Status run_batch_norm_backward(KernelContext& ctx) {
  const auto& a = ctx.attrs<BatchNormalizationBackwardAttrs>();
  const Tensor& x = ctx.src[1];
  const Channels v = channels_of(x.dims());
  if (v.c == 0) return Status::ok();
  if (ctx.src[0].numel() != x.numel())
    return invalid_argument("BatchNormalizationBackward dy ", ctx.src[0].dims().to_string(),
                            " does not have x's shape ", x.dims().to_string());
  const FloatRef none{};
  return dispatch(x.dtype(), "BatchNormalizationBackward", [&](auto tag) {
    using T = cuda::type_of<decltype(tag)>;
    batch_norm_backward_kernel<T><<<blocks_for(v.c), kThreads, 0, cuda::native(ctx.stream)>>>(
        v, ctx.src[0].data<T>(), x.data<T>(), float_ref(ctx.src[2]), float_ref(ctx.src[3]), float_ref(ctx.src[4]),
        ctx.dst[0].data<T>(), float_ref(ctx.dst[1]), float_ref(ctx.dst[2]),
        a.global_stats ? float_ref(ctx.dst[3]) : none, a.global_stats ? float_ref(ctx.dst[4]) : none, a.epsilon,
        a.global_stats);
    return cuda::check(cudaGetLastError(), "batch norm backward kernel launch");
  });
}

class LayerNormBackward final : public Kernel {
 public:
  size_t workspace_bytes() const override { return scratch_bytes_; }

  Status run(KernelContext& ctx) override {
    const auto& a = ctx.attrs<LayerNormalizationAttrs>();
    const Tensor& x = ctx.src[1];
    const Dims& xd = x.dims();
    KILN_ASSIGN_OR_RETURN(int axis, normalize_axis(a.axis, xd.rank()));
    const AxisSplit split(xd, axis);
    const int64_t rows = split.outer, d = split.size * split.inner;
    if (d == 0) return Status::ok();
    if (ctx.src[0].numel() != x.numel())
      return invalid_argument("LayerNormalizationBackward dy ", ctx.src[0].dims().to_string(),
                              " does not have x's shape ", xd.to_string());
    const cudaStream_t stream = cuda::native(ctx.stream);
    const bool has_scale = ctx.src.size() > 2 && ctx.src[2].defined();
    const Dims& norm = ctx.dst[1].dims();
    const BroadcastIndexer scale_at(has_scale ? ctx.src[2].dims() : norm, norm);
    const FloatRef scale = has_scale ? float_ref(ctx.src[2]) : FloatRef{};
    scratch_bytes_ = static_cast<size_t>(std::max<int64_t>(rows, 1)) * 2 * sizeof(float);
    KILN_ASSIGN_OR_RETURN(void* scratch,
                          scratch_.get(ctx.allocator, scratch_bytes_, "LayerNormalizationBackward statistics", stream));
    float* mean = static_cast<float*>(scratch);
    float* inv_std = mean + std::max<int64_t>(rows, 1);
    return dispatch(x.dtype(), "LayerNormalizationBackward", [&](auto tag) -> Status {
      using T = cuda::type_of<decltype(tag)>;
      if (rows > 0) {
        layer_norm_backward_rows<T><<<blocks_for(rows), kThreads, 0, stream>>>(ctx.src[0].data<T>(), x.data<T>(),
                                                                               ctx.dst[0].data<T>(), scale, scale_at,
                                                                               rows, d, a.epsilon, mean, inv_std);
        KILN_RETURN_IF_ERROR(cuda::check(cudaGetLastError(), "layer norm backward kernel launch"));
      }
      layer_norm_backward_dscale<T><<<cuda::grid_for(d), 256, 0, stream>>>(ctx.src[0].data<T>(), x.data<T>(), mean,
                                                                           inv_std, rows, d, ctx.dst[1].data<T>());
      return cuda::check(cudaGetLastError(), "layer norm dscale kernel launch");
    });
  }

 private:
  size_t scratch_bytes_ = 0;
  cuda::DeviceScratch scratch_;
};

Status floats(const OpCall& call) {
  return require_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16});
}

// x (input `x_index`), dy and the outputs named in `same` share one type.
Status same_type(const OpCall& call, const char* name, int x_index, std::initializer_list<int> inputs,
                 std::initializer_list<int> outputs) {
  KILN_RETURN_IF_ERROR(floats(call));
  const DataType dt = call.inputs[x_index].dtype;
  for (int i : inputs)
    if (call.has_input(i) && call.inputs[i].dtype != dt)
      return unsupported(name, " takes input ", i, " in x's type (", dtype_name(dt), ")");
  for (int i : outputs)
    if (i < static_cast<int>(call.outputs.size()) && call.outputs[i].dtype != dt)
      return unsupported(name, " writes output ", i, " in x's type (", dtype_name(dt), ")");
  return Status::ok();
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.batch_normalization_training",
    .op = "BatchNormalizationTraining",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) { return same_type(call, "cuda.batch_normalization_training", 0, {}, {0}); },
    .create = stateless(run_batch_norm_training),
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.batch_normalization_backward",
    .op = "BatchNormalizationBackward",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) { return same_type(call, "cuda.batch_normalization_backward", 1, {0}, {0}); },
    .create = stateless(run_batch_norm_backward),
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.layer_normalization_backward",
    .op = "LayerNormalizationBackward",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports =
        [](const OpCall& call) {
          return same_type(call, "cuda.layer_normalization_backward", 1, {0}, {0, 1});
        },
    .create = [](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<LayerNormBackward>());
    },
});

}  // namespace
}  // namespace kiln
