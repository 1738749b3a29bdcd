#include "backends/cpu/qgemm.hpp"

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include <cstdio>
#include <string>

#include "backends/cpu/aligned.hpp"
#include "backends/cpu/gcc12_avx512.hpp"
#include "quilt/quilt.hpp"

namespace quilt::cpu {
namespace {

constexpr int64_t kCols = QPanels::kCols;
constexpr int64_t kPanelsPerTile = 3;  // 48 columns: 8 rows x 3 vectors = 24 accumulators

QIsa best_isa() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    return QIsa::Avx512Vnni;
  if (__builtin_cpu_supports("avx2")) return QIsa::Avx2;
  return QIsa::Scalar;
}

// ---- the store, shared by every path ----

// acc (already corrected) of row i, column j.
inline void store_one(const QStore& s, int64_t i, int64_t j, int32_t acc) {
  if (s.bias)
    acc = static_cast<int32_t>(static_cast<uint32_t>(acc) +
                               static_cast<uint32_t>(s.bias[s.per_row_bias ? i : j]));
  const float scale = s.scale ? s.scale[s.per_row_scale ? i : j] : 1.0f;
  switch (s.kind) {
    case QStore::Kind::Int32:
      static_cast<int32_t*>(s.c)[i * s.ldc + j] = acc;
      return;
    case QStore::Kind::Float32: {
      float v = static_cast<float>(acc) * scale;
      if (s.fbias) v += s.fbias[j];
      static_cast<float*>(s.c)[i * s.ldc + j] = v;
      return;
    }
    case QStore::Kind::UInt8:
    case QStore::Kind::Int8: {
      const bool u8 = s.kind == QStore::Kind::UInt8;
      double v = std::nearbyint(static_cast<double>(acc) * static_cast<double>(scale)) +
                 static_cast<double>(s.zero_point);
      // NaN (a NaN or infinite scale: fuzz_run) saturates low, as the vector stores' max/min
      // give it; converting it to int was undefined behaviour.
      const double lo = u8 ? 0.0 : -128.0;
      v = std::isnan(v) ? lo : std::clamp(v, lo, u8 ? 255.0 : 127.0);
      const int32_t q = static_cast<int32_t>(v);
      if (u8)
        static_cast<uint8_t*>(s.c)[i * s.ldc + j] = static_cast<uint8_t>(q);
      else
        static_cast<int8_t*>(s.c)[i * s.ldc + j] = static_cast<int8_t>(q);
      return;
    }
  }
}

// The correction of the dot products of one row: acc - qo[j] * rs - ro * qsum[j].
struct RowFix {
  int32_t rs;  // rsum[i] - k * ro[i] (wrapping)
  int32_t ro;
};

__attribute__((always_inline)) inline RowFix row_fix(const QRows& rows, int64_t r, int32_t ro,
                                                     int64_t k) {
  const int64_t rs = static_cast<int64_t>(rows.sums()[r]) - k * static_cast<int64_t>(ro);
  return {static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(rs))), ro};
}

inline int32_t corrected(int32_t dot, const RowFix& f, int32_t qo, int32_t qsum) {
  const uint32_t v = static_cast<uint32_t>(dot) -
                     static_cast<uint32_t>(qo) * static_cast<uint32_t>(f.rs) -
                     static_cast<uint32_t>(f.ro) * static_cast<uint32_t>(qsum);
  return static_cast<int32_t>(v);
}

// Everything one tile needs.
struct Job {
  const QRows* rows;
  int64_t first_row;
  const int32_t* row_offsets;
  const QPanels* panels;
  const int32_t* col_offsets;
  const QStore* store;
  int64_t k4;
};

// ---- plain C++ ----

