#include "graph/engine_format.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "kiln/version.h"

namespace kiln {

namespace {
constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'E', 'N', 'G', '\x1a'};
constexpr std::string_view kMagicPrefix = "KILNENG";  // format 1 wrote "KILNENG1"
constexpr std::string_view kRebuild = "; rebuild the engine from the model";
// Prelude fields.
constexpr size_t kVersionAt = 8, kHeaderCrcAt = 12, kHeaderBytesAt = 16, kBodyOffsetAt = 24, kBodyBytesAt = 32,
                 kBodyCrcAt = 40, kCoveredFrom = 16;

uint32_t crc32_of(std::string_view s, uint32_t crc = 0) {
  return static_cast<uint32_t>(crc32_z(crc, reinterpret_cast<const Bytef*>(s.data()), static_cast<z_size_t>(s.size())));
}

void put_le(char* at, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) at[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint64_t get_le(std::string_view s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}
uint64_t align_up(uint64_t n) { return (n + kEngineAlignment - 1) / kEngineAlignment * kEngineAlignment; }

Status corrupt(std::string_view what) { return invalid_argument("the engine file is corrupt (", what, ")", kRebuild); }
Status truncated(uint64_t have, uint64_t need) {
  return invalid_argument("the engine file is truncated (", have, " bytes where its header promises at least ", need,
                          ")", kRebuild);
}
}  // namespace

Status write_engine_container_to(const EngineHeader& header, std::map<std::string, SectionPieces> sections,
                                 const std::function<char*(uint64_t bytes)>& allocate) {
  // Written in one buffer sized up front: weights are copied once, from the graph's tensors to their place, and
  // each piece is released as soon as it is in the buffer.
  uint64_t body_bytes = 0;
  nlohmann::json index = nlohmann::json::object();
  for (const auto& [name, pieces] : sections) {
    body_bytes = align_up(body_bytes);
    index[name] = {{"offset", body_bytes}, {"bytes", pieces.bytes()}};
    body_bytes += pieces.bytes();
  }
  const nlohmann::json h = {{"kiln_version", header.kiln_version},
                            {"device", header.device},
                            {"compute_capability", header.compute_capability},
                            {"cpu_isa", header.cpu_isa},
                            {"build_flags", header.build_flags},
                            {"extra", header.extra},
                            {"sections", index}};
  const std::string htext = h.dump();
  const uint64_t body_offset = align_up(kEnginePreludeBytes + htext.size());
  const uint64_t total = body_offset + body_bytes;
  char* const out = allocate(total);
  if (!out) return Status(StatusCode::kOutOfMemory, str_cat("no memory for the ", total, "-byte engine"));
  // The gaps (prelude, padding) are zeros: the same model gives the same bytes.
  std::memset(out, 0, body_offset);
  uint64_t written = 0;  // body bytes placed so far, padding included
  for (auto& section : sections) {
    SectionPieces& pieces = section.second;
    const uint64_t at = index[section.first]["offset"].get<uint64_t>();
    std::memset(out + body_offset + written, 0, at - written);
    written = at + pieces.bytes();
    pieces.write_to(out + body_offset + at);
  }
  std::copy_n(kMagic, 8, out);
  std::copy_n(htext.data(), htext.size(), out + kEnginePreludeBytes);
  put_le(out + kVersionAt, static_cast<uint32_t>(header.format_version), 4);
  put_le(out + kHeaderBytesAt, htext.size(), 8);
  put_le(out + kBodyOffsetAt, body_offset, 8);
  put_le(out + kBodyBytesAt, body_bytes, 8);
  const std::string_view all(out, total);
  put_le(out + kBodyCrcAt, crc32_of(all.substr(body_offset)), 4);
  const std::string_view covered = all.substr(kCoveredFrom, kEnginePreludeBytes - kCoveredFrom);
  put_le(out + kHeaderCrcAt, crc32_of(htext, crc32_of(covered)), 4);
  return Status::ok();
}

std::string write_engine_container(const EngineHeader& header, std::map<std::string, std::string> sections) {
  std::map<std::string, SectionPieces> pieces;
  for (auto& section : sections) pieces.emplace(section.first, SectionPieces(std::move(section.second)));
  std::string out;
  const Status st = write_engine_container_to(header, std::move(pieces), [&](uint64_t bytes) {
    out.resize(bytes);
    return out.data();
  });
  (void)st;  // a std::string that cannot grow throws
  return out;
}

bool looks_like_engine(std::string_view first_bytes) { return first_bytes.substr(0, 7) == kMagicPrefix; }

Result<EngineHeader> read_engine_header(std::string_view in) {
  if (!looks_like_engine(in) || in.size() < 8 || (in[7] != kMagic[7] && in[7] != '1'))
    return invalid_argument("not a kiln engine file (it does not start with kiln's engine signature)", kRebuild);
  if (in[7] != '1' && in.size() < kVersionAt + 4) return truncated(in.size(), kEnginePreludeBytes);
  const uint64_t version = in[7] == '1' ? 1 : get_le(in, kVersionAt, 4);
  if (version != kEngineFormatVersion)
    return Status(StatusCode::kVersionMismatch,
                  str_cat("the engine has format version ", version, " but this kiln reads version ",
                          kEngineFormatVersion, kRebuild));
  if (in.size() < kEnginePreludeBytes) return truncated(in.size(), kEnginePreludeBytes);
  EngineHeader h;
  h.file_bytes = in.size();
  h.header_bytes = get_le(in, kHeaderBytesAt, 8);
  h.body_offset = get_le(in, kBodyOffsetAt, 8);
  h.body_bytes = get_le(in, kBodyBytesAt, 8);
  h.body_crc = static_cast<uint32_t>(get_le(in, kBodyCrcAt, 4));
  if (h.header_bytes > in.size() - kEnginePreludeBytes)
    return truncated(in.size(), kEnginePreludeBytes + h.header_bytes);
  const std::string_view htext = in.substr(kEnginePreludeBytes, h.header_bytes);
  const std::string_view covered = in.substr(kCoveredFrom, kEnginePreludeBytes - kCoveredFrom);
  if (crc32_of(htext, crc32_of(covered)) != get_le(in, kHeaderCrcAt, 4)) return corrupt("header checksum mismatch");
  const auto j = nlohmann::json::parse(htext, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return corrupt("the header is not valid JSON");
  try {
    h.kiln_version = j.at("kiln_version");
    h.device = j.at("device");
    h.compute_capability = j.at("compute_capability");
    h.cpu_isa = j.at("cpu_isa");
    h.build_flags = j.at("build_flags");
    h.extra = j.at("extra").get<std::map<std::string, std::string>>();
    for (const auto& [name, loc] : j.at("sections").items())
      h.sections[name] = {loc.at("offset").get<uint64_t>(), loc.at("bytes").get<uint64_t>()};
  } catch (const nlohmann::json::exception& e) {
    return corrupt(str_cat("malformed header: ", e.what()));
  }
  if (h.kiln_version != version_string())
    return Status(StatusCode::kVersionMismatch,
                  str_cat("the engine was built by kiln ", h.kiln_version, " and this is kiln ", version_string(),
                          ", and engines are not portable across versions", kRebuild));
  return h;
}

Result<EngineContainer> read_engine_container(std::string_view in, const EngineHeaderCheck& check) {
  EngineContainer c;
  KILN_ASSIGN_OR_RETURN(c.header, read_engine_header(in));
  const EngineHeader& h = c.header;
  if (check) KILN_RETURN_IF_ERROR(check(h));
  if (h.body_offset % kEngineAlignment != 0 || h.body_offset < kEnginePreludeBytes + h.header_bytes)
    return corrupt("misplaced body");
  if (h.body_offset > in.size() || h.body_bytes > in.size() - h.body_offset) {
    const uint64_t need = h.body_bytes > UINT64_MAX - h.body_offset ? UINT64_MAX : h.body_offset + h.body_bytes;
    return truncated(in.size(), need);
  }
  if (in.size() - h.body_offset != h.body_bytes)
    return corrupt(str_cat(in.size() - h.body_offset - h.body_bytes, " bytes after the body"));
  // The padding between the header and the body is outside both checksums: it must be zeros.
  const std::string_view padding =
      in.substr(kEnginePreludeBytes + h.header_bytes, h.body_offset - kEnginePreludeBytes - h.header_bytes);
  if (padding.find_first_not_of('\0') != std::string_view::npos) return corrupt("non-zero padding after the header");
  const std::string_view body = in.substr(h.body_offset, h.body_bytes);
  if (crc32_of(body) != h.body_crc) return corrupt("body checksum mismatch");
  for (const auto& [name, s] : h.sections) {
    if (s.offset > body.size() || s.bytes > body.size() - s.offset)
      return corrupt(str_cat("section '", name, "' runs past the body"));
    c.sections[name] = body.substr(s.offset, s.bytes);
  }
  return c;
}

}  // namespace kiln
