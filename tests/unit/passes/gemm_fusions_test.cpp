// The GEMM fusions: gelu-pattern, batchnorm-folding-gemm, gemm-bias, gemm-elementwise-sum, gemm-activation, mlp.
// Each on a graph where it applies (report line, resulting op and attributes, same outputs as unoptimized) and on
// one where its restriction forbids it.
#include <gtest/gtest.h>
#include <set>

#include <random>

#include "kernels/cpu/cpu_features.h"
#include "onnx/exporter.h"
#include "ops/activation/activation.h"
#include "ops/elementwise/elementwise.h"
#include "ops/matmul/matmul.h"
#include "ops/mlp/mlp.h"
#include "ops/normalization/normalization.h"
#include "ops/unary/unary.h"
#include "pass_test_util.h"

namespace kiln {
namespace {

using pass_test::applied_by;
using pass_test::expect_same_as_unoptimized;
using pass_test::refused_by;

Tensor random_tensor(Dims dims, unsigned seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Tensor t = Tensor::empty(DataType::kFloat32, dims).value();
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}
Tensor scalar(float v) {
  Tensor t = Tensor::empty(DataType::kFloat32, {}).value();
  t.data<float>()[0] = v;
  return t;
}

// Builds graphs by hand with short calls.
struct G {
  std::unique_ptr<Graph> g = std::make_unique<Graph>();
  int constants = 0;

