// GEMM: C[b] = alpha * A[b] * B[b] + beta * bias, row-major, A is M x K (row stride lda), B is
// K x N packed in panels of GEMM_TN columns (pack_b, or the host for constants): element (p, j)
// at B[(j / TN) * K * TN + p * TN + j % TN], so a work-item streams its K x TN panel. Register-
// blocked: each work-item computes GEMM_TM rows x GEMM_TN columns (one vector per row) with fma;
// no local memory and no barriers, which is what PoCL runs well. The host (ops_gemm.cpp) uses
// the same tile sizes.
// Any M, N, K: see the edge handling in gemm.
//
// Batches: get_global_id(2) is the flat batch index over `bdims` (4 dims, leading ones 1); the
// batch strides of A and B (elements, 0 = broadcast) are per dim, C is contiguous per batch.
// The bias (Gemm's C) is read at bias[i * bias_rs + j * bias_cs]; strides 0 broadcast it.

#ifndef GEMM_TM
#define GEMM_TM 8
#endif
#ifndef GEMM_TN
#define GEMM_TN 16
#endif
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define floatN CAT(float, GEMM_TN)
#define vloadN CAT(vload, GEMM_TN)
#define vstoreN CAT(vstore, GEMM_TN)

inline int batch_offset(int b, int4 dims, int4 strides) {
  int off = 0;
  int q = b / dims.w;
  off += (b - q * dims.w) * strides.w;
  b = q;
  q = b / dims.z;
  off += (b - q * dims.z) * strides.z;
  b = q;
  q = b / dims.y;
  off += (b - q * dims.y) * strides.y;
  b = q;
  off += b * strides.x;
  return off;
}

kernel void gemm(int M, int N, int K, global const float* A, int lda, global const float* B,
                 global float* C, float alpha, float beta, global const float* bias,
                 int bias_rs, int bias_cs, int use_bias, int4 bdims, int4 a_bstride,
                 int4 b_bstride) {
  const int col = get_global_id(0) * GEMM_TN;
  const int row = get_global_id(1) * GEMM_TM;
  if (row >= M || col >= N) return;
  const int batch = get_global_id(2);
  A += batch_offset(batch, bdims, a_bstride);
  B += batch_offset(batch, bdims, b_bstride);
  C += (long)batch * M * N;

  // Rows past M (bottom edge) read row M - 1 again and are not stored; columns past N (right
  // edge) read the zeros pack_b pads B with and are not stored. So every tile takes the vector
  // path: a scalar edge path made a 197-row GEMM (ViT, BERT) up to twice as slow.
  const int rows = min(GEMM_TM, M - row), cols = min(GEMM_TN, N - col);
  floatN acc[GEMM_TM];
  const global float* ar[GEMM_TM];
#pragma unroll
  for (int r = 0; r < GEMM_TM; ++r) {
    acc[r] = (floatN)(0.0f);
    ar[r] = A + (long)(row + min(r, rows - 1)) * lda;
  }
  const global float* b = B + (long)col * K;
  int p = 0;
  for (; p + 4 <= K; p += 4) {
    floatN b0 = vloadN(p, b);
    floatN b1 = vloadN(p + 1, b);
    floatN b2 = vloadN(p + 2, b);
    floatN b3 = vloadN(p + 3, b);
#pragma unroll
    for (int r = 0; r < GEMM_TM; ++r) {
      float4 av = vload4(0, ar[r] + p);
      acc[r] = fma((floatN)(av.x), b0, acc[r]);
      acc[r] = fma((floatN)(av.y), b1, acc[r]);
      acc[r] = fma((floatN)(av.z), b2, acc[r]);
      acc[r] = fma((floatN)(av.w), b3, acc[r]);
    }
  }
  for (; p < K; ++p) {
    floatN bv = vloadN(p, b);
#pragma unroll
    for (int r = 0; r < GEMM_TM; ++r) acc[r] = fma((floatN)(ar[r][p]), bv, acc[r]);
  }
#pragma unroll
  for (int r = 0; r < GEMM_TM; ++r) {
    if (r >= rows) break;
    floatN v = alpha * acc[r];
    global float* c = C + (long)(row + r) * N + col;
    if (cols == GEMM_TN) {
      if (use_bias) {
        float t[GEMM_TN];
        for (int j = 0; j < GEMM_TN; ++j)
          t[j] = bias[(long)(row + r) * bias_rs + (long)(col + j) * bias_cs];
        v += beta * vloadN(0, t);
      }
      vstoreN(v, 0, c);
    } else {
      float t[GEMM_TN];
      vstoreN(v, 0, t);
      for (int j = 0; j < cols; ++j)
        c[j] = use_bias ? t[j] + beta * bias[(long)(row + r) * bias_rs + (long)(col + j) * bias_cs]
                        : t[j];
    }
  }
}

// dst[b] (cols x rows) = transpose of src[b] (rows x cols); for Gemm's transA / transB.
kernel void transpose(global const float* src, global float* dst, int rows, int cols) {
  const int c = get_global_id(0), r = get_global_id(1);
  if (r >= rows || c >= cols) return;
  dst[(long)c * rows + r] = src[(long)r * cols + c];
}

// dst[b] = src[b] (contiguous K x N matrices) packed in panels of GEMM_TN columns for gemm,
// zero-padded to a multiple of GEMM_TN columns. One work-item per panel row (GEMM_TN values).
kernel void pack_b(global const float* src, global float* dst, int K, int N) {
  const int panel = get_global_id(0), p = get_global_id(1), batch = get_global_id(2);
  const int j = panel * GEMM_TN;
  if (j >= N || p >= K) return;
  src += (long)batch * K * N + (long)p * N + j;
  dst += (long)batch * K * ((N + GEMM_TN - 1) / GEMM_TN * GEMM_TN) + (long)panel * K * GEMM_TN +
         (long)p * GEMM_TN;
  if (j + GEMM_TN <= N) {
    vstoreN(vloadN(0, src), 0, dst);
    return;
  }
  for (int c = 0; c < GEMM_TN; ++c) dst[c] = j + c < N ? src[c] : 0.0f;
}

// C (M x N) = the bias broadcast (read at bias[i * rs + j * cs]), for an engine that then adds
// beta * C in place (CLBlast).
kernel void fill_bias(global float* C, global const float* bias, int M, int N, int rs, int cs) {
  const int j = get_global_id(0), i = get_global_id(1);
  if (i >= M || j >= N) return;
  C[(long)i * N + j] = bias[(long)i * rs + (long)j * cs];
}
