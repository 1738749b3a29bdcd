// PlanReport printers (text, JSON, DOT) on hand-built reports: two backends, a transfer in and
// out, a fallback with its reason, a folded node and a node name with quotes.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "quilt/quilt.hpp"

using namespace quilt;

namespace {

// x -> [example:0: MatMul mm0, Add add0, Relu r0] -> Softmax "say \"hi\"" on the CPU -> y
PlanReport two_backend_report() {
  PlanReport r;
  r.model = "tiny.onnx";
  r.backends = {"example", "cpu"};
  r.nodes = {
      {"mm0", "MatMul", 0, "example:0", "", ""},
      {"add0", "Add", 0, "example:0", "", ""},
      {"r0", "Relu", 0, "example:0", "", ""},
      {"say \"hi\"", "Softmax", 1, "cpu", "example: Softmax is not supported", ""},
      {"shape0", "Shape", -1, "", "", ""},
  };
  PlanReport::Patch p0;
  p0.id = 0;
  p0.backend = "example:0";
  p0.device = "Simulated accelerator 0";
  p0.nodes = {0, 1, 2};
  p0.inputs = {"x"};
  p0.outputs = {"r0_out"};
  p0.constant_bytes = 2048;
  PlanReport::Patch p1;
  p1.id = 1;
  p1.backend = "cpu";
  p1.device = "AMD EPYC";
  p1.nodes = {3};
  p1.inputs = {"r0_out"};
  p1.outputs = {"y"};
  p1.depends_on = {0};
  r.patches = {p0, p1};
  r.transfers = {
      {"x", "host", "example:0", 4096, -1, {0}},
      {"r0_out", "example:0", "host", -1, 0, {1}},
  };
  r.folded_nodes = 1;
  return r;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = hay.find(needle); pos != std::string::npos; pos = hay.find(needle, pos + 1))
    ++n;
  return n;
}

}  // namespace

TEST(PlanReportText, HeaderPatchesTransfersInIssueOrder) {
  const auto l = lines(two_backend_report().to_text());
  ASSERT_GE(l.size(), 5u);
  EXPECT_EQ(l[0], "model: tiny.onnx  backends: example, cpu");
  EXPECT_EQ(l[1], "transfer  x  host -> example:0  4.0 KiB");
  EXPECT_EQ(l[2],
            "patch 0  example:0  3 nodes  [MatMul \"mm0\", Add \"add0\", Relu \"r0\"]  in: x  "
            "out: r0_out  weights: 2.0 KiB");
  EXPECT_EQ(l[3], "transfer  r0_out  example:0 -> host  ? bytes");
  EXPECT_EQ(l[4], "patch 1  cpu  1 node  [Softmax \"say \\\"hi\\\"\"]  in: r0_out  out: y");
}

TEST(PlanReportText, FallbacksAndTotals) {
  const std::string text = two_backend_report().to_text();
  EXPECT_TRUE(contains(text,
                       "fallbacks:\n  Softmax \"say \\\"hi\\\"\" on cpu: example: Softmax "
                       "is not supported\n"))
      << text;
  EXPECT_TRUE(contains(text, "  nodes: example:0 3, cpu 1; folded 1\n")) << text;
  EXPECT_TRUE(contains(text, "  patches: 2\n")) << text;
  EXPECT_TRUE(contains(text, "  transfers: 2, 4.0 KiB + 1 of size known only at run time\n"))
      << text;
}

