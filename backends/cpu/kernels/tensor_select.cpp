// CPU kernels of the tensor family's ops that cut, join or repeat tensors. Slice, Expand and Tile
// are one strided copy each (tensor_copy.cpp); Concat, Split and Pad copy contiguous runs.
#include <algorithm>
#include <array>
#include <cstring>
#include <numeric>
#include <optional>

#include "backends/cpu/kernel.hpp"
#include "core/ops/split_sizes.hpp"

namespace quilt::cpu {

void copy_strided(KernelContext& ctx, const std::vector<int64_t>& shape,
                  const std::vector<int64_t>& strides, int64_t base);
std::array<uint8_t, 8> scalar_bytes(DType dtype, double value);
void register_cpu_tensor_select(KernelRegistry& r);

namespace {

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

int64_t product(const std::vector<int64_t>& dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= dims[i];
  return p;
}

// Rows of this many bytes or more are worth a thread each; fewer are batched.
int64_t grain_for(int64_t row_bytes) {
  return std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, row_bytes));
}

// ---- Slice, Expand, Tile ----

std::vector<int64_t> ints_of(const Tensor& t) {
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::Int32)
    std::copy_n(t.data<int32_t>(), out.size(), out.begin());
  else
    std::copy_n(t.data<int64_t>(), out.size(), out.begin());
  return out;
}

void slice(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const auto rank = in.rank();
  std::vector<int64_t> starts, axes, steps;
  if (ctx.node.opset < 10) {
    starts = ctx.node.attr_ints("starts");
    axes = ctx.node.attr_ints("axes");
  } else {
    starts = ints_of(ctx.input(1));
    if (ctx.has_input(3)) axes = ints_of(ctx.input(3));
    if (ctx.has_input(4)) steps = ints_of(ctx.input(4));
  }
  if (axes.empty()) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  const auto in_strides = contiguous_strides(in.shape());
  std::vector<int64_t> strides = in_strides;
  int64_t base = 0;
  for (size_t i = 0; i < axes.size(); ++i) {
    const auto a = static_cast<size_t>(axes[i] < 0 ? axes[i] + rank : axes[i]);
    const int64_t dim = in.shape()[a];
    int64_t start = starts[i] < 0 ? starts[i] + dim : starts[i];
    start = steps[i] > 0 ? std::clamp<int64_t>(start, 0, dim)
                         : std::min(std::max<int64_t>(start, 0), dim - 1);
    if (ctx.output_shape(0)[a] > 0) base += start * in_strides[a];
    // A step longer than the axis takes one element at most; clamping avoids overflow.
    strides[a] = in_strides[a] * std::clamp<int64_t>(steps[i], -(dim + 1), dim + 1);
  }
  copy_strided(ctx, ctx.output_shape(0), strides, base);
}

void expand(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const size_t rank = ctx.output_shape(0).size(), lead = rank - in.shape().size();
  const auto in_strides = contiguous_strides(in.shape());
  std::vector<int64_t> strides(rank, 0);
  for (size_t i = lead; i < rank; ++i)
    strides[i] = in.shape()[i - lead] == 1 ? 0 : in_strides[i - lead];
  copy_strided(ctx, ctx.output_shape(0), strides, 0);
}

void tile(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const auto repeats = ints_of(ctx.input(1));
  const auto in_strides = contiguous_strides(in.shape());
  // The output is [r0, d0, r1, d1, ...] reading the input with stride 0 along each r.
  std::vector<int64_t> shape, strides;
  for (size_t i = 0; i < in.shape().size(); ++i) {
    shape.insert(shape.end(), {repeats[i], in.shape()[i]});
    strides.insert(strides.end(), {0, in_strides[i]});
  }
  copy_strided(ctx, shape, strides, 0);
}

// ---- Concat, Split ----

