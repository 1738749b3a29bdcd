// Ops on sequences, maps and optionals: schemas and host kernels (docs/TYPES.md).
//
// These values do not cross the backend ABI, so every node that reads or makes one is a host
// step (core/host_ops.hpp): the kernels here run in the core, on quilt::Value. SequenceMap,
// which runs a subgraph per element, is control flow (core/control_flow.cpp).
#include <algorithm>
#include <cstring>
#include <map>

#include "core/host_ops.hpp"
#include "core/op_schema.hpp"

namespace quilt {

void register_sequence_schemas(SchemaRegistry& r);

namespace {

const char* const kMl = "ai.onnx.ml";

TypeShape tensor_type(DType dtype) {
  return {dtype, false, {}};
}

// ---- inference ----

// The element type of a sequence input (unknown when its type is not known).
TypeShape sequence_element(InferenceContext& ctx, size_t i) {
  const TypeShape& t = ctx.input_type(i);
  if (!t.has_shape) return {};
  if (t.kind != ValueKind::Sequence)
    ctx.fail("input " + std::to_string(i) + " ('" + ctx.node().inputs[i] + "') is " + t.text() +
             ", expected a sequence");
  return t.element ? *t.element : TypeShape{};
}

void require_tensor(InferenceContext& ctx, size_t i) {
  const TypeShape& t = ctx.input_type(i);
  if (ctx.has_input(i) && !t.is_tensor())
    ctx.fail("input " + std::to_string(i) + " ('" + ctx.node().inputs[i] + "') is " + t.text() +
             ", expected a tensor");
}

void require_int_scalar_input(InferenceContext& ctx, size_t i, const char* what) {
  require_tensor(ctx, i);
  if (!ctx.has_input(i) || !ctx.input_has_shape(i)) return;
  const DType d = ctx.input_dtype(i);
  if (d != DType::Int32 && d != DType::Int64 && d != DType::Undefined)
    ctx.fail(std::string(what) + " must be int32 or int64, got " + dtype_name(d));
  // A scalar; onnxruntime (and the ONNX suite's SequenceInsert case) take a [1] too.
  const auto& shape = ctx.input_shape(i);
  if (shape.size() > 1 || (shape.size() == 1 && shape[0] != 1 && shape[0] != -1))
    ctx.fail(std::string(what) + " must be a scalar, got shape " + to_string(shape));
}

void infer_sequence_empty(InferenceContext& ctx) {
  const auto dtype = static_cast<DType>(ctx.node().attr_int("dtype", 1));
  if (!dtype_supported(dtype) || dtype_is_packed(dtype))
    ctx.fail("attribute 'dtype' is " + std::to_string(static_cast<int>(dtype)) +
             ", not an element type Quilt holds in a sequence");
  ctx.set_output_type(0, TypeShape::of_kind(ValueKind::Sequence, tensor_type(dtype)));
}

void infer_sequence_construct(InferenceContext& ctx) {
  DType dtype = DType::Undefined;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    require_tensor(ctx, i);
    const DType d = ctx.input_type(i).dtype;
    if (d == DType::Undefined) continue;
    if (dtype != DType::Undefined && d != dtype)
      ctx.fail(std::string("inputs must have one dtype, got ") + dtype_name(dtype) + " and " +
               dtype_name(d) + " (input " + std::to_string(i) + ")");
    dtype = d;
  }
  ctx.set_output_type(0, TypeShape::of_kind(ValueKind::Sequence, tensor_type(dtype)));
}

void infer_sequence_at(InferenceContext& ctx) {
  TypeShape e = sequence_element(ctx, 0);
  require_int_scalar_input(ctx, 1, "position");
  if (e.is_tensor()) e.has_shape = false, e.dims.clear();
  ctx.set_output_type(0, e);
}

void infer_sequence_insert(InferenceContext& ctx) {
  const TypeShape e = sequence_element(ctx, 0);
  require_tensor(ctx, 1);
  const DType d = ctx.input_type(1).dtype;
  if (e.dtype != DType::Undefined && d != DType::Undefined && e.dtype != d)
    ctx.fail(std::string("the tensor is ") + dtype_name(d) + ", the sequence holds " +
             dtype_name(e.dtype));
  if (ctx.has_input(2)) require_int_scalar_input(ctx, 2, "position");
  ctx.set_output_type(0,
                      TypeShape::of_kind(ValueKind::Sequence,
                                         tensor_type(e.dtype != DType::Undefined ? e.dtype : d)));
}

void infer_sequence_erase(InferenceContext& ctx) {
  const TypeShape e = sequence_element(ctx, 0);
  if (ctx.has_input(1)) require_int_scalar_input(ctx, 1, "position");
  ctx.set_output_type(0, TypeShape::of_kind(ValueKind::Sequence, e));
}

void infer_sequence_length(InferenceContext& ctx) {
  sequence_element(ctx, 0);
  ctx.set_output(0, DType::Int64, {});
}

void infer_split_to_sequence(InferenceContext& ctx) {
  require_tensor(ctx, 0);
  if (ctx.has_input(1)) {
    require_tensor(ctx, 1);
    const DType d = ctx.input_type(1).dtype;
    if (d != DType::Int32 && d != DType::Int64 && d != DType::Undefined)
      ctx.fail(std::string("split must be int32 or int64, got ") + dtype_name(d));
  }
  if (ctx.input_has_shape(0))
    normalize_axis(ctx, ctx.node().attr_int("axis", 0), ctx.input_rank(0));
  ctx.set_output_type(
      0, TypeShape::of_kind(ValueKind::Sequence, tensor_type(ctx.input_type(0).dtype)));
}

void infer_concat_from_sequence(InferenceContext& ctx) {
  const TypeShape e = sequence_element(ctx, 0);
  if (!ctx.node().has_attr("axis")) ctx.fail("attribute 'axis' is required");
  ctx.set_output_unknown_shape(0, e.dtype);
}

void infer_sequence_map(InferenceContext& ctx) {
  sequence_element(ctx, 0);
  const Attribute* body = ctx.node().attr("body");
  if (!body || body->kind != Attribute::Kind::Graph || !body->g)
    ctx.fail("graph attribute 'body' is required");
  if (body->g->inputs.size() != ctx.num_inputs())
    ctx.fail("body has " + std::to_string(body->g->inputs.size()) + " inputs, the node " +
             std::to_string(ctx.num_inputs()));
  if (body->g->outputs.size() != ctx.num_outputs())
    ctx.fail("body has " + std::to_string(body->g->outputs.size()) + " outputs, the node " +
             std::to_string(ctx.num_outputs()));
  for (size_t k = 0; k < ctx.num_outputs(); ++k) {
    TypeShape e = TypeShape::of_info(body->g->outputs[k]);
    if (e.is_tensor()) e.has_shape = false, e.dims.clear();
    ctx.set_output_type(k, TypeShape::of_kind(ValueKind::Sequence, e));
  }
}

// Optional's element type: its input's, or the `type` attribute's (a TypeProto, which the
// import keeps only by name: then unknown).
void infer_optional(InferenceContext& ctx) {
  if (ctx.has_input(0)) {
    TypeShape e = ctx.input_type(0);
    if (e.kind == ValueKind::Optional) ctx.fail("the input is an optional already");
    ctx.set_output_type(0, TypeShape::of_kind(ValueKind::Optional, e));
  } else {
    if (!ctx.node().has_attr("type"))
      ctx.fail("without an input, attribute 'type' must give the element type");
    ctx.set_output_type(0, TypeShape::of_kind(ValueKind::Optional, {}));
  }
}

void infer_optional_has_element(InferenceContext& ctx) {
  if (ctx.opset() < 18 && ctx.has_input(0) && ctx.input_type(0).has_shape &&
      ctx.input_type(0).kind != ValueKind::Optional)
    ctx.fail("input is " + ctx.input_type(0).text() + ", expected an optional (before opset 18)");
  ctx.set_output(0, DType::Bool, {});
}

void infer_optional_get_element(InferenceContext& ctx) {
  const TypeShape& t = ctx.input_type(0);
  if (t.kind == ValueKind::Optional) {
    TypeShape e = t.element ? *t.element : TypeShape{};
    if (!e.is_tensor() && !e.has_shape) e = {};
    ctx.set_output_type(0, e);
    return;
  }
  if (ctx.opset() < 18 && t.has_shape)
    ctx.fail("input is " + t.text() + ", expected an optional (before opset 18)");
  ctx.set_output_type(0, t);
}

std::vector<std::string> zipmap_labels_strings(const Node& node) {
  return node.attr_strings("classlabels_strings");
}

void infer_zipmap(InferenceContext& ctx) {
  const Node& n = ctx.node();
  const bool strings = n.has_attr("classlabels_strings");
  if (strings == n.has_attr("classlabels_int64s"))
    ctx.fail("exactly one of 'classlabels_strings' and 'classlabels_int64s' must be given");
  const size_t labels =
      strings ? zipmap_labels_strings(n).size() : n.attr_ints("classlabels_int64s").size();
  require_tensor(ctx, 0);
  if (ctx.input_has_shape(0)) {
    if (ctx.input_dtype(0) != DType::Float32)
      ctx.fail(std::string("X must be float32, got ") + dtype_name(ctx.input_dtype(0)));
    const auto& s = ctx.input_shape(0);
    if (s.size() != 1 && s.size() != 2)
      ctx.fail("X must be [N, C] or [C], got shape " + to_string(s));
    if (s.back() >= 0 && static_cast<size_t>(s.back()) != labels)
      ctx.fail("X has " + std::to_string(s.back()) + " columns but there are " +
               std::to_string(labels) + " class labels");
  }
  ctx.set_output_type(
      0, TypeShape::of_kind(ValueKind::Sequence,
                            TypeShape::of_kind(ValueKind::Map, tensor_type(DType::Float32),
                                               strings ? DType::String : DType::Int64)));
}

DType cast_map_dtype(const Node& node) {
  const std::string to = node.attr_string("cast_to", "TO_FLOAT");
  if (to == "TO_FLOAT") return DType::Float32;
  if (to == "TO_STRING") return DType::String;
  if (to == "TO_INT64") return DType::Int64;
  node.fail("attribute 'cast_to' is '" + to + "', expected TO_FLOAT, TO_STRING or TO_INT64");
}

const TypeShape& map_input(InferenceContext& ctx) {
  const TypeShape& t = ctx.input_type(0);
  if (t.has_shape && t.kind != ValueKind::Map)
    ctx.fail("input 0 ('" + ctx.node().inputs[0] + "') is " + t.text() + ", expected a map");
  return t;
}

void infer_cast_map(InferenceContext& ctx) {
  const TypeShape& t = map_input(ctx);
  if (t.has_shape && t.key_dtype != DType::Int64 && t.key_dtype != DType::Undefined)
    ctx.fail("the map's keys must be int64, got " + std::string(dtype_name(t.key_dtype)));
  const std::string form = ctx.node().attr_string("map_form", "DENSE");
  if (form != "DENSE" && form != "SPARSE")
    ctx.fail("attribute 'map_form' is '" + form + "', expected DENSE or SPARSE");
  if (form == "SPARSE" && ctx.node().attr_int("max_map", 1) < 1)
    ctx.fail("attribute 'max_map' must be positive");
  const DType d = cast_map_dtype(ctx.node());
  if (form == "SPARSE")
    ctx.set_output(0, d, {1, ctx.node().attr_int("max_map", 1)});
  else
    ctx.set_output(0, d, {1, -1});
}

void infer_dict_vectorizer(InferenceContext& ctx) {
  const TypeShape& t = map_input(ctx);
  const Node& n = ctx.node();
  const bool strings = n.has_attr("string_vocabulary");
  if (strings == n.has_attr("int64_vocabulary"))
    ctx.fail("exactly one of 'string_vocabulary' and 'int64_vocabulary' must be given");
  const DType key = strings ? DType::String : DType::Int64;
  if (t.has_shape && t.key_dtype != DType::Undefined && t.key_dtype != key)
    ctx.fail(std::string("the map's keys are ") + dtype_name(t.key_dtype) +
             " but the vocabulary is " + dtype_name(key));
  const auto size = static_cast<int64_t>(strings ? n.attr_strings("string_vocabulary").size()
                                                 : n.attr_ints("int64_vocabulary").size());
  ctx.set_output(0, t.element ? t.element->dtype : DType::Undefined, {1, size});
}

// ---- kernels ----

const Value& sequence_input(const Node& node, const Value& v, size_t i) {
  if (v.kind() != ValueKind::Sequence)
    node.fail("input " + std::to_string(i) + " ('" + node.inputs[i] + "') is " + v.type_string() +
                  ", expected a sequence",
              ErrorCode::InvalidArgument);
  return v;
}

int64_t scalar_int(const Node& node, const Tensor& t, const char* what) {
  if (t.numel() != 1 || (t.dtype() != DType::Int32 && t.dtype() != DType::Int64))
    node.fail(std::string(what) + " must be an int32 or int64 scalar, got " +
                  dtype_name(t.dtype()) + " " + to_string(t.shape()),
              ErrorCode::InvalidArgument);
  return t.dtype() == DType::Int64 ? t.data<int64_t>()[0] : t.data<int32_t>()[0];
}

// A position in [-n, n - 1] (or [-n, n] when `end_ok`), made non-negative.
int64_t position(const Node& node, const Tensor& t, int64_t n, bool end_ok) {
  const int64_t p = scalar_int(node, t, "position");
  if (p < -n || p > (end_ok ? n : n - 1))
    node.fail("position " + std::to_string(p) + " is out of range for a sequence of " +
                  std::to_string(n) + " tensors (valid: " + std::to_string(-n) + " to " +
                  std::to_string(end_ok ? n : n - 1) + ")",
              ErrorCode::InvalidArgument);
  return p < 0 ? p + n : p;
}

std::vector<Value> sequence_empty(const Node& node, const std::vector<Value>&) {
  return {Value::sequence({}, static_cast<DType>(node.attr_int("dtype", 1)))};
}

std::vector<Value> sequence_construct(const Node& node, const std::vector<Value>& in) {
  std::vector<Value> items;
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = tensor_input(node, in[i], i);
    if (t.dtype() != tensor_input(node, in[0], 0).dtype())
      node.fail(std::string("inputs must have one dtype, got ") +
                    dtype_name(in[0].tensor().dtype()) + " and " + dtype_name(t.dtype()),
                ErrorCode::InvalidArgument);
    items.push_back(t);
  }
  return {Value::sequence(std::move(items))};
}

