#include "train/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/cuda_runtime.h"
#include "kiln/logger.h"
#include "ops/loss/loss.h"
#include "train/autograd.h"
#include "train/checkpoint.h"
#include "train/data/dataset_config.h"
#include "train/data/params.h"

namespace kiln::train {
namespace fs = std::filesystem;
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Result<std::shared_ptr<const Dataset>> open_dataset(const TrainConfig& c, const std::string& path,
                                                    const std::string& split, int64_t limit, const char* key) {
  const auto& d = c.data;
  if (path.empty() && d.format != "synthetic")
    return invalid_argument(c.file, ": 'data.", key, "' is missing: name the ", key, " data");
  DatasetParams p{{"type", d.format}};
  if (d.format == "synthetic") {
    p["count"] = std::to_string(limit > 0 ? limit : 1024);
    p["height"] = std::to_string(d.height ? d.height : 224);
    p["width"] = std::to_string(d.width ? d.width : 224);
    p["channels"] = std::to_string(d.channels ? d.channels : 3);
    p["classes"] = std::to_string(d.classes ? d.classes : 1000);
    p["seed"] = std::string(key) == "val" ? "1" : "0";
    limit = 0;
  } else if (d.format == "idx") {
    p["dir"] = path;
    p["split"] = split;
    if (path.find("fashion") != std::string::npos) p["classes"] = "fashion-mnist";
  } else if (d.format == "list") {
    p["list"] = path;
    if (!d.labels.empty()) p["labels"] = d.labels;
  } else {
    p["path"] = path;
  }
  if (d.format == "folder" || d.format == "list") {
    if (d.channels) p["channels"] = std::to_string(d.channels);
    if (d.height) p["height"] = std::to_string(d.height);
    if (d.width) p["width"] = std::to_string(d.width);
  }
  auto ds = train::open_dataset(p);
  if (!ds.is_ok()) return std::move(ds.take_status()).with_prefix(c.file + ": data." + key);
  if (limit <= 0 || limit >= (*ds)->size()) return ds;
  std::vector<int64_t> first(static_cast<size_t>(limit));
  for (int64_t i = 0; i < limit; ++i) first[i] = i;
  KILN_ASSIGN_OR_RETURN(auto subset, SubsetDataset::create(*ds, std::move(first)));
  return std::shared_ptr<const Dataset>(subset);
}

std::vector<std::pair<std::string, AugmentParams>> augment_specs(const TrainConfig& c, bool train) {
  std::vector<std::pair<std::string, AugmentParams>> out;
  if (train) {
    for (const AugmentSpec& a : c.data.augment) {
      OptionMap options = a.options;
      if (auto bare = options.find(""); bare != options.end()) {
        OptionValue v = bare->second;
        options.erase(bare);
        options.insert_or_assign(std::string(augmentation_primary_key(a.name)), v);
      }
      out.emplace_back(a.name, params_from_options(options));
    }
  }
  if (c.data.scale != 1.0) out.push_back({"scale", {{"factor", std::to_string(c.data.scale)}}});
  if (!c.data.mean.empty() || !c.data.std.empty()) {
    auto list = [](const std::vector<double>& v, double fallback) {
      if (v.empty()) return std::to_string(fallback);
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
      return s + "]";
    };
    out.push_back({"normalize", {{"mean", list(c.data.mean, 0.0)}, {"std", list(c.data.std, 1.0)}}});
  }
  return out;
}

int64_t count_correct(const Tensor& logits, const Tensor& labels, int64_t rows) {
  const int64_t classes = logits.dims()[1];
  const float* l = logits.data<float>();
  const int64_t* y = labels.data<int64_t>();
  int64_t correct = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = l + r * classes;
    correct += (std::max_element(row, row + classes) - row) == y[r];
  }
  return correct;
}

std::string snapshot_name(int64_t step) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "step_%09lld.ckpt", static_cast<long long>(step));
  return buf;
}

}  // namespace

