// The CPU backend's activation fusion pass (backends/cpu/fusion.hpp) on hand-built patches: what
// it folds, what it must leave alone. The numerics of fused kernels are checked against
// onnxruntime by the cases_fusion family (tests/cases/gen_fusion.py).
#include <gtest/gtest.h>

#include "backends/cpu/fusion.hpp"
#include "backends/cpu/kernel.hpp"

namespace quilt::cpu {
namespace {

struct Patch {
  std::vector<PatchNode> nodes;
  std::vector<TypeShape> types;
  std::vector<Tensor> constants;
  std::vector<char> kept;
  explicit Patch(int values)
      : types(values, TypeShape{DType::Float32, true, {1, 4}}),
        constants(values),
        kept(values, 0) {}
  void add(const std::string& op, std::vector<int32_t> in, std::vector<int32_t> out) {
    PatchNode n;
    n.node.op_type = op;
    n.node.name = op + std::to_string(nodes.size());
    n.node.opset = 17;
    // (std::string("v").append, not "v" + ...: GCC 12 warns -Wrestrict on the latter here)
    for (int32_t v : in) n.node.inputs.push_back(std::string("v").append(std::to_string(v)));
    for (int32_t v : out) n.node.outputs.push_back(std::string("v").append(std::to_string(v)));
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    n.graph_index = static_cast<int32_t>(nodes.size());
    nodes.push_back(std::move(n));
  }
  int fuse() { return fuse_activations(nodes, types, constants, kept, KernelRegistry::builtin()); }
};

TEST(Fusion, ConvAndActivationBecomeOneNode) {
  Patch p(5);  // 0 x, 1 w, 2 conv out, 3 relu out
  p.add("Conv", {0, 1}, {2});
  p.add("Relu", {2}, {3});
  p.kept[3] = 1;
  EXPECT_EQ(p.fuse(), 1);
  ASSERT_EQ(p.nodes.size(), 1u);
  EXPECT_EQ(p.nodes[0].activation.kind, Activation::Kind::Relu);
  EXPECT_EQ(p.nodes[0].outputs, std::vector<int32_t>{3});
  EXPECT_EQ(p.nodes[0].node.outputs[0], "v3");
  EXPECT_EQ(p.nodes[0].folded, std::vector<int32_t>{1});
}

TEST(Fusion, SwishIsSiluInTheKernel) {
  Patch p(4);
  p.add("Conv", {0, 1}, {2});
  p.add("Swish", {2}, {3});
  p.nodes[1].node.opset = 24;
  p.kept[3] = 1;
  EXPECT_EQ(p.fuse(), 1);
  ASSERT_EQ(p.nodes.size(), 1u);
  EXPECT_EQ(p.nodes[0].activation.kind, Activation::Kind::Silu);
  EXPECT_EQ(p.nodes[0].outputs, std::vector<int32_t>{3});
}

TEST(Fusion, SwishWithAnotherAlphaAndWrittenOutSiluStaySeparate) {
  Patch p(4);  // x * sigmoid(2x) has no fused form
  p.add("Conv", {0, 1}, {2});
  p.add("Swish", {2}, {3});
  Attribute alpha;
  alpha.name = "alpha";
  alpha.kind = Attribute::Kind::Float;
  alpha.f = 2.f;
  p.nodes[1].node.attributes["alpha"] = alpha;
  EXPECT_EQ(p.fuse(), 0);
  // Sigmoid + Mul is the core's to rewrite into Swish (core/optimize): the CPU pass leaves it.
  Patch q(5);
  q.add("Conv", {0, 1}, {2});
  q.add("Sigmoid", {2}, {3});
  q.add("Mul", {2, 3}, {4});
  EXPECT_EQ(q.fuse(), 0);
}

TEST(Fusion, ClipNeedsConstantBounds) {
  Patch p(6);  // 3, 4: Clip bounds
  p.add("Gemm", {0, 1}, {2});
  p.add("Clip", {2, 3, 4}, {5});
  EXPECT_EQ(p.fuse(), 0);  // bounds are run-time inputs
  p.constants[3] = Tensor::from_vector<float>({}, {0.f});
  p.constants[4] = Tensor::from_vector<float>({}, {6.f});
  EXPECT_EQ(p.fuse(), 1);
  EXPECT_EQ(p.nodes[0].activation.kind, Activation::Kind::Clip);
  EXPECT_EQ(p.nodes[0].activation.alpha, 0.f);
  EXPECT_EQ(p.nodes[0].activation.beta, 6.f);
}

TEST(Fusion, LeavesValuesOthersReadAlone) {
  {  // the conv output leaves the patch
    Patch p(4);
    p.add("Conv", {0, 1}, {2});
    p.add("Relu", {2}, {3});
    p.kept[2] = 1;
    EXPECT_EQ(p.fuse(), 0);
  }
  {  // a second reader
    Patch p(5);
    p.add("Conv", {0, 1}, {2});
    p.add("Relu", {2}, {3});
    p.add("Add", {2, 3}, {4});
    EXPECT_EQ(p.fuse(), 0);
  }
  {  // a producer whose kernel takes no activation, and a non-float output
    Patch p(5);
    p.add("MaxPool", {0}, {2});
    p.add("Relu", {2}, {3});
    EXPECT_EQ(p.fuse(), 0);
    Patch q(4);
    q.types[2].dtype = DType::Float64;
    q.add("Gemm", {0, 1}, {2});
    q.add("Relu", {2}, {3});
    EXPECT_EQ(q.fuse(), 0);
  }
}

TEST(Fusion, MatMulTakesARowBiasThenAnActivation) {
  Patch p(6);  // 0 a, 1 w, 2 product, 3 bias, 4 sum, 5 gelu
  p.constants[3] = Tensor::from_vector<float>({4}, {1.f, 2.f, 3.f, 4.f});
  p.add("MatMul", {0, 1}, {2});
  p.add("Add", {2, 3}, {4});
  p.add("Gelu", {4}, {5});
  p.nodes[2].node.opset = 20;
  EXPECT_EQ(p.fuse(), 2);
  ASSERT_EQ(p.nodes.size(), 1u);
  EXPECT_EQ(p.nodes[0].bias_input, 2);
  EXPECT_EQ(p.nodes[0].inputs, (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(p.nodes[0].activation.kind, Activation::Kind::Gelu);
  EXPECT_EQ(p.nodes[0].outputs, std::vector<int32_t>{5});
  EXPECT_EQ(p.nodes[0].folded, (std::vector<int32_t>{1, 2}));
}

TEST(Fusion, BiasMustBeAConstantRowOfTheProduct) {
  for (int variant = 0; variant < 3; ++variant) {
    Patch p(5);
    if (variant == 0) p.constants[3] = Tensor::from_vector<float>({2, 4}, std::vector<float>(8));
    if (variant == 1) p.constants[3] = Tensor::from_vector<float>({3}, {1.f, 2.f, 3.f});
    // variant 2: the bias is a run-time input
    p.add("MatMul", {0, 1}, {2});
    p.add("Add", {2, 3}, {4});
    EXPECT_EQ(p.fuse(), 0) << variant;
  }
  Patch conv(5);  // Conv takes no fused bias this way (it has its own input)
  conv.constants[3] = Tensor::from_vector<float>({4}, std::vector<float>(4));
  conv.types[3] = TypeShape{DType::Float32, true, {4}};  // broadcast: not a residual either
  conv.add("Conv", {0, 1}, {2});
  conv.add("Add", {2, 3}, {4});
  EXPECT_EQ(conv.fuse(), 0);
}

TEST(Fusion, ResidualAddAndActivationFoldIntoTheConv) {
  // 0 x, 1 w, 2 main conv, 3 shortcut conv (computed after the main one, as ResNet's
  // downsample), 4 sum, 5 relu; w2 6.
  Patch p(7);
  p.add("Conv", {0, 1}, {2});
  p.add("Conv", {0, 6}, {3});
  p.add("Add", {3, 2}, {4});
  p.add("Relu", {4}, {5});
  p.kept[5] = 1;
  EXPECT_EQ(p.fuse(), 2);
  ASSERT_EQ(p.nodes.size(), 2u);
  // The main conv now reads the shortcut, so it runs after it (where the Add ran).
  EXPECT_EQ(p.nodes[0].outputs, std::vector<int32_t>{3});
  const PatchNode& main = p.nodes[1];
  EXPECT_EQ(main.inputs, (std::vector<int32_t>{0, 1, -1, 3}));
  EXPECT_EQ(main.node.inputs, (std::vector<std::string>{"v0", "v1", "", "v3"}));
  EXPECT_EQ(main.residual_input, 3);
  EXPECT_EQ(main.outputs, std::vector<int32_t>{5});
  EXPECT_EQ(main.activation.kind, Activation::Kind::Relu);
  EXPECT_EQ(main.folded, (std::vector<int32_t>{2, 3}));
}

TEST(Fusion, ResidualOfUnknownDimsIsCheckedOnEachRun) {
  // [-1, 4] + [-1, 4] is an element-wise sum only if the two -1 are one size: fused, and the
  // product's value kept for the run's check (cpu_abi.cpp, run_residual_at_run).
  Patch p(5);  // 0 x, 1 w, 2 conv, 3 r, 4 sum
  for (int v : {2, 3, 4}) p.types[v] = TypeShape{DType::Float32, true, {-1, 4}};
  p.add("Conv", {0, 1}, {2});
  p.add("Add", {3, 2}, {4});
  EXPECT_EQ(p.fuse(), 1);
  ASSERT_EQ(p.nodes.size(), 1u);
  EXPECT_EQ(p.nodes[0].residual_input, 3);
  EXPECT_EQ(p.nodes[0].residual_at_run, 2);
  EXPECT_EQ(p.nodes[0].outputs, std::vector<int32_t>{4});
  Patch known(5);  // every dim known: nothing to check
  known.add("Conv", {0, 1}, {2});
  known.add("Add", {2, 3}, {4});
  EXPECT_EQ(known.fuse(), 1);
  EXPECT_EQ(known.nodes[0].residual_at_run, -1);
}

TEST(Fusion, ResidualMustHaveTheConvsShapeAndTheSumStayPrivate) {
  for (int variant = 0; variant < 5; ++variant) {
    Patch p(5);  // 0 x, 1 w, 2 conv, 3 r, 4 sum
    p.add("Conv", {0, 1}, {2});
    if (variant == 0) p.types[3] = TypeShape{DType::Float32, true, {4}};      // broadcast
    if (variant == 1) p.types[3] = TypeShape{DType::Float32, true, {-1, 4}};  // and the sum
    if (variant == 1) p.types[2] = p.types[3];                                // is [1, 4]
    if (variant == 2) p.kept[2] = 1;            // the conv's output leaves the patch
    if (variant == 3) p.add("Relu", {2}, {3});  // a second reader of the conv's output
    if (variant == 4) p.types[3] = TypeShape{DType::Float16, true, {1, 4}};
    p.add("Add", {2, 3}, {4});
    EXPECT_EQ(p.fuse(), 0) << variant;
    EXPECT_EQ(p.nodes[0].residual_input, -1) << variant;
  }
  Patch twice(4);  // Add(c, c): no other operand
  twice.add("Conv", {0, 1}, {2});
  twice.add("Add", {2, 2}, {3});
  EXPECT_EQ(twice.fuse(), 0);
}

}  // namespace
}  // namespace quilt::cpu
