// MaxPool / AveragePool (2-D NCHW) and the global pools (ops_pool.cpp): one output element per
// work-item; no local memory.
// g0 = (H, W, OH, OW, KH, KW, sh, sw), g1 = (dh, dw, ph, pw, peh, pew, average, count_mode):
// ph/pw lead pads, peh/pew trailing pads; count_mode 0 divides by the window's elements inside
// the input, 1 by those inside the padded input.

// Kernel offsets k in [0, K) whose position o * s - p + k * d lies in [lo, hi).
inline int pool_count(int o, int s, int p, int K, int d, int lo, int hi) {
  int n = 0;
  for (int k = 0; k < K; ++k) {
    const int i = o * s - p + k * d;
    n += i >= lo && i < hi;
  }
  return n;
}

kernel void pool2d(global const float* x, global float* y, int8 g0, int8 g1, int total) {
  const int H = g0.s0, W = g0.s1, OH = g0.s2, OW = g0.s3, KH = g0.s4, KW = g0.s5, sh = g0.s6,
            sw = g0.s7;
  const int dh = g1.s0, dw = g1.s1, ph = g1.s2, pw = g1.s3, peh = g1.s4, pew = g1.s5,
            average = g1.s6, count_mode = g1.s7;
  int id = get_global_id(0);
  if (id >= total) return;
  const int ow = id % OW;
  id /= OW;
  const int oh = id % OH;
  const int plane = id / OH;
  global const float* xp = x + (long)plane * H * W;
  const int h0 = oh * sh - ph, w0 = ow * sw - pw;
  float acc = average ? 0.0f : -FLT_MAX;
  for (int kh = 0; kh < KH; ++kh) {
    const int ih = h0 + kh * dh;
    if (ih < 0 || ih >= H) continue;
    for (int kw = 0; kw < KW; ++kw) {
      const int iw = w0 + kw * dw;
      if (iw < 0 || iw >= W) continue;
      const float v = xp[(long)ih * W + iw];
      acc = average ? acc + v : (acc < v ? v : acc);
    }
  }
  if (average) {
    const int lh = count_mode ? -ph : 0, lw = count_mode ? -pw : 0;
    const int hh = count_mode ? H + peh : H, hw = count_mode ? W + pew : W;
    const int count =
        pool_count(oh, sh, ph, KH, dh, lh, hh) * pool_count(ow, sw, pw, KW, dw, lw, hw);
    acc /= (float)count;
  }
  y[(long)plane * OH * OW + (long)oh * OW + ow] = acc;
}

// GlobalAveragePool / GlobalMaxPool: one work-item per (n, c) plane of `size` elements.
// One plane per work-item, 16 lanes at a time (a single serial chain was latency-bound: 2.9 ms
// for EfficientNet-B0's 17 squeeze-excite pools), then the lanes combined.
kernel void global_pool(global const float* x, global float* y, int planes, int size, int average) {
  const int id = get_global_id(0);
  if (id >= planes) return;
  global const float* xp = x + (long)id * size;
  const int vec = size / 16 * 16;
  float acc;
  if (average) {  // Kahan per lane: large planes stay accurate (the CPU sums in double)
    float16 sum = (float16)(0.0f), comp = (float16)(0.0f);
    for (int i = 0; i < vec; i += 16) {
      const float16 t = vload16(0, xp + i) - comp, s = sum + t;
      comp = (s - sum) - t;
      sum = s;
    }
    float lanes[16];
    vstore16(sum - comp, 0, lanes);
    acc = 0.0f;
    float c = 0.0f;
    for (int i = 0; i < 16 + size - vec; ++i) {
      const float t = (i < 16 ? lanes[i] : xp[vec + i - 16]) - c, s = acc + t;
      c = (s - acc) - t;
      acc = s;
    }
  } else {  // NaN wins, as on the CPU
    float16 m = (float16)(-FLT_MAX);
    int16 nan = (int16)(0);
    for (int i = 0; i < vec; i += 16) {
      const float16 v = vload16(0, xp + i);
      m = fmax(m, v);
      nan |= isnan(v);
    }
    acc = size ? xp[0] : -FLT_MAX;
    float lanes[16];
    vstore16(m, 0, lanes);
    for (int i = 0; i < 16 && vec > 0; ++i) acc = fmax(acc, lanes[i]);
    if (any(nan)) acc = NAN;
    for (int i = vec; i < size; ++i) {
      const float v = xp[i];
      if (v > acc || isnan(v)) acc = v;
    }
  }
  y[id] = average ? acc / (float)size : acc;
}
