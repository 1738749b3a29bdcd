#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>
#include <set>

#include "core/backend_registry.hpp"
#include "core/half.hpp"
#include "core/parse_int.hpp"
#include "tools/quilt/cli.hpp"
#include "tools/quilt/npy.hpp"

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

int64_t parse_int(const std::string& option, const std::string& value, int64_t max) {
  const auto v = parse_int64(value);
  if (!v || *v < 0 || *v > max)
    throw Error(ErrorCode::InvalidArgument,
                option + " expects " +
                    (max == std::numeric_limits<int64_t>::max()
                         ? std::string("a non-negative integer")
                         : "an integer between 0 and " + std::to_string(max)) +
                    ", got '" + value + "'");
  return *v;
}

int parse_threads(const std::string& value) {
  return static_cast<int>(parse_int("--threads", value, SessionOptions::kMaxThreads));
}

Progress::Progress(int64_t total)
    : total_(total),
      shown_(isatty(STDERR_FILENO) && total > 1),
      start_(std::chrono::steady_clock::now()) {}

void Progress::done(int64_t n) {
  if (!shown_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - start_ < std::chrono::seconds(1) || now - last_ < std::chrono::milliseconds(250))
    return;
  last_ = now;
  drawn_ = true;
  std::fprintf(stderr, "\rrun %lld/%lld", static_cast<long long>(n),
               static_cast<long long>(total_));
}

void Progress::finish() {
  if (drawn_) std::fprintf(stderr, "\r\033[K");
  drawn_ = false;
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

std::pair<std::string, std::string> key_value(const std::string& option, const std::string& v) {
  size_t eq = v.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
    throw Error(ErrorCode::InvalidArgument, option + " expects NAME=VALUE, got '" + v + "'");
  return {v.substr(0, eq), v.substr(eq + 1)};
}

const char* const kInputOptionsHelp =
    "  --input NAME=FILE.npy   value of input NAME (repeatable); inputs not given are\n"
    "                          generated: floats ~ N(0,1), integers in [0,10), seed 0\n"
    "                          (a sequence input: a directory of 0.npy, 1.npy, ...)\n"
    "  --dim NAME=VALUE        size of symbolic dim NAME for generated inputs (default 1)\n";

bool parse_input_option(const std::vector<std::string>& args, size_t& i, InputOptions& inputs) {
  const std::string& a = args[i];
  if (a != "--input" && a != "--dim") return false;
  if (i + 1 >= args.size()) throw Error(ErrorCode::InvalidArgument, a + " needs a value");
  auto [k, v] = key_value(a, args[++i]);
  if (inputs.files.count(k) || inputs.dims.count(k))
    throw Error(ErrorCode::InvalidArgument, a + " " + k + " is given twice");
  if (a == "--input")
    inputs.files[k] = v;
  else
    inputs.dims[k] = parse_int("--dim " + k, v);
  return true;
}

namespace {

Tensor generate(const ValueInfo& info, const std::map<std::string, int64_t>& dims,
                std::mt19937& rng) {
  std::vector<int64_t> shape;
  for (const auto& d : info.shape) {
    if (d.is_fixed()) {
      shape.push_back(d.value);
    } else {
      auto it = dims.find(d.symbol);
      shape.push_back(it == dims.end() ? 1 : it->second);
    }
  }
  Tensor t(info.dtype == DType::Undefined ? DType::Float32 : info.dtype, shape);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_int_distribution<int> small(0, 9);
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (t.dtype()) {
      case DType::Float32:
        t.data<float>()[i] = normal(rng);
        break;
      case DType::Float64:
        t.data<double>()[i] = normal(rng);
        break;
      case DType::Float16:
        t.data<uint16_t>()[i] = float_to_half(normal(rng));
        break;
      case DType::Int64:
        t.data<int64_t>()[i] = small(rng);
        break;
      case DType::Int32:
        t.data<int32_t>()[i] = small(rng);
        break;
      case DType::Bool:
        t.data<bool>()[i] = small(rng) < 5;
        break;
      case DType::UInt8:
        t.data<uint8_t>()[i] = static_cast<uint8_t>(small(rng));
        break;
      case DType::Int8:
        t.data<int8_t>()[i] = static_cast<int8_t>(small(rng));
        break;
      case DType::String:
        t.data<std::string>()[i] = std::to_string(small(rng));
        break;
      default:
        break;  // other integer types: zeros
    }
  }
  return t;
}

}  // namespace

