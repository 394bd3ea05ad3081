#pragma once
// The op harness: every op family lists its cases here (tests/ops/cases/<family>.cpp); the one
// harness program runs each case on every compiled backend and compares with the reference.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/registry.h"

namespace kiln::harness {

/// How to fill one input.
struct InputSpec {
  Dims dims;
  std::optional<DataType> dtype;  ///< nullopt: the case's dtype
  double lo = -1.0, hi = 1.0;     ///< uniform range (integers: inclusive)
  std::vector<double> values;     ///< fixed values, used instead of random ones when set
  bool absent = false;            ///< a skipped optional input
  bool avoid_zero = false;        ///< keep |x| >= 0.1 (divisors, logs)
};

/// Uniform floats in [lo, hi] with the case dtype.
InputSpec uniform(Dims dims, double lo = -1.0, double hi = 1.0);
/// Uniform floats away from zero (|x| >= 0.1).
InputSpec nonzero(Dims dims, double lo = -1.0, double hi = 1.0);
/// Uniform integers in [lo, hi] of `dtype`.
InputSpec ints(Dims dims, int64_t lo, int64_t hi, DataType dtype = DataType::kInt64);
/// Fixed values of `dtype` (indices, shapes, axes).
InputSpec fixed(DataType dtype, Dims dims, std::vector<double> values);
/// A skipped optional input.
InputSpec absent();

struct OpCase {
  std::string op;    ///< schema name
  std::string name;  ///< short label, e.g. "3x3 stride 2"
  std::shared_ptr<Attrs> attrs;
  std::vector<InputSpec> inputs;
  std::vector<DataType> dtypes = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};
  double tolerance_scale = 1.0;  ///< >1 for long accumulations
  /// grad mode: the outputs the loss uses (empty: every floating-point output); leave out outputs that carry
  /// state rather than a differentiable value (BatchNorm's running statistics, saved batch statistics).
  std::vector<int> grad_outputs;
};

template <class A>
std::shared_ptr<Attrs> attrs(A a) {
  return std::make_shared<A>(std::move(a));
}

struct Tolerance {
  double atol, rtol;
};
Tolerance tolerance_for(DataType d, double scale);
/// TF32 tactics (float32 inputs rounded to 10 mantissa bits, "+tf32"): this much relative error, and as much
/// absolute error relative to the largest |value| of the reference output `want` (products of many terms).
inline constexpr double kTf32Tolerance = 5e-3;
Tolerance tf32_tolerance(const Tensor& want, double scale);
uint64_t seed_for(const OpCase& c, DataType d);
Result<Tensor> make_input(const InputSpec& spec, DataType dtype, std::mt19937_64& rng);

/// A case's inputs made for one dtype and the kernel call they form.
struct Prepared {
  OpCall call;
  std::vector<Tensor> src;
};
Result<Prepared> prepare(const OpCase& c, DataType dtype);
/// Empty when `got` matches `want` within `tol`, else what differs.
std::string compare(const Tensor& got, const Tensor& want, Tolerance tol);

struct GradOptions {
  std::string op, family, backend;
  bool verbose = false;
  int samples = 12;  ///< finite-difference samples per input
};
/// `grad` mode: gradient rules against finite differences on the reference, then every backend's backward.
int run_grad(const GradOptions& options);

using CaseFactory = std::vector<OpCase> (*)();
bool register_cases(const char* family, CaseFactory factory);
std::vector<std::pair<std::string, CaseFactory>>& case_factories();

/// `KILN_OP_CASES(activation) { return {...}; }`
#define KILN_OP_CASES(family)                                                                                       \
  static std::vector<::kiln::harness::OpCase> kiln_cases_##family();                                                \
  static const bool kiln_cases_registered_##family = ::kiln::harness::register_cases(#family, kiln_cases_##family); \
  static std::vector<::kiln::harness::OpCase> kiln_cases_##family()

}  // namespace kiln::harness
