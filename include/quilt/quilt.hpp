// Quilt — a heterogeneous inference runtime for ONNX models.
//
// The public C++ API: Tensor, Session, SessionOptions, Error.
//
//   quilt::SessionOptions options;
//   options.threads = 2;
//   quilt::Session session("model.onnx", options);
//   quilt::Tensor x(quilt::DType::Float32, {1, 3, 224, 224});
//   auto outputs = session.run({{"input", x}});
//   const float* y = outputs.at("output").data<float>();
//
// Every failure is reported as a quilt::Error whose message starts with where it happened
// (file, node or input) and says what was expected.
//
// Besides running models: Session::metadata() (the model's producer, version, custom metadata),
// Session::overridable_initializers(), Session::plan() (where each node runs), RunProfile's
// Chrome trace, list_backends() (what Quilt can run on) and version().
//
// Installed, it is found with CMake's find_package(Quilt) (target Quilt::quilt, which carries
// the C++20 requirement) or pkg-config (`quilt`; compile with -std=c++20). Only what this header
// declares is exported from libquilt.
#pragma once

// The version of this header; version() is that of the library loaded at run time. The library's
// SONAME changes with MAJOR.MINOR (while MAJOR is 0, a minor version may change the C++ ABI).
// CMakeLists.txt reads the project's version from these three lines.
#define QUILT_VERSION_MAJOR 0
#define QUILT_VERSION_MINOR 1
#define QUILT_VERSION_PATCH 0
#define QUILT_VERSION_STRING "0.1.0"
// One number for comparisons: QUILT_VERSION_NUMBER >= QUILT_MAKE_VERSION(0, 2, 0).
#define QUILT_MAKE_VERSION(major, minor, patch) ((major)*10000 + (minor)*100 + (patch))
#define QUILT_VERSION_NUMBER \
  QUILT_MAKE_VERSION(QUILT_VERSION_MAJOR, QUILT_VERSION_MINOR, QUILT_VERSION_PATCH)

