#include "graph/serialization.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "kiln/strings.h"

namespace kiln {

using nlohmann::json;

namespace {
json dims_json(const Dims& d) { return d.to_vector(); }

json value_json(const Value* v) {
  return {{"name", v->name},
          {"dtype", dtype_name(v->dtype)},
          {"kind", static_cast<int>(v->kind)},
          {"dims", dims_json(v->dims)},
          {"dim_names", v->dim_names}};
}

// A string constant's texts (length-prefixed, as graph_json writes them) into `t`'s interned ids.
Status read_strings(std::string_view data, Tensor& t, const std::string& name) {
  size_t at = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (data.size() - at < 4) return invalid_argument("string constant '", name, "' runs past its data");
    uint32_t n = 0;
    for (int k = 0; k < 4; ++k) n |= static_cast<uint32_t>(static_cast<unsigned char>(data[at + k])) << (8 * k);
    at += 4;
    if (data.size() - at < n) return invalid_argument("string constant '", name, "' runs past its data");
    KILN_ASSIGN_OR_RETURN(t.data<int64_t>()[i], intern_string(data.substr(at, n)));
    at += n;
  }
  if (at != data.size()) return invalid_argument("string constant '", name, "' has the wrong size");
  return Status::ok();
}

// The description of one graph; constants' bytes are pieces of `weights`. Subgraphs nest under their node. With
// `release`, the graph lets go of each constant (`weights` then holds the last handle, released once copied).
json graph_json(const Graph& graph, SectionPieces& weights, bool release) {
  json j;
  j["inputs"] = json::array();
  for (Value* v : graph.inputs()) j["inputs"].push_back(value_json(v));
  j["captures"] = json::array();
  for (Value* v : graph.captures()) j["captures"].push_back(value_json(v));
  j["constants"] = json::array();
  for (Value* v : graph.values()) {
    if (v->prepared_only) {  // no data: the steps that read it hold it as their prepared data
      j["constants"].push_back(
          {{"name", v->name}, {"dtype", dtype_name(v->dtype)}, {"dims", dims_json(v->dims)}, {"prepared_only", true}});
      continue;
    }
    if (!v->is_constant()) continue;
    uint64_t offset = 0, bytes = 0;
    if (v->dtype == DataType::kString) {  // the texts, each as a 4-byte little-endian length and its bytes
      std::string texts;
      for (int64_t i = 0; i < v->constant.numel(); ++i) {
        const std::string_view text = string_at(v->constant, i);
        const auto n = static_cast<uint32_t>(text.size());
        for (int k = 0; k < 4; ++k) texts.push_back(static_cast<char>((n >> (8 * k)) & 0xff));
        texts.append(text);
      }
      bytes = texts.size();
      offset = weights.add(std::move(texts));
    } else {
      bytes = v->constant.nbytes();
      offset = weights.add(v->constant, kWeightAlignment);  // a handle: the data is copied where the section goes
    }
    j["constants"].push_back({{"name", v->name},
                              {"dtype", dtype_name(v->dtype)},
                              {"dims", dims_json(v->dims)},
                              {"offset", offset},
                              {"bytes", bytes}});
    if (release) v->constant = Tensor();
  }
  j["nodes"] = json::array();
  auto order = graph.topological_order();
  for (Node* n : order ? *order : graph.nodes()) {
    json inputs = json::array(), outputs = json::array(), subgraphs = json::array();
    for (Value* in : n->inputs) inputs.push_back(in ? in->name : "");
    for (Value* out : n->outputs) outputs.push_back(out->name);
    for (const Subgraph& sub : n->subgraphs)
      subgraphs.push_back({{"name", sub.name}, {"graph", graph_json(*sub.graph, weights, release)}});
    json node = {{"name", n->name},
                 {"op", n->op()},
                 {"attrs", json::parse(n->attrs->to_json())},
                 {"inputs", inputs},
                 {"outputs", outputs}};
    if (!subgraphs.empty()) node["subgraphs"] = subgraphs;
    j["nodes"].push_back(node);
  }
  j["outputs"] = json::array();
  for (Value* v : graph.outputs()) j["outputs"].push_back(v->name);
  return j;
}

Result<DataType> read_dtype(const json& d) {
  auto t = parse_dtype(d.get<std::string>());
  if (!t) return invalid_argument("unknown dtype '", d.get<std::string>(), "'");
  return *t;
}

Result<Dims> read_dims(const json& d) {
  std::vector<int64_t> v = d.get<std::vector<int64_t>>();
  return Dims::from(v);
}

Status read_value_desc(const json& in, Value* v) {
  const int kind = in.value("kind", 0);
  if (kind < 0 || kind > static_cast<int>(ValueKind::kOptionalSequence))
    return invalid_argument("value '", v->name, "' has an unknown kind ", kind);
  v->kind = static_cast<ValueKind>(kind);
  return Status::ok();
}

// The most elements a constant with no data of its own may claim (2^40: 4 TB of float32).
constexpr uint64_t kMaxPreparedOnlyElements = uint64_t{1} << 40;

// The element count of `dims`, or -1 when a dim is dynamic or the product overflows (a forged shape whose
// wrapped count matched the data would otherwise view memory past it).
int64_t checked_numel(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d != 0 && n > std::numeric_limits<int64_t>::max() / d)) return -1;
    n *= d;
  }
  return n;
}

