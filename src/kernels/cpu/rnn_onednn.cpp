// oneDNN LSTM (with peepholes), GRU (vanilla = ONNX linear_before_reset 0, lbr = 1) and vanilla RNN for
// the default activations without clip. Weights are reordered into oneDNN's gate order and ldigo layout on
// every run (kiln cannot tell here whether they are constant). Batches with unequal sequence_lens run
// on the own-code kernel instead.
#include <unordered_map>

#include "kernels/common/rnn_problem.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/rnn.h"

namespace kiln {
namespace {

using namespace rnn_input;
using tag = dnnl::memory::format_tag;

enum class Cell { kLstm, kGru, kLbrGru, kVanilla };

int64_t gates_of(Cell cell) { return cell == Cell::kLstm ? 4 : cell == Cell::kVanilla ? 1 : 3; }

// ONNX gate index of oneDNN gate g: LSTM oneDNN i,f,c,o vs ONNX i,o,f,c; GRU u,r,o == z,r,h.
int64_t onnx_gate(Cell cell, int64_t g) {
  static constexpr int64_t kLstmGates[] = {0, 2, 3, 1};
  return cell == Cell::kLstm ? kLstmGates[g] : g;
}

const RnnCommonAttrs& common(const OpCall& call, Cell cell) {
  if (cell == Cell::kLstm) return call.attrs_as<LstmAttrs>();
  if (cell == Cell::kVanilla) return call.attrs_as<RnnAttrs>();
  return call.attrs_as<GruAttrs>();
}

// The vanilla RNN's activation as a oneDNN algorithm and alpha, if oneDNN has it.
std::optional<std::pair<dnnl::algorithm, float>> vanilla_activation(const RnnAttrs& a) {
  std::optional<std::pair<dnnl::algorithm, float>> out;
  for (int d = 0; d < a.num_directions(); ++d) {
    const rnn::Fn f = rnn::functions(a, 1, d)[0];
    std::pair<dnnl::algorithm, float> alg;
    switch (f.kind) {
      case RnnActivation::kTanh: alg = {dnnl::algorithm::eltwise_tanh, 0.f}; break;
      case RnnActivation::kSigmoid: alg = {dnnl::algorithm::eltwise_logistic, 0.f}; break;
      case RnnActivation::kRelu: alg = {dnnl::algorithm::eltwise_relu, 0.f}; break;
      case RnnActivation::kLeakyRelu: alg = {dnnl::algorithm::eltwise_relu, f.alpha}; break;
      default: return std::nullopt;
    }
    if (out && *out != alg) return std::nullopt;  // one primitive, one activation
    out = alg;
  }
  return out;
}

Status supports_onednn(const OpCall& call, Cell cell) {
  KILN_RETURN_IF_ERROR(require_float_dtypes(call, {DataType::kFloat32}));
  const RnnCommonAttrs& a = common(call, cell);
  if (a.clip > 0.f) return unsupported("oneDNN RNN primitives have no clip");
  switch (cell) {
    case Cell::kLstm:
      if (call.attrs_as<LstmAttrs>().input_forget) return unsupported("oneDNN LSTM has no input_forget");
      if (!rnn::uses_functions(a, 3, {RnnActivation::kSigmoid, RnnActivation::kTanh, RnnActivation::kTanh}))
        return unsupported("oneDNN LSTM computes only sigmoid, tanh, tanh");
      break;
    case Cell::kGru:
    case Cell::kLbrGru:
      if (!rnn::uses_functions(a, 2, {RnnActivation::kSigmoid, RnnActivation::kTanh}))
        return unsupported("oneDNN GRU computes only sigmoid, tanh");
      break;
    case Cell::kVanilla:
      if (!vanilla_activation(call.attrs_as<RnnAttrs>()))
        return unsupported("oneDNN vanilla RNN needs one of tanh, sigmoid, relu, leaky_relu for all directions");
      break;
  }
  if (call.inputs[kX].dims.numel() == 0 || call.inputs[kR].dims.numel() == 0)
    return unsupported("oneDNN RNN needs non-empty seq, batch, input and hidden");
  return Status::ok();
}

class OnednnRnn final : public Kernel {
 public:
  OnednnRnn(Cell cell, RunFn fallback) : cell_(cell), fallback_(std::move(fallback)) {}
  /// oneDNN's implementation ("ref:any" for every RNN in the oneDNN Debian ships).
  std::string detail() const override { return impl_.empty() ? "" : "oneDNN " + impl_; }
  size_t workspace_bytes() const override { return workspace_; }

