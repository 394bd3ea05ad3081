// Convolution on CUDA through cuDNN's graph (backend) API: one operation graph holds the convolution and the
// optimizer's epilogue, y = relu(conv(x, w) + b + residual), so that cuDNN's runtime-fusion engines compute all of it
// in one pass. It takes channels_last 2-D problems with one group in float16 or bfloat16 (float32 compute): x
// [N, H, W, C], w [M, kH, kW, C], b [M], residual and y [N, Ho, Wo, M]. cuDNN's tensors have NCHW-ordered dims with
// strides that say NHWC; the convolution's output and the epilogue's intermediates are virtual float32 tensors.
//
// Tactics are engine configurations as the heuristics offer them (mode A, then the fallback list), kept when their
// execution plan finalizes, at most kMaxTactics, named by the engine's global index and its knob choices in knob-type
// order: "eng42", "eng42+k1=2+k3=0". A name means one configuration whatever the heuristic's order, so a timing-cache
// entry keeps its meaning; the kernel rebuilds exactly that configuration and fails, naming it, when cuDNN no longer
// takes it. The default (empty) tactic is the heuristic's first configuration that finalizes. Whether a problem has a
// configuration at all is asked once per problem and device (runtime fusion compiles kernels) and kept: `supports`
// declines the problems with none. Every tensor is declared 16-byte aligned; `run` checks the pointers.
#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda_runtime.h"
#include "kernels/cuda/cublaslt_gemm.h"
#include "kernels/cuda/cuda_common.h"
#include "ops/convolution/convolution.h"