  Value* input(const std::string& name, Dims dims) { return *g->add_input(name, DataType::kFloat32, dims); }
  Value* constant(Tensor t, std::string name = "") {
    if (name.empty()) name = str_cat("k", constants++);
    return *g->add_constant(name, std::move(t));
  }
  Value* ew(const std::string& name, ElementWiseOp op, Value* a, Value* b) {
    return (*g->add_node("ElementWise", name, std::make_unique<ElementWiseAttrs>(elementwise_attrs(op)), {a, b}))
        ->outputs[0];
  }
  Value* act(const std::string& name, ActivationKind kind, Value* x, float beta = 0.f) {
    ActivationAttrs a = activation_defaults(kind);
    if (beta != 0.f) a.beta = beta;
    return (*g->add_node("Activation", name, std::make_unique<ActivationAttrs>(a), {x}))->outputs[0];
  }
  Value* unary(const std::string& name, UnaryOp op, Value* x) {
    return (*g->add_node("Unary", name, std::make_unique<UnaryAttrs>(unary_attrs(op)), {x}))->outputs[0];
  }
  Value* matmul(const std::string& name, Value* a, Value* b, Value* c = nullptr, MatrixMultiplyAttrs attrs = {}) {
    std::vector<Value*> in = {a, b};
    if (c) in.push_back(c);
    return (*g->add_node("MatrixMultiply", name, std::make_unique<MatrixMultiplyAttrs>(attrs), in))->outputs[0];
  }
  Value* fc(const std::string& name, Value* x, Value* w, Value* bias = nullptr, int64_t axis = 1) {
    FullyConnectedAttrs a;
    a.axis = axis;
    std::vector<Value*> in = {x, w};
    if (bias) in.push_back(bias);
    return (*g->add_node("FullyConnected", name, std::make_unique<FullyConnectedAttrs>(a), in))->outputs[0];
  }
  Graph& output(Value* v) {
    EXPECT_TRUE(g->mark_output(v).is_ok());
    return *g;
  }
};

// The graph after the optimizer with the CPU backend's hook (as the builder runs it), and its report.
struct Optimized {
  std::unique_ptr<Graph> graph;
  OptimizerReport report;
};
Optimized optimize(const Graph& g, std::set<std::string> disabled = {}) {
  Optimized o{g.clone(), {}};
  PassOptions options;
  options.backend = backend_hook(Backend::kCpu);
  options.disabled = std::move(disabled);
  EXPECT_TRUE(run_passes(*o.graph, options, &o.report).is_ok());
  return o;
}

const Node* only_node(const Graph& g) {
  EXPECT_EQ(g.nodes().size(), 1u) << g.to_text();
  return g.nodes().empty() ? nullptr : g.nodes()[0];
}

bool contains(const std::vector<std::string>& lines, const std::string& part) {
  for (const std::string& l : lines)
    if (l.find(part) != std::string::npos) return true;
  return false;
}

// ---- gelu-pattern

// BERT's export: Div(x, 1.4142), Erf, Add 1, Mul x, Mul 0.5.
TEST(GeluPattern, BertErfExportBecomesOneGelu) {
  G b;
  Value* x = b.input("x", {4, 16});
  Value* d = b.ew("div", ElementWiseOp::kDiv, x, b.constant(scalar(1.4142135f)));
  Value* e = b.unary("erf", UnaryOp::kErf, d);
  Value* a = b.ew("add", ElementWiseOp::kSum, e, b.constant(scalar(1.f)));
  Value* m = b.ew("mul", ElementWiseOp::kProd, x, a);
  Graph& g = b.output(b.ew("mul_half", ElementWiseOp::kProd, m, b.constant(scalar(0.5f))));
  Optimized o = optimize(g);
  EXPECT_EQ(applied_by(o.report, "gelu-pattern"),
            std::vector<std::string>{"fused 'div' + 'erf' + 'add' + 'mul' + 'mul_half' into one GELU (erf form)"});
  const Node* n = only_node(*o.graph);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->op(), "Activation");
  EXPECT_EQ(n->name, "div + erf + add + mul + mul_half");
  const auto& attrs = static_cast<const ActivationAttrs&>(*n->attrs);
  EXPECT_EQ(attrs.kind, ActivationKind::kGelu);
  EXPECT_EQ(attrs.beta, 0.f);
  EXPECT_EQ(n->outputs[0]->name, g.outputs()[0]->name);
  expect_same_as_unoptimized(g, 1e-5);
}

// PyTorch's `x * 0.5 * (1 + erf(x * 0.7071))`: the half first, multiply inside erf, constants first.
TEST(GeluPattern, HalfFirstAndMultiplyByInverseSqrt2) {
  G b;
  Value* x = b.input("x", {3, 8});
  Value* h = b.ew("half", ElementWiseOp::kProd, b.constant(scalar(0.5f)), x);
  Value* d = b.ew("scale", ElementWiseOp::kProd, x, b.constant(scalar(0.70710677f)));
  Value* e = b.unary("erf", UnaryOp::kErf, d);
  Value* a = b.ew("one_plus", ElementWiseOp::kSum, b.constant(scalar(1.f)), e);
  Graph& g = b.output(b.ew("y", ElementWiseOp::kProd, h, a));
  Optimized o = optimize(g);
  EXPECT_EQ(applied_by(o.report, "gelu-pattern").size(), 1u);
  const Node* n = only_node(*o.graph);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(static_cast<const ActivationAttrs&>(*n->attrs).kind, ActivationKind::kGelu);
  expect_same_as_unoptimized(g, 1e-5);
}

// The tanh form with Pow(x, 3) (an integer 3) and with x * x * x; x * (0.5 * (1 + tanh)) order.
TEST(GeluPattern, TanhFormWithPowAndWithProducts) {
  for (bool pow : {true, false}) {
    SCOPED_TRACE(pow ? "Pow" : "x*x*x");
    G b;
    Value* x = b.input("x", {2, 12});
    Tensor three = Tensor::empty(DataType::kInt64, {}).value();  // exporters write it as float or integer
    three.data<int64_t>()[0] = 3;
    Value* cube = pow ? b.ew("pow", ElementWiseOp::kPow, x, b.constant(three))
                      : b.ew("cube", ElementWiseOp::kProd, b.ew("square", ElementWiseOp::kProd, x, x), x);
    Value* t = b.ew("coef", ElementWiseOp::kProd, b.constant(scalar(0.044715f)), cube);
    Value* s = b.ew("inner", ElementWiseOp::kSum, x, t);
    Value* k = b.ew("sqrt_2_pi", ElementWiseOp::kProd, s, b.constant(scalar(0.7978846f)));
    Value* th = b.act("tanh", ActivationKind::kTanh, k);
    Value* a = b.ew("one_plus", ElementWiseOp::kSum, th, b.constant(scalar(1.f)));
    Value* q = b.ew("half", ElementWiseOp::kProd, a, b.constant(scalar(0.5f)));
    Graph& g = b.output(b.ew("y", ElementWiseOp::kProd, x, q));
    Optimized o = optimize(g);
    ASSERT_EQ(applied_by(o.report, "gelu-pattern").size(), 1u);
    EXPECT_NE(applied_by(o.report, "gelu-pattern")[0].find("(tanh form)"), std::string::npos);
    const Node* n = only_node(*o.graph);
    ASSERT_NE(n, nullptr);
    const auto& attrs = static_cast<const ActivationAttrs&>(*n->attrs);
    EXPECT_EQ(attrs.kind, ActivationKind::kGelu);
    EXPECT_EQ(attrs.beta, 1.f);
    expect_same_as_unoptimized(g, 1e-5);
  }
}

// Another constant (a divisor of 1.5; a cube coefficient of 0.045) is refused with the reason.
TEST(GeluPattern, RefusesNearMissConstants) {
  G b;
  Value* x = b.input("x", {4, 16});
  Value* d = b.ew("div", ElementWiseOp::kDiv, x, b.constant(scalar(1.5f)));
  Value* e = b.unary("erf", UnaryOp::kErf, d);
  Value* a = b.ew("add", ElementWiseOp::kSum, e, b.constant(scalar(1.f)));
  Value* m = b.ew("mul", ElementWiseOp::kProd, x, a);
  Value* y1 = b.ew("mul_half", ElementWiseOp::kProd, m, b.constant(scalar(0.5f)));
  Value* cube = b.ew("pow", ElementWiseOp::kPow, x, b.constant(scalar(3.f)));
  Value* t = b.ew("coef", ElementWiseOp::kProd, cube, b.constant(scalar(0.045f)));
  Value* s = b.ew("inner", ElementWiseOp::kSum, t, x);
  Value* th = b.act("tanh", ActivationKind::kTanh, b.ew("k", ElementWiseOp::kProd, s, b.constant(scalar(0.7978846f))));
  Value* a2 = b.ew("one_plus", ElementWiseOp::kSum, th, b.constant(scalar(1.f)));
  Value* y2 = b.ew("y2", ElementWiseOp::kProd, b.ew("h", ElementWiseOp::kProd, x, b.constant(scalar(0.5f))), a2);
  b.output(y1);
  Graph& g = b.output(y2);
  Optimized o = optimize(g, {"pointwise-chain"});  // which would take the near misses as pointwise chains
  EXPECT_TRUE(applied_by(o.report, "gelu-pattern").empty());
  const auto refused = refused_by(o.report, "gelu-pattern");
  EXPECT_TRUE(contains(refused, "'div' + 'erf' + 'add' + 'mul' + 'mul_half' into GELU (erf form): the divisor is 1.5"))
      << testing::PrintToString(refused);
  EXPECT_TRUE(contains(refused, "the cube's coefficient is 0.045")) << testing::PrintToString(refused);
  EXPECT_EQ(o.graph->nodes().size(), g.nodes().size());
}

// ---- gemm-bias

TEST(GemmBias, ConstantOverTheLastAxisBecomesTheBias) {
  G b;
  Value* x = b.input("x", {2, 4, 8});
  Value* mm = b.matmul("mm", x, b.constant(random_tensor({8, 6}, 1), "w"));
  Value* y = b.ew("add", ElementWiseOp::kSum, b.constant(random_tensor({6}, 2), "bias"), mm);  // constant first
  Value* x2 = b.input("x2", {3, 8});
  Value* fc = b.fc("fc", x2, b.constant(random_tensor({5, 8}, 3), "w2"));
  Value* y2 = b.ew("fc_add", ElementWiseOp::kSum, fc, b.constant(random_tensor({1, 5}, 4), "bias2"));
  b.output(y);
  Graph& g = b.output(y2);
  Optimized o = optimize(g);
  EXPECT_EQ(applied_by(o.report, "gemm-bias"),
            (std::vector<std::string>{"fused 'mm' + 'add' ('bias' of shape [6] as the bias)",
                                      "fused 'fc' + 'fc_add' ('bias2' of shape [1, 5] as the bias)"}));
  const Node* mm_add = o.graph->find_node("mm + add");
  ASSERT_NE(mm_add, nullptr);
  EXPECT_EQ(mm_add->op(), "MatrixMultiply");
  ASSERT_EQ(mm_add->inputs.size(), 3u);
  EXPECT_EQ(mm_add->inputs[2]->name, "bias");
  EXPECT_EQ(static_cast<const MatrixMultiplyAttrs&>(*mm_add->attrs).beta, 1.f);
  const Node* fc_add = o.graph->find_node("fc + fc_add");
  ASSERT_NE(fc_add, nullptr);
  ASSERT_EQ(fc_add->inputs.size(), 3u);
  EXPECT_EQ(fc_add->inputs[2]->dims, Dims({5}));     // a new [5] constant; bias2 stays as it was
  EXPECT_EQ(o.graph->find_value("bias2"), nullptr);  // unused now: dead-code drops it
  expect_same_as_unoptimized(g, 1e-5);
}

TEST(GemmBias, RefusesAConstantThatIsNotPerColumn) {
  G b;
  Value* x = b.input("x", {4, 8});
  Value* mm = b.matmul("mm", x, b.constant(random_tensor({8, 6}, 1), "w"));
  Graph& g = b.output(b.ew("add", ElementWiseOp::kSum, mm, b.constant(random_tensor({4, 1}, 2), "rows")));
  Optimized o = optimize(g);
  EXPECT_TRUE(applied_by(o.report, "gemm-bias").empty());
  EXPECT_EQ(refused_by(o.report, "gemm-bias"),
            std::vector<std::string>{"fusing 'mm' + 'add': the constant 'rows' of shape [4, 1] is not a bias over the "
                                     "output's last axis ([4, 6]; a bias is [n] or [1, ..., n])"});
  EXPECT_TRUE(contains(refused_by(o.report, "gemm-elementwise-sum"), "a residual must have the output's exact shape"));
  EXPECT_EQ(o.graph->nodes().size(), 2u);
  expect_same_as_unoptimized(g, 1e-5);
}

// ---- gemm-elementwise-sum

// BERT's attention output: MatMul + bias + residual add (before LayerNorm), batch [128, 1, 768] x [768, 2304] in
// small: one fused MatrixMultiply whose batch is still folded into one GEMM.
TEST(GemmElementwiseSum, BertBiasAndResidualBecomeOneLayer) {
  G b;
  Value* x = b.input("x", {16, 1, 32});
  Value* res = b.input("res", {16, 1, 48});
  Value* mm = b.matmul("mm", x, b.constant(random_tensor({32, 48}, 1), "w"));
  Value* biased = b.ew("add_bias", ElementWiseOp::kSum, mm, b.constant(random_tensor({48}, 2), "bias"));
  Graph& g = b.output(b.ew("add_res", ElementWiseOp::kSum, res, biased));
  Optimized o = optimize(g);
  EXPECT_EQ(applied_by(o.report, "gemm-elementwise-sum"),
            std::vector<std::string>{"fused 'mm + add_bias' + 'add_res' ('res' as the residual)"});
  const Node* n = only_node(*o.graph);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->name, "mm + add_bias + add_res");
  ASSERT_EQ(n->inputs.size(), 4u);
  EXPECT_EQ(n->inputs[2]->name, "bias");
  EXPECT_EQ(n->inputs[kGemmResidualInput]->name, "res");
  pass_test::Built built = expect_same_as_unoptimized(g, 1e-5);
  EXPECT_NE(built.engine_inspect.find("mm + add_bias + add_res"), std::string::npos) << built.engine_inspect;
}

