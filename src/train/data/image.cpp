#include "train/data/image.h"

#include <algorithm>
#include <cmath>

namespace kiln::train {

std::string ImageShape::to_string() const {
  auto dim = [](int64_t d) { return d > 0 ? std::to_string(d) : std::string("?"); };
  return dim(height) + "x" + dim(width) + "x" + dim(channels);
}

Image Image::zeros_u8(const ImageShape& shape) {
  Image image;
  image.shape = shape;
  image.dtype = DataType::kUInt8;
  image.u8.assign(static_cast<size_t>(shape.numel()), 0);
  return image;
}

Image Image::zeros_f32(const ImageShape& shape) {
  Image image;
  image.shape = shape;
  image.dtype = DataType::kFloat32;
  image.f32.assign(static_cast<size_t>(shape.numel()), 0.0f);
  return image;
}

bool Image::consistent() const {
  if (shape.height < 0 || shape.width < 0 || shape.channels < 0) return false;
  auto n = static_cast<size_t>(shape.numel());
  if (dtype == DataType::kUInt8) return u8.size() == n && f32.empty();
  if (dtype == DataType::kFloat32) return f32.size() == n && u8.empty();
  return false;
}

Image to_float(Image image) {
  if (image.dtype == DataType::kFloat32) return image;
  Image out;
  out.shape = image.shape;
  out.dtype = DataType::kFloat32;
  out.f32.assign(image.u8.begin(), image.u8.end());
  return out;
}

float sample_bilinear(const Image& image, double y, double x, int64_t c, float fill) {
  const int64_t h = image.shape.height, w = image.shape.width;
  double fy = std::floor(y), fx = std::floor(x);
  auto y0 = static_cast<int64_t>(fy), x0 = static_cast<int64_t>(fx);
  double dy = y - fy, dx = x - fx;
  auto pixel = [&](int64_t yy, int64_t xx) {
    return (yy < 0 || yy >= h || xx < 0 || xx >= w) ? static_cast<double>(fill)
                                                    : static_cast<double>(image.at(yy, xx, c));
  };
  if (y0 < -1 || y0 >= h || x0 < -1 || x0 >= w) return fill;
  double top = pixel(y0, x0) * (1 - dx) + pixel(y0, x0 + 1) * dx;
  double bottom = pixel(y0 + 1, x0) * (1 - dx) + pixel(y0 + 1, x0 + 1) * dx;
  return static_cast<float>(top * (1 - dy) + bottom * dy);
}

Image resize_bilinear(const Image& image, int64_t height, int64_t width) {
  ImageShape shape{height, width, image.shape.channels};
  if (shape == image.shape) return image;
  Image out = image.dtype == DataType::kUInt8 ? Image::zeros_u8(shape) : Image::zeros_f32(shape);
  const int64_t h = image.shape.height, w = image.shape.width, c = shape.channels;
  if (h <= 0 || w <= 0) return out;
  double sy = static_cast<double>(h) / static_cast<double>(height);
  double sx = static_cast<double>(w) / static_cast<double>(width);
  for (int64_t y = 0; y < height; ++y) {
    // Half-pixel centres, clamped to the edge so that borders repeat rather than fade.
    double src_y = std::clamp((static_cast<double>(y) + 0.5) * sy - 0.5, 0.0, static_cast<double>(h - 1));
    for (int64_t x = 0; x < width; ++x) {
      double src_x = std::clamp((static_cast<double>(x) + 0.5) * sx - 0.5, 0.0, static_cast<double>(w - 1));
      for (int64_t k = 0; k < c; ++k) {
        float v = sample_bilinear(image, src_y, src_x, k, 0.0f);
        int64_t i = (y * width + x) * c + k;
        if (out.dtype == DataType::kUInt8) {
          out.u8[i] = static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
        } else {
          out.f32[i] = v;
        }
      }
    }
  }
  return out;
}

}  // namespace kiln::train