// Marks what libquilt exports; everything else in it is hidden (and a version script hides the
// rest of what the compiler would export, such as template instantiations of the std library).
#if defined(_WIN32)
#define QUILT_API
#define QUILT_HIDDEN
#else
#define QUILT_API __attribute__((visibility("default")))
#define QUILT_HIDDEN __attribute__((visibility("hidden")))
#endif

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace quilt {

// Quilt's version, "MAJOR.MINOR.PATCH".
QUILT_API const char* version();

// Element types. The numeric values are those of onnx.TensorProto.DataType.
enum class DType : int32_t {
  Undefined = 0,
  Float32 = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Float64 = 11,
  UInt32 = 12,
  UInt64 = 13,
  // Held as raw bits (access as uint16_t / uint8_t); core/float8.hpp converts them.
  BFloat16 = 16,
  Float8E4M3FN = 17,
  Float8E4M3FNUZ = 18,
  Float8E5M2 = 19,
  Float8E5M2FNUZ = 20,
  // 4-bit integers, packed two per byte as ONNX stores them: element 2k in the low nibble of
  // byte k, element 2k+1 in its high nibble (access the bytes as uint8_t; core/int4.hpp reads
  // and writes elements). nbytes() is (numel + 1) / 2; dtype_size() is 0 (less than a byte).
  UInt4 = 21,
  Int4 = 22,
  // 4-bit float (1 sign, 2 exponent, 1 mantissa bits; no inf, no NaN; largest 6), packed two per
  // byte like Int4. Held as raw bits; core/float8.hpp converts them.
  Float4E2M1 = 23,
  // 8-bit exponent-only float (2^(bits - 127), 0xFF is NaN; no sign, no zero), one byte each,
  // held as raw bits like the float8 types.
  Float8E8M0 = 24,
  // 2-bit integers, packed four per byte: element 4k + j in bits 2j and 2j + 1 of byte k.
  // nbytes() is (numel + 3) / 4; dtype_size() is 0.
  UInt2 = 25,
  Int2 = 26,
};

// Size of one element in bytes; 0 for Undefined, String (a string tensor's elements are
// std::string objects, accessed with data<std::string>(), never as raw bytes) and the packed
// types (less than a byte: int4, uint4, float4e2m1, int2, uint2).
QUILT_API size_t dtype_size(DType dtype);
// Bytes that numel elements take: numel * dtype_size, or numel * bits rounded up to whole bytes
// for the packed types.
QUILT_API size_t dtype_nbytes(DType dtype, int64_t numel);
// Bits per element of the packed types (4 for Int4, UInt4 and Float4E2M1, 2 for Int2 and UInt2);
// 0 for every other type.
constexpr int dtype_packed_bits(DType dtype) {
  switch (dtype) {
    case DType::Int4:
    case DType::UInt4:
    case DType::Float4E2M1:
      return 4;
    case DType::Int2:
    case DType::UInt2:
      return 2;
    default:
      return 0;
  }
}
// True for the types packed several elements a byte (int4, uint4, float4e2m1, int2, uint2).
constexpr bool dtype_is_packed(DType dtype) {
  return dtype_packed_bits(dtype) != 0;
}
// True for Int4 and UInt4 (the 4-bit integers, two elements per byte).
constexpr bool dtype_is_4bit(DType dtype) {
  return dtype == DType::Int4 || dtype == DType::UInt4;
}
// "float32", "int64", ...; "undefined" for anything Quilt does not know.
QUILT_API const char* dtype_name(DType dtype);
// True for the dtypes a Tensor can hold (everything above except Undefined).
QUILT_API bool dtype_supported(DType dtype);

enum class ErrorCode {
  InvalidArgument,  // bad input from the caller: wrong name, dtype, shape, option
  InvalidModel,     // the model file or graph is malformed
  NotImplemented,   // a valid model uses something Quilt does not support (yet)
  OutOfMemory,      // an allocation failed or would exceed the machine's memory
  Io,               // a file could not be read or written
  Runtime,          // anything else that failed while running
};

QUILT_API const char* error_code_name(ErrorCode code);

class QUILT_API Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// A dense, row-major tensor on the host. Copies share the same storage (like a shared_ptr);
// use clone() for a deep copy.
class QUILT_API Tensor {
 public:
  Tensor() = default;
  // Allocates zero-initialised storage. Throws Error(OutOfMemory) if the size overflows or
  // exceeds the machine's memory, Error(InvalidArgument) on a negative dim.
  Tensor(DType dtype, std::vector<int64_t> shape);
  // The same checks, but the contents are left uninitialised: for code that writes every
  // element (kernels' outputs), where zeroing first would be a wasted pass over memory.
  static Tensor uninitialized(DType dtype, std::vector<int64_t> shape);
  // For buffers made on every run (kernel outputs): large ones come from, and go back to, a
  // bounded cache of freed buffers of the same size, so repeated runs do not fault fresh
  // pages in each time. Zero-filled when `zero`.
  static Tensor scratch(DType dtype, std::vector<int64_t> shape, bool zero);
  // Copies nbytes() bytes from data (for String: numel() std::string objects).
  static Tensor from_data(DType dtype, std::vector<int64_t> shape, const void* data);
  template <class T>
  static Tensor from_vector(std::vector<int64_t> shape, const std::vector<T>& values);
  // A string tensor (DType::String) of the given values, row-major.
  static Tensor from_strings(std::vector<int64_t> shape, const std::vector<std::string>& values);
  // Uses memory owned elsewhere, without copying: data must hold nbytes() bytes and stay valid
  // while owner (or, with no owner, the caller) keeps it alive. Not for String.
  static Tensor wrap(DType dtype, std::vector<int64_t> shape, void* data,
                     std::shared_ptr<void> owner = nullptr);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t axis) const { return shape_.at(static_cast<size_t>(axis)); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return dtype_nbytes(dtype_, numel_); }
  bool defined() const { return dtype_ != DType::Undefined; }

  void* raw_data() { return data_; }
  const void* raw_data() const { return data_; }
  // Typed access; throws Error(InvalidArgument) if T does not match dtype().
  template <class T>
  T* data();
  template <class T>
  const T* data() const;

  Tensor clone() const;
  // Same storage, new shape with the same element count.
  Tensor reshaped(std::vector<int64_t> shape) const;
  // True if both tensors have the same storage.
  bool shares_storage_with(const Tensor& other) const { return storage_ == other.storage_; }

 private:
  struct NoZero {};
  Tensor(DType dtype, std::vector<int64_t> shape, NoZero);
  void allocate(bool zero, bool reuse = false);
  void check_type(DType requested) const;

  DType dtype_ = DType::Undefined;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  std::shared_ptr<void> storage_;
  void* data_ = nullptr;
};