TEST(GemmElementwiseSum, RefusesABroadcastingSum) {
  G b;
  Value* x = b.input("x", {4, 8});
  Value* row = b.input("row", {1, 6});
  Value* mm = b.matmul("mm", x, b.constant(random_tensor({8, 6}, 1), "w"));
  Graph& g = b.output(b.ew("add", ElementWiseOp::kSum, mm, row));
  Optimized o = optimize(g);
  EXPECT_TRUE(applied_by(o.report, "gemm-elementwise-sum").empty());
  EXPECT_EQ(refused_by(o.report, "gemm-elementwise-sum"),
            std::vector<std::string>{"fusing 'mm' + 'add': 'row' of shape [1, 6] broadcasts with the output [4, 6]; a "
                                     "residual must have the output's exact shape"});
  EXPECT_EQ(o.graph->nodes().size(), 2u);
}

// ---- gemm-activation

TEST(GemmActivation, FullyConnectedReluAndMatmulGelu) {
  G b;
  Value* x = b.input("x", {4, 8});
  Value* ip1 = b.fc("ip1", x, b.constant(random_tensor({6, 8}, 1), "w1"), b.constant(random_tensor({6}, 2), "b1"));
  Value* relu1 = b.act("relu1", ActivationKind::kRelu, ip1);
  Value* x2 = b.input("x2", {2, 3, 8});
  Value* mm = b.matmul("mm", x2, b.constant(random_tensor({8, 5}, 3), "w2"));
  Value* gelu = b.act("gelu", ActivationKind::kGelu, mm, 1.f);  // tanh form
  b.output(relu1);
  Graph& g = b.output(gelu);
  Optimized o = optimize(g);
  EXPECT_EQ(applied_by(o.report, "gemm-activation"),
            (std::vector<std::string>{"fused 'ip1' + 'relu1' (relu as the epilogue)",
                                      "fused 'mm' + 'gelu' (gelu as the epilogue)"}));
  const Node* ip = o.graph->find_node("ip1 + relu1");
  ASSERT_NE(ip, nullptr);
  EXPECT_EQ(ip->op(), "FullyConnected");
  const FusedActivation& f = static_cast<const FullyConnectedAttrs&>(*ip->attrs).fused;
  EXPECT_TRUE(f.on);
  EXPECT_EQ(f.kind, ActivationKind::kRelu);
  const Node* mg = o.graph->find_node("mm + gelu");
  ASSERT_NE(mg, nullptr);
  const FusedActivation& fg = static_cast<const MatrixMultiplyAttrs&>(*mg->attrs).fused;
  EXPECT_EQ(fg.kind, ActivationKind::kGelu);
  EXPECT_EQ(fg.beta, 1.f);
  expect_same_as_unoptimized(g, 1e-5);
}

