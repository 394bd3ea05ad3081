#pragma once
// The trainer: a classifier (a module) trained on batches of images. Each step is one run of a training
// engine (the model, its loss and the autograd backward, built by the builder and run by the runtime),
// then the optimizer's update; validation runs an evaluation engine over the same parameters. A run folder
// holds the config, metrics.jsonl and snapshots; a run resumes exactly from its last snapshot.
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "kiln/stream.h"
#include "runner/graph_runner.h"
#include "train/config.h"
#include "train/data/loader.h"
#include "train/device_mirror.h"
#include "train/dist/dist.h"
#include "train/module.h"
#include "train/optim/gradients.h"
#include "train/optim/loss_scaler.h"
#include "train/optim/lr_policy.h"
#include "train/optim/optimizer.h"

namespace kiln::train {

/// One line of progress: a logged step or the end of an epoch (with validation when it ran).
struct TrainEvent {
  bool epoch_end = false;
  int64_t epoch = 0;  ///< 1-based
  int64_t step = 0;   ///< steps done
  int64_t steps_per_epoch = 0;
  int64_t step_in_epoch = 0;
  double loss = 0;      ///< mean over the steps since the last event (epoch end: over the epoch)
  double accuracy = 0;  ///< training accuracy over the same steps
  double lr = 0;
  double images_per_second = 0;
  double loss_scale = 0;           ///< fp16: the loss scale after this step (0 without scaling)
  int64_t skipped_steps = 0;       ///< fp16: optimizer steps skipped for overflowing gradients so far
  double elapsed_seconds = 0;      ///< training time so far (resumed runs include the earlier time)
  double epoch_train_seconds = 0;  ///< epoch end: the time its steps took (loading, forward, backward, update)
  double epoch_data_seconds = 0;   ///< epoch end: the part of it spent waiting for the data loader
  std::optional<double> val_loss, val_accuracy;
  std::string snapshot;  ///< the snapshot written at this point, if any
};

struct TrainResult {
  int64_t epochs = 0, steps = 0;
  double seconds = 0;
  std::optional<double> val_accuracy, val_loss;
  std::string last_snapshot;
  bool stopped_by_time = false;
  int64_t skipped_steps = 0;  ///< fp16: optimizer steps skipped for overflowing gradients
  double loss_scale = 0;      ///< fp16: the loss scale at the end
};

class Trainer {
 public:
  /// Opens the datasets, builds the model and its engines. `run_dir` gets config.yaml, metrics.jsonl and
  /// snapshots/; with `resume` the run continues from its last snapshot (its config.yaml wins).
  static Result<std::unique_ptr<Trainer>> create(const TrainConfig& config, const std::string& run_dir,
                                                 bool resume = false);
  /// Trains until the epochs are done (or trainer.max_seconds); `on_event` sees every logged step and epoch.
  Result<TrainResult> fit(const std::function<void(const TrainEvent&)>& on_event = {});
  /// Loss and accuracy of the current parameters on the validation set.
  Result<std::pair<double, double>> evaluate();

  /// The trained classifier for inference: input "image" [batch, C, H, W] (batch kDynamicDim: any, named "batch")
  /// (after the loader's scaling and normalization), outputs "logits" and "probabilities"; parameters as constants (for
  /// export).
  Result<std::unique_ptr<Graph>> inference_graph(int64_t batch);
  /// The first `batch` validation images (or training images without a validation set), as the loader gives them.
  Result<Tensor> sample_images(int64_t batch);

  const TrainConfig& config() const { return config_; }
  /// The parameters as of the last step (a GPU run copies them back from the GPU first).
  Result<const ParameterStore*> parameters();
  int64_t step() const { return step_; }
  /// Data parallel: this process's rank (0 writes the run folder) and the number of processes.
  int rank() const { return dist_.rank; }
  int world_size() const { return dist_.world_size; }
  bool is_root() const { return dist_.rank == 0; }
  /// The model as text and its size ("Sequential(...)", parameter count).
  std::string summary() const;
  /// The snapshots of a run folder, oldest first.
  static std::vector<std::string> snapshots(const std::string& run_dir);

 private:
  Trainer() = default;
  Status build_engines();
  /// One micro-batch: forward and backward, then (every grad_accumulation micro-batches, or at `group_end`)
  /// the optimizer's update. `loss` is NaN for a skipped fp16 step whose loss overflowed.
  Status run_step(const Batch& batch, bool group_end, double& loss, int64_t& correct);
  Status update_parameters();
  Status sync_host();
  Stream& stream() { return stream_ ? *stream_ : cpu_stream(); }
  Result<Tensor> bound(const std::string& name) const;
  Result<Tensor> host_output(GraphRunner& runner, const std::string& name);
  Status save_snapshot(const std::string& path);
  Status load_snapshot(const std::string& path);
  Status append_metrics(const TrainEvent& e);
  Status write_profile() const;

  TrainConfig config_;
  std::string run_dir_;
  ModulePtr model_;
  ParameterStore store_;
  std::shared_ptr<const Dataset> train_set_, val_set_;
  std::unique_ptr<DataLoader> train_loader_, val_loader_;
  LoaderState val_start_;  ///< every evaluation reads the validation set from here
  ImageShape input_shape_;
  int64_t classes_ = 0;

  std::optional<GraphRunner> train_runner_, eval_runner_;
  std::vector<std::string> params_, grads_;
  std::map<std::string, std::string> buffer_updates_;
  bool has_step_input_ = false;
  std::unique_ptr<Optimizer> optimizer_;
  std::optional<LrPolicy> lr_policy_;
  Tensor step_tensor_;
  std::unique_ptr<Stream> stream_;      ///< CUDA: the stream steps and updates run on
  std::optional<DeviceMirror> device_;  ///< CUDA: the parameters and buffers on the GPU
  bool host_stale_ = false;             ///< the GPU copies are newer than the store
  bool fp16_scaling_ = false;
  std::optional<DynamicLossScaler> scaler_;
  Tensor loss_scale_tensor_;
  int64_t skipped_steps_ = 0;
  std::optional<GradAccumulator> accumulator_;
  /// trainer.profile: (kernel, layer) -> total milliseconds and calls.
  std::map<std::pair<std::string, std::string>, std::pair<double, int64_t>> profile_;
  double data_seconds_ = 0;  ///< time fit() waited for the loader
  DistConfig dist_;
  std::unique_ptr<Communicator> comm_;

  int64_t step_ = 0, epoch_ = 0;  ///< micro-batches done; epochs done
  int64_t updates_ = 0;           ///< optimizer steps done (grad_accumulation micro-batches each)
  double elapsed_before_ = 0;     ///< training seconds of earlier sessions of this run
  std::chrono::steady_clock::time_point fit_start_ = std::chrono::steady_clock::now();
  std::ofstream metrics_;
};

/// The classifiers `model.name` can give: fashion_cnn, lenet, alexnet, googlenet, resnet18, resnet50.
Result<ModulePtr> make_model(const TrainConfig::Model& model, const ImageShape& input, int64_t classes);

}  // namespace kiln::train
