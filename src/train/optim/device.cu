// The optimizers' CUDA kernels (device.h): each element rule of rules.h as a grid-stride kernel, one launch per
// tensor; norms as a fixed-partition reduction. Compiled with --fmad=false (src/train/CMakeLists.txt): without
// contraction the device computes each rule's floats exactly as the CPU loop does.
#include <cuda_runtime.h>

#include "train/optim/device.h"

namespace kiln::train::device {
namespace {

constexpr int kThreads = 256;

Status check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::ok();
  cudaGetLastError();
  const StatusCode code = err == cudaErrorMemoryAllocation ? StatusCode::kOutOfMemory : StatusCode::kDeviceError;
  return Status(code, str_cat("optimizer: ", what, ": ", cudaGetErrorString(err)));
}

cudaStream_t native(const Launch& on) { return static_cast<cudaStream_t>(on.stream); }

// Makes `device` current while it lives (kernels launch on the current device, which must own the stream).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) : status_(enter(device)) {}
  ~DeviceGuard() {
    if (changed_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  const Status& status() const { return status_; }

 private:
  Status enter(int device) {
    if (cudaError_t err = cudaGetDevice(&previous_); err != cudaSuccess) return check(err, "cudaGetDevice");
    if (previous_ == device) return Status::ok();
    if (cudaError_t err = cudaSetDevice(device); err != cudaSuccess) return check(err, "cudaSetDevice");
    changed_ = true;
    return Status::ok();
  }

  int previous_ = 0;  // declared before status_: enter() sets them while status_ is initialized
  bool changed_ = false;
  Status status_;
};

// Blocks for a grid-stride loop over n > 0 elements (at most 65535 * 8 blocks; each thread then takes several).
unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  constexpr int64_t kMax = int64_t{65535} * 8;
  return static_cast<unsigned>(blocks < kMax ? blocks : kMax);
}

template <class Rule>
__global__ void __launch_bounds__(kThreads) apply_kernel(Rule rule, rules::Tensors t, int64_t n) {
  const int64_t stride = int64_t{blockDim.x} * gridDim.x;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += stride) rule(t, i);
}

template <class Rule>
Status launch(const Rule& rule, const rules::Tensors& t, int64_t n, const Launch& on) {
  if (n <= 0) return Status::ok();
  DeviceGuard guard(on.device);
  KILN_RETURN_IF_ERROR(guard.status());
  apply_kernel<<<grid_for(n), kThreads, 0, native(on)>>>(rule, t, n);
  return check(cudaGetLastError(), "an element-rule kernel launch");
}

template <class Scalars>
Status apply_rule(const Scalars& k, const rules::Tensors& t, int64_t n, const Launch& on) {
  return rules::with_rule(k, [&](const auto& rule) { return launch(rule, t, n, on); });
}

__global__ void fill_kernel(float* x, int64_t n, float value) {
  const int64_t stride = int64_t{blockDim.x} * gridDim.x;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += stride) x[i] = value;
}

__global__ void fill_int_kernel(int* x, int value) { *x = value; }

// ---- reductions

template <Reduction K>
__device__ double term(float x, double p) {
  const auto d = static_cast<double>(x);
  if constexpr (K == Reduction::kSumSquares) return d * d;
  if constexpr (K == Reduction::kSumPow) return pow(fabs(d), p);
  return fabs(d);
}

template <Reduction K>
__device__ double combine(double a, double b) {
  if constexpr (K == Reduction::kMaxAbs) {
    if (a != a) return a;
    if (b != b) return b;
    return a > b ? a : b;
  }
  return a + b;
}

// The block's values combined by a fixed tree (kThreads is a power of two); thread 0 gets the result.
template <Reduction K>
__device__ double block_combine(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (static_cast<int>(threadIdx.x) < width)
      shared[threadIdx.x] = combine<K>(shared[threadIdx.x], shared[threadIdx.x + width]);
    __syncthreads();
  }
  return shared[0];
}

// Block b of reduction_blocks(n) combines elements b * kThreads + thread + k * (kThreads * blocks), in order per
// thread, then over the block's tree.
template <Reduction K>
__global__ void __launch_bounds__(kThreads) partial_kernel(const float* x, int64_t n, double p, double* partials) {
  __shared__ double shared[kThreads];
  double acc = 0;
  const int64_t stride = int64_t{blockDim.x} * gridDim.x;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += stride)
    acc = combine<K>(acc, term<K>(x[i], p));
  const double total = block_combine<K>(acc, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

// One block: thread t combines partials t, t + kThreads, ... in order, then the tree.
template <Reduction K>
__global__ void __launch_bounds__(kThreads) finish_kernel(const double* partials, int64_t count, double* result) {
  __shared__ double shared[kThreads];
  double acc = 0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) acc = combine<K>(acc, partials[i]);
  const double total = block_combine<K>(acc, shared);
  if (threadIdx.x == 0) *result = total;
}

