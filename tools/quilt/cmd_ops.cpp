// quilt ops: the ops Quilt knows (schemas in core) and which backends run them.
#include <algorithm>
#include <cstdio>

#include "backends/cpu/kernel.hpp"
#include "core/host_ops.hpp"
#include "core/op_schema.hpp"
#include "tools/quilt/cli.hpp"

namespace quilt::cli {

int cmd_ops(const std::vector<std::string>& args) {
  bool markdown = false;
  for (const auto& a : args) {
    if (a == "--help") {
      std::puts(
          "usage: quilt ops [--markdown]\n\nLists every op Quilt has a schema for, the opsets it "
          "covers, and whether the CPU backend has a kernel for it (`host`: If, Loop and Scan, "
          "which the core runs, their bodies' nodes going to the backends; `strings`: the core "
          "runs it on string tensors).\n--markdown prints a table for the README.");
      return 0;
    }
    if (a == "--markdown") {
      markdown = true;
    } else {
      std::fprintf(stderr, "quilt: unknown option '%s' for quilt ops\n", a.c_str());
      return 2;
    }
  }
  const auto& cpu = cpu::KernelRegistry::builtin();
  size_t count = 0, on_cpu = 0;
  std::vector<std::string> rows;
  for (const auto& [key, schemas] : SchemaRegistry::builtin().all()) {
    std::string name = key.first.empty() ? key.second : key.first + "." + key.second;
    std::string opsets;
    std::vector<std::pair<int64_t, int64_t>> ranges;
    for (const auto& s : schemas) ranges.push_back({s.min_opset, s.max_opset});
    std::sort(ranges.begin(), ranges.end());
    // Merge adjacent ranges: "1+" when one schema covers everything from opset 1.
    std::vector<std::pair<int64_t, int64_t>> merged;
    for (auto r : ranges) {
      if (!merged.empty() && r.first <= merged.back().second + 1)
        merged.back().second = std::max(merged.back().second, r.second);
      else
        merged.push_back(r);
    }
    for (auto [lo, hi] : merged) {
      if (!opsets.empty()) opsets += ", ";
      opsets += std::to_string(lo) + (hi >= 1000 ? "+" : "–" + std::to_string(hi));
    }
    // Control flow is run by the core's executor, its bodies' nodes by the backends.
    // Sequence, map and optional ops are host steps too (core/ops/sequence.cpp).
    const bool host =
        (key.first.empty() && (key.second == "If" || key.second == "Loop" || key.second == "Scan" ||
                               key.second == "SequenceMap")) ||
        (key.second != "Identity" && value_ops().count(key));
    const bool numeric = cpu.find(key.second, key.first) != nullptr;
    const bool strings = has_host_kernel(key.first, key.second);
    const bool has_cpu = host || numeric || strings;
    ++count;
    on_cpu += has_cpu;
    if (markdown)
      rows.push_back("| " + name + " | " + opsets + " | " +
                     (host                 ? "✓ (host)"
                      : numeric && strings ? "✓ (strings: host)"
                      : strings            ? "✓ (strings, host)"
                      : numeric            ? "✓"
                                           : "") +
                     " |");
    else
      rows.push_back(name + std::string(name.size() < 28 ? 28 - name.size() : 1, ' ') + "opsets " +
                     opsets +
                     (host                 ? "  host"
                      : numeric && strings ? "  cpu, strings on host"
                      : strings            ? "  strings on host"
                      : numeric            ? "  cpu"
                                           : ""));
  }
  if (markdown) std::puts("| op | opsets | cpu |\n|---|---|---|");
  for (const auto& r : rows) std::puts(r.c_str());
  std::printf(markdown
                  ? "\n%zu ops, %zu run on the CPU (control flow, the string ops and the ops on "
                    "sequences, maps and optionals by the core: host).\n"
                  : "%zu ops, %zu run on the CPU (control flow, the string ops and the ops on "
                    "sequences, maps and optionals by the core: host)\n",
              count, on_cpu);
  return 0;
}

}  // namespace quilt::cli