Result<std::unique_ptr<Trainer>> Trainer::create(const TrainConfig& config, const std::string& run_dir, bool resume) {
  std::unique_ptr<Trainer> t(new Trainer());
  t->config_ = config;
  t->run_dir_ = run_dir;
  const TrainConfig& c = t->config_;
  t->fp16_scaling_ = c.trainer.precision == "fp16";
  // Data parallel (several processes: mpirun, or RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT): each rank
  // trains on its slice of every batch of data.batch_size (the global batch) and the gradients are summed.
  KILN_ASSIGN_OR_RETURN(t->dist_, dist_config_from_env());
  const int world = t->dist_.world_size;
  if (c.data.batch_size % world != 0)
    return invalid_argument(c.file, ": 'data.batch_size' ", c.data.batch_size,
                            " (the global batch) does not divide by the ", world, " processes of this run");
  if (c.trainer.backend == "cuda" && t->dist_.enabled()) {
    // One GPU per process: this rank's GPU becomes its device 0 (before CUDA starts in this process).
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    std::vector<std::string> ids;
    std::stringstream list(visible ? visible : "");
    for (std::string id; std::getline(list, id, ',');) ids.push_back(id);
    const std::string mine =
        ids.empty() ? std::to_string(t->dist_.local_rank) : ids[static_cast<size_t>(t->dist_.local_rank) % ids.size()];
    setenv("CUDA_VISIBLE_DEVICES", mine.c_str(), 1);
  }
  if (c.trainer.backend == "cuda") {
    if (!cuda::gpu_available())
      return unsupported(c.file, ": 'trainer.backend' is cuda but no GPU is usable (", cuda::query_runtime().problem,
                         "): use trainer.backend=cpu");
    KILN_ASSIGN_OR_RETURN(t->stream_, create_stream(Device::cuda(0)));
  }
  if (t->dist_.enabled()) {
    KILN_ASSIGN_OR_RETURN(t->comm_, Communicator::create(t->dist_, t->stream().device()));
  }
  t->store_ = ParameterStore(static_cast<uint64_t>(c.trainer.seed));
  KILN_ASSIGN_OR_RETURN(t->train_set_, open_dataset(c, c.data.train, c.data.train_split, c.data.train_limit, "train"));
  if (!c.data.val.empty()) {
    KILN_ASSIGN_OR_RETURN(t->val_set_, open_dataset(c, c.data.val, c.data.val_split, c.data.val_limit, "val"));
  }
  t->classes_ = t->train_set_->num_classes();

  AugmentContext actx{t->train_set_->mean_image()};
  KILN_ASSIGN_OR_RETURN(AugmentList train_aug, make_augmentations(augment_specs(c, true), actx));
  KILN_ASSIGN_OR_RETURN(AugmentList val_aug, make_augmentations(augment_specs(c, false), actx));
  LoaderOptions lo;
  lo.batch_size = c.data.batch_size;
  lo.shuffle = c.data.shuffle;
  lo.drop_last = true;  // the training engine has one batch size
  lo.seed = static_cast<uint64_t>(c.trainer.seed);
  lo.threads = static_cast<int>(c.data.workers);
  lo.prefetch = static_cast<int>(std::max<int64_t>(c.data.prefetch, 1));
  lo.shards = world;
  lo.shard = t->dist_.rank;
  KILN_ASSIGN_OR_RETURN(t->train_loader_, DataLoader::create(t->train_set_, train_aug, lo));
  if (t->train_loader_->batches_per_epoch() == 0)
    return invalid_argument(c.file, ": the training set (", t->train_set_->size(),
                            " images) is smaller than one batch of ", c.data.batch_size);
  if (t->val_set_) {
    LoaderOptions vo = lo;
    vo.batch_size = c.data.val_batch_size ? c.data.val_batch_size : c.data.batch_size;
    vo.shuffle = false;
    vo.drop_last = false;
    vo.shards = 1;  // every rank evaluates the whole validation set
    vo.shard = 0;
    KILN_ASSIGN_OR_RETURN(t->val_loader_, DataLoader::create(t->val_set_, val_aug, vo));
    t->val_start_ = t->val_loader_->state();
  }
  t->input_shape_ = t->train_loader_->output_shape();
  if (!t->input_shape_.is_fixed())
    return invalid_argument(c.file, ": the training images vary in size; set data.height and data.width or add a crop");
  KILN_ASSIGN_OR_RETURN(t->model_, make_model(c.model, t->input_shape_, t->classes_));
  KILN_RETURN_IF_ERROR(t->build_engines());

  if (t->stream_) {
    KILN_ASSIGN_OR_RETURN(DeviceMirror mirror, DeviceMirror::create(t->store_, t->stream_->device(), *t->stream_));
    t->device_ = std::move(mirror);
  }
  if (t->comm_) {  // every rank starts from rank 0's parameters and buffers
    std::vector<Tensor> all;
    for (const auto& [name, entry] : t->store_.entries()) {
      KILN_ASSIGN_OR_RETURN(Tensor value, t->bound(name));
      all.push_back(value);
    }
    KILN_RETURN_IF_ERROR(t->comm_->broadcast(all, 0, t->stream()));
  }
  std::vector<Parameter> params;
  for (const std::string& name : t->params_) {
    KILN_ASSIGN_OR_RETURN(Tensor value, t->bound(name));
    params.push_back({name, value, Tensor()});
  }
  KILN_ASSIGN_OR_RETURN(t->optimizer_, Optimizer::create(c.optim, std::move(params), "optim"));
  t->optimizer_->set_stream(&t->stream());
  if (c.trainer.grad_accumulation > 1) {
    KILN_ASSIGN_OR_RETURN(GradAccumulator acc, GradAccumulator::create(t->optimizer_->params(),
                                                                       static_cast<int>(c.trainer.grad_accumulation)));
    t->accumulator_ = std::move(acc);
  }
  if (t->fp16_scaling_) {
    LossScalerOptions so;
    if (c.trainer.loss_scale > 0) so.init_scale = c.trainer.loss_scale;
    so.max_scale = std::max(so.max_scale, so.init_scale);
    so.min_scale = std::min(so.min_scale, so.init_scale);
    if (!c.trainer.loss_scale_dynamic) so.min_scale = so.max_scale = so.init_scale;  // a fixed scale
    so.growth_interval = c.trainer.loss_scale_window;
    KILN_ASSIGN_OR_RETURN(DynamicLossScaler scaler, DynamicLossScaler::create(so, "trainer"));
    t->scaler_ = scaler;
  }
  const int64_t per_epoch = t->train_loader_->batches_per_epoch();
  const int64_t total =
      c.trainer.epochs * ((per_epoch + c.trainer.grad_accumulation - 1) / c.trainer.grad_accumulation);
  KILN_ASSIGN_OR_RETURN(LrPolicy policy, LrPolicy::create(c.lr_policy, t->optimizer_->lr(), total));
  t->lr_policy_ = std::move(policy);

  std::error_code ec;
  fs::create_directories(fs::path(run_dir) / "snapshots", ec);
  if (ec) return Status(StatusCode::kIoError, "cannot create run folder '" + run_dir + "': " + ec.message());
  const fs::path metrics = fs::path(run_dir) / "metrics.jsonl";
  if (resume) {
    auto snaps = snapshots(run_dir);
    if (snaps.empty())
      return invalid_argument("run folder '", run_dir,
                              "' has no snapshot to resume from; start it again without --resume");
    KILN_RETURN_IF_ERROR(t->load_snapshot(snaps.back()));
    // Keep the metrics up to the snapshot: the steps after it run again.
    std::ifstream in(metrics);
    std::string kept, line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.value("step", int64_t{0}) <= t->step_) kept += line + "\n";
    }
    in.close();
    if (t->is_root()) std::ofstream(metrics, std::ios::trunc) << kept;
  } else if (t->is_root()) {
    std::ofstream(fs::path(run_dir) / "config.yaml", std::ios::trunc) << c.to_yaml();
    std::ofstream(metrics, std::ios::trunc);
  }
  if (t->is_root()) {  // the other ranks of a data-parallel run write nothing
    t->metrics_.open(metrics, std::ios::app);
    if (!t->metrics_) return Status(StatusCode::kIoError, "cannot write '" + metrics.string() + "'");
  }
  return t;
}

