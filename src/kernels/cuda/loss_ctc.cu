// CUDA CTCLoss and CTCLossBackward: the alpha-beta recursions of kernels/ref/loss.h in log space, in float64 (as
// the reference; long inputs sum hundreds of log-probabilities). One block per sample, threads over the 2L + 1
// states of its blank-extended target, one barrier per time step. The forward keeps two rows of log alpha per
// sample; the backward keeps every row, then walks log beta from the sample's last frame back and turns each
// frame's state occupations into dx[t, n, c], summed per class in a fixed order (deterministic). Inputs the
// reference rejects (a length out of range, a label that is blank or not a class) make that sample's loss and its
// dx NaN: the device does not stop to report them.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/cuda/cublaslt_gemm.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/dispatch.cuh"
#include "kernels/cuda/types.cuh"
#include "ops/loss/loss.h"

namespace kiln {
namespace {

constexpr int kMaxThreads = 512;
constexpr int kReduceThreads = 1024;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// An int32 or int64 tensor on the device.
struct Indices {
  const void* p = nullptr;
  bool wide = false;
  __device__ int64_t operator[](int64_t i) const {
    return wide ? static_cast<const int64_t*>(p)[i] : int64_t{static_cast<const int32_t*>(p)[i]};
  }
};

struct CtcParams {
  int64_t T = 0, N = 0, C = 0, blank = 0;
  Indices targets, input_lengths, target_lengths;
  bool padded = false;     // targets [N, cols], else concatenated [cols]
  int64_t cols = 0;        // labels per row (padded) or in all (concatenated)
  int64_t max_states = 1;  // 2 cols + 1: the most states a sample can have
  int64_t rows = 2;        // rows of log alpha kept per sample: 2 (forward) or T (backward)
  LossReduction reduction = LossReduction::kMean;
  bool zero_infinity = false;

  /// Doubles of work memory per state of a sample: its alpha rows, two beta rows, the occupations, and two int32
  /// arrays over the labels (next occurrence of the label, first occurrence flag).
  __host__ __device__ int64_t slab() const { return rows + 4; }
  /// Doubles of work memory for all samples: sample n's slab starts at slab() times the states of samples < n.
  int64_t work_doubles() const { return slab() * (padded ? N * max_states : 2 * cols + N); }
};

/// One sample as a block sees it.
struct Sample {
  int64_t n = 0, input_length = 0, length = 0, start = 0, states = 1;
  bool valid = false;
  double *alpha = nullptr, *beta = nullptr, *occ = nullptr;
  int32_t *next = nullptr, *first = nullptr;
};

/// Sum over the block (blockDim.x a multiple of 32); every thread gets it. `scratch` holds 32 values of shared
/// memory; the call ends with a barrier.
template <class V>
__device__ V block_total(V v, V* scratch) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(cuda::kFullMask, v, o);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    V w = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : V(0);
    for (int o = 16; o > 0; o >>= 1) w += __shfl_xor_sync(cuda::kFullMask, w, o);
    if (lane == 0) scratch[31] = w;
  }
  __syncthreads();
  const V total = scratch[31];
  __syncthreads();
  return total;
}

__device__ inline double log_add(double a, double b) {
  if (a < b) {
    const double t = a;
    a = b;
    b = t;
  }
  if (b == kNegInf) return a;
  return a + log1p(exp(b - a));
}

/// Sample blockIdx.x: lengths and labels checked, its part of the work memory. Called by every thread.
__device__ Sample sample_of(const CtcParams& p, double* work, long long* scratch) {
  Sample x;
  x.n = blockIdx.x;
  x.input_length = p.input_lengths[x.n];
  x.length = p.target_lengths[x.n];
  int64_t offset = x.n * p.cols;
  if (!p.padded) {
    long long before = 0;
    for (int64_t k = threadIdx.x; k < x.n; k += blockDim.x) before += p.target_lengths[k];
    offset = block_total(before, scratch);
  }
  bool valid = x.input_length >= 0 && x.input_length <= p.T && x.length >= 0 && x.length <= p.cols;
  if (!p.padded) valid = valid && offset >= 0 && offset <= p.cols - x.length;
  bool bad = false;
  if (valid)
    for (int64_t k = threadIdx.x; k < x.length; k += blockDim.x) {
      const int64_t c = p.targets[offset + k];
      bad |= c < 0 || c >= p.C || c == p.blank;
    }
  x.valid = !__syncthreads_or(bad) && valid;
  if (!x.valid) return x;
  x.start = offset;
  x.states = 2 * x.length + 1;
  const int64_t S = x.states;
  x.alpha = work + (p.padded ? x.n * p.max_states : 2 * offset + x.n) * p.slab();
  x.beta = x.alpha + p.rows * S;
  x.occ = x.beta + 2 * S;
  x.next = reinterpret_cast<int32_t*>(x.occ + S);
  x.first = x.next + x.length;
  return x;
}

