#pragma once
// Versions of the libraries the kernels use (oneDNN, cuDNN, cuBLAS), for `kiln doctor` and engine headers.
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

struct LibraryVersion {
  std::string name;     ///< "oneDNN", "cuDNN", "cuBLAS", "cuBLASLt"
  std::string version;  ///< "9.19.0"; for GPU libraries the loaded library's version
  std::string note;     ///< e.g. "built against 9.19.0"
};

std::vector<LibraryVersion> kernel_libraries();

/// The CPU instruction set the CPU kernels use here, as oneDNN names it ("avx2", "avx512_core_bf16"); it
/// follows oneDNN's ONEDNN_MAX_CPU_ISA limit. Engines record it: blocked layouts and timings depend on it.
std::string cpu_isa_name();
/// Empty when this CPU has every instruction of `isa` (a name cpu_isa_name gave on some machine),
/// otherwise why not, naming both ISAs.
std::string cpu_isa_mismatch(std::string_view isa);
/// Whether the own CPU kernels run their AVX-512 code here (kernels/cpu/cpu_features.h: the CPU has it and
/// oneDNN's ISA limit allows avx512_core), so that the builder and the kernels ask one question.
bool cpu_uses_avx512();

}  // namespace kiln
