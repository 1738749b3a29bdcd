// Strict decimal integer parsing for text from files and command lines: the whole string must
// be digits (with an optional leading '-'), and a value that does not fit is an error, not a
// wrap or an exception from std::stoll ("12abc" is not 12, "99999999999999999999" is not
// std::out_of_range).
//
//   if (auto v = parse_int64(text)) use(*v); else throw Error(..., "'" + text + "' is not ...");
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace quilt {

inline std::optional<int64_t> parse_int64(std::string_view text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value, 10);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace quilt
