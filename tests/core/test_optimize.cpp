// The optimisation passes (core/optimize/) on hand-built graphs: what each rewrites into (op
// types, opsets, attributes, folded weights), what it must leave alone (an intermediate value
// read elsewhere, in a subgraph or as a graph output; a constant that is really an input), and
// level 0. Their numerics against onnxruntime, spelling by spelling, are the optimize cases
// (tests/cases/gen_optimize.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "core/optimize/optimize.hpp"
#include "core/validate.hpp"

using namespace quilt;

namespace {

class Builder {
 public:
  explicit Builder(int64_t opset = 17, int64_t ir_version = 8) : opset_(opset) {
    m.path = "test.onnx";
    m.ir_version = ir_version;
    m.graph.name = "g";
    m.graph.opsets[""] = opset;
  }
  Model m;

  Node& node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
             const std::string& name = "") {
    Node n;
    n.op_type = op;
    n.name = name;
    n.opset = opset_;
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    n.index = m.graph.nodes.size();
    m.graph.nodes.push_back(std::move(n));
    return m.graph.nodes.back();
  }
  void input(const std::string& name, std::vector<int64_t> dims) {
    ValueInfo v{name, DType::Float32, {}, true};
    for (int64_t d : dims) v.shape.push_back(Dim{d, ""});
    m.graph.inputs.push_back(v);
  }
  void output(const std::string& name) {
    m.graph.outputs.push_back({name, DType::Float32, {}, false});
  }
  void init(const std::string& name, Tensor t) { m.graph.initializers[name] = std::move(t); }
  void scalar(const std::string& name, float v) { init(name, Tensor::from_vector<float>({}, {v})); }
  void scalars(std::initializer_list<std::pair<const char*, float>> values) {
    for (const auto& [name, v] : values) scalar(name, v);
  }
  void floats(const std::string& name, std::vector<int64_t> dims, float first, float step = 0.25f) {
    Tensor t(DType::Float32, dims);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = first + step * static_cast<float>(i % 7);
    init(name, t);
  }
  void conv_bn(const std::string& x, const std::string& out, int64_t c_in, int64_t c_out,
               const std::string& p = "") {
    floats(p + "w", {c_out, c_in, 3, 3}, -0.5f);
    floats(p + "b", {c_out}, 0.1f);
    floats(p + "s", {c_out}, 0.5f);
    floats(p + "beta", {c_out}, -0.2f);
    floats(p + "mean", {c_out}, 0.3f);
    floats(p + "var", {c_out}, 0.6f);
    node("Conv", {x, p + "w", p + "b"}, {p + "c"}, p + "conv");
    node("BatchNormalization", {p + "c", p + "s", p + "beta", p + "mean", p + "var"}, {out},
         p + "bn");
  }
  // Add -> Clip -> Div -> Mul: paddle2onnx's hard-swish of x.
  void hardswish(const std::string& x, const std::string& y, const std::string& p = "hs_") {
    scalar(p + "three", 3);
    scalar(p + "zero", 0);
    scalar(p + "six", 6);
    node("Add", {x, p + "three"}, {p + "a"}, p + "add");
    node("Clip", {p + "a", p + "zero", p + "six"}, {p + "cl"}, p + "clip");
    node("Div", {p + "cl", p + "six"}, {p + "d"}, p + "div");
    node("Mul", {x, p + "d"}, {y}, p + "mul");
  }

  std::vector<PlanReport::Rewrite> optimize(int level = 1) {
    validate_model(m, SchemaRegistry::builtin());
    auto r = optimize_model(m, level);
    validate_model(m, SchemaRegistry::builtin());  // the rewritten graph is a valid one
    return r;
  }

 private:
  int64_t opset_;
};

std::vector<std::string> ops(const Graph& g) {
  std::vector<std::string> out;
  for (const auto& n : g.nodes) out.push_back(n.op_type);
  return out;
}

const Node& only(const Graph& g, const std::string& op) {
  const Node* found = nullptr;
  for (const auto& n : g.nodes)
    if (n.op_type == op) {
      EXPECT_EQ(found, nullptr) << "two " << op << " nodes";
      found = &n;
    }
  if (!found) throw std::runtime_error("no " + op + " node");
  return *found;
}

