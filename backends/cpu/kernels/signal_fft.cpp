// FftPlan: radix-2, direct and Bluestein transforms (see signal_fft.hpp).
#include "backends/cpu/kernels/signal_fft.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>

namespace quilt::cpu {

namespace {

// Lengths up to this use the direct sum: cheaper than Bluestein's three FFTs of >= 2n points.
constexpr int64_t kDirectMax = 64;

// Plain complex product: std::complex's operator* checks for NaN/inf recovery, which the
// compiler cannot inline or vectorise.
inline Complex mul(Complex a, Complex b) {
  return {a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real()};
}

bool is_power_of_two(int64_t n) {
  return n > 0 && (n & (n - 1)) == 0;
}

// e^{-2 pi i num / den}, with the angle reduced exactly first so large indices lose no accuracy.
Complex unit_root(int64_t num, int64_t den) {
  num %= den;
  double angle = -2.0 * std::numbers::pi * static_cast<double>(num) / static_cast<double>(den);
  return {std::cos(angle), std::sin(angle)};
}

}  // namespace

FftPlan::FftPlan(int64_t n) : n_(n) {
  // Every table is allocated before any is filled, so that a length too large for memory fails
  // at once rather than after seconds of trigonometry.
  if (n <= 1) {
    kind_ = Kind::Trivial;
  } else if (is_power_of_two(n)) {
    kind_ = Kind::Radix2;
    twiddle_.resize(n / 2);
    bit_reverse_.resize(n);
    for (int64_t k = 0; k < n / 2; ++k) twiddle_[static_cast<size_t>(k)] = unit_root(k, n);
    int bits = 0;
    while ((int64_t{1} << bits) < n) ++bits;
    // rev(i) from rev(i / 2): shifted down one bit, i's lowest bit on top.
    bit_reverse_[0] = 0;
    for (int64_t i = 1; i < n; ++i)
      bit_reverse_[static_cast<size_t>(i)] =
          (bit_reverse_[static_cast<size_t>(i >> 1)] >> 1) | ((i & 1) << (bits - 1));
  } else if (n <= kDirectMax) {
    kind_ = Kind::Direct;
    twiddle_.resize(n);
    for (int64_t k = 0; k < n; ++k) twiddle_[static_cast<size_t>(k)] = unit_root(k, n);
  } else {
    kind_ = Kind::Bluestein;
    m_ = 1;
    while (m_ < 2 * n - 1) m_ *= 2;
    chirp_.resize(n);
    filter_fft_.resize(m_);  // zeros
    inner_ = std::make_unique<FftPlan>(m_);
    // k^2 / (2n) reduced modulo 1 exactly in integers: e^{-pi i k^2 / n} = unit_root(k^2, 2n).
    for (int64_t k = 0; k < n; ++k)
      chirp_[static_cast<size_t>(k)] = unit_root((k * k) % (2 * n), 2 * n);
    filter_fft_[0] = std::conj(chirp_[0]);
    for (int64_t k = 1; k < n; ++k) {
      filter_fft_[static_cast<size_t>(k)] = std::conj(chirp_[static_cast<size_t>(k)]);
      filter_fft_[static_cast<size_t>(m_ - k)] = std::conj(chirp_[static_cast<size_t>(k)]);
    }
    inner_->radix2(filter_fft_.data());
  }
}

void FftPlan::run(Complex* data, bool inverse, FftArray<Complex>& scratch) const {
  // The inverse transform is the conjugate of the forward transform of the conjugate.
  if (inverse)
    for (int64_t i = 0; i < n_; ++i) data[i] = std::conj(data[i]);
  forward(data, scratch);
  if (inverse)
    for (int64_t i = 0; i < n_; ++i) data[i] = std::conj(data[i]);
}

void FftPlan::forward(Complex* data, FftArray<Complex>& scratch) const {
  switch (kind_) {
    case Kind::Trivial:
      return;
    case Kind::Radix2:
      radix2(data);
      return;
    case Kind::Direct: {
      scratch.resize(n_);
      for (int64_t k = 0; k < n_; ++k) {
        Complex sum;
        int64_t index = 0;  // k * t mod n, advanced by k each step
        for (int64_t t = 0; t < n_; ++t) {
          sum += mul(data[t], twiddle_[static_cast<size_t>(index)]);
          index += k;
          if (index >= n_) index -= n_;
        }
        scratch[static_cast<size_t>(k)] = sum;
      }
      std::copy_n(scratch.data(), n_, data);
      return;
    }
    case Kind::Bluestein: {
      // X[k] = c[k] * sum_t (x[t] c[t]) conj(c[k - t]): a convolution done with FFTs of size m.
      scratch.resize(m_);
      std::fill_n(scratch.data(), m_, Complex());
      for (int64_t t = 0; t < n_; ++t)
        scratch[static_cast<size_t>(t)] = mul(data[t], chirp_[static_cast<size_t>(t)]);
      inner_->radix2(scratch.data());
      for (int64_t i = 0; i < m_; ++i)
        scratch[static_cast<size_t>(i)] =
            std::conj(mul(scratch[static_cast<size_t>(i)], filter_fft_[static_cast<size_t>(i)]));
      inner_->radix2(scratch.data());  // forward FFT of the conjugate = conjugated inverse
      const double scale = 1.0 / static_cast<double>(m_);
      for (int64_t k = 0; k < n_; ++k)
        data[k] =
            mul(std::conj(scratch[static_cast<size_t>(k)]) * scale, chirp_[static_cast<size_t>(k)]);
      return;
    }
  }
}

void FftPlan::radix2(Complex* data) const {
  for (int64_t i = 0; i < n_; ++i) {
    int64_t r = bit_reverse_[static_cast<size_t>(i)];
    if (i < r) std::swap(data[i], data[r]);
  }
  for (int64_t len = 2; len <= n_; len *= 2) {
    const int64_t half = len / 2;
    const int64_t stride = n_ / len;
    for (int64_t start = 0; start < n_; start += len) {
      for (int64_t j = 0; j < half; ++j) {
        Complex w = twiddle_[static_cast<size_t>(j * stride)];
        Complex a = data[start + j];
        Complex b = mul(data[start + j + half], w);
        data[start + j] = a + b;
        data[start + j + half] = a - b;
      }
    }
  }
}

std::shared_ptr<const FftPlan> FftPlanCache::get(int64_t n) const {
  {
    std::lock_guard lock(mutex_);
    auto it = plans_.find(n);
    if (it != plans_.end()) return it->second;
  }
  auto plan = std::make_shared<const FftPlan>(n);  // built outside the lock: may be slow
  std::lock_guard lock(mutex_);
  if (plans_.size() >= kMaxPlans) plans_.clear();  // lengths keep changing: do not grow
  plans_.emplace(n, plan);
  return plan;
}

}  // namespace quilt::cpu