void concat(KernelContext& ctx) {
  if (ctx.num_inputs() == 1) return ctx.set_output(0, ctx.input(0));
  Tensor& out = ctx.output_uninitialized(0);  // every byte is copied in below
  if (out.numel() == 0) return;
  const auto rank = out.rank();
  int64_t axis = ctx.node.attr_int("axis", 1);
  if (axis < 0) axis += rank;
  const size_t es = dtype_size(out.dtype());
  const auto a = static_cast<size_t>(axis);
  const int64_t outer = product(out.shape(), 0, a);
  const int64_t inner_bytes = product(out.shape(), a + 1, out.shape().size()) * es;
  const int64_t out_row = out.dim(axis) * inner_bytes;
  std::vector<const uint8_t*> srcs;
  std::vector<int64_t> row_bytes;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    srcs.push_back(static_cast<const uint8_t*>(ctx.input(i).raw_data()));
    row_bytes.push_back(ctx.input(i).dim(axis) * inner_bytes);
  }
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  // The output is copied in 64 KB pieces across the pool, whatever its rows: a channel concat
  // of one image is one row, which went to one thread (Real-ESRGAN's 276 Concats of up to
  // 3 MB took 21 ms).
  constexpr int64_t kPiece = 64 << 10;
  const int64_t total = outer * out_row;
  ctx.pool.parallel_for((total + kPiece - 1) / kPiece, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t lo = p0 * kPiece, hi = std::min(total, p1 * kPiece); lo < hi;) {
      const int64_t o = lo / out_row, off = lo % out_row;
      size_t i = 0;
      int64_t start = 0;  // of input i's part of the row
      while (start + row_bytes[i] <= off) start += row_bytes[i++];
      const int64_t n = std::min(hi - lo, start + row_bytes[i] - off);
      std::memcpy(dst + lo, srcs[i] + o * row_bytes[i] + (off - start), static_cast<size_t>(n));
      lo += n;
    }
  });
}

void split(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const auto rank = in.rank();
  int64_t axis = ctx.node.attr_int("axis", 0);
  if (axis < 0) axis += rank;
  const auto a = static_cast<size_t>(axis);
  const size_t es = dtype_size(in.dtype());
  const int64_t outer = product(in.shape(), 0, a);
  const int64_t inner_bytes = product(in.shape(), a + 1, in.shape().size()) * es;
  const int64_t in_row = in.dim(axis) * inner_bytes;
  const auto* src = static_cast<const uint8_t*>(in.raw_data());
  // The sizes again (an output the model leaves unnamed has no type here, but the outputs after
  // it start past its part: fuzz_run, a null vector indexed).
  std::optional<std::vector<int64_t>> given;
  const int64_t opset = ctx.node.opset;
  if (const Tensor* t = ctx.optional_input(1); t && (opset >= 13 || opset == 1)) {
    if (t->dtype() != DType::Int64)
      ctx.node.fail(std::string("split is ") + dtype_name(t->dtype()) + ", expected int64",
                    ErrorCode::Runtime);
    given.emplace(t->data<int64_t>(), t->data<int64_t>() + t->numel());
  } else if (opset < 13 && ctx.node.has_attr("split")) {
    given = ctx.node.attr_ints("split");
  }
  const std::vector<int64_t> sizes =
      split_sizes(ctx.node, axis, in.dim(axis), static_cast<int64_t>(ctx.num_outputs()), given,
                  ErrorCode::Runtime);
  int64_t offset = 0;
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    const int64_t row = sizes[i] * inner_bytes;
    if (ctx.wants_output(i)) {
      if (ctx.output_shape(i).size() != in.shape().size() || ctx.output_shape(i)[a] != sizes[i])
        ctx.node.fail("output " + std::to_string(i) + " is " + to_string(ctx.output_shape(i)) +
                          "; expected " + std::to_string(sizes[i]) + " along axis " +
                          std::to_string(axis),
                      ErrorCode::Runtime);
      auto* dst = static_cast<uint8_t*>(ctx.output(i).raw_data());
      if (row > 0)
        ctx.pool.parallel_for(outer, grain_for(row), [&](int64_t begin, int64_t end) {
          for (int64_t o = begin; o < end; ++o)
            std::memcpy(dst + o * row, src + o * in_row + offset, static_cast<size_t>(row));
        });
    }
    offset += row;
  }
}

// ---- Pad ----

