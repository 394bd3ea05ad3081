// CPU DFT, STFT and MelWeightMatrix: FFTs in double, lines in parallel.
#include <cmath>
#include <map>
#include <mutex>

#include "core/parallel.h"
#include "kernels/cpu/signal_fft.h"
#include "kernels/ref/signal.h"

namespace kiln {
namespace signal {

namespace {
constexpr double kPi = 3.14159265358979323846264338327950288;

int64_t next_pow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}
}  // namespace

FftPlan::FftPlan(int64_t n) : n_(n) {
  bluestein_ = (n & (n - 1)) != 0;
  m_ = bluestein_ ? next_pow2(2 * n - 1) : n;
  twiddles_.resize(static_cast<size_t>(m_ / 2));
  for (int64_t k = 0; k < m_ / 2; ++k) twiddles_[k] = std::polar(1.0, -2.0 * kPi * static_cast<double>(k) / m_);
  bitrev_.resize(static_cast<size_t>(m_));
  int bits = 0;
  while ((int64_t{1} << bits) < m_) ++bits;
  for (int64_t i = 0; i < m_; ++i) {
    int64_t r = 0;
    for (int b = 0; b < bits; ++b) r |= ((i >> b) & 1) << (bits - 1 - b);
    bitrev_[i] = r;
  }
  if (!bluestein_) return;
  chirp_.resize(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    const int64_t k2 = (k * k) % (2 * n);  // exact angle: exp(-i pi k^2 / n) has period 2n in k^2
    chirp_[k] = std::polar(1.0, -kPi * static_cast<double>(k2) / static_cast<double>(n));
  }
  chirp_fft_.assign(static_cast<size_t>(m_), {0.0, 0.0});
  chirp_fft_[0] = std::conj(chirp_[0]);
  for (int64_t k = 1; k < n; ++k) chirp_fft_[k] = chirp_fft_[m_ - k] = std::conj(chirp_[k]);
  radix2(chirp_fft_.data(), m_, twiddles_, false);
}

void FftPlan::radix2(std::complex<double>* a, int64_t m, const std::vector<std::complex<double>>& tw,
                     bool inverse) const {
  for (int64_t i = 0; i < m; ++i)
    if (i < bitrev_[i]) std::swap(a[i], a[bitrev_[i]]);
  for (int64_t len = 2; len <= m; len <<= 1) {
    const int64_t half = len / 2, step = m / len;
    for (int64_t s = 0; s < m; s += len)
      for (int64_t j = 0; j < half; ++j) {
        const std::complex<double> w = inverse ? std::conj(tw[j * step]) : tw[j * step];
        const std::complex<double> u = a[s + j], v = a[s + j + half] * w;
        a[s + j] = u + v;
        a[s + j + half] = u - v;
      }
  }
}

void FftPlan::transform(std::complex<double>* data, bool inverse, std::complex<double>* scratch) const {
  if (!bluestein_) {
    radix2(data, m_, twiddles_, inverse);
    return;
  }
  // The inverse is the conjugate of the forward transform of the conjugate.
  if (inverse)
    for (int64_t k = 0; k < n_; ++k) data[k] = std::conj(data[k]);
  for (int64_t k = 0; k < m_; ++k) scratch[k] = k < n_ ? data[k] * chirp_[k] : std::complex<double>();
  radix2(scratch, m_, twiddles_, false);
  for (int64_t k = 0; k < m_; ++k) scratch[k] *= chirp_fft_[k];
  radix2(scratch, m_, twiddles_, true);
  const double inv_m = 1.0 / static_cast<double>(m_);
  for (int64_t k = 0; k < n_; ++k) {
    data[k] = scratch[k] * inv_m * chirp_[k];
    if (inverse) data[k] = std::conj(data[k]);
  }
}

}  // namespace signal

namespace {

using Complex = std::complex<double>;

// Plans cached by length; a kernel instance may see several lengths (dynamic dft_length).
class PlanCache {
 public:
  const signal::FftPlan& get(int64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(n);
    if (it == plans_.end()) it = plans_.emplace(n, std::make_unique<signal::FftPlan>(n)).first;
    return *it->second;
  }

