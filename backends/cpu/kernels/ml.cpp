// CPU kernels of the ai.onnx.ml linear models, SVMs and preprocessing ops (LinearClassifier,
// LinearRegressor, SVMClassifier, SVMRegressor, Scaler, Normalizer, OneHotEncoder, LabelEncoder
// with numeric keys, Imputer, FeatureVectorizer). The attributes are read and checked once, at
// session creation; the arithmetic is float, as onnxruntime's, and the binary-classifier score
// conventions are its (see ml_common.hpp). The tree ensembles are in ml_tree.cpp.
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "backends/cpu/kernels/ml_common.hpp"

namespace quilt::cpu {

void register_cpu_ml(KernelRegistry& r);

namespace {

using namespace ml;

const char* const kMl = "ai.onnx.ml";

std::string count_of(size_t n) {
  return std::to_string(n);
}

// The index of the first largest of n values.
template <class T>
size_t argmax(const T* v, size_t n) {
  size_t best = 0;
  for (size_t i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

// out[r * n + j] = sum_k x[r, k] * w[j, k]  (+ bias[j] when given), in float.
void dot_rows(const Rows<float>& x, const std::vector<float>& w, int64_t n, const float* bias,
              float* out) {
  const auto cols = static_cast<size_t>(x.cols);
  for (int64_t r = 0; r < x.rows; ++r) {
    const float* xr = x.data + static_cast<size_t>(r) * cols;
    for (int64_t j = 0; j < n; ++j) {
      const float* wj = w.data() + static_cast<size_t>(j) * cols;
      float s = 0;
      for (size_t k = 0; k < cols; ++k) s += xr[k] * wj[k];
      out[r * n + j] = s + (bias ? bias[j] : 0.0f);
    }
  }
}

void check_width(const KernelContext& ctx, int64_t cols, int64_t expected, const char* what) {
  if (cols != expected)
    ctx.node.fail("X has " + std::to_string(cols) + " features, but " + what + " are for " +
                      std::to_string(expected),
                  ErrorCode::InvalidArgument);
}

// ---- LinearRegressor, LinearClassifier ----

class LinearRegressor : public Kernel {
 public:
  explicit LinearRegressor(const Node& n) : m_(LinearModel::regressor(n)) {}
  void run(KernelContext& ctx) const override {
    const Rows<float> x = rows_of<float>(ctx.input(0));
    check_width(ctx, x.cols, m_.features(), "the coefficients");
    float* y = ctx.output(0).data<float>();
    dot_rows(x, m_.coefficients, m_.outputs, m_.intercepts.empty() ? nullptr : m_.intercepts.data(),
             y);
    for (int64_t r = 0; r < x.rows; ++r) {
      float* row = y + r * m_.outputs;
      if (m_.outputs > 1)
        transform_row(m_.transform, row, static_cast<size_t>(m_.outputs));
      else if (m_.transform == PostTransform::Probit)
        row[0] = probit(row[0]);
    }
  }

 private:
  LinearModel m_;
};

class LinearClassifier : public Kernel {
 public:
  explicit LinearClassifier(const Node& n)
      : m_(LinearModel::classifier(n)), second_class_(m_.outputs == 1 && m_.labels.size() == 2) {}
  void run(KernelContext& ctx) const override {
    const Rows<float> x = rows_of<float>(ctx.input(0));
    check_width(ctx, x.cols, m_.features(), "the coefficients");
    const int64_t classes = m_.outputs;
    std::vector<float> scores(static_cast<size_t>(x.rows * classes));
    dot_rows(x, m_.coefficients, classes, m_.intercepts.data(), scores.data());
    int64_t* y = ctx.output(0).data<int64_t>();
    const int64_t width = second_class_ ? 2 : classes;
    float* z = ctx.wants_output(1) ? ctx.output(1).data<float>() : nullptr;
    for (int64_t r = 0; r < x.rows; ++r) {
      const float* s = scores.data() + r * classes;
      if (classes == 1) {
        const bool pos = s[0] > 0;
        y[r] = m_.labels.size() == 2 ? m_.labels[pos ? 1 : 0] : (pos ? 1 : 0);
      } else {
        y[r] = m_.labels[argmax(s, static_cast<size_t>(classes))];
      }
      if (!z) continue;
      float* zr = z + r * width;
      if (classes > 1) {
        std::memcpy(zr, s, static_cast<size_t>(classes) * sizeof(float));
        transform_row(m_.transform, zr, static_cast<size_t>(classes));
      } else if (m_.transform == PostTransform::Probit) {
        zr[0] = probit(s[0]);
      } else if (second_class_) {
        write_binary(PostTransform::None, 1, s[0], zr);  // [1 - score, score], as onnxruntime
      } else {
        zr[0] = s[0];
      }
    }
  }

 private:
  LinearModel m_;
  bool second_class_;
};

// ---- SVMs ----

// out[j] = K(x, v_j) for the n vectors v (each `cols` long); c is added to a LINEAR dot.
void kernel_row(const SvmModel& m, const float* x, const std::vector<float>& v, int64_t n,
                int64_t cols, float c, float* out) {
  const auto k = static_cast<size_t>(cols);
  for (int64_t j = 0; j < n; ++j) {
    const float* vj = v.data() + static_cast<size_t>(j) * k;
    float s = 0;
    if (m.kernel == SvmKernel::Rbf) {
      for (size_t i = 0; i < k; ++i) {
        const float d = x[i] - vj[i];
        s += d * d;
      }
      out[j] = std::exp(-m.gamma * s);
      continue;
    }
    for (size_t i = 0; i < k; ++i) s += x[i] * vj[i];
    if (m.kernel == SvmKernel::Linear) {
      out[j] = s + c;
    } else {
      s = m.gamma * s + m.coef0;
      if (m.kernel == SvmKernel::Sigmoid)
        out[j] = std::tanh(s);
      else
        out[j] = m.degree == 2 ? s * s : m.degree == 3 ? s * s * s : std::pow(s, m.degree);
    }
  }
}

class SvmRegressor : public Kernel {
 public:
  explicit SvmRegressor(const Node& n) : m_(SvmModel::regressor(n)) {}
  void run(KernelContext& ctx) const override {
    const Rows<float> x = rows_of<float>(ctx.input(0));
    check_width(ctx, x.cols, m_.features, m_.svc ? "the support vectors" : "the coefficients");
    float* y = ctx.output(0).data<float>();
    std::vector<float> k(static_cast<size_t>(std::max<int64_t>(m_.vectors, 1)));
    for (int64_t r = 0; r < x.rows; ++r) {
      const float* xr = x.data + r * x.cols;
      float v = 0;
      if (m_.svc) {
        kernel_row(m_, xr, m_.support, m_.vectors, m_.features, 0, k.data());
        for (size_t j = 0; j < k.size(); ++j) v += k[j] * m_.coefficients[j];
        v += m_.rho[0];
      } else {
        kernel_row(m_, xr, m_.coefficients, 1, m_.features, m_.rho[0], &v);
      }
      y[r] = m_.one_class ? (v > 0 ? 1.0f : -1.0f) : v;
    }
  }

 private:
  SvmModel m_;
};

// Pairwise coupling of class-pair probabilities r (classes x classes) into class probabilities
// p (Wu, Lin and Weng's second method, as libsvm), in float.
void multiclass_probability(int64_t classes, const std::vector<float>& r, float* p) {
  const auto k = static_cast<size_t>(classes);
  std::vector<float> q(k * k, 0.0f), qp(k, 0.0f);
  const float eps = 0.005f / static_cast<float>(classes);
  for (size_t i = 0; i < k; ++i) {
    p[i] = 1.0f / static_cast<float>(classes);
    for (size_t j = 0; j < i; ++j) {
      q[i * k + i] += r[j * k + i] * r[j * k + i];
      q[i * k + j] = q[j * k + i];
    }
    for (size_t j = i + 1; j < k; ++j) {
      q[i * k + i] += r[j * k + i] * r[j * k + i];
      q[i * k + j] = -r[j * k + i] * r[i * k + j];
    }
  }
  for (int loop = 0; loop < 100; ++loop) {
    float pqp = 0;
    for (size_t i = 0; i < k; ++i) {
      qp[i] = 0;
      for (size_t j = 0; j < k; ++j) qp[i] += q[i * k + j] * p[j];
      pqp += p[i] * qp[i];
    }
    float max_error = 0;
    for (size_t i = 0; i < k; ++i) max_error = std::max(max_error, std::fabs(qp[i] - pqp));
    if (max_error < eps) break;
    for (size_t i = 0; i < k; ++i) {
      const float diff = (-qp[i] + pqp) / q[i * k + i];
      p[i] += diff;
      pqp = (pqp + diff * (diff * q[i * k + i] + 2 * qp[i])) / (1 + diff) / (1 + diff);
      for (size_t j = 0; j < k; ++j) {
        qp[j] = (qp[j] + diff * q[i * k + j]) / (1 + diff);
        p[j] /= (1 + diff);
      }
    }
  }
}

class SvmClassifier : public Kernel {
 public:
  explicit SvmClassifier(const Node& n) : m_(SvmModel::classifier(n)) {}

  void run(KernelContext& ctx) const override {
    const Rows<float> x = rows_of<float>(ctx.input(0));
    check_width(ctx, x.cols, m_.features, m_.svc ? "the support vectors" : "the coefficients");
    int64_t* y = ctx.output(0).data<int64_t>();
    int64_t width = m_.classes;
    if (m_.svc && !m_.proba) width = m_.classes > 2 ? m_.pairs : 2;
    std::vector<float> z_scratch;
    float* z = ctx.wants_output(1) ? ctx.output(1).data<float>() : nullptr;
    if (!z) {
      z_scratch.resize(static_cast<size_t>(x.rows * width));
      z = z_scratch.data();
    }
    ctx.pool.parallel_for(x.rows, 64, [&](int64_t r0, int64_t r1) {
      std::vector<float> k(static_cast<size_t>(std::max<int64_t>(m_.vectors, 1)));
      std::vector<float> pair(static_cast<size_t>(std::max<int64_t>(m_.pairs, 1)));
      std::vector<int64_t> votes(static_cast<size_t>(m_.classes));
      std::vector<float> r2(static_cast<size_t>(m_.classes * m_.classes));
      for (int64_t r = r0; r < r1; ++r)
        row(x.data + r * x.cols, k, pair, votes, r2, z + r * width, y[r]);
    });
  }

 private:
  void row(const float* x, std::vector<float>& k, std::vector<float>& pair,
           std::vector<int64_t>& votes, std::vector<float>& r2, float* z, int64_t& label) const {
    if (!m_.svc) {
      kernel_row(m_, x, m_.coefficients, m_.classes, m_.features, m_.rho[0], z);
      const size_t best = argmax(z, static_cast<size_t>(m_.classes));
      label = choose(z[best], best);
      if (m_.classes > 1)
        transform_row(m_.transform, z, static_cast<size_t>(m_.classes));
      else if (m_.transform == PostTransform::Probit)
        z[0] = probit(z[0]);
      return;
    }
    kernel_row(m_, x, m_.support, m_.vectors, m_.features, 0, k.data());
    std::fill(votes.begin(), votes.end(), 0);
    float* scores = m_.proba ? pair.data() : z;
    size_t idx = 0;
    for (int64_t i = 0; i < m_.classes - 1; ++i) {
      const auto si = static_cast<size_t>(m_.start[static_cast<size_t>(i)]);
      const auto ni = static_cast<size_t>(m_.per_class[static_cast<size_t>(i)]);
      for (int64_t j = i + 1; j < m_.classes; ++j) {
        const auto sj = static_cast<size_t>(m_.start[static_cast<size_t>(j)]);
        const auto nj = static_cast<size_t>(m_.per_class[static_cast<size_t>(j)]);
        double sum = 0;
        const float* c1 = m_.coefficients.data() + static_cast<size_t>(m_.vectors * (j - 1)) + si;
        for (size_t m = 0; m < ni; ++m) sum += c1[m] * k[si + m];
        const float* c2 = m_.coefficients.data() + static_cast<size_t>(m_.vectors * i) + sj;
        for (size_t m = 0; m < nj; ++m) sum += c2[m] * k[sj + m];
        sum += m_.rho[idx];
        scores[idx++] = static_cast<float>(sum);
        ++votes[static_cast<size_t>(sum > 0 ? i : j)];
      }
    }
    if (m_.proba) {
      const auto c = static_cast<size_t>(m_.classes);
      std::fill(r2.begin(), r2.end(), 0.0f);
      size_t index = 0;
      for (size_t i = 0; i + 1 < c; ++i)
        for (size_t j = i + 1; j < c; ++j, ++index) {
          const float v = std::min(
              std::max(1 - logistic(pair[index] * m_.prob_a[index] + m_.prob_b[index]), 1.0e-7f),
              1 - 1.0e-7f);
          r2[i * c + j] = v;
          r2[j * c + i] = 1 - v;
        }
      multiclass_probability(m_.classes, r2, z);
    }
    const size_t best = argmax(votes.data(), votes.size());
    label = choose(0.0f, best);
    if (m_.proba) {
      if (m_.classes > 1)
        transform_row(m_.transform, z, static_cast<size_t>(m_.classes));
      else if (m_.transform == PostTransform::Probit)
        z[0] = probit(z[0]);
    } else if (m_.pairs == 1) {
      // One classifier: its score, then the second column (onnxruntime's convention).
      write_binary(m_.transform == PostTransform::None ? PostTransform::None : m_.transform,
                   m_.transform == PostTransform::None ? 2 : 0, z[0], z);
    } else {
      transform_row(m_.transform, z, static_cast<size_t>(m_.pairs));
    }
  }

  // The label for the best class (onnxruntime's rule for two classes without probabilities).
  int64_t choose(float max_weight, size_t best) const {
    if (m_.pairs == 1 && !m_.proba) {
      if ((m_.all_positive && max_weight >= 0.5f) || (max_weight > 0 && !m_.all_positive))
        return m_.labels[1];
    }
    return m_.labels[best];
  }

  SvmModel m_;
};

// ---- preprocessing ----

class Scaler : public Kernel {
 public:
  explicit Scaler(const Node& n)
      : scale_(n.attr_floats("scale", {1.0f})), offset_(n.attr_floats("offset", {0.0f})) {}
  void run(KernelContext& ctx) const override {
    const Tensor& xt = ctx.input(0);
    const Rows<float> x = rows_of<float>(xt);
    const auto cols = static_cast<size_t>(x.cols);
    for (const auto* v : {&scale_, &offset_})
      if (v->size() != 1 && v->size() != cols)
        ctx.node.fail(std::string("attribute '") + (v == &scale_ ? "scale" : "offset") + "' has " +
                          count_of(v->size()) + " entries for " + count_of(cols) +
                          " features (expected 1 or one per feature)",
                      ErrorCode::InvalidArgument);
    float* y = ctx.output(0).data<float>();
    for (size_t i = 0; i < static_cast<size_t>(xt.numel()); ++i) {
      const size_t c = cols ? i % cols : 0;
      y[i] =
          (x.data[i] - offset_[offset_.size() == 1 ? 0 : c]) * scale_[scale_.size() == 1 ? 0 : c];
    }
  }

 private:
  std::vector<float> scale_, offset_;
};

void normalizer(KernelContext& ctx) {
  const Rows<float> x = rows_of<float>(ctx.input(0));
  const std::string norm = ctx.node.attr_string("norm", "MAX");
  float* y = ctx.output(0).data<float>();
  const auto cols = static_cast<size_t>(x.cols);
  for (int64_t r = 0; r < x.rows; ++r) {
    const float* in = x.data + static_cast<size_t>(r) * cols;
    float* out = y + static_cast<size_t>(r) * cols;
    float d = 0;
    if (norm == "MAX") {
      d = std::numeric_limits<float>::lowest();
      for (size_t i = 0; i < cols; ++i) d = std::max(d, in[i]);
    } else if (norm == "L1") {
      for (size_t i = 0; i < cols; ++i) d += std::abs(in[i]);
    } else {
      for (size_t i = 0; i < cols; ++i) d += in[i] * in[i];
    }
    for (size_t i = 0; i < cols; ++i) {
      if (d == 0)
        out[i] = in[i];
      else if (norm == "L2")
        out[i] = std::sqrt(in[i] * in[i] / d) * (in[i] < 0 ? -1.0f : 1.0f);
      else
        out[i] = in[i] / d;
    }
  }
}

class OneHotEncoder : public Kernel {
 public:
  explicit OneHotEncoder(const Node& n) : zeros_(n.attr_int("zeros", 1) != 0) {
    const auto cats = n.attr_ints("cats_int64s");
    for (size_t i = 0; i < cats.size(); ++i) index_.emplace(cats[i], static_cast<int64_t>(i));
    width_ = static_cast<int64_t>(cats.size());
  }
  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    float* y = ctx.output(0).data<float>();  // zero-filled
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t v = 0;
      switch (x.dtype()) {
        case DType::Int64:
          v = x.data<int64_t>()[i];
          break;
        case DType::Int32:
          v = x.data<int32_t>()[i];
          break;
        case DType::Float32:
          v = static_cast<int64_t>(x.data<float>()[i]);
          break;
        default:
          v = static_cast<int64_t>(x.data<double>()[i]);
      }
      const auto it = index_.find(v);
      if (it != index_.end())
        y[i * width_ + it->second] = 1.0f;
      else if (!zeros_)
        ctx.node.fail("X has category " + std::to_string(v) +
                          ", which is not in cats_int64s (and zeros is 0)",
                      ErrorCode::InvalidArgument);
    }
  }

 private:
  std::unordered_map<int64_t, int64_t> index_;
  int64_t width_ = 0;
  bool zeros_;
};

class Imputer : public Kernel {
 public:
  explicit Imputer(const Node& n)
      : floats_(n.attr_floats("imputed_value_floats")),
        ints_(n.attr_ints("imputed_value_int64s")),
        replaced_float_(n.attr_float("replaced_value_float", 0.0f)),
        replaced_int_(n.attr_int("replaced_value_int64", 0)) {}  // checked by the schema
  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const int64_t cols = x.rank() == 0 ? 1 : x.rank() == 1 ? x.dim(0) : x.dim(1);
    if (x.dtype() == DType::Float32)
      impute(ctx, x.data<float>(), x.numel(), cols, replaced_float_, floats_);
    else
      impute(ctx, x.data<int64_t>(), x.numel(), cols, replaced_int_, ints_);
  }

