#include "kernels/cpu/cpu_features.h"

#include <dnnl.hpp>

namespace kiln::cpu {

bool use_avx512() {
  static const bool kYes = [] {
    const auto have = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto need = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
    return __builtin_cpu_supports("avx512f") && (have & need) == need;
  }();
  return kYes;
}

}  // namespace kiln::cpu
