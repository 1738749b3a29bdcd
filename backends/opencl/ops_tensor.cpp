// Tensor ops (kernels_cl/tensor.cl): Transpose, Concat, Split and Slice as strided copies;
// Gather with constant int64 indices; constant-mode Pad with constant pads; Resize of H and W
// of NCHW (nearest and linear; half_pixel, asymmetric, align_corners, pytorch_half_pixel).
// Shapes the host inferred give the output sizes; prepare() keeps what the kernels need besides.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "opencl.hpp"

namespace quilt::opencl {

namespace {

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

// The values of an int64 constant input (the generic checks made sure it is one).
std::vector<int64_t> constant_ints(const quilt_value_t& v) {
  const int64_t n = element_count({v.info.dims, static_cast<size_t>(v.info.rank)});
  const auto* p = static_cast<const int64_t*>(v.constant);
  return {p, p + n};
}

int64_t rank_of(const NodeView& view) {
  return view.input(0)->info.rank;
}

std::string normalize_axis(const std::string& op, int64_t* axis, int64_t rank) {
  if (*axis < -rank || *axis >= rank)
    return op + ": axis " + std::to_string(*axis) + " out of range for rank " +
           std::to_string(rank);
  if (*axis < 0) *axis += rank;
  return "";
}

std::vector<int64_t> contiguous_strides(std::span<const int64_t> dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t k = dims.size(); k-- > 1;) s[k - 1] = s[k] * dims[k];
  return s;
}

// A strided copy of every index of `dims`: size-1 dims dropped, neighbours merged where both
// sides are contiguous across them.
Status strided_copy(Launch& launch, cl_mem src, cl_mem dst, std::vector<int64_t> dims,
                    std::vector<int64_t> src_strides, int64_t src_base,
                    std::vector<int64_t> dst_strides, int64_t dst_base) {
  const int64_t n = element_count(dims);
  if (n == 0) return {};
  std::vector<int64_t> d, a, b;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] == 1) continue;
    if (!d.empty() && a.back() == src_strides[k] * dims[k] &&
        b.back() == dst_strides[k] * dims[k]) {
      d.back() *= dims[k];
      a.back() = src_strides[k];
      b.back() = dst_strides[k];
      continue;
    }
    d.push_back(dims[k]);
    a.push_back(src_strides[k]);
    b.push_back(dst_strides[k]);
  }
  if (d.size() > 8) return fail(QUILT_STATUS_NOT_IMPLEMENTED, "a copy over more than 8 dims");
  // Rows of at least 8 contiguous elements on both sides: one row per work-item.
  int64_t len = 1;
  if (!d.empty() && a.back() == 1 && b.back() == 1 && d.back() >= 8) {
    len = d.back();
    d.pop_back(), a.pop_back(), b.pop_back();
  }
  cl_int8 vd{}, va{}, vb{};
  for (size_t k = 0; k < 8; ++k) vd.s[k] = 1;
  for (size_t k = 0; k < d.size(); ++k) {
    vd.s[k] = static_cast<cl_int>(d[k]);
    va.s[k] = static_cast<cl_int>(a[k]);
    vb.s[k] = static_cast<cl_int>(b[k]);
  }
  if (len > 1)
    return launch.run("tensor", "strided_copy_rows", {static_cast<size_t>(n / len), 1, 1},
                      {kLocal1d, 1, 1}, src, dst, static_cast<cl_int>(n / len),
                      static_cast<cl_int>(len), static_cast<cl_int>(d.size()), vd, va,
                      static_cast<cl_int>(src_base), vb, static_cast<cl_int>(dst_base));
  return launch.run("tensor", "strided_copy", {static_cast<size_t>(n), 1, 1}, {kLocal1d, 1, 1}, src,
                    dst, static_cast<cl_int>(n), static_cast<cl_int>(d.size()), vd, va,
                    static_cast<cl_int>(src_base), vb, static_cast<cl_int>(dst_base));
}

}  // namespace

// ---- Transpose ----

std::string prepare_transpose(const NodeView& view, NodeDesc* desc) {
  const int64_t rank = rank_of(view);
  std::vector<int64_t> perm = ints_attribute(view, "perm", {});
  if (perm.empty())
    for (int64_t k = rank - 1; k >= 0; --k) perm.push_back(k);
  if (static_cast<int64_t>(perm.size()) != rank) return "Transpose: perm of the wrong length";
  std::vector<char> seen(rank, 0);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p]) return "Transpose: perm is not a permutation";
    seen[p] = 1;
  }
  make_params(desc).v = perm;
  return "";
}

