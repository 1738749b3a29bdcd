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

// Exit code for an Error: 2 for bad input (argument, model, file), 1 otherwise.
int exit_code_for(const Error& e);
// Prints "quilt: <message>" to stderr and returns the exit code for e.
int report(const Error& e);

// "a,b" -> {"a","b"}
std::vector<std::string> split(const std::string& s, char sep);
// Parses a non-negative integer option value; throws Error(InvalidArgument) naming the option.
int64_t parse_int(const std::string& option, const std::string& value);
LogLevel parse_log_level(const std::string& value);

}  // namespace quilt::cli
