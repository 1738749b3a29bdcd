// A vector that keeps its first N elements inline and only allocates beyond them: for the
// per-call bookkeeping of kernels on small tensors (a broadcast plan's dims and strides), where
// std::vector's allocations cost more than the arithmetic.
//
//   InlineVector<int64_t, 8> dims;  dims.push_back(3);  dims.resize(r, 0);  dims[0] *= 2;
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace quilt::cpu {

template <class T, size_t N>
class InlineVector {
 public:
  InlineVector() = default;
  InlineVector(size_t n, const T& value) { resize(n, value); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return heap_.empty() ? inline_ : heap_.data(); }
  const T* data() const { return heap_.empty() ? inline_ : heap_.data(); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }

  void push_back(const T& value) {
    if (size_ == N && heap_.empty()) heap_.assign(inline_, inline_ + N);
    if (!heap_.empty())
      heap_.push_back(value);
    else
      inline_[size_] = value;
    ++size_;
  }
  void resize(size_t n, const T& value) {
    if (n > N || !heap_.empty()) {
      if (heap_.empty()) heap_.assign(inline_, inline_ + std::min(size_, N));
      heap_.resize(n, value);
    } else {
      for (size_t i = size_; i < n && i < N; ++i) inline_[i] = value;
    }
    size_ = n;
  }
  void assign(size_t n, const T& value) {
    size_ = 0;
    heap_.clear();
    resize(n, value);
  }

 private:
  T inline_[N] = {};
  std::vector<T> heap_;  // all elements, once there are more than N
  size_t size_ = 0;
};

}  // namespace quilt::cpu
