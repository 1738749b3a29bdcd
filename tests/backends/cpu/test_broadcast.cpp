// BroadcastPlan (numpy broadcasting as contiguous runs) and the InlineVector it keeps its dims in,
// checked against an element-by-element reference, including ranks past the inline capacity.
#include <gtest/gtest.h>

#include <random>

#include "backends/cpu/inline_vector.hpp"
#include "backends/cpu/kernels/broadcast.hpp"

using namespace quilt;
using namespace quilt::cpu;

namespace {

// The flat index into `in` (right-aligned, size-1 dims repeat) of output element `o`.
int64_t reference_offset(const std::vector<int64_t>& out, const std::vector<int64_t>& in,
                         int64_t o) {
  int64_t offset = 0, stride = 1;
  for (size_t d = out.size(); d-- > 0;) {
    const int64_t i = o % out[d];
    o /= out[d];
    const size_t k = d + in.size() - out.size();
    if (d + in.size() < out.size()) continue;
    if (in[k] != 1) offset += i * stride;
    stride *= in[k];
  }
  return offset;
}

void check(const std::vector<int64_t>& out, const std::vector<std::vector<int64_t>>& ins) {
  const BroadcastPlan plan(out, ins);
  int64_t numel = 1;
  for (int64_t d : out) numel *= d;
  ASSERT_EQ(plan.numel(), numel);
  if (numel == 0) return;
  // Split points, so runs that start mid-row are covered too.
  for (int64_t begin : {int64_t{0}, numel / 3, numel - 1}) {
    int64_t next = begin;
    plan.for_each_run(begin, numel,
                      [&](int64_t o, const int64_t* off, int64_t n, const int64_t* step) {
                        ASSERT_EQ(o, next);
                        for (int64_t i = 0; i < n; ++i)
                          for (size_t k = 0; k < ins.size(); ++k)
                            ASSERT_EQ(off[k] + i * step[k], reference_offset(out, ins[k], o + i))
                                << "input " << k << " at output " << o + i;
                        next = o + n;
                      });
    ASSERT_EQ(next, numel);
  }
}

}  // namespace

TEST(InlineVector, GrowsPastItsInlineCapacityKeepingItsElements) {
  InlineVector<int64_t, 4> v;
  for (int64_t i = 0; i < 10; ++i) v.push_back(i * i);
  ASSERT_EQ(v.size(), 10u);
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(v[static_cast<size_t>(i)], i * i);
  v.resize(12, -1);
  EXPECT_EQ(v[11], -1);
  EXPECT_EQ(v.back(), -1);
  v.assign(3, 7);
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0] + v[1] + v[2], 21);
  InlineVector<int64_t, 4> w(2, 5);
  w.resize(4, 9);  // within the inline capacity: new elements only get the value
  EXPECT_EQ(w[1], 5);
  EXPECT_EQ(w[3], 9);
}

TEST(BroadcastPlan, RunsMatchNumpyBroadcastingAtEveryRank) {
  check({2, 3, 4}, {{2, 3, 4}, {4}});
  check({2, 3, 4}, {{2, 1, 4}, {3, 1}});
  check({5, 1, 7}, {{1}, {5, 1, 7}, {7}});
  check({1}, {{}, {1}});
  check({}, {{}});
  check({3, 0, 2}, {{3, 1, 2}, {2}});
  // Alternating broadcast dims that cannot be merged: 20 kept dims, past the inline capacity of
  // the plan's dims and strides.
  std::vector<int64_t> out, a, b;
  for (int d = 0; d < 20; ++d) {
    out.push_back(2);
    a.push_back(d % 2 ? 2 : 1);
    b.push_back(d % 2 ? 1 : 2);
  }
  check(out, {a, b});
  std::mt19937 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    const int rank = 1 + static_cast<int>(rng() % 5);
    std::vector<int64_t> o(static_cast<size_t>(rank)), x, y;
    for (auto& d : o) d = 1 + static_cast<int64_t>(rng() % 4);
    for (int d = 0; d < rank; ++d) {
      x.push_back(rng() % 3 == 0 ? 1 : o[static_cast<size_t>(d)]);
      y.push_back(rng() % 3 == 0 ? 1 : o[static_cast<size_t>(d)]);
    }
    x.erase(x.begin(), x.begin() + static_cast<long>(rng() % x.size()));  // shorter ranks too
    check(o, {x, y});
  }
}
