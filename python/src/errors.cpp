#include "errors.hpp"

#include <array>

namespace nb = nanobind;

namespace quilt::python {
namespace {

constexpr std::array kCodes = {
    ErrorCode::InvalidArgument, ErrorCode::InvalidModel, ErrorCode::NotImplemented,
    ErrorCode::OutOfMemory,     ErrorCode::Io,           ErrorCode::Runtime};
// The Python class name of each, in kCodes order: the enumerator's name.
constexpr std::array kNames = {"InvalidArgument", "InvalidModel", "NotImplemented",
                               "OutOfMemory",     "Io",           "Runtime"};

// The exception type per code, in kCodes order; owned by the module (never freed).
std::array<PyObject*, kCodes.size()> g_types{};

PyObject* builtin_base(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument:
      return PyExc_ValueError;
    case ErrorCode::NotImplemented:
      return PyExc_NotImplementedError;
    case ErrorCode::OutOfMemory:
      return PyExc_MemoryError;
    case ErrorCode::Io:
      return PyExc_OSError;
    default:
      return nullptr;
  }
}

}  // namespace

void set_error(ErrorCode code, const char* message) {
  for (size_t i = 0; i < kCodes.size(); ++i) {
    if (kCodes[i] != code) continue;
    nb::object error = nb::steal(PyObject_CallOneArg(g_types[i], nb::str(message).ptr()));
    if (!error.is_valid()) return;  // the call set its own error
    error.attr("code") = kNames[i];
    PyErr_SetObject(g_types[i], error.ptr());
    return;
  }
  PyErr_SetString(PyExc_RuntimeError, message);
}

void register_errors(nb::module_& m) {
  PyObject* base = PyErr_NewExceptionWithDoc(
      "quilt.Error",
      "A Quilt failure. `code` names its kind (InvalidArgument, InvalidModel, NotImplemented, "
      "OutOfMemory, Io, Runtime); the message says where and what was expected.",
      PyExc_RuntimeError, nullptr);
  m.attr("Error") = nb::steal(base);
  for (size_t i = 0; i < kCodes.size(); ++i) {
    const std::string name = kNames[i];
    PyObject* extra = builtin_base(kCodes[i]);
    nb::object bases = extra ? nb::object(nb::make_tuple(nb::handle(base), nb::handle(extra)))
                             : nb::object(nb::make_tuple(nb::handle(base)));
    PyObject* type = PyErr_NewException(("quilt." + name).c_str(), bases.ptr(), /*dict=*/nullptr);
    m.attr(name.c_str()) = nb::steal(type);
    g_types[i] = type;
  }
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      set_error(e.code(), e.what());
    }
  });
}

}  // namespace quilt::python