void tile_scalar(const Job& jb, int64_t i0, int64_t mr, int64_t p0, int64_t np) {
  const QPanels& pn = *jb.panels;
  const bool rows_u8 = jb.rows->is_unsigned();
  const int64_t n = pn.cols(), k = pn.depth();
  for (int64_t i = i0; i < i0 + mr; ++i) {
    const uint8_t* r = jb.rows->row(jb.first_row + i);
    const RowFix f = row_fix(*jb.rows, jb.first_row + i, jb.row_offsets[i], k);
    for (int64_t p = p0; p < p0 + np; ++p) {
      const uint8_t* panel = pn.data() + p * jb.k4 * kCols * 4;
      for (int64_t c = 0; c < kCols && p * kCols + c < n; ++c) {
        const int64_t j = p * kCols + c;
        uint32_t dot = 0;  // wraps as the vector paths do
        for (int64_t q = 0; q < jb.k4; ++q)
          for (int64_t b = 0; b < 4; ++b) {
            const uint8_t x = r[q * 4 + b], y = panel[(q * kCols + c) * 4 + b];
            const int32_t xv = rows_u8 ? int32_t{x} : int32_t{static_cast<int8_t>(x)};
            const int32_t yv = rows_u8 ? int32_t{static_cast<int8_t>(y)} : int32_t{y};
            dot += static_cast<uint32_t>(xv * yv);
          }
        store_one(*jb.store, i, j,
                  corrected(static_cast<int32_t>(dot), f, jb.col_offsets[j], pn.sums()[j]));
      }
    }
  }
}

// ---- AVX2: vpdpbusd emulated with vpmaddwd on 16-bit halves ----

// The even and odd bytes of each 16-bit pair widened to 16 bits, zero- or sign-extended.
template <bool kUnsigned>
__attribute__((target("avx2"))) inline void widen(__m256i v, __m256i& even, __m256i& odd) {
  if constexpr (kUnsigned) {
    even = _mm256_and_si256(v, _mm256_set1_epi16(0xff));
    odd = _mm256_srli_epi16(v, 8);
  } else {
    even = _mm256_srai_epi16(_mm256_slli_epi16(v, 8), 8);
    odd = _mm256_srai_epi16(v, 8);
  }
}

template <bool kRowsU8, int MR>
__attribute__((target("avx2"))) void tile_avx2(const Job& jb, int64_t i0, int64_t p) {
  const QPanels& pn = *jb.panels;
  const uint8_t* rp[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) rp[r] = jb.rows->row(jb.first_row + i0 + r);
  const uint8_t* panel = pn.data() + p * jb.k4 * kCols * 4;
  __m256i acc[MR][2];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t q = 0; q < jb.k4; ++q) {
    __m256i ve[2], vo[2];
#pragma GCC unroll 8
    for (int h = 0; h < 2; ++h)
      widen<!kRowsU8>(
          _mm256_load_si256(reinterpret_cast<const __m256i*>(panel + (q * kCols + h * 8) * 4)),
          ve[h], vo[h]);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      int32_t word;
      std::memcpy(&word, rp[r] + q * 4, 4);
      __m256i be, bo;
      widen<kRowsU8>(_mm256_set1_epi32(word), be, bo);
#pragma GCC unroll 8
      for (int h = 0; h < 2; ++h)
        acc[r][h] = _mm256_add_epi32(acc[r][h], _mm256_add_epi32(_mm256_madd_epi16(ve[h], be),
                                                                 _mm256_madd_epi16(vo[h], bo)));
    }
  }
  const int64_t n = pn.cols(), k = pn.depth();
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    const int64_t i = i0 + r;
    const RowFix f = row_fix(*jb.rows, jb.first_row + i, jb.row_offsets[i], k);
    alignas(32) int32_t dots[kCols];
    _mm256_store_si256(reinterpret_cast<__m256i*>(dots), acc[r][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(dots + 8), acc[r][1]);
    for (int64_t c = 0; c < kCols && p * kCols + c < n; ++c) {
      const int64_t j = p * kCols + c;
      store_one(*jb.store, i, j, corrected(dots[c], f, jb.col_offsets[j], pn.sums()[j]));
    }
  }
}

