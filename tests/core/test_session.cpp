// The public Session API on real models: metadata, run, output subsets, bad inputs, threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "quilt/quilt.hpp"
#include "tests/expect_error.hpp"

using namespace quilt;

namespace {
const std::string kDir = QUILT_TEST_MODELS_DIR;

using quilt::testing::expect_error;

Tensor x_input() {
  std::vector<float> v(8);
  for (int i = 0; i < 8; ++i) v[i] = static_cast<float>(i - 4);
  return Tensor::from_vector<float>({2, 4}, v);
}

std::vector<float> add_relu_expected(const Tensor& x) {
  const float w[4] = {0.5f, -1.0f, 2.0f, -0.25f};
  std::vector<float> y(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) y[i] = std::max(0.f, x.data<float>()[i] + w[i % 4]);
  return y;
}
}  // namespace

TEST(Session, ReportsInputAndOutputMetadataWithSymbolicDims) {
  Session s(kDir + "/add_relu.onnx");
  ASSERT_EQ(s.inputs().size(), 1u);
  EXPECT_EQ(s.inputs()[0].name, "x");
  EXPECT_EQ(s.inputs()[0].dtype, DType::Float32);
  EXPECT_EQ(to_string(s.inputs()[0].shape), "[batch, 4]");
  ASSERT_EQ(s.outputs().size(), 1u);
  EXPECT_EQ(s.outputs()[0].name, "y");
  EXPECT_EQ(to_string(s.outputs()[0].shape), "[batch, 4]");
}

TEST(Session, RunsAndLeavesTheCallersInputUntouched) {
  Session s(kDir + "/add_relu.onnx");
  Tensor x = x_input();
  Tensor before = x.clone();
  TensorMap out = s.run({{"x", x}});
  const Tensor& y = out.at("y");
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{2, 4}));
  auto want = add_relu_expected(x);
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(y.data<float>()[i], want[i]);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(x.data<float>()[i], before.data<float>()[i]);
  // Another batch size through the symbolic dim.
  Tensor x5(DType::Float32, {5, 4});
  EXPECT_EQ(s.run({{"x", x5}}).at("y").shape(), (std::vector<int64_t>{5, 4}));
}

