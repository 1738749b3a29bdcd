// The partitioner on graphs built as data: claims in priority order, strict mode and pins, the
// cost rule, acyclic and maximal grouping, host steps, and one transfer per (value, memory space).
// Devices answer from a claim table; every test checks exact placements, patches or transfers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "partitioner/partitioner.hpp"
#include "quilt/quilt.hpp"
#include "tests/expect_error.hpp"

namespace qp = quilt::partition;
using qp::Device;
using qp::kTinyBytes;
using qp::Node;
using qp::Result;
using qp::Transfer;
using qp::Value;
using quilt::ErrorCode;
using quilt::testing::expect_error;

namespace {

constexpr int64_t kBig = 4096;  // bytes of an ordinary activation: well above kTinyBytes

// A graph as the partitioner sees it, built in topological order. Node k is named "n<k>".
struct Graph {
  std::vector<Node> nodes;
  std::vector<Value> values;

  int value(int64_t bytes, bool constant = false) {
    values.push_back({constant, false, bytes});
    return static_cast<int>(values.size()) - 1;
  }
  int input(int64_t bytes = kBig) { return value(bytes); }
  int constant() { return value(kBig, true); }
  // Appends a node reading `inputs`; returns the id of its one output.
  int op(const std::string& op_type, std::vector<int> inputs, int64_t out_bytes = kBig,
         std::vector<int> value_inputs = {}) {
    Node n;
    n.name = "n" + std::to_string(nodes.size());
    n.display = op_type + " node \"" + n.name + "\"";
    n.op_type = op_type;
    n.inputs = std::move(inputs);
    n.value_inputs = std::move(value_inputs);
    n.outputs = {value(out_bytes)};
    nodes.push_back(std::move(n));
    return nodes.back().outputs[0];
  }
  int host(const std::string& op_type, std::vector<int> inputs) {
    const int v = op(op_type, std::move(inputs));
    nodes.back().host = true;
    return v;
  }
  void output(int v) { values[v].graph_output = true; }
  // Index of the node producing v, -1 for graph inputs and constants.
  int producer(int v) const {
    for (size_t n = 0; n < nodes.size(); ++n)
      for (int o : nodes[n].outputs)
        if (o == v) return static_cast<int>(n);
    return -1;
  }
};

// Devices and their claim table: device d runs the op types in ops[d] ("*": every op type but
// those listed as "!Op"). `per_node`, when set, overrides the table. Records every question.
struct Rig {
  std::vector<Device> devices;
  std::vector<std::set<std::string>> ops;
  std::function<bool(int node, int device)> per_node;
  qp::Options options;
  std::map<std::pair<int, int>, int> asked;  // (node, device) -> calls

