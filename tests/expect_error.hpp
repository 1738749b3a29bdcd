// Test helper: run f and expect a quilt::Error of `code` whose message contains every part.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "quilt/quilt.hpp"

namespace quilt::testing {

template <class F>
void expect_error(F f, ErrorCode code, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

}  // namespace quilt::testing
