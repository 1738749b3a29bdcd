// CPU kernels of the smaller ops the misc family picked up from the conformance suite: BitCast,
// TensorScatter, CausalConvWithState, the preview training optimisers and two ai.onnx.ml ops.
#include <cmath>
#include <cstring>

#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/broadcast.hpp"
#include "core/half.hpp"
#include "core/ops/misc_image.hpp"

namespace quilt::cpu {

void register_cpu_misc_extra(KernelRegistry& r);

namespace {

void bitcast(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  if (y.dtype() == DType::Bool) {
    // A C++ bool must be 0 or 1; any other byte reads as true, as numpy's view does.
    const auto* src = static_cast<const uint8_t*>(x.raw_data());
    for (int64_t i = 0; i < x.numel(); ++i) y.data<bool>()[i] = src[i] != 0;
    return;
  }
  if (x.nbytes()) std::memcpy(y.raw_data(), x.raw_data(), x.nbytes());
}

void tensor_scatter(KernelContext& ctx) {
  const Tensor& cache = ctx.input(0);
  const Tensor& update = ctx.input(1);
  const Tensor* write = ctx.optional_input(2);
  const std::string mode = ctx.node.attr_string("mode", "linear");
  int64_t axis = ctx.node.attr_int("axis", -2);
  if (axis < 0) axis += cache.rank();
  Tensor& y = ctx.output(0);
  if (cache.nbytes()) std::memcpy(y.raw_data(), cache.raw_data(), cache.nbytes());
  const int64_t batch = cache.dim(0), max_len = cache.dim(axis), len = update.dim(axis);
  int64_t prefix = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) prefix *= cache.dim(d);
  for (int64_t d = axis + 1; d < cache.rank(); ++d) inner *= cache.dim(d);
  if (write && write->numel() != batch)
    ctx.node.fail("write_indices has " + std::to_string(write->numel()) +
                      " elements, expected the batch size " + std::to_string(batch),
                  ErrorCode::Runtime);
  const size_t esize = dtype_size(cache.dtype());
  const size_t run = static_cast<size_t>(inner) * esize;
  const auto* src = static_cast<const char*>(update.raw_data());
  auto* dst = static_cast<char*>(y.raw_data());
  for (int64_t p = 0; p < prefix; ++p) {
    const int64_t b = p / (prefix / batch);
    int64_t start = 0;
    if (write)
      start =
          write->dtype() == DType::Int64 ? write->data<int64_t>()[b] : write->data<int32_t>()[b];
    for (int64_t s = 0; s < len; ++s) {
      int64_t pos = start + s;
      if (mode == "circular") {
        pos %= max_len;
        if (pos < 0) pos += max_len;
      } else if (pos < 0 || pos >= max_len) {
        ctx.node.fail("write index " + std::to_string(pos) + " of batch " + std::to_string(b) +
                          " is outside the cache length " + std::to_string(max_len),
                      ErrorCode::Runtime);
      }
      if (run)
        std::memcpy(dst + static_cast<size_t>((p * max_len + pos) * inner) * esize,
                    src + static_cast<size_t>((p * len + s) * inner) * esize, run);
    }
  }
}

float load(const float* p, int64_t i) {
  return p[i];
}
double load(const double* p, int64_t i) {
  return p[i];
}
float load(const uint16_t* p, int64_t i) {
  return half_to_float(p[i]);
}
void store(float* p, int64_t i, double v) {
  p[i] = static_cast<float>(v);
}
void store(double* p, int64_t i, double v) {
  p[i] = v;
}
void store(uint16_t* p, int64_t i, double v) {
  p[i] = float_to_half(static_cast<float>(v));
}

// Depthwise causal conv over [past_state, input] with an optional SiLU; T is the storage type
// (uint16_t for float16).
template <class T>
void causal_conv(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  const Tensor* bias = ctx.optional_input(2);
  const Tensor* past = ctx.optional_input(3);
  const int64_t batch = x.dim(0), channels = x.dim(1), len = x.dim(2), k = w.dim(2);
  if (k < 1) ctx.node.fail("weight has kernel size 0, expected >= 1", ErrorCode::Runtime);
  if (past && past->shape() != std::vector<int64_t>{batch, channels, k - 1})
    ctx.node.fail("past_state has shape " + to_string(past->shape()) + ", expected " +
                      to_string(std::vector<int64_t>{batch, channels, k - 1}),
                  ErrorCode::Runtime);
  if (bias && bias->numel() != channels)
    ctx.node.fail("bias has " + std::to_string(bias->numel()) + " elements, expected " +
                      std::to_string(channels),
                  ErrorCode::Runtime);
  const std::string act = ctx.node.attr_string("activation", "none");
  const bool silu = act == "silu" || act == "swish";
  const T* px = static_cast<const T*>(x.raw_data());
  const T* pw = static_cast<const T*>(w.raw_data());
  const T* pb = bias ? static_cast<const T*>(bias->raw_data()) : nullptr;
  const T* pp = past ? static_cast<const T*>(past->raw_data()) : nullptr;
  T* py = static_cast<T*>(ctx.output(0).raw_data());
  T* ps = ctx.wants_output(1) ? static_cast<T*>(ctx.output(1).raw_data()) : nullptr;
  ctx.pool.parallel_for(
      batch * channels, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, len * k)),
      [&](int64_t begin, int64_t end) {
        std::vector<double> padded(static_cast<size_t>(len + k - 1));
        for (int64_t bc = begin; bc < end; ++bc) {
          const int64_t c = bc % channels;
          for (int64_t j = 0; j < k - 1; ++j)
            padded[static_cast<size_t>(j)] = pp ? load(pp, bc * (k - 1) + j) : 0.0;
          for (int64_t t = 0; t < len; ++t)
            padded[static_cast<size_t>(k - 1 + t)] = load(px, bc * len + t);
          for (int64_t t = 0; t < len; ++t) {
            double acc = pb ? load(pb, c) : 0.0;
            for (int64_t j = 0; j < k; ++j)
              acc += static_cast<double>(load(pw, c * k + j)) * padded[static_cast<size_t>(t + j)];
            // The conv result is rounded to the element type before the activation, as the spec's
            // reference does.
            store(py, bc * len + t, acc);
            if (silu) {
              const double v = load(py, bc * len + t);
              store(py, bc * len + t, v / (1.0 + std::exp(-v)));
            }
          }
          if (ps)
            for (int64_t j = 0; j < k - 1; ++j)
              store(ps, bc * (k - 1) + j, padded[static_cast<size_t>(len + j)]);
        }
      });
}

