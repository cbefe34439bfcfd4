#!/usr/bin/env bash
# Incremental developer build of the host extension without pip:
#   scripts/dev-build.sh [BUILD_DIR]      (default: build-host/dev)
# then run tests against it with
#   PYTHONPATH=BUILD_DIR/pkg python -m pytest tests/...
# BUILD_DIR/pkg/executorch_espnn links to python/executorch_espnn and holds
# the freshly built _native extension (and _et_backend when the executorch
# wheel was found). `pip install .` remains the way to
# install; this only shortens the edit-compile-test loop.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-host/dev}
mkdir -p "$build"
build=$(cd "$build" && pwd)
if [ ! -f "$build/build.ninja" ]; then
  # pip builds the wheel with pybind11 in an isolated environment; this
  # script builds with the Python on PATH, which needs it installed.
  if ! pybind11_dir=$(python3 -m pybind11 --cmakedir 2>/dev/null); then
    echo "dev-build: $(command -v python3) has no pybind11; install it first: pip install 'pybind11>=2.12'" >&2
    exit 2
  fi
  cmake -S "$root/host" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DESPNN_BUILD_PYTHON=ON -DESPNN_BUILD_TOOLS=ON -DPython_EXECUTABLE="$(command -v python3)" \
    -Dpybind11_DIR="$pybind11_dir" >/dev/null
fi
targets=(_native xts3_tool)
# The ExecuTorch delegate extension, when CMake found the executorch wheel.
if ninja -C "$build" -t targets all | grep '^_et_backend:' >/dev/null; then
  targets+=(_et_backend)
fi
ninja -C "$build" -j2 "${targets[@]}"
pkg="$build/pkg/executorch_espnn"
mkdir -p "$pkg"
for f in "$root"/python/executorch_espnn/*; do
  ln -sfn "$f" "$pkg/$(basename "$f")"
done
cp "$build"/_native*.so "$pkg/"
if [ -e "$(echo "$build"/_et_backend*.so)" ]; then
  cp "$build"/_et_backend*.so "$pkg/"
fi
echo "built: PYTHONPATH=$build/pkg"