template <bool kRowsU8>
void rows_avx2(const Job& jb, int64_t i0, int64_t i1, int64_t p0, int64_t p1) {
  for (int64_t p = p0; p < p1; ++p) {
    int64_t i = i0;
    for (; i + 4 <= i1; i += 4) tile_avx2<kRowsU8, 4>(jb, i, p);
    for (; i + 2 <= i1; i += 2) tile_avx2<kRowsU8, 2>(jb, i, p);
    for (; i < i1; ++i) tile_avx2<kRowsU8, 1>(jb, i, p);
  }
}

// ---- AVX512-VNNI ----

QUILT_GCC12_AVX512_BEGIN  // backends/cpu/gcc12_avx512.hpp
#define QUILT_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

// 16 final accumulators (bias not yet added) of row i at columns j.., stored per s.
QUILT_VNNI inline void store_acc16(const QStore& s, int64_t i, int64_t j, __m512i acc,
                                   __mmask16 mask) {
  if (s.bias)
    acc = _mm512_add_epi32(acc, s.per_row_bias ? _mm512_set1_epi32(s.bias[i])
                                               : _mm512_maskz_loadu_epi32(mask, s.bias + j));
  switch (s.kind) {
    case QStore::Kind::Int32:
      _mm512_mask_storeu_epi32(static_cast<int32_t*>(s.c) + i * s.ldc + j, mask, acc);
      return;
    case QStore::Kind::Float32: {
      const __m512 sc =
          s.per_row_scale ? _mm512_set1_ps(s.scale[i]) : _mm512_maskz_loadu_ps(mask, s.scale + j);
      __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), sc);
      if (s.fbias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, s.fbias + j));
      _mm512_mask_storeu_ps(static_cast<float*>(s.c) + i * s.ldc + j, mask, v);
      return;
    }
    case QStore::Kind::UInt8:
    case QStore::Kind::Int8: {
      const bool u8 = s.kind == QStore::Kind::UInt8;
      __m512d slo, shi;
      if (s.per_row_scale) {
        slo = shi = _mm512_set1_pd(static_cast<double>(s.scale[i]));
      } else {
        const __m512 sc = _mm512_maskz_loadu_ps(mask, s.scale + j);
        slo = _mm512_cvtps_pd(_mm512_castps512_ps256(sc));
        shi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(sc, 1));
      }
      const __m512d zp = _mm512_set1_pd(s.zero_point);
      const __m512d lo = _mm512_set1_pd(u8 ? 0.0 : -128.0), hi = _mm512_set1_pd(u8 ? 255.0 : 127.0);
      auto requant = [&](__m256i a, __m512d sc) QUILT_VNNI {
        __m512d v = _mm512_mul_pd(_mm512_cvtepi32_pd(a), sc);
        v = _mm512_roundscale_pd(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        v = _mm512_min_pd(_mm512_max_pd(_mm512_add_pd(v, zp), lo), hi);
        return _mm512_cvtpd_epi32(v);
      };
      const __m512i q =
          _mm512_inserti64x4(_mm512_castsi256_si512(requant(_mm512_castsi512_si256(acc), slo)),
                             requant(_mm512_extracti64x4_epi64(acc, 1), shi), 1);
      _mm512_mask_cvtepi32_storeu_epi8(static_cast<uint8_t*>(s.c) + i * s.ldc + j, mask, q);
      return;
    }
  }
}

// The corrected accumulators of one row and 16 columns, stored per the job's store.
QUILT_VNNI inline void store16(const Job& jb, int64_t i, int64_t j, __m512i acc, const RowFix& f,
                               __mmask16 mask) {
  const __m512i qo = _mm512_maskz_loadu_epi32(mask, jb.col_offsets + j);
  const __m512i qs = _mm512_maskz_loadu_epi32(mask, jb.panels->sums() + j);
  acc = _mm512_sub_epi32(acc, _mm512_mullo_epi32(qo, _mm512_set1_epi32(f.rs)));
  acc = _mm512_sub_epi32(acc, _mm512_mullo_epi32(qs, _mm512_set1_epi32(f.ro)));
  store_acc16(*jb.store, i, j, acc, mask);
}

