// CUDA DFT, STFT and MelWeightMatrix. DFT and STFT are direct sums, one thread per output bin, accumulated in double
// with twiddles of the exact index product (as the reference computes them): O(n^2) per transform, fine for the
// frame lengths of speech front ends. dft_length, frame_step and frame_length are read on the host (constants of
// the engine, else a copy that waits for the stream). MelWeightMatrix is computed on the host by the reference's
// formula and copied to the device; its inputs are scalars that are constants in practice (the node is usually
// folded), and the kernel waits for its copy before it returns.
#include <cstdint>
#include <optional>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/cuda/value_input.h"
#include "kernels/ref/signal.h"

namespace kiln {
namespace {

// One transform per (outer, inner) pair: `len` samples at stride `in_stride` (`components` floats each), `n`-point
// DFT, `bins` complex outputs at stride `out_stride`.
struct DftArgs {
  int64_t outer = 1, inner = 1, len = 0, n = 0, bins = 0, components = 1;
  int64_t in_batch = 0, in_inner = 0, in_stride = 0;     // element offsets of x: outer, inner, sample
  int64_t out_batch = 0, out_inner = 0, out_stride = 0;  // of y: outer, inner, bin
  bool inverse = false;
  const float* window = nullptr;  // STFT: multiplies each sample (in float, as the reference does)
};

__global__ void dft_kernel(DftArgs a, const float* x, float* y) {
  const int64_t count = a.outer * a.inner * a.bins;
  const int64_t used = a.len < a.n ? a.len : a.n;
  const double sign = a.inverse ? 1.0 : -1.0, scale = a.inverse ? 1.0 / static_cast<double>(a.n) : 1.0;
  for (int64_t t = cuda::thread_index(); t < count; t += cuda::thread_count()) {
    const int64_t k = t % a.bins;
    const int64_t i = (t / a.bins) % a.inner;
    const int64_t o = t / (a.bins * a.inner);
    const float* in = x + o * a.in_batch + i * a.in_inner;
    double re = 0, im = 0;
    const int64_t kn = k % a.n;
    for (int64_t j = 0; j < used; ++j) {
      // cos and sin of 2 pi (j k mod n) / n.
      double s = 0, c = 0;
      sincospi(2.0 * static_cast<double>((j % a.n) * kn % a.n) / static_cast<double>(a.n), &s, &c);
      s *= sign;
      const float w = a.window ? a.window[j] : 1.f;
      const double xr = a.window ? in[j * a.in_stride] * w : in[j * a.in_stride];
      const double xi = a.components == 2 ? (a.window ? in[j * a.in_stride + 1] * w : in[j * a.in_stride + 1]) : 0.0;
      re += xr * c - xi * s;
      im += xr * s + xi * c;
    }
    float* out = y + o * a.out_batch + i * a.out_inner + k * a.out_stride;
    out[0] = static_cast<float>(re * scale);
    out[1] = static_cast<float>(im * scale);
  }
}

Status launch_dft(const DftArgs& a, const float* x, float* y, cudaStream_t stream) {
  const int64_t count = a.outer * a.inner * a.bins;
  if (count == 0) return Status::ok();
  dft_kernel<<<cuda::blocks_for(count), cuda::kThreads, 0, stream>>>(a, x, y);
  return cuda::check(cudaGetLastError(), "DFT kernel launch");
}

// A scalar integer input read on the host, or nullopt when absent.
Result<std::optional<int64_t>> host_scalar(KernelContext& ctx, int i, const char* op, const char* what) {
  if (i >= static_cast<int>(ctx.src.size()) || !ctx.src[i].defined()) return std::optional<int64_t>();
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, cuda::host_int64s(ctx, i));
  if (v.size() != 1) return invalid_argument(op, " input ", what, " must hold one value, got ", v.size());
  return std::optional<int64_t>(v[0]);
}

Status check_output(const char* op, const Tensor& y, const Dims& want) {
  if (y.dims() != want)
    return invalid_argument(op, " output ", y.dims().to_string(), " does not match the inputs' ", want.to_string(),
                            " (the inputs changed since shapes were inferred)");
  return Status::ok();
}

Status run_dft(KernelContext& ctx) {
  const auto& attrs = ctx.attrs<DftAttrs>();
  KILN_ASSIGN_OR_RETURN(std::optional<int64_t> length, host_scalar(ctx, 1, "DFT", "dft_length"));
  KILN_ASSIGN_OR_RETURN(DftShape s, dft_shape(ctx.src[0].dims(), attrs, length));
  KILN_RETURN_IF_ERROR(check_output("DFT", ctx.dst[0], s.out));
  DftArgs a;
  a.outer = s.outer;
  a.inner = s.inner;
  a.len = s.length;
  a.n = s.n;
  a.bins = s.bins;
  a.components = s.components;
  a.in_batch = s.length * s.inner * s.components;
  a.in_inner = s.components;
  a.in_stride = s.inner * s.components;
  a.out_batch = s.bins * s.inner * 2;
  a.out_inner = 2;
  a.out_stride = s.inner * 2;
  a.inverse = attrs.inverse;
  if (a.n <= 0 && a.bins > 0) return invalid_argument("DFT length must be positive, got ", a.n);
  return launch_dft(a, ctx.src[0].data<float>(), ctx.dst[0].data<float>(), cuda::native(ctx.stream));
}

Status run_stft(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::optional<int64_t> step, host_scalar(ctx, 1, "STFT", "frame_step"));
  KILN_ASSIGN_OR_RETURN(std::optional<int64_t> frame_length, host_scalar(ctx, 3, "STFT", "frame_length"));
  const bool window = ctx.src.size() > 2 && ctx.src[2].defined();
  std::optional<int64_t> window_length;
  if (window) window_length = ctx.src[2].numel();
  KILN_ASSIGN_OR_RETURN(
      StftShape s, stft_shape(ctx.src[0].dims(), ctx.attrs<StftAttrs>().onesided, step, window_length, frame_length));
  KILN_RETURN_IF_ERROR(check_output("STFT", ctx.dst[0], s.out));
  if (window && ctx.src[2].numel() < s.frame_length)
    return invalid_argument("STFT window has ", ctx.src[2].numel(), " values for frames of ", s.frame_length);
  // Frames are transforms over [batch, frames]: frame f of batch b starts at sample f * frame_step.
  DftArgs a;
  a.outer = s.batch;
  a.inner = s.frames;
  a.len = s.frame_length;
  a.n = s.frame_length;
  a.bins = s.bins;
  a.components = s.components;
  a.in_batch = s.length * s.components;
  a.in_inner = s.frame_step * s.components;
  a.in_stride = s.components;
  a.out_batch = s.frames * s.bins * 2;
  a.out_inner = s.bins * 2;
  a.out_stride = 2;
  a.window = window ? ctx.src[2].data<float>() : nullptr;
  if (a.n <= 0 && a.bins > 0) return invalid_argument("STFT frame length must be positive, got ", a.n);
  return launch_dft(a, ctx.src[0].data<float>(), ctx.dst[0].data<float>(), cuda::native(ctx.stream));
}

