#include "train/data/augment.h"

#include "train/data/params.h"
#include "train/optim/option_reader.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numbers>
#include <optional>
#include <set>
#include <sstream>

namespace kiln::train {

namespace {

Status need_float(const Image& image, std::string_view name) {
  if (image.dtype != DataType::kFloat32 || !image.consistent())
    return internal_error("augmentation ", name, " got a ", dtype_name(image.dtype), " image (it takes float32)");
  return Status::ok();
}

struct CropSize {
  int64_t height = 0, width = 0;
};

Result<CropSize> read_crop_size(ParamReader& r) {
  CropSize s;
  if (r.has("size")) {
    KILN_ASSIGN_OR_RETURN(s.height, r.integer("size", std::nullopt, 1, 1 << 15));
    s.width = s.height;
    if (r.has("height") || r.has("width")) return r.error("size", "and height/width are both given (give one)");
  } else {
    KILN_ASSIGN_OR_RETURN(s.height, r.integer("height", std::nullopt, 1, 1 << 15));
    KILN_ASSIGN_OR_RETURN(s.width, r.integer("width", std::nullopt, 1, 1 << 15));
  }
  return s;
}

// Copies a height x width window whose top-left corner is at (top, left) of the image (may lie outside:
// those pixels read `fill`).
Image window(const Image& in, int64_t top, int64_t left, int64_t height, int64_t width, float fill) {
  const int64_t c = in.shape.channels, in_w = in.shape.width;
  Image out = Image::zeros_f32({height, width, c});
  // The columns that fall inside the image: [x0, x1) of the output.
  const int64_t x0 = std::clamp<int64_t>(-left, 0, width), x1 = std::clamp<int64_t>(in_w - left, x0, width);
  for (int64_t y = 0; y < height; ++y) {
    const int64_t sy = y + top;
    float* row = out.f32.data() + y * width * c;
    if (sy < 0 || sy >= in.shape.height) {
      std::fill(row, row + width * c, fill);
      continue;
    }
    std::fill(row, row + x0 * c, fill);
    if (x1 > x0) {
      const float* src = in.f32.data() + (sy * in_w + left + x0) * c;
      std::copy(src, src + (x1 - x0) * c, row + x0 * c);
    }
    std::fill(row + x1 * c, row + width * c, fill);
  }
  return out;
}

class RandomCrop final : public Augmentation {
 public:
  RandomCrop(CropSize size, int64_t padding, float fill) : size_(size), padding_(padding), fill_(fill) {}
  std::string describe() const override {
    return str_cat("random_crop(size=", size_.height, "x", size_.width, ", padding=", padding_, ")");
  }
  Result<ImageShape> output_shape(const ImageShape& in) const override {
    if (in.height > 0 && (in.height + 2 * padding_ < size_.height || in.width + 2 * padding_ < size_.width))
      return invalid_argument(describe(), ": the images are ", in.to_string(),
                              ", smaller than the crop with its padding");
    return ImageShape{size_.height, size_.width, in.channels};
  }
  Status apply(Image& image, Rng& rng) const override {
    KILN_RETURN_IF_ERROR(need_float(image, "random_crop"));
    const int64_t room_y = image.shape.height + 2 * padding_ - size_.height;
    const int64_t room_x = image.shape.width + 2 * padding_ - size_.width;
    if (room_y < 0 || room_x < 0)
      return invalid_argument(describe(), ": an image of ", image.shape.to_string(),
                              " is smaller than the crop with its padding");
    const int64_t top = rng.uniform_int(0, room_y) - padding_;
    const int64_t left = rng.uniform_int(0, room_x) - padding_;
    image = window(image, top, left, size_.height, size_.width, fill_);
    return Status::ok();
  }

 private:
  CropSize size_;
  int64_t padding_;
  float fill_;
};

class CenterCrop final : public Augmentation {
 public:
  explicit CenterCrop(CropSize size) : size_(size) {}
  std::string describe() const override { return str_cat("center_crop(size=", size_.height, "x", size_.width, ")"); }
  Result<ImageShape> output_shape(const ImageShape& in) const override {
    if (in.height > 0 && (in.height < size_.height || in.width < size_.width))
      return invalid_argument(describe(), ": the images are ", in.to_string(), ", smaller than the crop");
    return ImageShape{size_.height, size_.width, in.channels};
  }
  Status apply(Image& image, Rng&) const override {
    KILN_RETURN_IF_ERROR(need_float(image, "center_crop"));
    if (image.shape.height < size_.height || image.shape.width < size_.width)
      return invalid_argument(describe(), ": an image of ", image.shape.to_string(), " is smaller than the crop");
    image = window(image, (image.shape.height - size_.height) / 2, (image.shape.width - size_.width) / 2, size_.height,
                   size_.width, 0.0f);
    return Status::ok();
  }

