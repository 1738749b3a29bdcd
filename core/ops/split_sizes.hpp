// Split's output sizes along its axis, shared by shape inference and the CPU kernel: the kernel
// needs the sizes of outputs the model leaves unnamed too (their data is skipped, but the outputs
// after them start past it), and those have no type at run time.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/checked.hpp"
#include "core/graph.hpp"

namespace quilt {

// The sizes of a Split node's n outputs along an axis of `dim` (-1: unknown, then the sizes that
// need it are -1): `split` when the node gives one (input 1 from opset 13 and in opset 1, the
// attribute in between: the caller reads it), else `num_outputs` chunks of ceil(dim / n) with the
// remainder last (opset 18), else n equal parts. Fails through the node when they do not fit.
inline std::vector<int64_t> split_sizes(const Node& node, int64_t axis, int64_t dim, int64_t n,
                                        const std::optional<std::vector<int64_t>>& split,
                                        ErrorCode code = ErrorCode::InvalidModel) {
  const auto str = [](int64_t v) { return std::to_string(v); };
  std::vector<int64_t> sizes(static_cast<size_t>(n), -1);
  const bool has_num = node.opset >= 18 && node.has_attr("num_outputs");
  if (split) {
    if (has_num) node.fail("input 'split' and attribute 'num_outputs' cannot both be given", code);
    if (static_cast<int64_t>(split->size()) != n)
      node.fail("split " + to_string(*split) + " has " + str(static_cast<int64_t>(split->size())) +
                    " entries but the node has " + str(n) + " outputs",
                code);
    int64_t sum = 0;
    const Checked c(node, "the sum of split", code);
    for (int64_t s : *split) {
      if (s < 0) node.fail("split " + to_string(*split) + " has a negative size", code);
      sum = c.add(sum, s);
    }
    if (dim >= 0 && sum != dim)
      node.fail("split " + to_string(*split) + " sums to " + str(sum) + " but axis " + str(axis) +
                    " has size " + str(dim),
                code);
    return *split;
  }
  if (has_num) {
    const int64_t num = node.attr_int("num_outputs", n);
    if (num != n)
      node.fail("num_outputs is " + str(num) + " but the node has " + str(n) + " outputs", code);
    if (dim >= 0) {
      const int64_t chunk = dim == 0 ? 0 : (dim - 1) / n + 1;  // ceil(dim / n), overflow-free
      const int64_t last = dim - chunk * (n - 1);
      if (last < 0)
        node.fail("axis " + str(axis) + " of size " + str(dim) + " cannot be split into " + str(n) +
                      " chunks of " + str(chunk),
                  code);
      std::fill(sizes.begin(), sizes.end(), chunk);
      sizes.back() = last;
    }
  } else if (dim >= 0) {
    if (dim % n != 0)
      node.fail("axis " + str(axis) + " of size " + str(dim) + " cannot be split evenly into " +
                    str(n) + " outputs",
                code);
    std::fill(sizes.begin(), sizes.end(), dim / n);
  }
  return sizes;
}

}  // namespace quilt
