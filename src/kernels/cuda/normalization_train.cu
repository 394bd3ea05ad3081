// CUDA training normalization (the formulas of kernels/ref/normalization_train.h, sums in float32):
// - BatchNormalizationTraining over x [N, C, ...]: the batch mean, then the variance around it (no Bessel
//   correction), y = x * s + t, the running statistics momentum * running + (1 - momentum) * batch, and the saved
//   mean and 1 / sqrt(var + epsilon).
// - BatchNormalizationBackward: sum(dy) and sum(dy * xhat) in one pass, then dx (training: with the batch
//   statistics' dependence on x; global_stats: dx = dy * scale * inv_std, plus dmean and dvar).
//   Both split every channel into pieces (see "BatchNormalization kernels" below) so that the whole GPU works on a
//   few channels of many elements.
// - LayerNormalizationBackward: one block per row (the dims before axis): mean and inv_std (kept in scratch), the
//   row sums of g = dy * scale and g * xhat, dx; then one thread per normalized element sums dscale over the rows.
// - InstanceNormalizationBackward: one block per (n, c) plane (a layer-norm row with the channel's scale), then one
//   thread per channel sums dscale and dbias over the batch.
// Per-channel parameters may have another float type than x (read through load_float).
#include <algorithm>
#include <cmath>

#include "kernels/common/indexing.h"
#include "kernels/cuda/cublaslt_gemm.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/dispatch.cuh"
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

// BatchNormalization kernels. Each channel's count = N * inner elements split into `chunks` pieces: one block per
// (chunk, channel) sums its piece (partial[ch * chunks + k]), one thread per channel adds the partial sums in order
// (double), and the elementwise pass runs over every element at once. Deterministic: no atomics.
struct Chunks {
  int64_t chunks = 1, size = 1;  // pieces per channel, elements per piece
};

Chunks chunks_for(int64_t count) {
  constexpr int64_t kPiece = 16 * kThreads;
  Chunks c;
  c.chunks = std::clamp<int64_t>((count + kPiece - 1) / kPiece, 1, 1024);
  c.size = std::max<int64_t>((count + c.chunks - 1) / c.chunks, 1);
  return c;
}

// Blocks over (chunk, channel): x the chunk, y (and z) the channel.
dim3 chunk_grid(const Channels& v, const Chunks& c) {
  const int64_t ch = std::max<int64_t>(v.c, 1);
  return dim3(static_cast<unsigned>(c.chunks), static_cast<unsigned>(std::min<int64_t>(ch, 65535)),
              static_cast<unsigned>(std::min<int64_t>((ch + 65534) / 65535, 65535)));
}

__device__ inline int64_t channel_of_block() { return static_cast<int64_t>(blockIdx.z) * gridDim.y + blockIdx.y; }

// partial[ch * chunks + k] = sum over chunk k of channel ch of f(x[i]) (f: x, or (x - mean[ch])^2).
template <class T, bool kSquares>
__global__ void __launch_bounds__(kThreads)
    channel_partial_sums(Channels v, Chunks c, const T* x, const float* mean, float* partial) {
  __shared__ float scratch[32];
  const int64_t ch = channel_of_block();
  if (ch >= v.c) return;
  const int64_t count = v.n * v.inner, begin = blockIdx.x * c.size,
                end = begin + c.size < count ? begin + c.size : count;
  const float m = kSquares ? mean[ch] : 0.f;
  float part = 0.f;
  for (int64_t idx = begin + threadIdx.x; idx < end; idx += blockDim.x) {
    const float e = cuda::to_float(x[v.at(ch, idx)]);
    part += kSquares ? (e - m) * (e - m) : e;
  }
  part = cuda::block_sum(part, scratch);
  if (threadIdx.x == 0) partial[ch * c.chunks + blockIdx.x] = part;
}

__device__ inline double channel_total(const float* partial, int64_t chunks, int64_t ch) {
  double total = 0;
  for (int64_t k = 0; k < chunks; ++k) total += partial[ch * chunks + k];
  return total;
}

