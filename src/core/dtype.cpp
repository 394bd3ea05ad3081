#include "kiln/dtype.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace kiln {

size_t dtype_size(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat16: return 2;
    case DataType::kBFloat16: return 2;
    case DataType::kInt8: return 1;
    case DataType::kUInt8: return 1;
    case DataType::kInt32: return 4;
    case DataType::kInt64: return 8;
    case DataType::kBool: return 1;
    case DataType::kFp8E4M3: return 1;
    case DataType::kString: return 8;
  }
  return 0;
}

std::string_view dtype_name(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return "float32";
    case DataType::kFloat16: return "float16";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kInt8: return "int8";
    case DataType::kUInt8: return "uint8";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kBool: return "bool";
    case DataType::kFp8E4M3: return "fp8e4m3";
    case DataType::kString: return "string";
  }
  return "?";
}

std::optional<DataType> parse_dtype(std::string_view name) {
  for (DataType d : kAllDataTypes)
    if (dtype_name(d) == name) return d;
  if (name == "fp32" || name == "float") return DataType::kFloat32;
  if (name == "fp16" || name == "half") return DataType::kFloat16;
  if (name == "bf16") return DataType::kBFloat16;
  if (name == "string") return DataType::kString;
  return std::nullopt;
}

bool is_floating(DataType d) {
  return d == DataType::kFloat32 || d == DataType::kFloat16 || d == DataType::kBFloat16 || d == DataType::kFp8E4M3;
}
bool is_integer(DataType d) {
  return d == DataType::kInt8 || d == DataType::kUInt8 || d == DataType::kInt32 || d == DataType::kInt64;
}

uint16_t float_to_half_bits(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {  // result is subnormal or zero: add 0.5 to let the FPU round to even
    const float f = std::bit_cast<float>(abs) + 0.5f;
    return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(f) - 0x3f000000u));
  }
  const uint32_t mant_odd = (abs >> 13) & 1u;
  const uint32_t rounded = abs + 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float f = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -f : f;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t float_to_bfloat16_bits(float value) {
  uint32_t x = std::bit_cast<uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float bfloat16_bits_to_float(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

Half::Half(float value) : bits(float_to_half_bits(value)) {}
Half::operator float() const { return half_bits_to_float(bits); }
BFloat16::BFloat16(float value) : bits(float_to_bfloat16_bits(value)) {}
BFloat16::operator float() const { return bfloat16_bits_to_float(bits); }

int8_t saturate_int8(float value) {
  if (std::isnan(value)) return 0;
  const float r = std::nearbyint(value);
  return static_cast<int8_t>(std::fmax(-128.f, std::fmin(127.f, r)));
}
uint8_t saturate_uint8(float value) {
  if (std::isnan(value)) return 0;
  const float r = std::nearbyint(value);
  return static_cast<uint8_t>(std::fmax(0.f, std::fmin(255.f, r)));
}

double load_element(const void* data, DataType dtype, int64_t i) {
  switch (dtype) {
    case DataType::kFloat32: return static_cast<const float*>(data)[i];
    case DataType::kFloat16: return half_bits_to_float(static_cast<const uint16_t*>(data)[i]);
    case DataType::kBFloat16: return bfloat16_bits_to_float(static_cast<const uint16_t*>(data)[i]);
    case DataType::kInt8: return static_cast<const int8_t*>(data)[i];
    case DataType::kUInt8: return static_cast<const uint8_t*>(data)[i];
    case DataType::kInt32: return static_cast<const int32_t*>(data)[i];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(data)[i]);
    case DataType::kBool: return static_cast<const uint8_t*>(data)[i] ? 1.0 : 0.0;
    case DataType::kFp8E4M3: return 0.0;
    case DataType::kString: return static_cast<double>(static_cast<const int64_t*>(data)[i]);  // the string's id
  }
  return 0.0;
}

namespace {
template <class T>
T saturate_to(double v) {
  if (std::isnan(v)) return 0;
  const double r = std::nearbyint(v);
  constexpr double kLo = static_cast<double>(std::numeric_limits<T>::lowest());
  constexpr double kHi = static_cast<double>(std::numeric_limits<T>::max());
  if (r <= kLo) return std::numeric_limits<T>::lowest();
  if (r >= kHi) return std::numeric_limits<T>::max();
  return static_cast<T>(r);
}
}  // namespace

void store_element(void* data, DataType dtype, int64_t i, double v) {
  switch (dtype) {
    case DataType::kFloat32: static_cast<float*>(data)[i] = static_cast<float>(v); return;
    case DataType::kFloat16: static_cast<uint16_t*>(data)[i] = float_to_half_bits(static_cast<float>(v)); return;
    case DataType::kBFloat16: static_cast<uint16_t*>(data)[i] = float_to_bfloat16_bits(static_cast<float>(v)); return;
    case DataType::kInt8: static_cast<int8_t*>(data)[i] = saturate_to<int8_t>(v); return;
    case DataType::kUInt8: static_cast<uint8_t*>(data)[i] = saturate_to<uint8_t>(v); return;
    case DataType::kInt32: static_cast<int32_t*>(data)[i] = saturate_to<int32_t>(v); return;
    case DataType::kInt64: static_cast<int64_t*>(data)[i] = saturate_to<int64_t>(v); return;
    case DataType::kBool: static_cast<uint8_t*>(data)[i] = v != 0.0 ? 1 : 0; return;
    case DataType::kFp8E4M3: return;
    case DataType::kString: static_cast<int64_t*>(data)[i] = static_cast<int64_t>(v); return;  // an id
  }
}

}  // namespace kiln
