#!/usr/bin/env bash
# Installs what Quilt needs and builds it in build/. Idempotent, and quick when nothing is missing:
#   - Debian packages (apt-get) for the compiler (and ccache, which CMake uses when present), protobuf + libonnx-dev, OpenBLAS, GoogleTest,
#     Graphviz (tests render `quilt plan --format dot`), iproute2 (`ip`, for the loopback-only
#     network namespace of the Ray Serve cluster test, tools/loopback_only.sh), OpenCL (headers,
#     the ICD loader, PoCL as the CPU device CI tests on, clinfo, CLBlast, Oclgrind: the strict
#     simulated device the opencl_oclgrind test checks the kernels on), clang with libFuzzer
#     (libclang-rt-dev: the fuzzers of tests/fuzz, whose short runs are the fuzz_* tests);
#   - a project venv (.venv) with the pinned Python packages of tools/requirements.txt;
#   - an incremental CMake build (Release) in build/ (or $QUILT_BUILD);
#   - the Python package (python/) installed into .venv, built against that build's libquilt
#     (only the bindings compile, in build/python), again only when python/ or libquilt changed.
# Sourced by tools/test.sh and tools/demo.sh; defines QUILT_ROOT, QUILT_BUILD, QUILT_PYTHON.
set -euo pipefail

QUILT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
QUILT_BUILD="${QUILT_BUILD:-$QUILT_ROOT/build}"
QUILT_PYTHON="$QUILT_ROOT/.venv/bin/python"

quilt_log() { echo "[setup] $*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

APT_PACKAGES=(
  cmake g++ make ccache
  protobuf-compiler libprotobuf-dev libonnx-dev
  libopenblas-dev libgtest-dev
  graphviz
  iproute2
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo libclblast-dev oclgrind
  clang libclang-rt-dev
)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  quilt_log "installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

if [ ! -x "$QUILT_PYTHON" ]; then
  quilt_log "creating the Python venv in .venv"
  if ! python3 -m venv "$QUILT_ROOT/.venv" >&2; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >&2
    python3 -m venv "$QUILT_ROOT/.venv" >&2
  fi
fi
# The Python package's bindings compile against Python.h (python3-dev for Debian's Python).
if ! "$QUILT_PYTHON" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
  quilt_log "installing python3-dev (Python.h, for the Python package)"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-dev >&2
fi
REQ="$QUILT_ROOT/tools/requirements.txt"
STAMP="$QUILT_ROOT/.venv/.quilt-requirements"
if ! cmp -s "$REQ" "$STAMP"; then
  quilt_log "installing Python packages from tools/requirements.txt"
  # The packages take about 1.0 GiB in .venv, and pip unpacks each wheel in the temporary
  # directory first: below 2 GiB free the install may stop half way with pip's bare
  # "No space left on device". --no-cache-dir: a fresh clone gains nothing from a second
  # copy of every wheel in ~/.cache/pip, and a full disk loses the install to it.
  free_space() { df -Pk "$1" 2>/dev/null | awk 'NR == 2 { printf "%d MiB", $4 / 1024 }'; }
  space_note="free: $(free_space "$QUILT_ROOT/.venv") for .venv, $(free_space "${TMPDIR:-/tmp}") in ${TMPDIR:-/tmp}"
  if [ "$(df -Pk "$QUILT_ROOT/.venv" | awk 'NR == 2 { print $4 }')" -lt $((2 * 1024 * 1024)) ]; then
    quilt_log "warning: the Python packages need about 2 GiB while installing ($space_note)"
  fi
  if ! "$QUILT_PYTHON" -m pip install -q --no-cache-dir --disable-pip-version-check -r "$REQ" >&2; then
    quilt_log "error: pip could not install tools/requirements.txt into .venv ($space_note;" \
      "the packages need about 2 GiB while installing)"
    exit 1
  fi
  cp "$REQ" "$STAMP"
fi

# QUILT_SANITIZE (set by tools/test.sh --sanitize, tools/tsan.sh) builds with those sanitizers,
# with debug info, by clang: GCC's ASan build of the whole project did not finish in 75 min on
# 2 cores (14 min for one file), clang's takes a fraction of that (docs/RELIABILITY.md).
QUILT_SANITIZE="${QUILT_SANITIZE:-}"
build_type=Release
cache="$QUILT_BUILD/CMakeCache.txt"
if [ -n "$QUILT_SANITIZE" ]; then
  build_type=RelWithDebInfo
  source "$QUILT_ROOT/tools/sanitizers/find_clang.sh"
  case ",$QUILT_SANITIZE," in
    *,thread,*) runtime=tsan ;;
    *,address,*) runtime=asan ;;
    *) runtime=ubsan_standalone ;;
  esac
  if ! quilt_find_clang "$runtime"; then
    echo "tools/setup.sh: no clang with the $runtime runtime for --sanitize $QUILT_SANITIZE (Debian: clang libclang-rt-dev)" >&2
    exit 1
  fi
  export CC="$CLANG_C" CXX="$CLANG"
  # A directory configured by another compiler (an earlier GCC sanitizer build) starts again.
  if [ -f "$cache" ] && ! grep -q "^CMAKE_CXX_COMPILER:[A-Z]*=$(command -v "$CLANG")\$" "$cache"; then
    quilt_log "$QUILT_BUILD was configured with another compiler: configuring it again for $CLANG"
    rm -rf "$cache" "$QUILT_BUILD/CMakeFiles"
  fi
