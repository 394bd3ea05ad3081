#include "ops/indexing/indexing.h"
#include "harness.h"

namespace kiln::harness {
namespace {

const std::vector<DataType> kAllTypes = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kInt8,
                                         DataType::kUInt8,   DataType::kInt32,   DataType::kInt64,    DataType::kBool};
const std::vector<DataType> kNumericTypes = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                                             DataType::kInt8,    DataType::kUInt8,   DataType::kInt32,
                                             DataType::kInt64};

OpCase gather(std::string name, int64_t axis, InputSpec data, InputSpec indices) {
  GatherAttrs a;
  a.axis = axis;
  return {"Gather", std::move(name), attrs(a), {std::move(data), std::move(indices)}, kAllTypes};
}

OpCase gather_elements(std::string name, int64_t axis, InputSpec data, InputSpec indices) {
  GatherElementsAttrs a;
  a.axis = axis;
  return {"GatherElements", std::move(name), attrs(a), {std::move(data), std::move(indices)}, kAllTypes};
}

OpCase gather_nd(std::string name, int64_t batch_dims, InputSpec data, InputSpec indices) {
  GatherNDAttrs a;
  a.batch_dims = batch_dims;
  return {"GatherND", std::move(name), attrs(a), {std::move(data), std::move(indices)}, kAllTypes};
}

OpCase scatter_nd(std::string name, ScatterReduction r, InputSpec data, InputSpec indices, InputSpec updates) {
  ScatterNDAttrs a;
  a.reduction = r;
  return {"ScatterND",
          str_cat(name, " ", enum_name(r)),
          attrs(a),
          {std::move(data), std::move(indices), std::move(updates)},
          kAllTypes};
}

OpCase scatter_elements(std::string name, int64_t axis, ScatterReduction r, InputSpec data, InputSpec indices,
                        InputSpec updates) {
  ScatterElementsAttrs a;
  a.axis = axis;
  a.reduction = r;
  return {"ScatterElements",
          str_cat(name, " ", enum_name(r)),
          attrs(a),
          {std::move(data), std::move(indices), std::move(updates)},
          kAllTypes};
}

OpCase topk(std::string name, int64_t axis, bool largest, bool sorted, InputSpec x, int64_t k) {
  TopKAttrs a;
  a.axis = axis;
  a.largest = largest;
  a.sorted = sorted;
  return {"TopK",
          std::move(name),
          attrs(a),
          {std::move(x), fixed(DataType::kInt64, {1}, {static_cast<double>(k)})},
          kNumericTypes};
}

// Values of the case dtype.
InputSpec case_values(Dims dims, std::vector<double> values) {
  InputSpec s;
  s.dims = std::move(dims);
  s.values = std::move(values);
  return s;
}

}  // namespace