Status enqueue_transpose(Launch& launch, const NodeDesc& desc) {
  auto in = launch.dims(desc.inputs[0]);
  auto out = launch.dims(desc.outputs[0]);
  const auto& perm = params(desc).v;
  const auto in_strides = contiguous_strides(in);
  std::vector<int64_t> src(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) src[k] = in_strides[perm[k]];
  return strided_copy(launch, launch.buffer(desc.inputs[0]), launch.buffer(desc.outputs[0]),
                      {out.begin(), out.end()}, src, 0, contiguous_strides(out), 0);
}

// ---- Concat ----

std::string prepare_concat(const NodeView& view, NodeDesc* desc) {
  int64_t axis = view.int_attribute("axis", std::numeric_limits<int64_t>::min());
  if (axis == std::numeric_limits<int64_t>::min()) return "Concat: no axis";
  if (std::string why = normalize_axis("Concat", &axis, rank_of(view)); !why.empty()) return why;
  for (size_t i = 1; i < view.node.num_inputs; ++i)
    if (const quilt_value_t* v = view.input(i); v && v->info.rank != rank_of(view))
      return "Concat: inputs of different ranks";
  desc->i[0] = axis;
  return "";
}

Status enqueue_concat(Launch& launch, const NodeDesc& desc) {
  auto out = launch.dims(desc.outputs[0]);
  const size_t axis = static_cast<size_t>(desc.i[0]);
  const auto out_strides = contiguous_strides(out);
  int64_t offset = 0;
  for (int32_t v : desc.inputs) {
    if (v < 0) continue;
    auto in = launch.dims(v);
    if (Status s = strided_copy(launch, launch.buffer(v), launch.buffer(desc.outputs[0]),
                                {in.begin(), in.end()}, contiguous_strides(in), 0, out_strides,
                                offset * out_strides[axis]);
        !s.ok())
      return s;
    offset += in[axis];
  }
  return {};
}

// ---- Split ----

std::string prepare_split(const NodeView& view, NodeDesc* desc) {
  int64_t axis = view.int_attribute("axis", 0);
  if (std::string why = normalize_axis("Split", &axis, rank_of(view)); !why.empty()) return why;
  // Every output is float32 with a known rank; their sizes come from the host's inference.
  desc->outputs.assign(view.node.outputs, view.node.outputs + view.node.num_outputs);
  for (size_t i = 0; i < view.node.num_outputs; ++i) {
    const quilt_value_t* v = view.output(i);
    if (!v) return "Split: an absent output";
    if (v->info.dtype != QUILT_DTYPE_FLOAT32 || v->info.rank != rank_of(view))
      return "Split: outputs must be float32 of the input's rank";
  }
  desc->i[0] = axis;
  return "";
}

Status enqueue_split(Launch& launch, const NodeDesc& desc) {
  auto in = launch.dims(desc.inputs[0]);
  const size_t axis = static_cast<size_t>(desc.i[0]);
  const auto in_strides = contiguous_strides(in);
  int64_t offset = 0;
  for (int32_t v : desc.outputs) {
    auto out = launch.dims(v);
    if (Status s = strided_copy(launch, launch.buffer(desc.inputs[0]), launch.buffer(v),
                                {out.begin(), out.end()}, in_strides, offset * in_strides[axis],
                                contiguous_strides(out), 0);
        !s.ok())
      return s;
    offset += out[axis];
  }
  return {};
}

// ---- Slice: params v = (start, end, step) per dim ----

std::string prepare_slice(const NodeView& view, NodeDesc* desc) {
  const int64_t rank = rank_of(view);
  std::vector<int64_t> starts, ends, axes, steps;
  if (view.node.opset < 10) {
    starts = ints_attribute(view, "starts", {});
    ends = ints_attribute(view, "ends", {});
    axes = ints_attribute(view, "axes", {});
  } else {
    starts = constant_ints(*view.input(1));
    ends = constant_ints(*view.input(2));
    if (const quilt_value_t* a = view.input(3)) axes = constant_ints(*a);
    if (const quilt_value_t* s = view.input(4)) steps = constant_ints(*s);
  }
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return "Slice: starts, ends, axes and steps of different lengths";
  std::vector<int64_t>& v = make_params(desc).v;
  for (int64_t k = 0; k < rank; ++k) v.insert(v.end(), {0, std::numeric_limits<int64_t>::max(), 1});
  std::vector<char> seen(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (std::string why = normalize_axis("Slice", &a, rank); !why.empty()) return why;
    if (seen[a]) return "Slice: axis repeated";
    seen[a] = 1;
    if (steps[i] == 0) return "Slice: step 0";
    v[3 * a] = starts[i], v[3 * a + 1] = ends[i], v[3 * a + 2] = steps[i];
  }
  return "";
}

