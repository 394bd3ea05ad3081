#pragma once
// The ONNX exporter: kiln graph -> ONNX model (opset 17). One registered exporter per kiln op
// writes the ONNX node(s) for a kiln node; constants become initializers.
#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <string>

#include "graph/graph.h"

namespace kiln::onnx_export {

inline constexpr int kExportOpset = 17;

class ExportContext {
 public:
  explicit ExportContext(onnx::GraphProto& graph) : graph_(graph) {}
  /// The ONNX name of a kiln value ("" for an absent optional input).
  std::string name(const Value* value) const { return value ? value->name : std::string(); }
  /// A name no value uses yet, derived from `base`.
  std::string fresh_name(const std::string& base);
  /// Appends a node; its name defaults to a fresh one derived from the kiln node's.
  onnx::NodeProto& add_node(const std::string& op_type, const std::vector<std::string>& inputs,
                            const std::vector<std::string>& outputs, const std::string& name);
  /// Adds an initializer holding `value` and returns its name.
  std::string add_initializer(const std::string& base, const Tensor& value);
  /// Convenience: an int64 1-D initializer (shapes, axes, pads).
  std::string add_int64s(const std::string& base, const std::vector<int64_t>& values);

  onnx::GraphProto& graph() { return graph_; }

 private:
  onnx::GraphProto& graph_;
  std::map<std::string, int> used_;
};

// Attribute setters.
void set_attr(onnx::NodeProto& node, const std::string& name, int64_t value);
void set_attr(onnx::NodeProto& node, const std::string& name, float value);
void set_attr(onnx::NodeProto& node, const std::string& name, const std::string& value);
void set_attr(onnx::NodeProto& node, const std::string& name, const std::vector<int64_t>& values);
void set_attr(onnx::NodeProto& node, const std::string& name, const std::vector<float>& values);
void set_attr(onnx::NodeProto& node, const std::string& name, const std::vector<std::string>& values);

/// Inputs and outputs of a kiln node as ONNX names (absent inputs as "").
std::vector<std::string> input_names(const ExportContext& ctx, const Node& node);
std::vector<std::string> output_names(const ExportContext& ctx, const Node& node);

using ExportFn = std::function<Status(ExportContext&, const Node&)>;

class ExporterRegistry {
 public:
  static ExporterRegistry& global();
  bool add(const std::string& op, ExportFn fn);
  const ExportFn* find(const std::string& op) const;

 private:
  std::map<std::string, ExportFn> exporters_;
};

#define KILN_REGISTER_ONNX_EXPORTER(op, ...)                                \
  static const bool KILN_CONCAT(kiln_onnx_exporter_registered_, __LINE__) = \
      ::kiln::onnx_export::ExporterRegistry::global().add(op, __VA_ARGS__)

/// Writes `graph` (inputs, initializers, nodes, outputs) into `proto`; a subgraph's captures are
/// referred to by name. Used for the model's graph and for the graphs If, Loop and Scan own.
Status export_graph(const Graph& graph, onnx::GraphProto& proto);
/// The ONNX type of a kiln value (tensor, sequence or optional).
void value_info(const Value* v, onnx::ValueInfoProto& info);

/// Serialized ModelProto; every node kiln cannot express in ONNX is listed in the error.
Result<std::string> export_model(const Graph& graph, const std::string& graph_name = "kiln");
Status export_file(const Graph& graph, const std::string& path);

}  // namespace kiln::onnx_export
