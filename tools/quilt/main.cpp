// The quilt command-line tool. Exit codes: 0 ok, 1 failure, 2 bad usage or input.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tools/quilt/cli.hpp"

namespace {

const char* kUsage =
    "usage: quilt <command> [options]\n"
    "\n"
    "Quilt runs ONNX models across backends: the CPU, OpenCL devices and plugin accelerators.\n"
    "\n"
    "commands:\n"
    "  run MODEL      run a model on given or generated inputs; print outputs and latency\n"
    "  plan MODEL     show which backend runs each node and the copies (text, JSON, DOT)\n"
    "  bench MODEL    time session creation and runs, peak memory; --profile writes a trace\n"
    "  devices        list backends, their devices and plugins that failed to load\n"
    "  ops            list the ops Quilt knows and the backends that run them\n"
    "  test-onnx PATH run the ONNX backend test suite (or cases in its layout)\n"
    "\n"
    "`quilt <command> --help` describes a command's options; `quilt --version` prints the\n"
    "version. Exit codes: 0 ok, 1 failure, 2 bad usage or input.\n";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string cmd = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (cmd == "--version") {
    std::printf("quilt %s\n", quilt::version());
    return 0;
  }
  // Each command reports its own errors; this only keeps an exception that escapes one (a bug)
  // from ending the process by std::terminate.
  try {
    if (cmd == "run") return quilt::cli::cmd_run(rest);
    if (cmd == "plan") return quilt::cli::cmd_plan(rest);
    if (cmd == "bench") return quilt::cli::cmd_bench(rest);
    if (cmd == "devices") return quilt::cli::cmd_devices(rest);
    if (cmd == "ops") return quilt::cli::cmd_ops(rest);
    if (cmd == "test-onnx") return quilt::cli::cmd_test_onnx(rest);
  } catch (const quilt::Error& e) {
    return quilt::cli::report(e);
  } catch (const std::filesystem::filesystem_error& e) {
    std::fprintf(stderr, "quilt: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quilt: unexpected error: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "quilt: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
  return 2;
}
