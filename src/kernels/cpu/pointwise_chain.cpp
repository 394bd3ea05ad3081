// CPU PointwiseChain: the elements in blocks that stay in the L1 cache, OpenMP over blocks; each block goes through
// every step (one loop per step over the block, the step's op fixed outside the loop) before the next block.
#include <algorithm>
#include <vector>

#include "core/parallel.h"
#include "kernels/common/indexing.h"
#include "kernels/ref/pointwise_chain.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

constexpr int64_t kBlock = 2048;

// How an operand tensor is read: contiguous with x, repeating its `period` elements (a suffix of x's dims), or
// through a general broadcast.
struct OperandReader {
  const float* data = nullptr;
  int64_t period = 0;  // 0: general broadcast
  std::optional<BroadcastIndexer> at;

  OperandReader(const Tensor& t, const Dims& dims) : data(t.data<float>()) {
    const Dims& d = t.dims();
    int lead = 0;
    while (lead < d.rank() && d[lead] == 1) ++lead;
    bool suffix = d.rank() - lead <= dims.rank();
    for (int i = lead; suffix && i < d.rank(); ++i) suffix = d[i] == dims[dims.rank() - d.rank() + i];
    if (suffix)
      period = std::max<int64_t>(1, t.numel());
    else
      at.emplace(d, dims);
  }
  // Elements [begin, begin + n) as seen by x: a pointer into the tensor or into `tmp`.
  const float* block(int64_t begin, int64_t n, float* tmp) const {
    if (period == 0) {
      for (int64_t i = 0; i < n; ++i) tmp[i] = data[(*at)(begin + i)];
      return tmp;
    }
    const int64_t start = begin % period;
    if (start + n <= period) return data + start;
    for (int64_t i = 0; i < n; ++i) tmp[i] = data[(begin + i) % period];
    return tmp;
  }
};

template <ElementWiseOp Op>
void binary_loop(float* v, int64_t n, const float* b, float scalar, bool swapped) {
  if (b && swapped)
    for (int64_t i = 0; i < n; ++i) v[i] = ref::binary<Op, float>(b[i], v[i], false);
  else if (b)
    for (int64_t i = 0; i < n; ++i) v[i] = ref::binary<Op, float>(v[i], b[i], false);
  else if (swapped)
    for (int64_t i = 0; i < n; ++i) v[i] = ref::binary<Op, float>(scalar, v[i], false);
  else
    for (int64_t i = 0; i < n; ++i) v[i] = ref::binary<Op, float>(v[i], scalar, false);
}

void binary_block(ElementWiseOp op, float* v, int64_t n, const float* b, float scalar, bool swapped) {
  switch (op) {
    case ElementWiseOp::kSum: return binary_loop<ElementWiseOp::kSum>(v, n, b, scalar, swapped);
    case ElementWiseOp::kSub: return binary_loop<ElementWiseOp::kSub>(v, n, b, scalar, swapped);
    case ElementWiseOp::kProd: return binary_loop<ElementWiseOp::kProd>(v, n, b, scalar, swapped);
    case ElementWiseOp::kDiv: return binary_loop<ElementWiseOp::kDiv>(v, n, b, scalar, swapped);
    case ElementWiseOp::kMax: return binary_loop<ElementWiseOp::kMax>(v, n, b, scalar, swapped);
    case ElementWiseOp::kMin: return binary_loop<ElementWiseOp::kMin>(v, n, b, scalar, swapped);
    case ElementWiseOp::kPow: return binary_loop<ElementWiseOp::kPow>(v, n, b, scalar, swapped);
    default: return;
  }
}

void unary_block(UnaryOp op, float* v, int64_t n) {
  ref::dispatch_unary_op(op, [&](auto o) {
    constexpr UnaryOp kOp = decltype(o)::value;
    if constexpr (ref::unary_accepts<kOp, float>() && kOp != UnaryOp::kIsNan && kOp != UnaryOp::kIsInf)
      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(ref::unary<kOp, float>(v[i]));
  });
}

void activation_block(const PointwiseStep& s, float* v, int64_t n) {
  const auto kind = static_cast<ActivationKind>(s.op);
  if (kind == ActivationKind::kRelu) {
    for (int64_t i = 0; i < n; ++i) v[i] = v[i] > 0.f ? v[i] : 0.f;
    return;
  }
  for (int64_t i = 0; i < n; ++i) v[i] = ref::activation(kind, s.alpha, s.beta, v[i]);
}

Status run_pointwise_chain(KernelContext& ctx) {
  const auto& a = ctx.attrs<PointwiseChainAttrs>();
  std::vector<PointwiseStep> steps;
  for (size_t i = 0; i < a.size(); ++i) steps.push_back(a.step(i));
  const Dims& dims = ctx.src[0].dims();
  std::vector<OperandReader> readers;
  for (const Tensor& t : ctx.src) readers.emplace_back(t, dims);
  const float* x = ctx.src[0].data<float>();
  float* y = ctx.dst[0].data<float>();
  const int64_t total = ctx.dst[0].numel();
  const int64_t blocks = (total + kBlock - 1) / kBlock;
  parallel_for(blocks, grain_for(kBlock * static_cast<int64_t>(steps.size())), [&](int64_t blk) {
    const int64_t begin = blk * kBlock, n = std::min(kBlock, total - begin);
    float* v = y + begin;
    std::copy(x + begin, x + begin + n, v);
    alignas(64) float tmp[kBlock];
    for (const PointwiseStep& s : steps) {
      switch (s.kind) {
        case PointwiseStepKind::kActivation: activation_block(s, v, n); break;
        case PointwiseStepKind::kUnary: unary_block(static_cast<UnaryOp>(s.op), v, n); break;
        case PointwiseStepKind::kBinary: {
          const float* b = s.operand == kOperandRunning ? v
                           : s.operand >= 0             ? readers[static_cast<size_t>(s.operand)].block(begin, n, tmp)
                                                        : nullptr;
          binary_block(static_cast<ElementWiseOp>(s.op), v, n, b, s.scalar, s.swapped);
          break;
        }
      }
    }
  });
  return Status::ok();
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.pointwise_chain",
    .op = "PointwiseChain",
    .backend = Backend::kCpu,
    .priority = 5,
    .supports = [](const OpCall& call) { return require_dtypes(call, {DataType::kFloat32}); },
    .create = stateless(run_pointwise_chain),
});

}  // namespace
}  // namespace kiln
