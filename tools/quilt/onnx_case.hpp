// One case of the ONNX backend test suite (or of Quilt's own op cases, same layout), run through
// a Session and judged. Shared by `quilt test-onnx` and the tests' case_runner.
//
// Layouts:
//   DIR/model.onnx + DIR/test_data_set_N/{input,output}_K.pb      (node, simple, pytorch-*)
//   DIR/light_NAME.onnx + DIR/light_NAME_output_0.pb              (light: the input is not
//        stored; it is arange(n)/n as float32 [1, 3, 224, 224])
#pragma once

#include <string>
#include <vector>

#include "quilt/quilt.hpp"

namespace quilt::cli {

enum class CaseStatus { Pass, Fail, Unsupported, Error, Crash, Timeout };
const char* case_status_name(CaseStatus s);

// Element i of t as a double, whatever its dtype (float16/bfloat16/float8 decoded).
double element_as_double(const Tensor& t, int64_t i);

struct OnnxCase {
  std::string name;          // "<set>/<case>", e.g. "node/test_abs"
  std::string set;           // "node", "simple", "light", ...
  std::string model;         // path of the .onnx file
  std::string light_output;  // light models: path of the expected output, else ""
};

struct CaseResult {
  CaseStatus status = CaseStatus::Error;
  std::string message;
  double seconds = 0;
};

// Finds cases under each path: a case directory itself, a directory of cases, or a directory
// of sets of cases (e.g. onnx/backend/test/data). Sorted by name.
std::vector<OnnxCase> find_cases(const std::vector<std::string>& paths);

// Runs one case in this process. Never throws: every failure becomes a status + message.
// rtol/atol < 0 use the suite's defaults (1e-3 / 1e-7) or the case's own `tolerance` file.
CaseResult run_case(const OnnxCase& c, const SessionOptions& options, double rtol = -1,
                    double atol = -1);

}  // namespace quilt::cli
