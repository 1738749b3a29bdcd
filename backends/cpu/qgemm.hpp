// Quilt's integer GEMM for the quantized ops (MatMulInteger, ConvInteger, QLinearMatMul,
// QLinearConv): C = (A - a_offset) (B - b_offset) exactly in int32, then stored as int32, or
// requantized to uint8/int8 in the store (y = saturate(round_half_even(acc * multiplier) + zp),
// the product taken in double as onnx's reference does), or scaled to float32.
//
// The instruction is VNNI's vpdpbusd (four uint8 x int8 products summed into each int32 lane).
// One operand is broadcast four bytes (one int32) at a time along a row ("rows"), the other is
// read 16 columns at a time from panels packed as [ceil(n / 16)][ceil(k / 4)][16][4] bytes
// ("panels"). Exactly one of the two holds uint8: a MatMul broadcasts its activations (uint8)
// against packed weights (int8); a convolution broadcasts its weights (int8) against its
// im2col panels (uint8). Operands of the other signedness are stored shifted by 128 (int8 + 128
// is uint8, uint8 - 128 is int8), and the shift joins the zero point in the correction
//
//   sum_p (r[i][p] - ro[i]) (q[p][j] - qo[j])
//     = dot[i][j] - qo[j] (rsum[i] - k ro[i]) - ro[i] qsum[j]
//
// with rsum / qsum the stored bytes' sums along the depth: so u8 x s8, s8 x s8, u8 x u8 and
// s8 x u8 products, with per-tensor, per-row or per-column zero points, are all exact.
//
// Paths, chosen at run time (`qgemm_isa()`): AVX512-VNNI (16 lanes, vpdpbusd), AVX2 (8 lanes;
// vpdpbusd emulated exactly by two vpmaddwd on the bytes widened to 16 bits: vpmaddubsw would
// saturate) and plain C++. QUILT_CPU_ISA=avx512vnni|avx2|scalar picks one (never one the CPU
// lacks: then the best it has, with a warning).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backends/cpu/thread_pool.hpp"

namespace quilt::cpu {

enum class QIsa { Scalar, Avx2, Avx512Vnni };

const char* qisa_name(QIsa isa);
// The best path this CPU runs, or the one QUILT_CPU_ISA names (read once).
QIsa qgemm_isa();
// Whether this CPU can run `isa`.
bool qisa_supported(QIsa isa);
// For `quilt devices`: the path in use and the integer instructions the CPU offers, e.g.
// "avx512vnni (CPU: avx512-vnni yes, avx-vnni no, amx-int8 no)".
std::string qgemm_description();

// Bytes packed 16 columns x 4 depths at a time; columns past n and depths past k are zero.
// Stored as uint8 or int8 (is_unsigned); sums[j] is column j's sum of the stored values.
class QPanels {
 public:
  static constexpr int64_t kCols = 16;
  QPanels() = default;
  // Allocates for k x n (contents unset): an im2col writes into data() directly.
  QPanels(int64_t k, int64_t n, bool is_unsigned);
  // Packs b (k x n, row stride ldb, or n x k when transposed) of int8 (src_signed) or uint8
  // values, shifting each by 128 when its signedness differs from is_unsigned.
  static QPanels pack(const void* b, bool src_signed, int64_t k, int64_t n, int64_t ldb,
                      bool transposed, bool is_unsigned);
  int64_t depth() const { return k_; }
  int64_t cols() const { return n_; }
  int64_t depth4() const { return (k_ + 3) / 4; }
  bool is_unsigned() const { return unsigned_; }
  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  int32_t* sums() { return sums_.get(); }
  const int32_t* sums() const { return sums_.get(); }
  // Byte offset of (depth p, column j) in data().
  int64_t at(int64_t p, int64_t j) const {
    return ((j / kCols) * depth4() + p / 4) * kCols * 4 + (j % kCols) * 4 + p % 4;
  }

 private:
  int64_t k_ = 0, n_ = 0;
  bool unsigned_ = false;
  std::shared_ptr<uint8_t[]> data_;
  std::shared_ptr<int32_t[]> sums_;
};

// Rows of bytes broadcast four at a time: row i is stride bytes at data + i * stride (stride a
// multiple of 4, depths past k zero); sums[i] is row i's sum of the stored values.
class QRows {
 public:
  QRows() = default;
  // Allocates m rows for depth k (contents unset).
  QRows(int64_t m, int64_t k, bool is_unsigned);
  // Packs a (m x k, row stride lda) of int8 (src_signed) or uint8 values, shifted by 128 when
  // the signedness differs from is_unsigned. Rows are split across the pool.
  static QRows pack(const void* a, bool src_signed, int64_t m, int64_t k, int64_t lda,
                    bool is_unsigned, const ThreadPool* pool = nullptr);
  int64_t rows() const { return m_; }
  int64_t depth() const { return k_; }
  int64_t stride() const { return stride_; }
  bool is_unsigned() const { return unsigned_; }
  const uint8_t* row(int64_t i) const { return data_.get() + i * stride_; }
  uint8_t* row(int64_t i) { return data_.get() + i * stride_; }
  const int32_t* sums() const { return sums_.get(); }
  int32_t* sums() { return sums_.get(); }

 private:
  int64_t m_ = 0, k_ = 0, stride_ = 0;
  bool unsigned_ = false;
  std::shared_ptr<uint8_t[]> data_;
  std::shared_ptr<int32_t[]> sums_;
};

// Where and how C's rows [row0, row0 + m) and columns [0, n) are stored.
struct QStore {
  enum class Kind { Int32, UInt8, Int8, Float32 };
  Kind kind = Kind::Int32;
  void* c = nullptr;
  int64_t ldc = 0;  // elements between rows of C
  // UInt8/Int8: y = saturate(round_half_even(acc * scale) + zero_point); Float32: y = acc *
  // scale (+ fbias). scale has one value per row (per_row_scale) or per column.
  const float* scale = nullptr;
  bool per_row_scale = false;
  int32_t zero_point = 0;
  // Added to acc before the scale: int32 bias per row or per column (may be null).
  const int32_t* bias = nullptr;
  bool per_row_bias = false;
  const float* fbias = nullptr;  // Float32: one per column, added after the scale (may be null)
};

// The offset to subtract from stored bytes for a zero point: the zero point, plus 128 for an
// int8 operand stored as uint8, minus 128 for a uint8 one stored as int8.
inline int32_t stored_offset(int32_t zero_point, bool src_signed, bool stored_unsigned) {
  if (src_signed && stored_unsigned) return zero_point + 128;
  if (!src_signed && !stored_unsigned) return zero_point - 128;
  return zero_point;
}

// C = (rows - row_offsets) (panels - col_offsets) for rows [first_row, first_row + m) of `rows`
// (C's row i is rows' row first_row + i), stored per `store`. row_offsets has m values,
// col_offsets panels.cols() values, both stored_offset()s. rows and panels must differ in
// signedness. Tiles are split across the pool.
void qgemm(QIsa isa, const QRows& rows, int64_t first_row, int64_t m, const int32_t* row_offsets,
           const QPanels& panels, const int32_t* col_offsets, const QStore& store,
           const ThreadPool& pool);

// Stores accumulators acc[0..n) (final: offsets already applied) as row i, columns [0, n) of C
// per `store` (its bias added, then scaled / requantized), vectorised on the AVX512-VNNI path.
void qstore_row(QIsa isa, const QStore& store, int64_t i, const int32_t* acc, int64_t n);

}  // namespace quilt::cpu
