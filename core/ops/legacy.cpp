// Schemas of the legacy (opset 1-6) versions of ops whose semantics changed at opset 7:
//
// - Add, Sub, Mul, Div (versions 1 and 6) and Pow (version 1): no numpy broadcasting. With
//   broadcast = 0 (the default) A and B must have the same shape; with broadcast = 1, B is
//   broadcast to A: either B has one element, or B's shape equals a contiguous run of A's dims
//   starting at `axis` (default: the last rank(B) dims). The output has A's shape.
//   Leading and trailing 1s of B expand (as the reference implementation did); a 1 between
//   other dims of B ("1-dim expansion doesn't work yet" in the spec) is refused.
// - PRelu (versions 1 and 6): the slope has one element, or one per channel (shape [C] against
//   X of shape [N, C, ...]).
// - BatchNormalization (versions 1 and 6): `is_test` selects inference (the only mode the
//   kernels run; the CPU backend refuses is_test = 0), parameters are [C] vectors.
//
// `consumed_inputs` (opsets 1-5) was an in-place hint with no effect on the result: ignored.
// The CPU kernels read the node's opset to apply these rules (backends/cpu/kernels/).
#include <string>

#include "core/checked.hpp"
#include "core/op_schema.hpp"

namespace quilt {
namespace {

// Fails unless the given inputs share one dtype; returns it (Undefined while unknown).
DType same_dtype(InferenceContext& ctx) {
  DType a = ctx.input_dtype(0), b = ctx.input_dtype(1);
  if (a != DType::Undefined && b != DType::Undefined && a != b)
    ctx.fail(std::string("inputs must have the same dtype, got ") + dtype_name(a) + " and " +
             dtype_name(b));
  return a != DType::Undefined ? a : b;
}

bool all_known(const std::vector<int64_t>& s) {
  for (int64_t d : s)
    if (d < 0) return false;
  return true;
}

// Checks B's shape against A's under the legacy broadcast rules (see the top of the file).
// Unknown dims pass: run-time inference checks again with every shape known.
void check_legacy_broadcast(InferenceContext& ctx, const std::vector<int64_t>& a,
                            const std::vector<int64_t>& b) {
  const auto ra = static_cast<int64_t>(a.size()), rb = static_cast<int64_t>(b.size());
  const std::string shapes = "B's shape " + to_string(b) + " and A's shape " + to_string(a);
  if (rb > ra) ctx.fail("with broadcast = 1, B must not have a higher rank than A: " + shapes);
  bool maybe_one_element = true;
  for (int64_t d : b) maybe_one_element = maybe_one_element && (d == 1 || d < 0);
  // A scalar or a one-element tensor broadcasts everywhere (whatever the axis). With unknown
  // dims that may all be 1, the check waits for run time.
  if (maybe_one_element) return;

  const bool has_axis = ctx.node().has_attr("axis");
  const int64_t axis = has_axis ? ctx.node().attr_int("axis", 0) : ra - rb;
  if (axis < 0 || axis > ra - rb)
    ctx.fail("axis " + std::to_string(axis) + " must be in [0, " + std::to_string(ra - rb) +
             "] so that B fits inside A: " + shapes);
  // Leading and trailing 1s of B expand; the dims between must equal A's.
  int64_t first = 0, last = rb - 1;
  while (first < rb && b[static_cast<size_t>(first)] == 1) ++first;
  while (last >= first && b[static_cast<size_t>(last)] == 1) --last;
  for (int64_t i = 0; i < rb; ++i) {
    const int64_t bd = b[static_cast<size_t>(i)], ad = a[static_cast<size_t>(axis + i)];
    if (bd < 0 || ad < 0 || bd == ad) continue;
    if (bd == 1 && (i < first || i > last)) continue;
    if (bd == 1)
      ctx.node().fail("expanding a dim of size 1 between other dims of B is not defined by the " +
                          std::string("legacy broadcast rules (opset < 7): ") + shapes + ", axis " +
                          std::to_string(axis),
                      ErrorCode::NotImplemented);
    ctx.fail("with broadcast = 1, B's shape must match A's dims starting at axis " +
             std::to_string(axis) + ": " + shapes);
  }
}

// Add, Sub, Mul, Div, Pow before opset 7.
void infer_legacy_binary(InferenceContext& ctx) {
  const DType d = same_dtype(ctx);
  std::vector<int64_t> a = ctx.input_shape(0);
  const auto& b = ctx.input_shape(1);
  const int64_t broadcast = ctx.node().attr_int("broadcast", 0);
  if (broadcast != 0 && broadcast != 1)
    ctx.fail("attribute broadcast is " + std::to_string(broadcast) + ", expected 0 or 1");
  if (broadcast) {
    check_legacy_broadcast(ctx, a, b);
  } else {
    bool ok = a.size() == b.size();
    for (size_t i = 0; ok && i < a.size(); ++i) {
      ok = a[i] < 0 || b[i] < 0 || a[i] == b[i];
      if (a[i] < 0) a[i] = b[i];
    }
    if (!ok)
      ctx.fail("with broadcast = 0 (opset < 7) A and B must have the same shape, got " +
               to_string(a) + " and " + to_string(b) + " (set broadcast = 1 to broadcast B)");
  }
  ctx.set_output(0, d, a);
}

// PRelu before opset 7: one slope, or one per channel.
void infer_legacy_prelu(InferenceContext& ctx) {
  const DType d = same_dtype(ctx);
  const auto& x = ctx.input_shape(0);
  const auto& slope = ctx.input_shape(1);
  if (all_known(slope)) {
    if (Checked(ctx.node(), "slope size").product(slope) != 1) {
      if (x.size() < 2 || slope.size() != 1)
        ctx.node().fail("slope shape " + to_string(slope) + " against X " + to_string(x) +
                            ": before opset 7 only a one-element slope or one slope per channel "
                            "(shape [C] with X of shape [N, C, ...]) is supported",
                        ErrorCode::NotImplemented);
      if (x[1] >= 0 && slope[0] != x[1])
        ctx.fail("slope has " + std::to_string(slope[0]) + " elements, expected 1 or " +
                 std::to_string(x[1]) + " (the channel count of X " + to_string(x) + ")");
    }
  }
  ctx.set_output(0, d, x);
}

// BatchNormalization before opset 7: [C] parameters.
void infer_legacy_batch_norm(InferenceContext& ctx) {
  const auto& x = ctx.input_shape(0);
  if (x.size() < 2) ctx.fail("X must have rank >= 2 (N x C x ...), got shape " + to_string(x));
  const int64_t c = x[1];
  const char* names[] = {"scale", "B", "mean", "var"};
  for (size_t i = 1; i <= 4; ++i) {
    const auto& p = ctx.input_shape(i);
    if (p.size() != 1 || (c >= 0 && p[0] >= 0 && p[0] != c))
      ctx.fail(std::string(names[i - 1]) + " has shape " + to_string(p) +
               ", expected a vector of the channel count " + std::to_string(c));
  }
  ctx.set_output(0, ctx.input_dtype(0), x);
  // The statistics outputs exist only in training mode; typed for completeness.
  for (size_t i = 1; i < ctx.num_outputs(); ++i) ctx.set_output(i, ctx.input_dtype(3), {c});
}

}  // namespace

void register_legacy_schemas(SchemaRegistry& r) {
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow"})
    r.add({.op_type = op,
           .min_opset = 1,
           .max_opset = 6,
           .min_inputs = 2,
           .max_inputs = 2,
           .infer = infer_legacy_binary});
  r.add({.op_type = "PRelu",
         .min_opset = 1,
         .max_opset = 6,
         .min_inputs = 2,
         .max_inputs = 2,
         .infer = infer_legacy_prelu});
  r.add({.op_type = "BatchNormalization",
         .min_opset = 1,
         .max_opset = 6,
         .min_inputs = 5,
         .max_inputs = 5,
         .max_outputs = 5,
         .infer = infer_legacy_batch_norm});
}

}  // namespace quilt
