// Optimization profiles checked against a graph's inputs (build time) and run shapes checked against a profile
// (run time): shared by the builder API, the runtime API and `kiln exec`.
#include "runtime/api_profiles.h"

namespace kiln {
namespace {

std::string input_names(const Graph& g) {
  std::string s;
  for (const Value* v : g.inputs()) s += (s.empty() ? "" : ", ") + v->name;
  return s.empty() ? "none" : s;
}

}  // namespace

Status check_profiles(const Graph& g, const ShapeRanges& profiles, std::string_view who) {
  for (const auto& [name, range] : profiles) {
    const Value* in = nullptr;
    for (const Value* v : g.inputs())
      if (v->name == name) in = v;
    if (!in)
      return invalid_argument(who, ": the optimization profile names '", name,
                              "', which is not an input of the network (inputs: ", input_names(g), ")");
    if (in->kind != ValueKind::kTensor)
      return invalid_argument(who, ": input '", name, "' is a ", value_kind_name(in->kind),
                              "; optimization profiles are for tensor inputs");
    if (range.min.rank() != range.opt.rank() || range.opt.rank() != range.max.rank())
      return invalid_argument(who, ": the optimization profile of '", name, "' (min ", range.min.to_string(), ", opt ",
                              range.opt.to_string(), ", max ", range.max.to_string(), ") mixes ranks");
    if (range.min.rank() != in->dims.rank())
      return invalid_argument(who, ": the optimization profile of '", name, "' has rank ", range.min.rank(),
                              " but the input has shape ", in->dims.to_string(), " (rank ", in->dims.rank(), ")");
    for (int i = 0; i < in->dims.rank(); ++i) {
      if (range.min[i] < 0 || range.opt[i] < 0 || range.max[i] < 0)
        return invalid_argument(who, ": the optimization profile of '", name, "' leaves dim ", i,
                                " unknown; give every dim's size");
      if (range.min[i] > range.opt[i] || range.opt[i] > range.max[i])
        return invalid_argument(who, ": the optimization profile of '", name,
                                "' must satisfy min <= opt <= max in dim ", i, " but has ", range.min[i], ", ",
                                range.opt[i], ", ", range.max[i]);
      if (in->dims[i] >= 0 && (range.min[i] != in->dims[i] || range.max[i] != in->dims[i]))
        return invalid_argument(who, ": the optimization profile of '", name, "' gives dim ", i, " the range [",
                                range.min[i], ", ", range.max[i], "] but the input fixes it to ", in->dims[i],
                                " (shape ", in->dims.to_string(), ")");
    }
  }
  return Status::ok();
}

Status check_profile_shape(std::string_view input, const Dims& allowed, const ShapeRange* range, const Dims& dims) {
  const std::string accepts = range ? str_cat(allowed.to_string(), " within its profile ", range->min.to_string(),
                                              " to ", range->max.to_string())
                                    : str_cat(allowed.to_string(), " (? is any size)");
  if (dims.rank() != allowed.rank())
    return invalid_argument("input '", input, "' takes rank ", allowed.rank(), " shapes ", accepts, ", not ",
                            dims.to_string());
  for (int i = 0; i < dims.rank(); ++i) {
    if (dims[i] < 0)
      return invalid_argument("input '", input, "': shape ", dims.to_string(), " has an unknown dim ", i,
                              "; give every dim's size (the input accepts ", accepts, ")");
    if (allowed[i] >= 0 && dims[i] != allowed[i])
      return invalid_argument("input '", input, "': dim ", i, " of ", dims.to_string(), " must be ", allowed[i],
                              " (the input accepts ", accepts, ")");
    if (range && (dims[i] < range->min[i] || dims[i] > range->max[i]))
      return invalid_argument("input '", input, "': dim ", i, " of ", dims.to_string(), " is outside [", range->min[i],
                              ", ", range->max[i], "] (the input accepts ", accepts,
                              "; rebuild with a wider optimization profile for more)");
  }
  return Status::ok();
}

Result<ShapeRanges> engine_profiles(const EngineHeader& header) {
  auto it = header.extra.find(kProfilesHeaderKey);
  if (it == header.extra.end()) return ShapeRanges{};
  return profiles_from_json(it->second);
}

}  // namespace kiln