// Maps C++ element types to DType. float16 is stored as uint16_t bits.
template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::Float32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::Float64;
}
template <>
constexpr DType dtype_of<int8_t>() {
  return DType::Int8;
}
template <>
constexpr DType dtype_of<int16_t>() {
  return DType::Int16;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::Int32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::Int64;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::UInt8;
}
template <>
constexpr DType dtype_of<uint16_t>() {
  return DType::UInt16;
}
template <>
constexpr DType dtype_of<uint32_t>() {
  return DType::UInt32;
}
template <>
constexpr DType dtype_of<uint64_t>() {
  return DType::UInt64;
}
template <>
constexpr DType dtype_of<bool>() {
  return DType::Bool;
}
template <>
constexpr DType dtype_of<std::string>() {
  return DType::String;
}

template <class T>
T* Tensor::data() {
  check_type(dtype_of<T>());
  return static_cast<T*>(data_);
}
template <class T>
const T* Tensor::data() const {
  check_type(dtype_of<T>());
  return static_cast<const T*>(data_);
}
template <class T>
Tensor Tensor::from_vector(std::vector<int64_t> shape, const std::vector<T>& values) {
  Tensor t(dtype_of<T>(), std::move(shape));
  if (static_cast<size_t>(t.numel()) != values.size())
    throw Error(ErrorCode::InvalidArgument, "Tensor::from_vector: shape has " +
                                                std::to_string(t.numel()) + " elements but " +
                                                std::to_string(values.size()) + " values given");
  T* out = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i];
  return t;
}

// One dimension of a declared shape: a fixed size, a named symbolic size ("batch"), or unknown.
struct Dim {
  int64_t value = -1;  // >= 0 when fixed
  std::string symbol;  // set when symbolic and named
  bool is_fixed() const { return value >= 0; }
};

QUILT_API std::string to_string(const std::vector<Dim>& shape);
QUILT_API std::string to_string(const std::vector<int64_t>& shape);

// What a value is: ONNX's tensor, sequence, map and optional types (docs/TYPES.md).
enum class ValueKind : int32_t { Tensor = 0, Sequence = 1, Map = 2, Optional = 3 };
// "tensor", "sequence", "map", "optional".
QUILT_API const char* value_kind_name(ValueKind kind);
// ONNX's name of an element type, as in its type notation: "float", "int64", "string", ...
QUILT_API const char* dtype_onnx_name(DType dtype);

struct ValueInfo {
  std::string name;
  DType dtype = DType::Undefined;  // a tensor's element type (Undefined for the other kinds)
  std::vector<Dim> shape;
  bool has_shape = false;  // false when the rank is unknown
  ValueKind kind = ValueKind::Tensor;
  // Sequence and Optional: the type of an element; Map: the type of its values (name unused).
  std::shared_ptr<const ValueInfo> element = nullptr;
  DType key_dtype = DType::Undefined;  // Map: int64 or string
};
// The type in ONNX's notation, as onnxruntime's NodeArg.type writes it: "tensor(float)",
// "seq(tensor(int64))", "seq(map(string,tensor(float)))", "optional(seq(tensor(float)))".
QUILT_API std::string type_string(const ValueInfo& info);

// A value of any ONNX type: a tensor, a sequence of values, a map or an optional. Copies share
// their contents (tensors share storage); a Value is never modified once made.
//
//   quilt::Value seq = quilt::Value::sequence({a, b});          // seq(tensor(float))
//   quilt::Value m = quilt::Value::map(Tensor::from_vector<int64_t>({2}, {1, 7}), probs);
//   auto outputs = session.run_values({{"x", seq}});
class QUILT_API Value {
 public:
  Value() = default;     // an undefined tensor
  Value(Tensor tensor);  // NOLINT(google-explicit-constructor): a tensor is a value
  // A sequence; element_dtype is the element type of its tensors (needed for an empty
  // sequence; taken from the first tensor when Undefined). Throws Error(InvalidArgument) when
  // the elements are not all of one type.
  static Value sequence(std::vector<Value> items, DType element_dtype = DType::Undefined);
  // A map from keys (1-D, int64 or string, no key twice) to values (1-D, one per key).
  // Throws Error(InvalidArgument) otherwise.
  static Value map(Tensor keys, Tensor values);
  // An optional holding element, and one holding nothing.
  static Value optional(Value element);
  static Value none();

