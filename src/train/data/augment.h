#pragma once
// Augmentations: per-sample image transforms applied by the loader to float32 HWC images, each random
// choice drawn from the loader's per-sample generator, so the same seed gives the same images whatever
// the thread count. Built by name from a key/value map (a config's `augment:` list):
//   augment: [{random_crop: {size: 28, padding: 2}}, {hflip: 0.5}]
// A scalar value (`hflip: 0.5`) sets the augmentation's primary key (augmentation_primary_key).
// A config's typed values (OptionMap) convert with params_from_options (params.h).
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/status.h"
#include "train/data/image.h"
#include "train/data/rng.h"

namespace kiln::train {

class Augmentation {
 public:
  virtual ~Augmentation() = default;
  /// "random_crop(size=28x28, padding=2)".
  virtual std::string describe() const = 0;
  /// The shape this produces from `in` (a 0 height or width: varies), or why it cannot take `in`.
  virtual Result<ImageShape> output_shape(const ImageShape& in) const { return in; }
  /// Transforms a float32 HWC image in place.
  virtual Status apply(Image& image, Rng& rng) const = 0;
};

using AugmentList = std::vector<std::shared_ptr<const Augmentation>>;
/// Keys to values as written in a config ("28", "0.5", "[0.5, 0.5, 0.5]", "image").
using AugmentParams = std::map<std::string, std::string>;

/// What some augmentations take from the dataset.
struct AugmentContext {
  /// The dataset's mean image (float32 HWC), for mean_subtract.
  const Image* mean_image = nullptr;
};

/// Builds an augmentation. Names and keys (defaults in brackets):
///   random_crop  size | height, width; padding [0]; fill [0]      (pads, then crops at a random offset)
///   center_crop  size | height, width
///   hflip, vflip p [0.5]
///   rotate       degrees (the largest angle, uniform in [-degrees, degrees]); fill [0]; p [1]
///   mean_subtract mode [image, or pixel when values are given]: image (the dataset's mean image) or pixel
///                (per channel: values, or the channel means of the mean image); values
///   scale        factor [1/255]                                   (to [0, 1] from 8-bit pixels)
///   normalize    mean, std: one value or one per channel          ((x - mean) / std)
///   noise        std; p [1]                                       (additive Gaussian noise)
///   hsv_shift    hue (degrees), saturation, value (largest relative changes) [0]; range [255] (the
///                pixels' maximum); RGB only
/// Errors name the augmentation and the key.
Result<std::shared_ptr<const Augmentation>> make_augmentation(std::string_view name, const AugmentParams& params,
                                                              const AugmentContext& context = {});
/// The key a scalar value sets ("p" for hflip, "size" for random_crop); empty when there is none.
std::string_view augmentation_primary_key(std::string_view name);
/// The known names.
const std::vector<std::string>& augmentation_names();
/// A list, in order; errors say which entry ("augment[1] (hflip): ...").
Result<AugmentList> make_augmentations(const std::vector<std::pair<std::string, AugmentParams>>& specs,
                                       const AugmentContext& context = {});

/// The shape after every augmentation of `list`, or the first one's reason it cannot take its input.
Result<ImageShape> augmented_shape(const AugmentList& list, ImageShape in);
/// Applies `list` in order to a float32 image.
Status apply_augmentations(const AugmentList& list, Image& image, Rng& rng);

}  // namespace kiln::train
