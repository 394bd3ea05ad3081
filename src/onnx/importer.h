#pragma once
// The ONNX importer: ONNX model -> kiln graph. One registered importer per ONNX op turns a node
// into kiln nodes; ops that ONNX defines as functions and kiln has no importer for are expanded
// into their function bodies. Every node is checked before anything is built, and all problems
// are reported at once.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "onnx/onnx_node.h"

namespace kiln::onnx_import {

struct ImportOptions {
  /// Inputs whose dims should be fixed at import ("batch" -> 1 etc. are not guessed).
  std::map<std::string, Dims> input_dims;
};

/// The result: the graph plus the ONNX names of its inputs and outputs in model order.
struct ImportedModel {
  std::unique_ptr<Graph> graph;
  std::vector<std::string> input_names, output_names;
  int64_t ir_version = 0;
  std::map<std::string, int64_t> opsets;  ///< domain ("" is ai.onnx) -> version
  std::vector<std::string> warnings;
};

/// Reads and imports `path`. Errors name the file and, for node problems, every node at fault.
Result<ImportedModel> import_file(const std::string& path, const ImportOptions& options = {});
/// Imports serialized bytes; `base_dir` resolves external data; `source` names it in errors.
Result<ImportedModel> import_bytes(const std::string& bytes, const std::string& base_dir, const std::string& source,
                                   const ImportOptions& options = {});

class ImportContext;
using ImportFn = std::function<Status(ImportContext&, const OnnxNode&)>;
/// Optional static check of a node's attributes before anything is built.
using CheckFn = std::function<Status(const OnnxNode&)>;

struct OnnxImporter {
  std::string op_type;
  std::string domain;  ///< "" for ai.onnx
  ImportFn import;
  CheckFn check;
};

class ImporterRegistry {
 public:
  static ImporterRegistry& global();
  bool add(OnnxImporter importer);
  const OnnxImporter* find(const std::string& domain, const std::string& op_type) const;
  std::vector<std::string> op_types() const;

 private:
  std::map<std::pair<std::string, std::string>, OnnxImporter> importers_;
};

#define KILN_REGISTER_ONNX_IMPORTER(...)                                    \
  static const bool KILN_CONCAT(kiln_onnx_importer_registered_, __LINE__) = \
      ::kiln::onnx_import::ImporterRegistry::global().add(__VA_ARGS__)

/// What an importer works with: the graph being built and the map from ONNX names to values.
class ImportContext {
 public:
  ImportContext(Graph& graph, std::string base_dir, ImportContext* parent = nullptr)
      : graph_(graph), base_dir_(std::move(base_dir)), parent_(parent) {
    if (parent) opsets_ = parent->opsets_;
  }

  Graph& graph() { return graph_; }
  const std::string& base_dir() const { return base_dir_; }
  /// The value of the node's input i; nullptr for a skipped optional input.
  Result<Value*> input(const OnnxNode& node, int i);
  /// The constant host value of input i, or nullptr when it is not a constant.
  const Tensor* constant_input(const OnnxNode& node, int i);
  /// Adds a kiln node for an ONNX node. With `final` its outputs take the ONNX output names and are
  /// bound to them; otherwise it is an intermediate step named "<node>/<suffix>".
  Result<Node*> add(const OnnxNode& node, std::string_view op, std::unique_ptr<Attrs> attrs, std::vector<Value*> inputs,
                    bool final = true, const std::string& suffix = "");
  template <class A>
  Result<Node*> add(const OnnxNode& node, std::string_view op, A attrs, std::vector<Value*> inputs, bool final = true,
                    const std::string& suffix = "") {
    return add(node, op, std::unique_ptr<Attrs>(std::make_unique<A>(std::move(attrs))), std::move(inputs), final,
               suffix);
  }
  /// Adds a constant made for this node ("<node>/<suffix>").
  Result<Value*> add_constant(const OnnxNode& node, const std::string& suffix, Tensor value);
  /// Adds a node that owns subgraphs (If, Loop, Scan); their captures are appended to `inputs`.
  Result<Node*> add_owner(const OnnxNode& node, std::string_view op, std::unique_ptr<Attrs> attrs,
                          std::vector<Value*> inputs, std::vector<Subgraph> subgraphs);
  /// Imports graph attribute `attr` of the node as a subgraph. `hints` give the types of its inputs where
  /// the model leaves them out (Loop's carried values); names from enclosing graphs become captures.
  Result<Subgraph> import_subgraph(const OnnxNode& node, const std::string& attr, const std::vector<TensorDesc>& hints);
  /// Imports the nodes of graph attribute `attr` into this graph (an If whose condition is known) and
  /// binds the node's outputs to the subgraph's outputs.
  Status inline_subgraph(const OnnxNode& node, const std::string& attr);
  /// Makes ONNX output i of the node an alias of `value` (Identity, Dropout in inference...).
  Status bind_output(const OnnxNode& node, int i, Value* value);

  // Used by the importer driver.
  void bind(const std::string& onnx_name, Value* value) { env_[onnx_name] = value; }
  /// The value of an ONNX name; in a subgraph a name of an enclosing graph becomes a capture (or a copy
  /// of a constant).
  Value* lookup(const std::string& onnx_name);
  /// Outer values this subgraph's context captured, in order.
  const std::vector<Value*>& captured() const { return captured_; }
  std::map<std::string, int64_t>& opsets() { return opsets_; }
  std::string node_name(const OnnxNode& node) const;
  void warn(std::string message) {
    if (parent_) return parent_->warn(std::move(message));
    warnings_.push_back(std::move(message));
  }
  std::vector<std::string>& warnings() { return warnings_; }

 private:
  Graph& graph_;
  std::string base_dir_;
  ImportContext* parent_ = nullptr;
  std::map<std::string, Value*> env_;
  std::vector<Value*> captured_;
  std::map<std::string, int64_t> opsets_;
  std::vector<std::string> warnings_;
};

}  // namespace kiln::onnx_import
