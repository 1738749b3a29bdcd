// Conv and ConvTranspose, 2-D NCHW (ops_conv.cpp). No local memory and no barriers: each
// work-item keeps its outputs in registers and accumulates with fma.
//
// Weights of conv_direct and conv1x1 are packed (by the host at compile) in blocks of CONV_OCB
// output channels, channels innermost: element (g, m, c, kh, kw) at
//   w[((((g * MB + m / OCB) * KH + kh) * KW + kw) * Cg + c) * OCB + m % OCB]
// (zeros past the group's last channel), so one vector load gives OCB channels' weights.
// Geometry arguments: g0 = (C, H, W, M, OH, OW, KH, KW), g1 = (sh, sw, dh, dw, ph, pw, G, Cg).

#define CONV_OCB 32
#define CONV_PX 8

// Accumulators of CONV_PX pixels x CONV_OCB channels: a0..a7 are pixels' channels 0..15, b0..b7
// their channels 16..31, each a float16.
#define CONV_ACC_INIT(lo, hi)                                                     \
  float16 a0 = lo, a1 = lo, a2 = lo, a3 = lo, a4 = lo, a5 = lo, a6 = lo, a7 = lo; \
  float16 b0 = hi, b1 = hi, b2 = hi, b3 = hi, b4 = hi, b5 = hi, b6 = hi, b7 = hi;
#define CONV_ACCS a0, a1, a2, a3, a4, a5, a6, a7, b0, b1, b2, b3, b4, b5, b6, b7
// xv: the 8 pixels' inputs; wp: the CONV_OCB channels' weights.
#define CONV_FMA8(xv, wp)                                   \
  {                                                         \
    const float16 w0 = vload16(0, wp), w1 = vload16(1, wp); \
    float16 v = (float16)((xv).s0);                         \
    a0 = fma(v, w0, a0);                                    \
    b0 = fma(v, w1, b0);                                    \
    v = (float16)((xv).s1);                                 \
    a1 = fma(v, w0, a1);                                    \
    b1 = fma(v, w1, b1);                                    \
    v = (float16)((xv).s2);                                 \
    a2 = fma(v, w0, a2);                                    \
    b2 = fma(v, w1, b2);                                    \
    v = (float16)((xv).s3);                                 \
    a3 = fma(v, w0, a3);                                    \
    b3 = fma(v, w1, b3);                                    \
    v = (float16)((xv).s4);                                 \
    a4 = fma(v, w0, a4);                                    \
    b4 = fma(v, w1, b4);                                    \
    v = (float16)((xv).s5);                                 \
    a5 = fma(v, w0, a5);                                    \
    b5 = fma(v, w1, b5);                                    \
    v = (float16)((xv).s6);                                 \
    a6 = fma(v, w0, a6);                                    \
    b6 = fma(v, w1, b6);                                    \
    v = (float16)((xv).s7);                                 \
    a7 = fma(v, w0, a7);                                    \
    b7 = fma(v, w1, b7);                                    \
  }

// The bias of 16 channels from m0 (count of them exist).
inline float16 conv_bias(global const float* bias, int has_bias, int m0, int count) {
  float b[16];
  for (int j = 0; j < 16; ++j) b[j] = has_bias && j < count ? bias[m0 + j] : 0.0f;
  return vload16(0, b);
}

// A fused activation (the host folds a Conv's only reader into it): act.x is the kind, act.y
// and act.z its parameters. 0 none, 1 Relu, 2 LeakyRelu(alpha), 3 Clip(min, max),
// 4 HardSigmoid(alpha, beta), 5 HardSwish, 6 Sigmoid, 7 Swish(alpha) (x * Sigmoid(alpha x): SiLU
// for alpha 1); the formulas of elementwise.cl's kernels,
// on whole vectors (one scalar call per value made the convs slower than the separate kernels).
#define CONV_ACT(T, NAME)                                                                  \
  inline T NAME(T v, float4 act) {                                                         \
    const int kind = (int)act.x;                                                           \
    if (kind == 1) return select(v, (T)(0.0f), v < (T)(0.0f));                            \
    if (kind == 2) return select(act.y * v, v, v >= (T)(0.0f));                           \
    if (kind == 3) return select(fmin(fmax(v, (T)(act.y)), (T)(act.z)), v, isnan(v));     \
    if (kind == 4) {                                                                       \
      const T h = act.y * v + act.z;                                                       \
      return select(fmin(fmax(h, (T)(0.0f)), (T)(1.0f)), h, isnan(h));                     \
    }                                                                                      \
    if (kind == 5) {                                                                       \
      const T h = v / (T)(6.0f) + (T)(0.5f);                                               \
      return v * select(fmin(fmax(h, (T)(0.0f)), (T)(1.0f)), h, isnan(h));                 \
    }                                                                                      \
    if (kind == 6 || kind == 7) {                                                          \
      const T z = kind == 7 ? act.y * v : v;                                               \
      const T e = exp(-fabs(z)), r = (T)(1.0f) / ((T)(1.0f) + e);                          \
      const T sigmoid = select(e * r, r, z >= (T)(0.0f));                                  \
      return kind == 6 ? sigmoid : v * sigmoid;                                            \
    }                                                                                      \
    return v;                                                                              \
  }