namespace {

// A sequence from a directory of .npy files named 0.npy, 1.npy, ... (as --output-dir writes).
Value read_sequence_dir(const std::string& dir, const ValueInfo& info) {
  std::vector<Value> items;
  for (size_t i = 0;; ++i) {
    const auto file = std::filesystem::path(dir) / (std::to_string(i) + ".npy");
    if (!std::filesystem::exists(file)) break;
    items.push_back(read_npy(file.string()));
  }
  const DType dtype = info.element && info.element->kind == ValueKind::Tensor ? info.element->dtype
                                                                              : DType::Undefined;
  return Value::sequence(std::move(items), dtype);
}

// A value of a declared sequence or optional type for an input not given: a sequence of one
// generated tensor, an optional holding one. Maps are not generated.
Value generate_value(const ValueInfo& info, const std::map<std::string, int64_t>& dims,
                     std::mt19937& rng) {
  if (info.kind == ValueKind::Tensor) return generate(info, dims, rng);
  if (info.kind == ValueKind::Map || !info.element)
    throw Error(ErrorCode::InvalidArgument,
                "it is " + type_string(info) +
                    ", which quilt run cannot generate: give it with --input NAME=PATH");
  Value element = generate_value(*info.element, dims, rng);
  return info.kind == ValueKind::Sequence ? Value::sequence({element}) : Value::optional(element);
}

}  // namespace

ValueMap make_values(const Session& session, const InputOptions& options) {
  ValueMap values;
  InputOptions tensors = options;
  for (const auto& info : session.inputs()) {
    auto file = options.files.find(info.name);
    if (file == options.files.end() || info.kind == ValueKind::Tensor) continue;
    tensors.files.erase(info.name);
    if (info.kind == ValueKind::Sequence && std::filesystem::is_directory(file->second)) {
      values[info.name] = read_sequence_dir(file->second, info);
    } else if (info.kind == ValueKind::Optional && info.element &&
               info.element->kind == ValueKind::Tensor) {
      values[info.name] = Value::optional(read_npy(file->second));
    } else {
      throw Error(ErrorCode::InvalidArgument,
                  "input '" + info.name + "' is " + type_string(info) +
                      ": give a sequence as a directory of 0.npy, 1.npy, ... and an optional "
                      "tensor as a .npy file (maps cannot be given on the command line)");
    }
  }
  std::mt19937 rng(0);
  for (const auto& info : session.inputs())
    if (!values.count(info.name) && info.kind != ValueKind::Tensor) {
      try {
        values[info.name] = generate_value(info, options.dims, rng);
      } catch (const Error& e) {
        throw Error(e.code(), "generating input '" + info.name + "': " + e.what());
      }
    }
  for (const auto& [name, t] : make_inputs(session, tensors))
    if (!values.count(name)) values[name] = t;
  return values;
}

TensorMap make_inputs(const Session& session, const InputOptions& options) {
  std::set<std::string> symbols;
  for (const auto& info : session.inputs())
    for (const auto& d : info.shape)
      if (!d.is_fixed() && !d.symbol.empty()) symbols.insert(d.symbol);
  for (const auto& [name, _] : options.dims)
    if (!symbols.count(name)) {
      const std::vector<std::string> known(symbols.begin(), symbols.end());
      throw Error(ErrorCode::InvalidArgument,
                  "--dim " + name + ": no input has a symbolic dim named '" + name + "'" +
                      (known.empty() ? " (the model's inputs have none)"
                                     : " (symbolic dims: " + join(known, ", ") + ")"));
    }
  TensorMap inputs;
  for (const auto& [name, file] : options.files) inputs[name] = read_npy(file);
  std::mt19937 rng(0);
  for (const auto& info : session.inputs())
    if (!inputs.count(info.name) && info.kind == ValueKind::Tensor) {
      try {
        inputs[info.name] = generate(info, options.dims, rng);
      } catch (const Error& e) {
        throw Error(e.code(), "generating input '" + info.name + "': " + e.what());
      }
    }
  return inputs;
}

