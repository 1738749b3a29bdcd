// Conv and ConvTranspose, 2-D NCHW float32 (kernels_cl/conv.cl). Conv: strides, pads,
// dilations, groups, bias and every auto_pad; weights of known shape, packed in blocks of 32
// output channels. 1x1 convolutions with stride 1 and no padding run as a GEMM over the
// pixels (conv1x1), depthwise ones (groups == C == M) on their own kernel, the rest on a direct
// register-blocked kernel (32 channels x 8 pixels per work-item). ConvTranspose: explicit pads
// (auto_pad NOTSET, no output_shape), any group, blocked the same way. Weights computed at run
// time are packed by a kernel at each run.
// Also the helpers every part-2 op file uses (make_params, attributes).
#include <cstring>

#include "opencl.hpp"

namespace quilt::opencl {

OpParams& make_params(NodeDesc* desc) {
  auto p = std::make_shared<OpParams>();
  OpParams& ref = *p;
  desc->packed = std::move(p);
  return ref;
}

const OpParams& params(const NodeDesc& desc) {
  return *static_cast<const OpParams*>(desc.packed.get());
}

namespace {

constexpr int64_t kOcb = 32;  // CONV_OCB in conv.cl
constexpr int64_t kPx = 8;    // CONV_PX in conv.cl

std::vector<int64_t> ints_attribute(const NodeView& view, const char* name,
                                    std::vector<int64_t> fallback) {
  const quilt_attribute_t* a = view.attribute(name);
  if (!a || a->kind != QUILT_ATTRIBUTE_INTS) return fallback;
  return {a->ints, a->ints + a->count};
}

std::string string_attribute(const NodeView& view, const char* name, const char* fallback) {
  const quilt_attribute_t* a = view.attribute(name);
  if (!a || a->kind != QUILT_ATTRIBUTE_STRING) return fallback;
  return {a->s, a->s_size};
}

bool fits_int(int64_t v) {
  return v >= -(int64_t{1} << 30) && v <= (int64_t{1} << 30);
}

// Parameters in OpParams::v, by position.
enum ConvParam { kSh, kSw, kDh, kDw, kPt, kPl, kPb, kPr, kGroup, kAutoPad, kCount };
enum AutoPad { kNotSet, kValid, kSameUpper, kSameLower };

// The attributes shared by Conv and ConvTranspose; "" or why they are refused.
std::string conv_attributes(const NodeView& view, OpParams& p) {
  const std::string op = view.node.op_type;
  const quilt_value_t& x = *view.input(0);
  const quilt_value_t& w = *view.input(1);
  if (x.info.rank != 4 || w.info.rank != 4)
    return op + ": only 2-D (NCHW, rank 4) is supported, X has rank " + std::to_string(x.info.rank);
  const auto strides = ints_attribute(view, "strides", {1, 1});
  const auto dilations = ints_attribute(view, "dilations", {1, 1});
  const auto pads = ints_attribute(view, "pads", {0, 0, 0, 0});
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4)
    return op + ": strides/dilations/pads of the wrong length for 2-D";
  for (int64_t v : strides)
    if (v < 1 || !fits_int(v)) return op + ": stride " + std::to_string(v) + " not supported";
  for (int64_t v : dilations)
    if (v < 1 || !fits_int(v)) return op + ": dilation " + std::to_string(v) + " not supported";
  for (int64_t v : pads)
    if (v < 0 || !fits_int(v)) return op + ": pad " + std::to_string(v) + " not supported";
  const std::string auto_pad = string_attribute(view, "auto_pad", "NOTSET");
  int64_t mode = kNotSet;
  if (auto_pad == "VALID")
    mode = kValid;
  else if (auto_pad == "SAME_UPPER")
    mode = kSameUpper;
  else if (auto_pad == "SAME_LOWER")
    mode = kSameLower;
  else if (auto_pad != "NOTSET")
    return op + ": auto_pad '" + auto_pad + "' not supported";
  const int64_t group = view.int_attribute("group", 1);
  if (group < 1 || !fits_int(group)) return op + ": group " + std::to_string(group);
  const auto kernel_shape = ints_attribute(view, "kernel_shape", {});
  if (!kernel_shape.empty() &&
      (kernel_shape.size() != 2 || (w.info.dims[2] >= 0 && kernel_shape[0] != w.info.dims[2]) ||
       (w.info.dims[3] >= 0 && kernel_shape[1] != w.info.dims[3])))
    return op + ": kernel_shape does not match the weights";
  p.v.assign(kCount, 0);
  p.v[kSh] = strides[0], p.v[kSw] = strides[1], p.v[kDh] = dilations[0], p.v[kDw] = dilations[1];
  p.v[kPt] = pads[0], p.v[kPl] = pads[1], p.v[kPb] = pads[2], p.v[kPr] = pads[3];
  p.v[kGroup] = group;
  p.v[kAutoPad] = mode;
  return "";
}

// Leading pad of one spatial dim at run time (as the CPU backend: SAME pads never negative).
int64_t pad_begin(int64_t mode, int64_t explicit_pad, int64_t in, int64_t out, int64_t k,
                  int64_t stride, int64_t dilation) {
  if (mode == kNotSet) return explicit_pad;
  if (mode == kValid) return 0;
  const int64_t total = std::max<int64_t>(0, (out - 1) * stride + (k - 1) * dilation + 1 - in);
  return mode == kSameUpper ? total / 2 : total - total / 2;
}

// The weights in the conv_direct layout: packed at compile when constant, else by conv_pack into
// a scratch buffer at each run. Null when there are none (no channels or an empty kernel).
Status packed_weights(Launch& launch, const NodeDesc& desc, bool transpose, int64_t group,
                      int64_t mg, int64_t cg, cl_mem* out) {
  *out = params(desc).get();
  auto wd = launch.dims(desc.inputs[1]);
  const int64_t kk = wd[2] * wd[3], mb = (mg + kOcb - 1) / kOcb;
  const int64_t total = group * mb * kk * cg * kOcb;
  if (*out || total == 0) return {};
  if (Status s = launch.scratch(static_cast<size_t>(total) * sizeof(float), out); !s.ok()) return s;
  const cl_int8 geo = int8_of({group, mb, mg, cg, kk, transpose ? 1 : 0});
  return launch.run("conv", "conv_pack", {static_cast<size_t>(total), 1, 1}, {kLocal1d, 1, 1},
                    launch.buffer(desc.inputs[1]), *out, static_cast<cl_int>(total), geo);
}

}  // namespace

