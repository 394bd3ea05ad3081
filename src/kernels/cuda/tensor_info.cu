// CUDA Shape and Size: the values come from x's dims on the host and reach the device output as kernel arguments
// (one tiny launch, no copy from host memory: it stays legal inside a captured CUDA graph). x's data is never read.
#include <cstdint>

#include "kernels/cuda/cuda_common.h"
#include "ops/tensor/tensor_info.h"

namespace kiln {
namespace {

struct Values {
  int64_t v[kMaxRank] = {};
  int count = 0;
};

__global__ void write_values_kernel(Values values, int64_t* y) {
  if (static_cast<int>(threadIdx.x) < values.count) y[threadIdx.x] = values.v[threadIdx.x];
}

Status write_values(KernelContext& ctx, const Values& values) {
  Tensor& y = ctx.dst[0];
  if (y.numel() != values.count)
    return internal_error(ctx.call.schema->name, ": output ", y.dims().to_string(), " does not hold ", values.count,
                          " values");
  if (values.count == 0) return Status::ok();
  write_values_kernel<<<1, kMaxRank, 0, cuda::native(ctx.stream)>>>(values, y.data<int64_t>());
  return cuda::check(cudaGetLastError(), "Shape/Size kernel launch");
}

Status run_shape(KernelContext& ctx) {
  const Dims& dims = ctx.src[0].dims();
  auto [start, end] = shape_range(ctx.attrs<ShapeAttrs>(), dims.rank());
  Values values;
  for (int i = start; i < end; ++i) values.v[values.count++] = dims[i];
  return write_values(ctx, values);
}

Status run_size(KernelContext& ctx) {
  Values values;
  values.v[values.count++] = ctx.src[0].numel();
  return write_values(ctx, values);
}

// Only x's dims are read; strings live on the host.
Status any_dtype(const OpCall& call) {
  if (call.inputs[0].dtype == DataType::kString) return unsupported("CUDA tensors hold no strings");
  return Status::ok();
}

KILN_REGISTER_KERNEL(KernelImpl{.name = "cuda.shape",
                                .op = "Shape",
                                .backend = Backend::kCuda,
                                .priority = 10,
                                .supports = any_dtype,
                                .create = stateless(run_shape)});
KILN_REGISTER_KERNEL(KernelImpl{.name = "cuda.size",
                                .op = "Size",
                                .backend = Backend::kCuda,
                                .priority = 10,
                                .supports = any_dtype,
                                .create = stateless(run_size)});

}  // namespace
}  // namespace kiln