std::vector<Value> sequence_at(const Node& node, const std::vector<Value>& in) {
  const auto& items = sequence_input(node, in[0], 0).items();
  const auto n = static_cast<int64_t>(items.size());
  return {items[static_cast<size_t>(position(node, tensor_input(node, in[1], 1), n, false))]};
}

std::vector<Value> sequence_insert(const Node& node, const std::vector<Value>& in) {
  const Value& seq = sequence_input(node, in[0], 0);
  const Tensor& t = tensor_input(node, in[1], 1);
  if (seq.element_dtype() != DType::Undefined && t.dtype() != seq.element_dtype())
    node.fail(std::string("the tensor is ") + dtype_name(t.dtype()) + ", the sequence holds " +
                  dtype_name(seq.element_dtype()),
              ErrorCode::InvalidArgument);
  std::vector<Value> items = seq.items();
  const auto n = static_cast<int64_t>(items.size());
  const int64_t at =
      in.size() > 2 && in[2].defined() ? position(node, tensor_input(node, in[2], 2), n, true) : n;
  items.insert(items.begin() + at, t);
  return {Value::sequence(std::move(items), t.dtype())};
}

std::vector<Value> sequence_erase(const Node& node, const std::vector<Value>& in) {
  const Value& seq = sequence_input(node, in[0], 0);
  std::vector<Value> items = seq.items();
  const auto n = static_cast<int64_t>(items.size());
  if (n == 0) node.fail("cannot erase from an empty sequence", ErrorCode::InvalidArgument);
  const int64_t at = in.size() > 1 && in[1].defined()
                         ? position(node, tensor_input(node, in[1], 1), n, false)
                         : n - 1;
  items.erase(items.begin() + at);
  return {Value::sequence(std::move(items), seq.element_dtype())};
}

