// quilt devices: every backend Quilt can load (the built-in CPU, --plugin libraries and those in
// QUILT_PLUGIN_PATH) with its devices, then every library that could not be used and why.
#include <algorithm>
#include <cstdio>

#include "quilt/backend.h"
#include "tools/quilt/cli.hpp"

namespace quilt::cli {
namespace {

const char* kDevicesHelp =
    "usage: quilt devices [--plugin PATH]...\n"
    "\n"
    "Lists every backend Quilt can use (the built-in CPU first, then plugins: those given with\n"
    "--plugin and the *.so files in the directories of QUILT_PLUGIN_PATH) with its version,\n"
    "library and ABI version, and every device of each: name, memory, flags and properties.\n"
    "Libraries that could not be loaded are listed last with the reason.\n"
    "\n"
    "options:\n"
    "  --plugin PATH  load a backend plugin library (repeatable)\n"
    "  --help         show this help\n"
    "\n"
    "Exit codes: 0 ok, also when a plugin failed to load (it is reported); 1 when the CPU\n"
    "backend itself fails; 2 bad usage.\n";

std::string format_memory(uint64_t bytes) {
  if (bytes == 0) return "unknown";
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < std::size(units)) {
    v /= 1024.0;
    ++u;
  }
  char buf[48];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

// quilt_device_flags_t as words; unknown bits in hex so nothing is hidden.
std::string format_flags(uint32_t flags) {
  std::vector<std::string> words;
  if (flags & QUILT_DEVICE_HOST_MEMORY) words.push_back("host-memory");
  if (flags & QUILT_DEVICE_SYNCHRONOUS) words.push_back("synchronous");
  const uint32_t rest = flags & ~uint32_t{QUILT_DEVICE_HOST_MEMORY | QUILT_DEVICE_SYNCHRONOUS};
  if (rest) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%x", rest);
    words.push_back(buf);
  }
  return words.empty() ? "none" : join(words, ", ");
}

}  // namespace

int cmd_devices(const std::vector<std::string>& args) {
  if (std::find(args.begin(), args.end(), "--help") != args.end()) {
    std::fputs(kDevicesHelp, stdout);
    return 0;
  }
  std::vector<std::string> plugins;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--plugin" && i + 1 < args.size() && !args[i + 1].empty()) {
      plugins.push_back(args[++i]);
    } else if (args[i] == "--plugin") {
      std::fputs("quilt: --plugin needs a library path\n", stderr);
      return 2;
    } else {
      std::fprintf(stderr, "quilt: unexpected argument '%s' for quilt devices\n", args[i].c_str());
      return 2;
    }
  }
  try {
    const BackendList list = list_backends(plugins);
    int status = 0;
    if (list.backends.empty() || list.backends.front().name != "cpu") {
      std::fputs("quilt: the built-in CPU backend is missing\n", stderr);
      status = 1;
    }
    for (size_t b = 0; b < list.backends.size(); ++b) {
      const BackendInfo& backend = list.backends[b];
      if (b) std::fputc('\n', stdout);
      // The CPU backend's version is "built-in", which the library column already says.
      const bool versioned = !backend.version.empty() && backend.version != backend.library;
      std::printf("backend %s (%s%sABI %s, %s)\n", backend.name.c_str(),
                  versioned ? ("version " + backend.version).c_str() : "", versioned ? ", " : "",
                  backend.abi_version.c_str(), backend.library.c_str());
      if (!backend.error.empty()) {
        // A plugin whose devices cannot be described is reported like one that failed to load;
        // the CPU failing is a failure of Quilt itself.
        std::printf("  error: %s\n", backend.error.c_str());
        if (b == 0) status = 1;
        continue;
      }
      if (backend.devices.empty()) std::printf("  no devices\n");
      for (size_t i = 0; i < backend.devices.size(); ++i) {
        const DeviceInfo& d = backend.devices[i];
        std::printf("  device %zu: %s\n", i, d.name.c_str());
        std::printf("    memory: %s\n", format_memory(d.memory_bytes).c_str());
        std::printf("    flags: %s\n", format_flags(d.flags).c_str());
        for (const auto& [k, v] : d.properties) std::printf("    %s: %s\n", k.c_str(), v.c_str());
      }
    }
    if (!list.failures.empty()) std::fputc('\n', stdout);
    for (const auto& f : list.failures)
      std::printf("failed: %s: %s\n", f.library.c_str(), f.reason.c_str());
    std::fflush(stdout);
    return status;
  } catch (const Error& e) {
    std::fprintf(stderr, "quilt: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quilt: %s\n", e.what());
    return 1;
  }
}

}  // namespace quilt::cli
