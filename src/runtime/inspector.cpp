#include "runtime/inspector.h"

#include <nlohmann/json.hpp>

#include "ops/convolution/convolution.h"
#include "ops/pooling/pooling.h"

namespace kiln {

namespace {

// A 2-D convolution or pooling layer whose activations are channels-last (the layout-nhwc pass).
bool channels_last_layer(const Node* n) {
  if (!n || !n->attrs) return false;
  if (n->op() == "Convolution") return static_cast<const ConvolutionAttrs&>(*n->attrs).channels_last;
  if (n->op() == "Pooling") return static_cast<const PoolingAttrs&>(*n->attrs).channels_last;
  return false;
}

// The channel block of a convolution in blocks (the layout-blocked pass), else 0.
int64_t channel_block_of(const Node* n) {
  if (!n || !n->attrs || n->op() != "Convolution") return 0;
  return static_cast<const ConvolutionAttrs&>(*n->attrs).channel_block;
}

// How a tensor lies in memory: "NHWC" for the activations of channels-last layers (and the transposes into and out
// of them), "KRSC" for their weights ([M, kH, kW, C/group]), "nChw8c" (oneDNN's name) for activations in blocks of 8
// channels, "linear" (row-major in the given dims) otherwise.
std::string format_of(const Value& v) {
  if (channels_last_layer(v.producer)) return "NHWC";
  if (const int64_t b = channel_block_of(v.producer); b > 0) return str_cat("nChw", b, "c");
  for (const Use& use : v.uses) {
    const ConvolutionAttrs* a = use.node->op() == "Convolution" && use.node->attrs
                                    ? &static_cast<const ConvolutionAttrs&>(*use.node->attrs)
                                    : nullptr;
    if (a && a->channel_block > 0 && (use.input == 3 || (use.input == 0 && !a->plain_input)))
      return str_cat("nChw", a->channel_block, "c");
  }
  for (const Use& use : v.uses) {
    if (!channels_last_layer(use.node)) continue;
    if (use.node->op() == "Convolution" && use.input == 1) return "KRSC";
    if (use.input == 0 || use.input == 3) return "NHWC";
  }
  return "linear";
}

nlohmann::json tensor_json(const Value& v, const TensorDesc* planned) {
  nlohmann::json t = {{"Name", v.name}, {"Kind", std::string(value_kind_name(v.kind))}};
  if (v.kind == ValueKind::kTensor) {
    t["Datatype"] = std::string(dtype_name(planned ? planned->dtype : v.dtype));
    t["Dimensions"] = (planned ? planned->dims : v.dims).to_vector();
    t["Format"] = format_of(v);
    if (v.prepared_only) t["StoredOnlyPrepared"] = true;  // the engine holds it only as its readers' prepared data
  }
  return t;
}

}  // namespace

std::string layer_info_json(const EngineImpl& engine, ContextImpl* ctx) {
  const GraphPlan& plan = engine.plan();
  const std::vector<TensorDesc> planned = ctx ? ctx->planned_descs() : std::vector<TensorDesc>{};
  auto desc = [&](int slot) -> const TensorDesc* {
    return slot >= 0 && static_cast<size_t>(slot) < planned.size() && planned[slot].present ? &planned[slot] : nullptr;
  };
  nlohmann::json layers = nlohmann::json::array();
  for (const PlanStep& st : plan.steps) {
    nlohmann::json layer = {
        {"Name", st.node->name}, {"LayerType", st.node->op()},        {"Kernel", st.impl ? st.impl->name : "host"},
        {"Tactic", st.tactic},   {"Inputs", nlohmann::json::array()}, {"Outputs", nlohmann::json::array()}};
    if (const std::string detail = ctx ? ctx->kernel_detail(st) : std::string(); !detail.empty())
      layer["Implementation"] = detail;
    if (st.prepared.defined()) layer["PreparedBytes"] = st.prepared.nbytes();
    if (engine.is_host_fallback(st)) layer["HostFallback"] = true;  // no CUDA kernel: runs on the host
    for (size_t i = 0; i < st.in.size(); ++i)
      if (st.in[i] >= 0) layer["Inputs"].push_back(tensor_json(*st.node->inputs[i], desc(st.in[i])));
    for (size_t i = 0; i < st.out.size(); ++i)
      layer["Outputs"].push_back(tensor_json(*st.node->outputs[i], desc(st.out[i])));
    layers.push_back(std::move(layer));
  }
  nlohmann::json bindings = nlohmann::json::array();
  for (size_t i = 0; i < plan.input_slots.size(); ++i)
    bindings.push_back(tensor_json(*engine.graph().inputs()[i], desc(plan.input_slots[i])));
  for (auto& b : bindings) b["Mode"] = "input";
  for (size_t i = 0; i < plan.output_slots.size(); ++i) {
    bindings.push_back(tensor_json(*engine.graph().outputs()[i], desc(plan.output_slots[i])));
    bindings.back()["Mode"] = "output";
  }
  nlohmann::json out = {{"Layers", layers}, {"Bindings", bindings}, {"KilnVersion", engine.header().kiln_version}};
  out["Device"] = engine.device().to_string();
  if (engine.device().is_cuda()) out["HostFallbackLayers"] = engine.host_fallback_count();
  if (!engine.optimizer_report().empty()) {
    auto optimizer = nlohmann::json::parse(engine.optimizer_report(), nullptr, false);
    if (!optimizer.is_discarded()) out["Optimizer"] = std::move(optimizer);
  }
  if (ctx) {
    auto memory = ctx->memory_report();
    if (memory)
      out["ActivationMemory"] = {{"PlannedBytes", memory->planned_bytes},
                                 {"UnplannedBytes", memory->unplanned_bytes},
                                 {"PlannedValues", memory->planned_values},
                                 {"InPlaceValues", memory->in_place_values},
                                 {"DynamicValues", memory->dynamic_values}};
  }
  return out.dump(1) + "\n";
}

}  // namespace kiln
