// CUDA MSELoss, L1Loss, SmoothL1Loss, BCEWithLogitsLoss and their backward ops: one value per element of x (the
// scalar formulas of kernels/ref/loss.h, in float32 on the device), reduced none (written per element), sum or mean
// (per-block partial sums, then one block adds them in a fixed order: deterministic). Backward: dx = upstream *
// d(value)/d(input wrt), upstream dy[i] for none, dy / n for mean, dy for sum. BCEWithLogitsLoss's weight and
// pos_weight broadcast to x.
#include <algorithm>
#include <cmath>

#include "kernels/common/indexing.h"
#include "kernels/cuda/cublaslt_gemm.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/dispatch.cuh"
#include "kernels/cuda/types.cuh"
#include "ops/loss/loss.h"

namespace kiln {
namespace {

enum class Kind { kMse, kL1, kSmoothL1, kBce };

constexpr int kThreads = 256;
constexpr int kMaxPartials = 1024;

// The device forms of kernels/ref/loss.h's formulas.
__device__ inline float sign(float d) { return d > 0.f ? 1.f : d < 0.f ? -1.f : 0.f; }
__device__ inline float log_sigmoid(float x) { return fminf(x, 0.f) - log1pf(expf(-fabsf(x))); }
__device__ inline float sigmoid(float x) {
  if (x >= 0.f) return 1.f / (1.f + expf(-x));
  const float e = expf(x);
  return e / (1.f + e);
}

struct Params {
  Kind kind = Kind::kMse;
  LossReduction reduction = LossReduction::kMean;
  float beta = 0.f;
  BceWrt wrt = BceWrt::kInput;
  BroadcastIndexer wi, pwi;  // BCE's weight and pos_weight (when given) per element of x
};

__device__ inline float value(const Params& p, float x, float t, float w, float pw) {
  const float d = x - t;
  switch (p.kind) {
    case Kind::kMse: return d * d;
    case Kind::kL1: return fabsf(d);
    case Kind::kSmoothL1: {
      const float a = fabsf(d);
      return a < p.beta ? 0.5f * d * d / p.beta : a - 0.5f * p.beta;
    }
    case Kind::kBce: return w * ((1.f - t) * x - (1.f + (pw - 1.f) * t) * log_sigmoid(x));
  }
  return 0.f;
}

__device__ inline float grad(const Params& p, float x, float t, float w, float pw) {
  const float d = x - t;
  switch (p.kind) {
    case Kind::kMse: return 2.f * d;
    case Kind::kL1: return sign(d);
    case Kind::kSmoothL1: return fabsf(d) < p.beta ? d / p.beta : sign(d);
    case Kind::kBce:
      switch (p.wrt) {
        case BceWrt::kInput: return w * ((1.f - t) - (1.f + (pw - 1.f) * t) * sigmoid(-x));
        case BceWrt::kTarget: return w * (-x - (pw - 1.f) * log_sigmoid(x));
        case BceWrt::kWeight: return (1.f - t) * x - (1.f + (pw - 1.f) * t) * log_sigmoid(x);
        case BceWrt::kPosWeight: return -w * t * log_sigmoid(x);
      }
  }
  return 0.f;
}

template <class T>
struct Inputs {
  const T *x = nullptr, *t = nullptr, *w = nullptr, *pw = nullptr;
  __device__ float weight(const Params& p, int64_t i) const { return w ? cuda::to_float(w[p.wi(i)]) : 1.f; }
  __device__ float pos_weight(const Params& p, int64_t i) const { return pw ? cuda::to_float(pw[p.pwi(i)]) : 1.f; }
  __device__ float value_at(const Params& p, int64_t i) const {
    return value(p, cuda::to_float(x[i]), cuda::to_float(t[i]), weight(p, i), pos_weight(p, i));
  }
};

// none: out[i] = value; otherwise partial[block] = the block's sum.
template <class T>
__global__ void __launch_bounds__(kThreads) pointwise_loss(Params p, Inputs<T> in, int64_t n, T* out, float* partial) {
  __shared__ float scratch[32];
  float sum = 0.f;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    const float v = in.value_at(p, i);
    if (partial)
      sum += v;
    else
      out[i] = cuda::from_float<T>(v);
  }
  if (!partial) return;
  sum = cuda::block_sum(sum, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

template <class T>
__global__ void __launch_bounds__(kMaxPartials)
    finish_loss(const float* partial, int blocks, int64_t n, LossReduction r, T* out) {
  __shared__ float scratch[32];
  float sum = 0.f;
  for (int b = static_cast<int>(threadIdx.x); b < blocks; b += static_cast<int>(blockDim.x)) sum += partial[b];
  sum = cuda::block_sum(sum, scratch);
  if (threadIdx.x == 0) out[0] = cuda::from_float<T>(r == LossReduction::kMean ? sum / static_cast<float>(n) : sum);
}

template <class T>
__global__ void pointwise_loss_backward(Params p, const T* dy, Inputs<T> in, int64_t n, T* dx) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    float g = cuda::to_float(dy[p.reduction == LossReduction::kNone ? i : 0]);
    if (p.reduction == LossReduction::kMean) g /= static_cast<float>(n);
    dx[i] = cuda::from_float<T>(
        g * grad(p, cuda::to_float(in.x[i]), cuda::to_float(in.t[i]), in.weight(p, i), in.pos_weight(p, i)));
  }
}

// The inputs from `off` (x, t, weight?, pos_weight?) and the params of a call.
template <class T>
Inputs<T> inputs_of(const KernelContext& ctx, int off, Params& p) {
  Inputs<T> in;
  in.x = ctx.src[off].data<T>();
  in.t = ctx.src[off + 1].data<T>();
  const Dims& xd = ctx.src[off].dims();
  const auto present = [&](int i) { return static_cast<int>(ctx.src.size()) > i && ctx.src[i].defined(); };
  if (p.kind == Kind::kBce && present(off + 2)) {
    in.w = ctx.src[off + 2].data<T>();
    p.wi = BroadcastIndexer(ctx.src[off + 2].dims(), xd);
  }
  if (p.kind == Kind::kBce && present(off + 3)) {
    in.pw = ctx.src[off + 3].data<T>();
    p.pwi = BroadcastIndexer(ctx.src[off + 3].dims(), xd);
  }
  return in;
}

Params params_of(const KernelContext& ctx, Kind kind) {
  Params p{kind,
           LossReduction::kMean,
           0.f,
           BceWrt::kInput,
           BroadcastIndexer(Dims{}, Dims{}),
           BroadcastIndexer(Dims{}, Dims{})};
  switch (kind) {
    case Kind::kSmoothL1:
      p.reduction = ctx.attrs<SmoothL1LossAttrs>().reduction;
      p.beta = ctx.attrs<SmoothL1LossAttrs>().beta;
      break;
    default: p.reduction = ctx.attrs<LossAttrs>().reduction; break;
  }
  return p;
}

Params backward_params_of(const KernelContext& ctx, Kind kind) {
  Params p{kind,
           LossReduction::kMean,
           0.f,
           BceWrt::kInput,
           BroadcastIndexer(Dims{}, Dims{}),
           BroadcastIndexer(Dims{}, Dims{})};
  switch (kind) {
    case Kind::kSmoothL1:
      p.reduction = ctx.attrs<SmoothL1LossAttrs>().reduction;
      p.beta = ctx.attrs<SmoothL1LossAttrs>().beta;
      break;
    case Kind::kBce:
      p.reduction = ctx.attrs<BCEWithLogitsLossBackwardAttrs>().reduction;
      p.wrt = ctx.attrs<BCEWithLogitsLossBackwardAttrs>().wrt;
      break;
    default: p.reduction = ctx.attrs<LossAttrs>().reduction; break;
  }
  return p;
}

class PointwiseLoss final : public Kernel {
 public:
  explicit PointwiseLoss(Kind kind) : kind_(kind) {}
  size_t workspace_bytes() const override { return kMaxPartials * sizeof(float); }