namespace kiln {
namespace {

constexpr const char* kImplName = "cuda.cudnn.conv_graph";
constexpr size_t kMaxTactics = 8;
constexpr int64_t kMaxHeuristicResults = 64;  // configurations read from one heuristic query
constexpr size_t kMaxPlanAttempts = 3 * kMaxTactics;
constexpr int64_t kAlignment = 16;  // bytes, declared on every tensor
// Tensor UIDs: the variant pack's tensors, then the virtual intermediates from kVirtualUid on.
constexpr int64_t kXUid = 1, kWUid = 2, kBiasUid = 3, kResidualUid = 4, kYUid = 5, kVirtualUid = 100;

// A cuDNN backend descriptor that destroys itself.
class BackendDescriptor {
 public:
  BackendDescriptor() = default;
  ~BackendDescriptor() { reset(); }
  BackendDescriptor(BackendDescriptor&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  BackendDescriptor& operator=(BackendDescriptor&& o) noexcept {
    if (this != &o) reset(), d_ = std::exchange(o.d_, nullptr);
    return *this;
  }
  BackendDescriptor(const BackendDescriptor&) = delete;
  BackendDescriptor& operator=(const BackendDescriptor&) = delete;

  static Result<BackendDescriptor> make(cudnnBackendDescriptorType_t type) {
    BackendDescriptor d;
    KILN_RETURN_IF_ERROR(cuda::check(cudnnBackendCreateDescriptor(type, &d.d_), "cudnnBackendCreateDescriptor"));
    return d;
  }
  cudnnBackendDescriptor_t get() const { return d_; }

  Status set(const char* what, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
             const void* values) const {
    return cuda::check(cudnnBackendSetAttribute(d_, name, type, count, values), what);
  }
  Status set(const char* what, cudnnBackendAttributeName_t name, int64_t v) const {
    return set(what, name, CUDNN_TYPE_INT64, 1, &v);
  }
  Status set(const char* what, cudnnBackendAttributeName_t name, cudnnBackendDescriptor_t d) const {
    return set(what, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d);
  }
  Status finalize(const char* what) const { return cuda::check(cudnnBackendFinalize(d_), what); }
  Status get_int(cudnnBackendAttributeName_t name, int64_t* v, const char* what) const {
    int64_t n = 0;
    return cuda::check(cudnnBackendGetAttribute(d_, name, CUDNN_TYPE_INT64, 1, &n, v), what);
  }

 private:
  void reset() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
    d_ = nullptr;
  }
  cudnnBackendDescriptor_t d_ = nullptr;
};

// Sets attribute `name` of backend descriptor `d` (the arguments after it as BackendDescriptor::set takes them) or
// returns the error, which names the attribute.
#define KILN_CUDNN_SET(d, name, ...) \
  KILN_RETURN_IF_ERROR((d).set("cudnnBackendSetAttribute (" #name ")", name, __VA_ARGS__))

// `n` fresh descriptors of `type` (for attributes cuDNN writes into caller-made descriptors) and their raw handles.
Status make_all(cudnnBackendDescriptorType_t type, int64_t n, std::vector<BackendDescriptor>& out,
                std::vector<cudnnBackendDescriptor_t>& raw) {
  out.reserve(out.size() + static_cast<size_t>(n));
  raw.reserve(raw.size() + static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    KILN_ASSIGN_OR_RETURN(BackendDescriptor d, BackendDescriptor::make(type));
    raw.push_back(d.get());
    out.push_back(std::move(d));
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// The problem and its operation graph

struct Problem {
  DataType dtype = DataType::kFloat16;
  Dims x, w, y;  // NHWC, as kiln holds them
  std::array<int64_t, 2> strides{}, pads{}, dilations{};
  bool bias = false, residual = false, relu = false;

  std::string epilogue() const {
    return str_cat("conv", bias ? "+bias" : "", residual ? "+add" : "", relu ? "+relu" : "");
  }
};

Result<Problem> problem_of(const ConvolutionAttrs& a, DataType dt, const Dims& x, const Dims& w, const Dims& y,
                           bool bias, bool residual) {
  if (x.rank() != 4 || w.rank() != 4 || y.rank() != 4)
    return unsupported("a channels_last convolution is 2-D: x [N, H, W, C], w [M, kH, kW, C]");
  KILN_ASSIGN_OR_RETURN(ConvWindow win, convolution_window(a, x, w));
  Problem p{dt, x, w, y};
  for (int i = 0; i < 2; ++i) {
    if (win.pads_begin[i] != win.pads_end[i] || win.pads_begin[i] < 0)
      return unsupported("cuDNN's graph convolution needs equal begin and end pads; spatial axis ", i, " has ",
                         win.pads_begin[i], " and ", win.pads_end[i]);
    p.strides[i] = win.strides[i];
    p.pads[i] = win.pads_begin[i];
    p.dilations[i] = win.dilations[i];
  }
  p.bias = bias;
  p.residual = residual;
  p.relu = a.fused.on;
  return p;
}

using Dims4 = std::array<int64_t, 4>;

// NCHW-ordered dims {N, C, H, W} of memory laid out NHWC.
Dims4 nhwc_strides(const Dims4& d) { return {d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]}; }

Result<BackendDescriptor> make_tensor(int64_t uid, cudnnDataType_t dt, const Dims4& dims, const Dims4& strides,
                                      bool is_virtual) {
  KILN_ASSIGN_OR_RETURN(BackendDescriptor t, BackendDescriptor::make(CUDNN_BACKEND_TENSOR_DESCRIPTOR));
  KILN_CUDNN_SET(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, uid);
  KILN_CUDNN_SET(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
  KILN_CUDNN_SET(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
  KILN_CUDNN_SET(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
  KILN_CUDNN_SET(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, kAlignment);
  const bool v = is_virtual;
  KILN_CUDNN_SET(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &v);
  KILN_RETURN_IF_ERROR(t.finalize("cudnnBackendFinalize (tensor)"));
  return t;
}

// The descriptors of one problem's operation graph, kept alive as long as plans made from it.
struct OpGraph {
  std::vector<BackendDescriptor> parts;  // tensors, the convolution and pointwise descriptors, the operations
  BackendDescriptor graph;

  // A pointwise operation y = mode(x[, b]) computed in float32.
  Result<cudnnBackendDescriptor_t> pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                                             cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y) {
    KILN_ASSIGN_OR_RETURN(BackendDescriptor pw, BackendDescriptor::make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
    const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    KILN_CUDNN_SET(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    KILN_CUDNN_SET(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    KILN_RETURN_IF_ERROR(pw.finalize("cudnnBackendFinalize (pointwise)"));
    KILN_ASSIGN_OR_RETURN(BackendDescriptor op, BackendDescriptor::make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR));
    KILN_CUDNN_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw.get());
    KILN_CUDNN_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b) KILN_CUDNN_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b);
    KILN_CUDNN_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    KILN_RETURN_IF_ERROR(op.finalize("cudnnBackendFinalize (pointwise operation)"));
    parts.push_back(std::move(pw));
    return keep(std::move(op));
  }

  cudnnBackendDescriptor_t keep(BackendDescriptor d) {
    parts.push_back(std::move(d));
    return parts.back().get();
  }
};

// conv(x, w), then + b, + residual and ReLU as the problem has them; the last operation writes y.
Result<OpGraph> build_graph(cudnnHandle_t h, const Problem& p) {
  const std::optional<cudnnDataType_t> io_type = cuda::cudnn_dtype(p.dtype);
  if (!io_type) return unsupported("cuDNN has no ", dtype_name(p.dtype), " tensors");
  const cudnnDataType_t io = *io_type;
  const int64_t m = p.w[0];
  const Dims4 x_dims{p.x[0], p.x[3], p.x[1], p.x[2]};
  const Dims4 w_dims{m, p.w[3], p.w[1], p.w[2]};
  const Dims4 y_dims{p.y[0], m, p.y[1], p.y[2]};
  const Dims4 bias_dims{1, m, 1, 1};
  OpGraph g;
  auto tensor = [&](int64_t uid, cudnnDataType_t dt, const Dims4& dims, bool is_virtual) -> Result<BackendDescriptor> {
    return make_tensor(uid, dt, dims, nhwc_strides(dims), is_virtual);
  };
  KILN_ASSIGN_OR_RETURN(BackendDescriptor xt, tensor(kXUid, io, x_dims, false));
  KILN_ASSIGN_OR_RETURN(BackendDescriptor wt, tensor(kWUid, io, w_dims, false));
  const cudnnBackendDescriptor_t x = g.keep(std::move(xt)), w = g.keep(std::move(wt));
  // Each epilogue step's output: a virtual float32 tensor, y for the last one.
  const int steps = int{p.bias} + int{p.residual} + int{p.relu};
  int64_t next_uid = kVirtualUid;
  auto output = [&](bool last) -> Result<cudnnBackendDescriptor_t> {
    KILN_ASSIGN_OR_RETURN(BackendDescriptor t,
                          last ? tensor(kYUid, io, y_dims, false) : tensor(next_uid++, CUDNN_DATA_FLOAT, y_dims, true));
    return g.keep(std::move(t));
  };

  KILN_ASSIGN_OR_RETURN(BackendDescriptor conv, BackendDescriptor::make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR));
  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  KILN_CUDNN_SET(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
  KILN_CUDNN_SET(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  KILN_CUDNN_SET(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, int64_t{2});
  KILN_CUDNN_SET(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, p.dilations.data());
  KILN_CUDNN_SET(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, p.strides.data());
  KILN_CUDNN_SET(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, p.pads.data());
  KILN_CUDNN_SET(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, p.pads.data());
  KILN_RETURN_IF_ERROR(conv.finalize("cudnnBackendFinalize (convolution)"));
  const cudnnBackendDescriptor_t conv_desc = g.keep(std::move(conv));

  std::vector<cudnnBackendDescriptor_t> ops;
  KILN_ASSIGN_OR_RETURN(cudnnBackendDescriptor_t cur, output(steps == 0));
  KILN_ASSIGN_OR_RETURN(BackendDescriptor fprop,
                        BackendDescriptor::make(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR));
  const float alpha = 1.f, beta = 0.f;
  KILN_CUDNN_SET(fprop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x);
  KILN_CUDNN_SET(fprop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w);
  KILN_CUDNN_SET(fprop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, cur);
  KILN_CUDNN_SET(fprop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv_desc);
  KILN_CUDNN_SET(fprop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
  KILN_CUDNN_SET(fprop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
  KILN_RETURN_IF_ERROR(fprop.finalize("cudnnBackendFinalize (convolution forward)"));
  ops.push_back(g.keep(std::move(fprop)));

  int done = 0;
  auto add = [&](int64_t uid, const Dims4& dims) -> Status {
    KILN_ASSIGN_OR_RETURN(BackendDescriptor bt, make_tensor(uid, io, dims, nhwc_strides(dims), false));
    const cudnnBackendDescriptor_t b = g.keep(std::move(bt));
    KILN_ASSIGN_OR_RETURN(cudnnBackendDescriptor_t out, output(++done == steps));
    KILN_ASSIGN_OR_RETURN(cudnnBackendDescriptor_t op, g.pointwise(CUDNN_POINTWISE_ADD, cur, b, out));
    ops.push_back(op);
    cur = out;
    return Status::ok();
  };
  if (p.bias) KILN_RETURN_IF_ERROR(add(kBiasUid, bias_dims));  // {1, M, 1, 1}: strides {M, 1, M, M}
  if (p.residual) KILN_RETURN_IF_ERROR(add(kResidualUid, y_dims));
  if (p.relu) {
    KILN_ASSIGN_OR_RETURN(cudnnBackendDescriptor_t out, output(++done == steps));
    KILN_ASSIGN_OR_RETURN(cudnnBackendDescriptor_t op, g.pointwise(CUDNN_POINTWISE_RELU_FWD, cur, nullptr, out));
    ops.push_back(op);
  }

  KILN_ASSIGN_OR_RETURN(g.graph, BackendDescriptor::make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
  KILN_CUDNN_SET(g.graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  KILN_CUDNN_SET(g.graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                 static_cast<int64_t>(ops.size()), ops.data());
  KILN_RETURN_IF_ERROR(g.graph.finalize("cudnnBackendFinalize (operation graph)"));
  return g;
}

// ---------------------------------------------------------------------------------------------
// Tactics: an engine by its global index and its knob choices

struct EngineChoice {
  int64_t engine = 0;
  std::vector<std::pair<int64_t, int64_t>> knobs;  // knob type, value; sorted by type

  std::string name() const {
    std::string s = str_cat("eng", engine);
    for (const auto& [type, value] : knobs) s += str_cat("+k", type, "=", value);
    return s;
  }

  // "eng42" or "eng42+k1=2+k3=0"; nullopt for anything else.
  static std::optional<EngineChoice> parse(const std::string& t) {
    EngineChoice c;
    const char* p = t.data();
    const char* end = t.data() + t.size();
    auto number = [&](int64_t& v) {
      const auto [next, ec] = std::from_chars(p, end, v);
      if (ec != std::errc() || next == p) return false;
      p = next;
      return true;
    };
    if (!t.starts_with("eng")) return std::nullopt;
    p += 3;
    if (!number(c.engine) || c.engine < 0) return std::nullopt;
    while (p != end) {
      int64_t type = 0, value = 0;
      if (end - p < 2 || p[0] != '+' || p[1] != 'k') return std::nullopt;
      p += 2;
      if (!number(type) || p == end || *p++ != '=' || !number(value)) return std::nullopt;
      c.knobs.emplace_back(type, value);
    }
    std::sort(c.knobs.begin(), c.knobs.end());
    return c;
  }
};

// The engine and knob choices of a heuristic's configuration, and whether the engine reduces in reduced precision
// (left out: the problem promises float32 compute).
Result<std::pair<EngineChoice, bool>> read_config(const BackendDescriptor& cfg) {
  KILN_ASSIGN_OR_RETURN(BackendDescriptor engine, BackendDescriptor::make(CUDNN_BACKEND_ENGINE_DESCRIPTOR));
  cudnnBackendDescriptor_t raw = engine.get();
  int64_t n = 0;
  KILN_RETURN_IF_ERROR(cuda::check(
      cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &raw),
      "cudnnBackendGetAttribute (engine of a configuration)"));
  EngineChoice c;
  KILN_RETURN_IF_ERROR(engine.get_int(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, &c.engine, "cuDNN engine global index"));
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> notes{};
  int64_t note_count = 0;
  if (cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               static_cast<int64_t>(notes.size()), &note_count, notes.data()) != CUDNN_STATUS_SUCCESS)
    note_count = 0;
  const auto notes_end = notes.begin() + std::clamp<int64_t>(note_count, 0, notes.size());
  const bool reduced =
      std::find(notes.begin(), notes_end, CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) != notes_end;
  std::vector<BackendDescriptor> choices;
  std::vector<cudnnBackendDescriptor_t> raws;
  KILN_RETURN_IF_ERROR(make_all(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, CUDNN_KNOB_TYPE_COUNTS, choices, raws));
  KILN_RETURN_IF_ERROR(
      cuda::check(cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                           CUDNN_KNOB_TYPE_COUNTS, &n, raws.data()),
                  "cudnnBackendGetAttribute (knob choices)"));
  c.knobs.reserve(static_cast<size_t>(std::clamp<int64_t>(n, 0, CUDNN_KNOB_TYPE_COUNTS)));
  for (int64_t i = 0; i < n && i < CUDNN_KNOB_TYPE_COUNTS; ++i) {
    cudnnBackendKnobType_t type{};
    int64_t value = 0, got = 0;
    KILN_RETURN_IF_ERROR(cuda::check(
        cudnnBackendGetAttribute(raws[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &got, &type),
        "cudnnBackendGetAttribute (knob type)"));
    KILN_RETURN_IF_ERROR(cuda::check(
        cudnnBackendGetAttribute(raws[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &got, &value),
        "cudnnBackendGetAttribute (knob value)"));
    c.knobs.emplace_back(static_cast<int64_t>(type), value);
  }
  std::sort(c.knobs.begin(), c.knobs.end());
  return std::pair(std::move(c), reduced);
}

// An execution plan and what it was made from.
struct Plan {
  EngineChoice choice;
  BackendDescriptor engine, config, plan;
  std::vector<BackendDescriptor> knobs;
  int64_t workspace = 0;
};

// Exactly the configuration `c` names on graph `g`, planned on `h`.
Result<Plan> make_plan(cudnnHandle_t h, const OpGraph& g, const EngineChoice& c) {
  Plan p;
  p.choice = c;
  KILN_ASSIGN_OR_RETURN(p.engine, BackendDescriptor::make(CUDNN_BACKEND_ENGINE_DESCRIPTOR));
  KILN_CUDNN_SET(p.engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, g.graph.get());
  KILN_CUDNN_SET(p.engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, c.engine);
  KILN_RETURN_IF_ERROR(p.engine.finalize("cudnnBackendFinalize (engine)"));
  std::vector<cudnnBackendDescriptor_t> raws;
  raws.reserve(c.knobs.size());
  p.knobs.reserve(c.knobs.size());
  for (const auto& [type, value] : c.knobs) {
    KILN_ASSIGN_OR_RETURN(BackendDescriptor k, BackendDescriptor::make(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR));
    const auto knob = static_cast<cudnnBackendKnobType_t>(type);
    KILN_CUDNN_SET(k, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &knob);
    KILN_CUDNN_SET(k, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, value);
    KILN_RETURN_IF_ERROR(k.finalize("cudnnBackendFinalize (knob choice)"));
    raws.push_back(k.get());
    p.knobs.push_back(std::move(k));
  }
  KILN_ASSIGN_OR_RETURN(p.config, BackendDescriptor::make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
  KILN_CUDNN_SET(p.config, CUDNN_ATTR_ENGINECFG_ENGINE, p.engine.get());
  if (!raws.empty())
    KILN_CUDNN_SET(p.config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                   static_cast<int64_t>(raws.size()), raws.data());
  KILN_RETURN_IF_ERROR(p.config.finalize("cudnnBackendFinalize (engine configuration)"));
  KILN_ASSIGN_OR_RETURN(p.plan, BackendDescriptor::make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
  KILN_CUDNN_SET(p.plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  KILN_CUDNN_SET(p.plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, p.config.get());
  KILN_RETURN_IF_ERROR(p.plan.finalize("cudnnBackendFinalize (execution plan)"));
  KILN_RETURN_IF_ERROR(p.plan.get_int(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, &p.workspace, "cuDNN plan workspace"));
  if (p.workspace < 0) return internal_error("cuDNN gives a negative workspace size for ", c.name());
  return p;
}

// The configurations the heuristics offer (mode A, then the fallback list) whose plans finalize, each once, in that
// order, at most `limit` (trying at most kMaxPlanAttempts). `failed` says why the last one left out was.
Result<std::vector<Plan>> working_plans(cudnnHandle_t h, const OpGraph& g, size_t limit, std::string& failed) {
  std::vector<Plan> out;
  std::vector<std::string> seen;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    KILN_ASSIGN_OR_RETURN(BackendDescriptor heur, BackendDescriptor::make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
    KILN_CUDNN_SET(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, g.graph.get());
    KILN_CUDNN_SET(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (Status ok = heur.finalize("cudnnBackendFinalize (heuristic)"); !ok.is_ok()) {
      failed = ok.message();  // no answer in this mode
      continue;
    }
    int64_t count = 0;
    if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                 nullptr) != CUDNN_STATUS_SUCCESS)
      count = kMaxHeuristicResults;
    count = std::clamp<int64_t>(count, 0, kMaxHeuristicResults);
    std::vector<BackendDescriptor> cfgs;
    std::vector<cudnnBackendDescriptor_t> raws;
    KILN_RETURN_IF_ERROR(make_all(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, count, cfgs, raws));
    int64_t got = 0;
    if (count > 0)
      KILN_RETURN_IF_ERROR(
          cuda::check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                               count, &got, raws.data()),
                      "cudnnBackendGetAttribute (heuristic results)"));
    for (int64_t i = 0; i < std::min(got, count); ++i) {
      auto read = read_config(cfgs[i]);
      if (!read || read->second) {
        failed = read ? str_cat(read->first.name(), " reduces in reduced precision") : read.status().message();
        continue;
      }
      std::string name = read->first.name();
      if (std::find(seen.begin(), seen.end(), name) != seen.end()) continue;
      seen.push_back(std::move(name));
      if (seen.size() > kMaxPlanAttempts) return out;  // each attempt may compile kernels
      auto plan = make_plan(h, g, read->first);
      if (!plan) {  // cuDNN does not take this configuration here
        failed = str_cat(read->first.name(), ": ", plan.status().message());
        continue;
      }
      out.push_back(std::move(*plan));
      if (out.size() >= limit) return out;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Which problems have tactics, asked once per problem and device

// The calling thread's cuDNN handle for the current device and the device, to plan with at build time (no stream):
// none without a GPU, or for dynamic or empty shapes (as cuda.cudnn.convolution lists its tactics).
std::optional<std::pair<cudnnHandle_t, int>> build_handle(const OpCall& call) {
  for (const Dims* d : {&call.inputs[0].dims, &call.inputs[1].dims, &call.outputs[0].dims})
    if (!d->is_static() || d->numel() == 0) return std::nullopt;
  int device = 0;
  if (!cuda::gpu_available()) return std::nullopt;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  auto h = cuda::cudnn_handle(device);
  if (!h) return std::nullopt;
  return std::pair(*h, device);
}

struct Offer {
  std::vector<std::string> tactics;
  std::string why_none;  // when there are no tactics
};

Result<Problem> problem_of(const OpCall& call) {
  return problem_of(call.attrs_as<ConvolutionAttrs>(), call.inputs[0].dtype, call.inputs[0].dims, call.inputs[1].dims,
                    call.outputs[0].dims, call.has_input(2), call.has_input(3));
}

// The tactics of a static problem on the current GPU; nullopt without a GPU or for dynamic or empty shapes.
std::optional<Offer> offered(const OpCall& call) {
  const std::optional<std::pair<cudnnHandle_t, int>> h = build_handle(call);
  if (!h) return std::nullopt;
  const cudnnHandle_t handle = h->first;
  const int device = h->second;
  const std::string key = str_cat(device, "|", call.to_string(), "|", call.has_input(2), call.has_input(3));
  static std::mutex mu;
  static std::map<std::string, Offer> known;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = known.find(key); it != known.end()) return it->second;
  }
  Offer offer;
  Status why = [&]() -> Status {
    KILN_ASSIGN_OR_RETURN(Problem p, problem_of(call));
    KILN_ASSIGN_OR_RETURN(OpGraph g, build_graph(handle, p));
    std::string failed;
    KILN_ASSIGN_OR_RETURN(std::vector<Plan> plans, working_plans(handle, g, kMaxTactics, failed));
    offer.tactics.reserve(plans.size());
    for (const Plan& plan : plans) offer.tactics.push_back(plan.choice.name());
    if (plans.empty())
      return unsupported("no engine configuration the heuristics offer finalizes",
                         failed.empty() ? "" : str_cat(" (the last: ", failed, ")"));
    return Status::ok();
  }();
  offer.why_none = why.message();
  // A device error may pass; keep only answers about the problem.
  if (why.is_ok() || why.code() == StatusCode::kUnsupported) {
    std::lock_guard<std::mutex> lock(mu);
    known.emplace(key, offer);
  }
  return offer;
}

// ---------------------------------------------------------------------------------------------
// The kernel

class CudnnConvGraph final : public Kernel {
 public:
  explicit CudnnConvGraph(std::optional<EngineChoice> tactic) : tactic_(std::move(tactic)) {}

  std::string detail() const override {
    if (!ready_) return {};
    return str_cat("cuDNN graph ", plan_.choice.name(), " (", epilogue_, "), ",
                   tactic_ ? "" : "the heuristic's first, ", "workspace ", plan_.workspace, " bytes");
  }
  size_t workspace_bytes() const override { return static_cast<size_t>(plan_.workspace) + residual_bytes_; }

  // The graph and plan of the tactic for problem `p`, planned on `h`.
  Status prepare(cudnnHandle_t h, const Problem& p) {
    ready_ = false;
    plan_ = Plan{};  // before the graph it was made from
    KILN_ASSIGN_OR_RETURN(graph_, build_graph(h, p));
    const std::string shapes =
        str_cat("x ", p.x.to_string(), ", w ", p.w.to_string(), " (", dtype_name(p.dtype), ", ", p.epilogue(), ")");
    if (tactic_) {
      auto plan = make_plan(h, graph_, *tactic_);
      if (!plan)
        return unsupported(kImplName, ": cuDNN no longer takes the configuration '", tactic_->name(), "' for ", shapes,
                           " (", plan.status().message(), "); rebuild the engine so that another tactic is chosen");
      plan_ = std::move(*plan);
    } else {
      std::string failed;
      KILN_ASSIGN_OR_RETURN(std::vector<Plan> plans, working_plans(h, graph_, 1, failed));
      if (plans.empty())
        return unsupported(kImplName, ": cuDNN offers no engine configuration for ", shapes,
                           failed.empty() ? "" : str_cat(" (the last: ", failed, ")"));
      plan_ = std::move(plans.front());
    }
    epilogue_ = p.epilogue();
    x_dims_ = p.x;
    w_dims_ = p.w;
    y_dims_ = p.y;
    handle_ = h;
    ready_ = true;
    return Status::ok();
  }

  Status run(KernelContext& ctx) override {
    const Tensor& x = ctx.src[0];
    const Tensor& w = ctx.src[1];
    Tensor& y = ctx.dst[0];
    if (y.numel() == 0) return Status::ok();  // nothing to compute (cuDNN rejects empty tensors)
    if (x.numel() == 0 || w.numel() == 0)
      return invalid_argument(kImplName, " takes no empty x or w (x ", x.dims().to_string(), ", w ",
                              w.dims().to_string(), ")");
    const cudaStream_t stream = cuda::native(ctx.stream);
    KILN_ASSIGN_OR_RETURN(cudnnHandle_t h, cuda::cudnn_handle(ctx.stream));
    const Tensor* bias = ctx.src.size() > 2 && ctx.src[2].defined() ? &ctx.src[2] : nullptr;
    const Tensor* residual = ctx.src.size() > 3 && ctx.src[3].defined() ? &ctx.src[3] : nullptr;
    if (!ready_ || h != handle_ || x.dims() != x_dims_ || w.dims() != w_dims_ || y.dims() != y_dims_) {
      KILN_ASSIGN_OR_RETURN(Problem p, problem_of(ctx.attrs<ConvolutionAttrs>(), x.dtype(), x.dims(), w.dims(),
                                                  y.dims(), bias != nullptr, residual != nullptr));
      KILN_RETURN_IF_ERROR(prepare(h, p));
    }
    if (residual && residual->nbytes() != y.nbytes())
      return invalid_argument("Convolution residual ", residual->dims().to_string(), " does not match the output ",
                              y.dims().to_string());
    KILN_ASSIGN_OR_RETURN(void* workspace, workspace_.get(ctx.allocator, static_cast<size_t>(plan_.workspace),
                                                          "cuDNN graph convolution workspace", stream));
    // The graph may write y before it has read all of the residual: keep a residual that is y's memory aside.
    void* residual_ptr = residual ? residual->raw() : nullptr;
    if (residual && residual->raw() == y.raw()) {
      residual_bytes_ = y.nbytes();
      KILN_ASSIGN_OR_RETURN(void* copy,
                            residual_copy_.get(ctx.allocator, residual_bytes_, "convolution residual copy", stream));
      KILN_RETURN_IF_ERROR(
          cuda::check(cudaMemcpyAsync(copy, residual->raw(), residual_bytes_, cudaMemcpyDeviceToDevice, stream),
                      "cudaMemcpyAsync (convolution residual)"));
      residual_ptr = copy;
    }
    std::vector<void*> ptrs = {x.raw(), w.raw(), y.raw()};
    std::vector<int64_t> uids = {kXUid, kWUid, kYUid};
    if (bias) ptrs.push_back(bias->raw()), uids.push_back(kBiasUid);
    if (residual) ptrs.push_back(residual_ptr), uids.push_back(kResidualUid);
    static constexpr std::array<const char*, 6> kNames = {"", "x", "w", "b", "residual", "y"};
    for (size_t i = 0; i < ptrs.size(); ++i)
      if (reinterpret_cast<uintptr_t>(ptrs[i]) % kAlignment != 0)
        return invalid_argument(kImplName, " needs ", kAlignment, "-byte aligned tensors but ", kNames[uids[i]],
                                " is not (memory given to kiln must be aligned as kiln's own is: 64 bytes)");
    KILN_ASSIGN_OR_RETURN(BackendDescriptor pack, BackendDescriptor::make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR));
    KILN_CUDNN_SET(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(ptrs.size()),
                   ptrs.data());
    KILN_CUDNN_SET(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()),
                   uids.data());
    KILN_CUDNN_SET(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
    KILN_RETURN_IF_ERROR(pack.finalize("cudnnBackendFinalize (variant pack)"));
    return cuda::check(cudnnBackendExecute(h, plan_.plan.get(), pack.get()), "cudnnBackendExecute");
  }

 private:
  std::optional<EngineChoice> tactic_;  // nullopt: the heuristic's first
  bool ready_ = false;
  cudnnHandle_t handle_ = nullptr;  // the plan's
  Dims x_dims_, w_dims_, y_dims_;
  std::string epilogue_;
  OpGraph graph_;
  Plan plan_;
  size_t residual_bytes_ = 0;
  cuda::DeviceScratch workspace_, residual_copy_;
};

Status conv_graph_supports(const OpCall& call) {
  KILN_RETURN_IF_ERROR(require_dtypes(call, {DataType::kFloat16, DataType::kBFloat16}));
  const DataType dt = call.inputs[0].dtype;
  for (size_t i = 0; i < call.inputs.size(); ++i)
    if (call.inputs[i].present && call.inputs[i].dtype != dt)
      return unsupported(kImplName, " takes every input in x's type (", dtype_name(dt), "); input ", i, " is ",
                         dtype_name(call.inputs[i].dtype));
  if (call.outputs[0].dtype != dt)
    return unsupported(kImplName, " writes x's type (", dtype_name(dt), "), not ", dtype_name(call.outputs[0].dtype));
  const auto& a = call.attrs_as<ConvolutionAttrs>();
  if (!a.channels_last) return unsupported(kImplName, " takes channels_last (NHWC) convolutions only");
  if (a.group != 1) return unsupported(kImplName, " takes one group, not ", a.group);
  if (a.fused.on && a.fused.kind != ActivationKind::kRelu)
    return unsupported(kImplName, " fuses ReLU or no activation, not ", enum_name(a.fused.kind));
  const Dims& x = call.inputs[0].dims;
  const Dims& w = call.inputs[1].dims;
  if (x.rank() != 4 || w.rank() != 4)
    return unsupported("a channels_last convolution is 2-D: x [N, H, W, C], w [M, kH, kW, C]");
  if (!x.is_static() || !w.is_static()) return Status::ok();
  if (x[3] == 0 || w[0] == 0) return unsupported(kImplName, " takes no convolution without channels");
  KILN_RETURN_IF_ERROR(problem_of(call).status());
  if (const std::optional<Offer> offer = offered(call); offer && offer->tactics.empty())
    return unsupported("cuDNN has no engine for this convolution graph: ", offer->why_none);
  return Status::ok();
}

std::vector<std::string> conv_graph_tactics(const OpCall& call) {
  const std::optional<Offer> offer = offered(call);
  return offer ? offer->tactics : std::vector<std::string>{};
}

Result<std::unique_ptr<Kernel>> create_conv_graph(const OpCall& call) {
  std::optional<EngineChoice> choice;
  if (!call.tactic.empty()) {
    choice = EngineChoice::parse(call.tactic);
    if (!choice)
      return invalid_argument(kImplName, " has no tactic '", call.tactic,
                              "' (an engine configuration such as eng42 or eng42+k1=2+k3=0)");
  }
  auto kernel = std::make_unique<CudnnConvGraph>(choice);
  // With static shapes and a GPU the plan is made now, so that a configuration cuDNN no longer takes fails here.
  if (const std::optional<std::pair<cudnnHandle_t, int>> h = build_handle(call)) {
    KILN_ASSIGN_OR_RETURN(Problem p, problem_of(call));
    KILN_RETURN_IF_ERROR(kernel->prepare(h->first, p));
  }
  return std::unique_ptr<Kernel>(std::move(kernel));
}

KILN_REGISTER_KERNEL(KernelImpl{
    .name = kImplName,
    .op = "Convolution",
    .backend = Backend::kCuda,
    .priority = 9,
    .supports = conv_graph_supports,
    .create = create_conv_graph,
    .tactics = conv_graph_tactics,
});

}  // namespace
}  // namespace kiln
