// Runs Quilt's op cases (ONNX backend-test layout) in-process at each optimization level and
// prints one line per failing case, then "N passed, N failed". Exits 1 if any case failed.
// (`quilt test-onnx` runs the same cases with process isolation and the suite's classification.)
// A case directory may hold a `rewrites` file, one "COUNT PATTERN" line per pattern the level-1
// passes must rewrite (core/optimize/; none at level 0): the plan report must list exactly those.
//
//   case_runner [--filter REGEX] [--opt-levels 0,1] [--backend LIST] PATH...
//
// --backend opencl,cpu runs each case with that backend priority list (plugins next to libquilt
// are found by the library itself); nodes no listed backend claims run on the CPU.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "tools/quilt/onnx_case.hpp"

using namespace quilt;
using namespace quilt::cli;

namespace {

// Sorted "COUNT PATTERN" lines, one string.
std::string joined(std::vector<std::string> lines) {
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const auto& l : lines) out += l + "; ";
  return out;
}

std::string rewrites_text(const std::vector<PlanReport::Rewrite>& rewrites) {
  std::vector<std::string> lines;
  for (const auto& r : rewrites) lines.push_back(std::to_string(r.count) + " " + r.pattern);
  return joined(lines);
}

// What the plan at this level must say the passes rewrote, or nullopt when the case does not say.
std::optional<std::string> expected_rewrites(const OnnxCase& c, int level) {
  std::ifstream in(std::filesystem::path(c.model).parent_path() / "rewrites");
  if (!in) return std::nullopt;
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && level > 0) lines.push_back(line);
  return joined(lines);
}

// "" when the plan's rewrites are those expected, else what differs.
std::string check_rewrites(const OnnxCase& c, const SessionOptions& options) {
  const std::optional<std::string> want = expected_rewrites(c, options.optimization_level);
  if (!want) return "";
  try {
    const std::string got = rewrites_text(Session(c.model, options).plan().rewrites);
    if (got == *want) return "";
    return "rewrites: want [" + *want + "], plan says [" + got + "]";
  } catch (const Error& e) {
    return std::string("rewrites: ") + e.what();
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::regex filter(".*");
  std::vector<int> levels = {0, 1};
  std::vector<std::string> paths, backends = {"cpu"};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--filter" && i + 1 < argc) {
      filter = std::regex(argv[++i]);
    } else if (a == "--opt-levels" && i + 1 < argc) {
      levels.clear();
      for (char c : std::string(argv[++i]))
        if (c >= '0' && c <= '9') levels.push_back(c - '0');
    } else if (a == "--backend" && i + 1 < argc) {
      backends.clear();
      std::string list = argv[++i];
      for (size_t start = 0; start <= list.size();) {
        size_t end = std::min(list.find(',', start), list.size());
        if (end > start) backends.push_back(list.substr(start, end - start));
        start = end + 1;
      }
    } else {
      paths.push_back(a);
    }
  }
  std::vector<OnnxCase> cases;
  try {
    cases = find_cases(paths);
  } catch (const Error& e) {
    std::fprintf(stderr, "case_runner: %s\n", e.what());
    return 2;
  }
  // With a device backend listed, single-node cases must really run there: no cost rule.
  const bool device_backends = backends != std::vector<std::string>{"cpu"};
  int passed = 0, failed = 0, on_device = 0;
  for (const auto& c : cases) {
    if (!std::regex_search(c.name, filter)) continue;
    std::string problem;
    for (int level : levels) {
      SessionOptions options;
      options.optimization_level = level;
      options.threads = 2;
      options.backends = backends;
      options.partition_cost_rule = !device_backends;
      const CaseResult r = run_case(c, options);
      if (r.status != CaseStatus::Pass) {
        problem = "(opt level " + std::to_string(level) + ") " + case_status_name(r.status) + ": " +
                  r.message;
        break;
      }
      if (std::string bad = check_rewrites(c, options); !bad.empty()) {
        problem = "(opt level " + std::to_string(level) + ") " + bad;
        break;
      }
    }
    if (device_backends && problem.empty()) {
      SessionOptions options;
      options.backends = backends;
      options.partition_cost_rule = false;
      try {
        const Session session(c.model, options);
        const PlanReport& plan = session.plan();
        on_device +=
            std::any_of(plan.patches.begin(), plan.patches.end(),
                        [](const PlanReport::Patch& p) { return p.backend.rfind("cpu", 0) != 0; });
      } catch (const Error&) {
      }
    }
    if (problem.empty()) {
      ++passed;
    } else {
      ++failed;
      std::printf("FAIL %s: %s\n", c.name.c_str(), problem.c_str());
    }
  }
  if (device_backends)
    std::printf("%d passing cases ran nodes on a backend other than the CPU\n", on_device);
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
