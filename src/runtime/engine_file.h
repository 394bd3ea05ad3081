#pragma once
// Reading an engine file: the container's checks, then whether this machine is the engine's target (the
// CPU ISA or the GPU it was built for), then the graph, its constants in place over a mapped file.
#include <memory>
#include <string_view>

#include "graph/engine_format.h"
#include "graph/graph.h"

namespace kiln {

struct EngineFileContents {
  EngineHeader header;
  std::unique_ptr<Graph> graph;
  std::string_view plan;  ///< the plan section's JSON, a view into the bytes read
  /// The optimizer section's JSON (passes applied and refused), empty when the engine has none.
  std::string optimizer;
  /// The prepared section (kernels' build-time data, e.g. weights in oneDNN's layout), uint8; undefined when
  /// the engine has none. In place over `storage` when given, else a copy.
  Tensor prepared;
};

/// `storage`, when given, keeps `bytes` alive (a MappedFile): constants then use the bytes in place.
/// Without it the weights are copied once. Every error ends "rebuild the engine from the model".
Result<EngineFileContents> read_engine_file(std::string_view bytes, std::shared_ptr<const void> storage);

/// Ok when engines built for `header`'s device (a CPU ISA, or a GPU and compute capability) run here.
Status check_engine_target(const EngineHeader& header);

}  // namespace kiln