int count_of(const std::vector<PlanReport::Rewrite>& r, const std::string& pattern) {
  for (const auto& w : r)
    if (w.pattern == pattern) return w.count;
  return 0;
}

Attribute float_attr(const std::string& name, float v) {
  Attribute a;
  a.name = name;
  a.kind = Attribute::Kind::Float;
  a.f = v;
  return a;
}

Attribute int_attr(const std::string& name, int64_t v) {
  Attribute a;
  a.name = name;
  a.kind = Attribute::Kind::Int;
  a.i = v;
  return a;
}

Attribute ints_attr(const std::string& name, std::vector<int64_t> v) {
  Attribute a;
  a.name = name;
  a.kind = Attribute::Kind::Ints;
  a.ints = std::move(v);
  return a;
}

Attribute tensor_attr(const std::string& name, Tensor t) {
  Attribute a;
  a.name = name;
  a.kind = Attribute::Kind::Tensor;
  a.t = std::move(t);
  return a;
}

void set(Node& n, Attribute a) {
  n.attributes[a.name] = std::move(a);
}

Attribute graph_attr(const std::string& name, Graph g) {
  Attribute a;
  a.name = name;
  a.kind = Attribute::Kind::Graph;
  a.g = std::make_shared<Graph>(std::move(g));
  return a;
}

// A one-node subgraph: out = op(in).
Graph one_node_graph(const std::string& name, const std::string& op, const std::string& in,
                     const std::string& out, int64_t opset) {
  Graph g;
  g.name = name;
  Node n;
  n.op_type = op;
  n.opset = opset;
  n.inputs = {in};
  n.outputs = {out};
  g.nodes.push_back(n);
  g.outputs.push_back({out, DType::Float32, {}, false});
  return g;
}

// y = If(cond) then `then` else `other`, with the implicit inputs of the branches resolved.
// An If on a graph input (a constant condition would have the If inlined: control_flow.cpp).
void add_if(Builder& b, Graph then, Graph other, const std::string& y) {
  b.m.graph.inputs.push_back({"cond", DType::Bool, {}, true});
  Node& n = b.node("If", {"cond"}, {y});
  n.attributes["then_branch"] = graph_attr("then_branch", std::move(then));
  n.attributes["else_branch"] = graph_attr("else_branch", std::move(other));
  b.output(y);
  resolve_implicit_inputs(b.m.graph);
}

}  // namespace

TEST(Optimize, LevelZeroLeavesTheGraphAlone) {
  Builder b(11);
  b.input("x", {1, 3, 8, 8});
  b.conv_bn("x", "n", 3, 4);
  b.hardswish("n", "y");
  b.output("y");
  const auto before = ops(b.m.graph);
  const size_t initializers = b.m.graph.initializers.size();
  EXPECT_TRUE(b.optimize(0).empty());
  EXPECT_EQ(ops(b.m.graph), before);
  EXPECT_EQ(b.m.graph.initializers.size(), initializers);
  // Level 1: the BN folds into the conv and the chain is one HardSwish.
  const auto r = b.optimize(1);
  EXPECT_EQ(ops(b.m.graph), (std::vector<std::string>{"Conv", "HardSwish"}));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].pattern, "batchnorm into conv");
  EXPECT_EQ(r[0].nodes_removed, 1);
  EXPECT_EQ(r[1].pattern, "hardswish");
  EXPECT_EQ(r[1].nodes_removed, 3);
}

