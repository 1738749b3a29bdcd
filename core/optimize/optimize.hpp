// Graph rewrites any backend benefits from, run at session creation before the plan is built
// (core/session.cpp) when SessionOptions::optimization_level >= 1; level 0 runs none.
//
// Each pass is a pattern family in a file of its own, run in this fixed order over the model's
// graph and every If/Loop/Scan body:
//   constants.cpp      Constant nodes -> initializers (the later passes then see every weight)
//   control_flow.cpp   an If whose condition is known at load -> the branch it takes
//   qdq.cpp            DequantizeLinear -> op -> QuantizeLinear groups -> the quantized op
//                      (integer math: the one pass that is not exact, as onnxruntime's)
//   gemm.cpp           MatMul + Add of a constant bias -> Gemm
//   batchnorm.cpp      BatchNormalization folded into the Conv / ConvTranspose / Gemm before it
//   activations.cpp    HardSwish, Gelu, Mish, Swish, HardSigmoid written out -> the one op
//   normalization.cpp  LayerNormalization, RMSNormalization, Softmax written out -> the one op
//   batchnorm.cpp      (again) Mul / Add / Sub of a per-channel or scalar constant folded into
//                      the Conv / ConvTranspose / Gemm before it
// They rewrite into ops the ONNX spec defines (qdq.cpp also into onnxruntime's com.microsoft
// quantized ops, which the CPU backend runs), so a backend claims fused work by claiming a
// known op (rewriter.hpp has what they share). What they did is counted per pattern for the
// plan report (`quilt plan`).
#pragma once

#include <vector>

#include "core/graph.hpp"

namespace quilt {

// Rewrites model.graph and its subgraphs in place at the given optimisation level. Returns the
// patterns rewritten at least once with their counts, in pipeline order.
std::vector<PlanReport::Rewrite> optimize_model(Model& model, int level);

}  // namespace quilt