 private:
  CropSize size_;
};

class Flip final : public Augmentation {
 public:
  Flip(bool horizontal, double p) : horizontal_(horizontal), p_(p) {}
  std::string describe() const override { return str_cat(horizontal_ ? "hflip" : "vflip", "(p=", p_, ")"); }
  Status apply(Image& image, Rng& rng) const override {
    KILN_RETURN_IF_ERROR(need_float(image, horizontal_ ? "hflip" : "vflip"));
    if (!rng.bernoulli(p_)) return Status::ok();
    const int64_t h = image.shape.height, w = image.shape.width, c = image.shape.channels;
    float* d = image.f32.data();
    if (horizontal_) {
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w / 2; ++x)
          std::swap_ranges(d + (y * w + x) * c, d + (y * w + x + 1) * c, d + (y * w + (w - 1 - x)) * c);
    } else {
      for (int64_t y = 0; y < h / 2; ++y) std::swap_ranges(d + y * w * c, d + (y + 1) * w * c, d + (h - 1 - y) * w * c);
    }
    return Status::ok();
  }

 private:
  bool horizontal_;
  double p_;
};

class Rotate final : public Augmentation {
 public:
  Rotate(double degrees, float fill, double p) : degrees_(degrees), fill_(fill), p_(p) {}
  std::string describe() const override { return str_cat("rotate(degrees=", degrees_, ", p=", p_, ")"); }
  Status apply(Image& image, Rng& rng) const override {
    KILN_RETURN_IF_ERROR(need_float(image, "rotate"));
    if (!rng.bernoulli(p_)) return Status::ok();
    const double angle = rng.uniform(-degrees_, degrees_) * std::numbers::pi / 180.0;
    const int64_t h = image.shape.height, w = image.shape.width, c = image.shape.channels;
    const double cy = (static_cast<double>(h) - 1) / 2, cx = (static_cast<double>(w) - 1) / 2;
    const double cs = std::cos(angle), sn = std::sin(angle);
    Image out = Image::zeros_f32(image.shape);
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        // The source of output pixel (y, x): the inverse rotation about the centre.
        const double dy = static_cast<double>(y) - cy, dx = static_cast<double>(x) - cx;
        const double sy = cy + cs * dy - sn * dx, sx = cx + sn * dy + cs * dx;
        for (int64_t k = 0; k < c; ++k) out.f32[(y * w + x) * c + k] = sample_bilinear(image, sy, sx, k, fill_);
      }
    }
    image = std::move(out);
    return Status::ok();
  }

 private:
  double degrees_;
  float fill_;
  double p_;
};

class MeanSubtract final : public Augmentation {
 public:
  // Per-pixel: `mean` is the mean image; per-channel: `values`.
  MeanSubtract(const Image* mean, std::vector<float> values) : values_(std::move(values)) {
    if (mean) mean_ = *mean;
  }
  std::string describe() const override {
    return values_.empty() ? str_cat("mean_subtract(mode=image, ", mean_.shape.to_string(), ")")
                           : str_cat("mean_subtract(mode=pixel, ", values_.size(), " values)");
  }
  Result<ImageShape> output_shape(const ImageShape& in) const override {
    if (values_.empty() && in.height > 0 && in != mean_.shape)
      return invalid_argument(describe(), ": the images are ", in.to_string(), " here, the mean image is ",
                              mean_.shape.to_string(), " (subtract the mean before crops)");
    if (!values_.empty() && values_.size() != 1 && static_cast<int64_t>(values_.size()) != in.channels)
      return invalid_argument(describe(), ": ", values_.size(), " values for ", in.channels, " channels");
    return in;
  }
  Status apply(Image& image, Rng&) const override {
    KILN_RETURN_IF_ERROR(need_float(image, "mean_subtract"));
    if (values_.empty()) {
      if (image.shape != mean_.shape)
        return invalid_argument(describe(), ": an image of ", image.shape.to_string(),
                                " does not match the mean image");
      for (size_t i = 0; i < image.f32.size(); ++i) image.f32[i] -= mean_.f32[i];
      return Status::ok();
    }
    const auto c = static_cast<size_t>(image.shape.channels);
    if (values_.size() != 1 && values_.size() != c)
      return invalid_argument(describe(), ": ", values_.size(), " values for ", c, " channels");
    for (size_t i = 0; i < image.f32.size(); ++i) image.f32[i] -= values_[values_.size() == 1 ? 0 : i % c];
    return Status::ok();
  }

