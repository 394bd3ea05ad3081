// kiln_onnx_conformance: runs the ONNX backend test suite (Debian's libonnx-testdata) through
// import -> build -> run on the CPU and compares with the expected outputs.
//   kiln_onnx_conformance [--data DIR] [--filter SUBSTR] [--write docs/onnx-conformance.md]
//                         [--floor tests/onnx/floor.txt] [-v]
// The last line printed is: conformance: node P/T pytorch-converted P/T pytorch-operator P/T simple P/T
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <unistd.h>

#include "builder/builder.h"
#include "core/cuda_runtime.h"
#include "kiln/logger.h"
#include "onnx/exporter.h"
#include "onnx/importer.h"
#include "onnx/tensor_proto.h"
#include "runtime/engine.h"

// After onnx_pb.h (through tensor_proto.h), which defines ONNX_API.
#include <onnx/onnx-data.pb.h>

namespace fs = std::filesystem;
using namespace kiln;

namespace {

const std::vector<std::string> kCategories = {"node", "pytorch-converted", "pytorch-operator", "simple"};

enum class Outcome { kPass, kFail, kUnsupported };

struct TestResult {
  std::string category, name;
  Outcome outcome;
  std::string reason;
  int host_nodes = 0;  ///< nodes of a CUDA engine that ran on the host (no CUDA kernel took them)
};

// Reads a test tensor; numpy has no bfloat16, so the suite stores bfloat16 data as UINT16 bits.
Result<Tensor> read_tensor(const fs::path& file, DataType expected) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  onnx::TensorProto proto;
  if (!proto.ParseFromString(buf.str()))
    return unsupported("test data ", file.filename().string(), " is not a tensor (a sequence, map or optional)");
  if (expected == DataType::kBFloat16 && proto.data_type() == onnx::TensorProto::UINT16)
    proto.set_data_type(onnx::TensorProto::BFLOAT16);
  return onnx_import::tensor_from_proto(proto, file.parent_path().string(), file.filename().string());
}

Result<Tensor> tensor_of(onnx::TensorProto proto, const fs::path& file, DataType expected) {
  if (expected == DataType::kBFloat16 && proto.data_type() == onnx::TensorProto::UINT16)
    proto.set_data_type(onnx::TensorProto::BFLOAT16);
  return onnx_import::tensor_from_proto(proto, file.parent_path().string(), file.filename().string());
}

