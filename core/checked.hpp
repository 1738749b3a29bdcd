// Checked int64 arithmetic for shape and size computations: dims, element counts, byte sizes,
// window sizes from pads/strides/dilations, offsets. Hostile attributes or shapes must give a
// clear error, never signed overflow (undefined behaviour that happened to give an error or not).
//
//   const Checked c(ctx.node(), "output size");
//   const int64_t dk = c.add(c.mul(kernel - 1, dilation), 1);
//   // on overflow: Error `[Conv node "c"] output size overflows int64: 4611686018427387904 * 4`
//
// The arithmetic is inline (one add/mul and a branch never taken); only the failure is not.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "quilt/quilt.hpp"

namespace quilt {

struct Node;

class Checked {
 public:
  // An overflow fails through node.fail(), with `code`. `what` names the computed quantity
  // (a literal: it is kept as a view).
  Checked(const Node& node, std::string_view what, ErrorCode code = ErrorCode::InvalidModel)
      : node_(&node), what_(what), code_(code) {}
  // Without a node: the message starts with where() (e.g. "tensor of shape [..]"), which is
  // called only on failure.
  Checked(std::function<std::string()> where, std::string_view what, ErrorCode code)
      : where_(std::move(where)), what_(what), code_(code) {}

  int64_t add(int64_t a, int64_t b) const {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) [[unlikely]]
      overflow(a, " + ", b);
    return r;
  }
  int64_t sub(int64_t a, int64_t b) const {
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r)) [[unlikely]]
      overflow(a, " - ", b);
    return r;
  }
  int64_t mul(int64_t a, int64_t b) const {
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) [[unlikely]]
      overflow(a, " * ", b);
    return r;
  }
  // The product of dims (known, >= 0); 0 when one is 0, however large the others.
  int64_t product(std::span<const int64_t> dims) const;
  // Sum and product of dims that may be unknown (-1): unknown when either is.
  int64_t add_dims(int64_t a, int64_t b) const { return a < 0 || b < 0 ? -1 : add(a, b); }
  int64_t mul_dims(int64_t a, int64_t b) const { return a < 0 || b < 0 ? -1 : mul(a, b); }
  // v truncated toward zero; fails when that is not an int64 (too large, infinite or NaN).
  int64_t to_int64(double v) const;

 private:
  [[noreturn]] void overflow(int64_t a, const char* op, int64_t b) const;
  [[noreturn]] void fail(const std::string& what) const;

  const Node* node_ = nullptr;
  std::function<std::string()> where_;
  std::string_view what_;
  ErrorCode code_;
};

// a - b, saturated at int64's bounds.
constexpr int64_t saturating_sub(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) return b < 0 ? INT64_MAX : INT64_MIN;
  return r;
}

// a / b rounded up for b > 0, and 0 when a <= 0: (a - 1) / b + 1, where (a + b - 1) / b
// overflows for large strides or dilations (fuzz_run: MaxPool with a stride of 2^63 - 1).
constexpr int64_t ceil_div_positive(int64_t a, int64_t b) {
  return a <= 0 ? 0 : (a - 1) / b + 1;
}

// Index k of an axis of size n (negative: from the end), checked: an index outside [-n, n - 1]
// fails through node.fail() (InvalidArgument) naming it and the range. Gather's kernels, on the
// CPU and on the host (strings), share it.
int64_t checked_index(const Node& node, int64_t k, int64_t n);

}  // namespace quilt
