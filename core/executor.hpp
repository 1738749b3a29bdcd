// Builds an execution plan from a validated graph and runs it.
//
// Build: creation-time shape inference and constant folding (on the CPU device), then the
// partitioner (partitioner/) assigns nodes to devices and groups them into patches, each
// compiled by its device through the backend ABI; transfers are steps of their own.
//
// Run: the calling thread walks the steps in order, infers every value's shape for this run
// (waiting only for values whose contents shape inference needs) and hands each step to the
// lane of its device: one thread per device, so work on different devices overlaps. A lane
// waits on events of its own device through the backend and on other devices' events on the
// host. A plan whose devices are all synchronous host-memory devices (the CPU alone) runs
// inline on the calling thread, releasing each buffer after its last use.
//
// Control flow (If, Loop, Scan) is core semantics: such a node is a host step whose subgraphs
// get plans of their own (core/control_flow.cpp).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/device.hpp"
#include "core/graph.hpp"
#include "core/host_ops.hpp"
#include "core/log.hpp"
#include "core/op_schema.hpp"

namespace quilt {

struct PlanOptions {
  int optimization_level = 1;
  const Logger* logger = nullptr;
  std::string cache_dir;  // SessionOptions::cache_dir
  bool cpu_fallback = true;
  bool cost_rule = true;
  std::map<std::string, int> pinned;          // node name -> index into the device list
  std::vector<bool> requested;                // per device: in the user's list
  int cpu_index = -1;                         // the CPU in the device list (-1: the last)
  std::vector<PlanReport::Rewrite> rewrites;  // what the passes did before planning, reported
};

struct RunState;
class LanePool;  // executor.cpp: lane threads kept between runs
std::shared_ptr<LanePool> make_lane_pool();

class ExecutionPlan {
 public:
  // The plan of a model's graph. model must outlive the plan; devices are in priority order,
  // the CPU last. The plan takes the graph's initializers (model.graph.initializers is left
  // empty): it owns the constants, and frees those no remaining node reads.
  ExecutionPlan(Model& model, DeviceList devices, const PlanOptions& options);
  // The plan of a subgraph (where = e.g. `[If node "x" subgraph 'then_branch']`, for messages).
  // outer_type gives the static type of each outer-scope value the subgraph reads.
  ExecutionPlan(const Graph& graph, std::string where, DeviceList devices,
                const PlanOptions& options,
                const std::function<TypeShape(const std::string&)>& outer_type);
  ~ExecutionPlan();

  const std::vector<ValueInfo>& inputs() const { return inputs_; }
  const std::vector<ValueInfo>& outputs() const { return outputs_; }
  // Initializers a run may override (graph inputs with a default, IR >= 4), as declared.
  const std::vector<ValueInfo>& overridable() const { return overridable_infos_; }
  // Tensors only: an output of another kind is an error saying to use run_values.
  TensorMap run(const TensorMap& inputs, const std::vector<std::string>& output_names,
                RunProfile* profile = nullptr) const;
  ValueMap run_values(const ValueMap& inputs, const std::vector<std::string>& output_names,
                      RunProfile* profile = nullptr) const;
  // Runs a subgraph: formal inputs in the order of the graph's inputs, outer-scope values by
  // name. Returns the graph's outputs in order.
  std::vector<Value> run_subgraph(const std::vector<Value>& formal,
                                  const std::map<std::string, Value>& outer) const;

  const PlanReport& report() const { return report_; }
  size_t num_steps() const { return steps_.size(); }
  size_t num_folded() const { return folded_; }