// One contiguous piece of an output row along the last axis: copied from the input at `src`
// (in elements), or the pad value when src < 0.
struct Run {
  int64_t dst, src, len;
};

enum class PadMode { Constant, Reflect, Edge, Wrap };

// The mode attribute (checked at load, core/ops/tensor_select.cpp).
PadMode pad_mode(const Node& node) {
  const std::string mode = node.attr_string("mode", "constant");
  return mode == "reflect" ? PadMode::Reflect
         : mode == "edge"  ? PadMode::Edge
         : mode == "wrap"  ? PadMode::Wrap
                           : PadMode::Constant;
}

// Input index read by output index o along one axis, or -1 for the constant value.
int64_t pad_source(int64_t o, int64_t begin, int64_t n, PadMode mode) {
  int64_t i = o - begin;
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case PadMode::Constant:
      return -1;
    case PadMode::Edge:
      return i < 0 ? 0 : n - 1;
    case PadMode::Wrap:
      return ((i % n) + n) % n;
    case PadMode::Reflect:
      break;
  }
  // reflect: the sequence 0..n-1..1 repeats with period 2(n-1).
  if (n == 1) return 0;
  const int64_t period = 2 * (n - 1);
  i = ((i % period) + period) % period;
  return i < n ? i : period - i;
}

// Where each output element comes from, worked out from the shapes and the pads alone.
struct PadPlan {
  std::vector<std::vector<int64_t>> maps;  // per axis, the input index of every output index
  std::vector<Run> runs;                   // an output row along the last axis, in pieces
  std::vector<int64_t> in_strides;
};

// begins: per axis, the padding before it (negative: cropped).
PadPlan pad_plan(const Node& node, PadMode mode, const std::vector<int64_t>& in_shape,
                 const std::vector<int64_t>& out_shape, const std::vector<int64_t>& begins) {
  PadPlan plan;
  const size_t rank = in_shape.size();
  if (rank == 0) return plan;
  // Negative pads crop first; the other side is then padded from what is left (this matters
  // for wrap, as in onnxruntime).
  plan.maps.resize(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t n = in_shape[d], lo = std::max<int64_t>(0, -begins[d]);
    const int64_t end_pad = out_shape[d] - n - begins[d];
    const int64_t kept = n - lo - std::max<int64_t>(0, -end_pad);
    const int64_t before = std::max<int64_t>(0, begins[d]);
    if (kept < 0) node.fail("pads crop more than axis " + std::to_string(d) + " holds");
    plan.maps[d].resize(static_cast<size_t>(out_shape[d]));
    for (int64_t o = 0; o < out_shape[d]; ++o) {
      const int64_t i = o - before;
      const bool inside = i >= 0 && i < kept;
      if (kept == 0 && !inside && mode != PadMode::Constant)
        node.fail("cannot pad axis " + std::to_string(d) + " of size 0 in mode '" +
                  node.attr_string("mode", "constant") + "'");
      const int64_t s = pad_source(o, before, kept, mode);
      plan.maps[d][static_cast<size_t>(o)] = s < 0 ? s : lo + s;
    }
  }
  for (int64_t o = 0; o < out_shape.back(); ++o) {
    const int64_t s = plan.maps.back()[static_cast<size_t>(o)];
    if (!plan.runs.empty()) {
      Run& r = plan.runs.back();
      if ((s < 0 && r.src < 0) || (s >= 0 && r.src >= 0 && s == r.src + r.len)) {
        ++r.len;
        continue;
      }
    }
    plan.runs.push_back({o, s, 1});
  }
  plan.in_strides = contiguous_strides(in_shape);
  return plan;
}

