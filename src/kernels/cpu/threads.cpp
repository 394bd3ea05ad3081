#include "kernels/cpu/threads.h"

#include <omp.h>

namespace kiln {

void set_cpu_threads(int n) { omp_set_num_threads(n < 1 ? 1 : n); }

int cpu_threads() { return omp_get_max_threads(); }

}  // namespace kiln