 private:
  Image mean_;
  std::vector<float> values_;
};

class Scale final : public Augmentation {
 public:
  explicit Scale(double factor) : factor_(factor) {}
  std::string describe() const override { return str_cat("scale(factor=", factor_, ")"); }
  Status apply(Image& image, Rng&) const override {
    KILN_RETURN_IF_ERROR(need_float(image, "scale"));
    const auto f = static_cast<float>(factor_);
    for (float& v : image.f32) v *= f;
    return Status::ok();
  }

 private:
  double factor_;
};

class Normalize final : public Augmentation {
 public:
  Normalize(std::vector<float> mean, std::vector<float> stds) : mean_(std::move(mean)), std_(std::move(stds)) {}
  std::string describe() const override {
    return str_cat("normalize(", mean_.size(), " means, ", std_.size(), " stds)");
  }
  Result<ImageShape> output_shape(const ImageShape& in) const override {
    for (const auto* v : {&mean_, &std_}) {
      if (v->size() != 1 && static_cast<int64_t>(v->size()) != in.channels)
        return invalid_argument(describe(), ": ", v->size(), " values for images of ", in.channels, " channels");
    }
    return in;
  }
  Status apply(Image& image, Rng&) const override {
    KILN_RETURN_IF_ERROR(need_float(image, "normalize"));
    const auto c = static_cast<size_t>(image.shape.channels);
    if ((mean_.size() != 1 && mean_.size() != c) || (std_.size() != 1 && std_.size() != c))
      return invalid_argument(describe(), ": values for ", c, " channels needed");
    for (size_t i = 0; i < image.f32.size(); ++i) {
      const size_t k = i % c;
      image.f32[i] = (image.f32[i] - mean_[mean_.size() == 1 ? 0 : k]) / std_[std_.size() == 1 ? 0 : k];
    }
    return Status::ok();
  }

 private:
  std::vector<float> mean_, std_;
};

class Noise final : public Augmentation {
 public:
  Noise(double stddev, double p) : std_(stddev), p_(p) {}
  std::string describe() const override { return str_cat("noise(std=", std_, ", p=", p_, ")"); }
  Status apply(Image& image, Rng& rng) const override {
    KILN_RETURN_IF_ERROR(need_float(image, "noise"));
    if (!rng.bernoulli(p_)) return Status::ok();
    for (float& v : image.f32) v += static_cast<float>(std_ * rng.normal());
    return Status::ok();
  }

 private:
  double std_, p_;
};