__global__ void channel_means(const float* partial, int64_t chunks, int64_t channels, int64_t count, float* mean) {
  for (int64_t ch = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; ch < channels;
       ch += int64_t{blockDim.x} * gridDim.x)
    mean[ch] = count > 0 ? static_cast<float>(channel_total(partial, chunks, ch) / static_cast<double>(count)) : 0.f;
}

// The variance, saved statistics, running statistics and y = x * s + t's coefficients (st[2 ch], st[2 ch + 1]).
__global__ void batch_norm_statistics(const float* partial, int64_t chunks, int64_t channels, int64_t count,
                                      const float* mean, FloatRef scale, FloatRef bias, FloatRef running_mean,
                                      FloatRef running_var, FloatRef new_mean, FloatRef new_var, float* saved_mean,
                                      float* saved_inv_std, float epsilon, float momentum, float* st) {
  for (int64_t ch = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; ch < channels;
       ch += int64_t{blockDim.x} * gridDim.x) {
    const double m = mean[ch];
    const double var = count > 0 ? channel_total(partial, chunks, ch) / static_cast<double>(count) : 0.0;
    const double inv_std = 1.0 / sqrt(var + epsilon);
    const float s = static_cast<float>(scale[ch] * inv_std);
    st[2 * ch] = s;
    st[2 * ch + 1] = static_cast<float>(bias[ch] - m * s);
    new_mean.set(ch, static_cast<float>(momentum * static_cast<double>(running_mean[ch]) + (1.0 - momentum) * m));
    new_var.set(ch, static_cast<float>(momentum * static_cast<double>(running_var[ch]) + (1.0 - momentum) * var));
    saved_mean[ch] = static_cast<float>(m);
    saved_inv_std[ch] = static_cast<float>(inv_std);
  }
}

// y = x * st[2 ch] + st[2 ch + 1] over every element (channel (i / inner) % C).
template <class T>
__global__ void batch_norm_apply(Channels v, const T* x, const float* st, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    const int64_t ch = (i / v.inner) % v.c;
    y[i] = cuda::from_float<T>(cuda::to_float(x[i]) * st[2 * ch] + st[2 * ch + 1]);
  }
}

// The mean and inverse standard deviation a backward problem uses for channel ch.
__device__ inline void backward_stats(FloatRef mean_in, FloatRef stat, bool global_stats, float epsilon, int64_t ch,
                                      float& mean, double& inv_std) {
  mean = mean_in[ch];
  inv_std = global_stats ? 1.0 / sqrt(static_cast<double>(stat[ch]) + epsilon) : static_cast<double>(stat[ch]);
}

// partial[ch * chunks + k] = sum of dy, partial[(C + ch) * chunks + k] = sum of dy * xhat over the chunk.
template <class T>
__global__ void __launch_bounds__(kThreads)
    batch_norm_backward_partials(Channels v, Chunks c, const T* dy, const T* x, FloatRef mean_in, FloatRef stat,
                                 bool global_stats, float epsilon, float* partial) {
  __shared__ float scratch[32];
  const int64_t ch = channel_of_block();
  if (ch >= v.c) return;
  float mean;
  double inv_std_d;
  backward_stats(mean_in, stat, global_stats, epsilon, ch, mean, inv_std_d);
  const float inv_std = static_cast<float>(inv_std_d);
  const int64_t count = v.n * v.inner, begin = blockIdx.x * c.size,
                end = begin + c.size < count ? begin + c.size : count;
  float part_dy = 0.f, part_dy_xhat = 0.f;
  for (int64_t idx = begin + threadIdx.x; idx < end; idx += blockDim.x) {
    const int64_t i = v.at(ch, idx);
    const float g = cuda::to_float(dy[i]);
    part_dy += g;
    part_dy_xhat += g * (cuda::to_float(x[i]) - mean) * inv_std;
  }
  part_dy = cuda::block_sum(part_dy, scratch);
  part_dy_xhat = cuda::block_sum(part_dy_xhat, scratch);
  if (threadIdx.x == 0) {
    partial[ch * c.chunks + blockIdx.x] = part_dy;
    partial[(v.c + ch) * c.chunks + blockIdx.x] = part_dy_xhat;
  }
}

