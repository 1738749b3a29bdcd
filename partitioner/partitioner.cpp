#include "partitioner/partitioner.hpp"

#include <algorithm>
#include <optional>
#include <queue>
#include <set>

#include "quilt/quilt.hpp"

namespace quilt::partition {
namespace {

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

class Assigner {
 public:
  Assigner(const std::vector<Node>& nodes, const std::vector<Device>& devices,
           const Options& options, const AskFn& ask)
      : nodes_(nodes),
        devices_(devices),
        options_(options),
        ask_(ask),
        cache_(nodes.size(), std::vector<std::optional<std::string>>(devices.size())) {}

  const std::string& why_not(int n, int d) {
    auto& c = cache_[n][d];
    if (!c) c = ask_(n, d);
    return *c;
  }
  int cpu() const {
    return options_.cpu_index >= 0 ? options_.cpu_index : static_cast<int>(devices_.size()) - 1;
  }
  bool cpu_allowed() const { return options_.cpu_fallback || devices_[cpu()].requested; }

  void assign(Result& r) {
    std::vector<std::string> unplaced, bad_pins;
    for (size_t n = 0; n < nodes_.size(); ++n) {
      const Node& node = nodes_[n];
      if (node.host) {
        r.device_of[n] = -1;
        r.reason[n] = node.host_reason;
        continue;
      }
      if (auto pin = options_.pinned.find(node.name);
          !node.name.empty() && pin != options_.pinned.end()) {
        const std::string& why = why_not(static_cast<int>(n), pin->second);
        if (!why.empty())
          bad_pins.push_back("[" + node.display + "] is pinned to " + devices_[pin->second].name +
                             ", which does not run it: " + why);
        r.device_of[n] = pin->second;
        r.reason[n] = "pinned to " + devices_[pin->second].name;
        pinned_[n] = 1;
        continue;
      }
      std::vector<std::string> refusals;
      for (int d = 0; d < static_cast<int>(devices_.size()); ++d) {
        if (!devices_[d].requested && !(d == cpu() && options_.cpu_fallback)) continue;
        const std::string& why = why_not(static_cast<int>(n), d);
        if (why.empty()) {
          r.device_of[n] = d;
          break;
        }
        refusals.push_back(devices_[d].name + ": " + why);
      }
      if (r.device_of[n] < 0) {
        unplaced.push_back("[" + node.display + "] " + join(refusals, "; "));
        continue;
      }
      r.reason[n] = join(refusals, "; ");
    }
    if (!bad_pins.empty())
      throw Error(ErrorCode::InvalidArgument,
                  "model '" + options_.where + "': " + join(bad_pins, "\n  - "));
    if (!unplaced.empty()) {
      std::vector<std::string> requested;
      for (const auto& d : devices_)
        if (d.requested) requested.push_back(d.name);
      std::string msg =
          "model '" + options_.where + "': " + std::to_string(unplaced.size()) +
          (unplaced.size() == 1 ? " node is" : " nodes are") +
          (options_.cpu_fallback ? " not supported by any backend:"
                                 : " not supported by the requested backends (" +
                                       join(requested, ", ") + ") and CPU fallback is off:");
      for (const auto& u : unplaced) msg += "\n  - " + u;
      throw Error(ErrorCode::NotImplemented, msg);
    }
  }

