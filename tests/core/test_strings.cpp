// String tensors through the public Session API: round trip, host steps next to CPU patches,
// what the plan says, and the errors for a wrong type or an op with no string kernel.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "quilt/quilt.hpp"
#include "tests/expect_error.hpp"

using namespace quilt;
using quilt::testing::expect_error;

namespace {
const std::string kDir = QUILT_TEST_MODELS_DIR;
}  // namespace

TEST(Strings, RoundTripThroughASession) {
  Session s(kDir + "/string_io.onnx");
  ASSERT_EQ(s.inputs().size(), 1u);
  EXPECT_EQ(s.inputs()[0].dtype, DType::String);
  EXPECT_EQ(s.outputs()[0].dtype, DType::String);
  const Tensor in = Tensor::from_strings({2}, {"héllo", std::string("a\0b", 3)});
  const TensorMap out = s.run({{"s", in}});
  const Tensor& t = out.at("t");
  ASSERT_EQ(t.dtype(), DType::String);
  ASSERT_EQ(t.shape(), std::vector<int64_t>{2});
  EXPECT_EQ(t.data<std::string>()[0], "héllo");
  EXPECT_EQ(t.data<std::string>()[1], std::string("a\0b", 3));
  // The output does not alias the caller's input: changing it leaves the input as it was.
  Tensor copy = out.at("t");
  copy.data<std::string>()[0] = "changed";
  EXPECT_EQ(in.data<std::string>()[0], "héllo");
}

TEST(Strings, TheCoreRunsStringNodesAndSaysWhyInThePlan) {
  Session s(kDir + "/string_to_cpu.onnx");
  const PlanReport& plan = s.plan();
  ASSERT_EQ(plan.nodes.size(), 2u);
  EXPECT_EQ(plan.nodes[0].op_type, "ai.onnx.ml.LabelEncoder");
  EXPECT_EQ(plan.nodes[0].backend, "host");
  EXPECT_NE(plan.nodes[0].reason.find("string tensors do not cross the backend ABI"),
            std::string::npos)
      << plan.nodes[0].reason;
  EXPECT_EQ(plan.nodes[1].backend, "cpu");
  const TensorMap out = s.run({{"s", Tensor::from_strings({3}, {"b", "zz", "a"})}});
  const float* sq = out.at("sq").data<float>();
  EXPECT_EQ(sq[0], 4.f);
  EXPECT_EQ(sq[1], 0.f);
  EXPECT_EQ(sq[2], 1.f);
}

TEST(Strings, AWrongTypeForAStringInputIsRefusedNamingIt) {
  Session s(kDir + "/string_io.onnx");
  expect_error(
      [&] {
        s.run({{"s", Tensor::from_vector<float>({2}, {1, 2})}});
      },
      ErrorCode::InvalidArgument, {"input 's' has dtype float32, expected string"});
  Session numbers(kDir + "/add_relu.onnx");
  expect_error(
      [&] {
        numbers.run({{"x", Tensor::from_strings({2, 4}, std::vector<std::string>(8))}});
      },
      ErrorCode::InvalidArgument, {"input 'x' has dtype string, expected float32"});
}

TEST(Strings, AnOpWithNoStringKernelIsNotImplementedNamingTheNode) {
  expect_error([] { Session s(kDir + "/string_transpose.onnx"); }, ErrorCode::NotImplemented,
               {"Transpose node \"flip\"", "string tensors are not supported by Transpose",
                "ops on strings:", "StringSplit"});
}
