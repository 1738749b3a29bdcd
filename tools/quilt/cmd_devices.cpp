// quilt devices: every backend and device Quilt can use.
#include <algorithm>
#include <cstdio>

#include "core/backend.hpp"
#include "tools/quilt/cli.hpp"

namespace quilt::cli {

int cmd_devices(const std::vector<std::string>& args) {
  if (std::find(args.begin(), args.end(), "--help") != args.end()) {
    std::puts(
        "usage: quilt devices\n\nLists every backend and device Quilt can use, with versions.");
    return 0;
  }
  if (!args.empty()) {
    std::fprintf(stderr, "quilt: unexpected argument '%s' for quilt devices\n", args[0].c_str());
    return 2;
  }
  try {
    for (const auto& b : {describe_cpu_backend()}) {
      std::printf("backend %s (%s)\n", b.name.c_str(), b.version.c_str());
      for (size_t i = 0; i < b.devices.size(); ++i) {
        std::printf("  device %zu: %s\n", i, b.devices[i].name.c_str());
        for (const auto& [k, v] : b.devices[i].properties)
          std::printf("    %s: %s\n", k.c_str(), v.c_str());
      }
    }
    return 0;
  } catch (const Error& e) {
    return report(e);
  }
}

}  // namespace quilt::cli
