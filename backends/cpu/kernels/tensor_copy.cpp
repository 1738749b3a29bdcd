// The strided copy behind Transpose, Slice, Expand, Tile and DepthToSpace/SpaceToDepth, and
// scalar conversion to any dtype's bytes.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "backends/cpu/avx512.hpp"
#include "backends/cpu/kernel.hpp"
#include "core/half.hpp"

namespace quilt::cpu {

void strided_copy(const ThreadPool& pool, void* dst, const void* src, size_t esize,
                  std::vector<int64_t> shape, std::vector<int64_t> strides, int64_t base);
std::array<uint8_t, 8> scalar_bytes(DType dtype, double value);
void copy_strided(KernelContext& ctx, const std::vector<int64_t>& shape,
                  const std::vector<int64_t>& strides, int64_t base);

namespace {

// Calls f with a null pointer of the unsigned integer type as wide as one element, so that
// element copies compile to single moves.
template <class F>
void with_word(size_t esize, F&& f) {
  switch (esize) {
    case 1:
      return f(static_cast<uint8_t*>(nullptr));
    case 2:
      return f(static_cast<uint16_t*>(nullptr));
    case 4:
      return f(static_cast<uint32_t*>(nullptr));
    default:
      return f(static_cast<uint64_t*>(nullptr));
  }
}

// Walks the multi-index of the outer dims (all but the last) of `shape`, keeping the source
// offset sum(index[k] * strides[k]) up to date.
class OuterWalk {
 public:
  OuterWalk(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, int64_t row)
      : shape_(shape), strides_(strides), index_(shape.size(), 0) {
    for (size_t k = shape.size() - 1; k-- > 0;) {
      index_[k] = row % shape[k];
      row /= shape[k];
      offset_ += index_[k] * strides[k];
    }
  }
  int64_t offset() const { return offset_; }
  void next() {
    for (size_t k = shape_.size() - 1; k-- > 0;) {
      offset_ += strides_[k];
      if (++index_[k] < shape_[k]) return;
      offset_ -= index_[k] * strides_[k];
      index_[k] = 0;
    }
  }

 private:
  const std::vector<int64_t>& shape_;
  const std::vector<int64_t>& strides_;
  std::vector<int64_t> index_;
  int64_t offset_ = 0;
};

// A 16 x 16 tile of 4-byte elements: row l of the source tile (16 elements along j, contiguous)
// at src + l * src_stride becomes column l of the destination tile, whose rows (16 elements
// along l) are dst_stride apart. In registers (transpose16x16): the scalar tile through a
// buffer moved each element four times and took YOLOv5s's three detection-head Transposes
// (2.1 M floats) 1.7 ms at one thread against onnxruntime's 0.9; the largest of them alone
// ([1, 3, 85, 80, 80] to [1, 3, 80, 80, 85]) 0.34-0.37 -> 0.20 ms (AMD EPYC, one thread).
QUILT_GCC12_AVX512_BEGIN  // backends/cpu/gcc12_avx512.hpp
__attribute__((target("avx512f"))) void transpose_tile16(const void* src, int64_t src_stride,
                                                         void* dst, int64_t dst_stride) {
  const auto* s = static_cast<const float*>(src);
  auto* d = static_cast<float*>(dst);
  __m512 r[16];
  for (int64_t l = 0; l < 16; ++l) r[l] = _mm512_loadu_ps(s + l * src_stride);
  transpose16x16(r);
  for (int64_t j = 0; j < 16; ++j) _mm512_storeu_ps(d + j * dst_stride, r[j]);
}
QUILT_GCC12_AVX512_END

// The innermost dim is read with a large stride while dim `j` is contiguous in the source:
// copy in square tiles so both the reads and the writes stay within a few cache lines.
template <class W>
void tiled_copy(const ThreadPool& pool, W* dst, const W* src, const std::vector<int64_t>& shape,
                const std::vector<int64_t>& strides, size_t j) {
  constexpr int64_t kTile = 16;
  const size_t rank = shape.size();
  const int64_t nj = shape[j], nl = shape.back(), sl = strides.back();
  std::vector<int64_t> dst_strides(rank, 1);
  for (size_t k = rank - 1; k-- > 0;) dst_strides[k] = dst_strides[k + 1] * shape[k + 1];
  // Outer = every dim except j and the last, walked as a shape with j set to 1.
  std::vector<int64_t> outer_shape = shape, outer_src = strides, outer_dst = dst_strides;
  outer_shape[j] = 1;
  outer_shape.back() = 1;
  int64_t outer = 1;
  for (int64_t d : outer_shape) outer *= d;
  const int64_t tiles_j = (nj + kTile - 1) / kTile;
  const int64_t dj = dst_strides[j];
  const bool vector_tiles = sizeof(W) == 4 && has_avx512f();
  pool.parallel_for(outer * tiles_j, 4, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      int64_t o = t / tiles_j, s_off = 0, d_off = 0;
      for (size_t k = rank; k-- > 0;) {
        const int64_t i = o % outer_shape[k];
        o /= outer_shape[k];
        s_off += i * outer_src[k];
        d_off += i * outer_dst[k];
      }
      const int64_t j0 = (t % tiles_j) * kTile, j1 = std::min(nj, j0 + kTile);
      W* d = dst + d_off;
      const W* sp = src + s_off;
      for (int64_t l0 = 0; l0 < nl; l0 += kTile) {
        const int64_t l1 = std::min(nl, l0 + kTile);
        if (j1 - j0 == kTile && l1 - l0 == kTile && vector_tiles) {
          transpose_tile16(sp + j0 + l0 * sl, sl, d + j0 * dj + l0, dj);
        } else if (j1 - j0 == kTile && l1 - l0 == kTile) {
          // Through a small buffer: with power-of-two strides, copying directly makes the rows
          // of a tile collide in the same cache sets.
          W buf[kTile * kTile];
          for (int64_t l = 0; l < kTile; ++l)
            for (int64_t jj = 0; jj < kTile; ++jj)
              buf[jj * kTile + l] = sp[j0 + jj + (l0 + l) * sl];
          for (int64_t jj = 0; jj < kTile; ++jj)
            for (int64_t l = 0; l < kTile; ++l) d[(j0 + jj) * dj + l0 + l] = buf[jj * kTile + l];
        } else {
          for (int64_t l = l0; l < l1; ++l)
            for (int64_t jj = j0; jj < j1; ++jj) d[jj * dj + l] = sp[jj + l * sl];
        }
      }
    }
  });
}

}  // namespace

