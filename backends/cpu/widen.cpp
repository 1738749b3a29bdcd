// float16 and bfloat16 nodes on kernels that have only a float32 path: the half inputs are
// widened to float32, the float32 kernel runs, and the outputs that are half in the model are
// rounded back (to nearest even) — what onnxruntime's InsertCastTransformer does with Cast
// nodes, done here inside the CPU backend so that the model's half values never leave it and the
// plan keeps the model's nodes (`quilt plan` lists the widened ones under "notes"). Constant half
// inputs (weights) are widened once, at creation, and the kernel packs them as it packs float32
// weights. Kernels with a native half path (attention, the normalisations that have one, the
// data-movement ops) say so in their support answer and are not wrapped.
#include <cpuid.h>
#include <immintrin.h>

#include <cstring>
#include <set>
#include <string>

#include "backends/cpu/half_convert.hpp"
#include "backends/cpu/half_interior.hpp"
#include "backends/cpu/kernel.hpp"
#include "core/half.hpp"

namespace quilt::cpu {
namespace {

bool is_half(DType d) {
  return d == DType::Float16 || d == DType::BFloat16;
}

bool has_f16c() {
  static const bool has = [] {
    __builtin_cpu_init();
    // F16C through CPUID (leaf 1, ECX): clang 15, the fuzz build's compiler, has no "f16c" for
    // __builtin_cpu_supports.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
    return f16c && __builtin_cpu_supports("avx2");
  }();
  return has;
}

__attribute__((target("avx2,f16c"))) void half_to_float_f16c(const uint16_t* src, float* dst,
                                                             int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = half_to_float(src[i]);
}

__attribute__((target("avx2,f16c"))) void float_to_half_f16c(const float* src, uint16_t* dst,
                                                             int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) dst[i] = float_to_half(src[i]);
}

Tensor widened(const Tensor& t) {
  Tensor out(DType::Float32, t.shape());
  static const ThreadPool serial(1);
  widen_half(t, out, serial);
  return out;
}

TypeShape as_float(TypeShape t) {
  if (is_half(t.dtype)) t.dtype = DType::Float32;
  return t;
}

// Half constants up to this many elements are widened for a support question; larger ones (the
// weights) are widened only by the kernel's creation. Support functions read constants only for
// scalars (Dropout's ratio, ...) and never require a float input to be constant.
constexpr int64_t kSupportConstantLimit = 64;

// sig with every half input and output float32, the half constants widened (owned here).
// for_support: the large half constants are left out (nullptr: not constant) instead.
struct WideSignature {
  std::vector<Tensor> owned;
  NodeSignature sig;

  WideSignature(const NodeSignature& half, bool for_support)
      : owned(half.inputs.size()), sig{half.node, {}, {}, half.constants} {
    for (size_t i = 0; i < half.inputs.size(); ++i) {
      sig.inputs.push_back(as_float(half.inputs[i]));
      const Tensor* c = half.constants[i];
      if (!c || !is_half(c->dtype())) continue;
      if (for_support && c->numel() > kSupportConstantLimit) {
        sig.constants[i] = nullptr;
        continue;
      }
      owned[i] = widened(*c);
      sig.constants[i] = &owned[i];
    }
    for (const TypeShape& o : half.outputs) sig.outputs.push_back(as_float(o));
  }
};

// "float16 computed in float32 (casts on inputs 0, 1 and output 0)".
std::string widening_note(const NodeSignature& sig) {
  DType half = DType::Float16;
  std::vector<std::string> ins, outs;
  for (size_t i = 0; i < sig.inputs.size(); ++i)
    if (is_half(sig.inputs[i].dtype)) {
      half = sig.inputs[i].dtype;
      ins.push_back(std::to_string(i));
    }
  for (size_t o = 0; o < sig.outputs.size(); ++o)
    if (is_half(sig.outputs[o].dtype)) outs.push_back(std::to_string(o));
  auto list = [](const char* one, const std::vector<std::string>& items) {
    std::string s = std::string(one) + (items.size() > 1 ? "s " : " ");
    for (size_t k = 0; k < items.size(); ++k) s += (k == 0 ? "" : ", ") + items[k];
    return s;
  };
  std::string casts = list("input", ins);
  if (!outs.empty()) casts += " and " + list("output", outs);
  return std::string(dtype_name(half)) + " computed in float32 (casts on " + casts + ")";
}

bool has_half(const NodeSignature& sig) {
  for (const auto& t : sig.inputs)
    if (is_half(t.dtype)) return true;
  return false;
}

class WidenedKernel : public Kernel {
 public:
  WidenedKernel(const NodeSignature& sig, const KernelFactory& create) : wide_(sig, false) {
    for (const auto& t : sig.inputs) half_in_.push_back(is_half(t.dtype));
    for (const auto& t : sig.outputs) out_dtype_.push_back(t.dtype);
    constant_.resize(sig.inputs.size());
    for (size_t i = 0; i < sig.inputs.size(); ++i) constant_[i] = sig.constants[i] != nullptr;
    inner_ = create(wide_.sig);
  }

