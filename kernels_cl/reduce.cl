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

// The op's accumulation of reduced elements [r0, r1) from base: a sum (of squares for L2,
// Kahan-compensated, so long reductions stay accurate), a maximum or a minimum.
inline float reduce_range(global const float* base, int r0, int r1, int red_rank, int8 rd, int8 rs,
                          int op) {
  float acc = op == 2 ? -INFINITY : op == 3 ? INFINITY : 0.0f;
  float comp = 0.0f;
  for (int r = r0; r < r1; ++r) {
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
  return acc;
}

inline float reduce_finish(float acc, int count, int op) {
  return op == 1 ? acc / (float)count : op == 4 ? sqrt(acc) : acc;
}

kernel void reduce(global const float* x, global float* y, int outputs, int kept_rank, int8 kd,
                   int8 ks, int red_rank, int8 rd, int8 rs, int count, int op) {
  const int o = get_global_id(0);
  if (o >= outputs) return;
  global const float* base = x + reduce_offset(o, kept_rank, kd, ks);
  y[o] = reduce_finish(reduce_range(base, 0, count, red_rank, rd, rs, op), count, op);
}

// Few outputs with long reductions: `parts` work-items per output each reduce a chunk into
// partial[o * parts + p], then reduce_parts combines them (so both cores work).
kernel void reduce_partial(global const float* x, global float* partial, int outputs, int kept_rank,
                           int8 kd, int8 ks, int red_rank, int8 rd, int8 rs, int count, int op,
                           int parts) {
  const int id = get_global_id(0);
  if (id >= outputs * parts) return;
  const int o = id / parts, p = id - o * parts;
  const int chunk = (count + parts - 1) / parts;
  const int r0 = min(count, p * chunk), r1 = min(count, r0 + chunk);
  global const float* base = x + reduce_offset(o, kept_rank, kd, ks);
  partial[id] = reduce_range(base, r0, r1, red_rank, rd, rs, op);
}

kernel void reduce_parts(global const float* partial, global float* y, int outputs, int parts,
                         int count, int op) {
  const int o = get_global_id(0);
  if (o >= outputs) return;
  const int8 unit = (int8)(1, 1, 1, 1, 1, 1, 1, 1);
  // The partials are contiguous: reduce them as a rank-1 range, then finish.
  const float acc =
      reduce_range(partial + (long)o * parts, 0, parts, 1, unit, unit, op == 4 ? 0 : op);
  y[o] = reduce_finish(acc, count, op);
}
