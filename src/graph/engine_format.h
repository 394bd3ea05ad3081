#pragma once
// The engine file container shared by the builder (writer) and the runtime (reader). Version 2, integers
// little-endian:
//   prelude, 64 bytes: magic "KILNENG\x1a" | u32 format version | u32 header CRC-32 | u64 header bytes |
//                      u64 body offset | u64 body bytes | u32 body CRC-32 | zeros
//   header JSON at 64: kiln version, device, compute capability or CPU ISA, build flags, sections
//   body at `body offset` (a multiple of 64): the sections, each at a multiple of 64 within it
// The header CRC covers prelude bytes 16..63 and the header JSON; the body CRC covers the body. Weights
// are a section of their own, so an engine mapped from a file uses them in place.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "graph/section_pieces.h"
#include "kiln/status.h"

namespace kiln {

inline constexpr int kEngineFormatVersion = 2;
/// Alignment of the body, of every section and of every constant's data in the weights section.
inline constexpr uint64_t kEngineAlignment = 64;
inline constexpr size_t kEnginePreludeBytes = 64;

struct EngineSection {
  uint64_t offset = 0;  ///< from the start of the body
  uint64_t bytes = 0;
};

struct EngineHeader {
  int format_version = kEngineFormatVersion;
  std::string kiln_version;
  std::string device;              ///< "cpu" or the GPU's name
  std::string compute_capability;  ///< "9.0"; empty for CPU engines
  std::string cpu_isa;             ///< the CPU's instruction set as oneDNN uses it ("avx512_core"); CPU engines
  std::string build_flags;
  std::map<std::string, std::string> extra;
  // Filled by the reader.
  uint64_t file_bytes = 0, header_bytes = 0, body_offset = 0, body_bytes = 0;
  uint32_t body_crc = 0;
  std::map<std::string, EngineSection> sections;
};

/// Sections (named byte strings) in a container with a header and checksums.
std::string write_engine_container(const EngineHeader& header, std::map<std::string, std::string> sections);
/// The same container written into memory `allocate(bytes)` gives (not necessarily zeroed; nullptr: out of memory,
/// an error): each section's pieces are copied straight to their place and released there, so the sections and the
/// container are never all in memory at once.
Status write_engine_container_to(const EngineHeader& header, std::map<std::string, SectionPieces> sections,
                                 const std::function<char*(uint64_t bytes)>& allocate);

/// True when `first_bytes` start like a kiln engine file of any format version.
bool looks_like_engine(std::string_view first_bytes);

struct EngineContainer {
  EngineHeader header;
  std::map<std::string, std::string_view> sections;  ///< views into the bytes given to the reader
};
/// Called with the header once it is read and checked, before the body is checksummed (to refuse an engine
/// built for another device without reading the whole file).
using EngineHeaderCheck = std::function<Status(const EngineHeader&)>;
/// Reads the prelude and the header: a file that is not an engine, is truncated or corrupt, or comes from
/// another format or kiln version is an error in one sentence ending "rebuild the engine from the model".
Result<EngineHeader> read_engine_header(std::string_view file);
/// The header (then `check`), the body's length and checksum, and the sections.
Result<EngineContainer> read_engine_container(std::string_view file, const EngineHeaderCheck& check = {});

}  // namespace kiln
