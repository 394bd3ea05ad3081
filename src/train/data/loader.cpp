#include "train/data/loader.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>
#include <sstream>

namespace kiln::train {

// ---- LoaderState ----

std::string LoaderState::serialize() const {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "kiln-loader 1 seed=%" PRIu64 " size=%" PRId64 " epoch=%" PRId64 " position=%" PRId64 " rng=%016" PRIx64
                ",%016" PRIx64 ",%016" PRIx64 ",%016" PRIx64,
                seed, dataset_size, epoch, position, rng[0], rng[1], rng[2], rng[3]);
  return buf;
}

Result<LoaderState> LoaderState::parse(std::string_view text) {
  auto bad = [&](std::string_view what) {
    return invalid_argument("loader state '", text, "': ", what, " (expected what LoaderState::serialize writes)");
  };
  std::istringstream in{std::string(text)};
  std::string magic, version;
  in >> magic >> version;
  if (magic != "kiln-loader") return bad("not a loader state");
  if (version != "1") return bad(str_cat("version ", version, ", this kiln reads version 1"));
  LoaderState s;
  bool seen[5] = {false, false, false, false, false};
  for (std::string tok; in >> tok;) {
    size_t eq = tok.find('=');
    if (eq == std::string::npos) return bad(str_cat("'", tok, "' is not key=value"));
    std::string key = tok.substr(0, eq), value = tok.substr(eq + 1);
    char* end = nullptr;
    errno = 0;
    if (key == "seed") {
      s.seed = std::strtoull(value.c_str(), &end, 10);
      seen[0] = true;
    } else if (key == "epoch" || key == "position" || key == "size") {
      long long v = std::strtoll(value.c_str(), &end, 10);
      if (v < 0) return bad(str_cat(key, " is negative"));
      const int which = key == "epoch" ? 1 : key == "position" ? 2 : 4;
      (which == 1 ? s.epoch : which == 2 ? s.position : s.dataset_size) = v;
      seen[which] = true;
    } else if (key == "rng") {
      const char* p = value.c_str();
      for (int i = 0; i < 4; ++i) {
        s.rng[i] = std::strtoull(p, &end, 16);
        if (end == p || (i < 3 && *end != ',')) return bad("rng is not four hexadecimal words");
        p = end + (i < 3 ? 1 : 0);
      }
      seen[3] = true;
    } else {
      return bad(str_cat("unknown key '", key, "'"));
    }
    if (value.empty() || !end || *end != '\0' || errno == ERANGE) return bad(str_cat("bad value for ", key));
  }
  for (bool b : seen)
    if (!b) return bad("a key is missing (seed, size, epoch, position, rng)");
  return s;
}

// ---- DataLoader ----

Result<std::unique_ptr<DataLoader>> DataLoader::create(std::shared_ptr<const Dataset> dataset, AugmentList augment,
                                                       const LoaderOptions& options) {
  if (!dataset) return invalid_argument("data loader: no dataset");
  const std::string what = str_cat("data loader over ", dataset->describe());
  if (options.batch_size < 1) return invalid_argument(what, ": batch_size ", options.batch_size, " (at least 1)");
  if (options.shards < 1 || options.shard < 0 || options.shard >= options.shards)
    return invalid_argument(what, ": shard ", options.shard, " of ", options.shards, " (0 <= shard < shards)");
  if (options.threads < 0 || options.threads > 256)
    return invalid_argument(what, ": threads ", options.threads, " (0 to 256)");
  if (options.prefetch < 1 || options.prefetch > 4096)
    return invalid_argument(what, ": prefetch ", options.prefetch, " (1 to 4096)");
  if (dataset->size() < 1) return invalid_argument(what, ": the dataset is empty");
  if (options.drop_last && dataset->size() < options.batch_size)
    return invalid_argument(what, ": drop_last with ", dataset->size(), " samples and batch_size ", options.batch_size,
                            " leaves no batch");
  auto shape = augmented_shape(augment, dataset->image_shape());
  if (!shape.is_ok()) return shape.take_status().with_prefix(what);
  auto loader = std::unique_ptr<DataLoader>(new DataLoader(std::move(dataset), std::move(augment), options, *shape));
  loader->start_workers();
  return loader;
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, AugmentList augment, const LoaderOptions& options,
                       ImageShape out_shape)
    : dataset_(std::move(dataset)), augment_(std::move(augment)), options_(options), out_shape_(out_shape) {
  LoaderState initial;
  initial.seed = options.seed;
  initial.dataset_size = dataset_->size();
  initial.rng = Rng(options.seed).state();
  reset_plan(initial);
}