  Status run(KernelContext& ctx) override {
    const RnnCommonAttrs& a = common(ctx.call, cell_);
    const rnn::Problem p(ctx, a, gates_of(cell_));
    KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> lens, rnn::lengths(ctx, p));
    bool fits = p.seq > 0 && p.batch > 0 && p.input > 0 && p.hidden > 0;  // dims may have been dynamic
    for (int64_t l : lens) fits &= l == p.seq;                            // oneDNN has no per-entry lengths
    if (!fits) return fallback_(ctx);
    return onednn::guard("RNN", [&] {
      if (!prim_ || ctx.src[kX].dims() != x_dims_ || p.hidden != hidden_) build(ctx, a, p);
      pack_weights(ctx, p);
      pack_state(p, rnn::optional_input(ctx, kInitialH), src_iter_.data());
      if (cell_ == Cell::kLstm) pack_state(p, rnn::optional_input(ctx, kInitialC), src_iter_c_.data());
      const bool direct_y = p.dirs == 1 || p.layout == 1;  // Y is then tnc / ntc with channels dirs * hidden
      void* dst_layer = direct_y ? ctx.dst[0].raw() : y_scratch_.data();
      auto mem = [&](const dnnl::memory::desc& d, void* ptr) { return dnnl::memory(d, onednn::engine(), ptr); };
      std::unordered_map<int, dnnl::memory> args{
          {DNNL_ARG_SRC_LAYER, mem(src_layer_desc_, ctx.src[kX].raw())},
          {DNNL_ARG_SRC_ITER, mem(iter_desc_, src_iter_.data())},
          {DNNL_ARG_WEIGHTS_LAYER, mem(weights_layer_desc_, weights_layer_.data())},
          {DNNL_ARG_WEIGHTS_ITER, mem(weights_iter_desc_, weights_iter_.data())},
          {DNNL_ARG_BIAS, mem(bias_desc_, bias_.data())},
          {DNNL_ARG_DST_LAYER, mem(dst_layer_desc_, dst_layer)},
          {DNNL_ARG_DST_ITER, mem(iter_desc_, dst_iter_.data())},
      };
      if (cell_ == Cell::kLstm) {
        args.emplace(DNNL_ARG_SRC_ITER_C, mem(iter_desc_, src_iter_c_.data()));
        args.emplace(DNNL_ARG_DST_ITER_C, mem(iter_desc_, dst_iter_c_.data()));
        if (has_peepholes_) args.emplace(DNNL_ARG_WEIGHTS_PEEPHOLE, mem(peephole_desc_, peephole_.data()));
      }
      prim_->execute(onednn::stream(), args);
      onednn::stream().wait();
      if (!direct_y) unpack_y(p, ctx.dst[0].data<float>());
      unpack_state(p, dst_iter_.data(), ctx.dst[1].data<float>());
      if (cell_ == Cell::kLstm) unpack_state(p, dst_iter_c_.data(), ctx.dst[2].data<float>());
    });
  }

