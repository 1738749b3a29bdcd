// Subcommands of the quilt CLI and their shared helpers.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "quilt/quilt.hpp"

namespace quilt::cli {

int cmd_run(const std::vector<std::string>& args);
int cmd_devices(const std::vector<std::string>& args);
int cmd_ops(const std::vector<std::string>& args);
int cmd_test_onnx(const std::vector<std::string>& args);
int cmd_plan(const std::vector<std::string>& args);
int cmd_bench(const std::vector<std::string>& args);

// Exit code for an Error: 2 for bad input (argument, model, file), 1 otherwise.
int exit_code_for(const Error& e);
// Prints "quilt: <message>" to stderr and returns the exit code for e.
int report(const Error& e);

// "a,b" -> {"a","b"}
std::vector<std::string> split(const std::string& s, char sep);
// Parses an option's integer value in [0, max]; throws Error(InvalidArgument) naming the option
// and the range.
int64_t parse_int(const std::string& option, const std::string& value,
                  int64_t max = std::numeric_limits<int64_t>::max());
// --threads N: at most SessionOptions::kMaxThreads.
int parse_threads(const std::string& value);
LogLevel parse_log_level(const std::string& value);
// "a, b" from {"a", "b"} with sep ", ".
std::string join(const std::vector<std::string>& items, const std::string& sep);
// "NAME=VALUE" -> {NAME, VALUE}, split at the first '='; throws Error(InvalidArgument) naming
// option when either side is empty.
std::pair<std::string, std::string> key_value(const std::string& option, const std::string& v);

// Where a command's model inputs come from, the same for run and bench: --input NAME=FILE.npy
// and --dim NAME=VALUE. kInputOptionsHelp is their part of a command's --help.
struct InputOptions {
  std::map<std::string, std::string> files;  // input name -> .npy path
  std::map<std::string, int64_t> dims;       // symbolic dim -> size for generated inputs
};
extern const char* const kInputOptionsHelp;
// If args[i] is --input or --dim, applies it to inputs (consuming its value) and returns true;
// false for any other argument. Throws Error(InvalidArgument) on a malformed value.
bool parse_input_option(const std::vector<std::string>& args, size_t& i, InputOptions& inputs);
// A value for every input of session: read from the given files, the rest generated (floats
// ~ N(0,1), integers in [0,10), seed 0; symbolic dims from inputs.dims, else 1). Throws
// Error(InvalidArgument) for a --dim no input has, naming the symbolic dims there are.
TensorMap make_inputs(const Session& session, const InputOptions& inputs);
// The same for a model whose inputs may be sequences (a directory of 0.npy, 1.npy, ...) or
// optionals (a .npy file); those not given are generated (a sequence or optional of one tensor).
ValueMap make_values(const Session& session, const InputOptions& inputs);

// Latency over repeated runs, in the unit given. median is the upper median (sorted[n/2]), p90
// the nearest rank (sorted[ceil(0.9 n) - 1]), so min <= median <= p90.
struct LatencyStats {
  double median = 0, p90 = 0, min = 0, mean = 0;
};
LatencyStats latency_stats(std::vector<double> samples);

// "run 37/1000" on stderr for long --iterations runs: redrawn at most 4 times a second once the
// runs have taken a second, and only when stderr is a terminal (scripts see nothing); erased by
// finish().
class Progress {
 public:
  explicit Progress(int64_t total);
  void done(int64_t n);
  void finish();

 private:
  int64_t total_;
  bool shown_, drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

// --optimization-level N, --precision P and --log-level LEVEL, the same for run, plan and bench: if
// args[i] is one, applies it (consuming its value) and returns true; false for any other argument.
bool parse_session_option(const std::vector<std::string>& args, size_t& i, SessionOptions& options);

// The options that choose and configure backends, the same for run, plan and test-onnx:
// --backend, --plugin, --strict, --pin, --no-cost-rule, --backend-option. kBackendOptionsHelp is
// their part of a command's --help (26-column layout).
extern const char* const kBackendOptionsHelp;
// If args[i] is one of those options, applies it to options (consuming its value, so i moves
// on) and returns true; false for any other argument. Throws Error(InvalidArgument) naming the
// option when its value is malformed.
bool parse_backend_option(const std::vector<std::string>& args, size_t& i, SessionOptions& options);
// "executable cache: 1 loaded, 0 compiled and stored, 0 compiled, not stored (DIR)"; "" when
// there is no cache directory. Counts PlanReport::Patch::cache.
std::string cache_summary(const PlanReport& plan, const std::string& cache_dir);
// Checks every backend that options name (priority list, pins, backend options) against those
// discover_backends(options.plugins) finds. Throws Error(InvalidArgument) naming the unknown
// backend, the available ones and every plugin that failed to load, with why.
void check_backends(const SessionOptions& options);

}  // namespace quilt::cli
