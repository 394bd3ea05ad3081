#pragma once
// Graph <-> bytes: a JSON description (inputs, constants, nodes with their attributes, outputs) and the
// constants' raw data, each constant's data at a multiple of kWeightAlignment. Engines keep the two in
// separate sections so that a mapped engine file's constants are used in place; checkpoints embed both.
#include <memory>
#include <string>
#include <string_view>

#include "graph/graph.h"
#include "graph/section_pieces.h"

namespace kiln {

inline constexpr uint64_t kWeightAlignment = 64;

struct SerializedGraph {
  std::string description;  ///< JSON; constants name their offset and size in `weights`
  SectionPieces weights;    ///< handles to the constants' data, copied where the section is placed
};
SerializedGraph serialize_graph_parts(const Graph& graph);
/// The same from a graph thrown away as it is written: `weights` then holds the constants' last handles, so each is
/// freed once it is copied and a model's weights are never held twice.
SerializedGraph serialize_graph_parts(std::unique_ptr<Graph> graph);
/// Rebuilds a graph; errors say what is malformed (an unknown op, bad attributes, a constant past the data).
/// When `weights_owner` keeps `weights` alive, constants are tensors over it in place (string constants and
/// data not 64-byte aligned are copied); without an owner the weights are copied once.
Result<std::unique_ptr<Graph>> deserialize_graph(std::string_view description, std::string_view weights,
                                                 std::shared_ptr<const void> weights_owner);

/// Both parts in one byte string (u64 description length, description, weights).
std::string serialize_graph(const Graph& graph);
Result<std::unique_ptr<Graph>> deserialize_graph(std::string_view bytes);

}  // namespace kiln
