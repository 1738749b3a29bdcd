// Per-channel affine maps y = s * x + t folded into the Conv, ConvTranspose or Gemm before them,
// when that op's output feeds only the map and its weights are constants: the op's weights are
// scaled by s and its bias becomes s * bias + t. Two passes:
//  - fold_batch_norms: BatchNormalization (inference form, constant parameters). Exporters that
//    do not fold it themselves (paddle2onnx, training-mode torch exports, Keras models) leave one
//    BN per conv.
//  - fold_channel_affines: Mul, Add or Sub of a constant holding one value or one per output
//    channel (TensorFlow's BiasAdd after a bias-free conv, Real-ESRGAN's residual scaling
//    conv * 0.2 before its Add, a Gemm scaled by a constant). Run after the activation rewrites:
//    an Add of 3 that starts a written-out HardSigmoid/HardSwish stays for that rewrite to match.
// The folded weights are new initializers: the originals may be read by other nodes, and are
// dropped when nothing does.
#include <algorithm>
#include <cmath>

#include "core/optimize/rewriter.hpp"

namespace quilt::optimize {
namespace {

// The BN as y[c] = s[c] * x[c] + t[c].
struct ChannelAffine {
  std::vector<float> s, t;
};

std::optional<ChannelAffine> affine_of(const Rewriter& r, const Node& bn) {
  if (bn.inputs.size() != 5 || bn.opset < 7) return std::nullopt;
  if (bn.opset >= 14 && bn.attr_int("training_mode", 0) != 0) return std::nullopt;
  if (bn.opset < 9 && bn.attr_int("spatial", 1) != 1) return std::nullopt;
  for (size_t o = 1; o < bn.outputs.size(); ++o)
    if (!bn.outputs[o].empty()) return std::nullopt;  // training statistics are wanted
  const Tensor* p[4];
  for (size_t i = 0; i < 4; ++i) {
    p[i] = r.constant(bn.inputs[i + 1]);
    if (!p[i] || p[i]->dtype() != DType::Float32 || p[i]->rank() != 1 ||
        p[i]->numel() != p[0]->numel())
      return std::nullopt;
  }
  const double eps = bn.attr_float("epsilon", 1e-5f);
  const float *scale = p[0]->data<float>(), *bias = p[1]->data<float>(),
              *mean = p[2]->data<float>(), *var = p[3]->data<float>();
  ChannelAffine a;
  for (int64_t c = 0; c < p[0]->numel(); ++c) {
    const double s = scale[c] / std::sqrt(static_cast<double>(var[c]) + eps);
    a.s.push_back(static_cast<float>(s));
    a.t.push_back(static_cast<float>(bias[c] - mean[c] * s));
  }
  return a;
}

// A float32 constant input of n, or nullptr (also when absent).
const Tensor* weight(const Rewriter& r, const Node& n, size_t i) {
  const Tensor* t = i < n.inputs.size() ? r.constant(n.inputs[i]) : nullptr;
  return t && t->dtype() == DType::Float32 ? t : nullptr;
}

// s * bias + t for a Conv's bias input (absent: zero). nullopt when it is not a constant [C].
std::optional<Tensor> folded_bias(const Rewriter& r, const Node& op, const ChannelAffine& a) {
  const auto channels = static_cast<int64_t>(a.s.size());
  Tensor out = Tensor::from_vector<float>({channels}, a.t);
  if (!op.has_input(2)) return out;
  const Tensor* b = weight(r, op, 2);
  if (!b || b->rank() != 1 || b->numel() != channels) return std::nullopt;
  for (int64_t c = 0; c < channels; ++c) out.data<float>()[c] += a.s[c] * b->data<float>()[c];
  return out;
}

// Conv: W is [C, C_in / group, k...]; channel c's filter is the c-th block.
std::optional<Tensor> folded_conv_weight(const Tensor& w, const ChannelAffine& a) {
  const auto channels = static_cast<int64_t>(a.s.size());
  if (w.rank() < 3 || w.dim(0) != channels) return std::nullopt;
  Tensor out = w.clone();
  const int64_t block = w.numel() / channels;
  float* d = out.data<float>();
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t i = 0; i < block; ++i) d[c * block + i] *= a.s[c];
  return out;
}

// ConvTranspose: W is [C_in, C / group, k...]; input channel ci of group g feeds output channels
// g * (C / group) + j.
std::optional<Tensor> folded_conv_transpose_weight(const Tensor& w, int64_t group,
                                                   const ChannelAffine& a) {
  const auto channels = static_cast<int64_t>(a.s.size());
  if (w.rank() < 3 || group < 1 || w.dim(1) * group != channels || w.dim(0) % group != 0)
    return std::nullopt;
  Tensor out = w.clone();
  const int64_t per_group = w.dim(0) / group, outs = w.dim(1), block = w.numel() / w.dim(0) / outs;
  float* d = out.data<float>();
  for (int64_t ci = 0; ci < w.dim(0); ++ci)
    for (int64_t j = 0; j < outs; ++j) {
      const float s = a.s[(ci / per_group) * outs + j];
      for (int64_t i = 0; i < block; ++i) d[(ci * outs + j) * block + i] *= s;
    }
  return out;
}

// Gemm: B's column n (row n with transB) is output channel n; C becomes s * beta * C + t, of
// shape [N] or, for a C with rows, [M, N]; beta becomes 1.
bool fold_into_gemm(Rewriter& r, const Node& gemm, const ChannelAffine& a, Node& out,
                    const std::string& suffix) {
  const auto n = static_cast<int64_t>(a.s.size());
  const Tensor* b = weight(r, gemm, 1);
  const bool trans_b = gemm.attr_int("transB", 0) != 0;
  if (gemm.opset < 7 || !b || b->rank() != 2 || b->dim(trans_b ? 0 : 1) != n) return false;
  Tensor nb = b->clone();
  float* d = nb.data<float>();
  for (int64_t i = 0; i < nb.dim(0); ++i)
    for (int64_t j = 0; j < nb.dim(1); ++j) d[i * nb.dim(1) + j] *= a.s[trans_b ? i : j];
  const float beta = gemm.attr_float("beta", 1.f);
  Tensor nc = Tensor::from_vector<float>({n}, a.t);
  if (gemm.has_input(2)) {
    const Tensor* c = weight(r, gemm, 2);
    if (!c || c->rank() > 2) return false;
    const int64_t cols = c->rank() ? c->dim(c->rank() - 1) : 1;
    const int64_t rows = c->rank() == 2 ? c->dim(0) : 1;
    if (cols != 1 && cols != n) return false;
    nc = Tensor(DType::Float32, rows > 1 ? std::vector<int64_t>{rows, n} : std::vector{n});
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < n; ++j)
        nc.data<float>()[i * n + j] =
            a.s[j] * beta * c->data<float>()[i * cols + (cols == 1 ? 0 : j)] + a.t[j];
  }
  out.inputs = {gemm.inputs[0], r.add_initializer(gemm.inputs[1] + suffix, nb),
                r.add_initializer((gemm.name.empty() ? "gemm" : gemm.name) + "_bias" + suffix, nc)};
  set_attr(out, "beta", 1.f);
  return true;
}

