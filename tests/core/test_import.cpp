// ONNX import: typed fields, attributes, subgraphs, external data, and every malformed-file error.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/half.hpp"
#include "core/onnx_import.hpp"
#include "core/op_schema.hpp"
#include "core/validate.hpp"
#include "tests/expect_error.hpp"

using namespace quilt;

namespace {
const std::string kDir = QUILT_TEST_MODELS_DIR;

using quilt::testing::expect_error;
}  // namespace

TEST(Import, ReadsGraphInputsOutputsInitializersAndOpsets) {
  Model m = load_model_file(kDir + "/add_relu.onnx");
  EXPECT_EQ(m.ir_version, 8);
  ASSERT_EQ(m.graph.nodes.size(), 2u);
  EXPECT_EQ(m.graph.nodes[0].op_type, "Add");
  EXPECT_EQ(m.graph.nodes[0].name, "add");
  EXPECT_EQ(m.graph.nodes[0].opset, 17);
  ASSERT_EQ(m.graph.inputs.size(), 1u);
  EXPECT_EQ(m.graph.inputs[0].dtype, DType::Float32);
  ASSERT_EQ(m.graph.inputs[0].shape.size(), 2u);
  EXPECT_EQ(m.graph.inputs[0].shape[0].symbol, "batch");
  EXPECT_EQ(m.graph.inputs[0].shape[1].value, 4);
  const Tensor& w = m.graph.initializers.at("w");
  EXPECT_EQ(w.data<float>()[2], 2.0f);
  EXPECT_EQ(m.graph.opsets.at(""), 17);
}

TEST(Import, ReadsEveryTypedField) {
  Model m = load_model_file(kDir + "/typed_initializers.onnx");
  const auto& in = m.graph.initializers;
  EXPECT_EQ(in.at("f32").data<float>()[1], -2.0f);
  EXPECT_EQ(in.at("f64").data<double>()[1], -3.5);
  EXPECT_EQ(in.at("i64").data<int64_t>()[2], int64_t{1} << 40);
  EXPECT_EQ(in.at("i32").data<int32_t>()[1], -8);
  EXPECT_EQ(in.at("i8").data<int8_t>()[0], -128);
  EXPECT_EQ(in.at("u8").data<uint8_t>()[1], 255);
  EXPECT_EQ(in.at("u16").data<uint16_t>()[1], 65535);
  EXPECT_EQ(in.at("i16").data<int16_t>()[0], -32768);
  EXPECT_EQ(in.at("u32").data<uint32_t>()[1], 4294967295u);
  EXPECT_EQ(in.at("u64").data<uint64_t>()[0], UINT64_MAX);
  EXPECT_EQ(in.at("b").data<bool>()[1], false);
  EXPECT_EQ(in.at("b").data<bool>()[2], true);
  EXPECT_EQ(half_to_float(in.at("f16").data<uint16_t>()[1]), -0.25f);
}

