// Sessions split across the example plugin (tests/plugins: its own memory, its own worker
// thread) and the CPU: same answers as the CPU alone, the expected patches and transfers, strict
// mode, pinning, overlap of independent branches, concurrent runs, and every plugin failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>

#include "core/backend_registry.hpp"
#include "quilt/quilt.hpp"
#include "tests/expect_error.hpp"
#include "tests/tensor_testing.hpp"

using namespace quilt;
using quilt::testing::expect_error;

namespace {

const std::string kDir = QUILT_TEST_MODELS_DIR;

using quilt::testing::expect_close;
using quilt::testing::random_input;
const std::string kPlugin = QUILT_EXAMPLE_PLUGIN_PATH;

SessionOptions with_example(std::map<std::string, std::string> example_options = {}) {
  SessionOptions o;
  o.threads = 2;
  o.plugins = {kPlugin};
  o.backends = {"example", "cpu"};
  if (!example_options.empty()) o.backend_options["example"] = example_options;
  return o;
}

// Runs a model on the CPU alone and split with the example plugin; outputs must agree.
void expect_same_as_cpu(const std::string& model, std::vector<int64_t> shape,
                        const SessionOptions& options, TensorMap extra = {}) {
  SessionOptions cpu_only;
  cpu_only.threads = 2;
  Session cpu(kDir + "/" + model, cpu_only);
  Session split(kDir + "/" + model, options);
  Tensor x = random_input(shape, 1);
  Tensor before = x.clone();
  TensorMap inputs = extra;
  inputs["x"] = x;
  auto want = cpu.run(inputs);
  auto got = split.run(inputs);
  for (const auto& [name, t] : want) expect_close(got.at(name), t);
  expect_close(x, before);  // the caller's input is untouched
}

const PlanReport::Patch& patch(const PlanReport& r, int i) {
  return r.patches.at(i);
}

std::vector<std::string> node_names(const PlanReport& r, const PlanReport::Patch& p) {
  std::vector<std::string> out;
  for (int n : p.nodes) out.push_back(r.nodes[n].name);
  return out;
}

int count_transfers(const PlanReport& r, const std::string& value, const std::string& to) {
  int n = 0;
  for (const auto& t : r.transfers) n += t.value == value && t.to == to;
  return n;
}

}  // namespace

TEST(Heterogeneous, MlpSplitsIntoThreePatchesWithFourTransfersAndMatchesCpu) {
  Session s(kDir + "/hetero_mlp.onnx", with_example());
  const PlanReport& r = s.plan();
  ASSERT_EQ(r.patches.size(), 3u);
  EXPECT_EQ(patch(r, 0).backend, "example:0");
  // MatMul + the bias Add are one Gemm (the level-1 rewrites), named after the Add.
  EXPECT_EQ(node_names(r, patch(r, 0)), (std::vector<std::string>{"add1", "relu1"}));
  EXPECT_EQ(r.nodes[patch(r, 0).nodes[0]].op_type, "Gemm");
  EXPECT_EQ(patch(r, 1).backend, "cpu");
  EXPECT_EQ(node_names(r, patch(r, 1)), (std::vector<std::string>{"sm"}));
  EXPECT_EQ(patch(r, 2).backend, "example:0");
  EXPECT_EQ(patch(r, 2).depends_on, (std::vector<int>{1}));
  // x up, c down, d up, y down; weights go with compile, not as transfers.
  ASSERT_EQ(r.transfers.size(), 4u);
  EXPECT_EQ(count_transfers(r, "x", "example:0"), 1);
  EXPECT_EQ(count_transfers(r, "c", "host"), 1);
  EXPECT_EQ(count_transfers(r, "d", "example:0"), 1);
  EXPECT_EQ(count_transfers(r, "y", "host"), 1);
  for (const auto& t : r.transfers) EXPECT_EQ(t.bytes, t.value == "y" ? 8 * 32 * 4 : 8 * 64 * 4);
  EXPECT_EQ(patch(r, 0).constant_bytes, (64 * 64 + 64) * 4);
  // The Softmax fell back, with the plugin's reason.
  for (const auto& n : r.nodes) {
    if (n.name == "sm") {
      EXPECT_NE(n.reason.find("example:0: Softmax is not supported"), std::string::npos);
    }
  }
  expect_same_as_cpu("hetero_mlp.onnx", {8, 64}, with_example());
  // A profile has a span per patch and transfer on its device's lane, and per node where the
  // backend times nodes (the CPU does).
  RunProfile profile;
  s.run({{"x", random_input({8, 64}, 2)}}, {}, &profile);
  int patches = 0, transfers = 0;
  std::vector<std::string> nodes;
  for (const auto& span : profile.spans) {
    EXPECT_LE(span.start_ns, span.end_ns) << span.name;
    patches += span.kind == "patch";
    transfers += span.kind == "transfer";
    if (span.kind == "node") nodes.push_back(span.lane + " " + span.name);
  }
  EXPECT_EQ(patches, 3);
  EXPECT_EQ(transfers, 4);
  std::sort(nodes.begin(), nodes.end());
  EXPECT_EQ(nodes, (std::vector<std::string>{
                       "cpu Softmax node \"sm\"", "example:0 Gemm node \"add1\"",
                       "example:0 MatMul node \"mm2\"", "example:0 Relu node \"relu1\""}));
  // As written (level 0), the MatMul and the Add run on the plugin each.
  SessionOptions as_written = with_example();
  as_written.optimization_level = 0;
  Session s0(kDir + "/hetero_mlp.onnx", as_written);
  ASSERT_EQ(s0.plan().patches.size(), 3u);
  EXPECT_EQ(node_names(s0.plan(), patch(s0.plan(), 0)),
            (std::vector<std::string>{"mm1", "add1", "relu1"}));
  expect_same_as_cpu("hetero_mlp.onnx", {8, 64}, as_written);
}

