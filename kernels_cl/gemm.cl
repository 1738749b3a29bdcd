// GEMM: C[b] = alpha * A[b] * B[b] + beta * bias, row-major, A is M x K (row stride lda), B is
// K x N packed in panels of 8 columns (pack_b): element (p, j) at B[(j / 8) * K * 8 + p * 8 + j % 8],
// so a work-item reads its K x 8 panel as one contiguous stream. Register-blocked: each work-item computes GEMM_TM rows x 8 columns
// (one float8 per row) with fma; no local memory and no barriers, which is what PoCL runs well.
// Work-items on the right or bottom edge take a guarded scalar path, so any size is exact.
//
// Batches: get_global_id(2) is the flat batch index over `bdims` (4 dims, leading ones 1); the
// batch strides of A and B (elements, 0 = broadcast) are per dim, C is contiguous per batch.
// The bias (Gemm's C) is read at bias[i * bias_rs + j * bias_cs]; strides 0 broadcast it.

#ifndef GEMM_TM
#define GEMM_TM 8
#endif

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
  const int col = get_global_id(0) * 8;
  const int row = get_global_id(1) * GEMM_TM;
  if (row >= M || col >= N) return;
  const int batch = get_global_id(2);
  A += batch_offset(batch, bdims, a_bstride);
  B += batch_offset(batch, bdims, b_bstride);
  C += (long)batch * M * N;

  if (row + GEMM_TM <= M && col + 8 <= N) {
    float8 acc[GEMM_TM];
    for (int r = 0; r < GEMM_TM; ++r) acc[r] = (float8)(0.0f);
    const global float* a = A + (long)row * lda;
    const global float* b = B + (long)col * K;
    int p = 0;
    for (; p + 4 <= K; p += 4) {
      float8 b0 = vload8(p, b);
      float8 b1 = vload8(p + 1, b);
      float8 b2 = vload8(p + 2, b);
      float8 b3 = vload8(p + 3, b);
#pragma unroll
      for (int r = 0; r < GEMM_TM; ++r) {
        float4 av = vload4(0, a + (long)r * lda + p);
        acc[r] = fma((float8)(av.x), b0, acc[r]);
        acc[r] = fma((float8)(av.y), b1, acc[r]);
        acc[r] = fma((float8)(av.z), b2, acc[r]);
        acc[r] = fma((float8)(av.w), b3, acc[r]);
      }
    }
    for (; p < K; ++p) {
      float8 bv = vload8(p, b);
#pragma unroll
      for (int r = 0; r < GEMM_TM; ++r) acc[r] = fma((float8)(a[(long)r * lda + p]), bv, acc[r]);
    }
#pragma unroll
    for (int r = 0; r < GEMM_TM; ++r) {
      float8 v = alpha * acc[r];
      if (use_bias) {
        float t[8];
        for (int c = 0; c < 8; ++c)
          t[c] = bias[(long)(row + r) * bias_rs + (long)(col + c) * bias_cs];
        v += beta * vload8(0, t);
      }
      vstore8(v, 0, C + (long)(row + r) * N + col);
    }
    return;
  }

  // Edge tile: rows [row, min(row + GEMM_TM, M)), columns [col, min(col + 8, N)).
  const int rows = min(GEMM_TM, M - row), cols = min(8, N - col);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      float acc = 0.0f;
      for (int p = 0; p < K; ++p)
        acc = fma(A[(long)(row + r) * lda + p], B[(long)col * K + p * 8 + c], acc);
      float v = alpha * acc;
      if (use_bias) v += beta * bias[(long)(row + r) * bias_rs + (long)(col + c) * bias_cs];
      C[(long)(row + r) * N + col + c] = v;
    }
}

// dst[b] (cols x rows) = transpose of src[b] (rows x cols); for Gemm's transA / transB.
kernel void transpose(global const float* src, global float* dst, int rows, int cols) {
  const int c = get_global_id(0), r = get_global_id(1);
  if (r >= rows || c >= cols) return;
  dst[(long)c * rows + r] = src[(long)r * cols + c];
}

// dst[b] = src[b] (contiguous K x N matrices) packed in panels of 8 columns for gemm,
// zero-padded to a multiple of 8 columns.
kernel void pack_b(global const float* src, global float* dst, int K, int N) {
  const int j = get_global_id(0), p = get_global_id(1), batch = get_global_id(2);
  const int padded = (N + 7) / 8 * 8;
  if (j >= padded || p >= K) return;
  src += (long)batch * K * N;
  dst += (long)batch * K * padded;
  dst[(long)(j / 8) * K * 8 + p * 8 + j % 8] = j < N ? src[(long)p * N + j] : 0.0f;
}