// Pad: the mode read once, and the plan made once for static shapes when the pads (and axes)
// are constant: the streaming VAD's reflect padding rebuilt it, and read the mode's string for
// every output element, on every call.
class PadKernel : public Kernel {
 public:
  explicit PadKernel(const NodeSignature& sig)
      : mode_(pad_mode(sig.node)), value_attr_(sig.node.attr_float("value", 0.0f)) {
    const Node& node = sig.node;
    const bool pads_known = node.opset < 11 || (sig.constants.size() > 1 && sig.constants[1]);
    const bool has_axes = node.opset >= 18 && node.inputs.size() > 3 && !node.inputs[3].empty();
    const bool axes_known = !has_axes || (sig.constants.size() > 3 && sig.constants[3]);
    // Plans are kept by shape only when the pads (and axes) are constant: pads read at run time
    // may differ between runs of the same shapes ([1, 0] and [0, 1]).
    by_shape_ = pads_known && axes_known;
    if (!by_shape_ || sig.inputs.empty() || sig.outputs.empty()) return;
    // Constant pads of an input of known rank: the begins are read once, not on every run.
    // (Pads that inference could not check are read, and refused, on a run.)
    if (sig.inputs[0].has_shape) {
      try {
        begins_ =
            begins(node, sig.inputs[0].dims.size(), node.opset >= 11 ? sig.constants[1] : nullptr,
                   has_axes ? sig.constants[3] : nullptr);
        pads_zero_ =
            std::all_of(begins_->begin(), begins_->end(), [](int64_t b) { return b == 0; });
      } catch (const Error&) {
        begins_.reset();
      }
    }
    // The plan holds an index per output position along each axis. At creation it is made only
    // when those are few: a model may declare a dim of 2^31 that no run has (fuzz_model: 16 GB
    // asked for while the session was created). Larger outputs are planned on each run, once
    // their output is allocated, which bounds the plan by the output's size.
    int64_t left = kPlanAtCreation;  // positions the plan may still hold (no sum to overflow)
    for (int64_t d : sig.outputs[0].dims) {
      if (d > left) return;
      left -= std::max<int64_t>(d, 0);
    }
    if (begins_)
      plan_.keep({&sig.inputs[0], &sig.outputs[0]},
                 [&](const auto& s) { return pad_plan(node, mode_, s[0], s[1], *begins_); });
  }

  void run(KernelContext& ctx) const override {
    const Tensor& in = ctx.input(0);
    const Node& node = ctx.node;
    const size_t rank = in.shape().size(), es = dtype_size(in.dtype());
    std::array<uint8_t, 8> value{};
    if (node.opset < 11) {
      value = scalar_bytes(in.dtype(), value_attr_);
    } else if (const Tensor* v = ctx.optional_input(2)) {
      if (v->numel() != 1 || v->dtype() != in.dtype())
        node.fail("constant_value must be one element of the input's dtype");
      std::memcpy(value.data(), v->raw_data(), es);
    }
    const std::vector<int64_t>& out_shape = ctx.output_shape(0);
    const bool kept = begins_ && begins_->size() == rank;
    std::vector<int64_t> read;  // the begins of this run, when not known at creation
    if (!kept)
      read = begins(node, rank, node.opset >= 11 ? &ctx.input(1) : nullptr,
                    node.opset >= 18 && ctx.has_input(3) ? &ctx.input(3) : nullptr);
    const std::vector<int64_t>& pad_begins = kept ? *begins_ : read;
    const bool zero =
        kept ? pads_zero_ : std::all_of(read.begin(), read.end(), [](int64_t b) { return b == 0; });
    if (zero && in.shape() == out_shape) return ctx.set_output(0, in);
    // The output first: a plan is as large as the output's axes, and an output that cannot be
    // allocated is an OutOfMemory error before the plan asks for anything.
    Tensor& out = ctx.output(0);
    if (out.numel() == 0) return;
    auto make = [&] { return pad_plan(node, mode_, in.shape(), out_shape, pad_begins); };
    ShapeMemo<PadPlan>::Held held;
    PadPlan made;
    const PadPlan& plan =
        by_shape_ ? plan_.get({in.shape(), out_shape}, held, make) : (made = make());
    if (rank == 0) return (void)std::memcpy(out.raw_data(), in.raw_data(), es);
    const int64_t width = out.shape().back();
    const int64_t rows = out.numel() / width;
    const auto* src = static_cast<const uint8_t*>(in.raw_data());
    auto* dst = static_cast<uint8_t*>(out.raw_data());
    auto fill = [&](uint8_t* p, int64_t n) {
      for (int64_t i = 0; i < n; ++i) std::memcpy(p + i * es, value.data(), es);
    };
    const auto& shape = out.shape();
    ctx.pool.parallel_for(rows, grain_for(width * static_cast<int64_t>(es)),
                          [&](int64_t begin, int64_t end) {
                            for (int64_t row = begin; row < end; ++row) {
                              uint8_t* d = dst + row * width * static_cast<int64_t>(es);
                              int64_t src_row = 0, rem = row;
                              bool constant_row = false;
                              for (size_t k = rank - 1; k-- > 0;) {
                                const int64_t o = rem % shape[k];
                                rem /= shape[k];
                                const int64_t s = plan.maps[k][static_cast<size_t>(o)];
                                if (s < 0) constant_row = true;
                                src_row += s * plan.in_strides[k];
                              }
                              if (constant_row) {
                                fill(d, width);
                                continue;
                              }
                              for (const Run& r : plan.runs) {
                                if (r.src < 0)
                                  fill(d + r.dst * static_cast<int64_t>(es), r.len);
                                else
                                  std::memcpy(d + r.dst * static_cast<int64_t>(es),
                                              src + (src_row + r.src) * static_cast<int64_t>(es),
                                              static_cast<size_t>(r.len) * es);
                              }
                            }
                          });
  }

