#pragma once
// oneDNN (2.x API) glue for CPU kernels: the engine, a per-thread stream, descriptors from
// kiln tensors, and error translation.
#include <dnnl.hpp>
#include <optional>

#include "kiln/tensor.h"

namespace kiln::onednn {

dnnl::engine& engine();
/// A stream for the calling thread.
dnnl::stream& stream();

std::optional<dnnl::memory::data_type> to_dnnl(DataType dtype);
dnnl::memory::dims to_dims(const Dims& dims);
/// Row-major descriptor; rank 0 becomes a 1-element 1-D tensor.
dnnl::memory::desc plain_desc(const Dims& dims, DataType dtype);
/// A channels-last activation [N, H, W, C] as oneDNN sees it: logical dims [N, C, H, W] over NHWC memory.
dnnl::memory::desc nhwc_desc(const Dims& nhwc, DataType dtype);
/// Descriptor with the tensor's own strides.
dnnl::memory::desc strided_desc(const Tensor& t);
dnnl::memory memory(const dnnl::memory::desc& desc, const Tensor& t);

/// Scratch memory of the calling thread, 64-byte aligned, at least `bytes` long, for layout conversions that
/// live only while one kernel runs (`slot` 0, 1 and 2 are separate buffers). Kernels of one execution context run
/// one after another on one thread, so they share these buffers instead of each keeping its own: memory is the
/// largest conversion, not the sum. Valid until the next call with the same slot on this thread.
void* scratch(size_t bytes, int slot);

/// True for the element types oneDNN's CPU engine computes (f32, bf16 where the CPU has it, f16 never here).
bool supports_dtype(DataType dtype);

/// Runs `f`, turning a dnnl::error into a Status that names `what`.
template <class F>
Status guard(const char* what, F&& f) {
  try {
    f();
    return Status::ok();
  } catch (const dnnl::error& e) {
    return Status(StatusCode::kInternal, str_cat("oneDNN ", what, " failed: ", e.what()));
  }
}

}  // namespace kiln::onednn
