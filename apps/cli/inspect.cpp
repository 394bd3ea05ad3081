#include "inspect.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "builder/builder.h"
#include "core/mapped_file.h"
#include "graph/engine_format.h"
#include "onnx/importer.h"
#include "runtime/engine.h"

namespace kiln::cli {
namespace {

int fail(const Status& s) {
  std::fprintf(stderr, "kiln: error: %s\n", s.to_string().c_str());
  return 1;
}

bool is_engine_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  in.read(magic, 8);
  return looks_like_engine(std::string_view(magic, static_cast<size_t>(in.gcount())));
}

int inspect_engine(const InspectOptions& opt) {
  auto file = MappedFile::open(opt.path, "engine");
  if (!file) return fail(file.status());
  // The header first, so that an engine this machine cannot run still shows what it was built for.
  auto header = read_engine_header((*file)->bytes());
  if (!header) return fail(std::move(header.take_status()).with_prefix(opt.path));
  const EngineHeader& h = *header;
  std::printf("engine %s\n  format %d, kiln %s\n  device %s", opt.path.c_str(), h.format_version,
              h.kiln_version.c_str(), h.device.c_str());
  if (!h.compute_capability.empty()) std::printf(", compute capability %s", h.compute_capability.c_str());
  if (!h.cpu_isa.empty()) std::printf(", CPU ISA %s", h.cpu_isa.c_str());
  std::printf("\n  build flags: %s\n", h.build_flags.c_str());
  for (const auto& [key, value] : h.extra) std::printf("  %s: %s\n", key.c_str(), value.c_str());
  std::printf("  size: %llu bytes (header %llu, body %llu at offset %llu)\n",
              static_cast<unsigned long long>(h.file_bytes), static_cast<unsigned long long>(h.header_bytes),
              static_cast<unsigned long long>(h.body_bytes), static_cast<unsigned long long>(h.body_offset));
  for (const auto& [name, s] : h.sections)
    std::printf("  section %s: %llu bytes at body offset %llu\n", name.c_str(),
                static_cast<unsigned long long>(s.bytes), static_cast<unsigned long long>(s.offset));
  auto container = read_engine_container((*file)->bytes());  // lengths and the body's checksum
  if (!container) return fail(std::move(container.take_status()).with_prefix(opt.path));
  std::printf("  checksum: ok (CRC-32 %08x)\n", h.body_crc);
  const auto load_start = std::chrono::steady_clock::now();
  auto engine = EngineImpl::deserialize((*file)->bytes(), *file);
  if (!engine) return fail(std::move(engine.take_status()).with_prefix(opt.path));
  std::printf("  loaded (mapped) in %.2f ms\n",
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count());
  std::printf("%s", (*engine)->inspect().c_str());
  return 0;
}

// "8GiB", "512 MiB", "1.5G", "4096" (bytes).
Result<uint64_t> parse_size(const std::string& text, const char* flag) {
  size_t end = 0;
  double v = 0;
  try {
    v = std::stod(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  std::string unit = text.substr(end);
  unit.erase(std::remove(unit.begin(), unit.end(), ' '), unit.end());
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::tolower(c); });
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  for (const auto& [names, s] : {std::pair{"k kb kib", 1024.0},
                                 {"m mb mib", 1048576.0},
                                 {"g gb gib", 1073741824.0},
                                 {"t tb tib", 1099511627776.0}}) {
    std::istringstream words(names);
    for (std::string w; words >> w;)
      if (unit == w) scale = s;
  }
  if (end == 0 || scale == 0 || !(v > 0) || v * scale > 1.8e19)
    return invalid_argument(flag, " '", text, "' is not a size; give bytes or a number with KiB, MiB, GiB or TiB");
  return static_cast<uint64_t>(v * scale);
}

}  // namespace

int run_inspect(const InspectOptions& opt) {
  if (is_engine_file(opt.path)) return inspect_engine(opt);
  onnx_import::ImportOptions import_opt;
  import_opt.external_data_root = opt.external_data_root;
  import_opt.fold_work_limit = opt.fold_work_limit;
  import_opt.fold_work_total = opt.fold_work_total;
  if (!opt.max_import_memory.empty()) {
    auto v = parse_size(opt.max_import_memory, "--max-import-memory");
    if (!v) return fail(v.status());
    import_opt.memory_budget = *v;
  }
  if (!opt.large_tensor_warning.empty()) {
    auto v = parse_size(opt.large_tensor_warning, "--large-tensor-warning");
    if (!v) return fail(v.status());
    import_opt.large_tensor_bytes = *v;
  }
  auto model = onnx_import::import_file(opt.path, import_opt);
  if (!model) return fail(model.status());
  const Graph& g = *model->graph;
  std::printf("model %s\n  ir_version %lld, opsets:", opt.path.c_str(), static_cast<long long>(model->ir_version));
  for (auto& [domain, version] : model->opsets)
    std::printf(" %s%lld", domain.empty() ? "ai.onnx:" : (domain + ":").c_str(), static_cast<long long>(version));
  std::printf("\n  %zu nodes, %zu inputs, %zu outputs\n", g.nodes().size(), g.inputs().size(), g.outputs().size());
  for (Value* v : g.inputs()) std::printf("  input  %s\n", v->to_string().c_str());
  for (Value* v : g.outputs()) std::printf("  output %s\n", v->to_string().c_str());
  for (auto& w : model->warnings) std::printf("  warning: %s\n", w.c_str());
  if (opt.show_graph) std::printf("%s", g.to_text().c_str());
  if (opt.build) {
    BuildReport report;
    auto engine = build_engine(g, BuildOptions{}, &report);
    if (!engine) return fail(engine.status());
    std::printf("  optimizer: %zu -> %zu layers\n", report.optimizer.nodes_before, report.optimizer.nodes_after);
    for (auto& a : report.optimizer.applied) std::printf("    %s\n", a.c_str());
    for (auto& r : report.optimizer.refused) std::printf("    not %s\n", r.c_str());
    for (auto& c : report.choices) std::printf("  %s\n", c.c_str());
  }
  return 0;
}

}  // namespace kiln::cli
