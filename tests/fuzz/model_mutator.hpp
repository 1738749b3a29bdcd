// A structure-aware mutator for serialized ONNX models (onnx::ModelProto), for libFuzzer's
// LLVMFuzzerCustomMutator / LLVMFuzzerCustomCrossOver (tests/fuzz/fuzz_model.cpp and the other
// model fuzzers). Byte-level mutation of a protobuf mostly breaks its framing, so most inputs
// stop in the parser; this one parses the model, changes one field the way a hostile or careless
// exporter would, and serializes it again, so the mutant reaches validation, shape inference,
// the optimizer and the kernels. Built on protobuf's reflection: every field of every message in
// the model (graph, nodes, attributes, subgraphs, tensors, types, shapes) is reachable.
//
// Mutations (one per call, chosen at random):
//   - a number (int/float/enum/bool) set to an edge value (0, -1, 1<<31, INT64_MAX, NaN, inf...)
//     or moved by a small step: dims, axes, pads, strides, data types, opset versions;
//   - a string set to another string of the same model (rewires a node to another value, gives
//     a node another node's op type or attribute name) or made empty;
//   - a repeated field: an element removed, duplicated or two swapped (node order, inputs,
//     dims, attribute lists);
//   - an unset field set, a set one cleared (a value's type or shape, an attribute's value);
//   - a node's op type replaced by another ONNX op, or an attribute added with an edge value;
//   - or, one time in four, and whenever the input is not a model, the fallback: byte-level
//     mutation (libFuzzer's LLVMFuzzerMutate), which keeps the parser itself fuzzed.
// Crossover: a node (with its attributes) or an initializer of one model put into the other.
#pragma once

#include <google/protobuf/reflection.h>
#include <onnx/onnx_pb.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace quilt::fuzz {

// Byte-level mutation: (data, size, max_size) -> new size; LLVMFuzzerMutate's signature.
using ByteMutator = size_t (*)(uint8_t* data, size_t size, size_t max_size);

enum class Mutation {
  Bytes,       // the fallback (not a model, or by chance)
  Number,      // a numeric, enum or bool field
  String,      // a string or bytes field
  RemoveItem,  // an element of a repeated field removed
  DuplicateItem,
  SwapItems,
  SetField,    // an unset singular field set
  ClearField,  // a set field cleared
  OpType,      // a node's op_type replaced by another ONNX op
  AddAttribute,
  kCount
};

namespace detail {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// One place in the model a mutation can touch: a field of a message (index: which element of a
// repeated field, -1 for the field as a whole).
struct Slot {
  Message* message;
  const FieldDescriptor* field;
  int index;
};

inline void collect(Message& m, std::vector<Slot>& slots, std::vector<std::string>& strings,
                    int depth) {
  if (depth > 16) return;
  const Reflection* r = m.GetReflection();
  const auto* d = m.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) {
      const int n = r->FieldSize(m, f);
      slots.push_back({&m, f, -1});
      for (int k = 0; k < n; ++k) {
        slots.push_back({&m, f, k});
        if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE)
          collect(*r->MutableRepeatedMessage(&m, f, k), slots, strings, depth + 1);
        else if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING &&
                 f->type() == FieldDescriptor::TYPE_STRING)
          strings.push_back(r->GetRepeatedString(m, f, k));
      }
      continue;
    }
    slots.push_back({&m, f, -1});
    if (!r->HasField(m, f)) continue;
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE)
      collect(*r->MutableMessage(&m, f), slots, strings, depth + 1);
    else if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING &&
             f->type() == FieldDescriptor::TYPE_STRING)
      strings.push_back(r->GetString(m, f));
  }
}

template <class T>
T pick(std::mt19937_64& rng, const T* values, size_t n) {
  return values[std::uniform_int_distribution<size_t>(0, n - 1)(rng)];
}