 private:
  template <class T>
  void impute(KernelContext& ctx, const T* x, int64_t n, int64_t cols, T replaced,
              const std::vector<T>& values) const {
    const bool per_column = static_cast<int64_t>(values.size()) == cols;
    T* y = ctx.output(0).data<T>();
    for (int64_t i = 0; i < n; ++i) {
      const T v = x[i];
      bool hit = v == replaced;
      if constexpr (std::is_floating_point_v<T>)
        hit = hit || (std::isnan(v) && std::isnan(replaced));
      y[i] = hit ? values[per_column ? static_cast<size_t>(i % cols) : 0] : v;
    }
  }
  std::vector<float> floats_;
  std::vector<int64_t> ints_;
  float replaced_float_;
  int64_t replaced_int_;
};

// LabelEncoder with numeric keys and values (v2's keys_*/values_* lists, v4's tensors).
class LabelEncoder : public Kernel {
 public:
  explicit LabelEncoder(const Node& n) {
    const Tensor* kt = n.attr_tensor("keys_tensor");
    const Tensor* vt = n.attr_tensor("values_tensor");
    if (kt) {
      key_type_ = kt->dtype();
      for (int64_t i = 0; i < kt->numel(); ++i) keys_.push_back(element(*kt, i));
    } else if (n.has_attr("keys_int64s")) {
      key_type_ = DType::Int64;
      for (int64_t k : n.attr_ints("keys_int64s")) keys_.push_back(Value::of(k));
    } else {  // the schema checked that the node has keys
      key_type_ = DType::Float32;
      for (float k : n.attr_floats("keys_floats"))
        keys_.push_back(Value::of(static_cast<double>(k)));
    }
    if (vt) {
      value_type_ = vt->dtype();
      for (int64_t i = 0; i < vt->numel(); ++i) values_.push_back(element(*vt, i));
    } else if (n.has_attr("values_int64s")) {
      value_type_ = DType::Int64;
      for (int64_t v : n.attr_ints("values_int64s")) values_.push_back(Value::of(v));
    } else {
      value_type_ = DType::Float32;
      for (float v : n.attr_floats("values_floats"))
        values_.push_back(Value::of(static_cast<double>(v)));
    }
    if (const Tensor* d = n.attr_tensor("default_tensor")) {  // one value, checked by the schema
      default_ = element(*d, 0);
    } else if (value_type_ == DType::Int64) {
      const int64_t v = n.attr_int("default_int64", -1);
      default_ = Value::of(v);
    } else {
      const float v = n.attr_float("default_float", -0.0f);
      default_ = Value::of(static_cast<double>(v));
    }
    for (size_t i = 0; i < keys_.size(); ++i) {
      if (integral(key_type_))
        int_index_.emplace(keys_[i].i, i);
      else if (std::isnan(keys_[i].f))
        nan_index_ = n.opset >= 4 ? static_cast<int64_t>(i) : -1;  // onnxruntime: NaN from v4
      else
        float_index_.emplace(keys_[i].f, i);
    }
  }