class HsvShift final : public Augmentation {
 public:
  HsvShift(double hue, double saturation, double value, double range)
      : hue_(hue), saturation_(saturation), value_(value), range_(range) {}
  std::string describe() const override {
    return str_cat("hsv_shift(hue=", hue_, ", saturation=", saturation_, ", value=", value_, ")");
  }
  Result<ImageShape> output_shape(const ImageShape& in) const override {
    if (in.channels != 3)
      return invalid_argument(describe(), ": takes RGB images, these have ", in.channels, " channels");
    return in;
  }
  Status apply(Image& image, Rng& rng) const override {
    KILN_RETURN_IF_ERROR(need_float(image, "hsv_shift"));
    if (image.shape.channels != 3)
      return invalid_argument(describe(), ": takes RGB images, this one has ", image.shape.channels, " channels");
    const double dh = rng.uniform(-hue_, hue_) / 60.0;  // in sextants
    const double fs = 1 + rng.uniform(-saturation_, saturation_);
    const double fv = 1 + rng.uniform(-value_, value_);
    const double inv = 1 / range_;
    for (size_t i = 0; i + 3 <= image.f32.size(); i += 3) {
      double r = std::clamp(image.f32[i] * inv, 0.0, 1.0), g = std::clamp(image.f32[i + 1] * inv, 0.0, 1.0),
             b = std::clamp(image.f32[i + 2] * inv, 0.0, 1.0);
      double mx = std::max({r, g, b}), mn = std::min({r, g, b}), d = mx - mn;
      double h = 0;
      if (d > 0) {
        if (mx == r)
          h = std::fmod((g - b) / d + 6, 6.0);
        else if (mx == g)
          h = (b - r) / d + 2;
        else
          h = (r - g) / d + 4;
      }
      double s = mx > 0 ? d / mx : 0, v = mx;
      h = std::fmod(h + dh + 12, 6.0);
      s = std::clamp(s * fs, 0.0, 1.0);
      v = std::clamp(v * fv, 0.0, 1.0);
      // Back to RGB.
      const double cc = v * s, x = cc * (1 - std::fabs(std::fmod(h, 2.0) - 1)), m = v - cc;
      double rgb[3];
      switch (static_cast<int>(h)) {
        case 0: rgb[0] = cc, rgb[1] = x, rgb[2] = 0; break;
        case 1: rgb[0] = x, rgb[1] = cc, rgb[2] = 0; break;
        case 2: rgb[0] = 0, rgb[1] = cc, rgb[2] = x; break;
        case 3: rgb[0] = 0, rgb[1] = x, rgb[2] = cc; break;
        case 4: rgb[0] = x, rgb[1] = 0, rgb[2] = cc; break;
        default: rgb[0] = cc, rgb[1] = 0, rgb[2] = x; break;
      }
      for (int k = 0; k < 3; ++k) image.f32[i + k] = static_cast<float>((rgb[k] + m) * range_);
    }
    return Status::ok();
  }

 private:
  double hue_, saturation_, value_, range_;
};

}  // namespace

const std::vector<std::string>& augmentation_names() {
  static const std::vector<std::string> kNames{"random_crop",   "center_crop", "hflip",     "vflip", "rotate",
                                               "mean_subtract", "scale",       "normalize", "noise", "hsv_shift"};
  return kNames;
}

std::string_view augmentation_primary_key(std::string_view name) {
  if (name == "random_crop" || name == "center_crop") return "size";
  if (name == "hflip" || name == "vflip") return "p";
  if (name == "rotate") return "degrees";
  if (name == "mean_subtract") return "mode";
  if (name == "scale") return "factor";
  if (name == "noise") return "std";
  return "";
}

