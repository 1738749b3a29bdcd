// JSON output helpers shared by the plan report and the CLI.
#pragma once

#include <string>

namespace quilt {

// s as a JSON string literal, quotes included. Control characters are escaped; bytes that are
// not valid UTF-8 (ONNX names are not checked) become U+FFFD, so the document always parses.
std::string json_string(const std::string& s);

}  // namespace quilt
