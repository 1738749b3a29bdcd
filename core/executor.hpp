// Builds an execution plan from a validated graph (inference, constant folding, backend
// assignment, compilation) and runs it. Sequential on the host for now; the partitioner and
// asynchronous queues replace the step list without changing Session.
//
// Control flow (If, Loop, Scan) is core semantics, not a kernel: such a node's subgraphs get
// plans of their own, run by the executor (core/control_flow.cpp), and read outer-scope values
// through the node's implicit inputs.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "core/graph.hpp"
#include "core/log.hpp"
#include "core/op_schema.hpp"

namespace quilt {

struct PlanOptions {
  int optimization_level = 1;
  const Logger* logger = nullptr;
};

using BackendList = std::vector<std::shared_ptr<const Backend>>;

class ExecutionPlan {
 public:
  // The plan of a model's graph. model must outlive the plan; backends are in priority order,
  // the CPU last.
  ExecutionPlan(const Model& model, BackendList backends, const PlanOptions& options);
  // The plan of a subgraph (where = e.g. `[If node "x" subgraph 'then_branch']`, for messages).
  // outer_type gives the static type of each outer-scope value the subgraph reads.
  ExecutionPlan(const Graph& graph, std::string where, BackendList backends,
                const PlanOptions& options,
                const std::function<TypeShape(const std::string&)>& outer_type);

  const std::vector<ValueInfo>& inputs() const { return inputs_; }
  const std::vector<ValueInfo>& outputs() const { return outputs_; }
  TensorMap run(const TensorMap& inputs, const std::vector<std::string>& output_names) const;
  // Runs a subgraph: formal inputs in the order of the graph's inputs, outer-scope values by
  // name. Returns the graph's outputs in order.
  std::vector<Tensor> run_subgraph(const std::vector<Tensor>& formal,
                                   const std::map<std::string, Tensor>& outer) const;

  size_t num_steps() const { return steps_.size(); }
  size_t num_folded() const { return folded_; }

 private:
  enum class StepKind { Kernel, If, Loop, Scan };
  struct Step {
    const Node* node = nullptr;
    const OpSchema* schema = nullptr;
    StepKind kind = StepKind::Kernel;
    size_t backend = 0;
    std::unique_ptr<CompiledNode> compiled;
    std::map<std::string, std::unique_ptr<ExecutionPlan>> subplans;  // by attribute name
    std::vector<int> inputs;   // value ids of the explicit inputs (-1 = absent), then implicit
    std::vector<int> outputs;  // value ids, -1 = not wanted
  };

  void build(const Graph& g, const PlanOptions& options,
             const std::function<TypeShape(const std::string&)>* outer_type);
  int value_id(const std::string& name);
  void check_input(const ValueInfo& info, const Tensor& t) const;
  // Runs the steps needed for `wanted` on `values` (inputs and constants already set).
  void execute(std::vector<Tensor>& values, const std::vector<int>& wanted) const;
  void run_control_flow(const Step& step, std::vector<Tensor>& values) const;
  // Returns t, or a copy when it shares storage with a constant of this plan or with `inputs`.
  Tensor detach(const Tensor& t, const std::vector<const Tensor*>& inputs) const;

  std::string where_;  // the model's path, or the subgraph's location
  BackendList backends_;
  const Logger* logger_;
  std::map<std::string, int> ids_;
  std::vector<std::string> names_;
  std::vector<TypeShape> static_types_;  // per value, from creation-time inference
  std::vector<Tensor> constants_;        // per value; defined for initializers and folded values
  std::vector<Step> steps_;
  std::vector<ValueInfo> inputs_, outputs_;
  std::vector<std::string> overridable_;  // initializers that are also graph inputs
  std::vector<std::string> formal_;       // subgraph: its inputs, in order
  std::vector<std::string> outer_;        // subgraph: the outer-scope values it reads
  size_t folded_ = 0;
};

}  // namespace quilt
