#pragma once
// Kernel selection: every implementation that accepts a node's problem, with each of its tactics, is a
// candidate; above optimization level 0 the candidates are timed (or their times read from the timing
// cache) and the fastest is kept.
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "builder/timing_cache.h"
#include "kernels/registry.h"

namespace kiln {

struct TacticChoice {
  const KernelImpl* impl = nullptr;
  std::string tactic;
  double ms = -1;  ///< measured or cached time; -1 when not timed
};

struct GpuTimer;  // a stream and events to time CUDA candidates with (tactics.cpp)

struct TacticSearch {
  Backend backend = Backend::kCpu;
  int level = 3;                 ///< 0: the first accepted candidate; 1-5: time them, longer at higher levels
  TimingCache* cache = nullptr;  ///< times to reuse and to add to (may be null)
  std::string device;            ///< timing_device(backend), read once per build
  /// Candidates whose workspace (Kernel::workspace_bytes) exceeds this are not chosen; 0: no limit. At
  /// level 0 the first candidate that fits is chosen.
  uint64_t workspace_limit = 0;
  /// Time a node's only candidate too (the builder compares layouts by the sum of the chosen kernels' times).
  bool time_sole_candidate = false;
  /// Measure again, once, each candidate this build measured before (not one a loaded cache gave) and keep the
  /// lower time: the builder's second look at both layouts, so that a burst of another process's work during one
  /// measurement does not decide.
  bool second_pass = false;
  std::unordered_set<std::string> measured;    ///< timing keys this build measured
  std::unordered_set<std::string> remeasured;  ///< of those, measured again in the second pass
  int timed = 0;                  ///< candidates measured so far (the cache counts what it gave: TimingCache::reads)
  double timing_ms = 0;           ///< time spent measuring
  std::shared_ptr<GpuTimer> gpu;  ///< made on the first CUDA candidate timed
};

/// The candidate to run `call` with; an error lists why every implementation rejected it.
/// `log` gets one line per candidate: its time, or why it was rejected or could not be timed.
Result<TacticChoice> choose_kernel(const OpCall& call, TacticSearch& search, std::vector<std::string>& log);

/// What the timing cache keys a candidate by: the problem, the implementation, the tactic and the device.
std::string timing_key(const OpCall& call, const KernelImpl& impl, const std::string& tactic,
                       const std::string& device);

/// The machine times are valid for: "cpu <model name>, <n> threads", or for CUDA "cuda <GPU name>, compute
/// capability <major>.<minor>".
std::string timing_device(Backend backend);

}  // namespace kiln
