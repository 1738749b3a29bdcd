// quilt plan MODEL: which backend runs each node, the patches and the copies between them, as
// text, JSON or Graphviz DOT (Session::plan()).
#include <algorithm>
#include <cstdio>
#include <fstream>

#include "tools/quilt/cli.hpp"

namespace quilt::cli {
namespace {

const char* kPlanHelp =
    "usage: quilt plan MODEL [options]\n"
    "\n"
    "Creates a session for MODEL (an .onnx file) without running it and prints its plan: the\n"
    "patches in issue order with their backend and nodes, every copy between memory spaces with\n"
    "its size, why each node that is not on the first listed backend fell back, and totals.\n"
    "\n"
    "options:\n"
    "  --format FORMAT         text (default), json or dot (Graphviz: `dot -Tsvg plan.dot`)\n"
    "  --output FILE           write the plan to FILE instead of standard output\n"
    "  --dim NAME=VALUE        fix symbolic dim NAME of the model (repeatable): copies then\n"
    "                          have known sizes and more folds at creation\n"
    "  --optimization-level N  0 = as written, 1 = constant folding and pattern rewrites\n"
    "                          (default 1)\n"
    "  --precision P           fp32 (default) or bf16: the CPU's GEMM and convolution with\n"
    "                          bfloat16 operands, float32 accumulation (needs AVX512-BF16;\n"
    "                          `quilt devices` lists what this CPU accelerates)\n"
    "  --log-level LEVEL       error, warning, info or debug (default warning)\n"
    "  --help                  show this help\n"
    "\n"
    "backend selection:\n";

const char* kPlanExitCodes =
    "\n"
    "Exit codes: 0 ok; 1 the session could not be created (e.g. --strict and a node no listed\n"
    "backend claims); 2 bad usage, a missing or malformed model, an unknown backend.\n";

struct PlanArgs {
  std::string model;
  std::string format = "text";
  std::string output;
  SessionOptions options;
};

PlanArgs parse(const std::vector<std::string>& args) {
  PlanArgs r;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw Error(ErrorCode::InvalidArgument, a + " needs a value");
      return args[++i];
    };
    if (parse_backend_option(args, i, r.options) || parse_session_option(args, i, r.options))
      continue;
    if (a == "--format") {
      r.format = value();
      if (r.format != "text" && r.format != "json" && r.format != "dot")
        throw Error(ErrorCode::InvalidArgument,
                    "--format expects text, json or dot, got '" + r.format + "'");
    } else if (a == "--output") {
      r.output = value();
      if (r.output.empty()) throw Error(ErrorCode::InvalidArgument, "--output needs a file name");
    } else if (a == "--dim") {
      auto [k, v] = key_value(a, value());
      r.options.fixed_dims[k] = parse_int("--dim " + k, v);
    } else if (!a.empty() && a[0] == '-') {
      throw Error(ErrorCode::InvalidArgument, "unknown option '" + a + "' for quilt plan");
    } else if (r.model.empty()) {
      r.model = a;
    } else {
      throw Error(ErrorCode::InvalidArgument,
                  "unexpected argument '" + a + "'; quilt plan takes one MODEL");
    }
  }
  if (r.model.empty()) throw Error(ErrorCode::InvalidArgument, "quilt plan needs a MODEL");
  return r;
}

}  // namespace

int cmd_plan(const std::vector<std::string>& args) {
  if (std::find(args.begin(), args.end(), "--help") != args.end()) {
    std::fputs(kPlanHelp, stdout);
    std::fputs(kBackendOptionsHelp, stdout);
    std::fputs(kPlanExitCodes, stdout);
    return 0;
  }
  try {
    const PlanArgs r = parse(args);
    check_backends(r.options);
    const Session session(r.model, r.options);
    const PlanReport& plan = session.plan();
    const std::string text = r.format == "json"  ? plan.to_json()
                             : r.format == "dot" ? plan.to_dot()
                                                 : plan.to_text();
    if (r.output.empty()) {
      std::fputs(text.c_str(), stdout);
      return 0;
    }
    std::ofstream f(r.output, std::ios::binary);
    if (!f || !f.write(text.data(), static_cast<std::streamsize>(text.size())) || !f.flush())
      throw Error(ErrorCode::Io, "--output '" + r.output + "': cannot write the file");
    return 0;
  } catch (const Error& e) {
    return report(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quilt: %s\n", e.what());
    return 1;
  }
}

}  // namespace quilt::cli