std::vector<Value> sequence_length(const Node& node, const std::vector<Value>& in) {
  const auto n = static_cast<int64_t>(sequence_input(node, in[0], 0).items().size());
  return {Tensor::from_vector<int64_t>({}, {n})};
}

// Copies `count` elements (strings as objects, others as bytes).
void copy_elements(const Tensor& src, int64_t src_at, Tensor& dst, int64_t dst_at, int64_t count) {
  if (count <= 0) return;
  if (src.dtype() == DType::String) {
    std::copy_n(src.data<std::string>() + src_at, count, dst.data<std::string>() + dst_at);
    return;
  }
  const size_t e = dtype_size(src.dtype());
  std::memcpy(static_cast<char*>(dst.raw_data()) + static_cast<size_t>(dst_at) * e,
              static_cast<const char*>(src.raw_data()) + static_cast<size_t>(src_at) * e,
              static_cast<size_t>(count) * e);
}

void refuse_packed(const Node& node, DType d) {
  if (dtype_is_packed(d))
    node.fail(std::string("tensors of ") + dtype_name(d) + " are not supported here",
              ErrorCode::NotImplemented);
}

std::vector<Value> split_to_sequence(const Node& node, const std::vector<Value>& in) {
  const Tensor& x = tensor_input(node, in[0], 0);
  refuse_packed(node, x.dtype());
  if (x.rank() == 0) node.fail("input must have rank >= 1", ErrorCode::InvalidArgument);
  int64_t axis = node.attr_int("axis", 0);
  if (axis < -x.rank() || axis >= x.rank())
    node.fail(
        "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(x.rank()),
        ErrorCode::InvalidArgument);
  if (axis < 0) axis += x.rank();
  const int64_t dim = x.dim(axis);
  std::vector<int64_t> lengths;
  bool squeeze = false;
  if (in.size() > 1 && in[1].defined()) {
    const Tensor& split = tensor_input(node, in[1], 1);
    if (split.dtype() != DType::Int32 && split.dtype() != DType::Int64)
      node.fail(std::string("split must be int32 or int64, got ") + dtype_name(split.dtype()),
                ErrorCode::InvalidArgument);
    auto at = [&](int64_t i) {
      return split.dtype() == DType::Int64 ? split.data<int64_t>()[i] : split.data<int32_t>()[i];
    };
    if (split.rank() == 0) {
      const int64_t chunk = at(0);
      if (chunk <= 0)
        node.fail("split " + std::to_string(chunk) + " must be positive",
                  ErrorCode::InvalidArgument);
      for (int64_t done = 0; done < dim; done += chunk)
        lengths.push_back(std::min(chunk, dim - done));
    } else {
      int64_t sum = 0;
      for (int64_t i = 0; i < split.numel(); ++i) {
        if (at(i) < 0)
          node.fail("split has a negative length " + std::to_string(at(i)),
                    ErrorCode::InvalidArgument);
        lengths.push_back(at(i));
        sum += at(i);
      }
      if (sum != dim)
        node.fail("split lengths sum to " + std::to_string(sum) + " but axis " +
                      std::to_string(axis) + " has " + std::to_string(dim),
                  ErrorCode::InvalidArgument);
    }
  } else {
    lengths.assign(static_cast<size_t>(dim), 1);
    squeeze = node.attr_int("keepdims", 1) == 0;
  }
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  std::vector<Value> items;
  int64_t start = 0;
  for (int64_t len : lengths) {
    std::vector<int64_t> shape = x.shape();
    shape[static_cast<size_t>(axis)] = len;
    Tensor piece(x.dtype(), shape);
    for (int64_t o = 0; o < outer; ++o)
      copy_elements(x, (o * dim + start) * inner, piece, o * len * inner, len * inner);
    if (squeeze) {
      shape.erase(shape.begin() + axis);
      piece = piece.reshaped(shape);
    }
    items.push_back(piece);
    start += len;
  }
  return {Value::sequence(std::move(items), x.dtype())};
}

