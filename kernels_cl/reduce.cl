// ReduceSum / ReduceMean / ReduceMax / ReduceMin / ReduceL2 (ops_reduce.cpp): one work-item per
// output element walks its reduced elements. The host collapses X's dims into kept dims (kd, ks:
// sizes and element strides, outermost first) and reduced dims (rd, rs), at most 8 each.
// op: 0 sum, 1 mean, 2 max, 3 min, 4 L2. Max and Min propagate NaN, as on the CPU.

inline int reduce_offset(int i, int rank, int8 dims, int8 strides) {
  int d[8], s[8];
  vstore8(dims, 0, d);
  vstore8(strides, 0, s);
  int off = 0;
  for (int k = rank - 1; k >= 0; --k) {
    const int q = i / d[k];
    off += (i - q * d[k]) * s[k];
    i = q;
  }
  return off;
}

kernel void reduce(global const float* x, global float* y, int outputs, int kept_rank, int8 kd,
                   int8 ks, int red_rank, int8 rd, int8 rs, int count, int op) {
  const int o = get_global_id(0);
  if (o >= outputs) return;
  global const float* base = x + reduce_offset(o, kept_rank, kd, ks);
  float acc = op == 2 ? -INFINITY : op == 3 ? INFINITY : 0.0f;
  float comp = 0.0f;  // Kahan compensation of sums: long reductions stay accurate
  for (int r = 0; r < count; ++r) {
    const float v = red_rank == 1 ? base[r * rs.s0] : base[reduce_offset(r, red_rank, rd, rs)];
    if (op == 2) {
      if (v > acc || isnan(v)) acc = isnan(acc) ? acc : v;
    } else if (op == 3) {
      if (v < acc || isnan(v)) acc = isnan(acc) ? acc : v;
    } else {
      const float t = (op == 4 ? v * v : v) - comp;
      const float s = acc + t;
      comp = (s - acc) - t;
      acc = s;
    }
  }
  y[o] = op == 1 ? acc / (float)count : op == 4 ? sqrt(acc) : acc;
}
