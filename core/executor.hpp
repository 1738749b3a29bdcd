// Builds an execution plan from a validated model (inference, constant folding, backend
// assignment, compilation) and runs it. Sequential on the host for now; the partitioner and
// asynchronous queues replace the step list without changing Session.
#pragma once

#include <memory>
#include <set>
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

class ExecutionPlan {
 public:
  // model must outlive the plan; backends are in priority order, the CPU last.
  ExecutionPlan(const Model& model, std::vector<std::unique_ptr<Backend>> backends,
                const PlanOptions& options);

  const std::vector<ValueInfo>& inputs() const { return inputs_; }
  const std::vector<ValueInfo>& outputs() const { return outputs_; }
  TensorMap run(const TensorMap& inputs, const std::vector<std::string>& output_names) const;

  size_t num_steps() const { return steps_.size(); }
  size_t num_folded() const { return folded_; }

 private:
  struct Step {
    const Node* node;
    const OpSchema* schema;
    size_t backend;
    std::unique_ptr<CompiledNode> compiled;
    std::vector<int> inputs;   // value ids, -1 = absent
    std::vector<int> outputs;  // value ids, -1 = not wanted
  };

  int value_id(const std::string& name);
  void check_input(const ValueInfo& info, const Tensor& t) const;

  const Model& model_;
  std::vector<std::unique_ptr<Backend>> backends_;
  const Logger* logger_;
  std::map<std::string, int> ids_;
  std::vector<std::string> names_;
  std::vector<TypeShape> static_types_;  // per value, from creation-time inference
  std::vector<Tensor> constants_;        // per value; defined for initializers and folded values
  std::vector<Step> steps_;
  std::vector<ValueInfo> inputs_, outputs_;
  std::vector<std::string> overridable_;  // initializers that are also graph inputs
  size_t folded_ = 0;
};

}  // namespace quilt
