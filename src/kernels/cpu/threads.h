#pragma once
// The CPU kernels' thread count: the OpenMP team size of the calling thread, which oneDNN (built on OpenMP) and
// kiln's own kernels (core/parallel.h) both use, so one count governs every parallel region of a run.
namespace kiln {

/// Sets how many threads CPU kernels started from the calling thread use (n >= 1).
void set_cpu_threads(int n);
/// The thread count CPU kernels started from the calling thread use now.
int cpu_threads();

/// Sets the calling thread's CPU thread count for a scope (n <= 0: leaves it) and restores the previous count when
/// it ends, so a context's or a build's count does not leak into the caller's later OpenMP code.
class CpuThreadsScope {
 public:
  explicit CpuThreadsScope(int n);
  ~CpuThreadsScope();
  CpuThreadsScope(const CpuThreadsScope&) = delete;
  CpuThreadsScope& operator=(const CpuThreadsScope&) = delete;

 private:
  int previous_ = 0;  ///< 0: nothing to restore
};

/// GOMP_SPINCOUNT kiln sets: idle OpenMP threads spin about this many rounds (tens of microseconds), enough
/// to bridge back-to-back kernels, then sleep and give their core back: 30 times shorter than libgomp's default.
/// On 2 Zen 5 cores MobileNetV2 at batch 1 ran 3.9-4.3 ms with 10,000 against 5.0-5.1 ms with 300 (each layer's
/// region waited for a sleeping thread), and with one or two busy loops beside it 6.6-11 ms with either.
inline constexpr const char* kShortOpenMpSpin = "10000";

/// How idle OpenMP threads wait between parallel regions (libgomp reads it once, when it starts).
enum class OpenMpWait {
  kShortSpin,       ///< kiln set GOMP_SPINCOUNT before libgomp started (kernels/openmp_wait)
  kUserSet,         ///< OMP_WAIT_POLICY or GOMP_SPINCOUNT came from the environment: kept
  kLibgompDefault,  ///< libgomp started before kiln could set it: its default spin (about 300,000 rounds)
};
OpenMpWait openmp_wait();
/// One line saying which, for `kiln doctor` and warnings.
const char* openmp_wait_description();

}  // namespace kiln
