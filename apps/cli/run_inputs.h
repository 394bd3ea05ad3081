#pragma once
// What `kiln exec` and `kiln compare` feed an engine: random inputs from a fixed seed, shapes for dynamic
// dims (--shapes name:1x3x224x224) and values from ONNX TensorProto files (--loadInputs name:file.pb).
#include <string>
#include <utility>
#include <vector>

#include "kiln/status.h"
#include "kiln/tensor.h"
#include "runtime/engine.h"

namespace kiln::cli {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// "name:2x3x224" -> {name, dims}; errors name `flag`.
Result<std::pair<std::string, std::vector<int64_t>>> parse_shape(const std::string& text, const char* flag);
/// A file's bytes, or an I/O error naming `what` and the path.
Result<std::string> read_file(const std::string& path, const char* what);
/// One tensor per engine input: from `input_flags` ("name:file.pb") where given, else random with the
/// input's dims or those of `shape_flags` ("name:2x3"). Names that match no input are errors.
Result<NamedTensors> make_inputs(const EngineImpl& engine, const std::vector<std::string>& shape_flags,
                                 const std::vector<std::string>& input_flags);
/// An ONNX TensorProto file (the backend test suite's .pb) as a tensor; external data resolves in its folder.
/// `like`: the type the caller expects (bfloat16 data that older ONNX wrote as UINT16 is read as bfloat16).
Result<Tensor> read_tensor_file(const std::string& path, const std::string& what, DataType like = DataType::kFloat32);

}  // namespace kiln::cli
