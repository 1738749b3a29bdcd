// Discrete Fourier transforms of one complex line, shared by the DFT and STFT kernels.
//
// FftPlan(n) precomputes twiddles once per length; run() then transforms any number of lines
// (from several threads at once: a plan is immutable after construction).
//
//   FftPlan plan(n);
//   FftArray<Complex> scratch;
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
#include <new>
#include <string>
#include <vector>

#include "quilt/quilt.hpp"

namespace quilt::cpu {

using Complex = std::complex<double>;

// An array for the transforms' tables and lines, value-initialised (zeros), allocated without
// throwing: what the machine cannot give (or a sanitizer's allocation cap refuses) is
// Error(OutOfMemory) with the bytes asked for. A std::vector ended the process instead under
// AddressSanitizer: fuzz_run's DFT with dft_length 2^23 + 1, whose Bluestein tables take 512 MiB
// for a 64 MiB output.
template <class T>
class FftArray {
 public:
  FftArray() = default;
  explicit FftArray(int64_t n) { resize(n); }
  // n elements; zeros when it had to grow, else what it held.
  void resize(int64_t n) {
    if (static_cast<size_t>(n) > capacity_) {
      T* p = new (std::nothrow) T[static_cast<size_t>(n)]();
      if (!p)
        throw Error(ErrorCode::OutOfMemory,
                    "out of memory: a Fourier transform's tables need " +
                        std::to_string(static_cast<uint64_t>(n) * sizeof(T)) + " bytes");
      data_.reset(p);
      capacity_ = static_cast<size_t>(n);
    }
    size_ = static_cast<size_t>(n);
  }
  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  size_t size() const { return size_; }

 private:
  std::unique_ptr<T[]> data_;
  size_t size_ = 0, capacity_ = 0;
};

class FftPlan {
 public:
  explicit FftPlan(int64_t n);
  int64_t size() const { return n_; }
  // Transforms data[0..n) in place: y[k] = sum_t x[t] e^{-+2 pi i k t / n} (minus sign forward,
  // plus sign inverse), unscaled. scratch is resized as needed and may be reused across calls.
  void run(Complex* data, bool inverse, FftArray<Complex>& scratch) const;

 private:
  enum class Kind { Trivial, Radix2, Direct, Bluestein };
  void forward(Complex* data, FftArray<Complex>& scratch) const;
  void radix2(Complex* data) const;

  int64_t n_;
  Kind kind_;
  FftArray<Complex> twiddle_;  // e^{-2 pi i k / n}: k < n/2 (radix-2) or k < n (direct)
  FftArray<int64_t> bit_reverse_;
  // Bluestein: chirp_[k] = e^{-pi i k^2 / n}, and the FFT (length m_) of its conjugate filter.
  std::unique_ptr<FftPlan> inner_;
  int64_t m_ = 0;
  FftArray<Complex> chirp_;
  FftArray<Complex> filter_fft_;
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
