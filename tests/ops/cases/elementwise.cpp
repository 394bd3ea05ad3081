#include <cmath>
#include <limits>

#include "harness.h"
#include "ops/elementwise/elementwise.h"

namespace kiln::harness {
namespace {

using D = DataType;
using O = ElementWiseOp;
const std::vector<DataType> kFloats = {D::kFloat32, D::kFloat16, D::kBFloat16};
const std::vector<DataType> kNumeric = {D::kFloat32, D::kFloat16, D::kBFloat16, D::kInt8,
                                        D::kUInt8,   D::kInt32,   D::kInt64};
const std::vector<DataType> kAll = {D::kFloat32, D::kFloat16, D::kBFloat16, D::kInt8,
                                    D::kUInt8,   D::kInt32,   D::kInt64,    D::kBool};

// Values from a small set (with the case dtype) so that comparisons meet ties.
InputSpec few_values(Dims dims, int salt) {
  InputSpec s = uniform(dims);
  for (int64_t i = 0; i < dims.numel(); ++i) s.values.push_back(static_cast<double>((i * 7 + salt) % 5) - 2.0);
  return s;
}

struct Pattern {
  const char* name;
  Dims a, b;
};
const Pattern kPatterns[] = {{"same", {4, 33}, {4, 33}},
                             {"scalar b", {4, 33}, {}},
                             {"scalar a", {}, {5, 7}},
                             {"row", {4, 33}, {33}},
                             {"column", {4, 33}, {4, 1}},
                             {"both sides", {4, 1, 5}, {3, 1}},
                             {"a broadcast", {1, 33}, {4, 33}},
                             {"rank 0", {}, {}},
                             {"empty", {0, 3}, {3}},
                             {"inner", {2, 3, 4, 5}, {3, 1, 1}},
                             {"outer", {2, 3, 4, 5}, {2, 1, 1, 1}}};

}  // namespace

KILN_OP_CASES(elementwise) {
  std::vector<OpCase> cases;
  const std::string sep = " ";
  // Arithmetic over every broadcasting pattern.
  for (O op : {O::kSum, O::kSub, O::kProd, O::kMax, O::kMin}) {
    for (const Pattern& p : kPatterns) {
      cases.push_back({"ElementWise",
                       enum_name(op) + sep + p.name,
                       attrs(elementwise_attrs(op)),
                       {uniform(p.a, -20, 20), uniform(p.b, -20, 20)},
                       kNumeric});
    }
  }
  for (const Pattern& p : kPatterns)
    cases.push_back({"ElementWise",
                     std::string("div ") + p.name,
                     attrs(elementwise_attrs(O::kDiv)),
                     {uniform(p.a, -20, 20), nonzero(p.b, -6, 6)},
                     kNumeric});
  // Integer division and mod by zero are defined as 0; INT_MIN / -1 wraps.
  cases.push_back(
      {"ElementWise",
       "div int edges",
       attrs(elementwise_attrs(O::kDiv)),
       {fixed(D::kInt32, {6}, {7, -7, 7, -7, -2147483648.0, 5}), fixed(D::kInt32, {6}, {2, 2, -2, -2, -1, 0})},
       {D::kInt32}});
  // Mod: C fmod for floats; integers with both sign rules.
  for (const Pattern& p : {kPatterns[0], kPatterns[3], kPatterns[5]}) {
    cases.push_back({"ElementWise",
                     std::string("fmod float ") + p.name,
                     attrs(elementwise_attrs(O::kMod, true)),
                     {uniform(p.a, -10, 10), nonzero(p.b, -3, 3)},
                     kFloats});
    for (bool f : {false, true})
      cases.push_back({"ElementWise",
                       std::string(f ? "fmod int " : "mod int ") + p.name,
                       attrs(elementwise_attrs(O::kMod, f)),
                       {uniform(p.a, -30, 30), uniform(p.b, -7, 7)},
                       {D::kInt8, D::kUInt8, D::kInt32, D::kInt64}});
  }
  // Pow: float base with float or integer exponent, integer base with integer or float exponent.
  cases.push_back({"ElementWise",
                   "pow",
                   attrs(elementwise_attrs(O::kPow)),
                   {uniform({4, 33}, 0.1, 3), uniform({4, 33}, -2, 2)},
                   kFloats});
  cases.push_back({"ElementWise",
                   "pow row",
                   attrs(elementwise_attrs(O::kPow)),
                   {uniform({4, 33}, 0.1, 3), uniform({33}, -2, 2)},
                   kFloats});
  cases.push_back({"ElementWise",
                   "pow int exponent",
                   attrs(elementwise_attrs(O::kPow)),
                   {uniform({4, 33}, -3, 3), ints({33}, -3, 4, D::kInt32)},
                   kFloats});
  cases.push_back({"ElementWise",
                   "pow int64 exponent scalar",
                   attrs(elementwise_attrs(O::kPow)),
                   {uniform({4, 33}, -3, 3), ints({}, 2, 2, D::kInt64)},
                   kFloats});
  cases.push_back({"ElementWise",
                   "pow int",
                   attrs(elementwise_attrs(O::kPow)),
                   {uniform({4, 33}, -5, 5), uniform({4, 33}, -2, 7)},
                   {D::kInt32, D::kInt64}});
  cases.push_back({"ElementWise",
                   "pow int base float exponent",
                   attrs(elementwise_attrs(O::kPow)),
                   {ints({4, 33}, 0, 9, D::kInt32), uniform({4, 33}, -1, 3)},
                   kFloats});
  // Comparisons over values with ties.
  for (O op : {O::kEqual, O::kLess, O::kLessOrEqual, O::kGreater, O::kGreaterOrEqual}) {
    for (const Pattern& p : {kPatterns[0], kPatterns[1], kPatterns[4], kPatterns[5], kPatterns[6], kPatterns[7]}) {
      std::vector<DataType> dtypes = kNumeric;
      if (op == O::kEqual) dtypes.push_back(D::kBool);
      cases.push_back({"ElementWise",
                       enum_name(op) + sep + p.name,
                       attrs(elementwise_attrs(op)),
                       {few_values(p.a, 0), few_values(p.b, 3)},
                       dtypes});
    }
  }
  // Logic on bools.
  for (O op : {O::kAnd, O::kOr, O::kXor})
    for (const Pattern& p : {kPatterns[0], kPatterns[1], kPatterns[5], kPatterns[7]})
      cases.push_back({"ElementWise",
                       enum_name(op) + sep + p.name,
                       attrs(elementwise_attrs(op)),
                       {uniform(p.a), uniform(p.b)},
                       {D::kBool}});
  // Bit shifts, including shifts by the bit width or more.
  for (O op : {O::kBitShiftLeft, O::kBitShiftRight})
    for (const Pattern& p : {kPatterns[0], kPatterns[3]})
      cases.push_back({"ElementWise",
                       enum_name(op) + sep + p.name,
                       attrs(elementwise_attrs(op)),
                       {uniform(p.a, 0, 255), uniform(p.b, 0, 9)},
                       {D::kUInt8}});
  // Bigger problems for perf (float32 only).
  for (O op : {O::kSum, O::kProd, O::kDiv, O::kGreater}) {
    cases.push_back({"ElementWise",
                     enum_name(op) + std::string(" big same"),
                     attrs(elementwise_attrs(op)),
                     {uniform({256, 1024}, -4, 4), nonzero({256, 1024}, -4, 4)},
                     {D::kFloat32}});
    cases.push_back({"ElementWise",
                     enum_name(op) + std::string(" big row"),
                     attrs(elementwise_attrs(op)),
                     {uniform({256, 1024}, -4, 4), nonzero({1024}, -4, 4)},
                     {D::kFloat32}});
  }
  // More elements than one pass of the CUDA grid covers (grid-stride loops), broadcasting on a middle axis.
  cases.push_back({"ElementWise",
                   "sum 8M middle axis",
                   attrs(elementwise_attrs(O::kSum)),
                   {uniform({16, 512, 1024}, -4, 4), uniform({512, 1}, -4, 4)},
                   {D::kFloat32}});
  cases.push_back({"ElementWise",
                   "prod middle axis",
                   attrs(elementwise_attrs(O::kProd)),
                   {uniform({3, 5, 7, 2}, -4, 4), uniform({1, 5, 1, 1}, -4, 4)},
                   kNumeric});
  cases.push_back({"ElementWise",
                   "sum big int32 column",
                   attrs(elementwise_attrs(O::kSum)),
                   {uniform({256, 1024}, -1000, 1000), uniform({256, 1}, -1000, 1000)},
                   {D::kInt32}});

  // Where: three-way broadcasting, any dtype.
  struct WherePattern {
    const char* name;
    Dims c, x, y;
  };
  const WherePattern where_patterns[] = {{"same", {4, 33}, {4, 33}, {4, 33}},
                                         {"condition row", {33}, {4, 33}, {4, 33}},
                                         {"scalar x", {4, 33}, {}, {4, 33}},
                                         {"scalar y", {4, 33}, {4, 33}, {}},
                                         {"three way", {3, 1, 1}, {1, 4, 1}, {5}},
                                         {"rank 0", {}, {}, {}},
                                         {"empty", {0, 1}, {2}, {1}}};
  for (const WherePattern& p : where_patterns)
    cases.push_back({"Where",
                     p.name,
                     attrs(NoAttrs{}),
                     {ints(p.c, 0, 1, D::kBool), uniform(p.x, -50, 50), uniform(p.y, -50, 50)},
                     kAll});
  cases.push_back({"Where",
                   "middle axis",
                   attrs(NoAttrs{}),
                   {ints({3, 1, 5}, 0, 1, D::kBool), uniform({3, 4, 5}, -50, 50), uniform({1, 4, 1}, -50, 50)},
                   kAll});
  cases.push_back({"Where",
                   "big row",
                   attrs(NoAttrs{}),
                   {ints({1024}, 0, 1, D::kBool), uniform({256, 1024}), uniform({256, 1024})},
                   {D::kFloat32}});

  // Cast between every pair, with values that leave the range of narrower types.
  for (DataType from : kAll) {
    double lo = -300.5, hi = 300.5;
    if (from == D::kInt8) lo = -128, hi = 127;
    if (from == D::kUInt8) lo = 0, hi = 255;
    if (from == D::kInt32 || from == D::kInt64) lo = -100000, hi = 100000;
    for (DataType to : kAll)
      cases.push_back({"Cast",
                       str_cat(dtype_name(from), " to ", dtype_name(to)),
                       attrs(cast_to(to)),
                       {uniform({3, 37}, lo, hi)},
                       {from}});
  }
  const double inf = std::numeric_limits<double>::infinity();
  for (DataType to : kAll) {
    InputSpec special = uniform({18});
    special.values = {1e-6, 1.00048828125, 65519, 65520, std::nan(""), inf,  -inf,  1e10, -1e10,
                      -0.0, 0.5,           -0.5,  2.5,   -2.7,         1e-8, 70000, 3e-5, -1e-7};
    cases.push_back({"Cast", str_cat("special float to ", dtype_name(to)), attrs(cast_to(to)), {special}, kFloats});
  }
  cases.push_back({"Cast",
                   "8M float32 to bfloat16",
                   attrs(cast_to(D::kBFloat16)),
                   {uniform({8, 1024, 1024}, -1e3, 1e3)},
                   {D::kFloat32}});
  cases.push_back(
      {"Cast", "big float32 to int32", attrs(cast_to(D::kInt32)), {uniform({256, 1024}, -1e6, 1e6)}, {D::kFloat32}});
  cases.push_back({"Cast",
                   "big float32 to float16",
                   attrs(cast_to(D::kFloat16)),
                   {uniform({256, 1024}, -1e3, 1e3)},
                   {D::kFloat32}});
  return cases;
}

}  // namespace kiln::harness