Status enqueue_slice(Launch& launch, const NodeDesc& desc) {
  auto in = launch.dims(desc.inputs[0]);
  auto out = launch.dims(desc.outputs[0]);
  const auto& v = params(desc).v;
  const auto in_strides = contiguous_strides(in);
  std::vector<int64_t> src(in.size());
  int64_t base = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    // A step at least as long as the axis takes one element at most (as the core's shape
    // inference has it): clamped, step * stride stays within the tensor's size.
    const int64_t d = in[k], bound = std::max<int64_t>(d, 1);
    const int64_t step = std::clamp<int64_t>(v[3 * k + 2], -bound, bound);
    src[k] = step * in_strides[k];
    if (d == 0 || out[k] == 0) continue;
    int64_t start = v[3 * k];
    if (start < 0) start += d;
    start = step > 0 ? std::clamp<int64_t>(start, 0, d) : std::clamp<int64_t>(start, 0, d - 1);
    base += start * in_strides[k];
  }
  return strided_copy(launch, launch.buffer(desc.inputs[0]), launch.buffer(desc.outputs[0]),
                      {out.begin(), out.end()}, src, base, contiguous_strides(out), 0);
}

// ---- Gather: constant int64 indices, uploaded as int32; params v = the indices ----

std::string prepare_gather(const NodeView& view, NodeDesc* desc) {
  int64_t axis = view.int_attribute("axis", 0);
  if (std::string why = normalize_axis("Gather", &axis, rank_of(view)); !why.empty()) return why;
  const quilt_value_t& idx = *view.input(1);
  std::vector<int64_t> indices = constant_ints(idx);
  for (int64_t i : indices)
    if (i < std::numeric_limits<int32_t>::min() || i > std::numeric_limits<int32_t>::max())
      return "Gather: an index beyond 32 bits";
  const int64_t a = view.input(0)->info.dims[axis];
  if (a >= 0)
    for (int64_t i : indices)
      if (i < -a || i >= a) return "Gather: index " + std::to_string(i) + " out of range";
  desc->i[0] = axis;
  make_params(desc).v = std::move(indices);
  return "";
}

Status upload_gather(quilt_device_s& device, const NodeView&, NodeDesc* desc) {
  auto& p = *static_cast<OpParams*>(desc->packed.get());
  if (p.v.empty()) return {};
  std::vector<cl_int> idx(p.v.begin(), p.v.end());
  cl_int err = CL_SUCCESS;
  cl_mem mem = clCreateBuffer(device.context.get(), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                              idx.size() * sizeof(cl_int), idx.data(), &err);
  if (err != CL_SUCCESS) return cl_fail(err, "upload of Gather's indices");
  *p.out() = mem;
  return {};
}

Status enqueue_gather(Launch& launch, const NodeDesc& desc) {
  auto in = launch.dims(desc.inputs[0]);
  const int64_t n = element_count(launch.dims(desc.outputs[0]));
  if (n == 0) return {};
  const size_t axis = static_cast<size_t>(desc.i[0]);
  const OpParams& p = params(desc);
  const int64_t a = in[axis], k = static_cast<int64_t>(p.v.size());
  for (int64_t i : p.v)
    if (i < -a || i >= a)
      return fail(
          QUILT_STATUS_INVALID_ARGUMENT,
          "Gather: index " + std::to_string(i) + " out of range for axis of " + std::to_string(a));
  int64_t inner = 1;
  for (size_t d = axis + 1; d < in.size(); ++d) inner *= in[d];
  return launch.run("tensor", "gather", {static_cast<size_t>(n), 1, 1}, {kLocal1d, 1, 1},
                    launch.buffer(desc.inputs[0]), p.get(), launch.buffer(desc.outputs[0]),
                    static_cast<cl_int>(n), static_cast<cl_int>(k), static_cast<cl_int>(inner),
                    static_cast<cl_int>(a));
}

// ---- Pad: constant mode, constant pads; params v = the leading pad per dim ----