// Reads a test value of the kind `v` has: a tensor, a sequence (SequenceProto) or an optional (OptionalProto).
Result<RuntimeValue> read_value(const fs::path& file, const Value& v) {
  if (v.kind == ValueKind::kTensor) {
    KILN_ASSIGN_OR_RETURN(Tensor t, read_tensor(file, v.dtype));
    return RuntimeValue::of(t);
  }
  std::ifstream in(file, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  RuntimeValue out;
  out.kind = v.kind;
  auto read_seq = [&](const onnx::SequenceProto& seq) -> Status {
    for (const auto& t : seq.tensor_values()) {
      KILN_ASSIGN_OR_RETURN(Tensor x, tensor_of(t, file, v.dtype));
      out.items.push_back(x);
    }
    return Status::ok();
  };
  if (v.kind == ValueKind::kSequence) {
    onnx::SequenceProto seq;
    if (!seq.ParseFromString(buf.str()))
      return unsupported("test data ", file.filename().string(), " is not a sequence");
    KILN_RETURN_IF_ERROR(read_seq(seq));
    return out;
  }
  onnx::OptionalProto opt;
  if (!opt.ParseFromString(buf.str()))
    return unsupported("test data ", file.filename().string(), " is not an optional");
  if (v.kind == ValueKind::kOptionalSequence && opt.has_tensor_value() && !opt.has_sequence_value()) {
    // A SequenceProto (its tensors read as an optional's tensor field): the model declares a sequence where
    // kiln infers an optional one (a Loop carrying an optional the body fills).
    onnx::SequenceProto seq;
    if (!seq.ParseFromString(buf.str()))
      return unsupported("test data ", file.filename().string(), " is neither an optional nor a sequence");
    out.present = true;
    KILN_RETURN_IF_ERROR(read_seq(seq));
    return out;
  }
  out.present = opt.has_tensor_value() || opt.has_sequence_value();
  if (opt.has_tensor_value()) {
    KILN_ASSIGN_OR_RETURN(out.tensor, tensor_of(opt.tensor_value(), file, v.dtype));
  }
  if (opt.has_sequence_value()) {
    KILN_RETURN_IF_ERROR(read_seq(opt.sequence_value()));
  }
  return out;
}

std::string first_line(const std::string& s) {
  std::string line = s.substr(0, s.find('\n'));
  if (s.find('\n') != std::string::npos) {
    // Keep the first problem line of a multi-line report.
    const auto second = s.find('\n');
    const auto third = s.find('\n', second + 1);
    line += " |" + s.substr(second + 1, third == std::string::npos ? std::string::npos : third - second - 1);
  }
  return line.size() > 300 ? line.substr(0, 300) + "..." : line;
}

// --range-relative: an element may also differ by rtol times the largest magnitude of its expected output (box
// coordinates near 0 in a 320-pixel image are compared at the image's scale, as ONNX Runtime vs PyTorch needs too).
bool g_range_relative = false;
bool g_optimize = true;             // the graph optimizer (every pass) runs in the builder
Backend g_backend = Backend::kCpu;  // --device: where the engines run (CUDA: float32 layers, no TF32)

std::string compare(const Tensor& got, const Tensor& want, double rtol, double atol) {
  if (got.dims() != want.dims())
    return str_cat("shape ", got.dims().to_string(), " != expected ", want.dims().to_string());
  if (is_floating(got.dtype()) != is_floating(want.dtype()) && got.dtype() != want.dtype())
    return str_cat("type ", dtype_name(got.dtype()), " != expected ", dtype_name(want.dtype()));
  const int64_t n = want.numel();
  if (g_range_relative)
    for (int64_t i = 0; i < n; ++i)
      if (std::isfinite(want.at(i))) atol = std::max(atol, rtol * std::fabs(want.at(i)));
  for (int64_t i = 0; i < n; ++i) {
    const double a = got.at(i), b = want.at(i);
    if (std::isnan(b) && std::isnan(a)) continue;
    if (std::isinf(b) && a == b) continue;
    if (!(std::fabs(a - b) <= atol + rtol * std::fabs(b)))
      return str_cat("element ", i, " is ", a, ", expected ", b, " (", n, " elements)");
  }
  return {};
}

// Saved and mapped back, as `kiln exec --saveEngine` then `--loadEngine` do: the constants are then read-only
// memory in the mapping, so a kernel that wrote into its inputs would fault here.
Result<std::shared_ptr<const EngineImpl>> load_mapped(const std::string& bytes) {
  const fs::path path = fs::temp_directory_path() / str_cat("kiln_conformance_", ::getpid(), ".kengine");
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) return Status(StatusCode::kIoError, str_cat("cannot write '", path.string(), "'"));
  }
  auto engine = EngineImpl::load_file(path.string());
  fs::remove(path);  // the mapping outlives the name
  return engine;
}

