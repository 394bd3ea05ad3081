#pragma once
// Datasets: indexed collections of labelled images. IDX files (MNIST, Fashion-MNIST), image folders with
// one subfolder per class, text lists of `path label` lines with a labels file, and LMDB stores
// (lmdb_store.h). Every file is untrusted: sizes in headers are checked against the file, and errors
// name the file and what is wrong.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/status.h"
#include "train/data/image.h"

namespace kiln::train {

struct Sample {
  Image image;
  int64_t label = 0;
};

/// A dataset of labelled images. sample() must be safe to call from several threads at once.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  /// Sample `index` (0 <= index < size()); an error names the file and what is wrong with it.
  virtual Result<Sample> sample(int64_t index) const = 0;
  /// Class names; labels are indices into them.
  virtual const std::vector<std::string>& class_names() const = 0;
  int64_t num_classes() const { return static_cast<int64_t>(class_names().size()); }
  /// The images' shape; height and width are 0 when they vary from image to image.
  virtual ImageShape image_shape() const = 0;
  /// The pixel type of the images sample() returns (kUInt8 or kFloat32).
  virtual DataType pixel_type() const = 0;
  /// The mean image (float32, image_shape()) when the dataset stores one (an LMDB store does).
  virtual const Image* mean_image() const { return nullptr; }
  /// One line for logs and errors: "IDX train-images-idx3-ubyte.gz (60000 images 28x28x1, 10 classes)".
  virtual std::string describe() const = 0;
};

/// The class names of MNIST ("0" .. "9") and Fashion-MNIST ("T-shirt/top" .. "Ankle boot").
const std::vector<std::string>& mnist_class_names();
const std::vector<std::string>& fashion_mnist_class_names();

/// Images and labels in memory (tests, and datasets made by code).
class InMemoryDataset final : public Dataset {
 public:
  /// Every image must have `shape` (when it is fixed) and `pixel_type`; labels must name a class.
  static Result<std::shared_ptr<InMemoryDataset>> create(std::vector<Sample> samples,
                                                         std::vector<std::string> class_names);
  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  Result<Sample> sample(int64_t index) const override;
  const std::vector<std::string>& class_names() const override { return class_names_; }
  ImageShape image_shape() const override { return shape_; }
  DataType pixel_type() const override { return pixel_type_; }
  std::string describe() const override;

 private:
  std::vector<Sample> samples_;
  std::vector<std::string> class_names_;
  ImageShape shape_;
  DataType pixel_type_ = DataType::kUInt8;
};

/// Some samples of another dataset, by index (a validation split, a smaller run).
class SubsetDataset final : public Dataset {
 public:
  /// Every index must be in [0, base->size()).
  static Result<std::shared_ptr<SubsetDataset>> create(std::shared_ptr<const Dataset> base,
                                                       std::vector<int64_t> indices);
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  Result<Sample> sample(int64_t index) const override;
  const std::vector<std::string>& class_names() const override { return base_->class_names(); }
  ImageShape image_shape() const override { return base_->image_shape(); }
  DataType pixel_type() const override { return base_->pixel_type(); }
  const Image* mean_image() const override { return base_->mean_image(); }
  std::string describe() const override;
  const std::vector<int64_t>& indices() const { return indices_; }

 private:
  std::shared_ptr<const Dataset> base_;
  std::vector<int64_t> indices_;
};

/// Splits `base` at random (seeded) into two subsets: about `fraction` of the samples (rounded, at least one
/// when base has two or more) go to the second, the rest to the first, each kept in index order. The same seed
/// gives the same split.
Result<std::pair<std::shared_ptr<SubsetDataset>, std::shared_ptr<SubsetDataset>>> split_dataset(
    const std::shared_ptr<const Dataset>& base, double fraction, uint64_t seed);

