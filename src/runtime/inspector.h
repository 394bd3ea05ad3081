#pragma once
// The engine inspector: the layers of an engine as JSON (kiln exec --exportLayerInfo, kiln inspect).
#include <string>

#include "runtime/engine.h"

namespace kiln {

/// Layers in execution order with their op, kernel, inputs and outputs (dtype and shape: the context's
/// planned shapes when `ctx` has run or planned, else the engine's), the bindings, and the activation memory.
std::string layer_info_json(const EngineImpl& engine, ContextImpl* ctx = nullptr);

}  // namespace kiln
