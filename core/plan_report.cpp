// PlanReport as text, JSON and Graphviz DOT (`quilt plan --format ...`).
//
// Depends only on the public PlanReport struct, so the printers can be tested on hand-built
// reports without a session. Indices in the report (Node::patch, Patch::nodes, Transfer's patch
// fields) are indices into the report's vectors; what is printed as a patch's number is its id.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/json.hpp"
#include "quilt/quilt.hpp"

namespace quilt {
namespace {

// "512 B", "4.0 KiB", "1.5 MiB"; "? bytes" when unknown (-1).
std::string format_bytes(int64_t bytes) {
  if (bytes < 0) return "? bytes";
  if (bytes < 1024) return std::to_string(bytes) + " B";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes) / 1024.0;
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < std::size(units)) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

// A name in double quotes, with " and \ escaped so a name containing quotes stays readable.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out + "\"";
}

// `MatMul "mm0"`, or just `MatMul` for an unnamed node.
std::string node_label(const PlanReport::Node& n) {
  return n.name.empty() ? n.op_type : n.op_type + " " + quoted(n.name);
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

// Long lists keep their head and tail: "a, b, c, ... (12 more), y, z".
std::string join_shortened(const std::vector<std::string>& items, size_t head, size_t tail) {
  if (items.size() <= head + tail + 1) return join(items, ", ");
  std::vector<std::string> kept(items.begin(), items.begin() + static_cast<long>(head));
  kept.push_back("... (" + std::to_string(items.size() - head - tail) + " more)");
  kept.insert(kept.end(), items.end() - static_cast<long>(tail), items.end());
  return join(kept, ", ");
}

// Backends in a stable order: the priority list first (matching "example" to "example:0"),
// then any other in order of first appearance in the patches.
std::vector<std::string> backends_in_order(const PlanReport& r) {
  std::vector<std::string> seen;
  auto add = [&](const std::string& b) {
    if (!b.empty() && std::find(seen.begin(), seen.end(), b) == seen.end()) seen.push_back(b);
  };
  auto base = [](const std::string& b) { return b.substr(0, b.find(':')); };
  for (const auto& listed : r.backends) {
    for (const auto& p : r.patches)
      if (p.backend == listed || base(p.backend) == base(listed)) add(p.backend);
  }
  for (const auto& p : r.patches) add(p.backend);
  for (const auto& n : r.nodes) add(n.backend);
  return seen;
}

struct Totals {
  std::vector<std::pair<std::string, int>> nodes_per_backend;
  int rewritten_away = 0;      // model nodes the rewrites removed
  int64_t transfer_bytes = 0;  // known sizes only
  int unknown_transfers = 0;
};

Totals totals(const PlanReport& r) {
  Totals t;
  for (const auto& b : backends_in_order(r)) {
    int count = 0;
    for (const auto& n : r.nodes)
      if (n.patch >= 0 && n.backend == b) ++count;
    if (count > 0) t.nodes_per_backend.emplace_back(b, count);
  }
  for (const auto& w : r.rewrites) t.rewritten_away += w.nodes_removed;
  for (const auto& tr : r.transfers) {
    if (tr.bytes < 0)
      ++t.unknown_transfers;
    else
      t.transfer_bytes += tr.bytes;
  }
  return t;
}

const PlanReport::Node* node_at(const PlanReport& r, int index) {
  if (index < 0 || static_cast<size_t>(index) >= r.nodes.size()) return nullptr;
  return &r.nodes[static_cast<size_t>(index)];
}

// "batchnorm into conv 35, hardswish 20", or "none".
std::string rewrites_line(const PlanReport& r) {
  std::vector<std::string> items;
  for (const auto& w : r.rewrites) items.push_back(w.pattern + " " + std::to_string(w.count));
  return items.empty() ? "none" : join(items, ", ");
}

std::string plural(size_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// ---- text ------------------------------------------------------------------------------------

std::string transfer_line(const PlanReport::Transfer& t) {
  return "transfer  " + t.value + "  " + t.from + " -> " + t.to + "  " + format_bytes(t.bytes);
}

std::string patch_line(const PlanReport& r, const PlanReport::Patch& p) {
  std::vector<std::string> names;
  for (int i : p.nodes)
    if (const auto* n = node_at(r, i)) names.push_back(node_label(*n));
  auto values = [](const std::vector<std::string>& v) {
    return v.empty() ? std::string("-") : join_shortened(v, 4, 1);
  };
  std::string line = "patch " + std::to_string(p.id) + "  " + p.backend + "  " +
                     plural(p.nodes.size(), "node") + "  [" + join_shortened(names, 4, 2) +
                     "]  in: " + values(p.inputs) + "  out: " + values(p.outputs);
  if (p.constant_bytes > 0) line += "  weights: " + format_bytes(p.constant_bytes);
  if (!p.cache.empty()) line += "  cache: " + p.cache;
  return line;
}

}  // namespace

std::string PlanReport::to_text() const {
  std::string out = "model: " + model + "  backends: " + join(backends, ", ") + "\n";

  // Each transfer is printed just before the first patch that consumes it, so the text reads in
  // the order the executor issues work; copies back to the host follow their producer.
  std::vector<std::vector<size_t>> before(patches.size()), after(patches.size());
  std::vector<size_t> at_end;
  for (size_t t = 0; t < transfers.size(); ++t) {
    const auto& tr = transfers[t];
    int first = -1;
    for (int c : tr.consumer_patches)
      if (c >= 0 && static_cast<size_t>(c) < patches.size() && (first < 0 || c < first)) first = c;
    if (first >= 0)
      before[static_cast<size_t>(first)].push_back(t);
    else if (tr.producer_patch >= 0 && static_cast<size_t>(tr.producer_patch) < patches.size())
      after[static_cast<size_t>(tr.producer_patch)].push_back(t);
    else
      at_end.push_back(t);
  }
  for (size_t p = 0; p < patches.size(); ++p) {
    for (size_t t : before[p]) out += transfer_line(transfers[t]) + "\n";
    out += patch_line(*this, patches[p]) + "\n";
    for (size_t t : after[p]) out += transfer_line(transfers[t]) + "\n";
  }
  for (size_t t : at_end) out += transfer_line(transfers[t]) + "\n";

  out += "rewrites: " + rewrites_line(*this) + "\n";

  std::vector<const Node*> fallbacks;
  for (const auto& n : nodes)
    if (!n.reason.empty()) fallbacks.push_back(&n);
  if (fallbacks.empty()) {
    out += "fallbacks: none\n";
  } else {
    out += "fallbacks:\n";
    for (const Node* n : fallbacks)
      out += "  " + node_label(*n) + " on " + (n->backend.empty() ? "(folded)" : n->backend) +
             ": " + n->reason + "\n";
  }

  // How nodes run when not as the model wrote them (float16 computed in float32, ...): only
  // when there is something to say.
  std::vector<const Node*> noted;
  for (const auto& n : nodes)
    if (!n.note.empty()) noted.push_back(&n);
  if (!noted.empty()) {
    out += "notes:\n";
    for (const Node* n : noted)
      out += "  " + node_label(*n) + " on " + n->backend + ": " + n->note + "\n";
  }

  const Totals t = totals(*this);
  std::vector<std::string> per_backend;
  for (const auto& [b, n] : t.nodes_per_backend) per_backend.push_back(b + " " + std::to_string(n));
  out += "totals:\n";
  out += "  nodes: " + (per_backend.empty() ? std::string("none") : join(per_backend, ", ")) +
         "; folded " + std::to_string(folded_nodes);
  if (t.rewritten_away > 0) out += "; rewritten away " + std::to_string(t.rewritten_away);
  out += "\n";
  out += "  patches: " + std::to_string(patches.size()) + "\n";
  out += "  transfers: " + std::to_string(transfers.size());
  if (t.unknown_transfers == 0)
    out += ", " + format_bytes(t.transfer_bytes);
  else if (static_cast<size_t>(t.unknown_transfers) == transfers.size())
    out += ", sizes known only at run time";
  else
    out += ", " + format_bytes(t.transfer_bytes) + " + " + std::to_string(t.unknown_transfers) +
           " of size known only at run time";
  out += "\n";
  return out;
}

// ---- JSON ------------------------------------------------------------------------------------

namespace {

std::string json_strs(const std::vector<std::string>& v) {
  std::vector<std::string> items;
  for (const auto& s : v) items.push_back(json_string(s));
  return "[" + join(items, ", ") + "]";
}

std::string json_ints(const std::vector<int>& v) {
  std::vector<std::string> items;
  for (int i : v) items.push_back(std::to_string(i));
  return "[" + join(items, ", ") + "]";
}

}  // namespace

// One object, two-space indented, one line per node, patch and transfer (diffs stay readable).
// Unknown sizes are null; patch fields hold indices into "patches", node lists indices into
// "nodes". "format" changes only when a field changes meaning or disappears.
std::string PlanReport::to_json() const {
  std::string out = "{\n";
  out += "  \"format\": \"quilt-plan/1\",\n";
  out += "  \"model\": " + json_string(model) + ",\n";
  out += "  \"backends\": " + json_strs(backends) + ",\n";

  out += "  \"nodes\": [";
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    out += std::string(i ? "," : "") + "\n    {\"index\": " + std::to_string(i) +
           ", \"name\": " + json_string(n.name) + ", \"op_type\": " + json_string(n.op_type) +
           ", \"patch\": " + (n.patch >= 0 ? std::to_string(n.patch) : "null") +
           ", \"backend\": " + json_string(n.backend) +
           ", \"folded\": " + (n.patch < 0 ? "true" : "false") +
           ", \"reason\": " + json_string(n.reason) + ", \"note\": " + json_string(n.note) + "}";
  }
  out += nodes.empty() ? "],\n" : "\n  ],\n";

  out += "  \"patches\": [";
  for (size_t i = 0; i < patches.size(); ++i) {
    const Patch& p = patches[i];
    out += std::string(i ? "," : "") + "\n    {\"id\": " + std::to_string(p.id) +
           ", \"backend\": " + json_string(p.backend) + ", \"device\": " + json_string(p.device) +
           ", \"nodes\": " + json_ints(p.nodes) + ", \"inputs\": " + json_strs(p.inputs) +
           ", \"outputs\": " + json_strs(p.outputs) +
           ", \"depends_on\": " + json_ints(p.depends_on) +
           ", \"constant_bytes\": " + std::to_string(p.constant_bytes) +
           ", \"cache\": " + json_string(p.cache) +
           ", \"cache_detail\": " + json_string(p.cache_detail) + "}";
  }
  out += patches.empty() ? "],\n" : "\n  ],\n";

  out += "  \"transfers\": [";
  for (size_t i = 0; i < transfers.size(); ++i) {
    const Transfer& t = transfers[i];
    out += std::string(i ? "," : "") + "\n    {\"value\": " + json_string(t.value) +
           ", \"from\": " + json_string(t.from) + ", \"to\": " + json_string(t.to) +
           ", \"bytes\": " + (t.bytes >= 0 ? std::to_string(t.bytes) : "null") +
           ", \"producer_patch\": " +
           (t.producer_patch >= 0 ? std::to_string(t.producer_patch) : "null") +
           ", \"consumer_patches\": " + json_ints(t.consumer_patches) + "}";
  }
  out += transfers.empty() ? "],\n" : "\n  ],\n";

  std::vector<std::string> rewritten;
  for (const auto& w : rewrites)
    rewritten.push_back("{\"pattern\": " + json_string(w.pattern) +
                        ", \"count\": " + std::to_string(w.count) +
                        ", \"nodes_removed\": " + std::to_string(w.nodes_removed) + "}");
  out += "  \"rewrites\": [" + join(rewritten, ", ") + "],\n";

  const Totals t = totals(*this);
  std::vector<std::string> per_backend;
  for (const auto& [b, n] : t.nodes_per_backend)
    per_backend.push_back(json_string(b) + ": " + std::to_string(n));
  int fallbacks = 0, noted = 0;
  for (const auto& n : nodes) {
    if (!n.reason.empty()) ++fallbacks;
    if (!n.note.empty()) ++noted;
  }
  out += "  \"totals\": {\"nodes\": {" + join(per_backend, ", ") +
         "}, \"folded_nodes\": " + std::to_string(folded_nodes) +
         ", \"rewritten_away\": " + std::to_string(t.rewritten_away) +
         ", \"patches\": " + std::to_string(patches.size()) +
         ", \"transfers\": " + std::to_string(transfers.size()) +
         ", \"transfer_bytes\": " + std::to_string(t.transfer_bytes) +
         ", \"transfers_of_unknown_size\": " + std::to_string(t.unknown_transfers) +
         ", \"fallbacks\": " + std::to_string(fallbacks) + ", \"noted\": " + std::to_string(noted) +
         "}\n";
  out += "}\n";
  return out;
}

