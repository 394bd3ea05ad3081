// CPU MLP: layer after layer with a oneDNN matmul whose bias and activation are part of the primitive (post-op);
// the intermediate rows live in the thread's scratch buffers (two, used in turn), only the last layer writes y.
#include <unordered_map>
#include <vector>

#include "kernels/cpu/onednn.h"
#include "kernels/cpu/onednn_epilogue.h"
#include "kernels/registry.h"
#include "ops/mlp/mlp.h"

namespace kiln {
namespace {

// Row-major [rows, cols] (or, transposed, stored as [cols, rows]).
dnnl::memory::desc matrix(int64_t rows, int64_t cols, bool transposed = false) {
  return dnnl::memory::desc({rows, cols}, dnnl::memory::data_type::f32,
                            transposed ? dnnl::memory::dims{1, rows} : dnnl::memory::dims{cols, 1});
}

class OnednnMlp final : public Kernel {
 public:
  size_t workspace_bytes() const override { return workspace_; }

  Status run(KernelContext& ctx) override {
    const auto& attrs = ctx.attrs<MlpAttrs>();
    const Tensor& x = ctx.src[0];
    Tensor& y = ctx.dst[0];
    const int64_t in0 = x.dims()[x.rank() - 1];
    if (y.numel() == 0) return Status::ok();
    const int64_t rows = y.numel() / y.dims()[y.rank() - 1];
    if (in0 == 0) return unsupported("cpu.onednn.mlp: the input has no features");  // supports() rejects it
    return onednn::guard("MLP matmul", [&] {
      if (layers_.empty() || rows != rows_) build(attrs, ctx, rows);
      const void* src = x.raw();
      for (size_t l = 0; l < layers_.size(); ++l) {
        Layer& layer = layers_[l];
        const bool last = l + 1 == layers_.size();
        void* dst = last ? y.raw() : onednn::scratch(layer.dst.get_size(), static_cast<int>(l % 2));
        layer.prim.execute(onednn::stream(),
                           {{DNNL_ARG_SRC, dnnl::memory(layer.src, onednn::engine(), const_cast<void*>(src))},
                            {DNNL_ARG_WEIGHTS, onednn::memory(layer.wei, ctx.src[1 + 2 * l])},
                            {DNNL_ARG_BIAS, onednn::memory(layer.bias, ctx.src[2 + 2 * l])},
                            {DNNL_ARG_DST, dnnl::memory(layer.dst, onednn::engine(), dst)}});
        src = dst;
      }
      onednn::stream().wait();
    });
  }

 private:
  struct Layer {
    dnnl::memory::desc src, wei, bias, dst;
    dnnl::matmul prim;
  };

  void build(const MlpAttrs& attrs, const KernelContext& ctx, int64_t rows) {
    layers_.clear();
    workspace_ = 0;
    for (int l = 0; l < attrs.layers(); ++l) {
      const Dims& w = ctx.src[1 + 2 * l].dims();
      const int64_t outs = w[0], k = w[1];
      Layer layer{matrix(rows, k), matrix(k, outs, /*transposed=*/true), matrix(1, outs), matrix(rows, outs), {}};
      dnnl::post_ops ops;
      onednn::append_fused_activation(ops, attrs.activation(l));
      dnnl::primitive_attr pattr;
      pattr.set_post_ops(ops);
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(layer.src, layer.wei, layer.bias, layer.dst), pattr,
                                            onednn::engine());
      layer.prim = dnnl::matmul(pd);
      if (l + 1 < attrs.layers()) workspace_ += layer.dst.get_size();
      layers_.push_back(std::move(layer));
    }
    rows_ = rows;
  }

  std::vector<Layer> layers_;
  int64_t rows_ = -1;
  size_t workspace_ = 0;
};

Status onednn_mlp_supports(const OpCall& call) {
  KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32}));
  const auto& attrs = call.attrs_as<MlpAttrs>();
  for (int l = 0; l < attrs.layers(); ++l) {
    const Dims& w = call.inputs[1 + 2 * l].dims;
    if (!w.is_static() || w.numel() == 0)
      return unsupported("cpu.onednn.mlp needs static, non-empty weights (layer ", l, " has ", w.to_string(), ")");
    KILN_RETURN_IF_ERROR(onednn::supports_fused_activation(attrs.activation(l)));
  }
  return Status::ok();
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cpu.onednn.mlp",
    .op = "MLP",
    .backend = Backend::kCpu,
    .priority = 10,
    .supports = onednn_mlp_supports,
    .create = [](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<OnednnMlp>());
    },
});

}  // namespace
}  // namespace kiln
