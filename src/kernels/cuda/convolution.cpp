// Convolution and Deconvolution on CUDA through cuDNN (2-D and 3-D; 1-D as 2-D with height 1); the Convolution with
// the optimizer's epilogue y = act(conv(x, w) + b + residual).
//
// Tactics are cuDNN's forward algorithms, as cudnnGetConvolutionForwardAlgorithm_v7 offers them for the problem, named
// by the algorithm and its math type: "implicit_precomp_gemm", "winograd_nonfused+tensor_op", ... Float32 runs with FMA
// math (exact float32) unless the builder allows TF32: then the algorithms the heuristic offers with CUDNN_DEFAULT_MATH
// (which lets cuDNN round float32 inputs to TF32 on tensor cores) are tactics too, named with a "+tf32" suffix
// ("implicit_precomp_gemm+tf32", "implicit_precomp_gemm+fused+tf32"). The names stay stable across cuDNN releases and
// heuristic orders, so a timing-cache entry keeps meaning one algorithm. A "+fused" variant computes bias, residual and
// ReLU (or no activation) in one cudnnConvolutionBiasActivationForward call; it is offered only where cuDNN documents
// that call for the problem: the implicit precomputed GEMM algorithm (the one the identity form requires), a bias, ReLU
// or no activation, float32 or float16. Every other variant runs the convolution, then kiln's epilogue kernel adds the
// bias and the residual and applies any activation in one elementwise pass on the same stream. The default (empty)
// tactic is the heuristic's first algorithm with kiln's epilogue. `run` uses exactly the algorithm of its tactic:
// when cuDNN no longer offers it for the shapes seen, the run fails, naming the tactic.
//
// A channels_last Convolution (2-D; the layout-nhwc pass makes them) runs on NHWC descriptors: x [N, H, W, C], the
// filter [M, kH, kW, C/G] in cuDNN's NHWC filter format, the residual and y [N, Ho, Wo, M], where cuDNN's float16 and
// bfloat16 tensor-core kernels want their data. Its tactics are what the heuristic offers for that problem.
#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/cuda_runtime.h"
#include "kernels/cuda/conv_epilogue.h"
#include "kernels/cuda/conv_pad.h"
#include "kernels/cuda/cublaslt_gemm.h"
#include "kernels/cuda/cuda_common.h"
#include "ops/convolution/convolution.h"

namespace kiln {
namespace {

constexpr const char* kImplName = "cuda.cudnn.convolution";
constexpr int64_t kMaxCudnnCount = std::numeric_limits<int32_t>::max();

// A cuDNN descriptor that frees itself (Create and Destroy: cuDNN's functions for its type).
template <class D, cudnnStatus_t (*Create)(D*), cudnnStatus_t (*Destroy)(D)>
class Descriptor {
 public:
  Descriptor() { Create(&d_); }
  ~Descriptor() { Destroy(d_); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  D get() const { return d_; }

 private:
  D d_ = nullptr;
};

using FilterDescriptor = Descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDescriptor =
    Descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;
using ActivationDescriptor =
    Descriptor<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor, cudnnDestroyActivationDescriptor>;

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

int as_int(int64_t v) { return static_cast<int>(v); }

// A packed NHWC descriptor of `nhwc` ([N, H, W, C]).
Status set_nhwc(cuda::TensorDescriptor& d, DataType dt, const Dims& nhwc) {
  const std::optional<cudnnDataType_t> t = cuda::cudnn_dtype(dt);
  if (!t) return unsupported("cuDNN has no ", dtype_name(dt), " tensors");
  if (nhwc.rank() != 4) return internal_error("an NHWC descriptor of rank ", nhwc.rank());
  return cuda::check(cudnnSetTensor4dDescriptor(d.get(), CUDNN_TENSOR_NHWC, *t, as_int(nhwc[0]), as_int(nhwc[3]),
                                                as_int(nhwc[1]), as_int(nhwc[2])),
                     "cudnnSetTensor4dDescriptor (NHWC)");
}

// ---------------------------------------------------------------------------------------------
// Tactics: a cuDNN algorithm by its name, and the math type it runs with

template <class Algo>
struct AlgoName {
  Algo algo;
  const char* name;
};

constexpr std::array<AlgoName<cudnnConvolutionFwdAlgo_t>, 8> kFwdAlgos = {{
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, "implicit_gemm"},
    {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, "implicit_precomp_gemm"},
    {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, "gemm"},
    {CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, "direct"},
    {CUDNN_CONVOLUTION_FWD_ALGO_FFT, "fft"},
    {CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING, "fft_tiling"},
    {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, "winograd"},
    {CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, "winograd_nonfused"},
}};

constexpr std::array<AlgoName<cudnnConvolutionBwdDataAlgo_t>, 6> kBwdDataAlgos = {{
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, "algo_0"},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, "algo_1"},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, "fft"},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING, "fft_tiling"},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD, "winograd"},
    {CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED, "winograd_nonfused"},
}};

constexpr std::array<AlgoName<cudnnConvolutionBwdFilterAlgo_t>, 6> kBwdFilterAlgos = {{
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, "algo_0"},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, "algo_1"},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, "fft"},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, "algo_3"},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED, "winograd_nonfused"},
    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING, "fft_tiling"},
}};

// The names of an algorithm type's algorithms.
constexpr const auto& algo_names(cudnnConvolutionFwdAlgo_t) { return kFwdAlgos; }
constexpr const auto& algo_names(cudnnConvolutionBwdDataAlgo_t) { return kBwdDataAlgos; }
constexpr const auto& algo_names(cudnnConvolutionBwdFilterAlgo_t) { return kBwdFilterAlgos; }

// How a math type is written in a tactic: "" (default or FMA math), "tensor_op" or "tensor_op_conversion".
enum class MathClass { kPlain, kTensorOp, kTensorOpConversion };

MathClass math_class(cudnnMathType_t m) {
  switch (m) {
    case CUDNN_TENSOR_OP_MATH: return MathClass::kTensorOp;
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return MathClass::kTensorOpConversion;
    default: return MathClass::kPlain;
  }
}

// A tactic's parts: "winograd_nonfused+tensor_op+fused" -> winograd_nonfused, tensor_op, fused.
std::vector<std::string> tactic_parts(const std::string& t) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    const size_t plus = t.find('+', begin);
    parts.push_back(t.substr(begin, plus == std::string::npos ? std::string::npos : plus - begin));
    if (plus == std::string::npos) return parts;
    begin = plus + 1;
  }
}

// An algorithm and its math class: "algo", "algo+tensor_op" or "algo+tensor_op_conversion"; "" for none (the
// heuristic's first choice). A float32 TF32 tactic ends in "+tf32" ("+tf32" alone: the TF32 heuristic's first).
template <class Algo>
struct AlgoTactic {
  std::optional<Algo> algo;
  MathClass math = MathClass::kPlain;
  bool tf32 = false;

  // The algorithm and its math class.
  std::string base() const {
    if (!algo) return "";
    std::string s;
    for (const auto& a : algo_names(Algo{}))
      if (a.algo == *algo) s = a.name;
    if (math == MathClass::kTensorOp) s += "+tensor_op";
    if (math == MathClass::kTensorOpConversion) s += "+tensor_op_conversion";
    return s;
  }
  std::string tf32_suffix() const { return tf32 ? std::string(kTf32TacticSuffix) : ""; }
  std::string to_string() const { return base() + tf32_suffix(); }

