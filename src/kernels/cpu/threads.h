#pragma once
// The CPU kernels' thread count (OpenMP, which oneDNN uses too).
namespace kiln {

/// Sets how many threads CPU kernels started from the calling thread use (n >= 1).
void set_cpu_threads(int n);
/// The thread count CPU kernels started from the calling thread use now.
int cpu_threads();

}  // namespace kiln
