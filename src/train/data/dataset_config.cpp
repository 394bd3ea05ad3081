#include "train/data/dataset_config.h"

#include "train/data/lmdb_store.h"
#include "train/data/params.h"
#include "train/data/synthetic.h"

namespace kiln::train {

namespace {

Result<ImageFileOptions> image_file_options(ParamReader& r) {
  ImageFileOptions options;
  KILN_ASSIGN_OR_RETURN(int64_t channels, r.integer("channels", 0, 0, 3));
  if (channels == 2) return r.error("channels", "is 2 (1 for grayscale, 3 for RGB, 0 for the first image's)");
  options.channels = static_cast<int>(channels);
  KILN_ASSIGN_OR_RETURN(options.height, r.integer("height", 0, 0, 1 << 15));
  KILN_ASSIGN_OR_RETURN(options.width, r.integer("width", 0, 0, 1 << 15));
  if ((options.height == 0) != (options.width == 0))
    return r.error(options.height == 0 ? "height" : "width", "is missing (give both height and width, or neither)");
  return options;
}

}  // namespace

Result<std::shared_ptr<const Dataset>> open_dataset(const DatasetParams& params) {
  auto type_it = params.find("type");
  if (type_it == params.end())
    return invalid_argument("dataset: key 'type' is required (idx, folder, list, lmdb or synthetic)");
  const std::string type = type_it->second;
  ParamReader r(str_cat("dataset (type ", type, ")"), params);
  (void)r.has("type");
  std::shared_ptr<const Dataset> out;
  if (type == "idx") {
    std::vector<std::string> classes;
    if (r.has("classes")) {
      KILN_ASSIGN_OR_RETURN(std::string name, r.text("classes", std::nullopt));
      if (name == "mnist") {
        classes = mnist_class_names();
      } else if (name == "fashion-mnist" || name == "fashion_mnist") {
        classes = fashion_mnist_class_names();
      } else {
        KILN_ASSIGN_OR_RETURN(classes, r.strings("classes"));
      }
    }
    if (r.has("dir")) {
      KILN_ASSIGN_OR_RETURN(std::string dir, r.text("dir", std::nullopt));
      KILN_ASSIGN_OR_RETURN(std::string split, r.text("split", "train"));
      if (r.has("images") || r.has("labels")) return r.error("dir", "and images/labels are both given (give one)");
      KILN_RETURN_IF_ERROR(r.finish());
      KILN_ASSIGN_OR_RETURN(out, IdxDataset::open_dir(dir, split, std::move(classes)));
    } else {
      if (!r.has("images")) return r.error("dir", "or images and labels are required");
      KILN_ASSIGN_OR_RETURN(std::string images, r.text("images", std::nullopt));
      KILN_ASSIGN_OR_RETURN(std::string labels, r.text("labels", std::nullopt));
      KILN_RETURN_IF_ERROR(r.finish());
      KILN_ASSIGN_OR_RETURN(out, IdxDataset::open(images, labels, std::move(classes)));
    }
  } else if (type == "folder") {
    KILN_ASSIGN_OR_RETURN(std::string path, r.text("path", std::nullopt));
    KILN_ASSIGN_OR_RETURN(ImageFileOptions options, image_file_options(r));
    KILN_RETURN_IF_ERROR(r.finish());
    KILN_ASSIGN_OR_RETURN(out, ImageFileDataset::open_folder(path, options));
  } else if (type == "list") {
    KILN_ASSIGN_OR_RETURN(std::string list, r.text("list", std::nullopt));
    KILN_ASSIGN_OR_RETURN(std::string labels, r.text("labels", std::nullopt));
    KILN_ASSIGN_OR_RETURN(ImageFileOptions options, image_file_options(r));
    KILN_RETURN_IF_ERROR(r.finish());
    KILN_ASSIGN_OR_RETURN(out, ImageFileDataset::open_list(list, labels, options));
  } else if (type == "lmdb") {
    KILN_ASSIGN_OR_RETURN(std::string path, r.text("path", std::nullopt));
    KILN_RETURN_IF_ERROR(r.finish());
    KILN_ASSIGN_OR_RETURN(out, LmdbDataset::open(path));
  } else if (type == "synthetic") {
    KILN_ASSIGN_OR_RETURN(int64_t count, r.integer("count", 1024, 1, int64_t{1} << 31));
    ImageShape shape;
    KILN_ASSIGN_OR_RETURN(shape.height, r.integer("height", 224, 1, 1 << 15));
    KILN_ASSIGN_OR_RETURN(shape.width, r.integer("width", 224, 1, 1 << 15));
    KILN_ASSIGN_OR_RETURN(shape.channels, r.integer("channels", 3, 1, 4));
    KILN_ASSIGN_OR_RETURN(int64_t classes, r.integer("classes", 1000, 2, 100000));
    KILN_ASSIGN_OR_RETURN(int64_t seed, r.integer("seed", 0, 0, int64_t{1} << 62));
    KILN_RETURN_IF_ERROR(r.finish());
    KILN_ASSIGN_OR_RETURN(out, SyntheticDataset::create(count, shape, classes, static_cast<uint64_t>(seed)));
  } else {
    return invalid_argument("dataset: key 'type' is '", type, "' (idx, folder, list, lmdb or synthetic)");
  }
  return out;
}

}  // namespace kiln::train
