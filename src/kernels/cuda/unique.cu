// CUDA Unique (flattened or slices along an axis), as the reference defines it: slices compare lexicographically as
// doubles, NaNs last and equal to each other. A stable merge sort of the slice indices (CUB) puts equal slices
// together, first occurrence first; group heads are flagged and numbered by a scan; the groups are ordered by value
// (sorted) or by first occurrence (a scan over the first-occurrence marks). The output size depends on the data: the
// kernel reads the group count back (a stream synchronization) and fails, writing nothing further, when it differs
// from the count the runtime inferred. Scratch (CUB's temporary storage, the index arrays) is kept between runs.
#include <cub/device/device_merge_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cublaslt_gemm.h"
#include "kernels/cuda/cuda_common.h"
#include "kernels/cuda/indexing.cuh"
#include "kernels/cuda/types.cuh"
#include "ops/unique/unique.h"

namespace kiln {
namespace {

using cuda::thread_count;
using cuda::thread_index;

// Orders slice indices: slice s holds x[o, s, i] for all (o, i), compared in row-major order.
template <class T>
struct SliceLess {
  const T* x;
  int64_t n, inner, per;

  __device__ double elem(int64_t s, int64_t k) const {
    return static_cast<double>(cuda::load(x[((k / inner) * n + s) * inner + k % inner]));
  }
  __device__ int compare(int64_t l, int64_t r) const {
    for (int64_t k = 0; k < per; ++k) {
      const double lv = elem(l, k), rv = elem(r, k);
      const bool ln = isnan(lv), rn = isnan(rv);
      if (ln || rn) {
        if (ln != rn) return ln ? 1 : -1;
        continue;
      }
      if (lv != rv) return lv < rv ? -1 : 1;
    }
    return 0;
  }
  __device__ bool operator()(int64_t l, int64_t r) const { return compare(l, r) < 0; }
};

__global__ void iota_kernel(int64_t* v, int64_t n) {
  for (int64_t i = thread_index(); i < n; i += thread_count()) v[i] = i;
}

template <class T>
__global__ void heads_kernel(SliceLess<T> less, const int64_t* order, int64_t n, int64_t* head) {
  for (int64_t j = thread_index(); j < n; j += thread_count())
    head[j] = j == 0 || less.compare(order[j - 1], order[j]) != 0 ? 1 : 0;
}

// gid: 1-based group of each sorted position. Writes each group's first slice and start, and the group count.
__global__ void groups_kernel(const int64_t* order, const int64_t* head, const int64_t* gid, int64_t n,
                              int64_t* group_first, int64_t* start, int64_t* groups) {
  for (int64_t j = thread_index(); j < n; j += thread_count()) {
    if (head[j]) {
      group_first[gid[j] - 1] = order[j];
      start[gid[j] - 1] = j;
    }
    if (j == n - 1) *groups = gid[j];
  }
}

__global__ void mark_kernel(const int64_t* group_first, int64_t groups, int64_t* mark) {
  for (int64_t g = thread_index(); g < groups; g += thread_count()) mark[group_first[g]] = 1;
}

// The output position of group g: g when sorted, else the number of groups whose first slice comes earlier.
__device__ int64_t rank_of(int64_t g, bool sorted, const int64_t* group_first, const int64_t* first_rank) {
  return sorted ? g : first_rank[group_first[g]];
}

__global__ void index_outputs_kernel(const int64_t* group_first, const int64_t* start, int64_t groups, int64_t n,
                                     bool sorted, const int64_t* first_rank, int64_t* first, int64_t* counts) {
  for (int64_t g = thread_index(); g < groups; g += thread_count()) {
    const int64_t u = rank_of(g, sorted, group_first, first_rank);
    first[u] = group_first[g];
    counts[u] = (g + 1 < groups ? start[g + 1] : n) - start[g];
  }
}

__global__ void inverse_kernel(const int64_t* order, const int64_t* gid, const int64_t* group_first, int64_t n,
                               bool sorted, const int64_t* first_rank, int64_t* inverse) {
  for (int64_t j = thread_index(); j < n; j += thread_count())
    inverse[order[j]] = rank_of(gid[j] - 1, sorted, group_first, first_rank);
}

// y[o, u, i] = x[o, first[u], i].
template <class W>
__global__ void gather_slices_kernel(const W* x, const int64_t* first, int64_t outer, int64_t groups, int64_t n,
                                     int64_t inner, W* y) {
  const int64_t count = outer * groups * inner;
  for (int64_t t = thread_index(); t < count; t += thread_count()) {
    const int64_t i = t % inner;
    const int64_t u = (t / inner) % groups;
    const int64_t o = t / (inner * groups);
    y[t] = x[(o * n + first[u]) * inner + i];
  }
}

size_t round_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

class UniqueKernel final : public Kernel {
 public:
  Status run(KernelContext& ctx) override {
    const auto& a = ctx.attrs<UniqueAttrs>();
    const Tensor& x = ctx.src[0];
    int64_t outer = 1, n = x.numel(), inner = 1;
    if (a.has_axis) {
      auto axis = normalize_axis(a.axis, x.rank());
      if (!axis) return invalid_argument("Unique attribute 'axis': ", axis.status().message());
      n = x.dims()[*axis];
      for (int i = 0; i < x.rank(); ++i) {
        if (i < *axis) outer *= x.dims()[i];
        if (i > *axis) inner *= x.dims()[i];
      }
    }
    if (ctx.dst.size() != 4) return internal_error("Unique writes 4 outputs, got ", ctx.dst.size());
    const int64_t want = ctx.dst[1].numel();
    if (ctx.dst[3].numel() != want || ctx.dst[2].numel() != n || ctx.dst[0].numel() != outer * want * inner)
      return invalid_argument("Unique outputs do not fit ", want, " unique slices of input ", x.dims().to_string());
    if (n == 0) {
      if (want != 0) return invalid_argument("Unique of an empty input has no unique slices, not ", want);
      return Status::ok();
    }
    Status st = Status::ok();
    const bool known = cuda::dispatch_dtype(x.dtype(), [&](auto tag) {
      using T = cuda::type_of<decltype(tag)>;
      (void)(st = run_typed(ctx, SliceLess<T>{x.data<T>(), n, inner, outer * inner}, a.sorted, outer, n, inner, want));
    });
    if (!known) return unsupported("Unique of ", dtype_name(x.dtype()));
    return st;
  }

