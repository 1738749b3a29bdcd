// quilt::Value: tensors, sequences, maps and optionals (docs/TYPES.md).
#include <algorithm>
#include <vector>

#include "quilt/quilt.hpp"

namespace quilt {

const char* value_kind_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::Tensor:
      return "tensor";
    case ValueKind::Sequence:
      return "sequence";
    case ValueKind::Map:
      return "map";
    case ValueKind::Optional:
      return "optional";
  }
  return "unknown";
}

const char* dtype_onnx_name(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return "float";
    case DType::Float64:
      return "double";
    case DType::Float16:
      return "float16";
    case DType::BFloat16:
      return "bfloat16";
    case DType::Undefined:
      return "?";
    default:
      return dtype_name(dtype);  // int64, uint8, bool, string, float8e4m3fn, ... as ONNX
  }
}

std::string type_string(const ValueInfo& info) {
  const std::string element = info.element ? type_string(*info.element) : "?";
  switch (info.kind) {
    case ValueKind::Tensor:
      return std::string("tensor(") + dtype_onnx_name(info.dtype) + ")";
    case ValueKind::Sequence:
      return "seq(" + element + ")";
    case ValueKind::Map:
      return std::string("map(") + dtype_onnx_name(info.key_dtype) + "," + element + ")";
    case ValueKind::Optional:
      return "optional(" + element + ")";
  }
  return "?";
}

Value::Value(Tensor tensor) : tensor_(std::move(tensor)) {}

namespace {

// a.type_string() == b.type_string(), without building the strings where the kinds and dtypes
// decide (a ZipMap's sequence of 200 maps built 400 of them per run).
bool same_type(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::Tensor:
      return a.tensor().dtype() == b.tensor().dtype();
    case ValueKind::Map:
      return a.keys().dtype() == b.keys().dtype() && a.values().dtype() == b.values().dtype();
    case ValueKind::Sequence:
      if (!a.items().empty() && !b.items().empty()) return same_type(a.items()[0], b.items()[0]);
      break;  // an empty one's type comes from its element dtype: compare the strings
    case ValueKind::Optional:
      if (a.has_element() && b.has_element()) return same_type(a.element(), b.element());
      break;
  }
  return a.type_string() == b.type_string();
}

}  // namespace

Value Value::sequence(std::vector<Value> items, DType element_dtype) {
  Value v;
  v.kind_ = ValueKind::Sequence;
  for (const Value& item : items) {
    if (!item.defined())
      throw Error(ErrorCode::InvalidArgument, "a sequence element is an undefined tensor");
    if (!same_type(item, items[0]))
      throw Error(ErrorCode::InvalidArgument, "a sequence's elements must have one type, got " +
                                                  items[0].type_string() + " and " +
                                                  item.type_string());
  }
  if (!items.empty() && items[0].is_tensor()) {
    const DType first = items[0].tensor().dtype();
    if (element_dtype != DType::Undefined && element_dtype != first)
      throw Error(ErrorCode::InvalidArgument,
                  std::string("a sequence of ") + dtype_name(element_dtype) +
                      " tensors given a tensor of " + dtype_name(first));
    element_dtype = first;
  }
  v.element_dtype_ = element_dtype;
  v.items_ = std::make_shared<const std::vector<Value>>(std::move(items));
  return v;
}

namespace {
// Whether the n keys are all different: pairwise for the few keys of a classifier's map (a
// ZipMap makes one map per row; a std::set per map was most of its cost), sorted beyond.
template <class T>
bool distinct(const T* keys, int64_t n) {
  if (n <= 32) {
    for (int64_t i = 1; i < n; ++i)
      for (int64_t j = 0; j < i; ++j)
        if (keys[i] == keys[j]) return false;
    return true;
  }
  std::vector<const T*> sorted;
  sorted.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) sorted.push_back(keys + i);
  std::sort(sorted.begin(), sorted.end(), [](const T* a, const T* b) { return *a < *b; });
  return std::adjacent_find(sorted.begin(), sorted.end(),
                            [](const T* a, const T* b) { return *a == *b; }) == sorted.end();
}
}  // namespace

