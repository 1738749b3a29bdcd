// ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceL2 (kernels_cl/reduce.cl): axes from the
// attribute (before opset 18; ReduceSum before 13) or an int64 constant input, keepdims (the
// output shape is the host's), noop_with_empty_axes (then a copy; |x| for ReduceL2).
#include <algorithm>
#include <cstring>

#include "opencl.hpp"

namespace quilt::opencl {

namespace {

struct ReduceKind {
  const char* op_type;
  int op;              // the kernel's op code
  int64_t axes_input;  // first opset that takes axes as an input
};
constexpr ReduceKind kReduce[] = {{"ReduceSum", 0, 13},
                                  {"ReduceMean", 1, 18},
                                  {"ReduceMax", 2, 18},
                                  {"ReduceMin", 3, 18},
                                  {"ReduceL2", 4, 18}};

}  // namespace

std::string prepare_reduce(const NodeView& view, NodeDesc* desc) {
  const std::string op = view.node.op_type;
  const ReduceKind* kind = nullptr;
  for (const ReduceKind& k : kReduce)
    if (op == k.op_type) kind = &k;
  if (!kind) return op + " is not a reduction";
  const int64_t rank = view.input(0)->info.rank;
  if (rank > 8) return op + ": rank > 8";
  std::vector<int64_t> axes;
  const bool from_input = view.node.opset >= kind->axes_input;
  if (from_input) {
    if (const quilt_value_t* a = view.input(1)) {
      const int64_t n = element_count({a->info.dims, static_cast<size_t>(a->info.rank)});
      const auto* values = static_cast<const int64_t*>(a->constant);
      axes.assign(values, values + n);
    }
    if (axes.empty() && view.int_attribute("noop_with_empty_axes", 0) != 0) {
      // Reducing no axis: a copy, except that ReduceL2 still takes sqrt(x^2) = |x| per element
      // (the spec: composite reductions keep their non-reduction steps), a reduction over
      // one element each.
      desc->i[0] = 0;
      desc->i[1] = kind->op == 4 ? 0 : 1;
      desc->i[2] = kind->op;
      return "";
    }
  } else {
    if (view.input(1))
      return op + ": an axes input before opset " + std::to_string(kind->axes_input);
    if (const quilt_attribute_t* a = view.attribute("axes"); a && a->kind == QUILT_ATTRIBUTE_INTS)
      axes.assign(a->ints, a->ints + a->count);
  }
  int64_t mask = axes.empty() ? (int64_t{1} << rank) - 1 : 0;
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) return op + ": axis " + std::to_string(a) + " out of range";
    if (a < 0) a += rank;
    if (mask >> a & 1) return op + ": axis " + std::to_string(a) + " repeated";
    mask |= int64_t{1} << a;
  }
  desc->i[0] = mask;
  desc->i[1] = 0;
  desc->i[2] = kind->op;
  return "";
}

Status enqueue_reduce(Launch& launch, const NodeDesc& desc) {
  auto xd = launch.dims(desc.inputs[0]);
  const int64_t outputs = element_count(launch.dims(desc.outputs[0]));
  if (outputs == 0) return {};
  if (desc.i[1])
    return launch.copy(launch.buffer(desc.inputs[0]), launch.buffer(desc.outputs[0]),
                       static_cast<size_t>(outputs) * sizeof(float));
  // Kept and reduced dims with their strides, size-1 dims dropped and neighbours merged.
  int64_t stride = 1, count = 1;
  std::vector<std::pair<int64_t, int64_t>> kept, red;  // innermost first
  int prev = -1;
  for (size_t i = xd.size(); i-- > 0;) {
    const int64_t d = xd[i];
    const int reduced = desc.i[0] >> i & 1;
    if (reduced) count *= d;
    if (d != 1) {
      auto& list = reduced ? red : kept;
      if (prev == reduced && !list.empty() && list.back().first * list.back().second == stride)
        list.back().first *= d;
      else
        list.push_back({d, stride});
      prev = reduced;
    }
    stride *= d;
  }
  if (kept.size() > 8 || red.size() > 8)
    return fail(QUILT_STATUS_NOT_IMPLEMENTED, "reduction over more than 8 dims");
  cl_int8 vkd{}, vks{}, vrd{}, vrs{};
  for (size_t i = 0; i < kept.size(); ++i) {
    vkd.s[kept.size() - 1 - i] = static_cast<cl_int>(kept[i].first);
    vks.s[kept.size() - 1 - i] = static_cast<cl_int>(kept[i].second);
  }
  for (size_t i = 0; i < red.size(); ++i) {
    vrd.s[red.size() - 1 - i] = static_cast<cl_int>(red[i].first);
    vrs.s[red.size() - 1 - i] = static_cast<cl_int>(red[i].second);
  }
  if (red.empty()) vrs.s[0] = 0;
  if (outputs < 256 && count >= 8192) {
    // Few long reductions: chunks of at least 1024 elements on separate work-items, then one
    // work-item per output combines them.
    const int64_t parts = std::min<int64_t>(64, count / 1024);
    cl_mem partial = nullptr;
    if (Status s = launch.scratch(static_cast<size_t>(outputs * parts) * sizeof(float), &partial);
        !s.ok())
      return s;
    if (Status s = launch.run(
            "reduce", "reduce_partial", {static_cast<size_t>(outputs * parts), 1, 1},
            {kLocal1d, 1, 1}, launch.buffer(desc.inputs[0]), partial, static_cast<cl_int>(outputs),
            static_cast<cl_int>(kept.size()), vkd, vks, static_cast<cl_int>(red.size()), vrd, vrs,
            static_cast<cl_int>(count), static_cast<cl_int>(desc.i[2]), static_cast<cl_int>(parts));
        !s.ok())
      return s;
    return launch.run("reduce", "reduce_parts", {static_cast<size_t>(outputs), 1, 1},
                      {kLocal1d, 1, 1}, partial, launch.buffer(desc.outputs[0]),
                      static_cast<cl_int>(outputs), static_cast<cl_int>(parts),
                      static_cast<cl_int>(count), static_cast<cl_int>(desc.i[2]));
  }
  return launch.run("reduce", "reduce", {static_cast<size_t>(outputs), 1, 1}, {kLocal1d, 1, 1},
                    launch.buffer(desc.inputs[0]), launch.buffer(desc.outputs[0]),
                    static_cast<cl_int>(outputs), static_cast<cl_int>(kept.size()), vkd, vks,
                    static_cast<cl_int>(red.size()), vrd, vrs, static_cast<cl_int>(count),
                    static_cast<cl_int>(desc.i[2]));
}

}  // namespace quilt::opencl