// dscale, dbias (and dmean, dvar) per channel, and dx's coefficients coef[4 ch ...]: k, mean_dy, mean_dy_xhat, and
// mean * inv_std's parts (mean, inv_std).
__global__ void batch_norm_backward_statistics(const float* partial, int64_t chunks, Channels v, FloatRef scale,
                                               FloatRef mean_in, FloatRef stat, bool global_stats, float epsilon,
                                               FloatRef dscale, FloatRef dbias, FloatRef dmean, FloatRef dvar,
                                               float* coef) {
  const int64_t count = v.n * v.inner;
  for (int64_t ch = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; ch < v.c; ch += int64_t{blockDim.x} * gridDim.x) {
    float mean;
    double inv_std_d;
    backward_stats(mean_in, stat, global_stats, epsilon, ch, mean, inv_std_d);
    const float sum_dy = static_cast<float>(channel_total(partial, chunks, ch));
    const float sum_dy_xhat = static_cast<float>(channel_total(partial, chunks, v.c + ch));
    const double sc = scale[ch];
    dbias.set(ch, sum_dy);
    dscale.set(ch, sum_dy_xhat);
    if (global_stats) {
      dmean.set(ch, static_cast<float>(-sc * inv_std_d * sum_dy));
      dvar.set(ch, static_cast<float>(-0.5 * sc * inv_std_d * inv_std_d * sum_dy_xhat));
    }
    float* k = coef + 5 * ch;
    k[0] = static_cast<float>(sc * inv_std_d);
    k[1] = global_stats || count == 0 ? 0.f : sum_dy / static_cast<float>(count);
    k[2] = global_stats || count == 0 ? 0.f : sum_dy_xhat / static_cast<float>(count);
    k[3] = mean;
    k[4] = static_cast<float>(inv_std_d);
  }
}

// dx = k (dy - mean_dy - (x - mean) inv_std mean_dy_xhat) (global statistics: mean_dy = mean_dy_xhat = 0).
template <class T>
__global__ void batch_norm_backward_apply(Channels v, const T* dy, const T* x, const float* coef, bool global_stats,
                                          T* dx, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    const float* k = coef + 5 * ((i / v.inner) % v.c);
    const float g = cuda::to_float(dy[i]);
    dx[i] =
        cuda::from_float<T>(global_stats ? g * k[0] : k[0] * (g - k[1] - (cuda::to_float(x[i]) - k[3]) * k[4] * k[2]));
  }
}

// The backward of one normalized row of d elements (LayerNormalization's normalized dims, an InstanceNormalization
// plane), with block-wide sums: xhat = (x - mean) inv_std, g = dy f(j), dx = out_scale inv_std (g - mean(g) - xhat
// mean(g xhat)). Every thread gets the row's statistics and sums.
struct RowBackward {
  float mean, inv_std, sum_g, sum_gx;
};

template <class T, class F>
__device__ RowBackward row_backward(const T* xr, const T* gr, T* dxr, int64_t d, float epsilon, F f, float out_scale,
                                    float* scratch) {
  RowBackward r;
  float part = 0.f;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) part += cuda::to_float(xr[j]);
  r.mean = d > 0 ? cuda::block_sum(part, scratch) / static_cast<float>(d) : 0.f;
  part = 0.f;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float e = cuda::to_float(xr[j]) - r.mean;
    part += e * e;
  }
  const float var = d > 0 ? cuda::block_sum(part, scratch) / static_cast<float>(d) : 0.f;
  r.inv_std = static_cast<float>(1.0 / sqrt(static_cast<double>(var) + epsilon));
  float part_g = 0.f, part_gx = 0.f;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float g = cuda::to_float(gr[j]) * f(j);
    part_g += g;
    part_gx += g * (cuda::to_float(xr[j]) - r.mean) * r.inv_std;
  }
  r.sum_g = cuda::block_sum(part_g, scratch);
  r.sum_gx = cuda::block_sum(part_gx, scratch);
  const float mg = d > 0 ? r.sum_g / static_cast<float>(d) : 0.f;
  const float mgx = d > 0 ? r.sum_gx / static_cast<float>(d) : 0.f;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float xhat = (cuda::to_float(xr[j]) - r.mean) * r.inv_std;
    dxr[j] = cuda::from_float<T>(out_scale * r.inv_std * (cuda::to_float(gr[j]) * f(j) - mg - xhat * mgx));
  }
  return r;
}

