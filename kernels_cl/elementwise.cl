// Element-wise ops on float32, 16 elements per work-item: each op is written once over a type T
// (float16 for full chunks, float for the tail) with select() and the relational builtins, which
// work on both. Vectors matter on PoCL: it runs the float16 builtins 8-18x faster than one
// scalar call per work-item (Erf over 605k values: 7.6 -> 0.42 ms).
//
// Binary ops come in three forms: _flat (same shape, contiguous), _rows (broadcasting whose
// innermost collapsed dim is contiguous or broadcast in each operand: 16 elements of a row per
// work-item, the row's offsets computed once) and _bcast (any broadcast, one element per
// work-item, for innermost dims too short for a chunk). Unary ops take two float parameters
// (alpha, beta) whose meaning is the op's ONNX attributes.

#define VW 16

#define BINARY(NAME, BODY)                                                                     \
  inline float NAME##_1(float x, float y) {                                                   \
    typedef float T;                                                                          \
    BODY                                                                                      \
  }                                                                                           \
  inline float16 NAME##_16(float16 x, float16 y) {                                            \
    typedef float16 T;                                                                        \
    BODY                                                                                      \
  }                                                                                           \
  kernel void NAME##_flat(global const float* a, global const float* b, global float* c,      \
                          int n) {                                                            \
    const int i = get_global_id(0) * VW;                                                      \
    if (i >= n) return;                                                                       \
    if (i + VW <= n) {                                                                        \
      vstore16(NAME##_16(vload16(0, a + i), vload16(0, b + i)), 0, c + i);                    \
      return;                                                                                 \
    }                                                                                         \
    for (int k = i; k < n; ++k) c[k] = NAME##_1(a[k], b[k]);                                  \
  }                                                                                           \
  kernel void NAME##_rows(global const float* a, global const float* b, global float* c,     \
                          int inner, int rows, int rank, int8 dims, int8 stride_a,            \
                          int8 stride_b, int a_inner, int b_inner) {                          \
    const int j = get_global_id(0) * VW, row = get_global_id(1);                              \
    if (j >= inner || row >= rows) return;                                                    \
    int oa, ob;                                                                               \
    broadcast_offsets(row, rank, dims, stride_a, stride_b, &oa, &ob);                         \
    a += oa;                                                                                  \
    b += ob;                                                                                  \
    c += (long)row * inner;                                                                   \
    if (j + VW <= inner) {                                                                    \
      float16 x = a_inner ? vload16(0, a + j) : (float16)(a[0]);                              \
      float16 y = b_inner ? vload16(0, b + j) : (float16)(b[0]);                              \
      vstore16(NAME##_16(x, y), 0, c + j);                                                    \
      return;                                                                                 \
    }                                                                                         \
    for (int k = j; k < inner; ++k) c[k] = NAME##_1(a[a_inner * k], b[b_inner * k]);          \
  }                                                                                           \
  kernel void NAME##_bcast(global const float* a, global const float* b, global float* c,     \
                           int n, int rank, int8 dims, int8 stride_a, int8 stride_b) {        \
    int i = get_global_id(0);                                                                 \
    if (i >= n) return;                                                                       \
    int oa, ob;                                                                               \
    broadcast_offsets(i, rank, dims, stride_a, stride_b, &oa, &ob);                           \
    c[i] = NAME##_1(a[oa], b[ob]);                                                            \
  }

BINARY(add, return x + y;)
BINARY(sub, return x - y;)
BINARY(mul, return x * y;)
BINARY(div, return x / y;)
BINARY(pow, return pow(x, y);)
// Pow by a constant 2 or 3 (GPT-2's GELU cubes): products instead of pow(), y ignored.
BINARY(pow_2, return x * x;)
BINARY(pow_3, return x * x * x;)
BINARY(max, return select(fmax(x, y), (T)(NAN), isnan(x) | isnan(y));)
BINARY(min, return select(fmin(x, y), (T)(NAN), isnan(x) | isnan(y));)
BINARY(prelu, return select(x, x * y, x < (T)(0.0f));)