TEST(Session, LoadsFromBytes) {
  std::ifstream f(kDir + "/add_relu.onnx", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  Session s = Session::from_bytes({reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()});
  Tensor x = x_input();
  EXPECT_FLOAT_EQ(s.run({{"x", x}}).at("y").data<float>()[2], add_relu_expected(x)[2]);
  // External data needs a directory when loading from bytes.
  std::ifstream g(kDir + "/external_ok/model.onnx", std::ios::binary);
  std::string ext((std::istreambuf_iterator<char>(g)), std::istreambuf_iterator<char>());
  std::span<const std::byte> ext_bytes{reinterpret_cast<const std::byte*>(ext.data()), ext.size()};
  expect_error([&] { Session::from_bytes(ext_bytes); }, ErrorCode::InvalidModel, {"external data"});
  Session ok = Session::from_bytes(ext_bytes, {}, kDir + "/external_ok");
  EXPECT_FLOAT_EQ(ok.run({{"x", x}}).at("y").data<float>()[2], add_relu_expected(x)[2]);
}

TEST(Session, OutputSubsets) {
  Session s(kDir + "/two_outputs.onnx");
  auto x = Tensor::from_vector<float>({2, 3}, {-1, 2, -3, 4, -5, 6});
  TensorMap both = s.run({{"x", x}});
  EXPECT_EQ(both.size(), 2u);
  TensorMap only = s.run({{"x", x}}, {"y2"});
  ASSERT_EQ(only.size(), 1u);
  EXPECT_EQ(only.at("y2").data<float>()[0], 1.f);
  expect_error(
      [&] {
        s.run({{"x", x}}, {"nope"});
      },
      ErrorCode::InvalidArgument, {"unknown output 'nope'", "y1, y2"});
}

TEST(Session, BadInputsAreReportedAndTheSessionStillWorks) {
  Session s(kDir + "/add_relu.onnx");
  expect_error(
      [&] {
        s.run({{"z", x_input()}});
      },
      ErrorCode::InvalidArgument, {"unknown input 'z'", "inputs are: x"});
  expect_error([&] { s.run({}); }, ErrorCode::InvalidArgument,
               {"missing input 'x'", "float32 [batch, 4]"});
  expect_error(
      [&] {
        s.run({{"x", Tensor(DType::Int64, {2, 4})}});
      },
      ErrorCode::InvalidArgument, {"input 'x'", "dtype int64, expected float32"});
  expect_error(
      [&] {
        s.run({{"x", Tensor(DType::Float32, {8})}});
      },
      ErrorCode::InvalidArgument, {"input 'x'", "rank 1", "expected rank 2"});
  expect_error(
      [&] {
        s.run({{"x", Tensor(DType::Float32, {2, 5})}});
      },
      ErrorCode::InvalidArgument, {"input 'x'", "dim 1 is 5, expected 4"});
  expect_error(
      [&] {
        s.run({{"x", Tensor()}});
      },
      ErrorCode::InvalidArgument, {"input 'x'", "empty"});
  Tensor x = x_input();
  EXPECT_FLOAT_EQ(s.run({{"x", x}}).at("y").data<float>()[6], add_relu_expected(x)[6]);
}

TEST(Session, BadModelsAndOptionsFailAtCreation) {
  expect_error([] { Session s(kDir + "/unknown_op.onnx"); }, ErrorCode::NotImplemented,
               {"FooBar (opset 17) at nodes \"foo1\", \"foo2\""});
  expect_error([] { Session s(kDir + "/cycle.onnx"); }, ErrorCode::InvalidModel, {"cycle"});
  expect_error([] { Session s(kDir + "/truncated.onnx"); }, ErrorCode::InvalidModel,
               {"not a valid ONNX"});
  SessionOptions bad_backend;
  bad_backend.backends = {"warp-drive"};
  expect_error([&] { Session s(kDir + "/add_relu.onnx", bad_backend); }, ErrorCode::InvalidArgument,
               {"unknown backend 'warp-drive'", "available: cpu"});
  SessionOptions bad_level;
  bad_level.optimization_level = 5;
  expect_error([&] { Session s(kDir + "/add_relu.onnx", bad_level); }, ErrorCode::InvalidArgument,
               {"optimization_level is 5", "expected 0"});
  SessionOptions bad_threads;
  bad_threads.threads = -3;
  expect_error([&] { Session s(kDir + "/add_relu.onnx", bad_threads); }, ErrorCode::InvalidArgument,
               {"threads is -3"});
  bad_threads.threads = SessionOptions::kMaxThreads + 1;
  expect_error([&] { Session s(kDir + "/add_relu.onnx", bad_threads); }, ErrorCode::InvalidArgument,
               {"threads is 4097", "expected 0 (one per core) to 4096"});
  SessionOptions bad_log;
  bad_log.log_level = static_cast<LogLevel>(99);
  expect_error([&] { Session s(kDir + "/add_relu.onnx", bad_log); }, ErrorCode::InvalidArgument,
               {"log_level is 99", "expected Error (0), Warning (1), Info (2) or Debug (3)"});
}

TEST(Session, DeclaredOutputsThatContradictInferenceAreRefused) {
  expect_error([] { Session s(kDir + "/declared_wrong_dtype.onnx"); }, ErrorCode::InvalidModel,
               {"declared_wrong_dtype.onnx", "[Relu node \"relu\"] output 'y'", "dtype float32",
                "the graph declares int64"});
}

TEST(Session, DeclaredOutputShapesThatContradictInferenceGiveWayWithAWarning) {
  // A converter's wrong output shape (skl2onnx's [N, 1] for a multi-target forest) runs, as on
  // onnxruntime: the inferred shape wins, outputs() reports it, and a warning names the output.
  std::vector<std::string> warnings;
  set_log_sink([&warnings](LogLevel level, const std::string& message) {
    if (level == LogLevel::Warning) warnings.push_back(message);
    return true;
  });
  const Tensor x = Tensor::from_vector<float>({2}, {-1.f, 1.f});
  for (const auto& [file, declared] :
       {std::pair<std::string, std::string>{"declared_wrong_shape.onnx", "declares [3] (dim 0)"},
        {"declared_wrong_rank.onnx", "declares [2, 1] (rank 2)"}}) {
    warnings.clear();
    Session s(kDir + "/" + file);
    ASSERT_EQ(warnings.size(), 1u) << file;
    for (const std::string& part :
         std::vector<std::string>{"[Relu node \"relu\"] output 'y' has shape [2]", declared,
                                  "running with the inferred shape"})
      EXPECT_NE(warnings[0].find(part), std::string::npos) << warnings[0];
    ASSERT_EQ(s.outputs().at(0).shape.size(), 1u) << file;
    EXPECT_EQ(s.outputs().at(0).shape[0].value, 2) << file;
    const Tensor y = s.run({{"x", x}}).at("y");
    EXPECT_EQ(y.shape(), (std::vector<int64_t>{2}));
    EXPECT_EQ(y.data<float>()[1], 1.f);
  }
  set_log_sink(nullptr);
}

TEST(Session, SymbolicDeclaredDimsAreNoContradiction) {
  // A symbolic dim where inference knows the size is no contradiction.
  Session ok(kDir + "/declared_symbolic_ok.onnx");
  EXPECT_EQ(ok.run({{"x", Tensor::from_vector<float>({2}, {-1.f, 1.f})}}).at("y").shape(),
            (std::vector<int64_t>{2}));
}

TEST(Session, PoolPaddingAsWideAsTheWindowIsRefused) {
  for (const std::string op : {"maxpool", "averagepool"})
    expect_error([&] { Session s(kDir + "/" + op + "_pad_too_large.onnx"); },
                 ErrorCode::InvalidModel,
                 {"node \"pool\"", "pad 3 is not smaller than the window (kernel_shape [3, 3]",
                  "only padding"});
}

TEST(Session, AMovedFromSessionThrowsInsteadOfCrashing) {
  Session a(kDir + "/add_relu.onnx");
  Session b(std::move(a));
  expect_error(
      [&] {
        a.run({{"x", x_input()}});
      },
      ErrorCode::InvalidArgument, {"this Session was moved from"});
  expect_error([&] { a.inputs(); }, ErrorCode::InvalidArgument, {"moved from"});
  expect_error([&] { a.outputs(); }, ErrorCode::InvalidArgument, {"moved from"});
  expect_error([&] { a.plan(); }, ErrorCode::InvalidArgument, {"moved from"});
  RunProfile profile;
  expect_error(
      [&] {
        a.run({{"x", x_input()}}, {}, &profile);
      },
      ErrorCode::InvalidArgument, {"moved from"});
  EXPECT_EQ(b.run({{"x", x_input()}}).at("y").numel(), 8);
  a = std::move(b);  // assigning to it makes it usable again
  EXPECT_EQ(a.run({{"x", x_input()}}).at("y").numel(), 8);
}

TEST(Session, LogLevelBelongsToTheSessionNotTheProcess) {
  SessionOptions debug;
  debug.log_level = LogLevel::Debug;
  ::testing::internal::CaptureStderr();
  { Session s(kDir + "/add_relu.onnx", debug); }
  const std::string loud = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(loud.find("[quilt debug] cpu backend:"), std::string::npos) << loud;
  // Once the Debug session is gone, a Warning session prints no debug lines (the CPU backend's
  // own, which reach the host's log without naming a session, included).
  ::testing::internal::CaptureStderr();
  {
    Session s(kDir + "/add_relu.onnx");
    s.run({{"x", x_input()}});
  }
  const std::string quiet = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(quiet.find("[quilt debug]"), std::string::npos) << quiet;
}

TEST(Session, ALogSinkTakesTheMessagesOrLeavesThemToStderr) {
  SessionOptions debug;
  debug.log_level = LogLevel::Debug;
  std::vector<std::pair<LogLevel, std::string>> got;
  set_log_sink([&got](LogLevel level, const std::string& message) {
    got.emplace_back(level, message);
    return true;
  });
  ::testing::internal::CaptureStderr();
  { Session s(kDir + "/add_relu.onnx", debug); }
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("[quilt debug]"), std::string::npos) << err;
  ASSERT_FALSE(got.empty());
  EXPECT_TRUE(std::any_of(got.begin(), got.end(), [](const auto& m) {
    return m.first == LogLevel::Debug && m.second.find("cpu backend:") != std::string::npos;
  }));
  // A sink that declines leaves the message to stderr; nullptr restores stderr.
  set_log_sink([](LogLevel, const std::string&) { return false; });
  ::testing::internal::CaptureStderr();
  { Session s(kDir + "/add_relu.onnx", debug); }
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("[quilt debug] cpu backend:"), std::string::npos) << err;
  set_log_sink(nullptr);
  const size_t before = got.size();
  ::testing::internal::CaptureStderr();
  { Session s(kDir + "/add_relu.onnx", debug); }
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("[quilt debug] cpu backend:"), std::string::npos) << err;
  EXPECT_EQ(got.size(), before);
}

