#pragma once
// The data loader: shuffles a dataset with a seeded generator, decodes and augments samples on worker
// threads, and hands out float32 NCHW batches with int64 labels, in order, with a bounded number of
// batches prepared ahead. Output order and content depend only on the seed and the options, never on the
// thread count; state() / restore() continue a run exactly (epoch, position and the shuffle generator).
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kiln/tensor.h"
#include "train/data/augment.h"
#include "train/data/dataset.h"
#include "train/data/rng.h"

namespace kiln::train {

struct LoaderOptions {
  int64_t batch_size = 32;
  bool shuffle = true;
  /// Leave out an epoch's last batch when it is smaller than batch_size.
  bool drop_last = false;
  uint64_t seed = 0;
  /// Worker threads that decode and augment; 0: next() does the work on the caller's thread.
  int threads = 0;
  /// Batches prepared ahead of the one next() returns (with threads > 0); at least 1.
  int prefetch = 4;
  /// Data parallel training: each of `shards` processes loads its slice (`shard`, 0-based) of every batch of
  /// batch_size samples (the slices of a batch differ by at most one sample); order, augmentation and state
  /// are those of the whole batch, so the shards together give what one loader gives.
  int shards = 1;
  int shard = 0;
};

/// Where a loader stands: enough to continue exactly where it was.
struct LoaderState {
  uint64_t seed = 0;
  /// The dataset's size, checked on restore.
  int64_t dataset_size = 0;
  int64_t epoch = 0;
  /// Samples of `epoch` already handed out.
  int64_t position = 0;
  /// The shuffle generator as it was at the start of `epoch` (before that epoch's shuffle).
  Rng::State rng{};
  bool operator==(const LoaderState&) const = default;
  /// One line of text: "kiln-loader 1 seed=.. size=.. epoch=.. position=.. rng=a,b,c,d" (rng in hexadecimal).
  std::string serialize() const;
  static Result<LoaderState> parse(std::string_view text);
};

struct Batch {
  Tensor images;  ///< float32 [N, C, H, W]
  Tensor labels;  ///< int64 [N]
  int64_t epoch = 0;
  int64_t position = 0;          ///< the position in the epoch of its first sample
  std::vector<int64_t> indices;  ///< the dataset index of each sample
  bool last_in_epoch = false;
};

class DataLoader {
 public:
  /// Errors when the options are wrong or the augmentations cannot take the dataset's images.
  static Result<std::unique_ptr<DataLoader>> create(std::shared_ptr<const Dataset> dataset, AugmentList augment,
                                                    const LoaderOptions& options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  /// The next batch (one thread calls next(), restore() and state()); epochs follow each other without a break (see
  /// Batch::epoch and last_in_epoch). An error names the sample and its file; the loader then goes on with the batch
  /// after it.
  Result<Batch> next();
  /// The state after the last batch next() returned (batches prefetched but not returned do not count).
  LoaderState state() const;
  /// Continues from `state` (from state() of a loader over the same dataset with the same options).
  Status restore(const LoaderState& state);

  int64_t batches_per_epoch() const;
  /// The batch images' shape (height and width 0 when they vary and each batch takes its first image's).
  ImageShape output_shape() const { return out_shape_; }
  const Dataset& dataset() const { return *dataset_; }
  const LoaderOptions& options() const { return options_; }

 private:
  struct Job {
    int64_t seq = 0;
    uint64_t seed = 0;
    int64_t epoch = 0;
    int64_t start = 0;
    int64_t count = 0;
    bool last_in_epoch = false;
    Rng::State epoch_rng{};
    std::shared_ptr<const std::vector<int64_t>> order;
  };
  DataLoader(std::shared_ptr<const Dataset> dataset, AugmentList augment, const LoaderOptions& options,
             ImageShape out_shape);
  void reset_plan(const LoaderState& state);
  Job plan_next();  // with mu_ held
  std::shared_ptr<const std::vector<int64_t>> make_order(Rng& rng) const;
  Result<Batch> build(const Job& job) const;
  Result<Batch> build_guarded(const Job& job) const;  // build(), with std::bad_alloc as an error
  void start_workers();
  void stop_workers();
  void worker_loop();

  std::shared_ptr<const Dataset> dataset_;
  AugmentList augment_;
  LoaderOptions options_;
  ImageShape out_shape_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  bool stop_ = false;
  // Planning (the sequence of batches): the epoch and position of the next batch to plan.
  uint64_t plan_seed_ = 0;
  int64_t plan_epoch_ = 0;
  int64_t plan_pos_ = 0;
  Rng plan_rng_;
  Rng::State plan_epoch_rng_{};
  std::shared_ptr<const std::vector<int64_t>> plan_order_;
  int64_t planned_ = 0;    // jobs handed to builders
  int64_t delivered_ = 0;  // jobs returned by next()
  std::map<int64_t, std::pair<Job, Result<Batch>>> done_;
  LoaderState state_;
  std::vector<std::thread> workers_;
};

}  // namespace kiln::train