TEST(Optimize, ConstantNodesOfEveryValueFormBecomeInitializers) {
  Builder b(13);
  b.input("x", {4});
  set(b.node("Constant", {}, {"ct"}),
      tensor_attr("value", Tensor::from_vector<float>({4}, {1, 2, 3, 4})));
  set(b.node("Constant", {}, {"cf"}), float_attr("value_float", 0.5f));
  Attribute fs;
  fs.name = "value_floats";
  fs.kind = Attribute::Kind::Floats;
  fs.floats = {1.5f, 2.5f};
  set(b.node("Constant", {}, {"cfs"}), fs);
  set(b.node("Constant", {}, {"ci"}), int_attr("value_int", 7));
  set(b.node("Constant", {}, {"cis"}), ints_attr("value_ints", {2, 2}));
  Attribute str;  // a string constant stays a node (the core runs it, core/ops/strings.cpp)
  str.name = "value_string";
  str.kind = Attribute::Kind::String;
  str.s = "text";
  set(b.node("Constant", {}, {"cstr"}), str);
  b.node("Add", {"x", "ct"}, {"y"});
  b.node("Mul", {"y", "cf"}, {"z"});
  for (const char* o : {"z", "cfs", "ci", "cis"}) b.output(o);
  const auto r = b.optimize();
  EXPECT_EQ(count_of(r, "constant nodes"), 5);
  EXPECT_EQ(ops(b.m.graph), (std::vector<std::string>{"Constant", "Add", "Mul"}));
  const auto& inits = b.m.graph.initializers;
  EXPECT_EQ(inits.at("ct").data<float>()[3], 4.f);
  EXPECT_EQ(inits.at("cf").rank(), 0);
  EXPECT_EQ(inits.at("cf").data<float>()[0], 0.5f);
  EXPECT_EQ(inits.at("cfs").shape(), std::vector<int64_t>{2});
  EXPECT_EQ(inits.at("ci").dtype(), DType::Int64);
  EXPECT_EQ(inits.at("ci").data<int64_t>()[0], 7);
  EXPECT_EQ(inits.at("cis").data<int64_t>()[1], 2);
}

TEST(Optimize, BatchNormFoldsIntoTheConvWithoutTouchingASharedWeight) {
  Builder b;
  b.input("x", {1, 2, 6, 6});
  b.conv_bn("x", "y", 2, 3);
  b.node("Conv", {"x", "w"}, {"other"}, "other_conv");  // shares the weight
  b.output("y");
  b.output("other");
  std::map<std::string, Tensor> before;
  for (const char* name : {"w", "b", "s", "beta", "mean", "var"})
    before[name] = b.m.graph.initializers.at(name).clone();
  const Tensor& w = before.at("w");
  const auto r = b.optimize();
  EXPECT_EQ(count_of(r, "batchnorm into conv"), 1);
  ASSERT_EQ(ops(b.m.graph), (std::vector<std::string>{"Conv", "Conv"}));
  const Node& conv = b.m.graph.nodes[0].name == "conv" ? b.m.graph.nodes[0] : b.m.graph.nodes[1];
  EXPECT_EQ(conv.name, "conv");  // the conv keeps its name and takes the BN's output
  EXPECT_EQ(conv.outputs, std::vector<std::string>{"y"});
  ASSERT_EQ(conv.inputs.size(), 3u);
  EXPECT_NE(conv.inputs[1], "w");
  const auto& inits = b.m.graph.initializers;
  // The shared weight is as it was; the folded one is s[c] * w.
  const Tensor& kept = inits.at("w");
  for (int64_t i = 0; i < w.numel(); ++i) EXPECT_EQ(kept.data<float>()[i], w.data<float>()[i]);
  const Tensor &nw = inits.at(conv.inputs[1]), &nb = inits.at(conv.inputs[2]);
  for (int64_t c = 0; c < 3; ++c) {
    auto at = [&](const char* name) {
      return static_cast<double>(before.at(name).data<float>()[c]);
    };
    const double s = at("s") / std::sqrt(at("var") + 1e-5), t = at("beta") - at("mean") * s;
    EXPECT_NEAR(nw.data<float>()[c * 18 + 5], s * w.data<float>()[c * 18 + 5], 1e-6);
    EXPECT_NEAR(nb.data<float>()[c], s * at("b") + t, 1e-6);
  }
  EXPECT_FALSE(inits.count("mean"));  // nothing reads the BN's parameters any more
}

TEST(Optimize, BatchNormStaysWhenTheConvOutputIsReadElsewhereOrAParameterIsAnInput) {
  for (int variant = 0; variant < 4; ++variant) {
    Builder b(17, variant == 3 ? 3 : 8);
    b.input("x", {1, 2, 6, 6});
    b.conv_bn("x", "y", 2, 3);
    b.output("y");
    if (variant == 0) b.output("c");  // the conv output is a graph output
    if (variant == 1) b.node("Relu", {"c"}, {"r"}), b.output("r");  // a second reader
    if (variant >= 2) b.input("mean", {3});  // listed as an input: overridable from IR 4 on
    const auto r = b.optimize();
    // At IR 3 every initializer was listed as an input, and they are constants all the same.
    EXPECT_EQ(count_of(r, "batchnorm into conv"), variant == 3 ? 1 : 0) << variant;
  }
}