TEST(Session, ConstantOutputsAreCopiesTheCallerMayModify) {
  Session s(kDir + "/typed_initializers.onnx");
  TensorMap a = s.run({});
  a.at("f32_out").data<float>()[0] = 100.f;
  TensorMap b = s.run({});
  EXPECT_EQ(b.at("f32_out").data<float>()[0], 1.5f);
  EXPECT_EQ(b.at("u64_out").data<uint64_t>()[0], UINT64_MAX);
}

TEST(Session, MetadataComesFromTheModel) {
  Session s(kDir + "/metadata.onnx");
  const ModelMetadata& m = s.metadata();
  EXPECT_EQ(m.producer_name, "quilt-tests");
  EXPECT_EQ(m.producer_version, "2.5");
  EXPECT_EQ(m.domain, "org.quilt.tests");
  EXPECT_EQ(m.model_version, 7);
  EXPECT_EQ(m.description, "adds w, then Relu");
  EXPECT_EQ(m.graph_name, "add_relu");
  EXPECT_EQ(m.graph_description, "the add_relu graph");
  EXPECT_EQ(m.custom,
            (std::map<std::string, std::string>{{"author", "quilt"}, {"licence", "none"}}));
  EXPECT_EQ(m.ir_version, 8);
  EXPECT_EQ(m.opsets, (std::map<std::string, int64_t>{{"", 17}}));
  // A model without any of it: empty strings, no custom entries.
  Session plain(kDir + "/two_outputs.onnx");
  EXPECT_EQ(plain.metadata().producer_name, "");
  EXPECT_EQ(plain.metadata().graph_name, "two_outputs");
  EXPECT_TRUE(plain.metadata().custom.empty());
  EXPECT_FALSE(plain.metadata().model_version.has_value());
}

