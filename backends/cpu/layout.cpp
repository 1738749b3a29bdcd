#include "backends/cpu/layout.hpp"

namespace quilt::cpu {

std::vector<char> blocked_values(const std::vector<PatchNode>& nodes,
                                 const std::vector<BlockedUse>& uses, size_t num_values,
                                 const std::vector<char>& kept) {
  std::vector<char> blocked(num_values, 0);
  std::vector<int> reads(num_values, 0);  // input slots reading each value
  for (const PatchNode& n : nodes)
    for (int32_t v : n.inputs)
      if (v >= 0) ++reads[static_cast<size_t>(v)];
  for (size_t k = 0; k < nodes.size(); ++k) {
    const int32_t out = nodes[k].outputs.empty() ? -1 : nodes[k].outputs[0];
    if (out >= 0 && (uses[k].writes || (uses[k].converts && reads[out] >= 2)))
      blocked[static_cast<size_t>(out)] = 1;
  }
  for (size_t v = 0; v < num_values; ++v)
    if (kept[v] || !reads[v]) blocked[v] = 0;  // exported, or read by no node: nothing to gain
  // Only ever from blocked to NCHW, so this ends (after at most num_values changes).
  for (bool changed = true; changed;) {
    changed = false;
    auto unblock = [&](int32_t v) {
      if (v >= 0 && blocked[static_cast<size_t>(v)]) {
        blocked[static_cast<size_t>(v)] = 0;
        changed = true;
      }
    };
    for (size_t k = 0; k < nodes.size(); ++k) {
      const BlockedUse& u = uses[k];
      const auto reads = [&](size_t i) { return i < u.reads.size() && u.reads[i]; };
      for (size_t i = 0; i < nodes[k].inputs.size(); ++i)
        if (!reads(i)) unblock(nodes[k].inputs[i]);
      if (!u.uniform) continue;
      const int32_t out = nodes[k].outputs.empty() ? -1 : nodes[k].outputs[0];
      bool all = out >= 0 && blocked[static_cast<size_t>(out)];
      for (size_t i = 0; i < nodes[k].inputs.size(); ++i)
        if (reads(i) && nodes[k].inputs[i] >= 0)
          all = all && blocked[static_cast<size_t>(nodes[k].inputs[i])];
      if (all) continue;
      unblock(out);
      for (size_t i = 0; i < nodes[k].inputs.size(); ++i)
        if (reads(i)) unblock(nodes[k].inputs[i]);
    }
  }
  return blocked;
}

}  // namespace quilt::cpu