TEST(Import, KeepsAttributesOfEveryKindAndSubgraphs) {
  Model m = load_model_file(kDir + "/attributes.onnx");
  const Node& n = m.graph.nodes.at(0);
  EXPECT_EQ(n.attr_float("f", 0), 0.5f);
  EXPECT_EQ(n.attr_int("i", 0), 3);
  EXPECT_EQ(n.attr_string("s", ""), "text");
  EXPECT_EQ(n.attr_floats("fs"), (std::vector<float>{1, 2}));
  EXPECT_EQ(n.attr_ints("is"), (std::vector<int64_t>{4, 5, 6}));
  EXPECT_EQ(n.attr_strings("ss"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(n.attr_tensor("t")->data<int64_t>()[1], 2);
  const Attribute* then_branch = n.attr("then_branch");
  ASSERT_TRUE(then_branch && then_branch->g);
  EXPECT_EQ(then_branch->g->nodes.at(0).op_type, "Identity");
  EXPECT_EQ(n.attr("else_branch")->g->nodes.at(0).op_type, "Neg");
  // The subgraphs read the outer scope's 'x': that is not an undefined input. (If itself does
  // not execute yet, so validation reports only that.)
  try {
    validate_model(m, SchemaRegistry::builtin());
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("not a graph input"), std::string::npos) << e.what();
  }
}

TEST(Import, ResolvesExternalDataRelativeToTheModel) {
  Model m = load_model_file(kDir + "/external_ok/model.onnx");
  const Tensor& w = m.graph.initializers.at("w");
  EXPECT_EQ(w.data<float>()[0], 0.5f);
  EXPECT_EQ(w.data<float>()[3], -0.25f);
}

TEST(Import, ExternalDataErrorsNameTheFileAndTheProblem) {
  expect_error([] { load_model_file(kDir + "/external_missing/model.onnx"); }, ErrorCode::Io,
               {"initializer 'w'", "nothing_here.bin", "does not exist"});
  expect_error([] { load_model_file(kDir + "/external_range/model.onnx"); },
               ErrorCode::InvalidModel, {"initializer 'w'", "out of range", "weights.bin"});
  expect_error([] { load_model_file(kDir + "/external_escape/model.onnx"); },
               ErrorCode::InvalidModel, {"initializer 'w'", "outside the model's directory"});
  // Offsets and lengths are whole non-negative numbers that fit int64: "12abc" is not 12.
  expect_error([] { load_model_file(kDir + "/external_offset_text/model.onnx"); },
               ErrorCode::InvalidModel,
               {"initializer 'w'", "external-data offset is '12abc'", "non-negative integer"});
  expect_error([] { load_model_file(kDir + "/external_offset_huge/model.onnx"); },
               ErrorCode::InvalidModel,
               {"initializer 'w'", "offset is '99999999999999999999'", "below 2^63"});
  expect_error([] { load_model_file(kDir + "/external_length_negative/model.onnx"); },
               ErrorCode::InvalidModel, {"initializer 'w'", "length is '-16'"});
}

TEST(Import, VersionsNewerThanQuiltKnowsAreRefusedNamingBoth) {
  expect_error([] { load_model_file(kDir + "/opset_99.onnx"); }, ErrorCode::NotImplemented,
               {"opset_99.onnx", "imports opset 99 of domain 'ai.onnx'",
                "the newest this Quilt implements is " + std::to_string(newest_opset(""))});
  expect_error([] { load_model_file(kDir + "/ir_99.onnx"); }, ErrorCode::NotImplemented,
               {"ir_99.onnx", "IR version 99",
                "reads IR versions up to " + std::to_string(kNewestIrVersion)});
  expect_error([] { load_model_file(kDir + "/opset_0.onnx"); }, ErrorCode::InvalidModel,
               {"opset_0.onnx", "opset_import of domain 'ai.onnx' has version 0", "expected >= 1"});
}

TEST(Import, BadFilesGiveClearErrors) {
  expect_error([] { load_model_file(kDir + "/no_such_model.onnx"); }, ErrorCode::Io,
               {"does not exist"});
  expect_error([] { load_model_file(kDir); }, ErrorCode::Io, {"is a directory"});
  expect_error([] { load_model_file(kDir + "/truncated.onnx"); }, ErrorCode::InvalidModel,
               {"truncated.onnx", "not a valid ONNX protobuf"});
  expect_error([] { load_model_file(kDir + "/not_onnx.onnx"); }, ErrorCode::InvalidModel,
               {"not_onnx.onnx"});
  expect_error([] { load_model_file(kDir + "/empty.onnx"); }, ErrorCode::InvalidModel, {"empty"});
}

// Weights are read from the file into their tensors, past a skeleton protobuf parses; these
// files are wire-format corners where that must give what protobuf alone gives.
TEST(Import, WireFormatCornersLoadAsProtobufReadsThem) {
  for (const char* name : {"wire_two_graph_fields.onnx", "wire_corners.onnx", "wire_group.onnx"}) {
    SCOPED_TRACE(name);
    Model m = load_model_file(kDir + "/" + name);
    EXPECT_EQ(m.ir_version, 8);
    ASSERT_EQ(m.graph.nodes.size(), 2u);
    const Tensor& w = m.graph.initializers.at("w");
    ASSERT_EQ(w.numel(), 4);
    EXPECT_EQ(w.data<float>()[2], 2.0f);
    EXPECT_EQ(w.data<float>()[3], -0.25f);
  }
  expect_error([] { load_model_file(kDir + "/truncated_weights.onnx"); }, ErrorCode::InvalidModel,
               {"truncated_weights.onnx", "not a valid ONNX protobuf"});
}

namespace {
std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
}  // namespace

TEST(Import, BytesAndFilesGiveTheSameModel) {
  for (const char* name : {"add_relu.onnx", "typed_initializers.onnx", "wire_corners.onnx"}) {
    SCOPED_TRACE(name);
    const std::string bytes = file_bytes(kDir + "/" + name);
    Model a = load_model_file(kDir + "/" + name);
    Model b =
        load_model_bytes({reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()}, "");
    ASSERT_EQ(a.graph.initializers.size(), b.graph.initializers.size());
    for (const auto& [key, t] : a.graph.initializers) {
      const Tensor& u = b.graph.initializers.at(key);
      EXPECT_EQ(t.dtype(), u.dtype()) << key;
      EXPECT_EQ(t.shape(), u.shape()) << key;
      EXPECT_EQ(std::memcmp(t.raw_data(), u.raw_data(), t.nbytes()), 0) << key;
    }
  }
}

TEST(Import, ReadsAModelFromAPipe) {
  const std::string fifo = std::filesystem::temp_directory_path() /
                           ("quilt_model_fifo_" + std::to_string(getpid()) + ".onnx");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string bytes = file_bytes(kDir + "/add_relu.onnx");
  std::thread writer([&] { std::ofstream(fifo, std::ios::binary) << bytes; });
  Model m = load_model_file(fifo);
  writer.join();
  std::filesystem::remove(fifo);
  EXPECT_EQ(m.graph.initializers.at("w").data<float>()[2], 2.0f);
}

TEST(Import, RawDataOfTheWrongSizeNamesTheInitializer) {
  expect_error([] { load_model_file(kDir + "/raw_size_mismatch.onnx"); }, ErrorCode::InvalidModel,
               {"initializer 'w'", "raw_data has 3 bytes", "need 16"});
}

TEST(Import, HugeAndOverflowingTensorsAreRefused) {
  expect_error([] { load_model_file(kDir + "/huge_initializer.onnx"); }, ErrorCode::OutOfMemory,
               {"initializer 'giant'", "more than this machine"});
  expect_error([] { load_model_file(kDir + "/overflow_initializer.onnx"); }, ErrorCode::OutOfMemory,
               {"initializer 'over'", "overflows"});
}

TEST(Import, ValidationListsCyclesAndUnknownOps) {
  expect_error(
      [] { validate_model(load_model_file(kDir + "/cycle.onnx"), SchemaRegistry::builtin()); },
      ErrorCode::InvalidModel, {"cycle", "\"first\"", "\"second\""});
  expect_error(
      [] { validate_model(load_model_file(kDir + "/unknown_op.onnx"), SchemaRegistry::builtin()); },
      ErrorCode::NotImplemented,
      {"FooBar (opset 17) at nodes \"foo1\", \"foo2\"",
       "com.example.Frobnicate (opset 1) at node \"frob\""});
  expect_error(
      [] { validate_model(load_model_file(kDir + "/broken.onnx"), SchemaRegistry::builtin()); },
      ErrorCode::InvalidModel,
      {"3 problems", "'nowhere'", "produced twice", "'never' is never produced"});
}

TEST(Import, TensorFilesRoundTrip) {
  auto t = Tensor::from_vector<int32_t>({2, 2}, {1, -2, 3, -4});
  std::string path = std::filesystem::temp_directory_path() / "quilt_tensor_roundtrip.pb";
  save_tensor_file(t, path, "t");
  Tensor back = load_tensor_file(path);
  EXPECT_EQ(back.shape(), t.shape());
  EXPECT_EQ(back.data<int32_t>()[3], -4);
  std::filesystem::remove(path);
}

TEST(Import, InputsAndOutputsOfTypesQuiltCannotHoldAreNotImplemented) {
  expect_error(
      [] {
        validate_model(load_model_file(kDir + "/sequence_io.onnx"), SchemaRegistry::builtin());
      },
      ErrorCode::NotImplemented,
      {"types Quilt cannot hold", "'s' is a sequence of a sparse tensor",
       "'t' is a sequence of a sparse tensor"});
}