// Softsign has no oneDNN post-op: it fuses only where cpu.packed_matrix_multiply runs (AVX2 and FMA), which applies
// any activation; PRelu takes its slope as an input and never fuses.
TEST(GemmActivation, FusesWhatACpuKernelAppliesAndRefusesTheRest) {
  G b;
  Value* x = b.input("x", {4, 8});
  Value* mm = b.matmul("mm", x, b.constant(random_tensor({8, 6}, 1), "w"));
  Value* soft = b.act("soft", ActivationKind::kSoftsign, mm);
  Value* ip = b.fc("ip", x, b.constant(random_tensor({6, 8}, 2), "w2"));
  Value* prelu = (*b.g->add_node("Activation", "prelu",
                                 std::make_unique<ActivationAttrs>(activation_defaults(ActivationKind::kPRelu)),
                                 {ip, b.constant(random_tensor({6}, 3, 0.f, 0.5f), "slope")}))
                     ->outputs[0];
  b.output(soft);
  Graph& g = b.output(prelu);
  Optimized o = optimize(g);
  const auto refused = refused_by(o.report, "gemm-activation");
  if (cpu::has_avx2_fma()) {
    EXPECT_NE(o.graph->find_node("mm + soft"), nullptr);
    EXPECT_EQ(o.graph->nodes().size(), 3u);
  } else {
    EXPECT_TRUE(applied_by(o.report, "gemm-activation").empty());
    EXPECT_TRUE(contains(refused, "fusing 'mm' + 'soft': ")) << testing::PrintToString(refused);
    EXPECT_TRUE(contains(refused, "oneDNN has no eltwise post-op for a fused softsign"))
        << testing::PrintToString(refused);
    EXPECT_EQ(o.graph->nodes().size(), 4u);
  }
  EXPECT_TRUE(contains(refused, "fusing 'ip' + 'prelu': PRelu's slope is an input")) << testing::PrintToString(refused);
  expect_same_as_unoptimized(g, 1e-5);
}