 private:
  void build(const KernelContext& ctx, const RnnCommonAttrs& a, const rnn::Problem& p) {
    using dt = dnnl::memory::data_type;
    const int64_t gates = gates_of(cell_), bias_gates = cell_ == Cell::kLbrGru ? 4 : gates;
    const int64_t dirs = p.dirs, hidden = p.hidden;
    const tag seq_tag = p.layout == 0 ? tag::tnc : tag::ntc;
    src_layer_desc_ = dnnl::memory::desc({p.seq, p.batch, p.input}, dt::f32, seq_tag);
    dst_layer_desc_ = dnnl::memory::desc({p.seq, p.batch, dirs * hidden}, dt::f32, seq_tag);
    iter_desc_ = dnnl::memory::desc({1, dirs, p.batch, hidden}, dt::f32, tag::ldnc);
    weights_layer_desc_ = dnnl::memory::desc({1, dirs, p.input, gates, hidden}, dt::f32, tag::ldigo);
    weights_iter_desc_ = dnnl::memory::desc({1, dirs, hidden, gates, hidden}, dt::f32, tag::ldigo);
    bias_desc_ = dnnl::memory::desc({1, dirs, bias_gates, hidden}, dt::f32, tag::ldgo);
    has_peepholes_ = cell_ == Cell::kLstm && ctx.src.size() > kP && ctx.src[kP].defined();
    peephole_desc_ =
        has_peepholes_ ? dnnl::memory::desc({1, dirs, 3, hidden}, dt::f32, tag::ldgo) : dnnl::memory::desc();
    const auto dir = a.direction == RnnDirection::kForward   ? dnnl::rnn_direction::unidirectional_left2right
                     : a.direction == RnnDirection::kReverse ? dnnl::rnn_direction::unidirectional_right2left
                                                             : dnnl::rnn_direction::bidirectional_concat;
    const auto prop = dnnl::prop_kind::forward_inference;
    auto& eng = onednn::engine();
    switch (cell_) {
      case Cell::kLstm: {
        dnnl::lstm_forward::desc d(prop, dir, src_layer_desc_, iter_desc_, iter_desc_, weights_layer_desc_,
                                   weights_iter_desc_, peephole_desc_, bias_desc_, dst_layer_desc_, iter_desc_,
                                   iter_desc_);
        const dnnl::lstm_forward::primitive_desc pd(d, eng);
        prim_ = dnnl::lstm_forward(pd);
        impl_ = pd.impl_info_str();
        workspace_ = pd.scratchpad_desc().get_size();
        break;
      }
      case Cell::kGru: {
        dnnl::gru_forward::desc d(prop, dir, src_layer_desc_, iter_desc_, weights_layer_desc_, weights_iter_desc_,
                                  bias_desc_, dst_layer_desc_, iter_desc_);
        const dnnl::gru_forward::primitive_desc pd(d, eng);
        prim_ = dnnl::gru_forward(pd);
        impl_ = pd.impl_info_str();
        workspace_ = pd.scratchpad_desc().get_size();
        break;
      }
      case Cell::kLbrGru: {
        dnnl::lbr_gru_forward::desc d(prop, dir, src_layer_desc_, iter_desc_, weights_layer_desc_, weights_iter_desc_,
                                      bias_desc_, dst_layer_desc_, iter_desc_);
        const dnnl::lbr_gru_forward::primitive_desc pd(d, eng);
        prim_ = dnnl::lbr_gru_forward(pd);
        impl_ = pd.impl_info_str();
        workspace_ = pd.scratchpad_desc().get_size();
        break;
      }
      case Cell::kVanilla: {
        const auto act = *vanilla_activation(static_cast<const RnnAttrs&>(a));
        dnnl::vanilla_rnn_forward::desc d(prop, act.first, dir, src_layer_desc_, iter_desc_, weights_layer_desc_,
                                          weights_iter_desc_, bias_desc_, dst_layer_desc_, iter_desc_,
                                          dnnl::rnn_flags::undef, act.second);
        const dnnl::vanilla_rnn_forward::primitive_desc pd(d, eng);
        prim_ = dnnl::vanilla_rnn_forward(pd);
        impl_ = pd.impl_info_str();
        workspace_ = pd.scratchpad_desc().get_size();
        break;
      }
    }
    const size_t state = static_cast<size_t>(dirs * p.batch * hidden);
    src_iter_.resize(state);
    dst_iter_.resize(state);
    src_iter_c_.resize(cell_ == Cell::kLstm ? state : 0);
    dst_iter_c_.resize(cell_ == Cell::kLstm ? state : 0);
    weights_layer_.resize(static_cast<size_t>(dirs * p.input * gates * hidden));
    weights_iter_.resize(static_cast<size_t>(dirs * hidden * gates * hidden));
    bias_.resize(static_cast<size_t>(dirs * bias_gates * hidden));
    peephole_.resize(has_peepholes_ ? static_cast<size_t>(dirs * 3 * hidden) : 0);
    y_scratch_.resize(p.dirs == 1 || p.layout == 1 ? 0 : static_cast<size_t>(p.seq * p.batch * dirs * hidden));
    x_dims_ = ctx.src[kX].dims();
    hidden_ = hidden;
  }

  // ONNX W [dirs, gates * H, in] (rows by ONNX gate) -> oneDNN [dirs, in, gates, H] by oneDNN gate.
  void pack_weights(const KernelContext& ctx, const rnn::Problem& p) {
    const int64_t gates = gates_of(cell_), hidden = p.hidden;
    auto pack = [&](const float* src, int64_t in, float* dst) {
      for (int64_t d = 0; d < p.dirs; ++d)
        for (int64_t g = 0; g < gates; ++g) {
          const float* rows = src + (d * gates + onnx_gate(cell_, g)) * hidden * in;
          for (int64_t o = 0; o < hidden; ++o)
            for (int64_t i = 0; i < in; ++i) dst[((d * in + i) * gates + g) * hidden + o] = rows[o * in + i];
        }
    };
    pack(ctx.src[kW].data<float>(), p.input, weights_layer_.data());
    pack(ctx.src[kR].data<float>(), hidden, weights_iter_.data());
    // ONNX B = [Wb, Rb]; oneDNN takes their sum, except lbr GRU: o gets Wb_h and a 4th gate Rb_h.
    const float* b = rnn::optional_input(ctx, kB);
    const int64_t bias_gates = cell_ == Cell::kLbrGru ? 4 : gates;
    for (int64_t d = 0; d < p.dirs; ++d) {
      const float* wb = b ? b + d * 2 * gates * hidden : nullptr;
      const float* rb = wb ? wb + gates * hidden : nullptr;
      for (int64_t g = 0; g < bias_gates; ++g)
        for (int64_t o = 0; o < hidden; ++o) {
          float v = 0.f;
          if (wb) {
            if (cell_ == Cell::kLbrGru && g == 2)
              v = wb[2 * hidden + o];
            else if (cell_ == Cell::kLbrGru && g == 3)
              v = rb[2 * hidden + o];
            else
              v = wb[onnx_gate(cell_, g) * hidden + o] + rb[onnx_gate(cell_, g) * hidden + o];
          }
          bias_[(d * bias_gates + g) * hidden + o] = v;
        }
    }
    if (has_peepholes_) {
      // ONNX P i, o, f -> oneDNN i, f, o.
      static constexpr int64_t kPeep[] = {0, 2, 1};
      const float* peep = ctx.src[kP].data<float>();
      for (int64_t d = 0; d < p.dirs; ++d)
        for (int64_t g = 0; g < 3; ++g)
          std::copy(peep + (d * 3 + kPeep[g]) * hidden, peep + (d * 3 + kPeep[g] + 1) * hidden,
                    peephole_.data() + (d * 3 + g) * hidden);
    }
  }

