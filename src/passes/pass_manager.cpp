#include "passes/pass_manager.h"

#include <chrono>
#include <filesystem>
#include <fstream>

#include "kiln/logger.h"
#include "passes/passes.h"

namespace kiln {

void PassContext::applied(std::string what) {
  log_info("optimizer: ", pass_, ": ", what);
  applied_.push_back(std::move(what));
}

void PassContext::refused(std::string what) {
  log_verbose("optimizer: ", pass_, ": not ", what);
  refused_.push_back(std::move(what));
}

const std::vector<Pass>& optimizer_passes() {
  static const std::vector<Pass> kPasses = all_optimizer_passes();
  return kPasses;
}

namespace {

Status dump(const Graph& graph, const std::string& dir, int index, const std::string& what) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  char prefix[8];
  std::snprintf(prefix, sizeof prefix, "%02d-", index);
  const std::string path = (std::filesystem::path(dir) / (prefix + what + ".txt")).string();
  std::ofstream out(path);
  out << graph.to_text();
  if (!out) return invalid_argument("cannot write the graph dump '", path, "': check the folder given to --dump-graph");
  return Status::ok();
}

}  // namespace

Status run_passes(Graph& graph, const PassOptions& options, OptimizerReport* report) {
  OptimizerReport local;
  OptimizerReport& rep = report ? *report : local;
  const auto& passes = optimizer_passes();
  for (const std::string& name : options.disabled) {
    bool known = false;
    for (const Pass& p : passes) known = known || p.name == name;
    if (!known) {
      std::string names;
      for (const Pass& p : passes) names += (names.empty() ? "" : ", ") + p.name;
      return invalid_argument("there is no optimizer pass '", name, "' to disable; the passes are: ", names);
    }
  }
  rep.nodes_before = graph.nodes().size();
  int dumped = 0;
  if (!options.dump_dir.empty()) KILN_RETURN_IF_ERROR(dump(graph, options.dump_dir, dumped++, "input"));
  if (options.enabled) {
    for (const Pass& p : passes) {
      if (options.disabled.count(p.name)) {
        log_verbose("optimizer: ", p.name, ": disabled");
        continue;
      }
      PassContext ctx(graph, options.backend, p.name, options.precision, options.layout);
      const auto t0 = std::chrono::steady_clock::now();
      Status st = p.run(ctx);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (!st.is_ok()) return Status(st.code(), str_cat("optimizer pass '", p.name, "': ", st.message()));
      for (const std::string& s : ctx.changes()) rep.applied.push_back(p.name + ": " + s);
      for (const std::string& s : ctx.refusals()) rep.refused.push_back(p.name + ": " + s);
      rep.passes.push_back({p.name, static_cast<int>(ctx.changes().size()), ms, graph.nodes().size()});
      if (ctx.changes().empty()) continue;
      if (Status v = graph.verify(); !v.is_ok())
        return internal_error("optimizer pass '", p.name, "' left an invalid graph (run with --disable-pass ", p.name,
                              " to go on without it): ", v.message());
      if (!options.dump_dir.empty()) KILN_RETURN_IF_ERROR(dump(graph, options.dump_dir, dumped++, p.name));
    }
  }
  rep.nodes_after = graph.nodes().size();
  return Status::ok();
}

}  // namespace kiln
