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

#include "backends/cpu/half_convert.hpp"
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
