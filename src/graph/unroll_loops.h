#pragma once
// unroll-loop: replaces a small Loop by copies of its body, one per trip, so that the builder and the
// optimizer see straight-line code (and no host round trip per trip runs).
#include <cstdint>

#include "graph/graph.h"

namespace kiln {

/// A Loop is unrolled when its trip count is a known constant of at most max_trips, its condition is absent
/// or a constant true and its body passes the condition through (no data-dependent exit), it has no scan
/// outputs, its body owns no graphs, and the copies come to at most max_nodes nodes.
struct UnrollLimits {
  int64_t max_trips = 16;
  int64_t max_nodes = 512;
};

/// Unrolls every Loop of `graph` (not of its subgraphs) that meets the limits; logs each one at info and
/// the reason a Loop stays at verbose. Returns how many were unrolled. The loop's outputs keep their names.
Result<int> unroll_small_loops(Graph& graph, const UnrollLimits& limits = {});

}  // namespace kiln
