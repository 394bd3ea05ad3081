#include "train/data/synthetic.h"

namespace kiln::train {
namespace {

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

}  // namespace

Result<std::shared_ptr<SyntheticDataset>> SyntheticDataset::create(int64_t count, ImageShape shape, int64_t classes,
                                                                   uint64_t seed) {
  if (count <= 0 || !shape.is_fixed() || shape.numel() > (int64_t{1} << 26) || classes < 2 || classes > 100000)
    return invalid_argument(
        "a synthetic dataset needs count > 0, a fixed image shape (height, width, channels) and "
        "2..100000 classes; got ",
        count, " images of ", shape.to_string(), ", ", classes, " classes");
  auto d = std::shared_ptr<SyntheticDataset>(new SyntheticDataset());
  d->count_ = count;
  d->shape_ = shape;
  d->seed_ = seed;
  for (int64_t c = 0; c < classes; ++c) d->names_.push_back("class" + std::to_string(c));
  return d;
}

Result<Sample> SyntheticDataset::sample(int64_t index) const {
  if (index < 0 || index >= count_) return invalid_argument("synthetic sample ", index, " is out of range");
  Sample s;
  s.image = Image::zeros_u8(shape_);
  const uint64_t base = mix(seed_ ^ mix(static_cast<uint64_t>(index)));
  for (size_t i = 0; i < s.image.u8.size(); i += 8) {
    uint64_t r = mix(base + i);
    for (size_t k = 0; k < 8 && i + k < s.image.u8.size(); ++k, r >>= 8) s.image.u8[i + k] = static_cast<uint8_t>(r);
  }
  s.label = static_cast<int64_t>(base % names_.size());
  return s;
}

std::string SyntheticDataset::describe() const {
  return str_cat("synthetic (", count_, " images ", shape_.to_string(), ", ", names_.size(), " classes)");
}

}  // namespace kiln::train
