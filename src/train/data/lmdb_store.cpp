#include "train/data/lmdb_store.h"

#include <lmdb.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace kiln::train {

namespace fs = std::filesystem;
static_assert(std::endian::native == std::endian::little, "LMDB records are little-endian");

namespace {

constexpr char kMagic[4] = {'K', 'S', 'M', 'P'};
constexpr size_t kHeaderBytes = 32;
constexpr char kMetaKey[] = "~meta";
constexpr char kMeanKey[] = "~mean";
constexpr uint8_t kPixelU8 = 0, kPixelF32 = 1;

Status lmdb_error(const std::string& path, std::string_view what, int rc) {
  return {StatusCode::kIoError, str_cat(path, ": LMDB ", what, " failed (", mdb_strerror(rc), ")")};
}

MDB_val as_val(const std::string& s) { return {s.size(), const_cast<char*>(s.data())}; }

size_t pixel_bytes(DataType dtype) { return dtype == DataType::kFloat32 ? 4 : 1; }

std::string encode_record(const Sample& s) {
  const size_t n = static_cast<size_t>(s.image.shape.numel()) * pixel_bytes(s.image.dtype);
  std::string out(kHeaderBytes + n, '\0');
  char* p = out.data();
  std::memcpy(p, kMagic, 4);
  auto h = static_cast<uint32_t>(s.image.shape.height), w = static_cast<uint32_t>(s.image.shape.width),
       c = static_cast<uint32_t>(s.image.shape.channels);
  std::memcpy(p + 4, &h, 4);
  std::memcpy(p + 8, &w, 4);
  std::memcpy(p + 12, &c, 4);
  p[16] = static_cast<char>(s.image.dtype == DataType::kFloat32 ? kPixelF32 : kPixelU8);
  std::memcpy(p + 24, &s.label, 8);
  if (n > 0) {
    const void* src = s.image.dtype == DataType::kFloat32 ? static_cast<const void*>(s.image.f32.data())
                                                          : static_cast<const void*>(s.image.u8.data());
    std::memcpy(p + kHeaderBytes, src, n);
  }
  return out;
}

struct EnvCloser {
  void operator()(MDB_env* e) const { mdb_env_close(e); }
};

}  // namespace

std::string lmdb_key(int64_t index) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%010lld", static_cast<long long>(index));
  return buf;
}

