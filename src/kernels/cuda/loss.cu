// CUDA CrossEntropyLoss and CrossEntropyLossBackward (with respect to the input), and NLLLoss and NLLLossBackward (the
// same kernels with x as the log-probabilities), for class-index targets: class
// weights, label smoothing, ignore_index, mean/sum/none (the formulas of kernels/ref/loss.cpp's class_loss). x is
// viewed as [outer, classes, inner]; one warp per item (o, i) walks its classes: max, log-sum-exp, then the item's
// loss -(w[t] (1 - eps) lp[t] + eps / C sum_c w[c] lp[c]) or its column of dx,
// g (softmax(x) qsum - w[c] tt[c]) with qsum = sum_c w[c] tt[c]. Mean divides by the sum of the counted items'
// weights; the item losses and weights are reduced by one block afterwards (deterministic, float32). Ignored
// items add nothing (dx zero). A target outside [0, C) that is not ignore_index makes the item NaN (the loss, or its
// dx column; the reference rejects it, the device does not stop to check).
#include <algorithm>
#include <cmath>

#include "kernels/cuda/cublaslt_gemm.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/dispatch.cuh"
#include "kernels/cuda/types.cuh"
#include "ops/loss/loss.h"

namespace kiln {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kReduceThreads = 1024;

struct Items {
  int64_t outer = 1, classes = 1, inner = 1;
  __host__ __device__ int64_t count() const { return outer * inner; }
  __device__ int64_t at(int64_t item, int64_t c) const { return ((item / inner) * classes + c) * inner + item % inner; }
};

Items items_of(const Dims& x) {
  Items s;
  if (x.rank() == 1) {
    s.classes = x[0];
    return s;
  }
  s.outer = x[0];
  s.classes = x[1];
  for (int a = 2; a < x.rank(); ++a) s.inner *= x[a];
  return s;
}

struct Target {
  const void* p = nullptr;
  bool wide = false;  // int64
  __device__ int64_t operator[](int64_t j) const {
    return wide ? static_cast<const int64_t*>(p)[j] : int64_t{static_cast<const int32_t*>(p)[j]};
  }
};

struct Params {
  Items s;
  Target target;
  int64_t ignore_index = -100;
  float eps = 0.f;
  LossReduction reduction = LossReduction::kMean;
  bool nll = false;  // NLLLoss: x holds the log-probabilities themselves
};

template <class T>
__device__ float weight_at(const T* w, int64_t c) {
  return w ? cuda::to_float(w[c]) : 1.f;
}

// The item's class: >= 0, -1 when ignored, -2 when out of range.
__device__ inline int64_t class_of(const Params& p, int64_t j) {
  const int64_t c = p.target[j];
  if (c == p.ignore_index) return -1;
  return c < 0 || c >= p.s.classes ? -2 : c;
}

// log-sum-exp of item j's logits over the warp (every lane gets it).
template <class T>
__device__ float item_lse(const Params& p, const T* x, int64_t j, int lane) {
  if (p.nll) return 0.f;
  float m = -INFINITY;
  for (int64_t c = lane; c < p.s.classes; c += 32) m = fmaxf(m, cuda::to_float(x[p.s.at(j, c)]));
  m = cuda::warp_max(m);
  float sum = 0.f;
  for (int64_t c = lane; c < p.s.classes; c += 32) sum += expf(cuda::to_float(x[p.s.at(j, c)]) - m);
  return m + logf(cuda::warp_sum(sum));
}

// Per item: its loss and its weight in the mean's denominator.
template <class T>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_items(Params p, const T* x, const T* w, float* loss, float* weight) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t items = p.s.count();
  for (int64_t j = blockIdx.x * int64_t{kWarps} + (threadIdx.x >> 5); j < items; j += int64_t{gridDim.x} * kWarps) {
    const int64_t cls = class_of(p, j);
    if (cls == -1) {
      if (lane == 0) loss[j] = weight[j] = 0.f;
      continue;
    }
    if (cls == -2) {
      if (lane == 0) loss[j] = weight[j] = NAN;
      continue;
    }
    const float lse = item_lse(p, x, j, lane);
    float sw = 0.f;
    if (p.eps != 0.f) {
      for (int64_t c = lane; c < p.s.classes; c += 32) {
        const float wc = weight_at(w, c);  // a zero weight adds nothing, even against a -inf log-probability
        if (wc != 0.f) sw += wc * (cuda::to_float(x[p.s.at(j, c)]) - lse);
      }
      sw = cuda::warp_sum(sw);
    }
    if (lane == 0) {
      const float wt = weight_at(w, cls);
      const float lp = cuda::to_float(x[p.s.at(j, cls)]) - lse;
      const float eps_c = p.eps / static_cast<float>(p.s.classes);
      const float q = wt * (1.f - p.eps);
      float l = q != 0.f ? -q * lp : 0.f;
      if (p.eps != 0.f) l -= eps_c * sw;
      loss[j] = l;
      weight[j] = wt;
    }
  }
}

