#include "openmp_policy.h"

#include <unistd.h>

#include <cstdlib>

#include "kernels/cpu/threads.h"

namespace kiln::cli {

void use_short_openmp_spin(char** argv) {
  if (openmp_wait() != OpenMpWait::kLibgompDefault || std::getenv("GOMP_SPINCOUNT")) return;
  if (setenv("GOMP_SPINCOUNT", kShortOpenMpSpin, 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("GOMP_SPINCOUNT");  // the re-exec failed: go on with libgomp's default
}

}  // namespace kiln::cli