// Elementwise optimiser update of group i. kind: 0 Adagrad, 1 Momentum, 2 Adam.
template <class T>
void optimize(KernelContext& ctx, int kind) {
  const Node& n = ctx.node;
  const size_t groups = kind == 2 ? 4 : 3;
  const size_t count = (ctx.num_inputs() - 2) / groups;
  const Tensor& rt = ctx.input(0);
  const Tensor& tt = ctx.input(1);
  const double r = rt.dtype() == DType::Float64 ? rt.data<double>()[0] : rt.data<float>()[0];
  const int64_t t = tt.data<int64_t>()[0];
  const double norm = n.attr_float("norm_coefficient", 0.0f);
  for (size_t i = 0; i < count; ++i) {
    const T* x = ctx.input(2 + i).data<T>();
    const T* g = ctx.input(2 + count + i).data<T>();
    const T* s1 = ctx.input(2 + 2 * count + i).data<T>();
    const T* s2 = kind == 2 ? ctx.input(2 + 3 * count + i).data<T>() : nullptr;
    T* x_new = ctx.output(i).template data<T>();
    T* s1_new = ctx.output(count + i).template data<T>();
    T* s2_new = kind == 2 ? ctx.output(2 * count + i).template data<T>() : nullptr;
    const int64_t numel = ctx.input(2 + i).numel();
    if (kind == 0) {
      const double lr = r / (1.0 + static_cast<double>(t) * n.attr_float("decay_factor", 0.0f));
      const double eps = n.attr_float("epsilon", 1e-6f);
      for (int64_t e = 0; e < numel; ++e) {
        const double gr = norm * x[e] + g[e];
        const double h = s1[e] + gr * gr;
        s1_new[e] = static_cast<T>(h);
        x_new[e] = static_cast<T>(x[e] - lr * gr / (std::sqrt(h) + eps));
      }
    } else if (kind == 1) {
      const double alpha = n.attr_float("alpha", 0.0f);
      const double beta = t > 0 ? n.attr_float("beta", 0.0f) : 1.0;
      const bool nesterov = n.attr_string("mode", "standard") == "nesterov";
      for (int64_t e = 0; e < numel; ++e) {
        const double gr = norm * x[e] + g[e];
        const double v = alpha * s1[e] + beta * gr;
        s1_new[e] = static_cast<T>(v);
        x_new[e] = static_cast<T>(x[e] - r * (nesterov ? gr + alpha * v : v));
      }
    } else {
      const double alpha = n.attr_float("alpha", 0.9f), beta = n.attr_float("beta", 0.999f);
      const double eps = n.attr_float("epsilon", 1e-6f);
      const double post = n.attr_float("norm_coefficient_post", 0.0f);
      const double lr = t > 0 ? r * std::sqrt(1.0 - std::pow(beta, static_cast<double>(t))) /
                                    (1.0 - std::pow(alpha, static_cast<double>(t)))
                              : r;
      for (int64_t e = 0; e < numel; ++e) {
        const double gr = norm * x[e] + g[e];
        const double v = alpha * s1[e] + (1.0 - alpha) * gr;
        const double h = beta * s2[e] + (1.0 - beta) * gr * gr;
        s1_new[e] = static_cast<T>(v);
        s2_new[e] = static_cast<T>(h);
        x_new[e] = static_cast<T>((1.0 - post) * (x[e] - lr * v / (std::sqrt(h) + eps)));
      }
    }
  }
}

