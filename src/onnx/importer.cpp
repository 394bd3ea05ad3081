#include "onnx/importer.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <unordered_map>

#include "graph/unroll_loops.h"
#include "kiln/logger.h"
#include "onnx/tensor_proto.h"

namespace kiln::onnx_import {

// ---- registry ---------------------------------------------------------------------------------

ImporterRegistry& ImporterRegistry::global() {
  static ImporterRegistry* r = new ImporterRegistry;
  return *r;
}

bool ImporterRegistry::add(OnnxImporter importer) {
  auto key = std::make_pair(importer.domain, importer.op_type);
  return importers_.emplace(key, std::move(importer)).second;
}

const OnnxImporter* ImporterRegistry::find(const std::string& domain, const std::string& op_type) const {
  auto it = importers_.find({domain == "ai.onnx" ? "" : domain, op_type});
  return it == importers_.end() ? nullptr : &it->second;
}

std::vector<std::string> ImporterRegistry::op_types() const {
  std::vector<std::string> out;
  for (auto& [key, _] : importers_) out.push_back(key.first.empty() ? key.second : key.first + "." + key.second);
  return out;
}

// ---- context ----------------------------------------------------------------------------------

namespace {

// The element count of static dims, in double so that absurd shapes do not overflow.
double elements(const Dims& dims) {
  double n = 1;
  for (int64_t d : dims) n *= static_cast<double>(d);
  return n;
}

}  // namespace

Value* ImportContext::lookup(const std::string& onnx_name) {
  auto it = env_.find(onnx_name);
  if (it != env_.end()) return it->second;
  Value* outer = parent_ ? parent_->lookup(onnx_name) : nullptr;
  if (!outer) return nullptr;
  // A known outer value is copied in, so folding inside the subgraph sees it; others are captured.
  auto v = outer->value() ? graph_.add_constant(outer->name, *outer->value()) : graph_.add_capture(*outer);
  if (!v) return nullptr;
  if (!outer->value()) captured_.push_back(outer);
  env_[onnx_name] = *v;
  return *v;
}

Result<Value*> ImportContext::input(const OnnxNode& node, int i) {
  if (!node.has_input(i)) return static_cast<Value*>(nullptr);
  Value* v = lookup(node.proto().input(i));
  if (!v) return node.error("input '", node.proto().input(i), "' is not produced by any earlier node");
  return v;
}

const Tensor* ImportContext::constant_input(const OnnxNode& node, int i) {
  auto v = input(node, i);
  return v && *v ? (*v)->value() : nullptr;
}

std::string ImportContext::node_name(const OnnxNode& node) const {
  std::string base = node.name().empty() ? str_cat(node.op_type(), "_", node.index()) : node.name();
  if (graph_.find_node(base) || graph_.find_value(base)) base += str_cat("_", node.index());
  return base;
}

Result<Node*> ImportContext::add(const OnnxNode& node, std::string_view op, std::unique_ptr<Attrs> attrs,
                                 std::vector<Value*> inputs, bool final, const std::string& suffix) {
  std::string name = node_name(node);
  if (!suffix.empty()) name += "/" + suffix;
  for (int k = 1; graph_.find_node(name); ++k) name = str_cat(node_name(node), "/", suffix, k);
  std::vector<std::string> out_names;
  if (final)
    for (int i = 0; i < node.num_outputs(); ++i) out_names.push_back(node.proto().output(i));
  auto added = graph_.add_node(op, name, std::move(attrs), std::move(inputs), out_names);
  if (!added) {
    Status s = added.take_status();
    return Status(s.code(), s.message()).with_node(node.context());
  }
  if (final)
    for (int i = 0; i < node.num_outputs() && i < static_cast<int>((*added)->outputs.size()); ++i)
      if (node.has_output(i)) bind(node.proto().output(i), (*added)->outputs[i]);
  // Nodes whose inputs are all known are computed now, so later shapes can depend on their values.
  KILN_RETURN_IF_ERROR(fold(*added, node));
  return added;
}

Status ImportContext::fold(Node* n, const OnnxNode& node) {
  // Outputs nobody reads are not worth computing.
  if (!unread_.empty() &&
      std::all_of(n->outputs.begin(), n->outputs.end(), [&](Value* v) { return unread_.count(v->name) > 0; }))
    return Status::ok();
  uint64_t bytes = 0;
  for (Value* out : n->outputs) {
    if (!out->dims.is_static()) return Status::ok();
    const double count = elements(out->dims);
    if (count > static_cast<double>(limits_.max_node_bytes)) return Status::ok();
    bytes += static_cast<uint64_t>(count) * dtype_size(out->dtype);
  }
  if (bytes > limits_.max_node_bytes) return Status::ok();
  for (Value* in : n->inputs)
    if (in && !in->value() && !(n->schema->shape_only && in->dims.is_static())) return Status::ok();
  const std::optional<double> work = graph_.fold_work(*n);
  if (work && *work <= limits_.max_work && *work > work_left()) {
    if (!work_spent_logged_)
      log_verbose("constant folding's work budget for this import is spent; '", n->name,
                  "' and later nodes are left to run time (--fold-work-total raises it)");
    work_spent_logged_ = true;
    return Status::ok();
  }
  if (source_.budget) {
    Status s = source_.budget->charge(bytes, "its folded value");
    if (!s.is_ok()) return Status(s.code(), s.message()).with_node(node.context());
  }
  FoldOutcome outcome = graph_.try_fold(n, limits_);
  if (!outcome.folded && source_.budget) source_.budget->release(bytes);
  if (outcome.folded && work) work_left() -= *work;
  // Constant inputs that make the op fail (an index out of range) fail the same way at run time.
  if (outcome.failure.code() == StatusCode::kInvalidArgument)
    return node.error("its constant inputs are invalid: ", outcome.failure.message());
  return Status::ok();
}

void ImportContext::release_known_value(Value* value) {
  if (!value->known_value) return;
  if (source_.budget) source_.budget->release(value->known_value->nbytes());
  value->known_value.reset();
}

Result<Value*> ImportContext::add_constant(const OnnxNode& node, const std::string& suffix, Tensor value) {
  std::string name = node_name(node) + "/" + suffix;
  for (int k = 1; graph_.find_value(name); ++k) name = str_cat(node_name(node), "/", suffix, k);
  return graph_.add_constant(name, std::move(value));
}

Status ImportContext::bind_output(const OnnxNode& node, int i, Value* value) {
  if (node.has_output(i)) bind(node.proto().output(i), value);
  return Status::ok();
}

// ---- loading ----------------------------------------------------------------------------------

namespace {

constexpr int kMaxSupportedOpset = 17;
constexpr int kMaxNesting = 64;

// Parses a whole ModelProto from `input`, nesting at most `nesting` messages deep.
bool parse_model(google::protobuf::io::ZeroCopyInputStream& input, int nesting, onnx::ModelProto& model) {
  google::protobuf::io::CodedInputStream coded(&input);
  coded.SetTotalBytesLimit(INT32_MAX);
  coded.SetRecursionLimit(nesting);
  return model.ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
}

// A model of `source` that did not parse: too deeply nested when it parses with a deeper limit (`reparse` parses a
// fresh copy with the limit it is given), else not a valid model.
Status unparsable(const std::string& source, const std::function<bool(int)>& reparse) {
  if (reparse(1000))
    return invalid_argument(source, ": the model nests graphs, functions or types more than ", kMaxNesting,
                            " levels deep, which kiln does not read");
  return invalid_argument(source,
                          ": not a valid ONNX model (the protobuf could not be parsed: the file is truncated, "
                          "corrupt or not an .onnx file)");
}

// Frees what an initializer's proto holds once it is a kiln tensor: the import then never holds a model's weights
// twice over (a cleared std::string or RepeatedField keeps its buffer; a swap with an empty one does not).
void drop_initializer_data(onnx::TensorProto& init) {
  std::string().swap(*init.mutable_raw_data());
  google::protobuf::RepeatedField<float>().Swap(init.mutable_float_data());
  google::protobuf::RepeatedField<int32_t>().Swap(init.mutable_int32_data());
  google::protobuf::RepeatedField<int64_t>().Swap(init.mutable_int64_data());
  google::protobuf::RepeatedField<double>().Swap(init.mutable_double_data());
}

struct Problems {
  std::vector<std::string> lines;
  void add(const Status& s) { lines.push_back(s.to_string()); }
  bool empty() const { return lines.empty(); }
  Status as_status(const std::string& source, const char* what) const {
    std::string msg =
        str_cat(source, ": cannot import the model (", lines.size(), " ", what, lines.size() == 1 ? "" : "s", "):");
    for (auto& l : lines) msg += "\n  " + l;
    return Status(StatusCode::kUnsupported, msg);
  }
};

std::string describe_type(const onnx::TypeProto& type) {
  if (type.has_tensor_type()) return "tensor of " + onnx_dtype_name(type.tensor_type().elem_type());
  if (type.has_sequence_type()) return "sequence";
  if (type.has_map_type()) return "map";
  if (type.has_optional_type()) return "optional";
  if (type.has_sparse_tensor_type()) return "sparse tensor";
  return "unknown type";
}

Result<Value*> import_graph_input(Graph& graph, const onnx::ValueInfoProto& info, const ImportOptions& options,
                                  const std::string& source) {
  // Sequences and optionals of tensors: the element type names dtype and dims.
  onnx::TypeProto type = info.type();
  ValueKind kind = ValueKind::kTensor;
  if (type.has_optional_type()) {
    onnx::TypeProto elem = type.optional_type().elem_type();
    kind = elem.has_sequence_type() ? ValueKind::kOptionalSequence : ValueKind::kOptionalTensor;
    type = elem;
  }
  if (type.has_sequence_type()) {
    if (kind == ValueKind::kTensor) kind = ValueKind::kSequence;
    onnx::TypeProto elem = type.sequence_type().elem_type();
    type = elem;
  }
  if (!type.has_tensor_type())
    return unsupported(source, ": graph input '", info.name(), "' is a ", describe_type(info.type()),
                       "; kiln takes tensors and sequences or optionals of tensors");
  const auto dtype = from_onnx_dtype(type.tensor_type().elem_type());
  if (!dtype)
    return unsupported(source, ": graph input '", info.name(), "' has element type ",
                       onnx_dtype_name(type.tensor_type().elem_type()), ", which kiln does not support");
  Dims dims;
  std::vector<std::string> names;
  if (auto it = options.input_dims.find(info.name()); it != options.input_dims.end()) {
    dims = it->second;
  } else if (type.tensor_type().has_shape()) {
    const auto& shape = type.tensor_type().shape();
    if (shape.dim_size() > kMaxRank)
      return unsupported(source, ": graph input '", info.name(), "' has rank ", shape.dim_size(),
                         "; kiln supports up to ", kMaxRank);
    for (const auto& d : shape.dim()) {
      if (d.has_dim_value() && d.dim_value() >= 0) {
        dims.push_back(d.dim_value());
        names.emplace_back();
      } else {
        dims.push_back(kDynamicDim);
        names.push_back(d.has_dim_param() ? d.dim_param() : "");
      }
    }
  } else if (kind == ValueKind::kTensor) {
    return unsupported(source, ": graph input '", info.name(), "' has no shape, not even a rank; give it one");
  }
  KILN_ASSIGN_OR_RETURN(Value * v, graph.add_input(info.name(), *dtype, dims, names));
  v->kind = kind;
  return v;
}

// Expands a node that ONNX defines as a function into the function's body nodes.
Result<onnx::FunctionProto> function_body(const OnnxNode& node, ImportContext& ctx) {
  const onnx::OpSchema* schema = node.schema();
  onnx::FunctionProto fn;
  if (schema->HasContextDependentFunction()) {
    std::vector<onnx::TypeProto> types;
    for (int i = 0; i < node.num_inputs(); ++i) {
      onnx::TypeProto t;
      if (Value* v = node.has_input(i) ? ctx.lookup(node.proto().input(i)) : nullptr) {
        auto* tt = t.mutable_tensor_type();
        tt->set_elem_type(to_onnx_dtype(v->dtype));
        auto* shape = tt->mutable_shape();
        for (int64_t d : v->dims) {
          auto* dim = shape->add_dim();
          if (d >= 0) dim->set_dim_value(d);
        }
      }
      types.push_back(t);
    }
    onnx::FunctionBodyBuildContextImpl build_ctx(node.proto(), types);
    bool ok = false;
    try {
      ok = schema->BuildContextDependentFunction(build_ctx, fn);
    } catch (const std::exception& e) {
      return node.unsupported_error("expanding the ONNX function body failed: ", e.what());
    }
    if (!ok) return node.unsupported_error("ONNX could not build the function body for these inputs");
    return fn;
  }
  if (const onnx::FunctionProto* body = schema->GetFunction()) return *body;
  return node.unsupported_error("no function body");
}

Status import_node(ImportContext& ctx, const OnnxNode& node, int depth);

Status expand_function(ImportContext& ctx, const OnnxNode& node, int depth) {
  if (depth > 8) return node.unsupported_error("function bodies nest too deeply");
  KILN_ASSIGN_OR_RETURN(onnx::FunctionProto fn, function_body(node, ctx));
  int body_opset = node.opset();
  for (const auto& imp : fn.opset_import())
    if (imp.domain().empty() || imp.domain() == "ai.onnx") body_opset = static_cast<int>(imp.version());
  const std::string prefix = ctx.node_name(node) + "/";
  std::map<std::string, std::string> rename;
  for (int i = 0; i < fn.input_size(); ++i) rename[fn.input(i)] = i < node.num_inputs() ? node.proto().input(i) : "";
  for (int i = 0; i < fn.output_size(); ++i)
    rename[fn.output(i)] = i < node.num_outputs() ? node.proto().output(i) : "";
  auto mapped = [&](const std::string& n) {
    if (n.empty()) return n;
    auto it = rename.find(n);
    return it != rename.end() ? it->second : prefix + n;
  };
  for (int k = 0; k < fn.node_size(); ++k) {
    onnx::NodeProto body = fn.node(k);
    for (auto& in : *body.mutable_input()) in = mapped(in);
    for (auto& out : *body.mutable_output()) out = mapped(out);
    body.set_name(prefix + (body.name().empty() ? str_cat(body.op_type(), "_", k) : body.name()));
    // Substitute attribute references with the caller's attributes; drop unset ones (defaults apply).
    auto* attrs = body.mutable_attribute();
    for (int a = attrs->size() - 1; a >= 0; --a) {
      auto& attr = (*attrs)[a];
      if (attr.ref_attr_name().empty()) continue;
      const onnx::AttributeProto* given = node.attr_or_default(attr.ref_attr_name());
      if (!given) {
        attrs->DeleteSubrange(a, 1);
        continue;
      }
      const std::string name = attr.name();
      attr = *given;
      attr.set_name(name);
    }
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(body.op_type(), body_opset, body.domain());
    OnnxNode inner(body, node.index(), body_opset, schema);
    KILN_RETURN_IF_ERROR(import_node(ctx, inner, depth + 1));
  }
  return Status::ok();
}

Status import_node(ImportContext& ctx, const OnnxNode& node, int depth) {
  if (const OnnxImporter* imp = ImporterRegistry::global().find(node.proto().domain(), node.op_type())) {
    if (imp->check) KILN_RETURN_IF_ERROR(imp->check(node));
    return imp->import(ctx, node);
  }
  if (node.schema() && (node.schema()->HasFunction() || node.schema()->HasContextDependentFunction()))
    return expand_function(ctx, node, depth);
  return node.unsupported_error("kiln has no importer for ONNX op ", node.op_type(), " (opset ", node.opset(), ")");
}

// The ops inside a node's graph attributes must be ones kiln imports; problems name the subgraph path.
Status check_subgraphs(const OnnxNode& node, int depth = 0) {
  if (depth > 16) return node.unsupported_error("subgraphs nest too deeply");
  for (const auto& a : node.proto().attribute()) {
    if (!a.has_g()) continue;
    const auto& g = a.g();
    for (int k = 0; k < g.node_size(); ++k) {
      const auto& np = g.node(k);
      const std::string domain = np.domain() == "ai.onnx" ? "" : np.domain();
      const onnx::OpSchema* schema =
          domain.empty() ? onnx::OpSchemaRegistry::Schema(np.op_type(), node.opset(), domain) : nullptr;
      OnnxNode inner(np, k, node.opset(), schema);
      const bool known = ImporterRegistry::global().find(domain, np.op_type()) ||
                         (schema && (schema->HasFunction() || schema->HasContextDependentFunction()));
      Status s = known ? check_subgraphs(inner, depth + 1)
                       : inner.unsupported_error("kiln has no importer for ONNX op ", np.op_type(), " (opset ",
                                                 node.opset(), "); replace it in the model or ask for it to be added");
      if (!s.is_ok())
        return Status(s.code(), str_cat(node.name().empty() ? str_cat(node.op_type(), "_", node.index()) : node.name(),
                                        "/", a.name(), "/", s.to_string()));
    }
  }
  return Status::ok();
}

// The static check of one node: known op, valid against the ONNX schema, the importer's own check.
Status check_node(const OnnxNode& node, const std::set<std::string>& known_values,
                  const std::map<std::string, const onnx::NodeProto*>& producers) {
  for (int i = 0; i < node.num_inputs(); ++i) {
    if (!node.has_input(i) || known_values.count(node.proto().input(i))) continue;
    auto later = producers.find(node.proto().input(i));
    if (later != producers.end())
      return node.error("input '", node.proto().input(i), "' is produced by a later node ('", later->second->name(),
                        "', ", later->second->op_type(), "): the graph has a cycle or is not in topological order");
    return node.error("input '", node.proto().input(i),
                      "' is not a graph input, an initializer or an output of any node");
  }
  const OnnxImporter* imp = ImporterRegistry::global().find(node.proto().domain(), node.op_type());
  if (!imp && !(node.schema() && (node.schema()->HasFunction() || node.schema()->HasContextDependentFunction()))) {
    if (!node.schema())
      return node.unsupported_error("unknown op ", node.proto().domain().empty() ? "" : node.proto().domain() + ".",
                                    node.op_type(), " at opset ", node.opset(), ": not an ONNX op kiln knows");
    return node.unsupported_error("kiln has no importer for ONNX op ", node.op_type(), " (opset ", node.opset(),
                                  "); replace it in the model or ask for it to be added");
  }
  if (node.schema()) {
    try {
      node.schema()->Verify(node.proto());
    } catch (const std::exception& e) {
      std::string what = e.what();
      if (auto pos = what.find("==> Context:"); pos != std::string::npos) what = what.substr(0, pos);
      while (!what.empty() && (what.back() == '\n' || what.back() == ' ')) what.pop_back();
      return node.error("does not match the ONNX schema of opset ", node.opset(), ": ", what);
    }
  }
  if (imp && imp->check) KILN_RETURN_IF_ERROR(imp->check(node));
  return check_subgraphs(node);
}

}  // namespace

Result<Node*> ImportContext::add_owner(const OnnxNode& node, std::string_view op, std::unique_ptr<Attrs> attrs,
                                       std::vector<Value*> inputs, std::vector<Subgraph> subgraphs) {
  for (const Subgraph& sg : subgraphs)
    for (Value* c : sg.graph->captures()) {
      Value* outer = graph_.find_value(c->name);
      if (!outer) return node.error(sg.name, " captures '", c->name, "', which is not in scope");
      if (std::find(inputs.begin(), inputs.end(), outer) == inputs.end()) inputs.push_back(outer);
    }
  std::vector<std::string> out_names;
  out_names.reserve(node.num_outputs());
  for (int i = 0; i < node.num_outputs(); ++i) out_names.push_back(node.proto().output(i));
  auto added =
      graph_.add_node(op, node_name(node), std::move(attrs), std::move(inputs), out_names, std::move(subgraphs));
  if (!added) {
    Status s = added.take_status();
    return Status(s.code(), s.message()).with_node(node.context());
  }
  for (int i = 0; i < node.num_outputs() && i < static_cast<int>((*added)->outputs.size()); ++i)
    if (node.has_output(i)) bind(node.proto().output(i), (*added)->outputs[i]);
  return added;
}

namespace {

// Names read inside the graph attributes of `np` (at any depth): outer values they use must stay known until
// the node is imported.
void subgraph_reads(const onnx::NodeProto& np, std::vector<std::string>& out) {
  auto visit = [&](const onnx::GraphProto& g) {
    for (const auto& n : g.node()) {
      for (const auto& in : n.input())
        if (!in.empty()) out.push_back(in);
      subgraph_reads(n, out);
    }
    for (const auto& o : g.output()) out.push_back(o.name());
  };
  for (const auto& a : np.attribute()) {
    if (a.has_g()) visit(a.g());
    for (const auto& g : a.graphs()) visit(g);
  }
}

const onnx::GraphProto* graph_attr(const OnnxNode& node, const std::string& attr) {
  for (const auto& a : node.proto().attribute())
    if (a.name() == attr && a.has_g()) return &a.g();
  return nullptr;
}

// Imports the initializers and nodes of `g` into `ctx`; errors carry the subgraph path.
Status import_body(ImportContext& ctx, const onnx::GraphProto& g, const std::string& path) {
  for (const auto& init : g.initializer()) {
    auto t = tensor_from_proto(init, ctx.tensor_source(), str_cat("initializer '", init.name(), "'"));
    if (!t) return Status(t.status().code(), path + t.status().to_string());
    auto v = ctx.graph().add_constant(init.name(), std::move(*t));
    if (!v) return Status(v.status().code(), path + v.status().to_string());
    ctx.bind(init.name(), *v);
  }
  for (int k = 0; k < g.node_size(); ++k) {
    const auto& np = g.node(k);
    const std::string domain = np.domain() == "ai.onnx" ? "" : np.domain();
    auto it = ctx.opsets().find(domain);
    const int opset = it == ctx.opsets().end() ? -1 : static_cast<int>(it->second);
    const onnx::OpSchema* schema = opset < 0 ? nullptr : onnx::OpSchemaRegistry::Schema(np.op_type(), opset, domain);
    OnnxNode inner(np, k, opset, schema);
    Status s = opset < 0 ? inner.unsupported_error("its domain '", np.domain(), "' is not in the model's opset_import")
                         : import_node(ctx, inner, 0);
    if (s.is_ok())
      for (int i = 0; i < inner.num_outputs(); ++i)
        if (inner.has_output(i) && !ctx.lookup(np.output(i)))
          s = inner.error("the importer produced no value for output '", np.output(i), "'");
    if (!s.is_ok()) return Status(s.code(), path + s.to_string());
  }
  return Status::ok();
}

}  // namespace

Result<Subgraph> ImportContext::import_subgraph(const OnnxNode& node, const std::string& attr,
                                                const std::vector<TensorDesc>& hints) {
  const onnx::GraphProto* g = graph_attr(node, attr);
  if (!g) return node.error("has no graph attribute '", attr, "'");
  const std::string path = str_cat(node_name(node), "/", attr, "/");
  auto graph = std::make_unique<Graph>();
  ImportContext sub(*graph, source_, limits_, 0, this);
  for (int i = 0; i < g->input_size(); ++i) {
    const auto& info = g->input(i);
    Result<Value*> v = static_cast<Value*>(nullptr);
    if (i < static_cast<int>(hints.size()) && hints[i].present) {
      v = graph->add_input(info.name(), hints[i].dtype, hints[i].dims);
      if (v) (*v)->kind = hints[i].kind;
    } else {
      v = import_graph_input(*graph, info, {}, path + "input");
    }
    if (!v) return Status(v.status().code(), path + v.status().message()).with_node(node.context());
    sub.bind(info.name(), *v);
  }
  KILN_RETURN_IF_ERROR(import_body(sub, *g, path));
  for (const auto& o : g->output()) {
    Value* v = sub.lookup(o.name());
    if (!v) return node.error(attr, " output '", o.name(), "' is not produced by any node of it");
    const auto& outs = graph->outputs();
    if (!v->producer || std::find(outs.begin(), outs.end(), v) != outs.end()) {
      // An input, a capture, a constant or a repeated output: a copy keeps the outputs positional.
      auto copy = graph->add_node("Identity", str_cat(o.name(), "/out", outs.size()), nullptr, {v});
      if (!copy) return Status(copy.status().code(), path + copy.status().to_string());
      v = (*copy)->outputs[0];
    }
    KILN_RETURN_IF_ERROR(graph->mark_output(v));
  }
  Status folded = graph->fold_known_values();
  if (!folded.is_ok()) return Status(folded.code(), path + folded.message());
  return Subgraph{attr, std::move(graph)};
}

Status ImportContext::inline_subgraph(const OnnxNode& node, const std::string& attr) {
  const onnx::GraphProto* g = graph_attr(node, attr);
  if (!g) return node.error("has no graph attribute '", attr, "'");
  KILN_RETURN_IF_ERROR(import_body(*this, *g, str_cat(node_name(node), "/", attr, "/")));
  if (g->output_size() < node.num_outputs())
    return node.error(attr, " gives ", g->output_size(), " outputs for ", node.num_outputs());
  for (int i = 0; i < node.num_outputs(); ++i) {
    Value* v = lookup(g->output(i).name());
    if (!v) return node.error(attr, " output '", g->output(i).name(), "' is not produced by any node of it");
    KILN_RETURN_IF_ERROR(bind_output(node, i, v));
  }
  return Status::ok();
}

namespace {

Status out_of_memory_importing(const std::string& source) {
  return Status(StatusCode::kOutOfMemory, str_cat(source,
                                                  ": the machine ran out of memory while importing the model; lower "
                                                  "the import's memory budget (--max-import-memory) so the model is "
                                                  "refused early"));
}

// Imports a parsed model; its initializers' data is freed as they become tensors.
Result<ImportedModel> import_model(onnx::ModelProto& model, const std::string& base_dir, const std::string& source,
                                   const ImportOptions& options) {
  if (!model.has_graph()) return invalid_argument(source, ": the model has no graph");
  ImportedModel out;
  out.ir_version = model.ir_version();
  for (const auto& imp : model.opset_import()) {
    if (imp.version() < 0 || imp.version() > INT32_MAX)
      return invalid_argument(source, ": the model's opset_import gives version ", imp.version(), " for domain '",
                              imp.domain().empty() ? "ai.onnx" : imp.domain(), "'; an opset version is 1..", INT32_MAX);
    out.opsets[imp.domain() == "ai.onnx" ? "" : imp.domain()] = imp.version();
  }
  if (model.opset_import_size() == 0)
    return invalid_argument(source, ": the model's opset_import is empty; it must name the ONNX opset it uses");
  if (!out.opsets.count("")) out.opsets[""] = kMaxSupportedOpset;  // only other domains are used
  const int opset = static_cast<int>(out.opsets[""]);
  if (opset < 1) return invalid_argument(source, ": opset version ", opset, " is not valid");
  if (opset > kMaxSupportedOpset)
    out.warnings.push_back(
        str_cat("the model uses opset ", opset, "; kiln is tested up to opset ", kMaxSupportedOpset));

  const auto& g = model.graph();
  auto graph = std::make_unique<Graph>();
  MemoryBudget budget(options.memory_budget ? options.memory_budget : default_memory_budget());
  TensorSource tensor_source(base_dir);
  tensor_source.extra_root = options.external_data_root;
  tensor_source.budget = &budget;
  FoldLimits limits;
  limits.max_node_bytes = options.fold_node_bytes;
  limits.max_work = options.fold_work_limit;
  ImportContext ctx(*graph, tensor_source, limits, options.fold_work_total);
  ctx.opsets() = out.opsets;
  std::set<std::string> known, initializer_names;
  Problems problems;

  for (auto& init : *model.mutable_graph()->mutable_initializer()) {
    if (init.name().empty()) {
      problems.add(invalid_argument("an initializer has no name"));
      continue;
    }
    if (!initializer_names.insert(init.name()).second) {
      problems.add(invalid_argument("initializer '", init.name(), "' is defined twice"));
      continue;
    }
    known.insert(init.name());  // a broken initializer is reported once, not again at each use
    auto t = tensor_from_proto(init, ctx.tensor_source(), str_cat("initializer '", init.name(), "'"));
    if (!t && t.status().code() == StatusCode::kOutOfMemory) return t.take_status().with_prefix(source);
    if (!t) {
      problems.add(t.status());
      continue;
    }
    drop_initializer_data(init);
    auto v = graph->add_constant(init.name(), std::move(*t));
    if (!v) {
      problems.add(v.status());
      continue;
    }
    ctx.bind(init.name(), *v);
    known.insert(init.name());
  }
  for (const auto& in : g.input()) {
    if (initializer_names.count(in.name())) continue;  // IR < 4: initializers are listed as inputs too
    auto v = import_graph_input(*graph, in, options, source);
    if (!v) return v.take_status();
    ctx.bind(in.name(), *v);
    known.insert(in.name());
    out.input_names.push_back(in.name());
  }
  if (!g.sparse_initializer().empty()) problems.add(unsupported("sparse initializers are not supported"));

  // Static check of every node before anything is built.
  std::map<std::string, const onnx::NodeProto*> producers;
  for (const auto& np : g.node())
    for (const auto& o : np.output())
      if (!o.empty()) producers.emplace(o, &np);
  std::vector<OnnxNode> nodes;
  nodes.reserve(g.node_size());
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& np = g.node(i);
    const std::string domain = np.domain() == "ai.onnx" ? "" : np.domain();
    auto it = out.opsets.find(domain);
    const int node_opset = it == out.opsets.end() ? -1 : static_cast<int>(it->second);
    const onnx::OpSchema* schema =
        node_opset < 0 ? nullptr : onnx::OpSchemaRegistry::Schema(np.op_type(), node_opset, domain);
    nodes.emplace_back(np, i, node_opset, schema);
    if (node_opset < 0) {
      problems.add(nodes.back().unsupported_error("its domain '", np.domain(), "' is not in the model's opset_import"));
    } else if (!domain.empty() && !ImporterRegistry::global().find(domain, np.op_type())) {
      problems.add(
          nodes.back().unsupported_error("kiln has no importer for ", domain, ".", np.op_type(),
                                         domain.find("training") != std::string::npos ? " (a training op)" : ""));
    } else {
      Status s = check_node(nodes.back(), known, producers);
      if (!s.is_ok()) problems.add(s);
    }
    for (const auto& o : np.output())
      if (!o.empty()) known.insert(o);
  }
  for (const auto& o : g.output())
    if (!known.count(o.name()))
      problems.add(invalid_argument("graph output '", o.name(), "' is not produced by any node"));
  if (!problems.empty()) return problems.as_status(source, "problem");

