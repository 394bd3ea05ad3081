#pragma once
// ReverseSequence, shared by the reference and CPU kernels.
#include <cstring>
#include <vector>

#include "kernels/registry.h"
#include "ops/reverse_sequence/reverse_sequence.h"

namespace kiln::reverse_sequence {

/// The sequence lengths, each checked against the time axis length.
inline Result<std::vector<int64_t>> lengths(const Tensor& lens, int64_t time) {
  std::vector<int64_t> v(lens.numel());
  for (int64_t i = 0; i < lens.numel(); ++i) {
    v[i] = lens.dtype() == DataType::kInt64 ? lens.data<int64_t>()[i] : static_cast<int64_t>(lens.at(i));
    if (v[i] < 0 || v[i] > time)
      return invalid_argument("ReverseSequence: sequence_lens[", i, "] is ", v[i], "; it must be in [0, ", time,
                              "] (the time axis length)");
  }
  return v;
}

/// Copies row r = (i0, i1) over the first two dims; each row is a block of `inner` elements.
inline void copy_row(const ReverseSequenceAttrs& a, const std::vector<int64_t>& lens, const Tensor& x, Tensor& y,
                     int64_t r) {
  const int64_t d1 = x.dims()[1];
  const int64_t inner = x.numel() / (x.dims()[0] * d1);
  const int64_t i0 = r / d1, i1 = r % d1;
  const int64_t b = a.batch_axis == 0 ? i0 : i1;
  const int64_t t = a.batch_axis == 0 ? i1 : i0;
  const int64_t st = t < lens[b] ? lens[b] - 1 - t : t;
  const int64_t src_row = a.batch_axis == 0 ? i0 * d1 + st : st * d1 + i1;
  const size_t bytes = inner * dtype_size(x.dtype());
  std::memcpy(static_cast<char*>(y.raw()) + r * bytes, static_cast<const char*>(x.raw()) + src_row * bytes, bytes);
}

}  // namespace kiln::reverse_sequence
