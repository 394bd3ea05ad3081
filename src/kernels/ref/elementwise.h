#pragma once
// Scalar definitions of ElementWise and Cast: the reference kernels and the CPU loops share them.
// Arguments are compute types (float, the integer types, bool); see kernels/common/elementwise_types.h.
// KILN_HD: the CUDA kernels share them too.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/common/elementwise_types.h"
#include "kernels/common/host_device.h"
#include "ops/elementwise/elementwise.h"

namespace kiln::ref {

// ---- Cast -------------------------------------------------------------------------------------

/// Float -> int64 truncating toward zero; NaN, infinities and |x| >= 2^63 give INT64_MIN.
KILN_HD inline int64_t truncate_to_int64(double x) {
  if (!(std::fabs(x) < 9223372036854775808.0)) return INT64_MIN;
  return static_cast<int64_t>(x);
}

/// Cast of one value between compute types CD and CS (float, the integers, bool): the rules in CastAttrs.
template <class CD, class CS>
KILN_HD inline CD cast_value(CS v) {
  if constexpr (std::is_same_v<CD, bool>) {
    return v != CS(0);
  } else if constexpr (std::is_same_v<CS, bool>) {
    return CD(v ? 1 : 0);
  } else if constexpr (std::is_floating_point_v<CD>) {
    return static_cast<float>(v);
  } else if constexpr (std::is_floating_point_v<CS>) {
    return static_cast<CD>(truncate_to_int64(v));  // C++20: integer narrowing wraps
  } else {
    return static_cast<CD>(v);
  }
}

/// One element of Cast from storage type S to storage type D (float16/bfloat16 through float).
template <class D, class S>
inline D cast_element(S s) {
  return ew::store<D>(cast_value<ew::compute_t<D>>(ew::load(s)));
}

// ---- integer helpers (no undefined behaviour: overflow wraps, x / 0 and x % 0 give 0) ----------

template <class T>
KILN_HD inline T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <class T>
KILN_HD inline T wrap_sub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
}
template <class T>
KILN_HD inline T wrap_mul(T a, T b) {
  using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
}
template <class T>
KILN_HD inline T int_div(T a, T b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<T>)
    if (b == -1) return wrap_sub<T>(0, a);
  return static_cast<T>(a / b);
}
template <class T>
KILN_HD inline T int_mod(T a, T b, bool fmod) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return 0;
    T r = static_cast<T>(a % b);
    if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
    return r;
  } else {
    return static_cast<T>(a % b);
  }
}
/// base ^ exponent for integers; negative exponents give 1 / base^-e truncated (0 unless |base| == 1).
template <class T, class E>
KILN_HD inline T int_pow(T base, E e) {
  if constexpr (std::is_signed_v<E>) {
    if (e < 0) {
      if (base == 1) return 1;
      if constexpr (std::is_signed_v<T>)
        if (base == -1) return (e % 2) ? T(-1) : T(1);
      return 0;
    }
  }
  T r = 1;
  while (e > 0) {
    if (e & 1) r = wrap_mul(r, base);
    base = wrap_mul(base, base);
    e = static_cast<E>(e >> 1);
  }
  return r;
}

// ---- ElementWise ------------------------------------------------------------------------------

/// Whether `Op` is defined for compute type T (and exponent type E for pow).
template <ElementWiseOp Op, class T, class E = T>
KILN_HD constexpr bool op_accepts() {
  constexpr bool b = std::is_same_v<T, bool>;
  constexpr bool f = std::is_floating_point_v<T>;
  switch (Op) {
    case ElementWiseOp::kAnd:
    case ElementWiseOp::kOr:
    case ElementWiseOp::kXor: return b;
    case ElementWiseOp::kEqual: return true;
    case ElementWiseOp::kBitShiftLeft:
    case ElementWiseOp::kBitShiftRight: return std::is_unsigned_v<T> && !b;
    case ElementWiseOp::kPow: return !b && !std::is_same_v<E, bool> && (f || sizeof(T) >= 4);
    default: return !b;
  }
}

