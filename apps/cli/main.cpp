// The `kiln` command.
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>

#include "compare.h"
#include "doctor.h"
#include "exec.h"
#include "inspect.h"
#include "kiln/logger.h"
#include "kiln/version.h"
#include "openmp_policy.h"
#include "train.h"

namespace {

// glibc serves a freed large block's size from its heap afterwards (its mmap threshold rises with every such free,
// up to 32 MiB), and a heap keeps what it was given: an engine build's weights, prepared weights and timing buffers
// stayed in the process (ResNet-50 b8: peak RSS 654 MB). Blocks of 1 MiB and more always come from and go back to
// the system here: peak 399 MB, same speed (the runtime allocates its activations once). A MALLOC_MMAP_THRESHOLD_
// in the environment wins.
void return_large_blocks_to_the_system() {
  if (!std::getenv("MALLOC_MMAP_THRESHOLD_")) mallopt(M_MMAP_THRESHOLD, 1 << 20);
}

int run(int argc, char** argv) {
  CLI::App app{"kiln: a deep-learning system for NVIDIA GPUs (primitives, optimizer and runtime, studio, modules)"};
  app.require_subcommand(0, 1);
  bool show_version = false, verbose_log = false;
  app.add_flag("--version", show_version, "print kiln's version and exit");
  app.add_flag("--verbose", verbose_log, "log everything kiln does (kernel choices, folding, rejections)");
  auto* doctor = app.add_subcommand(
      "doctor", "check the install: versions, backends, GPUs, and an MNIST-class network on every backend");
  kiln::cli::DoctorOptions doctor_opt;
  doctor->add_flag("-v,--verbose", doctor_opt.verbose, "print each layer's comparison");
  auto* inspect =
      app.add_subcommand("inspect", "show what an ONNX model or kiln engine holds (or why it cannot be read)");
  kiln::cli::InspectOptions inspect_opt;
  inspect->add_option("file", inspect_opt.path, "an .onnx model or a kiln engine")->required();
  inspect->add_flag("--graph", inspect_opt.show_graph, "print the imported graph");
  inspect->add_flag("--build", inspect_opt.build, "build a CPU engine and list each node's kernel");
  inspect->add_option("--external-data-root", inspect_opt.external_data_root,
                      "a folder external data may also resolve into (default: only the model's folder)");
  inspect->add_option("--max-import-memory", inspect_opt.max_import_memory,
                      "bytes the import may hold in weights and folded constants, e.g. 8GiB (default: half of RAM)");
  inspect->add_option("--fold-work-limit", inspect_opt.fold_work_limit,
                      "element operations one constant fold may take; costlier nodes run at run time (default 4e9)");
  inspect->add_option("--fold-work-total", inspect_opt.fold_work_total,
                      "element operations all constant folds of the import may take together (default 4e10)");
  inspect->add_option("--large-tensor-warning", inspect_opt.large_tensor_warning,
                      "warn about tensors larger than this, e.g. 2GiB (the default)");
  auto* exec = app.add_subcommand("exec", "build (or load) an engine, run it and report throughput and latency");
  kiln::cli::ExecOptions exec_opt;
  exec->add_option("--onnx", exec_opt.onnx, "the ONNX model to build an engine from");
  exec->add_option("--loadEngine", exec_opt.load_engine, "run this engine file instead of building one");
  exec->add_option("--saveEngine", exec_opt.save_engine, "write the built engine here");
  exec->add_option("--shapes", exec_opt.shapes,
                   "input shapes of the runs: name:1x3x224x224 (repeatable or comma-separated; within the profile)");
  exec->add_option("--minShapes", exec_opt.min_shapes,
                   "build an optimization profile: the smallest shapes of dynamic inputs, name:1x3x224x224");
  exec->add_option("--optShapes", exec_opt.opt_shapes,
                   "the profile's shapes to optimize for (and to run at when --shapes is not given)");
  exec->add_option("--maxShapes", exec_opt.max_shapes, "the profile's largest shapes");
  exec->add_option("--loadInputs", exec_opt.load_inputs, "input values from an ONNX TensorProto: name:file.pb");
  exec->add_option("--iterations", exec_opt.iterations, "run at least this many inferences (default 10)");
  exec->add_option("--duration", exec_opt.duration_s, "run for at least this many seconds (default 3)");
  exec->add_option("--warmUp", exec_opt.warm_up_ms, "warm up for this many milliseconds first (default 200)");
  exec->add_option("--avgRuns", exec_opt.avg_runs, "inferences averaged per reported average (default 10)");
  exec->add_option("--percentile", exec_opt.percentiles, "latency percentiles to report (default 90 95 99)")
      ->delimiter(',');
  exec->add_option("--exportOutput", exec_opt.export_output, "write the last run's outputs here (JSON)");
  exec->add_option("--exportTimes", exec_opt.export_times, "write every inference's timing here (JSON)");
  exec->add_option("--threads", exec_opt.threads, "CPU threads the kernels use (default: all cores)");
  exec->add_option("--builderOptimizationLevel", exec_opt.optimization_level,
                   "0: first accepting kernel per layer; 1-5: time every kernel and tactic (default 3)");
  exec->add_option("--timingCacheFile", exec_opt.timing_cache, "read and update kernel timings in this file");
  exec->add_option("--disable-pass", exec_opt.disable_passes,
                   "skip this optimizer pass (repeat for more; 'all' turns the optimizer off; --verbose lists them)");
  exec->add_option("--dump-graph", exec_opt.dump_graph,
                   "write the graph to this folder before the optimizer and after each pass that changed it");
  exec->add_flag("--fp16", exec_opt.fp16, "let layers run in float16 where a kernel exists (others stay float32)");
  exec->add_flag("--bf16", exec_opt.bf16, "let layers run in bfloat16 where a kernel exists (others stay float32)");
  exec->add_flag("--tf32", exec_opt.tf32, "let CUDA matrix kernels round float32 inputs to TF32 (the default)");
  exec->add_flag("--noTF32", exec_opt.no_tf32, "keep CUDA matrix kernels in exact float32 (no TF32 tactics)");
  exec->add_option("--layerPrecisions", exec_opt.layer_precisions,
                   "pin layers to a precision: name:fp32|fp16|bf16, comma-separated (the layer's ONNX node name)")
      ->delimiter(',');
  exec->add_option("--memPoolSize", exec_opt.mem_pool_size,
                   "workspace:SIZE: scratch memory one layer may use (MiB, or a suffix B, K, M, G)");
  exec->add_flag("--dumpProfile", exec_opt.dump_profile, "time every layer over extra runs and print the table");
  exec->add_option("--exportProfile", exec_opt.export_profile, "write the per-layer times here (JSON)");
  exec->add_option("--exportLayerInfo", exec_opt.export_layer_info,
                   "write the engine's layers (kernels, shapes, memory) here (JSON)");
  exec->add_option("--device", exec_opt.device,
                   "cuda or cpu (default: cuda when a GPU answers and kiln has CUDA, else cpu)");
  exec->add_flag("--noDataTransfers", exec_opt.no_data_transfers,
                 "GPU: leave out the copies of inputs to and outputs from the GPU");
  exec->add_flag("--useCudaGraph", exec_opt.use_cuda_graph,
                 "GPU: capture one inference into a CUDA graph and replay it (warns and runs without when a layer "
                 "runs on the host)");
  exec->add_option("--streams", exec_opt.streams, "GPU: run this many contexts at once, each on its own stream");
  exec->add_flag("--separateProfileRun", exec_opt.separate_profile_run,
                 "GPU: time layers (--dumpProfile) in runs of their own, not during the timed runs");
  exec->add_flag("--verbose", verbose_log, "log kernel choices and rejections while building");
  exec->add_option("--external-data-root", exec_opt.external_data_root,
                   "a folder external data may also resolve into (default: only the model's folder)");
  auto* compare = app.add_subcommand(
      "compare", "run a model on kiln's CPU backend and on the reference kernels (and against expected outputs)");
  kiln::cli::CompareOptions compare_opt;
  compare->add_option("model", compare_opt.onnx, "the ONNX model")->required();
  compare->add_option("--test-dir", compare_opt.test_dir,
                      "an ONNX test folder (input_<i>.pb, output_<i>.pb): its inputs, and its outputs as expected");
  compare->add_option("--shapes", compare_opt.shapes, "input shapes for dynamic dims: name:1x3x224x224");
  compare->add_option("--loadInputs", compare_opt.load_inputs, "input values from an ONNX TensorProto: name:file.pb");
  compare->add_option("--rtol", compare_opt.rtol, "relative tolerance (default 1e-3)");
  compare->add_option("--atol", compare_opt.atol, "absolute tolerance (default 1e-5)");
  auto* train =
      app.add_subcommand("train", "train a classifier from a YAML config (kiln train --config FILE --run-dir DIR)");
  kiln::cli::TrainOptions train_opt;
  train->add_option("--config", train_opt.config, "the training config (YAML), e.g. examples/fashion_mnist.yaml");
  train->add_option("--run-dir", train_opt.run_dir, "the run folder: config.yaml, metrics.jsonl, snapshots/");
  train->add_option("--resume", train_opt.resume, "continue the run in this folder from its last snapshot");
  train->add_flag("--quiet", train_opt.quiet, "no progress bar");
  train->add_option("overrides", train_opt.overrides, "config overrides: optim.lr=0.01 trainer.epochs=5");
  CLI11_PARSE(app, argc, argv);
  if (verbose_log) kiln::Logger::global().set_level(kiln::Severity::kVerbose);
  if (inspect->parsed()) return kiln::cli::run_inspect(inspect_opt);
  if (exec->parsed()) return kiln::cli::run_exec(exec_opt);
  if (compare->parsed()) return kiln::cli::run_compare(compare_opt);
  if (train->parsed()) return kiln::cli::run_train(train_opt);
  if (show_version) {
    std::printf("kiln %s\n", kiln::version_string());
    return 0;
  }
  if (doctor->parsed()) return kiln::cli::run_doctor(doctor_opt);
  std::fputs(app.help().c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  kiln::cli::use_short_openmp_spin(argv);
  return_large_blocks_to_the_system();
  try {
    return run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fputs("kiln: error: out of memory; the model or engine needs more memory than this machine gives\n", stderr);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: error: %s\n", e.what());
  }
  return 1;
}
