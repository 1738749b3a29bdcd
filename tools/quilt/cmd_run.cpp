// quilt run MODEL: run a model on inputs from .npy files or generated ones.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/json.hpp"
#include "tools/quilt/cli.hpp"
#include "tools/quilt/npy.hpp"
#include "tools/quilt/onnx_case.hpp"

namespace quilt::cli {
namespace {

const char* kRunHelp =
    "usage: quilt run MODEL [options]\n"
    "\n"
    "Runs MODEL (an .onnx file) and prints a summary of every output.\n"
    "\n"
    "options:\n";

const char* kRunOptionsHelp =
    "  --output-dir DIR        write each output to DIR/<output name>.npy (a sequence of\n"
    "                          tensors: a directory of 0.npy, 1.npy, ...; maps and\n"
    "                          sequences of maps: <output name>.json); '/', '%' and\n"
    "                          control characters in a name are written as %XX (a/b ->\n"
    "                          a%2Fb.npy), and the names . and .. as %2E and %2E%2E\n"
    "  --iterations N          run N times and report latency (default 1)\n"
    "  --threads N             CPU worker threads (default: one per core)\n"
    "  --optimization-level N  0 = as written, 1 = constant folding and pattern rewrites\n"
    "                          (default 1)\n"
    "  --precision P           fp32 (default) or bf16: the CPU's GEMM and convolution with\n"
    "                          bfloat16 operands, float32 accumulation (needs AVX512-BF16;\n"
    "                          `quilt devices` lists what this CPU accelerates)\n"
    "  --log-level LEVEL       error, warning, info or debug (default warning)\n"
    "  --help                  show this help\n"
    "\n"
    "backend selection:\n";

const char* kRunExitCodes =
    "\n"
    "Exit codes: 0 ok; 1 the model uses something Quilt does not support, or a run failed;\n"
    "2 bad usage, a missing or malformed model or input file, a wrong input name, dtype or\n"
    "shape, an unknown backend, an --output-dir that cannot be created.\n"
    "On a terminal, runs that take over a second show their progress on stderr.\n";

struct RunArgs {
  std::string model;
  InputOptions inputs;
  std::string output_dir;
  int64_t iterations = 1;
  SessionOptions options;
};

RunArgs parse(const std::vector<std::string>& args) {
  RunArgs r;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw Error(ErrorCode::InvalidArgument, a + " needs a value");
      return args[++i];
    };
    if (parse_input_option(args, i, r.inputs) || parse_backend_option(args, i, r.options) ||
        parse_session_option(args, i, r.options)) {
      continue;
    } else if (a == "--output-dir") {
      r.output_dir = value();
    } else if (a == "--iterations") {
      r.iterations = parse_int(a, value());
      if (r.iterations < 1) throw Error(ErrorCode::InvalidArgument, "--iterations must be >= 1");
    } else if (a == "--threads") {
      r.options.threads = parse_threads(value());
    } else if (!a.empty() && a[0] == '-') {
      throw Error(ErrorCode::InvalidArgument, "unknown option '" + a + "' for quilt run");
    } else if (r.model.empty()) {
      r.model = a;
    } else {
      throw Error(ErrorCode::InvalidArgument,
                  "unexpected argument '" + a + "'; quilt run takes one MODEL");
    }
  }
  if (r.model.empty()) throw Error(ErrorCode::InvalidArgument, "quilt run needs a MODEL");
  return r;
}

