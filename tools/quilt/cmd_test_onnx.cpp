// quilt test-onnx: runs the ONNX backend test suite (or any cases in its layout), one child
// process per case so that a crash or a hang is counted instead of stopping the run.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "core/json.hpp"
#include "tools/quilt/cli.hpp"
#include "tools/quilt/onnx_case.hpp"

namespace quilt::cli {
namespace {

const char* kHelp =
    "usage: quilt test-onnx PATH... [options]\n"
    "\n"
    "Runs test cases in the ONNX backend-test layout (model.onnx + test_data_set_N/*.pb, or the\n"
    "light_*.onnx models) and classifies each: pass, fail (wrong answer: the worst element and\n"
    "its index), unsupported (an op or type Quilt does not implement), error, crash or timeout.\n"
    "Each case runs in its own process. PATH is a case, a directory of cases (e.g. .../data/node)\n"
    "or a directory of such directories (e.g. .../onnx/backend/test/data).\n"
    "\n"
    "options:\n"
    "  --filter REGEX        only cases whose name (<set>/<case>) matches\n"
    "  --json FILE           write {\"summary\": ..., \"cases\": [...]} to FILE\n"
    "  --expect FILE         a manifest of cases expected to pass: exit 1 if one of them does\n"
    "                        not pass (or if any case fails, errs or crashes); print the\n"
    "                        cases that pass but are not listed\n"
    "  --write-manifest FILE write the names of the passing cases to FILE\n"
    "  --timeout SECONDS     time limit per case (default 120)\n"
    "  --jobs N              cases run at once (default: one per core)\n"
    "  --threads N           CPU threads per case (default 1)\n"
    "  --verbose             print every case, not only the ones that do not pass\n"
    "\n"
    "Tolerance: |got - expected| <= atol + rtol * |expected| with the suite's rtol 1e-3 and\n"
    "atol 1e-7 (a case directory may carry its own in a `tolerance` file); integers and bools\n"
    "exactly. Cases with random-number ops are checked by dtype, shape and finiteness.\n"
    "Exit code: 0 when no case fails, errors, crashes or times out (or, with --expect, when\n"
    "every listed case passes); 1 otherwise; 2 on bad usage.\n"
    "\n"
    "backend selection:\n";

struct Args {
  std::vector<std::string> paths;
  std::string filter, json, expect, write_manifest;
  SessionOptions options;  // backend selection (parse_backend_option)
  double timeout = 120;
  int jobs = 0, threads = 1;
  bool verbose = false;
};

Args parse(const std::vector<std::string>& args) {
  Args r;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw Error(ErrorCode::InvalidArgument, a + " needs a value");
      return args[++i];
    };
    if (parse_backend_option(args, i, r.options))
      continue;
    else if (a == "--filter")
      r.filter = value();
    else if (a == "--json")
      r.json = value();
    else if (a == "--expect")
      r.expect = value();
    else if (a == "--write-manifest")
      r.write_manifest = value();
    else if (a == "--timeout")
      r.timeout = static_cast<double>(parse_int(a, value(), 1000000));
    else if (a == "--jobs")
      r.jobs = static_cast<int>(parse_int(a, value(), 4096));
    else if (a == "--threads")
      r.threads = parse_threads(value());
    else if (a == "--verbose")
      r.verbose = true;
    else if (!a.empty() && a[0] == '-')
      throw Error(ErrorCode::InvalidArgument, "unknown option '" + a + "' for quilt test-onnx");
    else
      r.paths.push_back(a);
  }
  if (r.paths.empty())
    throw Error(ErrorCode::InvalidArgument, "quilt test-onnx needs at least one PATH");
  if (r.jobs <= 0) r.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return r;
}

// A case running in a child process.
struct Running {
  size_t index;
  pid_t pid;
  int fd;
  std::string output;
  std::chrono::steady_clock::time_point start;
};

CaseResult parse_child(const std::string& text, int wait_status, double seconds) {
  CaseResult r;
  r.seconds = seconds;
  if (WIFSIGNALED(wait_status)) {
    r.status = CaseStatus::Crash;
    r.message = std::string("killed by signal ") + std::to_string(WTERMSIG(wait_status)) + " (" +
                strsignal(WTERMSIG(wait_status)) + ")";
    return r;
  }
  const size_t tab = text.find('\t');
  if (tab == std::string::npos) {
    r.status = CaseStatus::Crash;
    r.message = "the case's process exited with code " + std::to_string(WEXITSTATUS(wait_status)) +
                " without a result";
    return r;
  }
  const std::string status = text.substr(0, tab);
  for (CaseStatus s :
       {CaseStatus::Pass, CaseStatus::Fail, CaseStatus::Unsupported, CaseStatus::Error})
    if (status == case_status_name(s)) r.status = s;
  r.message = text.substr(tab + 1);
  return r;
}

