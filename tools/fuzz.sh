#!/usr/bin/env bash
# Builds and runs Quilt's libFuzzer targets (tests/fuzz) in build-fuzz/ (clang, ASan + UBSan).
#   tools/fuzz.sh NAME SECONDS [libFuzzer arguments...]   run one fuzzer that long
#   tools/fuzz.sh all SECONDS                             each fuzzer in turn, SECONDS each
#   tools/fuzz.sh build                                   build only (and make the seeds)
#   tools/fuzz.sh build-tests                             also build the C++ tests, case_runner
#                                                         and the CLI there (the asan_* tests)
#   tools/fuzz.sh exec PROGRAM [ARGS...]                  run one of those with the sanitizers'
#                                                         options (any report fails it)
# NAME: model (import -> validate -> shape inference -> session), run (the same and one run on
# small inputs), npy (.npy reading), plugin (the example plugin's supports/compile).
# Seeds (build-fuzz/seeds/, from onnx's backend test data, the test models and numpy) are made
# once; what a fuzzer finds new goes to build-fuzz/corpus/NAME/ and is kept across runs. A crash,
# sanitizer report, leak, hang (> 10 s for one input) or out-of-memory (RSS > 2 GiB) stops the
# fuzzer, leaves the input in build-fuzz/findings/NAME/ and exits non-zero. Logs: build-fuzz/logs/.
# Reproduce a finding: build-fuzz/fuzzers/fuzz_NAME build-fuzz/findings/NAME/crash-...
set -euo pipefail

QUILT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FUZZ_BUILD="${QUILT_FUZZ_BUILD:-$QUILT_ROOT/build-fuzz}"
NAMES=(model run npy plugin)

