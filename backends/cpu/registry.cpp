// The CPU kernel table and KernelContext.
#include "backends/cpu/kernel.hpp"

#include <algorithm>
#include <cstring>

namespace quilt::cpu {

const Tensor& KernelContext::input(size_t i) const {
  if (!has_input(i)) node.fail("input " + std::to_string(i) + " is required but not given");
  return *inputs_[i];
}

Tensor& KernelContext::output(size_t i) {
  if (i >= outputs_.size())
    node.fail("kernel asked for output " + std::to_string(i) + " but the node has " +
              std::to_string(outputs_.size()));
  if (!outputs_[i].defined()) {
    outputs_[i] = Tensor::scratch(output_types_[i].dtype, output_types_[i].dims, true);
  } else if (i < uninitialized_.size() && uninitialized_[i]) {
    uninitialized_[i] = 0;
    if (outputs_[i].nbytes()) std::memset(outputs_[i].raw_data(), 0, outputs_[i].nbytes());
  }
  return outputs_[i];
}

Tensor& KernelContext::output_uninitialized(size_t i) {
  if (i >= outputs_.size())
    node.fail("kernel asked for output " + std::to_string(i) + " but the node has " +
              std::to_string(outputs_.size()));
  if (!outputs_[i].defined())
    outputs_[i] = Tensor::scratch(output_types_[i].dtype, output_types_[i].dims, false);
  return outputs_[i];
}

Tensor& KernelContext::output_private(size_t i, std::vector<int64_t> dims) {
  if (i >= outputs_.size() || outputs_[i].defined())
    node.fail("output " + std::to_string(i) +
                  " is exported by the patch and cannot take a private layout",
              ErrorCode::Runtime);
  outputs_[i] = Tensor::scratch(output_types_[i].dtype, std::move(dims), false);
  return outputs_[i];
}

void KernelContext::set_output_private(size_t i, Tensor t) {
  if (i >= outputs_.size() || outputs_[i].defined())
    node.fail("output " + std::to_string(i) +
                  " is exported by the patch and cannot take a private layout",
              ErrorCode::Runtime);
  outputs_[i] = std::move(t);
}

void KernelContext::set_output(size_t i, Tensor t) {
  if (i >= outputs_.size()) return;
  if (t.dtype() != output_types_[i].dtype || t.shape() != output_types_[i].dims)
    node.fail(std::string("kernel produced output ") + std::to_string(i) + " as " +
              dtype_name(t.dtype()) + to_string(t.shape()) + " but inference says " +
              dtype_name(output_types_[i].dtype) + to_string(output_types_[i].dims));
  outputs_[i] = std::move(t);
}

namespace {
class FnKernel : public Kernel {
 public:
  explicit FnKernel(KernelFn fn) : fn_(std::move(fn)) {}
  void run(KernelContext& ctx) const override { fn_(ctx); }

 private:
  KernelFn fn_;
};
}  // namespace

void KernelRegistry::add(const std::string& op_type, SupportFn support, KernelFactory create,
                         const std::string& domain) {
  entries_.push_back({op_type, domain, std::move(support), std::move(create)});
}

void KernelRegistry::add(const std::string& op_type, SupportFn support, KernelFn fn,
                         const std::string& domain) {
  add(op_type, std::move(support),
      KernelFactory([fn](const NodeSignature&) { return std::make_unique<FnKernel>(fn); }), domain);
}

KernelEntry& KernelRegistry::entry_for(const std::string& op_type, const std::string& domain,
                                       const char* caller) {
  for (auto& e : entries_)
    if (e.op_type == op_type && e.domain == domain) return e;
  throw Error(ErrorCode::Runtime,
              std::string("[cpu backend] ") + caller + ": no kernel for " + op_type);
}

void KernelRegistry::accept_fused_activation(const std::string& op_type,
                                             const std::string& domain) {
  entry_for(op_type, domain, "accept_fused_activation").fuses_activation = true;
}

void KernelRegistry::accept_fused_bias(const std::string& op_type, int slot,
                                       const std::string& domain) {
  entry_for(op_type, domain, "accept_fused_bias").bias_slot = slot;
}

void KernelRegistry::accept_fused_residual(const std::string& op_type, int slot,
                                           const std::string& domain) {
  entry_for(op_type, domain, "accept_fused_residual").residual_slot = slot;
}

void KernelRegistry::replace_kernel(const std::string& op_type, KernelFactory create,
                                    const std::string& domain) {
  entry_for(op_type, domain, "replace_kernel").create = std::move(create);
}

const KernelEntry* KernelRegistry::find(const std::string& op_type,
                                        const std::string& domain) const {
  for (const auto& e : entries_)
    if (e.op_type == op_type && e.domain == domain) return &e;
  return nullptr;
}

std::vector<std::string> KernelRegistry::op_types() const {
  std::vector<std::string> out;
  for (const auto& e : entries_) out.push_back(e.op_type);
  std::sort(out.begin(), out.end());
  return out;
}

const KernelRegistry& KernelRegistry::builtin() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    register_cpu_elementwise(r);
    register_cpu_nn(r);
    register_cpu_normalization(r);
    register_cpu_reduce(r);
    register_cpu_tensor(r);
    register_cpu_resize(r);
    register_cpu_quantization(r);
    register_cpu_rnn(r);
    register_cpu_attention(r);
    register_cpu_loss(r);
    register_cpu_signal(r);
    register_cpu_detection(r);
    register_cpu_misc(r);
    r.widen_half_floats();
    r.refuse_packed_types();
    return r;
  }();
  return registry;
}

void KernelRegistry::refuse_packed_types() {
  static const char* const kTakesPacked[] = {"Cast", "CastLike", "QuantizeLinear",
                                             "DequantizeLinear"};
  for (KernelEntry& e : entries_) {
    if (std::find_if(std::begin(kTakesPacked), std::end(kTakesPacked),
                     [&](const char* op) { return e.op_type == op; }) != std::end(kTakesPacked))
      continue;
    e.support = [support = e.support](const NodeSignature& sig) -> std::string {
      for (const auto* types : {&sig.inputs, &sig.outputs})
        for (const TypeShape& t : *types)
          if (dtype_is_packed(t.dtype))
            return std::string("the CPU kernel of ") + sig.node.op_type + " does not take " +
                   dtype_name(t.dtype) +
                   " tensors (Cast, CastLike, QuantizeLinear and DequantizeLinear do)";
      return support(sig);
    };
  }
}

SupportFn dtypes_of_input(std::vector<DType> dtypes, size_t input) {
  return [dtypes, input](const NodeSignature& sig) -> std::string {
    if (input >= sig.inputs.size()) return "";
    DType d = sig.inputs[input].dtype;
    if (d == DType::Undefined || std::find(dtypes.begin(), dtypes.end(), d) != dtypes.end())
      return "";
    std::string names;
    for (DType t : dtypes) names += std::string(names.empty() ? "" : ", ") + dtype_name(t);
    return std::string("input ") + std::to_string(input) + " is " + dtype_name(d) +
           "; the CPU kernel supports " + names;
  };
}

SupportFn float_only() {
  return dtypes_of_input({DType::Float32});
}
SupportFn any_dtype() {
  return [](const NodeSignature&) { return std::string(); };
}

}  // namespace quilt::cpu
