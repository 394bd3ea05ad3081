#pragma once
// One op run through the builder and the runtime: a one-node graph (tensors as graph inputs, the values the
// op's shapes depend on as constants) built for a backend, optionally on a pinned implementation and tactic,
// and run by an execution context. The op harness, the op unit tests and `kiln doctor` run kernels this way.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runner/graph_runner.h"

namespace kiln {

struct OpSpec {
  std::string op;                ///< schema name
  const Attrs* attrs = nullptr;  ///< copied into the graph
  std::vector<Tensor> inputs;    ///< host tensors; an undefined one is a skipped optional input
  Backend backend = Backend::kCpu;
  std::optional<KernelPin> pin;  ///< the implementation and tactic to run (none: the builder's first choice)
  /// Float32 problems may use TF32 tactics (a builder with TF32 on): candidates list them, a pin may name one.
  bool allow_tf32 = false;
  /// Inputs made constants of the graph besides the op's value inputs (which always are): kernels then see
  /// them as build-time constants (prepared weights).
  std::vector<int> constant_inputs;
  std::string node_name = "op";
};

/// The implementations of one backend that accept the op's node as the builder sees it.
struct OpCandidates {
  struct Accepted {
    const KernelImpl* impl;
    std::vector<std::string> tactics;  ///< what it offers beyond its default (empty: only the default)
  };
  std::vector<Accepted> accepted;
  std::string rejected;  ///< one "\n  name: reason" per rejecting implementation
};

class OpRunner {
 public:
  /// Builds the op's engine (no optimizer, no timing) and a context with the inputs bound (on a GPU engine
  /// they are copied to the GPU once). Errors: bad spec, shape inference, or no (pinned) kernel accepting it.
  static Result<OpRunner> build(const OpSpec& spec);
  /// The implementations on `backend` that accept the op's node (with their tactics), and why the others reject it.
  static Result<OpCandidates> candidates(const OpSpec& spec, Backend backend);

  size_t output_count() const { return outputs_.size(); }
  /// The node's outputs as built (types; dims known before the run).
  const std::vector<TensorDesc>& output_descs() const { return output_descs_; }
  /// Binds output `i` to `t`: runs write into it. A host tensor given to a GPU engine is copied to the GPU with its
  /// contents (e.g. poison that shows elements a kernel skips) and the copy is bound.
  Status set_output(size_t i, const Tensor& t);
  /// Runs the engine (on a GPU on the context's own stream, waited for).
  Status run() { return runner_.run(); }
  /// The outputs of the last run as host tensors.
  Result<std::vector<Tensor>> outputs() const;
  /// Mean microseconds of one run over `iters` runs after a warm-up run, each queued and waited for (on a
  /// GPU on a stream of the runner's own; inputs and bound outputs stay on the GPU).
  Result<double> time_us(int iters);
  /// The kernel the builder chose for the node: "impl" or "impl[tactic]".
  std::string kernel() const;
  GraphRunner& runner() { return runner_; }

 private:
  OpRunner() = default;
  GraphRunner runner_;
  std::vector<std::string> outputs_;
  std::vector<TensorDesc> output_descs_;
  std::vector<Tensor> kept_;  ///< device copies of inputs and bound outputs, alive while bound
  std::unique_ptr<Stream> stream_;
};

/// Builds and runs `spec` once: the outputs as host tensors, or the error of building or running.
Result<std::vector<Tensor>> run_op(const OpSpec& spec);

}  // namespace kiln
