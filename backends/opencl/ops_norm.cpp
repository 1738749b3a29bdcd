// BatchNormalization (inference: constant scale, B, mean and var folded at compile into one
// scale and shift per channel), InstanceNormalization, LayerNormalization and RMSNormalization
// (output 0 only, scale and bias over exactly the normalised trailing dims), kernels_cl/norm.cl.
#include <cmath>

#include "opencl.hpp"

namespace quilt::opencl {

namespace {

std::vector<int64_t> dims_of(const quilt_value_t& v) {
  return {v.info.dims, v.info.dims + v.info.rank};
}

}  // namespace

std::string prepare_batchnorm(const NodeView& view, NodeDesc* desc) {
  if (view.node.opset < 7) return "BatchNormalization: opsets before 7 (is_test, spatial)";
  if (view.int_attribute("training_mode", 0) != 0)
    return "BatchNormalization: training_mode = 1 (inference only)";
  const quilt_value_t& x = *view.input(0);
  if (x.info.rank < 2) return "BatchNormalization: X needs rank >= 2";
  int64_t channels = -1;
  for (size_t i = 1; i <= 4; ++i) {
    const quilt_value_t& v = *view.input(i);
    if (!v.constant)
      return std::string("BatchNormalization: ") +
             (i == 1   ? "scale"
              : i == 2 ? "B"
              : i == 3 ? "mean"
                       : "var") +
             " computed at run time (only constants, folded at compile)";
    const auto d = dims_of(v);
    if (d.size() != 1 || d[0] < 0) return "BatchNormalization: parameters must be of shape [C]";
    if (channels >= 0 && d[0] != channels)
      return "BatchNormalization: parameters of different lengths";
    channels = d[0];
  }
  if (x.info.dims[1] >= 0 && x.info.dims[1] != channels)
    return "BatchNormalization: parameters are not per channel (spatial = 0)";
  desc->f[0] = view.float_attribute("epsilon", 1e-5f);
  desc->i[0] = channels;
  make_params(desc);
  return "";
}

Status upload_batchnorm(quilt_device_s& device, const NodeView& view, NodeDesc* desc) {
  const int64_t c = desc->i[0];
  if (c == 0) return {};
  auto param = [&](size_t i) { return static_cast<const float*>(view.input(i)->constant); };
  const float *scale = param(1), *bias = param(2), *mean = param(3), *var = param(4);
  std::vector<float> ab(static_cast<size_t>(2 * c));
  const double eps = desc->f[0];
  for (int64_t i = 0; i < c; ++i) {  // as the CPU backend folds them
    const double s = scale[i] / std::sqrt(static_cast<double>(var[i]) + eps);
    ab[i] = static_cast<float>(s);
    ab[c + i] = static_cast<float>(bias[i] - mean[i] * s);
  }
  cl_int err = CL_SUCCESS;
  cl_mem mem = clCreateBuffer(device.context.get(), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                              ab.size() * sizeof(float), ab.data(), &err);
  if (err != CL_SUCCESS) return cl_fail(err, "upload of the folded batch-norm parameters");
  *static_cast<OpParams*>(desc->packed.get())->out() = mem;
  return {};
}

Status enqueue_batchnorm(Launch& launch, const NodeDesc& desc) {
  auto xd = launch.dims(desc.inputs[0]);
  const int64_t total = element_count(xd);
  if (total == 0) return {};
  if (xd[1] != desc.i[0])
    return fail(QUILT_STATUS_INVALID_ARGUMENT, "BatchNormalization: X has " +
                                                   std::to_string(xd[1]) + " channels, not " +
                                                   std::to_string(desc.i[0]));
  const int64_t inner = total / (xd[0] * xd[1]);
  return launch.run("norm", "batchnorm", {static_cast<size_t>(total), 1, 1}, {kLocal1d, 1, 1},
                    launch.buffer(desc.inputs[0]), params(desc).get(),
                    launch.buffer(desc.outputs[0]), static_cast<cl_int>(xd[1]),
                    static_cast<cl_int>(inner), static_cast<cl_int>(total));
}

std::string prepare_instancenorm(const NodeView& view, NodeDesc* desc) {
  const quilt_value_t& x = *view.input(0);
  if (x.info.rank < 3) return "InstanceNormalization: X needs rank >= 3";
  for (size_t i = 1; i <= 2; ++i) {
    const auto d = dims_of(*view.input(i));
    if (d.size() != 1 || (d[0] >= 0 && x.info.dims[1] >= 0 && d[0] != x.info.dims[1]))
      return "InstanceNormalization: scale and B must be of shape [C]";
  }
  desc->f[0] = view.float_attribute("epsilon", 1e-5f);
  return "";
}

Status enqueue_instancenorm(Launch& launch, const NodeDesc& desc) {
  auto xd = launch.dims(desc.inputs[0]);
  const int64_t planes = xd[0] * xd[1];
  if (element_count(xd) == 0) return {};
  return launch.run("norm", "instancenorm", {static_cast<size_t>(planes), 1, 1}, {kLocal1d, 1, 1},
                    launch.buffer(desc.inputs[0]), launch.buffer(desc.inputs[1]),
                    launch.buffer(desc.inputs[2]), launch.buffer(desc.outputs[0]),
                    static_cast<cl_int>(planes), static_cast<cl_int>(xd[1]),
                    static_cast<cl_int>(element_count(xd) / planes), desc.f[0]);
}

namespace {

// LayerNormalization and RMSNormalization: the trailing dims from `axis` on are normalised;
// scale (and B) must cover exactly those dims (leading 1s allowed), no broadcasting.
std::string prepare_trailing_norm(const std::string& op, const NodeView& view, NodeDesc* desc) {
  const quilt_value_t& x = *view.input(0);
  const int64_t rank = x.info.rank;
  int64_t axis = view.int_attribute("axis", -1);
  if (axis < -rank || axis >= rank) return op + ": axis " + std::to_string(axis) + " out of range";
  if (axis < 0) axis += rank;
  if (view.int_attribute("stash_type", 1) != 1) return op + ": stash_type other than 1 (float32)";
  for (size_t i = 1; i <= 2; ++i) {
    const quilt_value_t* p = view.input(i);
    if (!p) continue;
    const auto d = dims_of(*p);
    const int64_t norm_rank = rank - axis;
    for (size_t k = 0; k < d.size(); ++k) {
      const int64_t xk = static_cast<int64_t>(k) - static_cast<int64_t>(d.size()) + rank;
      if (static_cast<int64_t>(d.size()) - static_cast<int64_t>(k) > norm_rank) {
        if (d[k] != 1) return op + ": scale/B vary over the leading (not normalised) dims";
        continue;
      }
      if (d[k] < 0 || (d[k] == 1 && x.info.dims[xk] != 1) ||
          (x.info.dims[xk] >= 0 && d[k] != x.info.dims[xk]))
        return op + ": scale/B broadcast over the normalised dims (only their exact shape)";
    }
    if (static_cast<int64_t>(d.size()) < norm_rank)
      for (int64_t k = axis; k < rank - static_cast<int64_t>(d.size()); ++k)
        if (x.info.dims[k] != 1)
          return op + ": scale/B broadcast over the normalised dims (only their exact shape)";
  }
  desc->i[0] = axis;
  desc->f[0] = view.float_attribute("epsilon", 1e-5f);
  return "";
}

// rows x n: the dims before axis, and those from axis on.
std::pair<int64_t, int64_t> rows_and_row(Launch& launch, const NodeDesc& desc) {
  auto xd = launch.dims(desc.inputs[0]);
  int64_t rows = 1, n = 1;
  for (size_t d = 0; d < xd.size(); ++d) (static_cast<int64_t>(d) < desc.i[0] ? rows : n) *= xd[d];
  return {rows, n};
}

}  // namespace

std::string prepare_layernorm(const NodeView& view, NodeDesc* desc) {
  return prepare_trailing_norm("LayerNormalization", view, desc);
}

Status enqueue_layernorm(Launch& launch, const NodeDesc& desc) {
  const auto [rows, n] = rows_and_row(launch, desc);
  if (rows * n == 0) return {};
  const bool has_bias = desc.inputs.size() > 2 && desc.inputs[2] >= 0;
  cl_mem scale = launch.buffer(desc.inputs[1]);
  return launch.run("norm", "layernorm", {static_cast<size_t>(rows), 1, 1}, {kLocal1d, 1, 1},
                    launch.buffer(desc.inputs[0]), scale,
                    has_bias ? launch.buffer(desc.inputs[2]) : scale, cl_int{has_bias ? 1 : 0},
                    launch.buffer(desc.outputs[0]), static_cast<cl_int>(rows),
                    static_cast<cl_int>(n), desc.f[0]);
}

std::string prepare_rmsnorm(const NodeView& view, NodeDesc* desc) {
  return prepare_trailing_norm("RMSNormalization", view, desc);
}

Status enqueue_rmsnorm(Launch& launch, const NodeDesc& desc) {
  const auto [rows, n] = rows_and_row(launch, desc);
  if (rows * n == 0) return {};
  return launch.run("norm", "rmsnorm", {static_cast<size_t>(rows), 1, 1}, {kLocal1d, 1, 1},
                    launch.buffer(desc.inputs[0]), launch.buffer(desc.inputs[1]),
                    launch.buffer(desc.outputs[0]), static_cast<cl_int>(rows),
                    static_cast<cl_int>(n), desc.f[0]);
}

}  // namespace quilt::opencl
