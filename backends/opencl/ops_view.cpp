// Reshape, Flatten, Squeeze, Unsqueeze, Identity: the output is input 0's data under the shape
// the host inferred, so no kernel runs; inside a patch the output aliases its input, and a copy
// is made only where the output leaves the patch (ocl_backend.cpp, enqueue_patch).
#include "opencl.hpp"

namespace quilt::opencl {

std::string prepare_view(const NodeView&, NodeDesc*) {
  // The generic checks did the rest: data is float32, shape/axes inputs are int64 constants.
  return "";
}

}  // namespace quilt::opencl