TEST(Session, OverridableInitializersReplaceTheirValueForOneRun) {
  Session s(kDir + "/overridable.onnx");
  ASSERT_EQ(s.inputs().size(), 1u);
  ASSERT_EQ(s.overridable_initializers().size(), 1u);
  EXPECT_EQ(s.overridable_initializers()[0].name, "w");
  EXPECT_EQ(s.overridable_initializers()[0].dtype, DType::Float32);
  EXPECT_EQ(to_string(s.overridable_initializers()[0].shape), "[4]");
  Tensor x(DType::Float32, {2, 4});
  // y = x + w + 10 with the model's w = [0.5, -1, 2, -0.25], then with a given one.
  EXPECT_EQ(s.run({{"x", x}}).at("y").data<float>()[1], 9.0f);
  auto w = Tensor::from_vector<float>({4}, {1, 2, 3, 4});
  EXPECT_EQ(s.run({{"x", x}, {"w", w}}).at("y").data<float>()[1], 12.0f);
  EXPECT_EQ(s.run({{"x", x}}).at("y").data<float>()[1], 9.0f);
  expect_error(
      [&] {
        s.run({{"x", x}, {"w", Tensor(DType::Float32, {3})}});
      },
      ErrorCode::InvalidArgument, {"input 'w' overrides an initializer of float32[4]"});
  // IR 3 lists every initializer as an input: none of them can be overridden.
  Session old(kDir + "/overridable_ir3.onnx");
  EXPECT_TRUE(old.overridable_initializers().empty());
  expect_error(
      [&] {
        old.run({{"x", x}, {"w", w}});
      },
      ErrorCode::InvalidArgument, {"input 'w'", "IR version < 4", "cannot be overridden"});
}

