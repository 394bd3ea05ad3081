#pragma once
// The ONNX importer: ONNX model -> kiln graph. One registered importer per ONNX op turns a node
// into kiln nodes; ops that ONNX defines as functions and kiln has no importer for are expanded
// into their function bodies. Every node is checked before anything is built, and all problems
// are reported at once.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "graph/graph.h"
#include "onnx/onnx_node.h"
#include "onnx/tensor_proto.h"

namespace kiln::onnx_import {

struct ImportOptions {
  /// Inputs whose dims should be fixed at import ("batch" -> 1 etc. are not guessed).
  std::map<std::string, Dims> input_dims;
  /// A folder external data may also resolve into (model-hub caches keep blobs behind symlinks);
  /// empty: only the model's own folder (after following symlinks).
  std::string external_data_root;
  /// Bytes of initializers, external data and folded constants one import may hold; 0: half of
  /// physical memory (or of the address-space cap).
  uint64_t memory_budget = 0;
  /// Estimated element operations one constant fold may take; costlier nodes are left to run time.
  double fold_work_limit = 4e9;
  /// Estimated element operations all constant folds of one import may take together; once spent,
  /// the remaining nodes are left to run time.
  double fold_work_total = 4e10;
  /// Bytes one folded node may produce.
  uint64_t fold_node_bytes = uint64_t{1} << 24;
  /// A warning names every tensor of the graph larger than this.
  uint64_t large_tensor_bytes = uint64_t{2} << 30;
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
  ImportContext(Graph& graph, TensorSource source, FoldLimits limits = {}, double fold_work_total = 4e10,
                ImportContext* parent = nullptr)
      : graph_(graph), source_(std::move(source)), limits_(limits), work_left_(fold_work_total), parent_(parent) {
    if (parent) opsets_ = parent->opsets_;
  }

  Graph& graph() { return graph_; }
  const std::string& base_dir() const { return source_.base_dir; }
  /// Where external data may come from and the memory budget tensors are charged to.
  const TensorSource& tensor_source() const { return source_; }
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
  void bind(const std::string& onnx_name, Value* value) {
    env_[onnx_name] = value;
    names_of_[value].push_back(onnx_name);
  }
  /// Every ONNX name bound to `value` (aliases included).
  const std::vector<std::string>& names_of(Value* value) { return names_of_[value]; }
  /// The value of an ONNX name; in a subgraph a name of an enclosing graph becomes a capture (or a copy
  /// of a constant).
  Value* lookup(const std::string& onnx_name);
  /// Outer values this subgraph's context captured, in order.
  const std::vector<Value*>& captured() const { return captured_; }
  std::map<std::string, int64_t>& opsets() { return opsets_; }
  std::string node_name(const OnnxNode& node) const;
  /// Folds the kiln node `n` made for `node` when its inputs are known, within the limits and budget.
  Status fold(Node* n, const OnnxNode& node);
  /// Drops the folded value of `value` (no reader left) and returns its bytes to the budget.
  void release_known_value(Value* value);
  /// An ONNX value no node and no graph output reads: its producer is not folded.
  void set_unread(const std::string& onnx_name) { unread_.insert(onnx_name); }
  void warn(std::string message) {
    if (parent_) return parent_->warn(std::move(message));
    warnings_.push_back(std::move(message));
  }
  std::vector<std::string>& warnings() { return warnings_; }

 private:
  Graph& graph_;
  // The fold work left to the whole import (a subgraph spends its root's budget).
  double& work_left() { return parent_ ? parent_->work_left() : work_left_; }

  TensorSource source_;
  FoldLimits limits_;
  double work_left_;
  bool work_spent_logged_ = false;
  ImportContext* parent_ = nullptr;
  std::unordered_map<std::string, Value*> env_;
  std::unordered_set<std::string> unread_;
  std::unordered_map<Value*, std::vector<std::string>> names_of_;
  std::vector<Value*> captured_;
  std::map<std::string, int64_t> opsets_;
  std::vector<std::string> warnings_;
};

}  // namespace kiln::onnx_import
