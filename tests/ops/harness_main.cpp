// kiln_op_harness: checks every op on every compiled backend against the reference.
//   test     run every case, compare each accepted implementation with the reference
//   grad     gradient rules against finite differences, then every backend's backward against the reference
//   perf     time every accepted implementation per case
//   support  print (or --write / --check) docs/ops.md, the op x backend x dtype table
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "core/cuda_runtime.h"
#include "harness.h"
#include "kiln/logger.h"
#include "runner/op_runner.h"

namespace kiln::harness {
namespace {

struct Options {
  std::string op, backend, dtype, family;
  bool verbose = false;
  int perf_iters = 20;
  std::string write_path, check_path;
};

}  // namespace

Tolerance tolerance_for(DataType d, double scale) {
  switch (d) {
    case DataType::kFloat32: return {1e-4 * scale, 1e-4 * scale};
    case DataType::kFloat16: return {5e-3 * scale, 5e-3 * scale};
    case DataType::kBFloat16: return {3e-2 * scale, 3e-2 * scale};
    default: return {0, 0};
  }
}

Tolerance tf32_tolerance(const Tensor& want, double scale) {
  double largest = 0;
  for (int64_t i = 0; i < want.numel(); ++i)
    if (std::isfinite(want.at(i))) largest = std::max(largest, std::fabs(want.at(i)));
  return {kTf32Tolerance * scale * largest, kTf32Tolerance * scale};
}

uint64_t seed_for(const OpCase& c, DataType d) {
  uint64_t h = 1469598103934665603ull;
  for (char ch : c.op + "/" + c.name) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  return h ^ (static_cast<uint64_t>(d) * 0x9e3779b97f4a7c15ull);
}

Result<Tensor> make_input(const InputSpec& spec, DataType dtype, std::mt19937_64& rng) {
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(dtype, spec.dims));
  const int64_t n = t.numel();
  if (!spec.values.empty()) {
    if (static_cast<int64_t>(spec.values.size()) != n)
      return internal_error("harness case gives ", spec.values.size(), " values for shape ", spec.dims.to_string());
    for (int64_t i = 0; i < n; ++i) t.set(i, spec.values[i]);
    return t;
  }
  std::uniform_real_distribution<double> real(spec.lo, spec.hi);
  for (int64_t i = 0; i < n; ++i) {
    double v;
    if (dtype == DataType::kBool) {
      v = static_cast<double>(rng() & 1);
    } else if (is_integer(dtype)) {
      std::uniform_int_distribution<int64_t> dist(static_cast<int64_t>(spec.lo), static_cast<int64_t>(spec.hi));
      v = static_cast<double>(dist(rng));
    } else {
      v = real(rng);
      if (spec.avoid_zero && std::fabs(v) < 0.1) v = v < 0 ? -0.1 - std::fabs(v) : 0.1 + v;
    }
    t.set(i, v);
  }
  return t;
}

Result<Prepared> prepare(const OpCase& c, DataType dtype) {
  const OpSchema* schema = OpRegistry::global().find(c.op);
  if (!schema) return internal_error("harness case for unknown op '", c.op, "'");
  Prepared p;
  p.call.schema = schema;
  p.call.attrs = c.attrs.get();
  std::mt19937_64 rng(seed_for(c, dtype));
  std::vector<const Tensor*> values;
  for (const InputSpec& spec : c.inputs) {
    if (spec.absent) {
      p.call.inputs.push_back(TensorDesc::absent());
      p.src.emplace_back();
      continue;
    }
    const DataType d = spec.dtype.value_or(dtype);
    KILN_ASSIGN_OR_RETURN(Tensor t, make_input(spec, d, rng));
    p.call.inputs.push_back({d, spec.dims, true});
    p.src.push_back(std::move(t));
  }
  for (auto& t : p.src) values.push_back(t.defined() ? &t : nullptr);
  InferContext ctx(*c.attrs, p.call.inputs, values);
  KILN_ASSIGN_OR_RETURN(p.call.outputs, schema->infer_outputs(ctx));
  pad_optional_inputs(*schema, p.call.inputs, p.src);
  return p;
}