std::vector<Value> concat_from_sequence(const Node& node, const std::vector<Value>& in) {
  const auto& items = sequence_input(node, in[0], 0).items();
  if (items.empty())
    node.fail("cannot concatenate an empty sequence (its result's shape is unknown)",
              ErrorCode::InvalidArgument);
  const bool new_axis = node.attr_int("new_axis", 0) != 0;
  const Tensor& first = tensor_input(node, items[0], 0);
  refuse_packed(node, first.dtype());
  const int64_t rank = first.rank() + (new_axis ? 1 : 0);
  int64_t axis = node.attr_int("axis", 0);
  if (axis < -rank || axis >= rank)
    node.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank),
              ErrorCode::InvalidArgument);
  if (axis < 0) axis += rank;
  std::vector<Tensor> pieces;
  int64_t total = 0;
  for (size_t k = 0; k < items.size(); ++k) {
    Tensor t = items[k].tensor();
    // Rank checked before new_axis inserts at `axis`: a tensor of lower rank than tensor 0 would
    // put the new axis past its end (a heap overflow the run fuzzer found).
    if (t.dtype() != first.dtype() || t.rank() != first.rank())
      node.fail("tensor " + std::to_string(k) + " is " + dtype_name(t.dtype()) + " " +
                    to_string(t.shape()) + ", tensor 0 " + dtype_name(first.dtype()) + " " +
                    to_string(first.shape()),
                ErrorCode::InvalidArgument);
    if (new_axis) {
      std::vector<int64_t> s = t.shape();
      s.insert(s.begin() + axis, 1);
      t = t.reshaped(s);
    }
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && t.dim(d) != (pieces.empty() ? t.dim(d) : pieces[0].dim(d)))
        node.fail("tensor " + std::to_string(k) + " has shape " + to_string(t.shape()) +
                      ", which differs from tensor 0's off axis " + std::to_string(axis),
                  ErrorCode::InvalidArgument);
    total += t.dim(axis);
    pieces.push_back(t);
  }
  std::vector<int64_t> shape = pieces[0].shape();
  shape[static_cast<size_t>(axis)] = total;
  Tensor out(first.dtype(), shape);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= shape[static_cast<size_t>(d)];
  int64_t start = 0;
  for (const Tensor& p : pieces) {
    const int64_t len = p.dim(axis);
    for (int64_t o = 0; o < outer; ++o)
      copy_elements(p, o * len * inner, out, (o * total + start) * inner, len * inner);
    start += len;
  }
  return {out};
}

