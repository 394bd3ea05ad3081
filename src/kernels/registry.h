#pragma once
// Kernel implementations: per op and backend a priority-ordered list. Each implementation accepts
// a problem (an OpCall) or rejects it with a reason; the builder times the accepted ones.
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/stream.h"
#include "kiln/tensor.h"
#include "ops/registry.h"

namespace kiln {

enum class Backend { kRef, kCpu, kCuda };
std::string_view backend_name(Backend backend);  ///< "ref", "cpu", "cuda"
inline constexpr Backend kAllBackends[] = {Backend::kCuda, Backend::kCpu, Backend::kRef};

/// A problem: one op with attributes and input/output types and shapes (dims may be dynamic).
struct OpCall {
  const OpSchema* schema = nullptr;
  const Attrs* attrs = nullptr;
  std::vector<TensorDesc> inputs;
  std::vector<TensorDesc> outputs;
  /// Per input, its value when it is a constant of the engine (alive as long as the kernel), else null:
  /// kernels may prepare such inputs once (reordered weights). Empty when nothing is known.
  std::vector<const Tensor*> constants;
  /// The variant of the implementation to create (one of its `tactics`; empty: its default).
  std::string tactic;
  /// What the implementation's `prepare` made at build time for this node and tactic (stored in the engine,
  /// alive as long as the kernel), or null. Kernels check it still fits before using it.
  const Tensor* prepared = nullptr;
  /// Whether float32 matrix kernels may offer TF32 tactics (inputs rounded to TF32 on tensor cores): the builder
  /// sets it from BuilderConfig's TF32 flag. A tactic chosen that way carries kTf32TacticSuffix, so running an
  /// engine needs no flag.
  bool allow_tf32 = false;

  template <class A>
  const A& attrs_as() const {
    return static_cast<const A&>(*attrs);
  }
  bool has_input(int i) const { return i < static_cast<int>(inputs.size()) && inputs[i].present; }
  const Tensor* constant(int i) const { return i < static_cast<int>(constants.size()) ? constants[i] : nullptr; }
  std::string to_string() const;
};

/// What a kernel runs on: inputs (undefined Tensor for a skipped optional input) and outputs
/// already allocated with their inferred shapes. Kernels read shapes from the tensors.
struct KernelContext {
  const OpCall& call;
  std::vector<Tensor> src;
  std::vector<Tensor> dst;
  Stream& stream;
  Allocator& allocator;  ///< for scratch memory on the kernel's device

  template <class A>
  const A& attrs() const {
    return call.attrs_as<A>();
  }
};

/// An instance of an implementation for one problem; may hold prepared state (primitives, plans).
class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual Status run(KernelContext& ctx) = 0;
  /// What actually runs, once it has run (e.g. the library's implementation name), for logs and the inspector.
  virtual std::string detail() const { return {}; }
  /// Scratch bytes the kernel holds beyond its inputs, outputs and prepared weights (a library's scratchpad,
  /// buffers for layout conversions), known once it has run; the builder's workspace limit compares it.
  virtual size_t workspace_bytes() const { return 0; }
};

using SupportsFn = std::function<Status(const OpCall&)>;
using CreateFn = std::function<Result<std::unique_ptr<Kernel>>(const OpCall&)>;
using RunFn = std::function<Status(KernelContext&)>;
using TacticsFn = std::function<std::vector<std::string>(const OpCall&)>;
/// Build-time preparation of constant inputs (e.g. weights in the library's layout), stored in the engine:
/// bytes, or an undefined tensor when there is nothing to prepare.
using PrepareFn = std::function<Result<Tensor>(const OpCall&)>;
/// The input output 0 may share memory with, for a tactic (KernelImpl::in_place_input); -1: none.
using InPlaceFn = std::function<int(std::string_view tactic)>;
/// An InPlaceFn giving `input` for every tactic.
InPlaceFn in_place(int input);