__device__ inline int64_t label(const CtcParams& p, const Sample& x, int64_t k) { return p.targets[x.start + k]; }
/// The class of state s of the blank-extended target (blank, l0, blank, l1, ..., blank).
__device__ inline int64_t ext(const CtcParams& p, const Sample& x, int64_t s) {
  return s % 2 == 0 ? p.blank : label(p, x, s / 2);
}

template <class T>
__device__ inline double lp_at(const CtcParams& p, const T* lp, int64_t t, int64_t n, int64_t c) {
  return cuda::to_float(lp[(t * p.N + n) * p.C + c]);
}

/// log alpha of sample x into its rows (row t % rows); returns its negative log-likelihood (inf when no alignment
/// fits) to every thread.
template <class T>
__device__ double ctc_alpha(const CtcParams& p, const Sample& x, const T* lp) {
  const int64_t S = x.states, len = x.input_length;
  if (len == 0) return x.length == 0 ? 0.0 : -kNegInf;
  for (int64_t t = 0; t < len; ++t) {
    double* cur = x.alpha + (t % p.rows) * S;
    const double* prev = x.alpha + ((t + p.rows - 1) % p.rows) * S;
    for (int64_t s = threadIdx.x; s < S; s += blockDim.x) {
      const int64_t c = ext(p, x, s);
      double a;
      if (t == 0) {
        a = s <= 1 ? 0.0 : kNegInf;
      } else {
        a = prev[s];
        if (s >= 1) a = log_add(a, prev[s - 1]);
        if (s >= 2 && c != p.blank && c != ext(p, x, s - 2)) a = log_add(a, prev[s - 2]);
      }
      cur[s] = a == kNegInf ? kNegInf : a + lp_at(p, lp, t, x.n, c);
    }
    __syncthreads();
  }
  const double* last = x.alpha + ((len - 1) % p.rows) * S;
  return -(S > 1 ? log_add(last[S - 1], last[S - 2]) : last[0]);
}

/// Per sample: its loss (after zero_infinity; divided by max(target length, 1) for mean), NaN when invalid.
template <class T>
__global__ void __launch_bounds__(kMaxThreads) ctc_forward(CtcParams p, const T* lp, double* work, double* loss) {
  __shared__ long long scratch[32];
  const Sample x = sample_of(p, work, scratch);
  if (!x.valid) {
    if (threadIdx.x == 0) loss[x.n] = NAN;
    return;
  }
  double nll = ctc_alpha(p, x, lp);
  if (p.zero_infinity && isinf(nll)) nll = 0.0;
  if (p.reduction == LossReduction::kMean) nll /= static_cast<double>(x.length > 1 ? x.length : 1);
  if (threadIdx.x == 0) loss[x.n] = nll;
}

/// The output: the per-sample losses (none), their sum, or their sum / N (mean).
template <class T>
__global__ void __launch_bounds__(kReduceThreads) ctc_reduce(const double* loss, int64_t n, LossReduction r, T* out) {
  if (r == LossReduction::kNone) {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) out[i] = cuda::from_float<T>(static_cast<float>(loss[i]));
    return;
  }
  __shared__ double scratch[32];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += loss[i];
  sum = block_total(sum, scratch);
  if (threadIdx.x == 0)
    out[0] = cuda::from_float<T>(static_cast<float>(r == LossReduction::kMean ? sum / static_cast<double>(n) : sum));
}