// A scalar input as a double on the host (constant, host tensor, or copied back after the stream's work).
Result<double> host_double(KernelContext& ctx, int i) {
  if (const Tensor* c = ctx.call.constant(i)) return c->at(0);
  const Tensor& t = ctx.src[i];
  if (t.numel() != 1)
    return invalid_argument("MelWeightMatrix input ", i, " must hold one value, got ", t.dims().to_string());
  if (t.device().is_cpu()) return t.at(0);
  KILN_ASSIGN_OR_RETURN(Tensor host, Tensor::empty(t.dtype(), t.dims()));
  KILN_RETURN_IF_ERROR(ctx.stream.synchronize());
  KILN_RETURN_IF_ERROR(cuda::copy(t, host));
  return host.at(0);
}

Status run_mel(KernelContext& ctx) {
  int64_t ints[3] = {};
  for (int i = 0; i < 3; ++i) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> v, cuda::host_int64s(ctx, i));
    if (v.size() != 1) return invalid_argument("MelWeightMatrix input ", i, " must hold one value, got ", v.size());
    ints[i] = v[0];
  }
  KILN_ASSIGN_OR_RETURN(double lower, host_double(ctx, 3));
  KILN_ASSIGN_OR_RETURN(double upper, host_double(ctx, 4));
  KILN_ASSIGN_OR_RETURN(std::vector<double> m, signal::mel_weight_matrix(ints[0], ints[1], ints[2], lower, upper));
  Tensor& y = ctx.dst[0];
  if (static_cast<int64_t>(m.size()) != y.numel())
    return invalid_argument("MelWeightMatrix output has ", y.numel(), " elements, the inputs give ", m.size());
  KILN_ASSIGN_OR_RETURN(Tensor host, Tensor::empty(y.dtype(), y.dims()));
  for (int64_t i = 0; i < host.numel(); ++i) host.set(i, m[i]);
  // Queued after the stream's earlier work on y's memory; waited for, so `host` may go.
  KILN_RETURN_IF_ERROR(cuda::copy(host, y, &ctx.stream));
  return ctx.stream.synchronize();
}

Status float_signal(const OpCall& call) {
  if (call.inputs[0].dtype != DataType::kFloat32)
    return unsupported("the CUDA kernel computes float32 signals, got ", dtype_name(call.inputs[0].dtype));
  if (call.inputs.size() > 2 && call.inputs[2].present && call.inputs[2].dtype != DataType::kFloat32)
    return unsupported("the CUDA STFT takes a float32 window, got ", dtype_name(call.inputs[2].dtype));
  return Status::ok();
}

KILN_REGISTER_KERNEL(KernelImpl{.name = "cuda.dft",
                                .op = "DFT",
                                .backend = Backend::kCuda,
                                .priority = 10,
                                .supports = float_signal,
                                .create = stateless(run_dft)});
KILN_REGISTER_KERNEL(KernelImpl{.name = "cuda.stft",
                                .op = "STFT",
                                .backend = Backend::kCuda,
                                .priority = 10,
                                .supports = float_signal,
                                .create = stateless(run_stft)});
KILN_REGISTER_KERNEL(KernelImpl{.name = "cuda.mel_weight_matrix",
                                .op = "MelWeightMatrix",
                                .backend = Backend::kCuda,
                                .priority = 10,
                                .supports = [](const OpCall&) { return Status::ok(); },
                                .create = stateless(run_mel)});

}  // namespace
}  // namespace kiln
