#pragma once
// `kiln exec --minShapes/--optShapes/--maxShapes` (trtexec's flags): an optimization profile per dynamic input,
// stored in the engine it builds; runs then take --shapes within the profile, or its opt shapes.
#include <string>
#include <vector>

#include "graph/graph.h"
#include "runtime/api_profiles.h"

namespace kiln::cli {

/// Each flag's "name:1x3x224x224" entries (repeatable or comma-separated) as profiles, checked against `g`'s
/// inputs: every input named in one flag needs all three. Empty when no flag is given.
Result<ShapeRanges> parse_profiles(const Graph& g, const std::vector<std::string>& min,
                                   const std::vector<std::string>& opt, const std::vector<std::string>& max);

/// "a:1x2,b:3" and repeated flags -> one entry per shape.
std::vector<std::string> split_shape_list(const std::vector<std::string>& flags);

}  // namespace kiln::cli
