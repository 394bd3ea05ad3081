// Reference PointwiseChain: every element through every step in turn (float32, as the separate nodes computed).
#include "kernels/ref/pointwise_chain.h"

#include <vector>

#include "kernels/common/indexing.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

Status run_pointwise_chain(KernelContext& ctx) {
  const auto& a = ctx.attrs<PointwiseChainAttrs>();
  std::vector<PointwiseStep> steps;
  for (size_t i = 0; i < a.size(); ++i) steps.push_back(a.step(i));
  const Dims& dims = ctx.src[0].dims();
  std::vector<BroadcastIndexer> at;
  for (const Tensor& t : ctx.src) at.emplace_back(t.dims(), dims);
  float* y = ctx.dst[0].data<float>();
  for (int64_t i = 0; i < ctx.dst[0].numel(); ++i) {
    float v = ctx.src[0].data<float>()[i];
    for (const PointwiseStep& s : steps) {
      float operand = s.operand == kOperandScalar ? s.scalar : s.operand == kOperandRunning ? v : 0.f;
      if (s.operand >= 0) operand = ctx.src[static_cast<size_t>(s.operand)].data<float>()[at[s.operand](i)];
      v = ref::apply_step(s, v, operand);
    }
    y[i] = v;
  }
  return Status::ok();
}

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.pointwise_chain",
    .op = "PointwiseChain",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = [](const OpCall& call) { return require_dtypes(call, {DataType::kFloat32}); },
    .create = stateless(run_pointwise_chain),
}));

}  // namespace
}  // namespace kiln
