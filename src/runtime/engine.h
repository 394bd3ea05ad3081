#pragma once
// The runtime: a deserialized engine and the execution contexts that run it.
// One engine, many contexts (one per thread or stream); a context owns its kernel instances and its
// activation memory. The engine holds a flat plan per graph: steps with input and output slots.
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/cuda_runtime.h"
#include "graph/engine_format.h"
#include "graph/graph.h"
#include "kernels/registry.h"
#include "runtime/memory_plan.h"

namespace kiln {

class ContextImpl;
struct GraphPlan;

/// A value at run time: a tensor, a sequence of tensors, or an optional of either (maybe empty).
struct RuntimeValue {
  ValueKind kind = ValueKind::kTensor;
  bool present = true;        ///< false: an empty optional
  Tensor tensor;              ///< a tensor (or the tensor an optional holds)
  std::vector<Tensor> items;  ///< a sequence's elements

  static RuntimeValue of(Tensor t) { return {ValueKind::kTensor, true, std::move(t), {}}; }
  static RuntimeValue sequence(std::vector<Tensor> items) { return {ValueKind::kSequence, true, {}, std::move(items)}; }
};

/// One node of a plan: its kernel (nullptr for a host op the runtime runs itself), its value slots
/// (-1 for a skipped optional input) and, for control flow, one plan per subgraph.
struct PlanStep {
  Node* node = nullptr;
  const KernelImpl* impl = nullptr;
  std::string tactic;  ///< the variant of `impl` the builder chose (empty: its default)
  int id = 0;          ///< index of the step's kernel instance in a context (unique across all plans of an engine)
  std::vector<int> in, out;
  std::vector<GraphPlan> subplans;
  /// The kernel's build-time data (a view into the engine's prepared section), undefined when none.
  Tensor prepared;
};

/// The flat plan of one graph: steps in execution order over numbered value slots.
struct GraphPlan {
  const Graph* graph = nullptr;
  std::vector<PlanStep> steps;
  int slot_count = 0;
  std::unordered_map<const Value*, int> slot_of;
  std::vector<const Value*> value_of;          ///< slot -> value
  std::vector<int> input_slots, output_slots;  ///< in the graph's order
  std::vector<std::pair<int, Tensor>> constants;
  std::vector<std::vector<int>> release;  ///< per step: intermediate slots whose last reader it is
  std::vector<int> last_reader;           ///< per slot: the last step reading it (-1: none)
  std::vector<char> read_by_host;         ///< per slot: a host step reads it (it may be aliased)
};

/// The values of one graph during a run, by slot.
class Scope {
 public:
  explicit Scope(const GraphPlan& plan) : plan_(&plan), slots_(static_cast<size_t>(plan.slot_count)) {}
  const GraphPlan& plan() const { return *plan_; }
  /// The value of `v`, or nullptr when it has none (yet).
  const RuntimeValue* get(const Value* v) const;
  void put(const Value* v, RuntimeValue value);
  RuntimeValue* at(int slot) { return slots_[slot].has ? &slots_[slot].value : nullptr; }
  void put(int slot, RuntimeValue value) { slots_[slot] = {std::move(value), true}; }
  void erase(int slot) { slots_[slot] = {}; }

 private:
  struct Slot {
    RuntimeValue value;
    bool has = false;
  };
  const GraphPlan* plan_;
  std::vector<Slot> slots_;
};

class EngineImpl : public std::enable_shared_from_this<EngineImpl> {
 public:
  /// Reads a serialized engine; a corrupt file, another format version or a kernel this kiln lacks
  /// is an error that says to rebuild the engine. `storage`, when given, keeps `bytes` alive and the
  /// constants use them in place; otherwise the weights are copied once.
  static Result<std::shared_ptr<const EngineImpl>> deserialize(std::string_view bytes,
                                                               std::shared_ptr<const void> storage = nullptr);
  /// Maps an engine file read-only and reads it; constants are used in place in the mapping.
  static Result<std::shared_ptr<const EngineImpl>> load_file(const std::string& path);

  const Graph& graph() const { return *graph_; }
  const EngineHeader& header() const { return header_; }
  std::vector<std::string> input_names() const;
  std::vector<std::string> output_names() const;
  /// One line per node: name, op, kernel.
  std::string inspect() const;
  Result<std::unique_ptr<ContextImpl>> create_execution_context() const;

  const GraphPlan& plan() const { return plan_; }
  /// What the optimizer did when the engine was built (JSON: applied and refused rewrites), or "".
  const std::string& optimizer_report() const { return optimizer_; }
  /// Steps in all plans (the number of kernel instances a context holds).
  int step_count() const { return step_count_; }

