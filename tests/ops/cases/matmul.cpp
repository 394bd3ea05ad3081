#include "ops/matmul/matmul.h"
#include "harness.h"

namespace kiln::harness {
namespace {

MatrixMultiplyAttrs mm(bool ta = false, bool tb = false, float alpha = 1.f, float beta = 1.f) {
  MatrixMultiplyAttrs a;
  a.transpose_a = ta;
  a.transpose_b = tb;
  a.alpha = alpha;
  a.beta = beta;
  return a;
}

FullyConnectedAttrs fc(int64_t axis) {
  FullyConnectedAttrs a;
  a.axis = axis;
  return a;
}

// The optimizer's epilogue: a fused activation on a matrix multiply or fully connected layer.
FusedActivation fused(ActivationKind kind, float alpha = 0.f, float beta = 0.f) { return {true, kind, alpha, beta}; }
MatrixMultiplyAttrs mm_fused(FusedActivation f, float alpha = 1.f, float beta = 1.f, bool tb = false) {
  MatrixMultiplyAttrs a = mm(false, tb, alpha, beta);
  a.fused = f;
  return a;
}
FullyConnectedAttrs fc_fused(int64_t axis, FusedActivation f) {
  FullyConnectedAttrs a = fc(axis);
  a.fused = f;
  return a;
}

}  // namespace

KILN_OP_CASES(matmul) {
  std::vector<OpCase> cases;
  const std::vector<DataType> with_ints = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                                           DataType::kInt32, DataType::kInt64};
  auto add = [&](std::string name, MatrixMultiplyAttrs a, std::vector<InputSpec> in, bool ints_too = false) {
    OpCase c{"MatrixMultiply", std::move(name), attrs(a), std::move(in)};
    if (ints_too) {
      c.dtypes = with_ints;
      for (auto& s : c.inputs) s.lo = -4, s.hi = 4;  // integers draw from [-4, 4]
    }
    cases.push_back(std::move(c));
  };
  add("2-D 5x7 @ 7x6", mm(), {uniform({5, 7}), uniform({7, 6})}, true);
  add("1-D x 1-D", mm(), {uniform({9}), uniform({9})}, true);
  add("1-D x 3-D", mm(), {uniform({4}), uniform({2, 4, 3})}, true);
  add("3-D x 1-D", mm(), {uniform({2, 3, 4}), uniform({4})}, true);
  add("1-D x 2-D transpose_b", mm(false, true), {uniform({4}), uniform({3, 4})});
  add("2-D x 3-D batch", mm(), {uniform({3, 4}), uniform({2, 4, 5})}, true);
  add("broadcast batches", mm(), {uniform({2, 1, 3, 4}), uniform({5, 4, 6})}, true);
  add("broadcast batches both ways", mm(), {uniform({3, 1, 2, 5}), uniform({1, 4, 5, 3})});
  add("transpose_a", mm(true, false), {uniform({4, 3}), uniform({4, 5})});
  add("transpose_b", mm(false, true), {uniform({3, 4}), uniform({5, 4})}, true);
  add("transpose both batched", mm(true, true), {uniform({2, 4, 3}), uniform({2, 5, 4})});
  add("transpose_b broadcast batch", mm(false, true), {uniform({2, 3, 3, 4}), uniform({3, 6, 4})});
  add("rank 6 batches", mm(), {uniform({2, 1, 2, 1, 3, 2}), uniform({1, 2, 1, 2, 2, 3})});
  add("gemm alpha beta c [n]", mm(false, false, 0.5f, 2.f), {uniform({3, 4}), uniform({4, 5}), uniform({5})});
  add("gemm c [m, 1]", mm(false, false, 1.f, 0.25f), {uniform({3, 4}), uniform({4, 5}), uniform({3, 1})});
  add("gemm c scalar", mm(false, false, -1.5f, 1.f), {uniform({3, 4}), uniform({4, 5}), uniform({})});
  add("gemm c full transA transB", mm(true, true, 0.7f, -0.3f), {uniform({4, 3}), uniform({5, 4}), uniform({3, 5})});
  add("gemm c batched broadcast", mm(false, false, 1.f, 1.f), {uniform({2, 3, 4}), uniform({4, 5}), uniform({3, 5})},
      true);
  add("gemm beta 0", mm(false, true, 2.f, 0.f), {uniform({3, 4}), uniform({6, 4}), uniform({3, 6})});
  add("empty K", mm(), {uniform({3, 0}), uniform({0, 4})});
  add("empty K with c", mm(false, false, 1.f, 0.5f), {uniform({3, 0}), uniform({0, 4}), uniform({4})});
  add("empty batch", mm(), {uniform({0, 3, 4}), uniform({4, 2})});
  // 512-long dot products: float32 rounding differs between blocked and sequential sums.
  OpCase big{"MatrixMultiply", "256x512 @ 512x256", attrs(mm()), {uniform({256, 512}), uniform({512, 256})}};
  big.dtypes = {DataType::kFloat32};
  big.tolerance_scale = 4;
  cases.push_back(big);
  OpCase big_batched{"MatrixMultiply",
                     "batched 8x64x128 @ 128x64",
                     attrs(mm(false, true)),
                     {uniform({8, 64, 128}), uniform({64, 128})}};
  big_batched.dtypes = {DataType::kFloat32};
  big_batched.tolerance_scale = 2;
  cases.push_back(big_batched);

