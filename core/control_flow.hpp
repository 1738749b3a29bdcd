// Control flow (If, Loop, Scan) is run by the executor itself; these are its tensor helpers.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "quilt/quilt.hpp"

namespace quilt {

class ExecutionPlan;
struct Node;

// SequenceMap: body run once per position of the input sequences (tensor inputs given whole
// every time), its outputs gathered into one sequence each.
std::vector<Value> run_sequence_map(const Node& node, const ExecutionPlan& body,
                                    const std::vector<Value>& in,
                                    const std::map<std::string, Value>& outer);

// t[..., index, ...] along `axis`: the result has t's shape without that axis.
Tensor slice_along(const Tensor& t, int64_t axis, int64_t index);
// Stacks equally shaped pieces along a new axis inserted at `axis`.
Tensor stack_along(const std::vector<Tensor>& pieces, int64_t axis);

}  // namespace quilt
