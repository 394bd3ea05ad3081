#pragma once
// Optimization profiles and the profiling verbosity as the builder API stores them in the engine
// header (EngineHeader::extra) and the runtime API reads them back.
#include <map>
#include <string>
#include <string_view>

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

std::string_view verbosity_name(ProfilingVerbosity verbosity);
/// Unknown names are an error that says to rebuild the engine.
Result<ProfilingVerbosity> parse_verbosity(std::string_view name);

}  // namespace kiln
