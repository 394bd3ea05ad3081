// CUDA Einsum: one thread per output element walks every combination of the reduced labels (an odometer over their
// sizes moving each input's offset by its strides) and sums the products of the inputs in float32, as the CPU kernel
// does. Simple rather than fast: contractions that are plain matrix products are better written as MatrixMultiply.
#include <cstdint>

#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/cuda/types.cuh"
#include "kernels/ref/einsum.h"

namespace kiln {
namespace {

constexpr int kMaxInputs = 4;
constexpr int kMaxLabels = 12;  // output labels, and reduced labels, each

struct LabelSet {
  int count = 0;
  int64_t sizes[kMaxLabels] = {};
  int64_t strides[kMaxInputs][kMaxLabels] = {};  // per input, per label
};

template <class T>
struct EinsumArgs {
  int inputs = 0;
  const T* src[kMaxInputs] = {};
  LabelSet out, red;
  int64_t out_count = 0;
};

template <class T>
__global__ void einsum_kernel(EinsumArgs<T> a, T* y) {
  for (int64_t o = cuda::thread_index(); o < a.out_count; o += cuda::thread_count()) {
    int64_t off[kMaxInputs] = {};
    for (int64_t k = a.out.count - 1, rem = o; k >= 0; --k) {
      const int64_t i = rem % a.out.sizes[k];
      rem /= a.out.sizes[k];
      for (int t = 0; t < a.inputs; ++t) off[t] += i * a.out.strides[t][k];
    }
    int64_t idx[kMaxLabels] = {};
    bool empty = false;
    for (int k = 0; k < a.red.count; ++k) empty = empty || a.red.sizes[k] == 0;
    float sum = 0.f;
    while (!empty) {
      float prod = 1.f;
      for (int t = 0; t < a.inputs; ++t) prod *= cuda::load(a.src[t][off[t]]);
      sum += prod;
      // The next combination: the last label moves fastest.
      int k = a.red.count - 1;
      for (; k >= 0; --k) {
        for (int t = 0; t < a.inputs; ++t) off[t] += a.red.strides[t][k];
        if (++idx[k] < a.red.sizes[k]) break;
        for (int t = 0; t < a.inputs; ++t) off[t] -= a.red.sizes[k] * a.red.strides[t][k];
        idx[k] = 0;
      }
      if (k < 0) break;
    }
    y[o] = cuda::store<T>(sum);
  }
}

Status fill_labels(const EinsumPlan& plan, const std::vector<int>& labels, LabelSet& set) {
  if (labels.size() > static_cast<size_t>(kMaxLabels))
    return unsupported("the CUDA Einsum takes at most ", kMaxLabels, " output and ", kMaxLabels,
                       " summed labels; this equation has ", labels.size());
  set.count = static_cast<int>(labels.size());
  for (int k = 0; k < set.count; ++k) {
    set.sizes[k] = plan.sizes[labels[k]];
    for (size_t t = 0; t < plan.strides.size(); ++t) set.strides[t][k] = plan.strides[t][labels[k]];
  }
  return Status::ok();
}

template <class T>
Status launch(KernelContext& ctx, const EinsumPlan& plan) {
  EinsumArgs<T> a;
  a.inputs = static_cast<int>(ctx.src.size());
  for (int t = 0; t < a.inputs; ++t) a.src[t] = ctx.src[t].data<T>();
  KILN_RETURN_IF_ERROR(fill_labels(plan, plan.output_labels, a.out));
  KILN_RETURN_IF_ERROR(fill_labels(plan, plan.reduced_labels, a.red));
  a.out_count = ctx.dst[0].numel();
  if (a.out_count == 0) return Status::ok();
  einsum_kernel<T>
      <<<cuda::blocks_for(a.out_count), cuda::kThreads, 0, cuda::native(ctx.stream)>>>(a, ctx.dst[0].data<T>());
  return cuda::check(cudaGetLastError(), "Einsum kernel launch");
}

Status run_einsum(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(EinsumPlan plan, ref::einsum_plan_for(ctx.attrs<EinsumAttrs>(), ctx.src));
  if (ctx.src.size() > static_cast<size_t>(kMaxInputs) || ctx.src.empty())
    return unsupported("the CUDA Einsum takes 1 to ", kMaxInputs, " inputs, got ", ctx.src.size());
  if (ctx.dst[0].dims() != plan.out)
    return invalid_argument("Einsum output ", ctx.dst[0].dims().to_string(), " does not match the equation's ",
                            plan.out.to_string());
  switch (ctx.dst[0].dtype()) {
    case DataType::kFloat32: return launch<float>(ctx, plan);
    case DataType::kFloat16: return launch<__half>(ctx, plan);
    case DataType::kBFloat16: return launch<__nv_bfloat16>(ctx, plan);
    default: return unsupported("Einsum of ", dtype_name(ctx.dst[0].dtype()));
  }
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.einsum",
    .op = "Einsum",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) -> Status {
      KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}));
      const DataType dt = call.outputs[0].dtype;
      for (const TensorDesc& in : call.inputs)
        if (in.dtype != dt) return unsupported("the CUDA Einsum takes inputs of its output's type");
      if (call.inputs.empty() || call.inputs.size() > static_cast<size_t>(kMaxInputs))
        return unsupported("the CUDA Einsum takes 1 to ", kMaxInputs, " inputs, got ", call.inputs.size());
      std::vector<Dims> dims;
      for (const TensorDesc& in : call.inputs) dims.push_back(in.dims);
      KILN_ASSIGN_OR_RETURN(EinsumPlan plan, einsum_plan(call.attrs_as<EinsumAttrs>().equation, dims));
      if (plan.output_labels.size() > static_cast<size_t>(kMaxLabels) ||
          plan.reduced_labels.size() > static_cast<size_t>(kMaxLabels))
        return unsupported("the CUDA Einsum takes at most ", kMaxLabels, " output and ", kMaxLabels, " summed labels");
      return Status::ok();
    },
    .create = stateless(run_einsum),
});

}  // namespace
}  // namespace kiln