struct KernelImpl {
  std::string name;  ///< "cpu.onednn.convolution", "ref.convolution"
  std::string op;    ///< the schema name
  Backend backend = Backend::kRef;
  int priority = 0;  ///< higher is tried first within a backend; reference kernels use 0
  SupportsFn supports;
  CreateFn create;
  /// The variants worth timing for a problem (none: only the default); `create` reads `OpCall::tactic`.
  TacticsFn tactics;
  /// Optional: data made once at build time from the call's constants (see OpCall::prepared).
  PrepareFn prepare;
  /// The input whose constant data `prepare` replaces (-1: none). Given a prepared blob that fits, the kernel
  /// never reads that input's data, at creation or run time (its KernelContext::src entry may be undefined; its
  /// dims are in OpCall::inputs). The builder then leaves a constant only such steps read out of the engine.
  int prepared_replaces_input = -1;
  /// For a tactic, the input whose memory output 0 may take (-1, or no function: none): the kernel reads each element
  /// of that input only just before it writes the same element of output 0, and reads no other input from that
  /// memory. The runtime then places output 0 over that input where it is an intermediate of the same size read last
  /// by this step (a residual: ResNet-50 b8's activations 55 -> 49 MiB).
  InPlaceFn in_place_input;
};

/// The suffix of tactics that round float32 inputs to TF32 ("implicit_gemm+tf32", "a21-t...+tf32").
inline constexpr std::string_view kTf32TacticSuffix = "+tf32";
/// Whether `tactic` is a TF32 tactic (ends with kTf32TacticSuffix).
bool is_tf32_tactic(std::string_view tactic);
/// `tactic` without its TF32 suffix (itself when it has none).
std::string strip_tf32_suffix(const std::string& tactic);
/// Whether `call` may get TF32 tactics: allowed by the builder, and every floating input and output is float32.
bool tf32_tactics_allowed(const OpCall& call);

/// A kernel with no state: `run` is called with every context.
CreateFn stateless(RunFn run);
/// Accepts problems whose floating tensors all have one of `dtypes`, and whose other tensors are
/// integer or bool; names the offending tensor otherwise.
Status require_float_dtypes(const OpCall& call, std::initializer_list<DataType> dtypes);
/// Accepts every problem except those with fp8 tensors (which have no kernels yet): for data movement.
Status reject_fp8(const OpCall& call);
/// Accepts problems where every present input and output has one of `dtypes`.
Status require_dtypes(const OpCall& call, std::initializer_list<DataType> dtypes);

/// Wraps an float32 implementation so it also takes float16/bfloat16 problems: inputs are widened to
/// float32, the kernel runs, outputs are rounded back. Used by the reference backend.
KernelImpl with_float32_compute(KernelImpl impl);

class KernelRegistry {
 public:
  static KernelRegistry& global();
  bool add(KernelImpl impl);
  /// Implementations of `op` on `backend`, highest priority first.
  std::vector<const KernelImpl*> find(std::string_view op, Backend backend) const;
  std::vector<const KernelImpl*> all() const;
  /// The first implementation on `backend` that accepts `call`, or an error listing every reason.
  Result<const KernelImpl*> select(const OpCall& call, Backend backend) const;

 private:
  std::vector<std::unique_ptr<KernelImpl>> impls_;
};

/// Registers at load time: `KILN_REGISTER_KERNEL(KernelImpl{...});`
#define KILN_REGISTER_KERNEL(...) \
  static const bool KILN_CONCAT(kiln_kernel_registered_, __LINE__) = ::kiln::KernelRegistry::global().add(__VA_ARGS__)

/// Pads `inputs` and `src` with absent entries up to the schema's input count, so kernels may test
/// `ctx.src[i].defined()` for every optional input the op declares.
void pad_optional_inputs(const OpSchema& schema, std::vector<TensorDesc>& inputs, std::vector<Tensor>& src);

/// Runs `call` once on `backend` with the selected implementation (for tests, the doctor, the harness).
Status run_once(const OpCall& call, Backend backend, std::vector<Tensor> src, std::vector<Tensor>& dst);

}  // namespace kiln
