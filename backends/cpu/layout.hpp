// The CPU patch's blocked layout (NCHW16c, backends/cpu/kernels/conv_blocked.hpp): which values
// of a patch are stored blocked. Decided at compile of a patch, after activation fusion; the
// host, the ABI and other backends never see a blocked tensor.
//
// A value is blocked when the node producing it and every node reading it run on the blocked
// kernels (reading it as their input or fused residual), and the patch does not export it. So a
// blocked region starts at a node that reads NCHW and ends at one that writes NCHW: the kernels
// convert at their edges, and no reorder node is inserted. A lone blocked-capable node keeps the
// NCHW kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/fusion.hpp"

namespace quilt::cpu {

// capable[k]: node k can run on the blocked kernels. kept[v]: the patch exports value v.
// Returns, per value, whether it is stored blocked.
std::vector<char> blocked_values(const std::vector<PatchNode>& nodes,
                                 const std::vector<char>& capable, size_t num_values,
                                 const std::vector<char>& kept);

}  // namespace quilt::cpu
