#pragma once
// CUDA runtime access for the core: devices, streams, events, device and pinned memory (cached), copies,
// pointer queries and CUDA graphs. Built against the CUDA runtime when KILN_WITH_CUDA, otherwise every call
// says CUDA is not built in. Every CUDA call is checked; an error names the call.
#include <memory>
#include <string>
#include <vector>

#include "core/caching_allocator.h"
#include "kiln/allocator.h"
#include "kiln/stream.h"
#include "kiln/tensor.h"

namespace kiln::cuda {

struct GpuInfo {
  int index = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  size_t total_memory = 0;
  int multiprocessors = 0;
};

struct RuntimeInfo {
  bool compiled = false;   ///< kiln was built with CUDA
  int driver_version = 0;  ///< e.g. 13000; 0 when no driver
  int runtime_version = 0;
  std::vector<GpuInfo> gpus;
  std::string problem;  ///< why no GPU is usable, in one line
};

RuntimeInfo query_runtime();
/// True when kiln was built with CUDA and at least one GPU answers.
bool gpu_available();

Result<std::unique_ptr<Stream>> create_stream(int device);
Result<std::unique_ptr<Event>> create_event(int device);
/// Plain cudaMalloc/cudaFree on `device`, nothing cached (what the caches below draw from).
Allocator& raw_device_allocator(int device);
/// The process-wide caching allocator of `device` (tracks current and peak bytes and keeps an event log).
/// Free device memory only once the work using it is finished or queued on the stream of the next user.
CachingAllocator& device_allocator(int device);
/// A new cache over `device`'s memory, for one execution context (its blocks are reused in its stream's order).
std::unique_ptr<CachingAllocator> make_device_cache(int device);
/// Page-locked host memory (cudaHostAlloc), cached: transfer buffers for fast asynchronous copies.
Allocator& pinned_allocator();
/// The out-of-memory error for `bytes` asked of `device`: the bytes free and total (cudaMemGetInfo) and what to do.
Status out_of_memory(int device, size_t bytes, std::string_view what);

/// Where a pointer's memory lives: device memory (device.is_cuda()), page-locked host memory, or plain host memory.
struct PointerInfo {
  Device device;
  bool pinned = false;  ///< host memory registered with CUDA (direct asynchronous copies)
};
PointerInfo pointer_info(const void* ptr);

/// Copies between host and device tensors of the same dtype and element count (contiguous). Without a stream it
/// returns once the data has landed (work on any stream may then use it); with one it is queued on that stream.
Status copy(const Tensor& src, Tensor& dst, Stream* stream = nullptr);
/// `bytes` from `src` to `dst` (either on host or device) queued on `stream` (cudaMemcpyAsync).
Status copy_async(void* dst, const void* src, size_t bytes, Stream& stream);
/// Runs `fn(arg)` on a host thread once the work queued on `stream` so far is done (cudaLaunchHostFunc).
Status launch_host_func(Stream& stream, void (*fn)(void*), void* arg);
/// Makes `stream` wait for `event` (recorded on another stream) without blocking the host.
Status stream_wait(Stream& stream, Event& event);

/// True while `stream` is being captured into a CUDA graph.
bool is_capturing(Stream& stream);

/// A CUDA graph captured from the work queued on a stream, ready to replay.
class GraphExec {
 public:
  virtual ~GraphExec() = default;
  /// Replays the captured work on `stream`.
  virtual Status launch(Stream& stream) = 0;
};
/// Starts capturing `stream`: work queued on it is recorded, not run.
Status begin_capture(Stream& stream);
/// Ends the capture and instantiates the graph; an error (the capture is discarded) when it was invalidated.
Result<std::unique_ptr<GraphExec>> end_capture(Stream& stream);

}  // namespace kiln::cuda