std::vector<Value> identity(const Node&, const std::vector<Value>& in) {
  return {in.at(0)};
}

std::vector<Value> optional(const Node&, const std::vector<Value>& in) {
  if (in.empty() || !in[0].defined()) return {Value::none()};
  return {Value::optional(in[0])};
}

std::vector<Value> optional_has_element(const Node&, const std::vector<Value>& in) {
  bool has = false;
  if (!in.empty() && in[0].defined())
    has = in[0].kind() != ValueKind::Optional || in[0].has_element();
  return {Tensor::from_vector<bool>({}, {has})};
}

std::vector<Value> optional_get_element(const Node& node, const std::vector<Value>& in) {
  if (in.empty() || !in[0].defined()) node.fail("the input is absent", ErrorCode::InvalidArgument);
  if (in[0].kind() != ValueKind::Optional) return {in[0]};
  if (!in[0].has_element())
    node.fail("the optional input '" + node.inputs[0] + "' holds no element",
              ErrorCode::InvalidArgument);
  return {in[0].element()};
}

// ZipMap: each row of X a map from the class labels to its probabilities. The labels are made
// once for the node; a run copies X once and makes each row's values a view of that copy.
ValueKernel prepare_zipmap(const Node& node) {
  const bool strings = node.has_attr("classlabels_strings");
  Tensor keys = strings ? [&] {
    const auto labels = node.attr_strings("classlabels_strings");
    return Tensor::from_strings({static_cast<int64_t>(labels.size())}, labels);
  }()
                        : [&] {
                            const auto labels = node.attr_ints("classlabels_int64s");
                            return Tensor::from_vector<int64_t>(
                                {static_cast<int64_t>(labels.size())}, labels);
                          }();
  return [keys](const Node& n, const std::vector<Value>& in) -> std::vector<Value> {
    const Tensor& x = tensor_input(n, in.at(0), 0);
    if (x.dtype() != DType::Float32 || (x.rank() != 1 && x.rank() != 2))
      n.fail(std::string("X must be a float32 [N, C] or [C] tensor, got ") + dtype_name(x.dtype()) +
                 " " + to_string(x.shape()),
             ErrorCode::InvalidArgument);
    const int64_t rows = x.rank() == 1 ? 1 : x.dim(0), cols = x.dim(x.rank() - 1);
    if (cols != keys.numel())
      n.fail("X has " + std::to_string(cols) + " columns but there are " +
                 std::to_string(keys.numel()) + " class labels",
             ErrorCode::InvalidArgument);
    // The maps view their own copy of X, which can be the caller's tensor (views of it would
    // change when the caller writes it again).
    auto copy = std::make_shared<Tensor>(x.clone());
    float* p = copy->data<float>();
    std::vector<Value> maps;
    maps.reserve(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r)
      maps.push_back(Value::map(keys, Tensor::wrap(DType::Float32, {cols}, p + r * cols, copy)));
    return {Value::sequence(std::move(maps))};
  };
}

