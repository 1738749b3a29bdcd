#include "backends/cpu/layout.hpp"

namespace quilt::cpu {

std::vector<char> blocked_values(const std::vector<PatchNode>& nodes,
                                 const std::vector<char>& capable, size_t num_values,
                                 const std::vector<char>& kept) {
  std::vector<char> blocked(num_values, 0);
  for (size_t k = 0; k < nodes.size(); ++k)
    if (capable[k] && !nodes[k].outputs.empty() && nodes[k].outputs[0] >= 0)
      blocked[static_cast<size_t>(nodes[k].outputs[0])] = 1;
  for (size_t v = 0; v < num_values; ++v)
    if (kept[v]) blocked[v] = 0;
  std::vector<char> read(num_values, 0);
  for (size_t k = 0; k < nodes.size(); ++k)
    for (size_t i = 0; i < nodes[k].inputs.size(); ++i) {
      const int32_t v = nodes[k].inputs[i];
      if (v < 0) continue;
      read[static_cast<size_t>(v)] = 1;
      const bool as_data = i == 0 || static_cast<int32_t>(i) == nodes[k].residual_input;
      if (!capable[k] || !as_data) blocked[static_cast<size_t>(v)] = 0;
    }
  for (size_t v = 0; v < num_values; ++v)
    if (!read[v]) blocked[v] = 0;  // read by no node (nor exported): nothing to gain
  return blocked;
}

}  // namespace quilt::cpu
