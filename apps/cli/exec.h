#pragma once
// `kiln exec`: builds (or loads) an engine, runs it with random or given inputs and reports throughput and
// latency the way trtexec does.
#include <string>
#include <vector>

namespace kiln::cli {

struct ExecOptions {
  std::string onnx, load_engine, save_engine;
  std::vector<std::string> shapes;       ///< "name:2x3x224x224" for inputs with dynamic dims
  std::vector<std::string> load_inputs;  ///< "name:file.pb" (an ONNX TensorProto)
  /// An optimization profile for dynamic inputs when building ("name:1x3x224x224" each; all three per input).
  std::vector<std::string> min_shapes, opt_shapes, max_shapes;
  int iterations = 10;    ///< run at least this many times
  double duration_s = 3;  ///< and for at least this long
  double warm_up_ms = 200;
  int avg_runs = 10;  ///< iterations averaged per reported line with --verbose timings
  std::vector<double> percentiles{90, 95, 99};
  std::string export_output, export_times;
  int threads = 0;  ///< CPU threads (0: OpenMP's default)
  int optimization_level = 3;
  std::string timing_cache;
  std::vector<std::string> disable_passes;  ///< optimizer passes to skip by name ("all": no optimization)
  std::string dump_graph;                   ///< a folder for the graph before and after each pass
  bool fp16 = false, bf16 = false;
  bool tf32 = false, no_tf32 = false;         ///< TF32 is on unless --noTF32 (as in trtexec); --tf32 says so explicitly
  std::vector<std::string> layer_precisions;  ///< "layer:fp16" (trtexec's --layerPrecisions)
  std::string mem_pool_size;                  ///< "workspace:64M" (trtexec's --memPoolSize; MiB without a suffix)
  bool dump_profile = false;
  std::string export_profile, export_layer_info;
  std::string external_data_root;
  std::string device;                 ///< "cuda" or "cpu"; empty: cuda when a GPU answers and kiln has CUDA, else cpu
  bool no_data_transfers = false;     ///< GPU: leave out the host-device copies of inputs and outputs
  bool use_cuda_graph = false;        ///< GPU: capture one inference into a CUDA graph and replay it
  bool separate_profile_run = false;  ///< GPU: time layers in runs of their own, not in the timed runs
  int streams = 1;                    ///< GPU: contexts running at once, each on its own stream
};

int run_exec(const ExecOptions& opt);

}  // namespace kiln::cli