namespace {

void poison(Tensor& t) {
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    if (is_floating(t.dtype()))
      t.set(i, std::nan(""));
    else
      t.set(i, (i % 2) ? -77 : 77);
  }
}

// Poisoned output tensors of the built op's types and shapes (the case's inferred shapes where the op's are
// known only when it runs).
Result<std::vector<Tensor>> alloc_outputs(const OpRunner& runner, const OpCall& call) {
  const std::vector<TensorDesc>& built = runner.output_descs();
  if (built.size() != call.outputs.size())
    return internal_error("the case infers ", call.outputs.size(), " outputs but the built op has ", built.size());
  std::vector<Tensor> dst;
  for (size_t i = 0; i < built.size(); ++i) {
    const Dims& dims = built[i].dims.is_static() ? built[i].dims : call.outputs[i].dims;
    KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(built[i].dtype, dims));
    poison(t);
    dst.push_back(std::move(t));
  }
  return dst;
}

// The case as one op run through the builder and the runtime on `backend`, optionally on a pinned kernel.
OpSpec op_spec(const Prepared& p, Backend backend, std::optional<KernelPin> pin = std::nullopt) {
  OpSpec spec;
  spec.op = p.call.schema->name;
  spec.attrs = p.call.attrs;
  spec.inputs = p.src;
  spec.backend = backend;
  // Candidates are listed as a builder with TF32 on sees them; a TF32 tactic runs in a build that allows it.
  spec.allow_tf32 = !pin || is_tf32_tactic(pin->tactic);
  spec.pin = std::move(pin);
  return spec;
}

// Runs the case once with its outputs poisoned first (a kernel that skips elements leaves NaN or +-77 there);
// outputs come back as host tensors.
Result<std::vector<Tensor>> run_case(const Prepared& p, Backend backend, std::optional<KernelPin> pin = std::nullopt) {
  KILN_ASSIGN_OR_RETURN(OpRunner runner, OpRunner::build(op_spec(p, backend, std::move(pin))));
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> poisoned, alloc_outputs(runner, p.call));
  for (size_t i = 0; i < poisoned.size(); ++i) KILN_RETURN_IF_ERROR(runner.set_output(i, poisoned[i]));
  KILN_RETURN_IF_ERROR(runner.run());
  return runner.outputs();
}

// The case once more with output 0 written over a copy of input `k` (KernelImpl::in_place_input: the runtime places
// a residual's last reader there); output 0 comes back as a host tensor. Undefined when input k cannot be output 0's
// memory (absent, or another type or size).
Result<Tensor> run_case_in_place(const Prepared& p, Backend backend, const KernelPin& pin, int k) {
  Prepared q = p;
  if (k >= static_cast<int>(q.src.size()) || !q.src[k].defined() || q.call.outputs.empty() ||
      q.src[k].dtype() != q.call.outputs[0].dtype || q.src[k].dims().numel() != q.call.outputs[0].dims.numel())
    return Tensor();
  KILN_ASSIGN_OR_RETURN(q.src[k], p.src[k].clone());
  KILN_ASSIGN_OR_RETURN(OpRunner runner, OpRunner::build(op_spec(q, backend, pin)));
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> poisoned, alloc_outputs(runner, q.call));
  poisoned[0] = Tensor::view(q.src[k].raw(), q.src[k].dtype(), poisoned[0].dims(), q.src[k].device());
  for (size_t i = 0; i < poisoned.size(); ++i) KILN_RETURN_IF_ERROR(runner.set_output(i, poisoned[i]));
  KILN_RETURN_IF_ERROR(runner.run());
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> out, runner.outputs());
  return out.at(0).clone();  // a view of q's copy of input k, which goes with q
}

// Empty when `got` matches `want` within the tolerance of `dtype`; else what differs first.
}  // namespace

