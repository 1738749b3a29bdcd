// float16 and bfloat16 values at a patch's edges: inside the patch every value is float32 (the
// device computes in float32), so the patch's half inputs are widened once and its half outputs
// rounded once, to nearest even. vload_half / vstore_half_rte are core OpenCL: no cl_khr_fp16.

__kernel void float16_to_float(__global const half* src, __global float* dst, int n) {
  const int i = get_global_id(0);
  if (i < n) dst[i] = vload_half(i, src);
}

__kernel void float_to_float16(__global const float* src, __global half* dst, int n) {
  const int i = get_global_id(0);
  if (i < n) vstore_half_rte(src[i], i, dst);
}

__kernel void bfloat16_to_float(__global const ushort* src, __global float* dst, int n) {
  const int i = get_global_id(0);
  if (i < n) dst[i] = as_float((uint)src[i] << 16);
}

__kernel void float_to_bfloat16(__global const float* src, __global ushort* dst, int n) {
  const int i = get_global_id(0);
  if (i >= n) return;
  const uint b = as_uint(src[i]);
  dst[i] = (b & 0x7fffffffu) > 0x7f800000u ? (ushort)((b >> 16) | 0x40)  // NaN stays NaN
                                           : (ushort)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}
