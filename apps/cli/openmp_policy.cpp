#include "openmp_policy.h"

#include <unistd.h>

#include <cstdlib>

namespace kiln::cli {

// By default libgomp's idle threads spin for about 300,000 iterations before sleeping. When another process
// takes a core, a thread that lost it stalls every parallel region while the others spin at the barrier: a
// 0.15 ms model took 288 ms on 2 busy cores. A short spin keeps back-to-back kernels cheap on an idle machine
// and lets waiting threads yield their core on a busy one (benchmarks/cpu/README.md has both measurements).
constexpr const char* kSpinCount = "10000";

void use_short_openmp_spin(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  if (setenv("GOMP_SPINCOUNT", kSpinCount, 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("GOMP_SPINCOUNT");  // the re-exec failed: go on with libgomp's default
}

}  // namespace kiln::cli
