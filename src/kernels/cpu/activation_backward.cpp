// CPU ActivationBackward: oneDNN's eltwise backward (from x) where it has the function, else an own parallel loop
// specialized per activation kind (the derivative inlined and vectorizable).
#include <optional>
#include <type_traits>

#include "core/parallel.h"
#include "kernels/common/indexing.h"
#include "kernels/cpu/activation_eltwise.h"
#include "kernels/ref/activation_grad.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

class OnednnActivationBackward final : public Kernel {
 public:
  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.src[1];
    return onednn::guard("eltwise backward", [&] {
      if (!prim_ || x.dims() != dims_) {
        float alpha, beta;
        const auto algo =
            *cpu::eltwise_algorithm(ctx.attrs<ActivationAttrs>(), cpu::EltwiseDirection::kBackward, alpha, beta);
        desc_ = onednn::plain_desc(x.dims(), x.dtype());
        const dnnl::eltwise_forward::desc fd(dnnl::prop_kind::forward_training, algo, desc_, alpha, beta);
        const dnnl::eltwise_forward::primitive_desc hint(fd, onednn::engine());
        const dnnl::eltwise_backward::desc bd(algo, desc_, desc_, alpha, beta);
        prim_ = dnnl::eltwise_backward(dnnl::eltwise_backward::primitive_desc(bd, onednn::engine(), hint));
        dims_ = x.dims();
      }
      prim_->execute(onednn::stream(), {{DNNL_ARG_SRC, onednn::memory(desc_, x)},
                                        {DNNL_ARG_DIFF_DST, onednn::memory(desc_, ctx.src[0])},
                                        {DNNL_ARG_DIFF_SRC, onednn::memory(desc_, ctx.dst[0])}});
      onednn::stream().wait();
    });
  }

 private:
  Dims dims_;
  dnnl::memory::desc desc_;
  std::optional<dnnl::eltwise_backward> prim_;
};

// Calls f(std::integral_constant<ActivationKind, kind>) so the derivative's switch folds away.
template <int K = 0, class F>
void with_kind(ActivationKind kind, F&& f) {
  if constexpr (K <= static_cast<int>(ActivationKind::kCelu)) {
    if (static_cast<int>(kind) == K) {
      f(std::integral_constant<ActivationKind, static_cast<ActivationKind>(K)>{});
      return;
    }
    with_kind<K + 1>(kind, f);
  }
}

constexpr int64_t kBlock = 4096;

Status run_loop(KernelContext& ctx) {
  const auto& a = ctx.attrs<ActivationAttrs>();
  const float* dy = ctx.src[0].data<float>();
  const float* x = ctx.src[1].data<float>();
  float* dx = ctx.dst[0].data<float>();
  const int64_t n = ctx.src[1].numel();
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  if (a.kind == ActivationKind::kPRelu) {
    const BroadcastIndexer slope_at(ctx.src[2].dims(), ctx.src[1].dims());
    const float* slope = ctx.src[2].data<float>();
    float* ds = ctx.dst[1].data<float>();
    parallel_for(blocks, 4, [&](int64_t b) {
      for (int64_t i = b * kBlock, end = std::min(n, i + kBlock); i < end; ++i) {
        dx[i] = dy[i] * (x[i] >= 0.f ? 1.f : slope[slope_at(i)]);
        ds[i] = dy[i] * ref::prelu_slope_derivative(x[i]);
      }
    });
    return Status::ok();
  }
  with_kind(a.kind, [&](auto kind) {
    const float alpha = a.alpha, beta = a.beta;
    parallel_for(blocks, 4, [&](int64_t b) {
      for (int64_t i = b * kBlock, end = std::min(n, i + kBlock); i < end; ++i)
        dx[i] = dy[i] * ref::activation_derivative(decltype(kind)::value, alpha, beta, x[i]);
    });
  });
  return Status::ok();
}

KILN_REGISTER_KERNEL(cpu::onednn_activation_impl("cpu.onednn.activation_backward", "ActivationBackward",
                                                 cpu::EltwiseDirection::kBackward,
                                                 [](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
                                                   return std::unique_ptr<Kernel>(
                                                       std::make_unique<OnednnActivationBackward>());
                                                 }));
KILN_REGISTER_KERNEL(cpu::loop_activation_impl("cpu.activation_backward", "ActivationBackward", run_loop));

}  // namespace
}  // namespace kiln