DataLoader::~DataLoader() { stop_workers(); }

int64_t DataLoader::batches_per_epoch() const {
  const int64_t n = dataset_->size(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

std::shared_ptr<const std::vector<int64_t>> DataLoader::make_order(Rng& rng) const {
  auto order = std::make_shared<std::vector<int64_t>>(static_cast<size_t>(dataset_->size()));
  for (size_t i = 0; i < order->size(); ++i) (*order)[i] = static_cast<int64_t>(i);
  if (options_.shuffle) {
    // Fisher-Yates with the loader's own generator: the same order on every platform.
    for (size_t i = order->size(); i > 1; --i) std::swap((*order)[i - 1], (*order)[rng.below(i)]);
  }
  return order;
}

void DataLoader::reset_plan(const LoaderState& state) {
  plan_seed_ = state.seed;
  plan_epoch_ = state.epoch;
  plan_rng_ = Rng::from_state(state.rng);
  plan_epoch_rng_ = plan_rng_.state();
  plan_order_ = make_order(plan_rng_);
  plan_pos_ = state.position;
  planned_ = 0;
  delivered_ = 0;
  done_.clear();
  state_ = state;
  state_.rng = plan_epoch_rng_;
}

DataLoader::Job DataLoader::plan_next() {
  const int64_t n = dataset_->size(), b = options_.batch_size;
  auto epoch_done = [&](int64_t pos) { return n - pos <= 0 || (options_.drop_last && n - pos < b); };
  while (epoch_done(plan_pos_)) {
    ++plan_epoch_;
    plan_pos_ = 0;
    plan_epoch_rng_ = plan_rng_.state();
    plan_order_ = make_order(plan_rng_);
  }
  Job job;
  job.seq = planned_++;
  job.seed = plan_seed_;
  job.epoch = plan_epoch_;
  job.start = plan_pos_;
  job.count = std::min(b, n - plan_pos_);
  job.epoch_rng = plan_epoch_rng_;
  job.order = plan_order_;
  plan_pos_ += job.count;
  job.last_in_epoch = epoch_done(plan_pos_);
  return job;
}

Result<Batch> DataLoader::build(const Job& job) const {
  Batch batch;
  batch.epoch = job.epoch;
  batch.position = job.start;
  batch.last_in_epoch = job.last_in_epoch;
  // This shard's slice of the batch.
  const int64_t lo = job.count * options_.shard / options_.shards;
  const int64_t count = job.count * (options_.shard + 1) / options_.shards - lo;
  KILN_ASSIGN_OR_RETURN(batch.labels, Tensor::empty(DataType::kInt64, {count}));
  ImageShape shape = out_shape_;
  float* dst = nullptr;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t pos = job.start + lo + i;
    const int64_t index = (*job.order)[static_cast<size_t>(pos)];
    batch.indices.push_back(index);
    auto where = [&] { return str_cat("sample ", index, " of ", dataset_->describe(), " (epoch ", job.epoch, ")"); };
    auto sample = dataset_->sample(index);
    if (!sample.is_ok()) return sample.take_status().with_prefix(where());
    if (sample->label < 0 || sample->label >= dataset_->num_classes())
      return invalid_argument(where(), ": label ", sample->label, " is out of range for ", dataset_->num_classes(),
                              " classes");
    if (!sample->image.consistent())
      return invalid_argument(where(), ": its pixels do not match its shape ", sample->image.shape.to_string());
    Image image = to_float(std::move(sample->image));
    Rng rng(derive_seed(job.seed, static_cast<uint64_t>(job.epoch), static_cast<uint64_t>(pos)));
    Status st = apply_augmentations(augment_, image, rng);
    if (!st.is_ok()) return std::move(st).with_prefix(where());
    if (i == 0) {
      if (!shape.is_fixed()) shape = image.shape;
      KILN_ASSIGN_OR_RETURN(batch.images,
                            Tensor::empty(DataType::kFloat32, {count, shape.channels, shape.height, shape.width}));
      dst = batch.images.data<float>();
    }
    if (image.shape != shape)
      return invalid_argument(where(), ": ", image.shape.to_string(), " after augmentation, the batch's images are ",
                              shape.to_string(), " (resize the images or crop them to one size)");
    const int64_t hw = shape.height * shape.width, c = shape.channels;
    float* out = dst + i * c * hw;
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t k = 0; k < c; ++k) out[k * hw + p] = image.f32[static_cast<size_t>(p * c + k)];
    batch.labels.data<int64_t>()[i] = sample->label;
  }
  if (count == 0) {  // a shard's empty slice of a short last batch
    KILN_ASSIGN_OR_RETURN(batch.images,
                          Tensor::empty(DataType::kFloat32, {0, shape.channels, shape.height, shape.width}));
  }
  return batch;
}