const Value& map_value(const Node& node, const Value& v) {
  if (v.kind() != ValueKind::Map)
    node.fail("input 0 ('" + node.inputs[0] + "') is " + v.type_string() + ", expected a map",
              ErrorCode::InvalidArgument);
  return v;
}

// A map value as `to` (numbers to strings as onnxruntime writes them; strings to numbers).
void cast_element(const Node& node, const Tensor& src, int64_t i, Tensor& dst, int64_t j) {
  auto number = [&]() -> double {
    switch (src.dtype()) {
      case DType::Float32:
        return src.data<float>()[i];
      case DType::Float64:
        return src.data<double>()[i];
      case DType::Int64:
        return static_cast<double>(src.data<int64_t>()[i]);
      case DType::String: {
        const std::string& s = src.data<std::string>()[i];
        char* end = nullptr;
        const double d = std::strtod(s.c_str(), &end);
        if (s.empty() || *end)
          node.fail("map value \"" + s + "\" is not a number", ErrorCode::InvalidArgument);
        return d;
      }
      default:
        node.fail(std::string("map values of ") + dtype_name(src.dtype()) + " are not supported",
                  ErrorCode::NotImplemented);
    }
  };
  switch (dst.dtype()) {
    case DType::Float32:
      dst.data<float>()[j] = static_cast<float>(number());
      break;
    case DType::Int64:
      dst.data<int64_t>()[j] = static_cast<int64_t>(number());
      break;
    default: {  // String
      if (src.dtype() == DType::String) {
        dst.data<std::string>()[j] = src.data<std::string>()[i];
      } else {
        char buf[64];
        // onnxruntime's std::to_string: "7.250000" for a float.
        if (src.dtype() == DType::Int64)
          std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(src.data<int64_t>()[i]));
        else
          std::snprintf(buf, sizeof buf, "%f", number());
        dst.data<std::string>()[j] = buf;
      }
    }
  }
}

