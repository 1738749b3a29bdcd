// ShapeMemo (backends/cpu/kernel.hpp): what a kernel works out from its shapes, kept from
// creation when they are static and worked out again on a run only when its shapes differ.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "backends/cpu/kernel.hpp"

namespace quilt::cpu {
namespace {

using Dims = std::vector<int64_t>;

TEST(ShapeMemo, KeepsWhatStaticShapesGiveAndRemakesForOthers) {
  const TypeShape x{DType::Float32, true, {1, 3, 8, 8}}, y{DType::Float32, true, {1, 4, 4, 4}};
  ShapeMemo<int64_t> memo;
  int made = 0;
  memo.keep({&x, &y}, [&](const auto& s) {
    ++made;
    return s[0][2] * 100 + s[1][2];
  });
  EXPECT_EQ(made, 1);
  ShapeMemo<int64_t>::Held storage;
  int remade = 0;
  auto remake = [&] {
    ++remade;
    return int64_t{-1};
  };
  EXPECT_EQ(memo.get({x.dims, y.dims}, storage, remake), 804);  // the kept value
  EXPECT_EQ(remade, 0);
  const Dims other{1, 3, 16, 16};
  EXPECT_EQ(memo.get({other, y.dims}, storage, remake), -1);  // other shapes: made again
  EXPECT_EQ(remade, 1);
}

TEST(ShapeMemo, KeepsNothingForDynamicShapesOrAFailure) {
  const TypeShape dynamic{DType::Float32, true, {-1, 3, 8, 8}}, none{DType::Float32, false, {}};
  const TypeShape fixed{DType::Float32, true, {1, 3, 8, 8}};
  ShapeMemo<int64_t>::Held storage;
  auto remake = [] { return int64_t{7}; };
  for (const TypeShape* t : {&dynamic, &none}) {
    ShapeMemo<int64_t> memo;
    memo.keep({t}, [](const auto&) { return int64_t{1}; });
    EXPECT_EQ(memo.get({t->dims}, storage, remake), 7);
  }
  // An Error while working it out (a bad attribute) is left for the run to report.
  ShapeMemo<int64_t> failing;
  failing.keep({&fixed}, [](const auto&) -> int64_t {
    throw Error(ErrorCode::InvalidModel, "bad attribute");
  });
  EXPECT_EQ(failing.get({fixed.dims}, storage, remake), 7);
}

TEST(ShapeMemo, KeepsTheLastRunsValueForShapesKnownOnlyAtRunTime) {
  const TypeShape dynamic{DType::Float32, true, {-1, 3}};
  ShapeMemo<int64_t> memo;
  memo.keep({&dynamic}, [](const auto&) { return int64_t{1}; });  // not static: nothing kept
  int remade = 0;
  auto make_for = [&](const Dims& d) {
    return [&remade, &d] {
      ++remade;
      return d[0] * 10 + d[1];
    };
  };
  const Dims one{1, 3}, two{2, 3};
  ShapeMemo<int64_t>::Held held;
  EXPECT_EQ(memo.get({one}, held, make_for(one)), 13);
  EXPECT_EQ(memo.get({one}, held, make_for(one)), 13);  // the last run's
  EXPECT_EQ(remade, 1);
  EXPECT_EQ(memo.get({two}, held, make_for(two)), 23);  // other shapes: made again, kept
  EXPECT_EQ(memo.get({two}, held, make_for(two)), 23);
  EXPECT_EQ(remade, 2);
}

TEST(ShapeMemo, ConcurrentRunsOfOtherShapesEachGetTheirOwn) {
  // Four threads, two shapes: each get() returns the value for its own shapes while the others
  // replace the kept one (ThreadSanitizer runs this too).
  ShapeMemo<int64_t> memo;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      const Dims d{t % 2 + 1, 3};
      for (int i = 0; i < 2000; ++i) {
        ShapeMemo<int64_t>::Held held;
        const int64_t& v = memo.get({d}, held, [&] { return d[0] * 10 + d[1]; });
        if (v != d[0] * 10 + d[1]) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace quilt::cpu