std::string prepare_conv(const NodeView& view, NodeDesc* desc) {
  OpParams& p = make_params(desc);
  if (std::string why = conv_attributes(view, p); !why.empty()) return why;
  const quilt_value_t& x = *view.input(0);
  const quilt_value_t& w = *view.input(1);
  for (int i = 0; i < 4; ++i)
    if (w.info.dims[i] < 0) return "Conv: weights of unknown shape";
  const int64_t group = p.v[kGroup];
  const int64_t m = w.info.dims[0], cg = w.info.dims[1];
  if (m % group != 0) return "Conv: M is not a multiple of group";
  if (x.info.dims[1] >= 0 && x.info.dims[1] != cg * group)
    return "Conv: X has " + std::to_string(x.info.dims[1]) + " channels, the weights expect " +
           std::to_string(cg * group);
  if (const quilt_value_t* b = view.input(2))
    if (b->info.rank != 1 || (b->info.dims[0] >= 0 && b->info.dims[0] != m))
      return "Conv: bias is not of shape [M]";
  const int64_t kh = w.info.dims[2], kw = w.info.dims[3];
  if (cg == 1 && m == group)
    desc->kernel = "conv_depthwise";
  else if (group == 1 && kh == 1 && kw == 1 && p.v[kSh] == 1 && p.v[kSw] == 1 &&
           p.v[kPt] + p.v[kPl] + p.v[kPb] + p.v[kPr] == 0 && p.v[kAutoPad] != kSameUpper &&
           p.v[kAutoPad] != kSameLower)
    desc->kernel = "conv1x1";
  else
    desc->kernel = "conv_direct";
  return "";
}

