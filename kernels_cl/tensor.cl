// Tensor ops (ops_tensor.cpp): Transpose, Slice, Split and Concat are strided copies; Gather,
// Pad and Resize have their own kernels. One output element per work-item; dims and strides of
// at most 8 dims come as int8 (outermost first, unused dims 1).

// Flat index i over dims -> the offsets given by two stride sets.
inline int2 strided_offsets(int i, int rank, int8 dims, int8 sa, int8 sb) {
  int d[8], a[8], b[8];
  vstore8(dims, 0, d);
  vstore8(sa, 0, a);
  vstore8(sb, 0, b);
  int oa = 0, ob = 0;
  for (int k = rank - 1; k >= 0; --k) {
    const int q = i / d[k];
    const int r = i - q * d[k];
    oa += r * a[k];
    ob += r * b[k];
    i = q;
  }
  return (int2)(oa, ob);
}

// dst[dst_base + idx . dst_strides] = src[src_base + idx . src_strides] for every idx in dims.
kernel void strided_copy(global const float* src, global float* dst, int n, int rank, int8 dims,
                         int8 src_strides, int src_base, int8 dst_strides, int dst_base) {
  const int i = get_global_id(0);
  if (i >= n) return;
  const int2 o = strided_offsets(i, rank, dims, src_strides, dst_strides);
  dst[dst_base + o.y] = src[src_base + o.x];
}

// The same when the innermost dim (of length len) is contiguous on both sides: one row per
// work-item, so the index arithmetic is per row; dims and strides are those of the rows.
kernel void strided_copy_rows(global const float* src, global float* dst, int rows, int len,
                              int rank, int8 dims, int8 src_strides, int src_base, int8 dst_strides,
                              int dst_base) {
  const int i = get_global_id(0);
  if (i >= rows) return;
  const int2 o = strided_offsets(i, rank, dims, src_strides, dst_strides);
  global const float* s = src + src_base + o.x;
  global float* d = dst + dst_base + o.y;
  for (int k = 0; k < len; ++k) d[k] = s[k];
}

// Gather along an axis of length A: out[o][k][i] = in[o][idx[k]][i], negative indices from the
// end (the host checked the range).
kernel void gather(global const float* in, global const int* idx, global float* out, int n, int K,
                   int inner, int A) {
  const int i = get_global_id(0);
  if (i >= n) return;
  const int r = i % inner;
  const int t = i / inner;
  const int k = t % K;
  const int o = t / K;
  int j = idx[k];
  if (j < 0) j += A;
  out[i] = in[((long)o * A + j) * inner + r];
}

// Constant-mode Pad: output index minus the leading pad per dim (negative pads crop).
kernel void pad_constant(global const float* in, global float* out, int n, int rank, int8 out_dims,
                         int8 in_dims, int8 begins, float value) {
  int i = get_global_id(0);
  if (i >= n) return;
  int od[8], id[8], b[8];
  vstore8(out_dims, 0, od);
  vstore8(in_dims, 0, id);
  vstore8(begins, 0, b);
  int src = 0, stride = 1, inside = 1;
  const int flat = i;
  for (int k = rank - 1; k >= 0; --k) {
    const int q = i / od[k];
    const int j = i - q * od[k] - b[k];
    inside &= j >= 0 && j < id[k];
    src += j * stride;
    stride *= id[k];
    i = q;
  }
  out[flat] = inside ? in[src] : value;
}

// Source coordinate of output position x (as the CPU backend computes it, in float).
// coord: 0 half_pixel, 1 asymmetric, 2 align_corners, 3 pytorch_half_pixel.
inline float resize_coord(int coord, float x, float scale, float out_len, float in_len) {
  switch (coord) {
    case 0:
      return (x + 0.5f) / scale - 0.5f;
    case 1:
      return x / scale;
    case 2:
      return out_len == 1.0f ? 0.0f : x * (in_len - 1.0f) / (out_len - 1.0f);
    default:
      return out_len > 1.0f ? (x + 0.5f) / scale - 0.5f : 0.0f;
  }
}

