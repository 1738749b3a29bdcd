// Softmax and LogSoftmax (kernels_cl/softmax.cl). Opset 13 normalises along one axis; older
// opsets flatten the input at `axis` into 2-D and normalise each row.
#include <cstring>

#include "opencl.hpp"

namespace quilt::opencl {

std::string prepare_softmax(const NodeView& view, NodeDesc* desc) {
  const int64_t rank = view.input(0)->info.rank;
  const bool opset13 = view.node.opset >= 13;
  int64_t axis = view.int_attribute("axis", opset13 ? -1 : 1);
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    return std::string(view.node.op_type) + ": axis " + std::to_string(axis) +
           " out of range for rank " + std::to_string(rank);
  if (axis < 0) axis += rank;
  desc->i[0] = axis;
  desc->i[1] = opset13 ? 1 : 0;
  desc->i[2] = std::strcmp(view.node.op_type, "LogSoftmax") == 0 ? 1 : 0;
  return "";
}

Status enqueue_softmax(Launch& launch, const NodeDesc& desc) {
  auto dims = launch.dims(desc.inputs[0]);
  const size_t axis = static_cast<size_t>(desc.i[0]);
  int64_t outer = 1, length = 1, inner = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (d < axis)
      outer *= dims[d];
    else if (d == axis || !desc.i[1])
      length *= dims[d];
    else
      inner *= dims[d];
  }
  if (outer * length * inner == 0) return {};
  return launch.run("softmax", "softmax", {static_cast<size_t>(outer * inner), 1, 1},
                    {kLocal1d, 1, 1}, launch.buffer(desc.inputs[0]), launch.buffer(desc.outputs[0]),
                    static_cast<cl_int>(outer), static_cast<cl_int>(length),
                    static_cast<cl_int>(inner), static_cast<cl_int>(desc.i[2]));
}

}  // namespace quilt::opencl