std::string compare(const Tensor& got, const Tensor& want, Tolerance tol) {
  if (got.dims() != want.dims()) return str_cat("shape ", got.dims().to_string(), " != ", want.dims().to_string());
  const int64_t n = want.numel();
  int64_t bad = 0, first = -1;
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double a = got.at(i), b = want.at(i);
    bool ok;
    if (std::isnan(b))
      ok = std::isnan(a);
    else if (std::isinf(b))
      ok = a == b;
    else
      ok = !std::isnan(a) && std::fabs(a - b) <= tol.atol + tol.rtol * std::fabs(b);
    if (!ok) {
      if (first < 0) first = i;
      ++bad;
      if (!std::isnan(a)) worst = std::max(worst, std::fabs(a - b));
    }
  }
  if (!bad) return {};
  return str_cat(bad, "/", n, " elements differ; first at ", first, ": got ", got.at(first), ", want ", want.at(first),
                 " (max abs diff ", worst, ")");
}

namespace {

// Empty when an implementation gave `want` outputs; else what is missing or extra.
std::string count_diff(const std::vector<Tensor>& got, size_t want) {
  if (got.size() == want) return {};
  return str_cat("returned ", got.size(), " outputs where ", want, " are expected");
}

std::vector<OpCase> all_cases(const Options& opt) {
  std::vector<OpCase> out;
  for (auto& [family, factory] : case_factories()) {
    if (!opt.family.empty() && family != opt.family) continue;
    for (OpCase& c : factory())
      if (opt.op.empty() || c.op == opt.op) out.push_back(std::move(c));
  }
  return out;
}

bool backend_selected(const Options& opt, Backend b) { return opt.backend.empty() || opt.backend == backend_name(b); }

std::vector<DataType> case_dtypes(const Options& opt, const OpCase& c) {
  std::vector<DataType> out;
  for (DataType d : c.dtypes)
    if (opt.dtype.empty() || opt.dtype == dtype_name(d)) out.push_back(d);
  return out;
}

int run_test(const Options& opt) {
  const bool gpu = cuda::gpu_available();
  bool cuda_compiled = false;
  for (const KernelImpl* k : KernelRegistry::global().all()) cuda_compiled |= k->backend == Backend::kCuda;
  if (cuda_compiled && !gpu) std::printf("cuda backend: skipped: no GPU\n");
  int cases = 0, checks = 0, failed = 0, skipped = 0;
  std::set<std::string> ops;
  for (const OpCase& c : all_cases(opt)) {
    ++cases;
    ops.insert(c.op);
    for (DataType d : case_dtypes(opt, c)) {
      const std::string label = str_cat(c.op, " [", c.name, "] ", dtype_name(d));
      auto prepared = prepare(c, d);
      if (!prepared) {
        std::printf("FAIL %s: case setup: %s\n", label.c_str(), prepared.status().to_string().c_str());
        ++failed;
        continue;
      }
      const Prepared& p = *prepared;
      auto ref_impls = OpRunner::candidates(op_spec(p, Backend::kRef), Backend::kRef);
      if (!ref_impls) {
        std::printf("FAIL %s: case setup: %s\n", label.c_str(), ref_impls.status().to_string().c_str());
        ++failed;
        continue;
      }
      if (ref_impls->accepted.empty()) {
        if (opt.verbose)
          std::printf("skip %s: no reference kernel accepts it:%s\n", label.c_str(), ref_impls->rejected.c_str());
        ++skipped;
        continue;
      }
      auto want = run_case(p, Backend::kRef);
      if (!want) {
        std::printf("FAIL %s: reference: %s\n", label.c_str(), want.status().to_string().c_str());
        ++failed;
        continue;
      }
      if (std::string diff = count_diff(*want, p.call.outputs.size()); !diff.empty()) {
        std::printf("FAIL %s: reference: %s\n", label.c_str(), diff.c_str());
        ++failed;
        continue;
      }
      const Tolerance tol = tolerance_for(d, c.tolerance_scale);
      // The low-precision reference must agree with the float32 reference on the same inputs.
      if (d == DataType::kFloat16 || d == DataType::kBFloat16) {
        Prepared wide = p;
        for (size_t i = 0; i < wide.src.size(); ++i) {
          if (!wide.src[i].defined() || wide.src[i].dtype() != d) continue;
          Tensor w = *Tensor::empty(DataType::kFloat32, wide.src[i].dims());
          for (int64_t k = 0; k < w.numel(); ++k) w.set(k, wide.src[i].at(k));
          wide.src[i] = w;
          wide.call.inputs[i].dtype = DataType::kFloat32;
        }
        ++checks;
        auto wide_out = run_case(wide, Backend::kRef);
        std::string diff = wide_out ? count_diff(*wide_out, want->size()) : wide_out.status().to_string();
        for (size_t i = 0; diff.empty() && i < want->size(); ++i) diff = compare((*want)[i], (*wide_out)[i], tol);
        if (!diff.empty()) {
          std::printf("FAIL %s: ref(%s) vs ref(float32): %s\n", label.c_str(), dtype_name(d).data(), diff.c_str());
          ++failed;
        }
      }
      for (Backend b : {Backend::kCpu, Backend::kCuda}) {
        if (!backend_selected(opt, b)) continue;
        auto accepted = OpRunner::candidates(op_spec(p, b), b);
        if (!accepted) {
          std::printf("FAIL %s on %s: %s\n", label.c_str(), backend_name(b).data(),
                      accepted.status().to_string().c_str());
          ++failed;
          continue;
        }
        for (const OpCandidates::Accepted& cand : accepted->accepted) {
          const KernelImpl* impl = cand.impl;
          if (b == Backend::kCuda && !gpu) {
            ++skipped;
            continue;
          }
          // The default variant, then every tactic the implementation offers for the case (TF32 ones included):
          // each a pinned build.
          std::vector<std::string> tactics = {""};
          tactics.insert(tactics.end(), cand.tactics.begin(), cand.tactics.end());
          for (const std::string& tactic : tactics) {
            const std::string name = tactic.empty() ? impl->name : str_cat(impl->name, "[", tactic, "]");
            ++checks;
            auto got = run_case(p, b, KernelPin{impl->name, tactic});
            std::string diff = got ? count_diff(*got, want->size()) : got.status().to_string();
            for (size_t i = 0; diff.empty() && i < want->size(); ++i) {
              const bool tf32 = is_tf32_tactic(tactic) && (*want)[i].dtype() == DataType::kFloat32;
              diff = compare((*got)[i], (*want)[i], tf32 ? tf32_tolerance((*want)[i], c.tolerance_scale) : tol);
              if (!diff.empty()) diff = str_cat("output ", i, ": ", diff);
            }
            if (!diff.empty()) {
              std::printf("FAIL %s on %s: %s\n", label.c_str(), name.c_str(), diff.c_str());
              ++failed;
            } else if (opt.verbose) {
              std::printf("ok   %s on %s\n", label.c_str(), name.c_str());
            }
            const int shared = impl->in_place_input ? impl->in_place_input(tactic) : -1;
            if (shared < 0 || (b == Backend::kCuda && !gpu)) continue;
            auto in_place = run_case_in_place(p, b, KernelPin{impl->name, tactic}, shared);
            if (in_place && !in_place->defined()) continue;
            ++checks;
            const bool tf32 = is_tf32_tactic(tactic) && (*want)[0].dtype() == DataType::kFloat32;
            diff = !in_place
                       ? in_place.status().to_string()
                       : compare(*in_place, (*want)[0], tf32 ? tf32_tolerance((*want)[0], c.tolerance_scale) : tol);
            if (!diff.empty()) {
              std::printf("FAIL %s on %s, output 0 over input %d: %s\n", label.c_str(), name.c_str(), shared,
                          diff.c_str());
              ++failed;
            }
          }
        }
      }
    }
  }
  std::printf("op harness: %zu ops, %d cases, %d checks, %d failed, %d skipped\n", ops.size(), cases, checks, failed,
              skipped);
  return failed ? 1 : 0;
}

int run_perf(const Options& opt) {
  const bool gpu = cuda::gpu_available();
  std::printf("%-22s %-28s %-9s %-34s %12s %9s\n", "op", "case", "dtype", "implementation", "time (us)", "vs ref");
  for (const OpCase& c : all_cases(opt)) {
    for (DataType d : case_dtypes(opt, c)) {
      auto p = prepare(c, d);
      if (!p) continue;
      double ref_us = 0;
      for (Backend b : {Backend::kRef, Backend::kCpu, Backend::kCuda}) {
        if (b != Backend::kRef && !backend_selected(opt, b)) continue;
        if (b == Backend::kCuda && !gpu) continue;
        auto accepted = OpRunner::candidates(op_spec(*p, b), b);
        if (!accepted) continue;
        for (const OpCandidates::Accepted& cand : accepted->accepted) {
          const KernelImpl* impl = cand.impl;
          auto runner = OpRunner::build(op_spec(*p, b, KernelPin{impl->name, ""}));
          if (!runner) continue;
          auto timed = runner->time_us(opt.perf_iters);
          if (!timed) continue;
          const double us = *timed;
          if (b == Backend::kRef) ref_us = us;
          std::printf("%-22s %-28s %-9s %-34s %12.1f %8.2fx\n", c.op.c_str(), c.name.c_str(), dtype_name(d).data(),
                      impl->name.c_str(), us, ref_us > 0 ? ref_us / us : 0.0);
        }
      }
    }
  }
  return 0;
}

std::string short_dtype(DataType d) {
  switch (d) {
    case DataType::kFloat32: return "f32";
    case DataType::kFloat16: return "f16";
    case DataType::kBFloat16: return "bf16";
    case DataType::kInt8: return "i8";
    case DataType::kUInt8: return "u8";
    case DataType::kInt32: return "i32";
    case DataType::kInt64: return "i64";
    case DataType::kBool: return "bool";
    case DataType::kFp8E4M3: return "fp8";
    case DataType::kString: return "str";
  }
  return "?";
}

std::string support_table() {
  Options all;
  std::map<std::string, std::vector<OpCase>> by_op;
  for (OpCase& c : all_cases(all)) by_op[c.op].push_back(std::move(c));
  std::vector<Backend> backends;
  for (Backend b : {Backend::kRef, Backend::kCpu, Backend::kCuda})
    for (const KernelImpl* k : KernelRegistry::global().all())
      if (k->backend == b) {
        backends.push_back(b);
        break;
      }
  std::ostringstream os;
  os << "# kiln ops\n\nGenerated by `kiln_op_harness support --write docs/ops.md`; do not edit. A cell lists the\n"
        "element types for which some implementation on that backend accepts at least one harness case of the op\n"
        "(dtypes: f32 f16 bf16 i8 u8 i32 i64 bool). `test` mode checks each of them against the reference.\n\n";
  os << "| family | op | cases |";
  for (Backend b : backends) os << ' ' << backend_name(b) << " |";
  os << " summary |\n|---|---|---|";
  for (size_t i = 0; i < backends.size(); ++i) os << "---|";
  os << "---|\n";
  int n_ops = 0, n_cases = 0;
  for (const OpSchema* s : OpRegistry::global().all()) {
    ++n_ops;
    auto& cases = by_op[s->name];
    n_cases += static_cast<int>(cases.size());
    os << "| " << s->family << " | " << s->name << " | " << cases.size() << " |";
    for (Backend b : backends) {
      std::set<DataType> ok;
      for (const OpCase& c : cases)
        for (DataType d : c.dtypes) {
          auto p = prepare(c, d);
          if (!p) continue;
          for (const KernelImpl* impl : KernelRegistry::global().find(s->name, b))
            if (impl->supports(p->call).is_ok()) ok.insert(d);
        }
      std::string cell;
      for (DataType d : kAllDataTypes)
        if (ok.count(d)) cell += (cell.empty() ? "" : " ") + short_dtype(d);
      os << ' ' << (cell.empty() ? "—" : cell) << " |";
    }
    os << ' ' << s->summary << " |\n";
  }
  os << "\n"
     << n_ops << " ops, " << n_cases
     << " harness cases.\n\n## Implementations\n\n| implementation | op | backend | priority |\n|---|---|---|---|\n";
  auto impls = KernelRegistry::global().all();
  std::sort(impls.begin(), impls.end(), [](auto* a, auto* b) {
    return std::tie(a->op, a->backend, a->name) < std::tie(b->op, b->backend, b->name);
  });
  for (const KernelImpl* k : impls)
    os << "| " << k->name << " | " << k->op << " | " << backend_name(k->backend) << " | " << k->priority << " |\n";
  return os.str();
}

std::vector<std::string> split_cells(const std::string& row) {
  std::vector<std::string> cells;
  std::stringstream ss(row);
  for (std::string cell; std::getline(ss, cell, '|');) cells.push_back(cell);
  return cells;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// `doc` as a build with only the backends in `compiled` would generate it: the columns and implementation
// rows of other backends dropped (their names go to `dropped`). A CPU-only build checks what it can know.
std::string project_to(const std::string& doc, const std::set<std::string>& compiled, std::set<std::string>& dropped) {
  std::ostringstream out;
  std::stringstream in(doc);
  std::set<size_t> drop_columns;
  bool in_ops = false, in_impls = false;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] != '|') {
      in_ops = in_impls = false;
      out << line << '\n';
      continue;
    }
    std::vector<std::string> cells = split_cells(line);
    if (line.rfind("| family | op | cases |", 0) == 0) {
      in_ops = true;
      drop_columns.clear();
      for (size_t i = 4; i + 1 < cells.size(); ++i)
        if (std::string name = trim(cells[i]); !compiled.count(name)) {
          drop_columns.insert(i);
          dropped.insert(name);
        }
    } else if (line.rfind("| implementation | op | backend |", 0) == 0) {
      in_impls = true;
    } else if (in_impls && cells.size() > 3 && trim(cells[3]) != "---" && !compiled.count(trim(cells[3]))) {
      dropped.insert(trim(cells[3]));
      continue;
    }
    if (in_ops) {
      std::string kept;
      for (size_t i = 0; i < cells.size(); ++i)
        if (!drop_columns.count(i)) kept += (i ? "|" : "") + cells[i];
      line = kept + "|";
    }
    out << line << '\n';
  }
  return out.str();
}

