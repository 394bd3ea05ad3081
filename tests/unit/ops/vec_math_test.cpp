// The CPU kernels' branch-free math (kernels/cpu/vec_math.h) against the C library: exp, log, erf and the erf GELU.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/vec_math.h"

namespace kiln::cpu {
namespace {

TEST(VecMath, ErfIsWithinSixTenMillionthsOfTheLibrary) {
  double worst = 0;
  for (int i = -80000; i <= 80000; ++i) {
    const float x = static_cast<float>(i) * 1e-4f;  // [-8, 8]
    worst = std::max(worst, std::fabs(static_cast<double>(erf_approx(x)) - std::erf(static_cast<double>(x))));
  }
  EXPECT_LE(worst, 6e-7);
  EXPECT_EQ(erf_approx(0.f), 0.f);
  EXPECT_FLOAT_EQ(erf_approx(30.f), 1.f);
  EXPECT_FLOAT_EQ(erf_approx(-30.f), -1.f);
}

TEST(VecMath, GeluErfInPlaceMatchesTheFormula) {
  std::vector<float> y;
  for (int i = -2000; i <= 2000; ++i) y.push_back(static_cast<float>(i) * 5e-3f);  // [-10, 10]
  const std::vector<float> x = y;
  gelu_erf_in_place(y.data(), static_cast<int64_t>(y.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0)));
    EXPECT_NEAR(y[i], want, 1e-6 * std::max(1.0, std::fabs(static_cast<double>(x[i])))) << "x = " << x[i];
  }
}

TEST(VecMath, ExpAndLogAreWithinAFewUlp) {
  for (int i = -800; i <= 800; ++i) {
    const float x = static_cast<float>(i) * 0.1f;
    EXPECT_NEAR(exp_approx(x) / std::exp(static_cast<double>(x)), 1.0, 2e-6) << "x = " << x;
  }
  for (int i = 1; i <= 1000; ++i) {
    const float x = static_cast<float>(i) * 0.37f;
    EXPECT_NEAR(log_approx(x), std::log(static_cast<double>(x)),
                2e-6 * std::max(1.0, std::fabs(std::log(static_cast<double>(x)))))
        << "x = " << x;
  }
}

}  // namespace
}  // namespace kiln::cpu
