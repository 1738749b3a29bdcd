// The host's load-time checks of a plugin's table, on copies of the example plugin whose table
// the environment alters (tests/plugins, QUILT_EXAMPLE_FAULTS): each required slot NULL, a short
// struct_size, a table of an older minor version (1.0, 1.1), optional slots NULL, a supports()
// reason without NUL, and ABI 1.2's whole-graph claims (supports_graph): the plan follows them,
// and a malformed answer is an error naming the plugin. Each copy has its own file name: a library
// is loaded once per process.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <filesystem>

#include "quilt/backend.h"
#include "quilt/quilt.hpp"
#include "tests/expect_error.hpp"
#include "tests/tensor_testing.hpp"

using namespace quilt;
using quilt::testing::expect_error;

namespace {

const std::string kDir = QUILT_TEST_MODELS_DIR;

// A copy of the faulty example plugin under a name of its own, loaded with `env` set.
class FaultyPlugin {
 public:
  FaultyPlugin(const std::string& tag, const std::map<std::string, std::string>& env) : env_(env) {
    const std::filesystem::path dir = QUILT_TEST_WORK_DIR;
    std::filesystem::create_directories(dir);
    path_ = (dir / ("libquilt_faulty_" + tag + ".so")).string();
    std::filesystem::copy_file(QUILT_FAULTY_PLUGIN_PATH, path_,
                               std::filesystem::copy_options::overwrite_existing);
    for (const auto& [k, v] : env_) setenv(k.c_str(), v.c_str(), 1);
  }
  ~FaultyPlugin() {
    for (const auto& [k, v] : env_) unsetenv(k.c_str());
  }
  SessionOptions options() const {
    SessionOptions o;
    o.threads = 2;
    o.plugins = {path_};
    o.backends = {"example", "cpu"};
    return o;
  }
  const std::string& path() const { return path_; }

