#include "ops/cumsum/cumsum.h"
#include "harness.h"

namespace kiln::harness {

KILN_OP_CASES(cumsum) {
  std::vector<OpCase> cases;
  const DataType i64 = DataType::kInt64, i32 = DataType::kInt32;
  auto cumsum = [](bool exclusive, bool reverse) {
    CumSumAttrs a;
    a.exclusive = exclusive;
    a.reverse = reverse;
    return attrs(a);
  };
  for (bool exclusive : {false, true})
    for (bool reverse : {false, true}) {
      const std::string flags = std::string(exclusive ? "exclusive" : "inclusive") + (reverse ? " reverse" : "");
      cases.push_back({"CumSum", "1-D " + flags, cumsum(exclusive, reverse), {uniform({37}), fixed(i64, {}, {0})}});
      cases.push_back(
          {"CumSum", "3-D axis 1 " + flags, cumsum(exclusive, reverse), {uniform({3, 20, 7}), fixed(i32, {}, {1})}});
    }
  cases.push_back({"CumSum", "axis -1 as [1]", cumsum(false, false), {uniform({4, 5, 6}), fixed(i64, {1}, {-1})}});
  cases.push_back({"CumSum", "axis 0 wide rows", cumsum(false, true), {uniform({9, 700}), fixed(i64, {}, {0})}});
  cases.push_back(
      {"CumSum", "long rows exclusive reverse", cumsum(true, true), {uniform({6, 1000}), fixed(i64, {}, {-1})}});
  OpCase ints_case{"CumSum", "int axis 2", cumsum(true, false), {uniform({2, 3, 50}, -100, 100), fixed(i64, {}, {2})}};
  ints_case.dtypes = {DataType::kInt32, DataType::kInt64};
  cases.push_back(ints_case);
  OpCase big{"CumSum", "64x512x64 axis 1", cumsum(false, false), {uniform({64, 512, 64}), fixed(i64, {}, {1})}};
  big.dtypes = {DataType::kFloat32};
  big.tolerance_scale = 8;
  cases.push_back(big);
  cases.push_back({"CumSum", "empty", cumsum(false, false), {uniform({3, 0}), fixed(i64, {}, {1})}});
  return cases;
}

}  // namespace kiln::harness