  // Readers left per ONNX name: a folded value nobody reads any more is dropped (graph outputs never are).
  std::unordered_map<std::string, int64_t> readers;
  std::vector<std::vector<std::string>> inner_reads(static_cast<size_t>(g.node_size()));
  for (int i = 0; i < g.node_size(); ++i) {
    for (const auto& in : g.node(i).input())
      if (!in.empty()) ++readers[in];
    subgraph_reads(g.node(i), inner_reads[static_cast<size_t>(i)]);
    for (const auto& in : inner_reads[static_cast<size_t>(i)]) ++readers[in];
  }
  for (const auto& o : g.output()) readers[o.name()] += int64_t{1} << 40;
  for (const auto& np : g.node())
    for (const auto& o : np.output())
      if (!o.empty() && !readers.count(o)) ctx.set_unread(o);
  auto drop_if_unread = [&](const std::string& name) {
    Value* v = ctx.lookup(name);
    if (!v || !v->known_value) return;
    for (const std::string& alias : ctx.names_of(v))
      if (readers[alias] > 0) return;
    // Only when every kiln reader folded too; otherwise the value is computed at run time.
    for (const Use& u : v->uses)
      for (Value* out : u.node->outputs)
        if (!out->known_value) return;
    ctx.release_known_value(v);
  };
  for (const OnnxNode& node : nodes) {
    Status s = import_node(ctx, node, 0);
    if (!s.is_ok()) return Status(s.code(), str_cat(source, ": ", s.to_string()));
    for (int i = 0; i < node.num_outputs(); ++i)
      if (node.has_output(i) && !ctx.lookup(node.proto().output(i)))
        return node.error("the importer produced no value for output '", node.proto().output(i), "'")
            .with_prefix(source);
    for (int i = 0; i < node.num_inputs(); ++i)
      if (node.has_input(i)) {
        --readers[node.proto().input(i)];
        drop_if_unread(node.proto().input(i));
      }
    for (const auto& in : inner_reads[static_cast<size_t>(node.index())]) {
      --readers[in];
      drop_if_unread(in);
    }
    for (int i = 0; i < node.num_outputs(); ++i)
      if (node.has_output(i)) drop_if_unread(node.proto().output(i));
  }
  for (const auto& o : g.output()) {
    Value* v = ctx.lookup(o.name());
    if (v->name != o.name()) {
      // An alias (Identity of an input, a constant): copy it so the output keeps its ONNX name.
      auto copy = graph->add_node("Identity", o.name() + "/identity", nullptr, {v}, {o.name()});
      if (!copy) return copy.take_status().with_prefix(source);
      v = (*copy)->outputs[0];
    }
    KILN_RETURN_IF_ERROR(graph->mark_output(v));
    out.output_names.push_back(o.name());
  }
  // unroll-loop: small loops with a constant trip count become straight-line code (logged per loop).
  if (auto unrolled = unroll_small_loops(*graph); !unrolled) return unrolled.take_status().with_prefix(source);
  KILN_RETURN_IF_ERROR(graph->fold_known_values());
  for (auto& w : ctx.warnings()) out.warnings.push_back(w);
  for (Value* v : graph->values()) {
    if (!v->dims.is_static()) continue;
    const double bytes = elements(v->dims) * static_cast<double>(dtype_size(v->dtype));
    if (bytes > static_cast<double>(options.large_tensor_bytes))
      out.warnings.push_back(str_cat("tensor '", v->name, "' ", v->dims.to_string(), " holds ",
                                     format_bytes(static_cast<uint64_t>(bytes)),
                                     "; an engine of this model needs at least that much memory"));
  }
  out.graph = std::move(graph);
  return out;
}

}  // namespace

