#pragma once
// A synthetic dataset for benchmarks: `count` images of a fixed shape whose pixels and labels come from a hash of
// (seed, index), so no memory or files are needed and every run sees the same data.
#include "train/data/dataset.h"

namespace kiln::train {

class SyntheticDataset final : public Dataset {
 public:
  static Result<std::shared_ptr<SyntheticDataset>> create(int64_t count, ImageShape shape, int64_t classes,
                                                          uint64_t seed);
  int64_t size() const override { return count_; }
  Result<Sample> sample(int64_t index) const override;
  const std::vector<std::string>& class_names() const override { return names_; }
  ImageShape image_shape() const override { return shape_; }
  DataType pixel_type() const override { return DataType::kUInt8; }
  std::string describe() const override;

 private:
  int64_t count_ = 0;
  ImageShape shape_;
  std::vector<std::string> names_;
  uint64_t seed_ = 0;
};

}  // namespace kiln::train
