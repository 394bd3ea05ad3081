#pragma once
// Images as the data pipeline passes them around: height x width x channels, row-major (HWC), uint8 or
// float32, plus the few pixel operations several stages share (conversion, bilinear sampling, resizing).
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/status.h"

namespace kiln::train {

/// An image's size. A height or width of 0 in a dataset's shape means "varies from image to image".
struct ImageShape {
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;
  int64_t numel() const { return height * width * channels; }
  bool is_fixed() const { return height > 0 && width > 0 && channels > 0; }
  bool operator==(const ImageShape&) const = default;
  /// "28x28x1" ("?" for a size that varies).
  std::string to_string() const;
};

/// Pixels in HWC order; `dtype` is kUInt8 (pixels in `u8`) or kFloat32 (pixels in `f32`).
struct Image {
  ImageShape shape;
  DataType dtype = DataType::kUInt8;
  std::vector<uint8_t> u8;
  std::vector<float> f32;

  static Image zeros_u8(const ImageShape& shape);
  static Image zeros_f32(const ImageShape& shape);
  /// Pixel (y, x, c) as float, whatever the dtype (no bounds check).
  float at(int64_t y, int64_t x, int64_t c) const {
    int64_t i = (y * shape.width + x) * shape.channels + c;
    return dtype == DataType::kUInt8 ? static_cast<float>(u8[i]) : f32[i];
  }
  /// True when the pixel vector matches the shape and dtype.
  bool consistent() const;
};

/// A float32 copy of `image` (exact for uint8 pixels; the same image when it already is float32).
Image to_float(Image image);

/// Bilinear sample of channel `c` at (y, x) in pixel coordinates (pixel centres at integers); points
/// outside the image read `fill`.
float sample_bilinear(const Image& image, double y, double x, int64_t c, float fill);

/// Resizes to `height` x `width` with bilinear interpolation (half-pixel centres, like OpenCV's
/// INTER_LINEAR); keeps the dtype (uint8 results are rounded and clamped).
Image resize_bilinear(const Image& image, int64_t height, int64_t width);

}  // namespace kiln::train
