#pragma once
/// Element types and the conversions between them.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

enum class DataType : uint8_t {
  kFloat32,
  kFloat16,
  kBFloat16,
  kInt8,
  kUInt8,
  kInt32,
  kInt64,
  kBool,
  kFp8E4M3,  ///< reserved: no kernels yet
  kString,   ///< ids of interned strings (include/kiln/strings.h); host ops only, not in kAllDataTypes
};

inline constexpr DataType kAllDataTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                                             DataType::kInt8,    DataType::kUInt8,   DataType::kInt32,
                                             DataType::kInt64,   DataType::kBool,    DataType::kFp8E4M3};

size_t dtype_size(DataType dtype);
/// "float32", "float16", "bfloat16", "int8", "uint8", "int32", "int64", "bool", "fp8e4m3", "string".
std::string_view dtype_name(DataType dtype);
std::optional<DataType> parse_dtype(std::string_view name);
/// dtype_name under the name attribute printing looks for (enum fields print by name).
inline std::string_view enum_name(DataType dtype) { return dtype_name(dtype); }
bool is_floating(DataType dtype);
bool is_integer(DataType dtype);  ///< signed or unsigned integers, not bool

/// IEEE binary16 with round-to-nearest-even conversion from float.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  explicit Half(float value);
  explicit operator float() const;
};

/// bfloat16 (the top half of a float32) with round-to-nearest-even conversion.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float value);
  explicit operator float() const;
};

uint16_t float_to_half_bits(float value);
float half_bits_to_float(uint16_t bits);
uint16_t float_to_bfloat16_bits(float value);
float bfloat16_bits_to_float(uint16_t bits);
/// Rounds half to even and clamps to [-128, 127]; NaN becomes 0.
int8_t saturate_int8(float value);
uint8_t saturate_uint8(float value);

/// Reads element `index` of a buffer of `dtype` as a double (exact for every type but int64 > 2^53).
double load_element(const void* data, DataType dtype, int64_t index);
/// Writes `value` to element `index` with the conversion rules above (integers saturate, round to even).
void store_element(void* data, DataType dtype, int64_t index, double value);

/// The C++ storage type of a DataType.
template <DataType D>
struct StorageOf;
template <>
struct StorageOf<DataType::kFloat32> {
  using type = float;
};
template <>
struct StorageOf<DataType::kFloat16> {
  using type = Half;
};
template <>
struct StorageOf<DataType::kBFloat16> {
  using type = BFloat16;
};
template <>
struct StorageOf<DataType::kInt8> {
  using type = int8_t;
};
template <>
struct StorageOf<DataType::kUInt8> {
  using type = uint8_t;
};
template <>
struct StorageOf<DataType::kInt32> {
  using type = int32_t;
};
template <>
struct StorageOf<DataType::kInt64> {
  using type = int64_t;
};
template <>
struct StorageOf<DataType::kBool> {
  using type = bool;
};

}  // namespace kiln