TEST(Session, VersionIsMajorMinorPatch) {
  const std::string v = version();
  EXPECT_EQ(std::count(v.begin(), v.end(), '.'), 2) << v;
  EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(v.front())) &&
              std::isdigit(static_cast<unsigned char>(v.back())))
      << v;
}

TEST(Session, InitializersOnlyFoldedNodesReadAreNotNeededToRun) {
  Session s(kDir + "/folded_inputs.onnx");
  EXPECT_EQ(s.plan().folded_nodes, 1);
  auto x = Tensor::from_vector<float>({2, 3}, {0, 0, 0, 10, 10, 10});
  for (int run = 0; run < 2; ++run) {
    TensorMap out = s.run({{"x", x}});
    EXPECT_EQ(out.at("y").data<float>()[1], 2.0f);   // B^T[0][1] = B[1][0]
    EXPECT_EQ(out.at("y").data<float>()[5], 15.0f);  // 10 + B[2][1]
    EXPECT_EQ(out.at("A").data<float>()[1], 8.0f);
  }
}

TEST(Session, ConcurrentRunsGiveTheSameAnswers) {
  for (int level : {0, 1}) {
    SessionOptions options;
    options.threads = 2;
    options.optimization_level = level;
    Session s(kDir + "/add_relu.onnx", options);
    std::vector<std::thread> threads;
    std::atomic<int> wrong{0};
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < 50; ++i) {
          Tensor x(DType::Float32, {3 + t, 4});
          for (int64_t k = 0; k < x.numel(); ++k)
            x.data<float>()[k] = static_cast<float>(k * (t + 1) - 7);
          Tensor y = s.run({{"x", x}}).at("y");
          auto want = add_relu_expected(x);
          for (int64_t k = 0; k < y.numel(); ++k)
            if (y.data<float>()[k] != want[k]) ++wrong;
        }
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(wrong.load(), 0);
  }
}

