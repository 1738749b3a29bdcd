# Sourced by tools/fuzz.sh, tools/tsan.sh and tools/test.sh: quilt_find_clang RUNTIME sets CLANG
# to the first clang++ (Debian's clang 15, then 14, then the default) whose RUNTIME runtime
# library is installed (fuzzer, tsan, asan, ubsan_standalone: libclang_rt.RUNTIME-x86_64.a),
# and CLANG_C to the matching C compiler; it returns 1, with CLANG empty, when there is none.
quilt_find_clang() {
  local runtime="$1" v cxx
  CLANG=""
  CLANG_C=""
  for v in 15 14 ""; do
    cxx=clang++${v:+-$v}
    command -v "$cxx" >/dev/null || continue
    [ -f "$("$cxx" -print-resource-dir)/lib/linux/libclang_rt.$runtime-x86_64.a" ] || continue
    CLANG="$cxx"
    CLANG_C="${cxx/clang++/clang}"
    return 0
  done
  return 1
}