  void run(KernelContext& ctx) const override {
    const size_t n = ctx.num_inputs();
    std::vector<Tensor> held(n);
    std::vector<const Tensor*> ins(n, nullptr);
    for (size_t i = 0; i < n; ++i) {
      if (!ctx.has_input(i)) continue;
      const Tensor& x = ctx.input(i);
      if (i < wide_.owned.size() && wide_.owned[i].defined() && constant_[i]) {
        ins[i] = &wide_.owned[i];  // a weight, widened at creation
      } else if (is_half(x.dtype())) {
        held[i] = Tensor::scratch(DType::Float32, x.shape(), false);
        widen_half(x, held[i], ctx.pool);
        ins[i] = &held[i];
      } else {
        ins[i] = &x;
      }
    }
    const size_t m = ctx.num_outputs();
    std::vector<TypeShape> types(m);
    for (size_t o = 0; o < m; ++o)
      types[o] = {is_half(out_dtype_[o]) ? DType::Float32 : out_dtype_[o], true,
                  ctx.output_shape(o)};
    std::vector<Tensor> outs(m);
    KernelContext inner(ctx.node, ins, types, outs, ctx.pool);
    inner.activation = ctx.activation;
    inner_->run(inner);
    for (size_t o = 0; o < m; ++o) {
      if (!ctx.wants_output(o) || !outs[o].defined()) continue;
      if (is_half(out_dtype_[o])) {
        narrow_half(outs[o], ctx.output_uninitialized(o), ctx.pool);
      } else {
        ctx.set_output(o, std::move(outs[o]));
      }
    }
  }

  // A half weight is read from its widened copy; the kernel may not read even that.
  bool reads_constant(size_t i) const override {
    if (i < half_in_.size() && half_in_[i] && constant_[i]) return false;
    return inner_->reads_constant(i);
  }

 private:
  WideSignature wide_;
  std::vector<char> half_in_, constant_;
  std::vector<DType> out_dtype_;
  std::unique_ptr<Kernel> inner_;
};

// Runs a conversion hold_half_in_float32 inserted: float32 -> half or half -> float32.
class HalfEdgeKernel : public Kernel {
 public:
  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    Tensor& y = ctx.output_uninitialized(0);
    if (x.dtype() == DType::Float32)
      narrow_half(x, y, ctx.pool);
    else
      widen_half(x, y, ctx.pool);
  }
};

constexpr const char* kEdgeName = " (float32 twin)";

bool is_op(const Node& n, const char* op) {
  return n.op_type == op && n.domain.empty();
}

}  // namespace

void widen_half(const Tensor& from, Tensor& to, const ThreadPool& pool) {
  const auto* src = static_cast<const uint16_t*>(from.raw_data());
  float* dst = to.data<float>();
  pool.parallel_for(from.numel(), 1 << 16, [&](int64_t lo, int64_t hi) {
    if (from.dtype() == DType::BFloat16) {
      for (int64_t i = lo; i < hi; ++i) {  // exact: the top half of a float32
        const uint32_t bits = uint32_t{src[i]} << 16;
        std::memcpy(dst + i, &bits, sizeof bits);
      }
    } else if (has_f16c()) {
      half_to_float_f16c(src + lo, dst + lo, hi - lo);
    } else {
      for (int64_t i = lo; i < hi; ++i) dst[i] = half_to_float(src[i]);
    }
  });
}

void narrow_half(const Tensor& from, Tensor& to, const ThreadPool& pool) {
  const float* src = from.data<float>();
  auto* dst = static_cast<uint16_t*>(to.raw_data());
  pool.parallel_for(from.numel(), 1 << 16, [&](int64_t lo, int64_t hi) {
    if (to.dtype() == DType::BFloat16) {
      for (int64_t i = lo; i < hi; ++i) dst[i] = round_to_bfloat16(src[i]);
    } else if (has_f16c()) {
      float_to_half_f16c(src + lo, dst + lo, hi - lo);
    } else {
      for (int64_t i = lo; i < hi; ++i) dst[i] = float_to_half(src[i]);
    }
  });
}