// LayerNormalizationBackward: one block per row; dx, and the row's mean and inv_std for dscale.
template <class T>
__global__ void __launch_bounds__(kThreads)
    layer_norm_backward_rows(const T* dy, const T* x, T* dx, FloatRef scale, BroadcastIndexer scale_at, int64_t rows,
                             int64_t d, float epsilon, float* mean_out, float* inv_std_out) {
  __shared__ float scratch[32];
  auto f = [&](int64_t j) { return scale.p ? scale[scale_at(j)] : 1.f; };
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const RowBackward b = row_backward(x + r * d, dy + r * d, dx + r * d, d, epsilon, f, 1.f, scratch);
    if (threadIdx.x == 0) {
      mean_out[r] = b.mean;
      inv_std_out[r] = b.inv_std;
    }
  }
}

// dscale over pieces of rows: blockIdx.y takes rows [y * rows_per, (y + 1) * rows_per), one thread per element j of
// the normalized dims; partial[y * d + j] its sum. Then one thread per j adds the pieces in order.
template <class T>
__global__ void layer_norm_dscale_partials(const T* dy, const T* x, const float* mean, const float* inv_std,
                                           int64_t rows, int64_t d, int64_t rows_per, float* partial) {
  const int64_t r0 = blockIdx.y * rows_per, r1 = r0 + rows_per < rows ? r0 + rows_per : rows;
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < d; j += int64_t{blockDim.x} * gridDim.x) {
    float acc = 0.f;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = r * d + j;
      acc += cuda::to_float(dy[i]) * (cuda::to_float(x[i]) - mean[r]) * inv_std[r];
    }
    partial[blockIdx.y * d + j] = acc;
  }
}

template <class T>
__global__ void layer_norm_dscale_total(const float* partial, int64_t pieces, int64_t d, T* dscale) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < d; j += int64_t{blockDim.x} * gridDim.x) {
    float acc = 0.f;
    for (int64_t k = 0; k < pieces; ++k) acc += partial[k * d + j];
    dscale[j] = cuda::from_float<T>(acc);
  }
}

// InstanceNormalizationBackward: one block per (n, c) plane of `d` elements, a layer-norm row with the channel's
// scale: dx, and the plane's sums of dy and dy * xhat (sums[2 plane], sums[2 plane + 1]).
template <class T>
__global__ void __launch_bounds__(kThreads)
    instance_norm_backward_planes(const T* dy, const T* x, T* dx, FloatRef scale, int64_t planes, int64_t channels,
                                  int64_t d, float epsilon, float* sums) {
  __shared__ float scratch[32];
  auto one = [](int64_t) { return 1.f; };
  for (int64_t r = blockIdx.x; r < planes; r += gridDim.x) {
    // g = dy * s: dx is s times the unscaled row's.
    const RowBackward b =
        row_backward(x + r * d, dy + r * d, dx + r * d, d, epsilon, one, scale[r % channels], scratch);
    if (threadIdx.x == 0) {
      sums[2 * r] = b.sum_g;
      sums[2 * r + 1] = b.sum_gx;
    }
  }
}