// The weights a graph's constants read: in place when `owner` keeps `bytes` alive, else copied.
struct Weights {
  std::string_view bytes;
  std::shared_ptr<const void> owner;
};

Result<Tensor> read_constant(const Weights& weights, uint64_t offset, DataType dtype, const Dims& dims) {
  const char* at = weights.bytes.data() + offset;
  if (weights.owner && dims.numel() > 0 && reinterpret_cast<uintptr_t>(at) % kWeightAlignment == 0)
    // Read-only memory when mapped from a file: kernels never write their inputs.
    return Tensor::view(const_cast<char*>(at), dtype, dims, weights.owner);
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(dtype, dims));
  if (t.nbytes() > 0) std::memcpy(t.raw(), at, t.nbytes());
  return t;
}

Status read_graph(const json& j, const Weights& weights, Graph& graph, int depth) {
  const std::string_view blob = weights.bytes;
  if (depth > 64) return invalid_argument("subgraphs nest too deeply");
  for (const json& in : j.at("inputs")) {
    KILN_ASSIGN_OR_RETURN(Dims dims, read_dims(in.at("dims")));
    KILN_ASSIGN_OR_RETURN(DataType dtype, read_dtype(in.at("dtype")));
    KILN_ASSIGN_OR_RETURN(Value * v, graph.add_input(in.at("name"), dtype, dims, in.at("dim_names")));
    KILN_RETURN_IF_ERROR(read_value_desc(in, v));
  }
  if (j.contains("captures"))
    for (const json& c : j.at("captures")) {
      Value outer;
      outer.name = c.at("name");
      KILN_ASSIGN_OR_RETURN(outer.dims, read_dims(c.at("dims")));
      KILN_ASSIGN_OR_RETURN(outer.dtype, read_dtype(c.at("dtype")));
      outer.dim_names = c.at("dim_names").get<std::vector<std::string>>();
      KILN_RETURN_IF_ERROR(read_value_desc(c, &outer));
      KILN_RETURN_IF_ERROR(graph.add_capture(outer).status());
    }
  for (const json& c : j.at("constants")) {
    KILN_ASSIGN_OR_RETURN(Dims dims, read_dims(c.at("dims")));
    KILN_ASSIGN_OR_RETURN(DataType dtype, read_dtype(c.at("dtype")));
    if (c.contains("prepared_only") && c.at("prepared_only").get<bool>()) {
      // Kernels size their prepared data from these dims: they must describe a tensor that could exist.
      const int64_t numel = checked_numel(dims);
      if (numel < 0 || dtype == DataType::kString || static_cast<uint64_t>(numel) > kMaxPreparedOnlyElements)
        return invalid_argument("constant '", c.at("name").get<std::string>(), "' has impossible dims ",
                                dims.to_string());
      KILN_RETURN_IF_ERROR(graph.add_prepared_only_constant(c.at("name"), dtype, dims).status());
      continue;
    }
    const uint64_t offset = c.at("offset"), size = c.at("bytes");
    if (offset > blob.size() || size > blob.size() - offset)
      return invalid_argument("constant '", c.at("name").get<std::string>(), "' runs past the end of the data");
    // The blob bounds the allocation: a header may claim any shape.
    const uint64_t per_element = dtype == DataType::kString ? 4 : dtype_size(dtype);
    const int64_t numel = checked_numel(dims);
    if (numel < 0 || static_cast<uint64_t>(numel) > size / std::max<uint64_t>(per_element, 1) ||
        (dtype != DataType::kString && static_cast<uint64_t>(numel) * per_element != size))
      return invalid_argument("constant '", c.at("name").get<std::string>(), "' has the wrong size");
    if (dtype == DataType::kString) {
      KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(dtype, dims));
      KILN_RETURN_IF_ERROR(read_strings(blob.substr(offset, size), t, c.at("name")));
      KILN_RETURN_IF_ERROR(graph.add_constant(c.at("name"), std::move(t)).status());
      continue;
    }
    KILN_ASSIGN_OR_RETURN(Tensor t, read_constant(weights, offset, dtype, dims));
    KILN_RETURN_IF_ERROR(graph.add_constant(c.at("name"), std::move(t)).status());
  }
  for (const json& n : j.at("nodes")) {
    const std::string op = n.at("op");
    const OpSchema* schema = OpRegistry::global().find(op);
    if (!schema) return unsupported("the graph uses op '", op, "', which this kiln does not have");
    auto attrs = schema->make_attrs();
    KILN_RETURN_IF_ERROR(attrs->from_json(n.at("attrs").dump()));
    std::vector<Value*> inputs;
    for (const json& in : n.at("inputs")) {
      const std::string name = in;
      if (name.empty()) {
        inputs.push_back(nullptr);
        continue;
      }
      Value* v = graph.find_value(name);
      if (!v) return invalid_argument("node '", n.at("name").get<std::string>(), "' uses unknown value '", name, "'");
      inputs.push_back(v);
    }
    std::vector<Subgraph> subgraphs;
    if (n.contains("subgraphs"))
      for (const json& sub : n.at("subgraphs")) {
        Subgraph sg{sub.at("name"), std::make_unique<Graph>()};
        Status s = read_graph(sub.at("graph"), weights, *sg.graph, depth + 1);
        if (!s.is_ok()) return std::move(s).with_prefix(str_cat(n.at("name").get<std::string>(), "/", sg.name));
        subgraphs.push_back(std::move(sg));
      }
    KILN_RETURN_IF_ERROR(
        graph.add_node(op, n.at("name"), std::move(attrs), inputs, n.at("outputs"), std::move(subgraphs)).status());
  }
  for (const json& o : j.at("outputs")) {
    Value* v = graph.find_value(o.get<std::string>());
    if (!v) return invalid_argument("graph output '", o.get<std::string>(), "' is unknown");
    KILN_RETURN_IF_ERROR(graph.mark_output(v));
  }
  return Status::ok();
}

}  // namespace