std::string prepare_pad(const NodeView& view, NodeDesc* desc) {
  const int64_t rank = rank_of(view);
  const std::string mode = string_attribute(view, "mode", "constant");
  if (mode != "constant") return "Pad: mode '" + mode + "' not supported (only constant)";
  std::vector<int64_t> pads, axes;
  float value = 0.0f;
  if (view.node.opset < 11) {
    pads = ints_attribute(view, "pads", {});
    value = view.float_attribute("value", 0.0f);
  } else {
    pads = constant_ints(*view.input(1));
    if (const quilt_value_t* c = view.input(2)) {
      const int64_t n = element_count({c->info.dims, static_cast<size_t>(c->info.rank)});
      if (!c->constant) return "Pad: constant_value computed at run time (only constants)";
      if (n > 1) return "Pad: constant_value is not a scalar";
      if (n == 1) std::memcpy(&value, c->constant, sizeof(float));
    }
    if (const quilt_value_t* a = view.input(3)) axes = constant_ints(*a);
  }
  if (axes.empty())
    for (int64_t k = 0; k < rank; ++k) axes.push_back(k);
  if (pads.size() != 2 * axes.size()) return "Pad: pads of the wrong length";
  std::vector<int64_t>& begins = make_params(desc).v;
  begins.assign(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (std::string why = normalize_axis("Pad", &a, rank); !why.empty()) return why;
    if (std::abs(pads[i]) > (int64_t{1} << 30) ||
        std::abs(pads[i + axes.size()]) > (int64_t{1} << 30))
      return "Pad: pads beyond 2^30";
    begins[a] = pads[i];
  }
  desc->f[0] = value;
  return "";
}

Status enqueue_pad(Launch& launch, const NodeDesc& desc) {
  auto in = launch.dims(desc.inputs[0]);
  auto out = launch.dims(desc.outputs[0]);
  const int64_t n = element_count(out);
  if (n == 0) return {};
  const auto& begins = params(desc).v;
  cl_int8 vo{}, vi{}, vb{};
  for (size_t k = 0; k < 8; ++k) vo.s[k] = vi.s[k] = 1;
  for (size_t k = 0; k < out.size(); ++k) {
    vo.s[k] = static_cast<cl_int>(out[k]);
    vi.s[k] = static_cast<cl_int>(in[k]);
    vb.s[k] = static_cast<cl_int>(begins[k]);
  }
  cl_mem src = launch.buffer(desc.inputs[0]), dst = launch.buffer(desc.outputs[0]);
  return launch.run("tensor", "pad_constant", {static_cast<size_t>(n), 1, 1}, {kLocal1d, 1, 1},
                    src ? src : dst, dst, static_cast<cl_int>(n), static_cast<cl_int>(out.size()),
                    vo, vi, vb, desc.f[0]);
}

// ---- Resize: i = (coord, nearest mode, linear, from scales), f = (scale_h, scale_w) ----

