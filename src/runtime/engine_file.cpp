#include "runtime/engine_file.h"

#include <cstdint>
#include <cstring>

#include "core/cuda_runtime.h"
#include "graph/serialization.h"
#include "kernels/libraries.h"

namespace kiln {

namespace {
constexpr std::string_view kRebuild = "; rebuild the engine from the model";
}  // namespace

Status check_engine_target(const EngineHeader& header) {
  if (header.device == "cpu") {
    const std::string why = cpu_isa_mismatch(header.cpu_isa);
    if (why.empty()) return Status::ok();
    return Status(StatusCode::kVersionMismatch, str_cat(why, kRebuild));
  }
  const std::string built = str_cat("GPU ", header.device, " (compute capability ", header.compute_capability, ")");
  const cuda::RuntimeInfo rt = cuda::query_runtime();
  if (rt.gpus.empty())
    return Status(StatusCode::kDeviceError,
                  str_cat("the engine was built for ", built, " and this machine has no usable GPU (", rt.problem, ")",
                          kRebuild));
  const cuda::GpuInfo& gpu = rt.gpus.front();
  const std::string cc = str_cat(gpu.cc_major, ".", gpu.cc_minor);
  if (gpu.name != header.device || cc != header.compute_capability)
    return Status(StatusCode::kVersionMismatch, str_cat("the engine was built for ", built, " and this GPU is ",
                                                        gpu.name, " (compute capability ", cc, ")", kRebuild));
  return Status::ok();
}

Result<EngineFileContents> read_engine_file(std::string_view bytes, std::shared_ptr<const void> storage) {
  KILN_ASSIGN_OR_RETURN(EngineContainer c, read_engine_container(bytes, check_engine_target));
  EngineFileContents out;
  out.header = std::move(c.header);
  for (const char* name : {"graph", "plan", "weights"})
    if (!c.sections.count(name)) return invalid_argument("the engine lacks its ", name, " section", kRebuild);
  if (auto it = c.sections.find("prepared"); it != c.sections.end() && !it->second.empty()) {
    const std::string_view bytes = it->second;
    const Dims dims{static_cast<int64_t>(bytes.size())};
    if (storage && reinterpret_cast<uintptr_t>(bytes.data()) % kEngineAlignment == 0) {
      out.prepared = Tensor::view(const_cast<char*>(bytes.data()), DataType::kUInt8, dims, storage);
    } else {
      KILN_ASSIGN_OR_RETURN(out.prepared, Tensor::empty(DataType::kUInt8, dims));
      std::memcpy(out.prepared.raw(), bytes.data(), bytes.size());
    }
  }
  auto graph = deserialize_graph(c.sections["graph"], c.sections["weights"], std::move(storage));
  if (!graph)
    return Status(graph.status().code(),
                  str_cat("the engine's graph is malformed (", graph.status().message(), ")", kRebuild));
  out.graph = std::move(*graph);
  out.plan = c.sections["plan"];
  if (auto it = c.sections.find("optimizer"); it != c.sections.end()) out.optimizer = it->second;
  return out;
}

}  // namespace kiln