/// dx of sample blockIdx.x (dx is zero already): -g exp(alpha + beta - lp + nll) summed over the states of each
/// class, for t < input_length.
template <class T>
__global__ void __launch_bounds__(kMaxThreads)
    ctc_backward(CtcParams p, const T* dy, const T* lp, double* work, T* dx) {
  __shared__ long long iscratch[32];
  __shared__ double dscratch[32];
  const Sample x = sample_of(p, work, iscratch);
  const int64_t n = x.n;
  auto at = [&](int64_t t, int64_t c) -> T& { return dx[(t * p.N + n) * p.C + c]; };
  const T nan = cuda::from_float<T>(NAN);
  if (!x.valid) {
    for (int64_t i = threadIdx.x; i < p.T * p.C; i += blockDim.x) at(i / p.C, i % p.C) = nan;
    return;
  }
  const int64_t S = x.states, L = x.length, len = x.input_length;
  if (len == 0) return;
  const double nll = ctc_alpha(p, x, lp);
  if (isinf(nll)) {
    // No alignment fits: 0 with zero_infinity, else NaN at the target's classes (as the reference).
    if (!p.zero_infinity)
      for (int64_t i = threadIdx.x; i < len * S; i += blockDim.x) at(i / S, ext(p, x, i % S)) = nan;
    return;
  }
  double g = cuda::to_float(dy[p.reduction == LossReduction::kNone ? n : 0]);
  if (p.reduction == LossReduction::kMean) g /= static_cast<double>(L > 1 ? L : 1) * static_cast<double>(p.N);
  // Per label position: the next position with the same label (-1: none), and whether it is the label's first.
  for (int64_t k = threadIdx.x; k < L; k += blockDim.x) {
    const int64_t c = label(p, x, k);
    int32_t next = -1, first = 1;
    for (int64_t j = 0; j < L && next < 0; ++j) {  // past k once next is found: first is known
      if (label(p, x, j) != c) continue;
      if (j < k) first = 0;
      if (j > k && next < 0) next = static_cast<int32_t>(j);
    }
    x.next[k] = next;
    x.first[k] = first;
  }
  __syncthreads();
  for (int64_t t = len - 1; t >= 0; --t) {
    double* cur = x.beta + (t & 1) * S;
    const double* nxt = x.beta + ((t + 1) & 1) * S;
    const double* a = x.alpha + t * S;
    for (int64_t s = threadIdx.x; s < S; s += blockDim.x) {
      const int64_t c = ext(p, x, s);
      double b;
      if (t == len - 1) {
        b = s >= S - 2 ? 0.0 : kNegInf;
      } else {
        b = nxt[s];
        if (s + 1 < S) b = log_add(b, nxt[s + 1]);
        if (s + 2 < S && c != p.blank && c != ext(p, x, s + 2)) b = log_add(b, nxt[s + 2]);
      }
      const double e = lp_at(p, lp, t, n, c);
      b = b == kNegInf ? kNegInf : b + e;
      cur[s] = b;
      const double v = a[s] + b;  // -inf for a state no alignment passes
      x.occ[s] = v == kNegInf ? 0.0 : exp(v - e + nll);
    }
    __syncthreads();
    for (int64_t k = threadIdx.x; k < L; k += blockDim.x) {
      if (!x.first[k]) continue;
      double sum = 0.0;
      for (int64_t j = k; j >= 0; j = x.next[j]) sum += x.occ[2 * j + 1];
      at(t, label(p, x, k)) = cuda::from_float<T>(static_cast<float>(-g * sum));
    }
    double blank = 0.0;
    for (int64_t s = 2 * static_cast<int64_t>(threadIdx.x); s < S; s += 2 * static_cast<int64_t>(blockDim.x))
      blank += x.occ[s];
    blank = block_total(blank, dscratch);  // its barriers also end this step's reads of occ and beta
    if (threadIdx.x == 0) at(t, p.blank) = cuda::from_float<T>(static_cast<float>(-g * blank));
  }
}

/// The problem of inputs from `off` (log_probs, targets, input_lengths, target_lengths).
CtcParams params_of(const KernelContext& ctx, int off, bool keep_alpha) {
  const auto& a = ctx.attrs<CTCLossAttrs>();
  const Dims& d = ctx.src[off].dims();
  const Tensor& targets = ctx.src[off + 1];
  auto indices = [](const Tensor& t) { return Indices{t.raw(), t.dtype() == DataType::kInt64}; };
  CtcParams p;
  p.T = d[0];
  p.N = d[1];
  p.C = d[2];
  p.blank = a.blank;
  p.targets = indices(targets);
  p.input_lengths = indices(ctx.src[off + 2]);
  p.target_lengths = indices(ctx.src[off + 3]);
  p.padded = targets.rank() == 2;
  p.cols = p.padded ? targets.dims()[1] : targets.numel();
  p.max_states = 2 * p.cols + 1;
  p.rows = keep_alpha ? std::max<int64_t>(p.T, 1) : 2;
  p.reduction = a.reduction;
  p.zero_infinity = a.zero_infinity;
  return p;
}

/// Threads per sample: enough for the longest target's states, a multiple of 32.
unsigned threads_for(const CtcParams& p) {
  return static_cast<unsigned>(std::clamp<int64_t>((p.max_states + 31) / 32 * 32, 64, kMaxThreads));
}

class CtcLoss final : public Kernel {
 public:
  size_t workspace_bytes() const override { return bytes_; }

