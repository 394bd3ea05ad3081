// DistConfig from the launcher's environment variables.
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <initializer_list>

#include "train/dist/dist.h"

namespace kiln::train {
namespace {

struct Var {
  std::string name, value;
};

std::optional<Var> first_set(const EnvLookup& lookup, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    std::optional<std::string> value = lookup(name);
    if (value && !value->empty()) return Var{name, *value};
  }
  return std::nullopt;
}

std::string shown(const Var& v) {
  std::string text = v.value.size() > 64 ? v.value.substr(0, 64) + "..." : v.value;
  return str_cat(v.name, "='", text, "'");
}

Result<int> parse_int(const Var& v, long long lo, long long hi, std::string_view expected) {
  long long x = 0;
  const char* begin = v.value.data();
  const char* end = begin + v.value.size();
  auto [ptr, ec] = std::from_chars(begin, end, x);
  if (ec != std::errc() || ptr != end || x < lo || x > hi)
    return invalid_argument(shown(v), " is not valid: expected ", expected);
  return static_cast<int>(x);
}

// The variable of `kiln` (explicit), else the generic launcher's, else Open MPI's; the generic and Open MPI's
// disagreeing is an error (two launchers' variables in one environment).
Result<std::optional<Var>> pick(const EnvLookup& lookup, const char* kiln, const char* generic, const char* ompi) {
  if (auto v = first_set(lookup, {kiln})) return std::optional<Var>(*v);
  std::optional<Var> g = first_set(lookup, {generic});
  std::optional<Var> o = first_set(lookup, {ompi});
  if (g && o && g->value != o->value)
    return invalid_argument(shown(*g), " but ", shown(*o), ": the environment holds two launchers' settings; unset ",
                            generic, " under mpirun, or set ", kiln, " to choose");
  return g ? g : o;
}

}  // namespace

Result<DistConfig> dist_config_from_env(const EnvLookup& lookup) {
  DistConfig config;
  KILN_ASSIGN_OR_RETURN(std::optional<Var> rank_var, pick(lookup, "KILN_RANK", "RANK", "OMPI_COMM_WORLD_RANK"));
  KILN_ASSIGN_OR_RETURN(std::optional<Var> size_var,
                        pick(lookup, "KILN_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"));
  if (!rank_var && !size_var) return config;
  if (!size_var)
    return invalid_argument(shown(*rank_var), " is set but the world size is not: set WORLD_SIZE (or KILN_WORLD_SIZE)",
                            " to the number of processes in the job");
  KILN_ASSIGN_OR_RETURN(config.world_size,
                        parse_int(*size_var, 1, 1 << 20, "the number of processes in the job, a whole number >= 1"));
  if (rank_var) {
    KILN_ASSIGN_OR_RETURN(config.rank,
                          parse_int(*rank_var, 0, config.world_size - 1,
                                    str_cat("this process's rank, a whole number from 0 to ", config.world_size - 1,
                                            " (the world size is ", config.world_size, ")")));
  } else if (config.world_size > 1) {
    return invalid_argument(shown(*size_var), " is set but the rank is not: set RANK (or KILN_RANK) to 0..",
                            config.world_size - 1, " in each process");
  }
  config.local_rank = config.rank;
  if (auto v = first_set(lookup, {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"})) {
    KILN_ASSIGN_OR_RETURN(config.local_rank,
                          parse_int(*v, 0, config.world_size - 1,
                                    str_cat("the rank within this node (the GPU index), a whole number from 0 to ",
                                            config.world_size - 1)));
  }
  if (auto v = first_set(lookup, {"MASTER_ADDR"})) {
    bool ok = v->value.size() <= 253;
    for (char c : v->value) ok = ok && c > ' ' && c < 127;
    if (!ok) return invalid_argument(shown(*v), " is not valid: expected rank 0's host name or IPv4 address");
    config.master_addr = v->value;
  }
  if (auto v = first_set(lookup, {"MASTER_PORT"})) {
    KILN_ASSIGN_OR_RETURN(config.master_port,
                          parse_int(*v, 1, 65535, "the TCP port rank 0 listens on, a whole number from 1 to 65535"));
  }
  if (auto v = first_set(lookup, {"KILN_DIST_TIMEOUT"})) {
    char* end = nullptr;
    const double seconds = std::strtod(v->value.c_str(), &end);
    if (end != v->value.c_str() + v->value.size() || !std::isfinite(seconds) || seconds <= 0 || seconds > 1e6)
      return invalid_argument(shown(*v), " is not valid: expected seconds, a number > 0 (e.g. 300)");
    config.timeout_seconds = seconds;
  }
  return config;
}

Result<DistConfig> dist_config_from_env() {
  return dist_config_from_env([](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (!value) return std::nullopt;
    return std::string(value);
  });
}

}  // namespace kiln::train