// One block: out[0] = sum(loss) (/ sum(weight) for mean); or, with `loss` null, denom[0] = sum(weight).
template <class T>
__global__ void __launch_bounds__(kReduceThreads)
    reduce_items(const float* loss, const float* weight, int64_t items, LossReduction r, T* out, float* denom) {
  __shared__ float scratch[32];
  float l = 0.f, wt = 0.f;
  for (int64_t j = threadIdx.x; j < items; j += blockDim.x) {
    if (loss) l += loss[j];
    wt += weight[j];
  }
  l = cuda::block_sum(l, scratch);
  wt = cuda::block_sum(wt, scratch);
  if (threadIdx.x != 0) return;
  if (denom) *denom = wt;
  if (out) *out = cuda::from_float<T>(r == LossReduction::kMean ? l / wt : l);
}

// The weight of each item in the mean's denominator (0 when ignored, NaN when out of range).
__global__ void item_weights_kernel(Params p, const void* w, cuda::FloatKind wk, float* weight) {
  const int64_t items = p.s.count();
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < items; j += int64_t{blockDim.x} * gridDim.x) {
    const int64_t cls = class_of(p, j);
    weight[j] = cls == -1 ? 0.f : cls == -2 ? NAN : w ? cuda::load_float(w, wk, cls) : 1.f;
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_backward_items(Params p, const T* dy, const T* x, const T* w, const float* denom, T* dx) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t items = p.s.count();
  const float eps_c = p.eps / static_cast<float>(p.s.classes);
  for (int64_t j = blockIdx.x * int64_t{kWarps} + (threadIdx.x >> 5); j < items; j += int64_t{gridDim.x} * kWarps) {
    const int64_t cls = class_of(p, j);
    if (cls < 0) {
      const float fill = cls == -1 ? 0.f : NAN;
      for (int64_t c = lane; c < p.s.classes; c += 32) dx[p.s.at(j, c)] = cuda::from_float<T>(fill);
      continue;
    }
    float g = cuda::to_float(dy[p.reduction == LossReduction::kNone ? j : 0]);
    if (p.reduction == LossReduction::kMean) g /= *denom;
    if (p.nll) {  // -g w[t] at the target class
      for (int64_t c = lane; c < p.s.classes; c += 32)
        dx[p.s.at(j, c)] = cuda::from_float<T>(c == cls ? -g * weight_at(w, c) : 0.f);
      continue;
    }
    const float lse = item_lse(p, x, j, lane);
    float sw = 0.f;
    if (p.eps != 0.f) {
      for (int64_t c = lane; c < p.s.classes; c += 32) sw += weight_at(w, c);
      sw = cuda::warp_sum(sw);
    }
    const float qsum = weight_at(w, cls) * (1.f - p.eps) + eps_c * sw;
    for (int64_t c = lane; c < p.s.classes; c += 32) {
      const int64_t i = p.s.at(j, c);
      const float tt = (c == cls ? 1.f - p.eps : 0.f) + eps_c;
      dx[i] = cuda::from_float<T>(g * (expf(cuda::to_float(x[i]) - lse) * qsum - weight_at(w, c) * tt));
    }
  }
}

unsigned warp_blocks(int64_t items) {
  return static_cast<unsigned>(std::clamp<int64_t>((items + kWarps - 1) / kWarps, 1, int64_t{1} << 20));
}