TEST(Optimize, BatchNormFoldsIntoGemmAndConvTranspose) {
  Builder b;
  b.input("a", {5, 4});
  b.floats("wg", {3, 4}, -0.3f);
  b.floats("cg", {3}, 0.2f);
  for (const char* p : {"g", "t"}) {
    b.floats(std::string(p) + "s", {3}, 0.5f);
    b.floats(std::string(p) + "b", {3}, 0.1f);
    b.floats(std::string(p) + "m", {3}, 0.3f);
    b.floats(std::string(p) + "v", {3}, 0.7f);
  }
  set(b.node("Gemm", {"a", "wg", "cg"}, {"g"}, "gemm"), int_attr("transB", 1));
  b.node("BatchNormalization", {"g", "gs", "gb", "gm", "gv"}, {"y"}, "bn_g");
  b.input("x", {1, 6, 4, 4});
  b.floats("wt", {6, 1, 3, 3}, -0.4f);  // group 3: 6 inputs, 3 outputs
  set(b.node("ConvTranspose", {"x", "wt"}, {"ct"}, "deconv"), int_attr("group", 3));
  b.node("BatchNormalization", {"ct", "ts", "tb", "tm", "tv"}, {"z"}, "bn_t");
  b.output("y");
  b.output("z");
  const auto r = b.optimize();
  EXPECT_EQ(count_of(r, "batchnorm into gemm"), 1);
  EXPECT_EQ(count_of(r, "batchnorm into convtranspose"), 1);
  EXPECT_EQ(ops(b.m.graph), (std::vector<std::string>{"Gemm", "ConvTranspose"}));
  EXPECT_EQ(only(b.m.graph, "Gemm").attr_float("beta", 0), 1.f);
  EXPECT_EQ(only(b.m.graph, "ConvTranspose").inputs.size(), 3u);  // a bias appears
}

TEST(Optimize, HardSwishInEachSpellingIsOneNodeOfOpset14) {
  // 0 paddle (Add, Clip, Div, Mul), 1 torch (Add, Clip, Mul, Div), 2 Keras (Mul by 1/6),
  // 3 x * HardSigmoid(x, 1/6, 0.5), 4 Clip with attribute bounds (opset 9).
  for (int variant = 0; variant < 5; ++variant) {
    Builder b(variant == 4 ? 9 : 11);
    b.input("x", {2, 8});
    b.scalars({{"three", 3}, {"zero", 0}, {"six", 6}, {"sixth", 1.f / 6}});
    if (variant == 3) {
      set(b.node("HardSigmoid", {"x"}, {"h"}), float_attr("alpha", 1.f / 6));
      b.node("Mul", {"x", "h"}, {"y"}, "last");
    } else {
      b.node("Add", {"x", "three"}, {"a"});
      if (variant == 4) {
        Node& clip = b.node("Clip", {"a"}, {"cl"});
        set(clip, float_attr("min", 0));
        set(clip, float_attr("max", 6));
      } else {
        b.node("Clip", {"a", "zero", "six"}, {"cl"});
      }
      if (variant == 1) {
        b.node("Mul", {"x", "cl"}, {"m"});
        b.node("Div", {"m", "six"}, {"y"}, "last");
      } else {
        b.node(variant == 2 ? "Mul" : "Div", {"cl", variant == 2 ? "sixth" : "six"}, {"d"});
        b.node("Mul", {"d", "x"}, {"y"}, "last");
      }
    }
    b.output("y");
    EXPECT_EQ(count_of(b.optimize(), "hardswish"), 1) << variant;
    ASSERT_EQ(ops(b.m.graph), std::vector<std::string>{"HardSwish"}) << variant;
    const Node& n = b.m.graph.nodes[0];
    EXPECT_EQ(n.name, "last");
    EXPECT_EQ(n.opset, 14);  // newer than the model's import
    EXPECT_EQ(n.inputs, std::vector<std::string>{"x"});
    EXPECT_EQ(n.outputs, std::vector<std::string>{"y"});
  }
}