void strided_copy(const ThreadPool& pool, void* dst, const void* src, size_t esize,
                  std::vector<int64_t> shape, std::vector<int64_t> strides, int64_t base) {
  // Drop size-1 dims and merge neighbours that are contiguous with each other in the source.
  std::vector<int64_t> s, st;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return;
    if (shape[i] == 1) continue;
    if (!s.empty() && st.back() == strides[i] * shape[i]) {
      s.back() *= shape[i];
      st.back() = strides[i];
      continue;
    }
    s.push_back(shape[i]);
    st.push_back(strides[i]);
  }
  const auto* in = static_cast<const uint8_t*>(src) + base * static_cast<int64_t>(esize);
  auto* out = static_cast<uint8_t*>(dst);
  if (s.empty()) return (void)std::memcpy(out, in, esize);
  const int64_t width = s.back(), inner_stride = st.back();
  int64_t rows = 1;
  for (size_t k = 0; k + 1 < s.size(); ++k) rows *= s[k];
  const auto es = static_cast<int64_t>(esize);
  if (inner_stride == 1) {
    const int64_t row_bytes = width * es;
    pool.parallel_for(rows, std::max<int64_t>(1, (int64_t{1} << 15) / row_bytes),
                      [&](int64_t begin, int64_t end) {
                        OuterWalk walk(s, st, begin);
                        for (int64_t r = begin; r < end; ++r, walk.next())
                          std::memcpy(out + r * row_bytes, in + walk.offset() * es,
                                      static_cast<size_t>(row_bytes));
                      });
    return;
  }
  // A transpose-like copy: some outer dim is contiguous in the source.
  for (size_t j = 0; j + 1 < s.size(); ++j) {
    if (st[j] == 1 && inner_stride != 0 && width >= 8 && s[j] >= 8) {
      with_word(esize, [&](auto* w) {
        using W = std::remove_pointer_t<decltype(w)>;
        tiled_copy(pool, reinterpret_cast<W*>(out), reinterpret_cast<const W*>(in), s, st, j);
      });
      return;
    }
  }
  with_word(esize, [&](auto* w) {
    using W = std::remove_pointer_t<decltype(w)>;
    auto* o = reinterpret_cast<W*>(out);
    const auto* i = reinterpret_cast<const W*>(in);
    pool.parallel_for(rows, std::max<int64_t>(1, (int64_t{1} << 13) / width),
                      [&](int64_t begin, int64_t end) {
                        OuterWalk walk(s, st, begin);
                        for (int64_t r = begin; r < end; ++r, walk.next()) {
                          W* d = o + r * width;
                          const W* p = i + walk.offset();
                          for (int64_t x = 0; x < width; ++x) d[x] = p[x * inner_stride];
                        }
                      });
  });
}

namespace {

// True when the strided view reads all `numel` source elements in order, so that the copy would
// equal the input.
bool is_whole_input(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                    int64_t base, int64_t numel) {
  if (base != 0) return false;
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return expected == numel;
}

}  // namespace

// Output 0 as the strided view (shape, strides, base) of input 0: a view of the input when that
// reads it whole and in order (a Transpose that only moves size-1 dims, a full Slice, ...),
// else a copy.
void copy_strided(KernelContext& ctx, const std::vector<int64_t>& shape,
                  const std::vector<int64_t>& strides, int64_t base) {
  const Tensor& in = ctx.input(0);
  if (in.numel() > 0 && is_whole_input(shape, strides, base, in.numel()))
    return ctx.set_output(0, in.reshaped(ctx.output_shape(0)));
  Tensor& out = ctx.output_uninitialized(0);
  strided_copy(ctx.pool, out.raw_data(), in.raw_data(), dtype_size(in.dtype()), shape, strides,
               base);
}

std::array<uint8_t, 8> scalar_bytes(DType dtype, double value) {
  std::array<uint8_t, 8> b{};
  auto put = [&](auto v) { std::memcpy(b.data(), &v, sizeof v); };
  switch (dtype) {
    case DType::Float32:
      put(static_cast<float>(value));
      break;
    case DType::Float64:
      put(value);
      break;
    case DType::Float16:
      put(float_to_half(static_cast<float>(value)));
      break;
    case DType::Int8:
      put(static_cast<int8_t>(value));
      break;
    case DType::Int16:
      put(static_cast<int16_t>(value));
      break;
    case DType::Int32:
      put(static_cast<int32_t>(value));
      break;
    case DType::Int64:
      put(static_cast<int64_t>(value));
      break;
    case DType::UInt8:
      put(static_cast<uint8_t>(value));
      break;
    case DType::UInt16:
      put(static_cast<uint16_t>(value));
      break;
    case DType::UInt32:
      put(static_cast<uint32_t>(value));
      break;
    case DType::UInt64:
      put(static_cast<uint64_t>(value));
      break;
    case DType::Bool:
      put(static_cast<uint8_t>(value != 0));
      break;
    default:
      break;
  }
  return b;
}

}  // namespace quilt::cpu
