#include "convert.hpp"

#include <nanobind/ndarray.h>

#include <array>
#include <cstring>

namespace nb = nanobind;

namespace quilt::python {
namespace {

struct Numpy {
  nb::object asarray, dtype;
  // A C-contiguous array of obj (obj itself when it is one), of dtype when given.
  nb::object contiguous(nb::handle obj, nb::handle dtype = nb::none()) const {
    return asarray(obj, dtype, nb::arg("order") = "C");
  }
};
// numpy's functions, looked up once (never released: the interpreter may be finalising).
const Numpy& numpy() {
  static const Numpy* np = [] {
    nb::module_ m = nb::module_::import_("numpy");
    return new Numpy{m.attr("asarray"), m.attr("dtype")};
  }();
  return *np;
}

// The dtypes numpy holds only through ml_dtypes, with the integer type of the same size that
// carries their bits across the buffer protocol (which cannot describe them).
struct MlDtype {
  DType dtype;
  const char* name;  // numpy dtype name and ml_dtypes attribute
  const char* bits;  // numpy dtype of the raw bits
};
constexpr std::array kMlDtypes = {
    MlDtype{DType::BFloat16, "bfloat16", "uint16"},
    MlDtype{DType::Float8E4M3FN, "float8_e4m3fn", "uint8"},
    MlDtype{DType::Float8E4M3FNUZ, "float8_e4m3fnuz", "uint8"},
    MlDtype{DType::Float8E5M2, "float8_e5m2", "uint8"},
    MlDtype{DType::Float8E5M2FNUZ, "float8_e5m2fnuz", "uint8"},
    MlDtype{DType::Float8E8M0, "float8_e8m0fnu", "uint8"},
    // One element a byte in numpy (its code in the low bits),
    // packed two (4-bit) or four (2-bit) a byte in Quilt.
    MlDtype{DType::Int4, "int4", "int8"}, MlDtype{DType::UInt4, "uint4", "uint8"},
    MlDtype{DType::Float4E2M1, "float4_e2m1fn", "uint8"}, MlDtype{DType::Int2, "int2", "int8"},
    MlDtype{DType::UInt2, "uint2", "uint8"}};

// Code (raw bits) of element i of packed data, `bits` (2 or 4) bits an element, and setting it
// (in a zeroed buffer), as quilt.hpp's DType comments lay them out.
uint8_t packed_code(const uint8_t* data, int64_t i, int bits) {
  const int per_byte = 8 / bits;
  return static_cast<uint8_t>((data[i / per_byte] >> (i % per_byte * bits)) & ((1 << bits) - 1));
}
void packed_set(uint8_t* data, int64_t i, int bits, uint8_t code) {
  const int per_byte = 8 / bits;
  data[i / per_byte] |= static_cast<uint8_t>((code & ((1 << bits) - 1)) << (i % per_byte * bits));
}

const MlDtype* ml_dtype_of(DType d) {
  for (const auto& m : kMlDtypes)
    if (m.dtype == d) return &m;
  return nullptr;
}

// DType of a buffer-protocol format ("f", "<f", "l", ...), Undefined when Quilt has none.
DType dtype_of_format(const char* format, Py_ssize_t itemsize) {
  if (!format) return itemsize == 1 ? DType::UInt8 : DType::Undefined;  // plain bytes
  if (*format == '@' || *format == '=' || *format == '<') ++format;
  if (format[0] == 0 || format[1] != 0) return DType::Undefined;
  DType d = DType::Undefined;
  switch (format[0]) {
    case '?':
      d = DType::Bool;
      break;
    case 'b':
      d = DType::Int8;
      break;
    case 'B':
      d = DType::UInt8;
      break;
    case 'h':
      d = DType::Int16;
      break;
    case 'H':
      d = DType::UInt16;
      break;
    case 'i':
    case 'l':
    case 'q':
      d = itemsize == 4 ? DType::Int32 : DType::Int64;
      break;
    case 'I':
    case 'L':
    case 'Q':
      d = itemsize == 4 ? DType::UInt32 : DType::UInt64;
      break;
    case 'e':
      d = DType::Float16;
      break;
    case 'f':
      d = DType::Float32;
      break;
    case 'd':
      d = DType::Float64;
      break;
    default:
      return DType::Undefined;
  }
  return static_cast<Py_ssize_t>(dtype_size(d)) == itemsize ? d : DType::Undefined;
}

// str(obj), or "" when that fails.
std::string text_of(nb::handle obj) {
  nb::object s = nb::steal(PyObject_Str(obj.ptr()));
  if (!s.is_valid()) {
    PyErr_Clear();
    return "";
  }
  const char* utf8 = PyUnicode_AsUTF8(s.ptr());
  return utf8 ? utf8 : "";
}

std::string numpy_dtype_text(nb::handle obj) {
  if (nb::hasattr(obj, "dtype")) return text_of(obj.attr("dtype"));
  return text_of(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr()))));
}