// Builds and runs an imported model on every data set of the test; fills r's outcome and reason.
void run_model(const onnx_import::ImportedModel& model, const fs::path& dir, TestResult& r) {
  r.outcome = Outcome::kFail;
  BuildOptions options;
  options.passes.enabled = g_optimize;
  options.backend = g_backend;
  BuildReport report;
  auto engine_bytes = build_engine(*model.graph, options, &report);
  r.host_nodes = report.host_fallbacks;
  if (!engine_bytes) {
    r.outcome = Outcome::kUnsupported;
    r.reason = "build: " + first_line(engine_bytes.status().message());
    return;
  }
  auto engine = load_mapped(*engine_bytes);
  if (!engine) {
    r.reason = "engine: " + first_line(engine.status().message());
    return;
  }
  std::vector<fs::path> sets;
  for (auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set", 0) == 0) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) {
    r.reason = "no test data";
    return;
  }
  for (const fs::path& set : sets) {
    auto ctx = (*engine)->create_execution_context();
    if (!ctx) {
      r.reason = "context: " + first_line(ctx.status().message());
      return;
    }
    for (size_t i = 0; i < model.input_names.size(); ++i) {
      const fs::path file = set / str_cat("input_", i, ".pb");
      if (!fs::exists(file)) continue;
      auto t = read_value(file, *model.graph->inputs()[i]);
      if (!t) {
        r.outcome = Outcome::kUnsupported;
        r.reason = "input: " + first_line(t.status().message());
        return;
      }
      Status s = (*ctx)->set_input_value(model.input_names[i], *t);
      if (!s.is_ok()) {
        r.reason = "input: " + first_line(s.message());
        return;
      }
    }
    Status s = (*ctx)->execute();
    if (!s.is_ok()) {
      r.outcome = s.code() == StatusCode::kUnsupported ? Outcome::kUnsupported : Outcome::kFail;
      r.reason = "run: " + first_line(s.to_string());
      return;
    }
    for (size_t i = 0; i < model.output_names.size(); ++i) {
      auto want = read_value(set / str_cat("output_", i, ".pb"), *model.graph->outputs()[i]);
      if (!want) {
        r.outcome = Outcome::kUnsupported;
        r.reason = "expected output: " + first_line(want.status().message());
        return;
      }
      auto got = (*ctx)->output_value(model.output_names[i]);
      if (!got) {
        r.reason = "output: " + first_line(got.status().message());
        return;
      }
      std::string diff;
      if (got->present != want->present || got->items.size() != want->items.size())
        diff = str_cat("holds ", got->present ? got->items.size() : 0, " elements, expected ",
                       want->present ? want->items.size() : 0, want->present ? "" : " (empty optional)");
      for (size_t k = 0; diff.empty() && k < want->items.size(); ++k) {
        diff = compare(got->items[k], want->items[k], 1e-3, 1e-7);
        if (!diff.empty()) diff = str_cat("element ", k, ": ", diff);
      }
      if (diff.empty() && want->present && want->tensor.defined())
        diff = compare(got->tensor, want->tensor, 1e-3, 1e-7);
      if (!diff.empty()) {
        r.reason = str_cat("output '", model.output_names[i], "': ", diff);
        return;
      }
    }
  }
  r.outcome = Outcome::kPass;
}

TestResult run_test(const std::string& category, const fs::path& dir, bool roundtrip, TestResult* exported) {
  TestResult r{category, dir.filename().string(), Outcome::kFail, {}};
  auto model = onnx_import::import_file((dir / "model.onnx").string());
  if (!model) {
    r.outcome = model.status().code() == StatusCode::kUnsupported ? Outcome::kUnsupported : Outcome::kFail;
    r.reason = "import: " + first_line(model.status().message());
    return r;
  }
  run_model(*model, dir, r);
  if (r.outcome != Outcome::kPass || !roundtrip) return r;
  // import -> export -> import must give the same outputs.
  *exported = {category, r.name, Outcome::kFail, {}};
  auto bytes = onnx_export::export_model(*model->graph, r.name);
  if (!bytes) {
    exported->outcome = Outcome::kUnsupported;
    exported->reason = "export: " + first_line(bytes.status().message());
    return r;
  }
  auto again = onnx_import::import_bytes(*bytes, dir.string(), r.name + " (exported)");
  if (!again) {
    exported->reason = "re-import: " + first_line(again.status().message());
    return r;
  }
  run_model(*again, dir, *exported);
  return r;
}

// tests/onnx/known-failures.txt: test-name prefix -> why it does not pass.
std::vector<std::pair<std::string, std::string>> known_failures(const fs::path& file) {
  std::vector<std::pair<std::string, std::string>> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    const auto tab = line.find('\t');
    if (line.empty() || line[0] == '#' || tab == std::string::npos) continue;
    out.emplace_back(line.substr(0, tab), line.substr(tab + 1));
  }
  return out;
}

