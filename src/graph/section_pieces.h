#pragma once
// The bytes of one engine section before they are placed: pieces (a tensor's data or a short byte string) at
// increasing offsets, zeros between them. The container copies each piece straight to its place in the engine and
// releases it there, so a model's weights go from the graph into the engine in one copy, with no section-sized
// buffer between them (ResNet-50: 160 MB that a warm build otherwise touched for the first time, twice).
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "kiln/tensor.h"

namespace kiln {

class SectionPieces {
 public:
  SectionPieces() = default;
  /// One piece: the whole of `bytes`.
  explicit SectionPieces(std::string bytes) { add(std::move(bytes)); }

  /// The section's size: the end of its last piece.
  uint64_t bytes() const { return bytes_; }
  /// Adds `t`'s data (host memory, a view or a shared handle: it is only read) at the next multiple of `alignment`;
  /// returns that offset.
  uint64_t add(Tensor t, uint64_t alignment);
  /// Adds `bytes` right after the last piece; returns its offset.
  uint64_t add(std::string bytes);

  /// Writes the section to `dst` (its `bytes()` bytes, gaps zeroed), releasing each piece once it is copied; the
  /// pieces are empty afterwards.
  void write_to(char* dst);
  /// The section as one byte string (the pieces released as they are copied).
  std::string join();

 private:
  std::vector<std::pair<uint64_t, std::variant<Tensor, std::string>>> pieces_;
  uint64_t bytes_ = 0;
};

}  // namespace kiln
