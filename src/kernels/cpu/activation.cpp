// CPU activations: oneDNN eltwise where it has the function, own parallel loop otherwise.
#include "kernels/ref/activation.h"
#include "core/parallel.h"
#include "kernels/common/indexing.h"
#include "kernels/cpu/activation_eltwise.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

class OnednnActivation final : public Kernel {
 public:
  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.src[0];
    return onednn::guard("eltwise", [&] {
      if (!prim_ || x.dims() != dims_) {
        float alpha, beta;
        const auto algo =
            *cpu::eltwise_algorithm(ctx.attrs<ActivationAttrs>(), cpu::EltwiseDirection::kForward, alpha, beta);
        desc_ = onednn::plain_desc(x.dims(), x.dtype());
        dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, algo, desc_, alpha, beta);
        prim_ = dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(d, onednn::engine()));
        dims_ = x.dims();
      }
      prim_->execute(onednn::stream(),
                     {{DNNL_ARG_SRC, onednn::memory(desc_, x)}, {DNNL_ARG_DST, onednn::memory(desc_, ctx.dst[0])}});
      onednn::stream().wait();
    });
  }

 private:
  Dims dims_;
  dnnl::memory::desc desc_;
  std::optional<dnnl::eltwise_forward> prim_;
};

Status run_loop(KernelContext& ctx) {
  const auto& a = ctx.attrs<ActivationAttrs>();
  const float* src = ctx.src[0].data<float>();
  float* dst = ctx.dst[0].data<float>();
  const int64_t n = ctx.src[0].numel();
  if (a.kind == ActivationKind::kPRelu) {
    const BroadcastIndexer slope_at(ctx.src[1].dims(), ctx.src[0].dims());
    const float* slope = ctx.src[1].data<float>();
    parallel_for(n, 1 << 14, [&](int64_t i) { dst[i] = ref::activation(a, src[i], slope[slope_at(i)]); });
  } else {
    parallel_for(n, 1 << 14, [&](int64_t i) { dst[i] = ref::activation(a, src[i]); });
  }
  return Status::ok();
}

KILN_REGISTER_KERNEL(cpu::onednn_activation_impl("cpu.onednn.activation", "Activation", cpu::EltwiseDirection::kForward,
                                                 [](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
                                                   return std::unique_ptr<Kernel>(std::make_unique<OnednnActivation>());
                                                 }));
KILN_REGISTER_KERNEL(cpu::loop_activation_impl("cpu.activation", "Activation", run_loop));

}  // namespace
}  // namespace kiln