CONV_ACT(float16, conv_act16)
CONV_ACT(float8, conv_act8)

// Writes the tile: pixel p of channel j goes to out[j * cstride + p * pstride], for j < mcount,
// p < pcount, through the fused activation.
inline void conv_store(global float* out, long cstride, int pstride, int mcount, int pcount,
                       float4 act, float16 a0, float16 a1, float16 a2, float16 a3, float16 a4, float16 a5,
                       float16 a6, float16 a7, float16 b0, float16 b1, float16 b2, float16 b3,
                       float16 b4, float16 b5, float16 b6, float16 b7) {
  if (act.x != 0.0f) {
    a0 = conv_act16(a0, act), a1 = conv_act16(a1, act), a2 = conv_act16(a2, act);
    a3 = conv_act16(a3, act), a4 = conv_act16(a4, act), a5 = conv_act16(a5, act);
    a6 = conv_act16(a6, act), a7 = conv_act16(a7, act), b0 = conv_act16(b0, act);
    b1 = conv_act16(b1, act), b2 = conv_act16(b2, act), b3 = conv_act16(b3, act);
    b4 = conv_act16(b4, act), b5 = conv_act16(b5, act), b6 = conv_act16(b6, act);
    b7 = conv_act16(b7, act);
  }
  float t[CONV_PX * CONV_OCB];  // pixel p, channel j at t[p * CONV_OCB + j]
  vstore16(a0, 0, t);
  vstore16(b0, 1, t);
  vstore16(a1, 2, t);
  vstore16(b1, 3, t);
  vstore16(a2, 4, t);
  vstore16(b2, 5, t);
  vstore16(a3, 6, t);
  vstore16(b3, 7, t);
  vstore16(a4, 8, t);
  vstore16(b4, 9, t);
  vstore16(a5, 10, t);
  vstore16(b5, 11, t);
  vstore16(a6, 12, t);
  vstore16(b6, 13, t);
  vstore16(a7, 14, t);
  vstore16(b7, 15, t);
  for (int j = 0; j < mcount; ++j) {
    global float* o = out + j * cstride;
    if (pcount == CONV_PX && pstride == 1) {
      vstore8((float8)(t[j], t[CONV_OCB + j], t[2 * CONV_OCB + j], t[3 * CONV_OCB + j],
                       t[4 * CONV_OCB + j], t[5 * CONV_OCB + j], t[6 * CONV_OCB + j],
                       t[7 * CONV_OCB + j]),
              0, o);
    } else {
      for (int p = 0; p < pcount; ++p) o[p * pstride] = t[p * CONV_OCB + j];
    }
  }
}