 private:
  // DeviceCopy: a value from one device to another of the same backend, directly (ABI 1.2's
  // copy_device_to_device), issued on the destination.
  enum class StepKind { Patch, Host, Upload, Download, DeviceCopy };
  // If, Loop, Scan, SequenceMap: subgraphs (core/control_flow.cpp); Op: a node on values the
  // backend ABI does not carry, run by its host kernel (core/host_ops.hpp).
  enum class HostKind { If, Loop, Scan, SequenceMap, Op };
  struct TypesMemo;  // executor.cpp
  static std::shared_ptr<TypesMemo> new_types_memo();
  struct PatchNode {
    const Node* node = nullptr;
    const OpSchema* schema = nullptr;
    std::vector<int> inputs;   // value ids of the explicit inputs (-1 = absent)
    std::vector<int> outputs;  // value ids (-1 = not wanted)
  };
  struct Step {
    StepKind kind = StepKind::Patch;
    int device = -1;         // Patch: its device; Upload, DeviceCopy: destination; Download: source
    int source_device = -1;  // DeviceCopy: where the value is
    std::string label;
    // Patch
    std::vector<PatchNode> nodes;
    std::shared_ptr<Executable> exe;
    std::vector<int> abi_values;  // value id of each value of the compiled graph
    std::vector<int> in_slots, out_slots;
    std::vector<int> value_inputs;         // value ids whose host copies inference reads
    std::vector<std::string> node_labels;  // display of each node, for profiles
    // Values the nodes read that the patch neither makes nor holds as constants.
    std::vector<int> boundary;
    // Every value the patch makes had a static type at creation, as did every boundary value:
    // a run whose boundary values have those types again skips the patch's shape inference
    // (the creation-time inference saw the same types) and passes static_infos to the backend.
    bool static_shapes = false;
    std::vector<std::vector<int64_t>> static_dims;  // storage of static_infos' dims
    std::vector<quilt_tensor_info_t> static_infos;  // per abi_values entry
    // Otherwise, when no value's contents decide a shape (value_inputs empty): the types the
    // last run inferred, reused by runs whose boundary values have that run's types again.
    std::shared_ptr<TypesMemo> memo;
    // Host (control flow): nodes[0] is the node; in_slots explicit then implicit inputs
    HostKind host_kind = HostKind::If;
    std::map<std::string, std::unique_ptr<ExecutionPlan>> subplans;  // by attribute name
    ValueKernel host_kernel;  // HostKind::Op: make_host_kernel's
  };
  struct Slot {
    int value = -1;
    int space = 0;
  };

  // take_initializers: the map g's initializers are in, emptied once the plan has them.
  void build(const Graph& g, const PlanOptions& options,
             const std::function<TypeShape(const std::string&)>* outer_type, int64_t ir_version,
             std::map<std::string, Tensor>* take_initializers);
  int value_id(const std::string& name);
  int slot_id(int value, int space);
  void check_input(const ValueInfo& info, const Tensor& t) const;
  void check_input(const ValueInfo& info, const Value& value) const;
  // Runs the steps needed for `wanted` (host slots); st holds inputs and constants.
  void execute(RunState& st, const std::vector<int>& wanted, RunProfile* profile) const;
  // Runs a step on its device; infos: its values' types for this run, as infer_patch gave them
  // (null: built here from the run's types).
  void issue(const Step& step, RunState& st, const quilt_tensor_info_t* infos = nullptr) const;
  void run_host_step(const Step& step, RunState& st) const;
  std::vector<Value> run_control_flow(const Step& step, const std::vector<Value>& in) const;
  // Infers the types of the values the patch makes for this run, and returns the step's infos
  // for them: the creation-time ones (Step::static_shapes), the last run's (Step::memo) when
  // they hold, else this run's, kept for the next; null when the step keeps none (value_inputs).
  const quilt_tensor_info_t* infer_patch(const Step& step, RunState& st) const;
  // Returns t, or a copy when it shares storage with a constant of this plan or with `inputs`
  // (borrowed); a sequence, map or optional is copied whole when any tensor in it is borrowed.
  bool borrowed(const Tensor& t, const std::vector<const Tensor*>& inputs) const;
  Tensor detach(const Tensor& t, const std::vector<const Tensor*>& inputs) const;
  Value detach(const Value& v, const std::vector<const Tensor*>& inputs) const;
  int space_of(int device) const;
  // Sets step.boundary, static_shapes and static_infos from the creation-time types.
  void find_static_shapes(Step& step) const;

  std::string where_;  // the model's path, or the subgraph's location
  DeviceList devices_;
  int cpu_index_ = 0;
  const Logger* logger_;
  bool inline_ = true;  // every device used is synchronous with host memory
  // Lane threads of finished runs, handed to the next (a run owns its lanes while it lasts).
  std::shared_ptr<LanePool> lane_pool_ = make_lane_pool();
  std::map<std::string, int> ids_;
  std::vector<std::string> names_;
  std::vector<TypeShape> static_types_;  // per value, from creation-time inference
  std::vector<Tensor> constants_;        // per value; defined for initializers and folded values
  std::vector<Tensor> defaults_;         // overridable initializers (IR >= 4): default values
  std::vector<Slot> slots_;
  std::map<std::pair<int, int>, int> slot_ids_;
  std::vector<Step> steps_;
  std::vector<ValueInfo> inputs_, outputs_;
  std::vector<std::string> overridable_;      // initializers that are also graph inputs
  std::vector<ValueInfo> overridable_infos_;  // those a run may override (IR >= 4)
  std::vector<std::string> formal_;           // subgraph: its inputs, in order
  std::vector<std::string> outer_;            // subgraph: the outer-scope values it reads
  size_t folded_ = 0;
  PlanReport report_;
};

}  // namespace quilt
