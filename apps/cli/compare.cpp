#include "compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "builder/builder.h"
#include "onnx/importer.h"
#include "run_inputs.h"
#include "runtime/engine.h"

namespace kiln::cli {
namespace {

int fail(const Status& s) {
  std::fprintf(stderr, "kiln: error: %s\n", s.to_string().c_str());
  return 1;
}

struct Errors {
  double max_abs = 0, max_rel = 0;
  int64_t beyond = 0;    ///< elements outside atol + rtol * |expected|
  std::string mismatch;  ///< a shape or type mismatch, when there is one
};

Errors compare(const Tensor& got, const Tensor& want, double rtol, double atol) {
  Errors e;
  if (got.dims() != want.dims()) {
    e.mismatch = str_cat("shape ", got.dims().to_string(), " vs ", want.dims().to_string());
    return e;
  }
  const bool strings = want.dtype() == DataType::kString;
  if ((got.dtype() == DataType::kString) != strings) {
    e.mismatch = str_cat("type ", dtype_name(got.dtype()), " vs ", dtype_name(want.dtype()));
    return e;
  }
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double a = got.at(i), b = want.at(i);  // strings: interned ids, equal when the texts are
    if ((std::isnan(a) && std::isnan(b)) || a == b) continue;
    const double abs = strings ? 1 : std::fabs(a - b), rel = strings ? 1 : abs / std::max(std::fabs(b), 1e-30);
    e.max_abs = std::max(e.max_abs, std::isnan(abs) ? INFINITY : abs);
    e.max_rel = std::max(e.max_rel, std::isnan(rel) ? INFINITY : rel);
    if (strings || !(abs <= atol + rtol * std::fabs(b))) ++e.beyond;
  }
  return e;
}

Result<std::shared_ptr<const EngineImpl>> build(const Graph& graph, Backend backend) {
  BuildOptions options;
  options.backend = backend;
  KILN_ASSIGN_OR_RETURN(std::string bytes, build_engine(graph, options));
  return EngineImpl::deserialize(bytes);
}

Result<std::unique_ptr<ContextImpl>> run(const EngineImpl& engine, const NamedTensors& inputs) {
  KILN_ASSIGN_OR_RETURN(auto ctx, engine.create_execution_context());
  for (const auto& [name, t] : inputs) KILN_RETURN_IF_ERROR(ctx->set_input(name, t));
  KILN_RETURN_IF_ERROR(ctx->execute());
  return ctx;
}

}  // namespace

int run_compare(const CompareOptions& opt) {
  if (!(opt.rtol >= 0) || !(opt.atol >= 0)) return fail(invalid_argument("--rtol and --atol must be >= 0"));
  auto model = onnx_import::import_file(opt.onnx);
  if (!model) return fail(model.status());
  const Graph& graph = *model->graph;
  std::vector<std::string> input_flags = opt.load_inputs;
  std::vector<std::string> expected;  // output_<i>.pb of --test-dir, by output position
  if (!opt.test_dir.empty()) {
    namespace fs = std::filesystem;
    for (size_t i = 0; i < model->input_names.size(); ++i) {
      const fs::path f = fs::path(opt.test_dir) / str_cat("input_", i, ".pb");
      if (fs::exists(f)) input_flags.push_back(model->input_names[i] + ":" + f.string());
    }
    for (size_t i = 0; i < model->output_names.size(); ++i)
      expected.push_back((fs::path(opt.test_dir) / str_cat("output_", i, ".pb")).string());
  }
  auto cpu_engine = build(graph, Backend::kCpu);
  if (!cpu_engine) return fail(std::move(cpu_engine.take_status()).with_prefix("the CPU backend"));
  auto ref_engine = build(graph, Backend::kRef);
  if (!ref_engine) return fail(std::move(ref_engine.take_status()).with_prefix("the reference backend"));
  auto inputs = make_inputs(**cpu_engine, opt.shapes, input_flags);
  if (!inputs) return fail(inputs.status());
  auto cpu = run(**cpu_engine, *inputs);
  if (!cpu) return fail(std::move(cpu.take_status()).with_prefix("the CPU backend"));
  auto ref = run(**ref_engine, *inputs);
  if (!ref) return fail(std::move(ref.take_status()).with_prefix("the reference backend"));
  std::printf("kiln compare %s (rtol %g, atol %g)\n", opt.onnx.c_str(), opt.rtol, opt.atol);
  std::printf("%-24s %-22s %-12s %12s %12s  %s\n", "output", "shape", "vs", "max abs err", "max rel err", "result");
  bool ok = true;
  auto report = [&](const std::string& name, const Tensor& got, const Tensor& want, const char* vs) {
    const Errors e = compare(got, want, opt.rtol, opt.atol);
    const bool pass = e.mismatch.empty() && e.beyond == 0;
    ok = ok && pass;
    std::printf(
        "%-24s %-22s %-12s %12.3g %12.3g  %s\n", name.c_str(), got.dims().to_string().c_str(), vs, e.max_abs, e.max_rel,
        pass
            ? "ok"
            : (e.mismatch.empty() ? str_cat(e.beyond, " of ", want.numel(), " beyond tolerance") : e.mismatch).c_str());
  };
  for (size_t i = 0; i < model->output_names.size(); ++i) {
    const std::string& name = model->output_names[i];
    auto got = (*cpu)->output(name);
    if (!got) return fail(got.status());
    auto want = (*ref)->output(name);
    if (!want) return fail(want.status());
    report(name, *got, *want, "reference");
    if (i < expected.size() && std::filesystem::exists(expected[i])) {
      auto file = read_tensor_file(expected[i], "expected output '" + name + "'", got->dtype());
      if (!file) return fail(file.status());
      report(name, *got, *file, "expected");
    }
  }
  std::printf("%s\n",
              ok ? "PASSED: every output is within tolerance" : "FAILED: some output is beyond tolerance (see above)");
  return ok ? 0 : 1;
}

}  // namespace kiln::cli
