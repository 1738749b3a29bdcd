// CPU kernels of the loss family's ops that only place or move elements: EyeLike,
// ReverseSequence and Compress. They work on raw bytes, so every dtype a Tensor holds is
// supported.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/broadcast.hpp"
#include "core/half.hpp"

namespace quilt::cpu {

void register_cpu_loss_copy(KernelRegistry& r);

namespace {

// Byte copies smaller than this stay on one thread.
constexpr int64_t kCopyGrainBytes = 1 << 16;

int64_t grain_for(int64_t bytes_per_item) {
  return std::max<int64_t>(1, kCopyGrainBytes / std::max<int64_t>(1, bytes_per_item));
}

// ---- EyeLike ----

// The bytes of the value 1 in `dtype`.
std::vector<std::byte> one_of(DType dtype) {
  std::vector<std::byte> out(dtype_size(dtype));
  auto put = [&](auto v) { std::memcpy(out.data(), &v, sizeof v); };
  if (dtype == DType::Float16)
    put(float_to_half(1.0f));
  else
    visit_dtype(dtype, AllTypes{}, [&](auto zero) { put(static_cast<decltype(zero)>(1)); });
  return out;
}

void run_eyelike(KernelContext& ctx) {
  Tensor& y = ctx.output(0);
  const int64_t rows = y.dim(0), cols = y.dim(1);
  // Beyond [-rows, cols] no element is on the diagonal; clamping keeps -k and i + k in range.
  const int64_t k = std::clamp<int64_t>(ctx.node.attr_int("k", 0), -rows, cols);
  const size_t size = dtype_size(y.dtype());
  const std::vector<std::byte> one = one_of(y.dtype());
  auto* out = static_cast<std::byte*>(y.raw_data());
  // The output arrives zero-filled; set the k-th diagonal.
  for (int64_t i = std::max<int64_t>(0, -k); i < rows && i + k < cols; ++i)
    std::memcpy(out + static_cast<size_t>(i * cols + i + k) * size, one.data(), size);
}

std::string eyelike_support(const NodeSignature& sig) {
  const DType out = sig.outputs.empty() ? DType::Undefined : sig.outputs[0].dtype;
  if (out != DType::Undefined && !dtype_supported(out))
    return std::string("output dtype ") + dtype_name(out) + " is not supported";
  return "";
}

// ---- ReverseSequence ----

void run_reverse_sequence(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& lens_t = ctx.input(1);
  const int64_t batch_axis = ctx.node.attr_int("batch_axis", 1);
  const int64_t time_axis = ctx.node.attr_int("time_axis", 0);
  const int64_t batch = x.dim(batch_axis), time = x.dim(time_axis);
  if (lens_t.numel() != batch)
    ctx.node.fail("sequence_lens has " + std::to_string(lens_t.numel()) +
                      " entries, expected the batch size " + std::to_string(batch),
                  ErrorCode::InvalidArgument);
  const int64_t* lens = lens_t.data<int64_t>();
  for (int64_t b = 0; b < batch; ++b)
    if (lens[b] < 0 || lens[b] > time)
      ctx.node.fail("sequence_lens[" + std::to_string(b) + "] is " + std::to_string(lens[b]) +
                        ", expected a value in [0, " + std::to_string(time) + "]",
                    ErrorCode::InvalidArgument);
  int64_t inner = 1;
  for (int64_t i = 2; i < x.rank(); ++i) inner *= x.dim(i);
  const size_t row = static_cast<size_t>(inner) * dtype_size(x.dtype());
  // Element (b, t) starts at row offset b * stride_b + t * stride_t.
  const int64_t stride_b = batch_axis == 0 ? time : 1;
  const int64_t stride_t = time_axis == 0 ? batch : 1;
  const auto* src = static_cast<const std::byte*>(x.raw_data());
  auto* dst = static_cast<std::byte*>(ctx.output(0).raw_data());
  ctx.pool.parallel_for(
      batch * time, grain_for(static_cast<int64_t>(row)), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const int64_t b = i / time, t = i % time;
          const int64_t from = t < lens[b] ? lens[b] - 1 - t : t;
          std::memcpy(dst + static_cast<size_t>(b * stride_b + t * stride_t) * row,
                      src + static_cast<size_t>(b * stride_b + from * stride_t) * row, row);
        }
      });
}

// ---- Compress ----

void run_compress(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& cond_t = ctx.input(1);
  const bool has_axis = ctx.node.has_attr("axis");
  int64_t outer = 1, n = x.numel(), inner = 1;
  if (has_axis) {
    int64_t axis = ctx.node.attr_int("axis", 0);
    if (axis < 0) axis += x.rank();
    n = x.dim(axis);
    for (int64_t i = 0; i < x.rank(); ++i)
      if (i < axis)
        outer *= x.dim(i);
      else if (i > axis)
        inner *= x.dim(i);
  }
  // Indices along the axis to keep; true entries past its end are an error, false ones ignored.
  const bool* cond = cond_t.data<bool>();
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < cond_t.numel(); ++i) {
    if (!cond[i]) continue;
    if (i >= n)
      ctx.node.fail("condition selects index " + std::to_string(i) + " but only " +
                        std::to_string(n) + " are available",
                    ErrorCode::InvalidArgument);
    keep.push_back(i);
  }
  Tensor& y = ctx.output(0);
  const auto kept = static_cast<int64_t>(keep.size());
  if (y.numel() != outer * kept * inner)
    ctx.node.fail("output has " + std::to_string(y.numel()) + " elements but the condition keeps " +
                  std::to_string(outer * kept * inner));
  const size_t row = static_cast<size_t>(inner) * dtype_size(x.dtype());
  const auto* src = static_cast<const std::byte*>(x.raw_data());
  auto* dst = static_cast<std::byte*>(y.raw_data());
  ctx.pool.parallel_for(outer * kept, grain_for(static_cast<int64_t>(row)),
                        [&](int64_t begin, int64_t end) {
                          for (int64_t i = begin; i < end; ++i) {
                            const int64_t o = i / kept, j = keep[static_cast<size_t>(i % kept)];
                            std::memcpy(dst + static_cast<size_t>(i) * row,
                                        src + static_cast<size_t>(o * n + j) * row, row);
                          }
                        });
}

}  // namespace

void register_cpu_loss_copy(KernelRegistry& r) {
  r.add("EyeLike", eyelike_support, run_eyelike);
  r.add("ReverseSequence", any_dtype(), run_reverse_sequence);
  r.add("Compress", any_dtype(), run_compress);
}

}  // namespace quilt::cpu
