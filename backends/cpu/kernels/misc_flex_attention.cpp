// The CPU FlexAttention kernel (ai.onnx.preview) without score_mod / prob_mod subgraphs: plain
// scaled dot-product attention with grouped kv heads, computed in double per query row.
#include <cmath>

#include "backends/cpu/kernel.hpp"
#include "core/half.hpp"

namespace quilt::cpu {

void register_cpu_misc_flex_attention(KernelRegistry& r);

namespace {

double read(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::Float16:
      return half_to_float(static_cast<const uint16_t*>(t.raw_data())[i]);
    case DType::Float64:
      return t.data<double>()[i];
    default:
      return t.data<float>()[i];
  }
}
void write(Tensor& t, int64_t i, double v) {
  switch (t.dtype()) {
    case DType::Float16:
      static_cast<uint16_t*>(t.raw_data())[i] = float_to_half(static_cast<float>(v));
      break;
    case DType::Float64:
      t.data<double>()[i] = v;
      break;
    default:
      t.data<float>()[i] = static_cast<float>(v);
  }
}

void flex_attention(KernelContext& ctx) {
  const Tensor& q = ctx.input(0);
  const Tensor& k = ctx.input(1);
  const Tensor& v = ctx.input(2);
  Tensor& y = ctx.output(0);
  const int64_t batch = q.dim(0), hq = q.dim(1), len = q.dim(2), e = q.dim(3);
  const int64_t hkv = k.dim(1), s = k.dim(2), ev = v.dim(3);
  const int64_t group = hq / hkv;
  const double scale = ctx.node.has_attr("scale") ? ctx.node.attr_float("scale", 0.0f)
                                                  : 1.0 / std::sqrt(static_cast<double>(e));
  ctx.pool.parallel_for(batch * hq * len, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, s * e)),
                        [&](int64_t begin, int64_t end) {
                          std::vector<double> p(static_cast<size_t>(s));
                          for (int64_t row = begin; row < end; ++row) {
                            const int64_t bh = row / len, b = bh / hq, h = bh % hq;
                            const int64_t kv = b * hkv + h / group;
                            double mx = -INFINITY;
                            for (int64_t j = 0; j < s; ++j) {
                              double acc = 0;
                              for (int64_t d = 0; d < e; ++d)
                                acc += read(q, row * e + d) * read(k, (kv * s + j) * e + d);
                              p[static_cast<size_t>(j)] = acc * scale;
                              mx = std::max(mx, acc * scale);
                            }
                            double sum = 0;
                            for (auto& x : p) sum += (x = std::exp(x - mx));
                            for (int64_t m = 0; m < ev; ++m) {
                              double acc = 0;
                              for (int64_t j = 0; j < s; ++j)
                                acc += p[static_cast<size_t>(j)] * read(v, (kv * s + j) * ev + m);
                              write(y, row * ev + m, acc / sum);
                            }
                          }
                        });
}

}  // namespace

void register_cpu_misc_flex_attention(KernelRegistry& r) {
  r.add(
      "FlexAttention",
      [](const NodeSignature& sig) -> std::string {
        for (const char* a : {"score_mod", "prob_mod", "mask_mod"})
          if (sig.node.has_attr(a))
            return std::string("the ") + a + " subgraph is not supported on CPU yet";
        for (size_t i = 0; i < 3; ++i) {
          const DType d = sig.inputs[i].dtype;
          if (d != DType::Float32 && d != DType::Float64 && d != DType::Float16)
            return std::string("input ") + std::to_string(i) + " is " + dtype_name(d) +
                   "; the CPU kernel supports float16, float and double";
        }
        return "";
      },
      flex_attention, "ai.onnx.preview");
}

}  // namespace quilt::cpu