// ---- batchnorm-folding-gemm

Node* add_batchnorm(G& b, const std::string& name, Value* x, int64_t c, unsigned seed) {
  std::vector<Value*> in = {x, b.constant(random_tensor({c}, seed, 0.5f, 1.5f)),
                            b.constant(random_tensor({c}, seed + 1)), b.constant(random_tensor({c}, seed + 2)),
                            b.constant(random_tensor({c}, seed + 3, 0.1f, 2.f))};
  return *b.g->add_node("BatchNormalization", name, std::make_unique<BatchNormalizationAttrs>(), in);
}

TEST(BatchnormFoldingGemm, FoldsIntoFullyConnectedAndTransposedMatmul) {
  G b;
  Value* x = b.input("x", {4, 8});
  Value* fc = b.fc("fc", x, b.constant(random_tensor({6, 8}, 1), "w1"), b.constant(random_tensor({6}, 2), "b1"));
  Node* bn1 = add_batchnorm(b, "bn1", fc, 6, 10);
  MatrixMultiplyAttrs t;
  t.transpose_b = true;
  t.alpha = 0.5f;
  t.beta = 2.f;
  Value* mm = b.matmul("mm", x, b.constant(random_tensor({5, 8}, 3), "w2"), b.constant(random_tensor({5}, 4), "c2"), t);
  Node* bn2 = add_batchnorm(b, "bn2", mm, 5, 20);
  b.output(bn1->outputs[0]);
  Graph& g = b.output(bn2->outputs[0]);
  Optimized o = optimize(g);
  EXPECT_EQ(applied_by(o.report, "batchnorm-folding-gemm"),
            (std::vector<std::string>{
                "folded 'fc' + 'bn1' into new weights 'fc/bn_folded_weights' and bias 'fc/bn_folded_bias'",
                "folded 'mm' + 'bn2' into new weights 'mm/bn_folded_weights' and bias 'mm/bn_folded_bias'"}));
  const Node* n = o.graph->find_node("mm + bn2");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->op(), "MatrixMultiply");
  EXPECT_EQ(n->inputs[1]->name, "mm/bn_folded_weights");
  EXPECT_EQ(static_cast<const MatrixMultiplyAttrs&>(*n->attrs).beta, 1.f);
  EXPECT_EQ(o.graph->find_value("w2"), nullptr);                 // the old weights are unused now
  EXPECT_EQ(g.find_value("w2")->constant.dims(), Dims({5, 8}));  // and the caller's are as they were
  expect_same_as_unoptimized(g, 1e-5);
}