  Status run(KernelContext& ctx) override {
    Params p = params_of(ctx, kind_);
    const int64_t n = ctx.src[0].numel();
    if (ctx.src[1].numel() != n)
      return invalid_argument("loss target ", ctx.src[1].dims().to_string(), " does not have the input's shape ",
                              ctx.src[0].dims().to_string());
    const cudaStream_t stream = cuda::native(ctx.stream);
    Tensor& out = ctx.dst[0];
    const bool none = p.reduction == LossReduction::kNone;
    if (none && n == 0) return Status::ok();
    const int blocks = static_cast<int>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, kMaxPartials));
    float* partial = nullptr;
    if (!none) {
      KILN_ASSIGN_OR_RETURN(void* scratch,
                            scratch_.get(ctx.allocator, kMaxPartials * sizeof(float), "loss partial sums", stream));
      partial = static_cast<float*>(scratch);
    }
    return cuda::dispatch_float_status(ctx.src[0].dtype(), "loss", [&](auto tag) -> Status {
      using T = cuda::type_of<decltype(tag)>;
      const Inputs<T> in = inputs_of<T>(ctx, 0, p);
      pointwise_loss<T><<<blocks, kThreads, 0, stream>>>(p, in, n, out.data<T>(), partial);
      KILN_RETURN_IF_ERROR(cuda::check(cudaGetLastError(), "loss kernel launch"));
      if (none) return Status::ok();
      finish_loss<T><<<1, kMaxPartials, 0, stream>>>(partial, blocks, n, p.reduction, out.data<T>());
      return cuda::check(cudaGetLastError(), "loss reduction launch");
    });
  }

 private:
  Kind kind_;
  cuda::DeviceScratch scratch_;
};

