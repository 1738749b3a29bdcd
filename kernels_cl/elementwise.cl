// Element-wise ops on float32. Binary ops come in two forms: _flat (same shape, contiguous) and
// _bcast (numpy broadcasting through collapsed strides). Unary ops take two float parameters
// (alpha, beta) whose meaning is the op's ONNX attributes.

#define BINARY(NAME, EXPR)                                                                     \
  kernel void NAME##_flat(global const float* a, global const float* b, global float* c,      \
                          int n) {                                                            \
    int i = get_global_id(0);                                                                 \
    if (i >= n) return;                                                                       \
    float x = a[i], y = b[i];                                                                 \
    c[i] = (EXPR);                                                                            \
  }                                                                                           \
  kernel void NAME##_bcast(global const float* a, global const float* b, global float* c,     \
                           int n, int rank, int8 dims, int8 stride_a, int8 stride_b) {        \
    int i = get_global_id(0);                                                                 \
    if (i >= n) return;                                                                       \
    int oa, ob;                                                                               \
    broadcast_offsets(i, rank, dims, stride_a, stride_b, &oa, &ob);                           \
    float x = a[oa], y = b[ob];                                                               \
    c[i] = (EXPR);                                                                            \
  }

BINARY(add, x + y)
BINARY(sub, x - y)
BINARY(mul, x * y)
BINARY(div, x / y)
BINARY(pow, pow(x, y))
BINARY(max, (isnan(x) || isnan(y)) ? NAN : fmax(x, y))
BINARY(min, (isnan(x) || isnan(y)) ? NAN : fmin(x, y))
BINARY(prelu, x < 0.0f ? x * y : x)

#define UNARY(NAME, EXPR)                                                                   \
  kernel void NAME(global const float* in, global float* out, int n, float alpha,           \
                   float beta) {                                                            \
    int i = get_global_id(0);                                                               \
    if (i >= n) return;                                                                     \
    float x = in[i];                                                                        \
    out[i] = (EXPR);                                                                        \
  }

inline float sigmoid_f(float x) {
  return x >= 0.0f ? 1.0f / (1.0f + exp(-x)) : exp(x) / (1.0f + exp(x));
}
inline float softplus_f(float x) {
  return x > 0.0f ? x + log1p(exp(-x)) : log1p(exp(x));
}
inline float clamp01(float v) {
  return isnan(v) ? v : fmin(fmax(v, 0.0f), 1.0f);
}

UNARY(relu, x < 0.0f ? 0.0f : x)
UNARY(leaky_relu, x >= 0.0f ? x : alpha * x)
UNARY(sigmoid, sigmoid_f(x))
UNARY(tanh_, tanh(x))
UNARY(exp_, exp(x))
UNARY(log_, log(x))
UNARY(sqrt_, sqrt(x))
UNARY(neg, -x)
UNARY(abs_, fabs(x))
UNARY(erf_, erf(x))
UNARY(reciprocal, 1.0f / x)
UNARY(clip, isnan(x) ? x : fmin(fmax(x, alpha), beta))
UNARY(hard_sigmoid, clamp01(alpha * x + beta))
UNARY(hard_swish, x * clamp01(x / 6.0f + 0.5f))
UNARY(softplus, softplus_f(x))
UNARY(gelu, 0.5f * x * (1.0f + erf(x * 0.70710678118654752f)))
UNARY(gelu_tanh,
      0.5f * x * (1.0f + tanh(0.79788456080286536f * (x + 0.044715f * x * x * x))))
UNARY(elu, x >= 0.0f ? x : alpha * expm1(x))
UNARY(selu, x > 0.0f ? beta * x : beta * (alpha * exp(x) - alpha))
