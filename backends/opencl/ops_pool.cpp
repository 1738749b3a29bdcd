// MaxPool / AveragePool (2-D NCHW: kernel_shape, strides, pads, dilations, ceil_mode,
// count_include_pad, every auto_pad; MaxPool without its Indices output) and GlobalAveragePool /
// GlobalMaxPool (any rank >= 3), kernels_cl/pool.cl. Output sizes come from the host's shape
// inference (ceil_mode included); pads and divisors follow the CPU backend.
#include <cstring>

#include "opencl.hpp"

namespace quilt::opencl {

namespace {

std::vector<int64_t> ints_attribute(const NodeView& view, const char* name,
                                    std::vector<int64_t> fallback) {
  const quilt_attribute_t* a = view.attribute(name);
  if (!a || a->kind != QUILT_ATTRIBUTE_INTS) return fallback;
  return {a->ints, a->ints + a->count};
}

enum PoolParam { kKh, kKw, kSh, kSw, kDh, kDw, kPt, kPl, kPb, kPr, kAutoPad, kCountMode, kCount };
enum AutoPad { kNotSet, kValid, kSameUpper, kSameLower };

}  // namespace

std::string prepare_pool(const NodeView& view, NodeDesc* desc) {
  const std::string op = view.node.op_type;
  const bool average = op == "AveragePool";
  if (view.input(0)->info.rank != 4)
    return op + ": only 2-D (NCHW, rank 4) is supported, X has rank " +
           std::to_string(view.input(0)->info.rank);
  const auto kernel = ints_attribute(view, "kernel_shape", {});
  const auto strides = ints_attribute(view, "strides", {1, 1});
  const auto dilations = ints_attribute(view, "dilations", {1, 1});
  const auto pads = ints_attribute(view, "pads", {0, 0, 0, 0});
  if (kernel.size() != 2 || strides.size() != 2 || dilations.size() != 2 || pads.size() != 4)
    return op + ": kernel_shape/strides/dilations/pads of the wrong length for 2-D";
  const int64_t limit = int64_t{1} << 20;
  for (int64_t v : kernel)
    if (v < 1 || v > limit) return op + ": kernel size " + std::to_string(v) + " not supported";
  for (int64_t v : strides)
    if (v < 1 || v > limit) return op + ": stride " + std::to_string(v) + " not supported";
  for (int64_t v : dilations)
    if (v < 1 || v > limit) return op + ": dilation " + std::to_string(v) + " not supported";
  for (int64_t v : pads)
    if (v < 0 || v > limit) return op + ": pad " + std::to_string(v) + " not supported";
  if (average && view.node.opset < 19 && view.attribute("dilations"))
    return op + ": dilations before opset 19";
  int64_t auto_pad = kNotSet;
  if (const quilt_attribute_t* a = view.attribute("auto_pad");
      a && a->kind == QUILT_ATTRIBUTE_STRING) {
    const std::string mode(a->s, a->s_size);
    if (mode == "VALID")
      auto_pad = kValid;
    else if (mode == "SAME_UPPER")
      auto_pad = kSameUpper;
    else if (mode == "SAME_LOWER")
      auto_pad = kSameLower;
    else if (mode != "NOTSET")
      return op + ": auto_pad '" + mode + "' not supported";
  }
  OpParams& p = make_params(desc);
  p.v = {kernel[0], kernel[1], strides[0], strides[1], dilations[0], dilations[1],
         pads[0],   pads[1],   pads[2],    pads[3],    auto_pad,     0};
  if (average) {
    const bool include_pad = view.int_attribute("count_include_pad", 0) != 0;
    // count_include_pad counts the window's elements inside the padded input, in every opset
    // (a ceil_mode window reaching past the end padding counts less than the whole kernel).
    p.v[kCountMode] = include_pad ? 1 : 0;
  }
  desc->i[0] = average ? 1 : 0;
  return "";
}

Status enqueue_pool(Launch& launch, const NodeDesc& desc) {
  const OpParams& p = params(desc);
  auto xd = launch.dims(desc.inputs[0]), yd = launch.dims(desc.outputs[0]);
  const int64_t total = element_count(yd);
  if (total == 0) return {};
  int64_t begin[2], end[2];
  for (int d = 0; d < 2; ++d) {
    const int64_t in = xd[2 + d], out = yd[2 + d], k = p.v[kKh + d], s = p.v[kSh + d],
                  dil = p.v[kDh + d];
    const int64_t dk = (k - 1) * dil + 1;
    switch (p.v[kAutoPad]) {
      case kNotSet:
        begin[d] = p.v[kPt + d], end[d] = p.v[kPb + d];
        break;
      case kValid:
        begin[d] = 0, end[d] = 0;
        break;
      default: {
        // As the spec and the CPU backend: a negative total moves the windows into the input.
        const int64_t total_pad = (out - 1) * s + dk - in;
        begin[d] = p.v[kAutoPad] == kSameUpper ? total_pad / 2 : total_pad - total_pad / 2;
        end[d] = total_pad - begin[d];
      }
    }
  }
  const cl_int8 g0 = int8_of({xd[2], xd[3], yd[2], yd[3], p.v[kKh], p.v[kKw], p.v[kSh], p.v[kSw]});
  const cl_int8 g1 =
      int8_of({p.v[kDh], p.v[kDw], begin[0], begin[1], end[0], end[1], desc.i[0], p.v[kCountMode]});
  return launch.run("pool", "pool2d", {static_cast<size_t>(total), 1, 1}, {kLocal1d, 1, 1},
                    launch.buffer(desc.inputs[0]), launch.buffer(desc.outputs[0]), g0, g1,
                    static_cast<cl_int>(total));
}

std::string prepare_global_pool(const NodeView& view, NodeDesc* desc) {
  if (view.input(0)->info.rank < 3) return std::string(view.node.op_type) + ": X needs rank >= 3";
  desc->i[0] = std::strcmp(view.node.op_type, "GlobalAveragePool") == 0 ? 1 : 0;
  return "";
}

Status enqueue_global_pool(Launch& launch, const NodeDesc& desc) {
  auto xd = launch.dims(desc.inputs[0]);
  const int64_t planes = xd[0] * xd[1];
  if (planes == 0) return {};
  const int64_t size = element_count(xd) / planes;
  return launch.run("pool", "global_pool", {static_cast<size_t>(planes), 1, 1}, {kLocal1d, 1, 1},
                    launch.buffer(desc.inputs[0]), launch.buffer(desc.outputs[0]),
                    static_cast<cl_int>(planes), static_cast<cl_int>(size),
                    static_cast<cl_int>(desc.i[0]));
}

}  // namespace quilt::opencl