  ValueKind kind() const { return kind_; }
  bool is_tensor() const { return kind_ == ValueKind::Tensor; }
  // False only for an undefined tensor (Value()).
  bool defined() const { return kind_ != ValueKind::Tensor || tensor_.defined(); }
  // The tensor; throws Error(InvalidArgument) naming the kind for another kind of value.
  const Tensor& tensor() const;
  // A sequence's elements, and the element type of its tensors (Undefined for a sequence of
  // maps or of sequences).
  const std::vector<Value>& items() const;
  DType element_dtype() const { return element_dtype_; }
  // A map's keys and values, 1-D tensors of one length.
  const Tensor& keys() const;
  const Tensor& values() const;
  // An optional's element: has_element() is false for none().
  bool has_element() const;
  const Value& element() const;
  // ONNX's notation: "tensor(float)", "seq(tensor(float))", "map(int64,tensor(float))",
  // "optional(tensor(int64))"; an empty sequence of unknown type is "seq(?)".
  std::string type_string() const;
  // A copy that shares nothing with this one (every tensor cloned).
  Value clone() const;

 private:
  ValueKind kind_ = ValueKind::Tensor;
  Tensor tensor_;                                    // Tensor: the tensor; Map: the values
  Tensor keys_;                                      // Map
  std::shared_ptr<const std::vector<Value>> items_;  // Sequence; Optional: none or one
  DType element_dtype_ = DType::Undefined;
};

// Model-level facts from the ModelProto and its graph (Session::metadata()).
struct ModelMetadata {
  std::string producer_name, producer_version;
  std::string domain;
  std::optional<int64_t> model_version;  // none when the model does not say
  std::string description;               // the model's doc_string
  std::string graph_name;
  std::string graph_description;              // the graph's doc_string
  std::map<std::string, std::string> custom;  // metadata_props
  int64_t ir_version = 0;
  std::map<std::string, int64_t> opsets;  // domain ("" = ai.onnx) -> version
};

enum class LogLevel { Error = 0, Warning = 1, Info = 2, Debug = 3 };

// Where Quilt's log messages go. Each message a session or backend logs (at or below its
// level) is offered to the sink on the thread that logs it; a sink that returns false leaves it
// to stderr, where it goes without a sink. nullptr restores stderr. Messages are not offered
// again from inside the sink (one it logs goes to stderr).
using LogSink = std::function<bool(LogLevel level, const std::string& message)>;
QUILT_API void set_log_sink(LogSink sink);

struct SessionOptions {
  static constexpr int kMaxThreads = 4096;
  // Worker threads for the CPU backend, at most kMaxThreads; 0 = one per core.
  int threads = 0;
  // Backends to use, in priority order: a backend name ("cpu", "example", "opencl") optionally
  // followed by a device index ("opencl:1"). The first backend that claims a node runs it.
  std::vector<std::string> backends = {"cpu"};
  // true: the CPU runs every node no listed backend claims. false (strict): session creation
  // fails, listing every such node and why each backend refused it.
  bool cpu_fallback = true;
  // Pins nodes (by node name) to a backend, overriding the priority list; for debugging.
  // Creation fails if the pinned backend does not claim the node.
  std::map<std::string, std::string> pinned_nodes;
  // Keeps tiny device islands (shape arithmetic, scalars, a lone cheap op between CPU nodes)
  // on the CPU rather than paying a copy in and a copy out, and, on a device that publishes
  // its per-command cost (launch_ns), islands the CPU would finish before the device's kernels
  // and copies could be launched. false: every claim is honoured.
  bool partition_cost_rule = true;
  // Backend plugin libraries to load (paths to shared libraries), in addition to those found
  // in the directories of the QUILT_PLUGIN_PATH environment variable (':'-separated). Session
  // creation fails if one listed here does not load; those in QUILT_PLUGIN_PATH may fail (logged
  // at Info, listed by `quilt devices`).
  std::vector<std::string> plugins;
  // Options for a backend's devices, by backend name: {"example": {{"memory_limit", "1048576"}}}.
  std::map<std::string, std::map<std::string, std::string>> backend_options;
  // Fixes named symbolic dims of the model's inputs and outputs ({"batch", 1}): shapes become
  // static, so more folds at creation and plans know every copy's size. Inputs must then match.
  std::map<std::string, int64_t> fixed_dims;
  // 0 = run the graph as written; 1 = constant folding and the pattern rewrites: Constant nodes
  // to initializers, BatchNormalization folded into the Conv/ConvTranspose/Gemm before it,
  // written-out activations (HardSwish, HardSigmoid, Gelu, Mish, Swish) and normalisations
  // (LayerNormalization, RMSNormalization, Softmax) back to one op, MatMul + Add to Gemm.
  // Results equal level 0's up to rounding, except QDQ groups, which become quantized ops
  // (integer math, as onnxruntime runs them: a value at a rounding tie may land one
  // quantization step away); PlanReport::rewrites counts what was rewritten.
  int optimization_level = 1;
  // What this session logs to stderr. Plugins' own messages name no session: they are shown up
  // to the most verbose level among the sessions alive at the time.
  LogLevel log_level = LogLevel::Warning;
  // "fp32": float32 models compute in float32. "bf16": the CPU backend runs the GEMM and
  // convolution products of float32 Conv, MatMul and Gemm with constant weights on bfloat16
  // operands with float32 accumulation (AVX512-BF16; the weights are converted once, at
  // creation); everything else stays float32. Session creation fails, naming what is missing,
  // on a CPU without AVX512-BF16.
  std::string precision = "fp32";
  // Executable cache: a directory where the patches compiled for backends that offer it (ABI
  // 1.2's executable_serialize/executable_deserialize: the OpenCL plugin does, the CPU does
  // not) are kept, so that a later session, in this process or another, of the same model with
  // the same backend, device and options loads them instead of compiling. Keyed by a hash of
  // the patch (weights by content), backend, device and options; a damaged entry is compiled
  // again and replaced, with a warning. "" (the default): off. PlanReport::Patch::cache says
  // what happened per patch.
  std::string cache_dir;
};

