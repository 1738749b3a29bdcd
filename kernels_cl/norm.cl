// BatchNormalization (inference, folded to y = x * a[c] + b[c]), InstanceNormalization,
// LayerNormalization and RMSNormalization (ops_norm.cpp). Statistics: one work-item per
// normalised row or plane, two passes (mean, then the variance of x - mean); no local memory.

// ab holds a[0..C) then b[0..C); channel of flat element i is (i / inner) % C.
kernel void batchnorm(global const float* x, global const float* ab, global float* y, int C,
                      int inner, int total) {
  const int i = get_global_id(0);
  if (i >= total) return;
  const int c = (i / inner) % C;
  y[i] = fma(x[i], ab[c], ab[C + c]);
}

// Mean and 1 / sqrt(var + eps) of n elements; Kahan-compensated sums, so long rows and large
// planes stay accurate (the CPU accumulates in double).
inline float2 moments(global const float* x, int n, float eps) {
  float sum = 0.0f, c = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float t = x[i] - c, s = sum + t;
    c = (s - sum) - t;
    sum = s;
  }
  const float mean = sum / (float)n;
  float sq = 0.0f;
  c = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float d = x[i] - mean;
    const float t = d * d - c, s = sq + t;
    c = (s - sq) - t;
    sq = s;
  }
  return (float2)(mean, rsqrt(sq / (float)n + eps));
}

// One work-item per (n, c) plane of `size` elements.
kernel void instancenorm(global const float* x, global const float* scale, global const float* bias,
                         global float* y, int planes, int C, int size, float eps) {
  const int p = get_global_id(0);
  if (p >= planes) return;
  global const float* in = x + (long)p * size;
  global float* out = y + (long)p * size;
  const float2 m = moments(in, size, eps);
  const int c = p % C;
  const float a = scale[c] * m.y, b = bias[c] - m.x * a;
  for (int i = 0; i < size; ++i) out[i] = fma(in[i], a, b);
}

// One work-item per row of n elements; scale/bias element j of the row (has_bias 0: no bias).
kernel void layernorm(global const float* x, global const float* scale, global const float* bias,
                      int has_bias, global float* y, int rows, int n, float eps) {
  const int r = get_global_id(0);
  if (r >= rows) return;
  global const float* in = x + (long)r * n;
  global float* out = y + (long)r * n;
  const float2 m = moments(in, n, eps);
  for (int j = 0; j < n; ++j) {
    const float v = (in[j] - m.x) * m.y;
    out[j] = has_bias ? fma(v, scale[j], bias[j]) : v * scale[j];
  }
}

// One work-item per row: y = x / sqrt(mean(x^2) + eps) * scale, the sum of squares compensated
// as in moments().
kernel void rmsnorm(global const float* x, global const float* scale, global float* y, int rows,
                    int n, float eps) {
  const int r = get_global_id(0);
  if (r >= rows) return;
  global const float* in = x + (long)r * n;
  global float* out = y + (long)r * n;
  float sq = 0.0f, c = 0.0f;
  for (int j = 0; j < n; ++j) {
    const float t = in[j] * in[j] - c, s = sq + t;
    c = (s - sq) - t;
    sq = s;
  }
  const float inv = rsqrt(sq / (float)n + eps);
  for (int j = 0; j < n; ++j) out[j] = in[j] * inv * scale[j];
}
