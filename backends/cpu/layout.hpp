// The CPU patch's blocked layout (NCHW16c / NCHW8c, backends/cpu/kernels/conv_blocked.hpp):
// which values of a patch are stored blocked. Decided at compile of a patch, after activation
// fusion; the host, the ABI and other backends never see a blocked tensor.
//
// A value is blocked when the node producing it can write it blocked (or convert its output, for
// a value read twice or more), every node reading it can read it blocked in that input slot, and
// the patch does not export it. Convs read their input
// and fused residual blocked; Concat any input; an element-wise op its full-shape inputs, on the
// condition that those and its output are all blocked or all NCHW (its kernel runs on either,
// not on a mix) — so the decision is a fixed point: values start blocked where their producer
// allows and are turned back to NCHW until every rule holds. A blocked region starts at a node
// that reads NCHW and ends at one that writes NCHW: the kernels convert at their edges, and no
// reorder node is inserted. A value only capable nodes touch but that nothing reads stays NCHW,
// and so does a lone conv's output read by an op without a blocked kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/fusion.hpp"

namespace quilt::cpu {

// What a node of the patch can do on blocked values.
struct BlockedUse {
  bool writes = false;  // its output 0 may be stored blocked
  // Its kernel writes NCHW, but output 0 may be converted to blocked after it runs: done when
  // two or more input slots read the value blocked (once here rather than once per reader:
  // Real-ESRGAN's first conv has 3 input channels, runs on the NCHW kernels, and its output is
  // read by 24 convs, concatenations and residual Adds).
  bool converts = false;
  std::vector<char> reads;  // per input slot: may be read blocked (missing: no)
  bool uniform = false;     // the `reads` inputs and output 0 are all blocked or all NCHW
};

// uses[k]: node k's (default: nothing blocked). kept[v]: the patch exports value v. Returns, per
// value, whether it is stored blocked.
std::vector<char> blocked_values(const std::vector<PatchNode>& nodes,
                                 const std::vector<BlockedUse>& uses, size_t num_values,
                                 const std::vector<char>& kept);

}  // namespace quilt::cpu
