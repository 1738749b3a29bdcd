// Op semantics, once for every backend: arity, supported opsets, and type/shape inference.
//
// Each op family registers its schemas in core/ops/<family>.cpp:
//
//   void register_elementwise_schemas(SchemaRegistry& r) {
//     r.add({.op_type = "Relu", .infer = infer_same_as_input0});
//   }
//
// Shape inference runs twice: at session creation with what is static (unknown dims are -1,
// values known only for constants) and at run time with every shape and value known.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/graph.hpp"

namespace quilt {

// The type and (possibly partial) shape of a value. dims[i] == -1 means unknown.
// A sequence, map or optional (kind) has has_shape = true and no dims (its type is known, so
// inference runs), element the type of its elements (a map's: of its values; null: unknown)
// and, for a map, key_dtype; it is never static.
struct TypeShape {
  TypeShape() = default;
  TypeShape(DType dtype_, bool has_shape_, std::vector<int64_t> dims_ = {})
      : dtype(dtype_), has_shape(has_shape_), dims(std::move(dims_)) {}
  DType dtype = DType::Undefined;
  bool has_shape = false;  // false: rank unknown
  std::vector<int64_t> dims;
  ValueKind kind = ValueKind::Tensor;
  std::shared_ptr<const TypeShape> element;
  DType key_dtype = DType::Undefined;

  static TypeShape of(const Tensor& t) { return {t.dtype(), true, t.shape()}; }
  // The type of any value (a sequence's element type from its first item or element_dtype).
  static TypeShape of(const Value& v);
  // A sequence or optional of element, or a map from key to element.
  static TypeShape of_kind(ValueKind kind, TypeShape element, DType key = DType::Undefined);
  // A declared type (unknown dims -1).
  static TypeShape of_info(const ValueInfo& info);
  bool is_tensor() const { return kind == ValueKind::Tensor; }
  // For messages: "tensor(float)", "seq(tensor(float))", as type_string(ValueInfo).
  std::string text() const;
  bool is_static() const;
  // Bytes of a tensor of this type; -1 unless the dtype is known and the shape static.
  // Throws Error(OutOfMemory) when the size overflows int64.
  int64_t bytes() const;
};

class InferenceContext {
 public:
  InferenceContext(const Node& node, std::vector<TypeShape> inputs,
                   std::vector<const Tensor*> values, bool runtime);

  const Node& node() const { return node_; }
  int64_t opset() const { return node_.opset; }
  // True at run time: every input shape and value is known.
  bool runtime() const { return runtime_; }

  size_t num_inputs() const { return node_.inputs.size(); }
  size_t num_outputs() const { return node_.outputs.size(); }
  bool has_input(size_t i) const { return node_.has_input(i); }
  DType input_dtype(size_t i) const;
  bool input_has_shape(size_t i) const;
  // Fails (naming the node) when input i is absent or its rank unknown.
  const std::vector<int64_t>& input_shape(size_t i) const;
  int64_t input_rank(size_t i) const { return static_cast<int64_t>(input_shape(i).size()); }
  // The value of input i if known (constant at creation; always at run time), else nullptr.
  const Tensor* input_value(size_t i) const;
  // Value of an integer (int32/int64) input as int64s; nullopt when unknown.
  std::optional<std::vector<int64_t>> input_ints(size_t i) const;
  // The whole type of input i (for sequences, maps and optionals); unknown when absent.
  const TypeShape& input_type(size_t i) const;
  void set_output_type(size_t i, TypeShape type);

  void set_output(size_t i, DType dtype, std::vector<int64_t> dims);
  void set_output_unknown_shape(size_t i, DType dtype);
  const std::vector<TypeShape>& outputs() const { return outputs_; }
  std::vector<TypeShape>& mutable_outputs() { return outputs_; }

  [[noreturn]] void fail(const std::string& what) const { node_.fail(what); }