Result<LmdbStoreInfo> write_lmdb(const Dataset& dataset, const std::string& path, const LmdbWriteOptions& options) {
  const ImageShape shape = dataset.image_shape();
  const DataType pixel_type = dataset.pixel_type();
  if (dataset.size() == 0) return invalid_argument(path, ": ", dataset.describe(), " has no samples to store");
  if (!shape.is_fixed())
    return invalid_argument(path, ": the images of ", dataset.describe(),
                            " vary in size; an LMDB store needs one size (resize them when opening the dataset)");
  if (pixel_type != DataType::kUInt8 && pixel_type != DataType::kFloat32)
    return invalid_argument(path, ": pixels of type ", dtype_name(pixel_type), " (uint8 or float32)");
  std::error_code ec;
  if (fs::exists(fs::path(path) / "data.mdb", ec)) {
    if (!options.overwrite)
      return invalid_argument(path, ": an LMDB store is already there (overwrite it, or choose another path)");
    fs::remove(fs::path(path) / "data.mdb", ec);
    fs::remove(fs::path(path) / "lock.mdb", ec);
  }
  fs::create_directories(path, ec);
  if (ec) return Status(StatusCode::kIoError, str_cat(path, ": cannot create the folder (", ec.message(), ")"));

  MDB_env* raw_env = nullptr;
  int rc = mdb_env_create(&raw_env);
  if (rc) return lmdb_error(path, "env create", rc);
  std::unique_ptr<MDB_env, EnvCloser> env(raw_env);
  const uint64_t record = kHeaderBytes + static_cast<uint64_t>(shape.numel()) * pixel_bytes(pixel_type);
  // A first guess with room for LMDB's pages; a full map doubles it and retries the chunk.
  uint64_t map_size = (static_cast<uint64_t>(dataset.size()) * (record + 64) * 5 / 4 + (uint64_t{64} << 20)) &
                      ~((uint64_t{1} << 20) - 1);
  if ((rc = mdb_env_set_mapsize(env.get(), map_size))) return lmdb_error(path, "set map size", rc);
  if ((rc = mdb_env_open(env.get(), path.c_str(), MDB_NOSYNC, 0664))) return lmdb_error(path, "open", rc);

  LmdbStoreInfo info;
  info.count = dataset.size();
  info.shape = shape;
  info.pixel_type = pixel_type;
  std::vector<double> sum(static_cast<size_t>(std::max<int64_t>(0, shape.numel())), 0.0);
  const int64_t chunk = std::max<int64_t>(1, options.chunk);
  MDB_dbi dbi = 0;
  bool dbi_open = false;

  // Runs `fill` in a write transaction; a full map grows (doubles) and the transaction is redone.
  auto write_txn = [&](const auto& fill) -> Status {
    for (;;) {
      MDB_txn* txn = nullptr;
      if ((rc = mdb_txn_begin(env.get(), nullptr, 0, &txn))) return lmdb_error(path, "begin", rc);
      if (!dbi_open) {
        if ((rc = mdb_dbi_open(txn, nullptr, 0, &dbi))) {
          mdb_txn_abort(txn);
          return lmdb_error(path, "open database", rc);
        }
        dbi_open = true;
      }
      rc = fill(txn);
      if (rc == 0)
        rc = mdb_txn_commit(txn);
      else
        mdb_txn_abort(txn);
      if (rc == 0) return Status::ok();
      if (rc != MDB_MAP_FULL) return lmdb_error(path, "write", rc);
      map_size *= 2;
      if ((rc = mdb_env_set_mapsize(env.get(), map_size))) return lmdb_error(path, "grow the map", rc);
    }
  };

  for (int64_t begin = 0; begin < dataset.size(); begin += chunk) {
    const int64_t n = std::min(chunk, dataset.size() - begin);
    std::vector<Result<Sample>> samples(static_cast<size_t>(n), Result<Sample>(internal_error("not decoded")));
#pragma omp parallel for schedule(dynamic)
    for (int64_t i = 0; i < n; ++i) samples[static_cast<size_t>(i)] = dataset.sample(begin + i);
    std::vector<std::string> records(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      auto& s = samples[static_cast<size_t>(i)];
      const int64_t index = begin + i;
      if (!s.is_ok()) return Status(s.status()).with_prefix(str_cat("writing ", path, ": sample ", index));
      if (s->image.shape != shape || s->image.dtype != pixel_type || !s->image.consistent())
        return invalid_argument(path, ": sample ", index, " of ", dataset.describe(), " is ",
                                s->image.shape.to_string(), " ", dtype_name(s->image.dtype),
                                ", the dataset's images are ", shape.to_string(), " ", dtype_name(pixel_type));
      if (s->label < 0 || s->label >= dataset.num_classes())
        return invalid_argument(path, ": sample ", index, " of ", dataset.describe(), " has label ", s->label,
                                ", out of range for ", dataset.num_classes(), " classes");
      records[static_cast<size_t>(i)] = encode_record(*s);
    }
    KILN_RETURN_IF_ERROR(write_txn([&](MDB_txn* txn) {
      for (int64_t i = 0; i < n; ++i) {
        std::string key = lmdb_key(begin + i);
        MDB_val k = as_val(key), v = as_val(records[static_cast<size_t>(i)]);
        if (int r = mdb_put(txn, dbi, &k, &v, MDB_APPEND)) return r;
      }
      return 0;
    }));
    for (int64_t i = 0; i < n; ++i) {
      const Image& img = samples[static_cast<size_t>(i)]->image;
      if (img.dtype == DataType::kUInt8) {
        for (size_t p = 0; p < sum.size(); ++p) sum[p] += img.u8[p];
      } else {
        for (size_t p = 0; p < sum.size(); ++p) sum[p] += img.f32[p];
      }
    }
    if (options.progress) options.progress(begin + n, dataset.size());
  }

  info.mean = Image::zeros_f32(shape.is_fixed() ? shape : ImageShape{});
  for (size_t p = 0; p < info.mean.f32.size(); ++p)
    info.mean.f32[p] = static_cast<float>(sum[p] / static_cast<double>(std::max<int64_t>(1, dataset.size())));
  nlohmann::json meta = {{"format", "kiln-lmdb"},
                         {"version", 1},
                         {"count", info.count},
                         {"height", shape.height},
                         {"width", shape.width},
                         {"channels", shape.channels},
                         {"pixel_type", std::string(dtype_name(pixel_type))},
                         {"class_names", dataset.class_names()},
                         {"source", dataset.describe()}};
  std::string meta_text = meta.dump();
  std::string mean_bytes(info.mean.f32.size() * 4, '\0');
  if (!mean_bytes.empty()) std::memcpy(mean_bytes.data(), info.mean.f32.data(), mean_bytes.size());
  KILN_RETURN_IF_ERROR(write_txn([&](MDB_txn* txn) {
    std::string mk = kMetaKey, nk = kMeanKey;
    MDB_val k1 = as_val(mk), v1 = as_val(meta_text), k2 = as_val(nk), v2 = as_val(mean_bytes);
    if (int r = mdb_put(txn, dbi, &k1, &v1, 0)) return r;
    return mdb_put(txn, dbi, &k2, &v2, 0);
  }));
  if ((rc = mdb_env_sync(env.get(), 1))) return lmdb_error(path, "sync", rc);
  return info;
}

