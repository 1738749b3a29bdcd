// float16 and bfloat16 values inside a CPU patch, held in float32. A half model whose kernels
// compute in float32 would otherwise widen every activation when a node reads it and round it
// back when the next node writes it: two conversions per value per node, and the fusions
// (Conv + Relu, MatMul + bias, residual Adds), written for float32 values, would not apply.
// This pass gives each half value that such nodes pass each other a float32 twin: the nodes read
// and write the twins, with every half input and output float32 (weights widened once here); a
// value is converted only where it crosses the patch's edge (a half input widened once, a half
// output rounded to nearest even once) or meets a node that must see it as half. Defined in
// widen.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/cpu/fusion.hpp"
#include "backends/cpu/kernel.hpp"

namespace quilt::cpu {

// True when the node may hold its half inputs and outputs in float32: its kernel supports it
// with them all float32, it has no subgraph, and no half output of it takes its type from an
// attribute rather than from its inputs (Cast's `to` excepted: it is rewritten to float32).
bool holds_half_in_float32(const NodeSignature& sig, const KernelEntry& entry);

// The note `quilt plan` shows for such a node ("float16 held and computed in float32 in the CPU
// patch"); "" when the node has no half value.
std::string held_in_float32_note(const NodeSignature& sig);

// Rewrites `patch` (in order) as above. types/constants are per value and grow by the twins
// (constants: the widened half weights); twin_of_value grows with them: for each new value, the
// value it holds in float32. kept marks the values the patch exports (they stay half). The
// conversions it inserts are Cast nodes with graph_index -1 (see is_half_edge).
void hold_half_in_float32(std::vector<PatchNode>& patch, std::vector<TypeShape>& types,
                          std::vector<Tensor>& constants, std::vector<int32_t>& twin_of_value,
                          const std::vector<char>& kept, const KernelRegistry& registry);

// A conversion hold_half_in_float32 inserted; make_half_edge() runs it (F16C, split across the
// pool).
bool is_half_edge(const PatchNode& node);
std::unique_ptr<Kernel> make_half_edge();

}  // namespace quilt::cpu
