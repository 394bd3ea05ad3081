#pragma once
// Dataset stores in LMDB (DIGITS's and Caffe's format of choice; the studio creates these): one record
// per sample under its zero-padded index ("0000000042"), each a 32-byte header (magic "KSMP", height,
// width, channels as uint32, pixel type, label as int64, little-endian) followed by the HWC pixels; the
// key "~meta" holds JSON (count, shape, pixel type, class names) and "~mean" the mean image (float32 HWC),
// computed while writing.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "train/data/dataset.h"

struct MDB_env;

namespace kiln::train {

struct LmdbWriteOptions {
  /// Replace a store already at the path (otherwise that is an error).
  bool overwrite = false;
  /// Samples decoded at once (in parallel, OpenMP) and written in one transaction.
  int64_t chunk = 512;
  /// Called after each chunk with (samples written, total).
  std::function<void(int64_t, int64_t)> progress;
};

struct LmdbStoreInfo {
  int64_t count = 0;
  ImageShape shape;
  DataType pixel_type = DataType::kUInt8;
  Image mean;  ///< float32, `shape`
};

/// Writes every sample of `dataset` into a new LMDB store (a folder) at `path`. The images must all have
/// one size (resize an image folder when opening it). Errors name the sample and its dataset.
Result<LmdbStoreInfo> write_lmdb(const Dataset& dataset, const std::string& path, const LmdbWriteOptions& options = {});

/// The key of sample `index`: ten digits, zero-padded.
std::string lmdb_key(int64_t index);

/// An LMDB store read as a dataset; records are checked against the store's metadata when read.
class LmdbDataset final : public Dataset {
 public:
  static Result<std::shared_ptr<LmdbDataset>> open(const std::string& path);
  ~LmdbDataset() override;
  LmdbDataset(const LmdbDataset&) = delete;
  LmdbDataset& operator=(const LmdbDataset&) = delete;

  int64_t size() const override { return count_; }
  Result<Sample> sample(int64_t index) const override;
  const std::vector<std::string>& class_names() const override { return class_names_; }
  ImageShape image_shape() const override { return shape_; }
  DataType pixel_type() const override { return pixel_type_; }
  const Image* mean_image() const override { return &mean_; }
  std::string describe() const override;

 private:
  LmdbDataset() = default;
  std::string path_;
  MDB_env* env_ = nullptr;
  unsigned dbi_ = 0;
  int64_t count_ = 0;
  ImageShape shape_;
  DataType pixel_type_ = DataType::kUInt8;
  std::vector<std::string> class_names_;
  Image mean_;
};

}  // namespace kiln::train