  /// Where the engine runs: the CPU, or the GPU it was built for (the header's backend "cuda").
  Device device() const { return device_; }
  /// True for a step of a GPU engine whose kernel runs on the host (no CUDA kernel accepted its node):
  /// its inputs are copied to the host and its outputs back to the GPU as they are needed.
  bool is_host_fallback(const PlanStep& step) const {
    return device_.is_cuda() && step.impl && step.impl->backend != Backend::kCuda;
  }
  /// Host-fallback steps in all plans.
  int host_fallback_count() const { return host_fallbacks_; }
  /// The top-level constants on the engine's GPU, uploaded once on first use (thread-safe), by slot.
  Result<const std::vector<std::pair<int, Tensor>>*> device_constants() const;

 private:
  EngineHeader header_;
  std::unique_ptr<Graph> graph_;
  std::string optimizer_;
  Tensor prepared_;  ///< the prepared section that steps' `prepared` views point into
  GraphPlan plan_;
  int step_count_ = 0;
  Device device_;
  int host_fallbacks_ = 0;
  mutable std::mutex upload_mu_;
  mutable bool uploaded_ = false;
  mutable std::vector<std::pair<int, Tensor>> device_constants_;
};

/// Activation memory of a context for its current input shapes.
struct MemoryReport {
  size_t planned_bytes = 0;    ///< the activation block (intermediates placed by liveness)
  size_t unplanned_bytes = 0;  ///< the same intermediates, each in its own allocation
  int planned_values = 0;      ///< intermediates in the block
  int in_place_values = 0;     ///< of them, outputs placed over an input they replace (KernelImpl::in_place_input)
  int dynamic_values = 0;      ///< intermediates allocated while running (shapes known only then, or host ops)
};

class ContextImpl {
 public:
  explicit ContextImpl(std::shared_ptr<const EngineImpl> engine);
  ~ContextImpl();
  ContextImpl(const ContextImpl&) = delete;
  ContextImpl& operator=(const ContextImpl&) = delete;
  /// Binds a tensor to a graph input; dtype and rank must match, static dims must agree. A host tensor is
  /// not copied when it is contiguous: keep its memory alive and unchanged until execute returns (on a GPU
  /// engine, until the run's input-consumed event). A GPU engine also takes a tensor on its GPU, used in place.
  Status set_input(const std::string& name, Tensor value);
  /// Binds a sequence or optional (or a tensor) to a graph input of that kind.
  Status set_input_value(const std::string& name, RuntimeValue value);
  /// Binds a caller's tensor to a tensor graph output: runs write that output into it (in place where the step
  /// writing it runs where the tensor lives, else copied there at the end of the run). dtype and rank must match
  /// and static dims agree; it must be contiguous, on the host or on the engine's GPU, and each run must compute
  /// its shape. Keep it alive while bound; an undefined tensor unbinds the output.
  Status set_output(const std::string& name, Tensor value);
  /// Runs every step; shapes are planned once per set of input shapes. Outputs are host tensors when it returns.
  /// A GPU engine given a CPU stream runs on a stream of the context's own.
  Status execute(Stream& stream = cpu_stream());
  /// Queues every step on `stream`. On the CPU this is execute. On a GPU engine it returns once the work is
  /// queued (steps that need host data wait for it); outputs may then be GPU tensors, valid once the stream
  /// reaches them. `input_consumed` is recorded once the inputs may be refilled.
  Status enqueue(Stream& stream, Event* input_consumed = nullptr);
  /// Captures one enqueue on `stream` into a CUDA graph (the inputs must be bound as GPU tensors, which the
  /// graph reads in place). Replaying it recomputes the outputs this context holds; run nothing else on the
  /// context while the graph is used. An error names the step that cannot be captured (a host step).
  Result<std::unique_ptr<cuda::GraphExec>> capture_graph(Stream& stream);
  /// The first step that cannot run inside a CUDA graph (a host op or host-fallback step), or "".
  std::string capture_blocker() const;
  /// The device memory cache of a GPU context (its activation block, intermediates, input copies), or null.
  CachingAllocator* device_cache() const { return device_cache_.get(); }
  Result<Tensor> output(const std::string& name) const;
  /// Any output, including sequences and optionals.
  Result<RuntimeValue> output_value(const std::string& name) const;

  /// Called after every step of the top-level plan with the layer's name, its kernel and its time.
  using LayerTimer = std::function<void(std::string_view layer, std::string_view kernel, double ms)>;
  void set_layer_timer(LayerTimer timer) { layer_timer_ = std::move(timer); }
  /// Where intermediates and outputs are allocated (the CPU allocator unless replaced); must outlive the context.
  void set_allocator(Allocator& allocator) { allocator_ = &allocator; }
  /// Threads every CPU kernel uses while this context runs (0: the calling thread's OpenMP count). The calling
  /// thread's count is restored after each run.
  void set_threads(int n) { threads_ = n; }
  int threads() const { return threads_; }
  /// Runs in `bytes` of caller memory (64-byte aligned) instead of a block of its own; null gives it back.
  void set_activation_memory(void* data, size_t bytes);
  /// Plans the activation memory for the bound inputs' shapes (or the engine's static ones) and reports it.
  Result<MemoryReport> memory_report();
  /// Per slot of the top-level plan, the type and shape planned for the current input shapes (empty before any).
  /// What the step's kernel instance reports it runs (a library's implementation), once it has run.
  std::string kernel_detail(const PlanStep& step) const {
    return kernels_[step.id] ? kernels_[step.id]->detail() : std::string();
  }
  std::vector<TensorDesc> planned_descs() const { return spec_ ? spec_->desc : std::vector<TensorDesc>{}; }

