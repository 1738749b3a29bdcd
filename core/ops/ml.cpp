// Schemas of the classic machine-learning ops of the ai.onnx.ml domain that work on tensors: the
// tree ensembles, linear models, SVMs and the preprocessing ops scikit-learn pipelines convert to
// (skl2onnx). Binarizer, ArrayFeatureExtractor and TreeEnsemble (opset 5) are in misc_extra.cpp.
// Classifiers' string class labels are lowered at load to integer labels and a LabelEncoder
// (lower_string_class_labels, core/ops/strings.cpp); OneHotEncoder's, LabelEncoder's and
// CategoryMapper's strings run on the host (core/ops/strings.cpp).
#include <algorithm>

#include "core/checked.hpp"
#include "core/op_schema.hpp"
#include "core/ops/ml_attrs.hpp"

namespace quilt {

void register_ml_schemas(SchemaRegistry& r);

namespace {

const char* const kMl = "ai.onnx.ml";

// Rows of X: [N, C] -> N, [C] -> 1. Fails on other ranks.
int64_t rows_of(const InferenceContext& ctx) {
  const auto& x = ctx.input_shape(0);
  if (x.empty() || x.size() > 2)
    ctx.fail("X has shape " + to_string(x) + ", expected [N, features] or [features]");
  return x.size() == 1 ? 1 : x[0];
}

void check_numeric_input(const InferenceContext& ctx) {
  const DType d = ctx.input_dtype(0);
  if (d != DType::Undefined && d != DType::Float32 && d != DType::Float64 && d != DType::Int64 &&
      d != DType::Int32)
    ctx.fail(std::string("X is ") + dtype_name(d) + ", expected float, double, int64 or int32");
}

int64_t class_count(const InferenceContext& ctx, const char* ints_attr) {
  // String labels alone were lowered to integer labels and a LabelEncoder (core/host_ops.hpp).
  if (ctx.node().has_attr("classlabels_strings"))
    ctx.fail(std::string("has both 'classlabels_strings' and '") + ints_attr +
             "': expected one of them");
  return static_cast<int64_t>(ctx.node().attr_ints(ints_attr).size());
}

void infer_tree_regressor(InferenceContext& ctx) {
  check_numeric_input(ctx);
  const int64_t n = rows_of(ctx);
  const int64_t targets = ctx.node().attr_int("n_targets", 0);
  if (targets < 1) ctx.fail("attribute 'n_targets' must be >= 1");
  if (!ctx.runtime()) ml::check_tree_ensemble(ctx.node(), false);
  ctx.set_output(0, DType::Float32, {n, targets});
}

void infer_tree_classifier(InferenceContext& ctx) {
  check_numeric_input(ctx);
  const int64_t n = rows_of(ctx);
  const int64_t classes = class_count(ctx, "classlabels_int64s");
  if (classes < 2) ctx.fail("attribute 'classlabels_int64s' must list at least 2 classes");
  if (!ctx.runtime()) ml::check_tree_ensemble(ctx.node(), true);
  ctx.set_output(0, DType::Int64, {n});
  ctx.set_output(1, DType::Float32, {n, classes});
}

void infer_linear_regressor(InferenceContext& ctx) {
  check_numeric_input(ctx);
  const int64_t n = rows_of(ctx);
  const int64_t targets = ctx.node().attr_int("targets", 1);
  if (targets < 1) ctx.fail("attribute 'targets' must be >= 1");
  if (!ctx.runtime()) ml::LinearModel::regressor(ctx.node());
  ctx.set_output(0, DType::Float32, {n, targets});
}

void infer_linear_classifier(InferenceContext& ctx) {
  check_numeric_input(ctx);
  const int64_t n = rows_of(ctx);
  const int64_t labels = class_count(ctx, "classlabels_ints");
  const auto classes = static_cast<int64_t>(ctx.node().attr_floats("intercepts").size());
  if (classes < 1) ctx.fail("attribute 'intercepts' is required (one per class)");
  if (!ctx.runtime()) ml::LinearModel::classifier(ctx.node());
  ctx.set_output(0, DType::Int64, {n});
  ctx.set_output(1, DType::Float32, {n, classes == 1 && labels == 2 ? 2 : classes});
}

void infer_svm_regressor(InferenceContext& ctx) {
  check_numeric_input(ctx);
  if (!ctx.runtime()) ml::SvmModel::regressor(ctx.node());
  ctx.set_output(0, DType::Float32, {rows_of(ctx), 1});
}

void infer_svm_classifier(InferenceContext& ctx) {
  check_numeric_input(ctx);
  const int64_t n = rows_of(ctx);
  const int64_t classes = class_count(ctx, "classlabels_ints");
  if (classes < 1) ctx.fail("attribute 'classlabels_ints' is required");
  if (!ctx.runtime()) ml::SvmModel::classifier(ctx.node());
  const bool svc = !ctx.node().attr_ints("vectors_per_class").empty();
  const bool proba = !ctx.node().attr_floats("prob_a").empty();
  int64_t scores = classes;
  if (svc && !proba) scores = classes > 2 ? classes * (classes - 1) / 2 : 2;
  ctx.set_output(0, DType::Int64, {n});
  ctx.set_output(1, DType::Float32, {n, scores});
}

void infer_float_same_shape(InferenceContext& ctx) {
  check_numeric_input(ctx);
  ctx.set_output(0, DType::Float32, ctx.input_shape(0));
}

void infer_scaler(InferenceContext& ctx) {
  for (const char* a : {"scale", "offset"})
    if (ctx.node().has_attr(a) && ctx.node().attr_floats(a).empty())
      ctx.fail(std::string("attribute '") + a + "' is empty");
  infer_float_same_shape(ctx);
}

void infer_normalizer(InferenceContext& ctx) {
  rows_of(ctx);
  infer_float_same_shape(ctx);
}

std::string to_display(int64_t v) {
  return std::to_string(v);
}
std::string to_display(const std::string& v) {
  return "'" + v + "'";
}

// String X looks its values up in cats_strings (on the host: core/ops/strings.cpp), numbers in
// cats_int64s (the CPU kernel).
void infer_one_hot_encoder(InferenceContext& ctx) {
  const bool strings = ctx.input_dtype(0) == DType::String;
  if (!strings) check_numeric_input(ctx);
  const char* attr = strings ? "cats_strings" : "cats_int64s";
  auto duplicate = [&](auto cats) {
    if (cats.empty())
      ctx.fail(std::string("attribute '") + attr + "' is required for " +
               (strings ? "string" : "numeric") + " X");
    std::sort(cats.begin(), cats.end());
    const auto dup = std::adjacent_find(cats.begin(), cats.end());
    return dup == cats.end() ? std::string() : to_display(*dup);
  };
  const std::string dup = strings ? duplicate(ctx.node().attr_strings("cats_strings"))
                                  : duplicate(ctx.node().attr_ints("cats_int64s"));
  if (!dup.empty()) ctx.fail(std::string("attribute '") + attr + "' lists " + dup + " twice");
  const auto cats = static_cast<int64_t>(strings ? ctx.node().attr_strings("cats_strings").size()
                                                 : ctx.node().attr_ints("cats_int64s").size());
  auto dims = ctx.input_shape(0);
  dims.push_back(cats);
  ctx.set_output(0, DType::Float32, dims);
}

void infer_imputer(InferenceContext& ctx) {
  const DType d = ctx.input_dtype(0);
  if (d != DType::Undefined && d != DType::Float32 && d != DType::Int64)
    ctx.fail(std::string("X is ") + dtype_name(d) + ", expected float or int64");
  const Node& n = ctx.node();
  if (n.attr_floats("imputed_value_floats").empty() == n.attr_ints("imputed_value_int64s").empty())
    ctx.fail(
        "exactly one of the attributes 'imputed_value_floats' and 'imputed_value_int64s' "
        "must be given");
  if (d == DType::Float32 && n.attr_floats("imputed_value_floats").empty())
    ctx.fail("X is float but the node has no imputed_value_floats");
  if (d == DType::Int64 && n.attr_ints("imputed_value_int64s").empty())
    ctx.fail("X is int64 but the node has no imputed_value_int64s");
  ctx.set_output(0, d, ctx.input_shape(0));
}

// The dtype of a LabelEncoder's values (outputs): from values_tensor, values_int64s or
// values_floats or values_strings (string keys or values make it a host step, core/host_ops.hpp).
DType label_encoder_values(const InferenceContext& ctx) {
  const Node& n = ctx.node();
  if (const Tensor* t = n.attr_tensor("values_tensor")) return t->dtype();
  if (n.has_attr("values_strings")) return DType::String;
  if (n.has_attr("values_int64s")) return DType::Int64;
  if (n.has_attr("values_floats")) return DType::Float32;
  ctx.fail(
      "one of the attributes 'values_int64s', 'values_floats', 'values_strings' or "
      "'values_tensor' is required");
}

// Number of LabelEncoder keys or values (`what` = "keys" or "values"), from any of its forms.
size_t label_encoder_count(const Node& n, const std::string& what) {
  if (const Tensor* t = n.has_attr(what + "_tensor") ? n.attr_tensor(what + "_tensor") : nullptr)
    return static_cast<size_t>(t->numel());
  if (n.has_attr(what + "_int64s")) return n.attr_ints(what + "_int64s").size();
  if (n.has_attr(what + "_floats")) return n.attr_floats(what + "_floats").size();
  if (n.has_attr(what + "_strings")) return n.attr_strings(what + "_strings").size();
  n.fail("one of the attributes '" + what + "_int64s', '" + what + "_floats', '" + what +
         "_strings' or '" + what + "_tensor' is required");
}

void infer_label_encoder(InferenceContext& ctx) {
  const Node& n = ctx.node();
  if (n.has_attr("classes_strings")) {  // opset 1: string <-> its index in classes_strings
    const DType x = ctx.input_dtype(0);
    if (x != DType::Undefined && x != DType::String && x != DType::Int64)
      ctx.fail(std::string("X is ") + dtype_name(x) + ", expected string or int64");
    ctx.set_output(0, x == DType::String ? DType::Int64 : DType::String, ctx.input_shape(0));
    return;
  }
  const DType values = label_encoder_values(ctx);
  const size_t keys = label_encoder_count(n, "keys"), count = label_encoder_count(n, "values");
  const Tensor* key_tensor = n.has_attr("keys_tensor") ? n.attr_tensor("keys_tensor") : nullptr;
  const bool string_keys =
      n.has_attr("keys_strings") || (key_tensor && key_tensor->dtype() == DType::String);
  const DType x = ctx.input_dtype(0);
  if (x != DType::Undefined && (x == DType::String) != string_keys)
    ctx.fail(std::string("X is ") + dtype_name(x) + " but the keys are " +
             (string_keys ? "strings" : "numbers"));
  if (keys != count)
    ctx.fail("the node has " + std::to_string(keys) + " keys but " + std::to_string(count) +
             " values");
  if (const Tensor* d = n.has_attr("default_tensor") ? n.attr_tensor("default_tensor") : nullptr) {
    if (d->numel() != 1) ctx.fail("attribute 'default_tensor' must hold one value");
    if (d->dtype() != values)
      ctx.fail(std::string("attribute 'default_tensor' is ") + dtype_name(d->dtype()) +
               ", the values " + dtype_name(values));
  }
  ctx.set_output(0, values, ctx.input_shape(0));
}

void infer_feature_vectorizer(InferenceContext& ctx) {
  const auto dims = ctx.node().attr_ints("inputdimensions");
  if (dims.size() != ctx.num_inputs())
    ctx.fail("attribute 'inputdimensions' has " + std::to_string(dims.size()) + " entries for " +
             std::to_string(ctx.num_inputs()) + " inputs");
  int64_t total = 0, n = -1;
  const Checked c(ctx.node(), "output width");
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) ctx.fail("attribute 'inputdimensions' has a negative entry");
    total = c.add(total, dims[i]);
    const auto& x = ctx.input_shape(i);
    if (x.empty()) ctx.fail("input " + std::to_string(i) + " is a scalar, expected [N, C]");
    const int64_t rows = x.size() == 1 ? 1 : x[0];
    if (rows >= 0) {
      if (n >= 0 && rows != n)
        ctx.fail("input " + std::to_string(i) + " has " + std::to_string(rows) +
                 " rows, the others " + std::to_string(n));
      n = rows;
    }
  }
  ctx.set_output(0, DType::Float32, {n, total});
}

}  // namespace