Status Trainer::build_engines() {
  const TrainConfig& c = config_;
  BuildOptions build;
  // On CUDA, ops without a CUDA kernel run as host-fallback steps; parameters and gradients stay on the host
  // (the optimizer's update runs there) and travel each step.
  build.backend = c.trainer.backend == "cuda" ? Backend::kCuda : Backend::kCpu;
  build.optimization_level = 1;
  build.threads = static_cast<int>(c.trainer.threads);
  // Mixed precision: the builder's precision pass runs the convolutions, matrix products and their backward
  // ops in float16 / bfloat16 where the backend has kernels (casts at the boundaries; the parameters stay
  // float32 graph inputs, so their gradients come out in float32); norms, softmax and the loss stay float32.
  build.passes.precision.fp16 = c.trainer.precision == "fp16";
  build.passes.precision.bf16 = c.trainer.precision == "bf16";
  build.passes.precision.prefer_fp16 = c.trainer.precision == "fp16";
  std::stringstream passes(c.trainer.disable_passes);
  for (std::string name; std::getline(passes, name, ',');)
    if (!name.empty()) build.passes.disabled.insert(name);
  auto graph_for = [&](Mode mode, int64_t batch, Graph& g, ModuleContext& ctx) -> Result<Value*> {
    const ImageShape& s = input_shape_;
    KILN_ASSIGN_OR_RETURN(Value * image,
                          g.add_input("image", DataType::kFloat32, Dims{batch, s.channels, s.height, s.width}));
    KILN_ASSIGN_OR_RETURN(Value * label, g.add_input("label", DataType::kInt64, Dims{batch}));
    KILN_ASSIGN_OR_RETURN(Value * logits, model_->forward(ctx, image));
    if (logits->dims != Dims{batch, classes_})
      return invalid_argument("model '", c.model.name, "' gives ", logits->dims.to_string(), " where [", batch, ", ",
                              classes_, "] class scores are needed");
    KILN_RETURN_IF_ERROR(g.rename_value(logits, "logits"));
    KILN_RETURN_IF_ERROR(g.mark_output(logits));
    auto attrs = std::make_unique<CrossEntropyLossAttrs>();
    attrs->label_smoothing = static_cast<float>(c.loss.label_smoothing);
    attrs->reduction = mode == Mode::kTrain ? LossReduction::kMean : LossReduction::kNone;
    if (c.loss.name != "cross_entropy")
      return invalid_argument(c.file, ": 'loss.name' ", c.loss.name,
                              " is not a classification loss kiln trains with (cross_entropy)");
    KILN_ASSIGN_OR_RETURN(Node * loss, g.add_node("CrossEntropyLoss", "loss", std::move(attrs), {logits, label},
                                                  {mode == Mode::kTrain ? "loss" : "losses"}));
    KILN_RETURN_IF_ERROR(g.mark_output(loss->outputs[0]));
    return loss->outputs[0];
  };
  {
    Graph g;
    ModuleContext ctx(g, store_, Mode::kTrain);
    KILN_RETURN_IF_ERROR(graph_for(Mode::kTrain, c.data.batch_size / dist_.world_size, g, ctx).status());
    AutogradOptions options;
    options.params = ctx.param_names();
    options.state = ctx.buffer_names();
    options.stop_gradient = ctx.no_grad_values();
    options.loss_scale_input = fp16_scaling_;
    KILN_ASSIGN_OR_RETURN(TrainingGraph tg, build_training_graph(g, "loss", options));
    if (fp16_scaling_) {
      const Value* in = tg.graph->find_value(std::string(kLossScaleInput));
      KILN_ASSIGN_OR_RETURN(loss_scale_tensor_, Tensor::empty(in->dtype, in->dims));
    }
    params_ = tg.params;
    grads_ = tg.grads;
    buffer_updates_ = ctx.buffer_updates();
    has_step_input_ = g.find_value(std::string(kStepInput)) != nullptr;
    BuildReport report;
    KILN_ASSIGN_OR_RETURN(GraphRunner runner, GraphRunner::compile(*tg.graph, build, &report));
    train_runner_ = std::move(runner);
    if (c.trainer.profile) {
      train_runner_->context().set_layer_timer([this](std::string_view layer, std::string_view kernel, double ms) {
        auto& [total, calls] = profile_[{std::string(kernel), std::string(layer)}];
        total += ms;
        ++calls;
      });
    }
    if (c.trainer.precision != "fp32") {
      int lowered = 0;
      for (const std::string& a : report.optimizer.applied) lowered += a.rfind("precision:", 0) == 0;
      log_info("kiln train: ", c.trainer.precision, ": ", lowered,
               " layers of the training graph run in reduced precision",
               lowered ? "" : " (the backend has no such kernels for them: they run in float32)");
    }
  }
  if (val_loader_) {
    Graph g;
    ModuleContext ctx(g, store_, Mode::kEval);
    KILN_RETURN_IF_ERROR(graph_for(Mode::kEval, val_loader_->options().batch_size, g, ctx).status());
    KILN_ASSIGN_OR_RETURN(GraphRunner runner, GraphRunner::compile(g, build));
    eval_runner_ = std::move(runner);
  }
  KILN_ASSIGN_OR_RETURN(step_tensor_, Tensor::empty(DataType::kInt64, Dims{}));
  return {};
}