  // Reads the algorithm (parts[0]) and a math class after it; returns the parts used, 0 for an unknown algorithm.
  size_t read(const std::vector<std::string>& parts) {
    for (const auto& a : algo_names(Algo{}))
      if (parts[0] == a.name) algo = a.algo;
    if (!algo) return 0;
    size_t i = 1;
    if (i < parts.size() && parts[i] == "tensor_op") math = MathClass::kTensorOp, ++i;
    if (i < parts.size() && parts[i] == "tensor_op_conversion") math = MathClass::kTensorOpConversion, ++i;
    return i;
  }

  static std::optional<AlgoTactic> parse(const std::string& tactic) {
    AlgoTactic out;
    out.tf32 = is_tf32_tactic(tactic);
    const std::string t = strip_tf32_suffix(tactic);
    if (t.empty()) return out;
    const std::vector<std::string> parts = tactic_parts(t);
    if (out.read(parts) != parts.size()) return std::nullopt;
    return out;
  }
};

// The forward convolution's tactic: an algorithm, its math class, and "+fused" for
// cudnnConvolutionBiasActivationForward.
struct ConvTactic : AlgoTactic<cudnnConvolutionFwdAlgo_t> {
  bool fused = false;

  std::string to_string() const { return base() + (algo && fused ? "+fused" : "") + tf32_suffix(); }
};

std::optional<ConvTactic> parse_tactic(const std::string& tactic) {
  ConvTactic out;
  out.tf32 = is_tf32_tactic(tactic);
  const std::string t = strip_tf32_suffix(tactic);
  if (t.empty()) return out;
  const std::vector<std::string> parts = tactic_parts(t);
  size_t i = out.read(parts);
  if (i == 0) return std::nullopt;
  if (i < parts.size() && parts[i] == "fused") out.fused = true, ++i;
  if (i != parts.size()) return std::nullopt;
  return out;
}

// The epilogue a problem has: bias, residual, activation.
struct Epilogue {
  bool bias = false;
  bool residual = false;
  FusedActivation act;
};

// Whether cudnnConvolutionBiasActivationForward computes this epilogue with `algo` on `dtype` (see the file comment).
bool fusable(const Epilogue& e, DataType dtype, cudnnConvolutionFwdAlgo_t algo) {
  if (!e.bias || algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) return false;
  if (dtype != DataType::kFloat32 && dtype != DataType::kFloat16) return false;
  return !e.act.on || e.act.kind == ActivationKind::kRelu;
}

// cuDNN takes one pad per axis: the begin pad, with the end pad at most that much smaller than it (output_padding
// or output_shape adding up to stride - 1 positions at the end), never negative. An end pad larger than the begin
// pad (ONNX ConvTranspose's SAME_UPPER, say) is first made equal to it by even_end_pads.
Status check_deconv_window(const ConvWindow& w) {
  for (int i = 0; i < w.rank(); ++i) {
    const int64_t extra = w.pads_begin[i] - w.pads_end[i];
    if (w.pads_begin[i] < 0 || extra < 0 || extra >= w.strides[i])
      return unsupported(
          "cuDNN's deconvolution needs equal begin and end pads (up to stride - 1 extra output at the "
          "end) and no negative pad; axis ",
          i, " has ", w.pads_begin[i], " and ", w.pads_end[i]);
  }
  return Status::ok();
}

// A deconvolution whose end pad exceeds its begin pad on some axis runs as the one with the end pad equal to the begin
// pad, into an output that many positions longer there, whose leading part is the output asked for. Lowers such end
// pads in `w` and returns the longer output's dims (`y` itself when none is lowered).
Dims even_end_pads(ConvWindow& w, const Dims& y) {
  Dims full = y;
  for (int i = 0; i < w.rank(); ++i) {
    if (w.pads_end[i] <= w.pads_begin[i] || w.pads_begin[i] < 0) continue;
    if (full.rank() == w.rank() + 2) full[2 + i] += w.pads_end[i] - w.pads_begin[i];
    w.pads_end[i] = w.pads_begin[i];
  }
  return full;
}

// ---------------------------------------------------------------------------------------------
// Descriptors for one problem, and cuDNN's questions about it

struct Problem {
  cuda::TensorDescriptor xd, yd, bd;
  FilterDescriptor wd;
  ConvDescriptor cd;

  // The forward convolution x (*) w -> y (and the bias descriptor of its epilogue).
  Status set(const ConvolutionAttrs& a, DataType dt, const Dims& x, const Dims& w, const Dims& y) {
    KILN_ASSIGN_OR_RETURN(ConvWindow win, convolution_window(a, x, w));
    KILN_RETURN_IF_ERROR(check_window(win));
    KILN_RETURN_IF_ERROR(check_counts("convolutions", x, w, y));
    if (a.channels_last) {
      if (x.rank() != 4 || w.rank() != 4 || y.rank() != 4 || win.rank() != 2)
        return unsupported("a channels_last convolution is 2-D: x [N, H, W, C], w [M, kH, kW, C/G]");
      KILN_RETURN_IF_ERROR(set_nhwc(xd, dt, x));
      KILN_RETURN_IF_ERROR(set_nhwc(yd, dt, y));
      KILN_RETURN_IF_ERROR(set_nhwc(bd, dt, Dims{1, 1, 1, y[3]}));
      // cuDNN's filter dims are K, C, H, W whatever the format; NHWC says the memory is [K, H, W, C].
      KILN_RETURN_IF_ERROR(
          cuda::check(cudnnSetFilter4dDescriptor(wd.get(), *cuda::cudnn_dtype(dt), CUDNN_TENSOR_NHWC, as_int(w[0]),
                                                 as_int(w[3]), as_int(w[1]), as_int(w[2])),
                      "cudnnSetFilter4dDescriptor (NHWC)"));
      return set_convolution(win, a.group);
    }
    KILN_RETURN_IF_ERROR(set_nchw(dt, x, w, y, win, a.group));
    const Dims yl = lift_1d(y);
    Dims bias_dims = Dims::of_rank(yl.rank());
    for (int i = 0; i < bias_dims.rank(); ++i) bias_dims[i] = 1;
    bias_dims[1] = y[1];
    return bd.set(dt, bias_dims);
  }

  // A Deconvolution x -> y as the convolution y (*) w -> x whose data gradient it is: xd describes the Deconvolution's
  // output y, yd its input x.
  // `full` (when not null) receives the dims cuDNN writes: y's, longer where even_end_pads lowered an end pad.
  Status set_deconvolution(const DeconvolutionAttrs& a, DataType dt, const Dims& x, const Dims& w, const Dims& y,
                           Dims* full = nullptr) {
    KILN_ASSIGN_OR_RETURN(ConvWindow win, deconvolution_window(a, x, w));
    const Dims written = even_end_pads(win, y);
    KILN_RETURN_IF_ERROR(check_deconv_window(win));
    KILN_RETURN_IF_ERROR(check_counts("deconvolutions", x, w, written));
    if (full) *full = written;
    return set_nchw(dt, written, w, x, win, a.group);
  }

 private:
  static Status check_counts(const char* what, const Dims& x, const Dims& w, const Dims& y) {
    for (const Dims* d : {&x, &w, &y})
      if (d->numel() > kMaxCudnnCount)
        return unsupported("cuDNN ", what, " here take tensors below 2^31 elements; this one has ", d->numel());
    return Status::ok();
  }

