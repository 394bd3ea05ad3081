// Max and average pooling on CUDA through cuDNN (2-D and 3-D, symmetric padding, no dilation); a channels_last
// (2-D) Pooling runs on NHWC descriptors.
#include <limits>
#include <optional>

#include "kernels/cuda/cuda_common.h"
#include "ops/pooling/pooling.h"

namespace kiln {
namespace {

// A packed NHWC descriptor of `nhwc` ([N, H, W, C]).
Status set_nhwc(cuda::TensorDescriptor& d, DataType dt, const Dims& nhwc) {
  const std::optional<cudnnDataType_t> t = cuda::cudnn_dtype(dt);
  if (!t) return unsupported("cuDNN has no ", dtype_name(dt), " tensors");
  if (nhwc.rank() != 4) return internal_error("an NHWC descriptor of rank ", nhwc.rank());
  for (int i = 0; i < 4; ++i)
    if (nhwc[i] > std::numeric_limits<int>::max())
      return unsupported("cuDNN pooling takes dims below 2^31, not ", nhwc.to_string());
  return cuda::check(
      cudnnSetTensor4dDescriptor(d.get(), CUDNN_TENSOR_NHWC, *t, static_cast<int>(nhwc[0]), static_cast<int>(nhwc[3]),
                                 static_cast<int>(nhwc[1]), static_cast<int>(nhwc[2])),
      "cudnnSetTensor4dDescriptor (NHWC)");
}

Status check_geometry(const PoolingAttrs& a, const PoolingGeometry& g) {
  if (a.mode == PoolingMode::kLp) return unsupported("cuDNN has no Lp pooling");
  if (a.return_indices) return unsupported("cuDNN pooling does not return indices");
  if (g.spatial < 2 || g.spatial > 3) return unsupported("cuDNN pooling takes 2-D and 3-D windows");
  for (int i = 0; i < g.spatial; ++i) {
    if (g.dilation[i] != 1) return unsupported("cuDNN pooling has no dilation");
    if (g.pad_begin[i] != g.pad_end[i] || g.right_reach(i) > g.pad_end[i])
      return unsupported("cuDNN pooling needs symmetric padding and no ceil-mode overhang");
  }
  return Status::ok();
}

class CudnnPooling final : public Kernel {
 public:
  CudnnPooling() { cudnnCreatePoolingDescriptor(&pd_); }
  ~CudnnPooling() override { cudnnDestroyPoolingDescriptor(pd_); }

  Status run(KernelContext& ctx) override {
    const auto& a = ctx.attrs<PoolingAttrs>();
    const Tensor& x = ctx.src[0];
    Tensor& y = ctx.dst[0];
    if (y.numel() == 0) return Status::ok();  // cuDNN rejects empty tensors; there is nothing to compute
    KILN_ASSIGN_OR_RETURN(cudnnHandle_t h, cuda::cudnn_handle(ctx.stream));
    if (x.dims() != dims_) {
      KILN_ASSIGN_OR_RETURN(PoolingGeometry g, pooling_geometry(a, x.dims()));
      KILN_RETURN_IF_ERROR(check_geometry(a, g));
      std::vector<int> window, pad, stride;
      for (int i = 0; i < g.spatial; ++i) {
        window.push_back(static_cast<int>(g.kernel[i]));
        pad.push_back(static_cast<int>(g.pad_begin[i]));
        stride.push_back(static_cast<int>(g.stride[i]));
      }
      const cudnnPoolingMode_t mode = a.mode == PoolingMode::kMax ? CUDNN_POOLING_MAX
                                      : a.count_include_pad       ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                                  : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
      KILN_RETURN_IF_ERROR(cuda::check(cudnnSetPoolingNdDescriptor(pd_, mode, CUDNN_PROPAGATE_NAN, g.spatial,
                                                                   window.data(), pad.data(), stride.data()),
                                       "cudnnSetPoolingNdDescriptor"));
      if (a.channels_last) {
        KILN_RETURN_IF_ERROR(set_nhwc(xd_, x.dtype(), x.dims()));
        KILN_RETURN_IF_ERROR(set_nhwc(yd_, y.dtype(), y.dims()));
      } else {
        KILN_RETURN_IF_ERROR(xd_.set(x.dtype(), x.dims()));
        KILN_RETURN_IF_ERROR(yd_.set(y.dtype(), y.dims()));
      }
      dims_ = x.dims();
    }
    const float one = 1.f, zero = 0.f;
    return cuda::check(cudnnPoolingForward(h, pd_, &one, xd_.get(), x.raw(), &zero, yd_.get(), y.raw()),
                       "cudnnPoolingForward");
  }

 private:
  Dims dims_;
  cudnnPoolingDescriptor_t pd_ = nullptr;
  cuda::TensorDescriptor xd_, yd_;
};

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.cudnn.pooling",
    .op = "Pooling",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) -> Status {
      KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}));
      const auto& a = call.attrs_as<PoolingAttrs>();
      if (a.mode == PoolingMode::kLp) return unsupported("cuDNN has no Lp pooling");
      if (a.return_indices) return unsupported("cuDNN pooling does not return indices");
      if (!call.inputs[0].dims.is_static()) return Status::ok();
      KILN_ASSIGN_OR_RETURN(PoolingGeometry g, pooling_geometry(a, call.inputs[0].dims));
      return check_geometry(a, g);
    },
    .create = [](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<CudnnPooling>());
    },
});

}  // namespace
}  // namespace kiln