TEST(Heterogeneous, DiamondGetsThreeAcyclicPatches) {
  // mm, relu, add, mm_out are all claimed, but one patch of them would need the CPU's softmax
  // both before and after it.
  Session s(kDir + "/hetero_diamond.onnx", with_example());
  const PlanReport& r = s.plan();
  ASSERT_EQ(r.patches.size(), 3u);
  EXPECT_EQ(node_names(r, patch(r, 0)), (std::vector<std::string>{"mm", "relu"}));
  EXPECT_EQ(node_names(r, patch(r, 1)), (std::vector<std::string>{"softmax"}));
  EXPECT_EQ(node_names(r, patch(r, 2)), (std::vector<std::string>{"add", "mm_out"}));
  for (const auto& p : r.patches)
    for (int d : p.depends_on) EXPECT_LT(d, p.id);
  expect_same_as_cpu("hetero_diamond.onnx", {16, 32}, with_example());
}

TEST(Heterogeneous, OneTransferPerValueAndDeviceSharedByItsConsumers) {
  Session s(kDir + "/hetero_shared.onnx", with_example());
  const PlanReport& r = s.plan();
  // x feeds two plugin patches, a feeds two CPU patches: one copy each.
  EXPECT_EQ(count_transfers(r, "x", "example:0"), 1);
  EXPECT_EQ(count_transfers(r, "a", "host"), 1);
  for (const auto& t : r.transfers) {
    if (t.value == "x" || t.value == "a") {
      EXPECT_EQ(t.consumer_patches.size(), 2u) << t.value;
    }
    EXPECT_NE(t.value, "W1");  // initializers are never transferred
    EXPECT_NE(t.value, "W2");
  }
  expect_same_as_cpu("hetero_shared.onnx", {8, 32}, with_example());
}

TEST(Heterogeneous, CostRuleKeepsALoneCheapOpOnTheCpuAndCanBeSwitchedOff) {
  Session kept(kDir + "/hetero_island.onnx", with_example());
  ASSERT_EQ(kept.plan().patches.size(), 1u);
  EXPECT_TRUE(kept.plan().transfers.empty());
  for (const auto& n : kept.plan().nodes)
    if (n.name == "relu") {
      EXPECT_EQ(n.backend, "cpu");
      EXPECT_NE(n.reason.find("cost rule"), std::string::npos) << n.reason;
    }
  SessionOptions off = with_example();
  off.partition_cost_rule = false;
  Session island(kDir + "/hetero_island.onnx", off);
  ASSERT_EQ(island.plan().patches.size(), 3u);
  EXPECT_EQ(island.plan().patches[1].backend, "example:0");
  EXPECT_EQ(island.plan().transfers.size(), 2u);
  expect_same_as_cpu("hetero_island.onnx", {4, 16}, off);
}