TEST(Optimize, AnIntermediateValueReadElsewhereStopsTheRewrite) {
  // 0 the Clip's output is a graph output, 1 read by another node, 2 read inside an If's branch.
  for (int variant = 0; variant < 3; ++variant) {
    Builder b(11);
    b.input("x", {2, 8});
    b.hardswish("x", "y");
    b.output("y");
    if (variant == 0) b.output("hs_cl");
    if (variant == 1) b.node("Relu", {"hs_cl"}, {"r"}), b.output("r");
    if (variant == 2)
      add_if(b, one_node_graph("then", "Identity", "hs_cl", "t", 11),
             one_node_graph("else", "Identity", "x", "e", 11), "z");
    const auto r = b.optimize();
    EXPECT_EQ(count_of(r, "hardswish"), 0) << variant;
    const auto left = ops(b.m.graph);
    EXPECT_EQ(std::count(left.begin(), left.end(), "Clip"), 1) << variant;
  }
}

TEST(Optimize, GeluBothFormsAreOpset20InAnOpset17Model) {
  Builder b(17);
  b.input("x", {3, 5});
  b.scalars({{"sqrt2", 1.4142135f},
             {"one", 1},
             {"half", 0.5f},
             {"three", 3},
             {"coeff", 0.044715f},
             {"k", 0.7978845608f}});
  // erf: Div -> Erf -> Add -> Mul(x) -> Mul(0.5)
  b.node("Div", {"x", "sqrt2"}, {"u"});
  b.node("Erf", {"u"}, {"e"});
  b.node("Add", {"e", "one"}, {"a"});
  b.node("Mul", {"x", "a"}, {"m"});
  b.node("Mul", {"m", "half"}, {"y1"}, "gelu_erf");
  // tanh: (x * 0.5) * (1 + tanh(k * (x + 0.044715 * x^3)))
  b.node("Mul", {"x", "half"}, {"h"});
  b.node("Pow", {"x", "three"}, {"c"});
  b.node("Mul", {"coeff", "c"}, {"cc"});
  b.node("Add", {"x", "cc"}, {"s"});
  b.node("Mul", {"s", "k"}, {"ks"});
  b.node("Tanh", {"ks"}, {"t"});
  b.node("Add", {"one", "t"}, {"a2"});
  b.node("Mul", {"h", "a2"}, {"y2"}, "gelu_tanh");
  b.output("y1");
  b.output("y2");
  const auto r = b.optimize();
  EXPECT_EQ(count_of(r, "gelu"), 1);
  EXPECT_EQ(count_of(r, "gelu tanh"), 1);
  ASSERT_EQ(ops(b.m.graph), (std::vector<std::string>{"Gelu", "Gelu"}));
  for (const Node& n : b.m.graph.nodes) {
    EXPECT_EQ(n.opset, 20);
    EXPECT_EQ(n.attr_string("approximate", "none"), n.name == "gelu_tanh" ? "tanh" : "none");
  }
}

TEST(Optimize, SwishMishAndHardSigmoid) {
  Builder b(13);
  b.input("x", {4, 6});
  b.scalars({{"beta", 1.5f}, {"fifth", 0.2f}, {"half", 0.5f}, {"zero", 0}, {"one", 1}});
  b.node("Sigmoid", {"x"}, {"sg"});
  b.node("Mul", {"sg", "x"}, {"silu"}, "silu");
  b.node("Mul", {"x", "beta"}, {"bx"});
  b.node("Sigmoid", {"bx"}, {"sb"});
  b.node("Mul", {"x", "sb"}, {"swish"}, "swish");
  b.node("Softplus", {"x"}, {"sp"});
  b.node("Tanh", {"sp"}, {"tsp"});
  b.node("Mul", {"x", "tsp"}, {"mish"}, "mish");
  b.node("Mul", {"x", "fifth"}, {"fx"});
  b.node("Add", {"fx", "half"}, {"fa"});
  b.node("Clip", {"fa", "zero", "one"}, {"hsig"}, "hsig");
  for (const char* o : {"silu", "swish", "mish", "hsig"}) b.output(o);
  const auto r = b.optimize();
  EXPECT_EQ(count_of(r, "swish"), 2);
  EXPECT_EQ(count_of(r, "mish"), 1);
  EXPECT_EQ(count_of(r, "hardsigmoid"), 1);
  for (const Node& n : b.m.graph.nodes) {
    if (n.name == "silu") {
      EXPECT_EQ(n.op_type, "Swish");
      EXPECT_EQ(n.opset, 24);
      EXPECT_FALSE(n.has_attr("alpha"));
    }
    if (n.name == "swish") {
      EXPECT_EQ(n.attr_float("alpha", 1), 1.5f);
    }
    if (n.name == "mish") {
      EXPECT_EQ(n.op_type, "Mish");
      EXPECT_EQ(n.opset, 18);
    }
    if (n.name == "hsig") {
      EXPECT_EQ(n.op_type, "HardSigmoid");
      EXPECT_FLOAT_EQ(n.attr_float("alpha", 0), 0.2f);
      EXPECT_FLOAT_EQ(n.attr_float("beta", 0), 0.5f);
    }
  }
  EXPECT_EQ(b.m.graph.nodes.size(), 4u);
}

