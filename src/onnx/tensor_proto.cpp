#include "onnx/tensor_proto.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <utility>

#include "kiln/strings.h"

namespace kiln::onnx_import {

using TP = onnx::TensorProto;

std::optional<DataType> from_onnx_dtype(int64_t t, bool* narrowed) {
  if (narrowed) *narrowed = false;
  auto narrow = [&](DataType d) {
    if (narrowed) *narrowed = true;
    return d;
  };
  switch (t) {
    case TP::FLOAT: return DataType::kFloat32;
    case TP::FLOAT16: return DataType::kFloat16;
    case TP::BFLOAT16: return DataType::kBFloat16;
    case TP::INT8: return DataType::kInt8;
    case TP::UINT8: return DataType::kUInt8;
    case TP::INT32: return DataType::kInt32;
    case TP::INT64: return DataType::kInt64;
    case TP::BOOL: return DataType::kBool;
    case TP::STRING: return DataType::kString;
    case TP::DOUBLE: return narrow(DataType::kFloat32);
    case TP::INT16: return narrow(DataType::kInt32);
    case TP::UINT16: return narrow(DataType::kInt32);
    case TP::UINT32: return narrow(DataType::kInt64);
    default: return std::nullopt;
  }
}

int to_onnx_dtype(DataType d) {
  switch (d) {
    case DataType::kFloat32: return TP::FLOAT;
    case DataType::kFloat16: return TP::FLOAT16;
    case DataType::kBFloat16: return TP::BFLOAT16;
    case DataType::kInt8: return TP::INT8;
    case DataType::kUInt8: return TP::UINT8;
    case DataType::kInt32: return TP::INT32;
    case DataType::kInt64: return TP::INT64;
    case DataType::kBool: return TP::BOOL;
    case DataType::kFp8E4M3: return TP::UNDEFINED;
    case DataType::kString: return TP::STRING;
  }
  return TP::UNDEFINED;
}

std::string onnx_dtype_name(int64_t t) {
  if (t >= INT32_MIN && t <= INT32_MAX && TP::DataType_IsValid(static_cast<int>(t)))
    return TP::DataType_Name(static_cast<TP::DataType>(t));
  return str_cat("unknown type ", t);
}

Status MemoryBudget::charge(uint64_t bytes, const std::string& what) {
  if (bytes <= limit_ && used_ <= limit_ - bytes) {
    used_ += bytes;
    return Status::ok();
  }
  return Status(
      StatusCode::kOutOfMemory,
      str_cat(what, " needs ", format_bytes(bytes), " but the import's memory budget of ", format_bytes(limit_),
              " is used up (", format_bytes(used_), " held); a model you trust may get more with --max-import-memory"));
}

uint64_t default_memory_budget() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  uint64_t budget =
      pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 2 : uint64_t{4} << 30;
  // Under an address-space or data cap (ulimit -v / -d), half of that.
  for (int resource : {RLIMIT_AS, RLIMIT_DATA}) {
    struct rlimit limit {};
    if (getrlimit(resource, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
      budget = std::min<uint64_t>(budget, static_cast<uint64_t>(limit.rlim_cur) / 2);
  }
  return budget;
}

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return str_cat(bytes, " bytes");
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

namespace {

// A decimal count: digits only, no sign or suffix, at most INT64_MAX.
std::optional<uint64_t> parse_count(const std::string& s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  return v;
}

bool inside(const std::string& path, const std::string& root) {
  if (root.empty()) return false;
  if (root == "/") return true;
  return path.size() > root.size() && path.compare(0, root.size(), root) == 0 && path[root.size()] == '/';
}

std::optional<std::string> real_path(const std::string& path) {
  char* r = realpath(path.c_str(), nullptr);
  if (!r) return std::nullopt;
  std::string out(r);
  std::free(r);
  return out;
}

// An open external data file with its byte range.
struct ExternalFile {
  int fd = -1;
  uint64_t offset = 0, length = 0;
  std::string location;
  ExternalFile() = default;
  ExternalFile(const ExternalFile&) = delete;
  ExternalFile& operator=(const ExternalFile&) = delete;
  ExternalFile(ExternalFile&& o) noexcept
      : fd(o.fd), offset(o.offset), length(o.length), location(std::move(o.location)) {
    o.fd = -1;
  }
  ~ExternalFile() {
    if (fd >= 0) close(fd);
  }
};

// Opens the external data of `proto`: the location must resolve inside an allowed folder, be a regular
// file (checked on the descriptor), and offset and length must be strict counts within it.
Result<ExternalFile> open_external(const TP& proto, const TensorSource& source, const std::string& what) {
  ExternalFile f;
  std::optional<uint64_t> offset, length;
  bool has_location = false;
  for (const auto& kv : proto.external_data()) {
    const std::string& key = kv.key();
    if (key == "location") {
      if (has_location) return invalid_argument(what, ": external data gives 'location' twice");
      has_location = true;
      f.location = kv.value();
    } else if (key == "offset" || key == "length") {
      if ((key == "offset" ? offset : length).has_value())
        return invalid_argument(what, ": external data gives '", key, "' twice");
      auto v = parse_count(kv.value());
      if (!v)
        return invalid_argument(what, ": external data '", key,
                                "' must be a non-negative decimal number of bytes below 2^63");
      (key == "offset" ? offset : length) = v;
    }
  }
  if (f.location.empty()) return invalid_argument(what, ": external data has no location");
  if (f.location.find('\0') != std::string::npos)
    return invalid_argument(what, ": external data location contains a NUL character");
  const std::filesystem::path rel(f.location);
  if (rel.is_absolute())
    return invalid_argument(what, ": external data location '", f.location,
                            "' is absolute; it must be a path relative to the model's folder");
  const std::string shown = "'" + f.location + "'";
  const auto base = real_path(source.base_dir.empty() ? "." : source.base_dir);
  if (!base) return Status(StatusCode::kIoError, str_cat(what, ": the model's folder cannot be resolved"));
  const std::string candidate = *base + "/" + f.location;
  const auto real = real_path(candidate);
  if (!real)
    return Status(StatusCode::kIoError,
                  str_cat(what, ": cannot read external data file ", shown, ": ", std::strerror(errno)));
  std::optional<std::string> extra;
  if (!source.extra_root.empty()) extra = real_path(source.extra_root);
  auto allowed = [&](const std::string& p) { return inside(p, *base) || (extra && inside(p, *extra)); };
  const char* escape_hint =
      " (after following symlinks) is outside the model's folder; external data must stay inside it, or inside "
      "the folder given with --external-data-root";
  if (!allowed(*real)) return invalid_argument(what, ": external data location ", shown, escape_hint);
  // Devices and FIFOs are refused before open (opening some has effects), and again on the descriptor.
  struct stat pre {};
  if (stat(real->c_str(), &pre) == 0 && !S_ISREG(pre.st_mode))
    return invalid_argument(what, ": external data location ", shown, " is not a regular file");
  f.fd = open(real->c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (f.fd < 0)
    return Status(StatusCode::kIoError,
                  str_cat(what, ": cannot open external data file ", shown, ": ", std::strerror(errno)));
  struct stat st {};
  if (fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode))
    return invalid_argument(what, ": external data location ", shown, " is not a regular file");
  // The folders on the way may have changed since realpath: check what was opened.
  if (auto opened = real_path(str_cat("/proc/self/fd/", f.fd)); opened && !allowed(*opened))
    return invalid_argument(what, ": external data location ", shown, escape_hint);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  f.offset = offset.value_or(0);
  if (f.offset > size)
    return invalid_argument(what, ": external data offset ", f.offset, " is beyond the end of ", shown, " (", size,
                            " bytes)");
  f.length = length.value_or(size - f.offset);
  if (f.length > size - f.offset)
    return invalid_argument(what, ": external data at offset ", f.offset, " of length ", f.length,
                            " runs past the end of ", shown, " (", size, " bytes)");
  return f;
}

// Reads `bytes` at `offset` of the file into `dst`.
Status read_fully(const ExternalFile& f, uint64_t offset, char* dst, uint64_t bytes, const std::string& what) {
  while (bytes > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(bytes, uint64_t{1} << 30));
    const ssize_t got = pread(f.fd, dst, chunk, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      return Status(StatusCode::kIoError, str_cat(what, ": short read from external data file '", f.location, "'"));
    dst += got;
    offset += static_cast<uint64_t>(got);
    bytes -= static_cast<uint64_t>(got);
  }
  return Status::ok();
}

}  // namespace

namespace {

size_t source_element_size(int src_type) {
  switch (src_type) {
    case TP::DOUBLE:
    case TP::INT64:
    case TP::UINT64: return 8;
    case TP::FLOAT:
    case TP::INT32:
    case TP::UINT32: return 4;
    case TP::FLOAT16:
    case TP::BFLOAT16:
    case TP::INT16:
    case TP::UINT16: return 2;
    default: return 1;
  }
}

// The number of values the typed field for `src_type` holds.
int64_t typed_count(const TP& p, int src_type) {
  switch (src_type) {
    case TP::FLOAT: return p.float_data_size();
    case TP::DOUBLE: return p.double_data_size();
    case TP::INT64: return p.int64_data_size();
    case TP::UINT32:
    case TP::UINT64: return p.uint64_data_size();
    default: return p.int32_data_size();
  }
}

}  // namespace

namespace {

// Copies `count` raw elements of ONNX type `src_type` to elements [first, first + count) of `t`.
void convert_raw(int src_type, const char* p, int64_t first, int64_t count, Tensor& t) {
  const size_t esize = source_element_size(src_type);
  switch (src_type) {
    case TP::DOUBLE:
      for (int64_t i = 0; i < count; ++i) {
        double v;
        std::memcpy(&v, p + i * esize, 8);
        t.set(first + i, v);
      }
      return;
    case TP::INT16:
      for (int64_t i = 0; i < count; ++i) {
        int16_t v;
        std::memcpy(&v, p + i * esize, 2);
        t.set(first + i, v);
      }
      return;
    case TP::UINT16:
      for (int64_t i = 0; i < count; ++i) {
        uint16_t v;
        std::memcpy(&v, p + i * esize, 2);
        t.set(first + i, v);
      }
      return;
    case TP::UINT32:
      for (int64_t i = 0; i < count; ++i) {
        uint32_t v;
        std::memcpy(&v, p + i * esize, 4);
        t.set(first + i, v);
      }
      return;
    default:
      if (count) std::memcpy(static_cast<char*>(t.raw()) + first * esize, p, static_cast<size_t>(count) * esize);
  }
}

bool needs_conversion(int src_type) {
  return src_type == TP::DOUBLE || src_type == TP::INT16 || src_type == TP::UINT16 || src_type == TP::UINT32;
}

}  // namespace

namespace {

// A STRING tensor: its strings travel in string_data (never raw or external); they are interned.
Result<Tensor> strings_from_proto(const TP& proto, const Dims& shape, uint64_t n, const TensorSource& source,
                                  const std::string& what) {
  if (proto.data_location() == TP::EXTERNAL || proto.has_raw_data())
    return invalid_argument(what, " is a STRING tensor with raw or external data; strings travel in string_data");
  if (static_cast<uint64_t>(proto.string_data_size()) != n)
    return invalid_argument(what, " has ", proto.string_data_size(), " strings but its shape ", shape.to_string(),
                            " needs ", n);
  uint64_t bytes = n * sizeof(int64_t);
  for (const std::string& s : proto.string_data()) bytes += s.size();
  if (source.budget) KILN_RETURN_IF_ERROR(source.budget->charge(bytes, what));
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(DataType::kString, shape, cpu_allocator(), what));
  for (int i = 0; i < proto.string_data_size(); ++i) {
    auto id = intern_string(proto.string_data(i));
    if (!id) return Status(id.status().code(), str_cat(what, ": ", id.status().message()));
    t.data<int64_t>()[i] = *id;
  }
  return t;
}

}  // namespace

Result<Tensor> tensor_from_proto(const TP& proto, const TensorSource& source, const std::string& what) {
  const int src_type = proto.data_type();
  const auto dtype = from_onnx_dtype(src_type);
  if (!dtype)
    return unsupported(what, " has element type ", onnx_dtype_name(src_type), ", which kiln does not support");
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  auto shape_or = Dims::from(dims);
  if (!shape_or) return invalid_argument(what, ": ", shape_or.status().message());
  const Dims shape = *shape_or;
  // Count elements with an overflow check before anything is allocated.
  uint64_t n = 1;
  for (int64_t d : dims) {
    if (d != 0 && n > (uint64_t{1} << 40) / static_cast<uint64_t>(d))
      return invalid_argument(what, " has an absurd shape ", shape.to_string());
    n *= static_cast<uint64_t>(d);
  }
  if (src_type == TP::STRING) return strings_from_proto(proto, shape, n, source, what);
  const size_t esize = source_element_size(src_type);
  const bool external = proto.data_location() == TP::EXTERNAL;
  std::optional<ExternalFile> file;
  const std::string* raw = !external && proto.has_raw_data() ? &proto.raw_data() : nullptr;
  if (external) {
    KILN_ASSIGN_OR_RETURN(ExternalFile f, open_external(proto, source, what));
    if (f.length != n * esize)
      return invalid_argument(what, " holds ", f.length, " bytes of external data but its shape ", shape.to_string(),
                              " of ", onnx_dtype_name(src_type), " needs ", n * esize);
    file.emplace(std::move(f));
  } else if (raw) {
    if (raw->size() != n * esize)
      return invalid_argument(what, " holds ", raw->size(), " bytes of data but its shape ", shape.to_string(), " of ",
                              onnx_dtype_name(src_type), " needs ", n * esize);
  } else if (static_cast<uint64_t>(typed_count(proto, src_type)) != n) {
    return invalid_argument(what, " has ", typed_count(proto, src_type), " values but its shape ", shape.to_string(),
                            " needs ", n);
  }
  if (source.budget) KILN_RETURN_IF_ERROR(source.budget->charge(n * dtype_size(*dtype), what));
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(*dtype, shape, cpu_allocator(), what));
  const int64_t count = static_cast<int64_t>(n);
  if (file) {
    // Straight into the tensor; types kiln widens go through a bounded staging buffer.
    if (!needs_conversion(src_type)) {
      KILN_RETURN_IF_ERROR(read_fully(*file, file->offset, static_cast<char*>(t.raw()), n * esize, what));
    } else {
      const int64_t step = int64_t{1} << 20;
      std::string stage;
      for (int64_t first = 0; first < count; first += step) {
        const int64_t m = std::min(step, count - first);
        stage.resize(static_cast<size_t>(m) * esize);
        KILN_RETURN_IF_ERROR(
            read_fully(*file, file->offset + static_cast<uint64_t>(first) * esize, stage.data(), stage.size(), what));
        convert_raw(src_type, stage.data(), first, m, t);
      }
    }
  } else if (raw) {
    convert_raw(src_type, raw->data(), 0, count, t);
  }
  if (file || raw) {
    if (src_type == TP::BOOL)
      for (int64_t i = 0; i < count; ++i) t.data<uint8_t>()[i] = t.data<uint8_t>()[i] ? 1 : 0;
    return t;
  }
  switch (src_type) {
    case TP::FLOAT:
      if (count) std::memcpy(t.raw(), proto.float_data().data(), count * 4);
      break;
    case TP::DOUBLE:
      for (int64_t i = 0; i < count; ++i) t.set(i, proto.double_data(i));
      break;
    case TP::INT64:
      if (count) std::memcpy(t.raw(), proto.int64_data().data(), count * 8);
      break;
    case TP::UINT32:
      for (int64_t i = 0; i < count; ++i) t.set(i, static_cast<double>(proto.uint64_data(i)));
      break;
    case TP::FLOAT16:
    case TP::BFLOAT16:
      for (int64_t i = 0; i < count; ++i) t.data<uint16_t>()[i] = static_cast<uint16_t>(proto.int32_data(i));
      break;
    case TP::BOOL:
      for (int64_t i = 0; i < count; ++i) t.data<uint8_t>()[i] = proto.int32_data(i) ? 1 : 0;
      break;
    default:  // INT32, INT16, UINT16, INT8, UINT8 travel in int32_data
      for (int64_t i = 0; i < count; ++i) t.set(i, proto.int32_data(i));
  }
  return t;
}

void tensor_to_proto(const Tensor& tensor, const std::string& name, TP& proto) {
  proto.set_name(name);
  proto.set_data_type(to_onnx_dtype(tensor.dtype()));
  for (int64_t d : tensor.dims()) proto.add_dims(d);
  if (tensor.dtype() == DataType::kString) {
    for (int64_t i = 0; i < tensor.numel(); ++i) proto.add_string_data(std::string(string_at(tensor, i)));
    return;
  }
  proto.set_raw_data(std::string(static_cast<const char*>(tensor.raw()), tensor.nbytes()));
}

}  // namespace kiln::onnx_import