TEST(Heterogeneous, StrictModeListsEveryUnclaimedNodeWithTheReason) {
  SessionOptions strict = with_example();
  strict.backends = {"example"};
  strict.cpu_fallback = false;
  expect_error(
      [&] { Session(kDir + "/hetero_mlp.onnx", strict); }, ErrorCode::NotImplemented,
      {"1 node is not supported by the requested backends (example:0)", "CPU fallback is off",
       "[Softmax node \"sm\"] example:0: Softmax is not supported"});
  // Everything claimed: strict mode runs, with no CPU patch at all.
  Session all(kDir + "/hetero_all_claimed.onnx", strict);
  ASSERT_EQ(all.plan().patches.size(), 1u);
  EXPECT_EQ(all.plan().patches[0].backend, "example:0");
  expect_same_as_cpu("hetero_all_claimed.onnx", {1, 4, 8, 8}, strict);
}

TEST(Heterogeneous, PinningOverridesThePriorityList) {
  SessionOptions pinned = with_example();
  pinned.pinned_nodes = {{"add1", "cpu"}};
  Session s(kDir + "/hetero_mlp.onnx", pinned);
  for (const auto& n : s.plan().nodes)
    if (n.name == "add1") {
      EXPECT_EQ(n.backend, "cpu");
      EXPECT_NE(n.reason.find("pinned"), std::string::npos);
    }
  expect_same_as_cpu("hetero_mlp.onnx", {8, 64}, pinned);
  pinned.pinned_nodes = {{"sm", "example"}};
  expect_error([&] { Session(kDir + "/hetero_mlp.onnx", pinned); }, ErrorCode::InvalidArgument,
               {"[Softmax node \"sm\"] is pinned to example:0", "Softmax is not supported"});
  pinned.pinned_nodes = {{"no_such_node", "cpu"}};
  expect_error([&] { Session(kDir + "/hetero_mlp.onnx", pinned); }, ErrorCode::InvalidArgument,
               {"no_such_node", "not in the model's graph"});
  pinned.pinned_nodes = {{"sm", "opencl"}};
  expect_error([&] { Session(kDir + "/hetero_mlp.onnx", pinned); }, ErrorCode::InvalidArgument,
               {"'opencl'", "not in SessionOptions.backends"});
}

TEST(Heterogeneous, IndependentBranchesOnTwoBackendsOverlapInTime) {
  // Branch A (MatMul, Relu) runs on the plugin, which takes 150 ms of simulated device time;
  // branch B (six element-wise ops on 1M elements) runs on the CPU meanwhile. Asserted on the
  // recorded spans: the plugin's from its own event timestamps, the CPU's from the host clock.
  Session s(kDir + "/hetero_branches.onnx", with_example({{"execute_delay_ms", "150"}}));
  const PlanReport& r = s.plan();
  ASSERT_EQ(r.patches.size(), 3u);
  EXPECT_EQ(patch(r, 0).backend, "example:0");
  EXPECT_EQ(patch(r, 1).backend, "cpu");
  EXPECT_TRUE(patch(r, 1).depends_on.empty());
  EXPECT_EQ(patch(r, 2).depends_on, (std::vector<int>{0, 1}));
  RunProfile profile;
  TensorMap inputs = {{"x", random_input({64, 256}, 3)}, {"x2", random_input({1024, 1024}, 4)}};
  s.run(inputs, {}, &profile);
  const RunProfile::Span* a = nullptr;
  const RunProfile::Span* b = nullptr;
  for (const auto& span : profile.spans) {
    if (span.name.rfind("patch 0 ", 0) == 0) a = &span;
    if (span.name.rfind("patch 1 ", 0) == 0) b = &span;
  }
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->lane, "example:0");
  EXPECT_EQ(b->lane, "cpu");
  const uint64_t t0 = std::min(a->start_ns, b->start_ns);
  const double overlap_ms = (static_cast<double>(std::min(a->end_ns, b->end_ns)) -
                             static_cast<double>(std::max(a->start_ns, b->start_ns))) /
                            1e6;
  std::printf("plugin patch %.2f..%.2f ms, CPU patch %.2f..%.2f ms, overlap %.2f ms\n",
              (a->start_ns - t0) / 1e6, (a->end_ns - t0) / 1e6, (b->start_ns - t0) / 1e6,
              (b->end_ns - t0) / 1e6, overlap_ms);
  EXPECT_GE(a->end_ns - a->start_ns, 150'000'000u);  // the device's own timestamps
  EXPECT_LT(b->start_ns, a->end_ns) << "the CPU branch waited for the plugin";
  EXPECT_LT(a->start_ns, b->end_ns) << "the plugin's patch started after the CPU branch ended";
  expect_same_as_cpu("hetero_branches.onnx", {64, 256}, with_example(),
                     {{"x2", random_input({1024, 1024}, 4)}});
}