std::string optimizer_support(const NodeSignature& sig) {
  if (sig.inputs.size() < 3) return "too few inputs";
  if (sig.inputs[1].dtype != DType::Int64 && sig.inputs[1].dtype != DType::Undefined)
    return "T must be int64";
  const DType r = sig.inputs[0].dtype;
  if (r != DType::Float32 && r != DType::Float64 && r != DType::Undefined)
    return "R must be float or double";
  const DType x = sig.inputs[2].dtype;
  for (size_t i = 2; i < sig.inputs.size(); ++i)
    if (sig.inputs[i].dtype != x) return "X, G and state inputs must share one dtype";
  if (x != DType::Float32 && x != DType::Float64 && x != DType::Undefined)
    return std::string("X is ") + dtype_name(x) + ", expected float or double";
  return "";
}

KernelFn optimizer_kernel(int kind) {
  return [kind](KernelContext& ctx) {
    if (ctx.input(2).dtype() == DType::Float64)
      optimize<double>(ctx, kind);
    else
      optimize<float>(ctx, kind);
  };
}

void binarizer(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const double threshold = ctx.node.attr_float("threshold", 0.0f);
  Tensor& y = ctx.output(0);
  visit_dtype(x.dtype(), NumericTypes{}, [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* out = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i)
      out[i] = static_cast<double>(in[i]) > threshold ? T(1) : T(0);
  });
}

