// kiln's own definitions of the cuBLAS and cuBLASLt functions its CUDA kernels call. Each loads its library on first
// use (dlopen of the soname of the toolkit kiln was built with) and forwards to it; when the library cannot be loaded
// it returns CUBLAS_STATUS_NOT_INITIALIZED and cublas_load_error() says why. The libraries are not linked: loading
// libcublasLt costs about 150 MB of memory (its initializers), which a CPU-only run of a CUDA build should not pay.
// The definitions are hidden: only kiln's own code binds to them, never a program that links cuBLAS itself.
#include <cuda_runtime.h>  // declared with default visibility before the hidden block below
#include <dlfcn.h>

#include <mutex>
#include <string>

#pragma GCC visibility push(hidden)
#include <cublasLt.h>
#include <cublas_v2.h>
#pragma GCC visibility pop

#include "kernels/cuda/cublas_lazy.h"

namespace kiln::cuda {
namespace {

#define KILN_STR2(x) #x
#define KILN_STR(x) KILN_STR2(x)
constexpr const char* kLtName = "libcublasLt.so." KILN_STR(CUBLAS_VER_MAJOR);
constexpr const char* kBlasName = "libcublas.so." KILN_STR(CUBLAS_VER_MAJOR);

struct Library {
  void* handle = nullptr;
  std::string error;
};

std::mutex& error_mutex() {
  static std::mutex mu;
  return mu;
}
std::string& load_error() {
  static std::string error;
  return error;
}

Library open_library(const char* name) {
  Library lib;
  lib.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
#ifdef KILN_CUDA_LIBRARY_DIR
  if (!lib.handle)
    lib.handle = dlopen((std::string(KILN_CUDA_LIBRARY_DIR) + "/" + name).c_str(), RTLD_NOW | RTLD_LOCAL);
#endif
  if (!lib.handle) {
    const char* why = dlerror();
    lib.error = std::string(name) + " could not be loaded (" + (why ? why : "unknown reason") +
                "): install the CUDA toolkit's cuBLAS libraries or put them on the library path";
    std::lock_guard<std::mutex> lock(error_mutex());
    load_error() = lib.error;
  }
  return lib;
}

const Library& lt() {
  static const Library kLib = open_library(kLtName);
  return kLib;
}
const Library& blas() {
  static const Library kLib = open_library(kBlasName);
  return kLib;
}

// The function `name` of `lib` as F*, or nullptr (recorded in the load error).
template <class F>
F* symbol(const Library& lib, const char* name) {
  if (!lib.handle) return nullptr;
  void* f = dlsym(lib.handle, name);
  if (!f) {
    std::lock_guard<std::mutex> lock(error_mutex());
    load_error() = std::string("the cuBLAS libraries lack '") + name + "': they are older than the toolkit kiln was " +
                   "built with";
  }
  return reinterpret_cast<F*>(f);
}

}  // namespace

std::string cublas_load_error() {
  std::lock_guard<std::mutex> lock(error_mutex());
  return load_error();
}

}  // namespace kiln::cuda

using kiln::cuda::blas;
using kiln::cuda::lt;
using kiln::cuda::symbol;