TEST(PlanReport, RewritesPerPatternInEveryFormat) {
  PlanReport r = two_backend_report();
  EXPECT_TRUE(contains(r.to_text(), "\nrewrites: none\n"));
  EXPECT_TRUE(contains(r.to_json(), "\"rewrites\": [],\n"));
  EXPECT_FALSE(contains(r.to_dot(), "rewrites"));
  r.rewrites = {{"batchnorm into conv", 35, 35}, {"hardswish", 20, 60}};
  const std::string text = r.to_text();
  EXPECT_TRUE(contains(text, "\nrewrites: batchnorm into conv 35, hardswish 20\nfallbacks:"))
      << text;
  EXPECT_TRUE(contains(text, "  nodes: example:0 3, cpu 1; folded 1; rewritten away 95\n")) << text;
  const std::string json = r.to_json();
  EXPECT_TRUE(contains(json,
                       "\"rewrites\": [{\"pattern\": \"batchnorm into conv\", \"count\": 35, "
                       "\"nodes_removed\": 35}, {\"pattern\": \"hardswish\", \"count\": 20, "
                       "\"nodes_removed\": 60}],\n"))
      << json;
  EXPECT_TRUE(contains(json, "\"rewritten_away\": 95")) << json;
  EXPECT_TRUE(contains(r.to_dot(), "\\nrewrites: batchnorm into conv 35, hardswish 20\"];"))
      << r.to_dot();
}

TEST(PlanReportText, NoFallbacksSaysSo) {
  PlanReport r = two_backend_report();
  r.nodes[3].reason.clear();
  EXPECT_TRUE(contains(r.to_text(), "fallbacks: none\n"));
  EXPECT_FALSE(contains(r.to_dot(), "fell back"));
}

// How a backend runs a node when not as written (the CPU's widened float16 nodes): a "notes"
// section in text, each node's "note" and a count in JSON, a tooltip in DOT; no section when
// there is nothing to say.
TEST(PlanReport, NotesInEveryFormat) {
  PlanReport r = two_backend_report();
  EXPECT_FALSE(contains(r.to_text(), "notes:"));
  const std::string note = "float16 computed in float32 (casts on input 0 and output 0)";
  r.nodes[3].note = note;
  const std::string text = r.to_text();
  EXPECT_TRUE(
      contains(text, "notes:\n  Softmax \"say \\\"hi\\\"\" on cpu: " + note + "\ntotals:\n"))
      << text;
  const std::string json = r.to_json();
  EXPECT_TRUE(contains(
      json, "\"reason\": \"example: Softmax is not supported\", \"note\": \"" + note + "\"}"))
      << json;
  EXPECT_TRUE(contains(json, "\"fallbacks\": 1, \"noted\": 1}")) << json;
  r.nodes[3].reason.clear();  // DOT shows the note as the tooltip when there is no reason
  EXPECT_TRUE(contains(r.to_dot(), "tooltip=\"" + note + "\"")) << r.to_dot();
}

TEST(PlanReportText, AllSizesUnknown) {
  PlanReport r = two_backend_report();
  r.transfers[0].bytes = -1;
  EXPECT_TRUE(contains(r.to_text(), "  transfers: 2, sizes known only at run time\n"))
      << r.to_text();
}

TEST(PlanReportText, LongNodeListsAreShortened) {
  PlanReport r;
  r.model = "long.onnx";
  r.backends = {"cpu"};
  PlanReport::Patch p;
  p.backend = "cpu";
  for (int i = 0; i < 20; ++i) {
    // (append, not "n" + ...: GCC 12 warns -Wrestrict on the latter here)
    r.nodes.push_back({std::string("n").append(std::to_string(i)), "Relu", 0, "cpu", "", ""});
    p.nodes.push_back(i);
  }
  p.inputs = {"x"};
  p.outputs = {"y"};
  r.patches = {p};
  const auto l = lines(r.to_text());
  ASSERT_GE(l.size(), 2u);
  EXPECT_EQ(l[1],
            "patch 0  cpu  20 nodes  [Relu \"n0\", Relu \"n1\", Relu \"n2\", Relu \"n3\", ... (14 "
            "more), Relu \"n18\", Relu \"n19\"]  in: x  out: y");
  EXPECT_TRUE(contains(r.to_text(), "  transfers: 0, 0 B\n"));
}

