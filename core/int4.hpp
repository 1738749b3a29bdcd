// Elements of the packed types, as ONNX stores them: the 4-bit ones (DType::Int4, DType::UInt4,
// DType::Float4E2M1) two per byte, element i in the low nibble of byte i / 2 when i is even, the
// high one when odd; the 2-bit ones (DType::Int2, DType::UInt2) four per byte, element i in bits
// 2 * (i % 4) and up of byte i / 4.
#pragma once

#include <algorithm>
#include <cstdint>

#include "quilt/quilt.hpp"

namespace quilt {

// The code (raw bits) of element i of packed data with `bits` bits per element (2 or 4).
inline uint32_t packed_code(const uint8_t* data, int64_t i, int bits) {
  const int per_byte = 8 / bits;
  const int shift = static_cast<int>(i % per_byte) * bits;
  return (data[i / per_byte] >> shift) & ((1u << bits) - 1);
}

// Sets the code of element i (its low `bits` bits) without touching the other elements of its
// byte.
inline void packed_set(uint8_t* data, int64_t i, int bits, uint32_t code) {
  const int per_byte = 8 / bits;
  const int shift = static_cast<int>(i % per_byte) * bits;
  const uint32_t mask = (1u << bits) - 1;
  uint8_t& b = data[i / per_byte];
  b = static_cast<uint8_t>((b & ~(mask << shift)) | ((code & mask) << shift));
}

// Packs codes[0 .. n) (each's low `bits` bits) into out (dtype_nbytes bytes), the unused bits of
// the last byte zero.
inline void pack_codes(const uint8_t* codes, int64_t n, int bits, uint8_t* out, int64_t begin_byte,
                       int64_t end_byte) {
  const int per_byte = 8 / bits;
  const uint32_t mask = (1u << bits) - 1;
  for (int64_t k = begin_byte; k < end_byte; ++k) {
    uint32_t b = 0;
    for (int j = 0; j < per_byte; ++j) {
      const int64_t i = k * per_byte + j;
      if (i < n) b |= (codes[i] & mask) << (j * bits);
    }
    out[k] = static_cast<uint8_t>(b);
  }
}

// True for the packed integer types (int4, uint4, int2, uint2).
constexpr bool dtype_is_packed_int(DType d) {
  return dtype_is_packed(d) && d != DType::Float4E2M1;
}

// Element i of a packed integer tensor of dtype d, sign-extended for int4 and int2.
inline int32_t packed_int_get(const uint8_t* data, int64_t i, DType d) {
  const int bits = dtype_packed_bits(d);
  const auto code = static_cast<int32_t>(packed_code(data, i, bits));
  if (d == DType::UInt4 || d == DType::UInt2) return code;
  const int32_t sign = 1 << (bits - 1);
  return (code ^ sign) - sign;
}

// The range of a packed integer type: int4 [-8, 7], uint4 [0, 15], int2 [-2, 1], uint2 [0, 3].
inline int32_t packed_int_min(DType d) {
  return d == DType::Int4 ? -8 : d == DType::Int2 ? -2 : 0;
}
inline int32_t packed_int_max(DType d) {
  return d == DType::Int4 ? 7 : d == DType::UInt4 ? 15 : d == DType::Int2 ? 1 : 3;
}

// Element i of packed 4-bit data, sign-extended for int4.
inline int32_t int4_get(const uint8_t* data, int64_t i, bool is_signed) {
  const uint8_t nibble = (data[i >> 1] >> ((i & 1) * 4)) & 0xF;
  return is_signed ? (nibble ^ 8) - 8 : nibble;
}

// Sets element i (its low 4 bits) without touching the other nibble of its byte.
inline void int4_set(uint8_t* data, int64_t i, int32_t value) {
  const int shift = static_cast<int>(i & 1) * 4;
  uint8_t& b = data[i >> 1];
  b = static_cast<uint8_t>((b & ~(0xF << shift)) | ((value & 0xF) << shift));
}

// The range of int4 ([-8, 7]) or uint4 ([0, 15]).
inline int32_t int4_min(bool is_signed) {
  return is_signed ? -8 : 0;
}
inline int32_t int4_max(bool is_signed) {
  return is_signed ? 7 : 15;
}
inline int32_t int4_saturate(int64_t v, bool is_signed) {
  return static_cast<int32_t>(std::clamp<int64_t>(v, int4_min(is_signed), int4_max(is_signed)));
}

}  // namespace quilt