template <class A>
Params params_of(const KernelContext& ctx, const Tensor& x, const Tensor& target) {
  const auto& a = ctx.attrs<A>();
  Params p;
  p.s = items_of(x.dims());
  p.target = Target{target.raw(), target.dtype() == DataType::kInt64};
  p.ignore_index = a.ignore_index;
  if constexpr (requires { a.label_smoothing; })
    p.eps = a.label_smoothing;
  else
    p.nll = true;
  p.reduction = a.reduction;
  return p;
}

const Tensor* optional_src(const KernelContext& ctx, size_t i) {
  return i < ctx.src.size() && ctx.src[i].defined() ? &ctx.src[i] : nullptr;
}

template <class A>
class CrossEntropy final : public Kernel {
 public:
  size_t workspace_bytes() const override { return scratch_bytes_; }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.src[0];
    const Params p = params_of<A>(ctx, x, ctx.src[1]);
    const Tensor* w = optional_src(ctx, 2);
    Tensor& out = ctx.dst[0];
    const int64_t items = p.s.count();
    const cudaStream_t stream = cuda::native(ctx.stream);
    const bool none = p.reduction == LossReduction::kNone;
    if (items == 0 && none) return Status::ok();
    scratch_bytes_ = static_cast<size_t>(std::max<int64_t>(items, 1)) * 2 * sizeof(float);
    KILN_ASSIGN_OR_RETURN(void* scratch, scratch_.get(ctx.allocator, scratch_bytes_, "CrossEntropyLoss items", stream));
    float* loss = static_cast<float*>(scratch);
    float* weight = loss + std::max<int64_t>(items, 1);
    return cuda::dispatch_float_status(x.dtype(), p.nll ? "NLLLoss" : "CrossEntropyLoss", [&](auto tag) -> Status {
      using T = cuda::type_of<decltype(tag)>;
      const T* wp = w ? w->data<T>() : nullptr;
      if (items > 0) {
        cross_entropy_items<T><<<warp_blocks(items), kThreads, 0, stream>>>(p, x.data<T>(), wp, loss, weight);
        KILN_RETURN_IF_ERROR(cuda::check(cudaGetLastError(), "cross entropy kernel launch"));
      }
      if (none) {
        // The item losses in the output's type.
        return dispatch_copy<T>(loss, out.data<T>(), items, stream);
      }
      reduce_items<T><<<1, kReduceThreads, 0, stream>>>(loss, weight, items, p.reduction, out.data<T>(), nullptr);
      return cuda::check(cudaGetLastError(), "cross entropy reduction launch");
    });
  }

 private:
  template <class T>
  static Status dispatch_copy(const float* from, T* to, int64_t n, cudaStream_t stream);

  size_t scratch_bytes_ = 0;
  cuda::DeviceScratch scratch_;
};

template <class T>
__global__ void convert_kernel(const float* from, T* to, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x)
    to[i] = cuda::from_float<T>(from[i]);
}

template <class A>
template <class T>
Status CrossEntropy<A>::dispatch_copy(const float* from, T* to, int64_t n, cudaStream_t stream) {
  convert_kernel<T><<<cuda::grid_for(n), 256, 0, stream>>>(from, to, n);
  return cuda::check(cudaGetLastError(), "cross entropy output kernel launch");
}