// Why obj cannot be an input, for the message.
[[noreturn]] void unsupported_input(nb::handle obj, const std::string& name) {
  const std::string dtype = numpy_dtype_text(obj);
  std::string why = "which Quilt cannot hold";
  if (dtype.rfind(">", 0) == 0)
    why = "(big-endian): pass it in native byte order, e.g. x.astype(x.dtype.newbyteorder('='))";
  throw Error(ErrorCode::InvalidArgument,
              "input '" + name + "' has numpy dtype " + dtype + ", " + why);
}

// The numpy dtype kind of obj ('f', 'U', 'O', ...), or 0 when it has no dtype.
char dtype_kind(nb::handle obj) {
  if (!nb::hasattr(obj, "dtype") || !nb::hasattr(obj.attr("dtype"), "kind")) return 0;
  const std::string kind = text_of(obj.attr("dtype").attr("kind"));
  return kind.size() == 1 ? kind[0] : 0;
}

// A string tensor of the elements of obj: an array of numpy str_ ('U'), bytes_ ('S') or
// objects that are all str or bytes, or (for a string input) a list of them. Strings are
// stored as UTF-8, bytes as they are.
Tensor import_strings(nb::handle obj, const std::string& name) {
  nb::object array;
  try {
    array = numpy().asarray(obj, dtype_kind(obj) ? nb::none() : numpy().dtype("object"));
  } catch (const nb::python_error& e) {
    throw Error(ErrorCode::InvalidArgument,
                "input '" + name + "' cannot be read as an array of strings: " + e.what());
  }
  std::vector<int64_t> shape;
  for (nb::handle d : array.attr("shape")) shape.push_back(nb::cast<int64_t>(d));
  nb::object flat = array.attr("ravel")().attr("tolist")();
  Tensor t(DType::String, shape);
  std::string* out = t.data<std::string>();
  int64_t i = 0;
  for (nb::handle item : flat) {
    Py_ssize_t size = 0;
    if (PyUnicode_Check(item.ptr())) {
      const char* utf8 = PyUnicode_AsUTF8AndSize(item.ptr(), &size);
      if (!utf8) {
        PyErr_Clear();
        throw Error(ErrorCode::InvalidArgument,
                    "input '" + name + "' element " + std::to_string(i) + " is not valid Unicode");
      }
      out[i++].assign(utf8, static_cast<size_t>(size));
    } else if (PyBytes_Check(item.ptr())) {
      out[i++].assign(PyBytes_AS_STRING(item.ptr()),
                      static_cast<size_t>(PyBytes_GET_SIZE(item.ptr())));
    } else {
      throw Error(ErrorCode::InvalidArgument,
                  "input '" + name + "' is an array of strings, but element " + std::to_string(i) +
                      " is " + numpy_dtype_text(item) + ", expected str or bytes");
    }
  }
  return t;
}

}  // namespace

HeldBuffers::~HeldBuffers() {
  for (auto& v : views_) PyBuffer_Release(v.get());
}