template <Reduction K>
Status reduce_as(const std::vector<Span>& xs, double p, double* partials, double* result, const Launch& on) {
  int64_t offset = 0;
  for (const auto& [x, n] : xs) {
    const int64_t blocks = reduction_blocks(n);
    if (blocks == 0) continue;
    partial_kernel<K><<<static_cast<unsigned>(blocks), kThreads, 0, native(on)>>>(x, n, p, partials + offset);
    KILN_RETURN_IF_ERROR(check(cudaGetLastError(), "a norm kernel launch"));
    offset += blocks;
  }
  finish_kernel<K><<<1, kThreads, 0, native(on)>>>(partials, offset, result);
  return check(cudaGetLastError(), "a norm kernel launch");
}

// ---- loss unscaling

__global__ void __launch_bounds__(kThreads) unscale_kernel(float* g, int64_t n, float inv_scale, int* found) {
  const rules::UnscaleGrad rule{inv_scale};
  bool bad = false;
  const int64_t stride = int64_t{blockDim.x} * gridDim.x;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += stride) bad = rule(g, i) || bad;
  if (bad) *found = 1;  // every writer writes 1: the result does not depend on their order
}

// ---- NovoGrad

__global__ void novograd_denom_kernel(rules::NovogradScalars k, const double* grad_sum_sq, float* v, float* vmax,
                                      float* denom) {
  const auto grad_norm = static_cast<float>(sqrt(*grad_sum_sq));
  *denom = rules::novograd_denom(grad_norm, v, vmax, k);
}

template <class Rule>
__global__ void __launch_bounds__(kThreads)
    novograd_moment_kernel(Rule rule, rules::Tensors t, int64_t n, const float* denom) {
  rule.k.denom = *denom;
  const int64_t stride = int64_t{blockDim.x} * gridDim.x;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += stride) rule(t, i);
}

__global__ void novograd_luc_kernel(rules::NovogradScalars k, const double* data_sum_sq, const double* update_sum_sq,
                                    float* neg_lr) {
  const auto data_norm = static_cast<float>(sqrt(*data_sum_sq));
  const auto update_norm = static_cast<float>(sqrt(*update_sum_sq));
  *neg_lr = rules::novograd_luc_neg_lr(data_norm, update_norm, k);
}

__global__ void __launch_bounds__(kThreads) add_scaled_kernel(rules::Tensors t, int64_t n, const float* neg_lr) {
  const rules::AddScaled rule{*neg_lr};
  const int64_t stride = int64_t{blockDim.x} * gridDim.x;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += stride) rule(t, i);
}

}  // namespace

Status apply(const rules::SgdScalars& k, const rules::Tensors& t, int64_t n, const Launch& on) {
  return apply_rule(k, t, n, on);
}
Status apply(const rules::AdagradScalars& k, const rules::Tensors& t, int64_t n, const Launch& on) {
  return apply_rule(k, t, n, on);
}
Status apply(const rules::RmspropScalars& k, const rules::Tensors& t, int64_t n, const Launch& on) {
  return apply_rule(k, t, n, on);
}
Status apply(const rules::AdadeltaScalars& k, const rules::Tensors& t, int64_t n, const Launch& on) {
  return apply_rule(k, t, n, on);
}
Status apply(const rules::AdamScalars& k, const rules::Tensors& t, int64_t n, const Launch& on) {
  return apply_rule(k, t, n, on);
}
Status apply(const rules::ClampGrad& rule, const rules::Tensors& t, int64_t n, const Launch& on) {
  return launch(rule, t, n, on);
}
Status apply(const rules::ScaleGrad& rule, const rules::Tensors& t, int64_t n, const Launch& on) {
  return launch(rule, t, n, on);
}
Status apply(const rules::AccumulateGrad& rule, const rules::Tensors& t, int64_t n, const Launch& on) {
  return launch(rule, t, n, on);
}
Status apply(const rules::FinishGrad& rule, const rules::Tensors& t, int64_t n, const Launch& on) {
  return launch(rule, t, n, on);
}