inline int64_t edge_int(std::mt19937_64& rng, int64_t current) {
  // clang-format off
  static constexpr int64_t kEdges[] = {
      0, 1, -1, 2, 3, -2, 7, 255, 256, 65536,
      int64_t{1} << 31, (int64_t{1} << 31) - 1, -(int64_t{1} << 31), int64_t{1} << 32,
      int64_t{1} << 62, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
  // clang-format on
  switch (std::uniform_int_distribution<int>(0, 3)(rng)) {
    case 0: {  // a small step, wrapping at the ends (in unsigned arithmetic: signed overflow is UB)
      const int64_t step = std::uniform_int_distribution<int64_t>(-3, 3)(rng);
      return static_cast<int64_t>(static_cast<uint64_t>(current) + static_cast<uint64_t>(step));
    }
    case 1:  // the negation, INT64_MIN staying itself
      return static_cast<int64_t>(uint64_t{0} - static_cast<uint64_t>(current));
    default:
      return pick(rng, kEdges, std::size(kEdges));
  }
}

inline double edge_float(std::mt19937_64& rng, double current) {
  // clang-format off
  static constexpr double kEdges[] = {
      0.0, -0.0, 1.0, -1.0, 0.5, 1e-30, 1e30, 1e300,
      std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
      -std::numeric_limits<double>::infinity(), std::numeric_limits<float>::max(),
      std::numeric_limits<float>::denorm_min()};
  // clang-format on
  if (std::uniform_int_distribution<int>(0, 3)(rng) == 0) return current * -2.0;
  return pick(rng, kEdges, std::size(kEdges));
}

inline bool mutate_number(Message& m, const FieldDescriptor* f, int index, std::mt19937_64& rng) {
  const Reflection* r = m.GetReflection();
  const bool rep = f->is_repeated();
  if (rep && index < 0) return false;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT64: {
      const int64_t v = edge_int(rng, rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f));
      rep ? r->SetRepeatedInt64(&m, f, index, v) : r->SetInt64(&m, f, v);
      return true;
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      const auto v = uint64_t(
          edge_int(rng, int64_t(rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f))));
      rep ? r->SetRepeatedUInt64(&m, f, index, v) : r->SetUInt64(&m, f, v);
      return true;
    }
    case FieldDescriptor::CPPTYPE_INT32: {
      const auto v = int32_t(uint32_t(
          uint64_t(edge_int(rng, rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f)))));
      rep ? r->SetRepeatedInt32(&m, f, index, v) : r->SetInt32(&m, f, v);
      return true;
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      const auto v = uint32_t(
          uint64_t(edge_int(rng, rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f))));
      rep ? r->SetRepeatedUInt32(&m, f, index, v) : r->SetUInt32(&m, f, v);
      return true;
    }
    case FieldDescriptor::CPPTYPE_FLOAT: {
      // Out of float's range becomes an infinity (the conversion itself would be UB).
      const double d = edge_float(rng, rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f));
      const float v =
          std::fabs(d) > std::numeric_limits<float>::max() && std::isfinite(d)
              ? std::copysign(std::numeric_limits<float>::infinity(), float(d > 0 ? 1 : -1))
              : float(d);
      rep ? r->SetRepeatedFloat(&m, f, index, v) : r->SetFloat(&m, f, v);
      return true;
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      const double v =
          edge_float(rng, rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f));
      rep ? r->SetRepeatedDouble(&m, f, index, v) : r->SetDouble(&m, f, v);
      return true;
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      const bool v = !(rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f));
      rep ? r->SetRepeatedBool(&m, f, index, v) : r->SetBool(&m, f, v);
      return true;
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      // Any number, known to the enum or not (proto2 keeps unknown ones out of the field, so
      // a known one): TensorProto.DataType, AttributeType...
      const auto* e = f->enum_type();
      const auto* value =
          e->value(std::uniform_int_distribution<int>(0, e->value_count() - 1)(rng));
      rep ? r->SetRepeatedEnum(&m, f, index, value) : r->SetEnum(&m, f, value);
      return true;
    }
    default:
      return false;
  }
}

inline std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find(' ', at), text.size());
    if (end > at) out.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

