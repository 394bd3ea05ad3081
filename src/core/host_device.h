#pragma once
// KILN_HD marks small inline functions that CUDA kernels share with the reference code. KILN_NO_EXEC_CHECK goes
// before a KILN_HD template that calls its caller's functor (a host or a device one): nvcc then checks the
// functor's side where the template is instantiated.
#ifdef __CUDACC__
#define KILN_HD __host__ __device__
#define KILN_NO_EXEC_CHECK _Pragma("nv_exec_check_disable")
#else
#define KILN_HD
#define KILN_NO_EXEC_CHECK
#endif
