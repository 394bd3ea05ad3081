// The CUDA entry points of a build without CUDA: each one says so.
#include "core/cuda_runtime.h"

namespace kiln::cuda {
namespace {
Status not_built() { return unsupported("kiln was built without CUDA (rebuild with nvcc on the PATH)"); }
}  // namespace

RuntimeInfo query_runtime() {
  RuntimeInfo info;
  info.problem = "this build of kiln has no CUDA (nvcc was not found when it was configured)";
  return info;
}
bool gpu_available() { return false; }
Result<std::unique_ptr<Stream>> create_stream(int) { return not_built(); }
Result<std::unique_ptr<Event>> create_event(int) { return not_built(); }
Allocator& raw_device_allocator(int) { return cpu_allocator(); }
CachingAllocator& device_allocator(int) {
  static auto* cache = new CachingAllocator(cpu_allocator());
  return *cache;
}
std::unique_ptr<CachingAllocator> make_device_cache(int) { return std::make_unique<CachingAllocator>(cpu_allocator()); }
Allocator& pinned_allocator() { return cpu_allocator(); }
Status out_of_memory(int device, size_t bytes, std::string_view what) {
  return Status(StatusCode::kOutOfMemory, str_cat("out of memory on cuda:", device, ": ", what, " asked for ", bytes,
                                                  " bytes (kiln was built without CUDA)"));
}
PointerInfo pointer_info(const void*) { return {}; }
Status copy(const Tensor&, Tensor&, Stream*) { return not_built(); }
Status copy_async(void*, const void*, size_t, Stream&) { return not_built(); }
Status launch_host_func(Stream&, void (*)(void*), void*) { return not_built(); }
Status stream_wait(Stream&, Event&) { return not_built(); }
bool is_capturing(Stream&) { return false; }
Status begin_capture(Stream&) { return not_built(); }
Result<std::unique_ptr<GraphExec>> end_capture(Stream&) { return not_built(); }

}  // namespace kiln::cuda