Tensor import_array(nb::handle obj, const std::string& name, DType declared, HeldBuffers& held) {
  const char kind = dtype_kind(obj);
  if (kind == 'U' || kind == 'S' || kind == 'O' ||
      (declared == DType::String && !kind && !PyObject_CheckBuffer(obj.ptr())))
    return import_strings(obj, name);
  nb::handle src = obj;
  const MlDtype* raw_bits = nullptr;  // src holds the bits of an ml_dtypes array
  for (int attempt = 0;; ++attempt) {
    Py_buffer view{};
    if (PyObject_GetBuffer(src.ptr(), &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) == 0) {
      held.views_.push_back(std::make_unique<Py_buffer>(view));
      const DType d = raw_bits ? raw_bits->dtype : dtype_of_format(view.format, view.itemsize);
      if (d == DType::Undefined) unsupported_input(src, name);
      std::vector<int64_t> shape(view.shape, view.shape + view.ndim);
      if (const int bits = dtype_packed_bits(d)) {  // packed into a tensor of its own
        Tensor t(d, std::move(shape));
        const auto* bytes = static_cast<const uint8_t*>(view.buf);
        for (int64_t i = 0; i < t.numel(); ++i)  // ml_dtypes keeps the code in the low bits
          packed_set(t.data<uint8_t>(), i, bits, bytes[i]);
        return t;
      }
      return Tensor::wrap(d, std::move(shape), view.buf);
    }
    PyErr_Clear();
    if (attempt == 2) unsupported_input(src, name);
    try {
      nb::object converted;
      const bool is_buffer = PyObject_CheckBuffer(src.ptr());
      const bool has_dtype = nb::hasattr(src, "dtype");
      if (has_dtype && nb::hasattr(src.attr("dtype"), "name")) {
        const std::string dtype_name = text_of(src.attr("dtype").attr("name"));
        for (const auto& m : kMlDtypes)
          if (dtype_name == m.name) raw_bits = &m;
      }
      if (raw_bits) {
        converted = numpy().contiguous(src).attr("view")(raw_bits->bits);
      } else if (is_buffer) {
        converted = numpy().contiguous(src);  // strided: one copy
      } else if (declared != DType::Undefined && !has_dtype && !ml_dtype_of(declared)) {
        // A list or a scalar: numpy makes it the model's dtype, as onnxruntime does.
        converted = numpy().contiguous(src, numpy_dtype(declared, name));
      } else {
        converted = numpy().contiguous(src);
      }
      held.keep_.push_back(converted);
      src = held.keep_.back();
    } catch (const nb::python_error& e) {
      throw Error(ErrorCode::InvalidArgument,
                  "input '" + name + "' cannot be read as an array: " + e.what());
    }
  }
}

nb::object numpy_dtype(DType dtype, const std::string& what) {
  if (const MlDtype* m = ml_dtype_of(dtype)) {
    try {
      return numpy().dtype(nb::module_::import_("ml_dtypes").attr(m->name));
    } catch (const nb::python_error&) {
      throw Error(ErrorCode::NotImplemented,
                  what + " is " + m->name +
                      ", which numpy holds only through the ml_dtypes package: pip install "
                      "ml_dtypes");
    }
  }
  if (!dtype_supported(dtype))
    throw Error(ErrorCode::NotImplemented,
                what + " is " + dtype_name(dtype) + ", which Quilt does not hold as a tensor");
  if (dtype == DType::String) return numpy().dtype("object");  // as onnxruntime returns them
  return numpy().dtype(dtype_name(dtype));
}