Result<Batch> DataLoader::build_guarded(const Job& job) const {
  try {
    return build(job);
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kOutOfMemory, str_cat("data loader over ", dataset_->describe(),
                                                    ": out of memory building a batch of ", job.count, " samples"));
  }
}

void DataLoader::start_workers() {
  for (int t = 0; t < options_.threads; ++t) workers_.emplace_back([this] { worker_loop(); });
}

void DataLoader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& w : workers_) w.join();
  workers_.clear();
  std::lock_guard<std::mutex> lock(mu_);
  stop_ = false;
}

void DataLoader::worker_loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || planned_ < delivered_ + options_.prefetch; });
      if (stop_) return;
      job = plan_next();
    }
    Result<Batch> result = build_guarded(job);
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_.emplace(job.seq, std::make_pair(job, std::move(result)));
    }
    done_cv_.notify_all();
  }
}

Result<Batch> DataLoader::next() {
  Job job;
  std::optional<Result<Batch>> result;
  std::unique_lock<std::mutex> lock(mu_);
  if (workers_.empty()) {
    job = plan_next();
    lock.unlock();
    result.emplace(build_guarded(job));
    lock.lock();
  } else {
    done_cv_.wait(lock, [&] { return done_.count(delivered_) > 0; });
    auto node = done_.extract(delivered_);
    job = node.mapped().first;
    result.emplace(std::move(node.mapped().second));
  }
  ++delivered_;
  if (result->is_ok()) {
    state_.seed = job.seed;
    state_.epoch = job.epoch;
    state_.position = job.start + job.count;
    state_.rng = job.epoch_rng;
  }
  lock.unlock();
  work_cv_.notify_all();
  return std::move(*result);
}

LoaderState DataLoader::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

Status DataLoader::restore(const LoaderState& state) {
  if (state.dataset_size != dataset_->size())
    return invalid_argument("data loader over ", dataset_->describe(), ": the state to restore is from a dataset of ",
                            state.dataset_size, " samples (is it the same dataset?)");
  if (state.epoch < 0 || state.position < 0 || state.position > dataset_->size())
    return invalid_argument("data loader over ", dataset_->describe(), ": cannot restore epoch ", state.epoch,
                            " position ", state.position, " (the dataset has ", dataset_->size(),
                            " samples: is it the same dataset?)");
  stop_workers();
  {
    std::lock_guard<std::mutex> lock(mu_);
    reset_plan(state);
  }
  start_workers();
  return Status::ok();
}

}  // namespace kiln::train
