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
Allocator& device_allocator(int) { return cpu_allocator(); }
Status copy(const Tensor&, Tensor&, Stream*) { return not_built(); }

}  // namespace kiln::cuda
