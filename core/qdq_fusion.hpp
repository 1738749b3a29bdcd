// The QDQ format run as integer math: onnxruntime's quantizer (QuantFormat.QDQ) writes a float
// op between DequantizeLinear nodes on its inputs and one QuantizeLinear on its output; this
// pass replaces such groups by the quantized op, as onnxruntime's QDQ transformers do:
//
//   DQ(x) DQ(w) [DQ(b, int32)] -> Conv   -> Q   =>  QLinearConv
//   DQ(a) DQ(b)                -> MatMul -> Q   =>  QLinearMatMul
//   DQ(a) DQ(b) [DQ(c, int32)] -> Gemm   -> Q   =>  com.microsoft.QGemm
//   DQ(a) DQ(b)                -> Add/Mul -> Q  =>  com.microsoft.QLinearAdd / QLinearMul
//   DQ(x) -> GlobalAveragePool / Sigmoid / LeakyRelu -> Q  =>  com.microsoft.QLinear*
//   DQ(x) -> MaxPool -> Q (the same scale and zero point)  =>  MaxPool on the integers
//
// and the dynamic pattern DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(scale product)
// [-> Add(constant bias row)] => com.microsoft.DynamicQuantizeMatMul. A group is fused only when its scales and zero
// points are per-tensor constants (per-channel for the weights), the types are int8/uint8, and
// no one else reads the float values it removes; DequantizeLinear nodes left without readers
// are removed. The fused node keeps the float op's name.
#pragma once

#include "core/graph.hpp"

namespace quilt {

// Rewrites `graph` in place; returns the number of groups fused.
int fuse_qdq(Graph& graph);

}  // namespace quilt