  int add(const std::string& name, int space, std::set<std::string> runs, bool requested = true) {
    devices.push_back({name, space, requested});
    ops.push_back(std::move(runs));
    return static_cast<int>(devices.size()) - 1;
  }
  bool claims(const Graph& g, int n, int d) const {
    if (per_node) return per_node(n, d);
    const std::string& op = g.nodes[n].op_type;
    const auto& table = ops[d];
    return table.count(op) || (table.count("*") && !table.count("!" + op));
  }
  std::string refusal(const Graph& g, int n, int d) const {
    return devices[d].name + " does not run " + g.nodes[n].op_type;
  }
  Result run(const Graph& g) {
    asked.clear();
    auto ask = [&](int n, int d) -> std::string {
      ++asked[{n, d}];
      return claims(g, n, d) ? "" : refusal(g, n, d);
    };
    return qp::partition(g.nodes, g.values, devices, options, ask);
  }
  int cpu() const {
    return options.cpu_index >= 0 ? options.cpu_index : static_cast<int>(devices.size()) - 1;
  }
};

// acc:0 (memory space 1) runs `acc_ops`; the CPU (last) runs everything.
Rig acc_and_cpu(std::set<std::string> acc_ops = {"MatMul", "Add", "Relu", "Reshape", "Gemm"}) {
  Rig rig;
  rig.add("acc:0", 1, std::move(acc_ops));
  rig.add("cpu", 0, {"*"});
  return rig;
}

const Transfer* find_transfer(const Result& r, int value, int to_space) {
  for (const auto& t : r.transfers)
    if (t.value == value && t.to_space == to_space) return &t;
  return nullptr;
}

int transfers_of(const Result& r, int value) {
  return static_cast<int>(std::count_if(r.transfers.begin(), r.transfers.end(),
                                        [&](const Transfer& t) { return t.value == value; }));
}

int index_of(const Result& r, const Transfer* t) {
  return static_cast<int>(t - r.transfers.data());
}

// Properties every result must have, whatever the graph and the claims.
void check_invariants(const Graph& g, const Rig& rig, const Result& r) {
  const int n_nodes = static_cast<int>(g.nodes.size());
  const int n_patches = static_cast<int>(r.patches.size());
  ASSERT_EQ(static_cast<int>(r.device_of.size()), n_nodes);
  ASSERT_EQ(static_cast<int>(r.reason.size()), n_nodes);
  ASSERT_EQ(static_cast<int>(r.patch_of.size()), n_nodes);
  auto space = [&](int p) {
    return r.patches[p].device < 0 ? 0 : rig.devices[r.patches[p].device].space;
  };

  // Every node is in exactly one patch, the one patch_of names, on its device.
  std::vector<int> seen(n_nodes, 0);
  for (int p = 0; p < n_patches; ++p) {
    const auto& patch = r.patches[p];
    ASSERT_FALSE(patch.nodes.empty()) << "patch " << p;
    EXPECT_TRUE(std::is_sorted(patch.nodes.begin(), patch.nodes.end())) << "patch " << p;
    for (int n : patch.nodes) {
      ASSERT_GE(n, 0);
      ASSERT_LT(n, n_nodes);
      ++seen[n];
      EXPECT_EQ(r.patch_of[n], p) << "node " << n;
      EXPECT_EQ(r.device_of[n], patch.device) << "node " << n;
    }
    if (patch.device < 0) {
      EXPECT_EQ(patch.nodes.size(), 1u) << "host patch " << p;
    }
    // depends_on only points to earlier patches: the patch graph is acyclic.
    EXPECT_TRUE(std::is_sorted(patch.depends_on.begin(), patch.depends_on.end()));
    EXPECT_EQ(std::set<int>(patch.depends_on.begin(), patch.depends_on.end()).size(),
              patch.depends_on.size());
    for (int q : patch.depends_on) {
      EXPECT_GE(q, 0);
      EXPECT_LT(q, p) << "patch " << p << " depends on a later patch";
    }
  }
  for (int n = 0; n < n_nodes; ++n) {
    EXPECT_EQ(seen[n], 1) << "node " << n << " is in " << seen[n] << " patches";
    EXPECT_EQ(g.nodes[n].host, r.device_of[n] < 0) << "node " << n;
  }

  // Every node's producers are in its patch or an earlier one it depends on; value inputs are
  // never produced in the consumer's patch.
  for (int n = 0; n < n_nodes; ++n) {
    const int p = r.patch_of[n];
    const auto& deps = r.patches[p].depends_on;
    auto check_read = [&](int v, bool value_input) {
      const int prod = g.producer(v);
      if (prod < 0) return;
      const int q = r.patch_of[prod];
      EXPECT_LE(q, p) << "node " << n << " reads value " << v << " from a later patch";
      if (q != p) {
        EXPECT_TRUE(std::count(deps.begin(), deps.end(), q))
            << "patch " << p << " does not depend on " << q;
      }
      if (value_input) {
        EXPECT_NE(q, p) << "node " << n << " shares a patch with value input " << v;
      }
      if (value_input && space(q) != 0) {
        EXPECT_NE(find_transfer(r, v, 0), nullptr) << "value input " << v << " not downloaded";
      }
    };
    for (int v : g.nodes[n].inputs) check_read(v, false);
    for (int v : g.nodes[n].value_inputs) check_read(v, true);
  }

  // Transfers: one per (value, destination space), never a constant, each consumer reading it
  // from another space; device-to-device copies go through a host copy issued before them.
  std::set<std::pair<int, int>> keys;
  for (size_t t = 0; t < r.transfers.size(); ++t) {
    const Transfer& tr = r.transfers[t];
    EXPECT_TRUE(keys.insert({tr.value, tr.to_space}).second)
        << "two transfers of value " << tr.value << " to space " << tr.to_space;
    EXPECT_FALSE(g.values[tr.value].constant) << "transfer of constant " << tr.value;
    EXPECT_NE(tr.from_space, tr.to_space);
    const int prod = g.producer(tr.value);
    EXPECT_EQ(tr.producer_patch, prod < 0 ? -1 : r.patch_of[prod]);
    const int home = prod < 0 ? 0 : space(r.patch_of[prod]);
    if (tr.to_space == 0) {
      EXPECT_EQ(tr.from_space, home);
    }
    if (tr.to_space != 0) {
      EXPECT_EQ(tr.from_space, 0) << "value " << tr.value << " copied device to device";
      if (home != 0) {
        const Transfer* down = find_transfer(r, tr.value, 0);
        ASSERT_NE(down, nullptr) << "no host copy of " << tr.value;
        EXPECT_LT(index_of(r, down), static_cast<int>(t));
      }
    }
    for (int p : tr.consumer_patches) {
      EXPECT_EQ(space(p), tr.to_space);
      const auto& in = r.patches[p].inputs;
      EXPECT_TRUE(std::count(in.begin(), in.end(), tr.value))
          << "patch " << p << " does not read " << tr.value;
    }
  }
  for (int n = 0; n < n_nodes; ++n)
    for (int v : g.nodes[n].inputs) {
      const int prod = g.producer(v);
      const int home = prod < 0 ? 0 : space(r.patch_of[prod]);
      const int p = r.patch_of[n];
      if (g.values[v].constant || home == space(p)) continue;
      const Transfer* t = find_transfer(r, v, space(p));
      ASSERT_NE(t, nullptr) << "node " << n << " reads value " << v << " with no copy";
      EXPECT_TRUE(std::count(t->consumer_patches.begin(), t->consumer_patches.end(), p));
    }
  for (size_t v = 0; v < g.values.size(); ++v) {
    const int prod = g.producer(static_cast<int>(v));
    if (g.values[v].graph_output && prod >= 0 && space(r.patch_of[prod]) != 0) {
      EXPECT_NE(find_transfer(r, static_cast<int>(v), 0), nullptr) << "output " << v;
    }
  }

  // Questions: at most once per (node, device), never about a host node.
  for (const auto& [key, calls] : rig.asked) {
    EXPECT_EQ(calls, 1) << "node " << key.first << " device " << key.second;
    EXPECT_FALSE(g.nodes[key.first].host) << "host node " << key.first << " was asked about";
  }

  // Assignment: pins hold; otherwise the first requested claimer, or the CPU when none claims
  // or the cost rule sent it back.
  for (int n = 0; n < n_nodes; ++n) {
    if (g.nodes[n].host) continue;
    auto pin = rig.options.pinned.find(g.nodes[n].name);
    if (pin != rig.options.pinned.end()) {
      EXPECT_EQ(r.device_of[n], pin->second) << "pinned node " << n;
      continue;
    }
    int first = -1;
    for (int d = 0; d < static_cast<int>(rig.devices.size()) && first < 0; ++d)
      if ((rig.devices[d].requested || (d == rig.cpu() && rig.options.cpu_fallback)) &&
          rig.claims(g, n, d))
        first = d;
    if (r.device_of[n] == first) continue;
    EXPECT_EQ(r.device_of[n], rig.cpu()) << "node " << n;
    EXPECT_EQ(r.reason[n].rfind("cost rule", 0), 0u) << "node " << n << ": " << r.reason[n];
  }
}

// ---------------------------------------------------------------------------------------------
// Assignment.

TEST(PartitionAssign, FirstClaimWinsInPriorityOrder) {
  Rig rig;
  rig.add("acc:0", 1, {"MatMul", "Add"});
  rig.add("acc:1", 2, {"MatMul", "Relu"});
  rig.add("cpu", 0, {"*"});
  rig.options.cost_rule = false;
  Graph g;
  const int x = g.input();
  const int m = g.op("MatMul", {x});
  const int a = g.op("Add", {m, x});
  const int r1 = g.op("Relu", {a});
  g.output(g.op("Softmax", {r1}));

  Result r = rig.run(g);
  check_invariants(g, rig, r);
  EXPECT_EQ(r.device_of, (std::vector<int>{0, 0, 1, 2}));
  EXPECT_EQ(r.reason[0], "");
  EXPECT_EQ(r.reason[1], "");
  EXPECT_EQ(r.reason[2], "acc:0: acc:0 does not run Relu");
  EXPECT_EQ(r.reason[3], "acc:0: acc:0 does not run Softmax; acc:1: acc:1 does not run Softmax");
  // Asking stops at the first claim.
  EXPECT_EQ(rig.asked.count({0, 1}), 0u);
  EXPECT_EQ(rig.asked.count({0, 2}), 0u);
  EXPECT_EQ(rig.asked.count({2, 2}), 0u);

  // The same devices in the other order: acc:1 now wins MatMul.
  Rig swapped;
  swapped.add("acc:1", 2, {"MatMul", "Relu"});
  swapped.add("acc:0", 1, {"MatMul", "Add"});
  swapped.add("cpu", 0, {"*"});
  swapped.options.cost_rule = false;
  r = swapped.run(g);
  check_invariants(g, swapped, r);
  EXPECT_EQ(r.device_of, (std::vector<int>{0, 1, 0, 2}));
  EXPECT_EQ(r.reason[1], "acc:1: acc:1 does not run Add");
  EXPECT_EQ(r.reason[3], "acc:1: acc:1 does not run Softmax; acc:0: acc:0 does not run Softmax");
}

TEST(PartitionAssign, DevicesNotRequestedAreNeitherAskedNorNamed) {
  Rig rig;
  rig.add("acc:0", 1, {"MatMul"});
  rig.add("acc:1", 2, {"Softmax"}, /*requested=*/false);
  rig.add("cpu", 0, {"*"}, /*requested=*/false);  // the fallback
  Graph g;
  g.output(g.op("Softmax", {g.op("MatMul", {g.input()})}));
  Result r = rig.run(g);
  check_invariants(g, rig, r);
  EXPECT_EQ(r.device_of, (std::vector<int>{0, 2}));
  EXPECT_EQ(r.reason[1], "acc:0: acc:0 does not run Softmax");
  for (const auto& [key, _] : rig.asked) EXPECT_NE(key.second, 1) << "acc:1 was asked";
}

TEST(PartitionAssign, AskedAtMostOncePerNodeAndDevice) {
  // The CPU first in priority refuses Exotic, so the cost rule asks it again about the lone
  // Exotic on acc:0: the answer must come from the first question.
  Rig rig;
  rig.add("cpu", 0, {"*", "!Exotic"});
  rig.add("acc:0", 1, {"Exotic", "Relu"});
  rig.options.cpu_index = 0;
  Graph g;
  const int a = g.op("Softmax", {g.input()});
  g.output(g.op("Softmax", {g.op("Exotic", {a})}));
  Result r = rig.run(g);
  check_invariants(g, rig, r);
  EXPECT_EQ(r.device_of, (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(r.reason[1], "cpu: cpu does not run Exotic");
  EXPECT_EQ(rig.asked.at({1, 0}), 1);
  EXPECT_EQ(rig.asked.at({1, 1}), 1);
  EXPECT_EQ(rig.asked.size(), 4u);  // n0 and n2: the CPU only; n1: both
}

// ---------------------------------------------------------------------------------------------
// Strict mode and pins.

TEST(PartitionStrict, ErrorListsEveryUnclaimedNodeWithEachReason) {
  Rig rig;
  rig.add("acc:0", 1, {"MatMul", "Relu"});
  rig.add("acc:1", 2, {"MatMul"});
  rig.add("cpu", 0, {"*"}, /*requested=*/false);
  rig.options.cpu_fallback = false;
  rig.options.where = "m.onnx";
  Graph g;
  const int m = g.op("MatMul", {g.input()});
  const int s = g.op("Softmax", {m});
  const int t = g.op("Tanh", {s});
  g.output(g.op("Relu", {t}));

  std::string message;
  expect_error(
      [&] {
        try {
          rig.run(g);
        } catch (const quilt::Error& e) {
          message = e.what();
          throw;
        }
      },
      ErrorCode::NotImplemented,
      {"model 'm.onnx': 2 nodes are not supported by the requested backends (acc:0, acc:1) and "
       "CPU fallback is off:",
       "\n  - [Softmax node \"n1\"] acc:0: acc:0 does not run Softmax; acc:1: acc:1 does not run "
       "Softmax",
       "\n  - [Tanh node \"n2\"] acc:0: acc:0 does not run Tanh; acc:1: acc:1 does not run Tanh"});
  EXPECT_EQ(message.find("MatMul node"), std::string::npos) << message;
  EXPECT_EQ(message.find("Relu node"), std::string::npos) << message;
  for (const auto& [key, _] : rig.asked) EXPECT_NE(key.second, 2) << "the CPU was asked";

  // One node: the singular.
  Graph one;
  one.output(one.op("Softmax", {one.input()}));
  expect_error([&] { rig.run(one); }, ErrorCode::NotImplemented,
               {"1 node is not supported by the requested backends"});
}

TEST(PartitionStrict, CpuRequestedExplicitlyRunsTheRest) {
  Rig rig;
  rig.add("acc:0", 1, {"MatMul"});
  rig.add("cpu", 0, {"*"}, /*requested=*/true);
  rig.options.cpu_fallback = false;
  Graph g;
  const int m = g.op("MatMul", {g.input()});
  g.output(g.op("Tanh", {g.op("Softmax", {m})}));
  Result r = rig.run(g);
  check_invariants(g, rig, r);
  EXPECT_EQ(r.device_of, (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(r.reason[1], "acc:0: acc:0 does not run Softmax");
}

TEST(PartitionStrict, NoCostRuleWithoutTheCpu) {
  // Strict mode without the CPU: the lone cheap Relu has nowhere to go back to.
  Rig rig = acc_and_cpu();
  rig.devices[1].requested = false;
  rig.options.cpu_fallback = false;
  Graph g;
  g.output(g.op("Relu", {g.input()}));
  Result r = rig.run(g);
  check_invariants(g, rig, r);
  EXPECT_EQ(r.device_of, (std::vector<int>{0}));
  EXPECT_EQ(r.reason[0], "");
  EXPECT_EQ(rig.asked.count({0, 1}), 0u);
}

TEST(PartitionPin, PinBeatsAnEarlierClaim) {
  Rig rig;
  rig.add("acc:0", 1, {"MatMul"});
  rig.add("acc:1", 2, {"MatMul"});
  rig.add("cpu", 0, {"*"});
  rig.options.pinned = {{"n1", 1}, {"n2", 2}};
  Graph g;
  const int m0 = g.op("MatMul", {g.input()});
  const int m1 = g.op("MatMul", {m0});
  g.output(g.op("MatMul", {m1}));
  Result r = rig.run(g);
  check_invariants(g, rig, r);
  EXPECT_EQ(r.device_of, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(r.reason[0], "");
  EXPECT_EQ(r.reason[1], "pinned to acc:1");
  EXPECT_EQ(r.reason[2], "pinned to cpu");
  // A pinned node is asked about its pin only.
  EXPECT_EQ(rig.asked.count({1, 0}), 0u);
  EXPECT_EQ(rig.asked.count({1, 1}), 1u);
  EXPECT_EQ(rig.asked.count({2, 0}), 0u);
  EXPECT_EQ(rig.asked.count({2, 2}), 1u);
}

TEST(PartitionPin, PinToARefusingDeviceIsAnError) {
  Rig rig = acc_and_cpu({"MatMul"});
  rig.options.pinned = {{"n1", 0}};
  rig.options.where = "m.onnx";
  Graph g;
  const int m = g.op("MatMul", {g.input()});
  g.output(g.op("Softmax", {m}));
  expect_error([&] { rig.run(g); }, ErrorCode::InvalidArgument,
               {"model 'm.onnx': [Softmax node \"n1\"] is pinned to acc:0, which does not run it: "
                "acc:0 does not run Softmax"});
}

// ---------------------------------------------------------------------------------------------
// The cost rule.

// x -> Softmax -> op on acc:0 -> Softmax -> y, with activations of `bytes`.
Graph between_cpu_nodes(const std::string& op_type, int64_t bytes = kBig) {
  Graph g;
  const int a = g.op("Softmax", {g.input(bytes)}, bytes);
  const int b = g.op(op_type, {a}, bytes);
  g.output(g.op("Softmax", {b}, bytes));
  return g;
}

TEST(PartitionCostRule, LoneCheapOpGoesToTheCpu) {
  Rig rig = acc_and_cpu();
  Graph g = between_cpu_nodes("Relu");
  Result r = rig.run(g);
  check_invariants(g, rig, r);
  EXPECT_EQ(r.device_of, (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(r.reason[1],
            "cost rule: a cheap island of 1 node on acc:0 would cost two copies; kept on the CPU");
  EXPECT_EQ(r.patches.size(), 1u);
  EXPECT_TRUE(r.transfers.empty());

  rig.options.cost_rule = false;
  r = rig.run(g);
  check_invariants(g, rig, r);
  EXPECT_EQ(r.device_of, (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(r.reason[1], "");
  EXPECT_EQ(r.patches.size(), 3u);
  EXPECT_EQ(r.transfers.size(), 2u);
}

TEST(PartitionCostRule, LoneHeavyOpStays) {
  ASSERT_TRUE(qp::is_heavy_op("MatMul"));
  ASSERT_FALSE(qp::is_heavy_op("Relu"));
  Rig rig = acc_and_cpu();
  Graph g = between_cpu_nodes("MatMul");
  Result r = rig.run(g);
  check_invariants(g, rig, r);
  EXPECT_EQ(r.device_of, (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(r.reason[1], "");
}

TEST(PartitionCostRule, IslandsOfUpToTwoCheapNodesGoBack) {
  ASSERT_EQ(qp::kIslandMax, 2);
  Rig rig = acc_and_cpu();
  for (int length : {2, 3}) {
    SCOPED_TRACE("island of " + std::to_string(length));
    Graph g;
    int v = g.op("Softmax", {g.input()});
    for (int k = 0; k < length; ++k) v = g.op(k % 2 ? "Add" : "Relu", {v});
    g.output(g.op("Softmax", {v}));
    Result r = rig.run(g);
    check_invariants(g, rig, r);
    for (int n = 1; n <= length; ++n) {
      EXPECT_EQ(r.device_of[n], length == 2 ? 1 : 0) << "node " << n;
      if (length == 2) {
        EXPECT_EQ(r.reason[n],
                  "cost rule: a cheap island of 2 nodes on acc:0 would cost two copies; kept on "
                  "the CPU");
      }
    }
  }
}

// A chain of `length` MatMuls on acc:0 between CPU Softmaxes, each estimated at `cpu_ns` on the
// CPU; acc:0 costs `launch_ns` per command.
TEST(PartitionCostRule, IslandsTheCpuFinishesBeforeTheLaunchesGoBack) {
  auto run = [](double launch_ns, double cpu_ns, int length = 3) {
    Rig rig = acc_and_cpu();
    rig.devices[0].launch_ns = launch_ns;
    Graph g;
    int v = g.op("Softmax", {g.input()});
    for (int k = 0; k < length; ++k) {
      v = g.op("MatMul", {v, g.constant()});
      g.nodes.back().cpu_ns = cpu_ns;
    }
    g.output(g.op("Softmax", {v}));
    Result r = rig.run(g);
    check_invariants(g, rig, r);
    return r;
  };
  // 3 kernels + 2 copies (the constants are no copies) of 20 us = 100 us against 3 x 10 us.
  Result r = run(20000, 10000);
  for (int n = 1; n <= 3; ++n) {
    EXPECT_EQ(r.device_of[n], 1) << "node " << n;
    EXPECT_EQ(r.reason[n],
              "cost rule: about 30 us on the CPU against 5 kernels and copies of 20 us each on "
              "acc:0; kept on the CPU");
  }
  // Work the launches do not dwarf stays: 3 x 40 us against 100 us.
  r = run(20000, 40000);
  for (int n = 1; n <= 3; ++n) EXPECT_EQ(r.device_of[n], 0) << "node " << n;
  // No measured launch cost, or a node whose CPU time is unknown: the rule does not apply.
  r = run(0, 10);
  for (int n = 1; n <= 3; ++n) EXPECT_EQ(r.device_of[n], 0) << "node " << n;
  r = run(20000, -1);
  for (int n = 1; n <= 3; ++n) EXPECT_EQ(r.device_of[n], 0) << "node " << n;
}

TEST(PartitionCostRule, TinyValuesGoBack) {
  Rig rig = acc_and_cpu();
  const std::string tiny_reason = "cost rule: its values are tiny (at most " +
                                  std::to_string(kTinyBytes) +
                                  " bytes), cheaper on the host than a copy";
  // Three cheap nodes (not a cheap island by size) and a heavy one, all with tiny outputs.
  auto build = [](int64_t bytes_of_second, int64_t bytes) {
    Graph g;
    int v = g.op("Softmax", {g.input()}, bytes);
    v = g.op("Relu", {v}, bytes);
    v = g.op("Add", {v}, bytes_of_second);
    v = g.op("Reshape", {v}, bytes);
    v = g.op("MatMul", {v}, bytes);
    g.output(g.op("Softmax", {v}, bytes));
    return g;
  };
  Graph g = build(kTinyBytes, kTinyBytes);
  Result r = rig.run(g);
  check_invariants(g, rig, r);
  for (int n = 1; n <= 4; ++n) {
    EXPECT_EQ(r.device_of[n], 1) << "node " << n;
    EXPECT_EQ(r.reason[n], tiny_reason) << "node " << n;
  }
  // One value a byte too big keeps the island (it has a heavy op).
  g = build(kTinyBytes + 1, kTinyBytes);
  r = rig.run(g);
  check_invariants(g, rig, r);
  for (int n = 1; n <= 4; ++n) EXPECT_EQ(r.device_of[n], 0) << "node " << n;
  // Unknown sizes are not tiny.
  g = build(-1, kTinyBytes);
  r = rig.run(g);
  check_invariants(g, rig, r);
  for (int n = 1; n <= 4; ++n) EXPECT_EQ(r.device_of[n], 0) << "node " << n;
}

TEST(PartitionCostRule, OffKeepsEveryClaim) {
  Rig rig = acc_and_cpu();
  rig.options.cost_rule = false;
  Graph g;
  int v = g.op("Softmax", {g.input(kTinyBytes)}, kTinyBytes);
  const int relu = g.op("Relu", {v}, kTinyBytes);
  v = g.op("Softmax", {relu});
  g.output(g.op("Add", {v}));
  Result r = rig.run(g);
  check_invariants(g, rig, r);
  EXPECT_EQ(r.device_of, (std::vector<int>{1, 0, 1, 0}));
  for (const auto& why : r.reason) EXPECT_EQ(why.find("cost rule"), std::string::npos) << why;
}

TEST(PartitionCostRule, NeverMovesWhatTheCpuRefuses) {
  Rig rig;
  rig.add("acc:0", 1, {"Exotic", "Relu"});
  rig.add("cpu", 0, {"*", "!Exotic"});
  Graph g = between_cpu_nodes("Exotic");
  Result r = rig.run(g);
  check_invariants(g, rig, r);
  EXPECT_EQ(r.device_of, (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(r.reason[1], "");

  // A cheap island of two that the CPU half refuses stays whole.
  Graph two;
  int v = two.op("Softmax", {two.input()});
  v = two.op("Exotic", {two.op("Relu", {v})});
  two.output(two.op("Softmax", {v}));
  r = rig.run(two);
  check_invariants(two, rig, r);
  EXPECT_EQ(r.device_of, (std::vector<int>{1, 0, 0, 1}));
  EXPECT_EQ(r.patch_of[1], r.patch_of[2]);
}

TEST(PartitionCostRule, PinnedNodesAreNeverMoved) {
  Rig rig = acc_and_cpu();
  rig.options.pinned = {{"n1", 0}};
  Graph g = between_cpu_nodes("Relu", kTinyBytes);
  Result r = rig.run(g);
  check_invariants(g, rig, r);
  EXPECT_EQ(r.device_of, (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(r.reason[1], "pinned to acc:0");
}

TEST(PartitionCostRule, CheapNodeBetweenPinnedNodesOfItsDeviceStays) {
  Rig rig = acc_and_cpu();
  rig.options.pinned = {{"n0", 0}, {"n2", 0}};
  Graph g;
  const int a = g.op("MatMul", {g.input()});
  const int b = g.op("Relu", {a});
  g.output(g.op("MatMul", {b}));
  Result r = rig.run(g);
  check_invariants(g, rig, r);
  EXPECT_EQ(r.device_of, (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(r.patches.size(), 1u);
  EXPECT_EQ(r.transfers.size(), 2u);  // x up, the output down
}

// ---------------------------------------------------------------------------------------------
// Grouping.

TEST(PartitionGroup, DiamondSplitsTheAccPatches) {
  // x -> a (cpu) -> b (acc) -> c (cpu) -> d (acc) with d also reading b: one acc patch {b, d}
  // would both feed and wait for c.
  for (const std::string op : {"MatMul", "Relu"}) {
    SCOPED_TRACE(op);
    Rig rig = acc_and_cpu();
    rig.options.cost_rule = op == "MatMul";  // the cheap diamond would go back to the CPU
    Graph g;
    const int x = g.input();
    const int w = g.constant();
    const int a = g.op("Softmax", {x});
    const int b = g.op(op, {a, w});
    const int c = g.op("Softmax", {b});
    const int d = g.op(op == "MatMul" ? "MatMul" : "Add", {b, c});
    g.output(d);
    Result r = rig.run(g);
    check_invariants(g, rig, r);
    EXPECT_EQ(r.device_of, (std::vector<int>{1, 0, 1, 0}));
    EXPECT_EQ(r.patch_of, (std::vector<int>{0, 1, 2, 3}));
    ASSERT_EQ(r.patches.size(), 4u);
    EXPECT_EQ(r.patches[1].depends_on, (std::vector<int>{0}));
    EXPECT_EQ(r.patches[2].depends_on, (std::vector<int>{1}));
    EXPECT_EQ(r.patches[3].depends_on, (std::vector<int>{1, 2}));
    EXPECT_EQ(r.patches[0].inputs, (std::vector<int>{x}));
    EXPECT_EQ(r.patches[1].inputs, (std::vector<int>{a}));  // not the constant w
    EXPECT_EQ(r.patches[3].inputs, (std::vector<int>{b, c}));
    EXPECT_EQ(r.patches[1].outputs, (std::vector<int>{b}));
    EXPECT_EQ(r.patches[3].outputs, (std::vector<int>{d}));
    // b crosses to patch 3 in its own space: no copy; to c on the CPU: a download.
    EXPECT_EQ(r.transfers.size(), 4u);
    const Transfer* b_down = find_transfer(r, b, 0);
    ASSERT_NE(b_down, nullptr);
    EXPECT_EQ(b_down->from_space, 1);
    EXPECT_EQ(b_down->producer_patch, 1);
    EXPECT_EQ(b_down->consumer_patches, (std::vector<int>{2}));
    EXPECT_EQ(find_transfer(r, b, 1), nullptr);
    const Transfer* c_up = find_transfer(r, c, 1);
    ASSERT_NE(c_up, nullptr);
    EXPECT_EQ(c_up->consumer_patches, (std::vector<int>{3}));
  }
}

TEST(PartitionGroup, ChainOfAccNodesIsOnePatch) {
  Rig rig = acc_and_cpu();
  Graph g;
  const int x = g.input();
  int v = g.op("MatMul", {x});
  v = g.op("Relu", {v});
  v = g.op("Add", {v, x});
  const int y = g.op("Reshape", {v});
  g.output(y);
  Result r = rig.run(g);
  check_invariants(g, rig, r);
  ASSERT_EQ(r.patches.size(), 1u);
  EXPECT_EQ(r.patches[0].device, 0);
  EXPECT_EQ(r.patches[0].nodes, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(r.patches[0].inputs, (std::vector<int>{x}));
  EXPECT_EQ(r.patches[0].outputs, (std::vector<int>{y}));
  ASSERT_EQ(r.transfers.size(), 2u);
  EXPECT_EQ(transfers_of(r, x), 1);
  const Transfer* up = find_transfer(r, x, 1);
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->producer_patch, -1);
  EXPECT_EQ(up->consumer_patches, (std::vector<int>{0}));
}

TEST(PartitionGroup, IndependentAccBranchesMerge) {
  Rig rig = acc_and_cpu();
  // Two acc branches joined on the CPU.
  Graph g;
  const int x = g.input();
  const int r1 = g.op("Relu", {g.op("MatMul", {x})});
  const int r2 = g.op("Relu", {g.op("MatMul", {x})});
  g.output(g.op("Concat", {r1, r2}));
  Result r = rig.run(g);
  check_invariants(g, rig, r);
  ASSERT_EQ(r.patches.size(), 2u);
  EXPECT_EQ(r.patches[0].nodes, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(r.patches[0].outputs, (std::vector<int>{r1, r2}));
  EXPECT_EQ(transfers_of(r, x), 1);

  // One branch passes through the CPU first; the other acc branch still joins the first patch,
  // and the CPU join joins the CPU patch.
  Graph h;
  const int y = h.input();
  const int s1 = h.op("Softmax", {h.op("MatMul", {y})});
  const int m2 = h.op("MatMul", {y});
  h.output(h.op("Concat", {s1, m2}));
  r = rig.run(h);
  check_invariants(h, rig, r);
  EXPECT_EQ(r.patch_of, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(r.patches.size(), 2u);
}

TEST(PartitionGroup, JoiningAddsNoDependencyToThePatch) {
  // m2 reads m1 (acc:0) and g (acc:1): joining m1's patch would make it wait for acc:1, so the
  // two devices could no longer overlap; m2 starts a patch of its own.
  Rig rig;
  rig.add("acc:0", 1, {"MatMul"});
  rig.add("acc:1", 2, {"Gemm"});
  rig.add("cpu", 0, {"*"});
  Graph g;
  const int x = g.input();
  const int m1 = g.op("MatMul", {x});
  const int g1 = g.op("Gemm", {x});
  g.output(g.op("MatMul", {m1, g1}));
  Result r = rig.run(g);
  check_invariants(g, rig, r);
  EXPECT_EQ(r.device_of, (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(r.patch_of, (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(r.patches[0].depends_on.empty());
  EXPECT_TRUE(r.patches[1].depends_on.empty());
  EXPECT_EQ(r.patches[2].depends_on, (std::vector<int>{0, 1}));
}

TEST(PartitionGroup, IndependentNodeJoinsAnEarlierPatchWithoutDependencies) {
  // m1 -> P0 (no dependencies); m2 waits for the CPU's Softmax -> P2; m3 reads only x: joining
  // P0 adds nothing to P0 and m3 waits for no less than P0.
  Rig rig = acc_and_cpu();
  Graph g;
  const int x = g.input();
  const int m1 = g.op("MatMul", {x});
  const int m2 = g.op("MatMul", {g.op("Softmax", {x})});
  const int m3 = g.op("MatMul", {x});
  g.output(g.op("Concat", {m1, m2, m3}));
  Result r = rig.run(g);
  check_invariants(g, rig, r);
  EXPECT_EQ(r.device_of, (std::vector<int>{0, 1, 0, 0, 1}));
  EXPECT_EQ(r.patch_of[3], r.patch_of[0]);
  EXPECT_EQ(r.patches.size(), 4u);  // {m1, m3}, Softmax, {m2}, Concat
}

TEST(PartitionGroup, HostNodesAreAloneAndNeverMerged) {
  Rig rig = acc_and_cpu();
  Graph g;
  const int x = g.input();
  const int a = g.op("Softmax", {x});
  const int h1 = g.host("If", {a});
  const int h2 = g.host("Loop", {h1});
  const int b = g.op("Softmax", {h2});
  const int m1 = g.op("MatMul", {x});
  const int h3 = g.host("Scan", {x});
  const int m2 = g.op("MatMul", {x});
  g.output(b);
  g.output(g.op("Concat", {m1, m2, h3}));
  Result r = rig.run(g);
  check_invariants(g, rig, r);
  EXPECT_EQ(r.device_of, (std::vector<int>{1, -1, -1, 1, 0, -1, 0, 1}));
  for (int n : {1, 2, 5}) {
    EXPECT_EQ(r.patches[r.patch_of[n]].device, -1);
    EXPECT_EQ(r.patches[r.patch_of[n]].nodes, (std::vector<int>{n}));
    for (int d = 0; d < 2; ++d) EXPECT_EQ(rig.asked.count({n, d}), 0u);
  }
  EXPECT_NE(r.patch_of[1], r.patch_of[2]);
  EXPECT_NE(r.patch_of[0], r.patch_of[3]);  // b waits for a through the host steps
  EXPECT_EQ(r.patch_of[4], r.patch_of[6]);  // independent of the host step between them
  // a, If, Loop, b, {m1, m2}, Scan, Concat (b's patch does not wait for m1, m2 or the Scan).
  EXPECT_EQ(r.patches.size(), 7u);
}

TEST(PartitionGroup, RandomGraphsGiveAcyclicPatches) {
  std::mt19937 rng(20261122);
  auto pick = [&](size_t n) { return static_cast<int>(rng() % n); };
  const std::vector<std::string> op_types = {"MatMul", "Relu", "Add", "Softmax", "Reshape", "Tanh"};
  const std::vector<int64_t> sizes = {-1, 64, kTinyBytes, kBig, 1 << 20};
  int n_patches = 0, n_nodes = 0, n_transfers = 0;
  for (int iter = 0; iter < 50; ++iter) {
    SCOPED_TRACE("graph " + std::to_string(iter));
    Graph g;
    std::vector<int> avail;
    for (int i = 0, n = 1 + pick(3); i < n; ++i)
      avail.push_back(g.input(sizes[pick(sizes.size())]));
    const int w = g.constant();
    for (int k = 0, n = 3 + pick(28); k < n; ++k) {
      std::vector<int> ins;
      for (int j = 0, m = 1 + pick(3); j < m; ++j) ins.push_back(avail[pick(avail.size())]);
      if (pick(3) == 0) ins.push_back(w);
      if (pick(12) == 0) {
        avail.push_back(g.host(pick(2) ? "If" : "Loop", ins));
        continue;
      }
      std::vector<int> value_inputs;
      if (pick(4) == 0 && g.producer(ins[0]) >= 0) value_inputs.push_back(ins[0]);
      avail.push_back(
          g.op(op_types[pick(op_types.size())], ins, sizes[pick(sizes.size())], value_inputs));
    }
    g.output(avail.back());
    for (int k = 0; k < 2; ++k) g.output(avail[pick(avail.size())]);

    Rig rig;
    rig.add("acc:0", 1, {});
    rig.add("acc:1", 2, {}, /*requested=*/pick(3) != 0);
    rig.add("cpu", 0, {}, /*requested=*/pick(2) == 0);
    std::vector<std::vector<char>> table(g.nodes.size());
    for (auto& row : table) row = {char(pick(2)), char(pick(2)), 1};
    rig.per_node = [&table](int n, int d) { return table[n][d] != 0; };
    rig.options.cost_rule = pick(2) == 0;
    for (size_t n = 0; n < g.nodes.size(); ++n)
      if (!g.nodes[n].host && pick(10) == 0) {
        const int d = pick(3);
        if (table[n][d]) rig.options.pinned[g.nodes[n].name] = d;
      }

    Result r;
    ASSERT_NO_THROW(r = rig.run(g));
    check_invariants(g, rig, r);
    n_patches += static_cast<int>(r.patches.size());
    n_nodes += static_cast<int>(g.nodes.size());
    n_transfers += static_cast<int>(r.transfers.size());
  }
  // The graphs exercise grouping: patches hold several nodes on average, and copies happen.
  EXPECT_LT(n_patches, n_nodes);
  EXPECT_GT(n_transfers, 50);
}

// ---------------------------------------------------------------------------------------------
// Transfers.

TEST(PartitionTransfer, OnePerValueAndSpaceSharedByItsConsumers) {
  // v (cpu) is read by three MatMuls on acc:0, each in its own patch (a CPU node between them).
  Rig rig = acc_and_cpu();
  Graph g;
  const int v = g.op("Softmax", {g.input()});
  const int c1 = g.op("Softmax", {g.op("MatMul", {v})});
  const int c2 = g.op("Softmax", {g.op("MatMul", {v, c1})});
  g.output(g.op("MatMul", {v, c2}));
  Result r = rig.run(g);
  check_invariants(g, rig, r);
  EXPECT_EQ(r.patch_of, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(transfers_of(r, v), 1);
  const Transfer* up = find_transfer(r, v, 1);
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->from_space, 0);
  EXPECT_EQ(up->producer_patch, 0);
  EXPECT_EQ(up->consumer_patches, (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(r.transfers.size(), 6u);  // v, c1, c2 up; three MatMul outputs down
}

TEST(PartitionTransfer, NoneForConstants) {
  Rig rig = acc_and_cpu();
  Graph g;
  const int x = g.input();
  const int w = g.constant();
  const int m = g.op("MatMul", {x, w});
  g.output(g.op("Sub", {g.op("Softmax", {m, w}), w}));
  Result r = rig.run(g);
  check_invariants(g, rig, r);
  EXPECT_EQ(r.device_of, (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(transfers_of(r, w), 0);
  for (const auto& p : r.patches) EXPECT_EQ(std::count(p.inputs.begin(), p.inputs.end(), w), 0);
  EXPECT_EQ(r.transfers.size(), 2u);  // x up, m down
}

TEST(PartitionTransfer, GraphOutputsOnAccAreDownloaded) {
  Rig rig = acc_and_cpu();
  Graph g;
  const int x = g.input();
  const int m = g.op("MatMul", {x});
  const int s = g.op("Softmax", {x});
  g.output(m);
  g.output(s);
  Result r = rig.run(g);
  check_invariants(g, rig, r);
  const Transfer* down = find_transfer(r, m, 0);
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->from_space, 1);
  EXPECT_EQ(down->producer_patch, r.patch_of[0]);
  EXPECT_TRUE(down->consumer_patches.empty());
  EXPECT_EQ(transfers_of(r, s), 0);
  EXPECT_EQ(r.transfers.size(), 2u);
  const auto& outs = r.patches[r.patch_of[0]].outputs;
  EXPECT_EQ(outs, (std::vector<int>{m}));
}

TEST(PartitionTransfer, DeviceToDeviceGoesThroughTheHost) {
  Rig rig;
  rig.add("acc:0", 1, {"MatMul"});
  rig.add("acc:1", 2, {"Gemm"});
  rig.add("cpu", 0, {"*"});
  Graph g;
  const int x = g.input();
  const int m = g.op("MatMul", {x});
  const int y = g.op("Gemm", {m});
  g.output(y);
  Result r = rig.run(g);
  check_invariants(g, rig, r);
  EXPECT_EQ(r.device_of, (std::vector<int>{0, 1}));
  ASSERT_EQ(r.transfers.size(), 4u);  // x up to 1; m 1 -> host -> 2; y down from 2
  const Transfer* down = find_transfer(r, m, 0);
  const Transfer* up = find_transfer(r, m, 2);
  ASSERT_NE(down, nullptr);
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(down->from_space, 1);
  EXPECT_TRUE(down->consumer_patches.empty());
  EXPECT_EQ(up->from_space, 0);
  EXPECT_EQ(up->producer_patch, r.patch_of[0]);
  EXPECT_EQ(up->consumer_patches, (std::vector<int>{r.patch_of[1]}));
  EXPECT_LT(index_of(r, down), index_of(r, up));
  const Transfer* y_down = find_transfer(r, y, 0);
  ASSERT_NE(y_down, nullptr);
  EXPECT_EQ(y_down->from_space, 2);
}

TEST(PartitionTransfer, ValueInputsAreDownloadedAndNeverInTheProducerPatch) {
  Rig rig = acc_and_cpu();
  for (bool value_input : {false, true}) {
    SCOPED_TRACE(value_input ? "with the value input" : "without");
    Graph g;
    const int y = g.op("MatMul", {g.input()});
    const int shape = g.op("MatMul", {y});
    const int reshaped = g.op("Reshape", {y, shape}, kBig,
                              value_input ? std::vector<int>{shape} : std::vector<int>{});
    g.output(g.op("MatMul", {reshaped}));
    Result r = rig.run(g);
    check_invariants(g, rig, r);
    EXPECT_EQ(r.device_of, (std::vector<int>{0, 0, 0, 0}));
    if (!value_input) {
      EXPECT_EQ(r.patches.size(), 1u);
      EXPECT_EQ(transfers_of(r, shape), 0);
      continue;
    }
    EXPECT_EQ(r.patch_of, (std::vector<int>{0, 0, 1, 1}));
    EXPECT_EQ(r.patches[1].depends_on, (std::vector<int>{0}));
    EXPECT_EQ(r.patches[0].outputs, (std::vector<int>{y, shape}));
    EXPECT_EQ(transfers_of(r, shape), 1);
    const Transfer* down = find_transfer(r, shape, 0);
    ASSERT_NE(down, nullptr);
    EXPECT_EQ(down->from_space, 1);
    EXPECT_EQ(down->producer_patch, 0);
    EXPECT_EQ(transfers_of(r, y), 0);  // same space: the Reshape's patch reads it in place
  }
}

}  // namespace
