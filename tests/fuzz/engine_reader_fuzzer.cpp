// libFuzzer target: arbitrary bytes through the engine reader (container, header, graph, constants, plan) and
// context creation must give an engine or a Status, never a crash, a hang or an unbounded allocation.
// Three input kinds, so that mutations get past the checksums to every parser:
//   "KILNENG..."                        a whole engine file, read from memory (weights copied once)
//   "{header JSON}\n#body#\n<body>"     a prelude with valid checksums is put in front: the header reader
//   anything else                       "<graph>\n#plan#\n<plan>\n#weights#\n<weights>[\n#prepared#\n<prepared>]",
//                                       wrapped in a valid container and read in place from a 64-byte
//                                       aligned buffer, as a mapped file is
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "graph/engine_format.h"
#include "kernels/libraries.h"
#include "kiln/logger.h"
#include "kiln/tensor.h"
#include "kiln/version.h"
#include "runtime/engine.h"

namespace {

std::pair<std::string_view, std::string_view> split(std::string_view in, std::string_view mark) {
  const size_t at = in.find(mark);
  if (at == std::string_view::npos) return {in, {}};
  return {in.substr(0, at), in.substr(at + mark.size())};
}

void put_le(std::string& out, size_t at, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

uint32_t crc(std::string_view s, uint32_t init = 0) {
  return static_cast<uint32_t>(crc32_z(init, reinterpret_cast<const Bytef*>(s.data()), s.size()));
}

// A format-2 file around any header text and body, with correct checksums (see graph/engine_format.h).
std::string raw_container(std::string_view header, std::string_view body) {
  const size_t body_at = (64 + header.size() + 63) / 64 * 64;
  std::string out(body_at, '\0');
  std::memcpy(out.data(), "KILNENG\x1a", 8);
  put_le(out, 8, kiln::kEngineFormatVersion, 4);
  std::memcpy(out.data() + 64, header.data(), header.size());
  put_le(out, 16, header.size(), 8);
  put_le(out, 24, body_at, 8);
  put_le(out, 32, body.size(), 8);
  put_le(out, 40, crc(body), 4);
  put_le(out, 12, crc(header, crc(std::string_view(out).substr(16, 48))), 4);
  out.append(body);
  return out;
}

void load(std::string_view bytes, bool in_place) {
  kiln::Result<std::shared_ptr<const kiln::EngineImpl>> engine = kiln::invalid_argument("unset");
  if (in_place) {
    auto buffer = kiln::Tensor::empty(kiln::DataType::kUInt8, kiln::Dims{static_cast<int64_t>(bytes.size())});
    if (!buffer) return;
    if (!bytes.empty()) std::memcpy(buffer->raw(), bytes.data(), bytes.size());
    auto owner = std::make_shared<const kiln::Tensor>(std::move(*buffer));
    engine =
        kiln::EngineImpl::deserialize(std::string_view(static_cast<const char*>(owner->raw()), bytes.size()), owner);
  } else {
    engine = kiln::EngineImpl::deserialize(bytes);
  }
  if (engine) (void)(*engine)->create_execution_context();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    kiln::Logger::global().set_level(kiln::Severity::kInternalError);
    return true;
  }();
  (void)quiet;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  if (kiln::looks_like_engine(in)) {
    load(in, false);
  } else if (!in.empty() && in[0] == '{') {
    const auto [header, body] = split(in, "\n#body#\n");
    load(raw_container(header, body), true);
  } else {
    const auto [graph, rest] = split(in, "\n#plan#\n");
    const auto [plan, data] = split(rest, "\n#weights#\n");
    const auto [weights, prepared] = split(data, "\n#prepared#\n");
    kiln::EngineHeader header;
    header.kiln_version = kiln::version_string();
    header.device = "cpu";
    header.cpu_isa = kiln::cpu_isa_name();
    std::map<std::string, std::string> sections = {
        {"graph", std::string(graph)}, {"plan", std::string(plan)}, {"weights", std::string(weights)}};
    if (!prepared.empty()) sections["prepared"] = std::string(prepared);
    load(kiln::write_engine_container(header, std::move(sections)), true);
  }
  return 0;
}
