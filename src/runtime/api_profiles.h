#pragma once
// Optimization profiles and the profiling verbosity as the builder API stores them in the engine
// header (EngineHeader::extra) and the runtime API reads them back.
#include <map>
#include <string>
#include <string_view>

#include "graph/engine_format.h"
#include "graph/graph.h"
#include "kiln/runtime.h"

namespace kiln {

/// EngineHeader::extra keys.
inline constexpr const char* kProfilesHeaderKey = "api.profiles";
inline constexpr const char* kVerbosityHeaderKey = "api.profiling_verbosity";

using ShapeRanges = std::map<std::string, ShapeRange, std::less<>>;

/// {"input": {"min": [..], "opt": [..], "max": [..]}, ...}
std::string profiles_to_json(const ShapeRanges& profiles);
/// Errors say the engine is corrupt and to rebuild it.
Result<ShapeRanges> profiles_from_json(std::string_view json);

/// Every profile names a tensor input of `g` and fits its rank and static dims, and min <= opt <= max per dim;
/// errors start with `who` (e.g. "BuilderConfig" or "--minShapes/--optShapes/--maxShapes") and name the input.
Status check_profiles(const Graph& g, const ShapeRanges& profiles, std::string_view who);
/// Whether `dims` fits input `input` of shape `allowed` (-1: any) and its profile `range` (nullptr: none); the error
/// names the input, the dim and what the input accepts.
Status check_profile_shape(std::string_view input, const Dims& allowed, const ShapeRange* range, const Dims& dims);
/// The profiles an engine was built with (its header's entry), empty when none.
Result<ShapeRanges> engine_profiles(const EngineHeader& header);

std::string_view verbosity_name(ProfilingVerbosity verbosity);
/// Unknown names are an error that says to rebuild the engine.
Result<ProfilingVerbosity> parse_verbosity(std::string_view name);

}  // namespace kiln