std::vector<CaseResult> run_isolated(const std::vector<OnnxCase>& cases, const Args& args,
                                     const SessionOptions& options) {
  std::vector<CaseResult> results(cases.size());
  std::vector<Running> running;
  size_t next = 0, done = 0;
  std::fflush(stdout);
  std::fflush(stderr);
  while (done < cases.size()) {
    while (next < cases.size() && static_cast<int>(running.size()) < args.jobs) {
      int fds[2];
      if (pipe(fds) != 0) throw Error(ErrorCode::Runtime, "pipe() failed");
      const pid_t pid = fork();
      if (pid < 0) throw Error(ErrorCode::Runtime, "fork() failed");
      if (pid == 0) {  // child: run one case, report "status\tmessage" on the pipe
        close(fds[0]);
        const CaseResult r = run_case(cases[next], options);
        const std::string line = std::string(case_status_name(r.status)) + "\t" + r.message;
        size_t off = 0;
        while (off < line.size()) {
          const ssize_t n = write(fds[1], line.data() + off, line.size() - off);
          if (n <= 0) break;
          off += static_cast<size_t>(n);
        }
        _exit(0);
      }
      close(fds[1]);
      running.push_back({next, pid, fds[0], "", std::chrono::steady_clock::now()});
      ++next;
    }
    std::vector<pollfd> pfds;
    for (const auto& r : running) pfds.push_back({r.fd, POLLIN, 0});
    poll(pfds.data(), pfds.size(), 200);
    for (size_t i = 0; i < running.size();) {
      Running& r = running[i];
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - r.start).count();
      bool finished = false;
      if (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[4096];
        const ssize_t n = read(r.fd, buf, sizeof buf);
        if (n > 0) {
          r.output.append(buf, static_cast<size_t>(n));
        } else {
          int status = 0;
          waitpid(r.pid, &status, 0);
          results[r.index] = parse_child(r.output, status, elapsed);
          finished = true;
        }
      } else if (elapsed > args.timeout) {
        kill(r.pid, SIGKILL);
        waitpid(r.pid, nullptr, 0);
        results[r.index] = {
            CaseStatus::Timeout,
            "did not finish within " + std::to_string(static_cast<int>(args.timeout)) + " s",
            elapsed};
        finished = true;
      }
      if (finished) {
        close(r.fd);
        const OnnxCase& c = cases[r.index];
        const CaseResult& res = results[r.index];
        if (args.verbose || res.status != CaseStatus::Pass)
          std::printf("%-11s %s%s%s\n", case_status_name(res.status), c.name.c_str(),
                      res.message.empty() ? "" : ": ", res.message.substr(0, 400).c_str());
        std::fflush(stdout);
        ++done;
        running.erase(running.begin() + static_cast<long>(i));
        pfds.erase(pfds.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
  }
  return results;
}

std::set<std::string> read_manifest(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Error(ErrorCode::Io, "cannot read manifest '" + path + "'");
  std::set<std::string> names;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    names.insert(line);
  }
  return names;
}

}  // namespace