int run_support(const Options& opt) {
  const std::string table = support_table();
  if (!opt.write_path.empty()) {
    std::ofstream(opt.write_path) << table;
    std::printf("wrote %s\n", opt.write_path.c_str());
    return 0;
  }
  if (!opt.check_path.empty()) {
    std::ifstream in(opt.check_path);
    if (!in) {
      std::printf("cannot read %s: run `make ops-doc` to generate it\n", opt.check_path.c_str());
      return 1;
    }
    std::stringstream committed;
    committed << in.rdbuf();
    std::set<std::string> compiled, dropped;
    for (const KernelImpl* k : KernelRegistry::global().all()) compiled.insert(std::string(backend_name(k->backend)));
    if (project_to(committed.str(), compiled, dropped) == table) {
      std::string note;
      for (const std::string& b : dropped) note += (note.empty() ? "" : ", ") + b;
      std::printf("%s is up to date%s\n", opt.check_path.c_str(),
                  note.empty() ? "" : str_cat(" (not compiled in this build, not checked: ", note, ")").c_str());
      return 0;
    }
    std::printf(
        "%s differs from what the harness generates: run `make ops-doc` on a build with every backend "
        "(CUDA included) and commit it\n",
        opt.check_path.c_str());
    return 1;
  }
  std::fputs(table.c_str(), stdout);
  return 0;
}

}  // namespace
}  // namespace kiln::harness

int main(int argc, char** argv) {
  using namespace kiln::harness;
  CLI::App app{"kiln op harness: every op on every backend against the reference"};
  Options opt;
  std::string mode = "test";
  app.add_option("mode", mode, "test | grad | perf | support")
      ->check(CLI::IsMember({"test", "grad", "perf", "support"}));
  app.add_option("--op", opt.op, "only this op");
  app.add_option("--family", opt.family, "only this op family");
  app.add_option("--backend", opt.backend, "only this backend (cpu, cuda)");
  app.add_option("--dtype", opt.dtype, "only this dtype (float32, float16, ...)");
  app.add_option("--iters", opt.perf_iters, "perf: iterations per measurement");
  app.add_option("--write", opt.write_path, "support: write the table to this file");
  app.add_option("--check", opt.check_path, "support: fail when this file differs from the table");
  app.add_flag("-v,--verbose", opt.verbose, "print every check");
  CLI11_PARSE(app, argc, argv);
  if (mode == "grad") {
    GradOptions grad{.op = opt.op, .family = opt.family, .backend = opt.backend, .verbose = opt.verbose};
    return run_grad(grad);
  }
  if (mode == "perf") return run_perf(opt);
  if (mode == "support") return run_support(opt);
  return run_test(opt);
}
