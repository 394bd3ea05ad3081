// CUDA PointwiseChain and Scale. A chain is one launch: each thread runs the whole step program (ref::apply_step,
// in float) on its elements in registers; the program and the operands sit in kernel parameters.
#include <algorithm>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/cuda/types.cuh"
#include "kernels/ref/pointwise_chain.h"
#include "ops/scale/scale.h"

namespace kiln {
namespace {

// ---- PointwiseChain -----------------------------------------------------------------------------

constexpr int kMaxSteps = 32;
constexpr int kMaxInputs = 8;

struct ChainProgram {
  int size = 0;
  PointwiseStep steps[kMaxSteps];
};

// Input k is read at element i of x as data[k][i % period[k]] when it repeats whole (one element, x's shape, a
// suffix of x's dims; see cuda::repeat_period), else (period 0) at the offset `at` gives.
struct ChainInputs {
  int count = 0;
  bool any_broadcast = false;
  int64_t period[kMaxInputs] = {};
  const void* data[kMaxInputs] = {};
  cuda::Offsets<kMaxInputs> at;
};

template <class T, bool Broadcast>
__device__ inline float operand_value(const ChainInputs& in, int k, int64_t i, const int64_t* off) {
  const T* p = static_cast<const T*>(in.data[k]);
  const int64_t period = in.period[k];
  if constexpr (Broadcast)
    if (period == 0) return cuda::load(p[off[k]]);
  return cuda::load(p[cuda::wrap_period(i, period)]);
}

// Broadcast: some input needs the offsets of `in.at` (kept out of the common kernel: they live in local memory).
template <class T, bool Broadcast>
__global__ void chain_kernel(const __grid_constant__ ChainProgram prog, const __grid_constant__ ChainInputs in,
                             T* __restrict__ y, int64_t n) {
  const T* x = static_cast<const T*>(in.data[0]);
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    int64_t off[Broadcast ? kMaxInputs : 1];
    if constexpr (Broadcast) in.at.at(i, off);
    float v = cuda::load(x[i]);
    for (int s = 0; s < prog.size; ++s) {
      const PointwiseStep& step = prog.steps[s];
      float operand = 0.f;
      if (step.operand == kOperandScalar)
        operand = step.scalar;
      else if (step.operand == kOperandRunning)
        operand = v;
      else if (step.operand >= 0)
        operand = operand_value<T, Broadcast>(in, static_cast<int>(step.operand), i, off);
      v = ref::apply_step(step, v, operand);
    }
    y[i] = cuda::store<T>(v);
  }
}

Status run_pointwise_chain(KernelContext& ctx) {
  const auto& a = ctx.attrs<PointwiseChainAttrs>();
  const Tensor& x = ctx.src[0];
  Tensor& y = ctx.dst[0];
  const int64_t n = y.numel();
  if (n == 0) return Status::ok();
  if (a.size() > static_cast<size_t>(kMaxSteps) || ctx.src.size() > static_cast<size_t>(kMaxInputs))
    return unsupported("cuda.pointwise_chain takes at most ", kMaxSteps, " steps and ", kMaxInputs, " inputs");
  ChainProgram prog;
  prog.size = static_cast<int>(a.size());
  for (size_t s = 0; s < a.size(); ++s) prog.steps[s] = a.step(s);
  ChainInputs in;
  in.count = static_cast<int>(ctx.src.size());
  Dims bdims[kMaxInputs];
  const Dims* shapes[kMaxInputs];
  for (int k = 0; k < kMaxInputs; ++k) {
    const bool present = k < in.count && ctx.src[k].defined();
    in.data[k] = present ? ctx.src[k].raw() : nullptr;
    in.period[k] = present ? cuda::repeat_period(ctx.src[k].dims(), x.dims()) : n;
    in.any_broadcast |= in.period[k] == 0;
    // Only the other broadcasts need offsets; the rest walk x's shape (their offsets go unused).
    bdims[k] = in.period[k] == 0 ? ctx.src[k].dims() : x.dims();
    shapes[k] = &bdims[k];
  }
  if (in.any_broadcast) in.at = cuda::broadcast_offsets<kMaxInputs>(x.dims(), shapes);
  cudaStream_t stream = cuda::native(ctx.stream);
  const bool known = cuda::dispatch_float(x.dtype(), [&](auto tag) {
    using T = cuda::type_of<decltype(tag)>;
    if (in.any_broadcast)
      chain_kernel<T, true><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(prog, in, y.data<T>(), n);
    else
      chain_kernel<T, false><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(prog, in, y.data<T>(), n);
  });
  if (!known) return unsupported("cuda.pointwise_chain has no ", dtype_name(x.dtype()), " kernel");
  return cuda::check(cudaGetLastError(), "pointwise_chain kernel launch");
}

Status supports_pointwise_chain(const OpCall& call) {
  KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}));
  const auto& a = call.attrs_as<PointwiseChainAttrs>();
  if (a.size() > static_cast<size_t>(kMaxSteps))
    return unsupported("the chain has ", a.size(), " steps; the CUDA kernel takes at most ", kMaxSteps);
  if (call.inputs.size() > static_cast<size_t>(kMaxInputs))
    return unsupported("the chain has ", call.inputs.size(), " inputs; the CUDA kernel takes at most ", kMaxInputs);
  return check_pointwise_program(a, static_cast<int>(call.inputs.size()));
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.pointwise_chain",
    .op = "PointwiseChain",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = supports_pointwise_chain,
    .create = stateless(run_pointwise_chain),
});

