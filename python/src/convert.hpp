// numpy arrays <-> quilt::Tensor without copies where the layout allows.
//
// In: a C-contiguous array is wrapped (Tensor::wrap) through the buffer protocol, so the
// tensor reads numpy's memory; anything else (strided arrays, lists, scalars, objects with
// __array__) goes through numpy.asarray(..., order='C') first, which copies.
// bfloat16 and float8 arrays (ml_dtypes) are read as their raw bits.
// Out: the array owns the Tensor's storage through a capsule (its base), so no copy is made
// and the buffer lives as long as the array, whatever happens to the session.
#pragma once

#include <nanobind/nanobind.h>

#include <memory>
#include <string>
#include <vector>

#include "quilt/quilt.hpp"

namespace quilt::python {

// The numpy buffers a run reads. Released (with the GIL held) when destroyed.
class HeldBuffers {
 public:
  HeldBuffers() = default;
  HeldBuffers(const HeldBuffers&) = delete;
  HeldBuffers& operator=(const HeldBuffers&) = delete;
  ~HeldBuffers();

 private:
  std::vector<std::unique_ptr<Py_buffer>> views_;
  std::vector<nanobind::object> keep_;  // arrays made by conversion, alive while the run reads
  friend Tensor import_array(nanobind::handle, const std::string&, DType, HeldBuffers&);
};

// The tensor reading obj's memory (see above). `declared` is the input's dtype in the model,
// used only to convert objects that are not arrays (a list of floats for a float32 input), as
// onnxruntime does; Undefined when unknown. Throws Error(InvalidArgument) naming the input
// for objects numpy cannot turn into a tensor Quilt holds (strings, objects, complex numbers).
Tensor import_array(nanobind::handle obj, const std::string& name, DType declared,
                    HeldBuffers& held);

// A numpy array owning t's storage. bfloat16 and float8 need ml_dtypes: without it, throws
// Error(NotImplemented) saying so, naming `what` (e.g. "output 'y'").
nanobind::object export_tensor(Tensor t, const std::string& what);

// A value of the declared type from Python, as onnxruntime takes them: a list for a sequence,
// a dict for a map, None for an empty optional (its element otherwise). Throws
// Error(InvalidArgument) naming the input and the declared type for an object of another kind.
Value import_value(nanobind::handle obj, const std::string& name, const ValueInfo& declared,
                   HeldBuffers& held);
// A value for Python: an array, a list (sequence), a dict of Python scalars (map), None (an
// empty optional).
nanobind::object export_value(const Value& v, const std::string& what);

// The numpy dtype of a Quilt dtype (numpy.dtype("float32"), ml_dtypes' bfloat16, ...).
nanobind::object numpy_dtype(DType dtype, const std::string& what);

}  // namespace quilt::python
