#pragma once
// Scalar definitions of every Unary op: the reference kernel, the CPU loops and the CUDA kernels share them.
#include <cmath>
#include <type_traits>

#include "kernels/common/elementwise_types.h"
#include "kernels/common/host_device.h"
#include "ops/unary/unary.h"

namespace kiln::ref {

/// Whether `Op` is defined for compute type T (float, integers, bool).
template <UnaryOp Op, class T>
KILN_HD constexpr bool unary_accepts() {
  if constexpr (std::is_same_v<T, bool>)
    return Op == UnaryOp::kNot;
  else if constexpr (std::is_floating_point_v<T>)
    return Op != UnaryOp::kNot;
  else if constexpr (std::is_signed_v<T>)
    return Op == UnaryOp::kAbs || Op == UnaryOp::kNeg || Op == UnaryOp::kSign;
  else
    return Op == UnaryOp::kAbs || Op == UnaryOp::kSign;
}

/// f(x); isnan/isinf/not give bool, the rest T.
template <UnaryOp Op, class T>
KILN_HD inline auto unary(T x, bool detect_positive = true, bool detect_negative = true) {
  using O = UnaryOp;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    const T neg = static_cast<T>(static_cast<U>(U(0) - static_cast<U>(x)));  // wraps for the minimum
    if constexpr (Op == O::kAbs) {
      if constexpr (std::is_signed_v<T>)
        return x < 0 ? neg : x;
      else
        return x;
    } else if constexpr (Op == O::kNeg) {
      return neg;
    } else if constexpr (std::is_signed_v<T>) {
      return static_cast<T>(x > 0 ? 1 : (x < 0 ? -1 : 0));
    } else {
      return static_cast<T>(x > 0 ? 1 : 0);
    }
  } else if constexpr (Op == O::kNot) {
    return bool(!x);
  } else if constexpr (Op == O::kIsNan) {
    return bool(std::isnan(x));
  } else if constexpr (Op == O::kIsInf) {
    return bool((detect_positive && x == INFINITY) || (detect_negative && x == -INFINITY));
  } else if constexpr (Op == O::kExp) {
    return std::exp(x);
  } else if constexpr (Op == O::kLog) {
    return std::log(x);
  } else if constexpr (Op == O::kSqrt) {
    return std::sqrt(x);
  } else if constexpr (Op == O::kReciprocal) {
    return T(1) / x;
  } else if constexpr (Op == O::kAbs) {
    return std::fabs(x);
  } else if constexpr (Op == O::kNeg) {
    return -x;
  } else if constexpr (Op == O::kFloor) {
    return std::floor(x);
  } else if constexpr (Op == O::kCeil) {
    return std::ceil(x);
  } else if constexpr (Op == O::kRound) {
    return std::nearbyint(x);  // default rounding mode: half to even
  } else if constexpr (Op == O::kSign) {
    return x > 0 ? T(1) : (x < 0 ? T(-1) : x);  // keeps 0, -0 and NaN
  } else if constexpr (Op == O::kErf) {
    return std::erf(x);
  } else if constexpr (Op == O::kSin) {
    return std::sin(x);
  } else if constexpr (Op == O::kCos) {
    return std::cos(x);
  } else if constexpr (Op == O::kTan) {
    return std::tan(x);
  } else if constexpr (Op == O::kAsin) {
    return std::asin(x);
  } else if constexpr (Op == O::kAcos) {
    return std::acos(x);
  } else if constexpr (Op == O::kAtan) {
    return std::atan(x);
  } else if constexpr (Op == O::kSinh) {
    return std::sinh(x);
  } else if constexpr (Op == O::kCosh) {
    return std::cosh(x);
  } else if constexpr (Op == O::kAsinh) {
    return std::asinh(x);
  } else if constexpr (Op == O::kAcosh) {
    return std::acosh(x);
  } else {
    return std::atanh(x);
  }
}

/// Calls f(std::integral_constant<UnaryOp, op>{}) for a runtime op; false when out of range.
KILN_NO_EXEC_CHECK
template <class F>
KILN_HD bool dispatch_unary_op(UnaryOp op, F&& f) {
  using O = UnaryOp;
#define KILN_UNARY_CASE(x) \
  case O::x: f(std::integral_constant<O, O::x>{}); return true;
  switch (op) {
    KILN_UNARY_CASE(kExp)
    KILN_UNARY_CASE(kLog)
    KILN_UNARY_CASE(kSqrt)
    KILN_UNARY_CASE(kReciprocal)
    KILN_UNARY_CASE(kAbs)
    KILN_UNARY_CASE(kNeg)
    KILN_UNARY_CASE(kFloor)
    KILN_UNARY_CASE(kCeil)
    KILN_UNARY_CASE(kRound)
    KILN_UNARY_CASE(kSign)
    KILN_UNARY_CASE(kErf)
    KILN_UNARY_CASE(kSin)
    KILN_UNARY_CASE(kCos)
    KILN_UNARY_CASE(kTan)
    KILN_UNARY_CASE(kAsin)
    KILN_UNARY_CASE(kAcos)
    KILN_UNARY_CASE(kAtan)
    KILN_UNARY_CASE(kSinh)
    KILN_UNARY_CASE(kCosh)
    KILN_UNARY_CASE(kAsinh)
    KILN_UNARY_CASE(kAcosh)
    KILN_UNARY_CASE(kAtanh)
    KILN_UNARY_CASE(kNot)
    KILN_UNARY_CASE(kIsNan)
    KILN_UNARY_CASE(kIsInf)
  }
#undef KILN_UNARY_CASE
  return false;
}

}  // namespace kiln::ref