QUILT_VNNI void store_row_vnni(const QStore& s, int64_t i, const int32_t* acc, int64_t n) {
  for (int64_t j = 0; j < n; j += 16) {
    const auto mask = static_cast<__mmask16>(n - j >= 16 ? 0xFFFF : (1u << (n - j)) - 1);
    store_acc16(s, i, j, _mm512_maskz_loadu_epi32(mask, acc + j), mask);
  }
}

template <bool kRowsU8, int MR, int NP>
QUILT_VNNI void tile_vnni(const Job& jb, int64_t i0, int64_t p0) {
  const QPanels& pn = *jb.panels;
  const uint8_t* rp[MR];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) rp[r] = jb.rows->row(jb.first_row + i0 + r);
  const int64_t pstride = jb.k4 * kCols * 4;
  const uint8_t* panel = pn.data() + p0 * pstride;
  __m512i acc[MR][NP];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NP; ++v) acc[r][v] = _mm512_setzero_si512();
  for (int64_t q = 0; q < jb.k4; ++q) {
    __m512i b[NP];
#pragma GCC unroll 8
    for (int v = 0; v < NP; ++v)
      b[v] = _mm512_load_si512(reinterpret_cast<const void*>(panel + v * pstride + q * 64));
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      int32_t word;
      std::memcpy(&word, rp[r] + q * 4, 4);
      const __m512i a = _mm512_set1_epi32(word);
#pragma GCC unroll 8
      for (int v = 0; v < NP; ++v) {
        if constexpr (kRowsU8)
          acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], a, b[v]);
        else
          acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], b[v], a);
      }
    }
  }
  // The tile goes through memory (L1) to the store: with the store's code between them, GCC
  // kept the accumulators in memory in the loop above too.
  alignas(64) int32_t tile[MR][NP][kCols];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NP; ++v) _mm512_store_si512(tile[r][v], acc[r][v]);
  const int64_t n = pn.cols(), k = pn.depth();
  for (int r = 0; r < MR; ++r) {
    const int64_t i = i0 + r;
    const RowFix f = row_fix(*jb.rows, jb.first_row + i, jb.row_offsets[i], k);
    for (int v = 0; v < NP; ++v) {
      const int64_t j = (p0 + v) * kCols;
      const int64_t left = n - j;
      const __mmask16 mask =
          left >= kCols ? __mmask16(0xffff) : static_cast<__mmask16>((1u << left) - 1);
      store16(jb, i, j, _mm512_load_si512(tile[r][v]), f, mask);
    }
  }
}

template <bool kRowsU8, int MR>
void panels_vnni(const Job& jb, int64_t i, int64_t p, int64_t np) {
  if (np == 3) return tile_vnni<kRowsU8, MR, 3>(jb, i, p);
  if (np == 2) return tile_vnni<kRowsU8, MR, 2>(jb, i, p);
  tile_vnni<kRowsU8, MR, 1>(jb, i, p);
}

template <bool kRowsU8>
void rows_vnni(const Job& jb, int64_t i0, int64_t i1, int64_t p0, int64_t p1) {
  for (int64_t p = p0; p < p1; p += kPanelsPerTile) {
    const int64_t np = std::min(kPanelsPerTile, p1 - p);
    int64_t i = i0;
    for (; i + 8 <= i1; i += 8) panels_vnni<kRowsU8, 8>(jb, i, p, np);
    if (i + 4 <= i1) {
      panels_vnni<kRowsU8, 4>(jb, i, p, np);
      i += 4;
    }
    if (i + 2 <= i1) {
      panels_vnni<kRowsU8, 2>(jb, i, p, np);
      i += 2;
    }
    if (i < i1) panels_vnni<kRowsU8, 1>(jb, i, p, np);
  }
}

QUILT_GCC12_AVX512_END

