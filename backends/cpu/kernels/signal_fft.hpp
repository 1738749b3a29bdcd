// Discrete Fourier transforms of one complex line, shared by the DFT and STFT kernels.
//
// FftPlan(n) precomputes twiddles once per length; run() then transforms any number of lines
// (from several threads at once: a plan is immutable after construction).
//
//   FftPlan plan(n);
//   std::vector<std::complex<double>> scratch;
//   plan.run(line.data(), /*inverse=*/false, scratch);  // line has n values, transformed in place
//
// Power-of-two lengths use an iterative radix-2 FFT. Other lengths use a direct O(n^2) sum
// when short (exact twiddle indexing keeps it as accurate as the FFT) and Bluestein's chirp-z
// algorithm on a power-of-two FFT when long. All arithmetic is in double.
#pragma once

#include <complex>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace quilt::cpu {

using Complex = std::complex<double>;

class FftPlan {
 public:
  explicit FftPlan(int64_t n);
  int64_t size() const { return n_; }
  // Transforms data[0..n) in place: y[k] = sum_t x[t] e^{-+2 pi i k t / n} (minus sign forward,
  // plus sign inverse), unscaled. scratch is resized as needed and may be reused across calls.
  void run(Complex* data, bool inverse, std::vector<Complex>& scratch) const;

 private:
  enum class Kind { Trivial, Radix2, Direct, Bluestein };
  void forward(Complex* data, std::vector<Complex>& scratch) const;
  void radix2(Complex* data) const;

  int64_t n_;
  Kind kind_;
  std::vector<Complex> twiddle_;  // e^{-2 pi i k / n}: k < n/2 (radix-2) or k < n (direct)
  std::vector<int64_t> bit_reverse_;
  // Bluestein: chirp_[k] = e^{-pi i k^2 / n}, and the FFT (length m_) of its conjugate filter.
  std::unique_ptr<FftPlan> inner_;
  int64_t m_ = 0;
  std::vector<Complex> chirp_;
  std::vector<Complex> filter_fft_;
};

// Plans by length for the runs of one kernel: the length rarely changes between runs, and a
// plan costs O(n) trigonometry (more for Bluestein) to build. Thread-safe.
class FftPlanCache {
 public:
  std::shared_ptr<const FftPlan> get(int64_t n) const;

 private:
  static constexpr size_t kMaxPlans = 8;
  mutable std::mutex mutex_;
  mutable std::map<int64_t, std::shared_ptr<const FftPlan>> plans_;
};

}  // namespace quilt::cpu
