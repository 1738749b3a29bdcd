// Shared by every program: prepended to each family's source before it is built.
#ifdef QUILT_FORCE_ERROR
#error "QUILT_FORCE_ERROR is defined: a build failure on purpose (tests of the build-log path)"
#endif

// Element offsets of flat index i in two operands whose shapes were collapsed to `rank` (<= 8)
// dims of the output; a broadcast dimension has stride 0.
inline void broadcast_offsets(int i, int rank, int8 dims, int8 stride_a, int8 stride_b, int* oa,
                              int* ob) {
  int d[8], sa[8], sb[8];
  vstore8(dims, 0, d);
  vstore8(stride_a, 0, sa);
  vstore8(stride_b, 0, sb);
  int a = 0, b = 0;
  for (int k = rank - 1; k >= 0; --k) {
    int q = i / d[k];
    int r = i - q * d[k];
    a += r * sa[k];
    b += r * sb[k];
    i = q;
  }
  *oa = a;
  *ob = b;
}