// Direct convolution: a work-item computes CONV_OCB output channels of one group x CONV_PX
// neighbouring output pixels of one row. g2 = (Mg, MB, OWB, N).
kernel void conv_direct(global const float* x, global const float* w, global const float* bias,
                        int has_bias, global float* y, int8 g0, int8 g1, int4 g2, float4 act) {
  const int C = g0.s0, H = g0.s1, W = g0.s2, M = g0.s3, OH = g0.s4, OW = g0.s5, KH = g0.s6,
            KW = g0.s7;
  const int sh = g1.s0, sw = g1.s1, dh = g1.s2, dw = g1.s3, ph = g1.s4, pw = g1.s5, G = g1.s6,
            Cg = g1.s7;
  const int Mg = g2.s0, MB = g2.s1, OWB = g2.s2, N = g2.s3;
  // Channel blocks vary fastest: neighbouring work-items read the same input pixels.
  int id = get_global_id(0);
  const int mb = id % MB;
  id /= MB;
  const int owb = id % OWB;
  id /= OWB;
  const int oh = id % OH;
  id /= OH;
  const int grp = id % G;
  const int n = id / G;
  if (n >= N) return;
  const int ow0 = owb * CONV_PX;
  const int m0 = mb * CONV_OCB;
  const int mcount = min(CONV_OCB, Mg - m0);
  CONV_ACC_INIT(conv_bias(bias, has_bias, grp * Mg + m0, mcount),
                conv_bias(bias, has_bias, grp * Mg + m0 + 16, mcount - 16))
  const long HW = (long)H * W;
  global const float* xg = x + ((long)n * C + (long)grp * Cg) * HW;
  global const float* wg = w + ((long)(grp * MB + mb) * KH * KW) * Cg * CONV_OCB;
  const int iw_base = ow0 * sw - pw;
  // Channels innermost: each (kh, kw) decides once whether its 8 pixels are inside the row,
  // then streams the channels without branches.
  for (int kh = 0; kh < KH; ++kh) {
    const int ih = oh * sh - ph + kh * dh;
    if (ih < 0 || ih >= H) continue;
    global const float* row = xg + (long)ih * W;
    for (int kw = 0; kw < KW; ++kw) {
      const int iw0 = iw_base + kw * dw;
      global const float* wk = wg + (long)(kh * KW + kw) * Cg * CONV_OCB;
      if (iw0 >= 0 && iw0 + (CONV_PX - 1) * sw < W) {
        global const float* xr = row + iw0;
        if (sw == 1) {
          for (int c = 0; c < Cg; ++c) {
            const float8 xv = vload8(0, xr + c * HW);
            CONV_FMA8(xv, wk + c * CONV_OCB)
          }
        } else {
          for (int c = 0; c < Cg; ++c) {
            global const float* r = xr + c * HW;
            const float8 xv = (float8)(r[0], r[sw], r[2 * sw], r[3 * sw], r[4 * sw], r[5 * sw],
                                       r[6 * sw], r[7 * sw]);
            CONV_FMA8(xv, wk + c * CONV_OCB)
          }
        }
      } else {
        int cols[CONV_PX];
        for (int p = 0; p < CONV_PX; ++p) {
          const int iw = iw0 + p * sw;
          cols[p] = iw >= 0 && iw < W ? iw : -1;
        }
        for (int c = 0; c < Cg; ++c) {
          global const float* r = row + c * HW;
          float t[CONV_PX];
          for (int p = 0; p < CONV_PX; ++p) t[p] = cols[p] >= 0 ? r[cols[p]] : 0.0f;
          const float8 xv = vload8(0, t);
          CONV_FMA8(xv, wk + c * CONV_OCB)
        }
      }
    }
  }
  const long plane = (long)OH * OW;
  global float* out = y + ((long)n * M + grp * Mg + m0) * plane + (long)oh * OW + ow0;
  conv_store(out, plane, 1, mcount, min(CONV_PX, OW - ow0), act, CONV_ACCS);
}

// 1x1, stride 1, no padding, one group: a GEMM over the flattened pixels P = H * W,
// Y[n][m][p] = bias[m] + sum_c W[m][c] X[n][c][p]; CONV_OCB channels x CONV_PX pixels each.
kernel void conv1x1(global const float* x, global const float* w, global const float* bias,
                    int has_bias, global float* y, int C, int M, int P, int MB, int N,
                    float4 act) {
  const int PB = (P + CONV_PX - 1) / CONV_PX;
  int id = get_global_id(0);
  const int mb = id % MB;
  id /= MB;
  const int pb = id % PB;
  const int n = id / PB;
  if (n >= N) return;
  const int p0 = pb * CONV_PX, m0 = mb * CONV_OCB;
  const int mcount = min(CONV_OCB, M - m0), pcount = min(CONV_PX, P - p0);
  CONV_ACC_INIT(conv_bias(bias, has_bias, m0, mcount),
                conv_bias(bias, has_bias, m0 + 16, mcount - 16))
  global const float* xp = x + (long)n * C * P + p0;
  global const float* wp = w + (long)mb * C * CONV_OCB;
  if (pcount == CONV_PX) {
    for (int c = 0; c < C; ++c) {
      const float8 xv = vload8(0, xp + (long)c * P);
      CONV_FMA8(xv, wp + c * CONV_OCB)
    }
  } else {
    for (int c = 0; c < C; ++c) {
      float t[CONV_PX];
      for (int p = 0; p < CONV_PX; ++p) t[p] = p < pcount ? xp[(long)c * P + p] : 0.0f;
      const float8 xv = vload8(0, t);
      CONV_FMA8(xv, wp + c * CONV_OCB)
    }
  }
  conv_store(y + ((long)n * M + m0) * P + p0, P, 1, mcount, pcount, act, CONV_ACCS);
}