TEST(BatchnormFoldingGemm, RefusesANormOverAnotherAxis) {
  G b;
  Value* x = b.input("x", {2, 3, 8});
  Value* mm = b.matmul("mm", x, b.constant(random_tensor({8, 6}, 1), "w"));
  Graph& g = b.output(add_batchnorm(b, "bn", mm, 3, 10)->outputs[0]);
  Optimized o = optimize(g);
  EXPECT_TRUE(applied_by(o.report, "batchnorm-folding-gemm").empty());
  EXPECT_EQ(refused_by(o.report, "batchnorm-folding-gemm"),
            std::vector<std::string>{"folding 'mm' + 'bn': batch norm normalizes axis 1, which is the output's last "
                                     "axis only for 2-D outputs (output [2, 3, 6])"});
  expect_same_as_unoptimized(g, 1e-5);
}

// ---- mlp

// ip1 + relu1, ip2 + relu2, ip3 (bias only): one 3-layer MLP named by its parts, keeping the output's name.
TEST(MlpFusion, ThreeFullyConnectedLayersBecomeOneMlp) {
  G b;
  Value* h = b.input("x", {5, 8});
  const std::vector<int64_t> widths = {8, 16, 12, 4};
  for (int l = 0; l < 3; ++l) {
    const std::string i = std::to_string(l + 1);
    h = b.fc("ip" + i, h, b.constant(random_tensor({widths[l + 1], widths[l]}, 10 * l)),
             b.constant(random_tensor({widths[l + 1]}, 10 * l + 1)));
    if (l < 2) h = b.act("relu" + i, ActivationKind::kRelu, h);
  }
  Graph& g = b.output(h);
  Optimized o = optimize(g);
  EXPECT_EQ(applied_by(o.report, "mlp"),
            std::vector<std::string>{"fused 'ip1 + relu1' + 'ip2 + relu2' + 'ip3' into a 3-layer MLP"});
  const Node* n = only_node(*o.graph);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->op(), "MLP");
  EXPECT_EQ(n->name, "ip1 + relu1 + ip2 + relu2 + ip3");
  EXPECT_EQ(n->outputs[0]->name, g.outputs()[0]->name);
  EXPECT_EQ(n->inputs.size(), 7u);
  const auto& a = static_cast<const MlpAttrs&>(*n->attrs);
  EXPECT_EQ(a.activation_kinds,
            (std::vector<int64_t>{static_cast<int64_t>(ActivationKind::kRelu),
                                  static_cast<int64_t>(ActivationKind::kRelu), MlpAttrs::kNoActivation}));
  pass_test::Built built = expect_same_as_unoptimized(g, 1e-5);
  EXPECT_NE(built.engine_inspect.find("cpu.onednn.mlp"), std::string::npos) << built.engine_inspect;
}