TEST(Heterogeneous, ConcurrentRunsFromSeveralThreads) {
  Session split(kDir + "/hetero_shared.onnx", with_example());
  SessionOptions cpu_only;
  Session cpu(kDir + "/hetero_shared.onnx", cpu_only);
  std::vector<std::thread> threads;
  std::vector<std::string> failures(4);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      try {
        for (int i = 0; i < 20; ++i) {
          Tensor x = random_input({8, 32}, static_cast<unsigned>(100 * t + i));
          Tensor got = split.run({{"x", x}}).at("y");
          Tensor want = cpu.run({{"x", x}}).at("y");
          for (int64_t k = 0; k < got.numel(); ++k)
            if (std::fabs(got.data<float>()[k] - want.data<float>()[k]) >
                1e-5f + 1e-4f * std::fabs(want.data<float>()[k]))
              throw std::runtime_error("mismatch at " + std::to_string(k));
        }
      } catch (const std::exception& e) {
        failures[t] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (const auto& f : failures) EXPECT_EQ(f, "");
}

TEST(Heterogeneous, AFailingExecuteFailsTheRunWithThePluginsMessageAndTheNextRunWorks) {
  Session s(kDir + "/hetero_mlp.onnx",
            with_example({{"fail_execute_on", "mm2"}, {"fail_execute_count", "1"}}));
  Tensor x = random_input({8, 64}, 5);
  expect_error(
      [&] {
        s.run({{"x", x}});
      },
      ErrorCode::Runtime,
      {"[patch 2 on example:0 (MatMul node \"mm2\")]", "[example] injected failure in node 'mm2'"});
  SessionOptions cpu_only;
  Tensor want = Session(kDir + "/hetero_mlp.onnx", cpu_only).run({{"x", x}}).at("y");
  expect_close(s.run({{"x", x}}).at("y"), want);
}

TEST(Heterogeneous, DeviceOutOfMemoryIsAnErrorNotACrash) {
  // The weights (24 KiB) fit; the run's buffers do not.
  Session s(kDir + "/hetero_mlp.onnx", with_example({{"memory_limit", "26000"}}));
  Tensor x = random_input({8, 64}, 6);
  expect_error(
      [&] {
        s.run({{"x", x}});
      },
      ErrorCode::OutOfMemory, {"[example] out of device memory"});
  expect_error([&] { s.run({{"x", x}}); }, ErrorCode::OutOfMemory, {"out of device memory"});
  // Weights that do not fit fail session creation, naming the constant.
  expect_error(
      [&] {
        Session(kDir + "/hetero_mlp.onnx", with_example({{"memory_limit", "8192"}}));
      },
      ErrorCode::OutOfMemory, {"compile", "out of device memory", "constant 'W1'"});
}

TEST(Heterogeneous, PluginLoadFailuresNameTheLibraryAndTheReason) {
  // A library the caller names must load, whether or not a listed backend needs it.
  auto fails_with = [](const std::string& library, const std::vector<std::string>& parts) {
    for (std::vector<std::string> backends :
         {std::vector<std::string>{"example", "cpu"}, {"cpu"}}) {
      SessionOptions o;
      o.plugins = {library};
      o.backends = backends;
      std::vector<std::string> all = {"SessionOptions.plugins: '" + library + "' not loaded"};
      all.insert(all.end(), parts.begin(), parts.end());
      expect_error([&] { Session(kDir + "/hetero_mlp.onnx", o); }, ErrorCode::InvalidArgument, all);
    }
  };
  fails_with("/etc/passwd", {"cannot load"});
  fails_with("/no/such/libquilt_missing.so", {"file not found"});
  fails_with(QUILT_NO_ENTRY_PLUGIN_PATH, {"no symbol quilt_backend_init"});
  fails_with(QUILT_BAD_ABI_PLUGIN_PATH,
             {"ABI mismatch", "built for backend ABI 99.0",
              "this Quilt speaks " + std::to_string(QUILT_BACKEND_ABI_MAJOR) + "." +
                  std::to_string(QUILT_BACKEND_ABI_MINOR)});
  fails_with(QUILT_INIT_FAIL_PLUGIN_PATH,
             {"initialisation failed", "example: simulated driver not found"});
}

// Two devices of one plugin that copies between them (ABI 1.2's copy_device_to_device): the
// value crossing from example:0 to example:1 is one direct copy, not a download and an upload.
TEST(Heterogeneous, TwoDevicesOfOnePluginCopyDirectly) {
  SessionOptions o = with_example();
  o.backends = {"example:0", "example:1", "cpu"};
  o.pinned_nodes = {{"residual", "example:1"}};
  o.partition_cost_rule = false;
  Session s(kDir + "/hetero_all_claimed.onnx", o);
  const PlanReport& plan = s.plan();
  ASSERT_EQ(plan.patches.size(), 2u) << plan.to_text();
  EXPECT_EQ(plan.patches[0].backend, "example:0");
  EXPECT_EQ(plan.patches[1].backend, "example:1");
  EXPECT_EQ(count_transfers(plan, "r", "example:1"), 1) << plan.to_text();
  EXPECT_EQ(count_transfers(plan, "r", "host"), 0) << plan.to_text();
  for (const auto& t : plan.transfers) {
    if (t.value == "r") {
      EXPECT_EQ(t.from, "example:0");
    }
  }
  Tensor x = random_input({1, 4, 8, 8}, 4);
  RunProfile profile;
  auto got = s.run({{"x", x}}, {}, &profile);
  bool direct_span = false;
  for (const auto& span : profile.spans)
    direct_span = direct_span ||
                  (span.kind == "transfer" && span.name == "transfer 'r' example:0 -> example:1" &&
                   span.lane == "example:1");
  EXPECT_TRUE(direct_span) << profile.to_chrome_trace("test");
  expect_same_as_cpu("hetero_all_claimed.onnx", {1, 4, 8, 8}, o);
}

TEST(Heterogeneous, BadBackendOptionsAndDeviceIndicesAreRefused) {
  expect_error(
      [&] {
        Session(kDir + "/hetero_mlp.onnx", with_example({{"colour", "red"}}));
      },
      ErrorCode::InvalidArgument, {"example:0", "unknown option 'colour'"});
  SessionOptions o = with_example();
  o.backends = {"example:7", "cpu"};
  expect_error([&] { Session(kDir + "/hetero_mlp.onnx", o); }, ErrorCode::InvalidArgument,
               {"backend 'example' has no device 7", "it has 2 devices"});
  o.backends = {"example:1", "cpu"};
  Session second(kDir + "/hetero_mlp.onnx", o);
  EXPECT_EQ(second.plan().patches[0].backend, "example:1");
  o.backends = {"example:name=accelerator 1", "cpu"};
  EXPECT_EQ(Session(kDir + "/hetero_mlp.onnx", o).plan().patches[0].backend, "example:1");
  o.backends = {"example:name=tpu", "cpu"};
  expect_error([&] { Session(kDir + "/hetero_mlp.onnx", o); }, ErrorCode::InvalidArgument,
               {"no example device name contains 'tpu'", "0: Simulated accelerator 0"});
  o.backends = {"example", "example"};
  expect_error([&] { Session(kDir + "/hetero_mlp.onnx", o); }, ErrorCode::InvalidArgument,
               {"listed twice"});
}

TEST(Heterogeneous, PluginPathEnvironmentVariableIsSearched) {
  const std::string path = kPlugin;
  const std::string dir = path.substr(0, path.rfind('/'));
  ASSERT_EQ(setenv("QUILT_PLUGIN_PATH", ("/no/such/dir:" + dir).c_str(), 1), 0);
  SessionOptions o;
  o.backends = {"example", "cpu"};
  Session s(kDir + "/hetero_mlp.onnx", o);
  unsetenv("QUILT_PLUGIN_PATH");
  EXPECT_EQ(s.plan().patches[0].backend, "example:0");
}

TEST(Heterogeneous, ACpuOnlySessionLoadsNoPlugin) {
  const std::string path = QUILT_BAD_ABI_PLUGIN_PATH;
  ASSERT_EQ(setenv("QUILT_PLUGIN_PATH", path.substr(0, path.rfind('/')).c_str(), 1), 0);
  const BackendInventory cpu_only = discover_backends_for({"cpu"}, {});
  const BackendInventory with_example = discover_backends_for({"example:0", "cpu"}, {});
  const BackendInventory listed = discover_backends_for({"cpu"}, {kPlugin});
  SessionOptions o;
  Session s(kDir + "/hetero_mlp.onnx", o);
  unsetenv("QUILT_PLUGIN_PATH");
  ASSERT_EQ(cpu_only.backends.size(), 1u);
  EXPECT_EQ(cpu_only.backends[0].name, "cpu");
  EXPECT_TRUE(cpu_only.failures.empty());  // the broken plugins next to it were not even opened
  EXPECT_NE(with_example.find("example"), nullptr);
  EXPECT_FALSE(with_example.failures.empty());
  EXPECT_NE(listed.find("example"), nullptr);  // a library given by path is always loaded
  EXPECT_EQ(s.plan().patches.at(0).backend, "cpu");
}

TEST(Heterogeneous, SymbolicBatchIncludingEmptyTensors) {
  Session s(kDir + "/hetero_dynamic.onnx", with_example());
  for (const auto& t : s.plan().transfers) EXPECT_EQ(t.bytes, -1) << t.value;  // run-time sizes
  for (int64_t n : {3, 0, 5}) expect_same_as_cpu("hetero_dynamic.onnx", {n, 64}, with_example());
  Tensor empty(DType::Float32, {0, 64});
  Tensor y = s.run({{"x", empty}}).at("y");
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{0, 16}));
}

