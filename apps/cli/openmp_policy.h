#pragma once
// How long idle OpenMP threads spin before they sleep. libkiln_openmp_wait sets a short spin before libgomp starts
// (kernels/openmp_wait); where libgomp had started first, the `kiln` command sets it and re-executes itself.
namespace kiln::cli {

/// When libgomp runs with its default spin that the user did not choose: sets a short spin (GOMP_SPINCOUNT) and
/// replaces the process with itself (same arguments). Returns when nothing was to be done or the re-exec failed.
void use_short_openmp_spin(char** argv);

}  // namespace kiln::cli
