// Reference PoolingBackward: one (n, c) plane after another.
#include "kernels/ref/pooling_backward.h"

#include "kernels/registry.h"

namespace kiln {
namespace {

Status run_pooling_backward(KernelContext& ctx) {
  const auto& a = ctx.attrs<PoolingAttrs>();
  KILN_ASSIGN_OR_RETURN(PoolingGeometry g, pooling_geometry(a, ctx.src[1].dims()));
  int64_t in_plane = 1, out_plane = 1;
  for (int d = 0; d < g.spatial; ++d) {
    in_plane *= g.in[d];
    out_plane *= g.out[d];
  }
  const float* dy = ctx.src[0].data<float>();
  const float* x = ctx.src[1].data<float>();
  float* dx = ctx.dst[0].data<float>();
  for (int64_t nc = 0; nc < g.batch * g.channels; ++nc)
    ref::pooling_backward_plane(a, g, x + nc * in_plane, dy + nc * out_plane, dx + nc * in_plane);
  return Status::ok();
}

KILN_REGISTER_KERNEL(with_float32_compute({
    .name = "ref.pooling_backward",
    .op = "PoolingBackward",
    .backend = Backend::kRef,
    .priority = 0,
    .supports = [](const OpCall& call) -> Status {
      KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32}));
      if (call.attrs_as<PoolingAttrs>().channels_last) return unsupported("PoolingBackward is NCHW only");
      return Status::ok();
    },
    .create = stateless(run_pooling_backward),
}));

}  // namespace
}  // namespace kiln