void KernelRegistry::widen_half_floats() {
  for (KernelEntry& e : entries_) {
    SupportFn support = e.support;
    KernelFactory create = e.create;
    // Supported as written, or on float32 values when some input is half.
    e.support = [support](const NodeSignature& sig) {
      std::string why = support(sig);
      if (why.empty() || !has_half(sig)) return why;
      return support(WideSignature(sig, true).sig).empty() ? std::string() : why;
    };
    // Widened exactly when the kernel refuses the half node as written.
    e.note = [support](const NodeSignature& sig) {
      return !has_half(sig) || support(sig).empty() ? std::string() : widening_note(sig);
    };
    e.create = [support, create](const NodeSignature& sig) -> std::unique_ptr<Kernel> {
      if (!has_half(sig) || support(sig).empty()) return create(sig);
      return std::make_unique<WidenedKernel>(sig, create);
    };
  }
}

}  // namespace quilt::cpu

namespace quilt::cpu {

// Ops with a float16/bfloat16 kernel of their own that also hold half values in float32.
// clang-format off
const std::set<std::string> kHeldOps = {
    "Abs", "Add", "AveragePool", "BatchNormalization", "Cast", "Ceil", "Clip", "Concat", "Div",
    "Elu", "Erf", "Exp", "Expand", "Flatten", "Floor", "Gather", "Gelu", "GlobalAveragePool",
    "GlobalMaxPool", "HardSigmoid", "HardSwish", "Identity", "InstanceNormalization",
    "LayerNormalization", "LeakyRelu", "Log", "MaxPool", "Max", "Min", "Mul", "Neg", "Pad", "Pow",
    "PRelu", "Reciprocal", "ReduceMean", "ReduceSum", "Relu", "Reshape", "Resize", "Sigmoid",
    "Slice", "Softmax", "Split", "Sqrt", "Squeeze", "Sub", "Tanh", "Tile", "Transpose",
    "Unsqueeze", "Where"};
// clang-format on

bool holds_half_in_float32(const NodeSignature& sig, const KernelEntry& entry) {
  bool half_in = false, half_out = false;
  for (const TypeShape& t : sig.inputs) half_in = half_in || is_half(t.dtype);
  for (const TypeShape& t : sig.outputs) half_out = half_out || is_half(t.dtype);
  if (!half_in && !half_out) return false;
  for (size_t i = 0; i < sig.node.inputs.size() && i < sig.inputs.size(); ++i)
    if (!sig.node.inputs[i].empty() && sig.inputs[i].dtype == DType::Undefined) return false;
  for (const auto& [name, a] : sig.node.attributes) {
    if (a.kind == Attribute::Kind::Graph || a.kind == Attribute::Kind::Graphs) return false;
    // The output's type named by an attribute (EyeLike, RandomNormalLike, DequantizeLinear's
    // output_dtype, ...): it would not follow the twins.
    if ((name == "dtype" || name == "output_dtype" || name == "to") && !is_op(sig.node, "Cast"))
      return false;
  }
  // A half output not made from a half input (ConstantOfShape's value, ...), Cast aside.
  if (half_out && !half_in && !is_op(sig.node, "Cast")) return false;
  // An integer or bool output (Equal, ArgMax, Cast to int64, MaxPool's indices) is decided on
  // the half values as the model rounds them: such a node reads them rounded.
  for (size_t o = 0; o < sig.outputs.size(); ++o)
    if (o < sig.node.outputs.size() && !sig.node.outputs[o].empty() &&
        !is_half(sig.outputs[o].dtype) && sig.outputs[o].dtype != DType::Float32)
      return false;
  // Kernels with a half path of their own take part when they are known to compute the same on
  // float32 values (element-wise, data movement, the normalisations); the others (Range, TopK,
  // ...) keep their half values, converted at their edges.
  const bool widened = entry.note && !entry.note(sig).empty();  // no half path of its own
  if (!widened && !(sig.node.domain.empty() && kHeldOps.contains(sig.node.op_type))) return false;
  WideSignature wide(sig, true);
  Node cast_node;
  if (is_op(sig.node, "Cast")) {  // Cast(to = half) becomes Cast(to = float32)
    cast_node = sig.node;
    cast_node.attributes["to"].i = static_cast<int64_t>(DType::Float32);
    NodeSignature s{cast_node, wide.sig.inputs, wide.sig.outputs, wide.sig.constants};
    return entry.support(s).empty();
  }
  return entry.support(wide.sig).empty();
}

std::string held_in_float32_note(const NodeSignature& sig) {
  for (const auto* list : {&sig.inputs, &sig.outputs})
    for (const TypeShape& t : *list)
      if (is_half(t.dtype))
        return std::string(dtype_name(t.dtype)) +
               " held and computed in float32 in the CPU patch (converted only at the patch's "
               "edges)";
  return "";
}

void hold_half_in_float32(std::vector<PatchNode>& patch, std::vector<TypeShape>& types,
                          std::vector<Tensor>& constants, std::vector<int32_t>& twin_of_value,
                          const std::vector<char>& kept, const KernelRegistry& registry) {
  const size_t n = types.size();
  std::vector<char> ok(patch.size(), 0);
  bool any = false;
  for (size_t k = 0; k < patch.size(); ++k) {
    const PatchNode& p = patch[k];
    const KernelEntry* e = registry.find(p.node.op_type, p.node.domain);
    if (!e) continue;
    NodeSignature sig{p.node, {}, {}, {}};
    for (int32_t v : p.inputs) {
      sig.inputs.push_back(v < 0 ? TypeShape{} : types[v]);
      sig.constants.push_back(v >= 0 && constants[v].defined() ? &constants[v] : nullptr);
    }
    for (int32_t v : p.outputs) sig.outputs.push_back(v < 0 ? TypeShape{} : types[v]);
    ok[k] = holds_half_in_float32(sig, *e);
    any = any || ok[k];
  }
  if (!any) return;
  auto half = [&](int32_t v) { return v >= 0 && is_half(types[v].dtype); };
  // Who needs each half value as half (the patch's outputs, nodes that keep half), who reads its
  // twin, and which values a node of the patch makes.
  std::vector<char> read_half(n, 0), read_wide(n, 0), produced(n, 0);
  for (size_t v = 0; v < n; ++v) read_half[v] = kept[v];
  for (size_t k = 0; k < patch.size(); ++k) {
    for (int32_t v : patch[k].inputs)
      if (half(v)) (ok[k] ? read_wide : read_half)[v] = 1;
    for (int32_t v : patch[k].outputs)
      if (v >= 0) produced[v] = 1;
  }
  std::vector<int32_t> twin(n, -1);
  auto twin_of = [&](int32_t v) {
    if (twin[v] < 0) {
      twin[v] = static_cast<int32_t>(types.size());
      TypeShape t = types[v];
      t.dtype = DType::Float32;
      types.push_back(t);
      constants.push_back(constants[v].defined() ? widened(constants[v]) : Tensor());
      twin_of_value.push_back(v);
    }
    return twin[v];
  };
  auto edge = [&](int32_t from, int32_t to, const std::string& name) {
    PatchNode c;
    c.node.name = name + kEdgeName;
    c.node.op_type = "Cast";
    c.node.opset = 19;
    c.node.inputs = {name};
    c.node.outputs = {name};
    Attribute a;
    a.name = "to";
    a.kind = Attribute::Kind::Int;
    a.i = static_cast<int64_t>(types[to].dtype);
    c.node.attributes["to"] = a;
    c.inputs = {from};
    c.outputs = {to};
    c.graph_index = -1;
    return c;
  };
  // The values' names, for the conversion nodes' errors.
  std::vector<std::string> names(n);
  for (const PatchNode& p : patch) {
    for (size_t i = 0; i < p.inputs.size() && i < p.node.inputs.size(); ++i)
      if (p.inputs[i] >= 0) names[p.inputs[i]] = p.node.inputs[i];
    for (size_t i = 0; i < p.outputs.size() && i < p.node.outputs.size(); ++i)
      if (p.outputs[i] >= 0) names[p.outputs[i]] = p.node.outputs[i];
  }
  std::vector<PatchNode> out;
  out.reserve(patch.size() + n / 4);
  // The patch's half inputs that held nodes read: widened once, first.
  for (size_t i = 0; i < n; ++i) {
    const auto v = static_cast<int32_t>(i);
    if (half(v) && read_wide[i] && !produced[i] && !constants[i].defined())
      out.push_back(edge(v, twin_of(v), names[i]));
  }
  for (size_t k = 0; k < patch.size(); ++k) {
    PatchNode p = std::move(patch[k]);
    std::vector<int32_t> outputs = p.outputs;
    if (ok[k]) {
      for (int32_t& v : p.inputs)
        if (half(v)) v = twin_of(v);
      for (int32_t& v : p.outputs)
        if (half(v)) v = twin_of(v);
      if (is_op(p.node, "Cast") && is_half(static_cast<DType>(p.node.attr_int("to", 0))))
        p.node.attributes["to"].i = static_cast<int64_t>(DType::Float32);
    }
    out.push_back(std::move(p));
    for (int32_t v : outputs) {
      if (!half(v)) continue;
      if (ok[k] && read_half[v])
        out.push_back(edge(twin[v], v, names[v]));
      else if (!ok[k] && read_wide[v])
        out.push_back(edge(v, twin_of(v), names[v]));
    }
  }
  patch = std::move(out);
}

bool is_half_edge(const PatchNode& node) {
  return node.graph_index < 0 && node.node.op_type == "Cast" && node.node.name.ends_with(kEdgeName);
}

std::unique_ptr<Kernel> make_half_edge() {
  return std::make_unique<HalfEdgeKernel>();
}

}  // namespace quilt::cpu
