// Leveled logging to stderr, one Logger per session.
#pragma once

#include <string>

#include "quilt/quilt.hpp"

namespace quilt {

class Logger {
 public:
  explicit Logger(LogLevel level = LogLevel::Warning) : level_(level) {}
  bool enabled(LogLevel level) const { return level <= level_; }
  void log(LogLevel level, const std::string& message) const;
  void debug(const std::string& m) const { log(LogLevel::Debug, m); }
  void info(const std::string& m) const { log(LogLevel::Info, m); }
  void warning(const std::string& m) const { log(LogLevel::Warning, m); }

 private:
  LogLevel level_;
};

}  // namespace quilt
