#pragma once
// cuBLAS and cuBLASLt are loaded on first use (cublas_lazy.cpp): a process that never runs a GEMM on the GPU never
// loads them.
#include <string>

namespace kiln::cuda {

/// Why cuBLAS or cuBLASLt could not be loaded ("" when both loaded, or were never asked for).
std::string cublas_load_error();

}  // namespace kiln::cuda
