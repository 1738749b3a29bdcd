// Schemas of If, Loop and Scan. Their execution is core/control_flow.cpp; inference here gives
// what is static at session creation (types from the subgraphs, loop-carried shapes).
#include "core/op_schema.hpp"

namespace quilt {
namespace {

constexpr int kMany = 1 << 20;

const Graph* graph_attr(InferenceContext& ctx, const char* name) {
  const Attribute* a = ctx.node().attr(name);
  if (!a || a->kind != Attribute::Kind::Graph || !a->g)
    ctx.fail(std::string("graph attribute '") + name + "' is required");
  return a->g.get();
}

void set_from_graph_output(InferenceContext& ctx, size_t i, const ValueInfo& v) {
  if (v.kind != ValueKind::Tensor) return ctx.set_output_type(i, TypeShape::of_info(v));
  if (!v.has_shape) return ctx.set_output_unknown_shape(i, v.dtype);
  std::vector<int64_t> dims;
  for (const auto& d : v.shape) dims.push_back(d.is_fixed() ? d.value : -1);
  ctx.set_output(i, v.dtype, dims);
}

void infer_if(InferenceContext& ctx) {
  const Graph* then_g = graph_attr(ctx, "then_branch");
  const Graph* else_g = graph_attr(ctx, "else_branch");
  if (then_g->outputs.size() != ctx.num_outputs() || else_g->outputs.size() != ctx.num_outputs())
    ctx.fail("then_branch has " + std::to_string(then_g->outputs.size()) +
             " outputs and else_branch " + std::to_string(else_g->outputs.size()) +
             "; both must have the node's " + std::to_string(ctx.num_outputs()));
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    const ValueInfo& t = then_g->outputs[i];
    const ValueInfo& e = else_g->outputs[i];
    if (t.kind != ValueKind::Tensor || e.kind != ValueKind::Tensor) {
      set_from_graph_output(ctx, i, t.kind != ValueKind::Tensor ? t : e);
      continue;
    }
    const DType dtype = t.dtype != DType::Undefined ? t.dtype : e.dtype;
    bool same = t.has_shape && e.has_shape && t.shape.size() == e.shape.size();
    for (size_t d = 0; same && d < t.shape.size(); ++d)
      same = t.shape[d].is_fixed() && e.shape[d].is_fixed() && t.shape[d].value == e.shape[d].value;
    if (same)
      set_from_graph_output(ctx, i, t);
    else
      ctx.set_output_unknown_shape(i, dtype);
  }
}

void infer_loop(InferenceContext& ctx) {
  const Graph* body = graph_attr(ctx, "body");
  const size_t n_carried = ctx.num_inputs() > 2 ? ctx.num_inputs() - 2 : 0;
  if (body->inputs.size() != n_carried + 2)
    ctx.fail("body has " + std::to_string(body->inputs.size()) + " inputs, expected " +
             std::to_string(n_carried + 2) + " (iteration number, condition, " +
             std::to_string(n_carried) + " loop-carried values)");
  if (body->outputs.size() != ctx.num_outputs() + 1)
    ctx.fail("body has " + std::to_string(body->outputs.size()) + " outputs, expected " +
             std::to_string(ctx.num_outputs() + 1) + " (condition and the node's outputs)");
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (i < n_carried && body->outputs[i + 1].kind != ValueKind::Tensor) {
      // The body's declared type (an optional carried in may come out as its element's type).
      set_from_graph_output(ctx, i, body->outputs[i + 1]);
    } else if (i < n_carried && !ctx.input_type(i + 2).is_tensor()) {
      ctx.set_output_type(i, ctx.input_type(i + 2));
    } else if (i < n_carried && ctx.input_has_shape(i + 2)) {
      ctx.set_output(i, ctx.input_dtype(i + 2), ctx.input_shape(i + 2));
    } else if (body->outputs[i + 1].kind != ValueKind::Tensor) {
      set_from_graph_output(ctx, i, body->outputs[i + 1]);
    } else {
      ctx.set_output_unknown_shape(i, body->outputs[i + 1].dtype);
    }
  }
}

void infer_scan(InferenceContext& ctx) {
  const Graph* body = graph_attr(ctx, "body");
  const int64_t n_scan_in = ctx.node().attr_int("num_scan_inputs", 0);
  if (n_scan_in < 1 || n_scan_in > static_cast<int64_t>(ctx.num_inputs()))
    ctx.fail("num_scan_inputs is " + std::to_string(n_scan_in) + ", expected 1 to " +
             std::to_string(ctx.num_inputs()));
  const size_t n_state = ctx.num_inputs() - static_cast<size_t>(n_scan_in);
  if (body->inputs.size() != ctx.num_inputs() || body->outputs.size() != ctx.num_outputs())
    ctx.fail("body has " + std::to_string(body->inputs.size()) + " inputs and " +
             std::to_string(body->outputs.size()) + " outputs, expected " +
             std::to_string(ctx.num_inputs()) + " and " + std::to_string(ctx.num_outputs()));
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (i < n_state && ctx.input_has_shape(i))
      ctx.set_output(i, ctx.input_dtype(i), ctx.input_shape(i));
    else
      ctx.set_output_unknown_shape(i, body->outputs[i].dtype);
  }
}

// Scan-8: inputs sequence_lens, states [batch, ...], scan inputs [batch, sequence, ...]; the
// body takes the states and one slice of each scan input, without the batch axis.
void infer_scan8(InferenceContext& ctx) {
  const Graph* body = graph_attr(ctx, "body");
  const int64_t n_scan_in = ctx.node().attr_int("num_scan_inputs", 0);
  if (n_scan_in < 1 || n_scan_in > static_cast<int64_t>(ctx.num_inputs()) - 1)
    ctx.fail("num_scan_inputs is " + std::to_string(n_scan_in) + ", expected 1 to " +
             std::to_string(ctx.num_inputs() - 1) + " (the inputs after sequence_lens)");
  const size_t n_state = ctx.num_inputs() - 1 - static_cast<size_t>(n_scan_in);
  if (body->inputs.size() != ctx.num_inputs() - 1 || body->outputs.size() != ctx.num_outputs())
    ctx.fail("body has " + std::to_string(body->inputs.size()) + " inputs and " +
             std::to_string(body->outputs.size()) + " outputs, expected " +
             std::to_string(ctx.num_inputs() - 1) + " and " + std::to_string(ctx.num_outputs()));
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (i < n_state && ctx.input_has_shape(i + 1))
      ctx.set_output(i, ctx.input_dtype(i + 1), ctx.input_shape(i + 1));
    else
      ctx.set_output_unknown_shape(i, body->outputs[i].dtype);
  }
}

}  // namespace

void register_control_flow_schemas(SchemaRegistry& r) {
  r.add({.op_type = "If",
         .min_inputs = 1,
         .max_inputs = 1,
         .max_outputs = kMany,
         .infer = infer_if,
         .takes_values = true});
  r.add({.op_type = "Loop",
         .min_inputs = 0,
         .max_inputs = kMany,
         .max_outputs = kMany,
         .infer = infer_loop,
         .takes_values = true});
  // Scan-8: a batch axis and sequence_lens (input 0, optional: infer_scan8 counts the rest).
  r.add({.op_type = "Scan",
         .min_opset = 8,
         .max_opset = 8,
         .min_inputs = 0,
         .max_inputs = kMany,
         .max_outputs = kMany,
         .infer = infer_scan8});
  r.add({.op_type = "Scan",
         .min_opset = 9,
         .min_inputs = 1,
         .max_inputs = kMany,
         .max_outputs = kMany,
         .infer = infer_scan});
}

}  // namespace quilt
