#pragma once
// Element loops of the optimizers: fixed-size chunks spread over threads (OpenMP), each a simd loop. The
// chunking does not depend on the thread count, so reductions over chunks are deterministic.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "core/parallel.h"
#include "train/optim/rules.h"

namespace kiln::train::loops {

inline constexpr int64_t kChunk = int64_t{1} << 14;

inline int64_t chunk_count(int64_t n) { return (n + kChunk - 1) / kChunk; }

/// f(begin, end) over [0, n) in chunks of kChunk, in parallel when there are several.
template <class F>
void for_chunks(int64_t n, F&& f) {
  parallel_for(chunk_count(n), 1, [&](int64_t c) { f(c * kChunk, std::min(n, (c + 1) * kChunk)); });
}

/// Calls f(std::bool_constant<flags>...) (rules::dispatch).
template <class F, class... Flags>
decltype(auto) dispatch(F&& f, Flags... flags) {
  return rules::dispatch(std::forward<F>(f), flags...);
}

/// rule(t, i) for every i in [0, n): chunks over threads, each chunk one simd loop (the rule inlines, so the loop
/// vectorizes as a hand-written one would).
template <class Rule>
void apply(const Rule& rule, const rules::Tensors& t, int64_t n) {
  for_chunks(n, [&](int64_t b, int64_t e) {
    const Rule r = rule;
    const rules::Tensors x = t;
#pragma omp simd
    for (int64_t i = b; i < e; ++i) r(x, i);
  });
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
