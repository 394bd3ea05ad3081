#pragma once
// Element types of the CUDA pointwise kernels: a DataType becomes a device storage type, float16/bfloat16
// compute in float (as the reference does), and aligned packs give 16-byte vector loads.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kiln/dtype.h"

namespace kiln::cuda {

template <class T>
struct Type {
  using type = T;
};

/// The T of a Type<T> argument of a generic lambda: `using A = type_of<decltype(tag)>;`.
template <class Tag>
using type_of = typename std::decay_t<Tag>::type;

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

/// The type arithmetic happens in: float for the 16-bit floats, the storage type otherwise.
template <class T>
using compute_t = std::conditional_t<is_half_v<T>, float, T>;

template <class T>
__device__ inline compute_t<T> load(T v) {
  if constexpr (std::is_same_v<T, __half>)
    return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __bfloat162float(v);
  else
    return v;
}

/// A compute value stored as T: float rounds to nearest even for the 16-bit floats; others convert as C++ does.
template <class T, class C>
__device__ inline T store(C v) {
  if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

/// Calls f(Type<Storage>{}) for `dtype`; false for dtypes without kernels (fp8).
template <class F>
bool dispatch_dtype(DataType dtype, F&& f) {
  switch (dtype) {
    case DataType::kFloat32: f(Type<float>{}); return true;
    case DataType::kFloat16: f(Type<__half>{}); return true;
    case DataType::kBFloat16: f(Type<__nv_bfloat16>{}); return true;
    case DataType::kInt8: f(Type<int8_t>{}); return true;
    case DataType::kUInt8: f(Type<uint8_t>{}); return true;
    case DataType::kInt32: f(Type<int32_t>{}); return true;
    case DataType::kInt64: f(Type<int64_t>{}); return true;
    case DataType::kBool: f(Type<bool>{}); return true;
    default: return false;
  }
}

/// Calls f(Type<Storage>{}) for float32, float16 and bfloat16; false otherwise.
template <class F>
bool dispatch_float(DataType dtype, F&& f) {
  switch (dtype) {
    case DataType::kFloat32: f(Type<float>{}); return true;
    case DataType::kFloat16: f(Type<__half>{}); return true;
    case DataType::kBFloat16: f(Type<__nv_bfloat16>{}); return true;
    default: return false;
  }
}

/// Elements moved as unsigned words of their size (1, 2, 4, 8 bytes) or 16-byte vectors.
template <int Bytes>
struct Word;
template <>
struct Word<1> {
  using type = uint8_t;
};
template <>
struct Word<2> {
  using type = uint16_t;
};
template <>
struct Word<4> {
  using type = uint32_t;
};
template <>
struct Word<8> {
  using type = uint2;
};
template <>
struct Word<16> {
  using type = uint4;
};

/// Calls f(Type<word>{}) for an element size of 1, 2, 4, 8 or 16 bytes; false for other sizes.
template <class F>
bool dispatch_word(size_t bytes, F&& f) {
  switch (bytes) {
    case 1: f(Type<Word<1>::type>{}); return true;
    case 2: f(Type<Word<2>::type>{}); return true;
    case 4: f(Type<Word<4>::type>{}); return true;
    case 8: f(Type<Word<8>::type>{}); return true;
    case 16: f(Type<Word<16>::type>{}); return true;
    default: return false;
  }
}

/// Elements per pack in a kernel over types T...: 16 bytes of the widest of them.
template <class... T>
inline constexpr int kPackOf = static_cast<int>(16 / std::max({sizeof(T)...}));

/// N elements loaded or stored at once (needs N * sizeof(T) alignment).
template <class T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

/// Whether `p` is aligned for a Pack<T, N>.
template <class T, int N>
inline bool pack_aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * N) == 0;
}

}  // namespace kiln::cuda