void array_feature_extractor(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  Tensor& y = ctx.output(0);
  const int64_t n = x.dim(x.rank() - 1), rows = x.numel() / std::max<int64_t>(1, n);
  const int64_t k = idx.numel();
  const size_t esize = dtype_size(x.dtype());
  const auto* src = static_cast<const char*>(x.raw_data());
  auto* dst = static_cast<char*>(y.raw_data());
  for (int64_t j = 0; j < k; ++j) {
    const int64_t i = idx.dtype() == DType::Int64 ? idx.data<int64_t>()[j] : idx.data<int32_t>()[j];
    if (i < 0 || i >= n)
      ctx.node.fail(
          "index " + std::to_string(i) + " is out of range for the last dim " + std::to_string(n),
          ErrorCode::Runtime);
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(dst + static_cast<size_t>(r * k + j) * esize,
                  src + static_cast<size_t>(r * n + i) * esize, esize);
  }
}

void image_decoder(KernelContext& ctx) {
  const Tensor& bytes = ctx.input(0);
  DecodedImage image;
  bool unsupported = false;
  const std::string err =
      decode_image(bytes.data<uint8_t>(), static_cast<size_t>(bytes.numel()), image, &unsupported);
  if (!err.empty())
    ctx.node.fail(err, unsupported ? ErrorCode::NotImplemented : ErrorCode::InvalidArgument);
  const std::string format = ctx.node.attr_string("pixel_format", "RGB");
  uint8_t* y = ctx.output(0).data<uint8_t>();
  const int64_t pixels = image.height * image.width;
  const uint8_t* src = image.pixels.data();
  for (int64_t i = 0; i < pixels; ++i) {
    const uint8_t* p = src + i * image.channels;
    const uint8_t r = p[0], g = image.channels == 3 ? p[1] : p[0],
                  b = image.channels == 3 ? p[2] : p[0];
    if (format == "Grayscale") {
      // ITU-R 601 luma in 16-bit fixed point, rounded (as Pillow's "L" conversion).
      y[i] = image.channels == 1
                 ? r
                 : static_cast<uint8_t>((r * 19595u + g * 38470u + b * 7471u + 0x8000u) >> 16);
    } else {
      const bool bgr = format == "BGR";
      y[i * 3 + 0] = bgr ? b : r;
      y[i * 3 + 1] = g;
      y[i * 3 + 2] = bgr ? r : b;
    }
  }
}

}  // namespace

void register_cpu_misc_extra(KernelRegistry& r) {
  r.add("BitCast", any_dtype(), bitcast);
  r.add("ImageDecoder", dtypes_of_input({DType::UInt8}), image_decoder);
  r.add(
      "TensorScatter",
      [](const NodeSignature& sig) -> std::string {
        if (sig.inputs.size() > 2 && sig.inputs[2].dtype != DType::Undefined &&
            sig.inputs[2].dtype != DType::Int64 && sig.inputs[2].dtype != DType::Int32)
          return "write_indices must be int32 or int64";
        return "";
      },
      tensor_scatter);
  r.add("CausalConvWithState", dtypes_of_input({DType::Float32, DType::Float64, DType::Float16}),
        [](KernelContext& ctx) {
          switch (ctx.input(0).dtype()) {
            case DType::Float32:
              return causal_conv<float>(ctx);
            case DType::Float64:
              return causal_conv<double>(ctx);
            default:
              return causal_conv<uint16_t>(ctx);
          }
        });
  const std::string training = "ai.onnx.preview.training";
  r.add("Adagrad", optimizer_support, optimizer_kernel(0), training);
  r.add("Momentum", optimizer_support, optimizer_kernel(1), training);
  r.add("Adam", optimizer_support, optimizer_kernel(2), training);
  r.add("Binarizer", dtypes_of_input(dtypes_of(NumericTypes{})), binarizer, "ai.onnx.ml");
  r.add(
      "ArrayFeatureExtractor",
      [](const NodeSignature& sig) -> std::string {
        const DType d = sig.inputs[1].dtype;
        if (d != DType::Int64 && d != DType::Int32 && d != DType::Undefined)
          return "indices must be int64";
        return "";
      },
      array_feature_extractor, "ai.onnx.ml");
}

}  // namespace quilt::cpu
