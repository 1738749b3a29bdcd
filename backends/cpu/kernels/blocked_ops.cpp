// Concat and the element-wise ops on the blocked layout (blocked_ops.hpp).
#include "backends/cpu/kernels/blocked_ops.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "backends/cpu/kernels/channel_vectors.hpp"
#include "backends/cpu/kernels/conv_blocked.hpp"

namespace quilt::cpu {
namespace {

int64_t blocks_of(int64_t channels, int64_t lanes) {
  return (channels + lanes - 1) / lanes;
}

// fn(t, img, b, live) for each block t = img * blocks + b of n images of `channels` (live: the
// block's channels), split over the pool with at least `grain` blocks a share.
template <class Fn>
void for_each_block(const ThreadPool& pool, int64_t n, int64_t channels, int64_t lanes,
                    int64_t grain, Fn fn) {
  const int64_t cb = blocks_of(channels, lanes);
  pool.parallel_for(n * cb, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t)
      fn(t, t / cb, t % cb, std::min(lanes, channels - t % cb * lanes));
  });
}

// A static 4-D float32 type.
bool static_4d_float(const TypeShape& t) {
  return t.dtype == DType::Float32 && t.is_static() && t.dims.size() == 4;
}

// [N, blocks, H, W, lanes] of an NCHW shape.
std::vector<int64_t> blocked_dims(const std::vector<int64_t>& nchw, int64_t lanes) {
  return {nchw[0], blocks_of(nchw[1], lanes), nchw[2], nchw[3], lanes};
}

// The given tensor is input i as the kernel expects it: its logical NCHW shape `nchw`, stored
// blocked or not; a mismatch fails the node naming both.
void check_layout(const KernelContext& ctx, size_t i, const Tensor& x, bool blocked,
                  const std::vector<int64_t>& nchw, int64_t lanes) {
  const std::vector<int64_t> want = blocked ? blocked_dims(nchw, lanes) : nchw;
  if (x.dtype() != DType::Float32 || x.shape() != want)
    ctx.node.fail("input " + std::to_string(i) + " is " + dtype_name(x.dtype()) +
                      to_string(x.shape()) + ", expected float32" + to_string(want) +
                      (blocked ? " (channel-blocked)" : ""),
                  ErrorCode::Runtime);
}

// Channels [0, live) (live <= lanes) of a block: from `live` planes hw floats apart into vectors
// of `lanes` floats per pixel (lanes past live zero), or back.
void planes_to_block(const float* src, int64_t hw, int64_t live, int64_t lanes, float* dst) {
  for (int64_t half = 0; half < lanes; half += 8)
    rows_to_vectors8(src + half * hw, hw, std::clamp<int64_t>(live - half, 0, 8), hw, dst + half,
                     nullptr, lanes);
}
void block_to_planes(const float* src, int64_t hw, int64_t live, int64_t lanes, float* dst) {
  for (int64_t half = 0; half < live; half += 8)
    vectors_to_rows8(src + half, hw, std::min<int64_t>(live - half, 8), dst + half * hw, hw, lanes);
}

class BlockedConcatKernel : public Kernel {
 public:
  BlockedConcatKernel(const NodeSignature& sig, std::vector<char> in_blocked, bool out_blocked,
                      int64_t lanes)
      : lanes_(lanes), in_blocked_(std::move(in_blocked)), out_blocked_(out_blocked) {
    for (const TypeShape& t : sig.inputs) shapes_.push_back(t.dims);
    out_shape_ = sig.outputs[0].dims;
  }