// MatMul + bias + GELU, MatMul (transposed, scaled) + bias over a batch: the weights become [out, in] constants.
TEST(MlpFusion, MatmulLayersWithBiasAddsAndGelu) {
  G b;
  Value* x = b.input("x", {2, 3, 6});
  Value* mm1 = b.matmul("mm1", x, b.constant(random_tensor({6, 10}, 1), "w1"));
  Value* h =
      b.act("gelu", ActivationKind::kGelu, b.ew("bias1", ElementWiseOp::kSum, mm1, b.constant(random_tensor({10}, 2))));
  MatrixMultiplyAttrs t;
  t.transpose_b = true;
  t.alpha = 0.5f;
  Value* mm2 = b.matmul("mm2", h, b.constant(random_tensor({4, 10}, 3), "w2"), nullptr, t);
  Graph& g = b.output(b.ew("bias2", ElementWiseOp::kSum, mm2, b.constant(random_tensor({1, 1, 4}, 4))));
  Optimized o = optimize(g);
  EXPECT_EQ(applied_by(o.report, "mlp"),
            std::vector<std::string>{"fused 'mm1 + bias1 + gelu' + 'mm2 + bias2' into a 2-layer MLP"});
  const Node* n = only_node(*o.graph);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->inputs[1]->dims, Dims({10, 6}));
  EXPECT_EQ(n->inputs[3]->dims, Dims({4, 10}));
  EXPECT_EQ(n->inputs[4]->dims, Dims({4}));
  expect_same_as_unoptimized(g, 1e-5);
}