std::vector<Value> cast_map(const Node& node, const std::vector<Value>& in) {
  const Value& m = map_value(node, in[0]);
  if (m.keys().dtype() != DType::Int64)
    node.fail("the map's keys must be int64, got string", ErrorCode::InvalidArgument);
  const DType to = cast_map_dtype(node);
  const int64_t* keys = m.keys().data<int64_t>();
  std::vector<int64_t> order(static_cast<size_t>(m.keys().numel()));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return keys[a] < keys[b]; });
  if (node.attr_string("map_form", "DENSE") == "DENSE") {
    Tensor out(to, {1, static_cast<int64_t>(order.size())});
    for (size_t j = 0; j < order.size(); ++j)
      cast_element(node, m.values(), order[j], out, static_cast<int64_t>(j));
    return {out};
  }
  const int64_t max_map = node.attr_int("max_map", 1);
  Tensor out(to, {1, max_map});
  if (to == DType::String) std::fill_n(out.data<std::string>(), max_map, "0");
  for (int64_t i : order) {
    if (keys[i] < 0 || keys[i] >= max_map)
      node.fail("map key " + std::to_string(keys[i]) +
                    " is outside [0, max_map = " + std::to_string(max_map) + ")",
                ErrorCode::InvalidArgument);
    cast_element(node, m.values(), i, out, keys[i]);
  }
  return {out};
}

std::vector<Value> dict_vectorizer(const Node& node, const std::vector<Value>& in) {
  const Value& m = map_value(node, in[0]);
  const bool strings = node.has_attr("string_vocabulary");
  const DType key = strings ? DType::String : DType::Int64;
  if (m.keys().dtype() != key)
    node.fail(std::string("the map's keys are ") + dtype_name(m.keys().dtype()) +
                  " but the vocabulary is " + dtype_name(key),
              ErrorCode::InvalidArgument);
  const Tensor& values = m.values();
  refuse_packed(node, values.dtype());
  std::vector<int64_t> column(static_cast<size_t>(m.keys().numel()), -1);
  if (strings) {
    std::map<std::string, int64_t> index;
    const auto vocab = node.attr_strings("string_vocabulary");
    for (size_t i = 0; i < vocab.size(); ++i) index.emplace(vocab[i], static_cast<int64_t>(i));
    for (size_t i = 0; i < column.size(); ++i)
      if (auto it = index.find(m.keys().data<std::string>()[i]); it != index.end())
        column[i] = it->second;
  } else {
    std::map<int64_t, int64_t> index;
    const auto vocab = node.attr_ints("int64_vocabulary");
    for (size_t i = 0; i < vocab.size(); ++i) index.emplace(vocab[i], static_cast<int64_t>(i));
    for (size_t i = 0; i < column.size(); ++i)
      if (auto it = index.find(m.keys().data<int64_t>()[i]); it != index.end())
        column[i] = it->second;
  }
  const auto size = static_cast<int64_t>(strings ? node.attr_strings("string_vocabulary").size()
                                                 : node.attr_ints("int64_vocabulary").size());
  Tensor out(values.dtype(), {1, size});
  for (size_t i = 0; i < column.size(); ++i)
    if (column[i] >= 0) copy_elements(values, static_cast<int64_t>(i), out, column[i], 1);
  return {out};
}

}  // namespace

