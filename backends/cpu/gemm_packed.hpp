// Quilt's own float32 GEMM for convolutions: C = A B (+ bias per row, + a residual, then an
// activation), where A (M x K, the weights) is packed once when the kernel is created and B
// (K x N, N = output pixels) is either read in place row by row (BRows: a conv's input planes,
// or its padded copy shifted per kernel offset) or packed in panels as it is read.
//
//   PackedA w(weights, c_out, c_in * kh * kw, c_in * kh * kw);      // at kernel creation
//   gemm_packed(w, BRows{x, offsets}, n, y, n, bias, act, pool);    // per run
//
// Why not OpenBLAS here: sgemm repacks A on every call (the weights, megabytes per layer, each
// run), synchronises its own threads per call (tens of microseconds on small convs) and cannot
// apply the bias and activation while the tile is in registers. With A packed ahead, the
// 8 x 48 AVX-512 micro-kernel keeps 24 accumulators in registers, the pool's threads claim
// tiles of the output, and the epilogue runs on the finished tile. On CPUs without AVX-512 the
// same tiles run on an AVX2 + FMA micro-kernel (gemm_avx2.hpp), the bias in its registers and
// the activation in a pass over each task's rows.
#pragma once

#include <cstdint>
#include <memory>

#include "backends/cpu/activation.hpp"
#include "backends/cpu/thread_pool.hpp"

namespace quilt::cpu {

// A right operand read in place, never packed: row p of B is the n floats at
// base + offsets[p]. A convolution reads its windows this way from a zero-padded copy of its
// input: row (channel, window offset) is that copy shifted by the offset.
// Memory a product brings toward the caches while it runs, a few lines before each micro-tile:
// `count` ranges of `bytes`, range r at base + r * stride (or, with offsets, at base + offsets[r]
// floats: B's rows), into L2 (or L1 with l1). A conv in bands (conv.cpp) names its next band's
// input rows, so that reading them from memory overlaps this band's product instead of
// following it; a pointwise product on a large map names its next strip's rows (gemm_packed.cpp).
// Single-threaded: one product on the calling thread.
struct PrefetchRanges {
  const char* base = nullptr;
  int64_t stride = 0, bytes = 0, count = 0;
  const int64_t* offsets = nullptr;
  bool l1 = false;
  int64_t per_tile = 0;           // lines before each micro-tile
  int64_t range = 0, offset = 0;  // the next line: range, byte offset from its first line
  void issue();
};

// The lines of [p, p + bytes) toward L1 (or L2).
void prefetch_lines(const void* p, int64_t bytes, bool l1);

// How many micro-tiles an m x n x k product runs (PrefetchRanges::per_tile spreads its lines
// over them).
int64_t gemm_packed_tiles(int64_t m, int64_t n, int64_t k);

struct BRows {
  const float* base = nullptr;
  const int64_t* offsets = nullptr;    // one per row of B (the packed A's depth)
  PrefetchRanges* prefetch = nullptr;  // optional
  // The least distance, in floats, between two rows' starts: rows a column apart (a conv over
  // shifted rows) share their lines, and gemm_packed fetches ahead only rows a strip apart.
  int64_t min_gap = INT64_MAX;
};

// A product whose columns are rows of `stride` columns of which only the first `width` are
// kept: a conv over shifted input rows computes each output row `stride` wide (its padded
// input's width). C then holds the kept columns only, rows `width` apart (the output map), and
// the product's other columns are never stored. At least 16 columns a row (stride >= 16).
struct NarrowCols {
  int64_t width = 0, stride = 0;
};

class PackedA {
 public:
  PackedA() = default;
  // Packs rows [0, m) x cols [0, k) of a (row stride lda); bf16: rounded to bfloat16 for the
  // bfloat16 GEMM (gemm_bf16.hpp; only where bf16::available()), which the products then use.
  PackedA(const float* a, int64_t m, int64_t k, int64_t lda, bool bf16 = false);
  int64_t rows() const { return m_; }
  int64_t depth() const { return k_; }
  // Whether gemm_packed can store a product through NarrowCols with this activation: the
  // float32 AVX-512 micro-kernel, which finishes the activation in registers (act16); not the
  // AVX2 one.
  bool narrow_ok(const Activation& act) const;