  // NCHW descriptors of x, w (NCHW filter) and y, 1-D problems lifted to 2-D, and the convolution.
  Status set_nchw(DataType dt, const Dims& x, const Dims& w, const Dims& y, const ConvWindow& win, int64_t group) {
    KILN_RETURN_IF_ERROR(xd.set(dt, lift_1d(x)));
    KILN_RETURN_IF_ERROR(yd.set(dt, lift_1d(y)));
    const Dims wl = lift_1d(w);
    std::vector<int> wdim(wl.begin(), wl.end());
    KILN_RETURN_IF_ERROR(cuda::check(cudnnSetFilterNdDescriptor(wd.get(), *cuda::cudnn_dtype(dt), CUDNN_TENSOR_NCHW,
                                                                static_cast<int>(wdim.size()), wdim.data()),
                                     "cudnnSetFilterNdDescriptor"));
    return set_convolution(win, group);
  }

  Status set_convolution(const ConvWindow& win, int64_t group) {
    std::vector<int> pad, stride, dil;
    if (win.rank() == 1) pad.push_back(0), stride.push_back(1), dil.push_back(1);
    for (int i = 0; i < win.rank(); ++i) {
      pad.push_back(static_cast<int>(win.pads_begin[i]));
      stride.push_back(static_cast<int>(win.strides[i]));
      dil.push_back(static_cast<int>(win.dilations[i]));
    }
    KILN_RETURN_IF_ERROR(
        cuda::check(cudnnSetConvolutionNdDescriptor(cd.get(), static_cast<int>(pad.size()), pad.data(), stride.data(),
                                                    dil.data(), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                    "cudnnSetConvolutionNdDescriptor"));
    return cuda::check(cudnnSetConvolutionGroupCount(cd.get(), static_cast<int>(group)),
                       "cudnnSetConvolutionGroupCount");
  }
};

// What differs between cuDNN's three convolution directions: the algorithm type, its heuristic and workspace calls.
struct FwdOp {
  using Algo = cudnnConvolutionFwdAlgo_t;
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  static Status max_count(cudnnHandle_t h, int* n) {
    return cuda::check(cudnnGetConvolutionForwardAlgorithmMaxCount(h, n),
                       "cudnnGetConvolutionForwardAlgorithmMaxCount");
  }
  static Status heuristic(cudnnHandle_t h, const Problem& p, int n, int* found, Perf* perf) {
    return cuda::check(
        cudnnGetConvolutionForwardAlgorithm_v7(h, p.xd.get(), p.wd.get(), p.cd.get(), p.yd.get(), n, found, perf),
        "cudnnGetConvolutionForwardAlgorithm_v7");
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const Problem& p, Algo algo, size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(h, p.xd.get(), p.wd.get(), p.cd.get(), p.yd.get(), algo, bytes);
  }
};

// What differs between the two backward ops: the algorithm type, cuDNN's calls, and which tensors are the forward's
// x, w and y.
struct BwdDataOp {
  using Algo = cudnnConvolutionBwdDataAlgo_t;
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  static constexpr const char* kName = "cuda.cudnn.convolution_backward_data";
  static constexpr bool kWritesX = true;
  static constexpr const char* kOp = "ConvolutionBackwardData";
  static constexpr Algo kFallback = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  // The forward's x, w and y dims of a call: dx (x's shape), w, dy.
  static const Dims& x_dims(const OpCall& c) { return c.inputs[2].dims; }
  static const Dims& w_dims(const OpCall& c) { return c.inputs[1].dims; }
  static const Dims& y_dims(const OpCall& c) { return c.inputs[0].dims; }
  static const Tensor& x_of(KernelContext& ctx) { return ctx.dst[0]; }
  static const Tensor& w_of(KernelContext& ctx) { return ctx.src[1]; }
  static const Tensor& y_of(KernelContext& ctx) { return ctx.src[0]; }
  static Tensor& out(KernelContext& ctx) { return ctx.dst[0]; }
  static Status max_count(cudnnHandle_t h, int* n) {
    return cuda::check(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, n),
                       "cudnnGetConvolutionBackwardDataAlgorithmMaxCount");
  }
  static Status heuristic(cudnnHandle_t h, const Problem& p, int n, int* found, Perf* perf) {
    return cuda::check(
        cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.wd.get(), p.yd.get(), p.cd.get(), p.xd.get(), n, found, perf),
        "cudnnGetConvolutionBackwardDataAlgorithm_v7");
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const Problem& p, Algo algo, size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, p.wd.get(), p.yd.get(), p.cd.get(), p.xd.get(), algo, bytes);
  }
  // x: dx (or its padded form) written; w and dy read.
  static Status run(cudnnHandle_t h, const Problem& p, Algo algo, void* ws, size_t ws_bytes, void* x, const void* w,
                    const void* dy) {
    const float one = 1.f, zero = 0.f;
    return cuda::check(cudnnConvolutionBackwardData(h, &one, p.wd.get(), w, p.yd.get(), dy, p.cd.get(), algo, ws,
                                                    ws_bytes, &zero, p.xd.get(), x),
                       "cudnnConvolutionBackwardData");
  }
};

struct BwdFilterOp {
  using Algo = cudnnConvolutionBwdFilterAlgo_t;
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  static constexpr const char* kName = "cuda.cudnn.convolution_backward_filter";
  static constexpr bool kWritesX = false;
  static constexpr const char* kOp = "ConvolutionBackwardFilter";
  static constexpr Algo kFallback = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
  // x, dw (w's shape), dy.
  static const Dims& x_dims(const OpCall& c) { return c.inputs[0].dims; }
  static const Dims& w_dims(const OpCall& c) { return c.outputs[0].dims; }
  static const Dims& y_dims(const OpCall& c) { return c.inputs[1].dims; }
  static const Tensor& x_of(KernelContext& ctx) { return ctx.src[0]; }
  static const Tensor& w_of(KernelContext& ctx) { return ctx.dst[0]; }
  static const Tensor& y_of(KernelContext& ctx) { return ctx.src[1]; }
  static Tensor& out(KernelContext& ctx) { return ctx.dst[0]; }
  static Status max_count(cudnnHandle_t h, int* n) {
    return cuda::check(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, n),
                       "cudnnGetConvolutionBackwardFilterAlgorithmMaxCount");
  }
  static Status heuristic(cudnnHandle_t h, const Problem& p, int n, int* found, Perf* perf) {
    return cuda::check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.xd.get(), p.yd.get(), p.cd.get(), p.wd.get(),
                                                                     n, found, perf),
                       "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const Problem& p, Algo algo, size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p.xd.get(), p.yd.get(), p.cd.get(), p.wd.get(), algo,
                                                          bytes);
  }
  // dw written; x (or its padded form) and dy read.
  static Status run(cudnnHandle_t h, const Problem& p, Algo algo, void* ws, size_t ws_bytes, const void* x, void* w,
                    const void* dy) {
    const float one = 1.f, zero = 0.f;
    return cuda::check(cudnnConvolutionBackwardFilter(h, &one, p.xd.get(), x, p.yd.get(), dy, p.cd.get(), algo, ws,
                                                      ws_bytes, &zero, p.wd.get(), w),
                       "cudnnConvolutionBackwardFilter");
  }
};

// What cuDNN runs for a backward problem: the attributes and x dims of its descriptors. With pads that differ at the
// two ends of an axis, x is padded explicitly (`padded`; `begin` and `end` per spatial axis) and the attributes have
// no pads.
struct BwdGeometry {
  ConvolutionAttrs attrs;
  Dims x;
  bool padded = false;
  std::vector<int64_t> begin, end;
};

