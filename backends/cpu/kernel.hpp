// The CPU backend's kernel API. A kernel family lives in backends/cpu/kernels/<family>.cpp and
// registers its ops in one function:
//
//   void register_cpu_elementwise(KernelRegistry& r) {
//     r.add("Relu", float_only, [](KernelContext& ctx) { ... });
//   }
//
// The capability answer of the backend reads this same table.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backends/cpu/activation.hpp"
#include "backends/cpu/thread_pool.hpp"
#include "core/graph.hpp"
#include "core/op_schema.hpp"

namespace quilt::cpu {

// Everything a kernel may look at when deciding whether it can run a node and when it is
// created for one.
struct NodeSignature {
  const Node& node;
  std::vector<TypeShape> inputs;  // as inferred at session creation (dims may be -1)
  std::vector<TypeShape> outputs;
  // Per input: its value if constant, else nullptr. Valid while the kernel lives.
  std::vector<const Tensor*> constants;
  // The session's precision is bf16 (SessionOptions::precision): the GEMM and convolution
  // kernels take bfloat16 operands (gemm_bf16.hpp); set only where bf16::available().
  bool bf16 = false;
};

class KernelContext {
 public:
  KernelContext(const Node& node, std::span<const Tensor* const> inputs,
                std::span<const TypeShape> output_types, std::span<Tensor> outputs,
                const ThreadPool& pool)
      : node(node), pool(pool), inputs_(inputs), output_types_(output_types), outputs_(outputs) {}

  const Node& node;
  size_t num_inputs() const { return inputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }
  // Fails naming the node if the input is absent.
  const Tensor& input(size_t i) const;
  const Tensor* optional_input(size_t i) const { return has_input(i) ? inputs_[i] : nullptr; }

  size_t num_outputs() const { return outputs_.size(); }
  // True if output i is wanted (present in the node and not an empty name).
  bool wants_output(size_t i) const { return i < outputs_.size() && !node.outputs[i].empty(); }
  // The inferred shape of output i.
  const std::vector<int64_t>& output_shape(size_t i) const { return output_types_[i].dims; }
  // Allocates output i with its inferred dtype and shape (zero-filled) on first call.
  Tensor& output(size_t i);
  // The same, but not zero-filled: for kernels that write every element of the output.
  Tensor& output_uninitialized(size_t i);
  // Output i was given already allocated but not zeroed (a patch output, allocated by the
  // host): output(i) zero-fills it as it does the buffers it allocates.
  void given_uninitialized(size_t i) {
    if (uninitialized_.size() <= i) uninitialized_.resize(i + 1, 0);
    uninitialized_[i] = 1;
  }
  // Allocates output i (not zero-filled) with `dims`, in a layout private to the CPU patch
  // (a blocked tensor, backends/cpu/layout.hpp): only for values the patch does not export.
  Tensor& output_private(size_t i, std::vector<int64_t> dims);
  // Sets output i to t, in such a private layout (its shape is not the inferred one).
  void set_output_private(size_t i, Tensor t);
  // Sets output i to an existing tensor (e.g. a view of an input for Reshape); its dtype and
  // shape must match the inferred ones.
  void set_output(size_t i, Tensor t);

  const ThreadPool& pool;
  // Applied to output 0 by kernels that accept a fused activation (backends/cpu/fusion.hpp);
  // None for every other kernel.
  Activation activation;
  // A float32 row added to every row of output 0 before the activation, by kernels that accept
  // a fused bias; null for every other kernel.
  const Tensor* bias = nullptr;
  // A float32 tensor of output 0's shape added to output 0 before the activation (a residual
  // connection's Add), by kernels that accept a fused residual; null for every other kernel.
  const Tensor* residual = nullptr;
  // How the kernel ran, when it has several ways to (a static string, e.g. which convolution
  // path): set by run(), shown in profiles (quilt bench --profile).
  const char* detail = nullptr;

 private:
  std::span<const Tensor* const> inputs_;
  std::span<const TypeShape> output_types_;
  std::span<Tensor> outputs_;
  std::vector<char> uninitialized_;  // given outputs output() must zero (given_uninitialized)
};

// A kernel with state prepared at session creation (e.g. packed weights). run() is const and
// must be thread-safe.
class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void run(KernelContext& ctx) const = 0;
  // False when run() never reads constant input i's data (the kernel copied it at creation,
  // and no input shape seen at run time can send it back to the original).
  virtual bool reads_constant(size_t) const { return true; }
};

// What a kernel works out from its shapes alone (a conv's geometry, a pool's windows): worked out
// at creation when the shapes inferred then are static, and on a run only when its shapes differ
// from those and from the last run's (MNIST's two Convs and two MaxPools spent a tenth of their
// time reading attributes and allocating on every run; a model with a symbolic batch dim, whose
// shapes are known only at run time, rebuilt every conv's layout, live-tap weights included, on
// every run).
//
//   memo_.keep({&sig.inputs[0], &sig.outputs[0]}, [&](auto& s) { return make(s[0], s[1]); });
//   ShapeMemo<T>::Held held;
//   const T& t = memo_.get({x.shape(), y.shape()}, held, make_from_shapes);
//
// get() is thread-safe: concurrent runs share the last run's value, each holding it (held) for
// as long as it uses it, while another run with other shapes replaces it.
template <class T>
class ShapeMemo {
 public:
  using Shapes = std::vector<std::vector<int64_t>>;
  struct Made {
    Shapes shapes;
    T value;
  };
  using Held = std::shared_ptr<const Made>;

