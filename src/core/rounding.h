#pragma once
// Products rounded on their own in code that CUDA kernels share with the host (KILN_HD): nvcc fuses a * b + c into
// one FMA with one rounding where the host rounds twice; mul_rn keeps the device at the host's result.
#include "core/host_device.h"

namespace kiln {

KILN_HD inline double mul_rn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

}  // namespace kiln