Result<Tensor> Trainer::bound(const std::string& name) const {
  if (device_) return device_->at(name);
  const ParameterStore::Entry* e = store_.find(name);
  if (!e) return invalid_argument("the model has no parameter or buffer '", name, "'");
  return e->value;
}

Result<Tensor> Trainer::host_output(GraphRunner& runner, const std::string& name) {
  KILN_ASSIGN_OR_RETURN(Tensor t, runner.output(name));
  if (!t.device().is_cuda()) return t;
  KILN_ASSIGN_OR_RETURN(Tensor host, Tensor::empty(t.dtype(), t.dims()));
  KILN_RETURN_IF_ERROR(cuda::copy(t, host, &stream()));
  // With NCCL in the stream a lost peer would hang it: the communicator waits at most its timeout.
  KILN_RETURN_IF_ERROR(comm_ ? comm_->synchronize(stream()) : stream().synchronize());
  return host;
}

Status Trainer::sync_host() {
  if (!device_ || !host_stale_) return {};
  KILN_RETURN_IF_ERROR(device_->download(store_, stream()));
  host_stale_ = false;
  return {};
}

Result<const ParameterStore*> Trainer::parameters() {
  KILN_RETURN_IF_ERROR(sync_host());
  return &store_;
}

Status Trainer::run_step(const Batch& batch, bool group_end, double& loss, int64_t& correct) {
  GraphRunner& r = *train_runner_;
  KILN_RETURN_IF_ERROR(r.set_input("image", batch.images));
  KILN_RETURN_IF_ERROR(r.set_input("label", batch.labels));
  for (const auto& [name, entry] : store_.entries()) {
    KILN_ASSIGN_OR_RETURN(Tensor value, bound(name));
    KILN_RETURN_IF_ERROR(r.set_input(name, value));
  }
  if (has_step_input_) {
    step_tensor_.data<int64_t>()[0] = step_;
    KILN_RETURN_IF_ERROR(r.set_input(std::string(kStepInput), step_tensor_));
  }
  if (scaler_) {
    loss_scale_tensor_.set(0, scaler_->scale());
    KILN_RETURN_IF_ERROR(r.set_input(std::string(kLossScaleInput), loss_scale_tensor_));
  }
  // Queued: on a GPU the gradients stay there for the optimizer (on the same stream).
  KILN_RETURN_IF_ERROR(r.context().enqueue(stream()));
  KILN_ASSIGN_OR_RETURN(Tensor l, host_output(r, "loss"));
  loss = l.at(0);
  if (!std::isfinite(loss) && !scaler_)
    return invalid_argument("the loss became ", loss, " at step ", step_ + 1,
                            ": lower optim.lr, or add gradient clipping (optim.clip_grad_norm)");
  KILN_ASSIGN_OR_RETURN(Tensor logits, host_output(r, "logits"));
  correct = count_correct(logits, batch.labels, batch.labels.numel());
  if (comm_) {  // the global batch's mean loss and correct count
    KILN_ASSIGN_OR_RETURN(std::vector<double> sums, comm_->all_reduce_host({loss, static_cast<double>(correct)}));
    loss = sums[0] / comm_->world_size();
    correct = static_cast<int64_t>(std::llround(sums[1]));
  }
  auto& params = optimizer_->params();
  for (size_t i = 0; i < params.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(params[i].grad, r.output(grads_[i]));
  }
  for (const auto& [buffer, output] : buffer_updates_) {
    KILN_ASSIGN_OR_RETURN(Tensor next, r.output(output));
    KILN_RETURN_IF_ERROR(device_ ? device_->assign(buffer, next, stream()) : store_.assign(buffer, next));
  }
  host_stale_ = device_.has_value();
  ++step_;
  if (accumulator_) {
    KILN_RETURN_IF_ERROR(accumulator_->add(params));
    if (!group_end && !accumulator_->ready()) return {};
    KILN_RETURN_IF_ERROR(accumulator_->finish(params));
  }
  return update_parameters();
}

