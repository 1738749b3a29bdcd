#include <algorithm>
#include <cstdio>

#include "core/backend_registry.hpp"
#include "tools/quilt/cli.hpp"

namespace quilt::cli {

int exit_code_for(const Error& e) {
  switch (e.code()) {
    case ErrorCode::InvalidArgument:
    case ErrorCode::InvalidModel:
    case ErrorCode::Io:
      return 2;
    default:
      return 1;
  }
}

int report(const Error& e) {
  std::fprintf(stderr, "quilt: %s\n", e.what());
  return exit_code_for(e);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos - start));
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return out;
}

int64_t parse_int(const std::string& option, const std::string& value) {
  size_t used = 0;
  int64_t v = -1;
  try {
    v = std::stoll(value, &used);
  } catch (...) {
    used = 0;
  }
  if (used != value.size() || value.empty() || v < 0)
    throw Error(ErrorCode::InvalidArgument,
                option + " expects a non-negative integer, got '" + value + "'");
  return v;
}

LogLevel parse_log_level(const std::string& value) {
  if (value == "error") return LogLevel::Error;
  if (value == "warning") return LogLevel::Warning;
  if (value == "info") return LogLevel::Info;
  if (value == "debug") return LogLevel::Debug;
  throw Error(ErrorCode::InvalidArgument,
              "--log-level expects error, warning, info or debug, got '" + value + "'");
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

const char* const kBackendOptionsHelp =
    "  --backend LIST          backends in priority order, comma-separated, e.g. example,cpu\n"
    "                          (default cpu); a device index may follow a name: opencl:1\n"
    "  --plugin PATH           load a backend plugin library (repeatable); the directories in\n"
    "                          QUILT_PLUGIN_PATH (':'-separated) are searched as well\n"
    "  --strict                no CPU fallback: fail, listing every node no listed backend\n"
    "                          claims, instead of running it on the CPU\n"
    "  --pin NODE=BACKEND      run node NODE on BACKEND whatever the priority list (repeatable;\n"
    "                          for debugging)\n"
    "  --no-cost-rule          honour every claim, even tiny islands between CPU nodes that the\n"
    "                          cost rule would keep on the CPU\n"
    "  --backend-option BACKEND:KEY=VALUE\n"
    "                          option for BACKEND's devices (repeatable), e.g.\n"
    "                          example:memory_limit=1048576\n";

namespace {

// [a-z0-9_]+, as quilt_backend_t::name.
bool valid_backend_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// "name" or "name:index".
bool valid_backend_entry(const std::string& entry) {
  const size_t colon = entry.find(':');
  if (colon == std::string::npos) return valid_backend_name(entry);
  const std::string index = entry.substr(colon + 1);
  return valid_backend_name(entry.substr(0, colon)) && !index.empty() &&
         std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

bool parse_backend_option(const std::vector<std::string>& args, size_t& i,
                          SessionOptions& options) {
  const std::string& a = args[i];
  auto value = [&]() -> std::string {
    if (i + 1 >= args.size()) throw Error(ErrorCode::InvalidArgument, a + " needs a value");
    return args[++i];
  };
  if (a == "--backend") {
    const std::string list = value();
    std::vector<std::string> backends = split(list, ',');
    for (const auto& b : backends)
      if (!valid_backend_entry(b))
        throw Error(ErrorCode::InvalidArgument,
                    "--backend '" + list + "': '" + b +
                        "' is not a backend name ([a-z0-9_]+, optionally :DEVICE_INDEX)");
    options.backends = std::move(backends);
  } else if (a == "--plugin") {
    std::string path = value();
    if (path.empty()) throw Error(ErrorCode::InvalidArgument, "--plugin needs a library path");
    options.plugins.push_back(std::move(path));
  } else if (a == "--strict") {
    options.cpu_fallback = false;
  } else if (a == "--no-cost-rule") {
    options.partition_cost_rule = false;
  } else if (a == "--pin") {
    // Node names may contain '='; backend names cannot, so the last '=' separates them.
    const std::string v = value();
    const size_t eq = v.rfind('=');
    if (eq == std::string::npos || eq == 0 || !valid_backend_entry(v.substr(eq + 1)))
      throw Error(ErrorCode::InvalidArgument,
                  "--pin expects NODE=BACKEND (e.g. conv1=example), got '" + v + "'");
    options.pinned_nodes[v.substr(0, eq)] = v.substr(eq + 1);
  } else if (a == "--backend-option") {
    const std::string v = value();
    const size_t colon = v.find(':');
    const size_t eq = v.find('=', colon == std::string::npos ? 0 : colon);
    if (colon == std::string::npos || eq == std::string::npos || eq == colon + 1 ||
        !valid_backend_name(v.substr(0, colon)))
      throw Error(ErrorCode::InvalidArgument,
                  "--backend-option expects BACKEND:KEY=VALUE (e.g. example:memory_limit=1048576)"
                  ", got '" +
                      v + "'");
    options.backend_options[v.substr(0, colon)][v.substr(colon + 1, eq - colon - 1)] =
        v.substr(eq + 1);
  } else {
    return false;
  }
  return true;
}

void check_backends(const SessionOptions& options) {
  const BackendInventory inv = discover_backends(options.plugins);
  auto check = [&](const std::string& entry, const std::string& where) {
    const std::string name = entry.substr(0, entry.find(':'));
    if (inv.find(name)) return;
    std::vector<std::string> known, failed;
    for (const auto& b : inv.backends) known.push_back(b.name);
    for (const auto& f : inv.failures) failed.push_back(f.library + " (" + f.reason + ")");
    std::string msg = where + ": unknown backend '" + name + "' (available: " + join(known, ", ");
    if (!failed.empty())
      msg += "; failed to load: " + join(failed, "; ");
    else if (options.plugins.empty())
      msg += "; a plugin is loaded with --plugin PATH";
    throw Error(ErrorCode::InvalidArgument, msg + ")");
  };
  for (const auto& b : options.backends) check(b, "--backend");
  for (const auto& [node, b] : options.pinned_nodes) check(b, "--pin " + node + "=" + b);
  for (const auto& [b, _] : options.backend_options) check(b, "--backend-option " + b);
}

}  // namespace quilt::cli