  void run(KernelContext& ctx) const override {
    const int64_t n = out_shape_[0], hw = out_shape_[2] * out_shape_[3];
    const int64_t out_blocks = blocks_of(out_shape_[1], lanes_);
    for (size_t i = 0; i < shapes_.size(); ++i)
      check_layout(ctx, i, ctx.input(i), in_blocked_[i], shapes_[i], lanes_);
    Tensor& y = out_blocked_ ? ctx.output_private(0, blocked_dims(out_shape_, lanes_))
                             : ctx.output_uninitialized(0);
    if (y.numel() == 0) return;  // (an empty tensor's data may be null: no memcpy from it)
    float* out = y.data<float>();
    // Tasks: (image, output block); an output block is filled from one input (every input but
    // the last starts on a block boundary).
    std::vector<size_t> input_of(static_cast<size_t>(out_blocks));
    std::vector<int64_t> first_block(shapes_.size());
    for (size_t i = 0, b = 0; i < shapes_.size(); ++i) {
      first_block[i] = static_cast<int64_t>(b);
      for (int64_t k = 0; k < blocks_of(shapes_[i][1], lanes_); ++k) input_of[b++] = i;
    }
    ctx.pool.parallel_for(n * out_blocks, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t img = t / out_blocks, ob = t % out_blocks;
        const size_t i = input_of[static_cast<size_t>(ob)];
        const int64_t c = shapes_[i][1], b = ob - first_block[i];
        const int64_t live = std::min(lanes_, c - b * lanes_);
        const float* x = ctx.input(i).data<float>();
        if (out_blocked_) {
          float* dst = out + (img * out_blocks + ob) * hw * lanes_;
          if (in_blocked_[i])
            std::memcpy(dst, x + (img * blocks_of(c, lanes_) + b) * hw * lanes_,
                        static_cast<size_t>(hw * lanes_) * sizeof(float));
          else
            planes_to_block(x + (img * c + b * lanes_) * hw, hw, live, lanes_, dst);
        } else {
          float* dst = out + (img * out_shape_[1] + ob * lanes_) * hw;
          if (in_blocked_[i])
            block_to_planes(x + (img * blocks_of(c, lanes_) + b) * hw * lanes_, hw, live, lanes_,
                            dst);
          else
            std::memcpy(dst, x + (img * c + b * lanes_) * hw,
                        static_cast<size_t>(live * hw) * sizeof(float));
        }
      }
    });
    ctx.detail = out_blocked_ ? "blocked layout (channel blocks copied, NCHW inputs reordered)"
                              : "blocked inputs reordered to NCHW";
  }

 private:
  int64_t lanes_;
  std::vector<char> in_blocked_;
  bool out_blocked_;
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<int64_t> out_shape_;
};

// [N, blocks * lanes, H, W]: a blocked tensor of NCHW shape `nchw` seen as an NCHW tensor.
std::vector<int64_t> padded_dims(const std::vector<int64_t>& nchw, int64_t lanes) {
  return {nchw[0], blocks_of(nchw[1], lanes) * lanes, nchw[2], nchw[3]};
}

class BlockedElementWiseKernel : public Kernel {
 public:
  BlockedElementWiseKernel(const NodeSignature& sig, const KernelFactory& create,
                           std::vector<char> full, int64_t lanes)
      : lanes_(lanes), full_(std::move(full)), shape_(sig.outputs[0].dims) {
    NodeSignature padded{sig.node, sig.inputs, sig.outputs, sig.constants};
    padded.bf16 = sig.bf16;
    for (size_t i = 0; i < full_.size(); ++i)
      if (full_[i] == kFull) padded.inputs[i].dims = padded_dims(shape_, lanes_);
    padded.outputs[0].dims = padded_dims(shape_, lanes_);
    out_type_ = padded.outputs[0];
    inner_ = create(padded);
  }

  void run(KernelContext& ctx) const override {
    std::vector<Tensor> views(ctx.num_inputs());
    std::vector<const Tensor*> ins(ctx.num_inputs(), nullptr);
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i)) continue;
      ins[i] = &ctx.input(i);
      if (i < full_.size() && full_[i] == kFull) {
        check_layout(ctx, i, *ins[i], true, shape_, lanes_);
        views[i] = ins[i]->reshaped(padded_dims(shape_, lanes_));
        ins[i] = &views[i];
      }
    }
    std::vector<Tensor> outs(ctx.num_outputs());
    KernelContext inner(ctx.node, ins, {&out_type_, 1}, {outs.data(), 1}, ctx.pool);
    inner.activation = ctx.activation;
    inner_->run(inner);
    if (!outs[0].defined()) ctx.node.fail("kernel did not produce output 0", ErrorCode::Runtime);
    ctx.set_output_private(0, outs[0].reshaped(blocked_dims(shape_, lanes_)));
    ctx.detail = "blocked layout (element-wise over the padded channels)";
  }

  bool reads_constant(size_t i) const override { return inner_->reads_constant(i); }

 private:
  int64_t lanes_;
  std::vector<char> full_;
  std::vector<int64_t> shape_;
  TypeShape out_type_;
  std::unique_ptr<Kernel> inner_;
};

