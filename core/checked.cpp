// The failure path of Checked (core/checked.hpp).
#include "core/checked.hpp"

#include <algorithm>
#include <sstream>

#include "core/graph.hpp"

namespace quilt {

int64_t Checked::product(std::span<const int64_t> dims) const {
  if (std::find(dims.begin(), dims.end(), 0) != dims.end()) return 0;
  int64_t p = 1;
  for (int64_t d : dims) p = mul(p, d);
  return p;
}

int64_t Checked::to_int64(double v) const {
  // -2^63 and 2^63 are exact doubles; the comparisons are false for NaN.
  if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) {
    std::ostringstream s;
    s << what_ << " overflows int64: " << v;
    fail(s.str());
  }
  return static_cast<int64_t>(v);
}

void Checked::overflow(int64_t a, const char* op, int64_t b) const {
  fail(std::string(what_) + " overflows int64: " + std::to_string(a) + op + std::to_string(b));
}

void Checked::fail(const std::string& what) const {
  if (node_) node_->fail(what, code_);
  throw Error(code_, where_() + ": " + what);
}

int64_t checked_index(const Node& node, int64_t k, int64_t n) {
  const int64_t w = k < 0 ? k + n : k;
  if (w < 0 || w >= n)
    node.fail("index " + std::to_string(k) + " is out of range [" + std::to_string(-n) + ", " +
                  std::to_string(n - 1) + "] for an axis of size " + std::to_string(n),
              ErrorCode::InvalidArgument);
  return w;
}

}  // namespace quilt