  DType key_type() const { return key_type_; }
  DType value_type() const { return value_type_; }

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    Tensor& y = ctx.output(0);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const Value k = element(x, i);
      const Value* v = &default_;
      if (integral(key_type_)) {
        if (const auto it = int_index_.find(k.i); it != int_index_.end()) v = &values_[it->second];
      } else if (std::isnan(k.f)) {
        if (nan_index_ >= 0) v = &values_[static_cast<size_t>(nan_index_)];
      } else if (const auto it = float_index_.find(k.f); it != float_index_.end()) {
        v = &values_[it->second];
      }
      switch (value_type_) {
        case DType::Int64:
          y.data<int64_t>()[i] = v->i;
          break;
        case DType::Int32:
          y.data<int32_t>()[i] = static_cast<int32_t>(v->i);
          break;
        case DType::Int16:
          y.data<int16_t>()[i] = static_cast<int16_t>(v->i);
          break;
        case DType::Float32:
          y.data<float>()[i] = static_cast<float>(v->f);
          break;
        default:
          y.data<double>()[i] = v->f;
      }
    }
  }

  static bool integral(DType d) {
    return d == DType::Int64 || d == DType::Int32 || d == DType::Int16;
  }

 private:
  // A key or value in both forms: an integer's (i) and its double (f) for integer types; a
  // float's double alone, i = 0 (casting 3.4e38 to int64 was undefined: fuzz_model, UBSan).
  struct Value {
    double f = 0;
    int64_t i = 0;
    static Value of(int64_t v) { return {static_cast<double>(v), v}; }
    static Value of(double v) { return {v, 0}; }
  };
  static Value element(const Tensor& t, int64_t i) {
    switch (t.dtype()) {
      case DType::Int64:
        return Value::of(t.data<int64_t>()[i]);
      case DType::Int32:
        return Value::of(int64_t{t.data<int32_t>()[i]});
      case DType::Int16:
        return Value::of(int64_t{t.data<int16_t>()[i]});
      case DType::Float32:
        return Value::of(static_cast<double>(t.data<float>()[i]));
      case DType::Float64:
        return Value::of(t.data<double>()[i]);
      default:
        throw Error(ErrorCode::NotImplemented,
                    std::string("LabelEncoder: keys or values of dtype ") + dtype_name(t.dtype()));
    }
  }
  DType key_type_ = DType::Undefined, value_type_ = DType::Undefined;
  std::vector<Value> keys_, values_;
  Value default_;
  std::unordered_map<int64_t, size_t> int_index_;
  std::unordered_map<double, size_t> float_index_;
  int64_t nan_index_ = -1;
};

