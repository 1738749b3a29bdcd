// Runs test cases in the ONNX backend-test layout (model.onnx +
// test_data_set_N/{input,output}_K.pb) through quilt::Session and compares outputs.
//
//   case_runner [--filter REGEX] [--opt-levels 0,1] DIR...
//
// DIR is a case directory or a directory of case directories. Prints one line per failing case
// and a closing "N passed, N failed" line; exits 1 if any case failed.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "core/half.hpp"
#include "core/onnx_import.hpp"
#include "quilt/quilt.hpp"

namespace fs = std::filesystem;
using namespace quilt;

namespace {

double element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::Float32:
      return t.data<float>()[i];
    case DType::Float64:
      return t.data<double>()[i];
    case DType::Float16:
      return half_to_float(t.data<uint16_t>()[i]);
    case DType::Int64:
      return static_cast<double>(t.data<int64_t>()[i]);
    case DType::Int32:
      return t.data<int32_t>()[i];
    case DType::Int16:
      return t.data<int16_t>()[i];
    case DType::Int8:
      return t.data<int8_t>()[i];
    case DType::UInt8:
      return t.data<uint8_t>()[i];
    case DType::UInt16:
      return t.data<uint16_t>()[i];
    case DType::UInt32:
      return t.data<uint32_t>()[i];
    case DType::UInt64:
      return static_cast<double>(t.data<uint64_t>()[i]);
    case DType::Bool:
      return t.data<bool>()[i];
    default:
      return NAN;
  }
}

bool is_float(DType d) {
  return d == DType::Float32 || d == DType::Float64 || d == DType::Float16;
}

// Empty string when equal within tolerance, else a description of the worst mismatch.
std::string compare(const std::string& name, const Tensor& got, const Tensor& want, double rtol,
                    double atol) {
  if (got.dtype() != want.dtype())
    return "output '" + name + "' has dtype " + dtype_name(got.dtype()) + ", expected " +
           dtype_name(want.dtype());
  if (got.shape() != want.shape())
    return "output '" + name + "' has shape " + to_string(got.shape()) + ", expected " +
           to_string(want.shape());
  int64_t worst = -1, bad = 0;
  double worst_excess = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    double g = element(got, i), w = element(want, i);
    if (std::isnan(w) && std::isnan(g)) continue;
    double tol = is_float(want.dtype()) ? atol + rtol * std::fabs(w) : 0;
    double err = std::fabs(g - w);
    if (g == w) continue;
    if (!(err <= tol)) {
      ++bad;
      double excess = std::isnan(err) || std::isinf(err) ? INFINITY : err - tol;
      if (worst < 0 || excess > worst_excess) {
        worst = i;
        worst_excess = excess;
      }
    }
  }
  if (bad == 0) return "";
  // Unravel the worst index.
  std::vector<int64_t> idx(got.shape().size());
  int64_t rem = worst;
  for (size_t d = idx.size(); d-- > 0;) {
    idx[d] = got.shape()[d] ? rem % got.shape()[d] : 0;
    rem = got.shape()[d] ? rem / got.shape()[d] : 0;
  }
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "%lld of %lld elements differ; worst at %s: got %.9g, expected %.9g",
                static_cast<long long>(bad), static_cast<long long>(got.numel()),
                to_string(idx).c_str(), element(got, worst), element(want, worst));
  return "output '" + name + "': " + buf;
}

std::vector<fs::path> sorted_files(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<int, fs::path>> found;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string f = e.path().filename().string();
    if (f.rfind(prefix, 0) == 0 && e.path().extension() == ".pb")
      found.push_back({std::stoi(f.substr(prefix.size())), e.path()});
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& [_, p] : found) out.push_back(p);
  return out;
}

std::string run_case(const fs::path& dir, int opt_level) {
  double rtol = 1e-3, atol = 1e-7;
  if (std::ifstream tol(dir / "tolerance"); tol) tol >> rtol >> atol;
  SessionOptions options;
  options.optimization_level = opt_level;
  options.threads = 2;
  try {
    Session session((dir / "model.onnx").string(), options);
    std::vector<fs::path> sets;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
        sets.push_back(e.path());
    std::sort(sets.begin(), sets.end());
    for (const auto& set : sets) {
      TensorMap inputs;
      auto in_files = sorted_files(set, "input_");
      if (in_files.size() > session.inputs().size())
        return set.filename().string() + ": " + std::to_string(in_files.size()) +
               " inputs but the model has " + std::to_string(session.inputs().size());
      for (size_t i = 0; i < in_files.size(); ++i)
        inputs[session.inputs()[i].name] = load_tensor_file(in_files[i]);
      TensorMap outputs = session.run(inputs);
      auto out_files = sorted_files(set, "output_");
      for (size_t i = 0; i < out_files.size() && i < session.outputs().size(); ++i) {
        const std::string& name = session.outputs()[i].name;
        std::string diff =
            compare(name, outputs.at(name), load_tensor_file(out_files[i]), rtol, atol);
        if (!diff.empty()) return set.filename().string() + ": " + diff;
      }
    }
    return "";
  } catch (const Error& e) {
    return std::string(error_code_name(e.code())) + ": " + e.what();
  } catch (const std::exception& e) {
    return std::string("exception: ") + e.what();
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::regex filter(".*");
  std::vector<int> levels = {0, 1};
  std::vector<fs::path> cases;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--filter" && i + 1 < argc) {
      filter = std::regex(argv[++i]);
    } else if (a == "--opt-levels" && i + 1 < argc) {
      levels.clear();
      std::string s = argv[++i];
      for (char c : s)
        if (c >= '0' && c <= '9') levels.push_back(c - '0');
    } else if (fs::exists(fs::path(a) / "model.onnx")) {
      cases.push_back(a);
    } else if (fs::is_directory(a)) {
      for (const auto& e : fs::directory_iterator(a))
        if (fs::exists(e.path() / "model.onnx")) cases.push_back(e.path());
    } else {
      std::fprintf(stderr, "case_runner: '%s' is not a case directory\n", a.c_str());
      return 2;
    }
  }
  std::sort(cases.begin(), cases.end());
  int passed = 0, failed = 0;
  for (const auto& c : cases) {
    std::string name = c.filename().string();
    if (!std::regex_search(name, filter)) continue;
    std::string problem;
    for (int level : levels) {
      problem = run_case(c, level);
      if (!problem.empty()) {
        problem = "(opt level " + std::to_string(level) + ") " + problem;
        break;
      }
    }
    if (problem.empty()) {
      ++passed;
    } else {
      ++failed;
      std::printf("FAIL %s: %s\n", name.c_str(), problem.c_str());
    }
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
