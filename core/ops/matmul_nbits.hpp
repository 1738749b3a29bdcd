// com.microsoft MatMulNBits (onnxruntime's contrib op, what LLM weight-only quantizers write):
// Y = A B^T (+ bias), B's N x K weights quantized along K in blocks of block_size, each block with
// a scale and a zero point: W[n][k] = (q[n][k] - zero_point[n][k / block_size]) * scale[...].
//   B            uint8 [N, k_blocks, blob], k_blocks = ceil(K / block_size),
//                blob = block_size * bits / 8; codes packed low bits first along K
//   scales       A's type, N * k_blocks values ([N * k_blocks] or [N, k_blocks])
//   zero_points  optional: uint8 codes packed the same way, ceil(k_blocks * bits / 8) bytes per
//                row of B; or A's type, one per scale; absent: 2^(bits - 1)
//   g_idx        optional, deprecated (refused); bias optional, A's type, [N]
// The geometry shared by the shape inference (core/ops/nn.cpp) and the CPU kernel.
#pragma once

#include <cstdint>
#include <string>

#include "core/graph.hpp"

namespace quilt {

struct NBitsGeometry {
  int64_t k = 0, n = 0, bits = 4, block = 0;
  int64_t k_blocks() const { return (k + block - 1) / block; }
  int64_t blob() const { return block * bits / 8; }
  // Bytes of packed uint8 zero points per row of B.
  int64_t zp_row_bytes() const { return (k_blocks() * bits + 7) / 8; }
};

// The node's attributes K, N, bits, block_size, checked; "" or what is wrong.
inline std::string nbits_geometry(const Node& node, NBitsGeometry& g) {
  for (const char* a : {"K", "N", "block_size"})
    if (!node.has_attr(a)) return std::string("attribute ") + a + " is required";
  g.k = node.attr_int("K", 0);
  g.n = node.attr_int("N", 0);
  g.bits = node.attr_int("bits", 4);
  g.block = node.attr_int("block_size", 0);
  if (g.k <= 0 || g.n <= 0)
    return "attributes K = " + std::to_string(g.k) + " and N = " + std::to_string(g.n) +
           " must be positive";
  if (g.bits != 4 && g.bits != 8)
    return "attribute bits is " + std::to_string(g.bits) + ", expected 4 or 8";
  if (g.block < 16 || (g.block & (g.block - 1)) != 0)
    return "attribute block_size is " + std::to_string(g.block) +
           ", expected a power of 2 of at least 16";
  return "";
}

}  // namespace quilt