// ---- Scale --------------------------------------------------------------------------------------

struct ScaleParams {
  int64_t inner = 1, count = 1;
  FusedActivation fused;
};

template <class T>
__global__ void scale_kernel(const T* __restrict__ x, const T* __restrict__ shift, const T* __restrict__ scale,
                             const T* __restrict__ power, T* __restrict__ y, int64_t n, ScaleParams p) {
  for (int64_t i = cuda::thread_index(); i < n; i += cuda::thread_count()) {
    const int64_t c = p.count == 1 ? 0 : (i / p.inner) % p.count;
    float v = cuda::load(x[i]);
    if (scale) v *= cuda::load(scale[c]);
    if (shift) v += cuda::load(shift[c]);
    if (power) v = powf(v, cuda::load(power[c]));
    if (p.fused.on) v = ref::activation(p.fused.kind, p.fused.alpha, p.fused.beta, v);
    y[i] = cuda::store<T>(v);
  }
}

Status run_scale(KernelContext& ctx) {
  const auto& attrs = ctx.attrs<ScaleAttrs>();
  const Tensor& x = ctx.src[0];
  const int64_t n = x.numel();
  if (n == 0) return Status::ok();
  KILN_ASSIGN_OR_RETURN(ScaleLayout layout, scale_layout(attrs, x.dims()));
  ScaleParams p;
  p.inner = std::max<int64_t>(layout.inner, 1);
  p.count = std::max<int64_t>(layout.count, 1);
  p.fused = attrs.fused;
  auto param = [&](int i) -> const void* {
    return static_cast<int>(ctx.src.size()) > i && ctx.src[i].defined() ? ctx.src[i].raw() : nullptr;
  };
  cudaStream_t stream = cuda::native(ctx.stream);
  const bool known = cuda::dispatch_float(x.dtype(), [&](auto tag) {
    using T = cuda::type_of<decltype(tag)>;
    scale_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, stream>>>(
        x.data<T>(), static_cast<const T*>(param(1)), static_cast<const T*>(param(2)), static_cast<const T*>(param(3)),
        ctx.dst[0].data<T>(), n, p);
  });
  if (!known) return unsupported("cuda.scale has no ", dtype_name(x.dtype()), " kernel");
  return cuda::check(cudaGetLastError(), "scale kernel launch");
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.scale",
    .op = "Scale",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports =
        [](const OpCall& call) {
          return require_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16});
        },
    .create = stateless(run_scale),
});

}  // namespace
}  // namespace kiln
