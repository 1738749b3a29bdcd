// quilt bench MODEL: session-creation time, latency over timed runs after a warm-up, peak
// resident memory and, with --profile, a Chrome trace of one more run (RunProfile spans, a lane
// per device) that Perfetto and chrome://tracing open.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>

#include "core/json.hpp"
#include "tools/quilt/cli.hpp"

namespace quilt::cli {
namespace {

const char* kBenchHelp =
    "usage: quilt bench MODEL [options]\n"
    "\n"
    "Creates a session for MODEL (an .onnx file), runs it --warmup times untimed, then\n"
    "--iterations times timed, and prints the session-creation time, median / p90 / min / mean\n"
    "latency, the peak resident memory of the process (VmHWM) and the plan's patches per\n"
    "backend and transfers.\n"
    "\n"
    "options:\n";

const char* kBenchOptionsHelp =
    "  --iterations N          timed runs (default 20, at least 1)\n"
    "  --warmup N              untimed runs before them (default 3)\n"
    "  --threads N             CPU worker threads (default: one per core)\n"
    "  --profile FILE          after the timed runs, profile one more run and write it to FILE\n"
    "                          as a Chrome trace (open in https://ui.perfetto.dev or\n"
    "                          chrome://tracing): a lane per device, patch, node and transfer\n"
    "                          spans\n"
    "  --json                  print the results as one JSON object\n"
    "  --optimization-level N  0 = as written, 1 = constant folding and pattern rewrites\n"
    "                          (default 1)\n"
    "  --precision P           fp32 (default) or bf16: the CPU's GEMM and convolution with\n"
    "                          bfloat16 operands, float32 accumulation (needs AVX512-BF16;\n"
    "                          `quilt devices` lists what this CPU accelerates)\n"
    "  --log-level LEVEL       error, warning, info or debug (default warning)\n"
    "  --help                  show this help\n"
    "\n"
    "backend selection:\n";

const char* kBenchExitCodes =
    "\n"
    "Exit codes: 0 ok; 1 the session could not be created or a run failed; 2 bad usage, a\n"
    "missing or malformed model or input file, an unknown backend.\n";

struct BenchArgs {
  std::string model;
  InputOptions inputs;
  int64_t iterations = 20;
  int64_t warmup = 3;
  std::string profile;
  bool json = false;
  SessionOptions options;
};

BenchArgs parse(const std::vector<std::string>& args) {
  BenchArgs r;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw Error(ErrorCode::InvalidArgument, a + " needs a value");
      return args[++i];
    };
    if (parse_input_option(args, i, r.inputs) || parse_backend_option(args, i, r.options) ||
        parse_session_option(args, i, r.options)) {
      continue;
    } else if (a == "--iterations") {
      r.iterations = parse_int(a, value());
      if (r.iterations < 1)
        throw Error(ErrorCode::InvalidArgument, "--iterations must be >= 1, got 0");
    } else if (a == "--warmup") {
      r.warmup = parse_int(a, value());
    } else if (a == "--threads") {
      r.options.threads = parse_threads(value());
    } else if (a == "--profile") {
      r.profile = value();
      if (r.profile.empty()) throw Error(ErrorCode::InvalidArgument, "--profile needs a file name");
    } else if (a == "--json") {
      r.json = true;
    } else if (!a.empty() && a[0] == '-') {
      throw Error(ErrorCode::InvalidArgument, "unknown option '" + a + "' for quilt bench");
    } else if (r.model.empty()) {
      r.model = a;
    } else {
      throw Error(ErrorCode::InvalidArgument,
                  "unexpected argument '" + a + "'; quilt bench takes one MODEL");
    }
  }
  if (r.model.empty()) throw Error(ErrorCode::InvalidArgument, "quilt bench needs a MODEL");
  return r;
}

std::string fixed(double v, int digits = 3) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// Peak resident set size of this process in MiB (VmHWM in /proc/self/status); nullopt where
// the file or the line is missing (not Linux).
std::optional<double> peak_rss_mib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // kB
  return std::nullopt;
}

// Patches per backend, in the order they first appear in the plan.
std::vector<std::pair<std::string, int>> patches_per_backend(const PlanReport& plan) {
  std::vector<std::pair<std::string, int>> out;
  for (const auto& p : plan.patches) {
    auto it =
        std::find_if(out.begin(), out.end(), [&](const auto& e) { return e.first == p.backend; });
    if (it == out.end())
      out.emplace_back(p.backend, 1);
    else
      ++it->second;
  }
  return out;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f || !f.write(text.data(), static_cast<std::streamsize>(text.size())) || !f.flush())
    throw Error(ErrorCode::Io, "--profile '" + path + "': cannot write the file");
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