fi
if [ ! -f "$cache" ] || ! grep -q "QUILT_PYTHON:FILEPATH=$QUILT_PYTHON\$" "$cache" ||
   ! grep -q "QUILT_SANITIZE:STRING=$QUILT_SANITIZE\$" "$cache"; then
  quilt_log "configuring $QUILT_BUILD"
  cmake -S "$QUILT_ROOT" -B "$QUILT_BUILD" -DCMAKE_BUILD_TYPE=$build_type -DQUILT_PYTHON="$QUILT_PYTHON" \
    -DQUILT_SANITIZE="$QUILT_SANITIZE" >&2
fi
# QUILT_SETUP_TARGETS (tools/tsan.sh) builds only those targets, and stops there.
if [ -n "${QUILT_SETUP_TARGETS:-}" ]; then
  quilt_log "building $QUILT_SETUP_TARGETS in $QUILT_BUILD"
  # Configured again first: make knows no target that CMakeLists.txt added since the last run.
  cmake "$QUILT_BUILD" >/dev/null
  # shellcheck disable=SC2086  # a list of target names
  cmake --build "$QUILT_BUILD" -j"$(nproc)" --target $QUILT_SETUP_TARGETS >&2
  return 0
fi
quilt_log "building"
cmake --build "$QUILT_BUILD" -j"$(nproc)" >&2

# The Python package, reinstalled when its sources or the libraries it carries changed. Not for
# sanitizer builds: the venv holds one build of the package (the plain one), and its interpreter,
# not instrumented, cannot load ASan-built libraries without the runtime preloaded.
if [ -z "$QUILT_SANITIZE" ]; then
  PY_STAMP="$QUILT_ROOT/.venv/.quilt-python-package"
  py_state="$( (cd "$QUILT_ROOT" && find python -type f ! -path '*/__pycache__/*' ! -path 'python/build/*' -print0 |
    sort -z | xargs -0 sha1sum; cd "$QUILT_BUILD" && sha1sum libquilt.so quilt-backends/*.so 2>/dev/null; echo "$QUILT_BUILD") | sha1sum)"
  if [ "$py_state" != "$(cat "$PY_STAMP" 2>/dev/null)" ] || ! compgen -G "$QUILT_ROOT/.venv/lib/python3*/site-packages/quilt/_quilt*.so" >/dev/null; then
    quilt_log "installing the Python package (python/) against $QUILT_BUILD/libquilt.so"
    "$QUILT_PYTHON" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
      "$QUILT_ROOT/python" -C cmake.define.QUILT_PREBUILT_DIR="$QUILT_BUILD" -C build-dir="$QUILT_BUILD/python" >&2
    echo "$py_state" > "$PY_STAMP"
  fi
fi
