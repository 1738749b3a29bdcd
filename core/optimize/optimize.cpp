// The pass pipeline (optimize.hpp): each pass over the whole graph tree in turn.
#include "core/optimize/optimize.hpp"

#include "core/optimize/rewriter.hpp"

namespace quilt {
namespace {

using optimize::Counts;
using optimize::NameSet;
using optimize::Rewriter;

struct Pass {
  void (*run)(Rewriter&);
  std::vector<const char*> patterns;  // what it counts, in report order
  // Run again while it rewrites something: an inlined branch may hold an If of its own.
  bool until_done = false;
};

// Rewrites counted so far, all patterns together.
int total(const Counts& counts) {
  int n = 0;
  for (const auto& e : counts.nonzero()) n += e.count;
  return n;
}

const std::vector<Pass>& passes() {
  static const std::vector<Pass> list = {
      {optimize::constants_to_initializers, {"constant nodes"}},
      {optimize::inline_constant_ifs, {"constant if"}, /*until_done=*/true},
      {optimize::fuse_qdq,
       {"qdq conv", "qdq matmul", "qdq gemm", "qdq add", "qdq mul", "qdq sigmoid", "qdq leakyrelu",
        "qdq globalaveragepool", "qdq maxpool", "dynamic matmul"}},
      {optimize::matmul_add_to_gemm, {"matmul+add into gemm"}},
      {optimize::fold_batch_norms,
       {"batchnorm into conv", "batchnorm into convtranspose", "batchnorm into gemm"}},
      {optimize::fuse_activations,
       {"hardswish", "gelu", "gelu tanh", "mish", "swish", "hardsigmoid"}},
      {optimize::fuse_normalizations, {"layernorm", "rmsnorm", "softmax"}},
      {optimize::fold_channel_affines,
       {"mul into conv", "add into conv", "mul into convtranspose", "add into convtranspose",
        "mul into gemm", "add into gemm"}},
  };
  return list;
}

// Runs the pass over g, then over the subgraphs of g's nodes, whose outer scope is g as the
// pass left it (its constants and types are what they may read).
void run_pass(const Pass& pass, Graph& g, const Rewriter* parent, int64_t ir_version,
              NameSet& names, Counts& counts) {
  Rewriter r(g, parent, ir_version, names, counts);
  pass.run(r);
  for (size_t i : r.order()) {
    if (!r.live(i)) continue;
    for (auto& [_, a] : r.graph().nodes[i].attributes) {
      if (a.g) run_pass(pass, *a.g, &r, ir_version, names, counts);
      for (auto& sub : a.graphs) run_pass(pass, *sub, &r, ir_version, names, counts);
    }
  }
  r.finish();
}

}  // namespace

std::vector<PlanReport::Rewrite> optimize_model(Model& model, int level) {
  if (level < 1) return {};
  Counts counts;
  for (const Pass& pass : passes())
    for (const char* p : pass.patterns) counts.declare(p);
  NameSet names(model.graph);
  for (const Pass& pass : passes()) {
    // Bounded: real exports nest subgraphs up to about 25 deep.
    for (int round = 0; round < 64; ++round) {
      const int before = total(counts);
      run_pass(pass, model.graph, nullptr, model.ir_version, names, counts);
      // Subgraphs may read fewer outer values now; the next pass sees exactly which.
      resolve_implicit_inputs(model.graph);
      if (!pass.until_done || total(counts) == before) break;
    }
  }
  std::vector<PlanReport::Rewrite> out;
  for (const auto& e : counts.nonzero()) out.push_back({e.pattern, e.count, e.nodes_removed});
  return out;
}

}  // namespace quilt