// The op's output channels and the rank and channel axis of its output, or nullopt when the op
// is not one the maps fold into (or its weight is not a float32 constant).
struct OutputChannels {
  int64_t channels, rank, axis;
};
std::optional<OutputChannels> output_channels(const Rewriter& r, const Node& op) {
  const Tensor* w = weight(r, op, 1);
  if (!w) return std::nullopt;
  if (op.op_type == "Gemm" && w->rank() == 2)
    return OutputChannels{w->dim(op.attr_int("transB", 0) != 0 ? 0 : 1), 2, 1};
  if (op.op_type == "Conv" && w->rank() >= 3) return OutputChannels{w->dim(0), w->rank(), 1};
  if (op.op_type == "ConvTranspose" && w->rank() >= 3)
    return OutputChannels{w->dim(1) * op.attr_int("group", 1), w->rank(), 1};
  return std::nullopt;
}

// A Mul, Add or Sub (op's output minus the constant) of op's output and a float32 constant that
// broadcasts along the output's channel axis only (one value, or one per channel), as
// y = s * x + t. nullopt for anything else, and for a non-finite constant (conv * inf is not
// the conv of weights * inf where an input is 0).
std::optional<ChannelAffine> affine_of_arith(const Rewriter& r, const Node& n, const Node& op) {
  if (n.inputs.size() != 2 || n.outputs.size() != 1 || op.outputs.empty()) return std::nullopt;
  const size_t from = n.inputs[0] == op.outputs[0] ? 0 : 1;
  if (n.inputs[from] != op.outputs[0] || n.inputs[1 - from] == op.outputs[0]) return std::nullopt;
  if (n.op_type == "Sub" && from != 0) return std::nullopt;
  const Tensor* c = weight(r, n, 1 - from);
  const std::optional<OutputChannels> out = output_channels(r, op);
  if (!c || !out || c->rank() > out->rank) return std::nullopt;
  const int64_t axis = out->axis - (out->rank - c->rank());  // the channel axis in c's dims
  for (int64_t d = 0; d < c->rank(); ++d)
    if (c->dim(d) != 1 && (d != axis || c->dim(d) != out->channels)) return std::nullopt;
  const float* v = c->data<float>();
  ChannelAffine a;
  for (int64_t ch = 0; ch < out->channels; ++ch) {
    const float x = v[c->numel() == 1 ? 0 : ch];
    if (!std::isfinite(x)) return std::nullopt;
    a.s.push_back(n.op_type == "Mul" ? x : 1.f);
    a.t.push_back(n.op_type == "Mul" ? 0.f : n.op_type == "Add" ? x : -x);
  }
  return a;
}

