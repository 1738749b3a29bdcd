// Backend discovery: the built-in CPU backend, plugin libraries, ABI negotiation, host services.
#include "core/backend_registry.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include "core/device.hpp"
#include "core/log.hpp"

namespace quilt {
namespace {

// Plugins log through the host API with no session attached: their messages are shown up to
// the most verbose log level among the sessions alive (Warning when there are none).
struct PluginLogLevels {
  std::mutex mutex;
  std::multiset<int> live;
  std::atomic<int> current{static_cast<int>(LogLevel::Warning)};
};
PluginLogLevels& plugin_log_levels() {
  static PluginLogLevels* levels = new PluginLogLevels;  // plugins' threads may log at exit
  return *levels;
}
void update_plugin_log_level(PluginLogLevels& l) {
  const int most = l.live.empty() ? static_cast<int>(LogLevel::Warning) : *l.live.rbegin();
  l.current.store(std::max(most, static_cast<int>(LogLevel::Warning)));
}

quilt_status_t status_create(quilt_status_code_t code, const char* message) {
  return make_status(code, message ? message : "");
}

void host_log(quilt_log_level_t level, const char* message) {
  static const LogLevel map[] = {LogLevel::Debug, LogLevel::Info, LogLevel::Warning,
                                 LogLevel::Error};
  const int i = std::clamp(static_cast<int>(level), 0, 3);
  Logger(static_cast<LogLevel>(plugin_log_levels().current.load()))
      .log(map[i], message ? message : "");
}

uint64_t now_ns() {
  return host_now_ns();
}

const quilt_host_api_t kHostApi = {sizeof(quilt_host_api_t), QUILT_BACKEND_ABI_VERSION,
                                   status_create, host_log, now_ns};

// Loaded libraries, by canonical path; never unloaded (a plugin's threads may outlive a session).
struct LibraryCache {
  std::mutex mutex;
  std::map<std::string, std::pair<const quilt_backend_t*, std::string>> by_path;
};
LibraryCache& cache() {
  static LibraryCache c;
  return c;
}

// The slots every backend fills, in table order; the others (release, event_timestamps and
// those after event_timestamps) are optional.
#define QUILT_REQUIRED_SLOT(slot) \
  { #slot, offsetof(quilt_backend_t, slot) }
struct RequiredSlot {
  const char* name;
  size_t offset;
};
constexpr RequiredSlot kRequiredSlots[] = {
    QUILT_REQUIRED_SLOT(device_count),
    QUILT_REQUIRED_SLOT(device_info),
    QUILT_REQUIRED_SLOT(device_open),
    QUILT_REQUIRED_SLOT(device_close),
    QUILT_REQUIRED_SLOT(supports),
    QUILT_REQUIRED_SLOT(compile),
    QUILT_REQUIRED_SLOT(executable_release),
    QUILT_REQUIRED_SLOT(execute),
    QUILT_REQUIRED_SLOT(alloc),
    QUILT_REQUIRED_SLOT(free),
    QUILT_REQUIRED_SLOT(copy_to_device),
    QUILT_REQUIRED_SLOT(copy_to_host),
    QUILT_REQUIRED_SLOT(event_create),
    QUILT_REQUIRED_SLOT(event_wait),
    QUILT_REQUIRED_SLOT(event_query),
    QUILT_REQUIRED_SLOT(event_release),
};
#undef QUILT_REQUIRED_SLOT
constexpr size_t kRequiredSize = offsetof(quilt_backend_t, event_release) + sizeof(void*);

}  // namespace

std::string check_backend_table(const quilt_backend_t& backend) {
  const uint32_t theirs = backend.abi_version;
  if ((theirs >> 16) != QUILT_BACKEND_ABI_MAJOR)
    return "ABI mismatch: the plugin was built for backend ABI " + abi_version_string(theirs) +
           ", this Quilt speaks " + abi_version_string(QUILT_BACKEND_ABI_VERSION) +
           " (the major versions differ)";
  if (backend.struct_size < kRequiredSize)
    return "ABI mismatch: the plugin's quilt_backend_t is " + std::to_string(backend.struct_size) +
           " bytes (struct_size), too short for the slots every backend has (" +
           std::to_string(kRequiredSize) + " bytes, through event_release; backend ABI " +
           abi_version_string(theirs) + ", this Quilt speaks " +
           abi_version_string(QUILT_BACKEND_ABI_VERSION) + ")";
  std::vector<std::string> missing;
  for (const RequiredSlot& slot : kRequiredSlots) {
    void* fn = nullptr;
    std::memcpy(&fn, reinterpret_cast<const char*>(&backend) + slot.offset, sizeof(fn));
    if (!fn) missing.push_back(slot.name);
  }
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    return std::string("required slot") + (missing.size() > 1 ? "s " : " ") + list +
           (missing.size() > 1 ? " are" : " is") + " NULL in the plugin's quilt_backend_t";
  }
  return "";
}

namespace {

// Loads one library; returns the backend or sets *failure.
const quilt_backend_t* load_library(const std::string& path, std::string* failure) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    *failure = "file not found";
    return nullptr;
  }
  const std::string key = std::filesystem::canonical(path, ec).string();
  auto& c = cache();
  std::lock_guard lock(c.mutex);
  if (auto it = c.by_path.find(key); it != c.by_path.end()) {
    *failure = it->second.second;
    return it->second.first;
  }
  auto remember = [&](const quilt_backend_t* b, std::string why) {
    c.by_path[key] = {b, why};
    *failure = std::move(why);
    return b;
  };
  void* handle = dlopen(key.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = dlerror();
    return remember(nullptr, std::string("cannot load: ") + (e ? e : "unknown dlopen error"));
  }
  auto entry = reinterpret_cast<quilt_backend_init_fn>(dlsym(handle, QUILT_BACKEND_ENTRY));
  if (!entry)
    return remember(
        nullptr, "no symbol " + std::string(QUILT_BACKEND_ENTRY) + ": not a Quilt backend plugin");
  const quilt_backend_t* backend = nullptr;
  if (quilt_status_t s = entry(&kHostApi, &backend)) {
    return remember(nullptr, "initialisation failed: " + take_status_message(s));
  }
  if (!backend) return remember(nullptr, "initialisation returned no backend");
  if (std::string why = check_backend_table(*backend); !why.empty())
    return remember(nullptr, std::move(why));
  std::string name = backend->name ? backend->name : "";
  bool valid = !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_';
  });
  if (!valid) return remember(nullptr, "invalid backend name '" + name + "': expected [a-z0-9_]+");
  return remember(backend, "");
}

}  // namespace