// The ONNX ops a node's op_type may become (a sample across the op families: shape-changing,
// axis-taking, windowed, integer, control flow).
inline std::string random_op(std::mt19937_64& rng) {
  static const std::vector<std::string> kOps = words(
      "Add Mul MatMul Gemm Conv ConvTranspose MaxPool AveragePool GlobalAveragePool Relu Softmax "
      "LogSoftmax Reshape Transpose Concat Split Slice Gather GatherElements GatherND ScatterND "
      "Expand Tile Pad Resize ReduceSum ReduceMean ArgMax TopK Squeeze Unsqueeze Flatten Cast "
      "Where Range ConstantOfShape Shape Size Einsum LSTM GRU RNN BatchNormalization "
      "LayerNormalization InstanceNormalization DepthToSpace SpaceToDepth CumSum OneHot NonZero "
      "Unique Loop If Scan QuantizeLinear DequantizeLinear QLinearConv MatMulInteger ConvInteger "
      "Trilu Mod Pow Clip Identity Dropout Constant Compress ReverseSequence RoiAlign "
      "NonMaxSuppression STFT DFT Col2Im GridSample Attention CenterCropPad");
  return pick(rng, kOps.data(), kOps.size());
}

inline std::string random_attribute_name(std::mt19937_64& rng) {
  static const std::vector<std::string> kNames = words(
      "axis axes pads strides dilations kernel_shape group perm keepdims to hidden_size "
      "direction epsilon alpha beta transA transB mode auto_pad output_padding output_shape "
      "ceil_mode k largest sorted blocksize split num_outputs value upper exclusive reverse ends "
      "starts block_size batch_dims");
  return pick(rng, kNames.data(), kNames.size());
}

inline void random_attribute(onnx::AttributeProto& a, std::mt19937_64& rng) {
  a.set_name(random_attribute_name(rng));
  switch (std::uniform_int_distribution<int>(0, 3)(rng)) {
    case 0:
      a.set_type(onnx::AttributeProto::INT);
      a.set_i(edge_int(rng, 1));
      break;
    case 1: {
      a.set_type(onnx::AttributeProto::INTS);
      const int n = std::uniform_int_distribution<int>(0, 8)(rng);
      for (int i = 0; i < n; ++i) a.add_ints(edge_int(rng, 1));
      break;
    }
    case 2:
      a.set_type(onnx::AttributeProto::FLOAT);
      a.set_f(float(edge_float(rng, 1.0)));
      break;
    default:
      a.set_type(onnx::AttributeProto::STRING);
      a.set_s(std::uniform_int_distribution<int>(0, 1)(rng) ? "NOTSET" : "SAME_UPPER");
      break;
  }
}

// Every node of the model, subgraphs' included.
inline void collect_nodes(onnx::GraphProto& g, std::vector<onnx::NodeProto*>& nodes, int depth) {
  if (depth > 16) return;
  for (auto& n : *g.mutable_node()) {
    nodes.push_back(&n);
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) collect_nodes(*a.mutable_g(), nodes, depth + 1);
      for (auto& sub : *a.mutable_graphs()) collect_nodes(sub, nodes, depth + 1);
    }
  }
}

template <class T>
void append_copy(Message& m, const FieldDescriptor* f, int index) {
  auto list = m.GetReflection()->GetMutableRepeatedFieldRef<T>(&m, f);
  list.Add(list.Get(index));
}

// Appends a copy of element `index` of the repeated field f.
inline bool duplicate_item(Message& m, const FieldDescriptor* f, int index) {
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      const Reflection* r = m.GetReflection();
      r->AddMessage(&m, f)->CopyFrom(r->GetRepeatedMessage(m, f, index));
      return true;
    }
    case FieldDescriptor::CPPTYPE_STRING:
      append_copy<std::string>(m, f, index);
      return true;
    case FieldDescriptor::CPPTYPE_INT64:
      append_copy<int64_t>(m, f, index);
      return true;
    case FieldDescriptor::CPPTYPE_UINT64:
      append_copy<uint64_t>(m, f, index);
      return true;
    case FieldDescriptor::CPPTYPE_INT32:
      append_copy<int32_t>(m, f, index);
      return true;
    case FieldDescriptor::CPPTYPE_UINT32:
      append_copy<uint32_t>(m, f, index);
      return true;
    case FieldDescriptor::CPPTYPE_FLOAT:
      append_copy<float>(m, f, index);
      return true;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      append_copy<double>(m, f, index);
      return true;
    case FieldDescriptor::CPPTYPE_BOOL:
      append_copy<bool>(m, f, index);
      return true;
    default:
      return false;  // repeated enums: none in ModelProto's messages
  }
}