// Where each node of a session runs and where the copies are (quilt plan).
struct QUILT_API PlanReport {
  struct Node {
    std::string name;     // node name ("" if unnamed)
    std::string op_type;  // with "domain." prefix outside the default domain
    int patch = -1;       // index into patches; -1 when folded into a constant
    std::string backend;  // backend that runs it ("" when folded)
    // Why it does not run on a higher-priority backend ("example: Softmax is not supported"),
    // or "pinned", or the cost rule's reason. Empty when on the first listed backend.
    std::string reason;
    // How its backend runs it when not as written, e.g. "float16 computed in float32 (casts on
    // inputs 0, 1 and output 0)"; "" otherwise.
    std::string note;
  };
  struct Patch {
    int id = 0;              // issue order
    std::string backend;     // "cpu", "example:0"; "host" for control flow run by the core
    std::string device;      // device name
    std::vector<int> nodes;  // indices into PlanReport::nodes, in execution order
    std::vector<std::string> inputs, outputs;  // values crossing the patch boundary
    std::vector<int> depends_on;               // patches whose results it consumes
    int64_t constant_bytes = 0;                // weights handed to the backend at session creation
    // With SessionOptions::cache_dir: "loaded" (from the executable cache, not compiled),
    // "stored" (compiled and stored) or "compiled" (not stored: cache_detail says why); ""
    // without a cache directory and for host steps.
    std::string cache;
    std::string cache_detail;  // the entry's path, or why nothing was loaded or stored
  };
  struct Transfer {
    std::string value;
    std::string from, to;     // memory spaces: "host" or a device backend ("example:0")
    int64_t bytes = -1;       // -1 when the shape is only known at run time
    int producer_patch = -1;  // -1: a graph input or constant
    std::vector<int> consumer_patches;
  };
  // What the optimisation passes (level 1) rewrote before planning, per pattern:
  // {"batchnorm into conv", 35}, {"hardswish", 20}, ... in the order the passes run.
  struct Rewrite {
    std::string pattern;
    int count = 0;
    int nodes_removed = 0;  // how many fewer nodes the graph has for them
  };
  std::string model;
  std::vector<std::string> backends;  // the priority list, CPU fallback included when allowed
  std::vector<Node> nodes;            // in topological order
  std::vector<Patch> patches;
  std::vector<Transfer> transfers;
  int folded_nodes = 0;
  std::vector<Rewrite> rewrites;  // patterns rewritten at least once (subgraphs included)

  std::string to_text() const;
  std::string to_json() const;
  // Graphviz: nodes coloured by backend, clusters per patch, transfers as distinct edges.
  std::string to_dot() const;
};