Result<ImportedModel> import_bytes(const std::string& bytes, const std::string& base_dir, const std::string& source,
                                   const ImportOptions& options) {
  try {
    if (bytes.size() > INT32_MAX)
      return invalid_argument(source, ": the model is ", format_bytes(bytes.size()),
                              "; an .onnx file is at most 2 GiB (keep large weights as external data)");
    onnx::ModelProto model;
    auto parse = [&](int nesting, onnx::ModelProto& m) {
      google::protobuf::io::ArrayInputStream raw(bytes.data(), static_cast<int>(bytes.size()));
      return parse_model(raw, nesting, m);
    };
    if (!parse(kMaxNesting, model))
      return unparsable(source, [&](int nesting) {
        onnx::ModelProto deeper;
        return parse(nesting, deeper);
      });
    return import_model(model, base_dir, source, options);
  } catch (const std::bad_alloc&) {
    return out_of_memory_importing(source);
  }
}

Result<ImportedModel> import_file(const std::string& path, const ImportOptions& options) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return Status(StatusCode::kNotFound, str_cat(path, ": no such model file"));
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return Status(StatusCode::kIoError, str_cat(path, ": cannot be read: ", ec.message()));
  if (size > INT32_MAX)
    return invalid_argument(path, ": the model is ", format_bytes(size),
                            "; an .onnx file is at most 2 GiB (keep large weights as external data)");
  if (!std::ifstream(path, std::ios::binary)) return Status(StatusCode::kIoError, str_cat(path, ": cannot be opened"));
  const std::string dir = std::filesystem::path(path).parent_path().string();
  // Parsed straight from the file: the file's bytes are never held whole next to the parsed model.
  auto parse = [&](int nesting, onnx::ModelProto& m) {
    std::ifstream in(path, std::ios::binary);
    google::protobuf::io::IstreamInputStream stream(&in);
    return in && parse_model(stream, nesting, m);
  };
  try {
    onnx::ModelProto model;
    if (!parse(kMaxNesting, model))
      return unparsable(path, [&](int nesting) {
        onnx::ModelProto deeper;
        return parse(nesting, deeper);
      });
    return import_model(model, dir.empty() ? "." : dir, path, options);
  } catch (const std::bad_alloc&) {
    return out_of_memory_importing(path);
  }
}

}  // namespace kiln::onnx_import