TEST(Optimize, NormalisationsWrittenOutBecomeTheirOps) {
  Builder b(13);
  b.input("x", {2, 3, 8});
  b.scalars({{"two", 2}, {"eps", 1e-5f}});
  b.floats("gamma", {8}, 0.5f);
  b.floats("bias", {8}, -0.1f);
  auto axes = [](Node& n, int64_t a) { set(n, ints_attr("axes", {a})); };
  // LayerNorm over the last axis, given as a positive axis.
  axes(b.node("ReduceMean", {"x"}, {"mean"}), 2);
  b.node("Sub", {"x", "mean"}, {"d"});
  b.node("Pow", {"d", "two"}, {"sq"});
  axes(b.node("ReduceMean", {"sq"}, {"var"}), 2);
  b.node("Add", {"var", "eps"}, {"ve"});
  b.node("Sqrt", {"ve"}, {"sd"});
  b.node("Div", {"d", "sd"}, {"n"});
  b.node("Mul", {"n", "gamma"}, {"g"});
  b.node("Add", {"g", "bias"}, {"ln"}, "ln");
  // RMSNorm: x * Reciprocal(Sqrt(mean(x * x) + eps)) * gamma.
  b.node("Mul", {"x", "x"}, {"xx"});
  axes(b.node("ReduceMean", {"xx"}, {"ms"}), -1);
  b.node("Add", {"ms", "eps"}, {"mse"});
  b.node("Sqrt", {"mse"}, {"rms"});
  b.node("Reciprocal", {"rms"}, {"inv"});
  b.node("Mul", {"x", "inv"}, {"xn"});
  b.node("Mul", {"gamma", "xn"}, {"rms_out"}, "rms");
  // Softmax over axis 1 (opset 13: ReduceSum takes axes as an input).
  b.init("ax", Tensor::from_vector<int64_t>({1}, {1}));
  axes(b.node("ReduceMax", {"x"}, {"mx"}), 1);
  b.node("Sub", {"x", "mx"}, {"sh"});
  b.node("Exp", {"sh"}, {"ex"});
  b.node("ReduceSum", {"ex", "ax"}, {"z"});
  b.node("Div", {"ex", "z"}, {"sm"}, "sm");
  for (const char* o : {"ln", "rms_out", "sm"}) b.output(o);
  const auto r = b.optimize();
  EXPECT_EQ(count_of(r, "layernorm"), 1);
  EXPECT_EQ(count_of(r, "rmsnorm"), 1);
  EXPECT_EQ(count_of(r, "softmax"), 1);
  ASSERT_EQ(b.m.graph.nodes.size(), 3u);
  const Node& ln = only(b.m.graph, "LayerNormalization");
  EXPECT_EQ(ln.name, "ln");
  EXPECT_EQ(ln.opset, 17);
  EXPECT_EQ(ln.inputs, (std::vector<std::string>{"x", "gamma", "bias"}));
  EXPECT_EQ(ln.attr_int("axis", 0), -1);
  EXPECT_FLOAT_EQ(ln.attr_float("epsilon", 0), 1e-5f);
  const Node& rms = only(b.m.graph, "RMSNormalization");
  EXPECT_EQ(rms.opset, 23);
  EXPECT_EQ(rms.inputs, (std::vector<std::string>{"x", "gamma"}));
  const Node& sm = only(b.m.graph, "Softmax");
  EXPECT_EQ(sm.opset, 13);
  EXPECT_EQ(sm.attr_int("axis", 0), -2);  // axis 1 of rank 3
}

