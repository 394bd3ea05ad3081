#pragma once
// Instruction sets the CPU's own kernels test for once, at their first use.
namespace kiln::cpu {

/// Whether this CPU runs AVX2 and FMA3 (the own float32 kernels' register code).
inline bool has_avx2_fma() {
  static const bool kYes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return kYes;
}

}  // namespace kiln::cpu
