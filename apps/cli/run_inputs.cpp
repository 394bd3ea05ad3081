#include "run_inputs.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "exec_profiles.h"
#include "kiln/strings.h"
#include "onnx/tensor_proto.h"

namespace kiln::cli {

Result<std::pair<std::string, std::vector<int64_t>>> parse_shape(const std::string& text, const char* flag) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return invalid_argument(flag, " '", text, "' is not name:dims (e.g. input:1x3x224x224)");
  std::vector<int64_t> dims;
  std::stringstream parts(text.substr(colon + 1));
  for (std::string d; std::getline(parts, d, 'x');) {
    size_t end = 0;
    long long v = -1;
    try {
      v = std::stoll(d, &end);
    } catch (const std::exception&) {
      end = 0;
    }
    if (end != d.size() || v < 0 || v > (int64_t{1} << 40))
      return invalid_argument(flag, " '", text, "': '", d, "' is not a dimension");
    dims.push_back(v);
  }
  return std::pair{text.substr(0, colon), dims};
}

namespace {

// Random values from a fixed seed: floats in [-1, 1), integers in [0, 4) (safe as indices), random bools.
Result<Tensor> random_tensor(DataType dtype, const Dims& dims, std::mt19937& rng) {
  if (dtype == DataType::kString) {
    std::vector<std::string> items(static_cast<size_t>(dims.numel()));
    for (auto& s : items) s = str_cat("s", rng() % 8);
    return string_tensor(dims, items);
  }
  KILN_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(dtype, dims));
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (is_floating(dtype))
      t.set(i, real(rng));
    else if (dtype == DataType::kBool)
      t.set(i, static_cast<double>(rng() % 2));
    else
      t.set(i, static_cast<double>(rng() % 4));
  }
  return t;
}

}  // namespace

Result<std::string> read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(StatusCode::kIoError, str_cat("cannot open ", what, " '", path, "'"));
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

Result<Tensor> read_tensor_file(const std::string& path, const std::string& what, DataType like) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, read_file(path, "tensor file"));
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) return invalid_argument("'", path, "' is not an ONNX TensorProto (.pb) file");
  // Test data from ONNX before 1.13 stores bfloat16 as UINT16.
  if (like == DataType::kBFloat16 && proto.data_type() == onnx::TensorProto::UINT16)
    proto.set_data_type(onnx::TensorProto::BFLOAT16);
  onnx_import::TensorSource source(std::filesystem::path(path).parent_path().string());
  return onnx_import::tensor_from_proto(proto, source, what);
}

Result<NamedTensors> make_inputs(const EngineImpl& engine, const std::vector<std::string>& shape_flags,
                                 const std::vector<std::string>& input_flags) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const std::string& s : split_shape_list(shape_flags)) {
    KILN_ASSIGN_OR_RETURN(auto parsed, parse_shape(s, "--shapes"));
    shapes[parsed.first] = parsed.second;
  }
  KILN_ASSIGN_OR_RETURN(const ShapeRanges profiles, engine_profiles(engine.header()));
  std::map<std::string, std::string> files;
  for (const std::string& s : input_flags) {
    const auto colon = s.find(':');
    if (colon == std::string::npos || colon == 0) return invalid_argument("--loadInputs '", s, "' is not name:file.pb");
    files[s.substr(0, colon)] = s.substr(colon + 1);
  }
  std::mt19937 rng(1234);
  NamedTensors out;
  for (const Value* in : engine.graph().inputs()) {
    if (in->kind != ValueKind::kTensor)
      return unsupported("input '", in->name, "' is a ", value_kind_name(in->kind),
                         "; kiln exec feeds tensors only (use the C++ API for sequences and optionals)");
    const auto profile = profiles.find(in->name);
    const ShapeRange* range = profile == profiles.end() ? nullptr : &profile->second;
    if (auto f = files.find(in->name); f != files.end()) {
      KILN_ASSIGN_OR_RETURN(Tensor t, read_tensor_file(f->second, "input '" + in->name + "'"));
      if (range) KILN_RETURN_IF_ERROR(check_profile_shape(in->name, in->dims, range, t.dims()));
      out.emplace_back(in->name, std::move(t));
      files.erase(f);
      continue;
    }
    Dims dims = in->dims;
    if (auto s = shapes.find(in->name); s != shapes.end()) {
      KILN_ASSIGN_OR_RETURN(dims, Dims::from(s->second));
      shapes.erase(s);
      if (range) KILN_RETURN_IF_ERROR(check_profile_shape(in->name, in->dims, range, dims));
    } else if (range) {
      dims = range->opt;  // trtexec runs at the profile's opt shapes unless --shapes says otherwise
    } else if (!dims.is_static()) {
      return invalid_argument("input '", in->name, "' has dynamic dims ", dims.to_string(),
                              "; give its shape with --shapes ", in->name, ":", "1x... (or build with --minShapes, ",
                              "--optShapes and --maxShapes)");
    }
    KILN_ASSIGN_OR_RETURN(Tensor t, random_tensor(in->dtype, dims, rng));
    out.emplace_back(in->name, std::move(t));
  }
  for (const auto& [name, unused] : shapes)
    return invalid_argument("--shapes names '", name, "', which is not an input");
  for (const auto& [name, unused] : files)
    return invalid_argument("--loadInputs names '", name, "', which is not an input");
  return out;
}

}  // namespace kiln::cli
