#pragma once
// The optimizers' device side: the element rules of rules.h as CUDA kernels (one launch per parameter tensor; the
// kernel is a grid-stride loop over the tensor), deterministic reductions (norms) and the few copies the host needs.
// Implemented in device.cu when kiln is built with CUDA, else by device_none.cpp (every call: CUDA not built).
// Pointers are device pointers unless a name says host. Every call is checked and names what failed.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "kiln/device.h"
#include "kiln/status.h"
#include "kiln/stream.h"
#include "train/optim/rules.h"

namespace kiln::train::device {

/// Where device work goes: the CUDA device and its stream (a cudaStream_t; nullptr is the legacy default stream).
struct Launch {
  int device = 0;
  void* stream = nullptr;
};
inline Launch launch_on(Device device, Stream* stream) {
  return {device.index, stream != nullptr ? stream->native_handle() : nullptr};
}

/// rule(t, i) for i in [0, n), queued on the stream (nothing for n == 0).
Status apply(const rules::SgdScalars& k, const rules::Tensors& t, int64_t n, const Launch& on);
Status apply(const rules::AdagradScalars& k, const rules::Tensors& t, int64_t n, const Launch& on);
Status apply(const rules::RmspropScalars& k, const rules::Tensors& t, int64_t n, const Launch& on);
Status apply(const rules::AdadeltaScalars& k, const rules::Tensors& t, int64_t n, const Launch& on);
Status apply(const rules::AdamScalars& k, const rules::Tensors& t, int64_t n, const Launch& on);
Status apply(const rules::ClampGrad& rule, const rules::Tensors& t, int64_t n, const Launch& on);
Status apply(const rules::ScaleGrad& rule, const rules::Tensors& t, int64_t n, const Launch& on);
Status apply(const rules::AccumulateGrad& rule, const rules::Tensors& t, int64_t n, const Launch& on);
Status apply(const rules::FinishGrad& rule, const rules::Tensors& t, int64_t n, const Launch& on);

/// Sets n floats to `value`.
Status fill(float* x, int64_t n, float value, const Launch& on);

/// The reductions' fixed partition: a tensor of n elements is reduced by reduction_blocks(n) blocks (a function of n
/// only, never of the GPU), each writing one partial; the partials are then combined by one block in a fixed order.
/// So a norm is the same on every run and every GPU.
inline constexpr int64_t kReduceBlockElements = int64_t{1} << 12;
inline constexpr int64_t kMaxReduceBlocks = 1024;
inline int64_t reduction_blocks(int64_t n) {
  if (n <= 0) return 0;
  const int64_t b = (n + kReduceBlockElements - 1) / kReduceBlockElements;
  return b < kMaxReduceBlocks ? b : kMaxReduceBlocks;
}

enum class Reduction {
  kSumSquares,  ///< sum of x^2, in double
  kSumPow,      ///< sum of |x|^p, in double
  kMaxAbs,      ///< largest |x| (NaN when any element is NaN)
};
/// One tensor of a reduction: its elements and their count.
using Span = std::pair<const float*, int64_t>;
/// The reduction over all of `xs` together into `*result` (one double, device memory). `partials` holds at least the
/// sum of reduction_blocks(n) over `xs` doubles. Queued on the stream.
Status reduce(const std::vector<Span>& xs, Reduction kind, double p, double* partials, double* result,
              const Launch& on);

/// Multiplies n grads by `inv_scale` in place and sets *found (an int in device memory) to 1 when any result is inf
/// or NaN (it is left as it is otherwise: zero it first with fill_int).
Status unscale(float* g, int64_t n, float inv_scale, int* found, const Launch& on);
Status fill_int(int* x, int value, const Launch& on);

/// NovoGrad's step of one tensor, all on the device: the norm of the grad (t.g) -> the second moment (the scalars
/// `v`, `vmax`: t.s1, t.s2) -> the moment (t.s0) and the weights (t.p), with layer-wise update clipping when k.luc.
/// `workspace` holds at least reduction_blocks(n) + 4 doubles.
Status novograd(const rules::NovogradScalars& k, const rules::Tensors& t, int64_t n, double* workspace,
                const Launch& on);

/// Copies `bytes` between host and device memory (either way) on the stream and waits for the stream: what was
/// queued before is done when it returns.
Status copy_and_wait(void* dst, const void* src, size_t bytes, const Launch& on);
/// Waits for the work queued on the stream.
Status synchronize(const Launch& on);

}  // namespace kiln::train::device