 private:
  template <class T>
  Status run_typed(KernelContext& ctx, SliceLess<T> less, bool sorted, int64_t outer, int64_t n, int64_t inner,
                   int64_t want) {
    const cudaStream_t stream = cuda::native(ctx.stream);
    // CUB's temporary storage for the sort and the scans, then 8 arrays of n int64 and the group count.
    size_t sort_bytes = 0, scan_bytes = 0, mark_bytes = 0;
    auto* none = static_cast<int64_t*>(nullptr);
    KILN_RETURN_IF_ERROR(cuda::check(cub::DeviceMergeSort::StableSortKeys(nullptr, sort_bytes, none, n, less, stream),
                                     "cub::DeviceMergeSort::StableSortKeys (size query)"));
    KILN_RETURN_IF_ERROR(cuda::check(cub::DeviceScan::InclusiveSum(nullptr, scan_bytes, none, none, n, stream),
                                     "cub::DeviceScan::InclusiveSum (size query)"));
    KILN_RETURN_IF_ERROR(cuda::check(cub::DeviceScan::ExclusiveSum(nullptr, mark_bytes, none, none, n, stream),
                                     "cub::DeviceScan::ExclusiveSum (size query)"));
    const size_t temp_bytes = round_up(std::max({sort_bytes, scan_bytes, mark_bytes, size_t{1}}));
    const size_t array_bytes = round_up(static_cast<size_t>(n) * sizeof(int64_t));
    KILN_ASSIGN_OR_RETURN(void* scratch, scratch_.get(ctx.allocator, temp_bytes + 7 * array_bytes + sizeof(int64_t),
                                                      "Unique scratch", stream));
    char* base = static_cast<char*>(scratch);
    void* temp = base;
    auto array = [&](int k) { return reinterpret_cast<int64_t*>(base + temp_bytes + k * array_bytes); };
    int64_t *order = array(0), *head = array(1), *gid = array(2), *group_first = array(3), *start = array(4),
            *mark = array(5), *first_rank = array(6);
    auto* groups_dev = reinterpret_cast<int64_t*>(base + temp_bytes + 7 * array_bytes);
    const unsigned blocks = cuda::blocks_for(n);
    iota_kernel<<<blocks, cuda::kThreads, 0, stream>>>(order, n);
    KILN_RETURN_IF_ERROR(cuda::check(cub::DeviceMergeSort::StableSortKeys(temp, sort_bytes, order, n, less, stream),
                                     "cub::DeviceMergeSort::StableSortKeys"));
    heads_kernel<T><<<blocks, cuda::kThreads, 0, stream>>>(less, order, n, head);
    KILN_RETURN_IF_ERROR(
        cuda::check(cub::DeviceScan::InclusiveSum(temp, scan_bytes, head, gid, n, stream), "cub::DeviceScan"));
    groups_kernel<<<blocks, cuda::kThreads, 0, stream>>>(order, head, gid, n, group_first, start, groups_dev);
    KILN_RETURN_IF_ERROR(cuda::check(cudaGetLastError(), "Unique kernel launch"));
    KILN_RETURN_IF_ERROR(cuda::check_device_count(groups_dev, want, stream, "Unique", "unique slices"));
    if (!sorted) {
      KILN_RETURN_IF_ERROR(
          cuda::check(cudaMemsetAsync(mark, 0, static_cast<size_t>(n) * sizeof(int64_t), stream), "cudaMemsetAsync"));
      mark_kernel<<<cuda::blocks_for(want), cuda::kThreads, 0, stream>>>(group_first, want, mark);
      KILN_RETURN_IF_ERROR(
          cuda::check(cub::DeviceScan::ExclusiveSum(temp, mark_bytes, mark, first_rank, n, stream), "cub::DeviceScan"));
    }
    int64_t* first = ctx.dst[1].data<int64_t>();
    index_outputs_kernel<<<cuda::blocks_for(want), cuda::kThreads, 0, stream>>>(
        group_first, start, want, n, sorted, first_rank, first, ctx.dst[3].data<int64_t>());
    inverse_kernel<<<blocks, cuda::kThreads, 0, stream>>>(order, gid, group_first, n, sorted, first_rank,
                                                          ctx.dst[2].data<int64_t>());
    const Tensor& x = ctx.src[0];
    Tensor& y = ctx.dst[0];
    if (y.numel() > 0) {
      const bool known = cuda::dispatch_word(dtype_size(x.dtype()), [&](auto tag) {
        using W = cuda::type_of<decltype(tag)>;
        gather_slices_kernel<W><<<cuda::blocks_for(y.numel()), cuda::kThreads, 0, stream>>>(
            static_cast<const W*>(x.raw()), first, outer, want, n, inner, static_cast<W*>(y.raw()));
      });
      if (!known) return unsupported("Unique of ", dtype_name(x.dtype()));
    }
    return cuda::check(cudaGetLastError(), "Unique kernel launch");
  }

  cuda::DeviceScratch scratch_;
};

KILN_REGISTER_KERNEL(KernelImpl{
    .name = "cuda.unique",
    .op = "Unique",
    .backend = Backend::kCuda,
    .priority = 10,
    .supports = reject_fp8,
    .create = [](const OpCall&) -> Result<std::unique_ptr<Kernel>> {
      return std::unique_ptr<Kernel>(std::make_unique<UniqueKernel>());
    },
});

}  // namespace
}  // namespace kiln