// A kernel writing NCHW, its output reordered to blocked after it runs.
class BlockedOutputKernel : public Kernel {
 public:
  BlockedOutputKernel(const NodeSignature& sig, std::unique_ptr<Kernel> inner, int64_t lanes)
      : lanes_(lanes), out_type_(sig.outputs[0]), inner_(std::move(inner)) {}

  void run(KernelContext& ctx) const override {
    std::vector<const Tensor*> ins(ctx.num_inputs(), nullptr);
    for (size_t i = 0; i < ins.size(); ++i) ins[i] = ctx.optional_input(i);
    Tensor nchw;
    KernelContext inner(ctx.node, ins, {&out_type_, 1}, {&nchw, 1}, ctx.pool);
    inner.activation = ctx.activation;
    inner.bias = ctx.bias;
    inner.residual = ctx.residual;
    inner_->run(inner);
    check_layout(ctx, 0, nchw, false, out_type_.dims, lanes_);
    const std::vector<int64_t>& d = out_type_.dims;
    const int64_t hw = d[2] * d[3], cb = blocks_of(d[1], lanes_);
    Tensor& y = ctx.output_private(0, blocked_dims(d, lanes_));
    if (y.numel() == 0) return;
    const float* x = nchw.data<float>();
    float* out = y.data<float>();
    ctx.pool.parallel_for(d[0] * cb, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t img = t / cb, b = t % cb;
        planes_to_block(x + (img * d[1] + b * lanes_) * hw, hw, std::min(lanes_, d[1] - b * lanes_),
                        lanes_, out + t * hw * lanes_);
      }
    });
    ctx.detail = detail(inner.detail);
  }

  bool reads_constant(size_t i) const override { return inner_->reads_constant(i); }

 private:
  // The inner kernel's detail (a static string, or null) and the reorder, as a string that lives
  // as long as the kernel: one per inner detail seen.
  const char* detail(const char* inner) const {
    std::lock_guard lock(details_mutex_);
    auto [it, added] = details_.try_emplace(inner);
    if (added)
      it->second = std::string(inner ? inner : "NCHW kernel") + ", output reordered to blocked";
    return it->second.c_str();
  }

  int64_t lanes_;
  TypeShape out_type_;
  std::unique_ptr<Kernel> inner_;
  mutable std::mutex details_mutex_;
  mutable std::map<const char*, std::string> details_;
};

// dims broadcast over an [N, C, H, W] output along its channels (and images) only: [C, 1, 1],
// [1, C, 1, 1] or [N, C, 1, 1], with C > 1 (one element is the other kind).
bool is_per_channel(const std::vector<int64_t>& dims, const std::vector<int64_t>& y) {
  if (dims.size() < 3 || dims.size() > 4 || dims[dims.size() - 3] != y[1] || y[1] <= 1)
    return false;
  if (dims[dims.size() - 1] != 1 || dims[dims.size() - 2] != 1) return false;
  return dims.size() == 3 || dims[0] == 1 || dims[0] == y[0];
}

// Add, Sub, Mul or Div of a blocked input and one value per channel (a squeeze-excitation gate:
// x * sigmoid(se)), the output blocked.
class BlockedChannelOpKernel : public Kernel {
 public:
  BlockedChannelOpKernel(const NodeSignature& sig, size_t full, int64_t lanes)
      : lanes_(lanes),
        full_(full),
        shape_(sig.outputs[0].dims),
        op_(sig.node.op_type == "Add"   ? '+'
            : sig.node.op_type == "Sub" ? '-'
            : sig.node.op_type == "Mul" ? '*'
                                        : '/') {}

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(full_);
    const Tensor& c = ctx.input(1 - full_);
    check_layout(ctx, full_, x, true, shape_, lanes_);
    const int64_t n = shape_[0], channels = shape_[1], hw = shape_[2] * shape_[3];
    if (c.dtype() != DType::Float32 || !is_per_channel(c.shape(), shape_))
      ctx.node.fail("input " + std::to_string(1 - full_) + " is " + dtype_name(c.dtype()) +
                        to_string(c.shape()) + ", expected float32 with one value per channel",
                    ErrorCode::Runtime);
    const int64_t image_step = c.rank() == 4 && c.dim(0) == n && n > 1 ? channels : 0;
    Tensor& y = ctx.output_private(0, blocked_dims(shape_, lanes_));
    if (y.numel() == 0) return;
    const float* xp = x.data<float>();
    const float* cp = c.data<float>();
    float* yp = y.data<float>();
    for_each_block(ctx.pool, n, channels, lanes_, std::max<int64_t>(1, 4096 / (hw * lanes_)),
                   [&](int64_t t, int64_t img, int64_t b, int64_t live) {
                     alignas(64) float v[16] = {};
                     const float* gate = cp + img * image_step + b * lanes_;
                     std::copy(gate, gate + live, v);
                     if (lanes_ == 8)
                       apply<8>(xp + t * hw * lanes_, v, yp + t * hw * lanes_, hw);
                     else
                       apply<16>(xp + t * hw * lanes_, v, yp + t * hw * lanes_, hw);
                   });
    ctx.detail = "blocked layout (one value per channel)";
  }

 private:
  template <int L>
  void apply(const float* x, const float* v, float* y, int64_t hw) const {
    const bool first = full_ == 0;  // x is the left operand
    for (int64_t p = 0; p < hw; ++p, x += L, y += L)
      for (int l = 0; l < L; ++l) {
        const float a = first ? x[l] : v[l], b = first ? v[l] : x[l];
        y[l] = op_ == '+' ? a + b : op_ == '-' ? a - b : op_ == '*' ? a * b : a / b;
      }
  }

  int64_t lanes_;
  size_t full_;
  std::vector<int64_t> shape_;
  char op_;
};

