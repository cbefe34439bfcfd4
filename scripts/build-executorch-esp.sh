#!/usr/bin/env bash
# Cross-builds ExecuTorch for an ESP-IDF target, for the runner's .pte mode
# (CONFIG_ESPNN_RUNNER_MODE_PTE) and the component's ExecuTorch delegate
# (CONFIG_ESPNN_EXECUTORCH_BACKEND). It only drives ExecuTorch's own build:
#   - ExecuTorch's `esp-baremetal` CMake preset (tools/cmake/preset/esp_baremetal.cmake),
#   - ESP-IDF's toolchain file for the target ($IDF_PATH/tools/cmake/toolchain-<target>.cmake),
#   - ExecuTorch's selective build: the portable kernels of exactly the
#     operators the .pte runs on the CPU (EXECUTORCH_SELECT_OPS_MODEL, which
#     reads the program's operator list; what is delegated to EspNNBackend
#     needs no kernel), plus the quantized ops library,
# and installs into OUT, which idf.py then gets as -DESPNN_EXECUTORCH_DIR=OUT.
#
#   git clone --branch v1.5.1 --recurse-submodules https://github.com/pytorch/executorch
#   . $IDF_PATH/export.sh
#   scripts/build-executorch-esp.sh --target esp32s3 --executorch-src executorch \
#       --suite suite.xtsp [--out build-executorch/esp32s3]
#   idf.py -DESPNN_EXECUTORCH_DIR=$PWD/build-executorch/esp32s3 ... build
#
# The checkout must be the tag of the executorch wheel that lowered the
# models (1.5.1): the .pte format, the operator schemas and the delegate ABI
# must match. Rebuild when a suite needs operators the last build did not
# select (the runner then reports the missing kernel as a load_method error).
#
# Run with ESP-IDF v5.5.5 for --target linux and esp32s3 against ExecuTorch
# main@cff6f4d (1.5.0; the 1.5.1 tag was not available there, hence --force);
# CI has no ESP-IDF and does not run it (docs/firmware.md).
set -euo pipefail

EXECUTORCH_VERSION=1.5.1   # = the executorch wheel pinned by pyproject.toml
root=$(cd "$(dirname "$0")/.." && pwd)
target="" src="" pte="" suite="" ops="" out="" jobs=$(nproc 2>/dev/null || echo 2) force=0
# EXECUTORCH_OPTIMIZE_SIZE: ExecuTorch's own size build, which compiles
# without exceptions, RTTI and unwind tables. Without it the library
# references __cxa_throw / __gxx_personality_v0, which ESP-IDF wraps (and
# leaves undefined) when C++ exceptions are off, its default: the esp32s3
# link failed with "undefined reference to __wrap___cxa_throw".
#
# Size of ExecuTorch's kernel registry (a static array). With a selective
# build ExecuTorch sizes it for the selected portable kernels and its
# primitive ops only, but the quantized ops library registers its own 19
# kernels too: with the automatic size the app aborts at start-up ("The total
# number of kernels to be registered is larger than the limit", measured on
# ESP-IDF's linux target). 128 entries cost about 1.5 KiB of RAM on a 32-bit
# chip.
max_kernels=128

# ExecuTorch's code generators (torchgen) run in this Python: the one with
# torch and executorch installed, not the first on PATH (ESP-IDF's export
# puts its own Python environment first).
python=${PYTHON:-python}

die() { echo "build-executorch-esp: $*" >&2; exit 1; }
usage() {
  sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'
  echo "options: --target T --executorch-src DIR (--suite F | --pte F | --ops 'aten::x.out,...')"
  echo "         [--out DIR] [--jobs N] [--max-kernels N (kernel registry size, default 128)]"
  echo "         [--force (accept a checkout of another version)]"
  exit "${1:-0}"
}
while [ $# -gt 0 ]; do
  case "$1" in
    --target) target=$2; shift 2 ;;
    --executorch-src) src=$2; shift 2 ;;
    --pte) pte=$2; shift 2 ;;
    --suite) suite=$2; shift 2 ;;
    --ops) ops=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --max-kernels) max_kernels=$2; shift 2 ;;
    --force) force=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "unknown argument: $1" >&2; usage 2 ;;
  esac
