#include "core/log.hpp"

#include <cstdio>
#include <memory>
#include <mutex>

namespace quilt {

namespace {

std::mutex& sink_mutex() {
  static std::mutex m;
  return m;
}

// The sink, replaced whole under the mutex and called through a copy of the pointer, so a
// sink being replaced finishes the calls already in it.
std::shared_ptr<const LogSink>& sink_slot() {
  static std::shared_ptr<const LogSink> sink;
  return sink;
}

thread_local bool in_sink = false;

}  // namespace

void set_log_sink(LogSink sink) {
  auto next = sink ? std::make_shared<const LogSink>(std::move(sink)) : nullptr;
  std::lock_guard lock(sink_mutex());
  sink_slot().swap(next);
}

void Logger::log(LogLevel level, const std::string& message) const {
  if (!enabled(level)) return;
  std::shared_ptr<const LogSink> sink;
  {
    std::lock_guard lock(sink_mutex());
    sink = sink_slot();
  }
  if (sink && !in_sink) {
    in_sink = true;
    bool taken = false;
    try {
      taken = (*sink)(level, message);
    } catch (...) {
      taken = false;  // a throwing sink leaves the message to stderr
    }
    in_sink = false;
    if (taken) return;
  }
  static std::mutex mutex;
  static const char* names[] = {"error", "warning", "info", "debug"};
  std::lock_guard lock(mutex);
  std::fprintf(stderr, "[quilt %s] %s\n", names[static_cast<int>(level)], message.c_str());
}

}  // namespace quilt
