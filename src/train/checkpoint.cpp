#include "train/checkpoint.h"

#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "kiln/version.h"

namespace kiln::train {
namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'C', 'K', 'P', 'T'};
constexpr uint32_t kFormat = 1;
constexpr size_t kAlign = 64;
// magic, format, reserved, header bytes
constexpr size_t kPreamble = 8 + 4 + 4 + 8;

size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

}  // namespace

Status save_checkpoint(const std::string& path, const Checkpoint& checkpoint) {
  nlohmann::json meta = nlohmann::json::parse(checkpoint.meta_json, nullptr, false);
  if (meta.is_discarded() || !meta.is_object()) return internal_error("checkpoint metadata is not a JSON object");
  nlohmann::json header = {{"kiln_version", version_string()}, {"meta", meta}, {"tensors", nlohmann::json::array()}};
  size_t offset = 0;
  std::vector<Tensor> data;
  for (const auto& [name, t] : checkpoint.tensors) {
    KILN_ASSIGN_OR_RETURN(Tensor host, t.contiguous());
    header["tensors"].push_back({{"name", name},
                                 {"dtype", std::string(dtype_name(host.dtype()))},
                                 {"dims", std::vector<int64_t>(host.dims().begin(), host.dims().end())},
                                 {"offset", offset},
                                 {"bytes", host.nbytes()}});
    offset = align_up(offset + host.nbytes());
    data.push_back(std::move(host));
  }
  const std::string text = header.dump();
  std::string out;
  out.append(kMagic, sizeof kMagic);
  put<uint32_t>(out, kFormat);
  put<uint32_t>(out, 0);
  put<uint64_t>(out, text.size());
  out += text;
  out.resize(align_up(out.size()), '\0');
  const size_t base = out.size();
  out.resize(base + offset, '\0');
  size_t i = 0;
  for (const auto& entry : header["tensors"]) {
    const size_t at = base + entry["offset"].get<size_t>();
    if (data[i].nbytes()) std::memcpy(out.data() + at, data[i].raw(), data[i].nbytes());
    ++i;
  }
  const uint32_t crc = static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(out.data()), out.size()));
  put<uint32_t>(out, crc);

  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f)
      return Status(StatusCode::kIoError,
                    "cannot write checkpoint '" + tmp + "': check the folder exists and is writable");
    f.write(out.data(), static_cast<std::streamsize>(out.size()));
    f.flush();
    if (!f) return Status(StatusCode::kIoError, "writing checkpoint '" + tmp + "' failed (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status(StatusCode::kIoError, "cannot rename '" + tmp + "' to '" + path + "': " + ec.message());
  return {};
}

Result<Checkpoint> load_checkpoint(const std::string& path) {
  auto bad = [&](const std::string& what) {
    return invalid_argument("checkpoint '", path, "' ", what, "; use another snapshot or start the run again");
  };
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return Status(StatusCode::kNotFound, "cannot read checkpoint '" + path + "': " + ec.message());
  if (size < kPreamble + 4) return bad("is too short to be a kiln checkpoint");
  std::string bytes(size, '\0');
  {
    std::ifstream f(path, std::ios::binary);
    f.read(bytes.data(), static_cast<std::streamsize>(size));
    if (!f) return Status(StatusCode::kIoError, "cannot read checkpoint '" + path + "'");
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) return bad("is not a kiln checkpoint (wrong magic)");
  uint32_t format, stored_crc;
  uint64_t header_bytes;
  std::memcpy(&format, bytes.data() + 8, 4);
  std::memcpy(&header_bytes, bytes.data() + 16, 8);
  if (format != kFormat) return bad("has format " + std::to_string(format) + ", this kiln reads format 1");
  std::memcpy(&stored_crc, bytes.data() + size - 4, 4);
  const uint32_t crc = static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), size - 4));
  if (crc != stored_crc) return bad("is corrupted or truncated (checksum mismatch)");
  if (header_bytes > size - kPreamble - 4) return bad("has a header larger than the file");
  nlohmann::json header =
      nlohmann::json::parse(bytes.begin() + kPreamble, bytes.begin() + kPreamble + header_bytes, nullptr, false);
  if (header.is_discarded() || !header.is_object() || !header.contains("tensors") || !header["tensors"].is_array())
    return bad("has an unreadable header");
  const size_t base = align_up(kPreamble + header_bytes);
  const size_t data_end = size - 4;
  if (base > data_end) return bad("ends inside its header");
  Checkpoint out;
  out.meta_json = header.value("meta", nlohmann::json::object()).dump();
  std::set<std::string> seen;
  try {
    for (const auto& e : header["tensors"]) {
      const std::string name = e.at("name").get<std::string>();
      auto dtype = parse_dtype(e.at("dtype").get<std::string>());
      if (!dtype) return bad("gives tensor '" + name + "' an unknown dtype");
      std::vector<int64_t> dims = e.at("dims").get<std::vector<int64_t>>();
      if (dims.size() > static_cast<size_t>(kMaxRank)) return bad("gives tensor '" + name + "' too many dims");
      uint64_t numel = 1;
      for (int64_t d : dims) {
        if (d < 0 || (d > 0 && numel > (data_end / static_cast<uint64_t>(d))))
          return bad("gives tensor '" + name + "' bad dims");
        numel *= static_cast<uint64_t>(d);
      }
      const uint64_t offset = e.at("offset").get<uint64_t>(), nbytes = e.at("bytes").get<uint64_t>();
      if (nbytes != numel * dtype_size(*dtype))
        return bad("gives tensor '" + name + "' a size that does not match its dims");
      if (offset > data_end - base || nbytes > data_end - base - offset)
        return bad("places tensor '" + name + "' outside the file");
      if (!seen.insert(name).second) return bad("holds tensor '" + name + "' twice");
      Dims d;
      for (int64_t v : dims) d.push_back(v);
      KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(*dtype, d));
      if (nbytes) std::memcpy(t.raw(), bytes.data() + base + offset, nbytes);
      out.tensors[name] = std::move(t);
    }
  } catch (const nlohmann::json::exception&) {
    return bad("has a malformed tensor entry");
  }
  return out;
}

}  // namespace kiln::train