// dscale[c] and dbias[c]: the planes' sums over the batch, in order.
__global__ void instance_norm_channel_totals(const float* sums, int64_t n, int64_t channels, FloatRef dscale,
                                             FloatRef dbias) {
  for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < channels; c += int64_t{blockDim.x} * gridDim.x) {
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t b = 0; b < n; ++b) {
      sum_dy += sums[2 * (b * channels + c)];
      sum_dy_xhat += sums[2 * (b * channels + c) + 1];
    }
    dscale.set(c, static_cast<float>(sum_dy_xhat));
    dbias.set(c, static_cast<float>(sum_dy));
  }
}

// A kernel that keeps float scratch memory between runs.
class ScratchKernel : public Kernel {
 public:
  size_t workspace_bytes() const override { return scratch_bytes_; }

 protected:
  // `count` floats of scratch on the context's device.
  Result<float*> scratch_floats(KernelContext& ctx, int64_t count, const char* tag) {
    scratch_bytes_ = static_cast<size_t>(count) * sizeof(float);
    KILN_ASSIGN_OR_RETURN(void* p, scratch_.get(ctx.allocator, scratch_bytes_, tag, cuda::native(ctx.stream)));
    return static_cast<float*>(p);
  }

 private:
  size_t scratch_bytes_ = 0;
  cuda::DeviceScratch scratch_;
};

class BatchNormTraining final : public ScratchKernel {
 public:
  Status run(KernelContext& ctx) override {
    const auto& a = ctx.attrs<BatchNormalizationTrainingAttrs>();
    const Tensor& x = ctx.src[0];
    const Channels v = channels_of(x.dims());
    if (v.c == 0) return Status::ok();
    const int64_t count = v.n * v.inner;
    const Chunks c = chunks_for(count);
    const cudaStream_t stream = cuda::native(ctx.stream);
    // partial sums, then the means and the y coefficients.
    const int64_t partials = v.c * c.chunks;
    KILN_ASSIGN_OR_RETURN(float* partial, scratch_floats(ctx, partials + 3 * v.c, "BatchNormalizationTraining sums"));
    float* mean = partial + partials;
    float* st = mean + v.c;
    return cuda::dispatch_float_status(x.dtype(), "BatchNormalizationTraining", [&](auto tag) -> Status {
      using T = cuda::type_of<decltype(tag)>;
      const dim3 grid = chunk_grid(v, c);
      channel_partial_sums<T, false><<<grid, kThreads, 0, stream>>>(v, c, x.data<T>(), nullptr, partial);
      KILN_RETURN_IF_ERROR(cuda::check(cudaGetLastError(), "batch norm sum kernel launch"));
      channel_means<<<cuda::grid_for(v.c), 256, 0, stream>>>(partial, c.chunks, v.c, count, mean);
      KILN_RETURN_IF_ERROR(cuda::check(cudaGetLastError(), "batch norm mean kernel launch"));
      channel_partial_sums<T, true><<<grid, kThreads, 0, stream>>>(v, c, x.data<T>(), mean, partial);
      KILN_RETURN_IF_ERROR(cuda::check(cudaGetLastError(), "batch norm variance kernel launch"));
      batch_norm_statistics<<<cuda::grid_for(v.c), 256, 0, stream>>>(
          partial, c.chunks, v.c, count, mean, float_ref(ctx.src[1]), float_ref(ctx.src[2]), float_ref(ctx.src[3]),
          float_ref(ctx.src[4]), float_ref(ctx.dst[1]), float_ref(ctx.dst[2]), ctx.dst[3].data<float>(),
          ctx.dst[4].data<float>(), a.epsilon, a.momentum, st);
      KILN_RETURN_IF_ERROR(cuda::check(cudaGetLastError(), "batch norm statistics kernel launch"));
      const int64_t n = x.numel();
      if (n == 0) return Status::ok();
      batch_norm_apply<T><<<cuda::grid_for(n), 256, 0, stream>>>(v, x.data<T>(), st, ctx.dst[0].data<T>(), n);
      return cuda::check(cudaGetLastError(), "batch norm kernel launch");
    });
  }
};