Result<std::shared_ptr<LmdbDataset>> LmdbDataset::open(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(fs::path(path) / "data.mdb", ec))
    return Status(StatusCode::kNotFound, str_cat(path, ": no LMDB store (no data.mdb in that folder)"));
  auto ds = std::shared_ptr<LmdbDataset>(new LmdbDataset());
  ds->path_ = path;
  int rc = mdb_env_create(&ds->env_);
  if (rc) return lmdb_error(path, "env create", rc);
  if ((rc = mdb_env_set_maxreaders(ds->env_, 512))) return lmdb_error(path, "set readers", rc);
  // NOTLS: read transactions are not tied to threads, so any loader thread may read.
  if ((rc = mdb_env_open(ds->env_, path.c_str(), MDB_RDONLY | MDB_NOTLS, 0664))) return lmdb_error(path, "open", rc);
  MDB_txn* txn = nullptr;
  if ((rc = mdb_txn_begin(ds->env_, nullptr, MDB_RDONLY, &txn))) return lmdb_error(path, "begin", rc);
  std::unique_ptr<MDB_txn, void (*)(MDB_txn*)> guard(txn, mdb_txn_abort);
  if ((rc = mdb_dbi_open(txn, nullptr, 0, &ds->dbi_))) return lmdb_error(path, "open database", rc);
  std::string mk = kMetaKey, nk = kMeanKey;
  MDB_val key = as_val(mk), val{};
  if ((rc = mdb_get(txn, ds->dbi_, &key, &val)))
    return invalid_argument(path, ": no '", kMetaKey, "' record: not a kiln dataset store");
  nlohmann::json meta = nlohmann::json::parse(static_cast<const char*>(val.mv_data),
                                              static_cast<const char*>(val.mv_data) + val.mv_size, nullptr, false);
  auto bad = [&](std::string_view what) { return invalid_argument(path, ": the '", kMetaKey, "' record ", what); };
  if (meta.is_discarded() || !meta.is_object()) return bad("is not JSON");
  if (meta.value("format", "") != "kiln-lmdb") return bad("is not a kiln dataset store's (format)");
  if (!meta.contains("version") || !meta["version"].is_number_integer() || meta["version"].get<int64_t>() != 1)
    return bad("has a version this kiln does not read (1)");
  auto get_int = [&](const char* name, int64_t lo, int64_t hi, int64_t& out) -> Status {
    if (!meta.contains(name) || !meta[name].is_number_integer()) return bad(str_cat("has no integer '", name, "'"));
    out = meta[name].get<int64_t>();
    if (out < lo || out > hi) return bad(str_cat("has '", name, "' = ", out, ", out of range [", lo, ", ", hi, "]"));
    return Status::ok();
  };
  KILN_RETURN_IF_ERROR(get_int("count", 0, int64_t{1} << 40, ds->count_));
  KILN_RETURN_IF_ERROR(get_int("height", 1, 1 << 15, ds->shape_.height));
  KILN_RETURN_IF_ERROR(get_int("width", 1, 1 << 15, ds->shape_.width));
  KILN_RETURN_IF_ERROR(get_int("channels", 1, 4, ds->shape_.channels));
  std::string pixel = meta.value("pixel_type", "");
  if (pixel == "uint8")
    ds->pixel_type_ = DataType::kUInt8;
  else if (pixel == "float32")
    ds->pixel_type_ = DataType::kFloat32;
  else
    return bad(str_cat("has pixel_type '", pixel, "' (uint8 or float32)"));
  if (!meta.contains("class_names") || !meta["class_names"].is_array()) return bad("has no class_names list");
  for (const auto& name : meta["class_names"]) {
    if (!name.is_string()) return bad("has a class name that is not a string");
    ds->class_names_.push_back(name.get<std::string>());
  }
  MDB_stat stat{};
  if ((rc = mdb_stat(txn, ds->dbi_, &stat))) return lmdb_error(path, "stat", rc);
  if (stat.ms_entries != static_cast<size_t>(ds->count_) + 2)
    return invalid_argument(path, ": ", stat.ms_entries, " records, the metadata says ", ds->count_,
                            " samples (plus ~meta and ~mean): the store is incomplete");
  key = as_val(nk);
  if ((rc = mdb_get(txn, ds->dbi_, &key, &val))) return invalid_argument(path, ": no '", kMeanKey, "' record");
  if (val.mv_size != static_cast<size_t>(ds->shape_.numel()) * 4)
    return invalid_argument(path, ": the '", kMeanKey, "' record has ", val.mv_size, " bytes, a ",
                            ds->shape_.to_string(), " float32 mean image has ", ds->shape_.numel() * 4);
  ds->mean_ = Image::zeros_f32(ds->shape_);
  std::memcpy(ds->mean_.f32.data(), val.mv_data, val.mv_size);
  return ds;
}

