#include "exec_profiles.h"

#include <map>
#include <optional>
#include <sstream>
#include <tuple>

#include "run_inputs.h"

namespace kiln::cli {

std::vector<std::string> split_shape_list(const std::vector<std::string>& flags) {
  std::vector<std::string> out;
  for (const std::string& flag : flags) {
    std::stringstream parts(flag);
    for (std::string item; std::getline(parts, item, ',');)
      if (!item.empty()) out.push_back(item);
  }
  return out;
}

Result<ShapeRanges> parse_profiles(const Graph& g, const std::vector<std::string>& min,
                                   const std::vector<std::string>& opt, const std::vector<std::string>& max) {
  struct Given {
    std::optional<Dims> min, opt, max;
  };
  std::map<std::string, Given> given;
  for (auto [flag, list, slot] :
       {std::tuple{"--minShapes", &min, &Given::min}, std::tuple{"--optShapes", &opt, &Given::opt},
        std::tuple{"--maxShapes", &max, &Given::max}}) {
    for (const std::string& item : split_shape_list(*list)) {
      KILN_ASSIGN_OR_RETURN(auto parsed, parse_shape(item, flag));
      KILN_ASSIGN_OR_RETURN(Dims dims, Dims::from(parsed.second));
      std::optional<Dims>& dst = given[parsed.first].*slot;
      if (dst) return invalid_argument(flag, " gives input '", parsed.first, "' twice");
      dst = dims;
    }
  }
  ShapeRanges profiles;
  for (const auto& [name, g3] : given) {
    if (!g3.min || !g3.opt || !g3.max)
      return invalid_argument("input '", name, "' needs all of --minShapes, --optShapes and --maxShapes (",
                              g3.min ? "" : "--minShapes ", g3.opt ? "" : "--optShapes ", g3.max ? "" : "--maxShapes ",
                              "missing)");
    profiles.emplace(name, ShapeRange{*g3.min, *g3.opt, *g3.max});
  }
  KILN_RETURN_IF_ERROR(check_profiles(g, profiles, "--minShapes/--optShapes/--maxShapes"));
  return profiles;
}

}  // namespace kiln::cli