  // ONNX state (layout 0 [dirs, batch, H], 1 [batch, dirs, H]) <-> oneDNN ldnc.
  static void pack_state(const rnn::Problem& p, const float* src, float* dst) {
    for (int64_t d = 0; d < p.dirs; ++d)
      for (int64_t b = 0; b < p.batch; ++b) {
        float* out = dst + (d * p.batch + b) * p.hidden;
        if (src)
          std::copy(src + p.state_at(d, b), src + p.state_at(d, b) + p.hidden, out);
        else
          std::fill(out, out + p.hidden, 0.f);
      }
  }
  static void unpack_state(const rnn::Problem& p, const float* src, float* dst) {
    for (int64_t d = 0; d < p.dirs; ++d)
      for (int64_t b = 0; b < p.batch; ++b)
        std::copy(src + (d * p.batch + b) * p.hidden, src + (d * p.batch + b + 1) * p.hidden, dst + p.state_at(d, b));
  }
  // tnc [seq, batch, dirs * H] -> Y [seq, dirs, batch, H].
  void unpack_y(const rnn::Problem& p, float* y) const {
    for (int64_t t = 0; t < p.seq; ++t)
      for (int64_t b = 0; b < p.batch; ++b)
        for (int64_t d = 0; d < p.dirs; ++d) {
          const float* src = y_scratch_.data() + ((t * p.batch + b) * p.dirs + d) * p.hidden;
          std::copy(src, src + p.hidden, y + p.y_at(t, d, b));
        }
  }

  Cell cell_;
  RunFn fallback_;
  std::optional<dnnl::primitive> prim_;
  std::string impl_;
  size_t workspace_ = 0;
  Dims x_dims_;
  int64_t hidden_ = -1;
  bool has_peepholes_ = false;
  dnnl::memory::desc src_layer_desc_, dst_layer_desc_, iter_desc_, weights_layer_desc_, weights_iter_desc_, bias_desc_,
      peephole_desc_;
  std::vector<float> src_iter_, dst_iter_, src_iter_c_, dst_iter_c_, weights_layer_, weights_iter_, bias_, peephole_,
      y_scratch_;
};

KernelImpl onednn_impl(const char* name, const char* op, const std::function<Cell(const OpCall&)>& cell_of,
                       const RunFn& fallback) {
  return {
      .name = name,
      .op = op,
      .backend = Backend::kCpu,
      .priority = 10,
      .supports = [cell_of](const OpCall& call) { return supports_onednn(call, cell_of(call)); },
      .create = [cell_of, fallback](const OpCall& call) -> Result<std::unique_ptr<Kernel>> {
        return std::unique_ptr<Kernel>(std::make_unique<OnednnRnn>(cell_of(call), fallback));
      },
  };
}

KILN_REGISTER_KERNEL(onednn_impl(
    "cpu.onednn.lstm", "LSTM", [](const OpCall&) { return Cell::kLstm; }, cpu::run_lstm));
KILN_REGISTER_KERNEL(onednn_impl(
    "cpu.onednn.gru", "GRU",
    [](const OpCall& call) { return call.attrs_as<GruAttrs>().linear_before_reset ? Cell::kLbrGru : Cell::kGru; },
    cpu::run_gru));
KILN_REGISTER_KERNEL(onednn_impl(
    "cpu.onednn.rnn", "RNN", [](const OpCall&) { return Cell::kVanilla; }, cpu::run_rnn));

}  // namespace
}  // namespace kiln
