// RunProfile::to_chrome_trace on hand-made spans: lanes, times relative to the first span, and a
// node span pulled inside the patch it overlaps most.
#include <gtest/gtest.h>

#include "quilt/quilt.hpp"

using namespace quilt;

namespace {
bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}
}  // namespace

TEST(RunProfile, ChromeTraceHasALanePerDeviceAndNodesInsideTheirPatch) {
  RunProfile p;
  p.spans = {{"patch 0 on cpu", "cpu", "patch", 1000, 5000, {}},
             // Starts 200 ns before its patch by the device's clock: clamped to the patch.
             {"Conv node \"c1\"", "cpu", "node", 800, 3000, "packed GEMM"},
             {"transfer 'x' host -> example:0", "host", "transfer", 5000, 6500, {}},
             {"patch 1 on example:0", "example:0", "patch", 6500, 9000, {}}};
  const std::string trace = p.to_chrome_trace("quilt \"m\".onnx");
  EXPECT_TRUE(contains(trace, R"("args": {"name": "quilt \"m\".onnx"})")) << trace;
  EXPECT_TRUE(contains(trace, R"("tid": 1, "args": {"name": "cpu"})")) << trace;
  EXPECT_TRUE(contains(trace, R"("tid": 2, "args": {"name": "host"})")) << trace;
  // A node's detail goes into its args; spans without one have none.
  EXPECT_TRUE(contains(trace, R"("lane": "cpu", "detail": "packed GEMM"})")) << trace;
  EXPECT_FALSE(contains(trace, R"("kind": "patch", "lane": "cpu", "detail")")) << trace;
  EXPECT_TRUE(contains(trace, R"("tid": 3, "args": {"name": "example:0"})")) << trace;
  EXPECT_TRUE(contains(
      trace, R"("name": "patch 0 on cpu", "cat": "patch", "ph": "X", "ts": 0.000, "dur": 4.000)"))
      << trace;
  EXPECT_TRUE(contains(
      trace, R"("name": "Conv node \"c1\"", "cat": "node", "ph": "X", "ts": 0.000, "dur": 2.000)"))
      << trace;
  EXPECT_TRUE(contains(
      trace, R"("cat": "transfer", "ph": "X", "ts": 4.000, "dur": 1.500, "pid": 1, "tid": 2)"))
      << trace;
  EXPECT_EQ(trace.substr(0, 43), R"({"displayTimeUnit": "ms", "traceEvents": [)"
                                 "\n");
  EXPECT_EQ(trace.substr(trace.size() - 3), "]}\n");
}

TEST(RunProfile, EmptyProfileIsAValidTraceWithOnlyTheProcessName) {
  const std::string trace = RunProfile{}.to_chrome_trace("quilt");
  EXPECT_EQ(trace,
            "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n"
            R"({"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "quilt"}})"
            "\n]}\n");
}