int cmd_test_onnx(const std::vector<std::string>& argv) {
  if (std::find(argv.begin(), argv.end(), "--help") != argv.end()) {
    std::fputs(kHelp, stdout);
    std::fputs(kBackendOptionsHelp, stdout);
    return 0;
  }
  try {
    const Args args = parse(argv);
    std::vector<OnnxCase> cases = find_cases(args.paths);
    if (!args.filter.empty()) {
      std::regex re;
      try {
        re = std::regex(args.filter);
      } catch (const std::regex_error&) {
        throw Error(ErrorCode::InvalidArgument,
                    "--filter '" + args.filter + "' is not a valid regex");
      }
      std::erase_if(cases, [&](const OnnxCase& c) { return !std::regex_search(c.name, re); });
    }
    std::set<std::string> expected;
    if (!args.expect.empty()) expected = read_manifest(args.expect);
    // Backends are not looked up here (check_backends): loading a plugin before fork() would
    // hand every case a copy of a driver initialised in another process.
    SessionOptions options = args.options;
    options.threads = args.threads;
    const std::string backend = join(args.options.backends, ",");
    const auto results = run_isolated(cases, args, options);

    std::map<std::string, std::map<std::string, int>> by_set;
    std::map<std::string, int> total;
    for (size_t i = 0; i < cases.size(); ++i) {
      ++by_set[cases[i].set][case_status_name(results[i].status)];
      ++total[case_status_name(results[i].status)];
    }
    const char* kinds[] = {"pass", "fail", "unsupported", "error", "crash", "timeout"};
    std::printf("\n%-20s %6s %6s %6s %11s %6s %6s %8s\n", "set", "cases", "pass", "fail",
                "unsupported", "error", "crash", "timeout");
    for (auto& [set, counts] : by_set) {
      int n = 0;
      for (auto& [_, v] : counts) n += v;
      std::printf("%-20s %6d %6d %6d %11d %6d %6d %8d\n", set.c_str(), n, counts["pass"],
                  counts["fail"], counts["unsupported"], counts["error"], counts["crash"],
                  counts["timeout"]);
    }
    if (!args.json.empty()) {
      std::ofstream f(args.json);
      if (!f) throw Error(ErrorCode::Io, "cannot write '" + args.json + "'");
      f << "{\"summary\": {\"backend\": " << json_string(backend)
        << ", \"cases\": " << cases.size();
      for (const char* k : kinds) f << ", \"" << k << "\": " << total[k];
      f << ", \"sets\": {";
      bool first_set = true;
      for (auto& [set, counts] : by_set) {
        f << (first_set ? "" : ", ") << json_string(set) << ": {";
        first_set = false;
        bool first = true;
        for (const char* k : kinds) {
          f << (first ? "" : ", ") << "\"" << k << "\": " << counts[k];
          first = false;
        }
        f << "}";
      }
      f << "}},\n \"cases\": [\n";
      for (size_t i = 0; i < cases.size(); ++i) {
        char secs[32];
        std::snprintf(secs, sizeof secs, "%.3f", results[i].seconds);
        f << "  {\"name\": " << json_string(cases[i].name)
          << ", \"set\": " << json_string(cases[i].set) << ", \"backend\": " << json_string(backend)
          << ", \"status\": \"" << case_status_name(results[i].status)
          << "\", \"message\": " << json_string(results[i].message) << ", \"seconds\": " << secs
          << "}" << (i + 1 < cases.size() ? ",\n" : "\n");
      }
      f << " ]}\n";
    }
    if (!args.write_manifest.empty()) {
      std::ofstream f(args.write_manifest);
      if (!f) throw Error(ErrorCode::Io, "cannot write '" + args.write_manifest + "'");
      f << "# Cases of the ONNX backend test suite that pass on backend '" << backend << "'.\n"
        << "# Written by `quilt test-onnx --write-manifest`; it only ever grows.\n";
      for (size_t i = 0; i < cases.size(); ++i)
        if (results[i].status == CaseStatus::Pass) f << cases[i].name << "\n";
    }
    int exit_code = 0;
    if (!args.expect.empty()) {
      int regressions = 0, fresh = 0;
      std::set<std::string> seen;
      for (size_t i = 0; i < cases.size(); ++i) {
        seen.insert(cases[i].name);
        const bool listed = expected.count(cases[i].name) != 0;
        if (listed && results[i].status != CaseStatus::Pass) {
          ++regressions;
          std::printf("REGRESSION %s: %s: %s\n", cases[i].name.c_str(),
                      case_status_name(results[i].status),
                      results[i].message.substr(0, 400).c_str());
        } else if (!listed && results[i].status == CaseStatus::Pass) {
          ++fresh;
          std::printf("NEW PASS %s (add it to %s)\n", cases[i].name.c_str(), args.expect.c_str());
        }
      }
      for (const auto& name : expected)
        if (!seen.count(name) && args.filter.empty()) {
          ++regressions;
          std::printf("REGRESSION %s: listed in the manifest but not found\n", name.c_str());
        }
      std::printf("%d expected cases, %d regressions, %d new passes\n",
                  static_cast<int>(expected.size()), regressions, fresh);
      // A wrong answer, an error or a crash fails the run even in a case not yet listed.
      const int bad = total["fail"] + total["error"] + total["crash"] + total["timeout"];
      exit_code = regressions || bad ? 1 : 0;
    } else {
      exit_code = (total["fail"] + total["error"] + total["crash"] + total["timeout"]) ? 1 : 0;
    }
    std::printf("%d passed, %d failed, %d unsupported\n", total["pass"],
                total["fail"] + total["error"] + total["crash"] + total["timeout"],
                total["unsupported"]);
    return exit_code;
  } catch (const Error& e) {
    return report(e);
  }
}

}  // namespace quilt::cli