 private:
  const Node& node_;
  std::vector<TypeShape> inputs_;
  std::vector<const Tensor*> values_;
  std::vector<TypeShape> outputs_;
  bool runtime_;
};

using InferFn = std::function<void(InferenceContext&)>;

struct OpSchema {
  std::string op_type;
  std::string domain = "";  // "" = ai.onnx
  int64_t min_opset = 1;    // first opset whose semantics this schema implements
  int64_t max_opset = 1000;
  int min_inputs = 1;
  int max_inputs = 1;
  int min_outputs = 1;
  int max_outputs = 1;
  // Inputs whose *values* shape inference reads (e.g. Reshape's shape). At run time these
  // must be on the host: they are sync points for device backends.
  std::vector<int> value_inputs = {};
  InferFn infer = nullptr;
  // Its inputs may be sequences, maps or optionals (its infer reads input_type()); for the
  // other ops, such an input is refused at load naming it.
  bool takes_values = false;
};

// The newest opset of a domain whose op semantics Quilt implements ("" = ai.onnx), or 0 for a
// domain it has no such bound for. These are the opsets of the onnx release whose test suite
// Quilt is checked against (onnx 1.22); a model importing a newer opset is refused rather than
// run with older semantics.
int64_t newest_opset(const std::string& domain);
// The newest ONNX IR version Quilt reads (onnx 1.22's).
constexpr int64_t kNewestIrVersion = 13;

class SchemaRegistry {
 public:
  // All schemas of the built-in op families.
  static const SchemaRegistry& builtin();

  void add(OpSchema schema);
  // The schema for op_type in domain valid at opset, or nullptr.
  const OpSchema* find(const std::string& op_type, const std::string& domain, int64_t opset) const;
  // True if some opset of this op is known (used to tell "unknown op" from "unsupported opset").
  bool knows(const std::string& op_type, const std::string& domain) const;
  std::vector<std::string> op_types() const;
  // Every schema, grouped by (domain, op type).
  const std::map<std::pair<std::string, std::string>, std::vector<OpSchema>>& all() const {
    return schemas_;
  }

 private:
  std::map<std::pair<std::string, std::string>, std::vector<OpSchema>> schemas_;
};

// Throws (InvalidModel, naming the node) when its input or output count does not fit the schema
// or a required input is empty. Validation calls it before the optimizer reads the inputs.
void check_arity(const OpSchema& schema, const Node& node);
// Runs inference for one node. Checks arity first; when a present input has unknown rank, or a
// value input is unknown, outputs are left with unknown shape (dtype Undefined) unless the
// schema's infer handles it. Throws Error naming the node on an invalid combination.
std::vector<TypeShape> infer_node(const OpSchema& schema, const Node& node,
                                  const std::vector<TypeShape>& inputs,
                                  const std::vector<const Tensor*>& values, bool runtime);

// ---- helpers for inference functions ----

// Random-number ops (and Dropout given a training_mode input): never constant-folded; their
// outputs can only be checked by distribution.
bool is_random_op(const Node& node);

// Numpy-style multidirectional broadcast; unknown dims (-1) propagate. Fails naming the node.
std::vector<int64_t> broadcast_shapes(const InferenceContext& ctx, const std::vector<int64_t>& a,
                                      const std::vector<int64_t>& b);
// Normalises a possibly negative axis for the given rank; fails naming the node when out of range.
int64_t normalize_axis(const InferenceContext& ctx, int64_t axis, int64_t rank);
// Output = input 0's dtype and shape.
void infer_same_as_input0(InferenceContext& ctx);

// Family registration, one per file in core/ops/.
void register_elementwise_schemas(SchemaRegistry& r);
void register_nn_schemas(SchemaRegistry& r);
void register_normalization_schemas(SchemaRegistry& r);
void register_reduce_schemas(SchemaRegistry& r);
void register_tensor_schemas(SchemaRegistry& r);
void register_resize_schemas(SchemaRegistry& r);
void register_quantization_schemas(SchemaRegistry& r);
void register_rnn_schemas(SchemaRegistry& r);
void register_attention_schemas(SchemaRegistry& r);
void register_loss_schemas(SchemaRegistry& r);
void register_signal_schemas(SchemaRegistry& r);
void register_detection_schemas(SchemaRegistry& r);
void register_misc_schemas(SchemaRegistry& r);
void register_control_flow_schemas(SchemaRegistry& r);
// Opset 1-6 versions of ops whose broadcasting/attributes changed at opset 7 (core/ops/legacy.cpp).
void register_legacy_schemas(SchemaRegistry& r);

}  // namespace quilt