Result<BwdGeometry> bwd_geometry(const ConvolutionAttrs& a, const Dims& x, const Dims& w) {
  KILN_ASSIGN_OR_RETURN(ConvWindow win, convolution_window(a, x, w));
  BwdGeometry g{a, x, false, win.pads_begin, win.pads_end};
  for (int i = 0; i < win.rank(); ++i) {
    if (win.pads_begin[i] < 0 || win.pads_end[i] < 0)
      return unsupported("cuDNN convolution gradients take no negative pads");
    g.padded = g.padded || win.pads_begin[i] != win.pads_end[i];
  }
  if (!g.padded) return g;
  g.attrs.pads.assign(2 * static_cast<size_t>(win.rank()), 0);
  g.attrs.auto_pad = AutoPad::kNotSet;
  for (int i = 0; i < win.rank(); ++i) g.x[2 + i] = x[2 + i] + win.pads_begin[i] + win.pads_end[i];
  if (g.x.numel() > kMaxCudnnCount)
    return unsupported("the explicitly padded x ", g.x.to_string(),
                       " of this convolution gradient has 2^31 elements or more");
  return g;
}

// A math type to ask the heuristic with, and whether its float32 answers are TF32 tactics.
struct MathQuery {
  cudnnMathType_t math;
  bool tf32;
};

// The math types worth asking the heuristic about: float32 FMA (exact), and with `tf32` the default math, which
// lets float32 round to TF32; the halves with and without tensor ops.
std::vector<MathQuery> query_math(DataType dt, bool tf32) {
  if (dt == DataType::kFloat32) {
    if (tf32) return {{CUDNN_FMA_MATH, false}, {CUDNN_DEFAULT_MATH, true}};
    return {{CUDNN_FMA_MATH, false}};
  }
  return {{CUDNN_TENSOR_OP_MATH, false}, {CUDNN_DEFAULT_MATH, false}};
}

