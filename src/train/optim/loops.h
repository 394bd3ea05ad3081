#pragma once
// Element loops of the optimizers: fixed-size chunks spread over threads (OpenMP), each a simd loop. The
// chunking does not depend on the thread count, so reductions over chunks are deterministic.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/parallel.h"

namespace kiln::train::loops {

inline constexpr int64_t kChunk = int64_t{1} << 14;

inline int64_t chunk_count(int64_t n) { return (n + kChunk - 1) / kChunk; }

/// f(begin, end) over [0, n) in chunks of kChunk, in parallel when there are several.
template <class F>
void for_chunks(int64_t n, F&& f) {
  parallel_for(chunk_count(n), 1, [&](int64_t c) { f(c * kChunk, std::min(n, (c + 1) * kChunk)); });
}

namespace detail {
template <class F, class... Done>
void dispatch(F& f, std::tuple<Done...> /*done*/) {
  f(Done{}...);
}
template <class F, class... Done, class... Rest>
void dispatch(F& f, std::tuple<Done...> /*done*/, bool first, Rest... rest) {
  if (first) {
    dispatch(f, std::tuple<Done..., std::true_type>{}, rest...);
  } else {
    dispatch(f, std::tuple<Done..., std::false_type>{}, rest...);
  }
}
}  // namespace detail

/// Calls f(std::bool_constant<flags>...): branches the loop would take on every element become
/// compile-time, so the loop body has no control flow and vectorizes.
template <class F, class... Flags>
void dispatch(F&& f, Flags... flags) {
  detail::dispatch(f, std::tuple<>{}, static_cast<bool>(flags)...);
}

/// Sum over i of x[i]^2 in double: partial sums per chunk, added in chunk order.
inline double sum_squares(const float* x, int64_t n) {
  std::vector<double> partial(static_cast<size_t>(chunk_count(n)), 0.0);
  for_chunks(n, [&](int64_t b, int64_t e) {
    double s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = b; i < e; ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    partial[static_cast<size_t>(b / kChunk)] = s;
  });
  double total = 0;
  for (double s : partial) total += s;
  return total;
}

/// Largest |x[i]| (NaN if any element is NaN).
inline double max_abs(const float* x, int64_t n) {
  std::vector<float> partial(static_cast<size_t>(chunk_count(n)), 0.0f);
  std::vector<char> nan(partial.size(), 0);
  for_chunks(n, [&](int64_t b, int64_t e) {
    float m = 0;
    bool has_nan = false;
    for (int64_t i = b; i < e; ++i) {
      float a = x[i] < 0 ? -x[i] : x[i];
      if (a != a) has_nan = true;
      m = a > m ? a : m;
    }
    partial[static_cast<size_t>(b / kChunk)] = m;
    nan[static_cast<size_t>(b / kChunk)] = has_nan;
  });
  double m = 0;
  for (size_t c = 0; c < partial.size(); ++c) {
    if (nan[c]) return std::numeric_limits<double>::quiet_NaN();
    m = std::max(m, static_cast<double>(partial[c]));
  }
  return m;
}

}  // namespace kiln::train::loops
