// CUDA NonZero: the runtime infers the output [rank, count] from the input's value (NonZero's value input), so
// the kernel only fills it: cub::DeviceSelect::If runs a stable select of the flat indices of the non-zero
// elements (a count pass and a scan inside, in input order) into an output iterator that writes each selected
// index's coordinates to column j of the output; a column j >= count (the input changed since inference, which the
// reference reports as an error) is dropped. Scratch (CUB's temporary storage and the selected count) is kept
// between runs.
#include <thrust/iterator/counting_iterator.h>
#include <cub/device/device_select.cuh>

#include <cstdint>
#include <iterator>

#include "kernels/common/shuffle_common.h"
#include "kernels/cuda/cublaslt_gemm.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/types.cuh"

namespace kiln {
namespace {

// Writes flat index `flat`, the j-th selected, as coordinates y[d * count + j].
struct CoordWriter {
  int64_t* y = nullptr;
  int64_t count = 0;
  int rank = 0;
  int64_t dims[kMaxRank] = {};

  __device__ void write(int64_t j, int64_t flat) const {
    if (j < 0 || j >= count) return;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t q = flat / dims[d];
      y[d * count + j] = flat - q * dims[d];
      flat = q;
    }
  }
};

struct CoordProxy {
  CoordWriter w;
  int64_t j;
  __device__ const CoordProxy& operator=(int64_t flat) const {
    w.write(j, flat);
    return *this;
  }
};

// An output iterator over the output's columns (CUB needs only * and +).
struct CoordIterator {
  using iterator_category = std::random_access_iterator_tag;
  using value_type = int64_t;
  using difference_type = std::ptrdiff_t;
  using pointer = void;
  using reference = CoordProxy;

  CoordWriter w;
  int64_t pos = 0;

  __host__ __device__ CoordProxy operator*() const { return {w, pos}; }
  __host__ __device__ CoordIterator operator+(difference_type i) const { return {w, pos + i}; }
};

template <class T>
struct IsNonZero {
  const T* x;
  __device__ bool operator()(int64_t i) const {
    if constexpr (std::is_same_v<T, bool>)
      return x[i];
    else
      return cuda::load(x[i]) != 0;
  }
};

class NonZeroKernel final : public Kernel {
 public:
  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.src[0];
    Tensor& y = ctx.dst[0];
    if (y.numel() == 0 || x.numel() == 0) return Status::ok();
    if (y.rank() != 2 || y.dims()[0] != x.rank())
      return invalid_argument("NonZero: output ", y.dims().to_string(), " does not fit input ", x.dims().to_string());
    CoordIterator out;
    out.w.y = y.data<int64_t>();
    out.w.count = y.dims()[1];
    out.w.rank = x.rank();
    for (int d = 0; d < x.rank(); ++d) out.w.dims[d] = x.dims()[d];
    cudaStream_t stream = cuda::native(ctx.stream);
    Status status = Status::ok();
    const bool known = cuda::dispatch_dtype(x.dtype(), [&](auto tag) {
      using T = cuda::type_of<decltype(tag)>;
      (void)(status = select(ctx, IsNonZero<T>{x.data<T>()}, out, x.numel(), stream));
    });
    if (!known) return unsupported("NonZero of ", dtype_name(x.dtype()));
    return status;
  }

 private:
  template <class Pred>
  Status select(KernelContext& ctx, Pred pred, CoordIterator out, int64_t n, cudaStream_t stream) {
    const thrust::counting_iterator<int64_t> in(0);
    size_t temp_bytes = 0;
    KILN_RETURN_IF_ERROR(cuda::check(
        cub::DeviceSelect::If(nullptr, temp_bytes, in, out, static_cast<int64_t*>(nullptr), n, pred, stream),
        "cub::DeviceSelect::If (size query)"));
    const size_t count_offset = (temp_bytes + 255) / 256 * 256;
    KILN_ASSIGN_OR_RETURN(void* scratch,
                          scratch_.get(ctx.allocator, count_offset + sizeof(int64_t), "NonZero scratch", stream));
    auto* selected = reinterpret_cast<int64_t*>(static_cast<char*>(scratch) + count_offset);
    KILN_RETURN_IF_ERROR(cuda::check(cub::DeviceSelect::If(scratch, temp_bytes, in, out, selected, n, pred, stream),
                                     "cub::DeviceSelect::If"));
    return Status::ok();
  }

  cuda::DeviceScratch scratch_;
};

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.nonzero",
    .op = "NonZero",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports =
        [](const OpCall& call) {
          // A scalar's output is [1, n] (the reference treats it as one element of a 1-D tensor); the kernel
          // writes one row per input axis, so scalars stay with the CPU kernel (found by the GPU harness run).
          if (call.inputs[0].dims.rank() == 0) return unsupported("cuda.nonzero takes tensors of rank 1 or more");
          return shuffle::supports_movement(call);
        },
    .create = [](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<NonZeroKernel>());
    },
});

}  // namespace
}  // namespace kiln