// One structural mutation of `model`; false when the chosen one did not apply (the caller
// tries again).
inline bool mutate_once(onnx::ModelProto& model, Mutation kind, std::mt19937_64& rng) {
  if (kind == Mutation::OpType || kind == Mutation::AddAttribute) {
    std::vector<onnx::NodeProto*> nodes;
    if (model.has_graph()) collect_nodes(*model.mutable_graph(), nodes, 0);
    if (nodes.empty()) return false;
    onnx::NodeProto& node = *pick(rng, nodes.data(), nodes.size());
    if (kind == Mutation::OpType) {
      node.set_op_type(random_op(rng));
    } else {
      random_attribute(*node.add_attribute(), rng);
    }
    return true;
  }
  std::vector<Slot> slots;
  std::vector<std::string> strings;
  collect(model, slots, strings, 0);
  // Which slots suit the mutation; one of them at random.
  std::vector<const Slot*> fit;
  for (const Slot& s : slots) {
    const Reflection* r = s.message->GetReflection();
    const bool rep = s.field->is_repeated();
    const auto type = s.field->cpp_type();
    const bool scalar = type != FieldDescriptor::CPPTYPE_MESSAGE;
    bool ok = false;
    switch (kind) {
      case Mutation::Number:
        ok = scalar && type != FieldDescriptor::CPPTYPE_STRING &&
             (rep ? s.index >= 0 : r->HasField(*s.message, s.field));
        break;
      case Mutation::String:
        ok = type == FieldDescriptor::CPPTYPE_STRING &&
             (rep ? s.index >= 0 : r->HasField(*s.message, s.field));
        break;
      case Mutation::RemoveItem:
      case Mutation::DuplicateItem:
        ok = rep && s.index >= 0;
        break;
      case Mutation::SwapItems:
        ok = rep && s.index < 0 && r->FieldSize(*s.message, s.field) >= 2;
        break;
      case Mutation::SetField:
        ok = !rep && !r->HasField(*s.message, s.field);
        break;
      case Mutation::ClearField:
        ok = rep ? s.index < 0 && r->FieldSize(*s.message, s.field) > 0
                 : r->HasField(*s.message, s.field);
        break;
      default:
        break;
    }
    if (ok) fit.push_back(&s);
  }
  if (fit.empty()) return false;
  const Slot& s = *pick(rng, fit.data(), fit.size());
  Message& m = *s.message;
  const Reflection* r = m.GetReflection();
  const FieldDescriptor* f = s.field;
  switch (kind) {
    case Mutation::Number:
      return mutate_number(m, f, s.index, rng);
    case Mutation::String: {
      std::string v;
      const int how = std::uniform_int_distribution<int>(0, 5)(rng);
      if (how == 0 || strings.empty()) {
        v = "";
      } else if (how == 1) {
        v = (f->is_repeated() ? r->GetRepeatedString(m, f, s.index) : r->GetString(m, f)) + "_";
      } else {
        v = pick(rng, strings.data(), strings.size());
      }
      f->is_repeated() ? r->SetRepeatedString(&m, f, s.index, v) : r->SetString(&m, f, v);
      return true;
    }
    case Mutation::RemoveItem: {
      const int n = r->FieldSize(m, f);
      r->SwapElements(&m, f, s.index, n - 1);  // then keep the order of the others
      for (int k = s.index; k + 1 < n - 1; ++k) r->SwapElements(&m, f, k, k + 1);
      r->RemoveLast(&m, f);
      return true;
    }
    case Mutation::DuplicateItem: {
      if (!duplicate_item(m, f, s.index)) return false;
      const int n = r->FieldSize(m, f);  // move the copy next to its original, or anywhere
      const int to = std::uniform_int_distribution<int>(0, n - 1)(rng);
      for (int k = n - 1; k > to; --k) r->SwapElements(&m, f, k, k - 1);
      return true;
    }
    case Mutation::SwapItems: {
      const int n = r->FieldSize(m, f);
      std::uniform_int_distribution<int> at(0, n - 1);
      const int a = at(rng), b = at(rng);
      if (a == b) return false;
      r->SwapElements(&m, f, a, b);
      return true;
    }
    case Mutation::SetField:
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        r->MutableMessage(&m, f);  // present and empty: a type without elem_type, ...
        return true;
      }
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
        r->SetString(&m, f, strings.empty() ? "" : pick(rng, strings.data(), strings.size()));
        return true;
      }
      return mutate_number(m, f, -1, rng);
    case Mutation::ClearField:
      r->ClearField(&m, f);
      return true;
    default:
      return false;
  }
}