int cmd_bench(const std::vector<std::string>& args) {
  if (std::find(args.begin(), args.end(), "--help") != args.end()) {
    std::fputs(kBenchHelp, stdout);
    std::fputs(kInputOptionsHelp, stdout);
    std::fputs(kBenchOptionsHelp, stdout);
    std::fputs(kBackendOptionsHelp, stdout);
    std::fputs(kBenchExitCodes, stdout);
    return 0;
  }
  try {
    const BenchArgs r = parse(args);
    check_backends(r.options);
    auto start = std::chrono::steady_clock::now();
    const Session session(r.model, r.options);
    const double creation_ms = ms_since(start);
    const ValueMap inputs = make_values(session, r.inputs);

    Progress progress(r.warmup + r.iterations);
    for (int64_t i = 0; i < r.warmup; ++i) {
      session.run_values(inputs);
      progress.done(i + 1);
    }
    std::vector<double> ms;
    for (int64_t i = 0; i < r.iterations; ++i) {
      start = std::chrono::steady_clock::now();
      session.run_values(inputs);
      ms.push_back(ms_since(start));
      progress.done(r.warmup + i + 1);
    }
    progress.finish();
    const LatencyStats stats = latency_stats(ms);

    size_t profile_events = 0;
    if (!r.profile.empty()) {
      RunProfile profile;
      session.run_values(inputs, {}, &profile);
      write_file(r.profile, profile.to_chrome_trace("quilt " + r.model));
      profile_events = profile.spans.size();
    }
    const std::optional<double> peak = peak_rss_mib();
    const PlanReport& plan = session.plan();
    const auto per_backend = patches_per_backend(plan);

    if (r.json) {
      std::string patches;
      for (const auto& [b, n] : per_backend)
        patches += (patches.empty() ? "" : ", ") + json_string(b) + ": " + std::to_string(n);
      std::string out = "{\"model\": " + json_string(r.model);
      out += ", \"threads\": " + (r.options.threads ? std::to_string(r.options.threads) : "null");
      out += ", \"session_creation_ms\": " + fixed(creation_ms);
      out += ", \"warmup\": " + std::to_string(r.warmup);
      out += ", \"iterations\": " + std::to_string(r.iterations);
      out += ", \"latency_ms\": {\"median\": " + fixed(stats.median, 4) +
             ", \"p90\": " + fixed(stats.p90, 4) + ", \"min\": " + fixed(stats.min, 4) +
             ", \"mean\": " + fixed(stats.mean, 4) + "}";
      out += ", \"peak_memory_mib\": " + (peak ? fixed(*peak, 1) : "null");
      out += ", \"plan\": {\"patches\": {" + patches +
             "}, \"transfers\": " + std::to_string(plan.transfers.size()) + "}";
      out += ", \"profile\": " + (r.profile.empty() ? "null" : json_string(r.profile));
      out += ", \"cache\": " + json_string(cache_summary(plan, r.options.cache_dir));
      std::printf("%s}\n", out.c_str());
      return 0;
    }
    std::vector<std::string> patches;
    for (const auto& [b, n] : per_backend) patches.push_back(b + " " + std::to_string(n));
    std::printf("model: %s\n", r.model.c_str());
    std::printf("plan: %zu patch%s (%s), %zu transfer%s\n", plan.patches.size(),
                plan.patches.size() == 1 ? "" : "es", join(patches, ", ").c_str(),
                plan.transfers.size(), plan.transfers.size() == 1 ? "" : "s");
    std::printf("session creation: %.3f ms\n", creation_ms);
    if (const std::string cache = cache_summary(plan, r.options.cache_dir); !cache.empty())
      std::printf("%s\n", cache.c_str());
    std::printf("warm-up: %lld run%s\n", static_cast<long long>(r.warmup),
                r.warmup == 1 ? "" : "s");
    std::printf("latency: median %.4f ms, p90 %.4f ms, min %.4f ms, mean %.4f ms over %zu run%s\n",
                stats.median, stats.p90, stats.min, stats.mean, ms.size(),
                ms.size() == 1 ? "" : "s");
    if (peak)
      std::printf("peak memory: %.1f MiB (VmHWM)\n", *peak);
    else
      std::printf("peak memory: unknown (no VmHWM in /proc/self/status)\n");
    if (!r.profile.empty())
      std::printf("profile: %zu spans written to %s\n", profile_events, r.profile.c_str());
    return 0;
  } catch (const Error& e) {
    return report(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quilt: %s\n", e.what());
    return 1;
  }
}

}  // namespace quilt::cli
