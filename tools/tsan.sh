#!/usr/bin/env bash
# ThreadSanitizer on Quilt's threaded code: the tsan_* tests of the test command (tests/CMakeLists.txt).
#   tools/tsan.sh build                    configure <build>-tsan (build-tsan/ for build/: clang,
#                                          -fsanitize=thread, the configuration of tools/test.sh
#                                          --sanitize thread) and build only what the tsan_* tests
#                                          run: quilt_unit_tests (libquilt's objects, the CPU
#                                          backend, the example plugin and its variants),
#                                          example_plugin_tests, case_runner and a deliberate
#                                          race (tsan_detects_a_race); test models
#   tools/tsan.sh exec PROGRAM [ARGS...]   run PROGRAM with TSan's options: the first report ends
#                                          it with exit code 66 (suppressions: tools/sanitizers/tsan.supp)
set -euo pipefail

QUILT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
usage() { sed -n '2,11p' "${BASH_SOURCE[0]}" >&2; exit 2; }
[ $# -ge 1 ] || usage
what="$1"; shift
case "$what" in
  build) [ $# -eq 0 ] || usage ;;
  exec) [ $# -ge 1 ] || usage ;;
  *) usage ;;
esac

if [ "$what" = build ]; then
  # Under CTest, QUILT_BUILD is the test build running the tests (build-tsan/ next to build/).
  tsan_build="${QUILT_TSAN_BUILD:-${QUILT_BUILD:-$QUILT_ROOT/build}-tsan}"
  QUILT_BUILD="$tsan_build" QUILT_SANITIZE=thread \
    QUILT_SETUP_TARGETS="quilt_unit_tests example_plugin_tests case_runner tsan_race_check" source "$QUILT_ROOT/tools/setup.sh"
  # quilt_unit_tests reads <build>/test_models (tests/models/gen_test_models.py's output).
  quilt_log "making the test models in $tsan_build/test_models"
  "$QUILT_PYTHON" "$QUILT_ROOT/tests/models/gen_test_models.py" "$tsan_build/test_models" >/dev/null
  exit 0
fi

# halt_on_error: the first report ends the process (exit code 66), so any race fails the test.
export TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1:suppressions=$QUILT_ROOT/tools/sanitizers/tsan.supp:print_suppressions=0${TSAN_EXTRA_OPTIONS:+:$TSAN_EXTRA_OPTIONS}"
symbolizer="$(command -v llvm-symbolizer-15 || command -v llvm-symbolizer-14 || command -v llvm-symbolizer || true)"
[ -n "$symbolizer" ] && export TSAN_SYMBOLIZER_PATH="$symbolizer"
exec "$@"
