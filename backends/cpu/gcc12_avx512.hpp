// GCC 12's AVX-512 headers pass _mm512_undefined_*() through the unmasked intrinsics (and through
// the masked ones once they inline into a function with a wider target: GCC bug 105593, fixed in
// GCC 13), which -Wuninitialized and -Wmaybe-uninitialized then report; nothing is read
// uninitialised. These turn both off around such code under GCC only: clang has no
// -Wmaybe-uninitialized and would warn about the pragma instead (-Wunknown-warning-option).
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#define QUILT_GCC12_AVX512_BEGIN                                                       \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wuninitialized\"") \
      _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#define QUILT_GCC12_AVX512_END _Pragma("GCC diagnostic pop")
#else
#define QUILT_GCC12_AVX512_BEGIN
#define QUILT_GCC12_AVX512_END
#endif