Result<std::shared_ptr<const Augmentation>> make_augmentation(std::string_view name, const AugmentParams& params,
                                                              const AugmentContext& context) {
  ParamReader r(str_cat("augmentation '", name, "'"), params);
  std::shared_ptr<const Augmentation> out;
  if (name == "random_crop") {
    KILN_ASSIGN_OR_RETURN(CropSize size, read_crop_size(r));
    KILN_ASSIGN_OR_RETURN(int64_t padding, r.integer("padding", 0, 0, 1 << 12));
    KILN_ASSIGN_OR_RETURN(double fill, r.number("fill", 0.0, -1e30, 1e30));
    out = std::make_shared<RandomCrop>(size, padding, static_cast<float>(fill));
  } else if (name == "center_crop") {
    KILN_ASSIGN_OR_RETURN(CropSize size, read_crop_size(r));
    out = std::make_shared<CenterCrop>(size);
  } else if (name == "hflip" || name == "vflip") {
    KILN_ASSIGN_OR_RETURN(double p, r.number("p", 0.5, 0.0, 1.0));
    out = std::make_shared<Flip>(name == "hflip", p);
  } else if (name == "rotate") {
    KILN_ASSIGN_OR_RETURN(double degrees, r.number("degrees", std::nullopt, 0.0, 180.0));
    KILN_ASSIGN_OR_RETURN(double fill, r.number("fill", 0.0, -1e30, 1e30));
    KILN_ASSIGN_OR_RETURN(double p, r.number("p", 1.0, 0.0, 1.0));
    out = std::make_shared<Rotate>(degrees, static_cast<float>(fill), p);
  } else if (name == "mean_subtract") {
    std::vector<float> values;
    if (r.has("values")) {
      KILN_ASSIGN_OR_RETURN(values, r.numbers("values"));
    }
    KILN_ASSIGN_OR_RETURN(std::string mode, r.text("mode", values.empty() ? "image" : "pixel"));
    if (mode != "image" && mode != "pixel") return r.error("mode", str_cat("is '", mode, "' (image or pixel)"));
    if (mode == "image" && !values.empty()) return r.error("values", "is given with mode 'image' (use mode 'pixel')");
    if (values.empty()) {
      if (!context.mean_image || !context.mean_image->consistent() || context.mean_image->dtype != DataType::kFloat32)
        return r.error("mode", str_cat("is '", mode,
                                       "' without values: that needs the dataset's mean image, and this dataset has "
                                       "none (an LMDB store has one; or give values)"));
      if (mode == "pixel") {
        const Image& m = *context.mean_image;
        const auto c = static_cast<size_t>(m.shape.channels);
        std::vector<double> sums(c, 0.0);
        for (size_t i = 0; i < m.f32.size(); ++i) sums[i % c] += m.f32[i];
        const double count = static_cast<double>(std::max<int64_t>(1, m.shape.height * m.shape.width));
        for (double s : sums) values.push_back(static_cast<float>(s / count));
      }
    }
    out = std::make_shared<MeanSubtract>(values.empty() ? context.mean_image : nullptr, std::move(values));
  } else if (name == "scale") {
    KILN_ASSIGN_OR_RETURN(double factor, r.number("factor", 1.0 / 255.0, -1e30, 1e30));
    out = std::make_shared<Scale>(factor);
  } else if (name == "normalize") {
    KILN_ASSIGN_OR_RETURN(std::vector<float> mean, r.numbers("mean"));
    KILN_ASSIGN_OR_RETURN(std::vector<float> stds, r.numbers("std"));
    for (float s : stds)
      if (!(s > 0)) return r.error("std", str_cat("has ", s, " (every std must be > 0)"));
    out = std::make_shared<Normalize>(std::move(mean), std::move(stds));
  } else if (name == "noise") {
    KILN_ASSIGN_OR_RETURN(double stddev, r.number("std", std::nullopt, 0.0, 1e30));
    KILN_ASSIGN_OR_RETURN(double p, r.number("p", 1.0, 0.0, 1.0));
    out = std::make_shared<Noise>(stddev, p);
  } else if (name == "hsv_shift") {
    KILN_ASSIGN_OR_RETURN(double hue, r.number("hue", 0.0, 0.0, 180.0));
    KILN_ASSIGN_OR_RETURN(double saturation, r.number("saturation", 0.0, 0.0, 1.0));
    KILN_ASSIGN_OR_RETURN(double value, r.number("value", 0.0, 0.0, 1.0));
    KILN_ASSIGN_OR_RETURN(double range, r.number("range", 255.0, 1e-30, 1e30));
    out = std::make_shared<HsvShift>(hue, saturation, value, range);
  } else {
    std::string known;
    std::vector<std::string_view> candidates;
    for (const auto& n : augmentation_names()) {
      if (!known.empty()) known += ", ";
      known += n;
      candidates.push_back(n);
    }
    std::string guess = closest_match(name, candidates);
    return invalid_argument("unknown augmentation '", name, "' (",
                            guess.empty() ? "" : "did you mean '" + guess + "'? ", "known: ", known, ")");
  }
  KILN_RETURN_IF_ERROR(r.finish());
  return out;
}

Result<AugmentList> make_augmentations(const std::vector<std::pair<std::string, AugmentParams>>& specs,
                                       const AugmentContext& context) {
  AugmentList list;
  for (size_t i = 0; i < specs.size(); ++i) {
    auto a = make_augmentation(specs[i].first, specs[i].second, context);
    if (!a.is_ok()) return a.take_status().with_prefix(str_cat("augment[", i, "] (", specs[i].first, ")"));
    list.push_back(std::move(a).value());
  }
  return list;
}

Result<ImageShape> augmented_shape(const AugmentList& list, ImageShape in) {
  for (const auto& a : list) {
    KILN_ASSIGN_OR_RETURN(in, a->output_shape(in));
  }
  return in;
}

Status apply_augmentations(const AugmentList& list, Image& image, Rng& rng) {
  for (const auto& a : list) KILN_RETURN_IF_ERROR(a->apply(image, rng));
  return Status::ok();
}

}  // namespace kiln::train
