#include "ops/unique/unique.h"
#include "harness.h"

namespace kiln::harness {
namespace {

const std::vector<DataType> kNumericTypes = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                                             DataType::kInt8,    DataType::kUInt8,   DataType::kInt32,
                                             DataType::kInt64};

InputSpec case_values(Dims dims, std::vector<double> values) {
  InputSpec s;
  s.dims = std::move(dims);
  s.values = std::move(values);
  return s;
}

OpCase unique(std::string name, bool sorted, bool has_axis, int64_t axis, InputSpec x) {
  UniqueAttrs a;
  a.sorted = sorted;
  a.has_axis = has_axis;
  a.axis = axis;
  return {"Unique", std::move(name), attrs(a), {std::move(x)}, kNumericTypes};
}

}  // namespace

KILN_OP_CASES(unique) {
  std::vector<OpCase> c;
  const std::vector<double> v = {2, 1, 1, 3, 4, 3, 0, 2, 1, 4, 4, 0};
  for (bool sorted : {true, false}) {
    const std::string s = sorted ? " sorted" : " first-seen";
    c.push_back(unique("flat" + s, sorted, false, 0, case_values({12}, v)));
    c.push_back(unique("2-D flat" + s, sorted, false, 0, case_values({3, 4}, v)));
    c.push_back(unique("rows" + s, sorted, true, 0, case_values({4, 3}, {1, 0, 0, 1, 0, 0, 2, 3, 4, 1, 0, 0})));
    c.push_back(unique("columns -1" + s, sorted, true, -1, case_values({2, 4}, {1, 0, 1, 0, 2, 3, 2, 3})));
    c.push_back(
        unique("3-D axis 1" + s, sorted, true, 1, case_values({2, 3, 2}, {1, 1, 0, 1, 1, 1, 2, 2, 0, 2, 2, 2})));
  }
  c.push_back(unique("empty", true, false, 0, case_values({0}, {})));
  {
    OpCase big = unique("ints 100000", true, false, 0, ints({100000}, -500, 500, DataType::kInt32));
    big.dtypes = {DataType::kInt32};
    c.push_back(big);
  }
  {
    // Sizes that span many GPU blocks, with many repeats.
    std::vector<double> flat(5000), rows(6000);
    for (size_t i = 0; i < flat.size(); ++i) flat[i] = static_cast<double>((i * 7919) % 601) - 300;
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<double>((i * 104729) % 7 % 3);
    OpCase big = unique("5000 first-seen", false, false, 0, case_values({5000}, flat));
    big.dtypes = {DataType::kInt32, DataType::kFloat32};
    c.push_back(big);
    OpCase slices = unique("rows of 2000x3", true, true, 0, case_values({2000, 3}, rows));
    slices.dtypes = {DataType::kInt32, DataType::kFloat32};
    c.push_back(slices);
  }
  return c;
}

}  // namespace kiln::harness