// Depthwise (C == M == groups): one channel x CONV_PX pixels of a row per work-item, weights in
// the ONNX layout [C, 1, KH, KW]. g2 = (OWB, N).
kernel void conv_depthwise(global const float* x, global const float* w, global const float* bias,
                           int has_bias, global float* y, int8 g0, int8 g1, int2 g2, float4 act) {
  const int C = g0.s0, H = g0.s1, W = g0.s2, OH = g0.s4, OW = g0.s5, KH = g0.s6, KW = g0.s7;
  const int sh = g1.s0, sw = g1.s1, dh = g1.s2, dw = g1.s3, ph = g1.s4, pw = g1.s5;
  const int OWB = g2.s0, N = g2.s1;
  int id = get_global_id(0);
  const int owb = id % OWB;
  id /= OWB;
  const int oh = id % OH;
  id /= OH;
  const int c = id % C;
  const int n = id / C;
  if (n >= N) return;
  const int ow0 = owb * CONV_PX;
  float8 acc = (float8)(has_bias ? bias[c] : 0.0f);
  global const float* xc = x + ((long)n * C + c) * H * W;
  global const float* wc = w + (long)c * KH * KW;
  const int iw_base = ow0 * sw - pw;
  // Strided: the input columns this work-item reads in a row, copied once per kernel row into
  // private memory (zeros for padding), so no tap gathers with bounds tests (MobileNetV3's four
  // stride-2 depthwise convs 1.46 -> 0.90 ms). Stride 1 measured slower this way on PoCL
  // (2.45 -> 2.96 ms): it keeps the per-tap loads below.
  const int span = (CONV_PX - 1) * sw + (KW - 1) * dw + 1;
  const bool buffered = sw > 1 && span <= 64;
  if (buffered) {
    float buf[64];
    for (int kh = 0; kh < KH; ++kh) {
      const int ih = oh * sh - ph + kh * dh;
      if (ih < 0 || ih >= H) continue;
      global const float* row = xc + (long)ih * W;
      if (iw_base >= 0 && iw_base + span <= W) {
        for (int i = 0; i < span; ++i) buf[i] = row[iw_base + i];
      } else {
        for (int i = 0; i < span; ++i) {
          const int iw = iw_base + i;
          buf[i] = iw >= 0 && iw < W ? row[iw] : 0.0f;
        }
      }
      for (int kw = 0; kw < KW; ++kw) {
        const float wv = wc[kh * KW + kw];
        const int o = kw * dw;
        const float8 xv = sw == 1 ? vload8(0, buf + o)
                                  : (float8)(buf[o], buf[o + sw], buf[o + 2 * sw], buf[o + 3 * sw],
                                             buf[o + 4 * sw], buf[o + 5 * sw], buf[o + 6 * sw],
                                             buf[o + 7 * sw]);
        acc = fma((float8)wv, xv, acc);
      }
    }
  }
  for (int kh = 0; kh < KH && !buffered; ++kh) {
    const int ih = oh * sh - ph + kh * dh;
    if (ih < 0 || ih >= H) continue;
    global const float* row = xc + (long)ih * W;
    for (int kw = 0; kw < KW; ++kw) {
      const float wv = wc[kh * KW + kw];
      const int iw0 = iw_base + kw * dw;
      float8 xv;
      if (iw0 >= 0 && iw0 + (CONV_PX - 1) * sw < W) {
        if (sw == 1)
          xv = vload8(0, row + iw0);
        else
          xv = (float8)(row[iw0], row[iw0 + sw], row[iw0 + 2 * sw], row[iw0 + 3 * sw],
                        row[iw0 + 4 * sw], row[iw0 + 5 * sw], row[iw0 + 6 * sw], row[iw0 + 7 * sw]);
      } else {
        float t[CONV_PX];
        for (int p = 0; p < CONV_PX; ++p) {
          const int iw = iw0 + p * sw;
          t[p] = iw >= 0 && iw < W ? row[iw] : 0.0f;
        }
        xv = vload8(0, t);
      }
      acc = fma((float8)wv, xv, acc);
    }
  }
  global float* out = y + ((long)n * C + c) * OH * OW + (long)oh * OW + ow0;
  const int pcount = min(CONV_PX, OW - ow0);
  if (act.x != 0.0f) acc = conv_act8(acc, act);
  if (pcount == CONV_PX) {
    vstore8(acc, 0, out);
  } else {
    float t[CONV_PX];
    vstore8(acc, 0, t);
    for (int p = 0; p < pcount; ++p) out[p] = t[p];
  }
}