  // Device islands that would cost more in copies than they save go back to the CPU.
  void apply_cost_rule(Result& r, const std::vector<Value>& values,
                       const std::vector<int>& producer) {
    if (!options_.cost_rule || !cpu_allowed()) return;
    const int n_nodes = static_cast<int>(nodes_.size());
    // Union-find over nodes on the same non-host device joined by an edge.
    std::vector<int> parent(n_nodes);
    for (int i = 0; i < n_nodes; ++i) parent[i] = i;
    std::function<int(int)> find = [&](int x) {
      return parent[x] == x ? x : parent[x] = find(parent[x]);
    };
    // Pinned nodes belong to islands (their neighbours pay no copy to reach them) but are
    // never moved: an island with a pinned node stays. A device that shares the host's memory
    // (no copies) but publishes a launch cost has islands too: its kernels still cost that.
    auto on_device = [&](int n) {
      int d = r.device_of[n];
      return d >= 0 && (devices_[d].space != 0 || devices_[d].launch_ns > 0);
    };
    for (int n = 0; n < n_nodes; ++n) {
      if (!on_device(n)) continue;
      for (int v : nodes_[n].inputs) {
        int p = producer[v];
        if (p >= 0 && on_device(p) && r.device_of[p] == r.device_of[n]) parent[find(n)] = find(p);
      }
    }
    std::vector<std::vector<int>> consumers(values.size());
    for (int n = 0; n < n_nodes; ++n)
      for (int v : nodes_[n].inputs) consumers[v].push_back(n);
    std::map<int, std::vector<int>> components;
    for (int n = 0; n < n_nodes; ++n)
      if (on_device(n)) components[find(n)].push_back(n);
    for (const auto& [_, members] : components) {
      bool heavy = false, tiny = true, pinned = false;
      for (int n : members) {
        heavy = heavy || is_heavy_op(nodes_[n].op_type);
        pinned = pinned || pinned_[n];
        // Tiny: everything it produces, and everything it reads from outside, is small.
        for (int v : nodes_[n].outputs)
          if (values[v].bytes < 0 || values[v].bytes > kTinyBytes) tiny = false;
        for (int v : nodes_[n].inputs) {
          const int p = producer[v];
          const bool outside = p < 0 || find(p) != find(n) || !on_device(p);
          if (outside && !values[v].constant &&
              (values[v].bytes < 0 || values[v].bytes > kTinyBytes))
            tiny = false;
        }
      }
      if (pinned) continue;
      std::string rule;
      if (tiny)
        rule = "cost rule: its values are tiny (at most " + std::to_string(kTinyBytes) +
               " bytes), cheaper on the host than a copy";
      else if (!heavy && static_cast<int>(members.size()) <= kIslandMax)
        rule = "cost rule: a cheap island of " + std::to_string(members.size()) +
               (members.size() == 1 ? " node" : " nodes") + " on " +
               devices_[r.device_of[members[0]]].name + " would cost two copies; kept on the CPU";
      else
        rule = launch_rule(members, r, values, producer, consumers, find, on_device);
      if (rule.empty()) continue;
      bool cpu_runs_all = std::all_of(members.begin(), members.end(),
                                      [&](int n) { return why_not(n, cpu()).empty(); });
      if (!cpu_runs_all) continue;
      for (int n : members) {
        r.device_of[n] = cpu();
        r.reason[n] = rule;
      }
    }
  }

 private:
  // The measured-launch part of the cost rule: an island the CPU would finish before the device
  // has been asked for each of its kernels and copies goes back to the CPU (the small models on
  // PoCL, where every command costs ~17 us). "" when it stays, or when a cost is unknown.
  template <class Find, class OnDevice>
  std::string launch_rule(const std::vector<int>& members, const Result& r,
                          const std::vector<Value>& values, const std::vector<int>& producer,
                          const std::vector<std::vector<int>>& consumers, Find& find,
                          OnDevice& on_device) const {
    const Device& device = devices_[r.device_of[members[0]]];
    if (device.launch_ns <= 0) return "";
    double cpu_ns = 0;
    for (int n : members) {
      if (nodes_[n].cpu_ns < 0) return "";
      cpu_ns += nodes_[n].cpu_ns;
    }
    const int island = find(members[0]);
    auto inside = [&](int n) { return on_device(n) && find(n) == island; };
    std::set<int> copied;  // values copied in or out, once each
    for (int n : members) {
      for (int v : nodes_[n].inputs)
        if (!values[v].constant && (producer[v] < 0 || !inside(producer[v]))) copied.insert(v);
      for (int v : nodes_[n].outputs)
        if (values[v].graph_output || std::any_of(consumers[v].begin(), consumers[v].end(),
                                                  [&](int c) { return !inside(c); }))
          copied.insert(v);
    }
    const size_t commands = members.size() + copied.size();
    const double device_ns = device.launch_ns * static_cast<double>(commands);
    if (cpu_ns >= device_ns) return "";
    return "cost rule: about " + std::to_string(static_cast<int64_t>(cpu_ns / 1000)) +
           " us on the CPU against " + std::to_string(commands) + " kernels and copies of " +
           std::to_string(static_cast<int64_t>(device.launch_ns / 1000)) + " us each on " +
           device.name + "; kept on the CPU";
  }