 private:
  // Per axis of a rank-`rank` input, the padding before it: the pads attribute (opset < 11) or
  // input, over the axes input's axes when given (opset 18).
  static std::vector<int64_t> begins(const Node& node, size_t rank, const Tensor* pads_input,
                                     const Tensor* axes_input) {
    std::vector<int64_t> pads, axes(rank);
    std::iota(axes.begin(), axes.end(), 0);
    if (node.opset < 11) {
      pads = node.attr_ints(node.opset < 2 ? "paddings" : "pads");
    } else {
      pads = ints_of(*pads_input);
      if (axes_input) {
        axes = ints_of(*axes_input);
        for (auto& a : axes) a = a < 0 ? a + static_cast<int64_t>(rank) : a;
      }
    }
    // Inference checks these, but not where it ran without the rank: a Scan body whose value
    // had an undefined element type was compiled on a run with a rank-1 input and a Pad with no
    // pads (fuzz_run: UBSan, pads[0] of an empty vector).
    if (pads.size() != 2 * axes.size())
      node.fail("pads has " + std::to_string(pads.size()) + " entries, expected " +
                std::to_string(2 * axes.size()) + " (2 per padded axis of the rank-" +
                std::to_string(rank) + " input)");
    std::vector<int64_t> out(rank, 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      if (axes[i] < 0 || axes[i] >= static_cast<int64_t>(rank))
        node.fail("axes holds " + std::to_string(axes[i]) + ", outside the rank-" +
                  std::to_string(rank) + " input");
      out[static_cast<size_t>(axes[i])] = pads[i];
    }
    return out;
  }

  static constexpr int64_t kPlanAtCreation = int64_t{1} << 16;  // output indices, all axes
  PadMode mode_;
  float value_attr_;       // opset < 11: the constant, an attribute
  bool by_shape_ = false;  // the plan depends on the shapes alone (constant pads and axes)
  std::optional<std::vector<int64_t>> begins_;  // constant pads of a known rank: read once
  bool pads_zero_ = false;                      // ... and all of them 0
  ShapeMemo<PadPlan> plan_;                     // of the shapes of the input and the output
};

}  // namespace

void register_cpu_tensor_select(KernelRegistry& r) {
  r.add("Slice", any_dtype(), KernelFn(slice));
  r.add("Expand", any_dtype(), KernelFn(expand));
  r.add("Tile", any_dtype(), KernelFn(tile));
  r.add("Concat", any_dtype(), KernelFn(concat));
  r.add("Split", any_dtype(), KernelFn(split));
  r.add("Pad", any_dtype(), KernelFactory([](const NodeSignature& sig) -> std::unique_ptr<Kernel> {
          return std::make_unique<PadKernel>(sig);
        }));
}

}  // namespace quilt::cpu