// The forwarded function `f` of library `lib`, resolved once; `fail` is returned when it cannot be had.
#define KILN_FORWARD(lib, name, fail, ...)                                    \
  static auto* const f = symbol<decltype(::name)>(lib(), #name); /* NOLINT */ \
  if (!f) return fail;                                                        \
  return f(__VA_ARGS__)

constexpr cublasStatus_t kNotLoaded = CUBLAS_STATUS_NOT_INITIALIZED;

cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) { KILN_FORWARD(lt, cublasLtCreate, kNotLoaded, h); }
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) { KILN_FORWARD(lt, cublasLtDestroy, kNotLoaded, h); }
size_t cublasLtGetVersion(void) { KILN_FORWARD(lt, cublasLtGetVersion, 0); }
cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
                              cublasLtMatrixLayout_t ad, const void* b, cublasLtMatrixLayout_t bd, const void* beta,
                              const void* c, cublasLtMatrixLayout_t cd, void* d, cublasLtMatrixLayout_t dd,
                              const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspace_bytes,
                              cudaStream_t stream) {
  KILN_FORWARD(lt, cublasLtMatmul, kNotLoaded, h, desc, alpha, a, ad, b, bd, beta, c, cd, d, dd, algo, workspace,
               workspace_bytes, stream);
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute, cudaDataType_t scale) {
  KILN_FORWARD(lt, cublasLtMatmulDescCreate, kNotLoaded, desc, compute, scale);
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  KILN_FORWARD(lt, cublasLtMatmulDescDestroy, kNotLoaded, desc);
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t bytes) {
  KILN_FORWARD(lt, cublasLtMatmulDescSetAttribute, kNotLoaded, desc, attr, buf, bytes);
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  KILN_FORWARD(lt, cublasLtMatrixLayoutCreate, kNotLoaded, layout, type, rows, cols, ld);
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  KILN_FORWARD(lt, cublasLtMatrixLayoutDestroy, kNotLoaded, layout);
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t bytes) {
  KILN_FORWARD(lt, cublasLtMatrixLayoutSetAttribute, kNotLoaded, layout, attr, buf, bytes);
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  KILN_FORWARD(lt, cublasLtMatmulPreferenceCreate, kNotLoaded, pref);
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  KILN_FORWARD(lt, cublasLtMatmulPreferenceDestroy, kNotLoaded, pref);
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t bytes) {
  KILN_FORWARD(lt, cublasLtMatmulPreferenceSetAttribute, kNotLoaded, pref, attr, buf, bytes);
}
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t ad,
                                              cublasLtMatrixLayout_t bd, cublasLtMatrixLayout_t cd,
                                              cublasLtMatrixLayout_t dd, cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned) {
  KILN_FORWARD(lt, cublasLtMatmulAlgoGetHeuristic, kNotLoaded, h, desc, ad, bd, cd, dd, pref, requested, results,
               returned);
}
cublasStatus_t cublasLtMatmulAlgoInit(cublasLtHandle_t h, cublasComputeType_t compute, cudaDataType_t scale,
                                      cudaDataType_t a, cudaDataType_t b, cudaDataType_t c, cudaDataType_t d,
                                      int algo_id, cublasLtMatmulAlgo_t* algo) {
  KILN_FORWARD(lt, cublasLtMatmulAlgoInit, kNotLoaded, h, compute, scale, a, b, c, d, algo_id, algo);
}
cublasStatus_t cublasLtMatmulAlgoCheck(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t ad,
                                       cublasLtMatrixLayout_t bd, cublasLtMatrixLayout_t cd, cublasLtMatrixLayout_t dd,
                                       const cublasLtMatmulAlgo_t* algo, cublasLtMatmulHeuristicResult_t* result) {
  KILN_FORWARD(lt, cublasLtMatmulAlgoCheck, kNotLoaded, h, desc, ad, bd, cd, dd, algo, result);
}
cublasStatus_t cublasLtMatmulAlgoConfigSetAttribute(cublasLtMatmulAlgo_t* algo,
                                                    cublasLtMatmulAlgoConfigAttributes_t attr, const void* buf,
                                                    size_t bytes) {
  KILN_FORWARD(lt, cublasLtMatmulAlgoConfigSetAttribute, kNotLoaded, algo, attr, buf, bytes);
}
cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t* algo,
                                                    cublasLtMatmulAlgoConfigAttributes_t attr, void* buf, size_t bytes,
                                                    size_t* written) {
  KILN_FORWARD(lt, cublasLtMatmulAlgoConfigGetAttribute, kNotLoaded, algo, attr, buf, bytes, written);
}

cublasStatus_t cublasCreate_v2(cublasHandle_t* h) { KILN_FORWARD(blas, cublasCreate_v2, kNotLoaded, h); }
cublasStatus_t cublasDestroy_v2(cublasHandle_t h) { KILN_FORWARD(blas, cublasDestroy_v2, kNotLoaded, h); }
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t stream) {
  KILN_FORWARD(blas, cublasSetStream_v2, kNotLoaded, h, stream);
}
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void* workspace, size_t bytes) {
  KILN_FORWARD(blas, cublasSetWorkspace_v2, kNotLoaded, h, workspace, bytes);
}
cublasStatus_t cublasGetProperty(libraryPropertyType type, int* value) {
  KILN_FORWARD(blas, cublasGetProperty, kNotLoaded, type, value);
}
const char* cublasGetStatusString(cublasStatus_t status) {
  KILN_FORWARD(blas, cublasGetStatusString, "cuBLAS is not loaded", status);
}
cublasStatus_t cublasSgemm_v2_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
                                 int64_t k, const float* alpha, const float* a, int64_t lda, const float* b,
                                 int64_t ldb, const float* beta, float* c, int64_t ldc) {
  KILN_FORWARD(blas, cublasSgemm_v2_64, kNotLoaded, h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