 private:
  std::mutex mu_;
  std::map<int64_t, std::unique_ptr<signal::FftPlan>> plans_;
};

class CpuDft final : public Kernel {
 public:
  Status run(KernelContext& ctx) override {
    KILN_ASSIGN_OR_RETURN(DftShape s, signal::dft_problem(ctx));
    const bool inverse = ctx.attrs<DftAttrs>().inverse;
    const signal::FftPlan& plan = plans_.get(s.n);
    const float* x = ctx.src[0].data<float>();
    float* y = ctx.dst[0].data<float>();
    const int64_t used = std::min(s.length, s.n), in_stride = s.inner * s.components, out_stride = s.inner * 2;
    const double scale = inverse ? 1.0 / static_cast<double>(s.n) : 1.0;
    parallel_for(s.outer * s.inner, 1, [&](int64_t line) {
      const int64_t o = line / s.inner, i = line % s.inner;
      std::vector<Complex> buf(static_cast<size_t>(s.n)), scratch(static_cast<size_t>(plan.scratch_size()));
      const float* src = x + (o * s.length * s.inner + i) * s.components;
      for (int64_t j = 0; j < used; ++j)
        buf[j] = Complex(src[j * in_stride], s.components == 2 ? src[j * in_stride + 1] : 0.f);
      plan.transform(buf.data(), inverse, scratch.data());
      float* dst = y + (o * s.bins * s.inner + i) * 2;
      for (int64_t k = 0; k < s.bins; ++k) {
        dst[k * out_stride] = static_cast<float>(buf[k].real() * scale);
        dst[k * out_stride + 1] = static_cast<float>(buf[k].imag() * scale);
      }
    });
    return Status::ok();
  }

 private:
  PlanCache plans_;
};

class CpuStft final : public Kernel {
 public:
  Status run(KernelContext& ctx) override {
    KILN_ASSIGN_OR_RETURN(StftShape s, signal::stft_problem(ctx));
    const signal::FftPlan& plan = plans_.get(s.frame_length);
    const float* x = ctx.src[0].data<float>();
    const float* window = ctx.src.size() > 2 && ctx.src[2].defined() ? ctx.src[2].data<float>() : nullptr;
    float* y = ctx.dst[0].data<float>();
    parallel_for(s.batch * s.frames, 1, [&](int64_t bf) {
      const int64_t b = bf / s.frames, f = bf % s.frames;
      std::vector<Complex> buf(static_cast<size_t>(s.frame_length)), scratch(static_cast<size_t>(plan.scratch_size()));
      const float* src = x + (b * s.length + f * s.frame_step) * s.components;
      for (int64_t j = 0; j < s.frame_length; ++j) {
        const double w = window ? window[j] : 1.0;
        buf[j] = Complex(src[j * s.components] * w, s.components == 2 ? src[j * s.components + 1] * w : 0.0);
      }
      plan.transform(buf.data(), false, scratch.data());
      float* dst = y + bf * s.bins * 2;
      for (int64_t k = 0; k < s.bins; ++k) {
        dst[2 * k] = static_cast<float>(buf[k].real());
        dst[2 * k + 1] = static_cast<float>(buf[k].imag());
      }
    });
    return Status::ok();
  }

 private:
  PlanCache plans_;
};

Status run_mel(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(std::vector<double> m,
                        signal::mel_weight_matrix(tensor_to_int64s(ctx.src[0])[0], tensor_to_int64s(ctx.src[1])[0],
                                                  tensor_to_int64s(ctx.src[2])[0], ctx.src[3].at(0), ctx.src[4].at(0)));
  Tensor& y = ctx.dst[0];
  if (static_cast<int64_t>(m.size()) != y.numel())
    return internal_error("MelWeightMatrix output has ", y.numel(), " elements, expected ", m.size());
  if (y.dtype() == DataType::kFloat32) {
    float* dst = y.data<float>();
    parallel_for(y.numel(), 1 << 14, [&](int64_t i) { dst[i] = static_cast<float>(m[i]); });
  } else {
    for (int64_t i = 0; i < y.numel(); ++i) y.set(i, m[i]);
  }
  return Status::ok();
}

Status float32_only(const OpCall& call) {
  for (const TensorDesc& t : call.inputs)
    if (t.present && is_floating(t.dtype) && t.dtype != DataType::kFloat32)
      return unsupported("the CPU kernel computes float32 signals, got ", dtype_name(t.dtype));
  return Status::ok();
}

template <class K>
CreateFn make() {
  return
      [](const OpCall&) -> Result<std::unique_ptr<Kernel>> { return std::unique_ptr<Kernel>(std::make_unique<K>()); };
}

KILN_REGISTER_KERNEL(KernelImpl{.name = "cpu.fft.dft",
                                .op = "DFT",
                                .backend = Backend::kCpu,
                                .priority = 10,
                                .supports = float32_only,
                                .create = make<CpuDft>()});
KILN_REGISTER_KERNEL(KernelImpl{.name = "cpu.fft.stft",
                                .op = "STFT",
                                .backend = Backend::kCpu,
                                .priority = 10,
                                .supports = float32_only,
                                .create = make<CpuStft>()});
KILN_REGISTER_KERNEL(KernelImpl{.name = "cpu.mel_weight_matrix",
                                .op = "MelWeightMatrix",
                                .backend = Backend::kCpu,
                                .priority = 10,
                                .supports = [](const OpCall&) { return Status::ok(); },
                                .create = stateless(run_mel)});

}  // namespace
}  // namespace kiln
