// The OpenCL backend's part-2 ops (conv, pooling, normalisation, reductions, tensor ops) against
// the CPU backend: each model from gen_opencl_ops2_models.py runs alone on the CPU and with
// `opencl,cpu` at several input shapes (odd sizes that divide no work-group, empty batches,
// single pixels), every output must agree and every node must be in an OpenCL patch. Plus a small
// CNN and a transformer block as whole models. Without an OpenCL device it prints
// "skipped: no OpenCL device" and exits 77.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <gtest/gtest.h>

#include <limits>

#include <cmath>
#include <random>

#include "quilt/quilt.hpp"
#include "tests/tensor_testing.hpp"

using namespace quilt;

namespace {

const std::string kDir = QUILT_OPENCL_OPS2_MODELS_DIR;

using quilt::testing::random_input;
// The ops here include long reductions: a looser absolute bound than whole-model tests.
void expect_close(const Tensor& got, const Tensor& want) {
  quilt::testing::expect_close(got, want, 1e-4f);
}

SessionOptions opencl_options() {
  SessionOptions o;
  o.threads = 2;
  o.backends = {"opencl", "cpu"};
  o.partition_cost_rule = false;
  return o;
}

// Every node of the plan on OpenCL (none refused), with the refusals in the message otherwise.
void expect_all_on_opencl(const Session& s) {
  for (const auto& n : s.plan().nodes)
    EXPECT_EQ(n.backend, "opencl:0") << n.name << ": " << n.reason;
}

// Runs `model` on the CPU alone and with opencl,cpu for each set of inputs; all outputs agree.
// Every node must be on OpenCL unless `all_on_opencl` is false.
void expect_same_as_cpu(const std::string& model, const std::vector<TensorMap>& runs,
                        bool all_on_opencl = true) {
  SessionOptions cpu_only;
  cpu_only.threads = 2;
  Session cpu(kDir + "/" + model + ".onnx", cpu_only);
  Session split(kDir + "/" + model + ".onnx", opencl_options());
  if (all_on_opencl) expect_all_on_opencl(split);
  for (const TensorMap& inputs : runs) {
    std::string shapes;
    for (const auto& [name, t] : inputs) {
      shapes += name + "=[";
      for (int64_t d : t.shape()) shapes += std::to_string(d) + ",";
      shapes += "] ";
    }
    SCOPED_TRACE(shapes);
    auto want = cpu.run(inputs);
    auto got = split.run(inputs);
    for (const auto& [name, t] : want) {
      SCOPED_TRACE(name);
      expect_close(got.at(name), t);
    }
  }
}

// NCHW inputs with 8 channels: odd sizes, a single pixel row, an empty batch.
std::vector<TensorMap> x_runs(std::vector<std::vector<int64_t>> shapes) {
  std::vector<TensorMap> runs;
  unsigned seed = 1;
  for (const auto& s : shapes) runs.push_back({{"x", random_input(s, seed++)}});
  return runs;
}

TEST(OpenCLOps2, Conv) {
  expect_same_as_cpu("conv",
                     x_runs({{2, 8, 11, 13}, {1, 8, 7, 9}, {1, 8, 30, 17}, {0, 8, 11, 13}}));
}

TEST(OpenCLOps2, ConvWithWeightsComputedAtRunTime) {
  std::vector<TensorMap> runs;
  for (unsigned seed : {40u, 50u})
    runs.push_back({{"x", random_input({2, 8, 11, 13}, seed)},
                    {"w", random_input({19, 8, 3, 2}, seed + 1)},
                    {"w1", random_input({5, 8, 1, 1}, seed + 2)},
                    {"wt", random_input({8, 3, 3, 3}, seed + 3)},
                    {"bt", random_input({6}, seed + 4)}});
  expect_same_as_cpu("conv_runtime_weights", runs);
}

TEST(OpenCLOps2, Pooling) {
  expect_same_as_cpu("pool",
                     x_runs({{2, 8, 11, 13}, {1, 8, 5, 6}, {1, 8, 30, 17}, {0, 8, 11, 13}}));
}

// NaN in a plane's vector part and in another plane's tail: GlobalMaxPool (and every pool)
// gives NaN there, as the CPU does.
TEST(OpenCLOps2, PoolingPropagatesNaN) {
  std::vector<TensorMap> runs = x_runs({{1, 8, 11, 13}});
  float* x = runs[0].at("x").data<float>();
  x[5] = std::numeric_limits<float>::quiet_NaN();              // plane 0, first 16-value chunk
  x[143 * 3 + 140] = std::numeric_limits<float>::quiet_NaN();  // plane 3, past the last chunk
  expect_same_as_cpu("pool", runs);
}

TEST(OpenCLOps2, Normalization) {
  expect_same_as_cpu("norm", x_runs({{2, 8, 7, 13}, {1, 8, 7, 13}, {5, 8, 7, 13}, {0, 8, 7, 13}}));
}

TEST(OpenCLOps2, Reductions) {
  // {1, 8, 100, 90}: long reductions over few outputs take the two-pass path.
  const auto runs =
      x_runs({{2, 8, 11, 13}, {1, 8, 1, 70}, {3, 8, 5, 1}, {0, 8, 11, 13}, {1, 8, 100, 90}});
  expect_same_as_cpu("reduce", runs);
  expect_same_as_cpu("reduce13", runs);
}

TEST(OpenCLOps2, TensorOps) {
  std::vector<TensorMap> runs;
  unsigned seed = 20;
  for (std::vector<int64_t> s : std::vector<std::vector<int64_t>>{
           {2, 8, 11, 13}, {1, 8, 5, 3}, {3, 8, 4, 70}, {0, 8, 11, 13}}) {
    std::vector<int64_t> s2 = s;
    s2[1] = 3;
    runs.push_back({{"x", random_input(s, seed++)}, {"x2", random_input(s2, seed++)}});
  }
  expect_same_as_cpu("tensor", runs);
}

// What OpenCL cannot do exactly goes to the CPU with the reason in the plan, and the results
// still equal the CPU's.
TEST(OpenCLOps2, RefusedNodesRunOnTheCpuWithTheirReason) {
  Tensor idx(DType::Int64, {2});
  idx.data<int64_t>()[0] = 3;
  idx.data<int64_t>()[1] = -1;
  expect_same_as_cpu(
      "refused",
      {{{"x", random_input({2, 8, 5, 6}, 30)}, {"x1d", random_input({2, 8, 9}, 31)}, {"idx", idx}}},
      false);
  Session s(kDir + "/refused.onnx", opencl_options());
  const std::map<std::string, std::string> expected = {
      {"cubic", "Resize: mode 'cubic' not supported"},
      {"reflect", "Pad: mode 'reflect' not supported"},
      {"conv1d", "Conv: only 2-D"},
      {"maxpool_indices", "MaxPool: optional outputs not supported"},
      {"gather_runtime", "Gather: input 'idx' must be an int64 constant"},
      {"ln_broadcast", "LayerNormalization: scale/B broadcast"},
  };
  for (const auto& n : s.plan().nodes) {
    auto it = expected.find(n.name);
    if (it == expected.end()) {
      EXPECT_EQ(n.backend, "opencl:0") << n.name << ": " << n.reason;
      continue;
    }
    EXPECT_EQ(n.backend, "cpu") << n.name;
    EXPECT_NE(n.reason.find(it->second), std::string::npos) << n.name << ": " << n.reason;
  }
}

// Conv-BN-Relu-MaxPool-Conv-GlobalAveragePool-Flatten-Gemm: one OpenCL patch, of 7 nodes once
// the core has folded the BN into the conv (level 1), of all 8 as written (level 0, where the
// device runs the BN itself).
TEST(OpenCLOps2, SmallCnnRunsInOneOpenCLPatch) {
  expect_same_as_cpu("cnn", {{{"img", random_input({2, 3, 28, 28}, 3)}},
                             {{"img", random_input({1, 3, 28, 28}, 4)}}});
  for (int level : {1, 0}) {
    SessionOptions options = opencl_options();
    options.optimization_level = level;
    Session s(kDir + "/cnn.onnx", options);
    ASSERT_EQ(s.plan().patches.size(), 1u) << s.plan().to_text();
    EXPECT_EQ(s.plan().patches[0].backend, "opencl:0");
    EXPECT_EQ(s.plan().patches[0].nodes.size(), level == 1 ? 7u : 8u);
  }
}

// LayerNormalization, attention (MatMul, Reshape, Transpose, Softmax) and an MLP with residual
// Adds: one OpenCL patch, at a sequence length that divides no tile.
TEST(OpenCLOps2, TransformerBlockRunsInOneOpenCLPatch) {
  expect_same_as_cpu("transformer",
                     {{{"x", random_input({2, 37, 32}, 5)}}, {{"x", random_input({1, 1, 32}, 6)}}});
  Session s(kDir + "/transformer.onnx", opencl_options());
  ASSERT_EQ(s.plan().patches.size(), 1u) << s.plan().to_text();
  EXPECT_EQ(s.plan().patches[0].backend, "opencl:0");
}

}  // namespace

namespace {
bool opencl_device_present() {
  cl_uint platforms = 0;
  if (clGetPlatformIDs(0, nullptr, &platforms) != CL_SUCCESS || platforms == 0) return false;
  std::vector<cl_platform_id> ids(platforms);
  clGetPlatformIDs(platforms, ids.data(), nullptr);
  for (cl_platform_id p : ids) {
    cl_uint devices = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &devices) == CL_SUCCESS && devices > 0)
      return true;
  }
  return false;
}
}  // namespace

int main(int argc, char** argv) {
  if (!opencl_device_present()) {
    std::printf("skipped: no OpenCL device\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
