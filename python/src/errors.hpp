// Python exceptions for quilt::Error: quilt.Error and one subclass per quilt::ErrorCode.
#pragma once

#include <nanobind/nanobind.h>

#include "quilt/quilt.hpp"

namespace quilt::python {

// Creates quilt.Error (a RuntimeError) and its subclasses InvalidArgument (also a ValueError),
// InvalidModel, NotImplemented (also a NotImplementedError), OutOfMemory (also a
// MemoryError), Io (also an OSError) and Runtime in module m, and translates every
// quilt::Error thrown into a binding into the one of its code, with `code` set to the code's
// name ("InvalidArgument").
void register_errors(nanobind::module_& m);

// Raises (sets the Python error for) the exception of `code` with `message`.
void set_error(ErrorCode code, const char* message);

}  // namespace quilt::python