// Replaces op and the map at node i by op with folded weights; `what` names the map in the
// pattern counted ("batchnorm" -> "batchnorm into conv"), `suffix` the new initializers.
void fold_into(Rewriter& r, const Node& op, size_t i, const ChannelAffine& a, const char* what,
               const std::string& suffix) {
  Node folded = op;
  folded.outputs = {r.node(i).outputs[0]};
  std::string into;
  if (op.op_type == "Gemm") {
    if (!fold_into_gemm(r, op, a, folded, suffix)) return;
    into = "gemm";
  } else if (op.op_type == "Conv" || op.op_type == "ConvTranspose") {
    const Tensor* w = weight(r, op, 1);
    std::optional<Tensor> nw, nb = folded_bias(r, op, a);
    if (w && op.op_type == "Conv") nw = folded_conv_weight(*w, a);
    if (w && op.op_type == "ConvTranspose")
      nw = folded_conv_transpose_weight(*w, op.attr_int("group", 1), a);
    if (!nw || !nb) return;
    const std::string base = op.name.empty() ? op.inputs[1] : op.name;
    const bool scaled = std::any_of(a.s.begin(), a.s.end(), [](float s) { return s != 1.f; });
    folded.inputs = {op.inputs[0],
                     scaled ? r.add_initializer(op.inputs[1] + suffix, *nw) : op.inputs[1],
                     r.add_initializer(base + "_bias" + suffix, *nb)};
    into = op.op_type == "Conv" ? "conv" : "convtranspose";
  } else {
    return;
  }
  if (r.fuse({r.index_of(&op)}, i, std::move(folded))) r.count(std::string(what) + " into " + into);
}

// The op (Conv, ConvTranspose, Gemm) whose output node i's input 0 or `input` reads, when node
// i may absorb it.
const Node* foldable_producer(const Rewriter& r, size_t i, const std::string& input) {
  const Node* op = r.producer(input);
  if (!op || op->outputs.size() != 1 || !op->domain.empty()) return nullptr;
  if (!r.can_fuse({r.index_of(op)}, i)) return nullptr;
  return op;
}

}  // namespace

void fold_batch_norms(Rewriter& r) {
  for (size_t i : r.order()) {
    const Node& bn = r.node(i);
    if (!r.live(i) || !is_op(&bn, "BatchNormalization") || bn.outputs.empty()) continue;
    const Node* op = foldable_producer(r, i, bn.inputs[0]);
    if (!op) continue;
    if (std::optional<ChannelAffine> a = affine_of(r, bn))
      fold_into(r, *op, i, *a, "batchnorm", "_bn");
  }
}

void fold_channel_affines(Rewriter& r) {
  for (size_t i : r.order()) {
    const Node& n = r.node(i);
    if (!r.live(i) || n.inputs.size() != 2 ||
        !(is_op(&n, "Mul") || is_op(&n, "Add") || is_op(&n, "Sub")))
      continue;
    for (const std::string& input : n.inputs) {
      const Node* op = foldable_producer(r, i, input);
      if (!op) continue;
      if (std::optional<ChannelAffine> a = affine_of_arith(r, n, *op))
        fold_into(r, *op, i, *a, n.op_type == "Mul" ? "mul" : "add", "_folded");
      break;
    }
  }
}

}  // namespace quilt::optimize