  const std::vector<Node>& nodes_;
  const std::vector<Device>& devices_;
  const Options& options_;
  const AskFn& ask_;
  std::vector<std::vector<std::optional<std::string>>> cache_;
  std::vector<char> pinned_ = std::vector<char>(nodes_.size(), 0);
};

// Grows patches node by node, keeping the patch graph acyclic by construction.
class Grouper {
 public:
  int create(int device) {
    const int id = static_cast<int>(device_.size());
    device_.push_back(device);
    for (auto& a : anc_) a.push_back(0);
    anc_.emplace_back(device_.size(), 0);
    return id;
  }
  // True if a node whose inputs come from patches `preds` may join patch p. Joining must not
  // make p wait for anything it did not already wait for: that would create a cycle, or
  // serialise p's earlier nodes behind another branch (two independent branches on two devices
  // must stay two patches to overlap). And the node must not wait less than p: an independent
  // node joins only a patch whose dependencies it has anyway.
  bool can_join(int p, const std::set<int>& preds, const std::set<int>& forbidden) const {
    if (forbidden.count(p)) return false;
    std::vector<char> closure(device_.size(), 0);
    for (int q : preds) {
      if (q == p) continue;
      if (!anc_[p][q]) return false;
      closure[q] = 1;
      for (size_t k = 0; k < anc_[q].size(); ++k)
        if (anc_[q][k]) closure[k] = 1;
    }
    if (!preds.count(p))
      for (size_t k = 0; k < device_.size(); ++k)
        if (anc_[p][k] && !closure[k]) return false;
    return true;
  }
  void add_deps(int p, const std::set<int>& preds) {
    std::vector<char> extra(device_.size(), 0);
    for (int q : preds) {
      if (q == p) continue;
      extra[q] = 1;
      for (size_t k = 0; k < anc_[q].size(); ++k)
        if (anc_[q][k]) extra[k] = 1;
    }
    auto merge = [&](int s) {
      for (size_t k = 0; k < extra.size(); ++k)
        if (extra[k]) anc_[s][k] = 1;
    };
    merge(p);
    for (size_t s = 0; s < device_.size(); ++s)
      if (anc_[s][p]) merge(static_cast<int>(s));
  }
  int device(int p) const { return device_[p]; }
  size_t size() const { return device_.size(); }

