// The backend interface the core executes through. The CPU backend implements it in-process;
// the C plugin ABI (include/quilt/backend.h, to come) is adapted to it, so the core has one code
// path for every backend.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/graph.hpp"
#include "core/op_schema.hpp"

namespace quilt {

class Logger;

// Everything a backend may look at when deciding whether it can run a node and compiling it.
struct NodeSignature {
  const Node& node;
  std::vector<TypeShape> inputs;  // as inferred at session creation (dims may be -1)
  std::vector<TypeShape> outputs;
  // Per input: its value if constant, else nullptr. Valid during compile(); a kernel that
  // needs a constant later keeps a copy of the Tensor (cheap: copies share storage).
  std::vector<const Tensor*> constants;
};

// One node compiled by a backend. run() must be safe to call from several threads at once.
// outputs[i] arrive undefined with the inferred shapes in output_shapes; a kernel either
// allocates them (see backends/cpu/kernel.hpp) or sets them to views of its inputs.
class CompiledNode {
 public:
  virtual ~CompiledNode() = default;
  virtual void run(std::span<const Tensor* const> inputs, std::span<const TypeShape> output_types,
                   std::span<Tensor> outputs) const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Empty when the backend can run the node; otherwise why not (shown in plans and errors).
  virtual std::string unsupported_reason(const NodeSignature& sig) const = 0;
  virtual std::unique_ptr<CompiledNode> compile(const NodeSignature& sig) const = 0;
};

struct CpuBackendConfig {
  int threads = 0;  // 0 = one per core
  const Logger* logger = nullptr;
};
std::unique_ptr<Backend> create_cpu_backend(const CpuBackendConfig& config);

// What `quilt devices` shows for a backend.
struct DeviceDescription {
  std::string name;
  std::vector<std::pair<std::string, std::string>> properties;
};
struct BackendDescription {
  std::string name;
  std::string version;
  std::vector<DeviceDescription> devices;
};
BackendDescription describe_cpu_backend();

}  // namespace quilt
