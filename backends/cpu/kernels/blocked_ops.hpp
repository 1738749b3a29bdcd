// The blocked layout's ops besides convolution (conv_blocked.hpp has the layout): Concat along
// channels and the element-wise ops, so that a region of blocked values does not end at every
// concatenation, residual scaling or activation between two convs (Real-ESRGAN's dense blocks
// concatenate every conv's output and scale their residuals by 0.2; YOLOv5's C3 blocks
// concatenate two branches).
//
//  - Concat (axis 1 of 4-D float32 values of static shapes, every input but the last a whole
//    number of channel blocks): each input blocked or NCHW, the output either. Blocked into
//    blocked is a copy of whole blocks; NCHW into blocked and back are 8 x 8 register
//    transposes (channel_vectors.hpp).
//  - Any node with one 4-D float32 output: the output reordered to blocked after its kernel runs,
//    for a value that several nodes read blocked (layout.hpp decides when).
//  - Element-wise ops (element_wise_blocked_op: Add, Mul, Relu, Sigmoid, ...) whose inputs are
//    each the output's shape or one element: a blocked tensor is the NCHW tensor of its padded
//    channel count, so the op's own kernel runs on it, viewed as [N, blocks * lanes, H, W]. Its
//    full-shape inputs and its output are all blocked or all NCHW (layout.hpp). Add, Sub, Mul
//    and Div also take one value per channel beside a blocked input (x * sigmoid(se)).
//  - GlobalAveragePool and ReduceMean over H and W read a blocked input (their output is NCHW).
//
// Their kernels use AVX2 only, for either lane count (`lanes`: blocked_lanes() unless a test asks
// for the other).
#pragma once

#include <memory>
#include <vector>

#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/conv_blocked.hpp"

namespace quilt::cpu {

// Whether a Concat node can read or write blocked values (see above).
bool blocked_concat_capable(const NodeSignature& sig, int64_t lanes = blocked_lanes());

// The kernel for a capable Concat; in_blocked[i] says whether input i is blocked.
std::unique_ptr<Kernel> make_blocked_concat(const NodeSignature& sig, std::vector<char> in_blocked,
                                            bool out_blocked, int64_t lanes = blocked_lanes());

// Whether op_type (default domain) computes each output element from the same element of its
// inputs alone, so that it runs on any layout of them.
bool element_wise_blocked_op(const std::string& op_type);

// For an element-wise node that can run on blocked values, per input: kFull (the output's
// shape: blocked with the output), kOneElement, or kPerChannel (one value per channel, [C, 1, 1],
// [1, C, 1, 1] or [N, C, 1, 1], read as it is: Add, Sub, Mul and Div of one full input and one
// such, as a squeeze-excitation gate). Empty when the node cannot: not such an op, not float32,
// not a static 4-D output, another broadcast, or no full-shape input.
constexpr char kOneElement = 0, kFull = 1, kPerChannel = 2;
std::vector<char> blocked_element_wise_inputs(const NodeSignature& sig);

// The op's own kernel (made by `create`) on blocked values, or the per-channel one: `kinds` as
// blocked_element_wise_inputs gave them.
std::unique_ptr<Kernel> make_blocked_element_wise(const NodeSignature& sig,
                                                  const KernelFactory& create,
                                                  std::vector<char> kinds,
                                                  int64_t lanes = blocked_lanes());

// Whether a node takes the mean of each channel's plane of a static 4-D float32 input
// (GlobalAveragePool, ReduceMean over axes 2 and 3): it can read that input blocked.
bool blocked_plane_mean_capable(const NodeSignature& sig);

// Its kernel for a blocked input (the output NCHW).
std::unique_ptr<Kernel> make_blocked_plane_mean(const NodeSignature& sig,
                                                int64_t lanes = blocked_lanes());

// Whether a node's output can be reordered to blocked after its kernel runs: one output, a
// static 4-D float32 one (layout.hpp's BlockedUse::converts).
bool blocked_output_convertible(const NodeSignature& sig);

// `inner` (writing NCHW), its output then reordered to blocked.
std::unique_ptr<Kernel> make_blocked_output(const NodeSignature& sig, std::unique_ptr<Kernel> inner,
                                            int64_t lanes = blocked_lanes());

}  // namespace quilt::cpu