// Rows [i0, i1) x panels [p0, p1) of C on `isa`.
void run_block(QIsa isa, const Job& jb, int64_t i0, int64_t i1, int64_t p0, int64_t p1) {
  const bool u8 = jb.rows->is_unsigned();
  switch (isa) {
    case QIsa::Avx512Vnni:
      return u8 ? rows_vnni<true>(jb, i0, i1, p0, p1) : rows_vnni<false>(jb, i0, i1, p0, p1);
    case QIsa::Avx2:
      return u8 ? rows_avx2<true>(jb, i0, i1, p0, p1) : rows_avx2<false>(jb, i0, i1, p0, p1);
    case QIsa::Scalar:
      return tile_scalar(jb, i0, i1 - i0, p0, p1 - p0);
  }
}

// Column sums of freshly packed panels, k x n.
void sum_panels(QPanels& p) {
  const int64_t k4 = p.depth4();
  for (int64_t j = 0; j < p.cols(); ++j) {
    const uint8_t* col = p.data() + (j / kCols) * k4 * kCols * 4 + (j % kCols) * 4;
    int32_t s = 0;
    for (int64_t q = 0; q < k4; ++q)
      for (int b = 0; b < 4; ++b) {
        const uint8_t v = col[q * kCols * 4 + b];
        s += p.is_unsigned() ? int32_t{v} : int32_t{static_cast<int8_t>(v)};
      }
    p.sums()[j] = s;
  }
}

}  // namespace

const char* qisa_name(QIsa isa) {
  switch (isa) {
    case QIsa::Avx512Vnni:
      return "avx512vnni";
    case QIsa::Avx2:
      return "avx2";
    case QIsa::Scalar:
      return "scalar";
  }
  return "?";
}

std::string qgemm_description() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  bool avx_vnni = false, amx_int8 = false;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) amx_int8 = (d >> 25) & 1;
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) avx_vnni = (a >> 4) & 1;
  auto yes = [](bool v) { return v ? "yes" : "no"; };
  return std::string(qisa_name(qgemm_isa())) + " (CPU: avx512-vnni " +
         yes(best_isa() == QIsa::Avx512Vnni) + ", avx-vnni " + yes(avx_vnni) + ", amx-int8 " +
         yes(amx_int8) + "; Quilt has no AVX-VNNI or AMX path)";
}

bool qisa_supported(QIsa isa) {
  return static_cast<int>(isa) <= static_cast<int>(best_isa());
}

QIsa qgemm_isa() {
  static const QIsa isa = [] {
    const QIsa best = best_isa();
    const char* env = std::getenv("QUILT_CPU_ISA");
    if (!env || !*env) return best;
    for (QIsa i : {QIsa::Scalar, QIsa::Avx2, QIsa::Avx512Vnni})
      if (std::string(env) == qisa_name(i)) {
        if (qisa_supported(i)) return i;
        std::fprintf(stderr, "quilt: QUILT_CPU_ISA=%s: this CPU lacks it; using %s\n", env,
                     qisa_name(best));
        return best;
      }
    std::fprintf(stderr,
                 "quilt: QUILT_CPU_ISA=%s is unknown (avx512vnni, avx2, scalar); using %s\n", env,
                 qisa_name(best));
    return best;
  }();
  return isa;
}

QPanels::QPanels(int64_t k, int64_t n, bool is_unsigned) : k_(k), n_(n), unsigned_(is_unsigned) {
  const int64_t np = (n + kCols - 1) / kCols;
  data_ = aligned_array<uint8_t>(np * depth4() * kCols * 4);
  sums_ = aligned_array<int32_t>(n);
}

QPanels QPanels::pack(const void* b, bool src_signed, int64_t k, int64_t n, int64_t ldb,
                      bool transposed, bool is_unsigned) {
  QPanels p(k, n, is_unsigned);
  const int64_t np = (n + kCols - 1) / kCols;
  std::memset(p.data(), 0, static_cast<size_t>(np * p.depth4() * kCols * 4));
  const uint8_t flip = src_signed == is_unsigned ? 0x80 : 0;
  const auto* src = static_cast<const uint8_t*>(b);
  for (int64_t r = 0; r < k; ++r)
    for (int64_t j = 0; j < n; ++j)
      p.data()[p.at(r, j)] = src[transposed ? j * ldb + r : r * ldb + j] ^ flip;
  sum_panels(p);
  return p;
}

