// Subcommands of the quilt CLI and their shared helpers.
#pragma once

#include <string>
#include <vector>

#include "quilt/quilt.hpp"

namespace quilt::cli {

int cmd_run(const std::vector<std::string>& args);
int cmd_devices(const std::vector<std::string>& args);
int cmd_ops(const std::vector<std::string>& args);
int cmd_test_onnx(const std::vector<std::string>& args);
int cmd_plan(const std::vector<std::string>& args);

// Exit code for an Error: 2 for bad input (argument, model, file), 1 otherwise.
int exit_code_for(const Error& e);
// Prints "quilt: <message>" to stderr and returns the exit code for e.
int report(const Error& e);

// "a,b" -> {"a","b"}
std::vector<std::string> split(const std::string& s, char sep);
// Parses a non-negative integer option value; throws Error(InvalidArgument) naming the option.
int64_t parse_int(const std::string& option, const std::string& value);
LogLevel parse_log_level(const std::string& value);
// "a, b" from {"a", "b"} with sep ", ".
std::string join(const std::vector<std::string>& items, const std::string& sep);

// The options that choose and configure backends, the same for run, plan and test-onnx:
// --backend, --plugin, --strict, --pin, --no-cost-rule, --backend-option. kBackendOptionsHelp is
// their part of a command's --help (26-column layout).
extern const char* const kBackendOptionsHelp;
// If args[i] is one of those options, applies it to options (consuming its value, so i moves
// on) and returns true; false for any other argument. Throws Error(InvalidArgument) naming the
// option when its value is malformed.
bool parse_backend_option(const std::vector<std::string>& args, size_t& i, SessionOptions& options);
// Checks every backend that options name (priority list, pins, backend options) against those
// discover_backends(options.plugins) finds. Throws Error(InvalidArgument) naming the unknown
// backend, the available ones and every plugin that failed to load, with why.
void check_backends(const SessionOptions& options);

}  // namespace quilt::cli
