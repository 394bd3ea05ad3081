#pragma once
/// The runtime API (TensorRT's IRuntime / ICudaEngine / IExecutionContext in kiln style):
///
///   kiln::Runtime runtime;
///   auto engine = runtime.load_engine_file("model.kengine");        // Result<std::unique_ptr<Engine>>
///   auto ctx = (*engine)->create_execution_context();                // one per thread or stream
///   ctx->set_input_shape("image", {1, 3, 224, 224});                 // for dynamic dims
///   ctx->set_tensor_address("image", input_ptr);                     // bound by address, not copied
///   ctx->set_tensor_address("scores", output_ptr);
///   ctx->enqueue(stream);                                            // or execute()
///
/// It depends only on kiln's core headers and libraries (kiln::runtime): a program that only runs
/// engines links no builder, ONNX or protobuf code. Every call that can fail returns a Status whose
/// message names the tensor and says what to do.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/allocator.h"
#include "kiln/dims.h"
#include "kiln/dtype.h"
#include "kiln/status.h"
#include "kiln/stream.h"

namespace kiln {

class EngineImpl;  // internal (src/runtime)
class ContextImpl;

/// Whether a name is one of the engine's inputs or outputs.
enum class TensorIOMode { kNone, kInput, kOutput };

/// How much an engine says about its layers (BuilderConfig::set_profiling_verbosity).
enum class ProfilingVerbosity { kLayerNamesOnly, kNone, kDetailed };

/// The range of shapes an input accepts (an optimization profile): min <= opt <= max per dim.
struct ShapeRange {
  Dims min, opt, max;
};

/// Receives the time of every layer after each run of a context it is set on (TensorRT's IProfiler).
class Profiler {
 public:
  virtual ~Profiler() = default;
  /// Called once per top-level layer per run, in execution order; `layer` is valid during the call only.
  virtual void report_layer_time(const char* layer, float ms) noexcept = 0;
};

/// Gives memory for outputs whose size is known only once the run computed them (data-dependent
/// shapes such as NMS results; TensorRT's IOutputAllocator).
class OutputAllocator {
 public:
  virtual ~OutputAllocator() = default;
  /// Returns memory of at least `bytes` for output `name` (`current` is what it returned last time,
  /// or nullptr); nullptr fails the run with an error naming the output.
  virtual void* reallocate_output(const char* name, void* current, uint64_t bytes, uint64_t alignment) noexcept = 0;
  /// The output's shape in this run, after its values were written.
  virtual void notify_shape(const char* name, const Dims& dims) noexcept = 0;
};

class ExecutionContext;

/// A deserialized engine: read-only, shared by any number of execution contexts.
class Engine {
 public:
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Inputs first (in network order), then outputs.
  int num_io_tensors() const;
  /// The name of I/O tensor `index`, or an empty view when `index` is out of range.
  std::string_view io_tensor_name(int index) const;
  TensorIOMode tensor_io_mode(std::string_view name) const;
  /// Element type of an input or output; an error names the unknown tensor and lists the known ones.
  Result<DataType> tensor_dtype(std::string_view name) const;
  /// Shape as built: kDynamicDim (-1) for dims known only at run time.
  Result<Dims> tensor_shape(std::string_view name) const;
  /// The optimization profile of a dynamic input (min/opt/max); an error when it was built without one.
  Result<ShapeRange> profile_shape(std::string_view input) const;
  /// Top-level layers (the profiler reports this many per run).
  int num_layers() const;
  /// One line per layer: "name" (kLayerNamesOnly), "name (Op): kernel" (kDetailed), nothing (kNone).
  std::string layer_information() const;
  ProfilingVerbosity profiling_verbosity() const;

  /// A new context with its own kernel instances and bindings; use one per thread or stream.
  Result<std::unique_ptr<ExecutionContext>> create_execution_context() const;

 private:
  friend class Runtime;
  struct State;
  explicit Engine(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

/// Runs an engine with the shapes and addresses set on it. Not thread-safe: one context per thread.
class ExecutionContext {
 public:
  ~ExecutionContext();
  ExecutionContext(const ExecutionContext&) = delete;
  ExecutionContext& operator=(const ExecutionContext&) = delete;

  /// The shape of the next runs for input `name`: the rank, every static dim and the profile's
  /// min/max must agree; the error names the input and the shape it accepts.
  Status set_input_shape(std::string_view name, const Dims& dims);
  /// Binds an input or output to memory by address. On the CPU inputs are read in place. An engine built
  /// for CUDA takes GPU addresses (read and written in place) or host addresses (inputs copied to the GPU
  /// through pinned staging, outputs copied back); which one is asked of CUDA (cudaPointerGetAttributes).
  /// `capacity_bytes` (optional, 0: unknown) lets the run check the memory is large enough.
  /// The memory must stay valid until the run that uses it has finished.
  Status set_tensor_address(std::string_view name, void* address, size_t capacity_bytes = 0);
  /// The address bound to `name`, or nullptr.
  void* tensor_address(std::string_view name) const;
  /// For outputs whose size is known only after the run; takes precedence over a bound address.
  /// `allocator` (nullptr removes it) must outlive the context's runs.
  Status set_output_allocator(std::string_view name, OutputAllocator* allocator);
  /// Inputs: the shape set (or the static shape). Outputs: the shape of the last run, or the static
  /// shape before any run; an error when it is not known yet.
  Result<Dims> tensor_shape(std::string_view name) const;

  /// Per-layer times of every run go to `profiler` (nullptr: none); it must outlive the context's runs.
  void set_profiler(Profiler* profiler);
  Profiler* profiler() const;
  /// Where the run allocates intermediates (nullptr: the default: the CPU allocator, or on a GPU the
  /// context's own caching allocator); it must be an allocator for the engine's device and outlive the context.
  Status set_allocator(Allocator* allocator);

  /// Threads every CPU kernel of this context's runs uses, oneDNN's and kiln's own (0, the default: the calling
  /// thread's OpenMP count, omp_get_max_threads()). The calling thread's count is the same after a run.
  Status set_threads(int threads);
  int threads() const;

  /// Runs once and returns when the outputs are written (a GPU engine runs on a stream of the context's own).
  Status execute();
  /// Runs on `stream`, a CPU stream for CPU engines and a CUDA stream for engines built for CUDA.
  /// The CPU runtime is synchronous: the outputs are written when it returns. On a GPU the work is queued
  /// and enqueue returns (layers that run on the host wait for their inputs); the outputs are written once
  /// the stream gets there. `input_consumed` (optional) is recorded on the stream once the inputs may be refilled.
  Status enqueue(Stream& stream, Event* input_consumed = nullptr);

 private:
  friend class Engine;
  struct State;
  explicit ExecutionContext(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

/// Turns serialized engines (from Builder::build_serialized or `kiln exec --saveEngine`) into engines.
class Runtime {
 public:
  Runtime() = default;
  /// A truncated, corrupt or other-version engine is an error that says to rebuild it from the model.
  Result<std::unique_ptr<Engine>> deserialize_engine(const void* data, size_t size) const;
  Result<std::unique_ptr<Engine>> deserialize_engine(std::string_view bytes) const;
  /// Reads and deserializes an engine file; errors name the file.
  Result<std::unique_ptr<Engine>> load_engine_file(const std::string& path) const;
};

}  // namespace kiln
