// Image files decoded with stb_image: image folders (one subfolder per class) and text lists.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "train/data/dataset.h"

// The one stb_image implementation in kiln; static so that its symbols stay inside this file.
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_NO_STDIO
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_ONLY_BMP
#define STBI_MAX_DIMENSIONS (1 << 15)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wall"
#pragma GCC diagnostic ignored "-Wextra"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-function"
#include <stb_image.h>
#pragma GCC diagnostic pop

namespace kiln::train {

namespace fs = std::filesystem;

namespace {

// Larger files are refused before reading them (no image data set holds a 1 GiB picture).
constexpr uint64_t kMaxImageFileBytes = uint64_t{1} << 30;
// Decoded size limit (pixels x channels), checked from the header before decoding.
constexpr uint64_t kMaxDecodedBytes = uint64_t{1} << 30;

struct StbFree {
  void operator()(stbi_uc* p) const { stbi_image_free(p); }
};

Result<std::vector<uint8_t>> read_file(const std::string& path) {
  std::error_code ec;
  auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) return Status(StatusCode::kNotFound, str_cat(path, ": no such file"));
  if (!fs::is_regular_file(status)) return invalid_argument(path, ": not a regular file");
  uint64_t size = fs::file_size(path, ec);
  if (ec) return Status(StatusCode::kIoError, str_cat(path, ": cannot read its size (", ec.message(), ")"));
  if (size > kMaxImageFileBytes) return invalid_argument(path, ": ", size, " bytes, too large for an image file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(StatusCode::kIoError, str_cat(path, ": cannot open (", std::strerror(errno), ")"));
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  if (static_cast<uint64_t>(in.gcount()) != size) return Status(StatusCode::kIoError, str_cat(path, ": read failed"));
  return bytes;
}

bool is_image_name(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp";
}

bool is_hidden(const fs::path& p) {
  std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

std::string trim(std::string s) {
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

uint8_t byte_at(const uint8_t* data, size_t size, size_t i) { return i < size ? data[i] : 0; }

// stb_image 2.27 (Debian 12's) writes past a Huffman table when a JPEG's DHT segment declares more than
// 256 codes (fixed upstream in 2.28). This walks the markers the way stb does (segments by their length,
// entropy-coded data byte by byte) and refuses such tables before stb sees them.
Status check_jpeg_huffman_tables(const uint8_t* data, size_t size, const std::string& what) {
  if (size < 2 || data[0] != 0xFF || data[1] != 0xD8) return Status::ok();
  size_t i = 2;
  while (i + 1 < size) {
    if (data[i] != 0xFF) {
      ++i;
      continue;
    }
    const uint8_t marker = data[i + 1];
    if (marker == 0xFF) {
      ++i;
      continue;
    }
    if (marker == 0x00 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8)) {  // stuffed byte, TEM, RSTn, SOI
      i += 2;
      continue;
    }
    if (marker == 0xD9) break;  // EOI
    const size_t length = (size_t{byte_at(data, size, i + 2)} << 8) | byte_at(data, size, i + 3);
    if (marker == 0xC4) {
      // As stb reads it: tables while the remaining length is positive, bytes past the end read as 0.
      int64_t left = static_cast<int64_t>(length) - 2;
      size_t p = i + 4;
      while (left > 0 && p < size) {
        size_t codes = 0;
        for (size_t k = 0; k < 16; ++k) codes += byte_at(data, size, p + 1 + k);
        if (codes > 256)
          return invalid_argument(what, ": unreadable image (corrupt JPEG: a Huffman table with ", codes,
                                  " codes, at most 256)");
        p += 17 + codes;
        left -= static_cast<int64_t>(17 + codes);
      }
    }
    i += 2 + std::max<size_t>(length, 2);
  }
  return Status::ok();
}

}  // namespace

Result<Image> decode_image_memory(const uint8_t* data, size_t size, const std::string& what, int channels) {
  if (channels != 0 && channels != 1 && channels != 3)
    return invalid_argument(what, ": ", channels, " channels asked (1, 3, or 0 for the file's own)");
  if (size > static_cast<size_t>(std::numeric_limits<int>::max()))
    return invalid_argument(what, ": ", size, " bytes, too large for an image");
  KILN_RETURN_IF_ERROR(check_jpeg_huffman_tables(data, size, what));
  int w = 0, h = 0, file_channels = 0;
  const int len = static_cast<int>(size);
  if (!stbi_info_from_memory(data, len, &w, &h, &file_channels))
    return invalid_argument(what, ": unreadable image (", stbi_failure_reason(), ")");
  if (channels == 0) channels = file_channels <= 2 ? 1 : 3;
  if (w <= 0 || h <= 0 || static_cast<uint64_t>(w) * static_cast<uint64_t>(h) * 4 > kMaxDecodedBytes)
    return invalid_argument(what, ": unreadable image (", w, "x", h, " pixels is out of range)");
  int got_channels = 0;
  std::unique_ptr<stbi_uc, StbFree> pixels(stbi_load_from_memory(data, len, &w, &h, &got_channels, channels));
  if (!pixels) return invalid_argument(what, ": unreadable image (", stbi_failure_reason(), ")");
  Image image;
  image.shape = {h, w, channels};
  image.dtype = DataType::kUInt8;
  image.u8.assign(pixels.get(), pixels.get() + image.shape.numel());
  return image;
}

Result<Image> decode_image_file(const std::string& path, int channels) {
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, read_file(path));
  return decode_image_memory(bytes.data(), bytes.size(), path, channels);
}

Result<std::shared_ptr<ImageFileDataset>> ImageFileDataset::open_folder(const std::string& root,
                                                                        const ImageFileOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return Status(StatusCode::kNotFound, str_cat(root, ": not a folder"));
  std::vector<fs::path> class_dirs;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (!is_hidden(it->path()) && it->is_directory(ec)) class_dirs.push_back(it->path());
  }
  if (ec) return Status(StatusCode::kIoError, str_cat(root, ": cannot list (", ec.message(), ")"));
  if (class_dirs.empty())
    return invalid_argument(root, ": no class subfolders (an image folder holds one subfolder of images per class)");
  std::sort(class_dirs.begin(), class_dirs.end());
  std::vector<std::string> paths, class_names;
  std::vector<int64_t> labels;
  for (size_t c = 0; c < class_dirs.size(); ++c) {
    class_names.push_back(class_dirs[c].filename().string());
    std::vector<fs::path> files;
    for (fs::directory_iterator it(class_dirs[c], ec), end; !ec && it != end; it.increment(ec)) {
      if (!is_hidden(it->path()) && is_image_name(it->path()) && it->is_regular_file(ec)) files.push_back(it->path());
    }
    if (ec) return Status(StatusCode::kIoError, str_cat(class_dirs[c].string(), ": cannot list (", ec.message(), ")"));
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      paths.push_back(f.string());
      labels.push_back(static_cast<int64_t>(c));
    }
  }
  if (paths.empty())
    return invalid_argument(root, ": no images (.png, .jpg, .jpeg, .bmp) in its ", class_dirs.size(),
                            " class subfolders");
  return finish(root, std::move(paths), std::move(labels), std::move(class_names), options);
}

