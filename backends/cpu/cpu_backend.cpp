// The built-in CPU backend: OpenBLAS for GEMM-shaped work, a thread pool for the rest.
#include <fstream>
#include <thread>

#include "backends/cpu/blas.hpp"
#include "backends/cpu/kernel.hpp"
#include "core/log.hpp"

namespace quilt {
namespace cpu {
namespace {

class CpuCompiledNode : public CompiledNode {
 public:
  CpuCompiledNode(const Node& node, std::unique_ptr<Kernel> kernel, const ThreadPool& pool,
                  const KernelEntry* recheck)
      : node_(node), kernel_(std::move(kernel)), pool_(pool), recheck_(recheck) {}
  void run(std::span<const Tensor* const> inputs, std::span<const TypeShape> output_types,
           std::span<Tensor> outputs) const override {
    if (recheck_) {
      // Some input dtypes were unknown at session creation (e.g. inside a subgraph): ask the
      // kernel table again with the real ones, so an unsupported dtype is refused, not misread.
      NodeSignature sig{node_, {}, {output_types.begin(), output_types.end()}, {}};
      for (const Tensor* t : inputs) sig.inputs.push_back(t ? TypeShape::of(*t) : TypeShape{});
      sig.constants.assign(inputs.size(), nullptr);
      if (std::string reason = recheck_->support(sig); !reason.empty())
        node_.fail(reason, ErrorCode::NotImplemented);
    }
    KernelContext ctx(node_, inputs, output_types, outputs, pool_);
    kernel_->run(ctx);
  }

 private:
  const Node& node_;
  std::unique_ptr<Kernel> kernel_;
  const ThreadPool& pool_;
  const KernelEntry* recheck_;  // set when creation-time dtypes were incomplete
};

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(const CpuBackendConfig& config)
      : pool_(config.threads > 0
                  ? config.threads
                  : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) {
    blas_set_threads(pool_.threads());
    if (config.logger && config.logger->enabled(LogLevel::Debug)) {
      std::string over = blas_core_override();
      config.logger->debug("cpu backend: " + std::to_string(pool_.threads()) +
                           " threads; OpenBLAS core " + blas_core_name() +
                           (over.empty() ? " (OPENBLAS_CORETYPE from the environment or detected)"
                                         : " (OPENBLAS_CORETYPE=" + over + " set by Quilt)"));
    }
  }
  std::string name() const override { return "cpu"; }

  std::string unsupported_reason(const NodeSignature& sig) const override {
    const KernelEntry* e = KernelRegistry::builtin().find(sig.node.op_type, sig.node.domain);
    if (!e) return "no CPU kernel for " + sig.node.op_type;
    return e->support(sig);
  }

  std::unique_ptr<CompiledNode> compile(const NodeSignature& sig) const override {
    const KernelEntry* e = KernelRegistry::builtin().find(sig.node.op_type, sig.node.domain);
    if (!e) sig.node.fail("no CPU kernel for " + sig.node.op_type, ErrorCode::NotImplemented);
    bool complete = true;
    for (size_t i = 0; i < sig.inputs.size(); ++i)
      if (sig.node.has_input(i) && sig.inputs[i].dtype == DType::Undefined) complete = false;
    return std::make_unique<CpuCompiledNode>(sig.node, e->create(sig), pool_,
                                             complete ? nullptr : e);
  }

 private:
  ThreadPool pool_;
};

}  // namespace
}  // namespace cpu

BackendDescription describe_cpu_backend() {
  BackendDescription b{"cpu", "built-in", {}};
  DeviceDescription d;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  d.name = "cpu";
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) {
      d.name = line.substr(line.find(':') + 2);
      break;
    }
  d.properties.push_back({"cores", std::to_string(std::thread::hardware_concurrency())});
  std::string over = cpu::blas_core_override();
  d.properties.push_back({"blas", "OpenBLAS, core " + cpu::blas_core_name() +
                                      (over.empty() ? "" : " (OPENBLAS_CORETYPE set by Quilt)")});
  d.properties.push_back({"ops", std::to_string(cpu::KernelRegistry::builtin().op_types().size())});
  b.devices.push_back(d);
  return b;
}

std::unique_ptr<Backend> create_cpu_backend(const CpuBackendConfig& config) {
  return std::make_unique<cpu::CpuBackend>(config);
}

}  // namespace quilt