/// IDX files (http://yann.lecun.com/exdb/mnist/ format), gzipped or not: images of type ubyte with 3 dims
/// (N, H, W: one channel) or 4 dims (N, H, W, C), labels of type ubyte or int32 with 1 dim.
class IdxDataset final : public Dataset {
 public:
  /// Reads both files into memory. `class_names` empty: "0" .. the largest label.
  static Result<std::shared_ptr<IdxDataset>> open(const std::string& images_path, const std::string& labels_path,
                                                  std::vector<std::string> class_names = {});
  /// The files of split `split` ("train" or "t10k") in `dir`: <split>-images-idx3-ubyte and
  /// <split>-labels-idx1-ubyte, each with or without .gz (the layout of MNIST and Debian's
  /// dataset-fashion-mnist in /usr/share/datasets/fashion-mnist).
  static Result<std::shared_ptr<IdxDataset>> open_dir(const std::string& dir, const std::string& split,
                                                      std::vector<std::string> class_names = {});
  int64_t size() const override { return count_; }
  Result<Sample> sample(int64_t index) const override;
  const std::vector<std::string>& class_names() const override { return class_names_; }
  ImageShape image_shape() const override { return shape_; }
  DataType pixel_type() const override { return DataType::kUInt8; }
  std::string describe() const override;

 private:
  std::string images_path_;
  int64_t count_ = 0;
  ImageShape shape_;
  std::vector<uint8_t> pixels_;
  std::vector<int64_t> labels_;
  std::vector<std::string> class_names_;
};

/// A parsed IDX file: dims and the payload in host order (tests and tools).
struct IdxArray {
  enum class Type : uint8_t {
    kUInt8 = 0x08,
    kInt8 = 0x09,
    kInt16 = 0x0B,
    kInt32 = 0x0C,
    kFloat32 = 0x0D,
    kFloat64 = 0x0E
  };
  Type type = Type::kUInt8;
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  ///< elements in host byte order
};
/// Reads an IDX file, gzipped or not (detected from the gzip magic), bounding every size by the file's.
Result<IdxArray> read_idx(const std::string& path);
/// Writes an IDX file (gzipped when `gzip`); `array.data` is in host order and must match the dims.
Status write_idx(const std::string& path, const IdxArray& array, bool gzip);

struct ImageFileOptions {
  /// 1 (grayscale) or 3 (RGB); 0: from the first image (1 for gray or gray+alpha, 3 for RGB or RGBA).
  int channels = 0;
  /// Resize every image to height x width (bilinear); 0: keep each image's size.
  int64_t height = 0;
  int64_t width = 0;
};

/// Images in files (PNG, JPEG, BMP: stb_image is built for these three only), decoded on each sample().
class ImageFileDataset final : public Dataset {
 public:
  /// A folder with one subfolder per class (sorted names are the classes); the images in each subfolder
  /// (.png .jpg .jpeg .bmp, any case) are sorted by name. Hidden files and folders are skipped.
  static Result<std::shared_ptr<ImageFileDataset>> open_folder(const std::string& root,
                                                               const ImageFileOptions& options = {});
  /// A text file of `path label` lines (paths relative to the list's folder unless absolute; the label,
  /// an integer, is the last field; blank lines and lines starting with # are skipped) and a labels file
  /// with one class name per line.
  static Result<std::shared_ptr<ImageFileDataset>> open_list(const std::string& list_path,
                                                             const std::string& labels_path,
                                                             const ImageFileOptions& options = {});
  int64_t size() const override { return static_cast<int64_t>(paths_.size()); }
  Result<Sample> sample(int64_t index) const override;
  const std::vector<std::string>& class_names() const override { return class_names_; }
  ImageShape image_shape() const override { return shape_; }
  DataType pixel_type() const override { return DataType::kUInt8; }
  std::string describe() const override;
  const std::string& path(int64_t index) const { return paths_[static_cast<size_t>(index)]; }

 private:
  static Result<std::shared_ptr<ImageFileDataset>> finish(std::string source, std::vector<std::string> paths,
                                                          std::vector<int64_t> labels,
                                                          std::vector<std::string> class_names,
                                                          const ImageFileOptions& options);
  std::string source_;
  std::vector<std::string> paths_;
  std::vector<int64_t> labels_;
  std::vector<std::string> class_names_;
  ImageFileOptions options_;
  ImageShape shape_;
};

/// Decodes an image file with stb_image into uint8 HWC with `channels` channels (1 or 3; 0: the file's,
/// gray+alpha as 1 and RGBA as 3). Errors name the file and stb's reason.
Result<Image> decode_image_file(const std::string& path, int channels = 0);
/// Decodes an image held in memory (`what` names it in errors).
Result<Image> decode_image_memory(const uint8_t* data, size_t size, const std::string& what, int channels = 0);

}  // namespace kiln::train