// ---- DOT -------------------------------------------------------------------------------------

namespace {

// The inside of a DOT double-quoted string: quotes and backslashes escaped, newlines as \n.
std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += std::string("\\") + c;
    else if (c == '\n')
      out += "\\n";
    else if (c != '\r')
      out += c;
  }
  return out;
}

std::string dq(const std::string& s) {
  return "\"" + dot_escape(s) + "\"";
}

// Fill colours: the CPU a neutral blue, the host (control flow) grey, every other backend the
// next colour of a fixed palette in priority order, so a plan always looks the same.
std::map<std::string, std::string> backend_colours(const PlanReport& r) {
  static const char* palette[] = {"#fdae6b", "#a1d99b", "#bcbddc", "#fa9fb5",
                                  "#fee391", "#80cdc1", "#d8b365", "#c994c7"};
  std::map<std::string, std::string> colours;
  size_t next = 0;
  for (const auto& b : backends_in_order(r)) {
    const std::string base = b.substr(0, b.find(':'));
    if (base == "cpu")
      colours[b] = "#9ecae1";
    else if (base == "host")
      colours[b] = "#d9d9d9";
    else
      colours[b] = palette[next++ % std::size(palette)];
  }
  return colours;
}

}  // namespace

// Layout: one cluster per patch holding its nodes (in execution order, top to bottom); value
// edges between patches, from the producing patch's last node to the consuming patch's first
// node, clipped at the cluster borders; every transfer as its own red box on the path of the
// value it copies, reached by dashed red edges. Graph inputs and outputs are plain ellipses.
// The report has no node-level edges inside a patch, so nodes in a patch are joined by thin
// grey edges in execution order. Node ids: n<i> (report node i), t<i> (transfer i), in<i>,
// out<i> (values), legend<i>.
std::string PlanReport::to_dot() const {
  const auto colours = backend_colours(*this);
  auto colour = [&](const std::string& b) {
    auto it = colours.find(b);
    return it == colours.end() ? std::string("#ffffff") : it->second;
  };
  std::string out = "digraph plan {\n";
  out +=
      "  graph [compound=true, rankdir=TB, fontname=\"Helvetica\", fontsize=12, labelloc=t, "
      "label=\"" +
      dot_escape(model) + "\\nbackends: " + dot_escape(join(backends, ", ")) +
      (rewrites.empty() ? "" : "\\nrewrites: " + dot_escape(rewrites_line(*this))) + "\"];\n";
  out += "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n";
  out += "  edge [fontname=\"Helvetica\", fontsize=9];\n";

  // Where edges into and out of each patch attach: its first and last node, or a point when
  // the patch is empty.
  std::vector<std::string> head(patches.size()), tail(patches.size());
  for (size_t p = 0; p < patches.size(); ++p) {
    const Patch& patch = patches[p];
    const std::string cluster = "cluster_p" + std::to_string(p);
    out += "  subgraph " + cluster + " {\n";
    out += "    label=" +
           dq("patch " + std::to_string(patch.id) + ": " + patch.backend +
              (patch.device.empty() ? "" : "\n" + patch.device)) +
           ";\n";
    out +=
        "    style=\"rounded,filled\"; fillcolor=\"#fafafa\"; color=" + dq(colour(patch.backend)) +
        "; penwidth=2;\n";
    std::vector<std::string> ids;
    for (int i : patch.nodes) {
      const Node* n = node_at(*this, i);
      if (!n) continue;
      const std::string id = "n" + std::to_string(i);
      std::string label = n->op_type + (n->name.empty() ? "" : "\n" + n->name);
      std::string attrs = "label=" + dq(label) + ", fillcolor=" + dq(colour(patch.backend));
      if (!n->reason.empty())
        attrs += ", tooltip=" + dq(n->reason) + ", peripheries=2";
      else if (!n->note.empty())
        attrs += ", tooltip=" + dq(n->note);
      out += "    " + id + " [" + attrs + "];\n";
      ids.push_back(id);
    }
    if (ids.empty()) {
      const std::string id = "p" + std::to_string(p) + "_empty";
      out += "    " + id + " [shape=point, style=invis];\n";
      ids.push_back(id);
    }
    for (size_t k = 1; k < ids.size(); ++k)
      out += "    " + ids[k - 1] + " -> " + ids[k] + " [color=\"#999999\", arrowsize=0.5];\n";
    out += "  }\n";
    head[p] = ids.front();
    tail[p] = ids.back();
  }

  // Folded nodes ran at session creation; shown so every node of the model is somewhere.
  std::vector<size_t> folded;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].patch < 0) folded.push_back(i);
  if (!folded.empty()) {
    out +=
        "  subgraph cluster_folded {\n    label=\"folded into constants\"; style=dashed; "
        "color=\"#bbbbbb\";\n";
    for (size_t i : folded) {
      const Node& n = nodes[i];
      out += "    n" + std::to_string(i) +
             " [label=" + dq(n.op_type + (n.name.empty() ? "" : "\n" + n.name)) +
             ", fillcolor=\"#f0f0f0\", fontcolor=\"#777777\"];\n";
    }
    out += "  }\n";
  }

  auto valid_patch = [&](int p) { return p >= 0 && static_cast<size_t>(p) < patches.size(); };
  auto cluster = [](int p) { return "cluster_p" + std::to_string(p); };

  // The patch producing each value.
  std::map<std::string, int> producer;
  for (size_t p = 0; p < patches.size(); ++p)
    for (const auto& v : patches[p].outputs) producer.emplace(v, static_cast<int>(p));

  // Values with no producing patch (graph inputs, constants) and patch outputs no patch reads
  // (graph outputs) become ellipses.
  std::map<std::string, std::string> input_node, output_node;
  auto value_node = [&](std::map<std::string, std::string>& table, const std::string& prefix,
                        const std::string& value) {
    auto it = table.find(value);
    if (it != table.end()) return it->second;
    const std::string id = prefix + std::to_string(table.size());
    table[value] = id;
    out += "  " + id + " [shape=ellipse, style=solid, label=" + dq(value) + "];\n";
    return id;
  };
  std::set<std::string> consumed;
  for (const auto& p : patches) consumed.insert(p.inputs.begin(), p.inputs.end());

  // Transfers: producer -> copy box -> each consumer patch.
  std::set<std::pair<std::string, int>> via_transfer;  // (value, consumer patch) pairs
  for (size_t t = 0; t < transfers.size(); ++t) {
    const Transfer& tr = transfers[t];
    const std::string id = "t" + std::to_string(t);
    out += "  " + id + " [shape=box, style=\"filled,dashed\", color=red, fillcolor=\"#fee0d2\", " +
           "fontcolor=\"#a50f15\", label=" +
           dq("copy " + tr.value + " " + format_bytes(tr.bytes) + "\n" + tr.from + " -> " + tr.to) +
           "];\n";
    const std::string edge_label = dq(tr.value + " (" + format_bytes(tr.bytes) + ")");
    if (valid_patch(tr.producer_patch)) {
      out += "  " + tail[static_cast<size_t>(tr.producer_patch)] + " -> " + id +
             " [style=dashed, color=red, fontcolor=red, label=" + edge_label +
             ", ltail=" + cluster(tr.producer_patch) + "];\n";
    } else {
      out += "  " + value_node(input_node, "in", tr.value) + " -> " + id +
             " [style=dashed, color=red, fontcolor=red, label=" + edge_label + "];\n";
    }
    bool to_patch = false;
    for (int c : tr.consumer_patches) {
      if (!valid_patch(c)) continue;
      to_patch = true;
      via_transfer.emplace(tr.value, c);
      out += "  " + id + " -> " + head[static_cast<size_t>(c)] +
             " [style=dashed, color=red, lhead=" + cluster(c) + "];\n";
    }
    if (!to_patch)
      out += "  " + id + " -> " + value_node(output_node, "out", tr.value) +
             " [style=dashed, color=red];\n";
  }

  // Values passed between patches (or from graph inputs) without a copy.
  for (size_t p = 0; p < patches.size(); ++p) {
    std::map<std::string, std::vector<std::string>> from;  // source node -> values
    std::map<std::string, int> from_patch;
    for (const auto& v : patches[p].inputs) {
      if (via_transfer.count({v, static_cast<int>(p)})) continue;
      auto it = producer.find(v);
      std::string src;
      if (it != producer.end() && it->second != static_cast<int>(p)) {
        src = tail[static_cast<size_t>(it->second)];
        from_patch[src] = it->second;
      } else if (it == producer.end()) {
        src = value_node(input_node, "in", v);
      } else {
        continue;
      }
      from[src].push_back(v);
    }
    for (const auto& [src, values] : from) {
      std::string attrs =
          "label=" + dq(join_shortened(values, 3, 1)) + ", lhead=" + cluster(static_cast<int>(p));
      if (from_patch.count(src)) attrs += ", ltail=" + cluster(from_patch[src]);
      out += "  " + src + " -> " + head[p] + " [" + attrs + "];\n";
    }
  }

  // Patch outputs nobody reads and that are not copied elsewhere: the graph's outputs.
  std::set<std::string> copied;
  for (const auto& tr : transfers) copied.insert(tr.value);
  for (size_t p = 0; p < patches.size(); ++p)
    for (const auto& v : patches[p].outputs)
      if (!consumed.count(v) && !copied.count(v))
        out += "  " + tail[p] + " -> " + value_node(output_node, "out", v) +
               " [ltail=" + cluster(static_cast<int>(p)) + "];\n";

  // Legend: one swatch per backend, plus what a copy looks like.
  out += "  subgraph cluster_legend {\n    label=\"legend\"; style=rounded; color=\"#bbbbbb\";\n";
  size_t k = 0;
  std::string prev;
  for (const auto& b : backends_in_order(*this)) {
    const std::string id = "legend" + std::to_string(k++);
    out += "    " + id + " [label=" + dq(b) + ", fillcolor=" + dq(colour(b)) + "];\n";
    if (!prev.empty()) out += "    " + prev + " -> " + id + " [style=invis];\n";
    prev = id;
  }
  if (std::any_of(nodes.begin(), nodes.end(), [](const Node& n) { return !n.reason.empty(); })) {
    const std::string id = "legend" + std::to_string(k++);
    out += "    " + id +
           " [label=\"fell back\\n(reason as tooltip)\", fillcolor=white, peripheries=2];\n";
    if (!prev.empty()) out += "    " + prev + " -> " + id + " [style=invis];\n";
    prev = id;
  }
  const std::string id = "legend" + std::to_string(k);
  out += "    " + id +
         " [label=\"copy between\\nmemory spaces\", style=\"filled,dashed\", color=red, "
         "fillcolor=\"#fee0d2\", fontcolor=\"#a50f15\"];\n";
  if (!prev.empty()) out += "    " + prev + " -> " + id + " [style=invis];\n";
  out += "  }\n";
  out += "}\n";
  return out;
}

}  // namespace quilt