// The mean over each channel's plane of a blocked input (GlobalAveragePool, ReduceMean over H
// and W), written as N x C values (NCHW whatever the kept dims).
class BlockedPlaneMeanKernel : public Kernel {
 public:
  BlockedPlaneMeanKernel(const NodeSignature& sig, int64_t lanes)
      : lanes_(lanes), shape_(sig.inputs[0].dims) {}

  void run(KernelContext& ctx) const override {
    check_layout(ctx, 0, ctx.input(0), true, shape_, lanes_);
    const int64_t n = shape_[0], channels = shape_[1], hw = shape_[2] * shape_[3];
    Tensor& y = ctx.output_uninitialized(0);
    if (y.numel() != n * channels)
      ctx.node.fail("output 0 has " + std::to_string(y.numel()) + " values, expected " +
                        std::to_string(n * channels),
                    ErrorCode::Runtime);
    const float* xp = ctx.input(0).data<float>();
    float* yp = y.data<float>();
    const float scale = 1.f / static_cast<float>(hw);
    for_each_block(ctx.pool, n, channels, lanes_, std::max<int64_t>(1, 4096 / (hw * lanes_)),
                   [&](int64_t t, int64_t img, int64_t b, int64_t live) {
                     alignas(64) float sum[16] = {};
                     const float* src = xp + t * hw * lanes_;
                     for (int64_t p = 0; p < hw; ++p)
                       for (int64_t l = 0; l < lanes_; ++l) sum[l] += src[p * lanes_ + l];
                     for (int64_t l = 0; l < live; ++l)
                       yp[img * channels + b * lanes_ + l] = sum[l] * scale;
                   });
    ctx.detail = "blocked layout (plane means)";
  }

 private:
  int64_t lanes_;
  std::vector<int64_t> shape_;
};

}  // namespace

bool blocked_plane_mean_capable(const NodeSignature& sig) {
  if (!sig.node.domain.empty() || sig.inputs.empty() || !static_4d_float(sig.inputs[0]) ||
      sig.outputs.size() != 1)
    return false;
  if (sig.node.op_type == "GlobalAveragePool") return true;
  if (sig.node.op_type != "ReduceMean") return false;
  std::vector<int64_t> axes;
  if (sig.node.opset >= 18) {
    if (sig.inputs.size() < 2 || !sig.constants[1] || sig.constants[1]->dtype() != DType::Int64)
      return false;
    const Tensor& a = *sig.constants[1];
    axes.assign(a.data<int64_t>(), a.data<int64_t>() + a.numel());
  } else {
    axes = sig.node.attr_ints("axes");
  }
  for (int64_t& a : axes)
    if (a < 0) a += 4;
  std::sort(axes.begin(), axes.end());
  return axes == std::vector<int64_t>{2, 3};
}

std::unique_ptr<Kernel> make_blocked_plane_mean(const NodeSignature& sig, int64_t lanes) {
  return std::make_unique<BlockedPlaneMeanKernel>(sig, lanes);
}

