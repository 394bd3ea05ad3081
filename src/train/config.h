#pragma once
// The training config of `kiln train --config FILE [key=value ...]`: a YAML file with dotted command-line
// overrides (`optim.lr=0.01 trainer.epochs=5`). Every key is checked: an unknown key, a wrong type or a bad
// value is an error naming the key and the file.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kiln/status.h"
#include "train/optim/options.h"

namespace kiln::train {

/// One augmentation as the config writes it: `{random_crop: {size: 28, padding: 2}}` or `{hflip: 0.5}`.
struct AugmentSpec {
  std::string name;
  OptionMap options;  ///< a bare value (`{hflip: 0.5}`) is stored under "" (the augmentation's primary key)
};

struct TrainConfig {
  std::string file;  ///< where it came from (for messages)

  struct Model {
    std::string name = "fashion_cnn";  ///< fashion_cnn, lenet, alexnet, googlenet, resnet18, resnet50
    int64_t width = 0;                 ///< fashion_cnn's first conv channels (0: its default)
  } model;

  struct Data {
    std::string format = "idx";  ///< idx, folder, list, lmdb, synthetic (benchmarks: hashed pixels, no files)
    std::string train, val;      ///< idx: a folder and split names; folder/list/lmdb: paths
    std::string train_split = "train", val_split = "t10k";
    std::string labels;                      ///< list: the labels file
    int64_t train_limit = 0, val_limit = 0;  ///< use only the first N images (0: all)
    int64_t batch_size = 64;
    int64_t val_batch_size = 0;  ///< 0: batch_size
    bool shuffle = true;
    bool drop_last = false;
    int64_t workers = 2;
    int64_t prefetch = 4;
    int64_t height = 0, width = 0, channels = 0;  ///< folder/list images resized to this (0: as stored)
    int64_t classes = 0;                          ///< synthetic: the number of classes (0: 1000)
    double scale = 1.0 / 255.0;                   ///< pixel * scale, then (x - mean) / std per channel
    std::vector<double> mean, std;
    std::vector<AugmentSpec> augment;
  } data;

  OptionMap optim{{"name", "adam"}, {"lr", 0.001}};
  OptionMap lr_policy{{"name", "fixed"}};

  struct Loss {
    std::string name = "cross_entropy";
    double label_smoothing = 0;
  } loss;

  struct Trainer {
    int64_t epochs = 5;
    int64_t seed = 1;
    int64_t threads = 0;  ///< 0: the machine's cores
    int64_t log_every = 50;
    int64_t val_every = 1;       ///< epochs
    int64_t snapshot_every = 1;  ///< epochs (0: only the last)
    int64_t snapshot_steps = 0;  ///< also every N steps (0: off)
    double max_seconds = 0;      ///< stop after this much training time (0: no limit)
    std::string backend = "cpu";
    /// fp32; fp16 or bf16: mixed precision (compute layers and their backward in reduced precision where the
    /// backend has kernels, float32 master weights, norms and the loss in float32).
    std::string precision = "fp32";
    /// fp16 loss scaling: the initial scale (0: 2^16); dynamic: halved (and the step skipped) when the gradients
    /// overflow, doubled after loss_scale_window good steps; otherwise fixed. bf16 and fp32 do not scale.
    double loss_scale = 0;
    bool loss_scale_dynamic = true;
    int64_t loss_scale_window = 2000;
    /// Graph optimizer passes to leave out of the training and evaluation engines, comma-separated (as
    /// `kiln exec --disable-pass` takes them), e.g. "layout-nhwc".
    std::string disable_passes;
    /// Micro-batches of data.batch_size whose gradients are averaged before one optimizer step.
    int64_t grad_accumulation = 1;
    bool progress = true;
    /// Time every layer of the training engine (each waits for the GPU, so steps get slower) and write
    /// profile.txt in the run folder: the layers and kernels by total time.
    bool profile = false;
  } trainer;

  /// The resolved config as YAML (saved in the run folder).
  std::string to_yaml() const;
};

/// Reads `path` (empty: the defaults) and applies `overrides` ("key.sub=value").
Result<TrainConfig> load_train_config(const std::string& path, const std::vector<std::string>& overrides = {});
/// Parses config text (tests); `source` names it in errors.
Result<TrainConfig> parse_train_config(const std::string& text, const std::string& source,
                                       const std::vector<std::string>& overrides = {});

}  // namespace kiln::train
