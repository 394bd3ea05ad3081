// build_engine MODEL.onnx ENGINE [--fp16] [--shape name:1x3x224x224]...
// Parses an ONNX model, builds a CPU engine and writes it to a file.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "kiln/builder.h"
#include "kiln/logger.h"

namespace {

int fail(const kiln::Status& status) {
  std::fprintf(stderr, "build_engine: %s\n", status.to_string().c_str());
  return 1;
}

// "name:1x3x224x224" -> a fixed shape for that input (min = opt = max).
kiln::Status add_shape(kiln::BuilderConfig& config, const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos) return kiln::invalid_argument("--shape '", text, "' is not name:dims");
  kiln::Dims dims;
  size_t pos = colon + 1;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find('x', pos), text.size());
    const std::string part = text.substr(pos, end - pos);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos || part.size() > 12)
      return kiln::invalid_argument("--shape '", text, "': '", part, "' is not a dimension");
    if (dims.rank() == kiln::kMaxRank) return kiln::invalid_argument("--shape '", text, "' has too many dims");
    dims.push_back(std::stoll(part));
    pos = end + 1;
  }
  return config.set_profile_shapes(text.substr(0, colon), dims, dims, dims);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: build_engine MODEL.onnx ENGINE [--fp16] [--shape name:1x3x224x224]...\n");
    return 2;
  }
  kiln::BuilderConfig config;
  for (int i = 3; i < argc; ++i) {
    if (std::strcmp(argv[i], "--fp16") == 0) {
      config.set_flag(kiln::BuilderFlag::kFp16);
    } else if (std::strcmp(argv[i], "--shape") == 0 && i + 1 < argc) {
      if (kiln::Status s = add_shape(config, argv[++i]); !s.is_ok()) return fail(s);
    } else {
      return fail(kiln::invalid_argument("unknown option '", argv[i], "'"));
    }
  }
  kiln::Logger::global().set_level(kiln::Severity::kInfo);

  kiln::OnnxParser parser;
  auto network = parser.parse_from_file(argv[1]);
  if (!network) return fail(network.status());
  std::printf("parsed %s: %d layers, %zu inputs, %zu outputs\n", argv[1], network->num_layers(),
              network->input_names().size(), network->output_names().size());

  auto engine = kiln::Builder().build_serialized(*network, config);
  if (!engine) return fail(engine.status());

  std::ofstream out(argv[2], std::ios::binary | std::ios::trunc);
  out.write(engine->data(), static_cast<std::streamsize>(engine->size()));
  out.close();
  if (!out) return fail({kiln::StatusCode::kIoError, std::string("cannot write the engine to '") + argv[2] + "'"});
  std::printf("wrote %s (%zu bytes)\n", argv[2], engine->size());
  return 0;
}