Status upload_conv(quilt_device_s& device, const NodeView& view, NodeDesc* desc) {
  if (desc->kernel == "conv_depthwise") return {};  // reads the weights as they are
  const quilt_value_t& w = *view.input(1);
  if (!w.constant) return {};  // packed at each run (packed_weights)
  const int64_t group = params(*desc).v[kGroup];
  // Conv's weights are [M, C / G, KH, KW]; ConvTranspose's [C, M / G, KH, KW].
  const bool transpose = desc->kernel == "conv_transpose";
  const int64_t kk = w.info.dims[2] * w.info.dims[3];
  const int64_t m = transpose ? w.info.dims[1] * group : w.info.dims[0];
  const int64_t cg = transpose ? w.info.dims[0] / group : w.info.dims[1];
  const int64_t mg = m / group, mb = (mg + kOcb - 1) / kOcb;
  const size_t count = static_cast<size_t>(group * mb * cg * kk * kOcb);
  if (count == 0) return {};
  const float* src = static_cast<const float*>(w.constant);
  const size_t src_bytes = static_cast<size_t>(element_count({w.info.dims, 4})) * sizeof(float);
  const std::string key = content_key("conv|" + format_dims({w.info.dims, 4}) + "|" +
                                          std::to_string(group) + "|" + (transpose ? "t" : "n"),
                                      src, src_bytes);
  auto make = [&](cl_mem* mem) -> Status {
    auto pack = [&](float* packed) {
      for (int64_t g = 0; g < group; ++g)
        for (int64_t j = 0; j < mg; ++j)
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t k = 0; k < kk; ++k)
              packed[(((g * mb + j / kOcb) * kk + k) * cg + c) * kOcb + j % kOcb] =
                  transpose ? src[((g * cg + c) * mg + j) * kk + k]
                            : src[((g * mg + j) * cg + c) * kk + k];
    };
    return packed_constant(device, count, pack, w.name, mem);
  };
  if (Status s = device.constant(key, make, &desc->keep); !s.ok()) return s;
  // OpParams holds a reference of its own (its Mem base); keep, the shared entry.
  clRetainMemObject(desc->keep->get());
  *static_cast<OpParams*>(desc->packed.get())->out() = desc->keep->get();
  return {};
}

Status enqueue_conv(Launch& launch, const NodeDesc& desc) {
  const OpParams& p = params(desc);
  auto xd = launch.dims(desc.inputs[0]), wd = launch.dims(desc.inputs[1]);
  auto yd = launch.dims(desc.outputs[0]);
  const int64_t n = yd[0], m = yd[1], oh = yd[2], ow = yd[3];
  if (element_count(yd) == 0) return {};
  const int64_t c = xd[1], h = xd[2], w = xd[3], kh = wd[2], kw = wd[3];
  const int64_t group = p.v[kGroup], cg = c / group, mg = m / group;
  const int64_t ph = pad_begin(p.v[kAutoPad], p.v[kPt], h, oh, kh, p.v[kSh], p.v[kDh]);
  const int64_t pw = pad_begin(p.v[kAutoPad], p.v[kPl], w, ow, kw, p.v[kSw], p.v[kDw]);
  const bool has_bias = desc.inputs.size() > 2 && desc.inputs[2] >= 0;
  cl_mem x = launch.buffer(desc.inputs[0]), y = launch.buffer(desc.outputs[0]);
  cl_mem bias = has_bias ? launch.buffer(desc.inputs[2]) : x;
  const cl_int hb = has_bias ? 1 : 0;
  if (c == 0 || kh * kw == 0) {
    // No input channels (or an empty kernel): the output is the bias; conv1x1 with C = 0 does it.
    return launch.run(
        "conv", "conv1x1",
        {static_cast<size_t>(n * ((m + kOcb - 1) / kOcb) * ((oh * ow + kPx - 1) / kPx)), 1, 1},
        {kLocal1d, 1, 1}, x, x, bias, hb, y, cl_int{0}, static_cast<cl_int>(m),
        static_cast<cl_int>(oh * ow), static_cast<cl_int>((m + kOcb - 1) / kOcb),
        static_cast<cl_int>(n));
  }
  const cl_int8 g0 = int8_of({c, h, w, m, oh, ow, kh, kw});
  const cl_int8 g1 = int8_of({p.v[kSh], p.v[kSw], p.v[kDh], p.v[kDw], ph, pw, group, cg});
  const int64_t owb = (ow + kPx - 1) / kPx;
  if (desc.kernel == "conv_depthwise") {
    const cl_int2 g2{{static_cast<cl_int>(owb), static_cast<cl_int>(n)}};
    return launch.run("conv", "conv_depthwise", {static_cast<size_t>(n * c * oh * owb), 1, 1},
                      {kLocal1d, 1, 1}, x, launch.buffer(desc.inputs[1]), bias, hb, y, g0, g1, g2,
                      desc.act);
  }
  cl_mem packed = nullptr;
  if (Status s = packed_weights(launch, desc, false, group, mg, cg, &packed); !s.ok()) return s;
  const int64_t mb = (mg + kOcb - 1) / kOcb;
  if (desc.kernel == "conv1x1") {
    const int64_t pixels = h * w;
    return launch.run(
        "conv", "conv1x1", {static_cast<size_t>(n * mb * ((pixels + kPx - 1) / kPx)), 1, 1},
        {kLocal1d, 1, 1}, x, packed, bias, hb, y, static_cast<cl_int>(c), static_cast<cl_int>(m),
        static_cast<cl_int>(pixels), static_cast<cl_int>(mb), static_cast<cl_int>(n), desc.act);
  }
  const cl_int4 g2{{static_cast<cl_int>(mg), static_cast<cl_int>(mb), static_cast<cl_int>(owb),
                    static_cast<cl_int>(n)}};
  return launch.run("conv", "conv_direct", {static_cast<size_t>(n * group * mb * oh * owb), 1, 1},
                    {kLocal1d, 1, 1}, x, packed, bias, hb, y, g0, g1, g2, desc.act);
}

