#pragma once
// Instruction sets the CPU's own kernels test for once, at their first use.
namespace kiln::cpu {

/// Whether this CPU runs AVX2 and FMA3 (the own float32 kernels' register code).
inline bool has_avx2_fma() {
  static const bool kYes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return kYes;
}

/// Whether the own kernels that have AVX-512 code use it: the CPU has AVX-512F and oneDNN's ISA limit
/// (ONEDNN_MAX_CPU_ISA, e.g. AVX2) allows avx512_core, so that one setting limits both, and the ISA an engine
/// records (kernels/libraries.h) covers the code it was timed with.
bool use_avx512();

}  // namespace kiln::cpu
