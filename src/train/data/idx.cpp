// IDX files (MNIST's format), gzipped or not, and the in-memory and subset datasets.
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "train/data/dataset.h"
#include "train/data/rng.h"

namespace kiln::train {

namespace fs = std::filesystem;
static_assert(std::endian::native == std::endian::little, "the IDX reader byte-swaps for little-endian hosts");

const std::vector<std::string>& mnist_class_names() {
  static const std::vector<std::string> kNames{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
  return kNames;
}

const std::vector<std::string>& fashion_mnist_class_names() {
  static const std::vector<std::string> kNames{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                               "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return kNames;
}

// ---- InMemoryDataset ----

Result<std::shared_ptr<InMemoryDataset>> InMemoryDataset::create(std::vector<Sample> samples,
                                                                 std::vector<std::string> class_names) {
  auto ds = std::shared_ptr<InMemoryDataset>(new InMemoryDataset());
  for (size_t i = 0; i < samples.size(); ++i) {
    const Sample& s = samples[i];
    if (!s.image.consistent())
      return invalid_argument("in-memory dataset: sample ", i, "'s pixels do not match its shape ",
                              s.image.shape.to_string());
    if (s.label < 0 || s.label >= static_cast<int64_t>(class_names.size()))
      return invalid_argument("in-memory dataset: sample ", i, " has label ", s.label, ", out of range for ",
                              class_names.size(), " classes");
    if (i == 0) {
      ds->shape_ = s.image.shape;
      ds->pixel_type_ = s.image.dtype;
    } else if (s.image.dtype != ds->pixel_type_) {
      return invalid_argument("in-memory dataset: sample ", i, " is ", dtype_name(s.image.dtype), ", sample 0 is ",
                              dtype_name(ds->pixel_type_));
    } else if (s.image.shape.channels != ds->shape_.channels) {
      return invalid_argument("in-memory dataset: sample ", i, " has ", s.image.shape.channels,
                              " channels, sample 0 has ", ds->shape_.channels);
    } else if (s.image.shape != ds->shape_) {
      ds->shape_.height = 0;  // sizes vary
      ds->shape_.width = 0;
    }
  }
  ds->samples_ = std::move(samples);
  ds->class_names_ = std::move(class_names);
  return ds;
}

Result<Sample> InMemoryDataset::sample(int64_t index) const {
  if (index < 0 || index >= size())
    return invalid_argument("sample ", index, " is out of range (", size(), " samples)");
  return samples_[static_cast<size_t>(index)];
}

std::string InMemoryDataset::describe() const {
  return str_cat("in-memory (", size(), " images ", shape_.to_string(), ", ", class_names_.size(), " classes)");
}

// ---- SubsetDataset ----

Result<std::shared_ptr<SubsetDataset>> SubsetDataset::create(std::shared_ptr<const Dataset> base,
                                                             std::vector<int64_t> indices) {
  if (!base) return invalid_argument("subset: no dataset");
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= base->size())
      return invalid_argument("subset of ", base->describe(), ": index ", indices[i], " (entry ", i,
                              ") is out of range");
  }
  auto ds = std::shared_ptr<SubsetDataset>(new SubsetDataset());
  ds->base_ = std::move(base);
  ds->indices_ = std::move(indices);
  return ds;
}

Result<Sample> SubsetDataset::sample(int64_t index) const {
  if (index < 0 || index >= size())
    return invalid_argument("sample ", index, " is out of range (", size(), " samples)");
  return base_->sample(indices_[static_cast<size_t>(index)]);
}

std::string SubsetDataset::describe() const { return str_cat(size(), " samples of ", base_->describe()); }

Result<std::pair<std::shared_ptr<SubsetDataset>, std::shared_ptr<SubsetDataset>>> split_dataset(
    const std::shared_ptr<const Dataset>& base, double fraction, uint64_t seed) {
  if (!base) return invalid_argument("split: no dataset");
  if (!(fraction >= 0 && fraction <= 1))
    return invalid_argument("split of ", base->describe(), ": fraction ", fraction, " (0 to 1)");
  const int64_t n = base->size();
  auto second = static_cast<int64_t>(std::llround(fraction * static_cast<double>(n)));
  if (fraction > 0 && n >= 2) second = std::clamp<int64_t>(second, 1, n - 1);
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  Rng rng(seed);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  std::vector<int64_t> b(order.begin(), order.begin() + second), a(order.begin() + second, order.end());
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  KILN_ASSIGN_OR_RETURN(auto first_set, SubsetDataset::create(base, std::move(a)));
  KILN_ASSIGN_OR_RETURN(auto second_set, SubsetDataset::create(base, std::move(b)));
  return std::make_pair(std::move(first_set), std::move(second_set));
}

// ---- IDX reading ----

namespace {

size_t idx_element_size(IdxArray::Type type) {
  switch (type) {
    case IdxArray::Type::kUInt8:
    case IdxArray::Type::kInt8: return 1;
    case IdxArray::Type::kInt16: return 2;
    case IdxArray::Type::kInt32:
    case IdxArray::Type::kFloat32: return 4;
    case IdxArray::Type::kFloat64: return 8;
  }
  return 0;
}

std::string_view idx_type_name(IdxArray::Type type) {
  switch (type) {
    case IdxArray::Type::kUInt8: return "ubyte";
    case IdxArray::Type::kInt8: return "byte";
    case IdxArray::Type::kInt16: return "short";
    case IdxArray::Type::kInt32: return "int";
    case IdxArray::Type::kFloat32: return "float";
    case IdxArray::Type::kFloat64: return "double";
  }
  return "?";
}

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzHandle = std::unique_ptr<std::remove_pointer_t<gzFile>, GzCloser>;

// Reads up to `n` bytes; returns how many were read, or an error naming the file when zlib fails.
Result<size_t> gz_read(gzFile f, uint8_t* dst, size_t n, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    auto chunk = static_cast<unsigned>(std::min<size_t>(n - done, size_t{1} << 30));
    int got = gzread(f, dst + done, chunk);
    if (got < 0) {
      int err = 0;
      std::string msg = gzerror(f, &err);
      // zlib's message starts with the path: keep only its reason.
      if (msg.rfind(path + ": ", 0) == 0) msg = msg.substr(path.size() + 2);
      return invalid_argument(path, ": the gzip data is corrupt (", msg, ")");
    }
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

}  // namespace

Result<IdxArray> read_idx(const std::string& path) {
  std::error_code ec;
  auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) return Status(StatusCode::kNotFound, str_cat(path, ": no such file"));
  if (!fs::is_regular_file(status)) return invalid_argument(path, ": not a regular file");
  const uint64_t file_size = fs::file_size(path, ec);
  if (ec) return Status(StatusCode::kIoError, str_cat(path, ": cannot read its size (", ec.message(), ")"));
  GzHandle f(gzopen(path.c_str(), "rb"));
  if (!f) return Status(StatusCode::kIoError, str_cat(path, ": cannot open (", std::strerror(errno), ")"));
  gzbuffer(f.get(), 1 << 20);

