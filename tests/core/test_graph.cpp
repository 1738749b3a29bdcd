// The IR itself: attributes, topological order, validation and shape-inference helpers.
#include <gtest/gtest.h>

#include "core/graph.hpp"
#include "core/op_schema.hpp"
#include "core/validate.hpp"

using namespace quilt;

namespace {
Node make(const std::string& name, const std::string& op, std::vector<std::string> in,
          std::vector<std::string> out) {
  Node n;
  n.name = name;
  n.op_type = op;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  n.opset = 17;
  return n;
}

Model model_of(std::vector<Node> nodes, std::vector<std::string> inputs,
               std::vector<std::string> outputs) {
  Model m;
  m.path = "test.onnx";
  m.graph.name = "g";
  for (size_t i = 0; i < nodes.size(); ++i) nodes[i].index = i;
  m.graph.nodes = std::move(nodes);
  for (auto& i : inputs) m.graph.inputs.push_back({i, DType::Float32, {}, false});
  for (auto& o : outputs) m.graph.outputs.push_back({o, DType::Float32, {}, false});
  return m;
}
}  // namespace

TEST(Graph, TopologicalOrderRespectsDependenciesAndFileOrder) {
  Model m = model_of({make("c", "Relu", {"b"}, {"y"}), make("a", "Relu", {"x"}, {"a"}),
                      make("b", "Relu", {"a"}, {"b"}), make("d", "Relu", {"x"}, {"z"})},
                     {"x"}, {"y", "z"});
  EXPECT_EQ(m.graph.topological_order(), (std::vector<size_t>{1, 2, 0, 3}));
}

TEST(Graph, CycleIsReportedWithNodeNames) {
  Model m = model_of({make("first", "Relu", {"b"}, {"a"}), make("second", "Relu", {"a"}, {"b"})},
                     {}, {"a"});
  try {
    m.graph.topological_order();
    FAIL();
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("cycle"), std::string::npos) << msg;
    EXPECT_NE(msg.find("\"first\""), std::string::npos) << msg;
    EXPECT_NE(msg.find("\"second\""), std::string::npos) << msg;
  }
}

TEST(Graph, AttributeAccessUsesDefaultsAndChecksKinds) {
  Node n = make("conv", "Conv", {}, {});
  Attribute a;
  a.name = "group";
  a.kind = Attribute::Kind::Int;
  a.i = 4;
  n.attributes["group"] = a;
  EXPECT_EQ(n.attr_int("group", 1), 4);
  EXPECT_EQ(n.attr_int("missing", 7), 7);
  EXPECT_EQ(n.attr_ints("pads", {0, 0}), (std::vector<int64_t>{0, 0}));
  try {
    n.attr_float("group", 1.f);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[Conv node \"conv\"] attribute 'group' is of type int, expected float");
  }
  Node unnamed = make("", "Add", {}, {});
  unnamed.index = 5;
  EXPECT_EQ(unnamed.display(), "Add node #5");
}

TEST(Validate, ReportsEveryProblemAtOnce) {
  Model m = model_of({make("reads_undefined", "Relu", {"nowhere"}, {"a"}),
                      make("dup", "Relu", {"x"}, {"a"}), make("odd", "NoSuchOp", {"x"}, {"q"})},
                     {"x"}, {"never"});
  try {
    validate_model(m, SchemaRegistry::builtin());
    FAIL();
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(e.code(), ErrorCode::InvalidModel);
    EXPECT_NE(msg.find("input 'nowhere' is not a graph input"), std::string::npos) << msg;
    EXPECT_NE(msg.find("value 'a' is produced twice"), std::string::npos) << msg;
    EXPECT_NE(msg.find("graph output 'never' is never produced"), std::string::npos) << msg;
    EXPECT_NE(msg.find("NoSuchOp (opset 17) at node \"odd\""), std::string::npos) << msg;
  }
}

TEST(Inference, BroadcastAndAxisHelpers) {
  Node n = make("add", "Add", {"a", "b"}, {"c"});
  InferenceContext ctx(n, {}, {}, false);
  EXPECT_EQ(broadcast_shapes(ctx, {2, 1, 4}, {3, 1}), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(broadcast_shapes(ctx, {-1, 4}, {4}), (std::vector<int64_t>{-1, 4}));
  EXPECT_EQ(broadcast_shapes(ctx, {-1, 4}, {5, 1}), (std::vector<int64_t>{5, 4}));
  EXPECT_EQ(broadcast_shapes(ctx, {}, {3}), (std::vector<int64_t>{3}));
  try {
    broadcast_shapes(ctx, {2, 3}, {4});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[Add node \"add\"] cannot broadcast shapes [2, 3] and [4]");
  }
  EXPECT_EQ(normalize_axis(ctx, -1, 4), 3);
  EXPECT_THROW(normalize_axis(ctx, 4, 4), Error);
}
