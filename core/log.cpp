#include "core/log.hpp"

#include <cstdio>
#include <mutex>

namespace quilt {

void Logger::log(LogLevel level, const std::string& message) const {
  if (!enabled(level)) return;
  static std::mutex mutex;
  static const char* names[] = {"error", "warning", "info", "debug"};
  std::lock_guard lock(mutex);
  std::fprintf(stderr, "[quilt %s] %s\n", names[static_cast<int>(level)], message.c_str());
}

}  // namespace quilt