nb::object export_tensor(Tensor t, const std::string& what) {
  if (t.dtype() == DType::String) {
    // An array of Python str objects (dtype object), as onnxruntime returns string outputs;
    // a string that is not valid UTF-8 comes back as bytes.
    nb::list items;
    for (int64_t i = 0; i < t.numel(); ++i) {
      const std::string& s = t.data<std::string>()[i];
      PyObject* text = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), nullptr);
      if (!text) {
        PyErr_Clear();
        text = PyBytes_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size()));
      }
      items.append(nb::steal(text));
    }
    nb::list dims;
    for (int64_t d : t.shape()) dims.append(d);
    nb::object array = numpy().asarray(items, numpy().dtype("object"));
    return array.attr("reshape")(dims);
  }
  namespace dl = nb::dlpack;
  if (const int bits = dtype_packed_bits(t.dtype())) {
    // Unpacked, one element a byte (its code, as ml_dtypes stores it), viewed as ml_dtypes' type.
    const nb::object view_as = numpy_dtype(t.dtype(), what);
    Tensor bytes(DType::UInt8, t.shape());
    for (int64_t i = 0; i < t.numel(); ++i)
      bytes.data<uint8_t>()[i] = static_cast<uint8_t>(packed_code(t.data<uint8_t>(), i, bits));
    return export_tensor(std::move(bytes), what).attr("view")(view_as);
  }
  dl::dtype dt{};
  nb::object view_as;  // the ml_dtypes dtype the raw bits are viewed as
  switch (t.dtype()) {
    case DType::Float32:
      dt = nb::dtype<float>();
      break;
    case DType::Float64:
      dt = nb::dtype<double>();
      break;
    case DType::Float16:
      dt = {static_cast<uint8_t>(dl::dtype_code::Float), 16, 1};
      break;
    case DType::Bool:
      dt = nb::dtype<bool>();
      break;
    case DType::Int8:
      dt = nb::dtype<int8_t>();
      break;
    case DType::Int16:
      dt = nb::dtype<int16_t>();
      break;
    case DType::Int32:
      dt = nb::dtype<int32_t>();
      break;
    case DType::Int64:
      dt = nb::dtype<int64_t>();
      break;
    case DType::UInt8:
      dt = nb::dtype<uint8_t>();
      break;
    case DType::UInt16:
      dt = nb::dtype<uint16_t>();
      break;
    case DType::UInt32:
      dt = nb::dtype<uint32_t>();
      break;
    case DType::UInt64:
      dt = nb::dtype<uint64_t>();
      break;
    default:
      view_as = numpy_dtype(t.dtype(), what);  // throws without ml_dtypes
      dt = {static_cast<uint8_t>(dl::dtype_code::UInt),
            static_cast<uint8_t>(8 * dtype_size(t.dtype())), 1};
  }
  auto* owner = new Tensor(std::move(t));
  nb::capsule capsule(owner, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::array<size_t, 16> small{};
  std::vector<size_t> large;
  size_t* shape = small.data();
  const size_t rank = owner->shape().size();
  if (rank > small.size()) {
    large.resize(rank);
    shape = large.data();
  }
  for (size_t i = 0; i < rank; ++i) shape[i] = static_cast<size_t>(owner->shape()[i]);
  static char empty_storage;  // numpy wants a pointer even for zero elements
  void* data = owner->raw_data() ? owner->raw_data() : &empty_storage;
  nb::ndarray<nb::numpy> array(data, rank, shape, capsule, nullptr, dt, nb::device::cpu::value);
  nb::object out = nb::cast(array);
  return view_as.is_valid() ? out.attr("view")(view_as) : out;
}

}  // namespace quilt::python

