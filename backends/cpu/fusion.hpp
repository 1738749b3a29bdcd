// Activation fusion inside a CPU patch: an activation that is the only consumer of a Conv's or
// Gemm's output is applied by that kernel to its output while it is still in cache, instead of
// a second pass over memory (and a second buffer). The patterns, float32 only:
//
//   P -> A                         A one of Relu, LeakyRelu, Clip (constant bounds), HardSigmoid,
//                                  HardSwish, Sigmoid, Tanh, Gelu, Swish (alpha 1: SiLU)
//   MatMul -> Add(m, bias)         bias a constant [N] (or [1, ..., N]) row added to every row;
//                                  an activation after the Add then fuses as above (BERT/ViT:
//                                  MatMul -> Add -> Gelu is one kernel)
//   Conv -> Add(c, r)              r any float32 value of c's shape (a residual connection);
//                                  an activation after the Add then fuses as above (ResNet:
//                                  Conv -> Add -> Relu is one kernel). Shapes with unknown dims
//                                  ([-1, 40, 28, 28]: a symbolic batch) are equal only if a
//                                  run's say so: such a fusion is checked on every run, and a
//                                  run whose c and r differ (a broadcast) adds them apart
//                                  (PatchNode::residual_at_run)
//
// P's kernel must accept a fused activation (KernelRegistry::accept_fused_activation). P then
// produces A's (or Mul's) output value and the folded nodes leave the patch. A value the patch
// exports (`kept`) is never folded away, so other patches and the host see every value they
// read. This is a CPU-kernel concern: other backends fuse, or not, in their own compile.
// Activations written out as several nodes (x * Sigmoid(x), GPT-2's tanh GELU) are made one op
// by the core's rewrites (core/optimize/activations.cpp) before the patch reaches this pass.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/cpu/activation.hpp"
#include "core/graph.hpp"
#include "core/op_schema.hpp"

namespace quilt::cpu {

class KernelRegistry;

// A node of a patch being compiled.
struct PatchNode {
  Node node;
  std::vector<int32_t> inputs, outputs;  // value ids (-1: absent)
  int32_t graph_index = 0;               // its index in the patch graph (node timings use it)
  Activation activation;                 // applied by the kernel to output 0
  int32_t bias_input = -1;               // index in inputs of a fused column bias (-1: none)
  int32_t residual_input = -1;           // index in inputs of a fused residual (-1: none)
  // The fused residual's shapes had unknown dims: the value P made before the Add took it (its
  // shape at run time is the product's), to check against the residual's and the Add's.
  int32_t residual_at_run = -1;
  std::vector<int32_t> folded;  // graph indices of the nodes folded into this one
};

// Rewrites nodes (in patch order) as above. types/constants are per value; kept[v] marks values
// the patch exports. Returns how many nodes were folded away.
int fuse_activations(std::vector<PatchNode>& nodes, const std::vector<TypeShape>& types,
                     const std::vector<Tensor>& constants, const std::vector<char>& kept,
                     const KernelRegistry& registry);

}  // namespace quilt::cpu