bool blocked_output_convertible(const NodeSignature& sig) {
  return sig.outputs.size() == 1 && static_4d_float(sig.outputs[0]);
}

std::unique_ptr<Kernel> make_blocked_output(const NodeSignature& sig, std::unique_ptr<Kernel> inner,
                                            int64_t lanes) {
  return std::make_unique<BlockedOutputKernel>(sig, std::move(inner), lanes);
}

bool blocked_concat_capable(const NodeSignature& sig, int64_t lanes) {
  if (sig.node.op_type != "Concat" || !sig.node.domain.empty() || sig.outputs.size() != 1 ||
      sig.inputs.empty() || !static_4d_float(sig.outputs[0]))
    return false;
  int64_t axis = sig.node.attr_int("axis", 0);
  if (axis < 0) axis += 4;
  if (axis != 1) return false;
  const std::vector<int64_t>& y = sig.outputs[0].dims;
  int64_t channels = 0;
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    const TypeShape& t = sig.inputs[i];
    if (!static_4d_float(t) || t.dims[0] != y[0] || t.dims[2] != y[2] || t.dims[3] != y[3])
      return false;
    if (i + 1 < sig.inputs.size() && t.dims[1] % lanes != 0) return false;
    channels += t.dims[1];
  }
  return channels == y[1];
}

std::unique_ptr<Kernel> make_blocked_concat(const NodeSignature& sig, std::vector<char> in_blocked,
                                            bool out_blocked, int64_t lanes) {
  return std::make_unique<BlockedConcatKernel>(sig, std::move(in_blocked), out_blocked, lanes);
}

bool element_wise_blocked_op(const std::string& op_type) {
  static const std::set<std::string> ops = {"Add",        "Sub",
                                            "Mul",        "Div",
                                            "Min",        "Max",
                                            "Sum",        "Mean",
                                            "Pow",        "Relu",
                                            "LeakyRelu",  "Sigmoid",
                                            "Tanh",       "HardSigmoid",
                                            "HardSwish",  "Clip",
                                            "Elu",        "Selu",
                                            "Celu",       "Softplus",
                                            "Softsign",   "ThresholdedRelu",
                                            "Mish",       "Gelu",
                                            "Swish",      "Abs",
                                            "Neg",        "Exp",
                                            "Log",        "Sqrt",
                                            "Reciprocal", "Erf"};
  return ops.count(op_type) != 0;
}

std::vector<char> blocked_element_wise_inputs(const NodeSignature& sig) {
  if (!sig.node.domain.empty() || !element_wise_blocked_op(sig.node.op_type) ||
      sig.outputs.size() != 1 || !static_4d_float(sig.outputs[0]))
    return {};
  const std::vector<int64_t>& y = sig.outputs[0].dims;
  const std::string& op = sig.node.op_type;
  const bool arithmetic = op == "Add" || op == "Sub" || op == "Mul" || op == "Div";
  std::vector<char> kinds(sig.inputs.size(), kOneElement);
  int full = 0, channel = 0;
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    const TypeShape& t = sig.inputs[i];
    if (t.dtype == DType::Undefined) continue;  // an absent optional input
    if (!t.is_static()) return {};
    const auto one = [](int64_t d) { return d == 1; };
    if (t.dims == y && t.dtype == DType::Float32) {
      kinds[i] = kFull;
      ++full;
    } else if (std::all_of(t.dims.begin(), t.dims.end(), one)) {
      kinds[i] = kOneElement;
    } else if (arithmetic && t.dtype == DType::Float32 && is_per_channel(t.dims, y)) {
      kinds[i] = kPerChannel;
      ++channel;
    } else {
      return {};
    }
  }
  if (full == 0 || (channel > 0 && (sig.inputs.size() != 2 || full != 1))) return {};
  return kinds;
}

std::unique_ptr<Kernel> make_blocked_element_wise(const NodeSignature& sig,
                                                  const KernelFactory& create,
                                                  std::vector<char> kinds, int64_t lanes) {
  if (std::find(kinds.begin(), kinds.end(), kPerChannel) != kinds.end())
    return std::make_unique<BlockedChannelOpKernel>(sig, kinds[0] == kFull ? 0 : 1, lanes);
  return std::make_unique<BlockedElementWiseKernel>(sig, create, std::move(kinds), lanes);
}

}  // namespace quilt::cpu