KILN_OP_CASES(indexing) {
  using R = ScatterReduction;
  const auto i64 = DataType::kInt64;
  const auto i32 = DataType::kInt32;
  std::vector<OpCase> c;

  // Gather
  c.push_back(gather("axis 0 negative", 0, uniform({5, 4, 3}, -3, 3), fixed(i64, {2, 3}, {0, 4, -1, 2, -5, 1})));
  c.push_back(gather("axis 1 int32", 1, uniform({3, 4, 2}, -3, 3), fixed(i32, {5}, {3, -4, 0, 1, -1})));
  c.push_back(gather("axis -1 scalar index", -1, uniform({3, 4, 6}, -3, 3), fixed(i64, {}, {-2})));
  c.push_back(gather("1-D data 2-D indices", 0, uniform({7}, -3, 3), ints({3, 4}, -7, 6)));
  c.push_back(gather("axis 2 rank 4", 2, uniform({2, 3, 5, 4}, -3, 3), ints({2, 2}, -5, 4, i32)));
  c.push_back(gather("empty indices", 1, uniform({3, 4}, -3, 3), ints({0}, 0, 3)));
  {
    OpCase big = gather("rows 16x200x64 pick 150", 1, uniform({16, 200, 64}, -3, 3), ints({150}, -200, 199));
    big.dtypes = {DataType::kFloat32, DataType::kInt8};
    c.push_back(big);
  }

  // GatherElements
  c.push_back(gather_elements("axis 0", 0, uniform({4, 5, 3}, -3, 3), ints({6, 5, 3}, -4, 3)));
  c.push_back(gather_elements("axis 1 int32", 1, uniform({4, 5, 3}, -3, 3), ints({4, 2, 3}, -5, 4, i32)));
  c.push_back(gather_elements("axis -1 smaller indices", -1, uniform({4, 5}, -3, 3), ints({2, 7}, -5, 4)));
  c.push_back(gather_elements("1-D", 0, uniform({6}, -3, 3), fixed(i64, {4}, {5, -6, 0, 2})));
  {
    OpCase big = gather_elements("axis 1 64x128x32", 1, uniform({64, 128, 32}, -3, 3), ints({64, 128, 32}, -128, 127));
    big.dtypes = {DataType::kFloat32};
    c.push_back(big);
  }

  // GatherND
  c.push_back(gather_nd("m=2", 0, uniform({3, 4, 5}, -3, 3), fixed(i64, {2, 2}, {0, 1, 2, -1})));
  c.push_back(gather_nd("m=3 int32", 0, uniform({3, 4, 5}, -3, 3), ints({2, 2, 3}, -3, 2, i32)));
  c.push_back(gather_nd("m=1", 0, uniform({4, 3}, -3, 3), fixed(i64, {3, 1}, {3, -4, 1})));
  c.push_back(gather_nd("batch_dims 1", 1, uniform({2, 3, 4}, -3, 3), fixed(i64, {2, 2, 1}, {0, 2, -1, 1})));
  c.push_back(gather_nd("batch_dims 2", 2, uniform({2, 3, 4, 5}, -3, 3), ints({2, 3, 1, 2}, -4, 3)));
  {
    OpCase big = gather_nd("rows 512 of 1000x128", 0, uniform({1000, 128}, -3, 3), ints({512, 1}, -1000, 999));
    big.dtypes = {DataType::kFloat32};
    c.push_back(big);
    // More than 2^14 blocks of 256 outputs: the CUDA kernel's grid-stride loop runs.
    OpCase huge = gather_nd("rows 6000 of 2000x1024", 0, uniform({2000, 1024}, -3, 3), ints({6000, 1}, -2000, 1999));
    huge.dtypes = {DataType::kFloat32};
    c.push_back(huge);
  }

  // ScatterND
  for (R r : {R::kNone, R::kAdd, R::kMul, R::kMax, R::kMin}) {
    const bool dup = r != R::kNone;  // ONNX leaves duplicate indices undefined for 'none'
    c.push_back(scatter_nd("m=1", r, uniform({4, 5, 3}, -2, 2), fixed(i64, {3, 1}, {1, dup ? 1.0 : 0.0, -1}),
                           uniform({3, 5, 3}, -2, 2)));
    c.push_back(scatter_nd("m=2 int32", r, uniform({4, 5, 3}, -2, 2),
                           fixed(i32, {3, 2}, {0, 1, 3, 4, dup ? 0.0 : -1.0, dup ? 1.0 : -2.0}),
                           uniform({3, 3}, -2, 2)));
    c.push_back(scatter_nd("m=3 2-D indices", r, uniform({3, 4, 2}, -2, 2),
                           fixed(i64, {2, 2, 3}, {0, 0, 0, 2, 3, 0, -1, -1, -1, dup ? 2.0 : 1.0, dup ? 3.0 : 2.0, 0}),
                           uniform({2, 2}, -2, 2)));
  }
  {
    OpCase big = scatter_nd("rows into 1000x256", R::kAdd, uniform({1000, 256}, -2, 2), ints({300, 1}, -1000, 999),
                            uniform({300, 256}, -2, 2));
    big.dtypes = {DataType::kFloat32};
    c.push_back(big);
    // Many one-element tuples with duplicates: the CUDA kernel combines integers, bool and max/min atomically.
    OpCase add = scatter_nd("20000 elements into 4096", R::kAdd, uniform({4096}, -2, 2), ints({20000, 1}, -4096, 4095),
                            uniform({20000}, -2, 2));
    add.dtypes = {DataType::kInt8, DataType::kUInt8, DataType::kInt32, DataType::kInt64, DataType::kBool};
    c.push_back(add);
    OpCase max = scatter_nd("20000 elements into 64x64", R::kMax, uniform({64, 64}, -2, 2), ints({20000, 2}, -64, 63),
                            uniform({20000}, -2, 2));
    max.dtypes = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16, DataType::kInt32};
    c.push_back(max);
  }

  // ScatterElements
  for (R r : {R::kNone, R::kAdd, R::kMul, R::kMax, R::kMin}) {
    c.push_back(scatter_elements("axis 0", 0, r, uniform({4, 5}, -2, 2), ints({3, 5}, -4, 3), uniform({3, 5}, -2, 2)));
    c.push_back(scatter_elements("axis 1 int32", 1, r, uniform({3, 6, 2}, -2, 2), ints({3, 4, 2}, -6, 5, i32),
                                 uniform({3, 4, 2}, -2, 2)));
    c.push_back(
        scatter_elements("axis -1", -1, r, uniform({3, 5}, -2, 2), ints({2, 3}, -5, 4), uniform({2, 3}, -2, 2)));
  }
  {
    OpCase big = scatter_elements("axis 1 256x512", 1, R::kAdd, uniform({256, 512}, -2, 2), ints({256, 384}, -512, 511),
                                  uniform({256, 384}, -2, 2));
    big.dtypes = {DataType::kFloat32};
    c.push_back(big);
    // One long line (30000 updates into 5000): the CUDA kernel combines atomically where that is exact.
    OpCase mul = scatter_elements("1-D 30000 into 5000", 0, R::kMul, uniform({5000}, -2, 2), ints({30000}, -5000, 4999),
                                  uniform({30000}, -2, 2));
    mul.dtypes = {DataType::kInt8, DataType::kUInt8, DataType::kInt32, DataType::kInt64, DataType::kBool};
    c.push_back(mul);
    OpCase min = scatter_elements("1-D 30000 into 5000", 0, R::kMin, uniform({5000}, -2, 2), ints({30000}, -5000, 4999),
                                  uniform({30000}, -2, 2));
    min.dtypes = {DataType::kFloat32, DataType::kFloat16, DataType::kInt64};
    c.push_back(min);
  }

  // TopK
  c.push_back(topk("largest axis -1", -1, true, true, uniform({3, 10}, -3, 3), 4));
  c.push_back(topk("smallest axis -1", -1, false, true, uniform({3, 10}, -3, 3), 3));
  c.push_back(topk("largest axis 0", 0, true, true, uniform({6, 4}, -3, 3), 2));
  c.push_back(topk("smallest axis 1 of 3-D", 1, false, true, uniform({2, 7, 3}, -3, 3), 5));
  c.push_back(topk("unsorted", -1, true, false, uniform({4, 9}, -3, 3), 3));
  c.push_back(topk("k = size", 1, true, true, uniform({2, 5}, -3, 3), 5));
  c.push_back(topk("k = 0", 1, true, true, uniform({2, 5}, -3, 3), 0));
  c.push_back(topk("1-D", 0, true, true, uniform({8}, -3, 3), 3));
  // Long lines (the CUDA kernel sorts lines of up to 4096 in shared memory): many ties among the integers.
  c.push_back(topk("largest 4x3000 k 20", -1, true, true, uniform({4, 3000}, -3, 3), 20));
  c.push_back(topk("smallest axis 0 of 700x3 k 9", 0, false, true, uniform({700, 3}, -3, 3), 9));
  for (bool largest : {true, false}) {
    c.push_back(topk(largest ? "ties largest" : "ties smallest", -1, largest, true,
                     case_values({2, 6}, {1, 3, 3, 2, 3, 1, 5, 5, 5, 5, 5, 5}), 3));
    c.push_back(topk(largest ? "ties axis 0 largest" : "ties axis 0 smallest", 0, largest, true,
                     case_values({4, 2}, {2, 1, 2, 1, 0, 1, 2, 0}), 2));
  }
  {
    OpCase big = topk("k 10 of 64x4096", -1, true, true, uniform({64, 4096}, -3, 3), 10);
    big.dtypes = {DataType::kFloat32};
    c.push_back(big);
    OpCase strided = topk("k 8 axis 1 of 16x512x32", 1, false, true, uniform({16, 512, 32}, -3, 3), 8);
    strided.dtypes = {DataType::kFloat32};
    c.push_back(strided);
  }

  // OneHot (indices outside [-depth, depth - 1] give all-off rows)
  for (int64_t axis : {-1, 0, 1}) {
    OneHotAttrs a;
    a.axis = axis;
    c.push_back({"OneHot",
                 str_cat("axis ", axis),
                 attrs(a),
                 {ints({2, 3}, -6, 6), fixed(i64, {}, {5}), case_values({2}, {0, 1})},
                 kAllTypes});
  }
  {
    OneHotAttrs a;
    c.push_back({"OneHot",
                 "float indices and depth",
                 attrs(a),
                 {fixed(DataType::kFloat32, {4}, {0, 2.7, -1, 3}), fixed(DataType::kFloat32, {1}, {3}),
                  case_values({2}, {-2, 3})},
                 kNumericTypes});
    a.axis = 1;
    OpCase big{"OneHot",
               "depth 512 axis 1 of 32x300",
               attrs(a),
               {ints({32, 300}, -600, 600), fixed(i64, {}, {512}), case_values({2}, {0, 1})},
               {DataType::kFloat32}};
    c.push_back(big);
  }
  return c;
}

}  // namespace kiln::harness