  /// For host ops: runs subgraph `sub` of `step` with `args` as its inputs and the enclosing `scope` for its captures.
  Result<std::vector<RuntimeValue>> call_subgraph(const PlanStep& step, size_t sub, const Scope& scope,
                                                  std::vector<RuntimeValue> args, Stream& stream, int depth);

 private:
  // The top-level plan specialized to one set of input shapes: static calls and arena offsets.
  struct Specialized {
    std::vector<Dims> input_dims;
    std::vector<OpCall> calls;     ///< per step; schema == nullptr: the step infers shapes while running
    std::vector<int64_t> offset;   ///< per slot: offset in the activation block, -1 when not in it
    std::vector<TensorDesc> desc;  ///< per slot
    MemoryReport memory;
  };
  Status specialize(const std::vector<Dims>& input_dims);
  Status run_plan(const GraphPlan& plan, Scope& scope, Stream& stream, int depth);
  Status run_kernel(const PlanStep& step, Scope& scope, Stream& stream);
  Status run_static(const PlanStep& step, const OpCall& call, Scope& scope, Stream& stream);
  Status run_and_store(Kernel& kernel, const PlanStep& step, const OpCall& call, std::vector<Tensor> src,
                       std::vector<Tensor> dst, Scope& scope, Stream& stream);
  Result<Kernel*> kernel_for(const PlanStep& step);
  /// The caller's tensor bound to `slot` of `plan` (a top-level graph output), when the step writing it on
  /// `where` can write into it directly; null otherwise. An error when its shape differs from `desc`.
  Result<Tensor*> bound_output(const GraphPlan& plan, int slot, const TensorDesc& desc, Device where);
  /// Puts each bound output into its tensor (copied when a step wrote it elsewhere) after a run.
  Status store_bound_outputs(Stream& stream);
  void match_kernel_threads();
  // GPU engines (device_transfer.cpp): values move between host and device as steps need them.
  bool on_device(const PlanStep& step) const { return device_.is_cuda() && step.impl->backend == Backend::kCuda; }
  Status to_device(RuntimeValue& value, Stream& stream);
  Status to_host(RuntimeValue& value, Stream& stream);
  /// The tensor of `value` where a step needs it (on the GPU or the host): moved there first, and the moved
  /// copy kept in `value` for later readers.
  Result<Tensor> fetch(RuntimeValue& value, bool device, Stream& stream);
  /// Moves every input of a host op to the host (waits for the stream).
  Status inputs_to_host(const PlanStep& step, Scope& scope, Stream& stream);
  /// The graph inputs as scope values on the GPU: device tensors in place, host tensors copied (staged).
  Status upload_inputs(Scope& scope, Stream& stream, bool& all_copied);
  Status prepare_run(Stream& stream);
  Stream& own_stream();

  // Declared first so that it is destroyed last: the tensors below may hold its blocks.
  std::unique_ptr<CachingAllocator> device_cache_;
  std::unique_ptr<Stream> own_stream_;
  std::unique_ptr<Event> done_;  ///< recorded at the end of each GPU run
  void* last_stream_ = nullptr;  ///< the native stream of the last GPU run
  Device device_;
  std::shared_ptr<const EngineImpl> engine_;
  std::vector<std::unique_ptr<Kernel>> kernels_;  ///< by step id
  std::vector<RuntimeValue> inputs_;              ///< by graph input
  std::vector<char> input_set_;
  std::vector<RuntimeValue> outputs_;  ///< by graph output, after a run
  std::vector<char> output_set_;
  std::vector<Tensor> bound_outputs_;  ///< by graph output: the caller's tensors (undefined: none bound)
  std::unique_ptr<Specialized> spec_;
  Tensor own_block_;  ///< the activation block when the caller gave none
  void* user_block_ = nullptr;
  size_t user_block_bytes_ = 0;
  LayerTimer layer_timer_;
  int threads_ = 0;
  int kernel_threads_ = 0;  ///< the CPU thread count the kernels were made under
  Allocator* allocator_ = &cpu_allocator();
};

/// Runs one host op (If, Loop, Scan, sequence and optional ops) in `scope`.
Status run_host_op(ContextImpl& ctx, const PlanStep& step, Scope& scope, Stream& stream, int depth);

}  // namespace kiln
