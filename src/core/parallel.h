#pragma once
// parallel_for over [0, n) on the CPU (OpenMP, the team size of the calling thread: kernels/cpu/threads.h); runs
// inline, without a parallel region, for small n or a team of one.
#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace kiln {

/// Work units (elements, bytes, flops: the caller's measure) worth one thread's start-up.
inline constexpr int64_t kParallelGrainWork = int64_t{1} << 15;

/// Items per thread so that each thread gets about kParallelGrainWork units, given the units per item.
inline int64_t grain_for(int64_t work_per_item, int64_t grain_work = kParallelGrainWork) {
  return std::max<int64_t>(1, grain_work / std::max<int64_t>(1, work_per_item));
}

/// Pieces per thread a parallel loop is dealt out in, each taken by whichever thread is free: a thread that loses its
/// core for a while (another process's time slice) leaves the rest of the loop to the others instead of holding the
/// whole region up to its end (the others would wait for it there).
inline constexpr int64_t kPiecesPerThread = 8;

/// Items in one piece of a loop of n items over `threads` threads: n / (threads * kPiecesPerThread), but at least
/// grain / kPiecesPerThread, so that a piece stays worth taking.
inline int64_t piece_items(int64_t n, int64_t grain, int threads) {
  const int64_t pieces = int64_t{threads} * kPiecesPerThread;
  return std::max<int64_t>({1, grain / kPiecesPerThread, (n + pieces - 1) / pieces});
}

/// Calls f(i) for every i in [0, n): inline when n <= grain (the items not worth a second thread), else in one
/// parallel region of at most n threads, which take pieces of the loop (piece_items) as they become free.
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  const int threads = n <= grain ? 1 : static_cast<int>(std::min<int64_t>(n, omp_get_max_threads()));
  if (threads <= 1) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  const int64_t piece = piece_items(n, grain, threads);
#pragma omp parallel for schedule(dynamic, piece) num_threads(threads)
  for (int64_t i = 0; i < n; ++i) f(i);
}

}  // namespace kiln
