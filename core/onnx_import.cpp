// ONNX import: protobuf -> Model. All file access is bounded and every failure names the file.
#include "core/onnx_import.hpp"

#include <fcntl.h>
#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "core/half.hpp"
#include "core/onnx_wire.hpp"
#include "core/op_schema.hpp"
#include "core/parse_int.hpp"

namespace quilt {
namespace fs = std::filesystem;

namespace {

void check_is_file(const std::string& path, const char* what) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw Error(ErrorCode::Io, std::string(what) + " '" + path + "' does not exist");
  if (fs::is_directory(path, ec))
    throw Error(ErrorCode::Io, std::string(what) + " '" + path + "' is a directory, not a file");
}

// Reads from fd until end of file; a regular file in one read, into a buffer of its size.
std::string read_all(int fd, const std::string& path, const char* what) {
  struct stat st {};
  const size_t hint =
      fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? static_cast<size_t>(st.st_size) : 0;
  std::string data;
  size_t used = 0;
  for (;;) {
    if (used == data.size()) data.resize(std::max(2 * data.size(), hint + 4096));
    const ssize_t n = read(fd, data.data() + used, data.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      throw Error(ErrorCode::Io, std::string("error reading ") + what + " '" + path +
                                     "': " + std::strerror(errno));
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  data.resize(used);
  return data;
}

// An open file descriptor, closed on scope exit.
class FileDescriptor {
 public:
  FileDescriptor(const std::string& path, const char* what) {
    check_is_file(path, what);
    do fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    while (fd_ < 0 && errno == EINTR);
    if (fd_ < 0)
      throw Error(ErrorCode::Io,
                  std::string("cannot open ") + what + " '" + path + "': " + std::strerror(errno));
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() { close(fd_); }
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

std::string read_file(const std::string& path, const char* what) {
  FileDescriptor fd(path, what);
  return read_all(fd.get(), path, what);
}

// The serialized model being imported: in memory, or a file, read where needed (its weights
// straight into their tensors) rather than whole.
struct ModelSource {
  std::span<const std::byte> bytes;  // the model in memory; empty for a file
  int fd = -1;                       // the file, when fd >= 0
  uint64_t size = 0;
  std::string name;  // for messages

  // Copies n bytes at offset into dst.
  void read(uint64_t offset, size_t n, void* dst, const std::string& where) const {
    if (fd < 0) {
      std::memcpy(dst, bytes.data() + offset, n);
      return;
    }
    auto* out = static_cast<char*>(dst);
    while (n) {
      const ssize_t got = pread(fd, out, n, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0)
        throw Error(ErrorCode::Io, where + " could not be read from '" + name +
                                       "': " + (got < 0 ? std::strerror(errno) : "file shrank"));
      out += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<size_t>(got);
    }
  }
};

struct ImportContext {
  std::string model_name;         // for messages
  std::string external_data_dir;  // "" = external data forbidden
  std::map<std::string, int64_t> opsets;
  const ModelSource* source = nullptr;  // where split-off raw_data lives
};

DType dtype_from_onnx(int32_t t) {
  auto d = static_cast<DType>(t);
  return dtype_supported(d) ? d : DType::Undefined;
}

std::vector<int64_t> dims_of(const onnx::TensorProto& p) {
  return {p.dims().begin(), p.dims().end()};
}

// Packed (4- and 2-bit) tensors hold their packed bytes, one per field value (as onnx.helper
// writes them).
template <class Dst, class Field>
void copy_field(Tensor& t, const Field& field, const std::string& where) {
  const int bits = dtype_packed_bits(t.dtype());
  const int64_t need = bits ? static_cast<int64_t>(t.nbytes()) : t.numel();
  if (static_cast<int64_t>(field.size()) != need)
    throw Error(ErrorCode::InvalidModel,
                where + " has " + std::to_string(field.size()) + " values but its shape " +
                    to_string(t.shape()) + " needs " + std::to_string(need) +
                    (bits ? std::string(" (bytes of packed ") + dtype_name(t.dtype()) + ", " +
                                std::to_string(8 / bits) + " elements a byte)"
                          : std::string()));
  Dst* out = static_cast<Dst*>(t.raw_data());
  int64_t i = 0;
  for (const auto& v : field) out[i++] = static_cast<Dst>(v);
}

void read_external(const onnx::TensorProto& p, Tensor& t, const ImportContext& ctx,
                   const std::string& where) {
  std::string location;
  int64_t offset = 0, length = -1;
  auto number = [&](const std::string& key, const std::string& text) {
    const auto v = parse_int64(text);
    if (!v || *v < 0)
      throw Error(ErrorCode::InvalidModel, where + " external-data " + key + " is '" + text +
                                               "', expected a non-negative integer below 2^63");
    return *v;
  };
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      offset = number("offset", kv.value());
    else if (kv.key() == "length")
      length = number("length", kv.value());
  }
  if (ctx.external_data_dir.empty())
    throw Error(ErrorCode::InvalidModel,
                where + " uses external data ('" + location +
                    "') but the model was loaded from memory without an external-data directory");
  if (location.empty())
    throw Error(ErrorCode::InvalidModel, where + " has external data without a location");
  fs::path rel(location);
  if (rel.is_absolute())
    throw Error(ErrorCode::InvalidModel, where + " external-data location '" + location +
                                             "' is absolute; it must be relative to the model");
  std::error_code ec;
  fs::path base = fs::weakly_canonical(fs::path(ctx.external_data_dir), ec);
  fs::path full = ec ? fs::path() : fs::weakly_canonical(base / rel, ec);
  if (ec)
    throw Error(ErrorCode::Io, where + " external-data location '" + location +
                                   "' cannot be resolved: " + ec.message());
  auto [bend, fend] = std::mismatch(base.begin(), base.end(), full.begin(), full.end());
  if (bend != base.end())
    throw Error(ErrorCode::InvalidModel, where + " external-data location '" + location +
                                             "' points outside the model's directory " +
                                             base.string());
  if (!fs::is_regular_file(full, ec))
    throw Error(ErrorCode::Io,
                where + " external-data file '" + full.string() + "' does not exist");
  const auto file_size = static_cast<int64_t>(fs::file_size(full, ec));
  const auto need = static_cast<int64_t>(t.nbytes());
  if (length >= 0 && length != need)
    throw Error(ErrorCode::InvalidModel, where + " external data length " + std::to_string(length) +
                                             " does not match its shape " + to_string(t.shape()) +
                                             " (" + std::to_string(need) + " bytes)");
  if (offset < 0 || offset > file_size || file_size - offset < need)
    throw Error(ErrorCode::InvalidModel, where + " external data [offset " +
                                             std::to_string(offset) + ", " + std::to_string(need) +
                                             " bytes] is out of range of '" + full.string() +
                                             "' (" + std::to_string(file_size) + " bytes)");
  std::ifstream f(full, std::ios::binary);
  f.seekg(offset);
  f.read(static_cast<char*>(t.raw_data()), need);
  if (!f)
    throw Error(ErrorCode::Io,
                where + " could not read external data from '" + full.string() + "'");
}

// split: the tensor's raw_data when the splitter took it out of p (see core/onnx_wire.hpp).
Tensor tensor_from_proto(const onnx::TensorProto& p, const ImportContext& ctx,
                         const std::string& where, const SplitTensor* split = nullptr) {
  DType dtype = dtype_from_onnx(p.data_type());
  if (dtype == DType::Undefined)
    throw Error(ErrorCode::NotImplemented,
                where + " has element type " + std::to_string(p.data_type()) + " (" +
                    onnx::TensorProto_DataType_Name(
                        static_cast<onnx::TensorProto_DataType>(p.data_type())) +
                    "), which Quilt does not support");
  for (int64_t d : p.dims())
    if (d < 0)
      throw Error(ErrorCode::InvalidModel,
                  where + " has a negative dimension " + std::to_string(d));
  // Every path below writes all of the tensor or throws: no need to zero it first.
  Tensor t;
  try {
    t = Tensor::uninitialized(dtype, dims_of(p));
  } catch (const Error& e) {
    throw Error(e.code(), where + ": " + e.what());
  }
  if (dtype == DType::String) {
    // Strings live only in string_data (the spec forbids raw_data and external data for them).
    if (p.data_location() == onnx::TensorProto::EXTERNAL || p.has_raw_data())
      throw Error(ErrorCode::InvalidModel,
                  where +
                      " is a string tensor with raw or external data; strings must be in "
                      "string_data");
    if (p.string_data_size() != t.numel())
      throw Error(ErrorCode::InvalidModel, where + " has " + std::to_string(p.string_data_size()) +
                                               " strings but its shape " + to_string(t.shape()) +
                                               " needs " + std::to_string(t.numel()));
    std::copy(p.string_data().begin(), p.string_data().end(), t.data<std::string>());
    return t;
  }
  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    read_external(p, t, ctx, where);
    return t;
  }
  const bool has_raw = split ? split->has_raw : p.has_raw_data();
  if (has_raw) {
    const uint64_t raw_size = split ? split->raw_size : p.raw_data().size();
    if (raw_size != t.nbytes())
      throw Error(ErrorCode::InvalidModel, where + " raw_data has " + std::to_string(raw_size) +
                                               " bytes but its shape " + to_string(t.shape()) +
                                               " and type " + dtype_name(dtype) + " need " +
                                               std::to_string(t.nbytes()));
    if (!t.nbytes()) return t;
    if (split)
      ctx.source->read(split->raw_offset, t.nbytes(), t.raw_data(), where);
    else
      std::memcpy(t.raw_data(), p.raw_data().data(), t.nbytes());
    return t;
  }
  switch (dtype) {
    case DType::Float32:
      copy_field<float>(t, p.float_data(), where);
      break;
    case DType::Float64:
      copy_field<double>(t, p.double_data(), where);
      break;
    case DType::Int64:
      copy_field<int64_t>(t, p.int64_data(), where);
      break;
    case DType::UInt32:
      copy_field<uint32_t>(t, p.uint64_data(), where);
      break;
    case DType::UInt64:
      copy_field<uint64_t>(t, p.uint64_data(), where);
      break;
    case DType::Int32:
      copy_field<int32_t>(t, p.int32_data(), where);
      break;
    case DType::Int16:
      copy_field<int16_t>(t, p.int32_data(), where);
      break;
    case DType::Int8:
      copy_field<int8_t>(t, p.int32_data(), where);
      break;
    case DType::UInt16:
      copy_field<uint16_t>(t, p.int32_data(), where);
      break;
    case DType::UInt8:
      copy_field<uint8_t>(t, p.int32_data(), where);
      break;
    case DType::Float16:
    case DType::BFloat16:
      copy_field<uint16_t>(t, p.int32_data(), where);
      break;  // raw bits, one per int32
    case DType::Float8E4M3FN:
    case DType::Float8E4M3FNUZ:
    case DType::Float8E5M2:
    case DType::Float8E5M2FNUZ:
    case DType::Float8E8M0:
    case DType::Int4:
    case DType::UInt4:
    case DType::Float4E2M1:
    case DType::Int2:
    case DType::UInt2:
      copy_field<uint8_t>(t, p.int32_data(), where);
      break;  // raw bits (packed types: a byte of 2 or 4 elements), one per int32
    case DType::Bool:
      copy_field<uint8_t>(t, p.int32_data(), where);
      break;
    default:
      std::memset(t.raw_data(), 0, t.nbytes());
      break;
  }
  return t;
}

// What a type Quilt cannot hold is, for messages; "" for a holdable type (or no type).
std::string unsupported_type(const onnx::TypeProto& t) {
  if (t.has_tensor_type()) {
    const int32_t e = t.tensor_type().elem_type();
    if (e == 0 || dtype_supported(static_cast<DType>(e))) return "";
    std::string name = onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(e));
    if (name.empty()) name = "element type " + std::to_string(e);
    return "a tensor of " + name;
  }
  if (t.has_sequence_type()) {
    const std::string e = unsupported_type(t.sequence_type().elem_type());
    return e.empty() ? "" : "a sequence of " + e;
  }
  if (t.has_optional_type()) {
    const std::string e = unsupported_type(t.optional_type().elem_type());
    return e.empty() ? "" : "an optional of " + e;
  }
  if (t.has_map_type()) {
    const int32_t k = t.map_type().key_type();
    if (k != onnx::TensorProto::INT64 && k != onnx::TensorProto::STRING)
      return "a map with keys of element type " + std::to_string(k) +
             " (int64 and string are held)";
    const onnx::TypeProto& v = t.map_type().value_type();
    if (!v.has_tensor_type()) return "a map whose values are not tensors";
    return unsupported_type(v);
  }
  if (t.has_sparse_tensor_type()) return "a sparse tensor";
  return "";
}

ValueInfo value_info_from_type(const std::string& name, const onnx::TypeProto& type) {
  ValueInfo info;
  info.name = name;
  auto element = [](const onnx::TypeProto& e) {
    return e.value_case() == onnx::TypeProto::VALUE_NOT_SET
               ? nullptr
               : std::make_shared<const ValueInfo>(value_info_from_type("", e));
  };
  if (type.has_sequence_type()) {
    info.kind = ValueKind::Sequence;
    info.element = element(type.sequence_type().elem_type());
  } else if (type.has_optional_type()) {
    info.kind = ValueKind::Optional;
    info.element = element(type.optional_type().elem_type());
  } else if (type.has_map_type()) {
    info.kind = ValueKind::Map;
    info.key_dtype = dtype_from_onnx(type.map_type().key_type());
    info.element = element(type.map_type().value_type());
  } else if (type.has_tensor_type()) {
    const auto& tt = type.tensor_type();
    info.dtype = dtype_from_onnx(tt.elem_type());
    if (tt.has_shape()) {
      info.has_shape = true;
      for (const auto& d : tt.shape().dim()) {
        Dim dim;
        if (d.has_dim_value())
          dim.value = d.dim_value();
        else if (d.has_dim_param())
          dim.symbol = d.dim_param();
        info.shape.push_back(dim);
      }
    }
  }
  return info;
}

ValueInfo value_info_from_proto(const onnx::ValueInfoProto& v) {
  return value_info_from_type(v.name(), v.type());
}

std::shared_ptr<Graph> graph_from_proto(
    const onnx::GraphProto& g, const ImportContext& ctx,
    const std::vector<SplitTensor>* split_inits = nullptr,
    const std::vector<onnx::TensorProto>* split_protos = nullptr);

Attribute attribute_from_proto(const onnx::AttributeProto& a, const ImportContext& ctx,
                               const std::string& where) {
  Attribute out;
  out.name = a.name();
  const std::string w = where + " attribute '" + a.name() + "'";
  switch (a.type()) {
    case onnx::AttributeProto::FLOAT:
      out.kind = Attribute::Kind::Float;
      out.f = a.f();
      break;
    case onnx::AttributeProto::INT:
      out.kind = Attribute::Kind::Int;
      out.i = a.i();
      break;
    case onnx::AttributeProto::STRING:
      out.kind = Attribute::Kind::String;
      out.s = a.s();
      break;
    case onnx::AttributeProto::TENSOR:
      out.kind = Attribute::Kind::Tensor;
      out.t = tensor_from_proto(a.t(), ctx, w);
      break;
    case onnx::AttributeProto::GRAPH:
      out.kind = Attribute::Kind::Graph;
      out.g = graph_from_proto(a.g(), ctx);
      break;
    case onnx::AttributeProto::FLOATS:
      out.kind = Attribute::Kind::Floats;
      out.floats.assign(a.floats().begin(), a.floats().end());
      break;
    case onnx::AttributeProto::INTS:
      out.kind = Attribute::Kind::Ints;
      out.ints.assign(a.ints().begin(), a.ints().end());
      break;
    case onnx::AttributeProto::STRINGS:
      out.kind = Attribute::Kind::Strings;
      out.strings.assign(a.strings().begin(), a.strings().end());
      break;
    case onnx::AttributeProto::TENSORS:
      out.kind = Attribute::Kind::Tensors;
      for (const auto& t : a.tensors()) out.tensors.push_back(tensor_from_proto(t, ctx, w));
      break;
    case onnx::AttributeProto::GRAPHS:
      out.kind = Attribute::Kind::Graphs;
      for (const auto& g : a.graphs()) out.graphs.push_back(graph_from_proto(g, ctx));
      break;
    default:
      out.kind = Attribute::Kind::Other;
      break;  // sparse tensors, type protos: kept by name
  }
  return out;
}

// The model's graph comes with its initializers split off (see core/onnx_wire.hpp), in
// split_inits and their parsed protos; subgraphs keep theirs in the proto.
std::shared_ptr<Graph> graph_from_proto(const onnx::GraphProto& g, const ImportContext& ctx,
                                        const std::vector<SplitTensor>* split_inits,
                                        const std::vector<onnx::TensorProto>* split_protos) {
  auto graph = std::make_shared<Graph>();
  graph->name = g.name();
  graph->opsets = ctx.opsets;
  for (const auto& init : g.initializer())
    graph->initializers[init.name()] =
        tensor_from_proto(init, ctx, "initializer '" + init.name() + "'");
  if (split_inits)
    for (size_t i = 0; i < split_inits->size(); ++i) {
      const onnx::TensorProto& init = (*split_protos)[i];
      graph->initializers[init.name()] =
          tensor_from_proto(init, ctx, "initializer '" + init.name() + "'", &(*split_inits)[i]);
    }
  for (const auto& v : g.input()) graph->inputs.push_back(value_info_from_proto(v));
  for (const auto& v : g.output()) graph->outputs.push_back(value_info_from_proto(v));
  for (const auto* list : {&g.input(), &g.output()})
    for (const auto& v : *list)
      if (std::string what = unsupported_type(v.type()); !what.empty())
        graph->unsupported_types[v.name()] = what;
  for (const auto& v : g.value_info()) graph->value_info[v.name()] = value_info_from_proto(v);
  for (const auto& n : g.node()) {
    Node node;
    node.index = graph->nodes.size();
    node.name = n.name();
    node.op_type = n.op_type();
    node.domain = n.domain() == "ai.onnx" ? "" : n.domain();
    node.inputs.assign(n.input().begin(), n.input().end());
    node.outputs.assign(n.output().begin(), n.output().end());
    auto it = ctx.opsets.find(node.domain);
    node.opset = it == ctx.opsets.end() ? 0 : it->second;
    std::string where = "[";
    where += node.display();
    where += "]";
    for (const auto& a : n.attribute())
      node.attributes[a.name()] = attribute_from_proto(a, ctx, where);
    graph->nodes.push_back(std::move(node));
  }
  return graph;
}

Model load_model(const ModelSource& source, const std::string& external_data_dir) {
  const std::string& display_name = source.name;
  if (source.size > static_cast<uint64_t>(INT32_MAX))
    throw Error(
        ErrorCode::NotImplemented,
        "model '" + display_name + "' is larger than 2 GiB; store its weights as external data");
  if (source.size == 0)
    throw Error(ErrorCode::InvalidModel, "model '" + display_name + "' is empty");
  // Parse the skeleton and the initializers' headers; their raw_data stays where it is until
  // each tensor is filled. What the splitter does not walk, protobuf parses (and judges) whole.
  onnx::ModelProto proto;
  WireReader reader =
      source.fd >= 0 ? WireReader(source.fd, source.size, source.name) : WireReader(source.bytes);
  std::optional<SplitModel> split = split_model(reader);
  std::vector<onnx::TensorProto> split_protos;
  if (split) {
    bool ok = proto.ParseFromString(split->model);
    split_protos.resize(split->initializers.size());
    for (size_t i = 0; ok && i < split_protos.size(); ++i)
      ok = split_protos[i].ParseFromString(split->initializers[i].proto);
    if (!ok) {
      split.reset();
      split_protos.clear();
      proto.Clear();
    }
  }
  if (!split) {
    std::string whole;
    std::span<const std::byte> bytes = source.bytes;
    if (source.fd >= 0) {
      whole.resize(source.size);
      source.read(0, whole.size(), whole.data(), "model file '" + display_name + "'");
      bytes = {reinterpret_cast<const std::byte*>(whole.data()), whole.size()};
    }
    if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
      throw Error(ErrorCode::InvalidModel, "model '" + display_name +
                                               "' is not a valid ONNX protobuf (truncated or "
                                               "not an ONNX file)");
  }
  if (proto.ir_version() <= 0 || !proto.has_graph())
    throw Error(ErrorCode::InvalidModel,
                "model '" + display_name + "' is not an ONNX model (" +
                    (proto.ir_version() <= 0 ? "no ir_version" : "no graph") + ")");
  ImportContext ctx;
  ctx.model_name = display_name;
  ctx.external_data_dir = external_data_dir;
  ctx.source = &source;
  if (proto.ir_version() > kNewestIrVersion)
    throw Error(ErrorCode::NotImplemented, "model '" + display_name + "' has IR version " +
                                               std::to_string(proto.ir_version()) +
                                               "; this Quilt reads IR versions up to " +
                                               std::to_string(kNewestIrVersion));
  for (const auto& op : proto.opset_import()) {
    const std::string domain = op.domain() == "ai.onnx" ? "" : op.domain();
    const std::string shown = domain.empty() ? "ai.onnx" : domain;
    if (op.version() <= 0)
      throw Error(ErrorCode::InvalidModel,
                  "model '" + display_name + "': opset_import of domain '" + shown +
                      "' has version " + std::to_string(op.version()) + ", expected >= 1");
    if (auto newest = newest_opset(domain); newest && op.version() > newest)
      throw Error(ErrorCode::NotImplemented, "model '" + display_name + "' imports opset " +
                                                 std::to_string(op.version()) + " of domain '" +
                                                 shown + "'; the newest this Quilt implements is " +
                                                 std::to_string(newest));
    ctx.opsets[domain] = op.version();
  }
  if (ctx.opsets.empty() && proto.ir_version() < 3) ctx.opsets[""] = 1;
  Model model;
  model.ir_version = proto.ir_version();
  model.path = display_name;
  ModelMetadata& meta = model.metadata;
  meta.producer_name = proto.producer_name();
  meta.producer_version = proto.producer_version();
  meta.domain = proto.domain();
  if (proto.has_model_version()) meta.model_version = proto.model_version();
  meta.description = proto.doc_string();
  meta.graph_name = proto.graph().name();
  meta.graph_description = proto.graph().doc_string();
  for (const auto& p : proto.metadata_props()) meta.custom[p.key()] = p.value();
  meta.ir_version = proto.ir_version();
  meta.opsets = ctx.opsets;
  model.graph = std::move(*graph_from_proto(
      proto.graph(), ctx, split ? &split->initializers : nullptr, split ? &split_protos : nullptr));
  resolve_implicit_inputs(model.graph);
  return model;
}

}  // namespace

Model load_model_bytes(std::span<const std::byte> bytes, const std::string& external_data_dir,
                       const std::string& display_name) {
  return load_model(ModelSource{bytes, -1, bytes.size(), display_name}, external_data_dir);
}

Model load_model_file(const std::string& path) {
  const FileDescriptor fd(path, "model file");
  struct stat st {};
  if (fstat(fd.get(), &st) != 0)
    throw Error(ErrorCode::Io, "cannot read model file '" + path + "': " + std::strerror(errno));
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  if (!S_ISREG(st.st_mode)) {  // a pipe or a device: read what it gives
    const std::string data = read_all(fd.get(), path, "model file");
    return load_model(
        ModelSource{
            {reinterpret_cast<const std::byte*>(data.data()), data.size()}, -1, data.size(), path},
        dir);
  }
  return load_model(ModelSource{{}, fd.get(), static_cast<uint64_t>(st.st_size), path}, dir);
}

Tensor load_tensor_file(const std::string& path) {
  std::string data = read_file(path, "tensor file");
  onnx::TensorProto proto;
  if (!proto.ParseFromString(data))
    throw Error(ErrorCode::InvalidArgument,
                "tensor file '" + path + "' is not a serialized TensorProto");
  ImportContext ctx;
  ctx.external_data_dir = fs::path(path).parent_path().string();
  return tensor_from_proto(proto, ctx, "tensor file '" + path + "'");
}

namespace {

Value value_from_sequence(const onnx::SequenceProto& p, const ImportContext& ctx,
                          const std::string& where);

Value value_from_map(const onnx::MapProto& p, const ImportContext& ctx, const std::string& where) {
  const Value values = value_from_sequence(p.values(), ctx, where + " map values");
  Tensor keys;
  if (p.key_type() == onnx::TensorProto::INT64) {
    keys = Tensor::from_vector<int64_t>({p.keys_size()}, {p.keys().begin(), p.keys().end()});
  } else if (p.key_type() == onnx::TensorProto::STRING) {
    keys = Tensor::from_strings({p.string_keys_size()},
                                {p.string_keys().begin(), p.string_keys().end()});
  } else {
    throw Error(ErrorCode::NotImplemented, where + ": map keys of element type " +
                                               std::to_string(p.key_type()) +
                                               " (int64 and string are held)");
  }
  // Quilt holds a map's values as one 1-D tensor: each of the sequence's must be a scalar.
  const std::vector<Value>& items = values.items();
  const DType dtype = items.empty() ? values.element_dtype() : items[0].tensor().dtype();
  if (dtype == DType::Undefined)
    throw Error(ErrorCode::NotImplemented, where + ": map values must be tensors");
  std::vector<Tensor> scalars;
  for (const Value& item : items) {
    if (!item.is_tensor() || item.tensor().numel() != 1)
      throw Error(ErrorCode::NotImplemented,
                  where + ": a map value is not a one-element tensor (Quilt's maps hold scalars)");
    scalars.push_back(item.tensor().reshaped({1}));
  }
  Tensor flat(dtype, {static_cast<int64_t>(scalars.size())});
  for (size_t i = 0; i < scalars.size(); ++i) {
    if (dtype == DType::String)
      flat.data<std::string>()[i] = scalars[i].data<std::string>()[0];
    else
      std::memcpy(static_cast<char*>(flat.raw_data()) + i * dtype_size(dtype),
                  scalars[i].raw_data(), dtype_size(dtype));
  }
  try {
    return Value::map(keys, flat);
  } catch (const Error& e) {
    throw Error(ErrorCode::InvalidArgument, where + ": " + e.what());
  }
}

Value value_from_optional(const onnx::OptionalProto& p, const ImportContext& ctx,
                          const std::string& where) {
  switch (p.elem_type()) {
    case onnx::OptionalProto::TENSOR:
      if (!p.has_tensor_value()) return Value::none();
      return Value::optional(tensor_from_proto(p.tensor_value(), ctx, where));
    case onnx::OptionalProto::SEQUENCE:
      if (!p.has_sequence_value()) return Value::none();
      return Value::optional(value_from_sequence(p.sequence_value(), ctx, where));
    case onnx::OptionalProto::MAP:
      if (!p.has_map_value()) return Value::none();
      return Value::optional(value_from_map(p.map_value(), ctx, where));
    case onnx::OptionalProto::UNDEFINED:
      return Value::none();
    default:
      throw Error(ErrorCode::NotImplemented,
                  where + ": an optional of element type " + std::to_string(p.elem_type()));
  }
}

Value value_from_sequence(const onnx::SequenceProto& p, const ImportContext& ctx,
                          const std::string& where) {
  std::vector<Value> items;
  for (int i = 0; i < p.tensor_values_size(); ++i)
    items.push_back(tensor_from_proto(p.tensor_values(i), ctx, where));
  for (int i = 0; i < p.sequence_values_size(); ++i)
    items.push_back(value_from_sequence(p.sequence_values(i), ctx, where));
  for (int i = 0; i < p.map_values_size(); ++i)
    items.push_back(value_from_map(p.map_values(i), ctx, where));
  for (int i = 0; i < p.optional_values_size(); ++i)
    items.push_back(value_from_optional(p.optional_values(i), ctx, where));
  if (p.sparse_tensor_values_size())
    throw Error(ErrorCode::NotImplemented, where + ": a sequence of sparse tensors");
  try {
    return Value::sequence(std::move(items));
  } catch (const Error& e) {
    throw Error(ErrorCode::InvalidArgument, where + ": " + e.what());
  }
}

}  // namespace

Value load_value_file(const std::string& path, const ValueInfo& declared) {
  const std::string data = read_file(path, "value file");
  ImportContext ctx;
  ctx.external_data_dir = fs::path(path).parent_path().string();
  const std::string where = "value file '" + path + "'";
  auto bad = [&](const char* proto) {
    return Error(ErrorCode::InvalidArgument, where + " is not a serialized " + std::string(proto) +
                                                 " (the value is declared " +
                                                 type_string(declared) + ")");
  };
  switch (declared.kind) {
    case ValueKind::Tensor:
      return load_tensor_file(path);
    case ValueKind::Sequence: {
      onnx::SequenceProto proto;
      if (!proto.ParseFromString(data)) throw bad("SequenceProto");
      Value v = value_from_sequence(proto, ctx, where);
      if (v.items().empty() && declared.element && declared.element->kind == ValueKind::Tensor)
        v = Value::sequence({}, declared.element->dtype);
      return v;
    }
    case ValueKind::Map: {
      onnx::MapProto proto;
      if (!proto.ParseFromString(data)) throw bad("MapProto");
      return value_from_map(proto, ctx, where);
    }
    case ValueKind::Optional: {
      onnx::OptionalProto proto;
      if (!proto.ParseFromString(data)) throw bad("OptionalProto");
      return value_from_optional(proto, ctx, where);
    }
  }
  throw bad("value");
}

void save_tensor_file(const Tensor& tensor, const std::string& path, const std::string& name) {
  onnx::TensorProto proto;
  proto.set_name(name);
  proto.set_data_type(static_cast<int32_t>(tensor.dtype()));
  for (int64_t d : tensor.shape()) proto.add_dims(d);
  if (tensor.dtype() == DType::String) {
    const std::string* strings = tensor.data<std::string>();
    for (int64_t i = 0; i < tensor.numel(); ++i) proto.add_string_data(strings[i]);
  } else {
    proto.set_raw_data(tensor.raw_data(), tensor.nbytes());
  }
  std::ofstream f(path, std::ios::binary);
  if (!f || !proto.SerializeToOstream(&f))
    throw Error(ErrorCode::Io, "cannot write tensor file '" + path + "'");
}

}  // namespace quilt