LmdbDataset::~LmdbDataset() {
  if (env_) mdb_env_close(env_);
}

Result<Sample> LmdbDataset::sample(int64_t index) const {
  if (index < 0 || index >= count_)
    return invalid_argument(path_, ": sample ", index, " is out of range (", count_, " samples)");
  MDB_txn* txn = nullptr;
  int rc = mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn);
  if (rc) return lmdb_error(path_, "begin", rc);
  std::unique_ptr<MDB_txn, void (*)(MDB_txn*)> guard(txn, mdb_txn_abort);
  std::string k = lmdb_key(index);
  MDB_val key = as_val(k), val{};
  if ((rc = mdb_get(txn, dbi_, &key, &val)))
    return invalid_argument(path_, ": no record for sample ", index, " (key ", k, ")");
  const auto* p = static_cast<const char*>(val.mv_data);
  auto corrupt = [&](std::string_view what) { return invalid_argument(path_, ": record ", k, " ", what); };
  if (val.mv_size < kHeaderBytes)
    return corrupt(str_cat("is truncated (", val.mv_size, " bytes, the header alone is 32)"));
  if (std::memcmp(p, kMagic, 4) != 0) return corrupt("has a bad magic (not a kiln sample record)");
  uint32_t h = 0, w = 0, c = 0;
  std::memcpy(&h, p + 4, 4);
  std::memcpy(&w, p + 8, 4);
  std::memcpy(&c, p + 12, 4);
  if (ImageShape{h, w, c} != shape_)
    return corrupt(str_cat("is ", h, "x", w, "x", c, ", the store's images are ", shape_.to_string()));
  const auto type = static_cast<uint8_t>(p[16]);
  DataType dtype = type == kPixelF32 ? DataType::kFloat32 : DataType::kUInt8;
  if ((type != kPixelU8 && type != kPixelF32) || dtype != pixel_type_)
    return corrupt(str_cat("has pixel type code ", int{type}, ", the store holds ", dtype_name(pixel_type_)));
  const size_t n = static_cast<size_t>(shape_.numel());
  if (val.mv_size != kHeaderBytes + n * pixel_bytes(dtype))
    return corrupt(str_cat("has ", val.mv_size, " bytes, a ", shape_.to_string(), " ", dtype_name(dtype),
                           " record has ", kHeaderBytes + n * pixel_bytes(dtype)));
  Sample s;
  std::memcpy(&s.label, p + 24, 8);
  if (s.label < 0 || s.label >= num_classes())
    return corrupt(str_cat("has label ", s.label, ", out of range for ", num_classes(), " classes"));
  s.image.shape = shape_;
  s.image.dtype = dtype;
  if (dtype == DataType::kUInt8) {
    s.image.u8.assign(reinterpret_cast<const uint8_t*>(p + kHeaderBytes),
                      reinterpret_cast<const uint8_t*>(p + kHeaderBytes) + n);
  } else {
    s.image.f32.resize(n);
    std::memcpy(s.image.f32.data(), p + kHeaderBytes, n * 4);
  }
  return s;
}

std::string LmdbDataset::describe() const {
  return str_cat("LMDB ", path_, " (", count_, " images ", shape_.to_string(), ", ", class_names_.size(), " classes)");
}

}  // namespace kiln::train