template <class A>
class CrossEntropyBackward final : public Kernel {
 public:
  size_t workspace_bytes() const override { return scratch_bytes_; }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.src[1];
    const Params p = params_of<A>(ctx, x, ctx.src[2]);
    const Tensor* w = optional_src(ctx, 3);
    Tensor& dx = ctx.dst[0];
    const int64_t items = p.s.count();
    if (items == 0 || dx.numel() == 0) return Status::ok();
    const cudaStream_t stream = cuda::native(ctx.stream);
    const bool mean = p.reduction == LossReduction::kMean;
    scratch_bytes_ = mean ? static_cast<size_t>(items + 1) * sizeof(float) : 0;
    float* denom = nullptr;
    if (mean) {
      KILN_ASSIGN_OR_RETURN(void* scratch,
                            scratch_.get(ctx.allocator, scratch_bytes_, "CrossEntropyLossBackward weights", stream));
      float* weight = static_cast<float*>(scratch);
      denom = weight + items;
      const std::optional<cuda::FloatKind> wk = w ? cuda::float_kind(w->dtype()) : cuda::FloatKind::kF32;
      item_weights_kernel<<<cuda::grid_for(items), 256, 0, stream>>>(p, w ? w->raw() : nullptr,
                                                                     wk.value_or(cuda::FloatKind::kF32), weight);
      KILN_RETURN_IF_ERROR(cuda::check(cudaGetLastError(), "cross entropy weights kernel launch"));
      reduce_items<float><<<1, kReduceThreads, 0, stream>>>(nullptr, weight, items, p.reduction, nullptr, denom);
      KILN_RETURN_IF_ERROR(cuda::check(cudaGetLastError(), "cross entropy denominator launch"));
    }
    return cuda::dispatch_float_status(
        x.dtype(), p.nll ? "NLLLossBackward" : "CrossEntropyLossBackward", [&](auto tag) -> Status {
          using T = cuda::type_of<decltype(tag)>;
          cross_entropy_backward_items<T><<<warp_blocks(items), kThreads, 0, stream>>>(
              p, ctx.src[0].data<T>(), x.data<T>(), w ? w->data<T>() : nullptr, denom, dx.data<T>());
          return cuda::check(cudaGetLastError(), "cross entropy backward kernel launch");
        });
  }

 private:
  size_t scratch_bytes_ = 0;
  cuda::DeviceScratch scratch_;
};

// Class-index targets, every float tensor in x's type.
Status supports_classes(const OpCall& call, const char* name, int x_index) {
  KILN_RETURN_IF_ERROR(require_float_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}));
  const TensorDesc& target = call.inputs[x_index + 1];
  if (target.dtype != DataType::kInt32 && target.dtype != DataType::kInt64)
    return unsupported(name, " takes class-index targets (int32/int64); probability targets (",
                       dtype_name(target.dtype), ") run on another backend");
  const DataType dt = call.inputs[x_index].dtype;
  for (size_t i = 0; i < call.inputs.size(); ++i)
    if (call.inputs[i].present && static_cast<int>(i) != x_index + 1 && call.inputs[i].dtype != dt)
      return unsupported(name, " takes every float input in x's type (", dtype_name(dt), ")");
  if (call.outputs[0].dtype != dt) return unsupported(name, " writes x's type (", dtype_name(dt), ")");
  return Status::ok();
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.cross_entropy_loss",
    .op = "CrossEntropyLoss",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) { return supports_classes(call, "cuda.cross_entropy_loss", 0); },
    .create = [](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<CrossEntropy<CrossEntropyLossAttrs>>());
    },
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.cross_entropy_loss_backward",
    .op = "CrossEntropyLossBackward",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) -> Status {
      if (call.attrs_as<CrossEntropyLossBackwardAttrs>().wrt != ClassLossWrt::kInput)
        return unsupported("cuda.cross_entropy_loss_backward differentiates the input only (wrt input), not ",
                           enum_name(call.attrs_as<CrossEntropyLossBackwardAttrs>().wrt));
      return supports_classes(call, "cuda.cross_entropy_loss_backward", 1);
    },
    .create = [](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<CrossEntropyBackward<CrossEntropyLossBackwardAttrs>>());
    },
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.nll_loss",
    .op = "NLLLoss",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) { return supports_classes(call, "cuda.nll_loss", 0); },
    .create = [](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<CrossEntropy<NLLLossAttrs>>());
    },
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.nll_loss_backward",
    .op = "NLLLossBackward",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) -> Status {
      if (call.attrs_as<NLLLossBackwardAttrs>().wrt != ClassLossWrt::kInput)
        return unsupported("cuda.nll_loss_backward differentiates the input only (wrt input), not ",
                           enum_name(call.attrs_as<NLLLossBackwardAttrs>().wrt));
      return supports_classes(call, "cuda.nll_loss_backward", 1);
    },
    .create = [](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<CrossEntropyBackward<NLLLossBackwardAttrs>>());
    },
});

}  // namespace
}  // namespace kiln