/// a <Op> b for compute types; comparisons and logic give bool, the rest T.
template <ElementWiseOp Op, class T, class E = T>
KILN_HD inline auto binary(T a, E b, bool fmod) {
  constexpr bool f = std::is_floating_point_v<T>;
  using O = ElementWiseOp;
  if constexpr (Op == O::kSum) {
    if constexpr (f)
      return T(a + b);
    else
      return wrap_add(a, b);
  } else if constexpr (Op == O::kSub) {
    if constexpr (f)
      return T(a - b);
    else
      return wrap_sub(a, b);
  } else if constexpr (Op == O::kProd) {
    if constexpr (f)
      return T(a * b);
    else
      return wrap_mul(a, b);
  } else if constexpr (Op == O::kDiv) {
    if constexpr (f)
      return T(a / b);
    else
      return int_div(a, b);
  } else if constexpr (Op == O::kMax) {
    if constexpr (f)
      return (std::isnan(a) || std::isnan(b)) ? a + b : (a < b ? b : a);
    else
      return a < b ? b : a;
  } else if constexpr (Op == O::kMin) {
    if constexpr (f)
      return (std::isnan(a) || std::isnan(b)) ? a + b : (b < a ? b : a);
    else
      return b < a ? b : a;
  } else if constexpr (Op == O::kPow) {
    if constexpr (f)
      return T(std::pow(a, static_cast<T>(b)));
    else if constexpr (std::is_floating_point_v<E>)
      return static_cast<T>(truncate_to_int64(std::pow(static_cast<double>(a), static_cast<double>(b))));
    else
      return int_pow(a, b);
  } else if constexpr (Op == O::kMod) {
    if constexpr (f)
      return T(std::fmod(a, b));
    else
      return int_mod(a, b, fmod);
  } else if constexpr (Op == O::kAnd) {
    return bool(a && b);
  } else if constexpr (Op == O::kOr) {
    return bool(a || b);
  } else if constexpr (Op == O::kXor) {
    return bool(a != b);
  } else if constexpr (Op == O::kEqual) {
    return bool(a == b);
  } else if constexpr (Op == O::kLess) {
    return bool(a < b);
  } else if constexpr (Op == O::kLessOrEqual) {
    return bool(a <= b);
  } else if constexpr (Op == O::kGreater) {
    return bool(a > b);
  } else if constexpr (Op == O::kGreaterOrEqual) {
    return bool(a >= b);
  } else if constexpr (Op == O::kBitShiftLeft) {
    return b >= E(sizeof(T) * 8) ? T(0) : static_cast<T>(a << b);
  } else {
    return b >= E(sizeof(T) * 8) ? T(0) : static_cast<T>(a >> b);
  }
}

/// Calls f(std::integral_constant<ElementWiseOp, op>{}) for a runtime op; false when out of range.
KILN_NO_EXEC_CHECK
template <class F>
KILN_HD bool dispatch_op(ElementWiseOp op, F&& f) {
  using O = ElementWiseOp;
#define KILN_EW_CASE(x) \
  case O::x: f(std::integral_constant<O, O::x>{}); return true;
  switch (op) {
    KILN_EW_CASE(kSum)
    KILN_EW_CASE(kSub)
    KILN_EW_CASE(kProd)
    KILN_EW_CASE(kDiv)
    KILN_EW_CASE(kMax)
    KILN_EW_CASE(kMin)
    KILN_EW_CASE(kPow)
    KILN_EW_CASE(kMod)
    KILN_EW_CASE(kAnd)
    KILN_EW_CASE(kOr)
    KILN_EW_CASE(kXor)
    KILN_EW_CASE(kEqual)
    KILN_EW_CASE(kLess)
    KILN_EW_CASE(kLessOrEqual)
    KILN_EW_CASE(kGreater)
    KILN_EW_CASE(kGreaterOrEqual)
    KILN_EW_CASE(kBitShiftLeft)
    KILN_EW_CASE(kBitShiftRight)
  }
#undef KILN_EW_CASE
  return false;
}

}  // namespace kiln::ref