// ConvTranspose: a work-item computes CONV_OCB output channels of one group x CONV_PX output
// pixels of a row that are sw apart (ow = r + (b * CONV_PX + p) * sw), so for each kernel
// column they read CONV_PX neighbouring input pixels. Weights packed as conv_direct's
// (element (g, m, c, kh, kw) of the [C, M / G, KH, KW] tensor). g2 = (Mg, MB, OWB, N); OWB
// blocks per residue r.
kernel void conv_transpose(global const float* x, global const float* w, global const float* bias,
                           int has_bias, global float* y, int8 g0, int8 g1, int4 g2, float4 act) {
  const int C = g0.s0, H = g0.s1, W = g0.s2, M = g0.s3, OH = g0.s4, OW = g0.s5, KH = g0.s6,
            KW = g0.s7;
  const int sh = g1.s0, sw = g1.s1, dh = g1.s2, dw = g1.s3, ph = g1.s4, pw = g1.s5, G = g1.s6,
            Cg = g1.s7;
  const int Mg = g2.s0, MB = g2.s1, OWB = g2.s2, N = g2.s3;
  int id = get_global_id(0);
  const int mb = id % MB;
  id /= MB;
  const int b = id % OWB;
  id /= OWB;
  const int r = id % sw;
  id /= sw;
  const int oh = id % OH;
  id /= OH;
  const int grp = id % G;
  const int n = id / G;
  if (n >= N) return;
  const int ow0 = r + b * CONV_PX * sw;
  if (ow0 >= OW) return;
  const int pcount = min(CONV_PX, (OW - ow0 + sw - 1) / sw);
  const int m0 = mb * CONV_OCB;
  const int mcount = min(CONV_OCB, Mg - m0);
  CONV_ACC_INIT(conv_bias(bias, has_bias, grp * Mg + m0, mcount),
                conv_bias(bias, has_bias, grp * Mg + m0 + 16, mcount - 16))
  const long HW = (long)H * W;
  global const float* xg = x + ((long)n * C + (long)grp * Cg) * HW;
  global const float* wg = w + ((long)(grp * MB + mb) * KH * KW) * Cg * CONV_OCB;
  for (int kh = 0; kh < KH; ++kh) {
    const int th = oh + ph - kh * dh;
    if (th < 0 || th % sh != 0) continue;
    const int ih = th / sh;
    if (ih >= H) continue;
    global const float* row = xg + (long)ih * W;
    for (int kw = 0; kw < KW; ++kw) {
      const int tw = ow0 + pw - kw * dw;
      if (tw % sw != 0) continue;
      const int iw0 = tw / sw;  // pixel p reads iw0 + p
      global const float* wk = wg + (long)(kh * KW + kw) * Cg * CONV_OCB;
      if (iw0 >= 0 && iw0 + CONV_PX - 1 < W) {
        for (int c = 0; c < Cg; ++c) {
          const float8 xv = vload8(0, row + c * HW + iw0);
          CONV_FMA8(xv, wk + c * CONV_OCB)
        }
      } else {
        for (int c = 0; c < Cg; ++c) {
          global const float* rc = row + c * HW;
          float t[CONV_PX];
          for (int p = 0; p < CONV_PX; ++p) {
            const int iw = iw0 + p;
            t[p] = iw >= 0 && iw < W ? rc[iw] : 0.0f;
          }
          const float8 xv = vload8(0, t);
          CONV_FMA8(xv, wk + c * CONV_OCB)
        }
      }
    }
  }
  const long plane = (long)OH * OW;
  global float* out = y + ((long)n * M + grp * Mg + m0) * plane + (long)oh * OW + ow0;
  conv_store(out, plane, sw, mcount, pcount, act, CONV_ACCS);
}

// Packs weights computed at run time into the conv_direct layout (the host packs constant ones
// at compile): one packed element per work-item, zeros past the group's last channel.
// geo = (G, MB, Mg, Cg, KK, transpose: the weights are ConvTranspose's [C, M / G, KH, KW]).
kernel void conv_pack(global const float* w, global float* packed, int total, int8 geo) {
  int e = get_global_id(0);
  if (e >= total) return;
  const int MB = geo.s1, Mg = geo.s2, Cg = geo.s3, KK = geo.s4, transpose = geo.s5;
  const int out = e;
  const int jj = e % CONV_OCB;
  e /= CONV_OCB;
  const int c = e % Cg;
  e /= Cg;
  const int k = e % KK;
  e /= KK;
  const int mb = e % MB;
  const int g = e / MB;
  const int j = mb * CONV_OCB + jj;
  float v = 0.0f;
  if (j < Mg)
    v = transpose ? w[(((long)g * Cg + c) * Mg + j) * KK + k]
                  : w[(((long)g * Mg + j) * Cg + c) * KK + k];
  packed[out] = v;
}
