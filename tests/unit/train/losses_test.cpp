// Loss ops against PyTorch 1.13 (numbers from torch.nn.functional in float64 on the same inputs), and their
// gradient rules (through build_training_graph) against PyTorch and central finite differences, on the
// reference and CPU backends.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "ops/loss/loss.h"
#include "runner/graph_runner.h"
#include "train/autograd.h"

namespace kiln::train {
namespace {

/// a * sin(b * i + c) over the flat index, rounded to float32 (the Python side makes the same values).
Tensor wave(const Dims& dims, double a, double b, double c) {
  Tensor t = *Tensor::empty(DataType::kFloat32, dims);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(a * std::sin(b * i + c));
  return t;
}
Tensor floats(const Dims& dims, const std::vector<float>& v) {
  Tensor t = *Tensor::empty(DataType::kFloat32, dims);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}
Tensor int64s(const Dims& dims, const std::vector<int64_t>& v) {
  Tensor t = *Tensor::empty(DataType::kInt64, dims);
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}
std::vector<float> values(const Tensor& t) { return {t.data<float>(), t.data<float>() + t.numel()}; }

/// One input of the loss node: a parameter (a graph input differentiated), a constant, or absent.
struct In {
  std::string name;
  Tensor value;  ///< undefined: absent
  bool param = false;
};

Result<std::unique_ptr<Graph>> loss_graph(const std::string& op, const Attrs& attrs, const std::vector<In>& ins) {
  auto g = std::make_unique<Graph>();
  std::vector<Value*> values;
  for (const In& in : ins) {
    if (!in.value.defined()) {
      values.push_back(nullptr);
      continue;
    }
    KILN_ASSIGN_OR_RETURN(Value * v, in.param ? g->add_input(in.name, in.value.dtype(), in.value.dims())
                                              : g->add_constant(in.name, *in.value.clone()));
    values.push_back(v);
  }
  KILN_ASSIGN_OR_RETURN(Node * n, g->add_node(op, "loss", attrs.clone(), values));
  KILN_RETURN_IF_ERROR(g->mark_output(n->outputs[0]));
  return g;
}

Result<GraphRunner> compile(const Graph& g, Backend backend) {
  if (backend == Backend::kRef) return GraphRunner::compile_reference(g);
  BuildOptions options;
  options.backend = backend;
  options.optimization_level = 0;
  options.reference_fallback = false;
  return GraphRunner::compile(g, options);
}

/// The loss node's output on `backend`.
std::vector<float> forward(const std::string& op, const Attrs& attrs, const std::vector<In>& ins, Backend backend) {
  auto g = loss_graph(op, attrs, ins);
  EXPECT_TRUE(g.is_ok()) << g.status().to_string();
  if (!g.is_ok()) return {};
  auto runner = compile(**g, backend);
  EXPECT_TRUE(runner.is_ok()) << runner.status().to_string();
  if (!runner.is_ok()) return {};
  for (const In& in : ins) {
    if (in.param) {
      EXPECT_TRUE(runner->set_input(in.name, in.value).is_ok());
    }
  }
  Status st = runner->run();
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  auto out = runner->output("loss:0");
  EXPECT_TRUE(out.is_ok()) << out.status().to_string();
  return out.is_ok() ? values(*out) : std::vector<float>{};
}

/// The loss and the gradient of each parameter from the training graph on `backend`.
std::map<std::string, std::vector<float>> gradients(const std::string& op, const Attrs& attrs,
                                                    const std::vector<In>& ins, Backend backend) {
  std::map<std::string, std::vector<float>> out;
  auto g = loss_graph(op, attrs, ins);
  EXPECT_TRUE(g.is_ok()) << g.status().to_string();
  if (!g.is_ok()) return out;
  AutogradOptions options;
  for (const In& in : ins)
    if (in.param) options.params.push_back(in.name);
  auto tg = build_training_graph(**g, "loss:0", options);
  EXPECT_TRUE(tg.is_ok()) << tg.status().to_string();
  if (!tg.is_ok()) return out;
  auto runner = compile(*tg->graph, backend);
  EXPECT_TRUE(runner.is_ok()) << runner.status().to_string();
  if (!runner.is_ok()) return out;
  for (const In& in : ins) {
    if (in.param) {
      EXPECT_TRUE(runner->set_input(in.name, in.value).is_ok());
    }
  }
  Status st = runner->run();
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  if (!st.is_ok()) return out;
  out["loss"] = values(*runner->output("loss:0"));
  for (const std::string& p : tg->params) out[p] = values(*runner->output(grad_name(p)));
  return out;
}

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, double tol,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " element " << i;
}

/// Central differences of the (scalar) loss on the reference backend for every element of each parameter.
void expect_finite_differences(const std::string& op, const Attrs& attrs, std::vector<In> ins,
                               const std::map<std::string, std::vector<float>>& grads) {
  constexpr double kStep = 4e-3;
  for (In& in : ins) {
    if (!in.param) continue;
    const std::vector<float>& grad = grads.at(in.name);
    Tensor saved = *in.value.clone();
    for (int64_t i = 0; i < in.value.numel(); ++i) {
      const float v = saved.data<float>()[i];
      in.value.data<float>()[i] = static_cast<float>(v + kStep);
      const double up = forward(op, attrs, ins, Backend::kRef).at(0);
      in.value.data<float>()[i] = static_cast<float>(v - kStep);
      const double down = forward(op, attrs, ins, Backend::kRef).at(0);
      in.value.data<float>()[i] = v;
      const double fd = (up - down) / (2 * kStep);
      EXPECT_NEAR(grad[i], fd, 2e-3 * (1 + std::abs(fd))) << op << " d/d" << in.name << " element " << i;
    }
  }
}

/// Loss and gradients on the reference and CPU backends against PyTorch's, then finite differences.
void check(const std::string& op, const Attrs& attrs, const std::vector<In>& ins, float loss,
           const std::map<std::string, std::vector<float>>& want) {
  for (Backend b : {Backend::kRef, Backend::kCpu}) {
    SCOPED_TRACE(std::string(backend_name(b)));
    const auto got = gradients(op, attrs, ins, b);
    ASSERT_TRUE(got.count("loss"));
    expect_near_all(got.at("loss"), {loss}, 2e-6, op + " loss");
    for (const auto& [name, grad] : want) {
      ASSERT_TRUE(got.count(name)) << "no gradient for " << name;
      expect_near_all(got.at(name), grad, 2e-6, op + " d/d" + name);
    }
    if (b == Backend::kRef) expect_finite_differences(op, attrs, ins, got);
  }
}

const Dims kCe = {4, 5};

TEST(LossesTest, CrossEntropyMeanWeightSmoothingIgnore) {
  CrossEntropyLossAttrs a;
  a.label_smoothing = 0.1f;
  const std::vector<In> ins = {{"x", wave(kCe, 2, 0.37, 0.1), true},
                               {"t", int64s({4}, {1, 4, -100, 0})},
                               {"w", floats({5}, {0.5f, 0.75f, 1, 1.25f, 1.5f})}};
  check("CrossEntropyLoss", a, ins, 2.89646739f,
        {{"x",
          {0.0119949061f,
           -0.219238798f,
           0.0494907286f,
           0.0740750887f,
           0.0836780744f,
           0.223631375f,
           0.147887683f,
           0.0775876663f,
           0.0326388133f,
           -0.481745537f,
           0,
           0,
           0,
           0,
           0,
           -0.160554698f,
           0.00758401346f,
           0.0198792375f,
           0.0458428992f,
           0.0872485476f}}});
}

TEST(LossesTest, CrossEntropyNoneForwardAndBackwardOp) {
  CrossEntropyLossAttrs a;
  a.reduction = LossReduction::kNone;
  const Tensor x = wave({3, 4}, 2, 0.37, 0.1), t = int64s({3}, {3, 0, 2});
  const Tensor dy = floats({3}, {0.5f, -1.0f, 2.0f});
  for (Backend b : {Backend::kRef, Backend::kCpu}) {
    SCOPED_TRACE(std::string(backend_name(b)));
    expect_near_all(forward("CrossEntropyLoss", a, {{"x", x, true}, {"t", t}}, b),
                    {0.811504653f, 1.02136948f, 2.02017931f}, 2e-6, "loss");
    expect_near_all(forward("CrossEntropyLossBackward", backward_attrs(a, ClassLossWrt::kInput),
                            {{"dy", dy, true}, {"x", x}, {"t", t}}, b),
                    {0.04174327f, 0.0845754453f, 0.151586679f, -0.277905394f, 0.639898549f, -0.312432989f,
                     -0.210804979f, -0.116660581f, 1.06150526f, 0.510600517f, -1.73473664f, 0.162630861f},
                    2e-6, "dx");
  }
}

TEST(LossesTest, CrossEntropySpatial) {
  CrossEntropyLossAttrs a;
  a.ignore_index = -1;
  a.label_smoothing = 0.2f;
  const std::vector<In> ins = {{"x", wave({2, 3, 2, 2}, 2, 0.37, 0.1), true},
                               {"t", int64s({2, 2, 2}, {0, 2, -1, 1, 1, 2, 0, -1})},
                               {"w", floats({3}, {0.5f, 1, 2})}};
  check("CrossEntropyLoss", a, ins, 1.79136454f,
        {{"x",
          {-0.0506166177f,
           0.063797189f,
           0,
           0.100966098f,
           0.0587824497f,
           0.168131097f,
           0,
           -0.0848534034f,
           -0.00816583206f,
           -0.231928286f,
           0,
           -0.0161126943f,
           -0.00192773113f,
           -0.000557732778f,
           -0.06005684f,
           0,
           -0.111726627f,
           0.0274561999f,
           0.0154628027f,
           0,
           0.113654359f,
           -0.0268984671f,
           0.0445940373f,
           0}}});
}

TEST(LossesTest, CrossEntropyProbabilityTargets) {
  CrossEntropyLossAttrs a;
  a.label_smoothing = 0.1f;
  const std::vector<In> ins = {
      {"x", wave({3, 4}, 2, 0.37, 0.1), true},
      {"t", floats({3, 4}, {0.201282256f, 0.358337337f, 0.302431656f, 0.137948751f, 0.147746866f, 0.122233518f,
                            0.214255564f, 0.515764052f, 0.436220696f, 0.341856966f, 0.151122965f, 0.0707993726f})},
      {"w", floats({4}, {0.5f, 1, 1.5f, 2})}};
  // Probability targets run on the reference kernel only (the CPU kernel rejects them).
  const auto got = gradients("CrossEntropyLoss", a, ins, Backend::kRef);
  expect_near_all(got.at("loss"), {2.0052126f}, 2e-6, "loss");
  expect_near_all(got.at("x"),
                  {-0.00111268612f, -0.0484746405f, -0.0278634289f, 0.0774507555f, 0.156016663f, 0.113203987f,
                   -0.00216922595f, -0.267051424f, 0.100316341f, -0.0291581342f, -0.0380443867f, -0.0331138204f},
                  2e-6, "dx");
  expect_finite_differences("CrossEntropyLoss", a, ins, got);
}

TEST(LossesTest, NLLLoss) {
  NLLLossAttrs a;
  const Tensor x = wave({3, 4}, 2, 0.37, 0.1), t = int64s({3}, {2, -100, 1});
  check("NLLLoss", a, {{"x", x, true}, {"t", t}, {"w", floats({4}, {0.5f, 1, 1.5f, 2})}}, -0.666031146f,
        {{"x", {0, 0, -0.6f, 0, 0, 0, 0, 0, 0, -0.4f, 0, 0}}});
  a.reduction = LossReduction::kSum;
  check("NLLLoss", a, {{"x", x, true}, {"t", t}}, -0.920434773f, {{"x", {0, 0, -1, 0, 0, 0, 0, 0, 0, -1, 0, 0}}});
}

TEST(LossesTest, PointwiseLosses) {
  const std::vector<In> ins = {{"x", wave({2, 3}, 2, 0.37, 0.1), true}, {"t", wave({2, 3}, 1.5, 0.53, 0.2), true}};
  auto both = [](std::vector<float> dx) {
    std::vector<float> dt;
    for (float v : dx) dt.push_back(-v);
    return std::map<std::string, std::vector<float>>{{"x", dx}, {"t", dt}};
  };
  LossAttrs mean;
  check("MSELoss", mean, ins, 0.50606699f,
        both({-0.0327790578f, -0.0315106312f, 0.0203835567f, 0.135708531f, 0.300522685f, 0.47556748f}));
  const float s = 1.f / 6;
  check("L1Loss", mean, ins, 0.498235971f, both({-s, -s, s, s, s, s}));
  SmoothL1LossAttrs smooth;
  smooth.reduction = LossReduction::kSum;
  smooth.beta = 0.5f;
  check("SmoothL1Loss", smooth, ins, 2.01636763f,
        both({-0.196674347f, -0.189063787f, 0.12230134f, 0.814251184f, 1, 1}));
}

TEST(LossesTest, BCEWithLogitsAllInputs) {
  LossAttrs a;
  const std::vector<In> ins = {
      {"x", wave({2, 3}, 3, 0.37, 0.1), true},
      {"t", floats({2, 3}, {0.599334665f, 0.83343482f, 0.976045161f, 0.98803547f, 0.866115719f, 0.643739f}), true},
      {"w", floats({3}, {0.5f, 1, 2}), true},
      {"pw", floats({3}, {3, 0.5f, 1.5f}), true}};
  check("BCEWithLogitsLoss", a, ins, 0.686039016f,
        {{"x", {-0.0446052887f, 0.00788469722f, -0.0400011659f, -0.0131281921f, 0.0178322167f, 0.0931810707f}},
         {"t", {0.067469636f, -0.245504158f, -0.727684787f, -0.224130415f, -0.504028269f, -0.918994747f}},
         {"w", {0.25790248f, 0.131484361f, 0.212801708f}},
         {"pw", {0.0325259756f, 0.0387867944f, 0.0459338626f}}});
}

// Gradients PyTorch does not give (class weights, probability targets): finite differences only, on the
// reference backend (the CPU kernels take only the logits' gradient).
TEST(LossesTest, ClassWeightAndProbabilityTargetGradients) {
  for (LossReduction r : {LossReduction::kMean, LossReduction::kSum}) {
    SCOPED_TRACE(enum_name(r));
    CrossEntropyLossAttrs ce;
    ce.reduction = r;
    ce.label_smoothing = 0.15f;
    ce.ignore_index = 1;
    const Tensor x = wave({3, 4, 2}, 2, 0.37, 0.1), w = floats({4}, {0.5f, 1, 1.5f, 2});
    const Tensor probs = floats({3, 4, 2}, {0.1f, 0.4f, 0.2f, 0.1f, 0.3f, 0.2f, 0.4f, 0.3f, 0.25f, 0.25f, 0.25f, 0.25f,
                                            0.7f, 0.1f, 0.1f, 0.1f, 0.1f, 0.6f, 0.1f, 0.2f, 0.3f,  0.1f,  0.4f,  0.2f});
    const Tensor cls = int64s({3, 2}, {0, 1, 3, 2, 1, 1});
    for (const Tensor& t : {probs, cls}) {
      const std::vector<In> ins = {{"x", x, true}, {"t", t, is_floating(t.dtype())}, {"w", w, true}};
      const auto got = gradients("CrossEntropyLoss", ce, ins, Backend::kRef);
      ASSERT_EQ(got.size(), is_floating(t.dtype()) ? 4u : 3u);
      expect_finite_differences("CrossEntropyLoss", ce, ins, got);
    }
    NLLLossAttrs nll;
    nll.reduction = ce.reduction;
    const std::vector<In> ins = {{"x", x, true}, {"t", cls}, {"w", w, true}};
    const auto got = gradients("NLLLoss", nll, ins, Backend::kRef);
    ASSERT_EQ(got.size(), 3u);
    expect_finite_differences("NLLLoss", nll, ins, got);
  }
}

/// log_softmax of wave([6, 2, 4]) over the classes.
Tensor ctc_log_probs() {
  Tensor z = wave({6, 2, 4}, 2, 0.37, 0.1);
  for (int64_t r = 0; r < 12; ++r) {
    float* row = z.data<float>() + r * 4;
    double max = row[0], sum = 0;
    for (int c = 1; c < 4; ++c) max = std::max<double>(max, row[c]);
    for (int c = 0; c < 4; ++c) sum += std::exp(row[c] - max);
    for (int c = 0; c < 4; ++c) row[c] = static_cast<float>(row[c] - max - std::log(sum));
  }
  return z;
}

/// The gradient with respect to the logits z of log_probs = log_softmax(z): g - exp(lp) sum_c g.
std::vector<float> through_log_softmax(const std::vector<float>& g, const Tensor& lp) {
  std::vector<float> dz(g.size());
  for (size_t r = 0; r < g.size() / 4; ++r) {
    double sum = 0;
    for (size_t c = 0; c < 4; ++c) sum += g[r * 4 + c];
    for (size_t c = 0; c < 4; ++c)
      dz[r * 4 + c] = static_cast<float>(g[r * 4 + c] - std::exp(double{lp.data<float>()[r * 4 + c]}) * sum);
  }
  return dz;
}

TEST(LossesTest, CTCLoss) {
  const Tensor lp = ctc_log_probs();
  const std::vector<In> ins = {{"lp", lp, true},
                               {"targets", int64s({2, 3}, {1, 2, 2, 3, 1, 0})},
                               {"input_lengths", int64s({2}, {6, 5})},
                               {"target_lengths", int64s({2}, {3, 2})}};
  struct Case {
    LossReduction r;
    float loss;
    std::vector<float> dz;
  };
  const Case cases[] = {
      {LossReduction::kMean,
       1.73429897f,
       {-0.00574049502f,
        -0.118819933f,
        0.0505288928f,
        0.0740315354f,
        -0.0884178488f,
        0.0781082473f,
        0.0527012446f,
        -0.0423916432f,
        0.00687705305f,
        -0.0162302761f,
        -0.00419934867f,
        0.0135525718f,
        -0.00134109677f,
        0.0360925785f,
        0.0600072448f,
        -0.0947587266f,
        0.00482648235f,
        0.0228473667f,
        -0.112314989f,
        0.0846411404f,
        -0.0196183756f,
        -0.00415465367f,
        0.0648749761f,
        -0.0411019468f,
        -0.072517131f,
        0.044230927f,
        0.0172017905f,
        0.0110844134f,
        -0.01726519f,
        -0.0730038323f,
        0.0546173917f,
        0.0356516306f,
        -0.000141437855f,
        0.0213511951f,
        -0.111068722f,
        0.089858965f,
        -0.0357265797f,
        -0.102666338f,
        0.0744391718f,
        0.0639537455f,
        -0.0372284863f,
        0.0470229576f,
        -0.0209007828f,
        0.0111063115f,
        0,
        0,
        0,
        0}},
      {LossReduction::kSum,
       8.68752673f,
       {-0.0344429701f,
        -0.712919599f,
        0.303173357f,
        0.444189212f,
        -0.353671395f,
        0.312432989f,
        0.210804979f,
        -0.169566573f,
        0.0412623183f,
        -0.0973816568f,
        -0.025196092f,
        0.0813154306f,
        -0.00536438706f,
        0.144370314f,
        0.240028979f,
        -0.379034906f,
        0.0289588941f,
        0.1370842f,
        -0.673889937f,
        0.507846843f,
        -0.0784735025f,
        -0.0166186147f,
        0.259499904f,
        -0.164407787f,
        -0.435102786f,
        0.265385562f,
        0.103210743f,
        0.0665064805f,
        -0.0690607599f,
        -0.292015329f,
        0.218469567f,
        0.142606522f,
        -0.000848627128f,
        0.128107171f,
        -0.666412334f,
        0.53915379f,
        -0.142906319f,
        -0.41066535f,
        0.297756687f,
        0.255814982f,
        -0.223370918f,
        0.282137745f,
        -0.125404697f,
        0.0666378692f,
        0,
        0,
        0,
        0}},
  };
  for (const Case& c : cases) {
    CTCLossAttrs a;
    a.reduction = c.r;
    for (Backend b : {Backend::kRef, Backend::kCpu}) {
      SCOPED_TRACE(std::string(backend_name(b)) + " " + enum_name(c.r));
      const auto got = gradients("CTCLoss", a, ins, b);
      ASSERT_TRUE(got.count("lp"));
      expect_near_all(got.at("loss"), {c.loss}, 2e-6, "loss");
      // kiln's gradient is dLoss/dlog_probs itself (PyTorch's adds exp(log_probs), which cancels through
      // log_softmax): compare both through log_softmax, and kiln's with finite differences.
      expect_near_all(through_log_softmax(got.at("lp"), lp), c.dz, 1e-5, "dz");
      if (b == Backend::kRef) expect_finite_differences("CTCLoss", a, ins, got);
    }
  }
  CTCLossAttrs none;
  none.reduction = LossReduction::kNone;
  for (Backend b : {Backend::kRef, Backend::kCpu})
    expect_near_all(forward("CTCLoss", none, ins, b), {5.25099259f, 3.43653414f}, 2e-6, "none");
  // Sample 1 cannot be aligned in one frame: infinite, or 0 with zero_infinity.
  std::vector<In> short_ins = ins;
  short_ins[2].value = int64s({2}, {6, 1});
  for (Backend b : {Backend::kRef, Backend::kCpu}) {
    const auto inf = forward("CTCLoss", none, short_ins, b);
    ASSERT_EQ(inf.size(), 2u);
    EXPECT_TRUE(std::isinf(inf[1]));
    none.zero_infinity = true;
    expect_near_all(forward("CTCLoss", none, short_ins, b), {5.25099259f, 0}, 2e-6, "zero_infinity");
    none.zero_infinity = false;
  }
}

TEST(LossesTest, BadTargetsAreErrors) {
  NLLLossAttrs a;
  auto g = loss_graph("NLLLoss", a, {{"x", wave({2, 3}, 1, 0.3, 0), true}, {"t", int64s({2}, {0, 3})}});
  ASSERT_TRUE(g.is_ok());
  for (Backend b : {Backend::kRef, Backend::kCpu}) {
    auto runner = compile(**g, b);
    ASSERT_TRUE(runner.is_ok()) << runner.status().to_string();
    Tensor x = wave({2, 3}, 1, 0.3, 0);
    ASSERT_TRUE(runner->set_input("x", x).is_ok());
    const Status st = runner->run();
    EXPECT_FALSE(st.is_ok());
    EXPECT_NE(st.to_string().find("target 3"), std::string::npos) << st.to_string();
  }
  // Shapes are checked when the node is added.
  auto bad = loss_graph("CrossEntropyLoss", CrossEntropyLossAttrs{},
                        {{"x", wave({2, 3}, 1, 0.3, 0), true}, {"t", int64s({3}, {0, 1, 2})}});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().to_string().find("needs [2]"), std::string::npos) << bad.status().to_string();
}

}  // namespace
}  // namespace kiln::train