// The optimizer's step on the gradients now in its parameters (fp16: unscaled, skipped on overflow).
Status Trainer::update_parameters() {
  optimizer_->set_lr(lr_policy_->lr(updates_));
  StepOptions so;
  if (scaler_) {
    so.grad_scale = scaler_->scale();
    so.skip_nonfinite = true;
  }
  auto& params = optimizer_->params();
  if (comm_) {
    // The mean of the ranks' gradients: summed here, divided in the step. Buffers (BatchNorm's running
    // statistics) follow rank 0's, as PyTorch's DistributedDataParallel does.
    std::vector<Tensor> grads;
    grads.reserve(params.size());
    for (const Parameter& p : params) grads.push_back(p.grad);
    KILN_RETURN_IF_ERROR(comm_->all_reduce_sum(grads, stream()));
    so.grad_scale *= comm_->world_size();
    std::vector<Tensor> buffers;
    for (const auto& [buffer, output] : buffer_updates_) {
      KILN_ASSIGN_OR_RETURN(Tensor value, bound(buffer));
      buffers.push_back(value);
    }
    if (!buffers.empty()) KILN_RETURN_IF_ERROR(comm_->broadcast(buffers, 0, stream()));
  }
  KILN_ASSIGN_OR_RETURN(bool stepped, optimizer_->step(so));
  if (scaler_) {
    scaler_->update(!stepped);
    if (!stepped) ++skipped_steps_;
  }
  ++updates_;
  return {};
}

Result<std::pair<double, double>> Trainer::evaluate() {
  if (!eval_runner_) return invalid_argument(config_.file, ": no validation data ('data.val')");
  GraphRunner& r = *eval_runner_;
  KILN_RETURN_IF_ERROR(val_loader_->restore(val_start_));
  const int64_t batches = val_loader_->batches_per_epoch();
  const int64_t b = val_loader_->options().batch_size;
  double loss_sum = 0;
  int64_t correct = 0, seen = 0;
  KILN_ASSIGN_OR_RETURN(
      Tensor images,
      Tensor::zeros(DataType::kFloat32, Dims{b, input_shape_.channels, input_shape_.height, input_shape_.width}));
  KILN_ASSIGN_OR_RETURN(Tensor labels, Tensor::zeros(DataType::kInt64, Dims{b}));
  for (int64_t i = 0; i < batches; ++i) {
    KILN_ASSIGN_OR_RETURN(Batch batch, val_loader_->next());
    const int64_t n = batch.labels.numel();
    // The engine has one batch size: a short last batch is padded (the padding's results are not counted).
    std::copy_n(batch.images.data<float>(), batch.images.numel(), images.data<float>());
    std::copy_n(batch.labels.data<int64_t>(), n, labels.data<int64_t>());
    KILN_RETURN_IF_ERROR(r.set_input("image", images));
    KILN_RETURN_IF_ERROR(r.set_input("label", labels));
    for (const auto& [name, entry] : store_.entries()) {
      KILN_ASSIGN_OR_RETURN(Tensor value, bound(name));
      KILN_RETURN_IF_ERROR(r.set_input(name, value));
    }
    KILN_RETURN_IF_ERROR(r.context().execute(stream()));
    KILN_ASSIGN_OR_RETURN(Tensor losses, r.output("losses"));
    KILN_ASSIGN_OR_RETURN(Tensor logits, r.output("logits"));
    for (int64_t k = 0; k < n; ++k) loss_sum += losses.at(k);
    correct += count_correct(logits, labels, n);
    seen += n;
  }
  if (seen == 0) return invalid_argument("the validation set is empty");
  return std::make_pair(loss_sum / seen, static_cast<double>(correct) / seen);
}