// The math type an answer runs with: float32 FMA math (CUDNN_DEFAULT_MATH would allow TF32 on Ampere and later)
// unless it is a TF32 tactic, which runs with the default math; the halves with the answer's.
cudnnMathType_t run_math(cudnnMathType_t answered, DataType dt, bool tf32) {
  if (dt != DataType::kFloat32) return answered;
  return tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

// The heuristic's successful answers for `q`, float32 answers with tensor-op math left out unless they are TF32
// tactics (float32 stays exact otherwise).
template <class Op>
Result<std::vector<typename Op::Perf>> query(cudnnHandle_t h, Problem& p, MathQuery q, DataType dt) {
  const cudnnMathType_t math = q.math;
  KILN_RETURN_IF_ERROR(cuda::check(cudnnSetConvolutionMathType(p.cd.get(), math), "cudnnSetConvolutionMathType"));
  int max = 0;
  KILN_RETURN_IF_ERROR(Op::max_count(h, &max));
  std::vector<typename Op::Perf> perf(static_cast<size_t>(std::max(max, 1)));
  int found = 0;
  KILN_RETURN_IF_ERROR(Op::heuristic(h, p, static_cast<int>(perf.size()), &found, perf.data()));
  std::vector<typename Op::Perf> out;
  for (int i = 0; i < found && i < static_cast<int>(perf.size()); ++i)
    if (perf[i].status == CUDNN_STATUS_SUCCESS &&
        (dt != DataType::kFloat32 || q.tf32 || math_class(perf[i].mathType) == MathClass::kPlain))
      out.push_back(perf[i]);
  return out;
}

// The workspace of a heuristic answer as the kernel runs it (run_math), or nullopt when cuDNN refuses the
// configuration (a tactic worth listing only if it can run). Leaves the descriptor's math type at the one it runs with.
template <class Op>
std::optional<size_t> algo_workspace(cudnnHandle_t h, Problem& p, const typename Op::Perf& perf, DataType dt,
                                     bool tf32) {
  const cudnnMathType_t math = run_math(perf.mathType, dt, tf32);
  size_t bytes = 0;
  if (cudnnSetConvolutionMathType(p.cd.get(), math) != CUDNN_STATUS_SUCCESS ||
      Op::workspace(h, p, perf.algo, &bytes) != CUDNN_STATUS_SUCCESS)
    return std::nullopt;
  return std::max(bytes, perf.memory);
}

// Calls f(perf, tf32) for every answer the heuristic gives that can run (its workspace known), math types in
// query_math's order: the tactics of a problem (TF32 ones when `tf32` and the problem is float32).
template <class Op, class F>
void for_each_offered(cudnnHandle_t h, Problem& p, DataType dt, bool tf32, F&& f) {
  for (MathQuery q : query_math(dt, tf32)) {
    auto found = query<Op>(h, p, q, dt);
    if (!found) continue;
    for (const typename Op::Perf& perf : *found)
      if (algo_workspace<Op>(h, p, perf, dt, q.tf32)) f(perf, q.tf32);
  }
}

// The answer a tactic names (the first that can run for the default tactic), asked as the tactics were listed so
// that a listed tactic is found again, and its workspace; nullopt when the heuristic no longer offers it. Leaves the
// descriptor's math type at the answer's.
template <class Op>
Result<std::optional<std::pair<typename Op::Perf, size_t>>> choose(cudnnHandle_t h, Problem& p, DataType dt,
                                                                   const AlgoTactic<typename Op::Algo>& tactic) {
  for (MathQuery q : query_math(dt, tactic.tf32)) {
    if (q.tf32 != tactic.tf32) continue;
    KILN_ASSIGN_OR_RETURN(auto found, query<Op>(h, p, q, dt));
    for (const typename Op::Perf& perf : found) {
      if (tactic.algo && (perf.algo != *tactic.algo || (!q.tf32 && math_class(perf.mathType) != tactic.math))) continue;
      if (const std::optional<size_t> bytes = algo_workspace<Op>(h, p, perf, dt, q.tf32))
        return std::optional(std::pair(perf, *bytes));
    }
  }
  return std::optional<std::pair<typename Op::Perf, size_t>>();
}

// The cuDNN handle to list a problem's tactics with: none without a GPU, or for dynamic or empty shapes.
std::optional<cudnnHandle_t> tactics_handle(const Dims& x, const Dims& w, const Dims& y) {
  if (!cuda::gpu_available() || !x.is_static() || !w.is_static() || !y.is_static() || y.numel() == 0 ||
      x.numel() == 0 || w.numel() == 0)
    return std::nullopt;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  auto h = cuda::cudnn_handle(device);
  if (!h) return std::nullopt;
  return *h;
}

Epilogue epilogue_of(const OpCall& call) {
  Epilogue e;
  e.bias = call.has_input(2);
  e.residual = call.has_input(3);
  e.act = call.attrs_as<ConvolutionAttrs>().fused;
  return e;
}

std::vector<std::string> conv_tactics(const OpCall& call) {
  const std::optional<cudnnHandle_t> h = tactics_handle(call.inputs[0].dims, call.inputs[1].dims, call.outputs[0].dims);
  if (!h) return {};
  const DataType dt = call.inputs[0].dtype;
  Problem p;
  if (!p.set(call.attrs_as<ConvolutionAttrs>(), dt, call.inputs[0].dims, call.inputs[1].dims, call.outputs[0].dims)
           .is_ok())
    return {};
  const Epilogue e = epilogue_of(call);
  std::vector<std::string> out;
  auto add = [&](std::string t) {
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(std::move(t));
  };
  for_each_offered<FwdOp>(*h, p, dt, tf32_tactics_allowed(call),
                          [&](const cudnnConvolutionFwdAlgoPerf_t& perf, bool tf32) {
                            ConvTactic t;
                            t.algo = perf.algo;
                            t.math = tf32 ? MathClass::kPlain : math_class(perf.mathType);
                            t.tf32 = tf32;
                            add(t.to_string());
                            if (fusable(e, dt, perf.algo)) {
                              t.fused = true;
                              add(t.to_string());
                            }
                          });
  return out;
}

// ---------------------------------------------------------------------------------------------
// The kernel

class CudnnConvolution final : public Kernel {
 public:
  explicit CudnnConvolution(ConvTactic tactic) : tactic_(tactic) {}

  std::string detail() const override {
    if (!ready_) return {};
    ConvTactic ran = tactic_;
    ran.algo = algo_;
    ran.math = math_class(math_);
    return str_cat("cuDNN ", ran.to_string(), tactic_.algo ? "" : " (the heuristic's first)", ", workspace ",
                   workspace_bytes_, " bytes, ",
                   tactic_.fused ? "bias, residual and activation in cudnnConvolutionBiasActivationForward"
                                 : "kiln's epilogue kernel");
  }
  size_t workspace_bytes() const override { return workspace_bytes_ + residual_bytes_; }

  Status run(KernelContext& ctx) override {
    const auto& a = ctx.attrs<ConvolutionAttrs>();
    const Tensor& x = ctx.src[0];
    const Tensor& w = ctx.src[1];
    Tensor& y = ctx.dst[0];
    if (y.numel() == 0) return Status::ok();  // cuDNN rejects empty tensors; there is nothing to compute
    const cudaStream_t stream = cuda::native(ctx.stream);
    KILN_ASSIGN_OR_RETURN(cudnnHandle_t h, cuda::cudnn_handle(ctx.stream));
    if (!ready_ || x.dims() != x_dims_ || w.dims() != w_dims_ || y.dims() != y_dims_)
      KILN_RETURN_IF_ERROR(prepare(a, x, w, y, h));
    const Tensor* bias = ctx.src.size() > 2 && ctx.src[2].defined() ? &ctx.src[2] : nullptr;
    const Tensor* residual = ctx.src.size() > 3 && ctx.src[3].defined() ? &ctx.src[3] : nullptr;
    if (residual && residual->nbytes() != y.nbytes())
      return invalid_argument("Convolution residual ", residual->dims().to_string(), " does not match the output ",
                              y.dims().to_string());
    KILN_ASSIGN_OR_RETURN(void* workspace,
                          workspace_.get(ctx.allocator, workspace_bytes_, "cuDNN convolution workspace", stream));
    // The convolution writes y before the epilogue reads the residual: keep a residual that is y's memory aside.
    const void* residual_ptr = residual ? residual->raw() : nullptr;
    if (residual && residual->raw() == y.raw()) {
      residual_bytes_ = y.nbytes();
      KILN_ASSIGN_OR_RETURN(void* copy,
                            residual_copy_.get(ctx.allocator, residual_bytes_, "convolution residual copy", stream));
      KILN_RETURN_IF_ERROR(
          cuda::check(cudaMemcpyAsync(copy, residual->raw(), residual_bytes_, cudaMemcpyDeviceToDevice, stream),
                      "cudaMemcpyAsync (convolution residual)"));
      residual_ptr = copy;
    }
    const float one = 1.f, zero = 0.f;
    if (tactic_.fused) {
      if (!bias) return internal_error(kImplName, "[", tactic_.to_string(), "] runs without a bias");
      const float alpha2 = residual_ptr ? 1.f : 0.f;
      return cuda::check(cudnnConvolutionBiasActivationForward(
                             h, &one, p_.xd.get(), x.raw(), p_.wd.get(), w.raw(), p_.cd.get(), algo_, workspace,
                             workspace_bytes_, &alpha2, p_.yd.get(), residual_ptr ? residual_ptr : y.raw(), p_.bd.get(),
                             bias->raw(), act_.get(), p_.yd.get(), y.raw()),
                         "cudnnConvolutionBiasActivationForward");
    }
    KILN_RETURN_IF_ERROR(
        cuda::check(cudnnConvolutionForward(h, &one, p_.xd.get(), x.raw(), p_.wd.get(), w.raw(), p_.cd.get(), algo_,
                                            workspace, workspace_bytes_, &zero, p_.yd.get(), y.raw()),
                    "cudnnConvolutionForward"));
    // NCHW: the channel of element i is (i / inner) % C; NHWC: i % C (inner = 1).
    const int64_t channels = a.channels_last ? y.dims()[3] : y.dims()[1];
    const int64_t inner = a.channels_last ? 1 : y.numel() / (y.dims()[0] * channels);
    return cuda::conv_epilogue(y.dtype(), y.raw(), y.numel(), channels, inner, bias ? bias->raw() : nullptr,
                               residual_ptr, a.fused, stream);
  }

 private:
  // Descriptors, the algorithm of the tactic, its math type and workspace size for the shapes seen.
  Status prepare(const ConvolutionAttrs& a, const Tensor& x, const Tensor& w, const Tensor& y, cudnnHandle_t h) {
    ready_ = false;
    const DataType dt = x.dtype();
    KILN_RETURN_IF_ERROR(p_.set(a, dt, x.dims(), w.dims(), y.dims()));
    KILN_ASSIGN_OR_RETURN(auto chosen, choose<FwdOp>(h, p_, dt, tactic_));
    if (!chosen) {
      if (tactic_.algo)
        return unsupported("cuDNN does not offer the convolution algorithm '", tactic_.to_string(), "' for x ",
                           x.dims().to_string(), ", w ", w.dims().to_string(), " (", dtype_name(dt),
                           "); rebuild the engine so that another tactic is chosen");
      return unsupported("cuDNN offers no convolution algorithm for x ", x.dims().to_string(), ", w ",
                         w.dims().to_string(), " (", dtype_name(dt), ")");
    }
    algo_ = chosen->first.algo;
    math_ = run_math(chosen->first.mathType, dt, tactic_.tf32);  // choose left the descriptor at it
    workspace_bytes_ = chosen->second;
    if (tactic_.fused) {
      const FusedActivation& act = a.fused;
      const Epilogue e{true, false, act};
      if (!fusable(e, dt, algo_))
        return unsupported(kImplName, "[", tactic_.to_string(),
                           "] fuses only a ReLU or no activation, in float32 or "
                           "float16");
      KILN_RETURN_IF_ERROR(cuda::check(
          cudnnSetActivationDescriptor(act_.get(), act.on ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
                                       CUDNN_NOT_PROPAGATE_NAN, 0.0),
          "cudnnSetActivationDescriptor"));
    }
    x_dims_ = x.dims();
    w_dims_ = w.dims();
    y_dims_ = y.dims();
    ready_ = true;
    return Status::ok();
  }

  ConvTactic tactic_;
  bool ready_ = false;
  Dims x_dims_, w_dims_, y_dims_;
  Problem p_;
  ActivationDescriptor act_;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnMathType_t math_ = CUDNN_DEFAULT_MATH;
  size_t workspace_bytes_ = 0;
  size_t residual_bytes_ = 0;
  cuda::DeviceScratch workspace_, residual_copy_;
};

Status conv_supports(const OpCall& call) {
  KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}));
  const DataType dt = call.inputs[0].dtype;
  for (size_t i = 0; i < call.inputs.size(); ++i)
    if (call.inputs[i].present && call.inputs[i].dtype != dt)
      return unsupported("the cuDNN convolution takes every input in x's type (", dtype_name(dt), "); input ", i,
                         " is ", dtype_name(call.inputs[i].dtype));
  if (call.outputs[0].dtype != dt)
    return unsupported("the cuDNN convolution writes x's type (", dtype_name(dt), "), not ",
                       dtype_name(call.outputs[0].dtype));
  const int r = call.inputs[0].dims.rank();
  if (r < 3 || r > 5) return unsupported("cuDNN convolution takes 1-D to 3-D problems");
  if (call.attrs_as<ConvolutionAttrs>().channels_last && (r != 4 || call.inputs[1].dims.rank() != 4))
    return unsupported("a channels_last convolution is 2-D: x [N, H, W, C], w [M, kH, kW, C/G]");
  if (call.attrs_as<ConvolutionAttrs>().channel_block > 0)
    return unsupported("cuDNN takes NCHW and NHWC activations, not blocks of channels (a CPU layout)");
  if (!call.inputs[0].dims.is_static() || !call.inputs[1].dims.is_static()) return Status::ok();
  KILN_ASSIGN_OR_RETURN(
      ConvWindow win, convolution_window(call.attrs_as<ConvolutionAttrs>(), call.inputs[0].dims, call.inputs[1].dims));
  KILN_RETURN_IF_ERROR(check_window(win));
  for (const TensorDesc& d : {call.inputs[0], call.inputs[1], call.outputs[0]})
    if (d.dims.is_static() && d.dims.numel() > kMaxCudnnCount)
      return unsupported("cuDNN convolutions here take tensors below 2^31 elements; this one has ", d.dims.numel());
  return Status::ok();
}

