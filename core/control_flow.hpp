// Control flow (If, Loop, Scan) is run by the executor itself; these are its tensor helpers.
#pragma once

#include <vector>

#include "quilt/quilt.hpp"

namespace quilt {

// t[..., index, ...] along `axis`: the result has t's shape without that axis.
Tensor slice_along(const Tensor& t, int64_t axis, int64_t index);
// Stacks equally shaped pieces along a new axis inserted at `axis`.
Tensor stack_along(const std::vector<Tensor>& pieces, int64_t axis);

}  // namespace quilt