Result<TrainResult> Trainer::fit(const std::function<void(const TrainEvent&)>& on_event) {
  const TrainConfig& c = config_;
  const auto& tc = c.trainer;
  const int64_t per_epoch = train_loader_->batches_per_epoch();
  const int64_t total_steps = tc.epochs * per_epoch;
  TrainResult result;
  fit_start_ = std::chrono::steady_clock::now();
  auto elapsed = [&] { return elapsed_before_ + seconds_since(fit_start_); };
  double window_loss = 0, epoch_loss = 0;
  int64_t window_correct = 0, window_seen = 0, window_steps = 0, epoch_correct = 0, epoch_seen = 0, epoch_steps = 0;
  auto window_t0 = std::chrono::steady_clock::now();
  double epoch_train = 0, epoch_data = 0;
  while (step_ < total_steps) {
    const auto step_t0 = std::chrono::steady_clock::now();
    KILN_ASSIGN_OR_RETURN(Batch batch, train_loader_->next());
    const double waited = seconds_since(step_t0);
    epoch_data += waited;
    double loss = 0;
    int64_t correct = 0;
    const int64_t accumulate = tc.grad_accumulation;
    const int64_t next_in_epoch = step_ % per_epoch + 1;
    const bool group_end = next_in_epoch % accumulate == 0 || next_in_epoch == per_epoch;
    KILN_RETURN_IF_ERROR(run_step(batch, group_end, loss, correct));
    epoch_train += seconds_since(step_t0);
    const int64_t n = batch.labels.numel() * dist_.world_size;
    if (std::isfinite(loss)) {  // fp16: a step whose loss overflowed is skipped and not counted
      window_loss += loss, epoch_loss += loss;
      ++window_steps, ++epoch_steps;
    }
    window_correct += correct, epoch_correct += correct;
    window_seen += n, epoch_seen += n;
    const int64_t in_epoch = (step_ - 1) % per_epoch + 1;
    const bool epoch_done = in_epoch == per_epoch;
    const bool out_of_time = tc.max_seconds > 0 && elapsed() >= tc.max_seconds;
    TrainEvent e;
    e.epoch = (step_ - 1) / per_epoch + 1;
    e.step = step_;
    e.steps_per_epoch = per_epoch;
    e.step_in_epoch = in_epoch;
    e.lr = optimizer_->lr();
    e.loss_scale = scaler_ ? scaler_->scale() : 0.0;
    e.skipped_steps = skipped_steps_;
    if (step_ % tc.log_every == 0 || epoch_done || out_of_time) {
      e.loss = window_loss / std::max<int64_t>(window_steps, 1);
      e.accuracy = static_cast<double>(window_correct) / window_seen;
      e.images_per_second = window_seen / std::max(seconds_since(window_t0), 1e-9);
      e.elapsed_seconds = elapsed();
      KILN_RETURN_IF_ERROR(append_metrics(e));
      if (on_event) on_event(e);
      window_loss = 0, window_correct = window_seen = window_steps = 0;
      window_t0 = std::chrono::steady_clock::now();
    }
    if (tc.snapshot_steps && step_ % tc.snapshot_steps == 0 && !epoch_done && !out_of_time) {
      result.last_snapshot = (fs::path(run_dir_) / "snapshots" / snapshot_name(step_)).string();
      KILN_RETURN_IF_ERROR(save_snapshot(result.last_snapshot));
    }
    if (epoch_done || out_of_time) {
      TrainEvent end = e;
      end.epoch_end = true;
      end.snapshot.clear();
      end.loss = epoch_loss / std::max<int64_t>(epoch_steps, 1);
      end.accuracy = static_cast<double>(epoch_correct) / std::max<int64_t>(epoch_seen, 1);
      end.elapsed_seconds = elapsed();
      end.epoch_train_seconds = epoch_train;
      end.epoch_data_seconds = epoch_data;
      epoch_train = epoch_data = 0;
      const bool last = step_ == total_steps || out_of_time;
      if (val_loader_ && ((tc.val_every && e.epoch % tc.val_every == 0) || last)) {
        KILN_ASSIGN_OR_RETURN(auto val, evaluate());
        end.val_loss = val.first;
        end.val_accuracy = val.second;
        result.val_loss = val.first;
        result.val_accuracy = val.second;
      }
      if ((tc.snapshot_every && e.epoch % tc.snapshot_every == 0) || last) {
        end.snapshot = (fs::path(run_dir_) / "snapshots" / snapshot_name(step_)).string();
        epoch_ = e.epoch;
        KILN_RETURN_IF_ERROR(save_snapshot(end.snapshot));
        result.last_snapshot = end.snapshot;
      }
      KILN_RETURN_IF_ERROR(append_metrics(end));
      if (on_event) on_event(end);
      epoch_ = e.epoch;
      epoch_loss = 0, epoch_correct = epoch_seen = epoch_steps = 0;
      if (out_of_time) {
        result.stopped_by_time = true;
        break;
      }
    }
  }
  KILN_RETURN_IF_ERROR(sync_host());
  if (c.trainer.profile) KILN_RETURN_IF_ERROR(write_profile());
  result.epochs = epoch_;
  result.steps = step_;
  result.skipped_steps = skipped_steps_;
  result.loss_scale = scaler_ ? scaler_->scale() : 0.0;
  result.seconds = elapsed();
  return result;
}