Result<std::unique_ptr<Kernel>> create_conv(const OpCall& call) {
  const std::optional<ConvTactic> tactic = parse_tactic(call.tactic);
  if (!tactic)
    return invalid_argument(kImplName, " has no tactic '", call.tactic,
                            "' (an algorithm such as implicit_precomp_gemm, then +tensor_op and/or +fused)");
  const DataType dt = call.inputs[0].dtype;
  if (tactic->math != MathClass::kPlain && dt == DataType::kFloat32)
    return invalid_argument(kImplName, " keeps float32 exact: no tensor-op tactic '", call.tactic,
                            "' (TF32 tactics end in +tf32)");
  if (tactic->tf32 && dt != DataType::kFloat32)
    return invalid_argument(kImplName, "[", call.tactic, "] rounds float32 to TF32 but the problem is ",
                            dtype_name(dt));
  if (tactic->fused && !fusable(epilogue_of(call), dt, *tactic->algo))
    return invalid_argument(kImplName, "[", call.tactic, "] needs a bias, ReLU or no activation, float32 or float16 ",
                            "and implicit_precomp_gemm");
  return std::unique_ptr<Kernel>(std::make_unique<CudnnConvolution>(*tactic));
}

// ---------------------------------------------------------------------------------------------
// Deconvolution: the data gradient of the forward convolution that maps the Deconvolution's output to its input
// (cudnnConvolutionBackwardData), then the bias in kiln's epilogue kernel. Kiln's Deconvolution weights [C, M/G, k...]
// are exactly that convolution's filter. Tactics are cuDNN's backward-data algorithms ("algo_1",
// "winograd_nonfused+tensor_op", ...; float32 again without tensor-op math, or "+tf32" where TF32 is allowed).

constexpr const char* kDeconvName = "cuda.cudnn.deconvolution";

using DeconvTactic = AlgoTactic<cudnnConvolutionBwdDataAlgo_t>;

std::vector<std::string> deconv_tactics(const OpCall& call) {
  const std::optional<cudnnHandle_t> h = tactics_handle(call.inputs[0].dims, call.inputs[1].dims, call.outputs[0].dims);
  if (!h) return {};
  const DataType dt = call.inputs[0].dtype;
  Problem p;
  if (!p.set_deconvolution(call.attrs_as<DeconvolutionAttrs>(), dt, call.inputs[0].dims, call.inputs[1].dims,
                           call.outputs[0].dims)
           .is_ok())
    return {};
  std::vector<std::string> out;
  for_each_offered<BwdDataOp>(
      *h, p, dt, tf32_tactics_allowed(call), [&](const cudnnConvolutionBwdDataAlgoPerf_t& perf, bool tf32) {
        std::string t = DeconvTactic{perf.algo, tf32 ? MathClass::kPlain : math_class(perf.mathType), tf32}.to_string();
        if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(std::move(t));
      });
  return out;
}

class CudnnDeconvolution final : public Kernel {
 public:
  explicit CudnnDeconvolution(DeconvTactic tactic) : tactic_(tactic) {}

  std::string detail() const override {
    if (!ready_) return {};
    return str_cat("cuDNN backward data ", DeconvTactic{algo_, math_class(math_), tactic_.tf32}.to_string(),
                   tactic_.algo ? "" : " (the heuristic's first)", ", workspace ", workspace_bytes_, " bytes");
  }
  size_t workspace_bytes() const override { return workspace_bytes_ + full_bytes_; }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.src[0];
    const Tensor& w = ctx.src[1];
    Tensor& y = ctx.dst[0];
    if (y.numel() == 0) return Status::ok();
    const cudaStream_t stream = cuda::native(ctx.stream);
    KILN_ASSIGN_OR_RETURN(cudnnHandle_t h, cuda::cudnn_handle(ctx.stream));
    if (!ready_ || x.dims() != x_dims_ || w.dims() != w_dims_ || y.dims() != y_dims_)
      KILN_RETURN_IF_ERROR(prepare(ctx.attrs<DeconvolutionAttrs>(), x, w, y, h));
    KILN_ASSIGN_OR_RETURN(void* workspace,
                          workspace_.get(ctx.allocator, workspace_bytes_, "cuDNN deconvolution workspace", stream));
    if (x.numel() == 0) {  // nothing scatters: the output is the bias alone
      KILN_RETURN_IF_ERROR(cuda::check(cudaMemsetAsync(y.raw(), 0, y.nbytes(), stream), "cudaMemsetAsync"));
    } else if (full_bytes_ == 0) {
      KILN_RETURN_IF_ERROR(BwdDataOp::run(h, p_, algo_, workspace, workspace_bytes_, y.raw(), w.raw(), x.raw()));
    } else {  // written longer (even_end_pads), then its leading part copied to y
      KILN_ASSIGN_OR_RETURN(void* full,
                            full_.get(ctx.allocator, full_bytes_, "deconvolution output before its end pads", stream));
      KILN_RETURN_IF_ERROR(BwdDataOp::run(h, p_, algo_, workspace, workspace_bytes_, full, w.raw(), x.raw()));
      std::vector<int64_t> begin(y.rank() - 2, 0), end(y.rank() - 2, 0);
      for (int i = 2; i < y.rank(); ++i) end[i - 2] = full_dims_[i] - y.dims()[i];
      KILN_RETURN_IF_ERROR(
          cuda::conv_pad_copy(false, full, y.raw(), dtype_size(y.dtype()), y.dims(), begin, end, stream));
    }
    const bool bias = ctx.src.size() > 2 && ctx.src[2].defined();
    if (!bias) return Status::ok();
    const int64_t channels = y.dims()[1];
    return cuda::conv_epilogue(y.dtype(), y.raw(), y.numel(), channels, y.numel() / (y.dims()[0] * channels),
                               ctx.src[2].raw(), nullptr, FusedActivation{}, stream);
  }

 private:
  Status prepare(const DeconvolutionAttrs& a, const Tensor& x, const Tensor& w, const Tensor& y, cudnnHandle_t h) {
    ready_ = false;
    const DataType dt = x.dtype();
    full_bytes_ = 0;
    if (x.numel() == 0) {  // cuDNN rejects empty tensors; run writes the bias alone
      algo_ = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
      workspace_bytes_ = 0;
    } else {
      KILN_RETURN_IF_ERROR(p_.set_deconvolution(a, dt, x.dims(), w.dims(), y.dims(), &full_dims_));
      full_bytes_ = full_dims_ == y.dims() ? 0 : static_cast<size_t>(full_dims_.numel()) * dtype_size(dt);
      KILN_ASSIGN_OR_RETURN(auto chosen, choose<BwdDataOp>(h, p_, dt, tactic_));
      if (!chosen)
        return unsupported("cuDNN does not offer the deconvolution algorithm '",
                           tactic_.algo ? tactic_.to_string() : "(any)", "' for x ", x.dims().to_string(), ", w ",
                           w.dims().to_string(), " (", dtype_name(dt), "); rebuild the engine");
      algo_ = chosen->first.algo;
      math_ = run_math(chosen->first.mathType, dt, tactic_.tf32);
      workspace_bytes_ = chosen->second;
    }
    x_dims_ = x.dims();
    w_dims_ = w.dims();
    y_dims_ = y.dims();
    ready_ = true;
    return Status::ok();
  }

  DeconvTactic tactic_;
  bool ready_ = false;
  Dims x_dims_, w_dims_, y_dims_;
  Problem p_;  // the convolution from the Deconvolution's output to its input
  cudnnConvolutionBwdDataAlgo_t algo_ = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  cudnnMathType_t math_ = CUDNN_DEFAULT_MATH;
  size_t workspace_bytes_ = 0;
  cuda::DeviceScratch workspace_;
  Dims full_dims_;         // the output cuDNN writes (even_end_pads)
  size_t full_bytes_ = 0;  // its size when it is longer than y, else 0
  cuda::DeviceScratch full_;
};

