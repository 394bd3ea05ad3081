#pragma once
// `kiln exec` on a GPU engine: inputs staged in pinned memory, H2D / GPU compute / D2H timed with CUDA events,
// CUDA graphs (--useCudaGraph), several contexts on several streams (--streams), trtexec's report.
#include <memory>
#include <string>
#include <vector>

#include "exec.h"
#include "run_inputs.h"
#include "runtime/engine.h"

namespace kiln::cli {

/// The error line and `&&&& FAILED kiln exec`; returns the exit code 1.
int exec_fail(const Status& s);
/// "what: min = .. ms, max = .., mean = .., median = .., percentile(p%) = .." over `v` (not empty).
std::string stats_line(const char* what, std::vector<double> v, const std::vector<double>& percentiles);
/// Runs the inference part of `kiln exec` for an engine on the GPU, with `inputs` on the host; prints the
/// report and writes the exports. Returns the exit code.
int run_exec_cuda(const ExecOptions& opt, const std::shared_ptr<const EngineImpl>& engine, const NamedTensors& inputs);

}  // namespace kiln::cli