class BatchNormBackward final : public ScratchKernel {
 public:
  Status run(KernelContext& ctx) override {
    const auto& a = ctx.attrs<BatchNormalizationBackwardAttrs>();
    const Tensor& x = ctx.src[1];
    const Channels v = channels_of(x.dims());
    if (v.c == 0) return Status::ok();
    if (ctx.src[0].numel() != x.numel())
      return invalid_argument("BatchNormalizationBackward dy ", ctx.src[0].dims().to_string(),
                              " does not have x's shape ", x.dims().to_string());
    const Chunks c = chunks_for(v.n * v.inner);
    const cudaStream_t stream = cuda::native(ctx.stream);
    const int64_t partials = 2 * v.c * c.chunks;
    KILN_ASSIGN_OR_RETURN(float* partial, scratch_floats(ctx, partials + 5 * v.c, "BatchNormalizationBackward sums"));
    float* coef = partial + partials;
    const FloatRef none{};
    const FloatRef mean = float_ref(ctx.src[3]), stat = float_ref(ctx.src[4]);
    return cuda::dispatch_float_status(x.dtype(), "BatchNormalizationBackward", [&](auto tag) -> Status {
      using T = cuda::type_of<decltype(tag)>;
      const T* dy = ctx.src[0].data<T>();
      batch_norm_backward_partials<T><<<chunk_grid(v, c), kThreads, 0, stream>>>(v, c, dy, x.data<T>(), mean, stat,
                                                                                 a.global_stats, a.epsilon, partial);
      KILN_RETURN_IF_ERROR(cuda::check(cudaGetLastError(), "batch norm backward sum kernel launch"));
      batch_norm_backward_statistics<<<cuda::grid_for(v.c), 256, 0, stream>>>(
          partial, c.chunks, v, float_ref(ctx.src[2]), mean, stat, a.global_stats, a.epsilon, float_ref(ctx.dst[1]),
          float_ref(ctx.dst[2]), a.global_stats ? float_ref(ctx.dst[3]) : none,
          a.global_stats ? float_ref(ctx.dst[4]) : none, coef);
      KILN_RETURN_IF_ERROR(cuda::check(cudaGetLastError(), "batch norm backward statistics kernel launch"));
      const int64_t n = x.numel();
      if (n == 0) return Status::ok();
      batch_norm_backward_apply<T>
          <<<cuda::grid_for(n), 256, 0, stream>>>(v, dy, x.data<T>(), coef, a.global_stats, ctx.dst[0].data<T>(), n);
      return cuda::check(cudaGetLastError(), "batch norm backward kernel launch");
    });
  }
};

class LayerNormBackward final : public ScratchKernel {
 public:
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
    // dscale sums pieces of up to 64 rows (at most 1024 pieces) in parallel, then the pieces.
    const int64_t pieces = std::clamp<int64_t>((rows + 63) / 64, 1, 1024);
    const int64_t rows_per = std::max<int64_t>((rows + pieces - 1) / pieces, 1);
    const int64_t stat_count = std::max<int64_t>(rows, 1);
    KILN_ASSIGN_OR_RETURN(float* mean,
                          scratch_floats(ctx, 2 * stat_count + pieces * d, "LayerNormalizationBackward statistics"));
    float* inv_std = mean + stat_count;
    float* partial = inv_std + stat_count;
    return cuda::dispatch_float_status(x.dtype(), "LayerNormalizationBackward", [&](auto tag) -> Status {
      using T = cuda::type_of<decltype(tag)>;
      if (rows > 0) {
        layer_norm_backward_rows<T><<<blocks_for(rows), kThreads, 0, stream>>>(ctx.src[0].data<T>(), x.data<T>(),
                                                                               ctx.dst[0].data<T>(), scale, scale_at,
                                                                               rows, d, a.epsilon, mean, inv_std);
        KILN_RETURN_IF_ERROR(cuda::check(cudaGetLastError(), "layer norm backward kernel launch"));
      }
      const dim3 grid(std::min<unsigned>(cuda::grid_for(d), 65535u), static_cast<unsigned>(pieces));
      layer_norm_dscale_partials<T>
          <<<grid, 256, 0, stream>>>(ctx.src[0].data<T>(), x.data<T>(), mean, inv_std, rows, d, rows_per, partial);
      KILN_RETURN_IF_ERROR(cuda::check(cudaGetLastError(), "layer norm dscale kernel launch"));
      layer_norm_dscale_total<T><<<cuda::grid_for(d), 256, 0, stream>>>(partial, pieces, d, ctx.dst[1].data<T>());
      return cuda::check(cudaGetLastError(), "layer norm dscale total kernel launch");
    });
  }
};