const Tensor& tensor_input(const Node& node, const Value& v, size_t i) {
  if (!v.is_tensor())
    node.fail("input " + std::to_string(i) + " ('" +
                  (i < node.inputs.size() ? node.inputs[i] : std::string("?")) + "') is " +
                  v.type_string() + ", expected a tensor",
              ErrorCode::InvalidArgument);
  return v.tensor();
}

namespace {
// The ops with nothing to prepare.
using ValueFn = std::vector<Value> (*)(const Node&, const std::vector<Value>&);
template <ValueFn fn>
ValueKernel value_op(const Node&) {
  return fn;
}
}  // namespace

const std::map<OpKey, HostPrepare>& value_ops() {
  static const std::map<OpKey, HostPrepare> ops = {
      {{"", "SequenceEmpty"}, value_op<sequence_empty>},
      {{"", "SequenceConstruct"}, value_op<sequence_construct>},
      {{"", "SequenceAt"}, value_op<sequence_at>},
      {{"", "SequenceInsert"}, value_op<sequence_insert>},
      {{"", "SequenceErase"}, value_op<sequence_erase>},
      {{"", "SequenceLength"}, value_op<sequence_length>},
      {{"", "SplitToSequence"}, value_op<split_to_sequence>},
      {{"", "ConcatFromSequence"}, value_op<concat_from_sequence>},
      {{"", "Identity"}, value_op<identity>},
      {{"", "Optional"}, value_op<optional>},
      {{"", "OptionalHasElement"}, value_op<optional_has_element>},
      {{"", "OptionalGetElement"}, value_op<optional_get_element>},
      {{kMl, "ZipMap"}, prepare_zipmap},
      {{kMl, "CastMap"}, value_op<cast_map>},
      {{kMl, "DictVectorizer"}, value_op<dict_vectorizer>},
  };
  return ops;
}

void register_sequence_schemas(SchemaRegistry& r) {
  constexpr int kMany = 1 << 20;
  r.add({.op_type = "SequenceEmpty",
         .min_opset = 11,
         .min_inputs = 0,
         .max_inputs = 0,
         .infer = infer_sequence_empty,
         .takes_values = true});
  r.add({.op_type = "SequenceConstruct",
         .min_opset = 11,
         .max_inputs = kMany,
         .infer = infer_sequence_construct,
         .takes_values = true});
  r.add({.op_type = "SequenceAt",
         .min_opset = 11,
         .min_inputs = 2,
         .max_inputs = 2,
         .infer = infer_sequence_at,
         .takes_values = true});
  r.add({.op_type = "SequenceInsert",
         .min_opset = 11,
         .min_inputs = 2,
         .max_inputs = 3,
         .infer = infer_sequence_insert,
         .takes_values = true});
  r.add({.op_type = "SequenceErase",
         .min_opset = 11,
         .max_inputs = 2,
         .infer = infer_sequence_erase,
         .takes_values = true});
  r.add({.op_type = "SequenceLength",
         .min_opset = 11,
         .infer = infer_sequence_length,
         .takes_values = true});
  r.add({.op_type = "SplitToSequence",
         .min_opset = 11,
         .max_inputs = 2,
         .infer = infer_split_to_sequence,
         .takes_values = true});
  r.add({.op_type = "ConcatFromSequence",
         .min_opset = 11,
         .infer = infer_concat_from_sequence,
         .takes_values = true});
  r.add({.op_type = "SequenceMap",
         .min_opset = 17,
         .max_inputs = kMany,
         .max_outputs = kMany,
         .infer = infer_sequence_map,
         .takes_values = true});
  r.add({.op_type = "Optional",
         .min_opset = 15,
         .min_inputs = 0,
         .infer = infer_optional,
         .takes_values = true});
  r.add({.op_type = "OptionalHasElement",
         .min_opset = 15,
         .min_inputs = 0,
         .infer = infer_optional_has_element,
         .takes_values = true});
  r.add({.op_type = "OptionalGetElement",
         .min_opset = 15,
         .infer = infer_optional_get_element,
         .takes_values = true});
  r.add({.op_type = "ZipMap", .domain = kMl, .infer = infer_zipmap, .takes_values = true});
  r.add({.op_type = "CastMap", .domain = kMl, .infer = infer_cast_map, .takes_values = true});
  r.add({.op_type = "DictVectorizer",
         .domain = kMl,
         .infer = infer_dict_vectorizer,
         .takes_values = true});
}

}  // namespace quilt
