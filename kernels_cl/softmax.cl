// Softmax and LogSoftmax over the middle axis of a [outer, axis, inner] view: one work-item per
// (outer, inner) row, three passes (max, sum of exp, write); no local memory.

kernel void softmax(global const float* x, global float* y, int outer, int axis, int inner,
                    int log_softmax) {
  int id = get_global_id(0);
  if (id >= outer * inner) return;
  int o = id / inner, i = id - o * inner;
  long base = (long)o * axis * inner + i;
  float m = -INFINITY;
  for (int k = 0; k < axis; ++k) m = fmax(m, x[base + (long)k * inner]);
  float sum = 0.0f;
  for (int k = 0; k < axis; ++k) sum += exp(x[base + (long)k * inner] - m);
  if (log_softmax) {
    float l = log(sum);
    for (int k = 0; k < axis; ++k) y[base + (long)k * inner] = x[base + (long)k * inner] - m - l;
  } else {
    for (int k = 0; k < axis; ++k) y[base + (long)k * inner] = exp(x[base + (long)k * inner] - m) / sum;
  }
}
