// libkiln_openmp_wait: chooses libgomp's wait policy before libgomp starts (see README.md here).
#include <dlfcn.h>
#include <sched.h>

#include <cstdlib>
#include <cstring>

// The spin is kShortOpenMpSpin (kernels/cpu/threads.h), which benchmarks/cpu/README.md measures.
// 0: kiln set GOMP_SPINCOUNT before libgomp started; 1: the user's environment sets the policy; 2: libgomp had
// started already, with its default spin. Read by kiln::openmp_wait() (kernels/cpu/threads.h).
extern "C" __attribute__((visibility("default"))) int kiln_openmp_wait_choice = 2;

namespace {

// libgomp's thread-count ICV is 1 until its constructor sets it from the CPU count or OMP_NUM_THREADS. Where 1 is
// also what it would set (one CPU, OMP_NUM_THREADS=1), whether it started cannot be told: then assume it did.
bool libgomp_may_have_started() {
  using MaxThreads = int (*)();
  auto* max_threads = reinterpret_cast<MaxThreads>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  if (!max_threads) return false;  // not loaded yet: it reads the environment when it is
  if (max_threads() != 1) return true;
  const char* n = std::getenv("OMP_NUM_THREADS");
  if (n && std::strtol(n, nullptr, 10) == 1) return true;
  cpu_set_t cpus;
  return sched_getaffinity(0, sizeof(cpus), &cpus) != 0 || CPU_COUNT(&cpus) <= 1;
}

__attribute__((constructor)) void choose_openmp_wait() {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) {
    kiln_openmp_wait_choice = 1;
  } else if (!libgomp_may_have_started() && setenv("GOMP_SPINCOUNT", "10000", 0) == 0) {
    kiln_openmp_wait_choice = 0;
  }
}

}  // namespace