 private:
  std::map<std::string, std::string> env_;
  std::string path_;
};

// hetero_mlp split between the plugin and the CPU gives the CPU's answer.
void expect_runs_like_cpu(const SessionOptions& options) {
  SessionOptions cpu_only;
  cpu_only.threads = 2;
  Session cpu(kDir + "/hetero_mlp.onnx", cpu_only);
  Session split(kDir + "/hetero_mlp.onnx", options);
  ASSERT_GE(split.plan().patches.size(), 2u);
  EXPECT_EQ(split.plan().patches[0].backend, "example:0");
  Tensor x = quilt::testing::random_input({8, 64}, 1);
  quilt::testing::expect_close(split.run({{"x", x}}).at("y"), cpu.run({{"x", x}}).at("y"));
}

// The example plugin (first) and the CPU, with options for the plugin's devices.
SessionOptions with_example(std::map<std::string, std::string> example_options) {
  SessionOptions o;
  o.threads = 2;
  o.plugins = {QUILT_EXAMPLE_PLUGIN_PATH};
  o.backends = {"example", "cpu"};
  o.backend_options["example"] = std::move(example_options);
  return o;
}

std::string version_string(uint32_t major, uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

}  // namespace

TEST(PluginChecks, EachRequiredSlotNullIsALoadErrorNamingIt) {
  const char* slots[] = {"device_count", "device_info", "device_open",        "device_close",
                         "supports",     "compile",     "executable_release", "execute",
                         "alloc",        "free",        "copy_to_device",     "copy_to_host",
                         "event_create", "event_wait",  "event_query",        "event_release"};
  for (const char* slot : slots) {
    SCOPED_TRACE(slot);
    FaultyPlugin plugin(std::string("null_") + slot, {{"QUILT_EXAMPLE_NULL_SLOT", slot}});
    expect_error(
        [&] { Session(kDir + "/hetero_mlp.onnx", plugin.options()); }, ErrorCode::InvalidArgument,
        {"'" + plugin.path() + "' not loaded",
         "required slot " + std::string(slot) + " is NULL in the plugin's quilt_backend_t"});
    // quilt devices lists it as a failure with the same reason, and nothing crashes.
    const BackendList list = list_backends({plugin.path()});
    ASSERT_EQ(list.failures.size(), 1u);
    EXPECT_NE(list.failures[0].reason.find(std::string("required slot ") + slot),
              std::string::npos);
  }
}

TEST(PluginChecks, OptionalSlotsMayBeNull) {
  for (const char* slot : {"release", "event_timestamps", "supports_graph"}) {
    SCOPED_TRACE(slot);
    FaultyPlugin plugin(std::string("null_") + slot, {{"QUILT_EXAMPLE_NULL_SLOT", slot}});
    expect_runs_like_cpu(plugin.options());
  }
}

TEST(PluginChecks, AShortStructSizeNamesTheSizeGivenAndTheSizeNeeded) {
  const size_t needed = offsetof(quilt_backend_t, event_release) + sizeof(void*);
  FaultyPlugin plugin("short", {{"QUILT_EXAMPLE_STRUCT_SIZE", std::to_string(needed - 8)}});
  // Appended, not "literal" + to_string(...): GCC 12's false -Wrestrict on that form.
  std::string given = "quilt_backend_t is ", through = "(", speaks = "this Quilt speaks ";
  given += std::to_string(needed - 8) + " bytes";
  through += std::to_string(needed) + " bytes, through event_release";
  speaks += version_string(QUILT_BACKEND_ABI_MAJOR, QUILT_BACKEND_ABI_MINOR);
  expect_error([&] { Session(kDir + "/hetero_mlp.onnx", plugin.options()); },
               ErrorCode::InvalidArgument, {"ABI mismatch", given, through, speaks});
}

TEST(PluginChecks, TablesOfOlderMinorVersionsStillWork) {
  // ABI 1.0 and 1.1 tables ended after event_timestamps: the host reads nothing beyond.
  const size_t v11 = offsetof(quilt_backend_t, event_timestamps) + sizeof(void*);
  FaultyPlugin v1_1("abi_1_1", {{"QUILT_EXAMPLE_STRUCT_SIZE", std::to_string(v11)},
                                {"QUILT_EXAMPLE_ABI_MINOR", "1"}});
  expect_runs_like_cpu(v1_1.options());
  // Without event_timestamps either (the smallest table that has every required slot).
  FaultyPlugin v1_0("abi_1_0", {{"QUILT_EXAMPLE_STRUCT_SIZE", std::to_string(v11 - 8)},
                                {"QUILT_EXAMPLE_ABI_MINOR", "0"}});
  expect_runs_like_cpu(v1_0.options());
  const BackendList list = list_backends({v1_0.path()});
  bool found = false;
  for (const auto& b : list.backends)
    if (b.name == "example") found = b.abi_version == "1.0";
  EXPECT_TRUE(found);
}

TEST(PluginChecks, AReasonWithoutNulIsCutAndSaysSo) {
  FaultyPlugin plugin("unterminated", {{"QUILT_EXAMPLE_UNTERMINATED_REASON", "1"}});
  Session s(kDir + "/hetero_mlp.onnx", plugin.options());
  bool seen = false;
  for (const auto& n : s.plan().nodes) {
    if (n.name != "sm") continue;
    seen = true;
    EXPECT_NE(n.reason.find("xxxxxxxx... (the backend's reason was cut: no NUL within 512 bytes)"),
              std::string::npos)
        << n.reason;
  }
  EXPECT_TRUE(seen);
}

TEST(PluginChecks, RunsAreBracketedByRunBeginAndRunEnd) {
  // check_runs: the example fails an execute outside a begun run, and a run_begin while
  // another run is open (the runs here are sequential, so the previous one must have ended).
  const SessionOptions o = with_example({{"check_runs", "1"}});
  for (int i = 0; i < 3; ++i) expect_runs_like_cpu(o);
  Session s(kDir + "/hetero_mlp.onnx", o);
  for (int i = 0; i < 3; ++i) s.run({{"x", quilt::testing::random_input({8, 64}, i)}});
}

TEST(PluginChecks, ARunBeginFailureFailsEachRunCleanly) {
  Session s(kDir + "/hetero_mlp.onnx", with_example({{"fail_run_begin", "1"}}));
  Tensor x = quilt::testing::random_input({8, 64}, 1);
  for (int i = 0; i < 2; ++i)
    expect_error(
        [&] {
          s.run({{"x", x}});
        },
        ErrorCode::Runtime, {"[example:0] run_begin: [example] run_begin: injected failure"});
}

// An ABI 1.1 table of the example plugin (no copy_device_to_device) on two of its devices: the
// value crossing between them goes through the host, and the outputs are the direct copy's.
TEST(PluginChecks, TwoDevicesOfAnAbi11PluginCopyThroughTheHost) {
  FaultyPlugin plugin("abi11_d2d", {{"QUILT_EXAMPLE_STRUCT_SIZE",
                                     std::to_string(offsetof(quilt_backend_t, run_begin))},
                                    {"QUILT_EXAMPLE_ABI_MINOR", "1"}});
  SessionOptions o = plugin.options();
  o.backends = {"example:0", "example:1", "cpu"};
  o.pinned_nodes = {{"residual", "example:1"}};
  o.partition_cost_rule = false;
  Session s(kDir + "/hetero_all_claimed.onnx", o);
  const PlanReport& plan = s.plan();
  ASSERT_EQ(plan.patches.size(), 2u) << plan.to_text();
  int to_host = 0, to_second = 0;
  for (const auto& t : plan.transfers) {
    if (t.value != "r") continue;
    to_host += t.from == "example:0" && t.to == "host";
    to_second += t.from == "host" && t.to == "example:1";
  }
  EXPECT_EQ(to_host, 1) << plan.to_text();
  EXPECT_EQ(to_second, 1) << plan.to_text();
  SessionOptions cpu_only;
  cpu_only.threads = 2;
  Tensor x = quilt::testing::random_input({1, 4, 8, 8}, 4);
  quilt::testing::expect_close(
      s.run({{"x", x}}).at("y"),
      Session(kDir + "/hetero_all_claimed.onnx", cpu_only).run({{"x", x}}).at("y"));
}

namespace {

// The backend and reason of the node called `name` in the plan.
const PlanReport::Node& plan_node(const PlanReport& plan, const std::string& name) {
  for (const auto& n : plan.nodes)
    if (n.name == name) return n;
  throw std::runtime_error("no node '" + name + "' in the plan:\n" + plan.to_text());
}

void expect_same_outputs_as_cpu(Session& s, const std::string& model, const Tensor& x) {
  SessionOptions cpu_only;
  cpu_only.threads = 2;
  quilt::testing::expect_close(s.run({{"x", x}}).at("y"),
                               Session(kDir + "/" + model, cpu_only).run({{"x", x}}).at("y"));
}

}  // namespace

// Node by node the example claims the Conv, the Relu and the residual Add; claiming by pattern
// (graph_claims=conv_relu) it takes the Conv and the Relu after it, and the Add goes to the CPU
// with the backend's reason. Both plans give the CPU's outputs.
TEST(PluginChecks, TheGraphClaimsDecideThePlan) {
  const Tensor x = quilt::testing::random_input({1, 4, 8, 8}, 5);
  SessionOptions per_node = with_example({});
  per_node.partition_cost_rule = false;
  Session all(kDir + "/hetero_all_claimed.onnx", per_node);
  for (const char* name : {"conv", "relu", "residual"})
    EXPECT_EQ(plan_node(all.plan(), name).backend, "example:0") << all.plan().to_text();
  EXPECT_EQ(all.plan().patches.size(), 1u) << all.plan().to_text();

  SessionOptions pattern = with_example({{"graph_claims", "conv_relu"}});
  pattern.partition_cost_rule = false;
  Session s(kDir + "/hetero_all_claimed.onnx", pattern);
  const PlanReport& plan = s.plan();
  EXPECT_EQ(plan_node(plan, "conv").backend, "example:0") << plan.to_text();
  EXPECT_EQ(plan_node(plan, "relu").backend, "example:0") << plan.to_text();
  EXPECT_EQ(plan_node(plan, "conv").patch, plan_node(plan, "relu").patch);
  EXPECT_EQ(plan_node(plan, "residual").backend, "cpu") << plan.to_text();
  EXPECT_EQ(plan_node(plan, "residual").reason,
            "example:0: Add: graph_claims=conv_relu claims only a Conv followed by a Relu");
  EXPECT_EQ(plan.patches.size(), 2u) << plan.to_text();
  expect_same_outputs_as_cpu(s, "hetero_all_claimed.onnx", x);
  expect_same_outputs_as_cpu(all, "hetero_all_claimed.onnx", x);
}

// graph_claims=whole: a graph the example can run entirely is all its own; one with a node it
// cannot run (hetero_mlp's Softmax) stays entirely on the CPU, each node saying why.
TEST(PluginChecks, AGraphTakenWholeOrNotAtAll) {
  SessionOptions o = with_example({{"graph_claims", "whole"}});
  o.partition_cost_rule = false;
  Session whole(kDir + "/hetero_all_claimed.onnx", o);
  ASSERT_EQ(whole.plan().patches.size(), 1u) << whole.plan().to_text();
  EXPECT_EQ(whole.plan().patches[0].backend, "example:0");
  expect_same_outputs_as_cpu(whole, "hetero_all_claimed.onnx",
                             quilt::testing::random_input({1, 4, 8, 8}, 6));

  Session none(kDir + "/hetero_mlp.onnx", o);
  const PlanReport& plan = none.plan();
  for (const auto& n : plan.nodes) {
    SCOPED_TRACE(n.name);
    EXPECT_EQ(n.backend, "cpu") << plan.to_text();
    if (n.name != "sm") {
      EXPECT_NE(n.reason.find("graph_claims=whole: the graph's Softmax 'sm' cannot run here, so "
                              "none of it does (Softmax is not supported)"),
                std::string::npos)
          << n.reason;
    }
  }
  EXPECT_EQ(plan_node(plan, "sm").reason, "example:0: Softmax is not supported");
  expect_same_outputs_as_cpu(none, "hetero_mlp.onnx", quilt::testing::random_input({8, 64}, 7));
}

// Strict mode (no CPU fallback): what the graph claims leave out is an error naming the node
// and the backend's reason, as with per-node claims.
TEST(PluginChecks, GraphClaimsInStrictModeNameWhatIsLeftOut) {
  SessionOptions o = with_example({{"graph_claims", "conv_relu"}});
  o.backends = {"example"};
  o.cpu_fallback = false;
  expect_error([&] { Session(kDir + "/hetero_all_claimed.onnx", o); }, ErrorCode::NotImplemented,
               {"1 node is not supported by the requested backends (example:0) and CPU fallback "
                "is off",
                "[Add node \"residual\"] example:0: Add: graph_claims=conv_relu claims only a "
                "Conv followed by a Relu"});
  o.backend_options["example"]["graph_claims"] = "whole";
  Session s(kDir + "/hetero_all_claimed.onnx", o);
  EXPECT_EQ(s.plan().patches.size(), 1u);
}

// Malformed whole-graph answers: a clear error of the session naming the plugin, never a crash.
TEST(PluginChecks, AMalformedGraphAnswerIsAnErrorNamingThePlugin) {
  const std::pair<const char*, std::string> faults[] = {
      {"short", "malformed answer: 2 claims for a graph of 3 nodes"},
      {"null_claimed", "malformed answer: claimed is NULL"},
      {"null_reason", "malformed answer: the reason of node 0 (Conv 'conv') is NULL"},
      {"unterminated",
       "malformed answer: the reason of node 0 (Conv 'conv') has no NUL within 512 bytes"},
      {"bad_claim", "malformed answer: claim of node 0 (Conv 'conv') is 7, expected 0 or 1"},
      {"fail", "[example] supports_graph: injected failure"},
  };
  for (const auto& [fault, message] : faults) {
    SCOPED_TRACE(fault);
    FaultyPlugin plugin(std::string("graph_") + fault, {{"QUILT_EXAMPLE_GRAPH_CLAIMS", fault}});
    expect_error(
        [&] { Session(kDir + "/hetero_all_claimed.onnx", plugin.options()); }, ErrorCode::Runtime,
        {"[example:0] supports_graph of backend 'example' (" + plugin.path() + ")", message});
  }
}