// Conv, MaxPool, Gemm and Softmax (OpenBLAS inside) from several threads at once, with images of
// different batch sizes, equal the answers of one thread running alone.
TEST(Session, ConcurrentRunsOfACnnMatchSequentialRuns) {
  SessionOptions options;
  options.threads = 2;
  Session s(std::string(QUILT_SOURCE_DIR) + "/tools/models/digits_cnn.onnx", options);
  std::vector<Tensor> images, expected;
  for (int t = 0; t < 4; ++t) {
    Tensor x(DType::Float32, {1 + 9 * t, 1, 8, 8});
    for (int64_t k = 0; k < x.numel(); ++k)
      x.data<float>()[k] = static_cast<float>((k * 7 + t * 3) % 17) / 16.f;
    images.push_back(x);
    expected.push_back(s.run({{"image", x}}).at("probabilities"));
  }
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 30; ++i) {
        Tensor y = s.run({{"image", images[t]}}).at("probabilities");
        for (int64_t k = 0; k < y.numel(); ++k)
          if (std::fabs(y.data<float>()[k] - expected[t].data<float>()[k]) > 1e-6f) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(Session, FixedDimsMakeSymbolicShapesStatic) {
  SessionOptions o;
  o.fixed_dims = {{"batch", 2}};
  Session s(kDir + "/add_relu.onnx", o);
  EXPECT_EQ(to_string(s.inputs()[0].shape), "[2, 4]");
  EXPECT_EQ(to_string(s.outputs()[0].shape), "[2, 4]");
  Tensor y = s.run({{"x", x_input()}}).at("y");
  EXPECT_EQ(std::vector<float>(y.data<float>(), y.data<float>() + 8), add_relu_expected(x_input()));
  expect_error(
      [&] {
        s.run({{"x", Tensor(DType::Float32, {3, 4})}});
      },
      ErrorCode::InvalidArgument, {"input 'x' has shape [3, 4], expected [2, 4]"});
  o.fixed_dims = {{"batchh", 2}};
  expect_error([&] { Session(kDir + "/add_relu.onnx", o); }, ErrorCode::InvalidArgument,
               {"fixed_dims names 'batchh'", "its symbolic dims: batch"});
  o.fixed_dims = {{"batch", -1}};
  expect_error([&] { Session(kDir + "/add_relu.onnx", o); }, ErrorCode::InvalidArgument,
               {"'batch' is -1, expected >= 0"});
}

// Patch outputs come from the buffer cache uninitialised (a run's outputs are the same size
// every time); a kernel that writes only part of its output must still see zeros there. Run 2
// gets run 1's buffer back, with run 1's values at other places.
TEST(Session, OutputsOfPartialWritersAreZeroedOnEveryRun) {
  Session s(kDir + "/max_unpool.onnx");
  auto run = [&](int64_t corner, float value) {
    const std::vector<int64_t> shape{1, 4, 64, 64};
    Tensor x = Tensor::uninitialized(DType::Float32, shape);
    Tensor i = Tensor::uninitialized(DType::Int64, shape);
    for (int64_t c = 0, n = 0; c < 4; ++c)
      for (int64_t h = 0; h < 64; ++h)
        for (int64_t w = 0; w < 64; ++w, ++n) {
          x.data<float>()[n] = value;
          // corner 0: each window's top-left element; corner 3: its bottom-right one
          i.data<int64_t>()[n] = c * 128 * 128 + (2 * h + corner / 2) * 128 + 2 * w + corner % 2;
        }
    return s.run({{"x", x}, {"i", i}}).at("y");
  };
  {
    Tensor first = run(0, 1.f);
    ASSERT_EQ(first.numel(), 4 * 128 * 128);
    EXPECT_EQ(first.data<float>()[0], 1.f);
  }
  Tensor second = run(3, 2.f);
  int64_t twos = 0, zeros = 0;
  for (int64_t n = 0; n < second.numel(); ++n) {
    const float v = second.data<float>()[n];
    twos += v == 2.f;
    zeros += v == 0.f;
  }
  EXPECT_EQ(twos, 4 * 64 * 64);
  EXPECT_EQ(zeros, 3 * 4 * 64 * 64) << "the first run's values are still in the output";
  EXPECT_EQ(second.data<float>()[0], 0.f);
  EXPECT_EQ(second.data<float>()[129], 2.f);
}

TEST(Session, ValidationRefusesANodeWithTooFewInputsBeforeTheOptimizerReadsThem) {
  // Found by fuzz_model: a Conv without inputs crashed the QDQ fusion (optimization level 1).
  expect_error([] { Session s(kDir + "/conv_no_inputs.onnx"); }, ErrorCode::InvalidModel,
               {"[Conv node \"conv\"] has 0 inputs, expected 2 to 3"});
}