Status deconv_supports(const OpCall& call) {
  KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}));
  const DataType dt = call.inputs[0].dtype;
  for (size_t i = 0; i < call.inputs.size(); ++i)
    if (call.inputs[i].present && call.inputs[i].dtype != dt)
      return unsupported("the cuDNN deconvolution takes every input in x's type (", dtype_name(dt), "); input ", i,
                         " is ", dtype_name(call.inputs[i].dtype));
  const int r = call.inputs[0].dims.rank();
  if (r < 3 || r > 5) return unsupported("cuDNN deconvolution takes 1-D to 3-D problems");
  if (!call.inputs[0].dims.is_static() || !call.inputs[1].dims.is_static()) return Status::ok();
  KILN_ASSIGN_OR_RETURN(ConvWindow win, deconvolution_window(call.attrs_as<DeconvolutionAttrs>(), call.inputs[0].dims,
                                                             call.inputs[1].dims));
  even_end_pads(win, call.outputs[0].dims);
  KILN_RETURN_IF_ERROR(check_deconv_window(win));
  for (const TensorDesc& d : {call.inputs[0], call.inputs[1], call.outputs[0]})
    if (d.dims.is_static() && d.dims.numel() > kMaxCudnnCount)
      return unsupported("cuDNN deconvolutions here take tensors below 2^31 elements; this one has ", d.dims.numel());
  return Status::ok();
}

Result<std::unique_ptr<Kernel>> create_deconv(const OpCall& call) {
  const std::optional<DeconvTactic> tactic = DeconvTactic::parse(call.tactic);
  if (!tactic)
    return invalid_argument(kDeconvName, " has no tactic '", call.tactic,
                            "' (a backward-data algorithm such as algo_1, then +tensor_op)");
  if (tactic->math != MathClass::kPlain && call.inputs[0].dtype == DataType::kFloat32)
    return invalid_argument(kDeconvName, " keeps float32 exact: no tensor-op tactic '", call.tactic,
                            "' (TF32 tactics end in +tf32)");
  if (tactic->tf32 && call.inputs[0].dtype != DataType::kFloat32)
    return invalid_argument(kDeconvName, "[", call.tactic, "] rounds float32 to TF32 but the problem is ",
                            dtype_name(call.inputs[0].dtype));
  return std::unique_ptr<Kernel>(std::make_unique<CudnnDeconvolution>(*tactic));
}

// ---------------------------------------------------------------------------------------------
// ConvolutionBackwardData (dx from dy and w: cudnnConvolutionBackwardData) and ConvolutionBackwardFilter (dw from x
// and dy: cudnnConvolutionBackwardFilter) on the forward's descriptors (`Problem`: x or dx, w or dw, dy as y). Tactics
// are cuDNN's backward algorithms as the _v7 heuristics offer them, named as the deconvolution's ("algo_1",
// "winograd_nonfused+tensor_op", ...); float32 keeps FMA math unless a "+tf32" tactic (TF32 allowed) was chosen. A
// tactic is listed only when cuDNN gives its workspace size; the builder compares `workspace_bytes` with its limit.
// Pads that differ at the two ends of an axis (which cuDNN cannot express) run on an explicitly zero-padded x with no
// pads: the filter gradient pads x into a scratch buffer first, the data gradient computes the padded dx and crops it.

template <class Op>
using BwdTactic = AlgoTactic<typename Op::Algo>;

template <class Op>
std::vector<std::string> bwd_tactics(const OpCall& call) {
  const Dims& x = Op::x_dims(call);
  const Dims& w = Op::w_dims(call);
  const Dims& y = Op::y_dims(call);
  const std::optional<cudnnHandle_t> h = tactics_handle(x, w, y);
  if (!h) return {};
  const DataType dt = call.inputs[0].dtype;
  auto g = bwd_geometry(call.attrs_as<ConvolutionAttrs>(), x, w);
  if (!g) return {};
  Problem p;
  if (!p.set(g->attrs, dt, g->x, w, y).is_ok()) return {};
  std::vector<std::string> out;
  for_each_offered<Op>(*h, p, dt, tf32_tactics_allowed(call), [&](const typename Op::Perf& perf, bool tf32) {
    std::string t = BwdTactic<Op>{perf.algo, tf32 ? MathClass::kPlain : math_class(perf.mathType), tf32}.to_string();
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(std::move(t));
  });
  return out;
}

template <class Op>
class CudnnConvolutionBackward final : public Kernel {
 public:
  explicit CudnnConvolutionBackward(BwdTactic<Op> tactic) : tactic_(tactic) {}

  std::string detail() const override {
    if (!ready_) return {};
    return str_cat("cuDNN ", Op::kOp, " ", BwdTactic<Op>{algo_, math_class(math_), tactic_.tf32}.to_string(),
                   tactic_.algo ? "" : " (the heuristic's first)", ", workspace ", workspace_bytes_, " bytes");
  }
  size_t workspace_bytes() const override { return workspace_bytes_ + padded_bytes_; }