TEST(Heterogeneous, TypesThatChangeMidRunWhileAPluginRuns) {
  // The If's output shape is known only when it has run, which the core does while the example
  // plugin's thread runs the product: the run's types change while that thread reads them.
  // Under ThreadSanitizer (tsan_unit_tests) the first change raced with those reads.
  SessionOptions cpu_only;
  cpu_only.threads = 2;
  Session cpu(kDir + "/hetero_mid_run_types.onnx", cpu_only);
  Session split(kDir + "/hetero_mid_run_types.onnx", with_example());
  bool product_on_plugin = false;
  for (const auto& p : split.plan().patches)
    if (p.backend == "example:0") {
      const auto names = node_names(split.plan(), p);
      product_on_plugin |= std::find(names.begin(), names.end(), "mm") != names.end();
    }
  ASSERT_TRUE(product_on_plugin);
  const Tensor x = random_input({64, 64}, 3);
  for (int i = 0; i < 6; ++i) {
    const bool c = i % 2 == 0;
    TensorMap in = {{"x", x}, {"c", Tensor::from_vector<bool>({}, {c})}};
    auto want = cpu.run(in);
    auto got = split.run(in);
    EXPECT_EQ(got.at("z").shape(), c ? (std::vector<int64_t>{64, 64}) : (std::vector<int64_t>{}));
    for (const auto& [name, t] : want) expect_close(got.at(name), t);
  }
}
