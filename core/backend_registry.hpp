// Finding backends: the built-in CPU backend and plugin libraries (SessionOptions::plugins and
// the directories of QUILT_PLUGIN_PATH), each loaded once per process and checked against the
// ABI version. A library that cannot be used is reported with why, never fatal by itself.
//
//   BackendInventory inv = discover_backends({"/opt/acme/libquilt_acme.so"});
//   for (const auto& b : inv.backends) ...   // "cpu", "acme"
//   for (const auto& f : inv.failures) ...   // {"/x/libbad.so", "ABI mismatch: ..."}
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "quilt/backend.h"
#include "quilt/quilt.hpp"

namespace quilt {

struct LoadedBackend {
  std::string name;     // quilt_backend_t::name
  std::string version;  // the plugin's version string
  uint32_t abi_version = 0;
  std::string library;  // path of the shared library, or "built-in"
  const quilt_backend_t* api = nullptr;
};

struct LoadFailure {
  std::string library;  // the path as given or found
  std::string reason;   // "file not found", "no symbol quilt_backend_init", "ABI mismatch: ..."
};

struct BackendInventory {
  std::vector<LoadedBackend> backends;  // the CPU first, then plugins in load order
  std::vector<LoadFailure> failures;
  // nullptr when no backend has that name.
  const LoadedBackend* find(const std::string& name) const;
};

// The CPU backend, the given plugin libraries, every *.so in the `quilt-backends` directory next
// to libquilt (backends that ship with Quilt, e.g. OpenCL), and every *.so in the directories
// listed in the QUILT_PLUGIN_PATH environment variable (':'-separated). Two libraries offering
// the same backend name: the first wins, the second is a failure ("duplicate backend name").
BackendInventory discover_backends(const std::vector<std::string>& plugin_paths);
// What a session naming `names` (backend names, or specs such as "opencl:1") can use: the CPU
// backend alone when it is all they name and no plugin library is given, else
// discover_backends(plugin_paths). Loading the plugins found next to libquilt would cost a
// CPU-only session tens of MiB and milliseconds (the OpenCL one maps LLVM) for nothing.
BackendInventory discover_backends_for(const std::vector<std::string>& names,
                                       const std::vector<std::string>& plugin_paths);

// What `quilt devices` shows for one device of a backend (quilt::DeviceInfo, public).
using DeviceDescription = DeviceInfo;
// Asks the backend for every device. Throws Error naming the backend if device_info fails.
std::vector<DeviceDescription> describe_devices(const LoadedBackend& backend);

// The host services given to plugins (status, log, clock).
const quilt_host_api_t* host_api();
uint64_t host_now_ns();

// The built-in CPU backend's ABI table (backends/cpu/cpu_abi.cpp).
const quilt_backend_t* cpu_backend_api();

// Why a plugin's table cannot be used ("" when it can): another major ABI version, a
// struct_size too short for the required slots (both sizes named), required slots left NULL
// (each named).
std::string check_backend_table(const quilt_backend_t& backend);

// "1.0" for an ABI version number.
std::string abi_version_string(uint32_t version);

}  // namespace quilt
