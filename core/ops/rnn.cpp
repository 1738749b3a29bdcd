// Schemas and shape inference of the rnn op family: RNN, GRU and LSTM (opset 7 on; opset 14
// adds the layout attribute, opset 22 only widens the types).
//
// Shapes (layout 0 / layout 1):
//   X [seq, batch, input] / [batch, seq, input];  W [dirs, gates*hidden, input];
//   R [dirs, gates*hidden, hidden];  B [dirs, 2*gates*hidden];  sequence_lens [batch];
//   initial_h, initial_c [dirs, batch, hidden] / [batch, dirs, hidden];  P [dirs, 3*hidden];
//   Y [seq, dirs, batch, hidden] / [batch, seq, dirs, hidden];  Y_h, Y_c like initial_h.
#include <algorithm>
#include <cctype>

#include "core/checked.hpp"
#include "core/op_schema.hpp"

namespace quilt {

namespace {

struct RnnOp {
  const char* op_type;
  int64_t gates;    // gate blocks stacked in W and R
  int activations;  // activation functions per direction
  int max_inputs;
  int max_outputs;
};

constexpr RnnOp kRnn{"RNN", 1, 1, 6, 2};
constexpr RnnOp kGru{"GRU", 3, 2, 6, 2};
constexpr RnnOp kLstm{"LSTM", 4, 3, 8, 3};

bool known_activation(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* k : {"relu", "tanh", "sigmoid", "affine", "leakyrelu", "thresholdedrelu",
                        "scaledtanh", "hardsigmoid", "elu", "softsign", "softplus"})
    if (name == k) return true;
  return false;
}

// Fails when input `i` is present with a known rank other than expected's or a known dim that
// differs from a known expected one (-1 = anything).
void check_input(const InferenceContext& ctx, size_t i, const char* name,
                 const std::vector<int64_t>& expected) {
  if (!ctx.has_input(i) || !ctx.input_has_shape(i)) return;
  const auto& s = ctx.input_shape(i);
  bool ok = s.size() == expected.size();
  for (size_t k = 0; ok && k < s.size(); ++k)
    if (s[k] >= 0 && expected[k] >= 0 && s[k] != expected[k]) ok = false;
  if (!ok)
    ctx.fail(std::string(name) + " has shape " + to_string(s) + ", expected " +
             to_string(expected) + " (-1 = any)");
}

// First known value of a list of candidates, else -1.
int64_t first_known(std::initializer_list<int64_t> values) {
  for (int64_t v : values)
    if (v >= 0) return v;
  return -1;
}

int64_t dim_or_unknown(const InferenceContext& ctx, size_t i, size_t axis) {
  if (!ctx.has_input(i) || !ctx.input_has_shape(i)) return -1;
  const auto& s = ctx.input_shape(i);
  return axis < s.size() ? s[axis] : -1;
}

void infer_rnn(InferenceContext& ctx, const RnnOp& op) {
  const Node& node = ctx.node();
  std::string direction = node.attr_string("direction", "forward");
  int64_t dirs = 0;
  if (direction == "forward" || direction == "reverse")
    dirs = 1;
  else if (direction == "bidirectional")
    dirs = 2;
  else
    ctx.fail("direction is \"" + direction + "\", expected forward, reverse or bidirectional");

  int64_t layout = node.attr_int("layout", 0);
  if (layout != 0 && ctx.opset() < 14)
    ctx.fail("layout " + std::to_string(layout) + " needs opset 14 or later (model has opset " +
             std::to_string(ctx.opset()) + ")");
  if (layout != 0 && layout != 1)
    ctx.fail("layout is " + std::to_string(layout) + ", expected 0 or 1");

  auto acts = node.attr_strings("activations");
  if (!acts.empty() && static_cast<int64_t>(acts.size()) != op.activations * dirs)
    ctx.fail("has " + std::to_string(acts.size()) + " activations, expected " +
             std::to_string(op.activations * dirs) + " (" + std::to_string(op.activations) +
             " per direction)");
  for (const auto& a : acts)
    if (!known_activation(a))
      ctx.fail("activation \"" + a +
               "\" is not one of Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, "
               "ScaledTanh, HardSigmoid, Elu, Softsign, Softplus");
  if (node.has_attr("clip") && !(node.attr_float("clip", 0.f) > 0.f))
    ctx.fail("clip is " + std::to_string(node.attr_float("clip", 0.f)) + ", expected > 0");
  if (std::string(op.op_type) == "GRU") {
    int64_t lbr = node.attr_int("linear_before_reset", 0);
    if (lbr != 0 && lbr != 1)
      ctx.fail("linear_before_reset is " + std::to_string(lbr) + ", expected 0 or 1");
  }
  if (std::string(op.op_type) == "LSTM") {
    int64_t inf = node.attr_int("input_forget", 0);
    if (inf != 0 && inf != 1)
      ctx.fail("input_forget is " + std::to_string(inf) + ", expected 0 or 1");
  }

  DType dtype = ctx.input_dtype(0);
  if (dtype != DType::Float32 && dtype != DType::Float64 && dtype != DType::Float16)
    ctx.fail(std::string("X is ") + dtype_name(dtype) + ", expected a float type");
  for (size_t i : {1, 2, 3, 5, 6, 7})
    if (i < ctx.num_inputs() && ctx.has_input(i) && ctx.input_dtype(i) != dtype)
      ctx.fail("input " + std::to_string(i) + " is " + dtype_name(ctx.input_dtype(i)) +
               " but X is " + dtype_name(dtype) + "; they must match");
  if (ctx.has_input(4) && ctx.input_dtype(4) != DType::Int32 && ctx.input_dtype(4) != DType::Int64)
    ctx.fail(std::string("sequence_lens is ") + dtype_name(ctx.input_dtype(4)) +
             ", expected int32");

  if (ctx.input_rank(0) != 3)
    ctx.fail("X has rank " + std::to_string(ctx.input_rank(0)) + ", expected 3");
  if (ctx.input_rank(1) != 3)
    ctx.fail("W has rank " + std::to_string(ctx.input_rank(1)) + ", expected 3");
  if (ctx.input_rank(2) != 3)
    ctx.fail("R has rank " + std::to_string(ctx.input_rank(2)) + ", expected 3");
  const auto& x = ctx.input_shape(0);
  int64_t seq = layout == 0 ? x[0] : x[1];
  int64_t batch = layout == 0 ? x[1] : x[0];
  int64_t input = x[2];

  int64_t hidden = node.attr_int("hidden_size", -1);
  if (node.has_attr("hidden_size") && hidden <= 0)
    ctx.fail("hidden_size is " + std::to_string(hidden) + ", expected > 0");
  int64_t w_rows = dim_or_unknown(ctx, 1, 1);
  hidden = first_known({hidden, dim_or_unknown(ctx, 2, 2),
                        w_rows >= 0 && w_rows % op.gates == 0 ? w_rows / op.gates : -1});
  // W, R, B and P stack the gates' blocks: sizes of up to 8 * hidden_size.
  const Checked c(node, "gates * hidden_size");
  int64_t gh = hidden >= 0 ? c.mul(op.gates, hidden) : -1;

  check_input(ctx, 1, "W", {dirs, gh, input});
  check_input(ctx, 2, "R", {dirs, gh, hidden});
  check_input(ctx, 3, "B", {dirs, gh >= 0 ? c.mul(2, gh) : -1});
  check_input(ctx, 4, "sequence_lens", {batch});
  std::vector<int64_t> state = layout == 0 ? std::vector<int64_t>{dirs, batch, hidden}
                                           : std::vector<int64_t>{batch, dirs, hidden};
  check_input(ctx, 5, "initial_h", state);
  if (op.max_inputs > 6) {
    check_input(ctx, 6, "initial_c", state);
    check_input(ctx, 7, "P", {dirs, hidden >= 0 ? c.mul(3, hidden) : -1});
  }

  // Fill unknown dims from the other inputs so that run-time shapes are static.
  if (batch < 0) batch = first_known({dim_or_unknown(ctx, 4, 0)});
  state = layout == 0 ? std::vector<int64_t>{dirs, batch, hidden}
                      : std::vector<int64_t>{batch, dirs, hidden};
  std::vector<int64_t> y = layout == 0 ? std::vector<int64_t>{seq, dirs, batch, hidden}
                                       : std::vector<int64_t>{batch, seq, dirs, hidden};
  if (ctx.num_outputs() > 0) ctx.set_output(0, dtype, y);
  for (size_t i = 1; i < ctx.num_outputs(); ++i) ctx.set_output(i, dtype, state);
}

void add_rnn(SchemaRegistry& r, const RnnOp& op) {
  r.add({.op_type = op.op_type,
         .min_opset = 7,
         .min_inputs = 3,
         .max_inputs = op.max_inputs,
         .min_outputs = 0,
         .max_outputs = op.max_outputs,
         .infer = [op](InferenceContext& ctx) { infer_rnn(ctx, op); }});
}

}  // namespace

void register_rnn_schemas(SchemaRegistry& r) {
  add_rnn(r, kRnn);
  add_rnn(r, kGru);
  add_rnn(r, kLstm);
}

}  // namespace quilt