usage() { sed -n '2,18p' "${BASH_SOURCE[0]}" >&2; exit 2; }
[ $# -ge 1 ] || usage
what="$1"; shift
seconds=""
if [ "$what" = exec ]; then
  [ $# -ge 1 ] || usage
elif [ "$what" != build ] && [ "$what" != build-tests ]; then
  [ $# -ge 1 ] || usage
  seconds="$1"; shift
  [[ "$seconds" =~ ^[0-9]+$ ]] || { echo "tools/fuzz.sh: SECONDS must be a whole number, not '$seconds'" >&2; exit 2; }
  if [ "$what" != all ] && [[ ! " ${NAMES[*]} " == *" $what "* ]]; then
    echo "tools/fuzz.sh: unknown fuzzer '$what' (expected one of: ${NAMES[*]}, all)" >&2; exit 2
  fi
fi

# The plain setup first: Debian packages (clang and its libFuzzer among them), the venv (onnx for
# the seeds) and build/ (whose test models seed the corpora). Under CTest (the fuzz_* tests of
# tests/CMakeLists.txt) that build is the one running the tests: QUILT_FUZZ_FROM_CTEST=1 skips
# the setup, with QUILT_BUILD and QUILT_PYTHON given, and the test models already made.
if [ -n "${QUILT_FUZZ_FROM_CTEST:-}" ]; then
  : "${QUILT_BUILD:?}" "${QUILT_PYTHON:?}"
  quilt_log() { echo "[fuzz] $*" >&2; }
else
  source "$QUILT_ROOT/tools/setup.sh"
fi
# The first clang whose libFuzzer runtime is installed (Debian: clang 15 carries it, clang 14
# needs libclang-rt-14-dev).
source "$QUILT_ROOT/tools/sanitizers/find_clang.sh"
if ! quilt_find_clang fuzzer; then
  echo "tools/fuzz.sh: no clang with libFuzzer (Debian: clang libclang-rt-dev, which tools/setup.sh installs)" >&2
  exit 1
fi
if [ ! -f "$FUZZ_BUILD/CMakeCache.txt" ]; then
  quilt_log "configuring $FUZZ_BUILD ($CLANG, libFuzzer + ASan + UBSan)"
  CC="$CLANG_C" CXX="$CLANG" cmake -S "$QUILT_ROOT" -B "$FUZZ_BUILD" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQUILT_FUZZ=ON >&2
fi
if [ "$what" != exec ]; then
  quilt_log "building the fuzzers in $FUZZ_BUILD"
  cmake --build "$FUZZ_BUILD" -j"$(nproc)" >&2
fi
if [ "$what" = build-tests ]; then
  # The C++ tests read the test build's models (made by its test_models_generate).
  cmake "$FUZZ_BUILD" -DQUILT_TEST_MODELS_DIR="$QUILT_BUILD/test_models" >/dev/null
  quilt_log "building the tests, case_runner and the CLI in $FUZZ_BUILD"
  cmake --build "$FUZZ_BUILD" -j"$(nproc)" --target quilt_unit_tests case_runner quilt_cli >&2
  exit 0
fi

if [ "$what" != exec ] && [ ! -f "$FUZZ_BUILD/seeds/onnx.dict" ]; then
  if [ -z "${QUILT_FUZZ_FROM_CTEST:-}" ]; then
    (cd "$QUILT_BUILD" && ctest -R '^test_models_generate$' >/dev/null) ||
      { echo "tools/fuzz.sh: generating the test models failed" >&2; exit 1; }
  fi
  "$QUILT_PYTHON" "$QUILT_ROOT/tests/fuzz/make_seeds.py" "$FUZZ_BUILD/seeds" "$QUILT_BUILD/test_models" >&2
fi
[ "$what" = build ] && exit 0

# Inputs over 256 MiB in one allocation fail (Quilt reports OutOfMemory) rather than being
# reported; a process over 2 GiB resident is a finding.
export ASAN_OPTIONS="allocator_may_return_null=1:max_allocation_size_mb=256:detect_leaks=1:halt_on_error=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# Symbolized stacks in the reports (llvm-symbolizer comes with Debian's llvm packages).
symbolizer="$(command -v llvm-symbolizer-15 || command -v llvm-symbolizer || true)"
[ -n "$symbolizer" ] && export ASAN_SYMBOLIZER_PATH="$symbolizer" UBSAN_SYMBOLIZER_PATH="$symbolizer"
export LSAN_OPTIONS="suppressions=$QUILT_ROOT/tools/sanitizers/lsan.supp:print_suppressions=0"
if [ "$what" = exec ]; then
  # The tests' own options: no allocation cap (the ONNX suite has a 392 MiB weight), but an
  # allocation that fails returns null, which Quilt reports as OutOfMemory (tests check that).
  export ASAN_OPTIONS="allocator_may_return_null=1:detect_leaks=1:halt_on_error=1"
  exec "$@"
fi

run_one() {
  local name="$1" secs="$2"; shift 2
  local seeds="$FUZZ_BUILD/seeds/models"
  [ "$name" = npy ] && seeds="$FUZZ_BUILD/seeds/npy"
  mkdir -p "$FUZZ_BUILD/corpus/$name" "$FUZZ_BUILD/findings/$name" "$FUZZ_BUILD/logs"
  local log="$FUZZ_BUILD/logs/$name.log"
  quilt_log "fuzz_$name for ${secs}s (log: $log)"
  local status=0
  "$FUZZ_BUILD/fuzzers/fuzz_$name" "$FUZZ_BUILD/corpus/$name" "$seeds" \
    -dict="$FUZZ_BUILD/seeds/onnx.dict" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -malloc_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$FUZZ_BUILD/findings/$name/" "$@" >"$log" 2>&1 || status=$?
  grep -E '^(stat::|#[0-9]+ +DONE)|INITED|cov:|ERROR|SUMMARY' "$log" | tail -n 12 >&2 || true
  if [ "$status" -ne 0 ]; then
    tail -n 60 "$log" >&2
    echo "tools/fuzz.sh: fuzz_$name found something (exit $status): see $log and $FUZZ_BUILD/findings/$name/" >&2
  fi
  return "$status"
}

status=0
if [ "$what" = all ]; then
  for name in "${NAMES[@]}"; do run_one "$name" "$seconds" "$@" || status=1; done
else
  run_one "$what" "$seconds" "$@" || status=$?
fi
exit "$status"
