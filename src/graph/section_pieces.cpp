#include "graph/section_pieces.h"

#include <algorithm>
#include <cstring>

#include "core/parallel.h"

namespace kiln {
namespace {

// A tensor's bytes to their place, in slices on the threads there are: the destination is new memory, whose first
// touch (page faults) is most of the time, and faults on two threads took half the time of one on this project's VMs.
void copy_bytes(char* dst, const char* src, size_t n) {
  constexpr size_t kSlice = size_t{1} << 18;
  const auto slices = static_cast<int64_t>((n + kSlice - 1) / kSlice);
  parallel_for(slices, 1, [&](int64_t i) {
    const size_t at = static_cast<size_t>(i) * kSlice;
    std::memcpy(dst + at, src + at, std::min(kSlice, n - at));
  });
}

}  // namespace

uint64_t SectionPieces::add(Tensor t, uint64_t alignment) {
  const uint64_t offset = (bytes_ + alignment - 1) / alignment * alignment;
  bytes_ = offset + t.nbytes();
  pieces_.emplace_back(offset, std::move(t));
  return offset;
}

uint64_t SectionPieces::add(std::string bytes) {
  const uint64_t offset = bytes_;
  bytes_ += bytes.size();
  pieces_.emplace_back(offset, std::move(bytes));
  return offset;
}

void SectionPieces::write_to(char* dst) {
  uint64_t written = 0;
  for (auto& [offset, piece] : pieces_) {
    std::memset(dst + written, 0, offset - written);
    if (auto* t = std::get_if<Tensor>(&piece)) {
      copy_bytes(dst + offset, static_cast<const char*>(t->raw()), t->nbytes());
      written = offset + t->nbytes();
    } else {
      const auto& s = std::get<std::string>(piece);
      std::copy_n(s.data(), s.size(), dst + offset);
      written = offset + s.size();
    }
    piece = std::string();  // released: a tensor the graph no longer holds is freed here
  }
  pieces_.clear();
  bytes_ = 0;
}

std::string SectionPieces::join() {
  std::string out(bytes_, '\0');
  write_to(out.data());
  return out;
}

}  // namespace kiln
