#include "graph/engine_format.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "kiln/version.h"

namespace kiln {

namespace {
constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'E', 'N', 'G', '1'};

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }

bool get_u64(std::string_view in, size_t& pos, uint64_t& v) {
  if (in.size() < 8 || pos > in.size() - 8) return false;
  std::memcpy(&v, in.data() + pos, 8);
  pos += 8;
  return true;
}
}  // namespace

std::string write_engine_container(const EngineHeader& header, const std::map<std::string, std::string>& sections) {
  // Written in one buffer sized up front: weights are copied once, not once per step.
  uint64_t payload_size = 0;
  nlohmann::json index = nlohmann::json::object();
  for (auto& [name, bytes] : sections) {
    index[name] = {{"offset", payload_size}, {"bytes", bytes.size()}};
    payload_size += bytes.size();
  }
  nlohmann::json h = {{"format_version", header.format_version},
                      {"kiln_version", header.kiln_version},
                      {"device", header.device},
                      {"compute_capability", header.compute_capability},
                      {"build_flags", header.build_flags},
                      {"extra", header.extra},
                      {"sections", index}};
  const std::string htext = h.dump();
  std::string out;
  out.reserve(8 + 8 + htext.size() + 8 + payload_size + 8);
  out.append(kMagic, 8);
  put_u64(out, htext.size());
  out += htext;
  put_u64(out, payload_size);
  const size_t payload_at = out.size();
  for (auto& [name, bytes] : sections) out += bytes;
  put_u64(out, fnv1a(std::string_view(out).substr(payload_at)));
  return out;
}

Result<EngineContainer> read_engine_container(std::string_view in) {
  if (in.size() < 8 || std::memcmp(in.data(), kMagic, 8) != 0)
    return invalid_argument("not a kiln engine file (wrong magic); build one with `kiln exec --saveEngine`");
  size_t pos = 8;
  uint64_t hlen = 0, plen = 0, sum = 0;
  if (!get_u64(in, pos, hlen) || hlen > in.size() - pos)
    return invalid_argument("the engine file is truncated (header); rebuild the engine from the model");
  const auto h = nlohmann::json::parse(in.substr(pos, hlen), nullptr, false);
  pos += hlen;
  if (h.is_discarded() || !h.is_object())
    return invalid_argument("the engine header is corrupt; rebuild the engine from the model");
  if (!get_u64(in, pos, plen) || plen > in.size() - pos)
    return invalid_argument("the engine file is truncated (payload); rebuild the engine from the model");
  const std::string_view payload = in.substr(pos, plen);
  pos += plen;
  if (!get_u64(in, pos, sum))
    return invalid_argument("the engine file is truncated (checksum); rebuild the engine from the model");
  if (sum != fnv1a(payload))
    return invalid_argument("the engine file is corrupt (checksum mismatch); rebuild the engine from the model");
  EngineContainer c;
  try {
    c.header.format_version = h.at("format_version");
    c.header.kiln_version = h.at("kiln_version");
    c.header.device = h.at("device");
    c.header.compute_capability = h.at("compute_capability");
    c.header.build_flags = h.at("build_flags");
    c.header.extra = h.at("extra").get<std::map<std::string, std::string>>();
    if (c.header.format_version != kEngineFormatVersion)
      return Status(StatusCode::kVersionMismatch,
                    str_cat("the engine has format version ", c.header.format_version, " but this kiln reads version ",
                            kEngineFormatVersion, "; rebuild the engine from the model"));
    if (c.header.kiln_version != version_string())
      return Status(
          StatusCode::kVersionMismatch,
          str_cat("the engine was built by kiln ", c.header.kiln_version, " and this is kiln ", version_string(),
                  "; engines are not portable across versions: rebuild the engine from "
                  "the model"));
    for (auto& [name, loc] : h.at("sections").items()) {
      const uint64_t off = loc.at("offset"), n = loc.at("bytes");
      if (off > payload.size() || n > payload.size() - off)
        return invalid_argument("engine section '", name, "' runs past the payload; rebuild the engine from the model");
      c.sections[name] = std::string(payload.substr(off, n));
    }
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument("the engine header is malformed (", e.what(), "); rebuild the engine from the model");
  }
  return c;
}

}  // namespace kiln