LatencyStats latency_stats(std::vector<double> samples) {
  LatencyStats s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  s.min = samples.front();
  s.median = samples[n / 2];
  s.p90 = samples[(9 * n + 9) / 10 - 1];  // ceil(0.9 n) - 1
  for (double v : samples) s.mean += v;
  s.mean /= static_cast<double>(n);
  return s;
}

const char* const kBackendOptionsHelp =
    "  --backend LIST          backends in priority order, comma-separated, e.g. example,cpu\n"
    "                          (default cpu); a device may follow a name, by index or by a\n"
    "                          part of its name: opencl:1, opencl:name=pthread\n"
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
    "                          example:memory_limit=1048576\n"
    "  --cache-dir DIR         executable cache: keep what backends that offer it (opencl)\n"
    "                          compile in DIR and load it there in later sessions instead of\n"
    "                          compiling (keyed by model, backend, device and options)\n";

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
  // NAME:INDEX or NAME:name=DEVICE_NAME_PART; the session checks that the device exists.
  const std::string device = entry.substr(colon + 1);
  if (device.rfind("name=", 0) == 0)
    return valid_backend_name(entry.substr(0, colon)) && device.size() > 5;
  return valid_backend_name(entry.substr(0, colon)) && !device.empty() &&
         std::all_of(device.begin(), device.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

bool parse_session_option(const std::vector<std::string>& args, size_t& i,
                          SessionOptions& options) {
  const std::string& a = args[i];
  if (a != "--optimization-level" && a != "--log-level" && a != "--precision") return false;
  if (i + 1 >= args.size()) throw Error(ErrorCode::InvalidArgument, a + " needs a value");
  const std::string& v = args[++i];
  if (a == "--optimization-level")
    options.optimization_level = static_cast<int>(parse_int(a, v));
  else if (a == "--precision")
    options.precision = v;  // checked by the session, which names the valid values
  else
    options.log_level = parse_log_level(v);
  return true;
}

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
                        "' is not a backend name ([a-z0-9_]+, optionally :DEVICE_INDEX or "
                        ":name=DEVICE_NAME_PART)");
    options.backends = std::move(backends);
  } else if (a == "--plugin") {
    std::string path = value();
    if (path.empty()) throw Error(ErrorCode::InvalidArgument, "--plugin needs a library path");
    options.plugins.push_back(std::move(path));
  } else if (a == "--strict") {
    options.cpu_fallback = false;
  } else if (a == "--no-cost-rule") {
    options.partition_cost_rule = false;
  } else if (a == "--cache-dir") {
    options.cache_dir = value();
    if (options.cache_dir.empty())
      throw Error(ErrorCode::InvalidArgument, "--cache-dir needs a directory");
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
  std::vector<std::string> named = options.backends;
  for (const auto& [node, b] : options.pinned_nodes) named.push_back(b);
  for (const auto& [b, _] : options.backend_options) named.push_back(b);
  const BackendInventory inv = discover_backends_for(named, options.plugins);
  for (const auto& f : inv.failures)
    if (std::find(options.plugins.begin(), options.plugins.end(), f.library) !=
        options.plugins.end())
      throw Error(ErrorCode::InvalidArgument,
                  "--plugin " + f.library + ": not loaded: " + f.reason);
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

std::string cache_summary(const PlanReport& plan, const std::string& cache_dir) {
  if (cache_dir.empty()) return "";
  int loaded = 0, stored = 0, compiled = 0;
  for (const auto& p : plan.patches) {
    loaded += p.cache == "loaded";
    stored += p.cache == "stored";
    compiled += p.cache == "compiled";
  }
  return "executable cache: " + std::to_string(loaded) + " loaded, " + std::to_string(stored) +
         " compiled and stored, " + std::to_string(compiled) + " compiled, not stored (" +
         cache_dir + ")";
}

}  // namespace quilt::cli