// The file name of an output, without its extension: distinct names give distinct files, none of
// which leaves DIR.
std::string output_file_name(const std::string& name) {
  if (name == "." || name == "..") return name == "." ? "%2E" : "%2E%2E";
  std::string out;
  for (unsigned char c : name) {
    if (c == '/' || c == '%' || c < 0x20 || c == 0x7f) {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02X", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// A JSON number or string for element i of t (maps' values and keys).
std::string json_element(const Tensor& t, int64_t i) {
  if (t.dtype() == DType::String) return json_string(t.data<std::string>()[i]);
  const double v = element_as_double(t, i);
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Maps (and sequences of them, and optionals) as JSON: {"key": value, ...}, keys as strings.
std::string to_json(const Value& v) {
  switch (v.kind()) {
    case ValueKind::Map: {
      std::string out = "{";
      for (int64_t i = 0; i < v.keys().numel(); ++i) {
        const std::string key = json_element(v.keys(), i);
        out += (i ? ", " : "") + (key[0] == '"' ? key : "\"" + key + "\"") + ": " +
               json_element(v.values(), i);
      }
      return out + "}";
    }
    case ValueKind::Sequence: {
      std::string out = "[";
      for (size_t i = 0; i < v.items().size(); ++i)
        out += (i ? ",\n " : "") + to_json(v.items()[i]);
      return out + "]";
    }
    case ValueKind::Optional:
      return v.has_element() ? to_json(v.element()) : "null";
    case ValueKind::Tensor: {
      const Tensor& t = v.tensor();
      std::string out = "{\"dtype\": \"" + std::string(dtype_name(t.dtype())) + "\", \"shape\": [";
      for (size_t d = 0; d < t.shape().size(); ++d)
        out += (d ? ", " : "") + std::to_string(t.shape()[d]);
      out += "], \"data\": [";
      for (int64_t i = 0; i < t.numel(); ++i) out += (i ? ", " : "") + json_element(t, i);
      return out + "]}";
    }
  }
  return "null";
}

// True if v holds a map anywhere (then it is written as JSON).
bool holds_map(const Value& v) {
  if (v.kind() == ValueKind::Map) return true;
  if (v.kind() == ValueKind::Sequence)
    return std::any_of(v.items().begin(), v.items().end(), holds_map);
  return v.kind() == ValueKind::Optional && v.has_element() && holds_map(v.element());
}

// Writes an output under DIR with the stem `stem`: a tensor as stem.npy, a sequence of tensors
// as a directory stem/ of 0.npy, 1.npy, ..., anything holding a map (ZipMap's list of maps) or
// an empty optional as stem.json, an optional's element as the element. Returns the path.
std::string write_value(const Value& v, const std::filesystem::path& dir, const std::string& stem) {
  if (v.is_tensor()) {
    write_npy(v.tensor(), (dir / (stem + ".npy")).string());
    return (dir / (stem + ".npy")).string();
  }
  if (v.kind() == ValueKind::Optional && v.has_element())
    return write_value(v.element(), dir, stem);
  if (v.kind() == ValueKind::Sequence && !holds_map(v)) {
    const auto sub = dir / stem;
    std::filesystem::create_directories(sub);
    for (size_t i = 0; i < v.items().size(); ++i) write_value(v.items()[i], sub, std::to_string(i));
    return sub.string();
  }
  const auto path = dir / (stem + ".json");
  std::FILE* f = std::fopen(path.string().c_str(), "w");
  if (!f) throw Error(ErrorCode::Io, "cannot write '" + path.string() + "'");
  const std::string text = to_json(v) + "\n";
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok)
    throw Error(ErrorCode::Io, "cannot write '" + path.string() + "'");
  return path.string();
}

void summarise(const std::string& name, const Tensor& t);

// A sequence, map or optional: its type and size, and its first elements.
void summarise(const std::string& name, const Value& v) {
  if (v.is_tensor()) return summarise(name, v.tensor());
  std::printf("  %s: %s", name.c_str(), v.type_string().c_str());
  if (v.kind() == ValueKind::Optional) {
    if (!v.has_element()) return (void)std::printf("  (none)\n");
    std::printf("  holding:\n");
    return summarise(name + " element", v.element());
  }
  if (v.kind() == ValueKind::Map) {
    std::string text = to_json(v);
    if (text.size() > 200) text = text.substr(0, 200) + " ...";
    return (void)std::printf("  %lld keys\n    %s\n", static_cast<long long>(v.keys().numel()),
                             text.c_str());
  }
  std::printf("  %zu values\n", v.items().size());
  for (size_t i = 0; i < v.items().size() && i < 3; ++i)
    summarise(name + "[" + std::to_string(i) + "]", v.items()[i]);
  if (v.items().size() > 3) std::printf("    ...\n");
}

void summarise(const std::string& name, const Tensor& t) {
  std::printf("  %s: %s %s", name.c_str(), dtype_name(t.dtype()), to_string(t.shape()).c_str());
  if (t.dtype() == DType::String && t.numel() > 0) {
    std::printf("\n    [");
    for (int64_t i = 0; i < std::min<int64_t>(t.numel(), 8); ++i)
      std::printf("%s\"%s\"", i ? ", " : "", t.data<std::string>()[i].c_str());
    std::printf("%s]\n", t.numel() > 8 ? ", ..." : "");
  } else if (t.numel() > 0) {
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      double v = element_as_double(t, i);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      sum += v;
    }
    std::printf("  min %.6g  max %.6g  mean %.6g\n    [", lo, hi,
                sum / static_cast<double>(t.numel()));
    for (int64_t i = 0; i < std::min<int64_t>(t.numel(), 8); ++i)
      std::printf("%s%.6g", i ? ", " : "", element_as_double(t, i));
    std::printf("%s]\n", t.numel() > 8 ? ", ..." : "");
  } else {
    std::printf("  (empty)\n");
  }
}

}  // namespace

int cmd_run(const std::vector<std::string>& args) {
  if (std::find(args.begin(), args.end(), "--help") != args.end()) {
    std::fputs(kRunHelp, stdout);
    std::fputs(kInputOptionsHelp, stdout);
    std::fputs(kRunOptionsHelp, stdout);
    std::fputs(kBackendOptionsHelp, stdout);
    std::fputs(kRunExitCodes, stdout);
    return 0;
  }
  try {
    RunArgs r = parse(args);
    check_backends(r.options);
    if (!r.output_dir.empty()) {  // before the run, which may be long
      std::error_code ec;
      std::filesystem::create_directories(r.output_dir, ec);
      std::error_code dir_ec;
      if (ec || !std::filesystem::is_directory(r.output_dir, dir_ec))
        throw Error(ErrorCode::Io, "--output-dir '" + r.output_dir + "' cannot be created: " +
                                       (ec ? ec.message() : "a file of that name exists"));
    }
    Session session(r.model, r.options);
    const ValueMap inputs = make_values(session, r.inputs);
    std::vector<double> ms;
    ValueMap outputs;
    Progress progress(r.iterations);
    for (int64_t i = 0; i < r.iterations; ++i) {
      auto start = std::chrono::steady_clock::now();
      outputs = session.run_values(inputs);
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
      progress.done(i + 1);
    }
    progress.finish();
    if (const std::string cache = cache_summary(session.plan(), r.options.cache_dir);
        !cache.empty())
      std::printf("%s\n", cache.c_str());
    std::printf("outputs:\n");
    for (const auto& info : session.outputs()) summarise(info.name, outputs.at(info.name));
    if (!r.output_dir.empty()) {
      for (const auto& [name, v] : outputs) write_value(v, r.output_dir, output_file_name(name));
      std::printf("wrote %zu output file%s to %s\n", outputs.size(), outputs.size() == 1 ? "" : "s",
                  r.output_dir.c_str());
    }
    const LatencyStats stats = latency_stats(ms);
    if (ms.size() == 1)
      std::printf("latency: %.3f ms (1 run)\n", ms[0]);
    else
      std::printf(
          "latency: median %.3f ms, min %.3f ms, mean %.3f ms over %zu runs (first %.3f ms)\n",
          stats.median, stats.min, stats.mean, ms.size(), ms[0]);
    return 0;
  } catch (const Error& e) {
    return report(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quilt: %s\n", e.what());
    return 1;
  }
}

}  // namespace quilt::cli
