#pragma once
// A pass: a named graph rewrite the pass manager runs, logs and can switch off by name. Passes report
// what they changed ("fused 'conv1' + 'relu1'") and, for fusions, what they refused and why.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace kiln {

/// The builder's hook: OK when the target backend has a kernel other than the reference one for `node`
/// (a fusion is only made where it can run fast), else the reason.
using BackendHook = std::function<Status(const Node& node)>;

/// The precisions layers may run in besides float32 (BuilderConfig's flags) and the layers the user pinned.
struct PrecisionOptions {
  bool fp16 = false;
  bool bf16 = false;
  bool tf32 = false;  ///< matrix kernels may round inputs to TF32 (CUDA); the CPU computes in float32
  /// Layer name -> float32, float16 or bfloat16. A fused layer follows a pin on any of its parts.
  std::map<std::string, DataType> pinned;
  bool prefer_fp16 = false;  ///< try float16 before bfloat16 (GPUs); otherwise bfloat16 first (CPUs)
  bool any() const { return fp16 || bf16 || !pinned.empty(); }
};

/// Layout choices for the target backend.
struct LayoutOptions {
  /// layout-nhwc: 2-D convolutions and pooling channels-last where the backend has such kernels (the builder sets it
  /// for CUDA; other backends may ask for it, their hook deciding).
  bool channels_last = false;
  /// Only layers in float16 / bfloat16 (the CUDA builder: cuDNN's NHWC gain is its tensor-core kernels; float32 has
  /// none, and NCHW stays its faster layout).
  bool reduced_precision_only = false;
  /// Only layers whose input batch (dim 0) is at least this (a dynamic batch counts as large). cuDNN's NHWC
  /// kernels lose at small batches: ResNet-50 FP16 on an H100 took 2.89 ms NHWC against 1.20 ms NCHW at batch 1,
  /// and 4.59 ms against 12.67 ms at batch 128.
  int64_t min_batch = 0;
  /// Pooling goes channels-last only where its input already is (it joins an NHWC region, never starts one), and a
  /// convolution with fewer than 8 input channels per group (a stem: oneDNN runs those in NCHW) starts one only
  /// when every reader of its output is a convolution that goes channels-last, or a pooling layer whose readers all
  /// are (ResNet's stem and max pool): either alone would cost a transpose in and out for nothing (the CPU builder
  /// sets it).
  bool pooling_joins_only = false;
  /// layout-blocked: 2-D float32 convolutions on activations in blocks of this many channels (8: oneDNN's nChw8c;
  /// 16: nChw16c, its jit convolutions' own layout on AVX-512) where the backend has such kernels; 0: off.
  int64_t channel_block = 0;
  /// matmul-weights-nk: a MatrixMultiply's constant [K, N] weights stored as [N, K] (the CPU builder sets it:
  /// oneDNN's AVX2 GEMM reads them so up to twice as fast).
  bool matmul_weights_nk = false;
};

class PassContext {
 public:
  PassContext(Graph& graph, BackendHook backend, std::string pass, PrecisionOptions precision = {},
              LayoutOptions layout = {})
      : graph_(graph),
        backend_(std::move(backend)),
        pass_(std::move(pass)),
        precision_(std::move(precision)),
        layout_(layout) {}

  Graph& graph() { return graph_; }
  /// Whether the target backend runs `node` (always OK without a hook).
  Status backend_accepts(const Node& node) const { return backend_ ? backend_(node) : Status::ok(); }
  const PrecisionOptions& precision() const { return precision_; }
  const LayoutOptions& layout() const { return layout_; }
  /// Records a change (logged at INFO with the pass's name).
  void applied(std::string what);
  /// Records a rewrite the pass considered and did not make, with the reason (logged at verbose).
  void refused(std::string what);
  const std::vector<std::string>& changes() const { return applied_; }
  const std::vector<std::string>& refusals() const { return refused_; }

 private:
  Graph& graph_;
  BackendHook backend_;
  std::string pass_;
  PrecisionOptions precision_;
  LayoutOptions layout_;
  std::vector<std::string> applied_, refused_;
};

struct Pass {
  std::string name;     ///< "conv-activation": what --disable-pass takes
  std::string summary;  ///< one line for --help and docs
  std::function<Status(PassContext&)> run;
};

}  // namespace kiln
