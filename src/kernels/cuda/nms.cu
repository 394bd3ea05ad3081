// CUDA NonMaxSuppression: one block per (batch, class). Its threads rank the candidates (score above the threshold;
// highest first, ties by lower box index, as the reference's stable sort) by counting, then select greedily: for
// each candidate in rank order the threads test it against the boxes kept so far together (IoU in double, products
// written with __dmul_rn so that no fused multiply-add changes a result at the threshold). A last pass numbers the
// selections of every class in (batch, class) order and writes the [selected, 3] rows. The output size depends on
// the data: the kernel reads the selected count back (a stream synchronization) and fails, never writing past the
// output, when it differs from the rows the runtime inferred. The scalar inputs are read on the host.
#include <algorithm>
#include <cstdint>

#include "core/cuda_runtime.h"
#include "kernels/cuda/cublaslt_gemm.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/cuda/types.cuh"
#include "ops/nms/nms.h"

namespace kiln {
namespace {

constexpr unsigned kNmsThreads = 256;

struct NmsArgs {
  int64_t classes = 0, n = 0;
  int64_t cap = 0;  // the most boxes one class keeps: min(n, max_output_boxes_per_class)
  bool center = false;
  bool has_threshold = false;
  double score_threshold = 0, iou_threshold = 0;
};

struct Box {
  double y1, x1, y2, x2;
};

template <class T>
__device__ Box load_box(const T* boxes, int64_t i, bool center) {
  const double a = cuda::load(boxes[i * 4]), b = cuda::load(boxes[i * 4 + 1]), c = cuda::load(boxes[i * 4 + 2]),
               d = cuda::load(boxes[i * 4 + 3]);
  if (center) return {b - d / 2, a - c / 2, b + d / 2, a + c / 2};
  return {fmin(a, c), fmin(b, d), fmax(a, c), fmax(b, d)};
}

// The reference's test: the IoU of p and q exceeds the threshold (boxes without area never suppress).
__device__ bool suppresses(const Box& p, const Box& q, double threshold) {
  const double ih = fmin(p.y2, q.y2) - fmax(p.y1, q.y1);
  const double iw = fmin(p.x2, q.x2) - fmax(p.x1, q.x1);
  if (ih <= 0 || iw <= 0) return false;
  const double ap = __dmul_rn(p.y2 - p.y1, p.x2 - p.x1), aq = __dmul_rn(q.y2 - q.y1, q.x2 - q.x1);
  if (ap <= 0 || aq <= 0) return false;
  const double inter = __dmul_rn(ih, iw);
  return inter / (ap + aq - inter) > threshold;
}

template <class T>
__global__ void nms_class_kernel(NmsArgs a, const T* boxes, const T* scores, int64_t* order_all, int64_t* kept_all,
                                 int64_t* counts) {
  const int64_t bc = blockIdx.x;
  const int64_t b = bc / a.classes;
  const T* score = scores + bc * a.n;
  const T* batch_boxes = boxes + b * a.n * 4;
  int64_t* order = order_all + bc * a.n;
  int64_t* kept = kept_all + bc * a.cap;
  __shared__ unsigned long long candidates;
  __shared__ int64_t kept_count;
  if (threadIdx.x == 0) candidates = 0, kept_count = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < a.n; i += blockDim.x) {
    const double si = cuda::load(score[i]);
    if (a.has_threshold && !(si > a.score_threshold)) continue;
    int64_t rank = 0;
    for (int64_t j = 0; j < a.n; ++j) {
      const double sj = cuda::load(score[j]);
      if (a.has_threshold && !(sj > a.score_threshold)) continue;
      if (sj > si || (sj == si && j < i)) ++rank;
    }
    order[rank] = i;
    atomicAdd(&candidates, 1ull);
  }
  __syncthreads();
  const auto count = static_cast<int64_t>(candidates);
  for (int64_t r = 0; r < count && kept_count < a.cap; ++r) {
    const int64_t i = order[r];
    const Box box = load_box(batch_boxes, i, a.center);
    bool suppressed = false;
    for (int64_t k = threadIdx.x; k < kept_count; k += blockDim.x)
      suppressed = suppressed || suppresses(load_box(batch_boxes, kept[k], a.center), box, a.iou_threshold);
    const bool any = __syncthreads_or(suppressed) != 0;
    if (!any && threadIdx.x == 0) kept[kept_count++] = i;
    __syncthreads();
  }
  if (threadIdx.x == 0) counts[bc] = kept_count;
}

// offsets[bc] = the selections of the classes before bc; *total = all of them.
__global__ void nms_offsets_kernel(const int64_t* counts, int64_t classes_total, int64_t* offsets, int64_t* total) {
  int64_t sum = 0;
  for (int64_t bc = 0; bc < classes_total; ++bc) {
    offsets[bc] = sum;
    sum += counts[bc];
  }
  *total = sum;
}

__global__ void nms_write_kernel(const int64_t* kept_all, const int64_t* counts, const int64_t* offsets,
                                 int64_t classes_total, int64_t classes, int64_t cap, int64_t rows, int64_t* y) {
  const int64_t n = classes_total * cap;
  for (int64_t t = cuda::thread_index(); t < n; t += cuda::thread_count()) {
    const int64_t bc = t / cap, k = t % cap;
    if (k >= counts[bc]) continue;
    const int64_t row = offsets[bc] + k;
    if (row >= rows) continue;
    y[row * 3] = bc / classes;
    y[row * 3 + 1] = bc % classes;
    y[row * 3 + 2] = kept_all[t];
  }
}

// Input i as a host tensor (an engine constant, a host tensor, or a copy made after the stream's work), or null.
Result<Tensor> host_input(KernelContext& ctx, int i) {
  if (i >= static_cast<int>(ctx.src.size()) || !ctx.src[i].defined()) return Tensor();
  if (const Tensor* c = ctx.call.constant(i)) return *c;
  const Tensor& t = ctx.src[i];
  if (t.device().is_cpu()) return t;
  KILN_ASSIGN_OR_RETURN(Tensor host, Tensor::empty(t.dtype(), t.dims()));
  KILN_RETURN_IF_ERROR(ctx.stream.synchronize());
  KILN_RETURN_IF_ERROR(cuda::copy(t, host));
  return host;
}

class NmsKernel final : public Kernel {
 public:
  Status run(KernelContext& ctx) override {
    const Tensor& boxes = ctx.src[0];
    const Tensor& scores = ctx.src[1];
    Tensor& y = ctx.dst[0];
    if (boxes.rank() != 3 || boxes.dims()[2] != 4 || scores.rank() != 3 || boxes.dims()[0] != scores.dims()[0] ||
        boxes.dims()[1] != scores.dims()[2])
      return invalid_argument("NonMaxSuppression needs boxes [batches, boxes, 4] and scores [batches, classes, boxes]",
                              ", got ", boxes.dims().to_string(), " and ", scores.dims().to_string());
    if (boxes.dtype() != scores.dtype())
      return unsupported("the CUDA NonMaxSuppression takes boxes and scores of one type");
    Tensor host[3];
    for (int i = 0; i < 3; ++i) {
      KILN_ASSIGN_OR_RETURN(host[i], host_input(ctx, 2 + i));
    }
    auto param = [&](int i) { return host[i].defined() ? &host[i] : nullptr; };
    KILN_ASSIGN_OR_RETURN(const NmsParams p, nms_params(param(0), param(1), param(2)));
    NmsArgs a;
    a.classes = scores.dims()[1];
    a.n = scores.dims()[2];
    a.cap = std::min<int64_t>(a.n, std::max<int64_t>(p.max_output, 0));
    a.center = ctx.attrs<NmsAttrs>().center_point_box;
    a.has_threshold = p.has_score_threshold;
    a.score_threshold = p.score_threshold;
    a.iou_threshold = p.iou_threshold;
    const int64_t classes_total = scores.dims()[0] * a.classes;
    const int64_t rows = y.rank() == 2 ? y.dims()[0] : -1;
    if (rows < 0 || y.dims()[1] != 3)
      return invalid_argument("NonMaxSuppression output ", y.dims().to_string(), " is not [selected, 3]");
    if (classes_total == 0 || a.cap == 0) {
      if (rows != 0) return invalid_argument("NonMaxSuppression selects no box but the output has ", rows, " rows");
      return Status::ok();
    }
    const cudaStream_t stream = cuda::native(ctx.stream);
    // order [classes_total, n], kept [classes_total, cap], counts, offsets [classes_total], total.
    const int64_t words = classes_total * a.n + classes_total * a.cap + 2 * classes_total + 1;
    KILN_ASSIGN_OR_RETURN(void* scratch, scratch_.get(ctx.allocator, static_cast<size_t>(words) * sizeof(int64_t),
                                                      "NonMaxSuppression scratch", stream));
    auto* order = static_cast<int64_t*>(scratch);
    int64_t* kept = order + classes_total * a.n;
    int64_t* counts = kept + classes_total * a.cap;
    int64_t* offsets = counts + classes_total;
    int64_t* total = offsets + classes_total;
    if (classes_total > int64_t{1} << 31)
      return unsupported("the CUDA NonMaxSuppression takes fewer than 2^31 (batch, class) pairs");
    const auto grid = static_cast<unsigned>(classes_total);
    switch (boxes.dtype()) {
      case DataType::kFloat32:
        nms_class_kernel<float>
            <<<grid, kNmsThreads, 0, stream>>>(a, boxes.data<float>(), scores.data<float>(), order, kept, counts);
        break;
      case DataType::kFloat16:
        nms_class_kernel<__half>
            <<<grid, kNmsThreads, 0, stream>>>(a, boxes.data<__half>(), scores.data<__half>(), order, kept, counts);
        break;
      case DataType::kBFloat16:
        nms_class_kernel<__nv_bfloat16><<<grid, kNmsThreads, 0, stream>>>(
            a, boxes.data<__nv_bfloat16>(), scores.data<__nv_bfloat16>(), order, kept, counts);
        break;
      default: return unsupported("NonMaxSuppression of ", dtype_name(boxes.dtype()));
    }
    KILN_RETURN_IF_ERROR(cuda::check(cudaGetLastError(), "NonMaxSuppression kernel launch"));
    nms_offsets_kernel<<<1, 1, 0, stream>>>(counts, classes_total, offsets, total);
    nms_write_kernel<<<cuda::blocks_for(classes_total * a.cap), cuda::kThreads, 0, stream>>>(
        kept, counts, offsets, classes_total, a.classes, a.cap, rows, y.data<int64_t>());
    KILN_RETURN_IF_ERROR(cuda::check(cudaGetLastError(), "NonMaxSuppression output kernel launch"));
    return cuda::check_device_count(total, rows, stream, "NonMaxSuppression", "boxes");
  }

 private:
  cuda::DeviceScratch scratch_;
};

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.nms",
    .op = "NonMaxSuppression",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = [](const OpCall& call) -> Status {
      KILN_RETURN_IF_ERROR(require_float_dtypes(call, {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}));
      if (call.inputs[0].dtype != call.inputs[1].dtype)
        return unsupported("the CUDA NonMaxSuppression takes boxes and scores of one type");
      return Status::ok();
    },
    .create = [](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<NmsKernel>());
    },
});

}  // namespace
}  // namespace kiln
