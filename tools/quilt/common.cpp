#include <cstdio>

#include "tools/quilt/cli.hpp"

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

int64_t parse_int(const std::string& option, const std::string& value) {
  size_t used = 0;
  int64_t v = -1;
  try {
    v = std::stoll(value, &used);
  } catch (...) {
    used = 0;
  }
  if (used != value.size() || value.empty() || v < 0)
    throw Error(ErrorCode::InvalidArgument,
                option + " expects a non-negative integer, got '" + value + "'");
  return v;
}

LogLevel parse_log_level(const std::string& value) {
  if (value == "error") return LogLevel::Error;
  if (value == "warning") return LogLevel::Warning;
  if (value == "info") return LogLevel::Info;
  if (value == "debug") return LogLevel::Debug;
  throw Error(ErrorCode::InvalidArgument,
              "--log-level expects error, warning, info or debug, got '" + value + "'");
}

}  // namespace quilt::cli