std::string prepare_resize(const NodeView& view, NodeDesc* desc) {
  if (view.node.opset < 11) return "Resize: opsets before 11 not supported";
  const quilt_value_t& x = *view.input(0);
  if (x.info.rank != 4) return "Resize: only 4-D NCHW inputs";
  const std::string mode = string_attribute(view, "mode", "nearest");
  if (mode != "nearest" && mode != "linear")
    return "Resize: mode '" + mode + "' not supported (nearest and linear)";
  const std::string coord = string_attribute(view, "coordinate_transformation_mode", "half_pixel");
  const char* const kCoords[] = {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"};
  int64_t coord_index = -1;
  for (int64_t i = 0; i < 4; ++i)
    if (coord == kCoords[i]) coord_index = i;
  if (coord_index < 0)
    return "Resize: coordinate_transformation_mode '" + coord + "' not supported";
  const std::string nearest = string_attribute(view, "nearest_mode", "round_prefer_floor");
  const char* const kNearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  int64_t nearest_index = -1;
  for (int64_t i = 0; i < 4; ++i)
    if (nearest == kNearest[i]) nearest_index = i;
  if (nearest_index < 0) return "Resize: nearest_mode '" + nearest + "' not supported";
  if (mode == "linear" && view.int_attribute("antialias", 0) != 0)
    return "Resize: antialias not supported";
  std::vector<int64_t> axes = ints_attribute(view, "axes", {0, 1, 2, 3});
  for (int64_t& a : axes)
    if (std::string why = normalize_axis("Resize", &a, 4); !why.empty()) return why;
  const quilt_value_t* scales = view.input(2);
  const quilt_value_t* sizes = view.input(3);
  auto count = [](const quilt_value_t* v) {
    return v ? element_count({v->info.dims, static_cast<size_t>(v->info.rank)}) : 0;
  };
  const bool from_scales = count(scales) > 0;
  if (from_scales == (count(sizes) > 0)) return "Resize: give exactly one of scales and sizes";
  if (static_cast<size_t>(from_scales ? count(scales) : count(sizes)) != axes.size())
    return "Resize: scales/sizes of the wrong length";
  desc->f = {1.0f, 1.0f};
  if (from_scales) {
    if (!scales->constant) return "Resize: scales computed at run time (only constants)";
    const auto* s = static_cast<const float*>(scales->constant);
    for (size_t i = 0; i < axes.size(); ++i) {
      if (axes[i] < 2 && s[i] != 1.0f) return "Resize: scaling N or C not supported";
      if (axes[i] >= 2) {
        if (!(s[i] > 0)) return "Resize: scales must be positive";
        desc->f[axes[i] - 2] = s[i];
      }
    }
  } else {
    if (string_attribute(view, "keep_aspect_ratio_policy", "stretch") != "stretch")
      return "Resize: keep_aspect_ratio_policy other than stretch";
    const auto s = constant_ints(*sizes);
    for (size_t i = 0; i < axes.size(); ++i)
      if (axes[i] < 2 && (x.info.dims[axes[i]] < 0 || s[i] != x.info.dims[axes[i]]))
        return "Resize: sizes that may change N or C not supported";
  }
  desc->i = {coord_index, nearest_index, mode == "linear" ? 1 : 0, from_scales ? 1 : 0};
  return "";
}

Status enqueue_resize(Launch& launch, const NodeDesc& desc) {
  auto in = launch.dims(desc.inputs[0]);
  auto out = launch.dims(desc.outputs[0]);
  const int64_t total = element_count(out);
  if (total == 0) return {};
  if (in[0] != out[0] || in[1] != out[1])
    return fail(QUILT_STATUS_NOT_IMPLEMENTED, "Resize: N or C changes");
  if (in[2] >= (1 << 24) || in[3] >= (1 << 24) || element_count(in) == 0)
    return fail(QUILT_STATUS_NOT_IMPLEMENTED, "Resize: input too large or empty");
  float scale[2], fout[2];
  for (int d = 0; d < 2; ++d) {
    const float fin = static_cast<float>(in[2 + d]);
    // With sizes the transform's scale is out / in, as on the CPU.
    scale[d] = desc.i[3] ? desc.f[d] : static_cast<float>(out[2 + d]) / fin;
    // align_corners maps the corners of the unrounded output (in * scale) when from scales.
    fout[d] = desc.i[0] == 2 && desc.i[3] ? scale[d] * fin : static_cast<float>(out[2 + d]);
  }
  // The axes' taps into a scratch buffer (rows, then columns), then the planes.
  cl_mem taps = nullptr;
  if (Status s = launch.scratch(static_cast<size_t>(3 * (out[2] + out[3])) * sizeof(float), &taps);
      !s.ok())
    return s;
  // mode.s3: the scale is out / in (sizes), so nearest coordinates are exact fractions.
  const cl_int4 mode{{static_cast<cl_int>(desc.i[0]), static_cast<cl_int>(desc.i[1]),
                      static_cast<cl_int>(desc.i[2]), desc.i[3] ? 0 : 1}};
  for (int d = 0; d < 2; ++d)
    if (Status s = launch.run("tensor", "resize_axis", {static_cast<size_t>(out[2 + d]), 1, 1},
                              {kLocal1d, 1, 1}, taps, static_cast<cl_int>(d ? out[2] : 0),
                              static_cast<cl_int>(in[2 + d]), static_cast<cl_int>(out[2 + d]),
                              scale[d], fout[d], mode);
        !s.ok())
      return s;
  const cl_int4 geo{{static_cast<cl_int>(in[2]), static_cast<cl_int>(in[3]),
                     static_cast<cl_int>(out[2]), static_cast<cl_int>(out[3])}};
  const int64_t rows = out[0] * out[1] * out[2];
  return launch.run("tensor", "resize2d", {static_cast<size_t>(rows), 1, 1}, {kLocal1d, 1, 1},
                    launch.buffer(desc.inputs[0]), launch.buffer(desc.outputs[0]), taps, geo,
                    static_cast<cl_int>(desc.i[2]), static_cast<cl_int>(rows));
}

}  // namespace quilt::opencl