namespace quilt::python {

Value import_value(nb::handle obj, const std::string& name, const ValueInfo& declared,
                   HeldBuffers& held) {
  auto wrong = [&](const char* expected) {
    return Error(ErrorCode::InvalidArgument,
                 "input '" + name + "' is a " + std::string(Py_TYPE(obj.ptr())->tp_name) +
                     ", expected " + type_string(declared) + " (" + expected + ")");
  };
  switch (declared.kind) {
    case ValueKind::Tensor:
      if (PyDict_Check(obj.ptr()) || obj.is_none()) throw wrong("an array");
      return import_array(obj, name, declared.dtype, held);
    case ValueKind::Sequence: {
      if (!PyList_Check(obj.ptr()) && !PyTuple_Check(obj.ptr())) throw wrong("a list");
      const ValueInfo element = declared.element ? *declared.element : ValueInfo{};
      std::vector<Value> items;
      size_t i = 0;
      for (nb::handle item : obj)
        items.push_back(import_value(item, name + "[" + std::to_string(i++) + "]", element, held));
      try {
        // The declared element type types an empty list; a list of another type is left for
        // the run's check, which names the input, its type and the declared one.
        const bool typed = items.empty() && element.kind == ValueKind::Tensor;
        return Value::sequence(std::move(items), typed ? element.dtype : DType::Undefined);
      } catch (const Error& e) {
        throw Error(e.code(), "input '" + name + "': " + e.what());
      }
    }
    case ValueKind::Map: {
      if (!PyDict_Check(obj.ptr())) throw wrong("a dict");
      nb::dict d = nb::borrow<nb::dict>(obj);
      const DType value_dtype = declared.element && declared.element->dtype != DType::Undefined
                                    ? declared.element->dtype
                                    : DType::Float32;
      Tensor keys = import_array(d.keys(), name + " keys", declared.key_dtype, held).clone();
      Tensor values = import_array(d.values(), name + " values", value_dtype, held).clone();
      if (keys.dtype() != declared.key_dtype && declared.key_dtype != DType::Undefined)
        throw Error(ErrorCode::InvalidArgument, "input '" + name + "' has keys of " +
                                                    dtype_name(keys.dtype()) + ", expected " +
                                                    type_string(declared));
      try {
        return Value::map(keys.reshaped({keys.numel()}), values.reshaped({values.numel()}));
      } catch (const Error& e) {
        throw Error(e.code(), "input '" + name + "': " + e.what());
      }
    }
    case ValueKind::Optional:
      if (obj.is_none()) return Value::none();
      return Value::optional(
          import_value(obj, name, declared.element ? *declared.element : ValueInfo{}, held));
  }
  throw wrong("?");
}

namespace {

// Whether python_scalar converts this dtype's elements itself.
bool direct_scalars(DType d) {
  return d == DType::Float32 || d == DType::Float64 || d == DType::Int64 || d == DType::String;
}

// Element i of a 1-D tensor of a direct_scalars dtype as a Python scalar (float, int, str), as
// numpy's tolist() gives it.
nb::object python_scalar(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::Float32:
      return nb::steal(PyFloat_FromDouble(static_cast<double>(t.data<float>()[i])));
    case DType::Float64:
      return nb::steal(PyFloat_FromDouble(t.data<double>()[i]));
    case DType::Int64:
      return nb::steal(PyLong_FromLongLong(t.data<int64_t>()[i]));
    default: {
      const std::string& e = t.data<std::string>()[i];
      return nb::str(e.data(), e.size());
    }
  }
}

// A 1-D tensor's elements as Python scalars, made directly where python_scalar can (through a
// numpy array and tolist() per map, a 200-row ZipMap output took 0.27 ms to convert, four times
// the run), else by numpy's tolist().
std::vector<nb::object> python_scalars(const Tensor& t, const std::string& what) {
  std::vector<nb::object> out;
  out.reserve(static_cast<size_t>(t.numel()));
  if (direct_scalars(t.dtype())) {
    for (int64_t i = 0; i < t.numel(); ++i) out.push_back(python_scalar(t, i));
  } else {
    for (nb::handle e : nb::borrow<nb::list>(export_tensor(t.clone(), what).attr("tolist")()))
      out.push_back(nb::borrow(e));
  }
  return out;
}

// A map as a dict of Python scalars ({label: probability}, as onnxruntime returns it). keys:
// its keys already converted (shared by a ZipMap's rows).
nb::dict export_map(const Value& v, const std::vector<nb::object>& keys, const std::string& what) {
  nb::dict out;
  const Tensor& values = v.values();
  const bool direct = direct_scalars(values.dtype());
  const std::vector<nb::object> converted =
      direct ? std::vector<nb::object>{} : python_scalars(values, what);
  for (size_t i = 0; i < keys.size(); ++i) {
    nb::object value = direct ? python_scalar(values, static_cast<int64_t>(i)) : converted[i];
    if (PyDict_SetItem(out.ptr(), keys[i].ptr(), value.ptr()) != 0) throw nb::python_error();
  }
  return out;
}

}  // namespace

nb::object export_value(const Value& v, const std::string& what) {
  switch (v.kind()) {
    case ValueKind::Tensor:
      return export_tensor(v.tensor(), what);
    case ValueKind::Sequence: {
      nb::list out;
      // A ZipMap's maps share one keys tensor: its Python keys are made once.
      const Tensor* shared_keys = nullptr;
      std::vector<nb::object> keys;
      for (size_t i = 0; i < v.items().size(); ++i) {
        const Value& item = v.items()[i];
        if (item.kind() != ValueKind::Map) {
          out.append(export_value(item, what + "[" + std::to_string(i) + "]"));
          continue;
        }
        const Tensor& k = item.keys();
        if (!shared_keys || !k.shares_storage_with(*shared_keys) ||
            k.numel() != shared_keys->numel() || k.dtype() != shared_keys->dtype()) {
          shared_keys = &k;
          keys = python_scalars(k, what);
        }
        out.append(export_map(item, keys, what));
      }
      return out;
    }
    case ValueKind::Map:
      return export_map(v, python_scalars(v.keys(), what), what);
    case ValueKind::Optional:
      return v.has_element() ? export_value(v.element(), what) : nb::none();
  }
  return nb::none();
}

}  // namespace quilt::python