Value Value::map(Tensor keys, Tensor values) {
  if (keys.dtype() != DType::Int64 && keys.dtype() != DType::String)
    throw Error(ErrorCode::InvalidArgument,
                std::string("map keys must be int64 or string, got ") + dtype_name(keys.dtype()));
  if (keys.rank() != 1 || values.rank() != 1 || keys.numel() != values.numel())
    throw Error(ErrorCode::InvalidArgument,
                "a map needs 1-D keys and values of one length, got keys " +
                    to_string(keys.shape()) + " and values " + to_string(values.shape()));
  const bool unique = keys.dtype() == DType::Int64
                          ? distinct(keys.data<int64_t>(), keys.numel())
                          : distinct(keys.data<std::string>(), keys.numel());
  if (!unique) throw Error(ErrorCode::InvalidArgument, "a map has a key twice");
  Value v;
  v.kind_ = ValueKind::Map;
  v.keys_ = std::move(keys);
  v.tensor_ = std::move(values);
  return v;
}

Value Value::optional(Value element) {
  if (element.kind() == ValueKind::Optional)
    throw Error(ErrorCode::InvalidArgument, "an optional cannot hold an optional");
  Value v;
  v.kind_ = ValueKind::Optional;
  v.element_dtype_ = element.is_tensor() ? element.tensor().dtype() : element.element_dtype();
  v.items_ = std::make_shared<const std::vector<Value>>(std::vector<Value>{std::move(element)});
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = ValueKind::Optional;
  v.items_ = std::make_shared<const std::vector<Value>>();
  return v;
}

namespace {
[[noreturn]] void wrong_kind(const Value& v, const char* wanted) {
  throw Error(ErrorCode::InvalidArgument, std::string("the value is ") + value_kind_name(v.kind()) +
                                              " " + v.type_string() + ", not " + wanted);
}
}  // namespace

const Tensor& Value::tensor() const {
  if (kind_ != ValueKind::Tensor) wrong_kind(*this, "a tensor");
  return tensor_;
}

const std::vector<Value>& Value::items() const {
  if (kind_ != ValueKind::Sequence) wrong_kind(*this, "a sequence");
  return *items_;
}

const Tensor& Value::keys() const {
  if (kind_ != ValueKind::Map) wrong_kind(*this, "a map");
  return keys_;
}

const Tensor& Value::values() const {
  if (kind_ != ValueKind::Map) wrong_kind(*this, "a map");
  return tensor_;
}

bool Value::has_element() const {
  if (kind_ != ValueKind::Optional) wrong_kind(*this, "an optional");
  return !items_->empty();
}

const Value& Value::element() const {
  if (!has_element())
    throw Error(ErrorCode::InvalidArgument, "the optional value holds no element");
  return (*items_)[0];
}

std::string Value::type_string() const {
  switch (kind_) {
    case ValueKind::Tensor:
      return std::string("tensor(") + dtype_onnx_name(tensor_.dtype()) + ")";
    case ValueKind::Sequence:
      if (!items_->empty()) return "seq(" + (*items_)[0].type_string() + ")";
      return element_dtype_ == DType::Undefined
                 ? "seq(?)"
                 : std::string("seq(tensor(") + dtype_onnx_name(element_dtype_) + "))";
    case ValueKind::Map:
      return std::string("map(") + dtype_onnx_name(keys_.dtype()) + ",tensor(" +
             dtype_onnx_name(tensor_.dtype()) + "))";
    case ValueKind::Optional:
      if (!items_->empty()) return "optional(" + (*items_)[0].type_string() + ")";
      return element_dtype_ == DType::Undefined
                 ? "optional(?)"
                 : std::string("optional(tensor(") + dtype_onnx_name(element_dtype_) + "))";
  }
  return "?";
}

Value Value::clone() const {
  Value v = *this;
  if (tensor_.defined()) v.tensor_ = tensor_.clone();
  if (keys_.defined()) v.keys_ = keys_.clone();
  if (items_) {
    std::vector<Value> items;
    for (const Value& item : *items_) items.push_back(item.clone());
    v.items_ = std::make_shared<const std::vector<Value>>(std::move(items));
  }
  return v;
}

}  // namespace quilt