inline size_t store(const onnx::ModelProto& model, uint8_t* data, size_t max_size) {
  const size_t n = model.ByteSizeLong();
  if (n == 0 || n > max_size) return 0;
  return model.SerializeToArray(data, int(n)) ? n : 0;
}

}  // namespace detail

// LLVMFuzzerCustomMutator: mutates the model in data[0, size) in place (at most max_size
// bytes); returns the new size. `bytes` is the byte-level fallback. `done`, when given, is set
// to the mutation made (for the mutator's own test).
inline size_t mutate_model(uint8_t* data, size_t size, size_t max_size, unsigned seed,
                           ByteMutator bytes, Mutation* done = nullptr) {
  std::mt19937_64 rng(seed);
  if (done) *done = Mutation::Bytes;
  onnx::ModelProto model;
  const bool parsed = size > 0 && model.ParseFromArray(data, int(size)) && model.has_graph();
  if (parsed && std::uniform_int_distribution<int>(0, 3)(rng) != 0) {
    std::uniform_int_distribution<int> kinds(int(Mutation::Number), int(Mutation::kCount) - 1);
    for (int attempt = 0; attempt < 8; ++attempt) {
      const auto kind = Mutation(kinds(rng));
      onnx::ModelProto mutant = model;
      if (!detail::mutate_once(mutant, kind, rng)) continue;
      if (const size_t n = detail::store(mutant, data, max_size)) {
        if (done) *done = kind;
        return n;
      }
    }
  }
  return bytes(data, size, max_size);
}

// LLVMFuzzerCustomCrossOver: a node (with its attributes) or an initializer of model 2 inserted
// into model 1 at a random place. 0 (libFuzzer then skips it) when either is not a model.
inline size_t cross_over_models(const uint8_t* data1, size_t size1, const uint8_t* data2,
                                size_t size2, uint8_t* out, size_t max_out_size, unsigned seed) {
  std::mt19937_64 rng(seed);
  onnx::ModelProto a, b;
  if (!a.ParseFromArray(data1, int(size1)) || !a.has_graph() ||
      !b.ParseFromArray(data2, int(size2)) || !b.has_graph())
    return 0;
  auto insert_at = [&](auto* list, const auto& item) {
    list->Add()->CopyFrom(item);
    const int to = std::uniform_int_distribution<int>(0, list->size() - 1)(rng);
    for (int k = list->size() - 1; k > to; --k) list->SwapElements(k, k - 1);
  };
  const auto& g2 = b.graph();
  const bool node = g2.node_size() > 0 &&
                    (g2.initializer_size() == 0 || std::uniform_int_distribution<int>(0, 2)(rng));
  if (node) {
    insert_at(a.mutable_graph()->mutable_node(),
              g2.node(std::uniform_int_distribution<int>(0, g2.node_size() - 1)(rng)));
  } else if (g2.initializer_size() > 0) {
    insert_at(
        a.mutable_graph()->mutable_initializer(),
        g2.initializer(std::uniform_int_distribution<int>(0, g2.initializer_size() - 1)(rng)));
  } else {
    return 0;
  }
  return detail::store(a, out, max_out_size);
}

}  // namespace quilt::fuzz
