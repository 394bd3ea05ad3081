#include "ops/resize/resize.h"
#include "harness.h"

namespace kiln::harness {
namespace {

using CM = ResizeCoordinateMode;
using NM = ResizeNearestMode;

InputSpec f32(Dims dims, std::vector<double> v) { return fixed(DataType::kFloat32, std::move(dims), std::move(v)); }
InputSpec i64(Dims dims, std::vector<double> v) { return fixed(DataType::kInt64, std::move(dims), std::move(v)); }

const CM kCoordModes[] = {CM::kHalfPixel,    CM::kHalfPixelSymmetric, CM::kPytorchHalfPixel,
                          CM::kAlignCorners, CM::kAsymmetric,         CM::kTfCropAndResize};

// roi for a rank-4 resize: crops inside the input on H, reaches outside it on W (extrapolation).
InputSpec roi4(CM cm) {
  if (cm != CM::kTfCropAndResize) return absent();
  return f32({8}, {0, 0, 0.1, -0.2, 1, 1, 0.9, 1.15});
}

OpCase resize(std::string name, ResizeAttrs a, std::vector<InputSpec> inputs) {
  return {"Resize", std::move(name), attrs(a), std::move(inputs)};
}

}  // namespace

KILN_OP_CASES(resize) {
  std::vector<OpCase> c;
  const Dims x4 = {1, 2, 5, 4};
  for (CM cm : kCoordModes) {
    ResizeAttrs a;
    a.coordinate_transformation_mode = cm;
    a.extrapolation_value = -7.f;
    const std::string cs = enum_name(cm);
    for (NM nm : {NM::kRoundPreferFloor, NM::kRoundPreferCeil, NM::kFloor, NM::kCeil}) {
      a.mode = ResizeMode::kNearest;
      a.nearest_mode = nm;
      const std::string label = str_cat("nearest ", enum_name(nm), " ", cs);
      c.push_back(resize(label + " up", a, {uniform(x4, -3, 3), roi4(cm), f32({4}, {1, 1, 2, 2.5})}));
      c.push_back(resize(label + " down", a, {uniform(x4, -3, 3), roi4(cm), f32({4}, {1, 1, 0.5, 0.6})}));
      c.push_back(resize(label + " sizes", a, {uniform(x4, -3, 3), roi4(cm), absent(), i64({4}, {1, 2, 3, 7})}));
    }
    a.mode = ResizeMode::kLinear;
    c.push_back(resize("linear " + cs + " up", a, {uniform(x4, -3, 3), roi4(cm), f32({4}, {1, 1, 2, 1.5})}));
    c.push_back(resize("linear " + cs + " down", a, {uniform(x4, -3, 3), roi4(cm), f32({4}, {1, 1, 0.6, 0.5})}));
    c.push_back(
        resize("linear " + cs + " sizes 1", a, {uniform(x4, -3, 3), roi4(cm), absent(), i64({4}, {1, 2, 1, 6})}));
    a.mode = ResizeMode::kCubic;
    c.push_back(resize("cubic " + cs + " up", a, {uniform(x4, -3, 3), roi4(cm), f32({4}, {1, 1, 2, 1.75})}));
    c.push_back(resize("cubic " + cs + " down", a, {uniform(x4, -3, 3), roi4(cm), f32({4}, {1, 1, 0.8, 0.5})}));
    a.exclude_outside = true;
    a.cubic_coeff_a = -0.5f;
    c.push_back(resize("cubic a=-0.5 exclude_outside " + cs, a,
                       {uniform(x4, -3, 3), roi4(cm), absent(), i64({4}, {1, 2, 9, 3})}));
  }
  {
    // 3-D and 5-D, axes (negative too), keep_aspect_ratio_policy.
    ResizeAttrs a;
    a.mode = ResizeMode::kLinear;
    c.push_back(resize("linear 3-D all axes", a, {uniform({2, 3, 5}, -3, 3), absent(), f32({3}, {1.5, 1, 0.6})}));
    c.push_back(resize("linear 5-D", a, {uniform({1, 2, 3, 4, 4}, -3, 3), absent(), f32({5}, {1, 1, 2, 0.5, 1.5})}));
    a.axes = {-1, 2};
    c.push_back(resize("linear 5-D axes [-1, 2]", a, {uniform({1, 2, 3, 4, 4}, -3, 3), absent(), f32({2}, {1.5, 2})}));
    a.mode = ResizeMode::kCubic;
    a.axes = {1};
    c.push_back(resize("cubic 3-D axes [1] sizes", a, {uniform({2, 6, 3}, -3, 3), absent(), absent(), i64({1}, {4})}));
    a.mode = ResizeMode::kNearest;
    a.axes = {2, 3};
    for (auto policy : {ResizeAspectPolicy::kNotLarger, ResizeAspectPolicy::kNotSmaller}) {
      a.keep_aspect_ratio_policy = policy;
      c.push_back(resize(str_cat("nearest keep_aspect ", enum_name(policy)), a,
                         {uniform(x4, -3, 3), absent(), absent(), i64({2}, {7, 7})}));
    }
    a.mode = ResizeMode::kLinear;
    a.coordinate_transformation_mode = CM::kHalfPixelSymmetric;
    a.keep_aspect_ratio_policy = ResizeAspectPolicy::kNotLarger;
    c.push_back(resize("linear half_pixel_symmetric not_larger", a,
                       {uniform(x4, -3, 3), absent(), absent(), i64({2}, {8, 3})}));
    a = ResizeAttrs();
    a.mode = ResizeMode::kLinear;
    a.coordinate_transformation_mode = CM::kTfCropAndResize;
    a.axes = {3, 2};
    c.push_back(resize("tf_crop_and_resize axes [3, 2]", a,
                       {uniform(x4, -3, 3), f32({4}, {0.6, 0.4, 0.8, 0.6}), absent(), i64({2}, {3, 3})}));
  }
  {
    // Shapes oneDNN takes (f32, N and C kept): integer upsampling and halving.
    ResizeAttrs a;
    a.mode = ResizeMode::kLinear;
    c.push_back(
        resize("linear half_pixel x2 (onednn)", a, {uniform({2, 3, 6, 5}, -3, 3), absent(), f32({4}, {1, 1, 2, 2})}));
    c.push_back(resize("linear half_pixel /2 (onednn)", a,
                       {uniform({2, 3, 8, 6}, -3, 3), absent(), absent(), i64({4}, {2, 3, 4, 3})}));
    a.mode = ResizeMode::kNearest;
    a.coordinate_transformation_mode = CM::kAsymmetric;
    a.nearest_mode = NM::kFloor;
    c.push_back(resize("nearest asymmetric floor x3 (onednn)", a,
                       {uniform({1, 2, 4, 5}, -3, 3), absent(), f32({4}, {1, 1, 3, 3})}));
    a.coordinate_transformation_mode = CM::kHalfPixel;
    a.nearest_mode = NM::kRoundPreferCeil;
    c.push_back(resize("nearest half_pixel ceil /2 5-D (onednn)", a,
                       {uniform({1, 2, 4, 6, 8}, -3, 3), absent(), f32({5}, {1, 1, 0.5, 0.5, 0.5})}));
  }
  {
    // Larger cases for perf.
    ResizeAttrs a;
    a.mode = ResizeMode::kLinear;
    OpCase up = resize("linear x2 1x16x64x64", a, {uniform({1, 16, 64, 64}, -3, 3), absent(), f32({4}, {1, 1, 2, 2})});
    up.dtypes = {DataType::kFloat32};
    c.push_back(up);
    a.coordinate_transformation_mode = CM::kAlignCorners;
    OpCase ac = resize("linear align_corners 1x16x64x64", a,
                       {uniform({1, 16, 64, 64}, -3, 3), absent(), absent(), i64({4}, {1, 16, 100, 90})});
    ac.dtypes = {DataType::kFloat32};
    c.push_back(ac);
    a.mode = ResizeMode::kCubic;
    a.coordinate_transformation_mode = CM::kHalfPixel;
    OpCase cu = resize("cubic x2 1x8x48x48", a, {uniform({1, 8, 48, 48}, -3, 3), absent(), f32({4}, {1, 1, 2, 2})});
    cu.dtypes = {DataType::kFloat32};
    c.push_back(cu);
    a.mode = ResizeMode::kNearest;
    a.coordinate_transformation_mode = CM::kAsymmetric;
    a.nearest_mode = NM::kFloor;
    OpCase nn = resize("nearest x2 1x16x64x64", a, {uniform({1, 16, 64, 64}, -3, 3), absent(), f32({4}, {1, 1, 2, 2})});
    nn.dtypes = {DataType::kFloat32};
    c.push_back(nn);
    // More than 2^14 blocks of 256 outputs: the CUDA kernel's grid-stride loop runs.
    a.nearest_mode = NM::kRoundPreferCeil;
    a.coordinate_transformation_mode = CM::kHalfPixel;
    OpCase big =
        resize("nearest x2 1x20x256x256", a, {uniform({1, 20, 256, 256}, -3, 3), absent(), f32({4}, {1, 1, 2, 2})});
    big.dtypes = {DataType::kFloat32};
    c.push_back(big);
  }
  return c;
}

}  // namespace kiln::harness