PluginLogScope::PluginLogScope(LogLevel level) : level_(static_cast<int>(level)) {
  auto& l = plugin_log_levels();
  std::lock_guard lock(l.mutex);
  l.live.insert(level_);
  update_plugin_log_level(l);
}

PluginLogScope::~PluginLogScope() {
  auto& l = plugin_log_levels();
  std::lock_guard lock(l.mutex);
  l.live.erase(l.live.find(level_));
  update_plugin_log_level(l);
}

LogLevel plugin_log_level() {
  return static_cast<LogLevel>(plugin_log_levels().current.load());
}

const quilt_host_api_t* host_api() {
  return &kHostApi;
}

uint64_t host_now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

std::string abi_version_string(uint32_t version) {
  return std::to_string(version >> 16) + "." + std::to_string(version & 0xffff);
}

const LoadedBackend* BackendInventory::find(const std::string& name) const {
  for (const auto& b : backends)
    if (b.name == name) return &b;
  return nullptr;
}

BackendInventory discover_backends(const std::vector<std::string>& plugin_paths) {
  BackendInventory inv;
  const quilt_backend_t* cpu = cpu_backend_api();
  inv.backends.push_back({cpu->name, cpu->version, cpu->abi_version, "built-in", cpu});
  std::vector<std::string> paths = plugin_paths;
  // Backends that ship with Quilt (the OpenCL plugin) live next to the library.
  std::vector<std::string> dirs;
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&discover_backends), &self) && self.dli_fname) {
    const auto here = std::filesystem::path(self.dli_fname).parent_path();
    // Next to libquilt; and, for a program holding the runtime itself (the installed quilt
    // CLI in bin/), where the installed libquilt's are.
    for (const auto& dir : {here / "quilt-backends", here / QUILT_BIN_TO_PLUGINS}) {
      std::error_code ec;
      if (std::filesystem::is_directory(dir, ec)) dirs.push_back(dir.string());
    }
  }
  if (const char* env = std::getenv("QUILT_PLUGIN_PATH")) {
    std::string list = env;
    size_t start = 0;
    while (start <= list.size()) {
      size_t end = list.find(':', start);
      if (end == std::string::npos) end = list.size();
      if (end > start) dirs.push_back(list.substr(start, end - start));
      start = end + 1;
    }
  }
  for (const auto& dir : dirs) {
    std::error_code ec;
    std::vector<std::string> found;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
      if (e.path().extension() == ".so") found.push_back(e.path().string());
    if (ec) {
      inv.failures.push_back({dir, "plugin directory cannot be read: " + ec.message()});
      continue;
    }
    std::sort(found.begin(), found.end());
    paths.insert(paths.end(), found.begin(), found.end());
  }
  std::vector<std::string> seen;
  for (const auto& path : paths) {
    std::error_code ec;
    std::string canon = std::filesystem::weakly_canonical(path, ec).string();
    if (std::find(seen.begin(), seen.end(), canon) != seen.end()) continue;
    seen.push_back(canon);
    std::string failure;
    const quilt_backend_t* b = load_library(path, &failure);
    if (!b) {
      inv.failures.push_back({path, failure});
      continue;
    }
    if (const LoadedBackend* other = inv.find(b->name)) {
      inv.failures.push_back({path, "duplicate backend name '" + std::string(b->name) +
                                        "' (already provided by " + other->library + ")"});
      continue;
    }
    inv.backends.push_back({b->name, b->version ? b->version : "", b->abi_version, path, b});
  }
  return inv;
}

