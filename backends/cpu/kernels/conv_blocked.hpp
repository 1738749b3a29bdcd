// Convolutions on the channel-blocked layout of the CPU backend: NCHW16c on CPUs with AVX-512,
// NCHW8c on the others (blocked_lanes(); the 8-lane engine is conv_blocked_avx2.cpp).
//
// A blocked tensor of logical shape [N, C, H, W] is stored as [N, ceil(C / L), H, W, L] (L the
// lanes): the L channels of a block are one vector at each pixel, channels past C are padding
// (never read as channels). The layout is private to a CPU patch (backends/cpu/layout.hpp decides
// which values use it); the host and other backends only ever see NCHW.
//
// Two kernels, each reading its input and residual and writing its output in either layout, so a
// blocked region needs no reorder nodes: its first conv reads NCHW and its last writes NCHW.
//  - direct: any kernel size, stride, dilation and padding, group 1. Register tiles of up to 4
//    output channel blocks x 6 output pixels (12 pixels for 1 or 2 blocks), any pixels of a band
//    of the output (tiles run across its rows); the depth (input channels x kernel offsets) a
//    chunk at a time over all of a band's tiles, sums kept between chunks. The input is
//    broadcast a channel at a time, so an NCHW input (a network's first conv, 1 or 3 channels)
//    is read in place without padding to 16.
//  - depthwise (group = channels, one output channel each): 16 channels per vector, 12 pixels per
//    tile; an NCHW input is reordered once per run.
// Bias, a fused residual (added first) and the fused activation are applied in registers before
// the store.
#pragma once

#include <memory>
#include <string>

#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/conv_geometry.hpp"

namespace quilt::cpu {

// Channels a vector of the blocked layout on this CPU: 16 with AVX-512, else 8.
int64_t blocked_lanes();

// Whether the CPU backend's layout option `auto` (its default) picks the blocked layout here:
// where its kernels measured faster than the NCHW ones on the zoo's CNNs, the 8-lane ones.
inline bool blocked_by_default() {
  return blocked_lanes() == 8;
}

// `quilt devices`' description of the layout the default picks on this CPU.
std::string layout_description();

// Whether a Conv node can run on the blocked kernels: float32, 2-D, constant weights (and bias),
// group 1 or depthwise, and (16 lanes) an activation the kernels apply in registers.
bool blocked_conv_capable(const NodeSignature& sig, const Activation& activation);
// Whether a capable node's kernel can also read its input blocked: not on 8 lanes with fewer
// than 8 input channels (a network's RGB stem), whose input the kernel reads as NCHW planes.
bool blocked_conv_reads_blocked(const NodeSignature& sig);

// The kernel for a capable node; `in_blocked`, `out_blocked` and `residual_blocked` say which
// of input 0, output 0 and the fused residual are blocked tensors.
std::unique_ptr<Kernel> make_blocked_conv(const NodeSignature& sig, bool in_blocked,
                                          bool out_blocked, bool residual_blocked);

// Shared by the 16- and 8-lane kernels' runs (conv_blocked.cpp).
namespace blocked_detail {
// The input's logical NCHW shape: x as given (blocked [N, ceil(C / lanes), H, W, lanes] or NCHW),
// checked against the kernel's c_in, and the output's shape checked against it and c_out; a
// mismatch fails the node naming both.
std::vector<int64_t> checked_shapes(const KernelContext& ctx, const Tensor& x, bool in_blocked,
                                    int64_t c_in, int64_t c_out, int64_t lanes);
// The fused residual's data (null without one), checked: float32 in the output's shape, blocked
// or NCHW.
const float* checked_residual(const KernelContext& ctx, bool blocked, int64_t lanes);
// Whether some window of g reads outside the input (padding).
bool reads_padding(const Geometry& g);
}  // namespace blocked_detail

// The 8-lane kernel (conv_blocked_avx2.cpp), which make_blocked_conv returns without AVX-512.
std::unique_ptr<Kernel> make_blocked_conv8(const NodeSignature& sig, bool in_blocked,
                                           bool out_blocked, bool residual_blocked);

// Reorders: one image's [C, H, W] into [ceil(C / L), H, W, L] (L = blocked_lanes(); padding
// channels zeroed) and back. For tests and the kernels' edges.
void reorder_to_blocked(const float* x, int64_t c, int64_t hw, float* y);
void reorder_from_blocked(const float* x, int64_t c, int64_t hw, float* y);

}  // namespace quilt::cpu