 private:
  friend void gemm_packed(const PackedA&, const float*, int64_t, int64_t, float*, int64_t,
                          const float*, const Activation&, const ThreadPool&);
  friend void gemm_packed(const PackedA&, const BRows&, int64_t, float*, int64_t, const float*,
                          const Activation&, const ThreadPool&, const float*, const NarrowCols*);
  int64_t m_ = 0, k_ = 0;
  std::shared_ptr<float[]> data_;     // [ceil(m / 8)][k][8], rows past m are zero
  std::shared_ptr<uint32_t[]> bf16_;  // instead of data_: bfloat16 pair rows (gemm_bf16.hpp)
};

// The same with B read in place (n columns, a.depth() rows). residual, when given, has C's
// layout (row stride ldc) and is added to C before the activation. narrow: C keeps only those
// columns (n counts the product's); only where a.narrow_ok(act).
void gemm_packed(const PackedA& a, const BRows& b, int64_t n, float* c, int64_t ldc,
                 const float* bias, const Activation& act, const ThreadPool& pool,
                 const float* residual = nullptr, const NarrowCols* narrow = nullptr);

// Whether k rows of B read in place (row p at base + offsets[p]) would evict each other from L1
// as a strip of 48 columns passes them (planes a multiple of 4 KiB apart); gemm_packed then packs
// each strip first, on the AVX2 kernel.
bool rows_collide(const float* base, const int64_t* offsets, int64_t k);

// The right operand of a product whose left one changes every run (MatMul or Gemm with constant
// weights B: K x N, or N x K when transposed), packed once in 48-column panels.
class PackedB {
 public:
  PackedB() = default;
  // bf16: rounded to bfloat16 for the bfloat16 GEMM, as PackedA's.
  PackedB(const float* b, int64_t k, int64_t n, int64_t ldb, bool transposed, bool bf16 = false);
  int64_t depth() const { return k_; }
  int64_t cols() const { return n_; }

 private:
  friend void gemm_packed_b(const float*, int64_t, bool, int64_t, const PackedB&, float*, int64_t,
                            const float*, const Activation&, const ThreadPool&);
  int64_t k_ = 0, n_ = 0;
  std::shared_ptr<float[]>
      data_;  // [ceil(n / 48)][k][48] (AVX2: avx2::packed_b_index), zero past n
  std::shared_ptr<uint32_t[]> bf16_;  // instead of data_: bfloat16 panels (gemm_bf16.hpp)
};

// c[i][j] (row stride ldc) = act(bias[i] + sum_p a[i][p] * b[p][j]) for i < a.rows(), j < n;
// b has a.depth() rows of stride ldb. bias may be null. Splits the work across the pool.
void gemm_packed(const PackedA& a, const float* b, int64_t ldb, int64_t n, float* c, int64_t ldc,
                 const float* bias, const Activation& act, const ThreadPool& pool);

// c[i][j] = act(col_bias[j] + sum_p a[i][p] * b[p][j]) for i < m, j < b.cols(); a is m x depth
// with row stride lda (or, trans_a, depth x m with row stride lda). col_bias may be null.
void gemm_packed_b(const float* a, int64_t lda, bool trans_a, int64_t m, const PackedB& b, float* c,
                   int64_t ldc, const float* col_bias, const Activation& act,
                   const ThreadPool& pool);

// c = act(a b) with neither operand packed ahead (a: m x k, b: k x n; row strides lda, ldb,
// ldc): attention's batched products. a is packed in a thread-local buffer.
void gemm_raw(const float* a, int64_t lda, int64_t m, int64_t k, const float* b, int64_t ldb,
              int64_t n, float* c, int64_t ldc, const Activation& act, const ThreadPool& pool);

// The columns of a product laid out as `count / width` output rows of `width` pixels: pixel q
// of C reads B at column (q / width) * row_stride + q % width (a padded conv's shifted planes
// are wider than its output).
struct PixelRows {
  int64_t count = 0, width = 1, row_stride = 1;
};

// Which part of A and of C a gemm_channels product uses: A's depth rows first + p * step for
// p < count (one kernel offset of a conv packed for all its offsets: first = the offset,
// step = the offsets per channel); C's output rows `c_row_stride` floats apart (a rectangle
// of the output map); and whether the product is added to C (no bias) instead of stored.
struct ChannelSlice {
  int64_t depth_first = 0, depth_step = 1, depth_count = -1;  // -1: all of A's depth
  int64_t c_row_stride = 0;                                   // 0: C's pixels are contiguous
  bool accumulate = false;
};

// A (M x K, the weights) packed for gemm_channels: [ceil(m / 64)][k][64], rows past m zero.
// (gemm_channels: AVX-512 tiles, or AVX2 ones in gemm_avx2.cpp.)
class PackedAChannels {
 public:
  static constexpr int64_t kRows = 64;  // output channels per tile (4 vectors)
  PackedAChannels() = default;
  PackedAChannels(const float* a, int64_t m, int64_t k, int64_t lda);
  int64_t rows() const { return m_; }
  int64_t depth() const { return k_; }

 private:
  friend void gemm_channels(const PackedAChannels&, const BRows&, const PixelRows&, float*, int64_t,
                            const float*, const Activation&, const ThreadPool&, const float*,
                            const ChannelSlice&);
  int64_t m_ = 0, k_ = 0;
  std::shared_ptr<float[]> data_;
};

// c[i][q] (row stride ldc) = act(bias[i] + sum_p a[i][p] * b[p][col(q)] (+ residual[i][q]))
// for the `cols.count` pixels q: gemm_packed's product for few columns (small maps), computed
// 64 rows x up to 7 pixels at a time with the pixels broadcast, so no vector lane is wasted on
// a width that is not a multiple of 16.
void gemm_channels(const PackedAChannels& a, const BRows& b, const PixelRows& cols, float* c,
                   int64_t ldc, const float* bias, const Activation& act, const ThreadPool& pool,
                   const float* residual = nullptr, const ChannelSlice& slice = {});

}  // namespace quilt::cpu