  Status run(KernelContext& ctx) override {
    Tensor& out = Op::out(ctx);
    if (out.numel() == 0) return Status::ok();
    const cudaStream_t stream = cuda::native(ctx.stream);
    const Tensor& x = Op::x_of(ctx);
    const Tensor& w = Op::w_of(ctx);
    const Tensor& y = Op::y_of(ctx);
    // An empty dy (or x, for the filter gradient) contributes nothing: the gradient is zero (cuDNN rejects empty
    // tensors).
    if (x.numel() == 0 || w.numel() == 0 || y.numel() == 0)
      return cuda::check(cudaMemsetAsync(out.raw(), 0, out.nbytes(), stream), "cudaMemsetAsync (zero gradient)");
    KILN_ASSIGN_OR_RETURN(cudnnHandle_t h, cuda::cudnn_handle(ctx.stream));
    if (!ready_ || x.dims() != x_dims_ || w.dims() != w_dims_ || y.dims() != y_dims_)
      KILN_RETURN_IF_ERROR(prepare(ctx.attrs<ConvolutionAttrs>(), x, w, y, h));
    KILN_ASSIGN_OR_RETURN(void* workspace, workspace_.get(ctx.allocator, workspace_bytes_,
                                                          "cuDNN convolution backward workspace", stream));
    if (!g_.padded) {
      if constexpr (Op::kWritesX)
        return Op::run(h, p_, algo_, workspace, workspace_bytes_, out.raw(), w.raw(), y.raw());
      else
        return Op::run(h, p_, algo_, workspace, workspace_bytes_, x.raw(), out.raw(), y.raw());
    }
    KILN_ASSIGN_OR_RETURN(void* padded,
                          padded_.get(ctx.allocator, padded_bytes_, "convolution gradient padded x", stream));
    const size_t elem = dtype_size(y.dtype());
    if constexpr (Op::kWritesX) {
      KILN_RETURN_IF_ERROR(Op::run(h, p_, algo_, workspace, workspace_bytes_, padded, w.raw(), y.raw()));
      return cuda::conv_pad_copy(false, padded, out.raw(), elem, x.dims(), g_.begin, g_.end, stream);
    } else {
      KILN_RETURN_IF_ERROR(cuda::check(cudaMemsetAsync(padded, 0, padded_bytes_, stream), "cudaMemsetAsync (padding)"));
      KILN_RETURN_IF_ERROR(cuda::conv_pad_copy(true, x.raw(), padded, elem, x.dims(), g_.begin, g_.end, stream));
      return Op::run(h, p_, algo_, workspace, workspace_bytes_, padded, out.raw(), y.raw());
    }
  }

 private:
  Status prepare(const ConvolutionAttrs& a, const Tensor& x, const Tensor& w, const Tensor& y, cudnnHandle_t h) {
    ready_ = false;
    const DataType dt = y.dtype();
    KILN_ASSIGN_OR_RETURN(g_, bwd_geometry(a, x.dims(), w.dims()));
    padded_bytes_ = g_.padded ? static_cast<size_t>(g_.x.numel()) * dtype_size(dt) : 0;
    KILN_RETURN_IF_ERROR(p_.set(g_.attrs, dt, g_.x, w.dims(), y.dims()));
    KILN_ASSIGN_OR_RETURN(auto chosen, choose<Op>(h, p_, dt, tactic_));
    if (!chosen)
      return unsupported("cuDNN does not offer the ", Op::kOp, " algorithm '",
                         tactic_.algo ? tactic_.to_string() : "(any)", "' for x ", x.dims().to_string(), ", w ",
                         w.dims().to_string(), ", dy ", y.dims().to_string(), " (", dtype_name(dt),
                         "); rebuild the engine so that another tactic is chosen");
    algo_ = chosen->first.algo;
    math_ = run_math(chosen->first.mathType, dt, tactic_.tf32);  // choose left the descriptor at it
    workspace_bytes_ = chosen->second;
    x_dims_ = x.dims();
    w_dims_ = w.dims();
    y_dims_ = y.dims();
    ready_ = true;
    return Status::ok();
  }

  BwdTactic<Op> tactic_;
  bool ready_ = false;
  Dims x_dims_, w_dims_, y_dims_;
  Problem p_;
  BwdGeometry g_;
  typename Op::Algo algo_ = Op::kFallback;
  cudnnMathType_t math_ = CUDNN_DEFAULT_MATH;
  size_t workspace_bytes_ = 0, padded_bytes_ = 0;
  cuda::DeviceScratch workspace_, padded_;
};

template <class Op>
Status bwd_supports(const OpCall& call) {
  KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}));
  const DataType dt = call.inputs[0].dtype;
  for (size_t i = 0; i < call.inputs.size(); ++i)
    if (call.inputs[i].present && call.inputs[i].dtype != dt)
      return unsupported(Op::kName, " takes every input in one type (", dtype_name(dt), "); input ", i, " is ",
                         dtype_name(call.inputs[i].dtype));
  if (call.outputs[0].dtype != dt)
    return unsupported(Op::kName, " writes its inputs' type (", dtype_name(dt), "), not ",
                       dtype_name(call.outputs[0].dtype));
  const auto& a = call.attrs_as<ConvolutionAttrs>();
  if (a.fused.on || a.channels_last) return unsupported(Op::kOp, " on cuDNN is unfused NCHW");
  const Dims& x = Op::x_dims(call);
  const Dims& w = Op::w_dims(call);
  const Dims& y = Op::y_dims(call);
  if (x.rank() < 3 || x.rank() > 5) return unsupported("cuDNN convolution gradients take 1-D to 3-D problems");
  if (!x.is_static() || !w.is_static()) return Status::ok();
  KILN_RETURN_IF_ERROR(bwd_geometry(a, x, w).status());
  for (const Dims* d : {&x, &w, &y})
    if (d->is_static() && d->numel() > kMaxCudnnCount)
      return unsupported("cuDNN convolutions here take tensors below 2^31 elements; this one has ", d->numel());
  return Status::ok();
}

template <class Op>
Result<std::unique_ptr<Kernel>> create_bwd(const OpCall& call) {
  const std::optional<BwdTactic<Op>> tactic = BwdTactic<Op>::parse(call.tactic);
  if (!tactic)
    return invalid_argument(Op::kName, " has no tactic '", call.tactic,
                            "' (an algorithm such as algo_1, then +tensor_op)");
  if (tactic->math != MathClass::kPlain && call.inputs[0].dtype == DataType::kFloat32)
    return invalid_argument(Op::kName, " keeps float32 exact: no tensor-op tactic '", call.tactic,
                            "' (TF32 tactics end in +tf32)");
  if (tactic->tf32 && call.inputs[0].dtype != DataType::kFloat32)
    return invalid_argument(Op::kName, "[", call.tactic, "] rounds float32 to TF32 but the problem is ",
                            dtype_name(call.inputs[0].dtype));
  return std::unique_ptr<Kernel>(std::make_unique<CudnnConvolutionBackward<Op>>(*tactic));
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = BwdDataOp::kName,
    .op = BwdDataOp::kOp,
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = bwd_supports<BwdDataOp>,
    .create = create_bwd<BwdDataOp>,
    .tactics = bwd_tactics<BwdDataOp>,
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = BwdFilterOp::kName,
    .op = BwdFilterOp::kOp,
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = bwd_supports<BwdFilterOp>,
    .create = create_bwd<BwdFilterOp>,
    .tactics = bwd_tactics<BwdFilterOp>,
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = kDeconvName,
    .op = "Deconvolution",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = deconv_supports,
    .create = create_deconv,
    .tactics = deconv_tactics,
});

KILN_REGISTER_KERNEL(KernelImpl{
    .name = kImplName,
    .op = "Convolution",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = conv_supports,
    .create = create_conv,
    .tactics = conv_tactics,
});

}  // namespace
}  // namespace kiln
