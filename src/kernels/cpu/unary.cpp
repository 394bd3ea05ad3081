// CPU Unary: oneDNN eltwise for the float32 functions it has, own parallel loops for the rest
// (all dtypes; float16/bfloat16 compute in float).
#include "kernels/ref/unary.h"
#include "core/parallel.h"
#include "kernels/common/elementwise_broadcast.h"
#include "kernels/cpu/onednn.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

std::optional<dnnl::algorithm> eltwise_algorithm(UnaryOp op, float& alpha, float& beta) {
  using alg = dnnl::algorithm;
  alpha = 0.f;
  beta = 0.f;
  switch (op) {
    case UnaryOp::kExp: return alg::eltwise_exp;
    // No eltwise_log: oneDNN 2.6's is off by ~1e-6 absolute near 1 (log(1) = -1.4e-6), the own loop is exact.
    case UnaryOp::kSqrt: return alg::eltwise_sqrt;
    case UnaryOp::kAbs: return alg::eltwise_abs;
    case UnaryOp::kRound: return alg::eltwise_round;
    case UnaryOp::kNeg: alpha = -1.f; return alg::eltwise_linear;
    case UnaryOp::kReciprocal:
      alpha = 1.f;
      beta = -1.f;
      return alg::eltwise_pow;
    default: return std::nullopt;
  }
}

class OnednnUnary final : public Kernel {
 public:
  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.src[0];
    if (x.numel() == 0) return Status::ok();
    return onednn::guard("eltwise", [&] {
      if (!prim_ || x.dims() != dims_) {
        float alpha, beta;
        const auto algo = *eltwise_algorithm(ctx.attrs<UnaryAttrs>().op, alpha, beta);
        desc_ = onednn::plain_desc(x.dims(), x.dtype());
        dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, algo, desc_, alpha, beta);
        prim_ = dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(d, onednn::engine()));
        dims_ = x.dims();
      }
      prim_->execute(onednn::stream(),
                     {{DNNL_ARG_SRC, onednn::memory(desc_, x)}, {DNNL_ARG_DST, onednn::memory(desc_, ctx.dst[0])}});
      onednn::stream().wait();
      if (ctx.attrs<UnaryAttrs>().op == UnaryOp::kExp) {  // oneDNN's exp turns NaN into inf
        const float* src = x.data<float>();
        float* dst = ctx.dst[0].data<float>();
        ew::for_each_range(x.numel(), [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) dst[i] = src[i] != src[i] ? src[i] : dst[i];
        });
      }
    });
  }

 private:
  Dims dims_;
  dnnl::memory::desc desc_;
  std::optional<dnnl::eltwise_forward> prim_;
};

Status run_loop(KernelContext& ctx) {
  const auto& attrs = ctx.attrs<UnaryAttrs>();
  const Tensor& x = ctx.src[0];
  Tensor& y = ctx.dst[0];
  bool done = false;
  ref::dispatch_unary_op(attrs.op, [&](auto op) {
    constexpr UnaryOp kOp = decltype(op)::value;
    ew::dispatch_dtype(x.dtype(), [&](auto tx) {
      using T = typename decltype(tx)::type;
      using CT = ew::compute_t<T>;
      if constexpr (ref::unary_accepts<kOp, CT>()) {
        using R = std::conditional_t<std::is_same_v<decltype(ref::unary<kOp>(CT{})), bool>, bool, T>;
        const T* src = x.data<T>();
        R* dst = y.data<R>();
        const bool pos = attrs.detect_positive, neg = attrs.detect_negative;
        ew::for_each_range(x.numel(), [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) dst[i] = ew::store<R>(ref::unary<kOp>(ew::load(src[i]), pos, neg));
        });
        done = true;
      }
    });
  });
  if (!done) return unsupported("cpu.unary has no ", enum_name(attrs.op), " for ", dtype_name(x.dtype()));
  return Status::ok();
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.onednn.unary",
    .op = "Unary",
    .backend = Backend::kCpu,
    .priority = 10,
    .supports = [](const OpCall& call) -> Status {
      KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32}));
      float alpha, beta;
      const UnaryOp op = call.attrs_as<UnaryAttrs>().op;
      if (!eltwise_algorithm(op, alpha, beta)) return unsupported("oneDNN has no eltwise for ", enum_name(op));
      return Status::ok();
    },
    .create = [](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<OnednnUnary>());
    },
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.unary",
    .op = "Unary",
    .backend = Backend::kCpu,
    .priority = 5,
    .supports =
        [](const OpCall& call) {
          return require_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kInt8,
                                       DataType::kUInt8, DataType::kInt32, DataType::kInt64, DataType::kBool});
        },
    .create = stateless(run_loop),
});

}  // namespace
}  // namespace kiln
