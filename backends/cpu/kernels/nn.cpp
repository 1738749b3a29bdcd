// CPU kernels of the nn op family. The kernels themselves live beside this file (gemm.cpp,
// conv.cpp, conv_transpose.cpp, pool.cpp); this file registers them and holds the window
// geometry they share.
#include <algorithm>

#include "backends/cpu/kernel.hpp"

namespace quilt::cpu {

void register_cpu_gemm(KernelRegistry& r);
void register_cpu_conv(KernelRegistry& r);
void register_cpu_conv_transpose(KernelRegistry& r);
void register_cpu_pool(KernelRegistry& r);

// Leading pad of each spatial dim of a Conv or pool. Shape inference already fixed the output
// size from auto_pad/pads/ceil_mode; for SAME_* the total padding follows from that size.
std::vector<int64_t> window_pad_begins(const Node& node, const std::vector<int64_t>& x_shape,
                                       const std::vector<int64_t>& kernel,
                                       const std::vector<int64_t>& y_shape) {
  const size_t sp = x_shape.size() - 2;
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  const auto pads = node.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  const auto strides = node.attr_ints("strides", std::vector<int64_t>(sp, 1));
  const auto dilations = node.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  const bool conv = node.op_type == "Conv" || node.op_type == "ConvInteger";
  std::vector<int64_t> begins(sp, 0);
  for (size_t i = 0; i < sp; ++i) {
    if (auto_pad == "NOTSET") {
      begins[i] = pads[i];
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t dk = (kernel[i] - 1) * dilations[i] + 1;
      int64_t total = (y_shape[i + 2] - 1) * strides[i] + dk - x_shape[i + 2];
      // The total is negative when the stride exceeds the kernel. Conv (like onnxruntime)
      // then pads nothing; the pools follow the spec's formula, where a negative leading pad
      // moves the windows into the input. The odd one of the total goes to the end for
      // SAME_UPPER and to the start for SAME_LOWER, whatever its sign (-2 splits -1, -1;
      // onnxruntime 1.23 began SAME_LOWER at (-2 + 1) / 2 = 0, and 1.32 refuses a negative total).
      if (conv) total = std::max<int64_t>(0, total);
      begins[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    }
  }
  return begins;
}

void register_cpu_nn(KernelRegistry& r) {
  register_cpu_gemm(r);
  register_cpu_conv(r);
  register_cpu_conv_transpose(r);
  register_cpu_pool(r);
}

}  // namespace quilt::cpu
