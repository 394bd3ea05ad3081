#include "ops/quantization/quantization.h"
#include "harness.h"

namespace kiln::harness {

namespace {
constexpr DataType kI8 = DataType::kInt8, kU8 = DataType::kUInt8, kI32 = DataType::kInt32, kF32 = DataType::kFloat32;

QuantizeAttrs axis(int64_t a, DataType dtype = DataType::kUInt8) {
  QuantizeAttrs q;
  q.axis = a;
  q.dtype = dtype;
  return q;
}
}  // namespace

KILN_OP_CASES(quantization) {
  std::vector<OpCase> cases;
  const std::vector<DataType> f32 = {kF32}, i32 = {kI32};
  cases.push_back({"Quantize",
                   "per tensor uint8",
                   attrs(axis(1)),
                   {uniform({2, 3, 40}, -3, 3), fixed(kF32, {}, {0.025}), fixed(kU8, {}, {128})},
                   f32});
  cases.push_back({"Quantize",
                   "per axis int8",
                   attrs(axis(1)),
                   {uniform({2, 3, 4, 5}, -2, 2), fixed(kF32, {3}, {0.01, 0.02, 0.05}), fixed(kI8, {3}, {0, -3, 5})},
                   f32});
  cases.push_back(
      {"Quantize",
       "ties round to even",
       attrs(axis(0)),
       {fixed(kF32, {8}, {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 300, -300}), fixed(kF32, {}, {1}), fixed(kI8, {}, {0})},
       f32});
  cases.push_back({"Quantize",
                   "no zero point int8",
                   attrs(axis(-1, kI8)),
                   {uniform({4, 6}, -1, 1), fixed(kF32, {6}, {0.01, 0.02, 0.03, 0.04, 0.05, 0.06})},
                   f32});
  cases.push_back({"Dequantize",
                   "per tensor uint8",
                   attrs(axis(1)),
                   {ints({3, 50}, 0, 255, kU8), fixed(kF32, {}, {0.1}), fixed(kU8, {}, {7})},
                   f32});
  cases.push_back({"Dequantize",
                   "per axis int8",
                   attrs(axis(0)),
                   {ints({2, 3, 5}, -128, 127, kI8), fixed(kF32, {2}, {0.5, 0.25}), fixed(kI8, {2}, {1, -1})},
                   f32});
  cases.push_back(
      {"Dequantize", "int32", attrs(axis(1)), {ints({17}, -100000, 100000, kI32), fixed(kF32, {}, {0.001})}, f32});
  // Many blocks on a GPU (grid-stride loops, the one-block range reduction of DynamicQuantize).
  {
    std::vector<double> scales(64), zps(64);
    for (int i = 0; i < 64; ++i) scales[i] = 0.01 + 0.001 * i, zps[i] = (i * 37) % 256 - 128;
    cases.push_back({"Quantize",
                     "per axis int8 large",
                     attrs(axis(1)),
                     {uniform({8, 64, 500}, -2, 2), fixed(kF32, {64}, scales), fixed(kI8, {64}, zps)},
                     f32});
    cases.push_back({"Dequantize",
                     "per axis int8 large",
                     attrs(axis(1)),
                     {ints({8, 64, 500}, -128, 127, kI8), fixed(kF32, {64}, scales), fixed(kI8, {64}, zps)},
                     f32});
  }
  cases.push_back({"DynamicQuantize", "large", attrs(NoAttrs{}), {uniform({256, 1024}, -5, 3)}, f32});
  cases.push_back({"DynamicQuantize", "mixed signs", attrs(NoAttrs{}), {uniform({4, 33}, -3, 2)}, f32});
  cases.push_back({"DynamicQuantize", "positive", attrs(NoAttrs{}), {uniform({50}, 0.5, 4)}, f32});
  cases.push_back({"MatrixMultiplyInteger",
                   "batched per row/column zero points",
                   attrs(NoAttrs{}),
                   {ints({3, 5, 7}, 0, 255, kU8), ints({7, 4}, -128, 127, kI8), fixed(kU8, {5}, {1, 2, 3, 4, 128}),
                    fixed(kI8, {4}, {0, 1, -1, 5})},
                   i32});
  cases.push_back({"MatrixMultiplyInteger",
                   "no zero points",
                   attrs(NoAttrs{}),
                   {ints({2, 1, 6, 9}, -128, 127, kI8), ints({3, 9, 5}, -128, 127, kI8)},
                   i32});
  cases.push_back(
      {"MatrixMultiplyInteger",
       "large batched broadcast",
       attrs(NoAttrs{}),
       {ints({4, 64, 128}, 0, 255, kU8), ints({128, 96}, -128, 127, kI8), fixed(kU8, {}, {128}), fixed(kI8, {}, {-3})},
       i32});
  cases.push_back(
      {"QuantizedMatrixMultiply",
       "per tensor",
       attrs(NoAttrs{}),
       {ints({4, 16}, 0, 255, kU8), fixed(kF32, {}, {0.02}), fixed(kU8, {}, {120}), ints({16, 8}, 0, 255, kU8),
        fixed(kF32, {}, {0.01}), fixed(kU8, {}, {130}), fixed(kF32, {}, {0.05}), fixed(kU8, {}, {128})},
       f32});
  cases.push_back({"QuantizedMatrixMultiply",
                   "per row and column int8",
                   attrs(NoAttrs{}),
                   {ints({2, 3, 8}, -128, 127, kI8), fixed(kF32, {3}, {0.01, 0.02, 0.03}), fixed(kI8, {3}, {0, 1, -1}),
                    ints({8, 4}, -128, 127, kI8), fixed(kF32, {4}, {0.01, 0.02, 0.01, 0.005}),
                    fixed(kI8, {4}, {0, 0, 3, 0}), fixed(kF32, {}, {0.1}), fixed(kI8, {}, {-5})},
                   f32});
  ConvolutionAttrs conv;
  conv.pads = {1, 1, 1, 1};
  conv.strides = {2, 1};
  cases.push_back({"ConvolutionInteger",
                   "2-D pads strides per-channel w zero point",
                   attrs(conv),
                   {ints({2, 3, 7, 6}, 0, 255, kU8), ints({4, 3, 3, 3}, 0, 255, kU8), fixed(kU8, {}, {100}),
                    fixed(kU8, {4}, {128, 120, 1, 0})},
                   i32});
  cases.push_back({"ConvolutionInteger",
                   "2-D larger per-tensor zero points",
                   attrs(conv),
                   {ints({2, 8, 16, 16}, 0, 255, kU8), ints({16, 8, 3, 3}, -128, 127, kI8), fixed(kU8, {}, {120}),
                    fixed(kI8, {}, {2})},
                   i32});
  ConvolutionAttrs grouped;
  grouped.group = 2;
  grouped.dilations = {2};
  cases.push_back({"ConvolutionInteger",
                   "1-D grouped dilated int8",
                   attrs(grouped),
                   {ints({1, 4, 11}, -128, 127, kI8), ints({6, 2, 3}, -128, 127, kI8)},
                   i32});
  ConvolutionAttrs same;
  same.auto_pad = AutoPad::kSameUpper;
  cases.push_back(
      {"QuantizedConvolution",
       "same_upper with bias",
       attrs(same),
       {ints({1, 2, 5, 5}, 0, 255, kU8), fixed(kF32, {}, {0.02}), fixed(kU8, {}, {128}),
        ints({3, 2, 3, 3}, -128, 127, kI8), fixed(kF32, {3}, {0.01, 0.005, 0.02}), fixed(kI8, {3}, {0, 0, 0}),
        fixed(kF32, {}, {0.2}), fixed(kU8, {}, {100}), ints({3}, -500, 500, kI32)},
       f32});
  cases.push_back({"QuantizedConvolution",
                   "3-D int8 no bias",
                   attrs(ConvolutionAttrs{}),
                   {ints({1, 2, 4, 4, 4}, -128, 127, kI8), fixed(kF32, {}, {0.05}), fixed(kI8, {}, {3}),
                    ints({2, 2, 2, 2, 2}, -128, 127, kI8), fixed(kF32, {}, {0.01}), fixed(kI8, {}, {0}),
                    fixed(kF32, {}, {0.3}), fixed(kI8, {}, {0})},
                   f32});
  return cases;
}

}  // namespace kiln::harness
