// Schema registry and the inference driver.
#include "core/op_schema.hpp"

#include <algorithm>

#include "core/checked.hpp"

namespace quilt {

int64_t newest_opset(const std::string& domain) {
  if (domain.empty()) return 27;
  if (domain == "ai.onnx.ml") return 5;
  if (domain == "ai.onnx.preview" || domain == "ai.onnx.preview.training") return 1;
  return 0;
}

TypeShape TypeShape::of(const Value& v) {
  switch (v.kind()) {
    case ValueKind::Tensor:
      return of(v.tensor());
    case ValueKind::Sequence:
      if (!v.items().empty()) return of_kind(ValueKind::Sequence, of(v.items()[0]));
      if (v.element_dtype() == DType::Undefined) return of_kind(ValueKind::Sequence, {});
      return of_kind(ValueKind::Sequence, {v.element_dtype(), false, {}});
    case ValueKind::Map:
      return of_kind(ValueKind::Map, {v.values().dtype(), false, {}}, v.keys().dtype());
    case ValueKind::Optional:
      if (v.has_element()) return of_kind(ValueKind::Optional, of(v.element()));
      if (v.element_dtype() == DType::Undefined) return of_kind(ValueKind::Optional, {});
      return of_kind(ValueKind::Optional, {v.element_dtype(), false, {}});
  }
  return {};
}

TypeShape TypeShape::of_info(const ValueInfo& info) {
  if (info.kind != ValueKind::Tensor)
    return of_kind(info.kind, info.element ? of_info(*info.element) : TypeShape{}, info.key_dtype);
  TypeShape t;
  t.dtype = info.dtype;
  t.has_shape = info.has_shape;
  for (const auto& d : info.shape) t.dims.push_back(d.is_fixed() ? d.value : -1);
  return t;
}

TypeShape TypeShape::of_kind(ValueKind kind, TypeShape element, DType key) {
  TypeShape t;
  t.kind = kind;
  t.has_shape = true;
  t.element = std::make_shared<const TypeShape>(std::move(element));
  t.key_dtype = key;
  return t;
}

std::string TypeShape::text() const {
  const std::string e = element ? element->text() : "?";
  switch (kind) {
    case ValueKind::Tensor:
      return std::string("tensor(") + dtype_onnx_name(dtype) + ")";
    case ValueKind::Sequence:
      return "seq(" + e + ")";
    case ValueKind::Map:
      return std::string("map(") + dtype_onnx_name(key_dtype) + "," + e + ")";
    case ValueKind::Optional:
      return "optional(" + e + ")";
  }
  return "?";
}

bool TypeShape::is_static() const {
  return kind == ValueKind::Tensor && has_shape &&
         std::all_of(dims.begin(), dims.end(), [](int64_t d) { return d >= 0; });
}

int64_t TypeShape::bytes() const {
  if (!is_static() || dtype == DType::Undefined) return -1;
  const Checked c(
      [this] { return "tensor of shape " + to_string(dims) + " (" + dtype_name(dtype) + ")"; },
      "byte size", ErrorCode::OutOfMemory);
  const int64_t n = c.product(dims);
  if (dtype_is_packed(dtype)) return static_cast<int64_t>(dtype_nbytes(dtype, n));
  return c.mul(n, static_cast<int64_t>(dtype_size(dtype)));
}

InferenceContext::InferenceContext(const Node& node, std::vector<TypeShape> inputs,
                                   std::vector<const Tensor*> values, bool runtime)
    : node_(node),
      inputs_(std::move(inputs)),
      values_(std::move(values)),
      outputs_(node.outputs.size()),
      runtime_(runtime) {
  inputs_.resize(node.inputs.size());
  values_.resize(node.inputs.size(), nullptr);
}

DType InferenceContext::input_dtype(size_t i) const {
  if (!has_input(i)) fail("input " + std::to_string(i) + " is required but not given");
  return inputs_[i].dtype;
}

bool InferenceContext::input_has_shape(size_t i) const {
  return has_input(i) && inputs_[i].has_shape;
}

const std::vector<int64_t>& InferenceContext::input_shape(size_t i) const {
  if (!has_input(i)) fail("input " + std::to_string(i) + " is required but not given");
  if (!inputs_[i].has_shape) fail("shape of input '" + node_.inputs[i] + "' is unknown");
  return inputs_[i].dims;
}

const Tensor* InferenceContext::input_value(size_t i) const {
  return has_input(i) ? values_[i] : nullptr;
}

const TypeShape& InferenceContext::input_type(size_t i) const {
  static const TypeShape kUnknown;
  return i < inputs_.size() && has_input(i) ? inputs_[i] : kUnknown;
}

void InferenceContext::set_output_type(size_t i, TypeShape type) {
  if (i < outputs_.size()) outputs_[i] = std::move(type);
}

std::optional<std::vector<int64_t>> InferenceContext::input_ints(size_t i) const {
  const Tensor* t = input_value(i);
  if (!t) return std::nullopt;
  std::vector<int64_t> out(static_cast<size_t>(t->numel()));
  if (t->dtype() == DType::Int64) {
    std::copy_n(t->data<int64_t>(), out.size(), out.begin());
  } else if (t->dtype() == DType::Int32) {
    std::copy_n(t->data<int32_t>(), out.size(), out.begin());
  } else {
    fail("input '" + node_.inputs[i] + "' must be int32 or int64, got " + dtype_name(t->dtype()));
  }
  return out;
}

void InferenceContext::set_output(size_t i, DType dtype, std::vector<int64_t> dims) {
  if (i >= outputs_.size()) return;  // optional output not requested
  outputs_[i] = {dtype, true, std::move(dims)};
}

void InferenceContext::set_output_unknown_shape(size_t i, DType dtype) {
  if (i >= outputs_.size()) return;
  outputs_[i] = {dtype, false, {}};
}

void SchemaRegistry::add(OpSchema schema) {
  auto& list = schemas_[{schema.domain, schema.op_type}];
  list.push_back(std::move(schema));
}

const OpSchema* SchemaRegistry::find(const std::string& op_type, const std::string& domain,
                                     int64_t opset) const {
  const std::string d = domain == "ai.onnx" ? "" : domain;
  auto it = schemas_.find({d, op_type});
  if (it == schemas_.end()) return nullptr;
  for (const auto& s : it->second)
    if (opset >= s.min_opset && opset <= s.max_opset) return &s;
  return nullptr;
}

bool SchemaRegistry::knows(const std::string& op_type, const std::string& domain) const {
  return schemas_.count({domain == "ai.onnx" ? "" : domain, op_type}) != 0;
}

std::vector<std::string> SchemaRegistry::op_types() const {
  std::vector<std::string> out;
  for (const auto& [key, _] : schemas_)
    out.push_back(key.first.empty() ? key.second : key.first + "." + key.second);
  return out;
}

const SchemaRegistry& SchemaRegistry::builtin() {
  static const SchemaRegistry registry = [] {
    SchemaRegistry r;
    register_elementwise_schemas(r);
    register_nn_schemas(r);
    register_normalization_schemas(r);
    register_reduce_schemas(r);
    register_tensor_schemas(r);
    register_resize_schemas(r);
    register_quantization_schemas(r);
    register_rnn_schemas(r);
    register_attention_schemas(r);
    register_loss_schemas(r);
    register_signal_schemas(r);
    register_detection_schemas(r);
    register_misc_schemas(r);
    register_control_flow_schemas(r);
    register_legacy_schemas(r);
    return r;
  }();
  return registry;
}

// Not inlined: inlined into infer_node, GCC 12 reports a false -Wrestrict on the messages' string
// concatenations (GCC bug 105329).
[[gnu::noinline]] void check_arity(const OpSchema& schema, const Node& node) {
  int given = 0;
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (!node.inputs[i].empty()) given = static_cast<int>(i) + 1;
  if (given < schema.min_inputs || static_cast<int>(node.inputs.size()) > schema.max_inputs) {
    std::string expect =
        schema.min_inputs == schema.max_inputs
            ? std::to_string(schema.min_inputs)
            : std::to_string(schema.min_inputs) + " to " + std::to_string(schema.max_inputs);
    node.fail("has " + std::to_string(node.inputs.size()) + " inputs, expected " + expect);
  }
  for (int i = 0; i < schema.min_inputs; ++i)
    if (node.inputs[static_cast<size_t>(i)].empty())
      node.fail("required input " + std::to_string(i) + " is empty");
  if (static_cast<int>(node.outputs.size()) < schema.min_outputs ||
      static_cast<int>(node.outputs.size()) > schema.max_outputs)
    node.fail("has " + std::to_string(node.outputs.size()) + " outputs, expected " +
              std::to_string(schema.min_outputs) +
              (schema.min_outputs == schema.max_outputs
                   ? std::string()
                   : " to " + std::to_string(schema.max_outputs)));
  // As onnxruntime: an output the op always makes cannot be left unnamed.
  for (int i = 0; i < schema.min_outputs; ++i)
    if (node.outputs[static_cast<size_t>(i)].empty())
      node.fail("required output " + std::to_string(i) + " is empty");
}

std::vector<TypeShape> infer_node(const OpSchema& schema, const Node& node,
                                  const std::vector<TypeShape>& inputs,
                                  const std::vector<const Tensor*>& values, bool runtime) {
  check_arity(schema, node);

  if (!schema.takes_values)
    for (size_t i = 0; i < node.inputs.size() && i < inputs.size(); ++i)
      if (node.has_input(i) && !inputs[i].is_tensor())
        node.fail("input " + std::to_string(i) + " ('" + node.inputs[i] + "') is " +
                  inputs[i].text() + ", but " + node.op_type + " takes tensors");
  InferenceContext ctx(node, inputs, values, runtime);
  bool can_infer = true;
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (node.has_input(i) && (i >= inputs.size() || !inputs[i].has_shape)) can_infer = false;
  for (int v : schema.value_inputs)
    if (node.has_input(static_cast<size_t>(v)) &&
        (static_cast<size_t>(v) >= values.size() || !values[static_cast<size_t>(v)]))
      can_infer = false;
  // Ops on sequences, maps and optionals infer from what is known (their inputs' kinds).
  if (can_infer || runtime || schema.takes_values) schema.infer(ctx);
  return ctx.outputs();
}

bool is_random_op(const Node& node) {
  static const char* const kOps[] = {"RandomNormal",      "RandomUniform", "RandomNormalLike",
                                     "RandomUniformLike", "Multinomial",   "Bernoulli"};
  if (!node.domain.empty()) return false;
  for (const char* op : kOps)
    if (node.op_type == op) return true;
  // A Dropout given a training_mode input may draw a random mask (when it is true).
  return node.op_type == "Dropout" && node.opset >= 12 && node.has_input(2);
}

std::vector<int64_t> broadcast_shapes(const InferenceContext& ctx, const std::vector<int64_t>& a,
                                      const std::vector<int64_t>& b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db)
      out[i] = da;
    else if (da == 1)
      out[i] = db;
    else if (db == 1)
      out[i] = da;
    else if (da == -1 || db == -1)
      out[i] = std::max(da, db) > 1 ? std::max(da, db) : -1;
    else
      ctx.fail("cannot broadcast shapes " + to_string(a) + " and " + to_string(b));
  }
  return out;
}

int64_t normalize_axis(const InferenceContext& ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    ctx.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

void infer_same_as_input0(InferenceContext& ctx) {
  if (!ctx.input_type(0).is_tensor()) return ctx.set_output_type(0, ctx.input_type(0));
  if (!ctx.input_has_shape(0)) return ctx.set_output_unknown_shape(0, ctx.input_dtype(0));
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(0));
}

}  // namespace quilt