void feature_vectorizer(KernelContext& ctx) {
  const auto dims = ctx.node.attr_ints("inputdimensions");
  Tensor& yt = ctx.output(0);  // zero-filled: short inputs are padded with zeros
  float* y = yt.data<float>();
  const int64_t width = yt.dim(1), rows = yt.dim(0);
  int64_t at = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Rows<float> x = rows_of<float>(ctx.input(i));
    const int64_t take = std::min(x.cols, dims[i]);
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(y + r * width + at, x.data + r * x.cols,
                  static_cast<size_t>(take) * sizeof(float));
    at += dims[i];
  }
}

template <class K>
KernelFactory make() {
  return [](const NodeSignature& sig) -> std::unique_ptr<Kernel> {
    return std::make_unique<K>(sig.node);
  };
}

}  // namespace

void register_cpu_ml(KernelRegistry& r) {
  const SupportFn numeric = [](const NodeSignature& sig) { return numeric_x(sig); };
  r.add("LinearRegressor", numeric, make<LinearRegressor>(), kMl);
  r.add("LinearClassifier", numeric, make<LinearClassifier>(), kMl);
  r.add("SVMRegressor", numeric, make<SvmRegressor>(), kMl);
  r.add("SVMClassifier", numeric, make<SvmClassifier>(), kMl);
  r.add("Scaler", numeric, make<Scaler>(), kMl);
  r.add("Normalizer", numeric, normalizer, kMl);
  r.add("OneHotEncoder", numeric, make<OneHotEncoder>(), kMl);
  r.add("Imputer", dtypes_of_input({DType::Float32, DType::Int64}), make<Imputer>(), kMl);
  r.add(
      "LabelEncoder",
      [](const NodeSignature& sig) -> std::string {
        const LabelEncoder probe(sig.node);
        const DType x = sig.inputs[0].dtype;
        if (x != probe.key_type())
          return std::string("X is ") + dtype_name(x) + " but the keys are " +
                 dtype_name(probe.key_type());
        return "";
      },
      make<LabelEncoder>(), kMl);
  r.add(
      "FeatureVectorizer",
      [](const NodeSignature& sig) -> std::string {
        for (const auto& in : sig.inputs)
          if (in.dtype != DType::Float32 && in.dtype != DType::Float64 &&
              in.dtype != DType::Int32 && in.dtype != DType::Int64)
            return std::string("an input is ") + dtype_name(in.dtype) +
                   "; expected float, double, int32 or int64";
        return "";
      },
      feature_vectorizer, kMl);
}

}  // namespace quilt::cpu
