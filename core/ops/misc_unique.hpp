// Unique's grouping, shared by shape inference (the output length depends on the values) and the
// CPU kernel.
//
// The input is seen as `count` slices along the axis (or its elements when flattened); slices
// compare lexicographically element by element, NaNs equal to each other and after numbers.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#include "quilt/quilt.hpp"

namespace quilt {

struct UniqueGroups {
  std::vector<int64_t> first;   // per unique slice, in output order: index of its first occurrence
  std::vector<int64_t> counts;  // per unique slice: how often it occurs
  // Per input slice: position of its unique slice in the output. Left empty when every slice is
  // empty (outer or inner is 0): they are then all equal, one group, and every position is 0; the
  // count of such slices is free in a declared shape (2^31 slices of nothing), so nothing here is
  // sized by it.
  std::vector<int64_t> inverse;
};

// Slice k of a tensor of shape [outer, count, inner] is the `outer * inner` elements with axis
// index k.
template <class T>
UniqueGroups unique_groups(const T* data, int64_t outer, int64_t count, int64_t inner,
                           bool sorted) {
  UniqueGroups g;
  if (outer == 0 || inner == 0) {
    if (count > 0) {
      g.first = {0};
      g.counts = {count};
    }
    return g;
  }
  auto less = [](T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a)) return false;
      if (std::isnan(b)) return true;
    }
    return a < b;
  };
  auto equal = [](T a, T b) {
    if constexpr (std::is_floating_point_v<T>)
      if (std::isnan(a) && std::isnan(b)) return true;
    return a == b;
  };
  auto elem = [&](int64_t k, int64_t o, int64_t i) { return data[(o * count + k) * inner + i]; };
  // Lexicographic three-way comparison of slices j and k.
  auto compare = [&](int64_t j, int64_t k) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const T a = elem(j, o, i), b = elem(k, o, i);
        if (equal(a, b)) continue;
        return less(a, b) ? -1 : 1;
      }
    return 0;
  };
  std::vector<int64_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t j, int64_t k) { return compare(j, k) < 0; });

  g.inverse.resize(static_cast<size_t>(count));
  std::vector<int64_t> group_of_sorted(static_cast<size_t>(count));
  for (size_t s = 0; s < order.size(); ++s) {
    if (s == 0 || compare(order[s - 1], order[s]) != 0) {
      g.first.push_back(order[s]);  // stable sort: the first of equal slices comes first
      g.counts.push_back(0);
    }
    ++g.counts.back();
    group_of_sorted[s] = static_cast<int64_t>(g.first.size()) - 1;
  }
  std::vector<int64_t> position(g.first.size());
  std::iota(position.begin(), position.end(), 0);
  if (!sorted) {
    // Order the groups by first occurrence.
    std::vector<int64_t> by_first(g.first.size());
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) {
      return g.first[static_cast<size_t>(a)] < g.first[static_cast<size_t>(b)];
    });
    UniqueGroups u;
    for (size_t p = 0; p < by_first.size(); ++p) {
      const auto grp = static_cast<size_t>(by_first[p]);
      u.first.push_back(g.first[grp]);
      u.counts.push_back(g.counts[grp]);
      position[grp] = static_cast<int64_t>(p);
    }
    g.first = std::move(u.first);
    g.counts = std::move(u.counts);
  }
  for (size_t s = 0; s < order.size(); ++s)
    g.inverse[static_cast<size_t>(order[s])] = position[static_cast<size_t>(group_of_sorted[s])];
  return g;
}

// Dispatches on the tensor's dtype; returns false for dtypes Unique does not handle (float16).
inline bool unique_groups(const Tensor& x, int64_t outer, int64_t count, int64_t inner, bool sorted,
                          UniqueGroups& out) {
  switch (x.dtype()) {
#define QUILT_UNIQUE_CASE(T)                                          \
  case dtype_of<T>():                                                 \
    out = unique_groups<T>(x.data<T>(), outer, count, inner, sorted); \
    return true;
    QUILT_UNIQUE_CASE(float)
    QUILT_UNIQUE_CASE(double)
    QUILT_UNIQUE_CASE(int8_t)
    QUILT_UNIQUE_CASE(int16_t)
    QUILT_UNIQUE_CASE(int32_t)
    QUILT_UNIQUE_CASE(int64_t)
    QUILT_UNIQUE_CASE(uint8_t)
    QUILT_UNIQUE_CASE(uint16_t)
    QUILT_UNIQUE_CASE(uint32_t)
    QUILT_UNIQUE_CASE(uint64_t)
    QUILT_UNIQUE_CASE(bool)
#undef QUILT_UNIQUE_CASE
    default:
      return false;
  }
}

}  // namespace quilt