TEST(PlanReportText, ByteSizes) {
  PlanReport r;
  r.model = "m";
  r.backends = {"cpu"};
  r.transfers = {{"a", "host", "x:0", 512, -1, {}},
                 {"b", "host", "x:0", 3 * 1024 * 1024 / 2, -1, {}},
                 {"c", "host", "x:0", int64_t{5} << 30, -1, {}}};
  const std::string text = r.to_text();
  EXPECT_TRUE(contains(text, "transfer  a  host -> x:0  512 B\n")) << text;
  EXPECT_TRUE(contains(text, "transfer  b  host -> x:0  1.5 MiB\n")) << text;
  EXPECT_TRUE(contains(text, "transfer  c  host -> x:0  5.0 GiB\n")) << text;
}

TEST(PlanReportJson, KeyFieldsAndEscaping) {
  const std::string json = two_backend_report().to_json();
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.substr(json.size() - 2), "}\n");
  EXPECT_TRUE(contains(json, "\"format\": \"quilt-plan/1\"")) << json;
  EXPECT_TRUE(contains(json, "\"model\": \"tiny.onnx\""));
  EXPECT_TRUE(contains(json, "\"backends\": [\"example\", \"cpu\"]"));
  EXPECT_TRUE(contains(json, "\"name\": \"say \\\"hi\\\"\"")) << json;
  EXPECT_TRUE(contains(json, "\"reason\": \"example: Softmax is not supported\""));
  EXPECT_TRUE(contains(json,
                       "{\"index\": 4, \"name\": \"shape0\", \"op_type\": \"Shape\", "
                       "\"patch\": null, \"backend\": \"\", \"folded\": true"))
      << json;
  EXPECT_TRUE(contains(json,
                       "\"id\": 1, \"backend\": \"cpu\", \"device\": \"AMD EPYC\", "
                       "\"nodes\": [3], \"inputs\": [\"r0_out\"], \"outputs\": [\"y\"], "
                       "\"depends_on\": [0], \"constant_bytes\": 0"))
      << json;
  EXPECT_TRUE(contains(json,
                       "{\"value\": \"x\", \"from\": \"host\", \"to\": \"example:0\", "
                       "\"bytes\": 4096, \"producer_patch\": null, \"consumer_patches\": "
                       "[0]}"))
      << json;
  EXPECT_TRUE(contains(json, "\"bytes\": null, \"producer_patch\": 0"));
  EXPECT_TRUE(contains(json,
                       "\"totals\": {\"nodes\": {\"example:0\": 3, \"cpu\": 1}, "
                       "\"folded_nodes\": 1, \"rewritten_away\": 0, \"patches\": 2, "
                       "\"transfers\": 2, "
                       "\"transfer_bytes\": 4096, \"transfers_of_unknown_size\": 1, "
                       "\"fallbacks\": 1, \"noted\": 0}"))
      << json;
  // Balanced brackets outside strings: a cheap structural check (the CLI test parses it).
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    char c = json[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
      EXPECT_GE(depth, 0);
    }
  }
  EXPECT_EQ(depth, 0);
  EXPECT_FALSE(in_string);
}

TEST(PlanReportJson, ControlCharactersAndInvalidUtf8AreEscaped) {
  PlanReport r;
  r.model = "a\\b\n\t\x01 caf\xc3\xa9 \xff";
  const std::string json = r.to_json();
  EXPECT_TRUE(contains(json, "\"model\": \"a\\\\b\\n\\t\\u0001 caf\xc3\xa9 \\ufffd\"")) << json;
  EXPECT_TRUE(contains(json, "\"nodes\": [],"));
  EXPECT_TRUE(contains(json, "\"totals\": {\"nodes\": {}, "));
}

