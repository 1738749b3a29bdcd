// Sequences, maps and optionals through the public Session API: round trips, host steps next
// to CPU patches, what the plan says, and the errors for a value of the wrong type.
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

TEST(Values, ASequenceRoundTripsAndFeedsACpuPatch) {
  Session s(kDir + "/seq_io.onnx");
  ASSERT_EQ(s.inputs().size(), 1u);
  EXPECT_EQ(s.inputs()[0].kind, ValueKind::Sequence);
  EXPECT_EQ(type_string(s.inputs()[0]), "seq(tensor(float))");
  const Tensor a = Tensor::from_vector<float>({2}, {1, -2});
  const Tensor b = Tensor::from_vector<float>({1}, {-3});
  const ValueMap out = s.run_values({{"s", Value::sequence({a, b})}});
  const Value& t = out.at("t");
  ASSERT_EQ(t.kind(), ValueKind::Sequence);
  ASSERT_EQ(t.items().size(), 2u);
  EXPECT_EQ(t.items()[1].tensor().data<float>()[0], -3.f);
  EXPECT_FALSE(t.items()[0].tensor().shares_storage_with(a));  // the caller's input is not aliased
  // Nor is a tensor taken out of it.
  EXPECT_EQ(out.at("first").tensor().data<float>()[1], -2.f);
  EXPECT_FALSE(out.at("first").tensor().shares_storage_with(a));
  EXPECT_EQ(out.at("n").tensor().data<int64_t>()[0], 2);
  const float* r = out.at("r").tensor().data<float>();
  EXPECT_EQ(r[0], 1.f);
  EXPECT_EQ(r[1], 0.f);
  EXPECT_EQ(r[2], 0.f);
  // An empty sequence has a length of 0.
  const ValueMap empty = s.run_values({{"s", Value::sequence({}, DType::Float32)}}, {"n"});
  EXPECT_EQ(empty.at("n").tensor().data<int64_t>()[0], 0);
}

TEST(Values, ThePlanRunsSequenceNodesOnTheHostAndSaysWhy) {
  Session s(kDir + "/seq_io.onnx");
  const PlanReport& plan = s.plan();
  for (const auto& n : plan.nodes) {
    if (n.op_type == "Relu") {
      EXPECT_EQ(n.backend, "cpu");
      continue;
    }
    EXPECT_EQ(n.backend, "host") << n.op_type;
    EXPECT_NE(n.reason.find("sequences, maps and optionals do not cross the backend ABI"),
              std::string::npos)
        << n.reason;
  }
}

TEST(Values, AWrongKindOfValueIsRefusedNamingTheInputAndTheType) {
  Session s(kDir + "/seq_io.onnx");
  expect_error(
      [&] {
        s.run_values({{"s", Tensor::from_vector<float>({1}, {1})}});
      },
      ErrorCode::InvalidArgument, {"input 's' is tensor(float), expected seq(tensor(float))"});
  expect_error(
      [&] {
        s.run_values({{"s", Value::sequence({Tensor::from_vector<int64_t>({1}, {1})})}});
      },
      ErrorCode::InvalidArgument, {"input 's' is seq(tensor(int64)), expected seq(tensor(float))"});
  // run() returns tensors only: it says which output is not one and what to use.
  expect_error([&] { s.run({}, {"t"}); }, ErrorCode::InvalidArgument,
               {"missing input 's' (seq(tensor(float)))"});
  Session numbers(kDir + "/add_relu.onnx");
  expect_error(
      [&] {
        numbers.run_values({{numbers.inputs()[0].name, Value::sequence({}, DType::Float32)}});
      },
      ErrorCode::InvalidArgument, {"is seq(tensor(float)), expected tensor(float)"});
}

TEST(Values, RunSaysToUseRunValuesForASequenceOutput) {
  Session s(kDir + "/seq_io.onnx");
  // The input can only be given as a Value: run_values with a tensor-only caller's view.
  const ValueMap in = {{"s", Value::sequence({Tensor::from_vector<float>({1}, {1})})}};
  EXPECT_NO_THROW(s.run_values(in, {"r"}));
  Session zip(kDir + "/zipmap_io.onnx");
  expect_error(
      [&] {
        zip.run({{"x", Tensor::from_vector<float>({1, 2}, {0.25f, 0.75f})}});
      },
      ErrorCode::InvalidArgument,
      {"output 'z' is seq(map(int64,tensor(float))), not a tensor: run it with run_values()"});
}