std::string prepare_conv_transpose(const NodeView& view, NodeDesc* desc) {
  OpParams& p = make_params(desc);
  if (std::string why = conv_attributes(view, p); !why.empty()) return why;
  if (p.v[kAutoPad] != kNotSet) return "ConvTranspose: auto_pad other than NOTSET not supported";
  if (view.attribute("output_shape"))
    return "ConvTranspose: output_shape not supported (give pads and output_padding)";
  const quilt_value_t& w = *view.input(1);
  for (int i = 0; i < 4; ++i)
    if (w.info.dims[i] < 0) return "ConvTranspose: weights of unknown shape";
  const quilt_value_t& x = *view.input(0);
  const int64_t group = p.v[kGroup];
  if (w.info.dims[0] % group != 0) return "ConvTranspose: C is not a multiple of group";
  if (x.info.dims[1] >= 0 && x.info.dims[1] != w.info.dims[0])
    return "ConvTranspose: X's channels do not match the weights";
  desc->kernel = "conv_transpose";
  return "";
}

Status enqueue_conv_transpose(Launch& launch, const NodeDesc& desc) {
  const OpParams& p = params(desc);
  auto xd = launch.dims(desc.inputs[0]), wd = launch.dims(desc.inputs[1]);
  auto yd = launch.dims(desc.outputs[0]);
  if (element_count(yd) == 0) return {};
  const int64_t group = p.v[kGroup];
  const int64_t n = yd[0], c = xd[1], cg = c / group, m = yd[1], mg = m / group;
  const int64_t mb = (mg + kOcb - 1) / kOcb, sw = p.v[kSw];
  const int64_t owb = ((yd[3] + sw - 1) / sw + kPx - 1) / kPx;  // blocks per residue
  const cl_int8 g0 = int8_of({c, xd[2], xd[3], m, yd[2], yd[3], wd[2], wd[3]});
  const cl_int8 g1 = int8_of({p.v[kSh], sw, p.v[kDh], p.v[kDw], p.v[kPt], p.v[kPl], group, cg});
  const cl_int4 g2{{static_cast<cl_int>(mg), static_cast<cl_int>(mb), static_cast<cl_int>(owb),
                    static_cast<cl_int>(n)}};
  const bool has_bias = desc.inputs.size() > 2 && desc.inputs[2] >= 0;
  cl_mem x = launch.buffer(desc.inputs[0]);
  cl_mem packed = nullptr;
  if (Status s = packed_weights(launch, desc, true, group, mg, cg, &packed); !s.ok()) return s;
  if (!packed) packed = x;  // no weights (C == 0 or an empty kernel): only the bias is written
  return launch.run("conv", "conv_transpose",
                    {static_cast<size_t>(n * group * yd[2] * sw * owb * mb), 1, 1},
                    {kLocal1d, 1, 1}, x, packed, has_bias ? launch.buffer(desc.inputs[2]) : x,
                    cl_int{has_bias ? 1 : 0}, launch.buffer(desc.outputs[0]), g0, g1, g2, desc.act);
}

}  // namespace quilt::opencl
