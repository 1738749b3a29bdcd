// Shared by the libFuzzer targets: what counts as a finding and what does not.
// Any quilt::Error is an accepted outcome (a malformed model must be rejected with one); any
// other exception escaping Quilt's API, a crash, a sanitizer report, a leak or a hang is a
// finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "quilt/quilt.hpp"

namespace quilt::fuzz {

inline std::span<const std::byte> bytes(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const std::byte*>(data), size};
}

// Runs f; a quilt::Error is fine, anything else thrown aborts (libFuzzer keeps the input).
template <class F>
void expect_only_quilt_errors(F f) {
  try {
    f();
  } catch (const quilt::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "non-quilt::Error exception escaped: %s\n", e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "unknown exception escaped\n");
    std::abort();
  }
}

inline SessionOptions quiet_cpu_options() {
  SessionOptions o;
  o.threads = 1;
  o.log_level = LogLevel::Error;
  return o;
}

}  // namespace quilt::fuzz