Status fill(float* x, int64_t n, float value, const Launch& on) {
  if (n <= 0) return Status::ok();
  DeviceGuard guard(on.device);
  KILN_RETURN_IF_ERROR(guard.status());
  fill_kernel<<<grid_for(n), kThreads, 0, native(on)>>>(x, n, value);
  return check(cudaGetLastError(), "a fill kernel launch");
}

Status fill_int(int* x, int value, const Launch& on) {
  DeviceGuard guard(on.device);
  KILN_RETURN_IF_ERROR(guard.status());
  fill_int_kernel<<<1, 1, 0, native(on)>>>(x, value);
  return check(cudaGetLastError(), "a fill kernel launch");
}

Status reduce(const std::vector<Span>& xs, Reduction kind, double p, double* partials, double* result,
              const Launch& on) {
  DeviceGuard guard(on.device);
  KILN_RETURN_IF_ERROR(guard.status());
  switch (kind) {
    case Reduction::kSumSquares: return reduce_as<Reduction::kSumSquares>(xs, p, partials, result, on);
    case Reduction::kSumPow: return reduce_as<Reduction::kSumPow>(xs, p, partials, result, on);
    case Reduction::kMaxAbs: return reduce_as<Reduction::kMaxAbs>(xs, p, partials, result, on);
  }
  return invalid_argument("unknown reduction");
}

Status unscale(float* g, int64_t n, float inv_scale, int* found, const Launch& on) {
  if (n <= 0) return Status::ok();
  DeviceGuard guard(on.device);
  KILN_RETURN_IF_ERROR(guard.status());
  unscale_kernel<<<grid_for(n), kThreads, 0, native(on)>>>(g, n, inv_scale, found);
  return check(cudaGetLastError(), "the loss-unscaling kernel launch");
}

Status novograd(const rules::NovogradScalars& k, const rules::Tensors& t, int64_t n, double* workspace,
                const Launch& on) {
  DeviceGuard guard(on.device);
  KILN_RETURN_IF_ERROR(guard.status());
  const int64_t blocks = reduction_blocks(n);
  double* sums = workspace + blocks;                   // grad, weights, moment: sums of squares
  auto* scalars = reinterpret_cast<float*>(sums + 3);  // denom, clipped -lr
  KILN_RETURN_IF_ERROR(reduce_as<Reduction::kSumSquares>({{t.g, n}}, 2.0, workspace, sums, on));
  novograd_denom_kernel<<<1, 1, 0, native(on)>>>(k, sums, t.s1, t.s2, scalars);
  KILN_RETURN_IF_ERROR(check(cudaGetLastError(), "the NovoGrad second-moment kernel launch"));
  if (n > 0) {
    KILN_RETURN_IF_ERROR(rules::with_rule(k, [&](const auto& rule) {
      novograd_moment_kernel<<<grid_for(n), kThreads, 0, native(on)>>>(rule, t, n, scalars);
      return check(cudaGetLastError(), "the NovoGrad moment kernel launch");
    }));
  }
  if (!k.luc) return Status::ok();
  KILN_RETURN_IF_ERROR(reduce_as<Reduction::kSumSquares>({{t.p, n}}, 2.0, workspace, sums + 1, on));
  KILN_RETURN_IF_ERROR(reduce_as<Reduction::kSumSquares>({{t.s0, n}}, 2.0, workspace, sums + 2, on));
  novograd_luc_kernel<<<1, 1, 0, native(on)>>>(k, sums + 1, sums + 2, scalars + 1);
  KILN_RETURN_IF_ERROR(check(cudaGetLastError(), "the NovoGrad update-clipping kernel launch"));
  if (n == 0) return Status::ok();
  add_scaled_kernel<<<grid_for(n), kThreads, 0, native(on)>>>(t, n, scalars + 1);
  return check(cudaGetLastError(), "the NovoGrad update kernel launch");
}

Status copy_and_wait(void* dst, const void* src, size_t bytes, const Launch& on) {
  DeviceGuard guard(on.device);
  KILN_RETURN_IF_ERROR(guard.status());
  if (bytes > 0)
    KILN_RETURN_IF_ERROR(check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, native(on)), "cudaMemcpyAsync"));
  return check(cudaStreamSynchronize(native(on)), "cudaStreamSynchronize");
}

Status synchronize(const Launch& on) {
  DeviceGuard guard(on.device);
  KILN_RETURN_IF_ERROR(guard.status());
  return check(cudaStreamSynchronize(native(on)), "cudaStreamSynchronize");
}

}  // namespace kiln::train::device