done

[ -n "$target" ] || die "--target is required (esp32s3, esp32, ...)"
[ -n "$src" ] && [ -f "$src/CMakePresets.json" ] || die "--executorch-src must be an ExecuTorch checkout (git clone --branch v$EXECUTORCH_VERSION --recurse-submodules https://github.com/pytorch/executorch)"
[ -n "${IDF_PATH:-}" ] || die "IDF_PATH is not set: run . \$IDF_PATH/export.sh first"
if [ "$target" = linux ]; then
  # ESP-IDF's linux target builds with the host compiler: no toolchain file.
  toolchain=""
else
  toolchain="$IDF_PATH/tools/cmake/toolchain-$target.cmake"
  [ -f "$toolchain" ] || die "no ESP-IDF toolchain file for target '$target' ($toolchain)"
fi
grep -q '"esp-baremetal"' "$src/CMakePresets.json" || die "$src has no esp-baremetal preset (ExecuTorch >= 1.4 has it)"
have=$(tr -d '[:space:]' < "$src/version.txt" 2>/dev/null || echo unknown)
if [ "$have" != "$EXECUTORCH_VERSION" ] && [ "$force" != 1 ]; then
  die "$src is ExecuTorch '$have', the models are lowered with $EXECUTORCH_VERSION: check out tag v$EXECUTORCH_VERSION (or pass --force)"
fi

src=$(cd "$src" && pwd)
# ExecuTorch's own rule (its CMakeLists.txt refuses other names).
[ "$(basename "$src")" = executorch ] || die "the ExecuTorch checkout must be a directory named exactly 'executorch' (ExecuTorch's CMake requires it); got $src"
out=${out:-$root/build-executorch/$target}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# Operator selection (ExecuTorch's selective build).
select=()
if [ -n "$suite" ]; then
  # The .pte inside an XTSP suite, written out for ExecuTorch's op-list reader.
  pte="$out/selected_model.pte"
  "$python" -m executorch_espnn.pte_suite extract "$suite" -o "$pte"
fi
if [ -n "$pte" ]; then
  select=(-DEXECUTORCH_SELECT_OPS_MODEL="$(cd "$(dirname "$pte")" && pwd)/$(basename "$pte")")
elif [ -n "$ops" ]; then
  select=(-DEXECUTORCH_SELECT_OPS_LIST="$ops")
else
  die "give the operators to build: --suite, --pte or --ops"
fi

echo "== ExecuTorch $have for $target: preset esp-baremetal, ${toolchain:-host compiler} -> $out"
# The preset installs into its build directory (CMAKE_INSTALL_PREFIX =
# CMAKE_BINARY_DIR), so OUT/lib/cmake/ExecuTorch is what the component finds.
toolchain_arg=()
[ -z "$toolchain" ] || toolchain_arg=(-DCMAKE_TOOLCHAIN_FILE="$toolchain")
(cd "$src" && cmake --preset esp-baremetal -B "$out" \
    "${toolchain_arg[@]}" \
    -DCMAKE_BUILD_TYPE=Release \
    -DEXECUTORCH_BUILD_KERNELS_QUANTIZED=ON \
    -DEXECUTORCH_BUILD_PTHREADPOOL=OFF -DEXECUTORCH_BUILD_CPUINFO=OFF \
    -DMAX_KERNEL_NUM="$max_kernels" \
    -DPYTHON_EXECUTABLE="$python" \
    -DEXECUTORCH_OPTIMIZE_SIZE=ON \
    "${select[@]}")
cmake --build "$out" -j"$jobs"
cmake --build "$out" --target install
[ -d "$out/lib/cmake/ExecuTorch" ] || die "install did not produce $out/lib/cmake/ExecuTorch"
echo "== done. Build the runner with:"
echo "   idf.py set-target $target"
echo "   idf.py -D SDKCONFIG_DEFAULTS='sdkconfig.defaults;sdkconfig.defaults.pte' \\"
echo "          -DESPNN_EXECUTORCH_DIR=$out -DESPNN_BUNDLE=/abs/path/suite.xtsp build flash monitor"