Status Trainer::append_metrics(const TrainEvent& e) {
  if (!is_root()) return {};
  nlohmann::json j = {{"type", e.epoch_end ? "epoch" : "step"},
                      {"epoch", e.epoch},
                      {"step", e.step},
                      {"loss", e.loss},
                      {"acc", e.accuracy},
                      {"lr", e.lr},
                      {"time", e.elapsed_seconds}};
  if (!e.epoch_end) j["images_per_s"] = e.images_per_second;
  if (e.epoch_end) {
    j["train_time"] = e.epoch_train_seconds;
    j["data_time"] = e.epoch_data_seconds;
  }
  if (e.val_loss) j["val_loss"] = *e.val_loss;
  if (e.val_accuracy) j["val_acc"] = *e.val_accuracy;
  if (scaler_) {
    j["loss_scale"] = e.loss_scale;
    j["skipped_steps"] = e.skipped_steps;
  }
  metrics_ << j.dump() << "\n";
  metrics_.flush();
  if (!metrics_) return Status(StatusCode::kIoError, "writing metrics.jsonl in '" + run_dir_ + "' failed");
  return {};
}

// profile.txt: the training engine's kernels, then its layers, by total time over the profiled steps.
Status Trainer::write_profile() const {
  if (!is_root()) return {};
  double all = 0;
  std::map<std::string, std::pair<double, int64_t>> by_kernel;
  std::vector<std::pair<double, std::string>> layers;
  for (const auto& [key, value] : profile_) {
    all += value.first;
    by_kernel[key.first].first += value.first;
    by_kernel[key.first].second += value.second;
    layers.emplace_back(value.first, str_cat(key.second, "  [", key.first, "] x", value.second));
  }
  std::vector<std::pair<double, std::string>> kernels;
  kernels.reserve(by_kernel.size());
  for (const auto& [kernel, v] : by_kernel) kernels.emplace_back(v.first, str_cat(kernel, " x", v.second));
  std::sort(kernels.rbegin(), kernels.rend());
  std::sort(layers.rbegin(), layers.rend());
  const fs::path path = fs::path(run_dir_) / "profile.txt";
  std::ofstream f(path, std::ios::trunc);
  char line[64];
  f << "kiln train profile: " << step_ << " steps, " << all
    << " ms in timed layers (each layer waits for the device)\n";
  f << "\n== kernels by total time (ms, share)\n";
  for (const auto& [ms, what] : kernels) {
    std::snprintf(line, sizeof line, "%10.1f %5.1f%%  ", ms, 100 * ms / std::max(all, 1e-9));
    f << line << what << "\n";
  }
  f << "\n== the 60 slowest layers (ms, share)\n";
  for (size_t i = 0; i < layers.size() && i < 60; ++i) {
    std::snprintf(line, sizeof line, "%10.1f %5.1f%%  ", layers[i].first, 100 * layers[i].first / std::max(all, 1e-9));
    f << line << layers[i].second << "\n";
  }
  if (!f) return Status(StatusCode::kIoError, "cannot write '" + path.string() + "'");
  return {};
}

Status Trainer::save_snapshot(const std::string& path) {
  if (!is_root()) return {};  // the ranks hold the same parameters and optimizer state
  KILN_RETURN_IF_ERROR(sync_host());
  Checkpoint ck;
  for (const auto& [name, entry] : store_.entries()) ck.tensors["model/" + name] = entry.value;
  KILN_ASSIGN_OR_RETURN(auto state, optimizer_->export_state());
  for (auto& [key, value] : state) ck.tensors["optim/" + key] = std::move(value);
  if (accumulator_) {
    KILN_ASSIGN_OR_RETURN(auto acc, accumulator_->export_state());
    for (auto& [key, value] : acc) ck.tensors["accum/" + key] = std::move(value);
  }
  if (scaler_) {
    KILN_ASSIGN_OR_RETURN(auto sc, scaler_->export_state());
    for (auto& [key, value] : sc) ck.tensors["scaler/" + key] = std::move(value);
  }
  nlohmann::json meta = {{"step", step_},
                         {"updates", updates_},
                         {"skipped_steps", skipped_steps_},
                         {"epoch", epoch_},
                         {"elapsed_seconds", elapsed_before_ + seconds_since(fit_start_)},
                         {"loader", train_loader_->state().serialize()},
                         {"model", config_.model.name}};
  ck.meta_json = meta.dump();
  return save_checkpoint(path, ck);
}