  uint8_t magic[4];
  KILN_ASSIGN_OR_RETURN(size_t got, gz_read(f.get(), magic, 4, path));
  if (got < 4) return invalid_argument(path, ": truncated: ", got, " bytes, too short for an IDX header");
  const bool compressed = gzdirect(f.get()) == 0;
  if (magic[0] != 0 || magic[1] != 0)
    return invalid_argument(path, ": bad magic: the file does not start with an IDX header (0x00 0x00 type ndims)");
  IdxArray out;
  out.type = static_cast<IdxArray::Type>(magic[2]);
  if (idx_element_size(out.type) == 0 || idx_type_name(out.type) == "?")
    return invalid_argument(path, ": bad magic: unknown IDX element type 0x", std::hex, static_cast<int>(magic[2]));
  const int ndims = magic[3];
  if (ndims < 1 || ndims > 4)
    return invalid_argument(path, ": bad magic: ", ndims, " dimensions (IDX data sets have 1 to 4)");
  uint8_t dim_bytes[16];
  KILN_ASSIGN_OR_RETURN(got, gz_read(f.get(), dim_bytes, 4 * static_cast<size_t>(ndims), path));
  if (got < 4 * static_cast<size_t>(ndims)) return invalid_argument(path, ": truncated inside the header's dimensions");
  const size_t elem = idx_element_size(out.type);
  uint64_t payload = elem;
  for (size_t i = 0; i < static_cast<size_t>(ndims); ++i) {
    const uint8_t* b = dim_bytes + 4 * i;
    uint32_t d = (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
    out.dims.push_back(d);
    // A product above 2^62 cannot be a real file: stop before it overflows.
    if (d != 0 && payload > (uint64_t{1} << 62) / d)
      return invalid_argument(path, ": the header's dimensions multiply to an impossible size");
    payload *= d;
  }
  const uint64_t header = 4 + 4 * static_cast<uint64_t>(ndims);
  auto dims_text = [&] {
    std::string s;
    for (size_t i = 0; i < out.dims.size(); ++i) {
      if (i > 0) s += 'x';
      s += std::to_string(out.dims[i]);
    }
    return s;
  };
  if (!compressed) {
    if (file_size < header + payload)
      return invalid_argument(path, ": truncated: the header says ", dims_text(), " ", idx_type_name(out.type), " (",
                              payload, " bytes of data), the file holds ", file_size - std::min(file_size, header));
    if (file_size > header + payload)
      return invalid_argument(path, ": ", file_size - header - payload, " bytes after the ", dims_text(), " ",
                              idx_type_name(out.type), " data the header describes (wrong file or wrong header?)");
  } else if (payload > file_size * 1100 + 4096) {
    // Deflate expands at most ~1032:1, so the header lies about the size.
    return invalid_argument(path, ": truncated: the header says ", dims_text(), " (", payload,
                            " bytes), more than a gzip file of ", file_size, " bytes can hold");
  }
  // Read in chunks: memory grows with the data actually present, never with what a header claims.
  constexpr size_t kChunk = size_t{64} << 20;
  uint64_t have = 0;
  while (have < payload) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, payload - have));
    out.data.resize(static_cast<size_t>(have) + n);
    KILN_ASSIGN_OR_RETURN(got, gz_read(f.get(), out.data.data() + have, n, path));
    have += got;
    if (got < n)
      return invalid_argument(path, ": truncated: the header says ", dims_text(), " ", idx_type_name(out.type), " (",
                              payload, " bytes of data), the file holds ", have);
  }
  uint8_t extra = 0;
  KILN_ASSIGN_OR_RETURN(got, gz_read(f.get(), &extra, 1, path));
  if (got != 0)
    return invalid_argument(path, ": data continues after the ", dims_text(), " ", idx_type_name(out.type),
                            " elements the header describes (wrong file or wrong header?)");
  if (elem > 1) {  // IDX is big-endian
    for (size_t i = 0; i + elem <= out.data.size(); i += elem)
      std::reverse(out.data.begin() + i, out.data.begin() + i + elem);
  }
  return out;
}