  // Epilogues: bias (c), residual, fused activation, alone and together.
  const FusedActivation off;
  add("epilogue residual", mm_fused(off), {uniform({3, 4}), uniform({4, 5}), absent(), uniform({3, 5})}, true);
  add("epilogue bias relu", mm_fused(fused(ActivationKind::kRelu)), {uniform({3, 4}), uniform({4, 5}), uniform({5})});
  add("epilogue gelu erf", mm_fused(fused(ActivationKind::kGelu)), {uniform({3, 4}), uniform({4, 5})});
  add("epilogue gelu tanh bias [1, n]", mm_fused(fused(ActivationKind::kGelu, 0.f, 1.f)),
      {uniform({3, 4}), uniform({4, 5}), uniform({1, 5})});
  add("epilogue alpha beta c [m, 1] residual leaky", mm_fused(fused(ActivationKind::kLeakyRelu, 0.1f), 0.5f, 2.f),
      {uniform({3, 4}), uniform({4, 5}), uniform({3, 1}), uniform({3, 5})});
  add("epilogue batch folded bias residual gelu", mm_fused(fused(ActivationKind::kGelu)),
      {uniform({6, 1, 8}), uniform({8, 12}), uniform({12}), uniform({6, 1, 12})});
  add("epilogue batched transpose_b sigmoid", mm_fused(fused(ActivationKind::kSigmoid), 1.f, 1.f, true),
      {uniform({2, 3, 4}), uniform({2, 5, 4}), uniform({5}), uniform({2, 3, 5})});
  add("epilogue selu", mm_fused(fused(ActivationKind::kSelu, 1.67326f, 1.0507f)), {uniform({3, 4}), uniform({4, 5})});
  add("epilogue clip", mm_fused(fused(ActivationKind::kClip, -0.2f, 0.3f)), {uniform({3, 4}), uniform({4, 5})});
  // Two eltwise post-ops (the mapping convolutions share): a linear step, then a clip.
  add("epilogue hard sigmoid residual", mm_fused(fused(ActivationKind::kHardSigmoid, 0.2f, 0.5f)),
      {uniform({3, 4}), uniform({4, 5}), uniform({5}), uniform({3, 5})});
  add("epilogue softsign (no oneDNN post-op)", mm_fused(fused(ActivationKind::kSoftsign)),
      {uniform({3, 4}), uniform({4, 5})});
  add("epilogue empty K", mm_fused(fused(ActivationKind::kTanh)),
      {uniform({3, 0}), uniform({0, 4}), uniform({4}), uniform({3, 4})});
  OpCase bert_qkv{"MatrixMultiply",
                  "epilogue 64x1x256 @ 256x384 bias gelu",
                  attrs(mm_fused(fused(ActivationKind::kGelu))),
                  {uniform({64, 1, 256}), uniform({256, 384}), uniform({384}), uniform({64, 1, 384})}};
  bert_qkv.dtypes = {DataType::kFloat32};
  bert_qkv.tolerance_scale = 2;
  cases.push_back(bert_qkv);
  // K over two of the packed GEMM's K blocks (384 rows) with a partial third, rows not a multiple of its six: the
  // first block adds bias and residual, the last applies the activation, the last 5 rows take the 5-row kernel.
  OpCase deep_k{"MatrixMultiply",
                "epilogue 23x1x800 @ 800x40 bias residual clip",
                attrs(mm_fused(fused(ActivationKind::kClip, -0.5f, 0.5f))),
                {uniform({23, 1, 800}), uniform({800, 40}), uniform({40}), uniform({23, 1, 40})}};
  deep_k.dtypes = {DataType::kFloat32};
  deep_k.tolerance_scale = 2;
  cases.push_back(deep_k);
  // Shapes for GEMM libraries (cuBLASLt): K not a multiple of 8, 3-D x 2-D folded into one GEMM, batch dims
  // broadcasting both ways (several strided batches), and each epilogue (bias, residual, fused ReLU / tanh GELU, an
  // activation the library lacks) in every float type.
  auto add_mid = [&](std::string name, MatrixMultiplyAttrs a, std::vector<InputSpec> in) {
    OpCase c{"MatrixMultiply", std::move(name), attrs(a), std::move(in)};
    c.tolerance_scale = 2;
    cases.push_back(std::move(c));
  };
  add_mid("3-D x 2-D K 13 bias gelu tanh residual", mm_fused(fused(ActivationKind::kGelu, 0.f, 1.f)),
          {uniform({3, 5, 13}), uniform({13, 24}), uniform({24}), uniform({3, 5, 24})});
  add_mid("batches [2, 1] x [1, 3] K 9 bias relu", mm_fused(fused(ActivationKind::kRelu)),
          {uniform({2, 1, 6, 9}), uniform({1, 3, 9, 10}), uniform({10}), absent()});
  add_mid("batched transpose both K 7 residual", mm(true, true),
          {uniform({4, 7, 5}), uniform({4, 6, 7}), absent(), uniform({4, 5, 6})});
  add_mid("48x96 @ 96x40 bias relu", mm_fused(fused(ActivationKind::kRelu)),
          {uniform({48, 96}), uniform({96, 40}), uniform({40})});
  add_mid("48x96 @ 96x40 gelu tanh", mm_fused(fused(ActivationKind::kGelu, 0.f, 1.f)),
          {uniform({48, 96}), uniform({96, 40})});
  add_mid("48x96 @ 96x40 bias gelu erf residual", mm_fused(fused(ActivationKind::kGelu)),
          {uniform({48, 96}), uniform({96, 40}), uniform({40}), uniform({48, 40})});
  add_mid("48x96 @ 96x40 alpha beta c full tanh", mm_fused(fused(ActivationKind::kTanh), 0.5f, -1.5f),
          {uniform({48, 96}), uniform({96, 40}), uniform({48, 40})});
  add_mid("batch 2 x 40x33 @ 33x17 c [40, 1] residual softsign", mm_fused(fused(ActivationKind::kSoftsign)),
          {uniform({2, 40, 33}), uniform({2, 33, 17}), uniform({40, 1}), uniform({2, 40, 17})});
  {
    OpCase c{"FullyConnected",
             "K 77 bias gelu tanh residual",
             attrs(fc_fused(1, fused(ActivationKind::kGelu, 0, 1))),
             {uniform({10, 77}), uniform({33, 77}), uniform({33}), uniform({10, 33})}};
    c.tolerance_scale = 2;
    cases.push_back(std::move(c));
  }
  cases.push_back({"FullyConnected",
                   "epilogue residual relu",
                   attrs(fc_fused(1, fused(ActivationKind::kRelu))),
                   {uniform({4, 6}), uniform({5, 6}), uniform({5}), uniform({4, 5})}});
  cases.push_back({"FullyConnected",
                   "epilogue gelu tanh no bias",
                   attrs(fc_fused(-1, fused(ActivationKind::kGelu, 0, 1))),
                   {uniform({2, 3, 8}), uniform({4, 8}), absent()}});
  cases.push_back({"FullyConnected",
                   "epilogue residual only",
                   attrs(fc(1)),
                   {uniform({2, 3, 4}), uniform({7, 12}), absent(), uniform({2, 7})}});
  cases.push_back({"FullyConnected",
                   "epilogue empty K swish",
                   attrs(fc_fused(1, fused(ActivationKind::kSilu, 1.f))),
                   {uniform({3, 0}), uniform({5, 0}), uniform({5}), uniform({3, 5})}});
  cases.push_back({"FullyConnected", "[4, 6] bias", attrs(fc(1)), {uniform({4, 6}), uniform({5, 6}), uniform({5})}});
  cases.push_back({"FullyConnected", "[4, 6] no bias", attrs(fc(1)), {uniform({4, 6}), uniform({5, 6})}});
  cases.push_back(
      {"FullyConnected", "NCHW flatten axis 1", attrs(fc(1)), {uniform({2, 3, 4, 4}), uniform({7, 48}), uniform({7})}});
  cases.push_back({"FullyConnected", "axis 2", attrs(fc(2)), {uniform({2, 3, 4, 5}), uniform({6, 20}), uniform({6})}});
  cases.push_back({"FullyConnected", "axis -1", attrs(fc(-1)), {uniform({2, 3, 8}), uniform({4, 8}), absent()}});
  cases.push_back({"FullyConnected", "axis 0", attrs(fc(0)), {uniform({3, 4}), uniform({2, 12}), uniform({2})}});
  cases.push_back({"FullyConnected", "empty batch", attrs(fc(1)), {uniform({0, 6}), uniform({5, 6}), uniform({5})}});
  OpCase big_fc{
      "FullyConnected", "64x1024 -> 512", attrs(fc(1)), {uniform({64, 1024}), uniform({512, 1024}), uniform({512})}};
  big_fc.dtypes = {DataType::kFloat32};
  big_fc.tolerance_scale = 4;  // 1024-long dot products
  cases.push_back(big_fc);
  return cases;
}

}  // namespace kiln::harness