TEST(PlanReportDot, ClustersColoursAndEdges) {
  const std::string dot = two_backend_report().to_dot();
  EXPECT_EQ(dot.rfind("digraph plan {\n", 0), 0u) << dot;
  EXPECT_TRUE(contains(dot, "compound=true"));
  // One cluster per patch, labelled with id and backend, outlined in the backend's colour.
  EXPECT_TRUE(contains(dot, "subgraph cluster_p0 {"));
  EXPECT_TRUE(contains(dot, "subgraph cluster_p1 {"));
  EXPECT_TRUE(contains(dot, "label=\"patch 0: example:0\\nSimulated accelerator 0\"")) << dot;
  EXPECT_TRUE(contains(dot, "label=\"patch 1: cpu\\nAMD EPYC\""));
  // CPU nodes are the neutral blue; the example backend gets the first palette colour.
  EXPECT_TRUE(contains(dot, "n3 [label=\"Softmax\\nsay \\\"hi\\\"\", fillcolor=\"#9ecae1\""))
      << dot;
  EXPECT_TRUE(contains(dot, "n0 [label=\"MatMul\\nmm0\", fillcolor=\"#fdae6b\"]")) << dot;
  // Execution order inside a patch.
  EXPECT_TRUE(contains(dot, "n0 -> n1 ["));
  EXPECT_TRUE(contains(dot, "n1 -> n2 ["));
  // Transfers: a red copy box between producer and consumer, dashed red labelled edges.
  EXPECT_TRUE(contains(dot, "t0 [shape=box, style=\"filled,dashed\", color=red")) << dot;
  EXPECT_TRUE(contains(dot, "label=\"copy x 4.0 KiB\\nhost -> example:0\"")) << dot;
  EXPECT_TRUE(contains(dot,
                       "in0 -> t0 [style=dashed, color=red, fontcolor=red, label=\"x (4.0 "
                       "KiB)\"]"))
      << dot;
  EXPECT_TRUE(contains(dot, "t0 -> n0 [style=dashed, color=red, lhead=cluster_p0]")) << dot;
  EXPECT_TRUE(contains(dot,
                       "n2 -> t1 [style=dashed, color=red, fontcolor=red, label=\"r0_out (? "
                       "bytes)\", ltail=cluster_p0]"))
      << dot;
  EXPECT_TRUE(contains(dot, "t1 -> n3 [style=dashed, color=red, lhead=cluster_p1]"));
  // The graph output, the folded node and the legend.
  EXPECT_TRUE(contains(dot, "n3 -> out0 [ltail=cluster_p1]")) << dot;
  EXPECT_TRUE(contains(dot, "subgraph cluster_folded {"));
  EXPECT_TRUE(contains(dot, "n4 [label=\"Shape\\nshape0\""));
  EXPECT_TRUE(contains(dot, "subgraph cluster_legend {"));
  EXPECT_TRUE(contains(dot, "legend0 [label=\"example:0\", fillcolor=\"#fdae6b\"]")) << dot;
  EXPECT_TRUE(contains(dot, "legend1 [label=\"cpu\", fillcolor=\"#9ecae1\"]")) << dot;
  EXPECT_TRUE(contains(dot, "legend2 [label=\"fell back\\n(reason as tooltip)\"")) << dot;
  EXPECT_TRUE(contains(dot, "tooltip=\"example: Softmax is not supported\", peripheries=2"));
  EXPECT_EQ(count(dot, "{"), count(dot, "}"));
}

TEST(PlanReportDot, DirectEdgeBetweenPatchesWithoutCopy) {
  PlanReport r = two_backend_report();
  r.patches[0].backend = "cpu";
  for (auto& n : r.nodes)
    if (n.patch == 0) n.backend = "cpu";
  r.transfers.clear();
  const std::string dot = r.to_dot();
  EXPECT_TRUE(contains(dot, "n2 -> n3 [label=\"r0_out\", lhead=cluster_p1, ltail=cluster_p0]"))
      << dot;
  EXPECT_TRUE(contains(dot, "in0 -> n0 [label=\"x\", lhead=cluster_p0]")) << dot;
  EXPECT_FALSE(contains(dot, "\n  t0 ["));
}

TEST(PlanReportDot, EmptyReportIsAValidGraph) {
  PlanReport r;
  r.model = "empty \"model\".onnx";
  const std::string dot = r.to_dot();
  EXPECT_TRUE(contains(dot, "label=\"empty \\\"model\\\".onnx\\nbackends: \"")) << dot;
  EXPECT_EQ(count(dot, "{"), count(dot, "}"));
}
