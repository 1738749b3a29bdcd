// quilt run MODEL: run a model on inputs from .npy files or generated ones.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

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
    "  --output-dir DIR        write each output to DIR/<output name>.npy; '/', '%' and\n"
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

// The file name of an output: distinct names give distinct files, none of which leaves DIR.
std::string output_file_name(const std::string& name) {
  if (name == "." || name == "..") return name == "." ? "%2E.npy" : "%2E%2E.npy";
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
  return out + ".npy";
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
    const TensorMap inputs = make_inputs(session, r.inputs);
    std::vector<double> ms;
    TensorMap outputs;
    Progress progress(r.iterations);
    for (int64_t i = 0; i < r.iterations; ++i) {
      auto start = std::chrono::steady_clock::now();
      outputs = session.run(inputs);
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
      for (const auto& [name, t] : outputs)
        write_npy(t, (std::filesystem::path(r.output_dir) / output_file_name(name)).string());
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
