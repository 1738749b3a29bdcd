// The partitioner: which device runs each node, how nodes group into patches, and where the
// copies go. It sees the graph only as numbered nodes and values, and asks devices through a
// callback, so it is independent of the ABI and of the executor.
//
//   1. assign   pinned nodes to their pin; others to the first device in priority order that
//               claims them (the CPU last, when fallback is allowed). Strict mode fails listing
//               every node nobody claims, with each device's reason.
//   2. cost     device islands without a heavy op (at most kIslandMax nodes), or whose values are
//               all tiny, go back to the CPU: two copies cost more than they save. So does an
//               island the CPU would finish before the device's launches and copies could
//               (Node::cpu_ns against Device::launch_ns, when the device measured it).
//   3. group    nodes, in topological order, join a patch of their device when that adds no
//               dependency to the patch: so the patch graph stays acyclic whatever the claims
//               (checked on patch ancestor sets), and independent branches stay apart and
//               overlap. Never the patch of a value whose contents their inference needs.
//   4. order    patches in topological order of the patch graph.
//   5. copy     one transfer per (value, destination memory space), shared by its consumers.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace quilt::partition {

struct Node {
  std::string display;  // `Conv node "c1"`, for messages
  std::string name;     // for pinning
  std::string op_type;
  std::vector<int> inputs;  // value ids read (explicit and implicit), constants included
  // Non-constant value ids whose contents the host needs to infer this node's output shapes.
  std::vector<int> value_inputs;
  std::vector<int> outputs;  // value ids produced
  bool host = false;         // run by the host itself (control flow), alone in its patch
  std::string host_reason;   // why a host node is not offered to the backends ("" for control flow)
  // Estimated time on the CPU backend in ns (its multiply-adds and elements at typical rates);
  // < 0 when the shapes are not known at session creation.
  double cpu_ns = -1;
};

struct Value {
  bool constant = false;      // handed to backends at compile time, never transferred
  bool graph_output = false;  // must end on the host
  int64_t bytes = -1;         // -1 when unknown at session creation
};

struct Device {
  std::string name;       // "cpu", "example:0"
  int space = 0;          // memory space: 0 = host memory
  bool requested = true;  // in the user's list (the CPU may be only the fallback)
  // What the device measured a command and wait to cost (its "launch_ns" property); 0 when it
  // did not say. An island then costs at least launch_ns per kernel and per copy on it.
  double launch_ns = 0;
  // Devices with the same peer group (>= 0) copy values between them directly (one backend's
  // copy_device_to_device); -1: through the host.
  int peer_group = -1;
};

struct Options {
  bool cost_rule = true;
  bool cpu_fallback = true;
  std::map<std::string, int> pinned;  // node name -> device index
  std::string where;                  // model path, for messages
  int cpu_index = -1;                 // the CPU in the device list (-1: the last)
};

// "" when device claims node, else its reason. Called at most once per (node, device).
using AskFn = std::function<std::string(int node, int device)>;

struct Patch {
  int device = -1;              // index into devices; -1 for a host step
  std::vector<int> nodes;       // in topological order
  std::vector<int> inputs;      // non-constant values read from outside the patch
  std::vector<int> outputs;     // values produced here and needed elsewhere
  std::vector<int> depends_on;  // patches producing its inputs
};

struct Transfer {
  int value = -1;
  int from_space = 0, to_space = 0;   // both devices: a direct device-to-device copy
  int producer_patch = -1;            // -1: a graph input
  std::vector<int> consumer_patches;  // patches reading the copy (empty: the host reads it)
};

struct Result {
  std::vector<int> device_of;       // per node; -1 = host step
  std::vector<std::string> reason;  // per node: why not on the first requested device
  std::vector<int> patch_of;        // per node
  std::vector<Patch> patches;       // in issue order
  std::vector<Transfer> transfers;  // in issue order: each before its first consumer
};

// Islands of at most this many nodes without a heavy op go back to the CPU.
constexpr int kIslandMax = 2;
// Values of at most this many bytes are "tiny" (shape arithmetic, scalars).
constexpr int64_t kTinyBytes = 256;

// Nodes are in topological order. Throws quilt::Error.
Result partition(const std::vector<Node>& nodes, const std::vector<Value>& values,
                 const std::vector<Device>& devices, const Options& options, const AskFn& ask);

// Ops whose cost dwarfs a copy of their inputs (GEMM-shaped and recurrent work).
bool is_heavy_op(const std::string& op_type);

}  // namespace quilt::partition