class InstanceNormBackward final : public ScratchKernel {
 public:
  Status run(KernelContext& ctx) override {
    const auto& a = ctx.attrs<InstanceNormalizationAttrs>();
    const Tensor& x = ctx.src[1];
    const Channels v = channels_of(x.dims());
    if (v.c == 0) return Status::ok();
    if (ctx.src[0].numel() != x.numel())
      return invalid_argument("InstanceNormalizationBackward dy ", ctx.src[0].dims().to_string(),
                              " does not have x's shape ", x.dims().to_string());
    const cudaStream_t stream = cuda::native(ctx.stream);
    const int64_t planes = v.n * v.c;
    KILN_ASSIGN_OR_RETURN(float* sums,
                          scratch_floats(ctx, std::max<int64_t>(planes, 1) * 2, "InstanceNormalizationBackward sums"));
    return cuda::dispatch_float_status(x.dtype(), "InstanceNormalizationBackward", [&](auto tag) -> Status {
      using T = cuda::type_of<decltype(tag)>;
      if (planes > 0) {
        instance_norm_backward_planes<T>
            <<<blocks_for(planes), kThreads, 0, stream>>>(ctx.src[0].data<T>(), x.data<T>(), ctx.dst[0].data<T>(),
                                                          float_ref(ctx.src[2]), planes, v.c, v.inner, a.epsilon, sums);
        KILN_RETURN_IF_ERROR(cuda::check(cudaGetLastError(), "instance norm backward kernel launch"));
      }
      instance_norm_channel_totals<<<cuda::grid_for(v.c), 256, 0, stream>>>(sums, v.n, v.c, float_ref(ctx.dst[1]),
                                                                            float_ref(ctx.dst[2]));
      return cuda::check(cudaGetLastError(), "instance norm totals kernel launch");
    });
  }
};

Status floats(const OpCall& call) {
  return require_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16});
}

// x (input `x_index`), dy and the outputs named in `same` share one type.
Status same_type(const OpCall& call, const char* name, int x_index, const std::vector<int>& inputs,
                 const std::vector<int>& outputs) {
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

// Kernel K as `name` for `op`: x (input x_index) and the inputs and outputs listed share one float type.
template <class K>
KernelImpl impl(const char* name, const char* op, int x_index, std::vector<int> inputs, std::vector<int> outputs) {
  return {
      .name = name,
      .op = op,
      .backend = Backend::kCuda,
      .priority = 10,
      .supports = [name, x_index, inputs,
                   outputs](const OpCall& call) { return same_type(call, name, x_index, inputs, outputs); },
      .create = [](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
        return std::unique_ptr<Kernel>(std::make_unique<K>());
      },
  };
}

KILN_REGISTER_KERNEL(impl<BatchNormTraining>("cuda.batch_normalization_training", "BatchNormalizationTraining", 0, {},
                                             {0}));
KILN_REGISTER_KERNEL(impl<BatchNormBackward>("cuda.batch_normalization_backward", "BatchNormalizationBackward", 1, {0},
                                             {0}));
KILN_REGISTER_KERNEL(impl<LayerNormBackward>("cuda.layer_normalization_backward", "LayerNormalizationBackward", 1, {0},
                                             {0, 1}));
KILN_REGISTER_KERNEL(impl<InstanceNormBackward>("cuda.instance_normalization_backward", "InstanceNormalizationBackward",
                                                1, {0}, {0}));

}  // namespace
}  // namespace kiln