#define UNARY(NAME, BODY)                                                                   \
  inline float NAME##_1(float x, float alpha, float beta) {                                \
    typedef float T;                                                                       \
    BODY                                                                                   \
  }                                                                                        \
  inline float16 NAME##_16(float16 x, float alpha, float beta) {                           \
    typedef float16 T;                                                                     \
    BODY                                                                                   \
  }                                                                                        \
  kernel void NAME(global const float* in, global float* out, int n, float alpha,          \
                   float beta) {                                                           \
    const int i = get_global_id(0) * VW;                                                   \
    if (i >= n) return;                                                                    \
    if (i + VW <= n) {                                                                     \
      vstore16(NAME##_16(vload16(0, in + i), alpha, beta), 0, out + i);                    \
      return;                                                                              \
    }                                                                                      \
    for (int k = i; k < n; ++k) out[k] = NAME##_1(in[k], alpha, beta);                     \
  }

// clamp to [0, 1], NaN kept.
#define CLAMP01(v) select(fmin(fmax((v), (T)(0.0f)), (T)(1.0f)), (v), isnan(v))

UNARY(relu, return select(x, (T)(0.0f), x < (T)(0.0f));)
UNARY(leaky_relu, return select(alpha * x, x, x >= (T)(0.0f));)
// 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below: e^-|x| never overflows.
UNARY(sigmoid, T e = exp(-fabs(x)); T r = (T)(1.0f) / ((T)(1.0f) + e);
      return select(e * r, r, x >= (T)(0.0f));)
UNARY(tanh_, return tanh(x);)
UNARY(exp_, return exp(x);)
UNARY(log_, return log(x);)
UNARY(sqrt_, return sqrt(x);)
UNARY(neg, return -x;)
UNARY(abs_, return fabs(x);)
UNARY(erf_, return erf(x);)
UNARY(reciprocal, return (T)(1.0f) / x;)
UNARY(clip, return select(fmin(fmax(x, (T)(alpha)), (T)(beta)), x, isnan(x));)
UNARY(hard_sigmoid, T v = alpha * x + beta; return CLAMP01(v);)
UNARY(hard_swish, T v = x / (T)(6.0f) + (T)(0.5f); return x * CLAMP01(v);)
// x + log1p(e^-x) for x > 0, log1p(e^x) below.
UNARY(softplus, return log1p(exp(-fabs(x))) + fmax(x, (T)(0.0f));)
// x * sigmoid(alpha x), the sigmoid in the form that never overflows.
UNARY(swish, T z = alpha * x; T e = exp(-fabs(z)); T r = (T)(1.0f) / ((T)(1.0f) + e);
      return x * select(e * r, r, z >= (T)(0.0f));)
UNARY(mish, return x * tanh(log1p(exp(-fabs(x))) + fmax(x, (T)(0.0f)));)
UNARY(gelu, return (T)(0.5f) * x * ((T)(1.0f) + erf(x * (T)(0.70710678118654752f)));)
UNARY(gelu_tanh, return (T)(0.5f) * x *
                        ((T)(1.0f) +
                         tanh((T)(0.79788456080286536f) * (x + (T)(0.044715f) * x * x * x)));)
UNARY(elu, return select(alpha * expm1(x), x, x >= (T)(0.0f));)
UNARY(selu, return select(beta * (alpha * exp(x) - alpha), beta * x, x > (T)(0.0f));)

// Where(condition, X, Y): condition is bool (one byte per value, nonzero = true); strides as
// for the binary kernels, one set per operand.
inline void broadcast_offsets3(int i, int rank, int8 dims, int8 stride_c, int8 stride_x,
                               int8 stride_y, int* oc, int* ox, int* oy) {
  int d[8], sc[8], sx[8], sy[8];
  vstore8(dims, 0, d);
  vstore8(stride_c, 0, sc);
  vstore8(stride_x, 0, sx);
  vstore8(stride_y, 0, sy);
  int c = 0, x = 0, y = 0;
  for (int k = rank - 1; k >= 0; --k) {
    int q = i / d[k];
    int r = i - q * d[k];
    c += r * sc[k];
    x += r * sx[k];
    y += r * sy[k];
    i = q;
  }
  *oc = c;
  *ox = x;
  *oy = y;
}

kernel void where_rows(global const uchar* cond, global const float* x, global const float* y,
                       global float* out, int inner, int rows, int rank, int8 dims, int8 stride_c,
                       int8 stride_x, int8 stride_y, int c_inner, int x_inner, int y_inner) {
  const int j = get_global_id(0) * VW, row = get_global_id(1);
  if (j >= inner || row >= rows) return;
  int oc, ox, oy;
  broadcast_offsets3(row, rank, dims, stride_c, stride_x, stride_y, &oc, &ox, &oy);
  cond += oc;
  x += ox;
  y += oy;
  out += (long)row * inner;
  if (j + VW <= inner) {
    uchar16 c = c_inner ? vload16(0, cond + j) : (uchar16)(cond[0]);
    float16 vx = x_inner ? vload16(0, x + j) : (float16)(x[0]);
    float16 vy = y_inner ? vload16(0, y + j) : (float16)(y[0]);
    vstore16(select(vy, vx, convert_int16(c != (uchar16)(0))), 0, out + j);
    return;
  }
  for (int k = j; k < inner; ++k) out[k] = cond[c_inner * k] ? x[x_inner * k] : y[y_inner * k];
}

kernel void where_bcast(global const uchar* cond, global const float* x, global const float* y,
                        global float* out, int n, int rank, int8 dims, int8 stride_c,
                        int8 stride_x, int8 stride_y) {
  const int i = get_global_id(0);
  if (i >= n) return;
  int oc, ox, oy;
  broadcast_offsets3(i, rank, dims, stride_c, stride_x, stride_y, &oc, &ox, &oy);
  out[i] = cond[oc] ? x[ox] : y[oy];
}