 private:
  std::vector<int> device_;             // -1 = host step
  std::vector<std::vector<char>> anc_;  // anc_[p][q]: q is an ancestor of p
};

}  // namespace

bool is_heavy_op(const std::string& op) {
  static const std::set<std::string> kHeavy = {"Conv",          "ConvTranspose",
                                               "ConvInteger",   "QLinearConv",
                                               "MatMul",        "MatMulInteger",
                                               "QLinearMatMul", "Gemm",
                                               "Einsum",        "LSTM",
                                               "GRU",           "RNN",
                                               "Attention",     "MultiHeadAttention",
                                               "DeformConv",    "Col2Im"};
  return kHeavy.count(op) != 0;
}

Result partition(const std::vector<Node>& nodes, const std::vector<Value>& values,
                 const std::vector<Device>& devices, const Options& options, const AskFn& ask) {
  const int n_nodes = static_cast<int>(nodes.size());
  Result r;
  r.device_of.assign(n_nodes, -1);
  r.reason.assign(n_nodes, "");
  r.patch_of.assign(n_nodes, -1);
  std::vector<int> producer(values.size(), -1);
  for (int n = 0; n < n_nodes; ++n)
    for (int v : nodes[n].outputs) producer[v] = n;

  Assigner assigner(nodes, devices, options, ask);
  assigner.assign(r);
  assigner.apply_cost_rule(r, values, producer);

  // Group.
  Grouper g;
  std::vector<std::vector<int>> of_device(devices.size());
  for (int n = 0; n < n_nodes; ++n) {
    std::set<int> preds, forbidden;
    for (int v : nodes[n].inputs)
      if (producer[v] >= 0) {
        int q = r.patch_of[producer[v]];
        preds.insert(q);
      }
    for (int v : nodes[n].value_inputs)
      if (producer[v] >= 0) forbidden.insert(r.patch_of[producer[v]]);
    const int d = r.device_of[n];
    int chosen = -1;
    if (d >= 0) {
      std::vector<int> candidates;
      for (auto it = preds.rbegin(); it != preds.rend(); ++it)
        if (g.device(*it) == d) candidates.push_back(*it);
      // Then every other patch of the device, most recent first: an independent node may
      // join an older patch whose dependencies it has.
      for (auto it = of_device[d].rbegin(); it != of_device[d].rend(); ++it)
        if (std::find(candidates.begin(), candidates.end(), *it) == candidates.end())
          candidates.push_back(*it);
      for (int p : candidates)
        if (g.can_join(p, preds, forbidden)) {
          chosen = p;
          break;
        }
    }
    if (chosen < 0) {
      chosen = g.create(d);
      if (d >= 0) of_device[d].push_back(chosen);
    }
    g.add_deps(chosen, preds);
    r.patch_of[n] = chosen;
  }

  // Order patches topologically (ties: the one whose first node comes first).
  const int n_patches = static_cast<int>(g.size());
  std::vector<std::vector<int>> members(n_patches);
  for (int n = 0; n < n_nodes; ++n) members[r.patch_of[n]].push_back(n);
  std::vector<std::set<int>> deps(n_patches);
  for (int n = 0; n < n_nodes; ++n) {
    auto add = [&](int v) {
      if (producer[v] >= 0 && r.patch_of[producer[v]] != r.patch_of[n])
        deps[r.patch_of[n]].insert(r.patch_of[producer[v]]);
    };
    for (int v : nodes[n].inputs) add(v);
    for (int v : nodes[n].value_inputs) add(v);
  }
  std::vector<int> indegree(n_patches, 0);
  std::vector<std::vector<int>> users(n_patches);
  for (int p = 0; p < n_patches; ++p)
    for (int q : deps[p]) {
      ++indegree[p];
      users[q].push_back(p);
    }
  std::priority_queue<std::pair<int, int>, std::vector<std::pair<int, int>>, std::greater<>> ready;
  for (int p = 0; p < n_patches; ++p)
    if (!indegree[p]) ready.push({members[p].front(), p});
  std::vector<int> new_id(n_patches, -1);
  std::vector<int> order;
  while (!ready.empty()) {
    int p = ready.top().second;
    ready.pop();
    new_id[p] = static_cast<int>(order.size());
    order.push_back(p);
    for (int u : users[p])
      if (--indegree[u] == 0) ready.push({members[u].front(), u});
  }
  if (static_cast<int>(order.size()) != n_patches)
    throw Error(ErrorCode::Runtime,
                "model '" + options.where + "': internal error: the patch graph has a cycle");
  for (int n = 0; n < n_nodes; ++n) r.patch_of[n] = new_id[r.patch_of[n]];
  r.patches.resize(n_patches);
  for (int old = 0; old < n_patches; ++old) {
    Patch& p = r.patches[new_id[old]];
    p.device = g.device(old);
    p.nodes = members[old];
    for (int q : deps[old]) p.depends_on.push_back(new_id[q]);
    std::sort(p.depends_on.begin(), p.depends_on.end());
  }

  // Boundary values and transfers.
  auto space_of_patch = [&](int p) {
    return r.patches[p].device < 0 ? 0 : devices[r.patches[p].device].space;
  };
  auto home = [&](int v) { return producer[v] < 0 ? 0 : space_of_patch(r.patch_of[producer[v]]); };
  // (value, space) -> consumer patches; host-needed values get an entry with no consumer.
  std::map<std::pair<int, int>, std::set<int>> needed;
  std::vector<std::set<int>> inputs(n_patches), outputs(n_patches);
  for (int n = 0; n < n_nodes; ++n) {
    const int p = r.patch_of[n];
    for (int v : nodes[n].inputs) {
      if (values[v].constant) continue;
      const int prod = producer[v] >= 0 ? r.patch_of[producer[v]] : -1;
      if (prod == p) continue;
      inputs[p].insert(v);
      if (prod >= 0) outputs[prod].insert(v);
      if (home(v) != space_of_patch(p)) needed[{v, space_of_patch(p)}].insert(p);
    }
    for (int v : nodes[n].value_inputs) {
      if (producer[v] < 0) continue;
      outputs[r.patch_of[producer[v]]].insert(v);
      if (home(v) != 0) needed[{v, 0}];
    }
  }
  for (size_t v = 0; v < values.size(); ++v)
    if (values[v].graph_output && producer[v] >= 0) {
      outputs[r.patch_of[producer[v]]].insert(static_cast<int>(v));
      if (home(static_cast<int>(v)) != 0) needed[{static_cast<int>(v), 0}];
    }
  // Device-to-device goes through the host, unless both devices are of one peer group (a
  // backend that copies between its devices).
  std::map<int, int> group_of_space;
  for (const Device& d : devices)
    if (d.space != 0) group_of_space[d.space] = d.peer_group;
  auto direct = [&](int from, int to) {
    if (from == 0 || to == 0 || from == to) return false;
    const int g = group_of_space[from];
    return g >= 0 && g == group_of_space[to];
  };
  for (auto it = needed.begin(); it != needed.end(); ++it)
    if (it->first.second != 0 && home(it->first.first) != 0 &&
        !direct(home(it->first.first), it->first.second))
      needed[{it->first.first, 0}];
  for (int p = 0; p < n_patches; ++p) {
    r.patches[p].inputs.assign(inputs[p].begin(), inputs[p].end());
    r.patches[p].outputs.assign(outputs[p].begin(), outputs[p].end());
  }
  for (const auto& [key, consumers] : needed) {
    Transfer t;
    t.value = key.first;
    t.to_space = key.second;
    t.from_space = key.second == 0 || direct(home(key.first), key.second) ? home(key.first) : 0;
    t.producer_patch = producer[key.first] >= 0 ? r.patch_of[producer[key.first]] : -1;
    t.consumer_patches.assign(consumers.begin(), consumers.end());
    r.transfers.push_back(std::move(t));
  }
  // Downloads first (a device-to-device copy needs its host copy), then by producer.
  std::stable_sort(r.transfers.begin(), r.transfers.end(),
                   [](const Transfer& a, const Transfer& b) {
                     if ((a.to_space == 0) != (b.to_space == 0)) return a.to_space == 0;
                     return a.producer_patch < b.producer_patch;
                   });
  return r;
}

}  // namespace quilt::partition
