// How the scale and zero point of QuantizeLinear / DequantizeLinear map onto x: one value for
// the whole tensor, one per index of `axis`, or one per block of `block_size` consecutive indices
// along `axis` (the scale then has x's shape with that dim shrunk to ceil(dim / block_size)).
// Shared by shape inference (dims may be -1 there: those checks are skipped) and the CPU kernels
// (every dim known), so both accept exactly the same shapes.
//
// x viewed as [outer, dim, inner] around `axis`, element (o, a, i) uses parameter
//   per-tensor: 0
//   per-axis:   a
//   blocked:    (o * ceil(dim / block) + a / block) * inner + i
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/checked.hpp"
#include "quilt/quilt.hpp"

namespace quilt {

struct QuantLayout {
  enum class Kind { PerTensor, PerAxis, Blocked };
  Kind kind = Kind::PerTensor;
  int64_t outer = 1, dim = 1, inner = 1;
  int64_t block = 1;
  int64_t blocks() const { return dim == 0 ? 0 : (dim - 1) / block + 1; }  // no overflow
};

// Fills `out` and returns "" when a scale of shape `s` fits x of shape `x`; otherwise what is
// wrong. `axis` may be negative; block_size 0 means not blocked. Scales with one element in a
// rank 0 or rank 1 tensor are per-tensor whatever the axis (as onnx's reference treats them).
// Throws naming `node` when x's size overflows int64.
inline std::string quant_layout(const Node& node, const std::vector<int64_t>& x,
                                const std::vector<int64_t>& s, int64_t axis, int64_t block_size,
                                QuantLayout& out) {
  out = QuantLayout{};
  if (block_size < 0) return "block_size " + std::to_string(block_size) + " must be >= 0";
  if (s.empty() || (s.size() == 1 && s[0] == 1)) return "";
  const auto rank = static_cast<int64_t>(x.size());
  if (axis < -rank || axis >= rank)
    return "axis " + std::to_string(axis) + " is out of range for x of rank " +
           std::to_string(rank) + " (scale shape " + to_string(s) + " is not per-tensor)";
  if (axis < 0) axis += rank;
  const auto ax = static_cast<size_t>(axis);
  const Checked c(node, "x's element count");
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t d = x[static_cast<size_t>(i)];
    if (i < axis) out.outer = c.mul_dims(out.outer, d);
    if (i > axis) out.inner = c.mul_dims(out.inner, d);
  }
  out.dim = x[ax];
  if (block_size == 0) {
    if (s.size() != 1)
      return "scale has shape " + to_string(s) +
             ", expected a scalar or a 1-D tensor (per-axis); blocked scales need block_size";
    if (s[0] >= 0 && x[ax] >= 0 && s[0] != x[ax])
      return "scale has " + std::to_string(s[0]) + " values, expected " + std::to_string(x[ax]) +
             " (dim " + std::to_string(axis) + " of x " + to_string(x) + ")";
    out.kind = QuantLayout::Kind::PerAxis;
    return "";
  }
  if (s.size() != x.size())
    return "scale has shape " + to_string(s) + ", expected rank " + std::to_string(rank) +
           " like x " + to_string(x) + " for blocked quantization";
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] < 0 || x[i] < 0) continue;
    const int64_t want = i == ax ? (x[i] == 0 ? 0 : (x[i] - 1) / block_size + 1) : x[i];
    if (s[i] != want)
      return "scale has shape " + to_string(s) + ", expected dim " + std::to_string(i) + " to be " +
             std::to_string(want) + " for x " + to_string(x) + ", axis " + std::to_string(axis) +
             " and block_size " + std::to_string(block_size);
  }
  out.kind = QuantLayout::Kind::Blocked;
  out.block = block_size;
  return "";
}

}  // namespace quilt