Status write_idx(const std::string& path, const IdxArray& array, bool gzip) {
  const size_t elem = idx_element_size(array.type);
  if (elem == 0 || idx_type_name(array.type) == "?") return invalid_argument(path, ": unknown IDX element type");
  if (array.dims.empty() || array.dims.size() > 4)
    return invalid_argument(path, ": ", array.dims.size(), " dims (1 to 4)");
  uint64_t count = 1;
  std::string bytes = {0, 0, static_cast<char>(array.type), static_cast<char>(array.dims.size())};
  for (int64_t d : array.dims) {
    if (d < 0 || d > std::numeric_limits<uint32_t>::max())
      return invalid_argument(path, ": dimension ", d, " out of range");
    count *= static_cast<uint64_t>(d);
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<char>((d >> shift) & 0xFF));
  }
  if (count * elem != array.data.size())
    return invalid_argument(path, ": ", array.data.size(), " bytes of data for ", count, " elements of ", elem,
                            " bytes");
  const size_t header = bytes.size();
  bytes.append(reinterpret_cast<const char*>(array.data.data()), array.data.size());
  if (elem > 1) {
    for (size_t i = header; i + elem <= bytes.size(); i += elem)
      std::reverse(bytes.begin() + static_cast<std::ptrdiff_t>(i),
                   bytes.begin() + static_cast<std::ptrdiff_t>(i + elem));
  }
  GzHandle f(gzopen(path.c_str(), gzip ? "wb" : "wbT"));
  if (!f) return Status(StatusCode::kIoError, str_cat(path, ": cannot create (", std::strerror(errno), ")"));
  size_t done = 0;
  while (done < bytes.size()) {
    auto chunk = static_cast<unsigned>(std::min<size_t>(bytes.size() - done, size_t{1} << 30));
    if (gzwrite(f.get(), bytes.data() + done, chunk) != static_cast<int>(chunk))
      return Status(StatusCode::kIoError, str_cat(path, ": write failed"));
    done += chunk;
  }
  if (gzclose(f.release()) != Z_OK) return Status(StatusCode::kIoError, str_cat(path, ": write failed"));
  return Status::ok();
}

// ---- IdxDataset ----