void register_ml_schemas(SchemaRegistry& r) {
  r.add({.op_type = "TreeEnsembleRegressor", .domain = kMl, .infer = infer_tree_regressor});
  r.add({.op_type = "TreeEnsembleClassifier",
         .domain = kMl,
         .max_outputs = 2,
         .infer = infer_tree_classifier});
  r.add({.op_type = "LinearRegressor", .domain = kMl, .infer = infer_linear_regressor});
  r.add({.op_type = "LinearClassifier",
         .domain = kMl,
         .max_outputs = 2,
         .infer = infer_linear_classifier});
  r.add({.op_type = "SVMRegressor", .domain = kMl, .infer = infer_svm_regressor});
  r.add(
      {.op_type = "SVMClassifier", .domain = kMl, .max_outputs = 2, .infer = infer_svm_classifier});
  r.add({.op_type = "Scaler", .domain = kMl, .infer = infer_scaler});
  r.add({.op_type = "Normalizer", .domain = kMl, .infer = infer_normalizer});
  r.add({.op_type = "OneHotEncoder", .domain = kMl, .infer = infer_one_hot_encoder});
  r.add({.op_type = "Imputer", .domain = kMl, .infer = infer_imputer});
  r.add({.op_type = "LabelEncoder", .domain = kMl, .infer = infer_label_encoder});
  r.add({.op_type = "FeatureVectorizer",
         .domain = kMl,
         .max_inputs = 1 << 20,
         .infer = infer_feature_vectorizer});
}

}  // namespace quilt