// One layer stays a fused gemm (a 1-layer MLP, logged at verbose); a gemm with neither bias nor activation breaks a
// chain.
TEST(MlpFusion, SingleLayerStaysAndAPlainGemmBreaksTheChain) {
  G b;
  Value* x = b.input("x", {4, 8});
  Value* ip1 = b.fc("ip1", x, b.constant(random_tensor({6, 8}, 1)), b.constant(random_tensor({6}, 2)));
  Value* relu1 = b.act("relu1", ActivationKind::kRelu, ip1);
  Graph& g = b.output(b.fc("ip2", relu1, b.constant(random_tensor({3, 6}, 3))));
  Optimized o = optimize(g);
  EXPECT_TRUE(applied_by(o.report, "mlp").empty());  // a 1-layer MLP stays as it is (a verbose line says so)
  EXPECT_EQ(refused_by(o.report, "mlp"),
            std::vector<std::string>{"chaining 'ip1 + relu1' + 'ip2': 'ip2' is not an MLP layer: it has neither a "
                                     "bias nor an activation"});
  EXPECT_EQ(o.graph->nodes().size(), 2u);
  ASSERT_NE(o.graph->find_node("ip1 + relu1"), nullptr);
  EXPECT_EQ(o.graph->find_node("ip1 + relu1")->op(), "FullyConnected");
  expect_same_as_unoptimized(g, 1e-5);
}

// 33 layers: a 31-layer MLP, then a 2-layer one.
TEST(MlpFusion, ChainsStopAt31Layers) {
  G b;
  Value* h = b.input("x", {2, 4});
  for (int l = 0; l < 33; ++l)
    h = b.act(str_cat("relu", l), ActivationKind::kRelu,
              b.fc(str_cat("ip", l), h, b.constant(random_tensor({4, 4}, l)), b.constant(random_tensor({4}, 100 + l))));
  Graph& g = b.output(h);
  Optimized o = optimize(g);
  const auto applied = applied_by(o.report, "mlp");
  ASSERT_EQ(applied.size(), 2u);
  EXPECT_NE(applied[0].find("into a 31-layer MLP"), std::string::npos);
  EXPECT_EQ(applied[1], "fused 'ip31 + relu31' + 'ip32 + relu32' into a 2-layer MLP");
  EXPECT_EQ(o.graph->nodes().size(), 2u);
  expect_same_as_unoptimized(g, 1e-5);
}

// ---- the ONNX exporter refuses what ONNX cannot express

TEST(GemmFusionsExport, RefusesEpiloguesAndMlps) {
  G b;
  Value* x = b.input("x", {4, 8});
  Value* mm = b.matmul("mm", x, b.constant(random_tensor({8, 6}, 1), "w"));
  Value* r1 = b.act("relu1", ActivationKind::kRelu, mm);
  Value* ip = b.matmul("ip", r1, b.constant(random_tensor({6, 3}, 2)));
  b.output(b.ew("ip_bias", ElementWiseOp::kSum, ip, b.constant(random_tensor({3}, 3))));
  Value* mm2 = b.matmul("mm2", x, b.constant(random_tensor({8, 6}, 4), "w2"));
  Graph& g = b.output(b.act("relu2", ActivationKind::kRelu, mm2));
  Optimized o = optimize(g);
  ASSERT_NE(o.graph->find_node("mm + relu1 + ip + ip_bias"), nullptr) << o.graph->to_text();
  auto exported = onnx_export::export_model(*o.graph);
  ASSERT_FALSE(exported.is_ok());
  const std::string& why = exported.status().message();
  EXPECT_NE(why.find("'mm + relu1 + ip + ip_bias' (MLP): MLP is a layer chain fused by the optimizer"),
            std::string::npos)
      << why;
  EXPECT_NE(
      why.find("'mm2 + relu2' (MatrixMultiply): this MatrixMultiply has an optimizer epilogue (fused activation)"),
      std::string::npos)
      << why;
  EXPECT_TRUE(onnx_export::export_model(g).is_ok());  // the graph before optimizing exports
}

}  // namespace
}  // namespace kiln