// What one run did, step by step, with host-clock timestamps (Session::run with a profile).
struct QUILT_API RunProfile {
  struct Span {
    std::string
        name;  // `patch 2 on example:0 (...)`, `Conv node "c1"`, `transfer 'x' host -> example:0`
    std::string lane;  // backend / device that did the work
    std::string kind;  // "patch", "node" (when the backend times nodes), "transfer", "host"
    uint64_t start_ns = 0, end_ns = 0;  // same clock as quilt_host_api_t::now_ns
    // How the backend ran the node, when it says (e.g. which convolution kernel); else empty.
    std::string detail;
  };
  std::vector<Span> spans;

  // The spans as a Chrome trace (the JSON object form that Perfetto and chrome://tracing open):
  // complete ("X") events in microseconds from the first span, a thread per lane named by
  // "thread_name" metadata, `cat` the span's kind, each node span kept inside its patch's.
  // process_name names the trace's one process ("quilt model.onnx"). Spans of several runs
  // may be appended into one profile: they share one clock.
  std::string to_chrome_trace(const std::string& process_name) const;
};

using TensorMap = std::map<std::string, Tensor>;
using ValueMap = std::map<std::string, Value>;

class QUILT_API Session {
 public:
  // Loads an ONNX model file; external-data files are resolved relative to it.
  explicit Session(const std::string& model_path, const SessionOptions& options = {});
  // Loads a serialized ModelProto. external_data_dir is where external-data files are looked
  // up; empty means the model may not use external data.
  static Session from_bytes(std::span<const std::byte> model, const SessionOptions& options = {},
                            const std::string& external_data_dir = "");

  // A moved-from Session holds no model: every call on it throws Error(InvalidArgument).
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();

  const std::vector<ValueInfo>& inputs() const;
  const std::vector<ValueInfo>& outputs() const;

  // Runs the model. Every graph input without an initializer must be given. output_names
  // selects outputs (empty = all). Safe to call from several threads at once.
  TensorMap run(const TensorMap& inputs, const std::vector<std::string>& output_names = {}) const;
  // Same, recording a span per patch and transfer into *profile.
  TensorMap run(const TensorMap& inputs, const std::vector<std::string>& output_names,
                RunProfile* profile) const;

  // Runs a model whose inputs or outputs may be sequences, maps or optionals (run() takes and
  // returns tensors only, and says to use this for an output of another kind). An input whose
  // kind or element type differs from the declared one is an Error(InvalidArgument) naming it.
  ValueMap run_values(const ValueMap& inputs, const std::vector<std::string>& output_names = {},
                      RunProfile* profile = nullptr) const;

  // Which node runs where, the patches and the transfers.
  const PlanReport& plan() const;

  // The model's producer, version, descriptions and custom metadata.
  const ModelMetadata& metadata() const;
  // Initializers that are also graph inputs (IR version >= 4): a run may give a value for them
  // (same dtype and shape), which replaces the initializer for that run only. As declared in
  // the graph's inputs.
  const std::vector<ValueInfo>& overridable_initializers() const;

  struct QUILT_HIDDEN Impl;

 private:
  explicit Session(std::shared_ptr<Impl> impl);
  // Throws Error(InvalidArgument) on a moved-from Session.
  const Impl& impl() const;
  std::shared_ptr<Impl> impl_;
};

// What Quilt can run on (`quilt devices`): every backend it can load — the built-in CPU first,
// then the given plugin libraries, those in `quilt-backends/` next to libquilt and those in
// the QUILT_PLUGIN_PATH directories — with its devices, and every library that could not be
// used and why. Never throws for a plugin that fails: it is listed in `failures`.
struct DeviceInfo {
  std::string name;
  uint64_t memory_bytes = 0;  // 0 when unknown
  uint32_t flags = 0;         // quilt_device_flags_t bits (include/quilt/backend.h)
  std::vector<std::pair<std::string, std::string>> properties;  // as the backend lists them
};
struct BackendInfo {
  std::string name;         // what SessionOptions::backends names it by: "cpu", "opencl"
  std::string version;      // the plugin's version string ("built-in" for the CPU)
  std::string library;      // path of the shared library, or "built-in"
  std::string abi_version;  // "1.1"
  std::vector<DeviceInfo> devices;
  std::string error;  // set when the library loaded but could not describe its devices
};
struct BackendList {
  struct Failure {
    std::string library;  // the path as given or found
    std::string reason;   // "file not found", "ABI mismatch: ...", ...
  };
  std::vector<BackendInfo> backends;
  std::vector<Failure> failures;
};
QUILT_API BackendList list_backends(const std::vector<std::string>& plugins = {});

}  // namespace quilt
