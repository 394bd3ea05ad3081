#pragma once
// One row of SoftmaxBackward / LogSoftmaxBackward (double sums), shared by the reference and CPU kernels.
#include <cmath>
#include <cstdint>

namespace kiln::ref {

/// Row `base` (elements base + j * inner, j < size): softmax dx = y * (dy - sum(dy * y)); log-softmax
/// dx = dy - exp(y) * sum(dy).
template <bool kLog>
void softmax_backward_row(const float* dy, const float* y, float* dx, int64_t base, int64_t size, int64_t inner) {
  double sum = 0;
  for (int64_t j = 0; j < size; ++j) {
    const int64_t i = base + j * inner;
    sum += kLog ? static_cast<double>(dy[i]) : static_cast<double>(dy[i]) * y[i];
  }
  for (int64_t j = 0; j < size; ++j) {
    const int64_t i = base + j * inner;
    dx[i] = kLog ? static_cast<float>(dy[i] - std::exp(static_cast<double>(y[i])) * sum)
                 : static_cast<float>(y[i] * (dy[i] - sum));
  }
}

}  // namespace kiln::ref
