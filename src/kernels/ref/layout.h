#pragma once
// Channels-last <-> channels-first copies for the reference kernels of channels_last layers: [N, S, C] <-> [N, C, S]
// (S the product of the spatial sizes), so that they run their NCHW code on NHWC tensors.
#include <cstdint>
#include <vector>

namespace kiln::ref {

/// [n, s, c] -> [n, c, s].
template <class T>
std::vector<T> to_channels_first(const T* src, int64_t n, int64_t s, int64_t c) {
  std::vector<T> dst(static_cast<size_t>(n * s * c));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < s; ++i)
      for (int64_t k = 0; k < c; ++k) dst[(b * c + k) * s + i] = src[(b * s + i) * c + k];
  return dst;
}

/// [n, c, s] -> [n, s, c] into `dst`.
template <class T>
void to_channels_last(const T* src, T* dst, int64_t n, int64_t c, int64_t s) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t i = 0; i < s; ++i) dst[(b * s + i) * c + k] = src[(b * c + k) * s + i];
}

}  // namespace kiln::ref
