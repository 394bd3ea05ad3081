#include "ops/nonzero/nonzero.h"
#include "harness.h"

namespace kiln::harness {
namespace {

const std::vector<DataType> kAllTypes = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kInt8,
                                         DataType::kUInt8,   DataType::kInt32,   DataType::kInt64,    DataType::kBool};

InputSpec case_values(Dims dims, std::vector<double> values) {
  InputSpec s;
  s.dims = std::move(dims);
  s.values = std::move(values);
  return s;
}

OpCase nonzero(std::string name, InputSpec x, std::vector<DataType> dtypes = kAllTypes) {
  return {"NonZero", std::move(name), attrs(NoAttrs{}), {std::move(x)}, std::move(dtypes)};
}

}  // namespace

KILN_OP_CASES(nonzero) {
  std::vector<OpCase> c;
  c.push_back(nonzero("1-D", case_values({6}, {0, 1, 0, 1, 1, 0})));
  c.push_back(nonzero("2-D", case_values({2, 3}, {1, 0, 1, 0, 0, 1})));
  c.push_back(nonzero("3-D all zero", case_values({2, 2, 2}, {0, 0, 0, 0, 0, 0, 0, 0})));
  c.push_back(nonzero("scalar", case_values({}, {1})));
  c.push_back(nonzero("empty", case_values({0, 3}, {})));
  c.push_back(nonzero("random ints 4-D", ints({3, 4, 5, 6}, -1, 1, DataType::kInt32), {DataType::kInt32}));
  c.push_back(nonzero("random 64x1000", ints({64, 1000}, 0, 2, DataType::kInt8), {DataType::kInt8}));
  // Millions of elements: CUB's select runs many tiles (the CUDA kernel).
  c.push_back(nonzero("random 3-D 16x256x512", ints({16, 256, 512}, -1, 1, DataType::kInt32), {DataType::kInt32}));
  return c;
}

}  // namespace kiln::harness