QRows::QRows(int64_t m, int64_t k, bool is_unsigned)
    : m_(m), k_(k), stride_((k + 3) / 4 * 4), unsigned_(is_unsigned) {
  data_ = aligned_array<uint8_t>(m * stride_);
  sums_ = aligned_array<int32_t>(m);
}

QRows QRows::pack(const void* a, bool src_signed, int64_t m, int64_t k, int64_t lda,
                  bool is_unsigned, const ThreadPool* pool) {
  QRows r(m, k, is_unsigned);
  const uint8_t flip = src_signed == is_unsigned ? 0x80 : 0;
  const auto* src = static_cast<const uint8_t*>(a);
  auto rows = [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      uint8_t* dst = r.row(i);
      const uint8_t* s = src + i * lda;
      int32_t sum = 0;
      if (is_unsigned)
        for (int64_t p = 0; p < k; ++p) sum += dst[p] = s[p] ^ flip;
      else
        for (int64_t p = 0; p < k; ++p) sum += static_cast<int8_t>(dst[p] = s[p] ^ flip);
      std::memset(dst + k, 0, static_cast<size_t>(r.stride_ - k));
      r.sums()[i] = sum;
    }
  };
  if (pool)
    pool->parallel_for(m, std::max<int64_t>(1, 65536 / std::max<int64_t>(k, 1)), rows);
  else
    rows(0, m);
  return r;
}

void qgemm(QIsa isa, const QRows& rows, int64_t first_row, int64_t m, const int32_t* row_offsets,
           const QPanels& panels, const int32_t* col_offsets, const QStore& store,
           const ThreadPool& pool) {
  if (m == 0 || panels.cols() == 0) return;
  if (rows.is_unsigned() == panels.is_unsigned())
    throw Error(ErrorCode::Runtime, "qgemm: rows and panels have the same signedness");
  if (!qisa_supported(isa)) isa = best_isa();
  const Job jb{&rows, first_row, row_offsets, &panels, col_offsets, &store, panels.depth4()};
  const int64_t np = (panels.cols() + kCols - 1) / kCols;
  const int64_t col_blocks = (np + kPanelsPerTile - 1) / kPanelsPerTile;
  const int64_t row_tiles = (m + 7) / 8;
  const int64_t work = m * panels.cols() * std::max<int64_t>(panels.depth(), 1);
  if (pool.threads() == 1 || work < (1 << 17)) return run_block(isa, jb, 0, m, 0, np);
  // Tasks: column blocks of 48 outer, row chunks inner, so that a thread's consecutive tasks
  // read the same panels (kept in its L2).
  const int64_t want = 4 * static_cast<int64_t>(pool.threads());
  const int64_t row_chunks =
      std::clamp<int64_t>((want + col_blocks - 1) / col_blocks, 1, row_tiles);
  const int64_t rows_per_chunk = (row_tiles + row_chunks - 1) / row_chunks * 8;
  const int64_t chunks = (m + rows_per_chunk - 1) / rows_per_chunk;
  pool.for_each_task(col_blocks * chunks, [&](int64_t t) {
    const int64_t cb = t / chunks, rc = t % chunks;
    const int64_t i0 = rc * rows_per_chunk, i1 = std::min(m, i0 + rows_per_chunk);
    const int64_t p0 = cb * kPanelsPerTile, p1 = std::min(np, p0 + kPanelsPerTile);
    run_block(isa, jb, i0, i1, p0, p1);
  });
}

void qstore_row(QIsa isa, const QStore& store, int64_t i, const int32_t* acc, int64_t n) {
  if (isa == QIsa::Avx512Vnni && qisa_supported(isa)) return store_row_vnni(store, i, acc, n);
  for (int64_t j = 0; j < n; ++j) store_one(store, i, j, acc[j]);
}

}  // namespace quilt::cpu
