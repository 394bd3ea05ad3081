// Convolution on CUDA through cuDNN (2-D and 3-D; 1-D as 2-D with height 1); bias through cudnnAddTensor.
#include "ops/convolution/convolution.h"
#include "kernels/cuda/cuda_common.h"

namespace kiln {
namespace {

class FilterDescriptor {
 public:
  FilterDescriptor() { cudnnCreateFilterDescriptor(&d_); }
  ~FilterDescriptor() { cudnnDestroyFilterDescriptor(d_); }
  cudnnFilterDescriptor_t get() const { return d_; }

 private:
  cudnnFilterDescriptor_t d_;
};

class ConvDescriptor {
 public:
  ConvDescriptor() { cudnnCreateConvolutionDescriptor(&d_); }
  ~ConvDescriptor() { cudnnDestroyConvolutionDescriptor(d_); }
  cudnnConvolutionDescriptor_t get() const { return d_; }

 private:
  cudnnConvolutionDescriptor_t d_;
};

// x [N, C, spatial...] -> dims cuDNN takes: 1-D problems gain a unit height.
Dims lift_1d(const Dims& d) {
  if (d.rank() != 3) return d;
  return Dims{d[0], d[1], 1, d[2]};
}

Status check_window(const ConvWindow& w) {
  for (int i = 0; i < w.rank(); ++i)
    if (w.pads_begin[i] != w.pads_end[i]) return unsupported("cuDNN needs symmetric padding");
  return Status::ok();
}

class CudnnConvolution final : public Kernel {
 public:
  Status run(KernelContext& ctx) override {
    const auto& a = ctx.attrs<ConvolutionAttrs>();
    const Tensor& x = ctx.src[0];
    const Tensor& w = ctx.src[1];
    Tensor& y = ctx.dst[0];
    if (y.numel() == 0) return Status::ok();  // cuDNN rejects empty tensors; there is nothing to compute
    KILN_ASSIGN_OR_RETURN(cudnnHandle_t h, cuda::cudnn_handle(ctx.stream));
    if (x.dims() != dims_ || w.dims() != wdims_) KILN_RETURN_IF_ERROR(prepare(ctx, a, x, w, y, h));
    void* workspace = nullptr;
    Tensor ws;
    if (workspace_bytes_ > 0) {
      KILN_ASSIGN_OR_RETURN(ws, Tensor::empty(DataType::kUInt8, {static_cast<int64_t>(workspace_bytes_)}, ctx.allocator,
                                              "conv workspace"));
      workspace = ws.raw();
    }
    const float one = 1.f, zero = 0.f;
    KILN_RETURN_IF_ERROR(
        cuda::check(cudnnConvolutionForward(h, &one, xd_.get(), x.raw(), wd_.get(), w.raw(), cd_.get(), algo_,
                                            workspace, workspace_bytes_, &zero, yd_.get(), y.raw()),
                    "cudnnConvolutionForward"));
    if (ctx.src.size() > 2 && ctx.src[2].defined()) {
      cuda::TensorDescriptor bd;
      Dims bias_dims = Dims::of_rank(lift_1d(y.dims()).rank());
      bias_dims[1] = y.dims()[1];
      KILN_RETURN_IF_ERROR(bd.set(y.dtype(), bias_dims));
      KILN_RETURN_IF_ERROR(
          cuda::check(cudnnAddTensor(h, &one, bd.get(), ctx.src[2].raw(), &one, yd_.get(), y.raw()), "cudnnAddTensor"));
    }
    return Status::ok();
  }

 private:
  Status prepare(KernelContext& ctx, const ConvolutionAttrs& a, const Tensor& x, const Tensor& w, const Tensor& y,
                 cudnnHandle_t h) {
    KILN_ASSIGN_OR_RETURN(ConvWindow win, convolution_window(a, x.dims(), w.dims()));
    KILN_RETURN_IF_ERROR(check_window(win));
    const DataType dt = x.dtype();
    KILN_RETURN_IF_ERROR(xd_.set(dt, lift_1d(x.dims())));
    KILN_RETURN_IF_ERROR(yd_.set(dt, lift_1d(y.dims())));
    const Dims wl = lift_1d(w.dims());
    std::vector<int> wdim(wl.begin(), wl.end());
    KILN_RETURN_IF_ERROR(cuda::check(cudnnSetFilterNdDescriptor(wd_.get(), *cuda::cudnn_dtype(dt), CUDNN_TENSOR_NCHW,
                                                                static_cast<int>(wdim.size()), wdim.data()),
                                     "cudnnSetFilterNdDescriptor"));
    std::vector<int> pad, stride, dil;
    if (win.rank() == 1) {
      pad.push_back(0), stride.push_back(1), dil.push_back(1);
    }
    for (int i = 0; i < win.rank(); ++i) {
      pad.push_back(static_cast<int>(win.pads_begin[i]));
      stride.push_back(static_cast<int>(win.strides[i]));
      dil.push_back(static_cast<int>(win.dilations[i]));
    }
    KILN_RETURN_IF_ERROR(
        cuda::check(cudnnSetConvolutionNdDescriptor(cd_.get(), static_cast<int>(pad.size()), pad.data(), stride.data(),
                                                    dil.data(), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                    "cudnnSetConvolutionNdDescriptor"));
    KILN_RETURN_IF_ERROR(cuda::check(cudnnSetConvolutionGroupCount(cd_.get(), static_cast<int>(a.group)),
                                     "cudnnSetConvolutionGroupCount"));
    // float32 stays exact float32 (no TF32); half types may use tensor cores.
    KILN_RETURN_IF_ERROR(cuda::check(
        cudnnSetConvolutionMathType(cd_.get(), dt == DataType::kFloat32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH),
        "cudnnSetConvolutionMathType"));
    int found = 0;
    cudnnConvolutionFwdAlgoPerf_t perf[8];
    KILN_RETURN_IF_ERROR(cuda::check(
        cudnnGetConvolutionForwardAlgorithm_v7(h, xd_.get(), wd_.get(), cd_.get(), yd_.get(), 8, &found, perf),
        "cudnnGetConvolutionForwardAlgorithm_v7"));
    bool chosen = false;
    for (int i = 0; i < found && !chosen; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
      algo_ = perf[i].algo;
      workspace_bytes_ = perf[i].memory;
      chosen = true;
    }
    if (!chosen) return unsupported("cuDNN offers no convolution algorithm for this problem");
    dims_ = x.dims();
    wdims_ = w.dims();
    (void)ctx;
    return Status::ok();
  }

  Dims dims_, wdims_;
  cuda::TensorDescriptor xd_, yd_;
  FilterDescriptor wd_;
  ConvDescriptor cd_;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspace_bytes_ = 0;
};

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.cudnn.convolution",
    .op = "Convolution",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) -> Status {
      KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}));
      if (has_conv_epilogue(call.attrs_as<ConvolutionAttrs>(), call.has_input(3)))
        return unsupported("the cuDNN convolution has no epilogue (residual or fused activation)");
      const int r = call.inputs[0].dims.rank();
      if (r < 3 || r > 5) return unsupported("cuDNN convolution takes 1-D to 3-D problems");
      if (!call.inputs[0].dims.is_static() || !call.inputs[1].dims.is_static()) return Status::ok();
      KILN_ASSIGN_OR_RETURN(ConvWindow win, convolution_window(call.attrs_as<ConvolutionAttrs>(), call.inputs[0].dims,
                                                               call.inputs[1].dims));
      return check_window(win);
    },
    .create = [](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<CudnnConvolution>());
    },
});

}  // namespace
}  // namespace kiln