SerializedGraph serialize_graph_parts(const Graph& graph) {
  SerializedGraph out;
  out.description = graph_json(graph, out.weights, false).dump();
  return out;
}

SerializedGraph serialize_graph_parts(std::unique_ptr<Graph> graph) {
  SerializedGraph out;
  out.description = graph_json(*graph, out.weights, true).dump();
  return out;
}

Result<std::unique_ptr<Graph>> deserialize_graph(std::string_view description, std::string_view weights,
                                                 std::shared_ptr<const void> weights_owner) {
  const json j = json::parse(description, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument("graph description is not valid JSON");
  Weights w{weights, std::move(weights_owner)};
  if (!w.owner && !weights.empty()) {  // one aligned copy that every constant then views
    KILN_ASSIGN_OR_RETURN(Tensor copy, Tensor::empty(DataType::kUInt8, Dims{static_cast<int64_t>(weights.size())},
                                                     cpu_allocator(), "engine weights"));
    std::memcpy(copy.raw(), weights.data(), weights.size());
    w.bytes = std::string_view(static_cast<const char*>(copy.raw()), weights.size());
    w.owner = std::make_shared<const Tensor>(std::move(copy));
  }
  auto graph = std::make_unique<Graph>();
  try {
    KILN_RETURN_IF_ERROR(read_graph(j, w, *graph, 0));
  } catch (const json::exception& e) {
    return invalid_argument("graph description is malformed: ", e.what());
  }
  return graph;
}

std::string serialize_graph(const Graph& graph) {
  SerializedGraph parts = serialize_graph_parts(graph);
  std::string out;
  const uint64_t len = parts.description.size();
  out.append(reinterpret_cast<const char*>(&len), 8);
  out += parts.description;
  out += parts.weights.join();
  return out;
}

Result<std::unique_ptr<Graph>> deserialize_graph(std::string_view bytes) {
  if (bytes.size() < 8) return invalid_argument("graph data is truncated");
  uint64_t len = 0;
  std::memcpy(&len, bytes.data(), 8);
  if (len > bytes.size() - 8) return invalid_argument("graph data is truncated (description runs past the end)");
  return deserialize_graph(bytes.substr(8, len), bytes.substr(8 + len), nullptr);
}

}  // namespace kiln