BackendInventory discover_backends_for(const std::vector<std::string>& names,
                                       const std::vector<std::string>& plugin_paths) {
  const quilt_backend_t* cpu = cpu_backend_api();
  const bool cpu_only =
      plugin_paths.empty() && std::all_of(names.begin(), names.end(), [&](const std::string& n) {
        return n.substr(0, n.find(':')) == cpu->name;
      });
  if (!cpu_only) return discover_backends(plugin_paths);
  BackendInventory inv;
  inv.backends.push_back({cpu->name, cpu->version, cpu->abi_version, "built-in", cpu});
  return inv;
}

std::vector<DeviceDescription> describe_devices(const LoadedBackend& backend) {
  const quilt_backend_t* api = backend.api;
  std::vector<DeviceDescription> out;
  const int32_t n = api->device_count(api->context);
  for (int32_t i = 0; i < n; ++i) {
    quilt_device_info_t info{};
    info.struct_size = sizeof(info);
    check_status(api->device_info(api->context, i, &info),
                 "backend '" + backend.name + "' device " + std::to_string(i));
    DeviceDescription d;
    d.name = info.name ? info.name : "";
    d.flags = info.flags;
    d.memory_bytes = info.memory_bytes;
    for (size_t k = 0; k < info.num_properties; ++k)
      d.properties.push_back({info.property_keys[k], info.property_values[k]});
    out.push_back(std::move(d));
  }
  return out;
}

BackendList list_backends(const std::vector<std::string>& plugins) {
  const BackendInventory inv = discover_backends(plugins);
  BackendList out;
  for (const auto& b : inv.backends) {
    BackendInfo info{b.name, b.version, b.library, abi_version_string(b.abi_version), {}, ""};
    try {
      info.devices = describe_devices(b);
    } catch (const Error& e) {
      info.error = e.what();
    }
    out.backends.push_back(std::move(info));
  }
  for (const auto& f : inv.failures) out.failures.push_back({f.library, f.reason});
  return out;
}

}  // namespace quilt