Status Trainer::load_snapshot(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(Checkpoint ck, load_checkpoint(path));
  std::map<std::string, Tensor> optim, accum, scaler;
  for (auto& [key, value] : ck.tensors) {
    if (key.rfind("model/", 0) == 0) {
      Status st = store_.assign(key.substr(6), value);
      if (!st.is_ok()) return std::move(st).with_prefix("snapshot '" + path + "'");
    } else if (key.rfind("optim/", 0) == 0) {
      optim[key.substr(6)] = value;
    } else if (key.rfind("accum/", 0) == 0) {
      accum[key.substr(6)] = value;
    } else if (key.rfind("scaler/", 0) == 0) {
      scaler[key.substr(7)] = value;
    }
  }
  // The GPU copies first: the optimizer's state goes to the device its parameters are on.
  if (device_) KILN_RETURN_IF_ERROR(device_->upload(store_, stream()));
  Status st = optimizer_->import_state(optim);
  if (st.is_ok() && accumulator_) st = accumulator_->import_state(accum);
  if (st.is_ok() && scaler_) st = scaler_->import_state(scaler);
  if (!st.is_ok()) return std::move(st).with_prefix("snapshot '" + path + "'");
  auto meta = nlohmann::json::parse(ck.meta_json, nullptr, false);
  if (meta.is_discarded() || !meta.contains("loader"))
    return invalid_argument("snapshot '", path, "' has no loader position; it was not written by kiln train");
  step_ = meta.value("step", int64_t{0});
  updates_ = meta.value("updates", step_);
  skipped_steps_ = meta.value("skipped_steps", int64_t{0});
  epoch_ = meta.value("epoch", int64_t{0});
  elapsed_before_ = meta.value("elapsed_seconds", 0.0);
  KILN_ASSIGN_OR_RETURN(LoaderState ls, LoaderState::parse(meta["loader"].get<std::string>()));
  return train_loader_->restore(ls);
}

Result<std::unique_ptr<Graph>> Trainer::inference_graph(int64_t batch) {
  KILN_RETURN_IF_ERROR(sync_host());
  auto g = std::make_unique<Graph>();
  ModuleContext ctx(*g, store_, Mode::kEval, /*params_as_constants=*/true);
  const ImageShape& s = input_shape_;
  KILN_ASSIGN_OR_RETURN(Value * image,
                        g->add_input("image", DataType::kFloat32, Dims{batch, s.channels, s.height, s.width},
                                     {batch < 0 ? "batch" : "", "", "", ""}));
  KILN_ASSIGN_OR_RETURN(Value * logits, model_->forward(ctx, image));
  KILN_RETURN_IF_ERROR(g->rename_value(logits, "logits"));
  KILN_RETURN_IF_ERROR(g->mark_output(logits));
  auto softmax = OpRegistry::global().find("Softmax")->make_attrs();
  KILN_ASSIGN_OR_RETURN(Node * probs,
                        g->add_node("Softmax", "probabilities", std::move(softmax), {logits}, {"probabilities"}));
  KILN_RETURN_IF_ERROR(g->mark_output(probs->outputs[0]));
  KILN_RETURN_IF_ERROR(g->verify());
  return g;
}

Result<Tensor> Trainer::sample_images(int64_t batch) {
  std::shared_ptr<const Dataset> set = val_set_ ? val_set_ : train_set_;
  LoaderOptions o;
  o.batch_size = std::min<int64_t>(batch, set->size());
  o.shuffle = false;
  KILN_ASSIGN_OR_RETURN(AugmentList aug,
                        make_augmentations(augment_specs(config_, false), AugmentContext{set->mean_image()}));
  KILN_ASSIGN_OR_RETURN(auto loader, DataLoader::create(set, aug, o));
  KILN_ASSIGN_OR_RETURN(Batch b, loader->next());
  return b.images;
}

std::vector<std::string> Trainer::snapshots(const std::string& run_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(run_dir) / "snapshots", ec))
    if (e.path().extension() == ".ckpt") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string Trainer::summary() const {
  return str_cat(model_->describe(), "\n", store_.parameter_count(), " parameters; input ", input_shape_.channels, "x",
                 input_shape_.height, "x", input_shape_.width, ", ", classes_, " classes; ",
                 train_loader_->batches_per_epoch(), " steps per epoch of ", config_.data.batch_size, " images");
}

}  // namespace kiln::train
