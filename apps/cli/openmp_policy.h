#pragma once
// How long idle OpenMP threads spin before they sleep. libgomp reads its wait policy from the environment once,
// when it loads, so the `kiln` command sets it and re-executes itself before anything runs.
namespace kiln::cli {

/// When the user set neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT: sets a short spin (GOMP_SPINCOUNT) and replaces
/// the process with itself (same arguments). Returns only when nothing was to be done or the re-exec failed.
void use_short_openmp_spin(char** argv);

}  // namespace kiln::cli