TEST(Values, ZipMapGivesOneMapPerRow) {
  Session s(kDir + "/zipmap_io.onnx");
  EXPECT_EQ(type_string(s.outputs()[0]), "seq(map(int64,tensor(float)))");
  const ValueMap out =
      s.run_values({{"x", Tensor::from_vector<float>({2, 2}, {0.25f, 0.75f, 1, 0})}});
  const Value& z = out.at("z");
  ASSERT_EQ(z.items().size(), 2u);
  const Value& row1 = z.items()[1];
  ASSERT_EQ(row1.kind(), ValueKind::Map);
  EXPECT_EQ(row1.keys().data<int64_t>()[0], 3);
  EXPECT_EQ(row1.keys().data<int64_t>()[1], 8);
  EXPECT_EQ(row1.values().data<float>()[0], 1.f);
  EXPECT_EQ(row1.values().data<float>()[1], 0.f);
  // The maps hold their own copy of X: changing the caller's tensor, or running again, leaves
  // them as they were.
  Tensor x = Tensor::from_vector<float>({1, 2}, {0.5f, 0.5f});
  const ValueMap first = s.run_values({{"x", x}});
  x.data<float>()[0] = 7;
  s.run_values({{"x", Tensor::from_vector<float>({1, 2}, {9, 9})}});
  EXPECT_EQ(first.at("z").items()[0].values().data<float>()[0], 0.5f);
  expect_error(
      [&] {
        s.run_values({{"x", Tensor::from_vector<float>({1, 3}, {1, 2, 3})}});
      },
      ErrorCode::InvalidArgument, {"input 'x' has shape [1, 3], expected [N, 2]"});
}

TEST(Values, OptionalsHoldAValueOrNone) {
  Session s(kDir + "/optional_io.onnx");
  EXPECT_EQ(type_string(s.inputs()[0]), "optional(tensor(float))");
  auto has = [&](const Value& v) {
    return s.run_values({{"o", v}}).at("has").tensor().data<bool>()[0];
  };
  EXPECT_TRUE(has(Value::optional(Tensor::from_vector<float>({1}, {1}))));
  EXPECT_FALSE(has(Value::none()));
  expect_error([&] { has(Tensor::from_vector<float>({1}, {1})); }, ErrorCode::InvalidArgument,
               {"input 'o' is tensor(float), expected optional(tensor(float))"});
  expect_error([&] { has(Value::optional(Tensor::from_vector<int64_t>({1}, {1}))); },
               ErrorCode::InvalidArgument,
               {"input 'o' is optional(tensor(int64)), expected optional(tensor(float))"});
}

TEST(Values, MalformedValuesAreRefusedWhenMade) {
  const Tensor f = Tensor::from_vector<float>({1}, {1});
  const Tensor i = Tensor::from_vector<int64_t>({1}, {1});
  expect_error(
      [&] {
        Value::sequence({f, i});
      },
      ErrorCode::InvalidArgument,
      {"a sequence's elements must have one type", "tensor(float)", "tensor(int64)"});
  // Maps and nested sequences are compared by their element types too.
  const Value float_map = Value::map(i, f), int_map = Value::map(i, i);
  EXPECT_EQ(Value::sequence({float_map, Value::map(i, f)}).items().size(), 2u);
  expect_error(
      [&] {
        Value::sequence({float_map, int_map});
      },
      ErrorCode::InvalidArgument,
      {"must have one type", "map(int64,tensor(float))", "map(int64,tensor(int64))"});
  expect_error(
      [&] {
        Value::sequence({Value::sequence({f}), Value::sequence({i})});
      },
      ErrorCode::InvalidArgument,
      {"must have one type", "seq(tensor(float))", "seq(tensor(int64))"});
  // An empty sequence's type is its element dtype: the same as a non-empty one's of that dtype.
  EXPECT_EQ(
      Value::sequence({Value::sequence({f}), Value::sequence({}, DType::Float32)}).items().size(),
      2u);
  expect_error([&] { Value::map(f, f); }, ErrorCode::InvalidArgument,
               {"map keys must be int64 or string, got float32"});
  expect_error(
      [&] {
        Value::map(Tensor::from_vector<int64_t>({2}, {1, 1}), Tensor(DType::Float32, {2}));
      },
      ErrorCode::InvalidArgument, {"a map has a key twice"});
  expect_error([&] { Value::map(i, Tensor(DType::Float32, {2})); }, ErrorCode::InvalidArgument,
               {"a map needs 1-D keys and values of one length"});
  expect_error([&] { Value::none().element(); }, ErrorCode::InvalidArgument,
               {"the optional value holds no element"});
  expect_error([&] { Value(f).items(); }, ErrorCode::InvalidArgument,
               {"the value is tensor tensor(float), not a sequence"});
}