  Status run(KernelContext& ctx) override {
    const CtcParams p = params_of(ctx, 0, false);
    if (p.N == 0 && p.reduction == LossReduction::kNone) return Status::ok();
    const cudaStream_t stream = cuda::native(ctx.stream);
    bytes_ = static_cast<size_t>(p.N + p.work_doubles() + 1) * sizeof(double);
    KILN_ASSIGN_OR_RETURN(void* scratch, scratch_.get(ctx.allocator, bytes_, "CTCLoss alpha", stream));
    double* loss = static_cast<double*>(scratch);
    double* work = loss + p.N;
    return cuda::dispatch_float_status(ctx.src[0].dtype(), "CTCLoss", [&](auto tag) -> Status {
      using T = cuda::type_of<decltype(tag)>;
      if (p.N > 0) {
        ctc_forward<T><<<static_cast<unsigned>(p.N), threads_for(p), 0, stream>>>(p, ctx.src[0].data<T>(), work, loss);
        KILN_RETURN_IF_ERROR(cuda::check(cudaGetLastError(), "CTC loss kernel launch"));
      }
      ctc_reduce<T><<<1, kReduceThreads, 0, stream>>>(loss, p.N, p.reduction, ctx.dst[0].data<T>());
      return cuda::check(cudaGetLastError(), "CTC loss reduction launch");
    });
  }

 private:
  size_t bytes_ = 0;
  cuda::DeviceScratch scratch_;
};

class CtcLossBackward final : public Kernel {
 public:
  size_t workspace_bytes() const override { return bytes_; }

  Status run(KernelContext& ctx) override {
    const CtcParams p = params_of(ctx, 1, true);
    Tensor& dx = ctx.dst[0];
    if (dx.numel() == 0) return Status::ok();
    const cudaStream_t stream = cuda::native(ctx.stream);
    bytes_ = static_cast<size_t>(p.work_doubles()) * sizeof(double);
    KILN_ASSIGN_OR_RETURN(void* work, scratch_.get(ctx.allocator, bytes_, "CTCLossBackward alpha", stream));
    KILN_RETURN_IF_ERROR(cuda::check(cudaMemsetAsync(dx.raw(), 0, dx.nbytes(), stream), "CTC dx zero fill"));
    return cuda::dispatch_float_status(dx.dtype(), "CTCLossBackward", [&](auto tag) -> Status {
      using T = cuda::type_of<decltype(tag)>;
      ctc_backward<T><<<static_cast<unsigned>(p.N), threads_for(p), 0, stream>>>(
          p, ctx.src[0].data<T>(), ctx.src[1].data<T>(), static_cast<double*>(work), dx.data<T>());
      return cuda::check(cudaGetLastError(), "CTC loss backward kernel launch");
    });
  }

 private:
  size_t bytes_ = 0;
  cuda::DeviceScratch scratch_;
};

/// log_probs (input `off`), dy and the output in one float type; sizes the kernels' int32 label positions and
/// grid hold.
Status supports_ctc(const OpCall& call, const char* name, int off) {
  KILN_RETURN_IF_ERROR(require_float_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}));
  const DataType dt = call.inputs[off].dtype;
  for (size_t i = 0; i < call.inputs.size(); ++i)
    if (call.inputs[i].present && is_floating(call.inputs[i].dtype) && call.inputs[i].dtype != dt)
      return unsupported(name, " takes dy and log_probs in one type (", dtype_name(dt), ")");
  if (call.outputs[0].dtype != dt) return unsupported(name, " writes log_probs' type (", dtype_name(dt), ")");
  const Dims& lp = call.inputs[off].dims;
  if (lp.rank() == 3 && lp[1] > std::numeric_limits<int32_t>::max())
    return unsupported(name, " runs one block per sample: batch ", lp[1], " is more than 2^31 - 1");
  const Dims& targets = call.inputs[off + 1].dims;
  const int64_t labels = targets.rank() == 2 ? targets[1] : targets.rank() == 1 ? targets[0] : 0;
  if (labels > (int64_t{1} << 28))
    return unsupported(name, " holds label positions in int32: targets of ", labels, " labels are too long");
  return Status::ok();
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.ctc_loss",
    .op = "CTCLoss",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) { return supports_ctc(call, "cuda.ctc_loss", 0); },
    .create = [](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<CtcLoss>());
    },
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.ctc_loss_backward",
    .op = "CTCLossBackward",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) { return supports_ctc(call, "cuda.ctc_loss_backward", 1); },
    .create = [](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<CtcLossBackward>());
    },
});

}  // namespace
}  // namespace kiln