// nearest: 0 round_prefer_floor, 1 round_prefer_ceil, 2 floor, 3 ceil.
inline int resize_nearest(int mode, float x) {
  switch (mode) {
    case 0:
      return x == (float)(int)x + 0.5f ? (int)floor(x) : (int)round(x);
    case 1:
      return (int)round(x);
    case 2:
      return (int)floor(x);
    default:
      return (int)ceil(x);
  }
}

// Nearest index of the exact coordinate num / den (den > 0), as the CPU backend rounds it.
inline int resize_nearest_exact(int mode, long num, long den) {
  long fl = num / den;
  if (num % den != 0 && num < 0) --fl;
  const long rem = num - fl * den;  // in [0, den)
  switch (mode) {
    case 0:
      return (int)(2 * rem <= den ? fl : fl + 1);
    case 1:
      return (int)(2 * rem < den ? fl : fl + 1);
    case 2:
      return (int)fl;
    default:
      return (int)(rem == 0 ? fl : fl + 1);
  }
}

// Taps of one axis: i0, i1 and the weight of i1 (nearest: i1 = i0, weight 0). exact: the scale
// is out / in (from sizes), and a nearest coordinate is the exact fraction of the CPU backend.
inline float3 resize_taps(int o, int in, int out, float scale, float fout, int coord, int linear,
                          int nearest, int exact) {
  if (scale == 1.0f && in == out) return (float3)(o, o, 0.0f);
  if (!linear && exact) {
    const long lo = o, li = in, lout = out;
    long num = 0, den = 1;
    if (coord == 1) {
      num = lo * li;
      den = lout;
    } else if (coord == 2) {
      if (out > 1) {
        num = lo * (li - 1);
        den = lout - 1;
      }
    } else if (coord == 0 || out > 1) {  // half_pixel, or pytorch_half_pixel
      num = (2 * lo + 1) * li - lout;
      den = 2 * lout;
    }
    const int i = clamp(resize_nearest_exact(nearest, num, den), 0, in - 1);
    return (float3)(i, i, 0.0f);
  }
  const float x = resize_coord(coord, (float)o, scale, fout, (float)in);
  if (!linear) {
    const int i = clamp(resize_nearest(nearest, x), 0, in - 1);
    return (float3)(i, i, 0.0f);
  }
  const float xc = clamp(x, 0.0f, (float)in - 1.0f);
  const int i0 = (int)xc;
  return (float3)(i0, min(i0 + 1, in - 1), xc - (float)i0);
}

// The taps of one resized axis, once per run: taps[3 * (first + o) ...] = (i0, i1, weight of i1)
// for output position o. scale: the transform's; fout: the output length it uses.
kernel void resize_axis(global float* taps, int first, int in, int out, float scale, float fout,
                        int4 mode) {
  const int o = get_global_id(0);
  if (o >= out) return;
  vstore3(resize_taps(o, in, out, scale, fout, mode.s0, mode.s2, mode.s1, mode.s3), first + o,
          taps);
}

// Resize of H and W of NCHW planes from the axes' taps (rows 0..OH, then columns 0..OW): one
// output row per work-item. geo = (H, W, OH, OW), linear: bilinear, else nearest.
kernel void resize2d(global const float* x, global float* y, global const float* taps, int4 geo,
                     int linear, int rows) {
  const int H = geo.s0, W = geo.s1, OH = geo.s2, OW = geo.s3;
  const int id = get_global_id(0);
  if (id >= rows) return;
  const int oh = id % OH;
  const int plane = id / OH;
  const float3 th = vload3(oh, taps);
  global const float* r0 = x + (long)plane * H * W + (long)(int)th.x * W;
  global const float* r1 = x + (long)plane * H * W + (long)(int)th.y * W;
  global float* out = y + (long)id * OW;
  global const float* tw = taps + 3 * OH;
  if (!linear) {
    for (int ow = 0; ow < OW; ++ow) out[ow] = r0[(int)tw[3 * ow]];
    return;
  }
  for (int ow = 0; ow < OW; ++ow) {
    const int w0 = (int)tw[3 * ow], w1 = (int)tw[3 * ow + 1];
    const float f = tw[3 * ow + 2];
    const float a = r0[w0] * (1.0f - f) + r0[w1] * f;
    const float b = r1[w0] * (1.0f - f) + r1[w1] * f;
    out[ow] = a * (1.0f - th.z) + b * th.z;
  }
}