std::string outcome_name(Outcome o) {
  return o == Outcome::kPass ? "pass" : o == Outcome::kFail ? "fail" : "unsupported";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kiln ONNX backend-test conformance"};
  std::string data = "/usr/share/libonnx-testdata/data", filter, write_path, floor_path;
  bool verbose = false;
  app.add_option("--data", data, "the suite's data folder");
  app.add_option("--filter", filter, "only tests whose name contains this");
  app.add_option("--write", write_path, "write the report (markdown) here");
  app.add_option("--floor", floor_path, "fail when a category passes fewer tests than this file's floor");
  app.add_flag("-v,--verbose", verbose, "print every test");
  std::vector<std::string> categories = kCategories;
  std::string known_path;
  app.add_option("--known-failures", known_path, "a file of test-name prefixes and why those tests do not pass");
  bool strict = false;
  app.add_flag("--strict", strict, "exit non-zero unless every test passes");
  app.add_flag("--range-relative", g_range_relative,
               "compare each output within rtol of its largest magnitude, not only of each element");
  app.add_flag(
      "--no-optimizer", [](int64_t) { g_optimize = false; }, "build without the graph optimizer");
  bool check_optimizer = false;
  app.add_flag("--check-optimizer", check_optimizer,
               "rerun each test that fails with the optimizer without it; fail if any of those passes then");
  app.add_option("--category", categories, "the data folder's subfolders to run (default: the suite's four)");
  std::string device = "cpu";
  app.add_option("--device", device,
                 "cpu, or cuda: engines built for the GPU (float32, no TF32; nodes without a CUDA kernel run on the "
                 "host)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  CLI11_PARSE(app, argc, argv);
  if (device == "cuda") {
    if (!cuda::gpu_available()) {
      std::printf("conformance: --device cuda needs a GPU: %s\n", cuda::query_runtime().problem.c_str());
      return 1;
    }
    g_backend = Backend::kCuda;
  }
  Logger::global().set_level(Severity::kError);
  if (!fs::is_directory(data)) {
    std::printf("conformance: %s not found; install libonnx-testdata (scripts/install-deps)\n", data.c_str());
    return 1;
  }
  std::vector<TestResult> results, roundtrip_failures, optimizer_regressions;
  int roundtrip_pass = 0, roundtrip_total = 0;
  std::map<std::string, std::pair<int, int>> counts;
  for (const std::string& cat : categories) {
    const fs::path dir = fs::path(data) / cat;
    counts[cat] = {0, 0};
    if (!fs::is_directory(dir)) continue;
    std::vector<fs::path> tests;
    for (auto& e : fs::directory_iterator(dir))
      if (e.is_directory()) tests.push_back(e.path());
    std::sort(tests.begin(), tests.end());
    for (const fs::path& t : tests) {
      if (!filter.empty() && t.filename().string().find(filter) == std::string::npos) continue;
      TestResult exported{};
      TestResult r = run_test(cat, t, true, &exported);
      if (check_optimizer && g_optimize && r.outcome != Outcome::kPass) {
        g_optimize = false;
        TestResult plain = run_test(cat, t, false, nullptr);
        g_optimize = true;
        if (plain.outcome == Outcome::kPass) optimizer_regressions.push_back(r);
      }
      counts[cat].second++;
      if (r.outcome == Outcome::kPass) {
        counts[cat].first++;
        ++roundtrip_total;
        if (exported.outcome == Outcome::kPass)
          ++roundtrip_pass;
        else
          roundtrip_failures.push_back(exported);
      }
      if (verbose)
        std::printf("%-12s %-18s %s %s%s\n", outcome_name(r.outcome).c_str(), cat.c_str(), r.name.c_str(),
                    r.reason.c_str(),
                    r.host_nodes > 0 ? str_cat(" (", r.host_nodes, " nodes on the host)").c_str() : "");
      results.push_back(std::move(r));
    }
  }
  int host_tests = 0, host_nodes = 0;
  for (const TestResult& r : results)
    if (r.outcome == Outcome::kPass && r.host_nodes > 0) {
      ++host_tests;
      host_nodes += r.host_nodes;
    }
  std::string line = "conformance:";
  for (const std::string& cat : categories) line += str_cat(" ", cat, " ", counts[cat].first, "/", counts[cat].second);

  if (!write_path.empty()) {
    std::ofstream md(write_path);
    md << "# ONNX backend test suite conformance" << (g_backend == Backend::kCuda ? " on CUDA" : "")
       << "\n\nGenerated by `make " << (g_backend == Backend::kCuda ? "conformance-cuda" : "conformance")
       << "` (tests/onnx/conformance.cpp) from Debian's "
          "`libonnx-testdata`: every model is imported, built (with the graph optimizer, every pass on) and run on the "
       << (g_backend == Backend::kCuda ? "CUDA backend (float32 layers, no TF32; nodes without a CUDA kernel run on "
                                         "the host)"
                                       : "CPU backend")
       << " and compared with the "
          "expected outputs (rtol 1e-3, atol 1e-7). kiln computes float64 tensors in float32.\n\n";
    md << "| category | passed | failed | unsupported | total |\n|---|---|---|---|---|\n";
    for (const std::string& cat : categories) {
      int fail = 0, unsup = 0;
      for (auto& r : results) {
        if (r.category != cat) continue;
        if (r.outcome == Outcome::kFail) ++fail;
        if (r.outcome == Outcome::kUnsupported) ++unsup;
      }
      md << "| " << cat << " | " << counts[cat].first << " | " << fail << " | " << unsup << " | " << counts[cat].second
         << " |\n";
    }
    md << "\n" << line << "\n\n";
    if (g_backend == Backend::kCuda && host_tests == 0) {
      md << "Every node of the passing tests ran on the GPU (none fell back to the host).\n\n";
    } else if (g_backend == Backend::kCuda) {
      md << "Of the passing tests, " << host_tests << " ran " << host_nodes
         << " nodes on the host (no CUDA kernel takes them):";
      for (const TestResult& r : results)
        if (r.outcome == Outcome::kPass && r.host_nodes > 0) md << " " << r.name << " (" << r.host_nodes << ")";
      md << ".\n\n";
    }
    md << "Round trip (import -> export -> import -> run) of the passing models: " << roundtrip_pass << "/"
       << roundtrip_total << ".\n";
    for (auto& r : roundtrip_failures)
      md << "- round trip of " << r.category << "/" << r.name << ": " << r.reason << "\n";
    const auto why = known_failures(known_path);
    md << "\n## Tests that do not pass\n\nWhy (from tests/onnx/known-failures.txt) and what kiln reports:\n\n"
       << "| category | test | outcome | why | reason |\n|---|---|---|---|---|\n";
    for (auto& r : results) {
      if (r.outcome == Outcome::kPass) continue;
      std::string reason = r.reason;
      std::replace(reason.begin(), reason.end(), '|', '/');
      std::string known = "?";
      size_t best = 0;
      for (const auto& [prefix, text] : why)
        if (r.name.rfind(prefix, 0) == 0 && prefix.size() > best) {
          best = prefix.size();
          known = text;
        }
      md << "| " << r.category << " | " << r.name << " | " << outcome_name(r.outcome) << " | " << known << " | "
         << reason << " |\n";
    }
  }
  std::printf("round trip (import -> export -> import) of the passing models: %d/%d\n", roundtrip_pass,
              roundtrip_total);
  if (verbose)
    for (auto& r : roundtrip_failures)
      std::printf("roundtrip %s %s: %s\n", r.category.c_str(), r.name.c_str(), r.reason.c_str());
  int rc = 0;
  if (!floor_path.empty()) {
    std::ifstream in(floor_path);
    std::string cat;
    int floor = 0;
    while (in >> cat >> floor) {
      if (counts[cat].first < floor) {
        std::printf("conformance: %s passes %d, below the committed floor of %d\n", cat.c_str(), counts[cat].first,
                    floor);
        rc = 1;
      }
    }
  }
  for (auto& r : optimizer_regressions) {
    std::printf("conformance: %s/%s passes without the optimizer and not with it: %s\n", r.category.c_str(),
                r.name.c_str(), r.reason.c_str());
    rc = 1;
  }
  if (check_optimizer && g_optimize)
    std::printf("optimizer check: %zu tests pass only without the optimizer\n", optimizer_regressions.size());
  if (g_backend == Backend::kCuda)
    std::printf("passing tests with nodes on the host (no CUDA kernel): %d (%d nodes)\n", host_tests, host_nodes);
  std::printf("%s%s%s\n", line.c_str(), g_optimize ? "" : " (without the optimizer)",
              g_backend == Backend::kCuda ? " on CUDA" : "");
  if (strict)
    for (auto& r : results)
      if (r.outcome != Outcome::kPass) {
        std::printf("conformance: %s/%s does not pass: %s\n", r.category.c_str(), r.name.c_str(), r.reason.c_str());
        rc = 1;
      }
  return rc;
}
