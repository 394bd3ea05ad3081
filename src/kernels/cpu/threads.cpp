#include "kernels/cpu/threads.h"

#include <omp.h>

// Set by libkiln_openmp_wait's constructor (kernels/openmp_wait).
extern "C" int kiln_openmp_wait_choice;

namespace kiln {

void set_cpu_threads(int n) { omp_set_num_threads(n < 1 ? 1 : n); }

int cpu_threads() { return omp_get_max_threads(); }

CpuThreadsScope::CpuThreadsScope(int n) {
  if (n <= 0) return;
  previous_ = cpu_threads();
  if (previous_ != n) set_cpu_threads(n);
}

CpuThreadsScope::~CpuThreadsScope() {
  if (previous_ > 0 && cpu_threads() != previous_) set_cpu_threads(previous_);
}

OpenMpWait openmp_wait() {
  switch (kiln_openmp_wait_choice) {
    case 0: return OpenMpWait::kShortSpin;
    case 1: return OpenMpWait::kUserSet;
    default: return OpenMpWait::kLibgompDefault;
  }
}

const char* openmp_wait_description() {
  switch (openmp_wait()) {
    case OpenMpWait::kShortSpin: return "short spin (GOMP_SPINCOUNT=10000, set by kiln)";
    case OpenMpWait::kUserSet: return "as OMP_WAIT_POLICY or GOMP_SPINCOUNT in the environment say";
    case OpenMpWait::kLibgompDefault: break;
  }
  return "libgomp's default spin (libgomp started before kiln could set it; set GOMP_SPINCOUNT=10000)";
}

}  // namespace kiln
