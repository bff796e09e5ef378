#include "data/zipf_sampler.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace ferry {
namespace {

// log1p(x) / x, continuous at 0.
double Helper1(double x) {
  return std::abs(x) > 1e-8 ? std::log1p(x) / x
                            : 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}

// expm1(x) / x, continuous at 0.
double Helper2(double x) {
  return std::abs(x) > 1e-8
             ? std::expm1(x) / x
             : 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x));
}

}  // namespace

double CounterRng::Normal() {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  const double u1 = 1.0 - Uniform();  // (0, 1]
  const double u2 = Uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

absl::StatusOr<ZipfSampler> ZipfSampler::Create(int64_t n, double exponent) {
  if (n < 1 || !(exponent > 0.0) || !std::isfinite(exponent)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Zipf: need n >= 1 and a finite exponent > 0, got n = %d, "
        "exponent = %g",
        n, exponent));
  }
  return ZipfSampler(n, exponent);
}

ZipfSampler::ZipfSampler(int64_t n, double exponent)
    : n_(n), exponent_(exponent) {
  h_integral_x1_ = HIntegral(1.5) - 1.0;
  h_integral_n_ = HIntegral(static_cast<double>(n) + 0.5);
  s_ = 2.0 - HIntegralInverse(HIntegral(2.5) - H(2.0));
}

// h(x) = x^-exponent.
double ZipfSampler::H(double x) const {
  return std::exp(-exponent_ * std::log(x));
}

// The integral of h from 1 to x (a shifted antiderivative).
double ZipfSampler::HIntegral(double x) const {
  const double log_x = std::log(x);
  return Helper2((1.0 - exponent_) * log_x) * log_x;
}

double ZipfSampler::HIntegralInverse(double x) const {
  double t = x * (1.0 - exponent_);
  if (t < -1.0) t = -1.0;  // numerical guard, as in the reference
  return std::exp(Helper1(t) * x);
}

int64_t ZipfSampler::Sample(CounterRng& rng) const {
  while (true) {
    const double u =
        h_integral_n_ + rng.Uniform() * (h_integral_x1_ - h_integral_n_);
    const double x = HIntegralInverse(u);
    int64_t k = static_cast<int64_t>(x + 0.5);
    if (k < 1) {
      k = 1;
    } else if (k > n_) {
      k = n_;
    }
    if (static_cast<double>(k) - x <= s_ ||
        u >= HIntegral(static_cast<double>(k) + 0.5) -
                 H(static_cast<double>(k))) {
      return k;
    }
  }
}

}  // namespace ferry
