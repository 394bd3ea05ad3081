#include "onnx/exporter.h"

#include <fstream>

#include "kiln/version.h"
#include "onnx/tensor_proto.h"

namespace kiln::onnx_export {

std::string ExportContext::fresh_name(const std::string& base) {
  std::string name = base;
  while (used_.count(name)) name = str_cat(base, "_", used_[base]++);
  used_[name] = 1;
  return name;
}

onnx::NodeProto& ExportContext::add_node(const std::string& op_type, const std::vector<std::string>& inputs,
                                         const std::vector<std::string>& outputs, const std::string& name) {
  onnx::NodeProto* n = graph_.add_node();
  n->set_op_type(op_type);
  n->set_name(fresh_name(name));
  for (auto& i : inputs) n->add_input(i);
  for (auto& o : outputs) n->add_output(o);
  return *n;
}

std::string ExportContext::add_initializer(const std::string& base, const Tensor& value) {
  std::string name = fresh_name(base);
  onnx_import::tensor_to_proto(value, name, *graph_.add_initializer());
  return name;
}

std::string ExportContext::add_int64s(const std::string& base, const std::vector<int64_t>& values) {
  Tensor t = *Tensor::empty(DataType::kInt64, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.data<int64_t>()[i] = values[i];
  return add_initializer(base, t);
}

namespace {
onnx::AttributeProto& new_attr(onnx::NodeProto& node, const std::string& name,
                               onnx::AttributeProto::AttributeType type) {
  onnx::AttributeProto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(type);
  return *a;
}
}  // namespace

void set_attr(onnx::NodeProto& n, const std::string& name, int64_t v) {
  new_attr(n, name, onnx::AttributeProto::INT).set_i(v);
}
void set_attr(onnx::NodeProto& n, const std::string& name, float v) {
  new_attr(n, name, onnx::AttributeProto::FLOAT).set_f(v);
}
void set_attr(onnx::NodeProto& n, const std::string& name, const std::string& v) {
  new_attr(n, name, onnx::AttributeProto::STRING).set_s(v);
}
void set_attr(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  auto& a = new_attr(n, name, onnx::AttributeProto::INTS);
  for (int64_t x : v) a.add_ints(x);
}
void set_attr(onnx::NodeProto& n, const std::string& name, const std::vector<float>& v) {
  auto& a = new_attr(n, name, onnx::AttributeProto::FLOATS);
  for (float x : v) a.add_floats(x);
}
void set_attr(onnx::NodeProto& n, const std::string& name, const std::vector<std::string>& v) {
  auto& a = new_attr(n, name, onnx::AttributeProto::STRINGS);
  for (auto& x : v) a.add_strings(x);
}

std::vector<std::string> input_names(const ExportContext& ctx, const Node& node) {
  std::vector<std::string> out;
  for (Value* v : node.inputs) out.push_back(ctx.name(v));
  while (!out.empty() && out.back().empty()) out.pop_back();
  return out;
}

std::vector<std::string> output_names(const ExportContext& ctx, const Node& node) {
  std::vector<std::string> out;
  for (Value* v : node.outputs) out.push_back(ctx.name(v));
  return out;
}

ExporterRegistry& ExporterRegistry::global() {
  static ExporterRegistry* r = new ExporterRegistry;
  return *r;
}

bool ExporterRegistry::add(const std::string& op, ExportFn fn) { return exporters_.emplace(op, std::move(fn)).second; }

const ExportFn* ExporterRegistry::find(const std::string& op) const {
  auto it = exporters_.find(op);
  return it == exporters_.end() ? nullptr : &it->second;
}

void value_info(const Value* v, onnx::ValueInfoProto& info) {
  info.set_name(v->name);
  onnx::TypeProto* type = info.mutable_type();
  if (is_optional(v->kind)) type = type->mutable_optional_type()->mutable_elem_type();
  if (v->kind == ValueKind::kSequence || v->kind == ValueKind::kOptionalSequence)
    type = type->mutable_sequence_type()->mutable_elem_type();
  auto* tt = type->mutable_tensor_type();
  tt->set_elem_type(onnx_import::to_onnx_dtype(v->dtype));
  auto* shape = tt->mutable_shape();
  for (int i = 0; i < v->dims.rank(); ++i) {
    auto* d = shape->add_dim();
    if (v->dims[i] >= 0)
      d->set_dim_value(v->dims[i]);
    else if (i < static_cast<int>(v->dim_names.size()) && !v->dim_names[i].empty())
      d->set_dim_param(v->dim_names[i]);
  }
}

Result<std::string> export_model(const Graph& graph, const std::string& graph_name) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("kiln");
  model.set_producer_version(version_string());
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kExportOpset);
  onnx::GraphProto& g = *model.mutable_graph();
  g.set_name(graph_name);
  KILN_RETURN_IF_ERROR(export_graph(graph, g));
  std::string bytes;
  if (!model.SerializeToString(&bytes)) return internal_error("ONNX model serialization failed");
  return bytes;
}

Status export_graph(const Graph& graph, onnx::GraphProto& g) {
  ExportContext ctx(g);
  for (Value* v : graph.values()) (void)ctx.fresh_name(v->name);  // reserve every kiln name
  for (Value* v : graph.inputs()) value_info(v, *g.add_input());
  for (Value* v : graph.values())
    if (v->is_constant()) onnx_import::tensor_to_proto(v->constant, v->name, *g.add_initializer());
  KILN_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.topological_order());
  std::vector<std::string> problems;
  for (Node* n : order) {
    const ExportFn* fn = ExporterRegistry::global().find(n->op());
    if (!fn) {
      problems.push_back(
          unsupported("kiln cannot export op ", n->op(), " to ONNX yet").with_node(n->context()).to_string());
      continue;
    }
    Status s = (*fn)(ctx, *n);
    if (!s.is_ok()) problems.push_back(std::move(s).with_node(n->context()).to_string());
  }
  if (!problems.empty()) {
    std::string msg =
        str_cat("cannot export the graph to ONNX (", problems.size(), " problem", problems.size() > 1 ? "s" : "", "):");
    for (auto& p : problems) msg += "\n  " + p;
    return unsupported(msg);
  }
  for (Value* v : graph.outputs()) value_info(v, *g.add_output());
  return Status::ok();
}

Status export_file(const Graph& graph, const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, export_model(graph));
  std::ofstream out(path, std::ios::binary);
  if (!out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())))
    return Status(StatusCode::kIoError, str_cat(path, ": cannot be written"));
  return Status::ok();
}

}  // namespace kiln::onnx_export