Result<std::shared_ptr<ImageFileDataset>> ImageFileDataset::open_list(const std::string& list_path,
                                                                      const std::string& labels_path,
                                                                      const ImageFileOptions& options) {
  std::ifstream labels_in(labels_path);
  if (!labels_in) return Status(StatusCode::kNotFound, str_cat(labels_path, ": cannot open the labels file"));
  std::vector<std::string> class_names;
  for (std::string line; std::getline(labels_in, line);) {
    line = trim(line);
    if (!line.empty()) class_names.push_back(line);
  }
  if (class_names.empty()) return invalid_argument(labels_path, ": no class names (one per line)");
  std::ifstream in(list_path);
  if (!in) return Status(StatusCode::kNotFound, str_cat(list_path, ": cannot open the image list"));
  const fs::path base = fs::path(list_path).parent_path();
  std::vector<std::string> paths;
  std::vector<int64_t> labels;
  int64_t line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    size_t split = line.find_last_of(" \t");
    if (split == std::string::npos)
      return invalid_argument(list_path, ":", line_no, ": expected `path label`, got '", line, "'");
    std::string file = trim(line.substr(0, split));
    std::string label_text = line.substr(split + 1);
    int64_t label = 0;
    size_t used = 0;
    try {
      label = std::stoll(label_text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != label_text.size())
      return invalid_argument(list_path, ":", line_no, ": the label '", label_text, "' is not an integer");
    if (label < 0 || label >= static_cast<int64_t>(class_names.size()))
      return invalid_argument(list_path, ":", line_no, ": label ", label, " is out of range (", labels_path, " has ",
                              class_names.size(), " classes)");
    fs::path p(file);
    paths.push_back(p.is_absolute() ? p.string() : (base / p).string());
    labels.push_back(label);
  }
  if (paths.empty()) return invalid_argument(list_path, ": no `path label` lines");
  return finish(list_path, std::move(paths), std::move(labels), std::move(class_names), options);
}

Result<std::shared_ptr<ImageFileDataset>> ImageFileDataset::finish(std::string source, std::vector<std::string> paths,
                                                                   std::vector<int64_t> labels,
                                                                   std::vector<std::string> class_names,
                                                                   const ImageFileOptions& options) {
  if (options.channels != 0 && options.channels != 1 && options.channels != 3)
    return invalid_argument(source, ": channels ", options.channels,
                            " (1 for grayscale, 3 for RGB, 0 for the first image's)");
  if (options.height < 0 || options.width < 0 || (options.height == 0) != (options.width == 0))
    return invalid_argument(source, ": resize to ", options.height, "x", options.width,
                            " (give both height and width, or neither)");
  if (options.height > (1 << 15) || options.width > (1 << 15))
    return invalid_argument(source, ": resize to ", options.height, "x", options.width, " is too large");
  auto ds = std::shared_ptr<ImageFileDataset>(new ImageFileDataset());
  ds->options_ = options;
  // The first image fixes the channel count (when not given) and, without resizing, the reported size;
  // reading it now also reports an unreadable first file at open time.
  KILN_ASSIGN_OR_RETURN(Image first, decode_image_file(paths[0], options.channels));
  ds->options_.channels = static_cast<int>(first.shape.channels);
  ds->shape_ = {options.height, options.width, first.shape.channels};
  ds->source_ = std::move(source);
  ds->paths_ = std::move(paths);
  ds->labels_ = std::move(labels);
  ds->class_names_ = std::move(class_names);
  return ds;
}

Result<Sample> ImageFileDataset::sample(int64_t index) const {
  if (index < 0 || index >= size())
    return invalid_argument(source_, ": sample ", index, " is out of range (", size(), " images)");
  const auto i = static_cast<size_t>(index);
  KILN_ASSIGN_OR_RETURN(Image image, decode_image_file(paths_[i], options_.channels));
  if (options_.height > 0) image = resize_bilinear(image, options_.height, options_.width);
  return Sample{std::move(image), labels_[i]};
}

std::string ImageFileDataset::describe() const {
  return str_cat("images ", source_, " (", size(), " images ", shape_.to_string(), ", ", class_names_.size(),
                 " classes)");
}

}  // namespace kiln::train