TEST(Optimize, LayerNormWithoutGammaGetsOnesAndStaysWhenNotOverTheLastAxes) {
  for (int64_t axis : {-1, 1}) {
    Builder b(13);
    b.input("x", {2, 3, 4});
    b.scalars({{"two", 2}, {"eps", 1e-6f}});
    for (const char* name : {"mean", "var"}) {
      set(b.node("ReduceMean", {name == std::string("mean") ? "x" : "sq"}, {name}),
          ints_attr("axes", {axis}));
      if (name == std::string("mean")) {
        b.node("Sub", {"x", "mean"}, {"d"});
        b.node("Pow", {"d", "two"}, {"sq"});
      }
    }
    b.node("Add", {"var", "eps"}, {"ve"});
    b.node("Sqrt", {"ve"}, {"sd"});
    b.node("Div", {"d", "sd"}, {"y"});
    b.output("y");
    const auto r = b.optimize();
    if (axis == 1) {
      EXPECT_TRUE(r.empty());
      continue;
    }
    const Node& ln = only(b.m.graph, "LayerNormalization");
    const Tensor& ones = b.m.graph.initializers.at(ln.inputs[1]);
    EXPECT_EQ(ones.shape(), std::vector<int64_t>{4});
    EXPECT_EQ(ones.data<float>()[3], 1.f);
  }
}

TEST(Optimize, MatMulAddBecomesGemmOnlyForA2DProductWithConstantWeights) {
  // 0 A is 2-D: rewritten; 1 A is 3-D; 2 B is a graph input; 3 the product is a graph output.
  for (int variant = 0; variant < 4; ++variant) {
    Builder b(13);
    b.input("a", variant == 1 ? std::vector<int64_t>{2, 5, 4} : std::vector<int64_t>{5, 4});
    if (variant == 2)
      b.input("w", {4, 3});
    else
      b.floats("w", {4, 3}, 0.1f);
    b.floats("bias", {3}, 0.2f);
    b.node("MatMul", {"a", "w"}, {"m"}, "mm");
    b.node("Add", {"bias", "m"}, {"y"}, "add");
    b.output("y");
    if (variant == 3) b.output("m");
    const auto r = b.optimize();
    EXPECT_EQ(count_of(r, "matmul+add into gemm"), variant == 0 ? 1 : 0) << variant;
    if (variant == 0) {
      const Node& g = only(b.m.graph, "Gemm");
      EXPECT_EQ(g.name, "add");
      EXPECT_EQ(g.inputs, (std::vector<std::string>{"a", "w", "bias"}));
    }
  }
}

TEST(Optimize, SubgraphsAreRewrittenWithTheirOuterConstants) {
  // An If branch: a Constant node, a conv of the outer x with the outer BN parameters, and a
  // written-out SiLU; the branch's rewrites count with the model's.
  Builder b(13);
  b.input("x", {1, 2, 5, 5});
  b.floats("s", {3}, 0.5f);
  b.floats("beta", {3}, 0.1f);
  b.floats("mean", {3}, 0.2f);
  b.floats("var", {3}, 0.9f);
  Graph branch;
  branch.name = "then";
  auto add = [&](const std::string& op, std::vector<std::string> in, std::string out) {
    Node n;
    n.op_type = op;
    n.opset = 13;
    n.inputs = std::move(in);
    n.outputs = {std::move(out)};
    n.index = branch.nodes.size();
    branch.nodes.push_back(n);
    return &branch.nodes.back();
  };
  Tensor w(DType::Float32, {3, 2, 3, 3});
  set(*add("Constant", {}, "bw"), tensor_attr("value", w));
  add("Conv", {"x", "bw"}, "bc");
  add("BatchNormalization", {"bc", "s", "beta", "mean", "var"}, "bn");
  add("Sigmoid", {"bn"}, "sg");
  add("Mul", {"bn", "sg"}, "out");
  branch.outputs.push_back({"out", DType::Float32, {}, false});
  add_if(b, branch, one_node_graph("else", "Identity", "x", "e", 13), "y");
  const auto r = b.optimize();
  EXPECT_EQ(count_of(r, "constant nodes"), 1);
  EXPECT_EQ(count_of(r, "batchnorm into conv"), 1);
  EXPECT_EQ(count_of(r, "swish"), 1);
  const Graph& then = *b.m.graph.nodes[0].attributes.at("then_branch").g;
  EXPECT_EQ(ops(then), (std::vector<std::string>{"Conv", "Swish"}));
  // The branch no longer reads the BN's parameters from the outer graph, which drops them.
  EXPECT_EQ(b.m.graph.nodes[0].implicit_inputs, std::vector<std::string>{"x"});
  EXPECT_FALSE(b.m.graph.initializers.count("mean"));
}