Status run_backward(KernelContext& ctx, Kind kind) {
  Params p = backward_params_of(ctx, kind);
  const int64_t n = ctx.src[1].numel();
  if (n == 0) return Status::ok();
  if (ctx.src[2].numel() != n)
    return invalid_argument("loss target ", ctx.src[2].dims().to_string(), " does not have the input's shape ",
                            ctx.src[1].dims().to_string());
  return cuda::dispatch_float_status(ctx.src[1].dtype(), "loss backward", [&](auto tag) -> Status {
    using T = cuda::type_of<decltype(tag)>;
    const Inputs<T> in = inputs_of<T>(ctx, 1, p);
    pointwise_loss_backward<T>
        <<<cuda::grid_for(n), 256, 0, cuda::native(ctx.stream)>>>(p, ctx.src[0].data<T>(), in, n, ctx.dst[0].data<T>());
    return cuda::check(cudaGetLastError(), "loss backward kernel launch");
  });
}

Status same_float_type(const OpCall& call) {
  KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}));
  const DataType dt = call.inputs[0].dtype;
  for (const TensorDesc& d : call.inputs)
    if (d.present && d.dtype != dt) return unsupported("the CUDA loss kernels take every input in one type");
  for (const TensorDesc& d : call.outputs)
    if (d.dtype != dt) return unsupported("the CUDA loss kernels write their inputs' type");
  return Status::ok();
}

KernelImpl forward_impl(const char* name, const char* op, Kind kind) {
  return KernelImpl{
      .name = name,
      .op = op,
      .backend = Backend::kCuda,
      .priority = 10,
      .supports = same_float_type,
      .create = [kind](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
        return std::unique_ptr<Kernel>(std::make_unique<PointwiseLoss>(kind));
      },
  };
}

KernelImpl backward_impl(const char* name, const char* op, Kind kind) {
  return KernelImpl{
      .name = name,
      .op = op,
      .backend = Backend::kCuda,
      .priority = 10,
      .supports = same_float_type,
      .create = stateless([kind](KernelContext& ctx) { return run_backward(ctx, kind); }),
  };
}

KILN_REGISTER_KERNEL(forward_impl("cuda.mse_loss", "MSELoss", Kind::kMse));
KILN_REGISTER_KERNEL(forward_impl("cuda.l1_loss", "L1Loss", Kind::kL1));
KILN_REGISTER_KERNEL(forward_impl("cuda.smooth_l1_loss", "SmoothL1Loss", Kind::kSmoothL1));
KILN_REGISTER_KERNEL(forward_impl("cuda.bce_with_logits_loss", "BCEWithLogitsLoss", Kind::kBce));
KILN_REGISTER_KERNEL(backward_impl("cuda.mse_loss_backward", "MSELossBackward", Kind::kMse));
KILN_REGISTER_KERNEL(backward_impl("cuda.l1_loss_backward", "L1LossBackward", Kind::kL1));
KILN_REGISTER_KERNEL(backward_impl("cuda.smooth_l1_loss_backward", "SmoothL1LossBackward", Kind::kSmoothL1));
KILN_REGISTER_KERNEL(backward_impl("cuda.bce_with_logits_loss_backward", "BCEWithLogitsLossBackward", Kind::kBce));

}  // namespace
}  // namespace kiln