Result<std::shared_ptr<IdxDataset>> IdxDataset::open(const std::string& images_path, const std::string& labels_path,
                                                     std::vector<std::string> class_names) {
  KILN_ASSIGN_OR_RETURN(IdxArray images, read_idx(images_path));
  if (images.type != IdxArray::Type::kUInt8)
    return invalid_argument(images_path, ": images of type ", idx_type_name(images.type),
                            " are not supported (ubyte only)");
  if (images.dims.size() != 3 && images.dims.size() != 4)
    return invalid_argument(images_path, ": ", images.dims.size(),
                            " dimensions; images need 3 (N, H, W) or 4 (N, H, W, C)");
  KILN_ASSIGN_OR_RETURN(IdxArray labels, read_idx(labels_path));
  if (labels.dims.size() != 1)
    return invalid_argument(labels_path, ": ", labels.dims.size(), " dimensions; labels need 1");
  if (labels.type != IdxArray::Type::kUInt8 && labels.type != IdxArray::Type::kInt32)
    return invalid_argument(labels_path, ": labels of type ", idx_type_name(labels.type),
                            " are not supported (ubyte or int)");
  auto ds = std::shared_ptr<IdxDataset>(new IdxDataset());
  ds->images_path_ = images_path;
  ds->count_ = images.dims[0];
  ds->shape_ = {images.dims[1], images.dims[2], images.dims.size() == 4 ? images.dims[3] : 1};
  if (ds->count_ > 0 && !ds->shape_.is_fixed())
    return invalid_argument(images_path, ": images of size ", ds->shape_.to_string());
  if (ds->shape_.channels > 4) return invalid_argument(images_path, ": ", ds->shape_.channels, " channels (at most 4)");
  if (labels.dims[0] != ds->count_)
    return invalid_argument(labels_path, ": ", labels.dims[0], " labels for the ", ds->count_, " images of ",
                            images_path);
  ds->labels_.resize(static_cast<size_t>(ds->count_));
  int64_t max_label = -1;
  for (int64_t i = 0; i < ds->count_; ++i) {
    int64_t label = 0;
    if (labels.type == IdxArray::Type::kUInt8) {
      label = labels.data[static_cast<size_t>(i)];
    } else {
      int32_t v = 0;
      std::memcpy(&v, labels.data.data() + 4 * i, 4);
      label = v;
    }
    if (label < 0)
      return invalid_argument(labels_path, ": the label of image ", i, " is ", label, " (labels are >= 0)");
    if (!class_names.empty() && label >= static_cast<int64_t>(class_names.size()))
      return invalid_argument(labels_path, ": the label of image ", i, " is ", label, ", out of range for the ",
                              class_names.size(), " classes");
    max_label = std::max(max_label, label);
    ds->labels_[static_cast<size_t>(i)] = label;
  }
  if (class_names.empty()) {
    constexpr int64_t kMaxUnnamed = 100000;
    if (max_label >= kMaxUnnamed)
      return invalid_argument(labels_path, ": the largest label is ", max_label,
                              "; give class names for that many classes");
    for (int64_t c = 0; c <= max_label; ++c) class_names.push_back(std::to_string(c));
  }
  ds->class_names_ = std::move(class_names);
  ds->pixels_ = std::move(images.data);
  return ds;
}

Result<std::shared_ptr<IdxDataset>> IdxDataset::open_dir(const std::string& dir, const std::string& split,
                                                         std::vector<std::string> class_names) {
  auto find = [&](const std::string& stem) -> Result<std::string> {
    for (const char* ext : {"", ".gz"}) {
      std::string p = (fs::path(dir) / (stem + ext)).string();
      std::error_code ec;
      if (fs::exists(p, ec)) return p;
    }
    return Status(StatusCode::kNotFound,
                  str_cat(dir, ": no ", stem, " or ", stem, ".gz (an IDX data set folder, split '", split, "')"));
  };
  KILN_ASSIGN_OR_RETURN(std::string images, find(split + "-images-idx3-ubyte"));
  KILN_ASSIGN_OR_RETURN(std::string labels, find(split + "-labels-idx1-ubyte"));
  return open(images, labels, std::move(class_names));
}

Result<Sample> IdxDataset::sample(int64_t index) const {
  if (index < 0 || index >= count_)
    return invalid_argument(images_path_, ": sample ", index, " is out of range (", count_, " images)");
  Sample s;
  s.image.shape = shape_;
  s.image.dtype = DataType::kUInt8;
  const auto n = static_cast<size_t>(shape_.numel());
  auto begin = pixels_.begin() + static_cast<std::ptrdiff_t>(n * static_cast<size_t>(index));
  s.image.u8.assign(begin, begin + static_cast<std::ptrdiff_t>(n));
  s.label = labels_[static_cast<size_t>(index)];
  return s;
}

std::string IdxDataset::describe() const {
  return str_cat("IDX ", fs::path(images_path_).filename().string(), " (", count_, " images ", shape_.to_string(), ", ",
                 class_names_.size(), " classes)");
}

}  // namespace kiln::train
