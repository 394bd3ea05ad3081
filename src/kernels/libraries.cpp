#include "kernels/libraries.h"

#include <dnnl.hpp>

#include "kernels/cpu/cpu_features.h"
#include "kiln/status.h"

namespace kiln {

std::vector<LibraryVersion> cuda_libraries();  // kernels/cuda/libraries.cpp, or empty without CUDA

std::vector<LibraryVersion> kernel_libraries() {
  const dnnl_version_t* v = dnnl_version();
  std::vector<LibraryVersion> out{{"oneDNN", str_cat(v->major, ".", v->minor, ".", v->patch),
                                   str_cat("cpu runtime ", v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other")}};
  for (auto& lib : cuda_libraries()) out.push_back(lib);
  return out;
}

namespace {
// oneDNN's ISA values are bit sets: an ISA includes another when it has all of its bits.
struct IsaName {
  dnnl::cpu_isa isa;
  const char* name;
};
constexpr IsaName kIsas[] = {{dnnl::cpu_isa::sse41, "sse41"},
                             {dnnl::cpu_isa::avx, "avx"},
                             {dnnl::cpu_isa::avx2, "avx2"},
                             {dnnl::cpu_isa::avx2_vnni, "avx2_vnni"},
                             {dnnl::cpu_isa::avx512_core, "avx512_core"},
                             {dnnl::cpu_isa::avx512_core_vnni, "avx512_core_vnni"},
                             {dnnl::cpu_isa::avx512_core_bf16, "avx512_core_bf16"},
                             {dnnl::cpu_isa::avx512_core_amx, "avx512_core_amx"}};
}  // namespace

std::string cpu_isa_name() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  for (const IsaName& i : kIsas)
    if (i.isa == isa) return i.name;
  return str_cat("isa_", static_cast<unsigned>(isa));  // one this kiln has no name for
}

bool cpu_uses_avx512() { return cpu::use_avx512(); }

std::string cpu_isa_mismatch(std::string_view isa) {
  const std::string here = cpu_isa_name();
  if (isa == here) return "";
  const auto have = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  for (const IsaName& i : kIsas) {
    if (isa != i.name) continue;
    const auto need = static_cast<unsigned>(i.isa);
    if ((need & have) == need) return "";
    return str_cat("the engine was built for CPU ISA ", isa, " and this CPU has ", here, ", which lacks part of it");
  }
  return str_cat("the engine was built for CPU ISA '", isa, "', which this kiln does not know (this CPU has ", here,
                 ")");
}

#ifndef KILN_WITH_CUDA
std::vector<LibraryVersion> cuda_libraries() { return {}; }
#endif

}  // namespace kiln