  // make(shapes) when every type is static; an Error it throws leaves nothing kept, for run()
  // to report.
  template <class Make>
  void keep(std::initializer_list<const TypeShape*> types, Make make) {
    Shapes shapes;
    for (const TypeShape* t : types) {
      if (!t->is_static()) return;
      shapes.push_back(t->dims);
    }
    try {
      value_ = make(shapes);
      shapes_ = std::move(shapes);
    } catch (const Error&) {
      value_.reset();
    }
  }
  // The value for `shapes`: the one kept at creation, or the last run's when it was made for
  // them, else held = a new one from make(), which later runs with the same shapes reuse.
  template <class Make>
  const T& get(std::initializer_list<std::reference_wrapper<const std::vector<int64_t>>> shapes,
               Held& held, Make make) const {
    auto same = [&](const Shapes& kept) {
      return std::equal(
          shapes.begin(), shapes.end(), kept.begin(), kept.end(),
          [](const std::vector<int64_t>& a, const std::vector<int64_t>& b) { return a == b; });
    };
    if (value_ && same(shapes_)) return *value_;
    {
      std::lock_guard lock(last_mutex_);
      held = last_;
    }
    if (held && same(held->shapes)) return held->value;
    held = std::make_shared<const Made>(Made{Shapes(shapes.begin(), shapes.end()), make()});
    std::lock_guard lock(last_mutex_);
    last_ = held;
    return held->value;
  }

 private:
  std::optional<T> value_;
  Shapes shapes_;
  // The last run's, for shapes other than the kept ones. A mutex, not std::atomic<shared_ptr>:
  // ThreadSanitizer reports libstdc++ 12's lock-bit implementation of the latter as a race.
  mutable std::mutex last_mutex_;
  mutable Held last_;
};

using KernelFn = std::function<void(KernelContext&)>;
// "" when supported, else the reason. Looks at sig.inputs[i].dtype, attributes, constants.
using SupportFn = std::function<std::string(const NodeSignature&)>;
using KernelFactory = std::function<std::unique_ptr<Kernel>(const NodeSignature&)>;

struct KernelEntry {
  std::string op_type;
  std::string domain;
  SupportFn support;
  KernelFactory create;
  // How the kernel runs a node it supports, when not as the model wrote it (e.g. "float16
  // computed in float32 (casts on inputs 0, 1 and output 0)"); "" otherwise. quilt plan shows it.
  std::function<std::string(const NodeSignature&)> note = nullptr;
  bool fuses_activation = false;  // the kernel applies KernelContext::activation to output 0
  int bias_slot = -1;  // >= 0: adds KernelContext::bias, passed as this input, to its rows first
  // >= 0: adds KernelContext::residual, passed as this input, to output 0 before the activation
  int residual_slot = -1;
};

class KernelRegistry {
 public:
  static const KernelRegistry& builtin();

  void add(const std::string& op_type, SupportFn support, KernelFactory create,
           const std::string& domain = "");
  // A stateless kernel: a function of its context.
  void add(const std::string& op_type, SupportFn support, KernelFn fn,
           const std::string& domain = "");
  // Marks op_type's kernel as applying KernelContext::activation (see backends/cpu/fusion.hpp).
  void accept_fused_activation(const std::string& op_type, const std::string& domain = "");
  // Marks op_type's kernel as adding KernelContext::bias (a row) to its output; the bias comes
  // as input `slot`, past every input the op itself can have (absent ones are filled in).
  void accept_fused_bias(const std::string& op_type, int slot, const std::string& domain = "");
  // Marks op_type's kernel as adding KernelContext::residual (a tensor of output 0's shape) to
  // output 0 before the activation; it comes as input `slot`, past every input of the op.
  void accept_fused_residual(const std::string& op_type, int slot, const std::string& domain = "");
  // A faster kernel for an op already in the table (same capability answer); throws if absent.
  void replace_kernel(const std::string& op_type, KernelFactory create,
                      const std::string& domain = "");
  // Every kernel without a float16/bfloat16 path also runs half nodes, on float32 values
  // widened from them and rounded back (backends/cpu/widen.cpp). Called once, last.
  void widen_half_floats();
  // Only the kernels that read packed elements (core/int4.hpp) take int4/uint4/float4e2m1/
  // int2/uint2 inputs or outputs; every other kernel refuses them (they index elements by
  // dtype_size). Called last.
  void refuse_packed_types();
  const KernelEntry* find(const std::string& op_type, const std::string& domain) const;
  std::vector<std::string> op_types() const;

 private:
  // op_type's entry; throws naming `caller` if there is none.
  KernelEntry& entry_for(const std::string& op_type, const std::string& domain, const char* caller);
  std::vector<KernelEntry> entries_;
};

// ---- support-function helpers ----
// Supported when input `input` (default 0) has one of these dtypes.
SupportFn dtypes_of_input(std::vector<DType> dtypes, size_t input = 0);
SupportFn float_only();
SupportFn any_dtype();

// Kernel families: one per file in backends/cpu/kernels/.
void register_cpu_elementwise(KernelRegistry& r);
void register_cpu_nn(KernelRegistry& r);
void register_cpu_normalization(KernelRegistry& r);
void register_cpu_reduce(KernelRegistry& r);
void register_cpu_tensor(KernelRegistry& r);
void register_cpu_resize(KernelRegistry& r);
void register_cpu_quantization(KernelRegistry& r);
void register_cpu_rnn(KernelRegistry& r);
void register_cpu_attention(KernelRegistry& r);
void register_cpu_loss(KernelRegistry& r);
void register_cpu_signal(KernelRegistry& r);
void register_cpu_detection(KernelRegistry& r);
void register_cpu_misc(KernelRegistry& r);

}  // namespace quilt::cpu
