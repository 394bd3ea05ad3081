// libFuzzer target: arbitrary bytes through the engine reader (container, graph, plan) and context creation
// must give an engine or a Status, never a crash, a hang or an unbounded allocation.
// An input starting with 'K' is a whole engine file (the checksum rejects most mutations of its body); any
// other input is "<graph section>\n#plan#\n<plan section>", wrapped in a valid container by this target, so
// that mutations reach the graph and plan readers.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "graph/engine_format.h"
#include "kiln/logger.h"
#include "kiln/version.h"
#include "runtime/engine.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    kiln::Logger::global().set_level(kiln::Severity::kInternalError);
    return true;
  }();
  (void)quiet;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  std::string wrapped;
  if (in.empty() || in[0] != 'K') {
    constexpr std::string_view kSplit = "\n#plan#\n";
    const size_t at = in.find(kSplit);
    kiln::EngineHeader header;
    header.kiln_version = kiln::version_string();
    header.device = "cpu";
    wrapped = kiln::write_engine_container(
        header, {{"graph", std::string(in.substr(0, at))},
                 {"plan", at == std::string_view::npos ? std::string() : std::string(in.substr(at + kSplit.size()))}});
  }
  auto engine = kiln::EngineImpl::deserialize(wrapped.empty() ? in : std::string_view(wrapped));
  if (engine) (void)(*engine)->create_execution_context();
  return 0;
}