TEST(Optimize, NewInitializersNeverTakeAnExistingName) {
  Builder b;
  b.input("x", {1, 2, 6, 6});
  b.conv_bn("x", "y", 2, 3);
  b.floats("w_bn", {1}, 9.f);  // the name the folded weight would take
  b.node("Identity", {"w_bn"}, {"z"});
  b.output("y");
  b.output("z");
  b.optimize();
  const Node& conv = only(b.m.graph, "Conv");
  EXPECT_NE(conv.inputs[1], "w_bn");
  EXPECT_EQ(b.m.graph.initializers.at("w_bn").numel(), 1);
  EXPECT_EQ(b.m.graph.initializers.at(conv.inputs[1]).numel(), 3 * 2 * 9);
}

TEST(Optimize, AConstantIfIsReplacedByItsBranchWithCollidingNamesRenamed) {
  // y = If(true) { t = Sigmoid(x); v = If(c2) { a = Identity(t) } else { b = Identity(x) } }:
  // the branch's t collides with the outer t = Relu(x), so it is renamed, also where the nested
  // If's branch reads it; the nested If (on a graph input) stays.
  Builder b(13);
  b.input("x", {2, 3});
  b.m.graph.inputs.push_back({"c2", DType::Bool, {}, true});
  b.node("Relu", {"x"}, {"t"});
  b.output("t");
  Graph branch;
  branch.name = "then";
  Node sig;
  sig.op_type = "Sigmoid";
  sig.opset = 13;
  sig.inputs = {"x"};
  sig.outputs = {"t"};
  branch.nodes.push_back(sig);
  Node inner;
  inner.op_type = "If";
  inner.opset = 13;
  inner.inputs = {"c2"};
  inner.outputs = {"v"};
  inner.attributes["then_branch"] =
      graph_attr("then_branch", one_node_graph("t2", "Identity", "t", "a", 13));
  inner.attributes["else_branch"] =
      graph_attr("else_branch", one_node_graph("e2", "Identity", "x", "b", 13));
  branch.nodes.push_back(inner);
  branch.outputs.push_back({"v", DType::Float32, {}, false});
  b.init("cond", Tensor::from_vector<bool>({}, {true}));
  Node& n = b.node("If", {"cond"}, {"y"});
  n.attributes["then_branch"] = graph_attr("then_branch", std::move(branch));
  n.attributes["else_branch"] =
      graph_attr("else_branch", one_node_graph("else", "Neg", "x", "e", 13));
  b.output("y");
  resolve_implicit_inputs(b.m.graph);

  const auto r = b.optimize();
  EXPECT_EQ(count_of(r, "constant if"), 1);
  EXPECT_EQ(ops(b.m.graph), (std::vector<std::string>{"Relu", "Sigmoid", "If"}));
  const Node& s = b.m.graph.nodes[1];
  ASSERT_EQ(s.outputs.size(), 1u);
  EXPECT_NE(s.outputs[0], "t");
  const Node& nested = b.m.graph.nodes[2];
  EXPECT_EQ(nested.outputs, std::vector<std::string>{"y"});  // the If's output name
  EXPECT_EQ(nested.attributes.at("then_branch").g->nodes[0].inputs,
            std::vector<std::string>{s.outputs[0]});
  EXPECT_FALSE(b.m.graph.initializers.count("cond"));  // nothing reads it any more
}
